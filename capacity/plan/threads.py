"""Threads a service needs, CPU load against CPU utilisation, and thread-pool size for an SLO.

Three questions from the thread-pool lessons of the Ctrip timeout article (seed 001, sections
3.4 and 3.6): how many threads a thread-per-request service holds by Little's law, with blocking
downstream calls on pool threads or with non-blocking IO (:func:`thread_demand`); how many
runnable threads -- the load average -- a CPU shows at a given utilisation (:func:`cpu_load`);
and the fewest pool threads that keep a latency SLO (:func:`pool_size`, the integer search of
:func:`~capacity.plan.servers_needed`).  When handing a short task to a pool costs more than it
saves is :mod:`capacity.plan.handoff`.  See :mod:`capacity.plan`.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import stats

from .._checks import check_broadcast, check_nonnegative, check_positive, check_quantile, check_servers, scalar_out
from .._common import solve_increasing
from .._result import Result
from ..distributions import Service, as_service
from ._solve import _parse_slo
from ._text import _fmt_q, _fmt_rate, _fmt_time
from .servers import ServersNeeded, servers_needed

__all__ = ["CpuLoad", "ThreadDemand", "cpu_load", "pool_size", "thread_demand"]

ArrayLike = Any


# ---------------------------------------------------------------------------------------------
# Threads by Little's law


@dataclass(frozen=True, repr=False)
class ThreadDemand(Result):
    """Result of :func:`thread_demand`.

    Attributes
    ----------
    mean_number : float or ndarray
        Requests in flight, ``L = arrival_rate * mean_response`` (Little's law).
    threads_blocking : float or ndarray
        Mean threads held with blocking downstream calls on pool threads:
        ``arrival_rate * (mean_response + calls * call_time)``.
    threads_nonblocking : float or ndarray
        Mean threads held with non-blocking IO (the calls hold no thread): ``L``.
    pool_blocking, pool_nonblocking : int or ndarray
        Threads to provision so that an arriving request finds every thread it needs with
        probability at least ``q`` (the ``q`` quantile of the threads in use; see Notes).
    arrival_rate, mean_response, calls, call_time, q
        What was asked.
    explanation : str
    """

    mean_number: Any
    threads_blocking: Any
    threads_nonblocking: Any
    pool_blocking: Any
    pool_nonblocking: Any
    arrival_rate: Any
    mean_response: Any
    calls: Any
    call_time: Any
    q: float
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("mean_number", "threads_blocking", "threads_nonblocking",
                                            "pool_blocking")


def _calls(calls: ArrayLike) -> np.ndarray:
    arr = check_nonnegative(calls, "calls")
    bad = arr != np.round(arr)
    if isinstance(calls, (bool, np.bool_)) or bad.any():
        raise ValueError(f"calls must be a non-negative integer, got {calls!r}")
    return arr.astype(np.int64)


def thread_demand(arrival_rate: ArrayLike, mean_response: ArrayLike, calls: ArrayLike = 0,
                  call_time: ArrayLike | None = None, q: float = 0.99) -> ThreadDemand:
    """Threads a thread-per-request service holds, with blocking calls or with non-blocking IO.

    Parameters
    ----------
    arrival_rate : float or array_like
        Requests per second (> 0).
    mean_response : float or array_like
        Mean time a request holds its own (request) thread, seconds: its response time.
    calls : int or array_like, optional
        Downstream calls each request makes **in parallel on pool threads** that block until the
        answer comes (default 0).
    call_time : float or array_like, optional
        Mean time one such call holds its pool thread, seconds (default ``mean_response``: the
        request waits for its calls, so they span it, as in the article).  At most
        ``mean_response``: a request that waits for its parallel calls outlives them.
    q : float, optional
        Level for the pool sizes (default 0.99).

    Returns
    -------
    ThreadDemand

    Notes
    -----
    *Little's law* (``L = lambda W``, any arrival process and any holding-time law, in steady
    state) applied to each kind of thread: request threads are held for ``W = mean_response``,
    so ``lambda W`` are busy on average; each of the ``k = calls`` pool threads of a request is
    held for ``d = call_time``, adding ``k lambda d``.  With blocking IO the mean is
    ``lambda (W + k d)``; with non-blocking IO (an NIO client or an event loop) the calls hold
    no thread and it is ``lambda W``.  The NIO selector threads themselves, a small constant
    the article leaves out, are left out here too.

    *Pool sizes*: with Poisson arrivals and enough threads that nobody waits for one, the number
    of requests in flight ``N`` is Poisson with mean ``lambda W`` for any holding-time law (the
    M/G/infinity queue; Takacs 1962).  Request threads are ``N``; with blocking calls the threads
    in use are at most ``(1 + k) N`` path by path, with equality when the calls span their
    request (``call_time = mean_response``).  The pools are the ``q`` quantiles of ``N`` and
    ``(1 + k) N``: exact for the non-blocking pool and for calls that span the request, an upper
    bound otherwise.  Bursts beyond Poisson need more.

    References
    ----------
    J. D. C. Little, "A proof for the queuing formula L = lambda W", Operations Research 9
    (1961) 383-387.  L. Takacs, *Introduction to the Theory of Queues* (1962), ch. 3
    (M/G/infinity).  Seed article 001 (Ctrip), section 3.6: "a request A calls B, C, D ... 100
    concurrent requests need 100 + 3 x 100 = 400 threads"; with NIO, 100.

    Examples
    --------
    The article's 100 concurrent requests: 1000 requests/s held 100 ms each, 3 parallel calls:

    >>> from capacity import plan
    >>> r = plan.thread_demand(1000.0, 0.100, calls=3)
    >>> r.mean_number, r.threads_blocking, r.threads_nonblocking
    (100.0, 400.0, 100.0)
    """
    lam = check_positive(arrival_rate, "arrival_rate")
    w = check_positive(mean_response, "mean_response")
    k = _calls(calls)
    d = w if call_time is None else check_nonnegative(call_time, "call_time")
    check_broadcast(arrival_rate=lam, mean_response=w, calls=k, call_time=d)
    if np.any(d > w * (1 + 1e-12)):
        raise ValueError(f"call_time must be at most mean_response (a request waits for its parallel calls), "
                         f"got call_time={call_time!r} with mean_response={mean_response!r}")
    level = float(check_quantile(q, "q"))
    n_mean = lam * w
    blocking = lam * (w + k * d)
    pool_n = stats.poisson.ppf(level, n_mean).astype(np.int64)
    res = dict(mean_number=scalar_out(n_mean), threads_blocking=scalar_out(blocking),
               threads_nonblocking=scalar_out(n_mean), pool_blocking=scalar_out((1 + k) * pool_n),
               pool_nonblocking=scalar_out(pool_n), arrival_rate=scalar_out(lam), mean_response=scalar_out(w),
               calls=scalar_out(k), call_time=scalar_out(d), q=level)
    return ThreadDemand(**res, explanation=_explain_demand(res))


def _explain_demand(r: dict) -> str:
    if np.ndim(r["threads_blocking"]):
        tb = np.asarray(r["threads_blocking"])
        return (f"{tb.size} configurations: blocking calls hold {tb.min():.4g} to {tb.max():.4g} threads on "
                f"average, non-blocking IO {np.min(r['threads_nonblocking']):.4g} to "
                f"{np.max(r['threads_nonblocking']):.4g} (Little's law).")
    k, lam, w, d = int(r["calls"]), r["arrival_rate"], r["mean_response"], r["call_time"]
    text = (f"At {_fmt_rate(lam)} with each request holding its thread {_fmt_time(w)}, Little's law puts "
            f"{r['mean_number']:.4g} requests in flight on average, each on its own thread.")
    if k:
        text += (f" With {k} blocking call{'s' if k > 1 else ''} per request on pool threads, each held "
                 f"{_fmt_time(d)}, the service holds {r['threads_blocking']:.4g} threads on average; with "
                 f"non-blocking IO the calls hold none and it stays {r['threads_nonblocking']:.4g}.")
    text += (f" To have every thread ready with probability {r['q']:g} (Poisson arrivals, M/G/infinity): "
             f"{r['pool_nonblocking']} request threads")
    if k:
        text += f", or {r['pool_blocking']} threads in all with blocking calls"
    return text + "."


# ---------------------------------------------------------------------------------------------
# CPU load against CPU utilisation


@dataclass(frozen=True, repr=False)
class CpuLoad(Result):
    """Result of :func:`cpu_load`.

    Attributes
    ----------
    utilization : float or ndarray
        The CPU's busy share (as given).
    load : float or ndarray
        Mean runnable threads the model predicts (on a core or waiting for one): the load
        average of a CPU queue with Poisson wake-ups.
    running : float or ndarray
        Of those, on a core: ``servers * utilization``.
    waiting : float or ndarray
        Runnable but waiting for a core: ``load - running``.
    full_load_utilization : float or ndarray
        The utilisation at which the model's load equals the core count.
    measured_load, excess_load : float, ndarray or None
        The measured load average, if given, and what of it the model does not explain
        (``measured_load - load``).
    servers : int or ndarray
    explanation : str
    """

    utilization: Any
    load: Any
    running: Any
    waiting: Any
    full_load_utilization: Any
    measured_load: Any
    excess_load: Any
    servers: Any
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("utilization", "load", "servers", "excess_load")


def _runnable(rho: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Mean number in an M/M/c queue at utilisation ``rho``: ``c rho + C(c, c rho) rho / (1 - rho)``."""
    from .. import erlang

    stable = rho < 1
    r = np.where(stable, rho, 0.5)
    wait = np.asarray(erlang.erlang_c(c, c * r), dtype=float) * r / (1.0 - r)
    return np.where(stable, c * r + wait, np.inf)


