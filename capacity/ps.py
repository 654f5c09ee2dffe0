"""Processor sharing (PS): how an event loop or a time-sliced CPU serves requests.

With ``n`` requests present and ``c`` cores, every request progresses at rate
``min(1, c/n)`` (egalitarian processor sharing; ``c = 1`` is the classic
M/G/1-PS queue, the model of a Node.js-style event loop that interleaves
in-flight requests).  Arrivals are Poisson with rate ``arrival_rate``
(requests/s); ``service`` is the CPU time one request needs (seconds).

Means are exact and insensitive (they depend on the service distribution
only through its mean).  The response-time distribution is not: PS has a
much heavier tail than FCFS at the same mean (at utilisation 0.5 and
E[S] = 1 s exponential, the p99.9 is 22.2 s under PS and 13.8 s under FCFS).

* One core: exact for phase-type (PH) service via the sojourn-time Laplace
  transform derived below (see :func:`response_sf`), numerically inverted
  (Euler algorithm); other service distributions are replaced by a PH
  moment fit (:mod:`capacity.phasetype`), an approximation whose error is
  measured in :func:`response_quantile`.
* ``c`` cores: exact for exponential service (a tagged-request Markov chain);
  other service distributions raise ``NotImplementedError`` for the
  distribution (the means stay exact).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import eigh_tridiagonal

from ._common import prepare, solve_increasing
from ._laplace import euler_nodes, invert
from ._validation import as_float_array, check_nonnegative, check_quantile
from .distributions import Service
from .erlang import erlang_c
from .phasetype import phase_type

__all__ = ["conditional_mean_response", "mean_number", "mean_response", "response_quantile", "response_sf"]

ArrayLike = Any

# Gauss-Legendre rule used on every quadrature panel, and the largest phase
# rotation / decay (radians, or e-folds) allowed across one panel.  Measured
# against the exact M/M/1-PS chain: 16 nodes on 10-radian panels left 3e-5
# at rho = 0.9 (the integrand has complex singularities near the real axis
# at high load); 32 nodes on 3-radian panels stay below 1e-9 up to rho = 0.99.
_GL_X, _GL_W = np.polynomial.legendre.leggauss(32)
_PANEL_SPAN = 3.0
# Beyond tau = _HORIZON * t the factor exp(-Re(s) tau) = exp(-11.5 * 3.3) < 4e-17
# at every Euler node, so the size integral can stop there.
_HORIZON = 3.3
# Size quantile beyond which the service-time density is ignored.
_SIZE_TAIL = 1e-17


def _out(arr):
    arr = np.asarray(arr)
    return arr.item() if arr.ndim == 0 else arr


# ---------------------------------------------------------------------------
# Batched matrix exponential (scipy.linalg.expm loops in Python over a batch)
# ---------------------------------------------------------------------------
def _expm(a: np.ndarray) -> np.ndarray:
    """expm of a stack of small matrices: scaling and squaring with a
    degree-14 Taylor polynomial on norms <= 1/2 (truncation < 3e-17)."""
    a = np.asarray(a)
    d = a.shape[-1]
    norm = np.max(np.sum(np.abs(a), axis=-1), axis=-1)
    with np.errstate(divide="ignore"):
        j = np.maximum(0, np.ceil(np.log2(np.maximum(norm, 1e-300) / 0.5))).astype(int)
    scaled = a * np.ldexp(1.0, -j)[..., None, None]
    eye = np.eye(d, dtype=a.dtype)
    out = eye + scaled / 14.0
    for k in range(13, 0, -1):
        out = eye + (scaled @ out) / k
    jmax = int(j.max()) if j.size else 0
    for i in range(jmax):
        sq = out @ out
        out = np.where((i < j)[..., None, None], sq, out)
    return out


# ---------------------------------------------------------------------------
# One core: sojourn-time transform for PH service
# ---------------------------------------------------------------------------
def _ph_size_horizon(beta: np.ndarray, tm: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """A size x with P(S > x) <= _SIZE_TAIL, per parameter point (doubling)."""
    x = np.array(mean, dtype=float, copy=True)
    ones = np.ones(beta.shape)
    for _ in range(80):
        sf = np.einsum("...i,...ij,...j->...", beta, _expm(tm * x[..., None, None]), ones)
        big = sf > _SIZE_TAIL
        if not big.any():
            break
        x = np.where(big, 2.0 * x, x)
    return x


def _ps1_lst(s: np.ndarray, lam: np.ndarray, beta: np.ndarray, tm: np.ndarray,
             horizon: np.ndarray) -> np.ndarray:
    """E[exp(-s T)] of the M/PH/1-PS response time, batched.

    ``s``: (n, K) complex; ``lam``, ``horizon``: (n,); ``beta``: (n, m);
    ``tm``: (n, m, m).  Returns (n, K).

    E[exp(-s T(x))] = (1 - rho) exp(-(s + lam) x) / (z(x) - rho pi_e y(x)) with
    (y, z)(x) = expm(M x) (1, ..., 1), M = [[Tm - (s + lam) I, t], [-lam beta, 0]],
    integrated against the PH density beta expm(Tm x) t by composite
    Gauss-Legendre quadrature; see response_sf for the derivation.
    """
    n, nk = s.shape
    m = beta.shape[-1]
    tvec = -tm.sum(axis=-1)
    inv_row = np.linalg.solve(np.swapaxes(-tm, -1, -2), beta[..., None])[..., 0]  # beta (-Tm)^-1
    mean = inv_row.sum(axis=-1)
    rho = lam * mean
    pi_e = inv_row / mean[:, None]
    big = np.zeros((n, nk, m + 1, m + 1), dtype=complex)
    eye = np.eye(m)
    big[..., :m, :m] = tm[:, None] - (s + lam[:, None])[..., None, None] * eye
    big[..., :m, m] = tvec[:, None, :]
    big[..., m, :m] = -(lam[:, None] * beta)[:, None, :]
    # Common number of panels; each element has its own panel width.
    rate = np.max(np.abs(np.diagonal(tm, axis1=-2, axis2=-1)), axis=-1) + lam
    spin = np.max(np.abs(s), axis=-1)
    panels = int(np.clip(np.max(np.ceil(horizon * np.maximum(spin, rate) / _PANEL_SPAN)), 1, 100_000))
    width = horizon / panels
    step = _expm(big * width[:, None, None, None])
    step_size = _expm(tm * width[:, None, None])
    state = np.ones((n, nk, m + 1), dtype=complex)
    logz = np.zeros((n, nk), dtype=complex)
    vrow = beta.astype(float).copy()
    states = np.empty((panels, n, nk, m + 1), dtype=complex)
    logzs = np.empty((panels, n, nk), dtype=complex)
    vrows = np.empty((panels, n, m))
    for p in range(panels):
        states[p], logzs[p], vrows[p] = state, logz, vrow
        state = (step @ state[..., None])[..., 0]
        z = state[..., m]
        # (y, z) only matters up to a common factor: renormalise so nothing over/underflows.
        state = state / z[..., None]
        logz = logz + np.log(z)
        vrow = np.einsum("ni,nij->nj", vrow, step_size)
    start = np.arange(panels)[:, None] * width  # (P, n)
    total = np.zeros((n, nk), dtype=complex)
    for xg, wg in zip(_GL_X, _GL_W):
        frac = 0.5 * (xg + 1.0)
        e_node = _expm(big * (frac * width)[:, None, None, None])
        f_node = _expm(tm * (frac * width)[:, None, None])
        node = (e_node @ states[..., None])[..., 0]
        x = start + frac * width  # (P, n)
        dens = np.einsum("pni,nij,nj->pn", vrows, f_node, tvec)
        denom = node[..., m] - rho[None, :, None] * np.einsum("pnki,ni->pnk", node[..., :m], pi_e)
        expo = -(s[None] + lam[None, :, None]) * x[..., None] - logzs
        g = (1.0 - rho)[None, :, None] * np.exp(expo) / denom
        total += (0.5 * wg) * width[:, None] * np.sum(dens[..., None] * g, axis=0)
    return total


def _pad_ph(beta: np.ndarray, tm: np.ndarray, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    m = beta.shape[-1]
    return (np.broadcast_to(beta, shape + (m,)).reshape(-1, m),
            np.broadcast_to(tm, shape + (m, m)).reshape(-1, m, m))


_CHUNK_BYTES = 64e6


def _ps1_sf_flat(t: np.ndarray, lam: np.ndarray, beta: np.ndarray, tm: np.ndarray,
                 size_horizon: np.ndarray) -> np.ndarray:
    """P(T > t) for flat arrays of stable M/PH/1-PS points, t > 0."""
    out = np.empty(t.shape)
    m = beta.shape[-1]
    # Chunk the batch only to bound memory (the panel states of one chunk).
    per_elem = 31 * (m + 1) * 16 * 400
    chunk = max(1, int(_CHUNK_BYTES // per_elem))
    for lo in range(0, t.size, chunk):
        sl = slice(lo, lo + chunk)
        tt = t[sl]
        horizon = np.minimum(_HORIZON * tt, size_horizon[sl])
        s = euler_nodes(tt)
        lst = _ps1_lst(s, lam[sl], beta[sl], tm[sl], horizon)
        values = (1.0 - lst) / s
        out[sl] = invert(lambda _s, v=values: v, tt)
    return out


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


def _truncation(rho: float, c: int) -> int:
    # Beyond c the stationary law is geometric with ratio rho: stop where it is < 1e-18.
    return int(c + 10 + np.ceil(np.log(1e-18) / np.log(max(rho, 1e-300))) if rho > 0 else c + 10)


def _mmc_sf_modes(lam: float, mu: float, c: int) -> tuple[np.ndarray, np.ndarray]:
    """P(T > t) = sum_j coef_j exp(eig_j t) for the M/M/c-PS response time.

    State: the number n of other requests.  The tagged request is served at
    rate mu min(1, c/(n+1)) (and leaves), the others leave at rate
    n mu min(1, c/(n+1)), arrivals at rate lam; at the tagged arrival n has
    the stationary M/M/c law (PASTA).  The generator is a birth-death matrix
    with killing, symmetrised by D = diag(sqrt(w)), w_{n+1}/w_n = b_n/d_{n+1}.
    """
    if lam == 0.0:
        return np.array([1.0]), np.array([-mu])
    nmax = _truncation(lam / (c * mu), c)
    n = np.arange(nmax + 1)
    share = mu * np.minimum(1.0, c / (n + 1.0))
    birth = np.where(n < nmax, lam, 0.0)
    death = n * share
    diag = -(birth + death + share)
    off = np.sqrt(lam * death[1:])
    logw = np.concatenate([[0.0], np.cumsum(np.log(lam) - np.log(death[1:]))])
    logw -= logw.max()
    alpha = _mmc_stationary(lam, mu, c, nmax)
    with np.errstate(divide="ignore"):
        left = np.where(alpha > 0, np.exp(np.log(np.maximum(alpha, 1e-320)) - 0.5 * logw), 0.0)
    right = np.exp(0.5 * logw)
    eig, vec = eigh_tridiagonal(diag, off)
    coef = (left @ vec) * (vec.T @ right)
    return coef, eig


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


def _unique_points(*arrays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    stacked = np.stack([np.asarray(a, dtype=float).ravel() for a in arrays], axis=-1)
    uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
    return uniq, inverse.ravel()


# ---------------------------------------------------------------------------
# Shared evaluation of P(T > t) on a broadcast batch
# ---------------------------------------------------------------------------
class _SfEvaluator:
    """Precomputes everything that does not depend on t for the stable
    points of a batch, then evaluates P(T > t) for any t of the batch shape."""

    def __init__(self, inputs, shape: tuple):
        self.shape = shape
        svc: Service = inputs.service
        lam = np.broadcast_to(inputs.arrival_rate, shape).ravel()
        servers = np.broadcast_to(inputs.servers, shape).ravel()
        stable = np.broadcast_to(inputs.stable, shape).ravel()
        self.stable = stable
        self.one = stable & (servers == 1)
        self.many = stable & (servers > 1)
        if self.many.any():
            if svc.family != "exponential":
                raise NotImplementedError(
                    "the response-time distribution of processor sharing with servers > 1 is only "
                    f"implemented for exponential service, got {svc.family!r}; the means "
                    "(mean_response, conditional_mean_response) are exact for any service")
            mean = np.broadcast_to(np.asarray(svc.mean, dtype=float), shape).ravel()
            uniq, inv = _unique_points(lam[self.many], mean[self.many], servers[self.many])
            # One eigen-decomposition per distinct (rate, mean, servers) point: a loop over the
            # few distinct points of a batch, not over t.
            self.modes = [_mmc_sf_modes(a, 1.0 / b, int(c)) for a, b, c in uniq]
            self.many_index = inv
        if self.one.any():
            beta, tm = phase_type(svc)
            beta, tm = _pad_ph(beta, tm, shape)
            self.beta, self.tm = beta[self.one], tm[self.one]
            self.lam1 = lam[self.one]
            mean_ph = np.linalg.solve(np.swapaxes(-self.tm, -1, -2), self.beta[..., None])[..., 0].sum(-1)
            self.size_horizon = _ph_size_horizon(self.beta, self.tm, mean_ph)

    def __call__(self, t: np.ndarray) -> np.ndarray:
        t = np.broadcast_to(t, self.shape).ravel()
        out = np.ones(t.shape)
        pos = t > 0
        if self.one.any():
            sel = self.one & pos
            sub = pos[self.one]
            if sel.any():
                out[sel] = _ps1_sf_flat(t[sel], self.lam1[sub], self.beta[sub], self.tm[sub],
                                        self.size_horizon[sub])
        if self.many.any():
            tm_ = t[self.many]
            vals = np.empty(tm_.shape)
            for i, (coef, eig) in enumerate(self.modes):
                idx = self.many_index == i
                vals[idx] = np.exp(np.asarray(tm_[idx])[:, None] * eig) @ coef
            out[self.many] = np.where(tm_ > 0, vals, 1.0)
        return np.clip(out, 0.0, 1.0).reshape(self.shape)


# ---------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------
def mean_response(arrival_rate: ArrayLike, service: Service | ArrayLike, servers: ArrayLike = 1):
    """Mean response time E[T] of processor sharing, seconds.

    Parameters
    ----------
    arrival_rate : float or array_like
        Poisson arrival rate, requests/s (>= 0).
    service : Service or float
        CPU time per request (a :class:`~capacity.Service`, or a mean in
        seconds meaning exponential).
    servers : int or array_like of int
        Cores sharing the requests (each request gets ``min(1, c/n)`` of a core).

    Returns
    -------
    float or ndarray
        E[T] in seconds; ``inf`` where the utilisation is >= 1.

    Notes
    -----
    Exact and insensitive (any service distribution with that mean).  One
    core: ``E[T] = E[S] / (1 - rho)``.  ``c`` cores: the M/G/c-PS queue is
    symmetric, so its number in system has the M/M/c law and (Little)
    ``E[T] = E[S] + C(c, a) E[S] / (c - a)`` with ``a = arrival_rate E[S]``
    and ``C`` the Erlang C probability.

    References
    ----------
    L. Kleinrock, *Queueing Systems vol. 2*, Wiley 1976, section 4.4.
    F. P. Kelly, *Reversibility and Stochastic Networks*, Wiley 1979, ch. 3
    (symmetric queues, insensitivity).

    Examples
    --------
    >>> from capacity import ps
    >>> ps.mean_response(0.5, 1.0)
    2.0
    >>> round(ps.mean_response(1.5, 1.0, servers=2), 6)  # M/M/2: 1 + C/(c-a)
    2.285714
    """
    q = prepare(arrival_rate, service, servers)
    return _out(_mean_response(q))


def _mean_response(q) -> np.ndarray:
    c = np.broadcast_to(q.servers, q.shape)
    a = np.broadcast_to(q.offered_load, q.shape)
    es = np.broadcast_to(q.mean_service, q.shape)
    stable = np.broadcast_to(q.stable, q.shape)
    a_ok = np.where(stable, a, 0.0)
    wait = np.asarray(erlang_c(c, a_ok), dtype=float) * es / np.where(stable, c - a_ok, 1.0)
    return np.where(stable, es + wait, np.inf)


def mean_number(arrival_rate: ArrayLike, service: Service | ArrayLike, servers: ArrayLike = 1):
    """Mean number of requests in the system (in service), E[N].

    Parameters
    ----------
    arrival_rate, service, servers
        As in :func:`mean_response`.

    Returns
    -------
    float or ndarray
        ``E[N] = arrival_rate * E[T]`` (Little's law); ``inf`` where unstable.
        One core: ``rho / (1 - rho)``.

    Notes
    -----
    Exact and insensitive (the number in system has the M/M/c law).

    References
    ----------
    J. D. C. Little, "A proof for the queuing formula L = lambda W",
    Operations Research 9 (1961) 383-387.

    Examples
    --------
    >>> from capacity import ps
    >>> ps.mean_number(0.5, 1.0)
    1.0
    """
    q = prepare(arrival_rate, service, servers)
    lam = np.broadcast_to(q.arrival_rate, q.shape)
    et = _mean_response(q)
    return _out(np.where(np.isfinite(et), lam * np.where(np.isfinite(et), et, 0.0), np.inf))


def conditional_mean_response(size: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike,
                              servers: ArrayLike = 1):
    """Mean response time of a request that needs ``size`` seconds of CPU.

    Parameters
    ----------
    size : float or array_like
        The request's CPU time x, seconds (>= 0).
    arrival_rate, service, servers
        As in :func:`mean_response`.

    Returns
    -------
    float or ndarray
        E[T | S = x] in seconds; ``inf`` where the utilisation is >= 1.

    Notes
    -----
    One core: ``E[T(x)] = x / (1 - rho)`` exactly, for any service
    distribution (Kleinrock 1976, eq. 4.17) -- every request is slowed
    down by the same factor.

    ``c`` cores: ``E[T(x)] = x E[T] / E[S]`` with ``E[T]`` from
    :func:`mean_response`, again linear and insensitive.  The M/G/c-PS queue
    is symmetric (Kelly 1979) and a special case of Cohen's (1979)
    generalised processor sharing, whose conditional mean sojourn time is
    insensitive to the service distribution beyond its mean.  For
    exponential service we verified linearity independently: the tagged
    request's chain in attained-service time (real time runs at
    ``max(1, (n+1)/c)`` per unit of attained service, arrivals at
    ``arrival_rate * max(1, (n+1)/c)``, each other request leaves at rate
    ``1/E[S]``; ``_mmc_cond_mean_modes``) gives the same slope at x -> 0 and
    x -> inf to 1e-12 (``tests/test_ps.py``), and a simulation with H2
    service (scv 4, c = 2) agrees within its standard error.

    References
    ----------
    J. W. Cohen, "The multiple phase service network with generalized
    processor sharing", Acta Informatica 12 (1979) 245-284.
    F. P. Kelly, *Reversibility and Stochastic Networks*, Wiley 1979, ch. 3.
    L. Kleinrock, *Queueing Systems vol. 2*, Wiley 1976, section 4.4.

    Examples
    --------
    >>> from capacity import ps
    >>> ps.conditional_mean_response(0.3, 0.5, 1.0)
    0.6
    """
    x = check_nonnegative(size, "size")
    q = prepare(arrival_rate, service, servers)
    shape = np.broadcast_shapes(x.shape, q.shape)
    xs = np.broadcast_to(x, shape)
    rho = np.broadcast_to(q.utilization, shape)
    c = np.broadcast_to(q.servers, shape)
    stable = np.broadcast_to(q.stable, shape)
    out = np.where(stable, xs / np.where(stable, 1.0 - rho, 1.0), np.inf)
    # Linear in x for any number of cores (see Notes): x E[T] / E[S].
    ratio = np.broadcast_to(_mean_response(q) / q.mean_service, shape)
    out = np.where(stable, xs * np.where(stable, ratio, 0.0), np.inf)
    return _out(out)


def response_sf(t: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike,
                servers: ArrayLike = 1):
    """P(T > t): probability that a request's response time exceeds ``t``.

    Parameters
    ----------
    t : float or array_like
        Time, seconds (>= 0).
    arrival_rate, service, servers
        As in :func:`mean_response`.

    Returns
    -------
    float or ndarray
        P(T > t); 1 where the utilisation is >= 1.

    Notes
    -----
    **One core, PH service (exact).**  Change time to the tagged request's
    attained service ``a``: with ``n`` requests present each is served at
    rate ``1/n``, so in ``a`` every request present advances through its
    phases at its native rates, independently, and new requests arrive at
    rate ``lambda`` per request present -- a branching process, and
    ``T(x) = int_0^x N(a) da``.  For a request in phase ``i`` with remaining
    horizon ``tau``, ``phi_i(s, tau) = E[exp(-s * attained time of it and its
    descendants within tau)]`` solves the matrix Riccati equation
    ``phi' = -s phi + Tm phi + t + lambda phi (beta phi - 1)``, ``phi(0) = 1``.
    At the tagged arrival the number of others is geometric,
    ``(1 - rho) rho^n``, with independent equilibrium residual sizes
    (initial vector ``pi_e = beta (-Tm)^-1 / E[S]``), hence

        E[exp(-s T(x))] = exp(-s x - lambda int_0^x (1 - beta phi)) (1 - rho) / (1 - rho pi_e phi(x)).

    The substitution ``phi = y / z``, ``z' = -lambda beta y`` linearises the
    Riccati equation: ``(y, z)' = M (y, z)`` with
    ``M = [[Tm - (s + lambda) I, t], [-lambda beta, 0]]``, so

        E[exp(-s T(x))] = (1 - rho) exp(-(s + lambda) x) / (z(x) - rho pi_e y(x)),
        (y, z)(x) = expm(M x) (1, ..., 1),

    which for exponential service is the classic M/M/1-PS transform
    (Coffman, Muntz and Trotter 1970).  The unconditional transform
    integrates this against the PH density by composite 32-point
    Gauss-Legendre quadrature (panels spanning at most 3 radians of
    rotation / e-folds, horizon ``min(3.3 t, size with tail < 1e-17)``),
    and ``(1 - E[exp(-sT)])/s`` is inverted by the Euler algorithm (31
    nodes).  Agreement with an independent tagged-request Markov chain:
    ~1e-9 absolute (exponential, H2, Erlang-2; ``tests/test_ps.py``).

    **Other service distributions, one core**: the PH moment fit of
    :func:`capacity.phasetype.phase_type` (approximation; errors in
    :func:`response_quantile`).

    **c cores, exponential service (exact)**: the tagged-request chain of
    :func:`response_quantile`.

    References
    ----------
    E. G. Coffman, R. R. Muntz and H. Trotter, "Waiting time distributions
    for processor-sharing systems", JACM 17 (1970) 123-130.
    T. J. Ott, "The sojourn-time distribution in the M/G/1 queue with
    processor sharing", J. Appl. Prob. 21 (1984) 360-378.
    S. F. Yashkov, "Processor-sharing queues: some progress in analysis",
    Queueing Systems 2 (1987) 1-17.
    J. Abate and W. Whitt, INFORMS J. Computing 18 (2006) 408-421.

    Examples
    --------
    >>> from capacity import ps
    >>> round(ps.response_sf(2.0, 0.5, 1.0), 6)
    0.321267
    """
    t_arr = check_nonnegative(t, "t")
    q = prepare(arrival_rate, service, servers)
    shape = np.broadcast_shapes(t_arr.shape, q.shape)
    ev = _SfEvaluator(q, shape)
    return _out(ev(np.broadcast_to(t_arr, shape)))


def response_quantile(q: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike,
                      servers: ArrayLike = 1):
    """Quantile of the response time under processor sharing, seconds.

    Parameters
    ----------
    q : float or array_like
        Probability in (0, 1), e.g. 0.99 for the p99.
    arrival_rate, service, servers
        As in :func:`mean_response`.

    Returns
    -------
    float or ndarray
        The t with P(T <= t) = q; ``inf`` where the utilisation is >= 1.

    Notes
    -----
    Solves ``-log P(T > t) = -log(1 - q)`` (vectorised Illinois solver) on
    :func:`response_sf`.  Exact for exponential, Erlang, hyperexponential
    and integer-shape gamma service on one core and for exponential service
    on ``c`` cores (numerical error ~1e-9 absolute in the probability, so
    tail quantiles are reliable to about q = 1 - 1e-6).

    Other service distributions on one core use a PH moment fit (an
    approximation).  Measured relative error of the quantiles against exact
    PS simulation (lognormal service, E[S] = 1 s):

    Relative error = model / simulation - 1 (3e6 s seeded runs of
    :func:`capacity.sim.simulate`, 1.5e6-2.7e6 requests, 99 % batch-means
    half-widths in brackets; script in the project report)::

        service               rho   p50             p99             p99.9
        lognormal scv 1       0.5   -5.1% (0.5%)    +1.4% (1.2%)    -8.8% (2.0%)
        lognormal scv 1       0.9   -11%  (2.6%)    +3.5% (4.6%)    -6.2% (6.4%)
        lognormal scv 4       0.5   +31%  (0.7%)    -23%  (1.6%)    +20%  (3.0%)
        lognormal scv 4       0.9   +25%  (3.8%)    -22%  (6.4%)    +6.5% (7.4%)
        deterministic (E24)   0.5   -2.1% (0.3%)    +5.6% (1.2%)    +9.7% (3.2%)
        deterministic (E24)   0.9   -1.3% (2.0%)    +1.4% (7.1%)    +0.1% (10%)

    The PS tail depends on the whole size distribution, not just on two or
    three moments: treat quantiles for fitted (non-PH) services as rough
    (+-10 % at scv 1, +-30 % at scv 4); supply a hyperexponential or Erlang
    service when the measured sizes allow it.

    References
    ----------
    See :func:`response_sf`.

    Examples
    --------
    At utilisation 0.5 the PS p99.9 is 22.2 s, against 13.8 s for FCFS:

    >>> from capacity import ps
    >>> round(ps.response_quantile(0.999, 0.5, 1.0), 2)
    22.2
    """
    qq = check_quantile(q, "q")
    inp = prepare(arrival_rate, service, servers)
    shape = np.broadcast_shapes(qq.shape, inp.shape)
    ev = _SfEvaluator(inp, shape)
    stable = np.broadcast_to(inp.stable, shape)
    qb = np.broadcast_to(qq, shape)
    target = np.where(stable, -np.log1p(-qb), np.nan)
    es = np.broadcast_to(inp.mean_service, shape)
    et = np.where(stable, _mean_response(inp), 1.0)
    lo = 0.1 * es * np.minimum(-np.log1p(-qb), 1.0)
    hi = np.maximum(2.0 * et * -np.log1p(-qb), 2.0 * lo)

    def func(tt):
        with np.errstate(divide="ignore"):
            return -np.log(np.maximum(ev(tt), 1e-300))

    if not stable.any():
        return _out(np.full(shape, np.inf))
    res = solve_increasing(func, target, lo, hi, log=True, rtol=1e-9)
    return _out(np.where(stable, res, np.inf))
