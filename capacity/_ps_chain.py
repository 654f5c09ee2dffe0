"""The M/M/c processor-sharing response time by its tagged-request chain (several cores).

State: the number n of other requests present.  The tagged request is served at rate
``mu min(1, c/(n+1))``, the others leave at ``n mu min(1, c/(n+1))``, arrivals come at ``lam``;
at the tagged arrival n has the stationary M/M/c law (PASTA).  Exact for exponential service on
any number of cores: the distribution by the resolvent of the chain at the Euler nodes
(:func:`_mmc_sf_pdf`), the conditional mean by the attained-service chain
(:func:`_mmc_cond_mean_modes`).  Used by :mod:`capacity.ps`.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import eigh_tridiagonal
from scipy.linalg.lapack import zgtsv as _zgtsv

from ._laplace import euler_nodes, invert

__all__: list[str] = []   # private: capacity.ps is the public face

# ---------------------------------------------------------------------------
# c cores, exponential service: tagged-request birth-death chain
# ---------------------------------------------------------------------------
def _mmc_stationary(lam: float, mu: float, c: int, nmax: int) -> np.ndarray:
    """M/M/c stationary P(N = n), n = 0..nmax, from log ratios (no overflow)."""
    n = np.arange(1, nmax + 1)
    log_ratio = np.log(lam / mu) - np.log(np.minimum(n, c))
    logp = np.concatenate([[0.0], np.cumsum(log_ratio)])
    p = np.exp(logp - logp.max())
    return p / p.sum()


# The M/M/c count at a tagged arrival lies within a +- (12 sqrt(a) + 40) of the offered load a
# except with probability below 1e-30 (a Poisson(a) law below c), and a sojourn of even thousands
# of E[S] leaves that band no more often: the chains keep only those states, with reflecting walls
# where they are cut, so c = 10^7 cores need ~4e4 states instead of 10^7.  Where the band ends
# below c - 1 nobody ever shares a core.
_BAND_SD, _BAND_PAD = 12.0, 40.0


def _state_band(rho: np.ndarray, c: np.ndarray, nmax: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lowest, highest) count of others kept, per point: the band around the offered load
    ``rho c``, the top at ``nmax`` (the stationary tail above c) wherever the band reaches c - 1."""
    a = np.asarray(rho, dtype=float) * c
    half = _BAND_SD * np.sqrt(a) + _BAND_PAD
    low = np.maximum(0, np.floor(a - half)).astype(int)
    top = np.where(a + half < c - 1, np.ceil(a + half), nmax).astype(int)
    return low, np.maximum(top, low)


def _truncation(rho: float, c: int) -> int:
    # Beyond c the stationary law is geometric with ratio rho: stop where it is < 1e-18.
    return int(c + 10 + np.ceil(np.log(1e-18) / np.log(max(rho, 1e-300))) if rho > 0 else c + 10)


def _mmc_cond_mean_modes(lam: float, mu: float, c: int) -> tuple[np.ndarray, np.ndarray]:
    """E[T(x)] = sum_j coef_j int_0^x exp(eig_j a) da (attained-service chain).

    In the tagged request's attained service a, real time runs at
    r_n = max(1, (n+1)/c) per unit of a, arrivals come at lam r_n and each
    other request leaves at rate mu (it is served as fast as the tagged one).
    """
    nmax = _truncation(lam / (c * mu), c) if lam > 0 else c + 10
    n = np.arange(nmax + 1)
    r = np.maximum(1.0, (n + 1.0) / c)
    if lam == 0.0:
        return np.array([1.0]), np.array([0.0])
    birth = np.where(n < nmax, lam * r, 0.0)
    death = n * mu
    diag = -(birth + death)
    off = np.sqrt(birth[:-1] * death[1:])
    logw = np.concatenate([[0.0], np.cumsum(np.log(birth[:-1]) - np.log(death[1:]))])
    logw -= logw.max()
    alpha = _mmc_stationary(lam, mu, c, nmax)
    with np.errstate(divide="ignore"):
        left = np.where(alpha > 0, np.exp(np.log(np.maximum(alpha, 1e-320)) - 0.5 * logw), 0.0)
    right = r * np.exp(0.5 * logw)
    eig, vec = eigh_tridiagonal(diag, off)
    coef = (left @ vec) * (vec.T @ right)
    return coef, eig


# ---------------------------------------------------------------------------
# c cores, exponential service: resolvent of the tagged-request chain
# ---------------------------------------------------------------------------
# Up to this many points a LAPACK tridiagonal solve per (point, Euler node) beats the sweep over
# states vectorised across points (measured: 3-5x for a few points, 2x for 120, 1.7x for a
# 40-utilisation latency table); beyond it the sweep bounds the Python-level call count.
_GTSV_MAX_POINTS = 4096


