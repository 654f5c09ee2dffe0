"""Overload: bursts, backlogs, timeouts, retries, and what happens when a service falls behind.

Steady-state queueing formulas (:mod:`capacity.fcfs`, :mod:`capacity.ps`)
say nothing once load exceeds capacity.  This module answers the questions
a team asks during and after such an incident:

* :func:`backlog` -- how much CPU work piles up during a burst (fluid
  Lindley recursion on a per-second rate series), how long a new request
  would wait, for how many seconds that wait exceeds the timeout, and how
  long the service takes to recover.
* :func:`ps_growth_rate`, :func:`ps_fluid_completion`,
  :func:`fcfs_overload_wait` -- the transient laws of an overloaded
  processor-sharing server (Jean-Marie & Robert 1994: the number present
  grows like ``alpha * t`` and a request of size ``x`` arriving ``u`` seconds
  into the overload leaves near ``u * exp(alpha x)``) and of FCFS (a request
  arriving at ``u`` waits about ``(rho - 1) u``).  Derivations:
  :func:`capacity.symbolic.ps_overload_growth_rate`,
  :func:`capacity.symbolic.ps_overload_completion_time`,
  :func:`capacity.symbolic.fcfs_overload_wait`.
* :func:`goodput` -- completions within the timeout per second against
  offered load, for PS and FCFS, with the server that keeps computing
  abandoned requests (what Node.js does), drops them at the timeout, skips
  requests that can no longer finish in time, or serves adaptive LIFO.
* :func:`retry_fixed_points` -- the effective load with client retries,
  every fixed point and its stability, and the bistable (metastable) range.
* :func:`simultaneous_burst` and :func:`fit_staircase` -- the seed article's
  30-request experiment.
* :func:`incident_traffic`, :func:`replay`, :func:`what_if` -- replay a
  traffic shape through :func:`capacity.sim.simulate` and compare fixes.

Units: seconds and requests per second everywhere.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, special

from .. import fcfs as _fcfs
from .. import ps as _ps
from .._checks import (
    as_float_array,
    check_choice,
    check_nonnegative,
    check_positive,
    check_servers,
    scalar_out,
)
from .._common import prepare
from ..distributions import Service, as_service

__all__ = [
    "BacklogResult",
    "FixedPoint",
    "ReplayResult",
    "RetryAnalysis",
    "Staircase",
    "backlog",
    "fcfs_overload_wait",
    "fit_staircase",
    "goodput",
    "goodput_method",
    "incident_traffic",
    "ps_fluid_completion",
    "ps_fluid_sojourn",
    "ps_growth_rate",
    "rate_limit",
    "replay",
    "retry_fixed_points",
    "simultaneous_burst",
    "what_if",
    "INCIDENT_COST_FROM_CPU",
    "INCIDENT_COST_FROM_LOG",
]

ArrayLike = Any

DISCIPLINES = ("ps", "fcfs")
ON_TIMEOUT = ("continue", "drop", "deadline")
QUEUES = ("fifo", "adaptive_lifo")


def _rates(rate_series: Any, name: str = "rate_series") -> tuple[np.ndarray, Any]:
    """A 1-d float array of non-negative finite rates (and the Series index, if any)."""
    index = None
    if isinstance(rate_series, pd.Series):
        index = rate_series.index
        values = rate_series.to_numpy(dtype=float, na_value=np.nan)
    else:
        values = rate_series
    arr = check_nonnegative(values, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (one rate per bucket), got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty, got {rate_series!r}")
    return arr, index


# ============================================================================ 1. backlog
@dataclass(frozen=True)
class BacklogResult:
    """Fluid backlog of a burst (see :func:`backlog`).

    Attributes
    ----------
    table : pandas.DataFrame
        One row per bucket: ``arrivals`` (requests in the bucket),
        ``offered_work`` (s of CPU), ``backlog`` (s of CPU queued at the end of
        the bucket), ``backlog_delay`` (s: how long a FCFS arrival at the end
        of the bucket would wait, ``backlog / servers``), ``overloaded``
        (offered work above capacity in that bucket).
    peak_backlog : float
        Largest backlog, seconds of CPU work.
    peak_time : float
        End of the bucket holding the peak, seconds from the start.
    peak_delay : float
        ``peak_backlog / servers``, seconds.
    seconds_over_timeout : float
        Total time during which the backlog delay exceeds ``timeout``
        (exact for the piecewise-linear fluid path); NaN without a timeout.
    recovery_time : float
        Seconds from the end of the last overloaded bucket until the backlog
        is back to 0 (extrapolating the last bucket's rate past the end of
        the series); 0 if the backlog is already 0 then, ``inf`` if it never
        drains (the last rate is at or above capacity); NaN if no bucket is
        overloaded.
    """

    table: pd.DataFrame
    peak_backlog: float
    peak_time: float
    peak_delay: float
    seconds_over_timeout: float
    recovery_time: float


def _fluid_lindley(net: np.ndarray, initial: float) -> np.ndarray:
    """B_k = max(0, B_{k-1} + net_k), B_{-1} = initial, as a running minimum.

    With X_k = sum_{j<=k} net_j: B_k = X_k - min(-initial, min_{j<=k} X_j).
    """
    x = np.cumsum(net)
    return x - np.minimum(-initial, np.minimum.accumulate(x))


def backlog(rate_series: ArrayLike, service: Service | ArrayLike, servers: int = 1, *,
            bucket: float = 1.0, timeout: float | None = None, initial: float = 0.0) -> BacklogResult:
    """CPU-work backlog over time from a per-bucket arrival-rate series (fluid Lindley recursion).

    Parameters
    ----------
    rate_series : pandas.Series or array_like
        Arrival rate in each bucket, requests/s (>= 0), piecewise constant.
    service : Service or float
        CPU time per request, s; only its mean is used.
    servers : int
        Cores draining the backlog (capacity ``servers`` CPU-seconds per second).
    bucket : float
        Bucket length, s (> 0).
    timeout : float, optional
        Client timeout, s (> 0), for ``seconds_over_timeout``.
    initial : float
        Backlog at time 0, s of CPU work (>= 0).

    Returns
    -------
    BacklogResult
        Per-bucket table and summary (peak, seconds over the timeout, recovery time).

    Notes
    -----
    Fluid model: in bucket ``k`` work arrives at the constant rate
    ``lambda_k E[S]`` and leaves at rate ``c`` while there is any, so

    ``B_k = max(0, B_{k-1} + (lambda_k E[S] - c) * bucket)``,

    Lindley's recursion with deterministic increments, solved without a
    loop as ``B_k = X_k - min(-B_0, min_{j<=k} X_j)`` with ``X`` the cumulative
    net input.  Inside a bucket the path is linear (until it hits 0), so the
    time spent above a level is exact.  The backlog delay ``B / c`` is the
    wait of a FCFS arrival; under processor sharing it is the time until the
    backlog present now is cleared, the order of magnitude of every
    in-flight request's remaining time.  Randomness (Poisson arrivals,
    variable sizes) adds queueing on top: the fluid backlog is what the
    *averages* force, a lower bound on the mean of the stochastic backlog
    (Jensen), and close to it once the backlog is many service times deep.

    References
    ----------
    D. V. Lindley, "The theory of queues with a single server", Proc.
    Cambridge Philos. Soc. 48 (1952) 277-289.  H. Chen and D. D. Yao,
    *Fundamentals of Queueing Networks*, Springer (2001), ch. 6 (fluid
    limits).

    Examples
    --------
    Ten seconds at 2 req/s of 1 s each on one core, then idle:

    >>> from capacity.overload import backlog
    >>> r = backlog([2.0] * 10 + [0.0] * 20, 1.0, timeout=5.0)
    >>> r.peak_backlog, r.recovery_time, r.seconds_over_timeout
    (10.0, 10.0, 10.0)
    """
    rates, index = _rates(rate_series)
    mean = np.asarray(as_service(service).mean, dtype=float)
    if mean.ndim:
        raise ValueError(f"service must have scalar parameters here, got parameter shape {mean.shape}")
    c_arr = check_servers(servers)
    if c_arr.ndim:
        raise ValueError(f"servers must be a single integer, got {servers!r}")
    c = float(c_arr)
    dt = float(check_positive(bucket, "bucket"))
    b0 = float(check_nonnegative(initial, "initial"))
    tau = None if timeout is None else float(check_positive(timeout, "timeout"))
    work = rates * float(mean) * dt
    net = work - c * dt
    b = _fluid_lindley(net, b0)
    overloaded = net > 0
    table = pd.DataFrame({
        "arrivals": rates * dt,
        "offered_work": work,
        "backlog": b,
        "backlog_delay": b / c,
        "overloaded": overloaded,
    }, index=index if index is not None else pd.RangeIndex(rates.size, name="bucket"))
    k_peak = int(np.argmax(b))
    prev = np.concatenate([[b0], b[:-1]])
    if tau is None:
        over = math.nan
    else:
        h = tau * c  # backlog level at which the delay equals the timeout
        slope = net  # per bucket; the path from prev is prev + s * net, s in [0, 1] (clipped at 0 below h)
        with np.errstate(divide="ignore", invalid="ignore"):
            s_cross = (h - prev) / slope
        frac = np.where(slope > 0, 1.0 - np.clip(s_cross, 0.0, 1.0),
                        np.where(slope < 0, np.clip(s_cross, 0.0, 1.0), (prev > h).astype(float)))
        over = float(np.sum(frac) * dt)
    if not overloaded.any():
        recovery = math.nan
    else:
        last = int(np.flatnonzero(overloaded)[-1])
        after = b[last:]
        drained = np.flatnonzero(after[1:] <= 0.0)
        if after[0] <= 0.0:
            recovery = 0.0
        elif drained.size:
            k = last + 1 + int(drained[0])  # first bucket ending at 0
            drain_rate = c * dt - work[k]
            recovery = float((k - last - 1) * dt + b[k - 1] / drain_rate * dt)
        else:
            drain = c - rates[-1] * float(mean)
            recovery = float((rates.size - 1 - last) * dt + b[-1] / drain) if drain > 0 else math.inf
    return BacklogResult(table, float(b[k_peak]), float((k_peak + 1) * dt), float(b[k_peak] / c), over,
                         recovery)


# ============================================================================ 2. transient laws
# Gauss-Legendre rule in the quantile variable for E[exp(-s S)] when the
# family has no closed-form transform (lognormal, scipy): the integrand
# exp(-s ppf(q)) is bounded and smooth on (0, 1).
_GLQ_X, _GLQ_W = np.polynomial.legendre.leggauss(256)
_GLQ_X = 0.5 * (_GLQ_X + 1.0)
_GLQ_W = 0.5 * _GLQ_W


def _lst_real(svc: Service, s: np.ndarray) -> np.ndarray:
    """E[exp(-s S)] for real s >= 0: closed form where Service has one, else quadrature over quantiles."""
    if svc.has_lst:
        return np.asarray(svc.lst(s), dtype=float)
    q = _GLQ_X.reshape((1,) * np.ndim(s) + (-1,))
    x = np.asarray(svc._expand(1).ppf(q), dtype=float)
    return np.sum(np.exp(-np.asarray(s)[..., None] * x) * _GLQ_W, axis=-1)


def _growth_rate(lam: np.ndarray, svc: Service, c: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Positive root of alpha = lam (1 - L(alpha / c)), by vectorised bisection on the
    decreasing function g(a) = lam (1 - L(a/c)) / a - 1 (g(0+) = rho - 1, g(lam) < 0)."""
    rho = lam * mean / c
    over = rho > 1
    lo = np.zeros(np.shape(lam))
    hi = np.where(over, lam, 0.0)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        safe = np.where(over, mid, 1.0)
        g = lam * (1.0 - _lst_real(svc, safe / c)) / safe - 1.0
        lo = np.where(over & (g > 0), mid, lo)
        hi = np.where(over & (g <= 0), mid, hi)
    return np.where(over, 0.5 * (lo + hi), 0.0)


