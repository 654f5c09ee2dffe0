"""Phase-type (PH) representations of service-time distributions.

A PH distribution ``(beta, Tm)`` is the time to absorption of a Markov chain
with initial vector ``beta`` over ``m`` transient phases and sub-generator
``Tm``; its exit-rate vector is ``t = -Tm @ 1``, its density
``f(x) = beta expm(Tm x) t`` and its k-th moment ``k! beta (-Tm)^(-k) 1``.
The processor-sharing formulas of :mod:`capacity.ps` are exact for PH service.

Which representation each :class:`~capacity.Service` family gets:

=================  ==========================================================
family             PH representation
=================  ==========================================================
exponential        1 phase, exact
erlang(k)          k phases, exact (k <= ``MAX_PHASES``, else Erlang-MAX_PHASES)
hyperexponential   2 phases, exact
gamma, integer     Erlang with k = 1/scv phases, exact (k <= ``MAX_PHASES``)
shape 1/scv
everything else    a moment fit (approximation), see :func:`_moment_fit`:
                   scv < 1: mixture of Erlang(k-1) and Erlang(k) with a common
                   rate, matching two moments (Tijms 2003, section 5.9);
                   scv >= 1: two-phase hyperexponential matching three
                   moments where feasible (Whitt 1982), otherwise balanced
                   means matching two; deterministic: Erlang-MAX_PHASES.
=================  ==========================================================

Parameters given as arrays may need different numbers of phases at
different grid points; the representations are padded to the largest count
with unreachable phases (``beta = 0`` there, ``Tm`` diagonal ``-1``, no
transitions in or out), which changes nothing.

The deterministic service time, and any scv below ``1 / MAX_PHASES``, is
represented by an Erlang with ``MAX_PHASES`` phases, i.e. scv
``1 / MAX_PHASES`` instead of the true value; the effect on the M/D/1-PS
response-time quantiles is measured in :func:`capacity.ps.response_quantile`.

References
----------
H. C. Tijms, *A First Course in Stochastic Models*, Wiley 2003, section 5.9
(fitting a mixture of Erlangs to two moments).
W. Whitt, "Approximating a point process by a renewal process, I: two basic
methods", Operations Research 30 (1982) 125-147, section 3 (three-moment H2).
M. F. Neuts, *Matrix-Geometric Solutions in Stochastic Models*, 1981, ch. 2.
"""
from __future__ import annotations

import math

import numpy as np

from .distributions import Service, as_service

__all__ = ["MAX_PHASES", "phase_type"]

#: Largest number of phases used for low-variability (scv < 1) services.
MAX_PHASES = 24


