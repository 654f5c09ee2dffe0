"""Processor sharing on c > 1 cores for any service law (approximation; used by :mod:`capacity.ps`).

The tagged-request chain of :mod:`capacity._ps_chain` with the tagged request's own CPU time
as a phase-type law in the state, among others that leave as if their CPU time were
exponential (:func:`_mgc_sf_pdf`); and, where the request never shares a core, its exact
CPU-time law instead of the PH fit (:class:`_NoShareSwap`).  The method and its measured
error are in :func:`capacity.ps.response_sf` and :func:`capacity.ps.response_quantile`.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import eigh_tridiagonal
from scipy.linalg.lapack import zgttrf as _zgttrf
from scipy.linalg.lapack import zgttrs as _zgttrs
from scipy.special import gammaincc, gammaln

from ._laplace import euler_nodes, invert
from ._ps_chain import _state_band, _unique_points
from ._ps_transform import _pad_ph
from .distributions import Service
from .phasetype import phase_type

__all__: list[str] = []   # private: capacity.ps is the public face


# ---------------------------------------------------------------------------
# c cores, phase-type service of the tagged request, exponential others
# ---------------------------------------------------------------------------
# Unknowns (points x Euler nodes x states) per LAPACK call: bounds the memory of one chunk
# (six complex arrays of this length, ~100 MB).
_MGC_CHUNK_UNKNOWNS = 1_000_000


def _mgc_states(rho: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Truncation level of the others' count: the M/M/c stationary tail below 1e-15."""
    with np.errstate(divide="ignore"):
        nmax = (c + 10 + np.ceil(np.log(1e-15) / np.log(np.maximum(rho, 1e-300)))).astype(int)
    return np.where(rho > 0, nmax, c.astype(int) + 1)