def cpu_load(utilization: ArrayLike, servers: ArrayLike = 1, load: ArrayLike | None = None) -> CpuLoad:
    """The load average a CPU shows at a utilisation: runnable threads, on a core or waiting.

    Parameters
    ----------
    utilization : float or array_like
        Busy share of the cores, in [0, 1) (a CPU % reading as a fraction).
    servers : int or array_like of int, optional
        Cores (default 1).
    load : float or array_like, optional
        The measured load average (1-minute), to compare.

    Returns
    -------
    CpuLoad

    Notes
    -----
    Each runnable thread is one customer of the CPU; the cores serve them by time slices, i.e.
    processor sharing on ``c`` cores.  With Poisson wake-ups the mean number of customers of
    M/G/c-PS is that of M/M/c for any CPU-burst law (insensitivity; Kelly 1979),

    ``load = c rho + C(c, c rho) rho / (1 - rho)``,

    ``C`` the Erlang C probability.  ``c rho`` threads run, the rest wait.  The load reaches
    the core count at ``rho = (sqrt(5) - 1) / 2 = 0.618`` on 2 cores and climbs without bound
    as ``rho -> 1``.

    What it leaves out: Linux also counts threads in uninterruptible sleep (``D`` state: disk
    IO, some locks) in the load average, and wake-ups that come in bunches (a pool waking
    several threads for one request, a timer tick) queue more than Poisson ones do.  A measured
    load well above the model at the measured utilisation (``excess_load``) points at those --
    the article's case 3.6: load above 2 on 2 cores with the utilisation "normal", falling to
    about 0.5 after the thread-pool fan-out became NIO.

    References
    ----------
    F. P. Kelly, *Reversibility and Stochastic Networks* (1979), ch. 3 (symmetric queues).
    R. B. Cooper, *Introduction to Queueing Theory*, 2nd ed. (1981), section 3.4 (M/M/c).
    Seed article 001 (Ctrip), section 3.6.

    Examples
    --------
    >>> from capacity import plan
    >>> r = plan.cpu_load(0.5, servers=2)
    >>> round(r.load, 4), round(r.full_load_utilization, 4)     # 2 rho / (1 - rho^2)
    (1.3333, 0.618)
    """
    rho = check_nonnegative(utilization, "utilization")
    if np.any(rho >= 1):
        raise ValueError(f"utilization must be below 1 (at 1 the run queue grows without bound), got {utilization!r}")
    c = check_servers(servers)
    measured = None if load is None else check_nonnegative(load, "load")
    check_broadcast(utilization=rho, servers=c, **({} if measured is None else {"load": measured}))
    model = _runnable(rho, c)
    running = c * rho
    # The load is increasing in rho (from 0 to inf), so the full-load point has one root.
    full = solve_increasing(lambda r: _runnable(r, np.broadcast_to(c, np.shape(r))), np.asarray(c, float),
                            np.full(np.shape(c), 0.5), np.full(np.shape(c), 0.999), log=False, rtol=1e-10)
    res = dict(utilization=scalar_out(rho), load=scalar_out(model), running=scalar_out(running),
               waiting=scalar_out(model - running), full_load_utilization=scalar_out(np.broadcast_to(np.minimum(full, 1.0), model.shape)),
               measured_load=None if measured is None else scalar_out(measured),
               excess_load=None if measured is None else scalar_out(measured - model), servers=scalar_out(c))
    return CpuLoad(**res, explanation=_explain_load(res))