def _erlang_mix(mean: np.ndarray, scv: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Mixture of Erlang(k-1) and Erlang(k), common rate, two moments matched.

    ``k = ceil(1/scv)`` (at least 2, at most ``MAX_PHASES``) and, with
    probability ``p``, the job leaves after phase ``k-1`` (Tijms 2003,
    eq. 5.9.3): ``p = (k scv - sqrt(k (1 + scv) - k^2 scv)) / (1 + scv)``,
    rate ``mu = (k - p) / mean``.  For ``scv < 1/MAX_PHASES`` this is the
    Erlang-MAX_PHASES of the same mean.
    """
    scv = np.maximum(scv, 1.0 / MAX_PHASES)
    k = np.clip(np.ceil(1.0 / scv - 1e-9), 2, MAX_PHASES).astype(int)
    disc = np.maximum(k * (1.0 + scv) - k**2 * scv, 0.0)
    p = np.clip((k * scv - np.sqrt(disc)) / (1.0 + scv), 0.0, 1.0)
    mu = (k - p) / mean
    shape = mean.shape
    beta = np.zeros(shape + (m,))
    beta[..., 0] = 1.0
    tm = np.zeros(shape + (m, m))
    idx = np.arange(m)
    live = idx < k[..., None]
    diag = np.where(live, -mu[..., None], -1.0)
    tm[..., idx, idx] = diag
    up = np.where(idx[:-1] < (k[..., None] - 1), mu[..., None], 0.0)
    # From phase k-1 (index k-2) the job continues to phase k only with probability 1-p.
    last_hop = idx[:-1] == (k[..., None] - 2)
    up = np.where(last_hop, up * (1.0 - p[..., None]), up)
    tm[..., idx[:-1], idx[1:]] = up
    return beta, tm


def _h2(p: np.ndarray, r1: np.ndarray, r2: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    shape = np.broadcast_shapes(np.shape(p), np.shape(r1), np.shape(r2))
    beta = np.zeros(shape + (m,))
    tm = np.zeros(shape + (m, m))
    idx = np.arange(m)
    tm[..., idx, idx] = -1.0
    beta[..., 0] = p
    beta[..., 1] = 1.0 - p
    tm[..., 0, 0] = -r1
    tm[..., 1, 1] = -r2
    return beta, tm


def _moment_fit(m1, m2, m3) -> tuple[np.ndarray, np.ndarray]:
    """PH fit to the first two (scv < 1) or three (scv >= 1) raw moments.

    scv >= 1: the H2 with ``a_i = 1/rate_i`` the roots of
    ``x^2 - c1 x + c0`` where ``u_k = m_k / k!`` satisfy
    ``u_3 = c1 u_2 - c0 u_1``, ``u_2 = c1 u_1 - c0`` (the moment / Prony
    equations, Whitt 1982 section 3); feasible iff ``m1 m3 > 1.5 m2^2``.
    Otherwise (third moment too small, or not finite) balanced means.
    """
    m1, m2, m3 = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (m1, m2, m3)))
    scv = np.maximum(m2 / m1**2 - 1.0, 0.0)
    low = scv < 1.0 - 1e-12
    m = max(2, int(np.max(np.clip(np.ceil(1.0 / np.maximum(scv[low], 1.0 / MAX_PHASES) - 1e-9),
                                  2, MAX_PHASES)))) if low.any() else 2
    beta_lo, tm_lo = _erlang_mix(m1, np.where(low, scv, 0.5), m)
    # Three-moment H2 where feasible.
    u1, u2, u3 = m1, m2 / 2.0, m3 / 6.0
    with np.errstate(all="ignore"):
        c1 = (u3 - u2 * u1) / (u2 - u1**2)
        c0 = c1 * u1 - u2
        disc = c1**2 - 4.0 * c0
        root = np.sqrt(np.maximum(disc, 0.0))
        a1 = 0.5 * (c1 + root)
        a2 = 0.5 * (c1 - root)
        p3 = (u1 - a2) / (a1 - a2)
    feasible = (np.isfinite(m3) & (m1 * m3 > 1.5 * m2**2 * (1 + 1e-9)) & (scv > 1 + 1e-9)
                & np.isfinite(c1) & (disc > 0) & (a2 > 0) & (p3 > 0) & (p3 < 1))
    # Balanced means (Whitt 1982 eq. 3.7), the same as Service.hyperexponential.
    c2 = np.maximum(scv, 1.0)
    pb = 0.5 * (1.0 + np.sqrt((c2 - 1.0) / (c2 + 1.0)))
    rb1, rb2 = 2.0 * pb / m1, 2.0 * (1.0 - pb) / m1
    p = np.where(feasible, p3, pb)
    r1 = np.where(feasible, 1.0 / np.where(feasible, a1, 1.0), rb1)
    r2 = np.where(feasible, 1.0 / np.where(feasible, a2, 1.0), rb2)
    beta_hi, tm_hi = _h2(p, r1, r2, m)
    beta = np.where(low[..., None], beta_lo, beta_hi)
    tm = np.where(low[..., None, None], tm_lo, tm_hi)
    return beta, tm


def _erlang_exact(mean: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    k = np.minimum(np.round(k).astype(int), MAX_PHASES)
    m = int(np.max(k)) if k.size else 1
    mu = k / mean
    shape = mean.shape
    beta = np.zeros(shape + (m,))
    beta[..., 0] = 1.0
    tm = np.zeros(shape + (m, m))
    idx = np.arange(m)
    live = idx < k[..., None]
    tm[..., idx, idx] = np.where(live, -mu[..., None], -1.0)
    tm[..., idx[:-1], idx[1:]] = np.where(idx[:-1] < k[..., None] - 1, mu[..., None], 0.0)
    return beta, tm


def phase_type(service) -> tuple[np.ndarray, np.ndarray]:
    """PH representation ``(beta, Tm)`` of a service-time distribution.

    Parameters
    ----------
    service : Service or float
        A :class:`~capacity.Service` (or a bare mean in seconds, exponential).

    Returns
    -------
    beta : ndarray, shape ``service.shape + (m,)``
        Initial probabilities of the phases.
    Tm : ndarray, shape ``service.shape + (m, m)``
        Sub-generator (rates per second); ``-Tm @ 1`` is the exit-rate vector.

    Notes
    -----
    Exact for exponential, Erlang (up to ``MAX_PHASES`` phases),
    hyperexponential and integer-shape gamma; a moment fit (an approximation)
    for every other family -- see the module docstring.

    Examples
    --------
    >>> from capacity import Service
    >>> beta, tm = phase_type(Service.erlang(2.0, 2))
    >>> beta.tolist(), tm.tolist()
    ([1.0, 0.0], [[-1.0, 1.0], [0.0, -1.0]])
    """
    svc: Service = as_service(service)
    fam, p = svc.family, svc._params
    if fam == "exponential":
        mean = np.asarray(p["mean"], dtype=float)
        return np.ones(mean.shape + (1,)), (-1.0 / mean)[..., None, None]
    if fam == "erlang":
        mean, k = np.broadcast_arrays(np.asarray(p["mean"], float), np.asarray(p["k"], float))
        return _erlang_exact(mean, k)
    if fam == "hyperexponential":
        return _h2(p["p"], p["rate1"], p["rate2"], 2)
    if fam == "deterministic":
        mean = np.asarray(p["mean"], dtype=float)
        return _erlang_exact(mean, np.full(mean.shape, float(MAX_PHASES)))
    if fam == "gamma":
        mean, scv = np.broadcast_arrays(np.asarray(p["mean"], float), np.asarray(p["scv"], float))
        shape = 1.0 / scv
        integer = np.abs(shape - np.round(shape)) < 1e-9 * np.maximum(shape, 1.0)
        if np.all(integer):
            return _erlang_exact(mean, np.round(shape))
    m1 = np.asarray(svc.moment(1), dtype=float)
    m2 = np.asarray(svc.moment(2), dtype=float)
    with np.errstate(over="ignore"):
        m3 = np.asarray(svc.moment(3), dtype=float)
    return _moment_fit(m1, m2, m3)


def _ph_mean(beta: np.ndarray, tm: np.ndarray) -> np.ndarray:
    """E[S] = beta (-Tm)^(-1) 1 (used by tests and by the PS module)."""
    ones = np.ones(beta.shape)
    return np.einsum("...i,...i->...", beta, np.linalg.solve(-tm, ones[..., None])[..., 0])


def _ph_moment(beta: np.ndarray, tm: np.ndarray, k: int) -> np.ndarray:
    """E[S^k] = k! beta (-Tm)^(-k) 1."""
    v = np.ones(beta.shape)[..., None]
    for _ in range(k):
        v = np.linalg.solve(-tm, v)
    return math.factorial(k) * np.einsum("...i,...i->...", beta, v[..., 0])
