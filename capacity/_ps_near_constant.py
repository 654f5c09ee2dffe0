"""M/G/1 processor sharing when the CPU time per request is nearly constant (one core).

A handler that does a fixed amount of work (a JSON render, a hash, a busy loop) has a CPU time
whose squared coefficient of variation is 0.001-0.1.  The hyper-Erlang fits behind the general
one-core computation (:mod:`capacity._ps_transform`) cannot go below scv 1/16 with their 16
phases, so every such law was answered as an Erlang of 16-24 phases: gamma laws of scv 0.01 and
0.002 gave the same quantiles, and at scv 0.002 the p50 at utilisation 0.3 was 11 % high, the
p99.9 at 0.7 8 % high (light-load quantiles, where T is close to S, carried the fit's spread).

Method
------
Condition on the tagged request's own CPU time ``x``.  Under PS, ``T(x) >= x`` path by path, so

    P(T > t) = P(S > t) + int_0^t f_S(x) P(T(x) > t) dx,

with the exact law of ``S`` (gamma, Erlang, lognormal) in both terms.  ``T(x)`` has an atom
``(1 - rho) exp(-lambda x)`` at ``x`` (nobody present at arrival, nobody arriving during ``x``);
for ``x < t`` only its continuous part can exceed ``t``, and that part's transform

    E[exp(-s T(x))] - (1 - rho) exp(-(lambda + s) x)

comes from the exact M/PH/1-PS conditional transform of :func:`capacity.ps.response_sf`
(``(1 - rho) exp(-(s + lambda) x) / (z(x) - rho pi_e y(x))``, ``(y, z)(x) = expm(M x) 1``), in
which the *other* requests' CPU times enter only through the branching process, here as the
two-moment mixture of Erlangs of the same mean and scv (at most ``MAX_PHASES`` = 24 phases, so scv
below 1/24 is represented as 1/24 there -- the approximation, the same one the deterministic
family makes).  The size integral runs over ``[x_lo, min(t, x_hi)]`` (``P(S < x_lo) =
P(S > x_hi) = 1e-14``) by composite Simpson on equally spaced sizes (at least ``_NODES``, and at
most a quarter of the CPU time's standard deviation apart, up to ``_MAX_NODES``), so that
``(y, z)`` at every node is one matrix-vector product from the previous one (``expm(M dx)``
once per Euler node); by linearity the weighted transforms are summed first and inverted once
(Euler algorithm, :mod:`capacity._laplace`).  The density of ``T`` is
``f_S(t) (1 - rho) exp(-lambda t) + int_0^t f_S(x) f_{T(x)}(t) dx``.

Accuracy is measured against exact PS simulation in :func:`capacity.ps.response_quantile`.
"""
from __future__ import annotations

import numpy as np
from scipy import special

from ._laplace import euler_nodes, invert
from ._ps_transform import _expm, _sojourn_generator
from .distributions import Service
from .phasetype import MAX_PHASES, _erlang_mix

__all__: list[str] = []   # private: capacity.ps is the public face

#: Below these scv a gamma, Erlang or lognormal CPU time goes through this module.  Above 0.1 the
#: others' two-moment mixture is no longer exact, but against exact PS simulation it stays within
#: 1 % (lognormal scv 0.15-0.5 at rho 0.8-0.9, p50-p99.9) where the hyper-Erlang fits behind the
#: general path are 2-4 % off (lognormal scv 0.15, rho 0.8: -2.0 % / -3.6 % at p99 / p99.9); the
#: limits overlap the main PS table (gamma from 0.085, lognormal from 0.57) so that the two
#: tables can be blended (:mod:`capacity._quantile_table`).
NEAR_CONSTANT_SCV = {"gamma": 0.161, "erlang": 0.17, "lognormal": 0.801}
_FAMILIES = ("gamma", "erlang", "lognormal")
# Equally spaced tagged sizes (odd, for Simpson's rule) over the size range.  Against the general
# transform on Erlang-12/20/24 (where this path is exact): 41 nodes left 2e-3 relative error in
# P(T > t), 81 4e-4, 161 1e-5 (at 1.4x the cost of 41: the matrix exponentials dominate).
_NODES = 161
# Wide laws (scv 0.2-0.8) spread over [x_lo, x_hi] = 0.02-270 x the mean: 161 nodes there are up to
# two standard deviations apart, and the quantiles at utilisation 0.99 came out up to 13 % off
# (lognormal scv 0.46, p50; scv 0.8, p90: 10 %).  Spacing the nodes a quarter of a standard
# deviation apart converges them (641 and 2561 nodes agree within 4e-4).
_NODE_SPACING_SD = 0.25
_MAX_NODES = 1281
# Size quantiles ignored at either end of the law.
_SIZE_TAIL = 1e-14
_Z_TAIL = -special.ndtri(_SIZE_TAIL)
# Points per chunk: bounds the (points, Euler nodes, phases, phases) complex arrays (~40 MB).
_CHUNK = 64
_TERMS = 15


