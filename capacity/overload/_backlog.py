"""The fluid overload laws: the backlog of a burst, and how an overloaded server falls behind.

* :func:`backlog` -- how much CPU work piles up during a burst (fluid Lindley recursion on a
  per-bucket arrival-rate series), how long a new request would wait, for how many seconds
  that wait exceeds the timeout, and how long the service takes to recover.
* :func:`ps_growth_rate`, :func:`ps_fluid_completion`, :func:`ps_fluid_sojourn`,
  :func:`fcfs_overload_wait` -- the transient laws of an overloaded processor-sharing server
  (Jean-Marie & Robert 1994: the number present grows like ``alpha * t`` and a request of size
  ``x`` arriving ``elapsed`` seconds into the overload leaves near ``elapsed * exp(alpha x)``)
  and of FCFS (a request arriving at ``elapsed`` waits about ``(rho - 1) elapsed``).
  Derivations: :func:`capacity.symbolic.ps_overload_growth_rate`,
  :func:`capacity.symbolic.ps_overload_completion_time`,
  :func:`capacity.symbolic.fcfs_overload_wait`.

Units: seconds and requests per second.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from .._checks import check_nonnegative, check_positive, check_servers, scalar_out
from .._common import prepare
from .._deprecation import renamed_parameters
from .._result import Result, jsonable
from ..distributions import Service, as_service
from ..units import format_time

__all__ = [
    "BacklogResult",
    "backlog",
    "fcfs_overload_wait",
    "ps_fluid_completion",
    "ps_fluid_sojourn",
    "ps_growth_rate",
]

ArrayLike = Any


def _rates(series: Any, name: str = "arrival_rate") -> tuple[np.ndarray, Any]:
    """A 1-d float array of non-negative finite rates (and the Series index, if any).

    Shared by :func:`backlog`, :func:`capacity.overload.replay` and the incident scenario, so a
    rate series is refused with the same words wherever it is given.
    """
    index = None
    if isinstance(series, pd.Series):
        index = series.index
        values = series.to_numpy(dtype=float, na_value=np.nan)
    else:
        values = series
    arr = check_nonnegative(values, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (one rate per bucket), got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty, got {series!r}")
    return arr, index


# ============================================================================ 1. backlog
@dataclass(frozen=True, repr=False)
class BacklogResult(Result):
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
    explanation : str
        The answer in words (``str(result)``).

    ``to_frame()`` is the per-bucket ``table``; ``to_dict()`` holds the summary numbers and the
    explanation (not the table, which is as long as the series).
    """

    table: pd.DataFrame
    peak_backlog: float
    peak_time: float
    peak_delay: float
    seconds_over_timeout: float
    recovery_time: float
    explanation: str = ""

    _headline: ClassVar[tuple[str, ...]] = ("peak_backlog", "peak_delay", "seconds_over_timeout",
                                            "recovery_time")

    def to_dict(self) -> dict:
        """The summary numbers and the explanation, JSON-ready (the table is ``to_frame()``)."""
        return {name: jsonable(getattr(self, name)) for name in self._fields() if name != "table"}


def _fluid_lindley(net: np.ndarray, initial: float) -> np.ndarray:
    """B_k = max(0, B_{k-1} + net_k), B_{-1} = initial, as a running minimum.

    With X_k = sum_{j<=k} net_j: B_k = X_k - min(-initial, min_{j<=k} X_j).
    """
    x = np.cumsum(net)
    return x - np.minimum(-initial, np.minimum.accumulate(x))


@renamed_parameters(rate_series="arrival_rate")
def backlog(arrival_rate: ArrayLike, service: Service | ArrayLike, servers: int = 1, *,
            bucket: float = 1.0, timeout: float | None = None, initial: float = 0.0) -> BacklogResult:
    """CPU-work backlog over time from a per-bucket arrival-rate series (fluid Lindley recursion).

    Parameters
    ----------
    arrival_rate : pandas.Series or array_like
        Arrival rate in each bucket, requests/s (>= 0), piecewise constant
        (``rate_series`` before this release, still accepted with a warning).
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
    >>> print(r)  # doctest: +NORMALIZE_WHITESPACE
    The backlog peaks at 10 s of CPU work at t = 10 s: a FCFS request arriving then waits 10 s
    before it starts (under processor sharing, about the time every request in flight still
    needs). The wait exceeds the 5 s timeout for 10 s in all. The backlog is back to 0 10 s
    after the last overloaded bucket ends. (Fluid model: what the averages force, a lower bound;
    random arrivals and sizes add queueing on top.)
    """
    rates, index = _rates(arrival_rate)
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
    over = math.nan if tau is None else _time_above(prev, net, tau * c, dt)
    recovery = _recovery_time(b, work, rates * float(mean), overloaded, c, dt)
    peak, when, delay = float(b[k_peak]), float((k_peak + 1) * dt), float(b[k_peak] / c)
    words = _backlog_words(peak, when, delay, over, recovery, int(c), tau)
    return BacklogResult(table, peak, when, delay, over, recovery, words)


