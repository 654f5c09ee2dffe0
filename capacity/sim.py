"""An exact discrete-event simulator of one queue, to check the formulas.

:func:`simulate` feeds a stream of requests (Poisson, or arrival times you
give) with CPU sizes drawn from a :class:`~capacity.Service` through a queue
with ``servers`` cores and returns one row per request.  There is no time
step and no approximation: every start and completion is computed exactly
(up to floating-point rounding) from the arrival times and sizes.

Disciplines
-----------
``"fcfs"``
    First come, first served with ``servers`` identical cores and one shared
    queue (M/G/c).  One core: the vectorised Lindley recursion.  Several
    cores: a heap of the times the cores become free.
``"ps"``
    Processor sharing (M/G/c-PS): with ``n`` requests in the system each one
    is served at rate ``min(1, c/n)`` -- the CPU is shared equally, and a
    request can use at most one core at a time, which is how a
    single-threaded request handler behaves on a ``c``-core machine.

Each discipline is one small *engine* (a function of the arrival times, the
sizes and the number of servers, returning start and completion times) in
the ``_ENGINES`` table, so new disciplines or features (timeouts, dispatch
to worker processes) are added as new engines without touching the
validation, the random streams or the result object.

References
----------
D. V. Lindley, "The theory of queues with a single server", Proc. Cambridge
Philos. Soc. 48 (1952) 277-289.

L. Kleinrock, *Queueing Systems, Volume 2: Computer Applications*, Wiley
(1976), ch. 4 (processor sharing).

M. Harchol-Balter, *Performance Modeling and Design of Computer Systems*,
Cambridge University Press (2013), part VII (scheduling, processor sharing).

A. M. Law, *Simulation Modeling and Analysis*, 5th ed., McGraw-Hill (2015),
sec. 9.5.3 (the method of batch means).
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from ._validation import as_float_array, check_nonnegative, check_positive, check_quantile, check_servers
from .distributions import Service, as_service

__all__ = ["ConfidenceInterval", "SimulationResult", "simulate"]


# ---------------------------------------------------------------------------- engines
class _Trace(NamedTuple):
    """What an engine returns: per-request times in arrival order (seconds).

    ``response`` is returned separately rather than recomputed as
    ``completion - arrival`` because an engine can often compute it without
    the cancellation error of subtracting two large absolute times.
    """

    start: np.ndarray
    completion: np.ndarray
    response: np.ndarray


# Requests per block in the blocked Lindley recursion: the running sums inside
# a block stay of the order of (block length x mean service), so their rounding
# error does not grow with the length of the run.
_LINDLEY_BLOCK = 1024


def _lindley_waits(arrivals: np.ndarray, sizes: np.ndarray, block: int = _LINDLEY_BLOCK) -> np.ndarray:
    """Waiting times in a FCFS single-server queue (Lindley's recursion).

    ``W_0 = 0`` and ``W_n = max(0, W_{n-1} + S_{n-1} - (A_n - A_{n-1}))``.
    With ``X_n = sum_{k<=n} (S_{k-1} - (A_k - A_{k-1}))`` the solution is
    ``W_n = X_n - min(-W_0, min_{k<=n} X_k)`` (a running minimum).  The sum
    is restarted at every block of ``block`` requests, carrying the wait of
    the block's last request into the next block's ``W_0``; only the carry
    (one value per block) is a Python loop.
    """
    n = arrivals.size
    if n == 0:
        return np.zeros(0)
    u = np.empty(n)
    u[0] = 0.0
    np.subtract(sizes[:-1], np.diff(arrivals), out=u[1:])
    n_blocks = -(-n // block)
    padded = np.zeros(n_blocks * block)
    padded[:n] = u
    x = np.cumsum(padded.reshape(n_blocks, block), axis=1)
    run_min = np.minimum.accumulate(x, axis=1)
    # Carry between blocks: W_last = max(W_in + X_last, X_last - min X).
    x_last = x[:, -1].tolist()
    m_last = run_min[:, -1].tolist()
    w_in = np.empty(n_blocks)
    w = 0.0
    for b in range(n_blocks):
        w_in[b] = w
        xl = x_last[b]
        w = max(w + xl, xl - m_last[b])
    waits = x - np.minimum(-w_in[:, None], run_min)
    return waits.reshape(-1)[:n]


def _fcfs_one(arrivals: np.ndarray, sizes: np.ndarray) -> _Trace:
    waits = _lindley_waits(arrivals, sizes)
    start = arrivals + waits
    return _Trace(start, start + sizes, waits + sizes)


def _fcfs_many(arrivals: np.ndarray, sizes: np.ndarray, servers: int) -> _Trace:
    # FCFS starts requests in arrival order, each on the core that frees up
    # first: a heap of core free times, O(log c) per request.
    free = [0.0] * servers
    replace = heapq.heapreplace
    starts = []
    append = starts.append
    for a, x in zip(arrivals.tolist(), sizes.tolist()):
        f = free[0]
        s = a if a > f else f
        append(s)
        replace(free, s + x)
    start = np.array(starts, dtype=float).reshape(-1)
    return _Trace(start, start + sizes, (start - arrivals) + sizes)


def _fcfs(arrivals: np.ndarray, sizes: np.ndarray, servers: int) -> _Trace:
    if servers == 1:
        return _fcfs_one(arrivals, sizes)
    return _fcfs_many(arrivals, sizes, servers)


def _ps(arrivals: np.ndarray, sizes: np.ndarray, servers: int) -> _Trace:
    """Processor sharing with ``servers`` cores, each job at rate min(1, c/n).

    Every job present gets the same rate, so the service each has attained
    since it arrived is ``V(t) - V(arrival)`` for one global virtual clock
    with ``dV/dt = min(1, c/n(t))``.  A job of size ``x`` arriving at virtual
    time ``V_a`` leaves when ``V = V_a + x``: a heap of these finish virtual
    times gives the next departure in O(log n), and no per-job state is ever
    updated.  ``V`` restarts at 0 whenever the system empties, so its
    rounding error does not grow with the length of the run.
    """
    n_req = arrivals.size
    c = servers
    completion = [0.0] * n_req
    heap: list[tuple[float, int]] = []
    push, pop = heapq.heappush, heapq.heappop
    t = 0.0  # time of the last event
    v = 0.0  # virtual time at t
    arr = arrivals.tolist()
    size = sizes.tolist()
    for i in range(n_req):
        a = arr[i]
        # Departures up to and including the arrival instant come first.
        while heap:
            n = len(heap)
            fv = heap[0][0]
            td = t + (fv - v) if n <= c else t + (fv - v) * n / c
            if td > a:
                break
            completion[pop(heap)[1]] = td
            t = td
            v = fv
        n = len(heap)
        if n == 0:
            v = 0.0
        elif n <= c:
            v += a - t
        else:
            v += (a - t) * c / n
        t = a
        push(heap, (v + size[i], i))
    while heap:
        n = len(heap)
        fv = heap[0][0]
        t = t + (fv - v) if n <= c else t + (fv - v) * n / c
        v = fv
        completion[pop(heap)[1]] = t
    done = np.array(completion, dtype=float).reshape(-1)
    return _Trace(np.full(n_req, np.nan), done, done - arrivals)


_Engine = Callable[[np.ndarray, np.ndarray, int], _Trace]
_ENGINES: dict[str, _Engine] = {"fcfs": _fcfs, "ps": _ps}


# ---------------------------------------------------------------------------- result
class ConfidenceInterval(NamedTuple):
    """A point estimate with a two-sided confidence interval (seconds)."""

    estimate: float
    half_width: float
    low: float
    high: float
    level: float
    batches: int


@dataclass(frozen=True)
class SimulationResult:
    """The outcome of :func:`simulate`.

    Attributes
    ----------
    requests : pandas.DataFrame
        One row per request in arrival order, columns (seconds):
        ``arrival``, ``start`` (start of service under FCFS; NaN under PS,
        where service starts at arrival but at a shared rate),
        ``completion``, ``response`` (= completion - arrival) and
        ``service`` (the CPU time the request needed).
    discipline : str
        ``"fcfs"`` or ``"ps"``.
    servers : int
        Number of cores.
    duration : float
        The observation window ``[0, duration]`` in seconds: the arrival
        window of a Poisson run, the ``duration`` you gave, or else the last
        completion time (the run ends when the queue empties).
        :meth:`utilization` and :meth:`mean_number` average over it; the
        per-request statistics use every request, including those that
        complete after it.
    """

    requests: pd.DataFrame
    discipline: str
    servers: int
    duration: float

    # ------------------------------------------------------------------ helpers
    def _values(self, metric: str, warmup: float) -> np.ndarray:
        warmup = float(check_nonnegative(warmup, "warmup"))
        if metric == "response":
            col = self.requests["response"].to_numpy()
        elif metric == "wait":
            if self.discipline != "fcfs":
                raise ValueError(f"metric 'wait' needs a FCFS run (a start of service), "
                                 f"this run is {self.discipline!r}")
            col = (self.requests["start"] - self.requests["arrival"]).to_numpy()
        else:
            raise ValueError(f"metric must be 'response' or 'wait', got {metric!r}")
        keep = self.requests["arrival"].to_numpy() >= warmup
        return col[keep]

    def _number_path(self) -> tuple[np.ndarray, np.ndarray]:
        """Event times and the number in system just after each (a step path)."""
        arr = self.requests["arrival"].to_numpy()
        done = self.requests["completion"].to_numpy()
        times = np.concatenate([arr, done])
        steps = np.concatenate([np.ones(arr.size), -np.ones(done.size)])
        order = np.argsort(times, kind="stable")
        return times[order], np.cumsum(steps[order])

    def _time_average(self, func: Callable[[np.ndarray], np.ndarray]) -> float:
        """(1/T) * integral over [0, T] of func(N(t)) dt, T = duration."""
        horizon = self.duration
        if not horizon > 0:
            return math.nan
        times, number = self._number_path()
        ends = np.append(times[1:], horizon)
        lengths = np.clip(np.minimum(ends, horizon) - np.minimum(times, horizon), 0.0, None)
        return float(np.sum(func(number) * lengths) / horizon)

    # ------------------------------------------------------------------ statistics
    def mean_response(self, warmup: float = 0.0) -> float:
        """Mean response time (s) of the requests arriving at or after ``warmup`` (s)."""
        x = self._values("response", warmup)
        return float(x.mean()) if x.size else math.nan

    def response_quantile(self, q: Any, warmup: float = 0.0) -> Any:
        """Empirical ``q``-quantile of the response time (s) of the requests
        arriving at or after ``warmup``; ``q`` may be an array."""
        q = check_quantile(q, "q")
        x = self._values("response", warmup)
        if x.size == 0:
            return math.nan if q.ndim == 0 else np.full(q.shape, np.nan)
        out = np.quantile(x, q)
        return float(out) if np.ndim(out) == 0 else out

    def utilization(self) -> float:
        """Measured busy fraction of the cores over ``[0, duration]``.

        With ``n`` requests present, ``min(n, c)`` cores are busy under both
        disciplines (both are work-conserving and PS lets a request use at
        most one core), so this is ``(1/(c T)) * integral of min(N(t), c) dt``.
        """
        c = self.servers
        return self._time_average(lambda n: np.minimum(n, c)) / c

    def mean_number(self) -> float:
        """Time-average number of requests in the system over ``[0, duration]``."""
        return self._time_average(lambda n: n)

    def confidence_interval(self, stat: str | float = "mean", level: float = 0.99, batches: int = 30,
                            warmup: float = 0.0, metric: str = "response") -> ConfidenceInterval:
        """Confidence interval for the mean or a quantile, by batch means.

        Parameters
        ----------
        stat : "mean" or float
            ``"mean"``, or a quantile level in (0, 1) such as ``0.99``.
        level : float
            Confidence level in (0, 1).
        batches : int
            Number of batches (>= 2); 20 to 30 is the usual advice.
        warmup : float
            Requests arriving before ``warmup`` seconds are discarded
            (initial transient).
        metric : "response" or "wait"
            Response time, or waiting time before service (FCFS only).

        Returns
        -------
        ConfidenceInterval
            ``estimate`` (the statistic over all kept requests),
            ``half_width``, ``low``, ``high``, ``level``, ``batches``.

        Notes
        -----
        Successive response times are strongly correlated, so the iid
        standard error is far too small.  The kept requests are cut, in
        arrival order, into ``batches`` contiguous batches of (nearly) equal
        size; the statistic of each batch is treated as an independent
        normal sample, giving the half-width
        ``t_{b-1, (1+level)/2} * sd(batch stats) / sqrt(b)``.  The interval
        is centred on the statistic of all kept requests (sectioning), which
        for quantiles has less bias than the mean of batch quantiles.  The
        batches must be long compared with the busy-period correlation time
        for the interval to be honest: at high load use long runs.

        References
        ----------
        A. M. Law, *Simulation Modeling and Analysis*, 5th ed. (2015),
        sec. 9.5.3; S. Asmussen and P. W. Glynn, *Stochastic Simulation*,
        Springer (2007), ch. III (sectioning).
        """
        level_arr = check_quantile(level, "level")
        if level_arr.ndim:
            raise ValueError(f"level must be a single number, got {level!r}")
        level = float(level_arr)
        if isinstance(batches, (bool, np.bool_)) or not float(batches).is_integer() or batches < 2:
            raise ValueError(f"batches must be an integer >= 2, got {batches!r}")
        batches = int(batches)
        x = self._values(metric, warmup)
        if x.size < 2 * batches:
            raise ValueError(f"batches must leave at least 2 requests per batch: {x.size} requests "
                             f"after warmup, batches={batches!r}")
        if isinstance(stat, str):
            if stat != "mean":
                raise ValueError(f"stat must be 'mean' or a quantile level in (0, 1), got {stat!r}")
            func: Callable[[np.ndarray], float] = lambda y: float(np.mean(y))  # noqa: E731
        else:
            q = float(check_quantile(stat, "stat"))
            func = lambda y: float(np.quantile(y, q))  # noqa: E731
        per_batch = np.array([func(chunk) for chunk in np.array_split(x, batches)])
        estimate = func(x)
        half = float(stats.t.ppf(0.5 + 0.5 * level, batches - 1) * per_batch.std(ddof=1) / math.sqrt(batches))
        return ConfidenceInterval(estimate, half, estimate - half, estimate + half, level, batches)


# ---------------------------------------------------------------------------- public entry
def _arrival_times(arrivals: Any, duration: Any, rng: np.random.Generator) -> tuple[np.ndarray, float | None]:
    if np.ndim(arrivals) == 0:
        rate = float(check_nonnegative(arrivals, "arrivals"))
        if duration is None:
            raise ValueError("duration must be given (seconds) when arrivals is a Poisson rate, got None")
        horizon = float(check_positive(duration, "duration"))
        # Given their number, the points of a Poisson process on [0, T] are
        # iid uniform: exact, and free of the rounding drift of summing gaps.
        count = rng.poisson(rate * horizon)
        return np.sort(rng.uniform(0.0, horizon, count)), horizon
    times = as_float_array(arrivals, "arrivals")
    if times.ndim != 1:
        raise ValueError(f"arrivals must be a number (a rate) or a one-dimensional array of times, "
                         f"got shape {times.shape}")
    bad = ~np.isfinite(times) | (times < 0)
    if bad.any():
        raise ValueError(f"arrivals must be non-negative and finite, got {times[bad][0]!r}")
    dips = np.flatnonzero(np.diff(times) < 0)
    if dips.size:
        k = dips[0]
        raise ValueError(f"arrivals must be non-decreasing, got {times[k]!r} then {times[k + 1]!r} "
                         f"at positions {k} and {k + 1}")
    horizon = None
    if duration is not None:
        horizon = float(check_positive(duration, "duration"))
        if times.size and times[-1] > horizon:
            raise ValueError(f"duration must be at least the last arrival time {times[-1]!r}, got {duration!r}")
    return times, horizon


def _run(arrivals: np.ndarray, sizes: np.ndarray, discipline: str, servers: int,
         duration: float | None) -> SimulationResult:
    """Simulate given arrival times and per-request sizes (already validated)."""
    trace = _ENGINES[discipline](arrivals, sizes, servers)
    requests = pd.DataFrame({
        "arrival": arrivals,
        "start": trace.start,
        "completion": trace.completion,
        "response": trace.response,
        "service": sizes,
    })
    if duration is None:
        duration = float(trace.completion.max()) if arrivals.size else 0.0
    return SimulationResult(requests, discipline, servers, float(duration))


def simulate(arrivals: Any, service: Service | float, discipline: str = "fcfs", servers: int = 1,
             duration: float | None = None, seed: Any = None) -> SimulationResult:
    """Simulate a queue exactly, request by request.

    Parameters
    ----------
    arrivals : float or array_like
        Either a Poisson arrival rate in requests/s (then ``duration`` is
        required), or the arrival times in seconds: a one-dimensional,
        non-decreasing array of finite values >= 0.
    service : Service or float
        CPU time per request in seconds: a :class:`~capacity.Service` with
        scalar parameters, or a bare number meaning an exponential service
        time with that mean.
    discipline : {"fcfs", "ps"}
        First come first served, or processor sharing where each of the
        ``n`` requests present is served at rate ``min(1, servers/n)``.
    servers : int
        Number of cores (>= 1).
    duration : float, optional
        Length of the run in seconds.  Required with a Poisson rate (the
        arrivals fall in ``[0, duration]``); with explicit arrival times it
        must be at least the last arrival and defaults to the last
        completion.  Requests arriving in the window are all run to
        completion.
    seed : None, int, or numpy.random.Generator
        Anything :func:`numpy.random.default_rng` accepts.  One generator
        draws the arrival times first and then the sizes, so a fixed seed
        reproduces the run.

    Returns
    -------
    SimulationResult
        ``.requests`` (a DataFrame with ``arrival``, ``start``,
        ``completion``, ``response``, ``service``), ``.discipline``,
        ``.servers``, ``.duration``, and the methods
        :meth:`~SimulationResult.mean_response`,
        :meth:`~SimulationResult.response_quantile`,
        :meth:`~SimulationResult.confidence_interval` (batch means),
        :meth:`~SimulationResult.utilization`,
        :meth:`~SimulationResult.mean_number`.

    Notes
    -----
    Exact event-driven simulation, no time step.

    * FCFS, one server: Lindley's recursion
      ``W_n = max(0, W_{n-1} + S_{n-1} - (A_n - A_{n-1}))``, solved in
      vectorised form as a running minimum of partial sums, restarted every
      1024 requests so that rounding does not grow with the run length
      (measured over 10^6 M/M/1 requests, mean service 1 s: at most
      6e-13 s from the plain loop at rho = 0.5 and 0.9, against 6e-10 s for
      one running sum over the whole run).
    * FCFS, ``c`` servers: requests start in arrival order on the earliest
      free core (a heap), O(log c) per request.
    * PS, ``c`` servers: all requests present share the same rate
      ``r(n) = min(1, c/n)``, so a global virtual clock ``dV/dt = r(n)``
      measures everyone's attained service; a request arriving at virtual
      time ``V_a`` with size ``x`` leaves when ``V = V_a + x``.  A heap of
      those finish times makes each event O(log n).  Simultaneous arrivals
      are handled exactly: 30 requests of 1 s arriving together on one core
      all leave at 30 s (FCFS: at 1, 2, ..., 30 s).

    The queue starts empty, so early requests see less congestion than in
    steady state: discard a warm-up period when comparing with
    steady-state formulas.

    References
    ----------
    D. V. Lindley, "The theory of queues with a single server", Proc.
    Cambridge Philos. Soc. 48 (1952) 277-289.

    L. Kleinrock, *Queueing Systems, Volume 2: Computer Applications*,
    Wiley (1976), ch. 4 (processor sharing).

    M. Harchol-Balter, *Performance Modeling and Design of Computer
    Systems*, Cambridge University Press (2013), part VII (scheduling,
    processor sharing).

    Examples
    --------
    Thirty 1-second requests arriving together on one core:

    >>> from capacity import Service
    >>> from capacity.sim import simulate
    >>> ps = simulate([0.0] * 30, Service.deterministic(1.0), discipline="ps")
    >>> sorted(set(ps.requests["completion"]))
    [30.0]
    >>> fcfs = simulate([0.0] * 30, Service.deterministic(1.0))
    >>> fcfs.requests["completion"].tolist()[:3]
    [1.0, 2.0, 3.0]

    An M/M/1 queue at utilisation 0.5 (theory: mean response 2 s):

    >>> run = simulate(0.5, 1.0, duration=200_000, seed=1)
    >>> ci = run.confidence_interval(warmup=100)
    >>> bool(ci.low < 2.0 < ci.high), round(run.utilization(), 2)
    (True, 0.5)
    """
    if not isinstance(discipline, str) or discipline not in _ENGINES:
        raise ValueError(f"discipline must be one of {sorted(_ENGINES)}, got {discipline!r}")
    c_arr = check_servers(servers, "servers")
    if c_arr.ndim != 0:
        raise ValueError(f"servers must be a single integer, got {servers!r}")
    c = int(c_arr)
    svc = as_service(service)
    if svc.shape != ():
        raise ValueError(f"service must have scalar parameters for a simulation, got parameter shape "
                         f"{svc.shape}")
    rng = np.random.default_rng(seed)
    times, horizon = _arrival_times(arrivals, duration, rng)
    sizes = np.asarray(svc.sample(times.size, rng), dtype=float).reshape(-1)
    return _run(times, sizes, discipline, c, horizon)