def ps_growth_rate(arrival_rate: ArrayLike, service: Service | ArrayLike, servers: ArrayLike = 1):
    """Growth rate alpha (requests/s) of the number present in an overloaded processor-sharing server.

    Parameters
    ----------
    arrival_rate : float or array_like
        Poisson arrival rate, requests/s.
    service : Service or float
        CPU time per request, s.
    servers : int or array_like
        Cores (each request served at rate ``min(1, c/n)``).

    Returns
    -------
    float or ndarray
        ``alpha``: the number present grows like ``alpha * t`` (requests/s);
        0 when ``rho = lambda E[S] / c <= 1``.

    Notes
    -----
    ``alpha`` is the unique positive root of

    ``alpha = lambda * (1 - E[exp(-alpha S / c)])``

    when ``rho > 1`` (Jean-Marie & Robert 1994 for ``c = 1``: ``N(t)/t ->
    alpha`` almost surely).  Exponential service: ``alpha = lambda - c mu``.
    Always ``alpha >= lambda - c / E[S]`` (the excess arrival rate): the
    server completes small requests faster than average while big ones
    accumulate, so the number grows faster than the work does.  Fluid
    derivation in :func:`capacity.symbolic.ps_overload_growth_rate`.
    Exact (as a limit); uses the closed-form transform of ``service`` where
    there is one and 256-point Gauss-Legendre quadrature over the quantile
    function otherwise.

    References
    ----------
    A. Jean-Marie and P. Robert, "On the transient behavior of the
    processor sharing queue", Queueing Systems 17 (1994) 129-136.

    Examples
    --------
    >>> from capacity import Service
    >>> from capacity.overload import ps_growth_rate
    >>> round(ps_growth_rate(1.5, 1.0), 6)          # exponential: lambda - mu
    0.5
    >>> round(ps_growth_rate(1.5, Service.deterministic(1.0)), 4)
    0.8742
    """
    q = prepare(arrival_rate, service, servers)
    lam = np.broadcast_to(q.arrival_rate, q.shape)
    c = np.broadcast_to(q.servers, q.shape).astype(float)
    mean = np.broadcast_to(q.mean_service, q.shape)
    return scalar_out(_growth_rate(lam, q.service, c, mean))


def ps_fluid_completion(u: ArrayLike, size: ArrayLike, arrival_rate: ArrayLike,
                        service: Service | ArrayLike, servers: ArrayLike = 1):
    """Completion time (since the overload began) of a request arriving ``u`` s into a PS overload.

    Parameters
    ----------
    u : float or array_like
        Arrival time of the request, seconds after the overload began with an
        empty server (>= 0).
    size : float or array_like
        Its CPU time, s (>= 0).
    arrival_rate, service, servers
        As in :func:`ps_growth_rate`.

    Returns
    -------
    float or ndarray
        ``u * exp(alpha * size / c)`` seconds (time since the start of the
        overload); ``inf`` never; for ``rho <= 1`` (``alpha = 0``) just ``u``
        plus nothing -- use :mod:`capacity.ps` there instead.

    Notes
    -----
    Fluid law (an approximation, exact in the limit of large ``u``): with
    ``N(t) ~ alpha t`` requests present, each is served at rate
    ``c / (alpha t)``, so a request arriving at ``u`` has received
    ``(c/alpha) ln(t/u)`` by time ``t`` and leaves when that equals its size:
    ``t = u exp(alpha x / c)``.  Its sojourn is ``u (exp(alpha x / c) - 1)``
    (:func:`ps_fluid_sojourn`): proportional to how long the overload has
    lasted, and exponential in its size.  Valid when ``alpha u`` is large
    (many requests present when it arrives) and the overload lasts past the
    completion; early arrivals (``alpha u`` of order 1) finish sooner than
    this in relative terms only by O(1/(alpha u)).  Derivation:
    :func:`capacity.symbolic.ps_overload_completion_time`.

    References
    ----------
    A. Jean-Marie and P. Robert (1994), see :func:`ps_growth_rate`.

    Examples
    --------
    >>> from capacity.overload import ps_fluid_completion
    >>> round(ps_fluid_completion(100.0, 2.0, 1.5, 1.0), 3)   # 100 e^{0.5 * 2}
    271.828
    """
    u = check_nonnegative(u, "u")
    x = check_nonnegative(size, "size")
    q = prepare(arrival_rate, service, servers)
    shape = np.broadcast_shapes(u.shape, x.shape, q.shape)
    lam = np.broadcast_to(q.arrival_rate, q.shape)
    c = np.broadcast_to(q.servers, q.shape).astype(float)
    alpha = _growth_rate(lam, q.service, c, np.broadcast_to(q.mean_service, q.shape))
    return scalar_out(np.broadcast_to(u * np.exp(alpha * x / c), shape))