def _fraction_above(prev: np.ndarray, net: np.ndarray, level: float) -> np.ndarray:
    """Per bucket, the share of it the piecewise-linear path spends above ``level``: in bucket k it
    runs from ``prev_k`` with slope ``net_k`` per bucket (clipped at 0, which lies below any
    positive level)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        s_cross = (level - prev) / net
    return np.where(net > 0, 1.0 - np.clip(s_cross, 0.0, 1.0),
                    np.where(net < 0, np.clip(s_cross, 0.0, 1.0), (prev > level).astype(float)))


def _time_above(prev: np.ndarray, net: np.ndarray, level: float, dt: float) -> float:
    """Time the piecewise-linear path spends above ``level`` (:func:`_fraction_above`)."""
    return float(np.sum(_fraction_above(prev, net, level)) * dt)


def _recovery_time(b: np.ndarray, work: np.ndarray, work_rate: np.ndarray, overloaded: np.ndarray,
                   c: float, dt: float) -> float:
    """Seconds from the end of the last overloaded bucket until the backlog is 0 (see BacklogResult)."""
    if not overloaded.any():
        return math.nan
    last = int(np.flatnonzero(overloaded)[-1])
    after = b[last:]
    drained = np.flatnonzero(after[1:] <= 0.0)
    if after[0] <= 0.0:
        return 0.0
    if drained.size:
        k = last + 1 + int(drained[0])  # first bucket ending at 0
        drain_rate = c * dt - work[k]
        return float((k - last - 1) * dt + b[k - 1] / drain_rate * dt)
    # Still queued at the end of the series: extrapolate the last bucket's rate.
    drain = c - work_rate[-1]
    return float((b.size - 1 - last) * dt + b[-1] / drain) if drain > 0 else math.inf


def _seconds(x: float) -> str:
    return "0 s" if x == 0 else format_time(x)


def _backlog_words(peak: float, when: float, delay: float, over: float, recovery: float,
                   servers: int, timeout: float | None) -> str:
    """The backlog's answer in words (BacklogResult.explanation)."""
    cores = f"{servers} core{'s' if servers != 1 else ''}"
    if math.isnan(recovery):
        if peak == 0:
            return f"No bucket offers more work than the {cores} can do: no backlog builds up."
        return (f"No bucket offers more work than the {cores} can do: the backlog only drains, from "
                f"its initial {_seconds(peak)} of CPU work.")
    parts = [(f"The backlog peaks at {_seconds(peak)} of CPU work at t = {_seconds(when)}: a FCFS "
              f"request arriving then waits {_seconds(delay)} before it starts (under processor "
              f"sharing, about the time every request in flight still needs).")]
    if timeout is not None:
        parts.append(f"The wait exceeds the {_seconds(timeout)} timeout for {_seconds(over)} in all."
                     if over > 0 else f"The wait never exceeds the {_seconds(timeout)} timeout.")
    if math.isinf(recovery):
        parts.append("It never drains: the last bucket's rate is at or above capacity.")
    elif recovery == 0:
        parts.append("The backlog is gone by the end of the last overloaded bucket.")
    else:
        parts.append(f"The backlog is back to 0 {_seconds(recovery)} after the last overloaded bucket ends.")
    parts.append("(Fluid model: what the averages force, a lower bound; random arrivals and sizes add "
                 "queueing on top.)")
    return " ".join(parts)


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


