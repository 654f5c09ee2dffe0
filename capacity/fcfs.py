"""First-come-first-served queues: waiting and response times.

One queue, Poisson arrivals at ``arrival_rate`` requests/s, ``servers``
identical cores taking requests in arrival order, service (CPU) times from a
:class:`~capacity.Service`.

==========================  ==========================================  =============
servers, service            model                                       status
==========================  ==========================================  =============
1, any service              M/G/1 (Pollaczek-Khinchine, Takacs)         exact
> 1, exponential            M/M/c (Erlang C)                            exact
> 1, anything else          M/G/c, Allen-Cunneen / Kingman-Whitt        approximation
==========================  ==========================================  =============

The wait ``W`` is the time from arrival to the start of service, the
response ``T = W + S`` adds the request's own service time.  Distributions
come from numerical Laplace inversion (Euler algorithm) of the exact
transforms, so tails and quantiles are exact up to the inversion accuracy
stated in each function.

Speed: ``benchmarks/bench_fcfs.py`` times four response quantiles at one
point and a 200-point utilisation sweep of them for every service family.
The quantile solver takes safeguarded Newton steps with the density inverted
from the same transform values as the tail, so most points need 3-5
inversions; transforms known only by quadrature (lognormal, scipy) are
tabulated along the Euler rays once per call when many points share them.

Unstable inputs (utilisation >= 1) are not errors: means and quantiles are
``inf`` and the probabilities of waiting longer than any ``t`` are 1.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from scipy import special

from ._checks import check_nonnegative, check_quantile, scalar_out
from ._common import prepare, solve_increasing
from ._laplace import _euler_weights
from ._fcfs_convolution import _GL_W_FULL, _GL_X, _Z_END, _ShapeFamily, gamma_plus_wait
# The service transforms live in _fcfs_transforms; two stay importable from here (tests).
from ._fcfs_transforms import _CTORS, _make_table, _numeric_tail_transform, _tail_transform, _TransformTable  # noqa: F401
from .distributions import Service

__all__ = [
    "mean_wait",
    "mean_response",
    "wait_sf",
    "response_sf",
    "wait_quantile",
    "response_quantile",
]

ArrayLike = Any

# ---------------------------------------------------------------------------------------------
# Small numerical helpers


def _phi(x: np.ndarray) -> np.ndarray:
    """(1 - exp(-x)) / x, with the limit 1 at x = 0 (x >= 0)."""
    x = np.asarray(x, dtype=float)
    safe = np.where(x > 0, x, 1.0)
    return np.where(x > 1e-300, -np.expm1(-safe) / safe, 1.0)


_KINK_TERMS = 6


def _irwin_hall_coefficients(m: int) -> np.ndarray:
    """(-1)^k C(n, k) / n! for n = 0..m (rows), k = 0..m (columns)."""
    n = np.arange(m + 1)[:, None]
    k = np.arange(m + 1)[None, :]
    coef = (-1.0) ** k * special.comb(n, k) / special.factorial(n)
    return np.where(k <= n, coef, 0.0)


_IH_COEF = _irwin_hall_coefficients(_KINK_TERMS)


def _irwin_hall(x: np.ndarray, m: int = _KINK_TERMS) -> tuple[np.ndarray, np.ndarray]:
    """Tail and density of U_1 + ... + U_n (independent uniforms on (0, 1))
    at ``x`` (shape ``(N,)``) for n = 1..m, each of shape ``(N, m)``:
    cdf = sum_{k <= x} (-1)^k C(n, k) (x - k)^n / n!, density the same with
    (x - k)^(n-1) / (n-1)!  (mild cancellation only for these small n)."""
    x = np.asarray(x, float)
    xk = np.maximum(x[:, None] - np.arange(m + 1), 0.0)            # (N, m + 1), (x - k)_+
    powers = np.cumprod(np.broadcast_to(xk[:, None, :], (x.size, m, m + 1)), axis=1)  # [:, j] = (x-k)_+^(j+1)
    coef = _IH_COEF[1:]                                              # n = 1..m
    cdf = np.einsum("njk,jk->nj", powers, coef)
    # d/dx of (x - k)^n / n! is (x - k)^(n-1) / (n-1)!; for n = 1 that is the step 1{x > k}.
    lower = np.concatenate([(xk > 0)[:, None, :].astype(float), powers[:, :-1]], axis=1)
    pdf = np.einsum("njk,jk->nj", lower, coef * np.arange(1, m + 1)[:, None])
    n = np.arange(1, m + 1)
    inside = (x[:, None] > 0) & (x[:, None] < n)
    sf = np.where(inside, 1.0 - cdf, np.where(x[:, None] <= 0, 1.0, 0.0))
    pdf = np.where(inside, np.maximum(pdf, 0.0), 0.0)
    return sf, pdf


def _service_ppf(service: Service, q: np.ndarray) -> np.ndarray:
    """Service quantiles; the lognormal in closed form (scipy's frozen-object
    machinery is slow per call)."""
    if service.family == "lognormal":
        sigma2 = np.log1p(service._params["scv"])
        return np.exp(np.log(service._params["mean"]) - 0.5 * sigma2 + np.sqrt(sigma2) * special.ndtri(q))
    return service.ppf(q)


def _flat_service(service: Service, shape: tuple[int, ...], index: np.ndarray) -> Service:
    """The service with parameters broadcast to ``shape``, flattened, and
    restricted to the flat positions ``index`` (a 1-D parameter axis).
    Empirical and wrapped scipy services have scalar parameters and are
    returned unchanged."""
    if service.family not in _CTORS or shape == () or all(np.ndim(v) == 0 for v in service._params.values()):
        return service
    keys = ("mean", "scv", "k")
    params = {k: np.broadcast_to(v, shape).ravel()[index] for k, v in service._params.items() if k in keys}
    return _CTORS[service.family](params)


# Below this scv the response time is computed as the convolution of the wait with the
# service (see _Model._convolved_response_sf_dens): a near-constant service time has a
# near-step distribution, and Euler inversion of W*(s) B*(s) rings at the step (against the
# exact M/E_k/1 chain, quantiles 1 % off at k = 25 and 10-47 % at k = 100-1000 in the far tail
# at light load), while the wait alone inverts to ~1e-6.  At scv 0.1 the direct inversion is
# still within 4e-4, and 30-50x faster.
_CONVOLVE_BELOW_SCV = 0.1
class _Points:
    """Flat view of the broadcast inputs of one call (private)."""

    def __init__(self, arrival_rate, service, servers, extra: np.ndarray | None = None):
        qi = prepare(arrival_rate, service, servers)
        self.service = qi.service
        self.family = qi.service.family
        shape = qi.shape if extra is None else np.broadcast_shapes(qi.shape, extra.shape)
        self.shape = shape
        self.svc_shape = qi.shape
        self.lam = np.broadcast_to(qi.arrival_rate, shape).ravel()
        self.c = np.broadcast_to(qi.servers, shape).ravel()
        self.m1 = np.broadcast_to(qi.mean_service, shape).ravel()
        self.rho = np.broadcast_to(qi.utilization, shape).ravel()
        self.stable = self.rho < 1
        self.extra = None if extra is None else np.broadcast_to(extra, shape).ravel()
        n_svc = int(np.prod(qi.shape))
        self.svc_idx = np.broadcast_to(np.arange(n_svc).reshape(qi.shape), shape).ravel()

    def service_at(self, mask: np.ndarray) -> Service:
        """The service restricted to the flat positions selected by ``mask``."""
        return _flat_service(self.service, self.svc_shape, self.svc_idx[mask])

    def active(self, mask: np.ndarray) -> "_Model":
        idx = np.flatnonzero(mask)
        return _Model(self.lam[idx], self.c[idx], self.service_at(mask), self.m1[idx])


# ---------------------------------------------------------------------------------------------
# The models, on flat arrays of stable points with arrival_rate > 0


class _Model:
    """Flat parameters of stable queues with positive arrival rate."""

    def __init__(self, lam, c, svc: Service, m1):
        self.lam, self.c, self.svc, self.m1 = lam, c, svc, m1
        self.n = lam.size
        self.a = lam * m1
        self.rho = self.a / c
        fam = svc.family
        self.exp = fam == "exponential"
        self.det = fam == "deterministic"
        self.m2 = np.broadcast_to(np.asarray(svc.moment(2), float), lam.shape)
        self.scv = self.m2 / m1**2 - 1.0
        multi = c > 1
        self.p_wait = self.rho.copy()  # P(W > 0) = rho for one server
        if multi.any():
            from .erlang import erlang_c
            self.p_wait[multi] = np.asarray(erlang_c(c[multi], self.a[multi]), float)
        # Exact for one server (Pollaczek-Khinchine) and for M/M/c; the
        # Allen-Cunneen factor (1 + scv)/2 otherwise.
        factor = np.where(self.exp, 1.0, 0.5 * (1.0 + self.scv))
        self.mean_wait = np.where(
            multi, self.p_wait * m1 / (c * (1.0 - self.rho)) * factor,
            lam * self.m2 / (2.0 * (1.0 - self.rho)))
        # Exponential tail (exact for M/M/c, approximate for M/G/c):
        # P(W > t) = p_wait exp(-theta t), theta = p_wait / E[W] written without
        # the division, which is 0/0 when P(wait) underflows (many servers, low load).
        self.theta = np.where(multi, (c / m1 - lam) / factor,
                              2.0 * (1.0 - self.rho) * self.rho / (lam * self.m2))
        self.euler_wait = (c == 1) & (not self.exp)
        self.table = _make_table(svc)

    def take(self, idx: np.ndarray) -> "_Model":
        if idx.size == self.n:  # idx comes from flatnonzero: all points, in order
            return self
        svc = self.svc
        if svc.family in _CTORS and np.ndim(svc._params["mean"]) > 0:
            svc = _CTORS[svc.family]({k: v[idx] for k, v in svc._params.items() if k in ("mean", "scv", "k")})
        # Every per-point quantity sliced, not recomputed: a root finder takes the unfinished points
        # at each step, and rebuilding them (Erlang C on several servers) was half its time.
        sub = object.__new__(_Model)
        sub.__dict__.update({k: v[idx] if isinstance(v, np.ndarray) else v for k, v in self.__dict__.items()})
        sub.svc, sub.n = svc, idx.size
        if svc is not self.svc:
            sub.table = _make_table(svc)   # None for a batch of laws; the same service shares its own
        return sub

    # -- transforms of the tails, s of shape (n, K)
    def _wait_tail_transform(self, s: np.ndarray, g: np.ndarray | None = None) -> np.ndarray:
        """(1 - W*(s)) / s for the Pollaczek-Khinchine wait, in the geometric
        sum form W* = (1 - rho) / (1 - rho B_e*), B_e* = G / E[S]."""
        if g is None:
            g = _tail_transform(self.svc, s, self.table)
        rho = self.rho[:, None]
        be = g / self.m1[:, None]
        # 1 - B_e* is small for small |s|; s (1 - B_e*) / (s E[S_e]) keeps it well-conditioned
        # enough at Euler nodes (Re s = 11.5 / t) up to t ~ 1e7 E[S].
        return rho * (1.0 - be) / (s * (1.0 - rho * be))

    def _smooth_wait_tail_transform(self, s: np.ndarray) -> np.ndarray:
        """(1 - W*(s))/s minus its first ``_KINK_TERMS`` geometric-sum terms
        (1 - rho) rho^n (1 - B_e*^n) / s, i.e. the transform of
        (1 - rho) sum_{n > m} rho^n P(R_1 + ... + R_n > t): the rough terms
        taken out, the rest is m times differentiable and Euler-friendly.
        Written without the cancellation of the two 1/s poles:
        rho^{m+1} (1 - B_e)/s [sum_0^m B_e^j - rho sum_1^m B_e^j] / (1 - rho B_e)."""
        m = _KINK_TERMS
        rho = self.rho[:, None]
        be = _tail_transform(self.svc, s) / self.m1[:, None]
        # bracket = 1 + (1 - rho) (be + ... + be^m), by Horner
        acc = be.copy()
        for _ in range(m - 1):
            acc = be * (1.0 + acc)
        bracket = 1.0 + (1.0 - rho) * acc
        return rho ** (m + 1) * (1.0 - be) / s * bracket / (1.0 - rho * be)

    # -- distribution functions, t of shape (n,) (t > 0); each returns (P(X > t), density at t)
    def wait_sf_dens(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sf = self.p_wait * np.exp(-self.theta * t)
        dens = self.theta * sf
        e = self.euler_wait
        if e.any():
            idx = np.flatnonzero(e)
            sub = self.take(idx)
            te = t[idx]
            if self.det:
                # M/D/1: R = D U with U uniform, so the first terms are
                # Irwin-Hall tails in closed form; their kinks at multiples
                # of D would cost Euler four digits (1e-4 next to t = D).
                ih_sf, ih_pdf = _irwin_hall(te / sub.m1)
                weights = (1.0 - sub.rho[:, None]) * sub.rho[:, None] ** np.arange(1, _KINK_TERMS + 1)
                rest_sf, rest_dens = _invert_pair(sub._smooth_wait_tail_transform, te,
                                                  sub.rho ** (_KINK_TERMS + 1))
                sf[idx] = (weights * ih_sf).sum(axis=1) + rest_sf
                dens[idx] = (weights * ih_pdf).sum(axis=1) / sub.m1 + rest_dens
            else:
                sf[idx], dens[idx] = _invert_pair(sub._wait_tail_transform, te, sub.p_wait)
        return np.clip(sf, 0.0, 1.0), np.maximum(dens, 0.0)

    def wait_sf(self, t: np.ndarray) -> np.ndarray:
        return self.wait_sf_dens(t)[0]

    def response_sf_dens(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.det:
            d = self.m1
            late = t > d
            sf = np.ones(self.n)
            dens = np.zeros(self.n)
            if late.any():
                idx = np.flatnonzero(late)
                sf[idx], dens[idx] = self.take(idx).wait_sf_dens(t[idx] - d[idx])
            return sf, dens
        if self.exp:
            # Wait (atom 1 - C at 0, then C theta e^{-theta t}) convolved with
            # Exp(mu): e^{-mu t} + C mu (e^{-a t} - e^{-b t}) / (b - a) with
            # a, b = min, max(mu, theta), written through (1 - e^{-x})/x.
            mu = 1.0 / self.m1
            lo = np.minimum(mu, self.theta)
            gap = np.abs(self.theta - mu)
            head = np.exp(-mu * t)
            sf = head + self.p_wait * mu * t * np.exp(-lo * t) * _phi(gap * t)
            # density: (1 - C) mu e^{-mu t} + C mu theta t e^{-lo t} phi(gap t)
            dens = (1.0 - self.p_wait) * mu * head + self.theta * (sf - head)
            return np.clip(sf, 0.0, 1.0), np.maximum(dens, 0.0)

        def transform(s, model=self):
            g = _tail_transform(model.svc, s, model.table)
            b = 1.0 - s * g
            if model._euler_all:
                wt = model._wait_tail_transform(s, g)
            else:
                wt = model.p_wait[:, None] / (model.theta[:, None] + s)
                e = model.euler_wait
                if e.any():
                    wt[e] = model.take(np.flatnonzero(e))._wait_tail_transform(s[e], g[e])
            # (1 - W* B*) / s = (1 - B*) / s + B* (1 - W*) / s: no cancellation.
            return g + b * wt

        conv = self._convolve()
        sf, dens = np.empty(self.n), np.empty(self.n)
        closed = (self.c > 1) & (self.svc.family in ("gamma", "erlang"))
        if closed.any():
            idx = np.flatnonzero(closed)
            sf[idx], dens[idx] = self.take(idx)._gamma_response_sf_dens(t[idx])
        conv &= ~closed
        if conv.any():
            idx = np.flatnonzero(conv)
            sf[idx], dens[idx] = self.take(idx)._convolved_response_sf_dens(t[idx])
        rest = ~conv & ~closed
        if rest.any():
            idx = np.flatnonzero(rest)
            sub = self.take(idx)
            sub._euler_all = bool(sub.euler_wait.all())
            # T = W + S has no atom at 0 (services here are continuous): P(T > 0+) = 1
            sf[idx], dens[idx] = _invert_pair(lambda s: transform(s, sub), t[idx], np.ones(idx.size))
        return np.clip(sf, 0.0, 1.0), np.maximum(dens, 0.0)

    def _convolve(self) -> np.ndarray:
        """Points whose response is computed as wait convolved with service: one server, a
        gamma, Erlang or lognormal service below ``_CONVOLVE_BELOW_SCV``."""
        if self.svc.family not in ("gamma", "erlang", "lognormal"):
            return np.zeros(self.n, dtype=bool)
        # Several servers, lognormal: with the wait's exponential tail one quadrature, not the law's
        # numerical transform at every Euler node (gamma and Erlang: closed-form transforms).
        many = (self.c > 1) & (self.svc.family == "lognormal")
        return ((self.c == 1) & (self.scv < _CONVOLVE_BELOW_SCV)) | many

    def _gamma_response_sf_dens(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Several servers, gamma or Erlang service: ``S`` plus the exponential wait in closed form
        (:func:`._fcfs_convolution.gamma_plus_wait`)."""
        return gamma_plus_wait(_ShapeFamily(self.svc, self.n), self.p_wait, self.theta, t)

    def _convolved_response_sf_dens(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """P(T > t) and its density as the convolution of the exact wait with the service:

        ``P(T > t) = P(S > t) + int_0^t f_S(s) P(W > t - s) ds`` and
        ``f_T(t) = (1 - rho) f_S(t) + int_0^t f_S(s) f_W(t - s) ds`` (W's atom ``1 - rho`` at
        0), the integrals over the normal score ``z`` of ``s`` (``F_S(s) = Phi(z)``), from -8.5
        to ``min(z(t), 8.5)``, by 32-point Gauss-Legendre.
        The wait's tail comes from Euler inversion of its own transform, which has no step to
        ring at; measured against the exact M/E_k/1 chain (``tests/test_fcfs_low_scv.py``)."""
        law = _ShapeFamily(self.svc, self.n)
        cdf_t, sf_t, pdf_t = law.cdf_sf_pdf(t)
        # s = F_S^{-1}(Phi(z)): the integrand phi(z) P(W > t - s(z)) is smooth in z, bell-shaped,
        # cut at z(t) (where t - s = 0) and at -/+ _Z_END (mass beyond ~1e-17).
        top = np.minimum(law.z_of(cdf_t, sf_t, t), _Z_END)
        half = 0.5 * np.maximum(top + _Z_END, 0.0)
        z = -_Z_END + half[:, None] * (_GL_X[None, :] + 1.0)
        weight = half[:, None] * _GL_W_FULL[None, :] * np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi)
        s = law.at_z(z)
        k = _GL_X.size
        gap = np.maximum(t[:, None] - s, 1e-12 * self.m1[:, None]).ravel()
        if self.euler_wait.any():
            w_sf, w_dens = self.take(np.repeat(np.arange(self.n), k)).wait_sf_dens(gap)  # shares the table
        else:   # several servers: the wait's exponential tail, no model to rebuild per node
            w_sf = np.repeat(self.p_wait, k) * np.exp(-np.repeat(self.theta, k) * gap)
            w_dens = np.repeat(self.theta, k) * w_sf
        sf = sf_t + np.sum(weight * w_sf.reshape(self.n, k), axis=1)
        dens = (1.0 - self.p_wait) * pdf_t + np.sum(weight * w_dens.reshape(self.n, k), axis=1)
        return sf, dens

    def response_sf(self, t: np.ndarray) -> np.ndarray:
        return self.response_sf_dens(t)[0]