def ps_fluid_sojourn(u: ArrayLike, size: ArrayLike, arrival_rate: ArrayLike,
                     service: Service | ArrayLike, servers: ArrayLike = 1):
    """Sojourn time ``u (exp(alpha x / c) - 1)`` of a request arriving ``u`` s into a PS overload.

    See :func:`ps_fluid_completion` (completion minus arrival).

    Examples
    --------
    >>> from capacity.overload import ps_fluid_sojourn
    >>> round(ps_fluid_sojourn(100.0, 2.0, 1.5, 1.0), 3)
    171.828
    """
    u = check_nonnegative(u, "u")
    return scalar_out(np.asarray(ps_fluid_completion(u, size, arrival_rate, service, servers)) - u)


def fcfs_overload_wait(u: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike,
                       servers: ArrayLike = 1):
    """Wait of a FCFS request arriving ``u`` s into an overload that began with an empty queue.

    Parameters
    ----------
    u : float or array_like
        Arrival time, seconds after the overload began (>= 0).
    arrival_rate, service, servers
        As in :func:`ps_growth_rate`.

    Returns
    -------
    float or ndarray
        ``max(rho - 1, 0) * u`` seconds, ``rho = lambda E[S] / c``.

    Notes
    -----
    Fluid law: work arrives at rate ``lambda E[S]`` and leaves at rate ``c``,
    so the backlog at ``u`` is ``(lambda E[S] - c) u`` and a FCFS arrival
    waits ``backlog / c = (rho - 1) u`` -- linear in ``u``, whatever its size,
    and it is then served at full speed.  Contrast with PS, where every
    request present slows down together.  The stochastic wait is this plus
    O(sqrt(u)) fluctuations (functional central limit theorem), so the
    relative error falls like ``1/sqrt(u)``.  Derivation:
    :func:`capacity.symbolic.fcfs_overload_wait`.

    Examples
    --------
    >>> from capacity.overload import fcfs_overload_wait
    >>> fcfs_overload_wait(100.0, 1.5, 1.0)
    50.0
    """
    u = check_nonnegative(u, "u")
    q = prepare(arrival_rate, service, servers)
    return scalar_out(np.maximum(q.utilization - 1.0, 0.0) * u)


# ============================================================================ 3. goodput
def _partial_mean(svc: Service, y: np.ndarray) -> np.ndarray:
    """E[min(S, y)] for y >= 0 (broadcast against the service parameters)."""
    y = np.asarray(y, dtype=float)
    fam, p = svc.family, svc._params
    if fam == "deterministic":
        return np.minimum(p["mean"], y)
    if fam == "exponential":
        return -p["mean"] * np.expm1(-y / p["mean"])
    if fam in ("erlang", "gamma"):
        a = p["k"] if fam == "erlang" else 1.0 / p["scv"]
        theta = p["mean"] / a
        return y * special.gammaincc(a, y / theta) + p["mean"] * special.gammainc(a + 1.0, y / theta)
    if fam == "hyperexponential":
        r1, r2, w = p["rate1"], p["rate2"], p["p"]
        return -w / r1 * np.expm1(-r1 * y) - (1 - w) / r2 * np.expm1(-r2 * y)
    if fam == "empirical":
        return np.mean(np.minimum(svc._samples, y[..., None]), axis=-1)
    q = _GLQ_X.reshape((1,) * y.ndim + (-1,))
    x = np.asarray(svc._expand(1).ppf(q), dtype=float)
    return np.sum(np.minimum(x, y[..., None]) * _GLQ_W, axis=-1)