def near_constant(svc: Service, shape: tuple) -> np.ndarray:
    """Flat mask of the points whose CPU law this module answers (gamma, Erlang or lognormal
    with scv below its family's ``NEAR_CONSTANT_SCV``)."""
    size = int(np.prod(shape))
    if svc.family not in _FAMILIES:
        return np.zeros(size, dtype=bool)
    scv = np.broadcast_to(np.asarray(svc.scv, dtype=float), shape).ravel()
    return scv < NEAR_CONSTANT_SCV[svc.family]


class _SizeLaw:
    """The exact CPU-time law on flat points: density, survival function and the size range."""

    def __init__(self, family: str, mean: np.ndarray, scv: np.ndarray):
        self.lognormal = family == "lognormal"
        self.sd = mean * np.sqrt(scv)
        if self.lognormal:
            self.sigma = np.sqrt(np.log1p(scv))
            self.mu = np.log(mean) - 0.5 * self.sigma**2
            self.lo = np.exp(self.mu - _Z_TAIL * self.sigma)
            self.hi = np.exp(self.mu + _Z_TAIL * self.sigma)
        else:  # gamma and Erlang: shape 1/scv
            self.k = 1.0 / scv
            self.theta = mean * scv
            self.lo = self.theta * special.gammaincinv(self.k, _SIZE_TAIL)
            self.hi = self.theta * special.gammainccinv(self.k, _SIZE_TAIL)

    def pdf(self, x: np.ndarray, rows=slice(None)) -> np.ndarray:
        """Density at x (x shaped (points,) or (points, nodes) for the selected rows)."""
        x = np.asarray(x, dtype=float)
        expand = (slice(None),) + (None,) * (x.ndim - 1)
        with np.errstate(divide="ignore"):
            if self.lognormal:
                mu, sigma = self.mu[rows][expand], self.sigma[rows][expand]
                z = (np.log(x) - mu) / sigma
                return np.where(x > 0, np.exp(-0.5 * z * z) / (x * sigma * np.sqrt(2 * np.pi)), 0.0)
            k, theta = self.k[rows][expand], self.theta[rows][expand]
            u = x / theta
            logpdf = (k - 1.0) * np.log(u) - u - special.gammaln(k) - np.log(theta)
            return np.where(x > 0, np.exp(logpdf), 0.0)

    def sf(self, x: np.ndarray, rows=slice(None)) -> np.ndarray:
        if self.lognormal:
            with np.errstate(divide="ignore"):
                z = (np.log(x) - self.mu[rows]) / self.sigma[rows]
            return special.ndtr(-z)
        return special.gammaincc(self.k[rows], np.maximum(x, 0.0) / self.theta[rows])