def _mgc_sf_pdf(t: np.ndarray, lam: np.ndarray, mu: np.ndarray, c: np.ndarray,
                beta: np.ndarray, rate: np.ndarray, onward: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(T > t) and the density of the tagged request's response time, M/G/c-PS approximated.

    The tagged request's CPU time is phase-type with initial vector ``beta``, an upper
    bidiagonal sub-generator (as every representation of :func:`capacity.phasetype.phase_type`
    is: a phase either moves to the next or exits) given by its diagonal ``-rate`` and
    superdiagonal ``onward`` (rates per second, shape (points, m)); the other requests leave as if their
    CPU time were exponential with the true mean ``1 / mu``.  State: (others n, tagged
    phase i).  At the tagged arrival n has the M/M/c law, which is the M/G/c-PS law too
    (insensitivity).  In state (n, i) the tagged request moves on at rate
    ``share_n (-Tm_ii)`` with ``share_n = min(1, c / (n + 1))``, others arrive at ``lam``
    and leave at ``n share_n mu``.  The transform of P(T > t) is

        L(s) = sum_i beta_i alpha y_i,   (sI - Q + r_i Sh) y_i = 1 + Tm_{i,i+1} Sh y_{i+1},

    one tridiagonal system per phase (``Sh = diag(share_n)``), solved from the last phase
    back; every point, Euler node and state of a chunk is one LAPACK ``zgtsv`` call (the
    systems are stacked with zero couplings between them).  Exact for exponential service
    (then it is the chain of :func:`_mmc_sf_pdf`); for other laws the others' exponential
    departures are the approximation (see :func:`capacity.ps.response_quantile`).
    """
    b = t.size
    m = beta.shape[-1]
    sf = np.empty(b)
    pdf = np.empty(b)
    bottom, nmax = _state_band(lam / (c * mu), c, _mgc_states(lam / (c * mu), c))
    k = euler_nodes(np.ones(1)).shape[-1]
    # chunks of whole points, each at most _MGC_CHUNK_UNKNOWNS unknowns (one point may exceed it)
    cum = np.cumsum((nmax - bottom + 1) * k)
    starts = [0]
    while starts[-1] < b:
        base = cum[starts[-1] - 1] if starts[-1] else 0
        starts.append(max(starts[-1] + 1, int(np.searchsorted(cum, base + _MGC_CHUNK_UNKNOWNS, side="right"))))
    for lo, hi in zip(starts[:-1], starts[1:]):
        sl = slice(lo, min(hi, b))
        sf[sl], pdf[sl] = _mgc_chunk(t[sl], lam[sl], mu[sl], c[sl].astype(float), bottom[sl], nmax[sl], beta[sl],
                                     rate[sl], onward[sl], m)
    return sf, pdf


def _mgc_chunk(t, lam, mu, c, bottom, nmax, beta, rate_ph, onward_ph, m):
    sizes = nmax - bottom + 1
    pid = np.repeat(np.arange(t.size), sizes)             # point of each state
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    local = np.arange(pid.size) - first[pid]               # state index within its point's band
    n = bottom[pid] + local                                # the others' count
    top = n == nmax[pid]
    share = np.minimum(1.0, c[pid] / (n + 1.0))
    birth = np.where(top, 0.0, lam[pid])
    death = np.where(local > 0, n * share * mu[pid], 0.0)  # a wall at the band's bottom
    # M/M/c stationary law of the others at the tagged arrival (PASTA), from log ratios
    with np.errstate(divide="ignore"):
        step = np.log(np.maximum(lam[pid] / mu[pid], 1e-300)) - np.log(np.minimum(np.maximum(n, 1), c[pid]))
    step[local == 0] = 0.0
    logp = np.cumsum(step)
    logp -= np.repeat(logp[first], sizes)                  # restart at each point
    logp -= np.repeat(np.maximum.reduceat(logp, first), sizes)
    alpha = np.exp(logp)
    alpha /= np.repeat(np.add.reduceat(alpha, first), sizes)
    s = euler_nodes(t)                                     # (points, K)
    kk = s.shape[-1]
    # Layout (K, states): node-major, each node block holds every point's chain.
    s_flat = s[pid].T                                      # (K, L)
    length = pid.size
    sub = np.tile(np.where(local[1:] == 0, 0.0, -death[1:]), kk).astype(complex)
    sup = np.tile(np.where(top[:-1], 0.0, -birth[:-1]), kk).astype(complex)
    # the coupling between the last state of one node block and the first of the next
    sub = np.concatenate([sub.reshape(kk, length - 1), np.zeros((kk, 1))], axis=1).ravel()[:-1]
    sup = np.concatenate([sup.reshape(kk, length - 1), np.zeros((kk, 1))], axis=1).ravel()[:-1]
    base = s_flat + (birth + death)
    tot = np.zeros((kk, length), dtype=complex)
    y = np.zeros((kk, length), dtype=complex)
    factors, factored_rate = None, None
    for i in range(m - 1, -1, -1):
        rate = rate_ph[:, i][pid]
        onward = onward_ph[:, i][pid]
        rhs = 1.0 + onward * share * y
        if factors is None or not np.array_equal(rate, factored_rate):
            # the phases of an Erlang run share one matrix: factor it once (LU), solve per phase
            factors, factored_rate = _zgttrf(sub, (base + rate * share).ravel(), sup)[:5], rate
        y = _zgttrs(*factors, rhs.reshape(-1, 1))[0].reshape(kk, length)
        if beta[:, i].any():
            tot += beta[:, i][pid] * alpha * y
    lst = np.add.reduceat(tot, first, axis=1).T            # (points, K)
    return invert(lambda _s: lst, t), invert(lambda _s: 1.0 - s * lst, t)


# ---------------------------------------------------------------------------
# c cores: the tagged request's exact size while it never shares a core
# ---------------------------------------------------------------------------
# Gauss-Laguerre rule for E[g(S); S > t] = P(S > t) int_0^inf g(S at tail level P(S > t) e^-z) e^-z dz.
_LAGUERRE_Z, _LAGUERRE_W = np.polynomial.laguerre.laggauss(40)


def _no_share_modes(lam: np.ndarray, mu: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P0(x) = P(a request of CPU time x never shares a core) = sum_j coef_j exp(theta_j x).

    It never shares while it and the others number at most c: the others' chain on
    n = 0..c-1 (arrivals ``lam``, departures ``n mu``: everyone has a core), killed when an
    arrival would make c others, started from the M/M/c law restricted to n < c.  That
    birth-death sub-generator is symmetrisable, so ``eigh_tridiagonal`` gives its modes.
    Returns arrays (points, max c) padded with zero coefficients.
    """
    bottom, top = _state_band(lam / (mu * c), c, c.astype(int))
    never = top < c - 1          # the band ends below c - 1: nobody ever shares a core
    width = int(np.max(np.where(never, 1, c - bottom)))
    coef = np.zeros((lam.size, width))
    theta = np.zeros((lam.size, width))
    uniq, inverse = _unique_points(lam / mu, c, mu)
    for j, (a, cc, rate) in enumerate(uniq):
        cc = int(cc)
        rows = inverse == j
        low = int(bottom[rows][0])
        if a == 0 or never[rows][0]:
            coef[rows, 0] = 1.0
            continue
        n = np.arange(low, cc, dtype=float)
        # M/M/c: P(N = n) proportional to a^n / n! below c, and sum_{n >= c} = a^c / c! / (1 - a/c)
        logw = n * np.log(a) - gammaln(n + 1)
        log_rest = cc * np.log(a) - gammaln(cc + 1.0) - np.log1p(-a / cc)
        shift = max(logw.max(), log_rest)
        norm = np.exp(logw - shift).sum() + np.exp(log_rest - shift)
        birth, death = np.full(n.size, a * rate), np.where(n > low, n * rate, 0.0)  # a wall at the bottom
        # detailed balance w_n lam = w_{n+1} (n+1) mu with w the same a^n / n!: symmetrise by sqrt(w)
        half = 0.5 * (logw - logw.max())
        eig, vec = eigh_tridiagonal(-(birth + death), np.sqrt(birth[:-1] * death[1:])) if n.size > 1 else \
            (-(birth + death), np.ones((1, 1)))
        # pi_n / sqrt(w_n), formed in logs: both factors overflow alone far below the mode
        coef[rows, :n.size] = ((np.exp(logw - shift - half) / norm) @ vec) * (vec.T @ np.exp(half))
        theta[rows, :n.size] = eig
    return coef, theta


def _hyper_erlang_branches(beta: np.ndarray, rate: np.ndarray, onward: np.ndarray):
    """(weights, orders, rates) of an upper-bidiagonal PH (diagonal ``-rate``, superdiagonal
    ``onward``) made of Erlang runs entered where ``beta > 0``, as
    :func:`capacity.phasetype.phase_type` builds them; shape (points, m)."""
    m = beta.shape[-1]
    # phases left in the run from each phase: count until a phase that does not move on
    orders = np.ones(beta.shape)
    for i in range(m - 2, -1, -1):
        orders[..., i] = np.where(onward[..., i] > 0, orders[..., i + 1] + 1, 1.0)
    return beta, orders, rate


def _gamma_tail(k, rate, theta, t):
    """E[exp(theta S); S > t] for S ~ gamma(shape k, rate), theta <= 0 (broadcast)."""
    shifted = rate - theta
    with np.errstate(divide="ignore", under="ignore", over="ignore"):
        return np.exp(k * (np.log(rate) - np.log(shifted))) * gammaincc(k, shifted * t)


def _gamma_density(k, rate, t):
    with np.errstate(divide="ignore", under="ignore", over="ignore", invalid="ignore"):
        return np.where(t > 0, np.exp(k * np.log(rate) + (k - 1) * np.log(np.maximum(t, 1e-300)) - rate * t
                                      - gammaln(k)), 0.0)


def _no_share_ph_part(t: np.ndarray, coef: np.ndarray, theta: np.ndarray, weights: np.ndarray,
                      orders: np.ndarray, rates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """E[P0(S); S > t] and P0(t) f(t) for the phase-type size (branches as from
    :func:`_hyper_erlang_branches`): closed forms per branch and mode."""
    tt = t[:, None, None]
    tail = _gamma_tail(orders[:, :, None], rates[:, :, None], theta[:, None, :], tt)
    tail = np.einsum("pb,pj,pbj->p", weights, coef, tail)
    density = (weights * _gamma_density(orders, rates, t[:, None])).sum(axis=1)
    return tail, _no_share_probability(t, coef, theta) * density


def _no_share_probability(x: np.ndarray, coef: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """P0(x) on flat points (``x`` shape (points,) or (points, k))."""
    xx = x[..., None]
    with np.errstate(under="ignore"):
        val = (coef.reshape(coef.shape[:1] + (1,) * (xx.ndim - 2) + coef.shape[1:])
               * np.exp(theta.reshape(coef.shape[:1] + (1,) * (xx.ndim - 2) + coef.shape[1:]) * xx)).sum(-1)
    return np.clip(val, 0.0, 1.0)


#: Erlang orders whose Richardson combination 2 E(2k) - E(k) stands for the tagged request's
#: fixed CPU time (deterministic service) on several cores; the error of an Erlang-k size is
#: O(1/k), of the combination O(1/k^2).
DETERMINISTIC_TAGGED_ORDER = 32


def _tagged_sizes(svc: Service, shape: tuple, rows: np.ndarray) -> list:
    """The tagged request's CPU time on the selected flat points, as a linear combination
    ``[(weight, beta, rate, onward), ...]`` of upper-bidiagonal PH laws (shape (points, m))."""
    if svc.family == "deterministic":
        x = np.broadcast_to(np.asarray(svc.mean, dtype=float), shape).ravel()[rows]
        out = []
        for weight, k in ((2.0, 2 * DETERMINISTIC_TAGGED_ORDER), (-1.0, DETERMINISTIC_TAGGED_ORDER)):
            beta = np.zeros((x.size, k))
            beta[:, 0] = 1.0
            rate = np.broadcast_to((k / x)[:, None], (x.size, k))
            onward = np.concatenate([rate[:, 1:], np.zeros((x.size, 1))], axis=1)
            out.append((weight, beta, rate, onward))
        return out
    beta, tm = phase_type(svc, fit="distribution")
    beta, tm = _pad_ph(beta, tm, shape)
    beta, tm = beta[rows], tm[rows]
    rate = -np.diagonal(tm, axis1=-2, axis2=-1)
    onward = np.concatenate([np.diagonal(tm, 1, axis1=-2, axis2=-1), np.zeros(beta.shape[:-1] + (1,))], axis=-1)
    return [(1.0, beta, rate, onward)]


# Families whose phase-type form is exact (nothing to swap back).
_EXACT_PH = ("exponential", "erlang", "hyperexponential")


class _NoShareSwap:
    """The PH fit's error where it matters most with many cores: while the tagged request
    never shares a core its response time is its CPU time, so that part of P(T > t),
    ``E[P0(S); S > t]``, is taken with the service's exact law instead of the PH fit's
    (P0 from :func:`capacity._ps_chain._no_share_modes`).  Returns the changes of P(T > t)
    and of the density on the selected points."""

    def __init__(self, svc: Service, shape: tuple, many: np.ndarray, lam, mu, c, tagged: list):
        self.svc, self.shape, self.many = svc, shape, many
        self.coef, self.theta = _no_share_modes(lam, mu, c)
        self.branches = [(weight, _hyper_erlang_branches(beta, rate, onward)) for weight, beta, rate, onward in tagged]
        fam = svc.family
        flat = {k: np.broadcast_to(np.asarray(v, dtype=float), shape).ravel()[many]
                for k, v in svc._params.items() if k in ("mean", "scv")}
        self.kind = fam if fam in ("deterministic", "gamma", "empirical") else "quadrature"
        self.params = flat

    def _full(self, values: np.ndarray, sel: np.ndarray, fill: float) -> np.ndarray:
        full = np.full((values.shape[0],) + (int(np.prod(self.shape)),), fill)
        full[:, sel] = values
        return full.reshape((values.shape[0],) + self.shape)

    def __call__(self, t: np.ndarray, sel: np.ndarray, sub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ts = t[sel]
        coef, theta = self.coef[sub], self.theta[sub]
        ph_tail, ph_density = 0.0, 0.0
        for weight, branches in self.branches:
            a, b = _no_share_ph_part(ts, coef, theta, *(x[sub] for x in branches))
            ph_tail, ph_density = ph_tail + weight * a, ph_density + weight * b
        if self.kind == "deterministic":
            x0 = self.params["mean"][sub]
            tail = np.where(x0 > ts, _no_share_probability(x0, coef, theta), 0.0)
            density = np.zeros(ts.shape)
        elif self.kind == "gamma":
            k = 1.0 / self.params["scv"][sub]
            rate = k / self.params["mean"][sub]
            tail = np.einsum("pj,pj->p", coef, _gamma_tail(k[:, None], rate[:, None], theta, ts[:, None]))
            density = _no_share_probability(ts, coef, theta) * _gamma_density(k, rate, ts)
        elif self.kind == "empirical":
            # the sum over the samples above t, in chunks of samples (memory: points x chunk x modes)
            x = self.svc._samples
            tail = np.zeros(ts.shape)
            step = max(1, int(2e6 // max(1, ts.size * coef.shape[1])))
            for lo in range(0, x.size, step):
                xs = x[lo:lo + step]
                p0 = _no_share_probability(np.broadcast_to(xs, (ts.size, xs.size)), coef, theta)
                tail += np.where(xs[None, :] > ts[:, None], p0, 0.0).sum(axis=1)
            tail /= x.size
            density = np.zeros(ts.shape)
        else:
            # E[P0(S); S > t] = P(S > t) int_0^inf P0(x(P(S > t) e^-z)) e^-z dz, x(u) the size with
            # tail u (Gauss-Laguerre).
            above = np.asarray(self.svc.sf(self._full(ts[None], sel, 0.0)), dtype=float).reshape(-1)[sel]
            levels = above[None, :] * np.exp(-_LAGUERRE_Z)[:, None]            # (Z, points)
            u = np.clip(1.0 - levels, 1e-300, 1.0 - 1e-16)
            sizes = np.asarray(self.svc.ppf(self._full(u, sel, 0.5)), dtype=float).reshape(u.shape[0], -1)[:, sel]
            tail = above * (_LAGUERRE_W[:, None] * _no_share_probability(sizes.T, coef, theta).T).sum(axis=0)
            frozen = getattr(self.svc, "_frozen", None)
            pdf = getattr(frozen, "pdf", None)
            density = np.zeros(ts.shape) if pdf is None else _no_share_probability(ts, coef, theta) * \
                np.asarray(pdf(self._full(ts[None], sel, 1.0)[0]), dtype=float).reshape(-1)[sel]
        return tail - ph_tail, density - ph_density
