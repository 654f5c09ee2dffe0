"""A thread pool on its cores: the tasks' latency against the pool size, CPU contention and
context switches included.  :func:`thread_pool`.

:func:`~capacity.plan.pool_size` takes the time a task holds its thread as given, which holds
while the cores keep up.  Past that point every thread added makes the tasks inside the pool
share the cores -- processor sharing, and a context switch each time a core moves to another
runnable thread -- so the holding time itself grows with the pool.  This module models that: the
pool's ``n`` threads on ``c`` cores as a closed network of a CPU station (processor sharing on
``c`` cores, slowed by switching when more than ``c`` threads are runnable) and an IO station (a
task blocked on IO holds its thread but no core), fed by an open FIFO queue of tasks waiting for a
free thread.  See :mod:`capacity.plan`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from scipy.special import gammaln, logsumexp

from .._checks import check_nonnegative, check_positive, check_servers
from .._result import Result
from ..distributions import Service, as_service
from ._text import _fmt_rate, _fmt_time

__all__ = ["ThreadPool", "thread_pool"]

ArrayLike = Any

#: Largest pool size this computes (the normalising constants take (n + 1)^2 floats: 34 MB here).
MAX_THREADS = 2048


@dataclass(frozen=True, repr=False)
class ThreadPool(Result):
    """Result of :func:`thread_pool`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per pool size (index ``threads``): ``mean_response_s`` (waiting for a thread plus
        holding it), ``mean_wait_s``, ``wait_probability`` (a task finds every thread busy),
        ``mean_holding_s`` (CPU under contention plus IO), ``cpu_utilization`` (busy share of the
        cores, switching included) and ``switch_share`` (the share of the cores' time spent
        switching); ``inf`` where the pool cannot keep up.
    best_threads : int or None
        The fewest threads whose mean response is within 0.1 % of the lowest (None when no size
        keeps up).
    threads_needed : int or None
        The fewest threads whose mean response is at most ``max_mean_response`` (None without one
        or when no size meets it).
    capacity_qps : float
        Tasks per second the cores complete at most (``c / E[S]``, no switching).
    arrival_rate, service, delay, cores, switch_cost, quantum, max_mean_response
        What was asked (``service`` the mean CPU per task).
    explanation : str
    """

    table: pd.DataFrame
    best_threads: int | None
    threads_needed: int | None
    capacity_qps: float
    arrival_rate: float
    service: float
    delay: float
    cores: int
    switch_cost: float
    quantum: float
    max_mean_response: float | None
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("best_threads", "threads_needed", "capacity_qps")

    def to_frame(self) -> pd.DataFrame:
        return self.table


def _log_pool_constants(n_max: int, cpu: float, io: float, c: int, efficiency: float) -> tuple[np.ndarray, ...]:
    """For m = 0..n_max tasks inside the pool: ``log G(m)`` and the mean busy cores and switching
    cores, from the product form of the CPU and IO stations (see :func:`thread_pool`)."""
    j = np.arange(n_max + 1)
    # CPU station with j tasks: rate min(j, c) e(j) / E[S], e(j) = 1 up to c runnable, then the
    # switching efficiency; its factor is prod_{i <= j} E[S] / (min(i, c) e(i)).
    rate = np.minimum(j[1:], c) * np.where(j[1:] <= c, 1.0, efficiency)
    log_cpu = np.concatenate([[0.0], np.cumsum(math.log(cpu) - np.log(rate))])
    # IO station (a delay: every blocked task waits on its own): D^k / k!.
    log_io = j * math.log(io) - gammaln(j + 1) if io > 0 else np.where(j == 0, 0.0, -np.inf)
    # G(m) = sum_j f_cpu(j) f_io(m - j): the (m, j) terms with j <= m, in logs.
    m = j[:, None]
    terms = np.where(j[None, :] <= m, log_cpu[None, :] + log_io[np.clip(m - j[None, :], 0, None)], -np.inf)
    log_g = logsumexp(terms, axis=1)
    share = np.exp(terms - log_g[:, None])               # P(j at the CPU | m in the pool)
    busy = share @ np.minimum(j, c).astype(float)        # mean busy cores
    switching = share @ np.where(j > c, c * (1.0 - efficiency), 0.0)
    return log_g, busy, switching


def thread_pool(arrival_rate: float, service: Service | float, delay: float = 0.0, cores: int = 1, *,
                threads: ArrayLike | None = None, switch_cost: float = 5e-6, quantum: float = 0.003,
                max_mean_response: float | None = None) -> ThreadPool:
    """Mean latency of tasks on a thread pool of each size, its cores shared by the runnable threads.

    Parameters
    ----------
    arrival_rate : float
        Tasks per second submitted to the pool (> 0).
    service : Service or float
        CPU seconds of one task on an idle core (its switches in and out included); only its mean
        enters, the model takes it as exponential (see Notes).
    delay : float, optional
        Mean seconds a task blocks on IO while holding its thread (a downstream call, a disk read;
        default 0), taken as exponential.
    cores : int, optional
        Cores the pool's threads run on (default 1).
    threads : int or array_like of int, optional
        Pool sizes to compare (default 1 to the size past which more threads change nothing at
        this load, at most 2048).
    switch_cost : float, optional
        Seconds one context switch costs a core -- the switch itself and the caches refilled
        after it (default 5 microseconds; measured 2-10 microseconds for the switch alone).
    quantum : float, optional
        Seconds a core runs one thread before switching to another runnable one when more threads
        than cores are runnable (default 3 ms, the order of Linux CFS's minimum granularity,
        0.75 ms x (1 + log2 cores)).
    max_mean_response : float, optional
        The mean response (seconds) the pool should keep: sets ``threads_needed``.

    Returns
    -------
    ThreadPool

    Notes
    -----
    Inside the pool a task alternates between the CPU station -- processor sharing on ``c``
    cores whose rate with ``j`` runnable tasks is ``min(j, c) e(j) / E[S]``, ``e(j) = 1`` for
    ``j <= c`` and ``Q / (Q + sigma)`` above (each core switches among its threads every quantum
    ``Q`` at a cost ``sigma``) -- and an IO station where each blocked task waits its own IO time
    (an infinite-server station).  Both are BCMP stations, so with ``m`` tasks in the pool the
    stationary law is the product form ``P(j at the CPU) ~ f_cpu(j) f_io(m - j)`` with
    ``f_cpu(j) = prod_{i <= j} E[S] / (min(i, c) e(i))`` and ``f_io(k) = D^k / k!``, and the pool
    completes tasks at ``X(m) = G(m - 1) / G(m)``, ``G(m) = sum_j f_cpu(j) f_io(m - j)``
    (normalising constants by convolution, Buzen 1973, in logs).  A task that finds all ``n``
    threads busy waits in FIFO order; the pool is replaced by its flow-equivalent server (Chandy,
    Herzog and Woo 1975), so that with Poisson arrivals the number of tasks ``N`` (waiting or in
    the pool) is a birth-death chain with rates ``lambda`` and ``X(min(N, n))``, and
    ``E[T] = E[N] / lambda`` (Little).  That is exact without IO (the pool is then the CPU
    station itself) and when the pool is never full; with IO and a full pool it is an
    approximation on the safe side -- the waiting tasks see the pool's throughput in its
    equilibrium with ``m`` tasks, which a full pool refilled at each departure does not keep.
    Against the exact
    Markov chain of tasks at the CPU, at IO and waiting (exponential times; load 0.3-0.85, IO 0.5
    to 10 times the CPU, 1-4 cores; ``tests/test_plan_thread_pool.py``): the mean response never
    below it; above it by at most 19 % (median 5 %) with 1.1 times the threads Little's law says
    are held, plus one -- a pool that barely keeps up --, 5.5 % (median 1 %) with 1.5 times and
    1.4 % with twice.  Against simulated threads (round robin with a quantum, a switch charged
    when a quantum ends and another thread waits; ``tests/test_plan_thread_pool_sim.py``: 2 cores
    at 75 %, 10 ms CPU and 20 ms IO per task, a 0.3 ms switch every 2 ms): +29 % where the pool
    barely keeps up (6 threads), +5 % with 8 and 12 -- the efficiency ``Q / (Q + sigma)`` charges a
    switch whenever more threads are runnable than cores, where a thread whose CPU ends inside its
    quantum costs none; both pool sizes that do not keep up are said so.  So
    ``threads_needed`` may ask for a thread or two more than needed, never fewer.  The CPU and IO
    times are exponential here; for other laws the time inside a pool that is not full stays as
    it is (processor-sharing and delay stations are insensitive beyond the mean) but the wait for
    a free thread is that of exponential holding times: with one thread per core and no IO the
    model is M/M/c where the pool is M/G/c, whose wait is about ``(1 + scv) / 2`` of it
    (Allen-Cunneen) -- shorter for steady tasks, longer for variable ones;
    :func:`~capacity.plan.pool_size` sizes by a percentile SLO with that law.
    The pool keeps up at size ``n`` while ``lambda < X(n)``.

    What the table shows: with IO in the tasks the pool needs more threads than cores to keep the
    cores busy (at least the threads Little's law says are held, ``lambda (E[S] + D)``), and past
    the size that keeps up more threads change little -- their switches cost a fixed share of the
    cores once more threads are runnable than there are cores.  Without IO one thread per core is
    best: a second one only adds switching.

    References
    ----------
    F. Baskett, K. M. Chandy, R. R. Muntz and F. G. Palacios, "Open, closed, and mixed networks of
    queues with different classes of customers", J. ACM 22 (1975) 248-260.  J. P. Buzen,
    "Computational algorithms for closed queueing networks with exponential servers", Comm. ACM
    16 (1973) 527-531.  K. M. Chandy, U. Herzog and L. Woo, "Parametric analysis of queuing
    networks", IBM J. Res. Dev. 19 (1975) 36-42.  Seed article 001 (Ctrip), sections
    3.4 and 3.6.

    Examples
    --------
    800 tasks/s of 2 ms CPU and 20 ms IO on 4 cores (40 % busy) hold 17.6 threads on average
    (Little): 16 threads cannot keep up, 18 barely, 24 nearly as well as any:

    >>> from capacity import plan
    >>> r = plan.thread_pool(800.0, 0.002, 0.020, cores=4, threads=[16, 18, 20, 24, 40])
    >>> r.table["mean_response_s"].round(4).tolist()
    [inf, 0.0772, 0.0267, 0.0225, 0.0221]

    Pure CPU on one core at 90 %: a second thread only adds switching (50 us a switch, 3 ms
    quanta), 20 ms -> 23.9 ms:

    >>> plan.thread_pool(450.0, 0.002, cores=1, threads=[1, 2], switch_cost=5e-5).table[
    ...     "mean_response_s"].round(4).tolist()
    [0.02, 0.0239]
    """
    lam = float(check_positive(arrival_rate, "arrival_rate"))
    svc = as_service(service, "service")
    if np.ndim(svc.mean):
        raise ValueError(f"service must have scalar parameters, got {service!r}")
    s = float(svc.mean)
    d = float(check_nonnegative(delay, "delay"))
    c = int(check_servers(cores, "cores"))
    sigma = float(check_nonnegative(switch_cost, "switch_cost"))
    q_len = float(check_positive(quantum, "quantum"))
    goal = (None if max_mean_response is None
            else float(check_positive(max_mean_response, "max_mean_response")))
    efficiency = q_len / (q_len + sigma)
    if threads is None:
        # Past m ~ c + lambda D + a margin the pool is never full at this load: more threads change
        # nothing but the tail of an unlikely state.
        top = int(min(MAX_THREADS, max(2 * c, math.ceil(c + lam * (s + d) * 4 + 10))))
        sizes = np.arange(1, top + 1)
    else:
        sizes = np.unique(np.atleast_1d(np.asarray(threads)))
        if sizes.dtype.kind not in "iu" or sizes.min() < 1 or sizes.max() > MAX_THREADS:
            raise ValueError(f"threads must be whole numbers from 1 to {MAX_THREADS}, got {threads!r}")
    n_max = int(sizes.max())
    log_g, busy, switching = _log_pool_constants(n_max, s, d, c, efficiency)
    log_x = np.concatenate([[-np.inf], log_g[:-1] - log_g[1:]])      # log X(m), m = 0..n_max
    table = pd.DataFrame(_open_chains(lam, log_x, busy, switching, sizes.astype(int), c),
                         index=pd.Index(sizes, name="threads"))
    finite = table["mean_response_s"][np.isfinite(table["mean_response_s"])]
    # The fewest threads within 0.1 % of the lowest mean: past it more threads only cost memory.
    best = None if finite.empty else int(finite.index[finite.to_numpy() <= 1.001 * finite.min()].min())
    needed = None
    if goal is not None and not finite.empty:
        ok = finite.index[finite.to_numpy() <= goal]
        needed = int(ok.min()) if ok.size else None
    res = dict(table=table, best_threads=best, threads_needed=needed, capacity_qps=c / s, arrival_rate=lam,
               service=s, delay=d, cores=c, switch_cost=sigma, quantum=q_len, max_mean_response=goal)
    return ThreadPool(**res, explanation=_explain(res))


def _open_chains(lam: float, log_x: np.ndarray, busy: np.ndarray, switching: np.ndarray, n: np.ndarray,
                 c: int) -> dict:
    """Per pool size ``n`` (an array): mean response, mean wait, wait probability, mean holding, CPU
    utilisation and switch share from the birth-death chain of the tasks with service rate
    ``X(min(N, n))``.  Every size shares the chain's first ``n + 1`` terms
    ``pi_k ~ lambda^k / prod_{i <= k} X(i)``, so each sum over ``k <= n`` is a prefix sum (in logs:
    the terms span hundreds of orders of magnitude); above ``n`` the chain is geometric with
    ratio ``r = lambda / X(n)``, stable while ``r < 1``."""
    k = np.arange(log_x.size)
    log_lam = math.log(lam)
    log_pi = k * log_lam - np.concatenate([[0.0], np.cumsum(log_x[1:])])
    prefix = lambda terms: np.logaddexp.accumulate(terms)[n]                           # noqa: E731
    with np.errstate(divide="ignore"):
        log_k, log_busy, log_switch = np.log(k), np.log(busy / c), np.log(switching / c)
    stable = log_x[n] > log_lam
    r = np.where(stable, np.exp(np.minimum(log_lam - log_x[n], 0.0)), 0.5)   # 0.5: a placeholder
    log_tail = log_pi[n] + np.log(r / (1.0 - r))                                # sum over N > n
    log_z = np.logaddexp(prefix(log_pi), log_tail)
    ratio = lambda log_a: np.exp(log_a - log_z)                                        # noqa: E731
    mean_n = ratio(prefix(log_pi + log_k)) + ratio(log_pi[n]) * (n * r / (1 - r) + r / (1 - r) ** 2)
    queue = ratio(log_pi[n]) * r / (1.0 - r) ** 2                               # E[(N - n)+]
    wait_prob = ratio(np.logaddexp(log_pi[n], log_tail))                        # P(N >= n) (PASTA)
    # P(min(N, n) = m): pi_m below n, pi_n plus the tail at n.
    cpu = ratio(prefix(log_pi + log_busy)) + ratio(log_tail) * busy[n] / c
    switch = ratio(prefix(log_pi + log_switch)) + ratio(log_tail) * switching[n] / c
    mean_t, wait = mean_n / lam, queue / lam
    return {"mean_response_s": np.where(stable, mean_t, np.inf), "mean_wait_s": np.where(stable, wait, np.inf),
            "wait_probability": np.where(stable, wait_prob, 1.0),
            "mean_holding_s": np.where(stable, mean_t - wait, np.inf),
            "cpu_utilization": np.where(stable, cpu, 1.0), "switch_share": np.where(stable, switch, switching[n] / c)}


def _explain(r: dict) -> str:
    t, c = r["table"], r["cores"]
    io = f"{_fmt_time(r['delay'])} of IO" if r["delay"] > 0 else "no IO"
    head = (f"{_fmt_rate(r['arrival_rate'])} of tasks with {_fmt_time(r['service'])} of CPU and "
            f"{io} on {c} core{'s' if c > 1 else ''} "
            f"({100 * r['arrival_rate'] * r['service'] / c:.3g} % of their capacity, {_fmt_rate(r['capacity_qps'])}).")
    if r["best_threads"] is None:
        held = r["arrival_rate"] * (r["service"] + r["delay"])
        if r["arrival_rate"] * r["service"] < c:
            return head + (f" No pool size up to {int(t.index.max())} keeps up: the tasks hold {held:.4g} threads on "
                           "average (Little's law), and a pool needs more than that.")
        return head + (" No pool size keeps up: the cores are saturated whatever the threads (the switching "
                       "only adds to it).")
    b = r["best_threads"]
    first = int(t.index[np.isfinite(t["mean_response_s"])].min())
    wait = float(t.loc[b, "mean_wait_s"])
    text = (f" The pool keeps up from {first} thread{'s' if first > 1 else ''}; "
            f"{b} thread{' gives' if b == 1 else 's give'} the lowest mean response, "
            f"{_fmt_time(t.loc[b, 'mean_response_s'])} (waiting for a thread "
            f"{_fmt_time(wait) if wait >= 1e-6 else 'under 1 us'}), and more only cost memory.")
    last = int(t.index.max())
    if last > b and t.loc[last, "mean_response_s"] > t.loc[b, "mean_response_s"] * 1.001:
        text += (f" Past {b}, more runnable threads than cores share them more finely and pay the switches: "
                 f"at {last} the mean is {_fmt_time(t.loc[last, 'mean_response_s'])}, "
                 f"{100 * t.loc[last, 'switch_share']:.2g} % of the cores' time switching.")
    if r["max_mean_response"] is not None:
        goal = _fmt_time(r["max_mean_response"])
        text += (f" A mean of {goal} needs {r['threads_needed']} threads." if r["threads_needed"]
                 else f" No pool size keeps the mean within {goal}.")
    return head + text
