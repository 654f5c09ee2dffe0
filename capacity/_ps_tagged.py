"""The response time of one kind of request in an M/PH/1 processor-sharing queue of many kinds.

Endpoints that share an event loop (:func:`capacity.plan.endpoint_mix`) are one PS queue whose
service law is their mix, but each endpoint's requests have their own CPU law ``S_i``.  The
response of a tagged request of fixed size ``x`` depends on the others only through the queue's
law (:func:`capacity._ps_transform._ps1_lst_atom`), so

    P(T_i > t) = P(S_i >= t) + int_0^{F_i(t)} P(T(F_i^-1(u)) > t) du,

split at ``x = t`` because a request of size ``x >= t`` takes at least ``t`` (``P(T(x) > t) = 1``
there) and ``P(T(x) > t)`` jumps at ``x = t`` (the atom ``(1 - rho) exp(-lam x)`` of a request that
never shares the CPU).  The integral below ``F_i(t)`` is smooth: 16-node Gauss-Legendre in ``u``
on the body and in ``log(1 - u)`` beyond (:func:`_size_nodes`).
Each ``P(T(x) > t)`` is an Euler inversion of the exact conditional transform with the atom taken
out (:func:`capacity._ps_transform._ps1_sf_flat`).  A law with an atom at its mean (deterministic)
needs one node.

References
----------
T. J. Ott, "The sojourn-time distribution in the M/G/1 queue with processor sharing", J. Appl.
Prob. 21 (1984) 360-378 (the conditional sojourn of a request of size x).
"""
from __future__ import annotations

import numpy as np

from ._ps_transform import _ps1_sf_flat

__all__: list[str] = []

# Gauss-Legendre nodes on each of the two panels of sizes below t (:func:`_size_nodes`).
_GL_U, _GL_W = np.polynomial.legendre.leggauss(16)
_GL_U, _GL_W = 0.5 * (_GL_U + 1.0), 0.5 * _GL_W
#: The body panel ends at the size t / 2 at most: the nodes near x = t, where the integrand rises
#: fastest, get a panel of their own (sf within 0.2 % of M/M/1-PS and M/H2/1-PS at p10-p99.9 with
#: 16 nodes; ending the body at F(t) instead left -0.5 % at the median).
_SPLIT = 0.5


def _size_nodes(law, below: float, above: float, t: float = np.inf) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``x`` and weights over the sizes below ``t`` (``below = F(t)``, ``above = 1 - F(t)``):
    Gauss-Legendre in u on the body, u <= min(F(t), 0.99, F(t / 2)), and in log(1 - u) beyond it
    up to t, where the requests of size near t -- most of P(T > t) far in the tail -- lie (for an
    exponential law, linear in x; in u they are a sliver of width 1 - F(t) that 16 nodes miss:
    -2.7 % at p99 of M/M/1-PS).  Sizes with 1 - F below 1e-14 are left out (their weight is at
    most that)."""
    body = min(below, 0.99, float(law.cdf(_SPLIT * t)))
    x = [np.asarray(law.ppf(body * _GL_U), dtype=float)]
    w = [body * _GL_W]
    va, vb = np.log1p(-body), max(np.log(max(above, 1e-300)), np.log(1e-14))
    if vb < va:
        v = va + (vb - va) * _GL_U
        x.append(np.asarray(law.ppf(-np.expm1(v)), dtype=float))
        w.append((va - vb) * _GL_W * np.exp(v))
    return np.concatenate(x), np.concatenate(w)


def tagged_sf(t: np.ndarray, lam: float, beta: np.ndarray, tm: np.ndarray, laws: list) -> np.ndarray:
    """``P(T_i > t_i)`` for a tagged request of CPU law ``laws[i]`` in the stable M/PH/1-PS queue
    ``(beta, tm)`` at ``lam`` requests/s (one core); ``t``: one positive time per law."""
    t = np.asarray(t, dtype=float)
    out = np.empty(t.size)
    rows_t, rows_x, rows_w, owner = [], [], [], []
    for i, (ti, law) in enumerate(zip(t, laws)):
        below = float(law.cdf(ti)) if law.family != "deterministic" else float(ti > float(law.mean))
        out[i] = 1.0 - below                         # sizes at or above t: P(T > t) = 1
        if below <= 0.0:
            continue
        if law.family == "deterministic":
            x, w = np.array([float(law.mean)]), np.array([1.0])
        else:
            x, w = _size_nodes(law, below, float(law.sf(ti)), ti)
        keep = x > 0                                 # a zero-size request leaves at once
        rows_t.append(np.full(int(keep.sum()), ti))
        rows_x.append(x[keep])
        rows_w.append(w[keep])
        owner.append(np.full(int(keep.sum()), i))
    if rows_t:
        tt, xx = np.concatenate(rows_t), np.concatenate(rows_x)
        n = tt.size
        sf, _ = _ps1_sf_flat(tt, np.full(n, float(lam)), np.broadcast_to(beta, (n,) + beta.shape).copy(),
                             np.broadcast_to(tm, (n,) + tm.shape).copy(), np.full(n, np.inf), atom=xx)
        np.add.at(out, np.concatenate(owner), np.concatenate(rows_w) * sf)
    return np.clip(out, 0.0, 1.0)