def _mmc_sf_pdf(t: np.ndarray, rho: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(T > t) and the density of the M/M/c-PS response time, in units of E[S].

    The transform of P(T > t) is ``alpha (sI - Q)^-1 1`` for the tagged-request chain (see
    :func:`_mmc_sf_pdf_sweep`).  For a few points each tridiagonal system is solved by
    LAPACK's ``zgtsv`` (one call per point and Euler node, O(states) each); for larger
    batches the sweep over states, vectorised across points, costs less Python overhead.
    Both agree to ~1e-11 in P(T > t).
    """
    if t.size > _GTSV_MAX_POINTS:
        return _mmc_sf_pdf_sweep(t, rho, c)
    with np.errstate(divide="ignore"):
        nmax = (c + 10 + np.ceil(np.log(1e-15) / np.log(np.maximum(rho, 1e-300)))).astype(int)
    nmax = np.where(rho > 0, nmax, c + 1)
    bottom, nmax = _state_band(rho, c, nmax)
    s = euler_nodes(t)  # (b, K)
    tot = np.empty(s.shape, dtype=complex)
    chains: dict = {}
    for j in range(t.size):
        key = (float(rho[j]), int(c[j]))
        if key not in chains:
            top, cc = int(nmax[j]), float(c[j])
            lam = key[0] * cc
            n = np.arange(float(bottom[j]), top + 1.0)
            share = np.minimum(1.0, cc / (n + 1.0))
            birth = np.where(n < top, lam, 0.0)
            death = np.where(n > bottom[j], n * share, 0.0)   # a wall at the band's bottom
            with np.errstate(divide="ignore"):
                log_ratio = np.log(max(lam, 1e-300)) - np.log(np.minimum(np.maximum(n[1:], 1.0), cc))
            logp = np.concatenate([[0.0], np.cumsum(log_ratio)])
            alpha = np.exp(logp - logp.max())
            chains[key] = ((-death[1:]).astype(complex), birth + death + share,
                           (-birth[:-1]).astype(complex), alpha / alpha.sum())
        sub, diag, sup, alpha = chains[key]
        ones = np.ones(diag.size, dtype=complex)
        for k in range(s.shape[1]):
            tot[j, k] = alpha @ _zgtsv(sub, s[j, k] + diag, sup, ones)[3]
    sf = invert(lambda _s: tot, t)
    pdf = invert(lambda _s: 1.0 - s * tot, t)
    return sf, pdf


def _mmc_sf_pdf_sweep(t: np.ndarray, rho: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(T > t) and the density of the M/M/c-PS response time, in units of E[S].

    The tagged-request chain of the module docstring (state: others n, truncated where
    the stationary tail is < 1e-15), but through its resolvent: the transform
    of P(T > t) is alpha (sI - Q)^-1 1, a tridiagonal solve done for every
    Euler node at once by one backward sweep (continued fraction) over n,
    ``x_n = p_n + r_n x_{n-1}``, accumulating ``sum_n alpha_n x_n =
    sum_j p_j A_j`` with ``A_j = alpha_j + r_{j+1} A_{j+1}``.  sI - Q is
    diagonally dominant for Re s > 0, so the sweep is stable.  Points are
    sorted by truncation level so that each only costs its own states.
    """
    b = t.size
    with np.errstate(divide="ignore"):
        nmax = (c + 10 + np.ceil(np.log(1e-15) / np.log(np.maximum(rho, 1e-300)))).astype(int)
    nmax = np.where(rho > 0, nmax, c + 1)
    bottom, nmax = _state_band(rho, c, nmax)
    width = nmax - bottom                                  # states kept, less one
    order = np.argsort(-width, kind="stable")
    t_s, rho_s, c_s, width_s = t[order], rho[order], c[order].astype(float), width[order]
    top = int(width_s[0])
    lam = rho_s * c_s
    j = np.arange(top + 1)[:, None]                        # state index within the band
    n = bottom[order] + j
    share = np.minimum(1.0, c_s / (n + 1.0))
    birth = np.where(j < width_s, lam, 0.0)
    death = np.where(j > 0, n * share, 0.0)                # a wall at the band's bottom
    diag = birth + death + share
    with np.errstate(divide="ignore"):
        log_ratio = np.log(np.maximum(lam, 1e-300)) - np.log(np.minimum(np.maximum(n[1:], 1), c_s))
    logp = np.concatenate([np.zeros((1, b)), np.cumsum(log_ratio, axis=0)])
    logp = np.where(j <= width_s, logp, -np.inf)
    alpha = np.exp(logp - logp.max(axis=0))
    alpha /= alpha.sum(axis=0)
    s = euler_nodes(t_s)  # (b, K)
    k = s.shape[-1]
    r = np.zeros((b, k), dtype=complex)
    p = np.zeros((b, k), dtype=complex)
    acc = np.zeros((b, k), dtype=complex)
    tot = np.zeros((b, k), dtype=complex)
    active = np.searchsorted(-width_s, -np.arange(top + 1), side="right")  # rows with width >= j
    for i in range(top, -1, -1):
        a = active[i]
        den = s[:a] + diag[i, :a, None] - birth[i, :a, None] * r[:a]
        p[:a] = (1.0 + birth[i, :a, None] * p[:a]) / den
        acc[:a] = alpha[i, :a, None] + r[:a] * acc[:a]
        tot[:a] += p[:a] * acc[:a]
        r[:a] = death[i, :a, None] / den
    sf = invert(lambda _s: tot, t_s)
    pdf = invert(lambda _s: 1.0 - s * tot, t_s)
    out_sf = np.empty(b)
    out_pdf = np.empty(b)
    out_sf[order] = sf
    out_pdf[order] = pdf
    return out_sf, out_pdf


def _unique_points(*arrays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    stacked = np.stack([np.asarray(a, dtype=float).ravel() for a in arrays], axis=-1)
    uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
    return uniq, inverse.ravel()