def _partial_mean_inverse(svc: Service, target: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """y with E[min(S, y)] = target (inf where target >= E[S]), by bisection on log y."""
    target = np.asarray(target, dtype=float)
    finite = target < mean
    lo = np.full(target.shape, -60.0)
    hi = np.full(target.shape, 60.0)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        up = _partial_mean(svc, np.exp(mid)) < target
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    return np.where(finite, np.exp(0.5 * (lo + hi)), np.inf)


# Grid cells for the virtual-waiting-time solver of FCFS with impatience.
_VW_CELLS = 1500


def _fcfs_impatient_goodput(lam: np.ndarray, svc: Service, tau: np.ndarray, size_aware: bool,
                            cells: int = _VW_CELLS, servers: float = 1.0) -> np.ndarray:
    """Goodput of M/G/1 FCFS with a per-request deadline ``tau``, from the virtual waiting time V.

    ``size_aware=False`` ("drop"): every arrival enters and is cut at its
    deadline, so V jumps v -> v + min(S, tau - v); the request succeeds iff
    S <= tau - V.  ``size_aware=True`` ("deadline"): an arrival is admitted
    iff S <= tau - V and then adds S.  Both: goodput = lam P(S <= tau - V)
    (PASTA).

    Level crossing for the unnormalised measure W of V (atom 1 at 0, masses
    m_j in cells ((j-1)d, jd], located at the midpoints y_j):
    W(v) = 1 + int_[0,v] dW(y) K(v, y), K(v, y) = lam int_y^v P(a jump
    from y ends above u) du, i.e. lam E[min(S, v - y)] (drop) minus
    lam (v - y) P(S > tau - y) (deadline).  Solved forward cell by cell (a
    Volterra equation of the second kind; the sums over earlier cells are
    convolutions in the lag), tilted by exp(-sigma v) with sigma the
    overload growth rate so that nothing overflows.  Vectorised over the
    parameter sets (axis 0); scalar service parameters.
    """
    m = lam.size
    d = tau / cells
    c = float(servers)
    sigma = _growth_rate(lam, svc, np.full(m, c), np.full(m, float(svc.mean)))
    j = np.arange(cells + 1)
    y = np.where(j == 0, 0.0, j - 0.5)[None, :] * d[:, None]            # (m, N+1)
    v = j[None, :] * d[:, None]
    lag = (j + 0.5)[None, :] * d[:, None]                                # lag L -> (L + 1/2) d
    tilt = np.exp(-sigma[:, None] * lag)
    big_g = (lam[:, None] * _partial_mean(svc, c * lag) / c - 1.0) * tilt  # drop kernel minus the W term
    sf_tau = np.asarray(svc.sf(np.maximum(tau[:, None] - y, 0.0)), dtype=float)
    atom = lam[:, None] * _partial_mean(svc, c * v) / c * np.exp(-sigma[:, None] * v)
    if size_aware:
        big_h = lam[:, None] * lag * tilt
        atom = atom - lam[:, None] * v * sf_tau[:, :1] * np.exp(-sigma[:, None] * v)
    mt = np.zeros((m, cells + 1))
    mt[:, 0] = 1.0
    half = np.exp(-0.5 * sigma * d)
    k_self = lam * _partial_mean(svc, 0.5 * c * d) / c
    for n in range(1, cells + 1):
        rhs = atom[:, n]
        if n > 1:
            past = mt[:, 1:n]
            rev = slice(n - 1, 0, -1)
            rhs = rhs + np.einsum("ij,ij->i", past, big_g[:, rev])
            if size_aware:
                rhs = rhs - np.einsum("ij,ij->i", past * sf_tau[:, 1:n], big_h[:, rev])
        kn = k_self - (lam * 0.5 * d * sf_tau[:, n] if size_aware else 0.0)
        mt[:, n] = np.maximum(rhs / (half * (1.0 - kn)), 0.0)
    weight = mt * np.exp(-sigma[:, None] * (tau[:, None] - y))
    return lam * np.sum(weight * (1.0 - sf_tau), axis=1) / np.sum(weight, axis=1)


def _mm1_drop_goodput(lam: np.ndarray, mu: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Exact goodput of M/M/1 FCFS whose requests leave at arrival + tau (queue or service).

    lam mu r / (1 + lam r) with r = expm1((lam - mu) tau) / (lam - mu) (r = tau at lam = mu).
    """
    dlt = lam - mu
    z = dlt * tau
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        r = np.where(np.abs(z) < 1e-8, tau * (1 + 0.5 * z), np.expm1(z) / np.where(dlt == 0, 1.0, dlt))
        out = lam * mu / (1.0 / r + lam)
    return np.where(lam == 0, 0.0, out)


def goodput_method(discipline: str = "ps", on_timeout: str = "continue", queue: str = "fifo",
                   servers: int = 1, service: Service | float = 1.0) -> str:
    """Which model :func:`goodput` uses for these options, and whether it is exact.

    Examples
    --------
    >>> from capacity.overload import goodput_method
    >>> goodput_method("fcfs", "drop", service=1.0)
    'exact: M/M/1+D, sojourn-time deadline (closed form)'
    """
    discipline = check_choice(discipline, "discipline", DISCIPLINES)
    on_timeout = check_choice(on_timeout, "on_timeout", ON_TIMEOUT)
    queue = check_choice(queue, "queue", QUEUES)
    svc = as_service(service)
    if queue == "adaptive_lifo":
        return ("approximation: FIFO value below capacity; fluid min(lambda, c/E[S]) * P(S <= timeout) "
                "at or above capacity")
    if discipline == "ps":
        if on_timeout == "continue":
            return "exact below capacity: M/G/c-PS response-time tail; 0 at or above capacity (long run)"
        return ("approximation: M/G/c-PS without abandonment below capacity (a lower bound); fluid model "
                "with deterministic patience at or above capacity")
    if on_timeout == "continue":
        return "exact below capacity: M/G/c FCFS response-time tail; 0 at or above capacity (long run)"
    many = np.any(np.asarray(servers) > 1)
    pooled = " (c > 1: one server c times faster, an approximation)" if many else ""
    if on_timeout == "drop":
        if svc.family == "exponential":
            return "exact: M/M/1+D, sojourn-time deadline (closed form)" + pooled
        return "exact: M/G/1+D, sojourn-time deadline (level-crossing equation, numerical)" + pooled
    return "exact: M/G/1 with size-aware deadline admission (level-crossing equation, numerical)" + pooled


def goodput(arrival_rate: ArrayLike, service: Service | ArrayLike, timeout: ArrayLike,
            discipline: str = "ps", on_timeout: str = "continue", queue: str = "fifo",
            servers: ArrayLike = 1):
    """Long-run goodput: requests completed within the client timeout per second.

    Parameters
    ----------
    arrival_rate : float or array_like
        Poisson arrival rate (offered load), requests/s.
    service : Service or float
        CPU time per request, s (scalar parameters).
    timeout : float or array_like
        Client timeout, s (> 0).
    discipline : {"ps", "fcfs"}
        Processor sharing (an event loop) or first come first served.
    on_timeout : {"continue", "drop", "deadline"}
        ``"continue"``: the server finishes abandoned requests (Node.js
        behind nginx).  ``"drop"``: the request leaves the server at its
        timeout, from the queue or from service.  ``"deadline"``: FCFS skips
        a request at its start if it cannot finish in time (the server knows
        its size); for PS the same as ``"drop"``.  As in :func:`capacity.sim.simulate`.
    queue : {"fifo", "adaptive_lifo"}
        FCFS queue order; adaptive LIFO serves newest first while the oldest
        queued request has waited more than a bound (Maurer 2015).
    servers : int
        Cores.

    Returns
    -------
    float or ndarray
        Goodput, requests/s.  :func:`goodput_method` names the model used.

    Notes
    -----
    **Keep computing ("continue").**  Below capacity (``rho < 1``) exact:
    ``lambda * P(T <= timeout)`` with the steady-state response-time tail of
    :mod:`capacity.fcfs` or :mod:`capacity.ps`.  At or above capacity the
    backlog grows without bound, every request eventually waits longer than
    the timeout, and the long-run goodput is 0 -- for PS *and* FCFS.  (The
    transient before that: :func:`ps_fluid_completion`,
    :func:`fcfs_overload_wait`.)

    **FCFS, drop at the timeout.**  Exact for one server (M/G/1+D with a
    deadline on the sojourn time, Baccelli, Boyer & Hebuterne 1984): the
    virtual waiting time ``V`` jumps by ``min(S, tau - V)`` at each arrival,
    and a request succeeds iff ``S <= tau - V``, so
    ``goodput = lambda P(S <= tau - V)`` (PASTA).  On ``[0, tau)`` the density
    of ``V`` obeys the ordinary M/G/1 level-crossing equation, so
    ``P(V <= v) = W(v) / W(tau)`` with ``W`` the (unnormalised) solution of
    Takacs' equation ``W(v) = 1 + lambda int_0^v P(S > y) W(v - y) dy``.
    Exponential service, closed form:
    ``goodput = lambda mu r / (1 + lambda r)``, ``r = (e^{(lambda-mu) tau} -
    1)/(lambda - mu)``.  Otherwise ``W`` is computed on a 1500-cell grid
    (midpoint rule; error below 1e-3 relative, measured against the closed
    form, see the tests).  In deep overload ``P(V > tau - x) ~ e^{-alpha x}``
    with the PS growth rate ``alpha``, so goodput tends to
    ``lambda E[e^{-alpha S}] = lambda - alpha``: 1.0/s for exponential and
    0.626/s for deterministic 1 s requests at lambda = 1.5/s.

    **FCFS, deadline-aware skipping.**  An arrival is admitted iff
    ``S <= tau - V``; same level-crossing method with the admission kernel
    (exact up to the grid).  In overload the server never wastes a cycle, so
    goodput approaches capacity (more, for variable sizes: it prefers small
    requests).

    **PS, drop at the timeout.**  No exact result is known.  At or above
    capacity: the fluid model of PS with impatience (Gromoll, Robert &
    Zwart 2008) with deterministic patience: with ``z`` requests present
    each gets rate ``c/z``, a request succeeds iff ``S <= y`` where ``y`` is
    the service it can get before its timeout, and Little's law gives
    ``E[min(S, y)] = c / lambda``; goodput = ``lambda P(S <= min(y, tau))``.
    Exponential sizes: ``c/E[S]``; deterministic sizes: 0 (everybody gets the
    same share and nobody finishes).  Below capacity: the PS response tail
    without abandonment (a lower bound).  Approximations.  Measured against
    the simulator (10 s timeout, E[S] = 1 s, 3 x 20000 s): at lambda = 1.5,
    deterministic 0 vs 0.065, exponential 1.000 vs 0.990; lambda = 2,
    deterministic 0 vs 0.002; c = 2, lambda = 3, exponential 2.000 vs 2.005;
    but poor near capacity: lambda = 1.1, deterministic 0 vs 0.49; lambda =
    0.9, 0.575 vs 0.738 (deterministic) and 0.642 vs 0.809 (exponential).

    **Adaptive LIFO.**  Fluid approximation: at or above capacity the server
    is always busy with fresh requests, so goodput ~ ``min(lambda, c/E[S])
    P(S <= tau)``; below capacity the FIFO value.  Measured (as above,
    default queue-delay bound 0.1 tau): lambda = 1.5, 1.000 vs 0.98-0.99
    (deterministic) and 0.95-0.98 (exponential); near capacity it is poor:
    lambda = 1.1 exponential 1.000 vs 0.848, lambda = 0.9 exponential (keep
    computing) 0.569 vs 0.774 -- adaptive LIFO already helps below capacity,
    which the FIFO value ignores.

    ``c > 1`` FCFS with drop/deadline: one server ``c`` times faster, an
    approximation.  Measured (lambda = 3/s, c = 2, 1 s deterministic, 10 s
    timeout, 3 x 20000 s): drop 1.25 against a simulated 0.954 +- 0.012
    (+31 %: optimistic); deadline 2.000 against 2.000.  (Pooling the virtual
    wait with jumps ``S/c`` but success iff ``S <= tau - V`` gave 0.52, worse.)

    References
    ----------
    F. Baccelli, P. Boyer and G. Hebuterne, "Single-server queues with
    impatient customers", Adv. Appl. Probab. 16 (1984) 887-905.
    L. Takacs, *Introduction to the Theory of Queues*, Oxford (1962), ch. 2
    (the integral equation of the virtual waiting time).
    H. C. Gromoll, P. Robert and B. Zwart, "Fluid limits for processor
    sharing queues with impatience", Math. Oper. Res. 33 (2008) 375-402.
    B. Maurer, "Fail at scale", ACM Queue 13(8) (2015).

    Examples
    --------
    The issue's case: 1.5 req/s of 1 s each, 10 s timeout.

    >>> from capacity import Service
    >>> from capacity.overload import goodput
    >>> one = Service.deterministic(1.0)
    >>> goodput(1.5, one, 10.0, "ps")                         # keeps computing: collapse
    0.0
    >>> round(goodput(1.5, one, 10.0, "fcfs", "drop"), 2)     # drops at the timeout
    0.63
    >>> round(goodput(1.5, one, 10.0, "fcfs", "deadline"), 2) # skips hopeless requests
    1.0
    """
    discipline = check_choice(discipline, "discipline", DISCIPLINES)
    on_timeout = check_choice(on_timeout, "on_timeout", ON_TIMEOUT)
    queue = check_choice(queue, "queue", QUEUES)
    if queue == "adaptive_lifo" and discipline != "fcfs":
        raise ValueError(f"queue='adaptive_lifo' needs discipline='fcfs', got discipline={discipline!r}")
    tau = check_positive(timeout, "timeout")
    q = prepare(arrival_rate, service, servers)
    svc = q.service
    if svc.shape != ():
        raise ValueError(f"service must have scalar parameters here, got parameter shape {svc.shape}")
    shape = np.broadcast_shapes(q.shape, tau.shape)
    lam = np.broadcast_to(q.arrival_rate, shape).astype(float)
    c = np.broadcast_to(q.servers, shape)
    tau = np.broadcast_to(tau, shape)
    mean = float(svc.mean)
    rho = lam * mean / c
    out = np.zeros(shape)
    below = rho < 1
    if queue == "adaptive_lifo":
        fifo = np.asarray(goodput(lam, svc, tau, "fcfs", on_timeout, "fifo", c), dtype=float)
        fluid = np.minimum(lam, c / mean) * np.asarray(svc.cdf(tau), dtype=float)
        return scalar_out(np.where(below, fifo, fluid))
    if on_timeout == "continue" or discipline == "ps":
        if below.any():
            mod = _ps if discipline == "ps" else _fcfs
            sf = np.asarray(mod.response_sf(tau[below], lam[below], svc, c[below]), dtype=float)
            out[below] = lam[below] * (1.0 - sf)
        if discipline == "ps" and on_timeout != "continue":
            over = ~below
            if over.any():
                y = _partial_mean_inverse(svc, c[over] / lam[over], np.full(int(over.sum()), mean))
                y = np.minimum(y, tau[over])
                out[over] = lam[over] * np.asarray(svc.cdf(y), dtype=float)
        return scalar_out(out)
    # FCFS with drop / deadline (exact for c = 1).
    pos = lam > 0
    if not pos.any():
        return scalar_out(out)
    lam_p, tau_p, c_p = lam[pos], tau[pos], c[pos].astype(float)
    res = np.empty(lam_p.shape)
    if on_timeout == "drop" and svc.family == "exponential" and np.all(c_p == 1):
        res = _mm1_drop_goodput(lam_p, np.full(lam_p.shape, 1.0 / mean), tau_p)
    else:
        # c cores: one server c times faster (rate lam / c, timeout c tau, same sizes); exact for c = 1.
        res = c_p * _fcfs_impatient_goodput(lam_p / c_p, svc, tau_p * c_p,
                                            size_aware=(on_timeout == "deadline"))
    out[pos] = res
    return scalar_out(out)


# ============================================================================ 4. retries
@dataclass(frozen=True)
class FixedPoint:
    """One fixed point of the retry equation (see :func:`retry_fixed_points`).

    Attributes
    ----------
    load : float
        Effective arrival rate of attempts, requests/s.
    timeout_fraction : float
        Fraction of attempts that fail at that load.
    goodput : float
        Successful requests per second (``load * (1 - timeout_fraction)``).
    stable : bool
        True if the effective load returns here after a small push.
    """

    load: float
    timeout_fraction: float
    goodput: float
    stable: bool


@dataclass(frozen=True)
class RetryAnalysis:
    """Result of :func:`retry_fixed_points`.

    Attributes
    ----------
    fixed_points : list of FixedPoint
        Every solution of ``x = lambda * sum_{k=0}^{R} p(x)^k``, in increasing load.
    bistable_range : tuple of float
        ``(low, high)``: the first-attempt rates with two stable fixed points
        (NaN, NaN if none), to the resolution of the grid.
    curve : pandas.DataFrame
        On the load grid ``x``: ``p`` (failed fraction of attempts),
        ``amplification`` (``sum_k p^k``), ``first_attempt_rate``
        (``x / amplification``, the lambda for which ``x`` is a fixed point)
        and ``excess`` (``g(x) = lambda * amplification - x``, attempts/s, at
        the analysed first-attempt rate: positive where the attempt rate
        grows, zero at the fixed points).
    """

    fixed_points: list
    bistable_range: tuple
    curve: pd.DataFrame


def retry_fixed_points(arrival_rate: float, service: Service | float, timeout: float, retries: int,
                       discipline: str = "ps", on_timeout: str = "continue", queue: str = "fifo",
                       servers: int = 1, *, grid: int = 400) -> RetryAnalysis:
    """Effective load with client retries: every fixed point, its stability, and the bistable range.

    Parameters
    ----------
    arrival_rate : float
        First attempts per second, requests/s.
    service : Service or float
        CPU time per request, s (a retry costs the same again).
    timeout : float
        Client timeout per attempt, s.
    retries : int
        Retries after a failed attempt (>= 0).
    discipline, on_timeout, queue, servers
        As in :func:`goodput`.
    grid : int
        Points of the load grid scanned for sign changes (>= 20).

    Returns
    -------
    RetryAnalysis

    Notes
    -----
    With ``p(x)`` the fraction of attempts that fail when attempts arrive at
    rate ``x`` (``p = 1 - goodput(x) / x``, from :func:`goodput`), each request
    makes ``1 + p + ... + p^R`` attempts on average, so the effective load
    solves ``x = lambda * sum_{k=0}^{R} p(x)^k``.  The fixed points are the
    sign changes of ``g(x) = lambda * sum_k p(x)^k - x`` on a grid from 0 to
    ``lambda (R + 1)`` (where ``g <= 0`` always), refined by Brent's method.
    With the fluid dynamics ``dx/dt ~ g(x)`` a point is stable iff ``g``
    goes from positive to negative there.  Equivalently the fixed points
    for any ``lambda`` are where ``phi(x) = x / sum_k p(x)^k`` equals
    ``lambda``; where ``phi`` has a local maximum followed by a local minimum,
    every ``lambda`` between the two has a low stable state (few timeouts),
    an unstable middle one, and a high stable state above capacity: the
    service is *metastable* -- a burst that pushes the load past the middle
    state leaves it overloaded after the burst has ended.

    Approximations: attempts are treated as a Poisson stream (retries are
    not), ``p`` is the steady-state failure fraction at each load, and the
    retry back-off is ignored.  For PS or FCFS that keep computing,
    ``p = 1`` above capacity.  This mean-field picture is optimistic about
    the low state when the timeout is only a few service times: timeouts
    then come in synchronised waves whose retries arrive together.
    Measured (PS, 0.1 s exponential, 2 retries, no back-off, 600 s runs):
    with a 1 s timeout the predicted bistable range is (3.4, 6.9)/s, yet the
    run from empty collapsed at lambda = 4 in 3 of 3 seeds and at 3.5 in 1 of
    3; with a 5 s timeout (range (3.4, 8.8)/s) it stayed low at lambda = 4, 5
    and 6 in 3 of 3 seeds, and a 20 s burst at 20/s left it high in every
    case.  Treat the upper end of the range as an upper bound.

    References
    ----------
    N. Bronson, A. Aghayev, A. Charapko and T. Zhu, "Metastable failures in
    distributed systems", HotOS (2021).  B. Maurer, "Fail at scale", ACM
    Queue 13(8) (2015) (retry amplification).

    Examples
    --------
    PS, 0.1 s per request (capacity 10/s), 1 s timeout, two retries:

    >>> from capacity.overload import retry_fixed_points
    >>> r = retry_fixed_points(5.0, 0.1, 1.0, 2, grid=100)
    >>> [(round(f.load, 1), f.stable) for f in r.fixed_points]
    [(5.1, True), (9.7, False), (15.0, True)]
    >>> [round(v, 1) for v in r.bistable_range]   # low end: capacity / (retries + 1)
    [3.4, 6.9]
    """
    lam = float(check_nonnegative(arrival_rate, "arrival_rate"))
    tau = float(check_positive(timeout, "timeout"))
    if isinstance(retries, (bool, np.bool_)) or not float(retries).is_integer() or retries < 0:
        raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
    r_max = int(retries)
    if isinstance(grid, (bool, np.bool_)) or not float(grid).is_integer() or grid < 20:
        raise ValueError(f"grid must be an integer >= 20, got {grid!r}")
    svc = as_service(service)
    c = int(check_servers(servers))
    cap = c / float(svc.mean)
    # Every fixed point lies below lam (R + 1); the high branch of any lam <= capacity
    # below cap (R + 1), so this grid shows the whole bistable range.
    top = max(lam, cap) * (r_max + 1) * 1.02

    def fail(x):
        x = np.asarray(x, dtype=float)
        g = np.asarray(goodput(x, svc, tau, discipline, on_timeout, queue, c), dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.clip(np.where(x > 0, 1.0 - g / np.where(x > 0, x, 1.0), 0.0), 0.0, 1.0)

    def amplification(p):
        return np.sum(p[..., None] ** np.arange(r_max + 1), axis=-1)

    x = np.linspace(top / grid, top, grid)
    # Steady-state tails are slow to evaluate within 1e-3 of capacity and p -> 1 there anyway.
    x = np.where(np.abs(x / cap - 1.0) < 1e-3, cap, x)
    p = fail(x)
    amp = amplification(p)
    g = lam * amp - x
    points = []
    if lam == 0:
        points.append(FixedPoint(0.0, float(fail(1e-9 * cap)), 0.0, True))
    else:
        sign = np.sign(g)
        idx = np.flatnonzero(sign[:-1] * sign[1:] < 0)
        # g at 0+ is lam * amp > 0, so the first grid point starts positive unless a root lies below it.
        for i in idx:
            a, b = x[i], x[i + 1]
            fa = g[i]
            if p[i + 1] - p[i] > 0.5:  # a jump of p (at capacity): the root sits at the jump
                root = b if abs(g[i + 1]) < abs(fa) else a
            else:
                root = optimize.brentq(lambda z: lam * float(amplification(fail(z))) - z, a, b,
                                       xtol=1e-10 * top)
            pr = float(fail(root))
            points.append(FixedPoint(float(root), pr, float(root * (1 - pr)), bool(g[i] > 0)))
    phi = x / amp
    lam_grid = np.linspace(phi.min(), phi.max(), 2 * grid)
    crossings = np.sum(np.diff(np.sign(phi[:, None] - lam_grid[None, :]), axis=0) != 0, axis=0)
    multi = lam_grid[crossings >= 3]
    bistable = (float(multi.min()), float(multi.max())) if multi.size else (math.nan, math.nan)
    curve = pd.DataFrame({"load": x, "p": p, "amplification": amp, "first_attempt_rate": phi, "excess": g})
    return RetryAnalysis(points, bistable, curve)


# ============================================================================ 5. the 30-request experiment
def simultaneous_burst(n: int = 30, size: float = 1.0, discipline: str = "ps",
                       servers: int = 1) -> np.ndarray:
    """Completion times of ``n`` equal requests that arrive together at time 0.

    Parameters
    ----------
    n : int
        Requests (>= 1).
    size : float
        CPU time of each, s (> 0).
    discipline : {"ps", "fcfs"}
        Processor sharing (an event loop interleaving the requests, the
        seed article's "sliced" handler) or FCFS (one unbroken CPU block per
        request, its "blocking" handler).
    servers : int
        Cores.

    Returns
    -------
    ndarray
        Completion time of each request, s, in arrival order.

    Notes
    -----
    PS: with ``n >= c`` requests each is served at rate ``c/n`` and all have
    the same size, so all finish together at ``n * size / c``: nobody gets
    an answer before everybody's work is done.  FCFS: request ``k`` (1-based)
    finishes at ``ceil(k / c) * size`` -- a staircase.  The mean completion
    time is ``n size / c`` for PS and about half that for FCFS.  Exact.

    Examples
    --------
    >>> from capacity.overload import simultaneous_burst
    >>> simultaneous_burst(3, 1.0, "ps").tolist(), simultaneous_burst(3, 1.0, "fcfs").tolist()
    ([3.0, 3.0, 3.0], [1.0, 2.0, 3.0])
    """
    if isinstance(n, (bool, np.bool_)) or not float(n).is_integer() or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    n = int(n)
    x = float(check_positive(size, "size"))
    discipline = check_choice(discipline, "discipline", DISCIPLINES)
    c = int(check_servers(servers))
    if discipline == "ps":
        return np.full(n, x * max(n / c, 1.0))
    return np.ceil(np.arange(1, n + 1) / c) * x


@dataclass(frozen=True)
class Staircase:
    """Least-squares fit ``completion_k = offset + cost * k`` (k = 1..n) of sorted completion times.

    Attributes: ``cost`` (s per request), ``offset`` (s), ``max_residual`` (s).
    """

    cost: float
    offset: float
    max_residual: float


def fit_staircase(completions: ArrayLike) -> Staircase:
    """Fit a FCFS staircase to completion times: the per-request CPU cost is the step.

    Parameters
    ----------
    completions : array_like
        Completion times (s) of requests that arrived together, any order.

    Returns
    -------
    Staircase

    Notes
    -----
    Sorted completion times of a FCFS burst are ``k * S`` plus jitter, so the
    least-squares slope against the rank ``k`` estimates the mean CPU time
    per request (robust to a constant start-up delay, which goes into
    ``offset``).

    Examples
    --------
    >>> from capacity.overload import fit_staircase
    >>> f = fit_staircase([2.0, 1.0, 3.0])
    >>> round(f.cost, 6), round(f.offset, 6)
    (1.0, 0.0)
    """
    t = np.sort(check_nonnegative(completions, "completions").reshape(-1))
    if t.size < 2:
        raise ValueError(f"completions must hold at least 2 times, got {t.size}")
    k = np.arange(1, t.size + 1, dtype=float)
    cost, offset = np.polyfit(k, t, 1)
    return Staircase(float(cost), float(offset), float(np.max(np.abs(t - (offset + cost * k)))))


# ============================================================================ 6. incident replay
#: CPU seconds per request implied by the seed's CPU reading: process CPU 16-25 %
#: (read as a share of one core) at 6-10 requests/s, i.e. about 0.2 / 8.
INCIDENT_COST_FROM_CPU = 0.025
#: CPU seconds per request that makes the reconstructed traffic reproduce the
#: seed's request log (a 67 req/s second on top of ~8 req/s drives latency to
#: the 30 s timeout and recovers by itself): see :func:`incident_traffic`.
INCIDENT_COST_FROM_LOG = 0.1


def incident_traffic(seed: Any = None, duration: int = 600, *, base: tuple = (6.0, 10.0),
                     burst_rate: float = 20.0, burst_period: int = 60, peak_rate: float = 67.0,
                     peak_at: int | None = -1, peak_seconds: int = 1) -> pd.Series:
    """A reconstructed per-second request-rate series shaped like the seed incident.

    Parameters
    ----------
    seed : None, int or Generator
        Randomness of the base level and of the burst positions.
    duration : int
        Seconds (>= 1).
    base : (low, high)
        Everyday rate, requests/s: each minute gets a level uniform in this
        range (the article: "日常 QPS 6~10").
    burst_rate : float
        One second per ``burst_period`` s at this rate (the article: "平均每分钟有一次
        QPS 为 20 的并发, 但只维持 1 秒"), at a random second of each period.
    burst_period : int
        Seconds between bursts.
    peak_rate : float
        The single peak second (the article: "最高 QPS 67, 持续 1 秒").
    peak_at : int or None
        Second of the peak; -1 (default): the middle of the series; None: no peak.
    peak_seconds : int
        Length of the peak, s (the article: 1 s; the log excerpt's start times
        spread over about 5 s, see Notes).

    Returns
    -------
    pandas.Series
        Rates (requests/s) indexed by second ``0 .. duration-1``, for
        :func:`replay` or :func:`capacity.sim.simulate` (which draw Poisson
        arrivals at these rates).

    Notes
    -----
    **What is measured and what is reconstructed.**  The three rates (6-10,
    20 once a minute for 1 s, 67 for 1 s) are the article's monitoring
    readings (``data/incident_facts.toml``: ``daily_qps``,
    ``burst_qps_each_minute``, ``peak_qps``).  Everything else is ours: the
    per-minute base levels, the position of each burst within its minute,
    the time of the peak (the article does not say when it happened), the
    Poisson arrivals within each second, and the assumption that these
    rates reach one Node.js process (the article has three servers and
    does not say whether the QPS is per server or for the service).

    **CPU per request: the facts disagree.**  Process CPU 16-25 % at 6-10
    req/s gives about 25 ms per request (:data:`INCIDENT_COST_FROM_CPU`),
    consistent with the 40-50 ms everyday latency.  But with 25 ms a 67 req/s
    second is 1.7 s of work: the fluid backlog (:func:`backlog`) is 0.7 s and
    no request comes near 30 s.  Under processor sharing the drain time of a
    one-second burst of ``n`` requests on top of a base rate ``b`` is about
    ``(n s - 1) / (1 - b s)``; it reaches the 30 s timeout for ``n = 67``,
    ``b = 8`` only if ``s >= 0.101`` s, which is :data:`INCIDENT_COST_FROM_LOG`
    (0.1 s).  With that cost a 20 req/s second drains in about 5 s (the
    article: 1-3 s, which needs ``s`` of about 0.08 s), the base load is 60-100 %
    of one core, and everyday latency is 0.25-0.5 s, not 40-50 ms.  The two
    readings agree only if the CPU percentages are shares of a host with
    about four cores (one busy core = 25 %), which the article never
    states; its own remark that 20-30 % CPU is "at the critical point"
    (``cpu_near_threshold``) points that way.  So: use 25 ms to reproduce
    everyday behaviour, 0.1 s to reproduce the incident; no single constant
    cost reproduces both.

    **One peak second cannot hold latency at 30 s.**  Under processor
    sharing the ``n`` requests of a one-second peak, with later arrivals at
    rate ``b`` joining them, all finish after about ``n (e^{b s} - 1) / b``
    seconds (attained service ``int dt / (n + b t)``): 10 s for ``n = 67``,
    ``b = 8``, ``s = 0.1`` (the simulator agrees: 8-9 s), and 30 s only if the
    base load alone exceeds capacity.  The log excerpt points to a longer
    peak: reading its times as completion times, 42 of its 49 requests
    started within 09:20:24.8-09:20:29.9 (``data/README.md``), about 5 s.
    ``peak_seconds=5`` with 0.1 s per request reproduces the collapse: nearly
    every request in flight reaches the 30 s timeout, and the service
    recovers by itself once the backlog drains.  The log also shows requests
    that started together finishing after 0.04 s and after 22 s, which one
    processor-sharing process with one cost per request cannot produce: the
    excerpt probably mixes the three servers, or the costs vary widely.

    Examples
    --------
    >>> from capacity.overload import incident_traffic
    >>> r = incident_traffic(seed=1, duration=180)
    >>> float(r.max()), int((r == 20.0).sum()), bool(r[r < 20].between(6, 10).all())
    (67.0, 3, True)
    """
    if isinstance(duration, (bool, np.bool_)) or not float(duration).is_integer() or duration < 1:
        raise ValueError(f"duration must be an integer >= 1 (seconds), got {duration!r}")
    duration = int(duration)
    lo, hi = (float(v) for v in check_nonnegative(base, "base"))
    if hi < lo:
        raise ValueError(f"base must be (low, high) with low <= high, got {base!r}")
    burst_rate = float(check_nonnegative(burst_rate, "burst_rate"))
    peak_rate = float(check_nonnegative(peak_rate, "peak_rate"))
    if isinstance(burst_period, (bool, np.bool_)) or not float(burst_period).is_integer() or burst_period < 1:
        raise ValueError(f"burst_period must be an integer >= 1 (seconds), got {burst_period!r}")
    burst_period = int(burst_period)
    rng = np.random.default_rng(seed)
    minutes = -(-duration // 60)
    rates = np.repeat(rng.uniform(lo, hi, minutes), 60)[:duration]
    periods = -(-duration // burst_period)
    pos = np.arange(periods) * burst_period + rng.integers(0, burst_period, periods)
    pos = pos[pos < duration]
    rates[pos] = burst_rate
    if peak_at is not None and not isinstance(peak_at, (bool, np.bool_)) and peak_at == -1:
        peak_at = duration // 2
    if peak_at is not None:
        if isinstance(peak_at, (bool, np.bool_)) or not float(peak_at).is_integer() \
                or not 0 <= peak_at < duration:
            raise ValueError(f"peak_at must be a second in [0, {duration}), got {peak_at!r}")
        if isinstance(peak_seconds, (bool, np.bool_)) or not float(peak_seconds).is_integer() \
                or peak_seconds < 1:
            raise ValueError(f"peak_seconds must be an integer >= 1, got {peak_seconds!r}")
        rates[int(peak_at):int(peak_at) + int(peak_seconds)] = peak_rate
    return pd.Series(rates, index=pd.RangeIndex(duration, name="second"), name="rate")


def _poisson_seconds(rates: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Poisson arrival times at a per-second piecewise-constant rate (as capacity.sim does)."""
    counts = rng.poisson(rates)
    return np.sort(np.repeat(np.arange(rates.size, dtype=float), counts)
                   + rng.uniform(0.0, 1.0, int(counts.sum())))


def rate_limit(arrivals: ArrayLike, limit: float) -> tuple[np.ndarray, np.ndarray]:
    """Fixed-window rate limiter: admit at most ``floor(limit)`` requests in each whole second.

    Parameters
    ----------
    arrivals : array_like
        Arrival times, s (non-decreasing, >= 0).
    limit : float
        Requests admitted per second (>= 0).

    Returns
    -------
    (admitted, rejected) : tuple of ndarray
        Arrival times of the admitted and of the rejected requests.

    Examples
    --------
    >>> from capacity.overload import rate_limit
    >>> ok, no = rate_limit([0.1, 0.2, 0.3, 1.5], 2)
    >>> ok.tolist(), no.tolist()
    ([0.1, 0.2, 1.5], [0.3])
    """
    t = _arrival_array(arrivals)
    r = math.floor(float(check_nonnegative(limit, "limit")))
    sec = np.floor(t).astype(np.int64)
    first = np.searchsorted(sec, sec, side="left")   # index of the first arrival in the same second
    keep = (np.arange(t.size) - first) < r
    return t[keep], t[~keep]


def _arrival_array(arrivals: ArrayLike) -> np.ndarray:
    t = as_float_array(arrivals, "arrivals").reshape(-1) if np.ndim(arrivals) else None
    if t is None:
        raise ValueError(f"arrivals must be an array of arrival times, got {arrivals!r}")
    bad = ~np.isfinite(t) | (t < 0)
    if bad.any():
        raise ValueError(f"arrivals must be non-negative and finite, got {t[bad][0]!r}")
    dips = np.flatnonzero(np.diff(t) < 0)
    if dips.size:
        k = int(dips[0])
        raise ValueError(f"arrivals must be non-decreasing (times go backwards: {t[k]!r} then "
                         f"{t[k + 1]!r} at positions {k} and {k + 1})")
    return t


@dataclass(frozen=True)
class ReplayResult:
    """Result of :func:`replay`: ``per_second`` table (the simulator's, plus
    ``rejected`` by the rate limiter), the :class:`capacity.sim.SimulationResult`
    ``run``, and the ``rejected`` arrival times."""

    per_second: pd.DataFrame
    run: Any
    rejected: np.ndarray


def replay(arrivals: Any, service: Service | float, processes: int = 1, discipline: str = "ps",
           timeout: float = 30.0, on_timeout: str = "continue", servers: int = 1, *,
           limit: float | None = None, seed: Any = None, **options: Any) -> ReplayResult:
    """Replay a traffic shape through the exact simulator.

    Parameters
    ----------
    arrivals : pandas.Series or array_like
        A Series of per-second rates (requests/s, indexed 0, 1, ...; Poisson
        arrivals within each second), or an array of arrival times (s).
    service : Service or float
        CPU time per request, s.
    processes : int
        Worker processes (cluster mode), dispatched round robin.
    discipline : {"ps", "fcfs"}
        Inside each process.
    timeout : float
        Client (proxy) timeout, s (> 0).
    on_timeout : {"continue", "drop", "deadline"}
        As in :func:`capacity.sim.simulate`.
    servers : int
        Cores per process.
    limit : float, optional
        Rate limit in front of the service: at most ``floor(limit)`` requests
        admitted per second (fixed windows, :func:`rate_limit`); the rest are
        rejected at once and never reach the simulator.
    seed : None, int or Generator
        Randomness of the arrivals and of the sizes.
    **options
        Passed to :func:`capacity.sim.simulate` (``dispatch``, ``retries``, ...).

    Returns
    -------
    ReplayResult
        ``per_second`` with the simulator's columns (arrivals, completions,
        goodput, timeouts, in_flight, cpu_busy, latency_p50/p99/max) plus
        ``rejected``.

    Examples
    --------
    >>> import pandas as pd
    >>> from capacity.overload import replay
    >>> r = replay(pd.Series([5.0] * 20), 0.05, seed=1)
    >>> int(r.per_second["timeouts"].sum())
    0
    """
    from ..sim import simulate

    rng = np.random.default_rng(seed)
    if isinstance(arrivals, pd.Series):
        rates, _ = _rates(arrivals, "arrivals")
        times = _poisson_seconds(rates, rng)
        duration = float(rates.size)
    else:
        times = _arrival_array(arrivals)
        if times.size == 0:
            raise ValueError("arrivals must not be empty")
        duration = float(max(math.ceil(times[-1]), 1.0))
    tau = float(check_positive(timeout, "timeout"))
    rejected = np.zeros(0)
    if limit is not None:
        times, rejected = rate_limit(times, limit)
    run = simulate(times, service, discipline=discipline, servers=servers, processes=processes,
                   timeout=tau, on_timeout=on_timeout, duration=duration, seed=rng, **options)
    table = run.per_second.copy()
    rows = len(table)
    rej = np.bincount(np.minimum(np.floor(rejected).astype(np.int64), rows - 1), minlength=rows)
    table["rejected"] = rej
    return ReplayResult(table, run, rejected)


def _recovery(table: pd.DataFrame, slow: float) -> float:
    """Seconds from the end of the busiest arrival second to the end of the last second
    whose p99 latency exceeds ``slow`` (0 if none after the peak)."""
    peak = int(np.argmax(table["arrivals"].to_numpy()))
    lat = table["latency_p99"].to_numpy()
    later = np.flatnonzero(np.nan_to_num(lat[peak:], nan=0.0) > slow)
    return float(later[-1]) if later.size else 0.0


def what_if(arrivals: Any, service: Service | float, processes: int = 1, discipline: str = "ps",
            timeout: float = 30.0, *, cluster_processes: int = 4, cache_factor: float = 0.2,
            limit: float | None = None, slow: float = 5.0, seed: Any = 0) -> pd.DataFrame:
    """Compare the original set-up with four fixes on the same traffic.

    Parameters
    ----------
    arrivals, service, processes, discipline, timeout
        The original set-up, as in :func:`replay` (the server keeps
        computing abandoned requests, as Node.js does).
    cluster_processes : int
        Processes in the "cluster" scenario (Node.js cluster mode).
    cache_factor : float
        CPU per request multiplier in the "cache" scenario (the seed's Redis
        cache took CPU from 15-25 % to 4-5 %: about 0.2).
    limit : float, optional
        Requests admitted per second in the "rate limit" scenario; default
        the timeout-safe rate ``floor(processes * servers / E[S])`` -- the
        capacity, so the admitted work never outgrows the CPU and the
        backlog stays under a second.
    slow : float
        Latency threshold (s) for the recovery time.
    seed : int
        One seed for all scenarios, so they see the same arrival times
        (common random numbers).

    Returns
    -------
    pandas.DataFrame
        One row per scenario (``original``, ``cluster``, ``cache``,
        ``rate_limit``, ``fcfs``) with ``requests``, ``ok``, ``timed_out``
        (client failures: timed out or dropped), ``rejected``, ``goodput``
        (ok per second of the traffic), ``max_latency`` (s, completed
        requests), ``p99_latency`` (s) and ``recovery_time`` (s from the end
        of the busiest second until p99 latency is back under ``slow``).

    Examples
    --------
    >>> import pandas as pd
    >>> from capacity.overload import what_if
    >>> df = what_if(pd.Series([5.0] * 10 + [40.0] + [5.0] * 50), 0.1, seed=1)
    >>> list(df.index)
    ['original', 'cluster', 'cache', 'rate_limit', 'fcfs']
    """
    svc = as_service(service)
    mean = float(svc.mean)
    factor = float(check_positive(cache_factor, "cache_factor"))
    if limit is None:
        limit = math.floor(int(processes) / mean)
    cheap = _scaled(svc, factor)
    rng = np.random.default_rng(seed)
    if isinstance(arrivals, pd.Series):
        rates, _ = _rates(arrivals, "arrivals")
        times = _poisson_seconds(rates, rng)
    else:
        times = _arrival_array(arrivals)
    scenarios = {
        "original": dict(service=svc, processes=processes, discipline=discipline, limit=None),
        "cluster": dict(service=svc, processes=int(cluster_processes), discipline=discipline, limit=None),
        "cache": dict(service=cheap, processes=processes, discipline=discipline, limit=None),
        "rate_limit": dict(service=svc, processes=processes, discipline=discipline, limit=limit),
        "fcfs": dict(service=svc, processes=processes, discipline="fcfs", limit=None),
    }
    span = float(max(math.ceil(times[-1]), 1.0)) if times.size else 1.0
    rows = {}
    for name, kw in scenarios.items():
        res = replay(times, kw["service"], kw["processes"], kw["discipline"], timeout, limit=kw["limit"],
                     seed=int(np.random.default_rng(seed).integers(2**31)))
        req = res.run.requests
        ok = int((req["outcome"] == "ok").sum())
        done = req["response"].to_numpy()
        done = done[~np.isnan(req["completion"].to_numpy())]
        rows[name] = {
            "requests": int(len(req) + res.rejected.size),
            "ok": ok,
            "timed_out": int(req["outcome"].isin(["timed_out", "dropped"]).sum()),
            "rejected": int(res.rejected.size),
            "goodput": ok / span,
            "max_latency": float(done.max()) if done.size else math.nan,
            "p99_latency": float(np.quantile(done, 0.99)) if done.size else math.nan,
            "recovery_time": _recovery(res.per_second, slow),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def _scaled(svc: Service, factor: float) -> Service:
    """The service with every request's CPU multiplied by ``factor`` (same shape of distribution)."""
    p = svc._params
    fam = svc.family
    if fam == "deterministic":
        return Service.deterministic(p["mean"] * factor)
    if fam == "exponential":
        return Service.exponential(p["mean"] * factor)
    if fam == "erlang":
        return Service.erlang(p["mean"] * factor, p["k"])
    if fam in ("gamma", "lognormal", "hyperexponential"):
        return getattr(Service, fam)(p["mean"] * factor, p["scv"])
    if fam == "empirical":
        return Service.empirical(svc._samples * factor)
    raise ValueError(f"service: cannot scale a {fam!r} distribution; pass a Service with a mean/scv family")