def _explain_load(r: dict) -> str:
    if np.ndim(r["load"]) or np.ndim(r["servers"]):
        ld = np.asarray(r["load"])
        return (f"{ld.size} configurations: the model's load ranges from {ld.min():.3g} to {ld.max():.3g} "
                "runnable threads (M/M/c number in system).")
    c, rho = int(r["servers"]), float(r["utilization"])
    text = (f"At {100 * rho:.3g} % utilisation of {c} core{'s' if c > 1 else ''}, {r['running']:.3g} threads run "
            f"on average and {r['waiting']:.3g} wait for a core: the load average of a CPU with Poisson wake-ups "
            f"is {r['load']:.3g}. It reaches the core count ({c}) only at {100 * r['full_load_utilization']:.3g} % "
            "utilisation.")
    if r["measured_load"] is not None:
        ex = float(r["excess_load"])
        if ex > max(0.1, 0.2 * float(r["load"])):
            text += (f" The measured load of {r['measured_load']:.3g} is {ex:.3g} above it: more threads are runnable "
                     "than this utilisation explains -- threads woken in bunches (a pool fanning one request out "
                     "to several threads), or threads in uninterruptible IO, which Linux counts too. Cutting "
                     "threads (non-blocking IO, fewer hand-offs) is the cure, not more cores.")
        else:
            text += f" The measured load of {r['measured_load']:.3g} agrees: the CPU queue explains it."
    return text