def _invert_pair(transform: Callable[[np.ndarray], np.ndarray], t: np.ndarray,
                 h0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Euler inversion of a tail transform H(s) (of h(t) = P(X > t) or a part
    of it) and, from the same transform values, of the density -h'(t), whose
    transform is h(0+) - s H(s) (one more matrix product: the density for
    Newton steps is free)."""
    beta, eta = _euler_weights(15)
    s = beta / t[:, None]
    values = transform(s)
    # (x * eta).sum, not x @ eta: BLAS sums in an order that depends on the
    # number of rows, and the Euler sum amplifies the difference to ~1e-11,
    # so a point would not give the same answer alone and inside a sweep.
    sf = (values.real * eta).sum(axis=1) / t
    dens = ((h0[:, None] - s * values).real * eta).sum(axis=1) / t
    return sf, dens


# ---------------------------------------------------------------------------------------------
# Public functions


def _dispatch(pts: _Points, unstable_value: float, zero_rate: Callable, core: Callable) -> np.ndarray:
    out = np.empty(pts.lam.shape)
    out[~pts.stable] = unstable_value
    idle = pts.stable & (pts.lam == 0)
    if idle.any():
        out[idle] = zero_rate(idle)
    busy = pts.stable & (pts.lam > 0)
    # In chunks: the transforms hold ~10 kB per point (31 Euler nodes x the service's terms), so a
    # 10^6-point grid at once took 9.7 GB.
    idx = np.flatnonzero(busy)
    for lo in range(0, idx.size, _CHUNK_POINTS):
        part = np.zeros(busy.shape, dtype=bool)
        part[idx[lo:lo + _CHUNK_POINTS]] = True
        out[part] = core(pts.active(part), part)
    return out.reshape(pts.shape)


_CHUNK_POINTS = 20_000


def mean_wait(arrival_rate: ArrayLike, service: Service | ArrayLike, servers: ArrayLike = 1):
    """Mean time a request waits in the queue before its service starts.

    Parameters
    ----------
    arrival_rate : float or array_like
        Poisson arrival rate, requests/s (>= 0).
    service : Service or float
        Service (CPU) time per request, seconds; a bare number is the mean of
        an exponential service time.
    servers : int or array_like of int, optional
        Number of cores serving the queue (default 1).

    Returns
    -------
    float or ndarray
        E[W] in seconds, broadcast over the inputs; ``inf`` when the
        utilisation is >= 1, 0 when ``arrival_rate`` is 0.

    Notes
    -----
    One server (M/G/1, exact): Pollaczek-Khinchine,
    ``E[W] = lambda E[S^2] / (2 (1 - rho))``.

    Several servers, exponential service (M/M/c, exact):
    ``E[W] = C(c, a) / (c mu - lambda)`` with ``C`` the Erlang C
    probability of waiting and ``a = lambda E[S]``.

    Several servers, other service (M/G/c): **approximation** (Allen-Cunneen,
    the Kingman-Whitt heavy-traffic form for Poisson arrivals),
    ``E[W] ~ (1 + scv) / 2 * C(c, a) / (c mu - lambda)``; exact for c = 1 and
    for exponential service.  See :func:`wait_sf` for its measured error.

    References
    ----------
    L. Kleinrock, *Queueing Systems, Vol. 1* (1975), eq. (5.72) (P-K) and
    eq. (3.40) (Erlang C).  A. O. Allen, *Probability, Statistics and
    Queueing Theory*, 2nd ed. (1990), section 6.2.  W. Whitt,
    "Approximations for the GI/G/m queue", Production and Operations
    Management 2 (1993) 114-161.

    Examples
    --------
    >>> from capacity import Service, fcfs
    >>> round(fcfs.mean_wait(8.0, 0.1), 6)        # M/M/1, rho = 0.8: rho E[S] / (1 - rho)
    0.4
    >>> round(fcfs.mean_wait(8.0, Service.deterministic(0.1)), 6)   # M/D/1: half of that
    0.2
    """
    pts = _Points(arrival_rate, service, servers)
    return scalar_out(_dispatch(pts, np.inf, lambda m: 0.0, lambda model, m: model.mean_wait))


def mean_response(arrival_rate: ArrayLike, service: Service | ArrayLike, servers: ArrayLike = 1):
    """Mean response time E[T] = E[W] + E[S], seconds.

    Parameters and model as in :func:`mean_wait` (exact for one server and
    for M/M/c, the Allen-Cunneen approximation otherwise).  ``inf`` when the
    utilisation is >= 1; E[S] when ``arrival_rate`` is 0.

    Examples
    --------
    >>> from capacity import fcfs
    >>> round(fcfs.mean_response(8.0, 0.1), 6)    # M/M/1: 1 / (mu - lambda)
    0.5
    >>> round(fcfs.mean_response(15.0, 0.1, servers=2), 6)   # M/M/2
    0.228571
    """
    pts = _Points(arrival_rate, service, servers)
    return scalar_out(_dispatch(pts, np.inf, lambda m: pts.m1[m], lambda model, m: model.mean_wait + model.m1))


def wait_sf(t: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike, servers: ArrayLike = 1):
    """P(W > t): probability that a request waits more than ``t`` seconds
    before its service starts.

    Parameters
    ----------
    t : float or array_like
        Waiting time, seconds (>= 0).
    arrival_rate, service, servers
        As in :func:`mean_wait`.

    Returns
    -------
    float or ndarray
        P(W > t), broadcast over all inputs; 1 when unstable, 0 when
        ``arrival_rate`` is 0.

    Notes
    -----
    One server (M/G/1, exact): the Pollaczek-Khinchine transform
    ``W*(s) = (1 - rho) s / (s - lambda (1 - B*(s)))``, written as the
    geometric sum ``(1 - rho) / (1 - rho B_e*(s))`` with
    ``B_e*(s) = (1 - B*(s)) / (s E[S])``, and ``(1 - W*(s)) / s`` is inverted
    with the Euler algorithm (Abate-Whitt, 31 nodes).  Lognormal and wrapped
    scipy services have no closed-form B*: it is computed by Gauss-Legendre
    quadrature of ``int exp(-s x) P(S > x) dx`` (2e-15 relative, checked
    against the closed-form gamma transform); for calls with many points
    it is tabulated on Chebyshev panels in ``ln t`` along each Euler ray,
    agreeing with direct quadrature to 1e-12 relative (scv 0.1 to 10,
    ``t / E[S]`` from 1e-6 to 1e6).  M/D/1 takes the first six
    terms of the geometric sum (Irwin-Hall tails, kinked at multiples of D)
    in closed form and inverts only the smooth rest.
    Measured accuracy: absolute error of P(W > t) below 1e-8 (M/D/1 against
    Erlang's exact formula in mpmath, rho 0.3-0.95; Erlang-4 and
    hyperexponential against mpmath Talbot inversion at 30 digits: ~1e-11),
    quantiles to ~1e-8 relative up to p99.9 (lognormal: inside a 1e-4 wide
    lattice bracket).  Probabilities below ~1e-9 are dominated by the
    inversion's absolute error: quantiles beyond q = 1 - 1e-7 are not
    reliable.  ``W`` has an atom
    ``1 - rho`` at 0.

    Several servers, exponential service (M/M/c, exact):
    ``P(W > t) = C exp(-(c mu - lambda) t)``.

    Several servers, other service: **approximation**.  ``P(W > 0)`` is the
    Erlang C probability ``C`` and the conditional wait is taken exponential
    with the Allen-Cunneen mean ``E[W] / C``:
    ``P(W > t) ~ C exp(-C t / E[W])``.  Error against simulation (FCFS,
    10^6 requests per case; see the table below).  ``P(T > t) = P(S > t) +
    C int_0^t exp(-theta (t - s)) f_S(s) ds``; for lognormal service by 32-point
    Gauss-Legendre in the normal score of s (1e-6 of adaptive quadrature).

    Measured error of the M/G/c approximation (relative error of the
    approximation vs simulation, mean wait and p99 of the response):

    ==================  ====  =================  =================  =================
    service             c     rho 0.5            rho 0.8            rho 0.95
    ==================  ====  =================  =================  =================
    lognormal scv 0.5   2     -2 % / -1.5 %      -1 % / -0.6 %      -3 % / +1 %
    lognormal scv 0.5   4     -3 % / -0.1 %      -1 % / +0.5 %      -7 % / -8 %
    lognormal scv 0.5   16    -6 % / -0.1 %      -2 % / -0.2 %      -4 % / +1 %
    lognormal scv 2     2     +6 % / -9 %        +2 % / -10 %       +1 % / -1 %
    lognormal scv 2     4     +21 % / -0.2 %     +7 % / -2 %        -8 % / -14 %
    lognormal scv 2     16    +56 % / -0.2 %     +12 % / -0.7 %     +10 % / +15 %
    lognormal scv 4     2     +14 % / -14 %      +5 % / -17 %       +5 % / +4 %
    lognormal scv 4     4     +44 % / -0.0 %     +14 % / -5 %       -11 % / -25 %
    lognormal scv 4     16    +119 % / -0.3 %    +27 % / -0.7 %     +24 % / +25 %
    deterministic       2     -5 % / +8 %        -2 % / +5 %        -1 % / +2 %
    deterministic       4     -12 % / +0.2 %     -4 % / +3 %        -5 % / +2 %
    deterministic       16    -30 % / 0.0 %      -10 % / -0.7 %     -4 % / -0.7 %
    ==================  ====  =================  =================  =================

        Each cell: error of E[W] / error of the p99 of the response, relative to
        an FCFS simulation of 10^6 requests (E[S] = 1, seed fixed; the simulation's
        own standard error is 1-3 % for the means and up to 5-12 % for the p99
        at rho = 0.95 with scv >= 2).  Large relative errors of E[W] at low load
        concern waits that are tiny next to E[S]; the p99 of the response is
        within 1 % there.  The tail error grows with scv and with rho: treat
        p99 figures for scv >= 2 as +-25 %.

    References
    ----------
    J. Abate and W. Whitt, "A unified framework for numerically inverting
    Laplace transforms", INFORMS J. Computing 18 (2006) 408-421.
    L. Kleinrock, *Queueing Systems, Vol. 1* (1975), eq. (5.105).
    A. O. Allen (1990), section 6.2; W. Whitt (1993), see :func:`mean_wait`.

    Examples
    --------
    >>> from capacity import fcfs
    >>> round(fcfs.wait_sf(1.0, 8.0, 0.1), 6)     # M/M/1: rho exp(-(mu - lambda) t)
    0.108268
    """
    t = check_nonnegative(t, "t")
    pts = _Points(arrival_rate, service, servers, extra=t)

    def core(model: _Model, m: np.ndarray) -> np.ndarray:
        tt = pts.extra[m]
        out = model.p_wait.copy()
        pos = tt > 0
        if pos.any():
            out[pos] = model.take(np.flatnonzero(pos)).wait_sf(tt[pos])
        return out

    return scalar_out(_dispatch(pts, 1.0, lambda m: 0.0, core))


def response_sf(t: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike, servers: ArrayLike = 1):
    """P(T > t): probability that a request's response time (wait plus its
    own service) exceeds ``t`` seconds.

    Parameters
    ----------
    t : float or array_like
        Response time, seconds (>= 0).
    arrival_rate, service, servers
        As in :func:`mean_wait`.

    Returns
    -------
    float or ndarray
        P(T > t); 1 when unstable; ``P(S > t)`` when ``arrival_rate`` is 0.

    Notes
    -----
    ``T = W + S`` with ``W`` independent of the request's own ``S``.
    One server (exact): ``(1 - W*(s) B*(s)) / s = (1 - B*(s)) / s +
    B*(s) (1 - W*(s)) / s`` is inverted with the Euler algorithm (same
    accuracy as :func:`wait_sf`); deterministic service uses
    ``P(T > t) = P(W > t - D)`` exactly.  Gamma, Erlang and lognormal
    service with scv below 0.1 (near-constant CPU, where that inversion rings
    at the service's near-step): ``P(T > t) = P(S > t) + int_0^t f_S(s)
    P(W > t - s) ds``, 32-point Gauss-Legendre over the normal score of
    ``s``.  Measured against the exact M/E_k/1 chain where ``P(T > t) >
    1e-4`` (``tests/test_fcfs_low_scv.py``): relative error 2e-5 at scv 0.04,
    7e-4 at 0.01, 1e-2 at 0.0033 (was 1e-3, 0.45 and 2.7); what is left is
    the wait's own inversion near its kinks at multiples of ``E[S]``, which
    also limits the far tail at light load (scv 0.001, utilisation 0.004:
    the 1 - 1e-6 quantile 33 % off).

    M/M/c (exact): ``P(T > t) = e^{-mu t} [1 + C mu (1 - e^{-(theta - mu) t})
    / (theta - mu)]``, ``theta = c mu - lambda``, evaluated through
    ``(1 - e^{-x}) / x`` so that ``theta = mu`` (limit
    ``e^{-mu t} (1 + C mu t)``) is smooth.

    M/G/c (**approximation**): the approximate wait of :func:`wait_sf`
    convolved with the exact service distribution (Euler inversion of
    ``W*(s) B*(s)``).

    Examples
    --------
    >>> from capacity import fcfs
    >>> round(fcfs.response_sf(1.0, 8.0, 0.1), 6)   # M/M/1: exp(-(mu - lambda) t)
    0.135335
    """
    t = check_nonnegative(t, "t")
    pts = _Points(arrival_rate, service, servers, extra=t)

    def idle(m):
        return np.asarray(pts.service_at(m).sf(pts.extra[m]), float)

    def core(model: _Model, m: np.ndarray) -> np.ndarray:
        tt = pts.extra[m]
        out = np.empty(model.n)
        zero = tt == 0
        if zero.any():
            s0 = np.asarray(model.take(np.flatnonzero(zero)).svc.sf(0.0), float)
            out[zero] = 1.0 - (1.0 - model.p_wait[zero]) * (1.0 - s0)
        if (~zero).any():
            out[~zero] = model.take(np.flatnonzero(~zero)).response_sf(tt[~zero])
        return out

    return scalar_out(_dispatch(pts, 1.0, idle, core))


def _neg_log_sf(sf: np.ndarray) -> np.ndarray:
    return -np.log(np.maximum(sf, 1e-300))


def _solve(func: Callable[[np.ndarray], np.ndarray], q: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Smallest t with P(X > t) = 1 - q, on -log sf (keeps the far tail's
    precision).  The Euler values carry ~1e-10 noise, so ask for 1e-11."""
    return solve_increasing(lambda x: _neg_log_sf(func(x)), -np.log1p(-q), lo, hi,
                            log=True, rtol=1e-11, iterations=80)


_NEWTON_DONE = 1e-7  # |Newton step| in ln t below which one more step lands within ~1e-14
_NEWTON_ITERATIONS = 60
_NEWTON_RESIDUAL = 1e-6  # |ln P(X > t) - ln(1 - q)| accepted with a tiny step
_NEWTON_FAR = 2.0        # |ln P(X > t) - ln(1 - q)| beyond which ...
_NEWTON_CRAWL = 1e-3     # ... a Newton step below this (in ln t) is no progress: bisect or jump


def _newton_quantile(sf_dens: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
                     q: np.ndarray, guess: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Solve -ln P(X > t) = -ln(1 - q) for t by safeguarded Newton steps on
    u = ln t, with the density from the same inversion as the tail
    (``sf_dens(idx, t)`` gives P(X > t) and the density for the points
    ``idx``).  d/du[-ln sf] = t f / sf.  A bracket [a, b] in u is kept from
    the signs seen so far; a step that leaves it is replaced by bisection
    (or by a jump of e^1.5 while one side is still open).  A point is done
    once its Newton step is below 1e-7 in ln t: with the quadratic
    convergence the step it takes then is accurate to ~1e-14, far below the
    ~1e-10 noise of the Euler values, which therefore sets the accuracy, as
    with any root finder.  Only unfinished points are evaluated again."""
    target = -np.log1p(-q)
    n = q.size
    u = np.log(guess).astype(float)
    a = np.log(np.maximum(lo, 0.0)) if lo is not None else np.full(n, -np.inf)
    a = np.minimum(a, u)
    b = np.full(n, np.inf)
    out = np.exp(u)
    active = np.arange(n)
    for _ in range(_NEWTON_ITERATIONS):
        ua = u[active]
        t = np.exp(ua)
        sf, dens = sf_dens(active, t)
        g = _neg_log_sf(sf) - target[active]
        slope = t * dens / np.maximum(sf, 1e-300)
        below = g < 0
        aa = np.where(below, ua, a[active])
        bb = np.where(below, b[active], ua)
        a[active], b[active] = aa, bb
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = g / slope
        new = ua - step
        newton_ok = np.isfinite(new) & (slope > 0) & (new > aa) & (new < bb) & (np.abs(step) < 3.0)
        # A vanishing step far from the root (a far tail below the inversion's noise, where a
        # noisy density dwarfs P(X > t)) makes no progress: bisect instead.
        # So does a crawl: started in a far tail where P(X > t) is below the inversion's absolute
        # accuracy (~1e-13), the noisy density makes the hazard look huge and every step tiny (a
        # near-constant CPU time at light load took 60 steps of 0.004 there and stopped short).
        stalled = (((np.abs(step) < _NEWTON_DONE) & (np.abs(g) >= _NEWTON_RESIDUAL))
                   | ((np.abs(step) < _NEWTON_CRAWL) & (np.abs(g) > _NEWTON_FAR)))
        newton_ok &= ~stalled
        fallback = np.where(np.isfinite(aa) & np.isfinite(bb), 0.5 * (aa + bb), np.where(below, ua + 1.5, ua - 1.5))
        new = np.where(newton_ok, new, fallback)
        # An iterate that hits the root exactly (g == 0: found in a 99 x 202 M/D/1 grid) is the
        # answer; its zero step equals the bracket's end it just set, so it is not "newton_ok", and
        # the fallback would have returned a point 1.5 away in ln t (the p99.99 at rho 0.32 as 0.97
        # instead of 4.36).
        new = np.where(g == 0, ua, new)
        done = (newton_ok & (np.abs(step) < _NEWTON_DONE)) | (bb - aa < 1e-13) | (g == 0)
        u[active] = new
        finished = active[done]
        out[finished] = np.exp(new[done])
        active = active[~done]
        if active.size == 0:
            break
    else:
        # Never return an unconverged iterate: finish the bracketed ones by bisection, and say
        # NaN where no bracket was found (the callers' tests assert none is).
        out[active] = np.nan
        closed = active[np.isfinite(a[active]) & np.isfinite(b[active])]
        if closed.size:
            lo_u, hi_u = a[closed].copy(), b[closed].copy()
            for _ in range(60):
                mid = 0.5 * (lo_u + hi_u)
                sf, _ = sf_dens(closed, np.exp(mid))
                below = _neg_log_sf(sf) < target[closed]
                lo_u, hi_u = np.where(below, mid, lo_u), np.where(below, hi_u, mid)
                if np.all(hi_u - lo_u < 1e-13):
                    break
            out[closed] = np.exp(0.5 * (lo_u + hi_u))
    return out


def _exponential_wait_guess(model: _Model, q: np.ndarray) -> np.ndarray:
    """t with p_wait exp(-theta t) = 1 - q, floored at 0 (P(wait) may underflow to 0)."""
    with np.errstate(divide="ignore"):
        return np.maximum((np.log(model.p_wait) - np.log1p(-q)) / model.theta, 0.0)


def _wait_quantile_core(model: _Model, q: np.ndarray) -> np.ndarray:
    out = np.zeros(model.n)
    waits = q > 1.0 - model.p_wait
    # Exponential tail: exact for M/M/c, the approximation for M/G/c, and
    # the starting guess for the M/G/1 root finder.
    guess = np.where(waits, _exponential_wait_guess(model, q), 0.0)
    closed = waits & ~model.euler_wait
    out[closed] = guess[closed]
    e = waits & model.euler_wait
    if e.any():
        idx = np.flatnonzero(e)
        sub = model.take(idx)
        g = np.maximum(guess[idx], 1e-12 * sub.m1)
        out[idx] = _newton_quantile(lambda i, t: sub.take(i).wait_sf_dens(t), q[idx], g, None)
    return out


def _response_quantile_core(model: _Model, q: np.ndarray) -> np.ndarray:
    if model.det:
        return model.m1 + _wait_quantile_core(model, q)
    svc_q = np.asarray(_service_ppf(model.svc, q), float)
    svc_q = np.broadcast_to(svc_q, q.shape)
    if model.exp:
        wait_guess = _exponential_wait_guess(model, q)
        lo = np.maximum(0.999 * svc_q, 1e-9 * model.m1)
        hi = np.maximum(svc_q + wait_guess, model.m1) * 1.5
        return _solve(model.response_sf, q, lo, hi)
    # T >= S and T >= W: start from the larger of the service quantile and
    # the exponential-tail guess of the wait quantile.
    wait_guess = _exponential_wait_guess(model, q)
    lo = np.maximum(svc_q, 1e-9 * model.m1)
    guess = np.maximum(lo, wait_guess) * 1.05
    return _newton_quantile(lambda i, t: model.take(i).response_sf_dens(t), q, guess, lo)


def wait_quantile(q: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike, servers: ArrayLike = 1):
    """Quantile of the waiting time: the smallest ``t`` with P(W <= t) >= q.

    Parameters
    ----------
    q : float or array_like
        Probability in (0, 1), e.g. 0.99 for the p99.
    arrival_rate, service, servers
        As in :func:`mean_wait`.

    Returns
    -------
    float or ndarray
        Seconds; 0 when ``q <= P(W = 0)`` (``1 - rho`` for one server,
        ``1 - C`` for several), ``inf`` when unstable.

    Notes
    -----
    M/M/c and the M/G/c approximation: ``t = ln(C / (1 - q)) / theta`` in
    closed form.  M/G/1 (exact): root of ``-ln P(W > t) = -ln(1 - q)``
    with :func:`wait_sf` (safeguarded Newton steps on ``ln t`` with the
    density inverted from the same transform values, stopped after a step
    below 1e-7 in ``ln t``, so the accuracy is that of the inversion), all
    points solved at once.

    Examples
    --------
    >>> from capacity import Service, fcfs
    >>> round(fcfs.wait_quantile(0.99, 8.0, 0.1), 6)   # M/M/1: ln(rho / 0.01) / (mu - lambda)
    2.191013
    >>> fcfs.wait_quantile(0.1, 8.0, Service.deterministic(0.1))   # 20 % of requests do not wait
    0.0
    """
    q = check_quantile(q, "q")
    pts = _Points(arrival_rate, service, servers, extra=q)
    return scalar_out(_dispatch(pts, np.inf, lambda m: 0.0,
                          lambda model, m: _wait_quantile_core(model, pts.extra[m])))


def response_quantile(q: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike, servers: ArrayLike = 1):
    """Quantile of the response time (wait plus own service), seconds.

    Parameters
    ----------
    q : float or array_like
        Probability in (0, 1), e.g. 0.99 for the p99.
    arrival_rate, service, servers
        As in :func:`mean_wait`.

    Returns
    -------
    float or ndarray
        The smallest ``t`` with P(T <= t) >= q; ``inf`` when unstable, the
        service quantile when ``arrival_rate`` is 0.

    Notes
    -----
    Root of ``-ln P(T > t) = -ln(1 - q)`` with :func:`response_sf`, all
    points at once (safeguarded Newton on ``ln t`` as in
    :func:`wait_quantile`; Illinois regula falsi for the closed-form M/M/c) (bracketed from below by the service quantile, since
    ``T >= S``).  Deterministic service: ``D`` plus the wait quantile,
    exactly.  Exact for one server and for M/M/c, the M/G/c approximation
    otherwise (see :func:`wait_sf`).

    Examples
    --------
    >>> from capacity import Service, fcfs
    >>> round(fcfs.response_quantile(0.99, 8.0, 0.1), 6)   # M/M/1: ln(100) / (mu - lambda)
    2.302585
    >>> round(fcfs.response_quantile(0.99, 8.0, Service.erlang(0.1, 4)), 4)
    1.4287
    """
    q = check_quantile(q, "q")
    pts = _Points(arrival_rate, service, servers, extra=q)
    return scalar_out(_dispatch(pts, np.inf, lambda m: np.asarray(pts.service_at(m).ppf(pts.extra[m]), float),
                          lambda model, m: _response_quantile_core(model, pts.extra[m])))