class NearConstant:
    """P(T > t) and the density of T on flat one-core points with near-constant CPU time.

    ``svc`` and ``shape``: the batch's service and shape; ``rows``: flat indices of the points
    answered here; ``lam``: their arrival rates.
    """

    def __init__(self, svc: Service, shape: tuple, rows: np.ndarray, lam: np.ndarray):
        mean = np.broadcast_to(np.asarray(svc.mean, dtype=float), shape).ravel()[rows]
        scv = np.broadcast_to(np.asarray(svc.scv, dtype=float), shape).ravel()[rows]
        self.law = _SizeLaw(svc.family, mean, scv)
        self.lam = lam
        self.rho = lam * mean
        # The others: the two-moment Erlang mixture (Erlang-24 below scv 1/24).
        floor = np.maximum(scv, 1.0 / MAX_PHASES)
        phases = int(np.max(np.clip(np.ceil(1.0 / floor - 1e-9), 2, MAX_PHASES)))
        self.beta, self.tm = _erlang_mix(mean, floor, phases)

    def both(self, t: np.ndarray, sub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(P(T > t), density) at t > 0 for the points ``sub`` (a mask over this object's rows)."""
        idx = np.flatnonzero(sub)
        sf = np.empty(idx.size)
        pdf = np.empty(idx.size)
        for lo in range(0, idx.size, _CHUNK):
            part = slice(lo, lo + _CHUNK)
            sf[part], pdf[part] = self._chunk(t[part], idx[part])
        return sf, pdf

    def _chunk(self, t: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        law, lam, rho = self.law, self.lam[rows], self.rho[rows]
        x_lo = law.lo[rows]
        x_up = np.minimum(t, law.hi[rows])
        some = x_up > x_lo   # otherwise no tagged size below t: T > t exactly when S > t
        span = np.where(some, x_up - x_lo, 0.0)
        wanted = np.max(span / (_NODE_SPACING_SD * law.sd[rows]), initial=0.0)
        nodes = int(min(max(_NODES, 2 * np.ceil(wanted / 2) + 1), _MAX_NODES))   # odd, for Simpson
        dx = span / (nodes - 1)
        sizes = x_lo[:, None] + dx[:, None] * np.arange(nodes)
        simpson = np.ones(nodes)
        simpson[1:-1:2], simpson[2:-1:2] = 4.0, 2.0
        weights = np.where(some, dx / 3.0, 0.0)[:, None] * simpson * law.pdf(sizes, rows)
        s = euler_nodes(t, _TERMS)
        mass = (1.0 - rho)[:, None] * np.exp(-lam[:, None] * sizes)          # the atoms
        rest = self._continuous_part(s, lam, rows, sizes, dx, mass)          # (n, nodes, K)
        sf_tr = np.einsum("nj,njk->nk", weights, (1.0 - mass)[..., None] - rest) / s
        pdf_tr = np.einsum("nj,njk->nk", weights, rest)
        atom_density = law.pdf(t, rows) * (1.0 - rho) * np.exp(-lam * t)
        sf = law.sf(t, rows) + invert(lambda _s, v=sf_tr: v, t, _TERMS)
        pdf = atom_density + invert(lambda _s, v=pdf_tr: v, t, _TERMS)
        return np.clip(sf, 0.0, 1.0), np.maximum(pdf, 0.0)

    def _continuous_part(self, s, lam, rows, sizes, dx, mass) -> np.ndarray:
        """``E[exp(-s T(x))] - atom`` at every (point, tagged size, Euler node)."""
        beta, tm = self.beta[rows], self.tm[rows]
        m = beta.shape[-1]
        _, rho, pi_e, big = _sojourn_generator(s, lam, beta, tm)
        step = _expm(big * dx[:, None, None, None])
        state = _expm(big * sizes[:, 0, None, None, None]).sum(axis=-1)        # (n, K, m+1)
        out = np.empty(sizes.shape + (s.shape[1],), dtype=complex)
        for j in range(sizes.shape[1]):
            if j:
                state = np.einsum("nkab,nkb->nka", step, state)
            den = state[..., m] - rho[:, None] * np.einsum("nki,ni->nk", state[..., :m], pi_e)
            x = sizes[:, j, None]
            out[:, j] = (1.0 - rho)[:, None] * np.exp(-(s + lam[:, None]) * x) / den
        return out - mass[..., None] * np.exp(-s[:, None, :] * sizes[..., None])