# ---------------------------------------------------------------------------------------------
# Pool size for an SLO


def pool_size(arrival_rate: ArrayLike, holding: Service | ArrayLike, slo: Mapping[float, float],
              service: Service | ArrayLike | None = None, cores: int | None = None, *,
              switch_cost: float = 0.0, switches: int = 2) -> ServersNeeded:
    """The fewest pool threads that keep every SLO percentile of the tasks' response time.

    Parameters
    ----------
    arrival_rate : float or array_like
        Tasks per second submitted to the pool (> 0).
    holding : Service or float
        The time one task holds its pool thread (its CPU and its blocking IO), seconds, as
        measured at this load (a bare number: exponential with that mean).
    slo : mapping
        Quantile -> seconds for the task's response time: the wait for a free thread plus the
        holding time.
    service : Service or float, optional
        The CPU part of one task, seconds; with ``cores``, checks that the cores keep up.
    cores : int, optional
        Cores the pool's threads run on.
    switch_cost : float, optional
        CPU time of one context switch, seconds (default 0; typically 2-10 microseconds).
    switches : int, optional
        Context switches per task (default 2: the worker is woken, then the submitter).

    Returns
    -------
    ServersNeeded
        ``.servers`` is the pool size (threads); its explanation adds the CPU check.

    Notes
    -----
    A pool of ``n`` threads taking tasks from one FIFO queue is the M/G/n FCFS queue whose
    service time is the holding time ``H``: the answer is
    :func:`~capacity.plan.servers_needed` with ``discipline="fcfs"``, exact for exponential
    ``H`` (Erlang C) and the approximation :mod:`capacity.fcfs` names for other laws.  The
    holding time is taken as given, which holds while the cores are not the bottleneck: every
    thread added past that point only lengthens ``H`` for all.  So the cores are checked: each
    task costs ``E[S] + switches * switch_cost`` of CPU, and the pool cannot keep up when
    ``lambda (E[S] + switches * switch_cost) >= cores``, whatever its size.

    References
    ----------
    R. B. Cooper, *Introduction to Queueing Theory*, 2nd ed. (1981), section 3.4 (Erlang C).
    Seed article 001 (Ctrip), section 3.4 (a pool per call type, sized and monitored).

    Examples
    --------
    200 tasks/s, each holding a thread 50 ms (mostly IO), p99 within 300 ms:

    >>> from capacity import plan
    >>> plan.pool_size(200.0, 0.050, {0.99: 0.300}).servers
    12
    """
    lam = check_positive(arrival_rate, "arrival_rate")
    hold = as_service(holding, "holding")
    sigma = float(check_nonnegative(switch_cost, "switch_cost"))
    if isinstance(switches, bool) or not isinstance(switches, (int, np.integer)) or switches < 0:
        raise ValueError(f"switches must be a non-negative integer, got {switches!r}")
    cpu_text = ""
    if (service is None) != (cores is None):
        raise ValueError("service and cores go together: give both to check the CPU, or neither")
    if service is not None:
        svc = as_service(service)
        c = int(check_servers(cores, "cores"))
        if np.any(np.asarray(svc.mean) > np.asarray(hold.mean) * (1 + 1e-12)):
            raise ValueError(f"service must be part of holding (a task's CPU is inside the time it holds its "
                             f"thread), got service mean {svc.mean!r} and holding mean {hold.mean!r}")
        util = lam * (np.asarray(svc.mean, dtype=float) + switches * sigma) / c
        if np.any(util >= 1):
            raise ValueError(f"cores={cores!r} cannot keep up: the tasks need {float(np.max(util)) * c:.3g} cores of CPU "
                             f"(switches included), so no pool size meets the SLO; add cores or cut CPU per task")
        u = float(np.max(util))
        cpu_text = (f" The {c} core{'s' if c > 1 else ''} are {100 * u:.3g} % busy with these tasks"
                    + (f" ({switches} switches of {_fmt_time(sigma)} each per task included)" if sigma else "")
                    + ("; past about 70 % the CPU queue itself stretches the holding time, so re-measure it at "
                       "this load" if u > 0.7 else "") + ".")
    _check_reachable(hold, slo)
    res = servers_needed(lam if lam.ndim else float(lam), hold, slo, discipline="fcfs")
    return dataclasses.replace(res, explanation=_explain_pool(res, lam, hold) + cpu_text)