@renamed_parameters(u="elapsed")
def ps_fluid_completion(elapsed: ArrayLike, size: ArrayLike, arrival_rate: ArrayLike,
                        service: Service | ArrayLike, servers: ArrayLike = 1):
    """Completion time (since the overload began) of a request arriving ``elapsed`` s into PS overload.

    Parameters
    ----------
    elapsed : float or array_like
        Arrival time of the request, seconds after the overload began with an
        empty server (>= 0).
    size : float or array_like
        Its CPU time, s (>= 0).
    arrival_rate, service, servers
        As in :func:`ps_growth_rate`.

    Returns
    -------
    float or ndarray
        ``elapsed * exp(alpha * size / c)`` seconds (time since the start of
        the overload); ``inf`` never; for ``rho <= 1`` (``alpha = 0``) just
        ``elapsed`` plus nothing -- use :mod:`capacity.ps` there instead.

    Notes
    -----
    Fluid law (an approximation, exact in the limit of large ``elapsed``,
    written ``u`` below): with ``N(t) ~ alpha t`` requests present, each is
    served at rate ``c / (alpha t)``, so a request arriving at ``u`` has
    received ``(c/alpha) ln(t/u)`` by time ``t`` and leaves when that equals
    its size: ``t = u exp(alpha x / c)``.  Its sojourn is
    ``u (exp(alpha x / c) - 1)`` (:func:`ps_fluid_sojourn`): proportional to
    how long the overload has lasted, and exponential in its size.  Valid
    when ``alpha u`` is large (many requests present when it arrives) and the
    overload lasts past the completion; early arrivals (``alpha u`` of order
    1) finish sooner than this in relative terms only by O(1/(alpha u)).
    Derivation:
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
    elapsed = check_nonnegative(elapsed, "elapsed")
    x = check_nonnegative(size, "size")
    q = prepare(arrival_rate, service, servers)
    shape = np.broadcast_shapes(elapsed.shape, x.shape, q.shape)
    lam = np.broadcast_to(q.arrival_rate, q.shape)
    c = np.broadcast_to(q.servers, q.shape).astype(float)
    alpha = _growth_rate(lam, q.service, c, np.broadcast_to(q.mean_service, q.shape))
    return scalar_out(np.broadcast_to(elapsed * np.exp(alpha * x / c), shape))


@renamed_parameters(u="elapsed")
def ps_fluid_sojourn(elapsed: ArrayLike, size: ArrayLike, arrival_rate: ArrayLike,
                     service: Service | ArrayLike, servers: ArrayLike = 1):
    """Sojourn time ``u (exp(alpha x / c) - 1)`` of a request arriving ``u = elapsed`` s into PS overload.

    See :func:`ps_fluid_completion` (completion minus arrival).

    Examples
    --------
    >>> from capacity.overload import ps_fluid_sojourn
    >>> round(ps_fluid_sojourn(100.0, 2.0, 1.5, 1.0), 3)
    171.828
    """
    elapsed = check_nonnegative(elapsed, "elapsed")
    done = np.asarray(ps_fluid_completion(elapsed, size, arrival_rate, service, servers))
    return scalar_out(done - elapsed)


@renamed_parameters(u="elapsed")
def fcfs_overload_wait(elapsed: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike,
                       servers: ArrayLike = 1):
    """Wait of a FCFS request arriving ``elapsed`` s into an overload that began with an empty queue.

    Parameters
    ----------
    elapsed : float or array_like
        Arrival time, seconds after the overload began (>= 0).
    arrival_rate, service, servers
        As in :func:`ps_growth_rate`.

    Returns
    -------
    float or ndarray
        ``max(rho - 1, 0) * elapsed`` seconds, ``rho = lambda E[S] / c``.

    Notes
    -----
    Fluid law: work arrives at rate ``lambda E[S]`` and leaves at rate ``c``,
    so the backlog at ``u = elapsed`` is ``(lambda E[S] - c) u`` and a FCFS
    arrival waits ``backlog / c = (rho - 1) u`` -- linear in ``u``, whatever
    its size, and it is then served at full speed.  Contrast with PS, where
    every request present slows down together.  The stochastic wait is this
    plus O(sqrt(u)) fluctuations (functional central limit theorem), so the
    relative error falls like ``1/sqrt(u)``.  Derivation:
    :func:`capacity.symbolic.fcfs_overload_wait`.

    Examples
    --------
    >>> from capacity.overload import fcfs_overload_wait
    >>> fcfs_overload_wait(100.0, 1.5, 1.0)
    50.0
    """
    elapsed = check_nonnegative(elapsed, "elapsed")
    q = prepare(arrival_rate, service, servers)
    return scalar_out(np.maximum(q.utilization - 1.0, 0.0) * elapsed)