def _check_reachable(hold: Service, slo: Mapping[float, float]) -> None:
    """Refuse an SLO the holding time alone misses (no pool size helps), in the pool's words."""
    qs, ts = _parse_slo(slo)
    alone = np.asarray(hold._expand(1).sf(ts), dtype=float)
    bad = np.broadcast_to(alone > 1.0 - qs, np.broadcast_shapes(alone.shape, qs.shape))
    if bad.any():
        i = int(np.argwhere(bad)[0][-1])
        raise ValueError(f"slo {_fmt_q(qs[i])} <= {_fmt_time(ts[i])} cannot be met by any pool size: more than "
                         f"{100 * (1 - qs[i]):.3g} % of tasks hold their thread longer than that on their own "
                         "(holding)")


def _explain_pool(res: ServersNeeded, lam: np.ndarray, hold: Service) -> str:
    if np.ndim(res.servers):
        n = np.asarray(res.servers)
        return f"{n.size} configurations: pools of {int(n.min())} to {int(n.max())} threads."
    q_b = float(res.binding)
    busy = float(lam) * float(np.asarray(hold.mean))
    slo_text = ", ".join(f"{_fmt_q(q)} <= {_fmt_time(t)}" for q, t in res.slo.items())
    return (f"At {float(lam):.4g} tasks/s, each holding a thread {_fmt_time(float(hold.mean))} "
            f"({hold.family}, scv {float(hold.scv):.2g}), {busy:.3g} threads are busy on average, so at least "
            f"{int(res.min_stable_servers)} keep the pool's queue stable; the SLO ({slo_text}, wait for a thread "
            f"included) needs {int(res.servers)} threads ({100 * float(res.utilization):.1f} % busy). At that size "
            f"{100 * float(res.tail[q_b]):.3g} % of tasks exceed {_fmt_time(res.slo[q_b])} (allowed "
            f"{100 * (1 - q_b):.3g} %); a larger pool buys little and costs memory and context switches.")
