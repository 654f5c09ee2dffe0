"""An exact discrete-event simulator of a backend service, in and out of overload.

:func:`simulate` feeds a stream of requests (Poisson at a rate, Poisson at a
per-second rate series, or arrival times you give) with CPU sizes drawn from
a :class:`~capacity.Service` through one or more worker processes and
returns one row per request (:attr:`SimulationResult.requests`) and a
per-second summary (:attr:`SimulationResult.per_second`).  There is no time
step and no approximation: every start, completion, timeout and drop is
computed exactly (up to floating-point rounding) from the arrival times and
sizes.

Disciplines (inside one worker process)
----------------------------------------
``"fcfs"``
    First come, first served with ``servers`` identical cores and one shared
    queue (M/G/c).  One core: the vectorised Lindley recursion.  Several
    cores: a heap of the times the cores become free.
``"ps"``
    Processor sharing (M/G/c-PS): with ``n`` requests in the process each one
    is served at rate ``min(1, c/n)`` -- the CPU is shared equally, and a
    request can use at most one core at a time, which is how a
    single-threaded request handler behaves on a ``c``-core machine (and how
    a Node.js process interleaves the requests it has accepted).
``"rr"``
    Event-loop round robin: each request is ``slices`` equal slices of CPU
    through one FIFO run queue, with an optional non-CPU ``slice_delay``
    between slices -- how a Node.js process really schedules handlers that
    ``await``.  ``slices=1`` is FCFS.  ``admission`` says when a new request
    enters the run queue: on arrival (``"fifo"``), or only when the run
    queue is empty (``"idle"``: requests already in flight go first, as in
    Node.js 20 when handlers yield with ``setTimeout``; see :func:`simulate`).

Topology, timeouts, retries
---------------------------
``machines`` x ``processes`` worker processes, each with its own queue and
``servers`` cores, behind one dispatcher (round robin, uniform random or
least connections); a client timeout with three server behaviours
(``on_timeout``: keep computing, drop at the timeout, skip at start what can
no longer finish in time); adaptive LIFO for FCFS queues; client retries
with back-off.  See :func:`simulate` for the exact rules.

Engines
-------
Three exact engines give the same answer where they overlap (tested):

1. the vectorised one-queue engines of the ``_ENGINES`` table (Lindley for
   one FCFS core, a core heap for several, a virtual-time heap for PS), run
   once per process when dispatch does not depend on the state
   (round robin, random) and the server never reacts to a timeout;
2. per-process event objects (:class:`_FCFSProcess`, :class:`_PSProcess`)
   run one process at a time, when the server drops or skips requests or
   uses adaptive LIFO but dispatch is still state-free and nobody retries;
3. a global event loop over all processes (least-connections dispatch needs
   every process's live connection count at each arrival; retries are new
   arrivals created by timeouts), also used whenever ``progress`` is given
   because it advances simulated time monotonically and can stop anywhere.

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

B. Maurer, "Fail at scale", ACM Queue 13(8) (2015) (adaptive LIFO and
controlled delay in Facebook's servers).

K. Nichols and V. Jacobson, "Controlling queue delay", ACM Queue 10(5)
(2012) (CoDel: act on the queueing delay, not the queue length).
"""
from __future__ import annotations

import bisect
import heapq
import math
import time
from collections import deque
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from .._checks import (
    ADMISSIONS,
    as_float_array,
    check_choice,
    check_count,
    check_nonnegative,
    check_positive,
    check_quantile,
    check_servers,
)
from ..distributions import Service, as_service

__all__ = ["ConfidenceInterval", "SimulationResult", "simulate",
           "OUTCOMES", "DISPATCH", "ON_TIMEOUT", "QUEUES", "ADMISSIONS"]

#: The outcomes of a request, in the order of the ``outcome`` categorical.
OUTCOMES = ("ok", "timed_out", "dropped", "in_flight")
#: Dispatch policies across the ``machines x processes`` worker processes.
DISPATCH = ("round_robin", "random", "least_connections")
#: What the server does with a request whose client timed out.
ON_TIMEOUT = ("continue", "drop", "deadline")
#: Queue orders of a FCFS process.
QUEUES = ("fifo", "adaptive_lifo")

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

    The heap holds bare floats (a dict maps each finish virtual time to its
    job): comparing floats is about 3x cheaper than comparing
    ``(time, id)`` tuples, which matters in overload, when the crowd (and
    the heap) grows without bound.  Jobs with equal finish virtual times
    leave at the same instant, so which of them the dict hands out first
    does not change any completion time.
    """
    n_req = arrivals.size
    c = servers
    completion = [0.0] * n_req
    heap: list[float] = []
    owner: dict[float, int] = {}  # finish virtual time -> job
    twins: dict[float, list[int]] = {}  # further jobs with the same finish virtual time (rare)
    push, pop = heapq.heappush, heapq.heappop
    t = 0.0  # time of the last event
    v = 0.0  # virtual time at t
    arr = arrivals.tolist()
    size = sizes.tolist()
    for i in range(n_req):
        a = arr[i]
        # Departures up to and including the arrival instant come first.
        n = len(heap)
        while n:
            fv = heap[0]
            td = t + (fv - v) if n <= c else t + (fv - v) * n / c
            if td > a:
                break
            pop(heap)
            if twins and fv in twins:
                same = twins[fv]
                completion[same.pop()] = td
                if not same:
                    del twins[fv]
            else:
                completion[owner.pop(fv)] = td
            t = td
            v = fv
            n -= 1
        if n == 0:
            v = 0.0
        elif n <= c:
            v += a - t
        else:
            v += (a - t) * c / n
        t = a
        fv = v + size[i]
        if fv in owner:
            twins.setdefault(fv, []).append(i)
        else:
            owner[fv] = i
        push(heap, fv)
    n = len(heap)
    while n:
        fv = pop(heap)
        t = t + (fv - v) if n <= c else t + (fv - v) * n / c
        v = fv
        if twins and fv in twins:
            same = twins[fv]
            completion[same.pop()] = t
            if not same:
                del twins[fv]
        else:
            completion[owner.pop(fv)] = t
        n -= 1
    done = np.array(completion, dtype=float).reshape(-1)
    return _Trace(np.full(n_req, np.nan), done, done - arrivals)


_Engine = Callable[[np.ndarray, np.ndarray, int], _Trace]
_ENGINES: dict[str, _Engine] = {"fcfs": _fcfs, "ps": _ps}


class _Busy(NamedTuple):
    """When cores of a process become busy (``on``) and free (``off``), seconds.

    Round robin keeps no per-request service interval (a request alternates
    between the run queue, a core and a timer), so the engines record the
    busy-core count itself: one ``on`` per core leaving idleness, one ``off``
    per core going idle.  ``off`` is padded with NaN (still busy at the end).
    """

    on: list
    off: list


def _constant_delay(delay: float) -> Callable[[], float]:
    return lambda: delay


def _rr(arrivals: np.ndarray, sizes: np.ndarray, servers: int, slices: int = 1,
        delay: float = 0.0, draw: Callable[[], float] | None = None,
        admission: str = "fifo") -> tuple[_Trace, _Busy]:
    """Event-loop round robin: ``slices`` equal slices per request, FIFO run queue.

    A request of size ``x`` is ``slices`` slices of ``x / slices`` seconds of
    CPU.  It joins the back of the run queue on arrival; a free core takes
    the head of the queue and runs one slice; when the slice ends, the
    request leaves (last slice) or sleeps ``delay`` seconds (``draw()`` per
    slice when given) holding no core, then joins the back of the queue
    again.  At equal times: slice ends, then wake-ups, then arrivals, and a
    free core picks only after all of them -- with ``delay = 0`` a request
    whose slice ends when another request arrives is queued ahead of it.
    ``start`` is the start of the first slice.

    ``admission="idle"``: an arriving request waits in an accept queue
    instead; a free core that finds the run queue empty (and no slice end or
    wake-up due at that instant) moves every waiting request, in arrival
    order, to the run queue -- the poll phase of an event loop reading every
    socket that is ready.
    """
    if servers == 1 and delay == 0.0 and draw is None and admission == "fifo":
        return _rr_one(arrivals, sizes, slices)
    return _rr_many(arrivals, sizes, servers, slices, delay, draw, admission == "idle")


def _rr_one(arrivals: np.ndarray, sizes: np.ndarray, k: int) -> tuple[_Trace, _Busy]:
    # One core and no delay: the core is busy whenever the run queue is not
    # empty, so the loop only follows the core's clock (no heaps).
    n = arrivals.size
    arr = arrivals.tolist()
    quantum = (sizes / k).tolist() if k > 1 else sizes.tolist()
    start = [_NAN] * n
    completion = [0.0] * n
    left = [k] * n
    runq: deque[int] = deque()
    popleft, append = runq.popleft, runq.append
    on: list[float] = []
    off: list[float] = []
    t = 0.0
    j = 0
    busy = False
    while True:
        if not runq:
            if j >= n:
                break
            a = arr[j]
            if busy and a > t:
                off.append(t)
                busy = False
            if not busy:
                if a > t:
                    t = a
                on.append(t)
                busy = True
        while j < n and arr[j] <= t:
            append(j)
            j += 1
        i = popleft()
        if start[i] != start[i]:  # NaN: first slice
            start[i] = t
        t += quantum[i]
        m = left[i] - 1
        if m:
            left[i] = m
            # Requests arriving during the slice are queued before it returns.
            while j < n and arr[j] < t:
                append(j)
                j += 1
            append(i)
        else:
            completion[i] = t
    if busy:
        off.append(t)
    st = np.array(start, dtype=float).reshape(-1)
    done = np.array(completion, dtype=float).reshape(-1)
    # One slice: the FCFS engines' arithmetic (wait + size), same floats.
    resp = (st - arrivals) + sizes if k == 1 else done - arrivals
    return _Trace(st, done, resp), _Busy(on, off)


def _rr_many(arrivals: np.ndarray, sizes: np.ndarray, c: int, k: int, delay: float = 0.0,
             draw: Callable[[], float] | None = None, gated: bool = False) -> tuple[_Trace, _Busy]:
    n = arrivals.size
    arr = arrivals.tolist()
    quantum = (sizes / k).tolist() if k > 1 else sizes.tolist()
    start = [_NAN] * n
    completion = [0.0] * n
    left = [k] * n
    runq: deque[int] = deque()
    popleft, append = runq.popleft, runq.append
    accept: deque[int] = deque()  # admission="idle": arrived, not yet in the run queue
    push, pop = heapq.heappush, heapq.heappop
    cores: list[tuple[float, int, int]] = []  # (slice end, sequence, request)
    sleep: list[tuple[float, int, int]] = []  # (wake-up, sequence, request)
    sleeps = draw is not None or delay > 0.0
    on: list[float] = []
    off: list[float] = []
    seq = 0
    j = 0
    ta = arr[0] if n else _INF
    while True:
        te = cores[0][0] if cores else _INF
        tw = sleep[0][0] if sleep else _INF
        n0 = len(cores)
        if te <= tw and te <= ta:
            if te == _INF:
                break
            t, _, i = pop(cores)
            m = left[i] - 1
            if m:
                left[i] = m
                if sleeps:
                    push(sleep, (t + (delay if draw is None else draw()), seq, i))
                    seq += 1
                else:
                    append(i)
            else:
                completion[i] = t
        elif tw <= ta:
            t, _, i = pop(sleep)
            append(i)
        else:
            t = ta
            (accept if gated else runq).append(j)
            j += 1
            ta = arr[j] if j < n else _INF
        while len(cores) < c:
            if not runq:
                # Admit only when nothing else is due now: a slice end or a
                # wake-up at this same instant goes first (in flight first).
                if not accept or (cores and cores[0][0] <= t) or (sleep and sleep[0][0] <= t):
                    break
                runq.extend(accept)
                accept.clear()
            i = popleft()
            if start[i] != start[i]:
                start[i] = t
            push(cores, (t + quantum[i], seq, i))
            seq += 1
        d = len(cores) - n0
        if d > 0:
            on.extend([t] * d)
        elif d < 0:
            off.extend([t] * -d)
    st = np.array(start, dtype=float).reshape(-1)
    done = np.array(completion, dtype=float).reshape(-1)
    # One slice: the FCFS engines' arithmetic (wait + size), same floats.
    resp = (st - arrivals) + sizes if k == 1 else done - arrivals
    return _Trace(st, done, resp), _Busy(on, off)


# ---------------------------------------------------------------------------- event engines
_INF = math.inf
_NAN = math.nan
# Request states in _Book.state.
_WAITING, _SERVING, _DONE, _DROPPED, _ABORTING = 0, 1, 2, 3, 4


class _Book:
    """Per-request records as Python lists indexed by request id.

    Lists (not arrays) because the event loops touch one element at a time,
    where list indexing is several times faster than numpy scalar access;
    they grow when retries add requests.
    """

    def __init__(self, arrival: np.ndarray, size: np.ndarray, timeout: float | None, n_proc: int,
                 retries: int, backoff: float, factor: float):
        n = arrival.size
        self.arrival = arrival.tolist()
        self.size = size.tolist()
        self.deadline = (arrival + timeout).tolist() if timeout is not None else [_INF] * n
        self.start = [_NAN] * n
        self.completion = [_NAN] * n
        self.departure = [_NAN] * n
        self.cpu = [0.0] * n
        self.state = bytearray(n)
        self.client_done = bytearray(n)
        self.attempt = [0] * n
        self.request_id = list(range(n))
        self.process = [-1] * n
        self.timeout = timeout
        self.open = [0] * n_proc  # connections the dispatcher sees open, per process
        self.retries = retries
        self.backoff = backoff
        self.factor = factor
        self.outbox: list[tuple[float, int]] = []  # (retry arrival time, failed request id)

    def fail(self, i: int, t: float) -> None:
        """The client of request ``i`` gave up (timeout) or got an error at ``t``."""
        self.client_done[i] = 1
        self.open[self.process[i]] -= 1
        k = self.attempt[i]
        if k < self.retries:
            self.outbox.append((t + self.backoff * self.factor ** k, i))

    def add_retry(self, t: float, parent: int) -> int:
        """Append the retry of ``parent`` arriving at ``t``; return its id."""
        i = len(self.arrival)
        self.arrival.append(t)
        self.size.append(self.size[parent])
        self.deadline.append(t + self.timeout)
        self.start.append(_NAN)
        self.completion.append(_NAN)
        self.departure.append(_NAN)
        self.cpu.append(0.0)
        self.state.append(_WAITING)
        self.client_done.append(0)
        self.attempt.append(self.attempt[parent] + 1)
        self.request_id.append(self.request_id[parent])
        self.process.append(-1)
        return i


def _push_deadline(dl: deque, d: float, i: int) -> None:
    """Queue client deadline ``d`` of request ``i`` in ``dl``, kept sorted by
    ``(deadline, id)``.  A process receives its requests in time order, so
    deadlines arrive sorted and this is an append; the insertion is for
    equal deadlines whose ids come out of order (a retry arriving at the
    same instant as an original request)."""
    item = (d, i)
    if dl and item < dl[-1]:
        bisect.insort(dl, item)
    else:
        dl.append(item)


class _PSProcess:
    """One processor-sharing worker process with ``c`` cores (event object).

    Same virtual-time scheme as :func:`_ps`: ``dV/dt = min(1, c/n)``, a heap
    of finish virtual times, ``V`` reset whenever the process empties.  With
    ``abandon`` the request is removed at its deadline (lazy deletion from
    the heap); with ``watch`` the process keeps its client deadlines so that
    timeouts happen as events (connection counts, retries).  Deadlines are
    ``arrival + timeout`` and requests arrive in time order, so they are
    kept in a sorted deque (O(1) per request) rather than a heap.
    """

    __slots__ = ("g", "c", "book", "abandon", "watch", "t", "v", "n", "heap", "dl", "fin", "hold")

    def __init__(self, g: int, c: int, book: _Book, abandon: bool, watch: bool):
        self.g, self.c, self.book = g, c, book
        self.abandon, self.watch = abandon, watch or abandon
        self.t = 0.0
        self.v = 0.0
        self.n = 0
        self.heap: list[tuple[float, int]] = []
        self.dl: deque[tuple[float, int]] = deque()  # (client deadline, id), sorted
        self.fin: dict[int, float] = {}
        # True: advance() leaves the clock at the last event instead of moving
        # it to its bound (arrive() moves it), so the virtual time takes the
        # same rounding steps whoever else shares the event loop.
        self.hold = False

    def advance(self, T: float) -> float:
        """Process every completion and deadline at or before ``T`` (completions
        first at equal times, so ``completion == deadline`` is in time), move
        the clock to ``T`` (if finite) and return the time of the next event
        (inf if idle).  Returns early, at the current event time, right after
        a timeout that schedules a retry, so the caller can queue the retry
        before this process moves past it."""
        n = self.n
        if not n:
            if T < _INF:
                self.t = T
            return _INF
        heap, c, t, v = self.heap, self.c, self.t, self.v
        dlh = self.dl if self.watch else None
        abandon = self.abandon
        book = self.book
        state, cdone, outbox = book.state, book.client_done, book.outbox
        departure, completion, cpu, size = book.departure, book.completion, book.cpu, book.size
        open_, g, retries = book.open, self.g, book.retries
        pop = heapq.heappop
        popleft = dlh.popleft if dlh is not None else None
        while True:
            if abandon:
                while state[heap[0][1]] == _DROPPED:
                    pop(heap)
            fv, i = heap[0]
            tc = t + (fv - v) if n <= c else t + (fv - v) * n / c
            if dlh:
                while dlh and cdone[dlh[0][1]]:
                    popleft()
                if dlh and dlh[0][0] < tc:
                    td = dlh[0][0]
                    if td > T:
                        nxt = td
                        break
                    j = popleft()[1]
                    if n <= c:
                        v += td - t
                    else:
                        v += (td - t) * c / n
                    t = td
                    if retries:
                        book.fail(j, td)
                    else:
                        cdone[j] = 1
                        open_[g] -= 1
                    if abandon:
                        state[j] = _DROPPED
                        n -= 1
                        departure[j] = td
                        cpu[j] = size[j] - (self.fin.pop(j) - v)
                        if not n:
                            v = 0.0
                            heap.clear()
                    if outbox:
                        self.n, self.t, self.v = n, t, v
                        return td
                    if not n:
                        nxt = _INF
                        break
                    continue
            if tc > T:
                nxt = tc
                break
            pop(heap)
            t = tc
            v = fv
            n -= 1
            state[i] = _DONE
            completion[i] = tc
            departure[i] = tc
            cpu[i] = size[i]
            if abandon:
                del self.fin[i]
            if not cdone[i]:
                cdone[i] = 1
                open_[g] -= 1
            if not n:
                v = 0.0
                heap.clear()
                nxt = _INF
                break
        if T < _INF and not self.hold:
            if n:
                if n <= c:
                    v += T - t
                else:
                    v += (T - t) * c / n
            t = T
        self.n, self.t, self.v = n, t, v
        return nxt

    def arrive(self, a: float, i: int) -> float:
        """Request ``i`` arrives at ``a``; no event of this process lies between
        its clock and ``a``.  Returns the time of the next event."""
        book = self.book
        n, c = self.n, self.c
        if n:
            if n <= c:
                v = self.v + (a - self.t)
            else:
                v = self.v + (a - self.t) * c / n
        else:
            v = 0.0
        self.v = v
        self.t = a
        fv = v + book.size[i]
        heap = self.heap
        heapq.heappush(heap, (fv, i))
        n += 1
        self.n = n
        book.state[i] = _SERVING
        book.open[self.g] += 1
        if self.abandon:
            self.fin[i] = fv
            state = book.state
            while state[heap[0][1]] == _DROPPED:
                heapq.heappop(heap)
        tc = a + (heap[0][0] - v) if n <= c else a + (heap[0][0] - v) * n / c
        if self.watch:
            dlh = self.dl
            d = book.deadline[i]
            if dlh and (d, i) < dlh[-1]:
                bisect.insort(dlh, (d, i))
            else:
                dlh.append((d, i))
            cdone = book.client_done
            while cdone[dlh[0][1]]:
                dlh.popleft()
            if dlh[0][0] < tc:
                return dlh[0][0]
        return tc

    def finalize(self, T: float) -> None:
        """Record the CPU received so far by the requests still present."""
        book, v = self.book, self.v
        for fv, i in self.heap:
            if book.state[i] == _SERVING:
                book.cpu[i] = book.size[i] - (fv - v)


class _PSKeepProcess(_PSProcess):
    """A :class:`_PSProcess` whose server ignores timeouts (no ``abandon``).

    Its crowd grows without bound in overload, so the heap of finish virtual
    times holds bare floats, about 3x cheaper to sift than ``(time, id)``
    tuples, with a dict from finish virtual time to request (as in
    :func:`_ps`; requests with equal finish virtual times leave at the same
    instant, so which one the dict hands out first changes nothing).
    """

    __slots__ = ("owner", "twins")

    def __init__(self, g: int, c: int, book: _Book, watch: bool):
        super().__init__(g, c, book, False, watch)
        self.owner: dict[float, int] = {}
        self.twins: dict[float, list[int]] = {}

    def advance(self, T: float) -> float:
        n = self.n
        if not n:
            if T < _INF:
                self.t = T
            return _INF
        heap, c, t, v = self.heap, self.c, self.t, self.v
        owner, twins = self.owner, self.twins
        dlh = self.dl if self.watch else None
        book = self.book
        state, cdone, outbox = book.state, book.client_done, book.outbox
        departure, completion, cpu, size = book.departure, book.completion, book.cpu, book.size
        open_, g, retries = book.open, self.g, book.retries
        pop = heapq.heappop
        popleft = dlh.popleft if dlh is not None else None
        while True:
            fv = heap[0]
            tc = t + (fv - v) if n <= c else t + (fv - v) * n / c
            if dlh:
                while dlh and cdone[dlh[0][1]]:
                    popleft()
                if dlh and dlh[0][0] < tc:
                    td = dlh[0][0]
                    if td > T:
                        nxt = td
                        break
                    j = popleft()[1]
                    if n <= c:
                        v += td - t
                    else:
                        v += (td - t) * c / n
                    t = td
                    if retries:
                        book.fail(j, td)
                        if outbox:
                            self.n, self.t, self.v = n, t, v
                            return td
                    else:
                        cdone[j] = 1
                        open_[g] -= 1
                    continue
            if tc > T:
                nxt = tc
                break
            pop(heap)
            if twins and fv in twins:
                same = twins[fv]
                i = same.pop()
                if not same:
                    del twins[fv]
            else:
                i = owner.pop(fv)
            t = tc
            v = fv
            n -= 1
            state[i] = _DONE
            completion[i] = tc
            departure[i] = tc
            cpu[i] = size[i]
            if not cdone[i]:
                cdone[i] = 1
                open_[g] -= 1
            if not n:
                v = 0.0
                nxt = _INF
                break
        if T < _INF and not self.hold:
            if n:
                if n <= c:
                    v += T - t
                else:
                    v += (T - t) * c / n
            t = T
        self.n, self.t, self.v = n, t, v
        return nxt

    def arrive(self, a: float, i: int) -> float:
        book = self.book
        n, c = self.n, self.c
        if n:
            if n <= c:
                v = self.v + (a - self.t)
            else:
                v = self.v + (a - self.t) * c / n
        else:
            v = 0.0
        self.v = v
        self.t = a
        fv = v + book.size[i]
        owner = self.owner
        if fv in owner:
            self.twins.setdefault(fv, []).append(i)
        else:
            owner[fv] = i
        heap = self.heap
        heapq.heappush(heap, fv)
        n += 1
        self.n = n
        book.state[i] = _SERVING
        book.open[self.g] += 1
        tc = a + (heap[0] - v) if n <= c else a + (heap[0] - v) * n / c
        if self.watch:
            dlh = self.dl
            d = book.deadline[i]
            if dlh and (d, i) < dlh[-1]:
                bisect.insort(dlh, (d, i))
            else:
                dlh.append((d, i))
            cdone = book.client_done
            while cdone[dlh[0][1]]:
                dlh.popleft()
            if dlh[0][0] < tc:
                return dlh[0][0]
        return tc

    def finalize(self, T: float) -> None:
        book, v = self.book, self.v
        present = list(self.owner.items())
        present += [(fv, i) for fv, ids in self.twins.items() for i in ids]
        for fv, i in present:
            if book.state[i] == _SERVING:
                book.cpu[i] = book.size[i] - (fv - v)


class _FCFSProcess:
    """One FCFS worker process with ``c`` cores and one queue (event object).

    ``mode`` is the server's reaction to a client timeout:

    * ``"continue"``: none, every request runs to completion;
    * ``"drop"``: a request still queued at its deadline leaves the queue
      then (done lazily when it reaches the head, with departure = its
      deadline); one in service at its deadline is aborted then, freeing the
      core;
    * ``"deadline"``: when a core picks the request at time ``f`` it is
      skipped (departure ``f``, never started) if ``f + size > deadline``:
      the server knows each request's CPU cost and never starts work that
      cannot finish in time, so no core time is ever wasted.

    ``lifo_bound`` (adaptive LIFO): when a core frees at ``f`` and the
    oldest queued request has waited more than the bound, the newest queued
    request is served instead of the oldest.
    """

    __slots__ = ("g", "c", "book", "mode", "watch", "lifo_bound", "cores", "queue", "dl_heap")

    def __init__(self, g: int, c: int, book: _Book, mode: str, watch: bool, lifo_bound: float | None):
        self.g, self.c, self.book = g, c, book
        self.mode, self.watch, self.lifo_bound = mode, watch, lifo_bound
        self.cores: list[tuple[float, int]] = []  # (end of service, id), at most c
        self.queue: deque[int] = deque()
        # Client deadlines (deadline, id), sorted: requests arrive in time order.
        self.dl_heap: deque[tuple[float, int]] | None = deque() if watch else None

    def _expired(self, j: int, f: float) -> bool:
        """Would queued request ``j`` be dropped or skipped if picked at ``f``?"""
        book = self.book
        if book.state[j] == _DROPPED:
            return True
        d = book.deadline[j]
        return f + book.size[j] > d and (self.mode == "deadline" or f >= d)

    def _start(self, f: float, i: int) -> bool:
        """Try to start request ``i`` on a free core at ``f``; False if it is
        dropped or skipped instead."""
        book = self.book
        x = book.size[i]
        mode = self.mode
        end = f + x
        if mode != "continue":
            d = book.deadline[i]
            if end > d:
                if mode == "deadline":
                    book.state[i] = _DROPPED
                    book.departure[i] = f
                    if f < d and not book.client_done[i]:
                        book.fail(i, f)  # the client gets an error now, not a timeout
                    return False
                if f >= d:  # "drop": it left the queue at its deadline
                    book.state[i] = _DROPPED
                    book.departure[i] = d
                    return False
                book.state[i] = _ABORTING
                book.start[i] = f
                heapq.heappush(self.cores, (d, i))
                return True
        book.state[i] = _SERVING
        book.start[i] = f
        heapq.heappush(self.cores, (end, i))
        return True

    def _fill(self, f: float) -> None:
        """Give the free cores to queued requests at time ``f``."""
        queue, cores, c = self.queue, self.cores, self.c
        state = self.book.state
        bound = self.lifo_bound
        while queue and len(cores) < c:
            if bound is None:
                i = queue.popleft()
            else:
                if self.mode != "continue":
                    # Expired requests at the head are dropped/skipped before
                    # the head's wait decides the mode (the queue stays in
                    # arrival order, so they form a prefix).
                    while queue and self._expired(queue[0], f):
                        j = queue.popleft()
                        if state[j] != _DROPPED:
                            self._start(f, j)  # records the drop or skip
                    if not queue:
                        break
                if f - self.book.arrival[queue[0]] > bound:
                    i = queue.pop()
                else:
                    i = queue.popleft()
            if state[i] == _DROPPED:
                continue
            self._start(f, i)

    def advance(self, T: float) -> float:
        """Process every service end and deadline at or before ``T`` and return
        the time of the next event (inf if idle); returns early, at the
        current event time, when a failure has scheduled a retry."""
        cores, book = self.cores, self.book
        dlh = self.dl_heap
        state, cdone, outbox = book.state, book.client_done, book.outbox
        pop = heapq.heappop
        while True:
            te = cores[0][0] if cores else _INF
            if dlh:
                while dlh and cdone[dlh[0][1]]:
                    dlh.popleft()
                if dlh and dlh[0][0] < te:
                    td, j = dlh[0]
                    if td > T:
                        return td
                    dlh.popleft()
                    book.fail(j, td)
                    if self.mode == "drop" and state[j] == _WAITING:
                        state[j] = _DROPPED
                        book.departure[j] = td
                    if outbox:
                        return td
                    continue
            if te > T or not cores:
                return te
            end, i = pop(cores)
            if state[i] == _ABORTING:
                state[i] = _DROPPED
                book.departure[i] = end
                book.cpu[i] = end - book.start[i]
            else:
                state[i] = _DONE
                book.completion[i] = end
                book.departure[i] = end
                book.cpu[i] = book.size[i]
                if not cdone[i]:
                    cdone[i] = 1
                    book.open[self.g] -= 1
            if self.queue:
                self._fill(end)
                if outbox:
                    return end

    def arrive(self, a: float, i: int) -> float:
        """Request ``i`` arrives at ``a``; returns the time of the next event."""
        book = self.book
        book.open[self.g] += 1
        if self.watch:
            _push_deadline(self.dl_heap, book.deadline[i], i)
        if len(self.cores) < self.c:
            self._start(a, i)
        else:
            self.queue.append(i)
        return self.next_time()

    def next_time(self) -> float:
        te = self.cores[0][0] if self.cores else _INF
        dlh = self.dl_heap
        if dlh:
            cdone = self.book.client_done
            while dlh and cdone[dlh[0][1]]:
                dlh.popleft()
            if dlh and dlh[0][0] < te:
                return dlh[0][0]
        return te

    def finalize(self, T: float) -> None:
        """Record the CPU received so far by the requests in service at ``T``,
        and the drops of queued requests whose deadline has passed."""
        book = self.book
        for _, i in self.cores:
            book.cpu[i] = T - book.start[i]
        if self.mode == "drop":
            for i in self.queue:
                if book.state[i] == _WAITING and book.deadline[i] <= T:
                    book.state[i] = _DROPPED
                    book.departure[i] = book.deadline[i]


class _RRProcess:
    """One event-loop (round-robin) worker process with ``c`` cores (event object).

    The rules of :func:`_rr` (equal slices, FIFO run queue, a delay between
    slices, the admission rule) plus client deadlines.  With ``abandon``
    (``on_timeout`` "drop" or "deadline") the request leaves at its deadline
    wherever it is: waiting for admission, queued or sleeping (lazy
    deletion), or on a core (the slice is cut short and the core picks the
    next request at once).
    """

    __slots__ = ("g", "c", "book", "k", "delay", "draw", "abandon", "watch", "cores", "runq", "sleep",
                 "dl", "left", "began", "seq", "on", "off", "gated", "accept")

    def __init__(self, g: int, c: int, book: _Book, slices: int, delay: float,
                 draw: Callable[[], float] | None, abandon: bool, watch: bool, admission: str = "fifo"):
        self.g, self.c, self.book, self.k = g, c, book, slices
        self.gated = admission == "idle"
        self.accept: deque[int] = deque()  # admission="idle": arrived, not yet in the run queue
        self.delay, self.draw = delay, draw
        self.abandon, self.watch = abandon, watch or abandon
        self.cores: list[tuple[float, int, int]] = []  # (slice end, sequence, request)
        self.runq: deque[int] = deque()
        self.sleep: list[tuple[float, int, int]] = []  # (wake-up, sequence, request)
        self.dl: list[tuple[float, int]] = []
        self.left: dict[int, int] = {}  # slices still to run, per request present
        self.began: dict[int, float] = {}  # start of the running slice, per request on a core
        self.seq = 0
        self.on: list[float] = []
        self.off: list[float] = []

    def _fill(self, t: float, n0: int) -> None:
        """Free cores take requests from the run queue at ``t``; record the
        change of the busy-core count from ``n0``."""
        runq, cores, c = self.runq, self.cores, self.c
        book = self.book
        state = book.state
        while len(cores) < c:
            if not runq:
                # As in _rr_many: admit only when no slice end or wake-up is due
                # now (a dropped sleeper at the head of the heap does not count).
                sleep = self.sleep
                while sleep and state[sleep[0][2]] == _DROPPED:
                    heapq.heappop(sleep)
                if not self.accept or (cores and cores[0][0] <= t) or (sleep and sleep[0][0] <= t):
                    break
                runq.extend(self.accept)
                self.accept.clear()
            i = runq.popleft()
            if state[i] == _DROPPED:
                continue
            if state[i] == _WAITING:
                state[i] = _SERVING
                book.start[i] = t
            self.began[i] = t
            heapq.heappush(cores, (t + book.size[i] / self.k, self.seq, i))
            self.seq += 1
        d = len(cores) - n0
        if d > 0:
            self.on.extend([t] * d)
        elif d < 0:
            self.off.extend([t] * -d)

    def _times(self) -> tuple[float, float, float]:
        state, cdone = self.book.state, self.book.client_done
        sleep, dlh = self.sleep, self.dl
        while sleep and state[sleep[0][2]] == _DROPPED:
            heapq.heappop(sleep)
        while dlh and cdone[dlh[0][1]]:
            heapq.heappop(dlh)
        return (self.cores[0][0] if self.cores else _INF, sleep[0][0] if sleep else _INF,
                dlh[0][0] if dlh else _INF)

    def next_time(self) -> float:
        return min(self._times())

    def advance(self, T: float) -> float:
        """Process every slice end, wake-up and deadline at or before ``T`` (in
        that order at equal times) and return the time of the next event
        (inf if idle); returns early, at the current event time, when a
        failure has scheduled a retry."""
        book = self.book
        state, cdone, outbox = book.state, book.client_done, book.outbox
        cores, left, began = self.cores, self.left, self.began
        pop = heapq.heappop
        while True:
            te, tw, td = self._times()
            nxt = min(te, tw, td)
            if nxt > T or nxt == _INF:
                return nxt
            n0 = len(cores)
            if te == nxt:
                _, _, i = pop(cores)
                del began[i]
                m = left[i] - 1
                if m:
                    left[i] = m
                    d = self.delay if self.draw is None else self.draw()
                    if d > 0.0:
                        heapq.heappush(self.sleep, (te + d, self.seq, i))
                        self.seq += 1
                    else:
                        self.runq.append(i)
                else:
                    del left[i]
                    state[i] = _DONE
                    book.completion[i] = te
                    book.departure[i] = te
                    book.cpu[i] = book.size[i]
                    if not cdone[i]:
                        cdone[i] = 1
                        book.open[self.g] -= 1
                self._fill(te, n0)
            elif tw == nxt:
                self.runq.append(pop(self.sleep)[2])
                self._fill(tw, n0)
            else:
                j = pop(self.dl)[1]
                book.fail(j, td)
                if self.abandon and (state[j] == _WAITING or state[j] == _SERVING):
                    cpu = (self.k - left.pop(j)) * (book.size[j] / self.k)
                    if j in began:
                        cpu += td - began.pop(j)
                        cores[:] = [e for e in cores if e[2] != j]
                        heapq.heapify(cores)
                    state[j] = _DROPPED
                    book.departure[j] = td
                    book.cpu[j] = cpu
                    self._fill(td, n0)
                if outbox:
                    return td

    def arrive(self, a: float, i: int) -> float:
        """Request ``i`` arrives at ``a``; returns the time of the next event."""
        book = self.book
        book.open[self.g] += 1
        self.left[i] = self.k
        if self.watch:
            heapq.heappush(self.dl, (book.deadline[i], i))
        (self.accept if self.gated else self.runq).append(i)
        self._fill(a, len(self.cores))
        return self.next_time()

    def finalize(self, T: float) -> None:
        """Record the CPU received so far by the requests still present."""
        book, began, k = self.book, self.began, self.k
        for i, m in self.left.items():
            if book.state[i] != _DROPPED:
                book.cpu[i] = (k - m) * (book.size[i] / k) + (T - began[i] if i in began else 0.0)

    def busy(self) -> _Busy:
        return _Busy(self.on, self.off + [_NAN] * (len(self.on) - len(self.off)))


@dataclass
class _Options:
    """Validated run options (see :func:`simulate`)."""

    discipline: str = "fcfs"
    servers: int = 1
    processes: int = 1
    machines: int = 1
    dispatch: str = "round_robin"
    timeout: float | None = None
    on_timeout: str = "continue"
    queue: str = "fifo"
    queue_delay_bound: float | None = None
    retries: int = 0
    retry_backoff: float = 1.0
    retry_backoff_factor: float = 1.0
    drain: bool = True
    progress: Callable[[float, float], Any] | None = None
    engine: str | None = None  # force "static", "objects" or "global" (tests compare them)
    slices: int = 1  # round robin: slices per request
    slice_delay: float = 0.0  # round robin: constant delay between slices (s)
    delay_service: Service | None = None  # round robin: delay distribution (overrides slice_delay)
    admission: str = "fifo"  # round robin: when a new request enters the run queue

    @property
    def n_proc(self) -> int:
        return self.machines * self.processes

    @property
    def server_reacts(self) -> bool:
        """Does the server's behaviour depend on timeouts or queue order?"""
        return (self.timeout is not None and self.on_timeout != "continue") or self.queue != "fifo"


def _round_robin(k: np.ndarray | int, machines: int, processes: int) -> Any:
    """Global process index of the ``k``-th dispatched request (0-based).

    The front dispatcher rotates over machines; each machine's primary
    rotates over its own processes for the requests it receives.  Request
    ``k`` goes to machine ``k mod M`` as that machine's ``k // M``-th request,
    hence to its process ``(k // M) mod P``; the global index is
    ``machine * P + process``.
    """
    return (k % machines) * processes + (k // machines) % processes


def _static_assignment(n: int, opts: _Options, rng: np.random.Generator) -> np.ndarray:
    if opts.n_proc == 1:
        return np.zeros(n, dtype=np.int64)
    if opts.dispatch == "round_robin":
        return _round_robin(np.arange(n, dtype=np.int64), opts.machines, opts.processes)
    return rng.integers(0, opts.n_proc, size=n, dtype=np.int64)


def _delay_draw(opts: _Options, rng: np.random.Generator | None) -> Callable[[], float] | None:
    """A callable drawing one slice delay (s) per call, in blocks from ``rng``;
    None for a constant delay."""
    svc = opts.delay_service
    if svc is None:
        return None
    rng = rng if rng is not None else np.random.default_rng(0)
    block: list[float] = []

    def draw() -> float:
        if not block:
            block.extend(np.asarray(svc.sample(4096, rng), dtype=float).reshape(-1)[::-1].tolist())
        return block.pop()

    return draw


def _make_processes(book: _Book, opts: _Options, rng: np.random.Generator | None = None) -> list[Any]:
    has_timeout = opts.timeout is not None
    watch = has_timeout and (opts.dispatch == "least_connections" or opts.retries > 0)
    if opts.discipline == "ps":
        abandon = has_timeout and opts.on_timeout != "continue"
        if not abandon:
            return [_PSKeepProcess(g, opts.servers, book, watch) for g in range(opts.n_proc)]
        return [_PSProcess(g, opts.servers, book, abandon, watch) for g in range(opts.n_proc)]
    if opts.discipline == "rr":
        abandon = has_timeout and opts.on_timeout != "continue"
        draw = _delay_draw(opts, rng)
        return [_RRProcess(g, opts.servers, book, opts.slices, opts.slice_delay, draw, abandon, watch,
                           opts.admission) for g in range(opts.n_proc)]
    mode = opts.on_timeout if has_timeout else "continue"
    bound = None
    if opts.queue == "adaptive_lifo":
        bound = opts.queue_delay_bound
    return [_FCFSProcess(g, opts.servers, book, mode, watch, bound) for g in range(opts.n_proc)]


def _run_static(arrivals: np.ndarray, sizes: np.ndarray, assign: np.ndarray, opts: _Options,
                busy: list | None = None, rng: np.random.Generator | None = None) -> _Trace:
    """Engine 1: the one-queue engines, once per process.  Round robin also
    appends each process's busy-core record ``(g, _Busy)`` to ``busy``."""
    if opts.discipline == "rr":
        draw = _delay_draw(opts, rng)

        def engine(a: np.ndarray, s: np.ndarray, c: int, g: int = 0) -> _Trace:
            trace, record = _rr(a, s, c, opts.slices, opts.slice_delay, draw, opts.admission)
            if busy is not None:
                busy.append((g, record))
            return trace
    else:
        plain = _ENGINES[opts.discipline]

        def engine(a: np.ndarray, s: np.ndarray, c: int, g: int = 0) -> _Trace:
            return plain(a, s, c)
    if opts.n_proc == 1:
        return engine(arrivals, sizes, opts.servers)
    start, completion, response = (np.empty(arrivals.size) for _ in range(3))
    for g in range(opts.n_proc):
        idx = np.flatnonzero(assign == g)
        if idx.size:
            tr = engine(arrivals[idx], sizes[idx], opts.servers, g)
            start[idx], completion[idx], response[idx] = tr.start, tr.completion, tr.response
    return _Trace(start, completion, response)


def _run_per_process(book: _Book, assign: np.ndarray, opts: _Options, t_end: float,
                     rng: np.random.Generator | None = None) -> list[Any]:
    """Engine 2: event objects, one process after the other (state-free dispatch, no retries).
    Returns the process objects."""
    procs = _make_processes(book, opts, rng)
    book.process = assign.tolist()
    arrival = book.arrival
    if opts.n_proc == 1:
        groups = [range(len(arrival))]
    else:
        order = np.argsort(assign, kind="stable")
        cuts = np.searchsorted(assign[order], np.arange(1, opts.n_proc))
        groups = [ids.tolist() for ids in np.split(order, cuts)]
    for proc, ids in zip(procs, groups):
        advance, arrive = proc.advance, proc.arrive
        nxt = _INF  # the process's next event (arrive and advance return it)
        for i in ids:
            a = arrival[i]
            # With no event of the process up to ``a``, advance(a) would only
            # move the clock, which arrive() does with the same arithmetic.
            if nxt <= a:
                advance(a)
            nxt = arrive(a, i)
        proc.advance(t_end)
        proc.finalize(t_end)
    return procs


# How many events the global loop runs between looks at the wall clock.
_PROGRESS_CHECK_EVERY = 4096
# Minimum wall-clock seconds between two progress calls.
_PROGRESS_INTERVAL = 1.0


def _run_global(book: _Book, assign: np.ndarray | None, opts: _Options, t_end: float, total: float,
                rng: np.random.Generator) -> tuple[int, float, bool, list[Any]]:
    """Engine 3: one event loop over every process, in time order.

    Events at equal times: process events (completions, deadlines) first,
    then retries, then original arrivals.  Returns the number of original
    requests dispatched, the time reached and whether ``progress`` stopped
    the run, and the process objects.
    """
    procs = _make_processes(book, opts, rng)
    n_proc = opts.n_proc
    machines, processes = opts.machines, opts.processes
    n0 = len(book.arrival)
    arrival0 = book.arrival[:n0]
    proc_of = book.process
    open_ = book.open
    outbox = book.outbox
    dispatch = opts.dispatch if n_proc > 1 else "single"
    pre = assign.tolist() if assign is not None else None
    rand_block: list[int] = []
    push, pop = heapq.heappush, heapq.heappop
    nxt = [_INF] * n_proc
    ph: list[tuple[float, int]] = []  # (next event time, process)
    rh: list[tuple[float, int, int]] = []  # (retry arrival, sequence, failed request)
    seq = 0
    rr = 0
    j = 0
    now = 0.0
    events = 0
    progress = opts.progress
    last_call = -_INF
    stopped = False
    if progress is None and not book.retries:
        # No retries: processes interact only through the dispatcher, which
        # looks at them at arrival instants alone.  Bring the processes with
        # an event up to each arrival (completions and deadlines first at
        # equal times), then dispatch: no heap of processes is needed, and
        # each process runs on its own clock as in engine 2.
        advs = [p.advance for p in procs]
        arrs = [p.arrive for p in procs]
        for p in procs:
            if isinstance(p, _PSProcess):
                p.hold = True  # the clock moves at the process's own events and arrivals only
        gs = range(n_proc)
        for j in range(n0):
            a = arrival0[j]
            if a > t_end:
                break
            for g in gs:
                if nxt[g] <= a:
                    nxt[g] = advs[g](a)
            if dispatch == "least_connections":
                g = open_.index(min(open_))
            elif dispatch == "single":
                g = 0
            elif dispatch == "round_robin":
                g = (rr % machines) * processes + (rr // machines) % processes
                rr += 1
            else:
                g = pre[j]
            proc_of[j] = g
            nxt[g] = arrs[g](a, j)
        else:
            j = n0
        for p in procs:
            if isinstance(p, _PSProcess):
                p.hold = False
            p.advance(t_end)
            if t_end < _INF:
                p.finalize(t_end)
        return j, t_end, False, procs
    if n_proc == 1:
        return _run_global_one(book, opts, t_end, total, procs[0])
    while True:
        while ph and ph[0][0] != nxt[ph[0][1]]:
            pop(ph)
        tp = ph[0][0] if ph else _INF
        ta = arrival0[j] if j < n0 else _INF
        tr = rh[0][0] if rh else _INF
        if tp <= ta and tp <= tr:
            if tp > t_end or tp == _INF:
                break
            g = pop(ph)[1]
            # Run this process alone up to the next event elsewhere (other
            # processes' heap entries are lower bounds of their next events).
            bound = ta if ta < tr else tr
            if ph and ph[0][0] < bound:
                bound = ph[0][0]
            if t_end < bound:
                bound = t_end
            nt = procs[g].advance(bound)
            now = tp
        else:
            if tr <= ta:
                t = tr
                if t > t_end:
                    break
                i = book.add_retry(t, pop(rh)[2])
            else:
                t = ta
                if t > t_end:
                    break
                i = j
                j += 1
            if dispatch == "single":
                g = 0
            elif dispatch == "least_connections":
                g = open_.index(min(open_))
            elif dispatch == "round_robin":
                g = (rr % machines) * processes + (rr // machines) % processes
                rr += 1
            elif i < n0:
                g = pre[i]
            else:
                if not rand_block:
                    rand_block = rng.integers(0, n_proc, size=1024).tolist()[::-1]
                g = rand_block.pop()
            proc_of[i] = g
            nt = procs[g].arrive(t, i)
            now = t
        if nt != nxt[g]:
            nxt[g] = nt
            if nt < _INF:
                push(ph, (nt, g))
        elif tp <= ta and tp <= tr and nt < _INF:
            push(ph, (nt, g))  # its entry was consumed
        if outbox:
            for item in outbox:
                push(rh, (item[0], seq, item[1]))
                seq += 1
            outbox.clear()
        events += 1
        if progress is not None and not events % _PROGRESS_CHECK_EVERY:
            wall = time.perf_counter()
            if wall - last_call >= _PROGRESS_INTERVAL:
                last_call = wall
                if progress(now, total) is False:
                    stopped = True
                    break
    return _finish_global(j, now, stopped, t_end, procs)


def _run_global_one(book: _Book, opts: _Options, t_end: float, total: float,
                    proc: Any) -> tuple[int, float, bool, list[Any]]:
    """Engine 3 for one process: the loop of :func:`_run_global` without the
    heap of processes (same events in the same order, same arithmetic)."""
    n0 = len(book.arrival)
    arrival0 = book.arrival[:n0]
    proc_of = book.process
    outbox = book.outbox
    add_retry = book.add_retry
    advance, arrive = proc.advance, proc.arrive
    push, pop = heapq.heappush, heapq.heappop
    rh: list[tuple[float, int, int]] = []  # (retry arrival, sequence, failed request)
    seq = 0
    j = 0
    now = 0.0
    events = 0
    progress = opts.progress
    last_call = -_INF
    stopped = False
    nt = _INF  # the process's next event
    ta = arrival0[0] if n0 else _INF
    while True:
        tr = rh[0][0] if rh else _INF
        if nt <= ta and nt <= tr:
            if nt > t_end or nt == _INF:
                break
            now = nt
            bound = ta if ta < tr else tr
            if t_end < bound:
                bound = t_end
            nt = advance(bound)
        else:
            if tr <= ta:
                t = tr
                if t > t_end:
                    break
                i = add_retry(t, pop(rh)[2])
            else:
                t = ta
                if t > t_end:
                    break
                i = j
                j += 1
                ta = arrival0[j] if j < n0 else _INF
            proc_of[i] = 0
            nt = arrive(t, i)
            now = t
        if outbox:
            for item in outbox:
                push(rh, (item[0], seq, item[1]))
                seq += 1
            outbox.clear()
        if progress is not None:
            events += 1
            if not events % _PROGRESS_CHECK_EVERY:
                wall = time.perf_counter()
                if wall - last_call >= _PROGRESS_INTERVAL:
                    last_call = wall
                    if progress(now, total) is False:
                        stopped = True
                        break
    return _finish_global(j, now, stopped, t_end, [proc])


def _finish_global(j: int, now: float, stopped: bool, t_end: float,
                   procs: list[Any]) -> tuple[int, float, bool, list[Any]]:
    end = now if stopped else t_end  # inf when draining: the caller takes the last departure
    for p in procs:
        if not stopped:
            p.advance(end)
        elif isinstance(p, _PSProcess) and p.n:
            # Move the virtual clock to the stop time without processing
            # further events (the run ends at ``end``).
            p.v += (end - p.t) * (p.c / p.n if p.n > p.c else 1.0)
            p.t = end
        if end < _INF:
            p.finalize(end)
    return j, end, stopped, procs


def _book_table(book: _Book, n_orig: int, n_total_orig: int, opts: _Options, end: float) -> pd.DataFrame:
    """The per-request table from the records of engines 2 and 3."""
    keep = np.r_[np.arange(n_orig), np.arange(n_total_orig, len(book.arrival))]
    full = keep.size == len(book.arrival)

    def col(values: list, dtype: Any = float) -> np.ndarray:
        arr = np.asarray(values, dtype=dtype)
        return arr if full else arr[keep]

    arrival = col(book.arrival)
    completion = col(book.completion)
    departure = col(book.departure)
    start = col(book.start)
    if opts.discipline == "ps":
        start = np.full(arrival.size, np.nan)
    deadline = col(book.deadline)
    return _assemble(arrival, start, completion, completion - arrival, col(book.size),
                     col(book.attempt, np.int64), col(book.request_id, np.int64),
                     col(book.process, np.int64), departure, col(book.cpu), deadline, opts, end)


def _assemble(arrival: np.ndarray, start: np.ndarray, completion: np.ndarray, response: np.ndarray,
              service: np.ndarray, attempt: np.ndarray, request_id: np.ndarray, process: np.ndarray,
              departure: np.ndarray, cpu: np.ndarray, deadline: np.ndarray, opts: _Options,
              end: float) -> pd.DataFrame:
    done = ~np.isnan(completion)
    left = ~np.isnan(departure)
    code = np.full(arrival.size, 3, dtype=np.int8)  # in_flight
    code[~left & (deadline <= end)] = 1  # still running, client gone
    code[left & ~done] = 2  # dropped
    code[done] = np.where(completion[done] <= deadline[done], 0, 1)
    outcome = pd.Categorical.from_codes(code, categories=list(OUTCOMES))
    return pd.DataFrame({
        "arrival": arrival,
        "start": start,
        "completion": completion,
        "response": response,
        "service": service,
        "outcome": outcome,
        "attempt": attempt,
        "request_id": request_id,
        "process": process,
        "machine": process // opts.processes,
        "departure": departure,
        "cpu": cpu,
        "deadline": deadline,
    })


# ---------------------------------------------------------------------------- result
class ConfidenceInterval(NamedTuple):
    """A point estimate with a two-sided confidence interval (seconds)."""

    estimate: float
    half_width: float
    low: float
    high: float
    level: float
    batches: int


def _busy_path(begin: np.ndarray, finish: np.ndarray, process: np.ndarray,
               cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Total busy cores as a step function: event times ``T`` (sorted) and the
    number of busy cores ``B`` just after each.

    Each request occupies one unit of ``[begin, finish)`` in its process, and
    a process keeps ``min(units, cap)`` cores busy: for FCFS the units are
    the requests in service (never more than ``cap``); for PS they are the
    requests present, sharing ``min(n, c)`` busy cores.
    """
    n = begin.size
    times = np.concatenate([begin, finish])
    steps = np.concatenate([np.ones(n), -np.ones(n)])
    proc = np.concatenate([process, process])
    # Within a process: by time, arrivals before departures at equal times
    # (keeps the count non-negative; zero-length segments carry no area).
    order = np.lexsort((-steps, times, proc))
    count = np.cumsum(steps[order])  # each process's intervals sum to 0, so this restarts per process
    capped = np.minimum(count, cap)
    delta = np.diff(capped, prepend=0.0)
    t = times[order]
    by_time = np.argsort(t, kind="stable")
    return t[by_time], np.cumsum(delta[by_time])


def _integral(T: np.ndarray, B: np.ndarray, x: np.ndarray) -> np.ndarray:
    """integral_0^x B(u) du for the step function (T, B) (B = 0 before T[0])."""
    if T.size == 0:
        return np.zeros_like(x, dtype=float)
    area = np.concatenate([[0.0], np.cumsum(np.diff(T) * B[:-1])])
    j = np.searchsorted(T, x, side="right") - 1
    jj = np.clip(j, 0, None)
    return np.where(j < 0, 0.0, area[jj] + B[jj] * (x - T[jj]))


@dataclass(frozen=True)
class SimulationResult:
    """The outcome of :func:`simulate`.

    Attributes
    ----------
    requests : pandas.DataFrame
        One row per request: the original requests in arrival order, then
        the retries in the order they arrived.  Columns (times in seconds
        from the start of the run):

        ``arrival``
            When the request reached the dispatcher.
        ``start``
            FCFS and round robin: when it first got a core (NaN if it never
            did).  PS: NaN
            (service starts at arrival, at a shared rate; there is no
            waiting phase).
        ``completion``
            When the server finished it (NaN if it never did: dropped, or
            still running at the end of the run).
        ``response``
            ``completion - arrival`` (NaN without a completion).
        ``service``
            The CPU time the request needs (its size).
        ``outcome``
            Categorical, one of :data:`OUTCOMES`: ``"ok"`` (completed at or
            before ``arrival + timeout``), ``"timed_out"`` (the client gave up
            at ``arrival + timeout``; the server may still have completed it
            later, or still be running it), ``"dropped"`` (the server
            abandoned it: ``on_timeout="drop"`` or ``"deadline"``),
            ``"in_flight"`` (still in the server when the run ended and its
            client still waiting).
        ``attempt``
            0 for an original request, ``k`` for its ``k``-th retry.
        ``request_id``
            Row number of the original request this one belongs to.
        ``process``
            Global worker-process index, ``machine * processes + local``.
        ``machine``
            Machine index.
        ``departure``
            When it left the server: the completion, or the time it was
            dropped or skipped (NaN if still in the server at the end).
        ``cpu``
            CPU time it actually received (``service`` when completed; less
            when dropped or still running; 0 if never started).
        ``deadline``
            ``arrival + timeout`` (``inf`` without a timeout).
    discipline : str
        ``"fcfs"``, ``"ps"`` or ``"rr"``.
    servers : int
        Cores per worker process.
    duration : float
        The observation window ``[0, duration]`` in seconds: the arrival
        window of a Poisson run, the ``duration`` you gave, or else the last
        completion time.  :meth:`utilization` and :meth:`mean_number`
        average over it.
    processes, machines : int
        The topology: ``machines x processes`` worker processes.
    timeout : float or None
        The client timeout (s).
    end : float
        When the run ended (s): after the last departure when draining, at
        ``duration`` with ``drain=False``, or where ``progress`` stopped it.
    stopped : bool
        True if ``progress`` stopped the run early.
    origin : pandas.Timestamp or None
        The wall-clock time of second 0 when the arrivals were a rate
        series with a DatetimeIndex (``per_second`` stays indexed by seconds
        from 0; add ``origin`` to get timestamps).
    slices : int
        Round robin: slices per request (1 otherwise).
    slice_delay : float or Service
        Round robin: the delay between slices (s).
    core_busy : tuple of ndarray or None
        Round robin: the busy-core record ``(times, steps, process)`` (+1
        when a core starts working, -1 when it goes idle, NaN time: still
        busy at the end) behind :meth:`utilization` and ``cpu_busy``.
    admission : str
        Round robin: ``"fifo"`` or ``"idle"`` (see :func:`simulate`).
    """

    requests: pd.DataFrame
    discipline: str
    servers: int
    duration: float
    processes: int = 1
    machines: int = 1
    timeout: float | None = None
    end: float = math.nan
    stopped: bool = False
    origin: Any = None
    slices: int = 1
    slice_delay: Any = 0.0
    core_busy: Any = None
    admission: str = "fifo"

    # ------------------------------------------------------------------ helpers
    @property
    def _end(self) -> float:
        if not math.isnan(self.end):
            return self.end
        done = self.requests["departure"].to_numpy()
        return float(max(self.duration, np.nanmax(done))) if done.size and not np.isnan(done).all() \
            else self.duration

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
        keep = (self.requests["arrival"].to_numpy() >= warmup) & ~np.isnan(col)
        return col[keep]

    def _number_path(self) -> tuple[np.ndarray, np.ndarray]:
        """Event times and the number in the server just after each (a step path)."""
        arr = self.requests["arrival"].to_numpy()
        done = self.requests["departure"].to_numpy()
        done = done[~np.isnan(done)]
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

    def _busy(self) -> tuple[np.ndarray, np.ndarray]:
        """Busy cores of the whole cluster as a step function (see :func:`_busy_path`)."""
        req = self.requests
        end = self._end
        finish = req["departure"].to_numpy()
        finish = np.where(np.isnan(finish), end, finish)
        if self.discipline == "rr":
            # Recorded by the engine: +1 when a core leaves idleness, -1 when it
            # goes idle (NaN: still busy at the end of the run).
            times, steps, _ = self.core_busy
            times = np.where(np.isnan(times), end, times)
            order = np.argsort(times, kind="stable")
            return times[order], np.cumsum(steps[order])
        if self.discipline == "fcfs":
            begin = req["start"].to_numpy()
            started = ~np.isnan(begin)
            begin, finish, proc = begin[started], finish[started], req["process"].to_numpy()[started]
        else:
            begin, proc = req["arrival"].to_numpy(), req["process"].to_numpy()
        return _busy_path(begin, finish, proc, self.servers)

    @cached_property
    def per_second(self) -> pd.DataFrame:
        """Per-second summary of the run (computed on first access).

        One row per whole second ``k`` (index ``second``), covering
        ``[k, k + 1)`` for ``k = 0 .. ceil(end) - 1``, so the drain after the
        arrival window is included (slice ``.loc[:duration - 1]`` for the
        window alone).  Events at exactly ``end`` (an integer) fall in the
        last row.  Columns:

        ``arrivals``
            Requests arriving (retries included).
        ``completions``
            Requests the server completed (late ones included).
        ``goodput``
            Completions with outcome ``"ok"`` (at or before the timeout).
        ``timeouts``
            Client-side failures: ``"timed_out"`` requests counted at
            ``arrival + timeout``, ``"dropped"`` ones at
            ``min(departure, arrival + timeout)``.
        ``drops``
            Requests the server dropped or skipped, at their departure.
        ``in_flight``
            Requests in the servers (queued or running, abandoned ones
            included) at the end of the second, ``min(k + 1, end)``.
        ``cpu_busy``
            Fraction of the cluster's core-seconds busy during the second:
            ``integral over [k, k+1) of busy cores / (cores per process x
            processes)``, exact from the service intervals (FCFS) or from
            ``min(n, c)`` per process with ``n`` requests present (PS).
        ``latency_p50``, ``latency_p99``, ``latency_max``
            Response time (s) of the requests completing in that second
            (NaN when none; linear-interpolation quantiles).
        """
        req = self.requests
        end = self._end
        n_rows = max(int(math.ceil(end)), 1)

        def bins(t: np.ndarray) -> np.ndarray:
            return np.minimum(np.floor(t).astype(np.int64), n_rows - 1)

        def count(t: np.ndarray) -> np.ndarray:
            t = t[~np.isnan(t)]
            return np.bincount(bins(t), minlength=n_rows)[:n_rows]

        arrival = req["arrival"].to_numpy()
        completion = req["completion"].to_numpy()
        departure = req["departure"].to_numpy()
        deadline = req["deadline"].to_numpy()
        code = req["outcome"].cat.codes.to_numpy()
        ok = code == 0
        timed_out = code == 1
        dropped = code == 2
        fail_time = np.where(timed_out, deadline, np.where(dropped, np.fmin(deadline, departure), np.nan))
        ends = np.minimum(np.arange(1, n_rows + 1, dtype=float), end)
        gone = np.sort(departure[~np.isnan(departure)])
        in_flight = (np.searchsorted(np.sort(arrival), ends, side="right")
                     - np.searchsorted(gone, ends, side="right"))
        T, B = self._busy()
        edges = np.arange(n_rows + 1, dtype=float)
        area = np.diff(_integral(T, B, edges))
        cores = self.servers * self.processes * self.machines
        done = ~np.isnan(completion)
        latency = pd.Series(completion[done] - arrival[done], index=bins(completion[done]))
        groups = latency.groupby(level=0)
        index = pd.RangeIndex(n_rows, name="second")
        table = pd.DataFrame({
            "arrivals": count(arrival),
            "completions": count(completion),
            "goodput": count(np.where(ok, completion, np.nan)),
            "timeouts": count(fail_time),
            "drops": count(np.where(dropped, departure, np.nan)),
            "in_flight": in_flight,
            "cpu_busy": area / cores,
        }, index=index)
        table["latency_p50"] = groups.quantile(0.5).reindex(index).to_numpy()
        table["latency_p99"] = groups.quantile(0.99).reindex(index).to_numpy()
        table["latency_max"] = groups.max().reindex(index).to_numpy()
        return table

    # ------------------------------------------------------------------ statistics
    def mean_response(self, warmup: float = 0.0) -> float:
        """Mean response time (s) of the completed requests arriving at or after ``warmup`` (s)."""
        x = self._values("response", warmup)
        return float(x.mean()) if x.size else math.nan

    def response_quantile(self, q: Any, warmup: float = 0.0) -> Any:
        """Empirical ``q``-quantile of the response time (s) of the completed
        requests arriving at or after ``warmup``; ``q`` may be an array."""
        q = check_quantile(q, "q")
        x = self._values("response", warmup)
        if x.size == 0:
            return math.nan if q.ndim == 0 else np.full(q.shape, np.nan)
        out = np.quantile(x, q)
        return float(out) if np.ndim(out) == 0 else out

    def utilization(self) -> float:
        """Measured busy fraction of all the cores over ``[0, duration]``.

        Exact from the busy-core step function of :attr:`per_second`
        (``min(n, c)`` busy cores in a PS process with ``n`` requests; the
        requests in service in a FCFS process); with one process this is
        ``(1/(c T)) * integral of min(N(t), c) dt``.
        """
        horizon = self.duration
        if not horizon > 0:
            return math.nan
        T, B = self._busy()
        busy = float(_integral(T, B, np.array([horizon]))[0])
        return busy / (horizon * self.servers * self.processes * self.machines)

    def mean_number(self) -> float:
        """Time-average number of requests in the servers over ``[0, duration]``."""
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
def _series_arrivals(series: pd.Series, duration: Any,
                     rng: np.random.Generator) -> tuple[np.ndarray, float, Any]:
    """Poisson arrivals at a piecewise-constant per-second rate."""
    n = len(series)
    if n == 0:
        raise ValueError("arrivals must not be an empty series of rates")
    index = series.index
    origin = None
    if isinstance(index, pd.DatetimeIndex):
        ns = index.as_unit("ns").asi8
        if n > 1 and not np.all(np.diff(ns) == 1_000_000_000):
            raise ValueError("arrivals: a rate series with a DatetimeIndex must have one row per "
                             "second (1 s frequency, increasing, no gaps)")
        origin = index[0]
    else:
        try:
            values = np.asarray(index, dtype=float)
        except (TypeError, ValueError):
            raise ValueError("arrivals: a rate series must be indexed by seconds 0, 1, 2, ... or by a "
                             "DatetimeIndex at 1 s frequency") from None
        if not np.array_equal(values, np.arange(n)):
            raise ValueError(f"arrivals: a rate series must be indexed by seconds 0, 1, ..., {n - 1} "
                             f"(or a DatetimeIndex at 1 s frequency), got index starting {values[:3]!r}")
    rates = check_nonnegative(series.to_numpy(dtype=float, na_value=np.nan), "arrivals")
    horizon = float(n) if duration is None else float(check_positive(duration, "duration"))
    counts = rng.poisson(rates)
    # Given the count in a second, Poisson points are iid uniform in it.
    times = np.sort(np.repeat(np.arange(n, dtype=float), counts) + rng.uniform(0.0, 1.0, int(counts.sum())))
    if horizon < n:
        times = times[times <= horizon]
    return times, horizon, origin


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
            raise ValueError(f"duration must be at least the last arrival time {times[-1]!r}, "
                             f"got {duration!r}")
    return times, horizon


def _run(arrivals: np.ndarray, sizes: np.ndarray, discipline: str, servers: int,
         duration: float | None, options: _Options | None = None,
         rng: np.random.Generator | None = None, origin: Any = None) -> SimulationResult:
    """Simulate given arrival times and per-request sizes (already validated)."""
    opts = options if options is not None else _Options(discipline=discipline, servers=servers)
    rng = rng if rng is not None else np.random.default_rng(0)
    n = arrivals.size
    assign = _static_assignment(n, opts, rng) if opts.dispatch != "least_connections" else None
    timeout = opts.timeout
    stopped = False
    use_global = (opts.dispatch == "least_connections" and opts.n_proc > 1) or \
        (opts.retries > 0 and timeout is not None) or opts.progress is not None or opts.engine == "global"
    static = not use_global and not opts.server_reacts and opts.drain and opts.engine != "objects"
    busy: list | None = [] if opts.discipline == "rr" else None
    if static:
        trace = _run_static(arrivals, sizes, assign, opts, busy, rng)
        deadline = arrivals + timeout if timeout is not None else np.full(n, np.inf)
        end = max(duration or 0.0, float(trace.completion.max()) if n else 0.0)
        requests = _assemble(arrivals, trace.start, trace.completion, trace.response, sizes,
                             np.zeros(n, np.int64), np.arange(n, dtype=np.int64), assign,
                             trace.completion, sizes.copy(), deadline, opts, end)
    else:
        t_end = _INF if opts.drain else float(duration if duration is not None else
                                                (arrivals[-1] if n else 0.0))
        book = _Book(arrivals, sizes, timeout, opts.n_proc, opts.retries if timeout is not None else 0,
                     opts.retry_backoff, opts.retry_backoff_factor)
        if use_global:
            total = float(duration) if duration is not None else (float(arrivals[-1]) if n else 0.0)
            n_orig, end, stopped, procs = _run_global(book, assign, opts, t_end, total, rng)
        else:
            procs = _run_per_process(book, assign, opts, t_end, rng)
            n_orig, end = n, t_end
        if busy is not None:
            busy.extend((g, p.busy()) for g, p in enumerate(procs))
        if end == _INF:
            dep = np.asarray(book.departure, dtype=float)
            end = max(duration or 0.0, float(np.nanmax(dep)) if dep.size else 0.0)
        requests = _book_table(book, n_orig, n, opts, end)
    if duration is None:
        done = requests["completion"].to_numpy()
        duration = float(np.nanmax(done)) if n and not np.isnan(done).all() else 0.0
    if opts.progress is not None and not stopped:
        opts.progress(end, end)
    core_busy = _busy_arrays(busy) if busy is not None else None
    return SimulationResult(requests, opts.discipline, opts.servers, float(duration), opts.processes,
                            opts.machines, timeout, float(end), stopped, origin, opts.slices,
                            opts.slice_delay if opts.delay_service is None else opts.delay_service,
                            core_busy, opts.admission)


def _busy_arrays(records: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flatten per-process ``(g, _Busy)`` records into (times, +1/-1 steps,
    process); an ``off`` that is NaN (still busy) stays NaN."""
    times, steps, procs = [], [], []
    for g, rec in records:
        off = list(rec.off) + [_NAN] * (len(rec.on) - len(rec.off))
        times.append(np.asarray(rec.on, dtype=float))
        times.append(np.asarray(off, dtype=float))
        steps.append(np.ones(len(rec.on)))
        steps.append(-np.ones(len(off)))
        procs.append(np.full(len(rec.on) + len(off), g, dtype=np.int64))
    if not times:
        return np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64)
    return np.concatenate(times), np.concatenate(steps), np.concatenate(procs)


def simulate(arrivals: Any, service: Service | float, discipline: str = "fcfs", servers: int = 1,
             processes: int = 1, dispatch: str = "round_robin", machines: int = 1,
             timeout: float | None = None, on_timeout: str = "continue", queue: str = "fifo",
             retries: int = 0, retry_backoff: float = 1.0, duration: float | None = None,
             seed: Any = None, progress: Callable[[float, float], Any] | None = None, *,
             queue_delay_bound: float | None = None, retry_backoff_factor: float = 1.0,
             drain: bool = True, slices: int = 1, slice_delay: float | Service = 0.0,
             admission: str = "fifo") -> SimulationResult:
    """Simulate a service exactly, request by request, in or out of overload.

    Parameters
    ----------
    arrivals : float, array_like or pandas.Series
        A Poisson arrival rate in requests/s (then ``duration`` is required);
        or the arrival times in seconds (one-dimensional, non-decreasing,
        finite, >= 0); or a pandas Series of per-second rates (req/s) indexed
        by seconds ``0, 1, 2, ...`` or by a DatetimeIndex at 1 s frequency:
        Poisson arrivals at a rate that is constant within each second
        (``duration`` defaults to the series length).
    service : Service or float
        CPU time per request in seconds: a :class:`~capacity.Service` with
        scalar parameters, or a bare number meaning an exponential with that
        mean.  A retry needs the same CPU time as its original request.
    discipline : {"fcfs", "ps", "rr"}
        Inside each worker process: first come first served, processor
        sharing where each of the ``n`` requests present is served at rate
        ``min(1, servers/n)``, or event-loop round robin: each request's CPU
        is ``slices`` equal slices through one FIFO run queue (see
        ``slices``).
    servers : int
        Cores per worker process (>= 1).  A Node.js process is one core.
    processes : int
        Worker processes per machine, each with its own queue (>= 1).
    dispatch : {"round_robin", "random", "least_connections"}
        How each arriving request (retries included) picks one of the
        ``machines * processes`` worker processes, numbered
        ``g = machine * processes + local``.  ``"round_robin"``: the k-th
        dispatched request (k = 0, 1, ...) goes to machine ``k mod machines``
        and there to process ``(k // machines) mod processes`` (a front
        balancer rotating over machines, each machine's cluster primary --
        Node.js's default on Linux -- rotating over its processes).
        ``"random"``: uniform over all processes.  ``"least_connections"``:
        the process with the fewest open connections, ties to the lowest
        ``g`` (nginx ``least_conn`` over all processes; nginx breaks ties by
        weighted round robin instead).  A connection is open from arrival
        until the completion or until the client gives up or gets an error,
        whichever comes first: the proxy closes its upstream connection at
        its timeout even when the server keeps computing.
    machines : int
        Machines, each running ``processes`` worker processes (>= 1).
    timeout : float, optional
        Client timeout in seconds (> 0), per attempt.  A request completed at
        or before ``arrival + timeout`` is ``"ok"``; otherwise its client
        gives up at exactly ``arrival + timeout``.
    on_timeout : {"continue", "drop", "deadline"}
        What the server does about it.  ``"continue"``: nothing, it finishes
        the request for nobody (Node.js: the proxy's 504 does not stop the
        handler); the outcome is ``"timed_out"`` with a completion time.
        ``"drop"``: the request leaves the server at ``arrival + timeout``,
        from the queue or from service, releasing its CPU (outcome
        ``"dropped"``).  ``"deadline"``: a FCFS server about to start a request
        at time ``f`` skips it (departure ``f``, outcome ``"dropped"``, never
        started) if ``f + service > arrival + timeout``; the server is assumed
        to know each request's CPU cost, so it never starts work that cannot
        finish in time and never wastes a core-second -- the best any
        deadline-aware server can do, and the "all of capacity" case of the
        overload analysis.  (The variant without known sizes, skipping only
        when ``f >= arrival + timeout``, wastes the work of the requests that
        start just before their deadline.)  A request skipped before its
        deadline returns an error to its client at once.  Processor sharing
        has no start to skip, so for PS ``"deadline"`` behaves as ``"drop"``.
        Ignored without a timeout.
    queue : {"fifo", "adaptive_lifo"}
        Queue order of a FCFS process.  ``"adaptive_lifo"``: when a core
        frees at time ``f``, it takes the oldest queued request if that one
        has waited at most ``queue_delay_bound``, else the newest (the queue
        is "congested": serving the newest gives it a chance to finish
        before its client gives up, while the old ones are lost anyway).
        With ``on_timeout`` ``"drop"``/``"deadline"``, queued requests whose
        deadline has passed (or that can no longer finish in time) are
        removed first, so only live requests decide the mode.  As in
        Maurer (2015), where adaptive LIFO switches on when the queue has not
        drained for a while, with a CoDel-like delay bound (Nichols and
        Jacobson 2012); here the trigger is the head-of-line delay, the
        quantity CoDel controls.  Not available for PS (no queue).
    retries : int
        After a failed attempt (timed out, or dropped/skipped by the server)
        the client retries up to ``retries`` times (>= 0); needs a timeout.
        Retry ``k`` (1, 2, ...) arrives ``retry_backoff *
        retry_backoff_factor ** (k - 1)`` seconds after the failure (the
        timeout instant, or an earlier error from a ``"deadline"`` skip),
        goes through the dispatcher again, and gets a new row
        (``attempt = k``, same ``request_id``, same CPU size), appended after
        the original requests.
    retry_backoff : float
        First back-off in seconds (>= 0).
    duration : float, optional
        Length of the arrival window in seconds.  Required with a Poisson
        rate (the arrivals fall in ``[0, duration]``); with explicit arrival
        times it must be at least the last arrival; with a rate series it
        defaults to the series length.
    seed : None, int, or numpy.random.Generator
        Anything :func:`numpy.random.default_rng` accepts.  One generator
        draws the arrival times, then the sizes, then the random dispatch of
        the original requests, then (in blocks) that of the retries, so a
        fixed seed reproduces the run.
    progress : callable, optional
        ``progress(simulated_seconds, total_seconds)``, called about once a
        second of wall time (checked every 4096 events; the first call comes
        after the first 4096 events) and once at the end with
        ``(end, end)``.  If it returns ``False`` (exactly), the run stops
        there: requests that had not arrived yet are left out, requests still
        in the servers get outcome ``"in_flight"`` (or ``"timed_out"`` if
        their client's timeout had already expired), and ``.stopped`` is
        True.  Giving ``progress`` selects the global event engine (about
        4x slower than the vectorised one-queue engines, same results).
    queue_delay_bound : float, optional
        Keyword only.  The head-of-line wait (s) above which an adaptive-LIFO
        queue serves newest first; defaults to ``0.1 * timeout``.
    retry_backoff_factor : float
        Keyword only.  Multiplier of the back-off per further retry
        (1 = constant, 2 = exponential doubling); >= 1.
    drain : bool
        Keyword only.  True (default): after the arrival window the run
        continues until every request (and retry) has left the servers.
        False: the run ends at ``duration`` and what is still in the servers
        is ``"in_flight"`` (or ``"timed_out"``).
    slices : int
        Keyword only, ``discipline="rr"``.  A request of CPU size ``x`` runs
        as ``slices`` slices of ``x / slices`` seconds (the code between two
        ``await`` points of a Node.js handler).  It joins the back of the
        process's FIFO run queue on arrival; a free core takes the request at
        the head and runs one slice; when the slice ends the request leaves
        (last slice) or, after ``slice_delay``, joins the back of the run
        queue again.  ``slices=1`` is FCFS (same table).  For large
        ``slices`` every request present gets one slice per cycle, i.e. CPU
        in proportion to its size: the limit is processor sharing only when
        all sizes are equal (deterministic service); otherwise it is a
        discriminatory processor sharing with weights proportional to the
        sizes, in which every request needs the same number of cycles.
    slice_delay : float or Service
        Keyword only, ``discipline="rr"``.  Non-CPU delay between two slices
        of a request (a zero-delay timer's ~1 ms, an I/O wait), seconds: a
        constant, or a :class:`~capacity.Service` drawn afresh for every gap.
        During the delay the request holds no core and is not in the run
        queue; other requests run.  Default 0.
    admission : {"fifo", "idle"}
        Keyword only, ``discipline="rr"``.  When an arriving request enters
        the run queue.  ``"fifo"`` (default): at once, behind everything
        queued -- a loop that reads its sockets between every two slices
        (Node.js handlers yielding with ``setImmediate``).  ``"idle"``: only
        when a free core finds the run queue empty; then every request
        waiting is admitted in arrival order.  Requests already in flight
        therefore go first, and a new request waits until the loop would
        otherwise idle -- while a request sleeps through its
        ``slice_delay`` and nothing else is runnable, or when the process
        empties.  Measured on Node.js 20 (libuv 1.46) with handlers that
        ``await`` a ``setTimeout(0)``: once two requests are in flight, each
        one's timer expires while the other's slice runs, and libuv re-runs
        the overdue timer handle without polling the sockets, so new
        connections are not read until the in-flight set drains to one
        (``validation/README.md``).  ``slices=1``: both rules are FCFS.

    Returns
    -------
    SimulationResult
        ``.requests`` (one row per request, see :class:`SimulationResult`
        for the columns), ``.per_second`` (arrivals, completions, goodput,
        timeouts, drops, in_flight, cpu_busy, latency_p50/p99/max),
        ``.discipline``, ``.servers``, ``.processes``, ``.machines``,
        ``.timeout``, ``.duration``, ``.end``, ``.stopped``, and the methods
        :meth:`~SimulationResult.mean_response`,
        :meth:`~SimulationResult.response_quantile`,
        :meth:`~SimulationResult.confidence_interval` (batch means),
        :meth:`~SimulationResult.utilization`,
        :meth:`~SimulationResult.mean_number`.

    Notes
    -----
    Exact event-driven simulation, no time step.  Every request ends with
    exactly one outcome.

    * FCFS, one server: Lindley's recursion
      ``W_n = max(0, W_{n-1} + S_{n-1} - (A_n - A_{n-1}))``, solved in
      vectorised form as a running minimum of partial sums, restarted every
      1024 requests so that rounding does not grow with the run length
      (measured over 10^6 M/M/1 requests, mean service 1 s: at most
      6e-13 s from the plain loop at rho = 0.5 and 0.9, against 6e-10 s for
      one running sum over the whole run).
    * FCFS, ``c`` servers: requests start in queue order on the earliest
      free core (a heap), O(log c) per request.
    * PS, ``c`` servers: all requests present share the same rate
      ``r(n) = min(1, c/n)``, so a global virtual clock ``dV/dt = r(n)``
      measures everyone's attained service; a request arriving at virtual
      time ``V_a`` with size ``x`` leaves when ``V = V_a + x``.  A heap of
      those finish times makes each event O(log n); a drop at the timeout
      is a lazy deletion from it.  Simultaneous arrivals are handled
      exactly: 30 requests of 1 s arriving together on one core all leave
      at 30 s (FCFS: at 1, 2, ..., 30 s).
    * Round robin (``"rr"``): one loop over the slices (about ``slices``
      events per request); one core without delay follows the core's clock
      alone, otherwise heaps of slice ends and wake-ups.  At equal times
      slice ends come first, then wake-ups, then arrivals, then free cores
      pick from the run queue.  With ``on_timeout`` ``"drop"`` (and
      ``"deadline"``, which behaves as ``"drop"``: the finish time of a
      sliced request is not known when it starts) the request leaves at its
      deadline from the run queue, from a delay, or from a core (the slice
      is cut short).  Adaptive LIFO is not available (FCFS only).
      ``start`` is the start of the first slice.
    * Several processes: with round-robin or random dispatch and a server
      that ignores timeouts, each process is simulated on its own with the
      engines above (dispatch does not depend on the state).  Least
      connections, retries, or ``progress`` use one event loop over all
      processes with a heap of each process's next event, so the open
      connection counts are exact at every arrival.  At equal times,
      completions come before deadlines (``completion == arrival +
      timeout`` is ``"ok"``), and both before arrivals.

    The servers start empty, so early requests see less congestion than in
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

    B. Maurer, "Fail at scale", ACM Queue 13(8) (2015), section
    "Adaptive LIFO" and "Controlled delay".

    K. Nichols and V. Jacobson, "Controlling queue delay", ACM Queue 10(5)
    (2012).

    L. Kleinrock, *Queueing Systems, Volume 2* (1976), sec. 4.4 (round
    robin with a finite quantum and its processor-sharing limit).

    Examples
    --------
    Two 2-second requests in two slices each (event-loop round robin):

    >>> from capacity import Service
    >>> from capacity.sim import simulate
    >>> rr = simulate([0.0, 0.5], Service.deterministic(2.0), discipline="rr", slices=2)
    >>> rr.requests["completion"].tolist()
    [3.0, 4.0]

    Thirty 1-second requests arriving together on one core:

    >>> from capacity import Service
    >>> from capacity.sim import simulate
    >>> ps = simulate([0.0] * 30, Service.deterministic(1.0), discipline="ps")
    >>> sorted(set(ps.requests["completion"]))
    [30.0]
    >>> fcfs = simulate([0.0] * 30, Service.deterministic(1.0))
    >>> fcfs.requests["completion"].tolist()[:3]
    [1.0, 2.0, 3.0]

    With a 10 s client timeout, PS answers nobody in time, FCFS ten:

    >>> ps = simulate([0.0] * 30, Service.deterministic(1.0), discipline="ps", timeout=10)
    >>> ps.requests["outcome"].value_counts()["timed_out"]
    np.int64(30)
    >>> fcfs = simulate([0.0] * 30, Service.deterministic(1.0), timeout=10, on_timeout="drop")
    >>> fcfs.requests["outcome"].value_counts().to_dict()
    {'dropped': 20, 'ok': 10, 'timed_out': 0, 'in_flight': 0}

    An M/M/1 queue at utilisation 0.5 (theory: mean response 2 s):

    >>> run = simulate(0.5, 1.0, duration=200_000, seed=1)
    >>> ci = run.confidence_interval(warmup=100)
    >>> bool(ci.low < 2.0 < ci.high), round(run.utilization(), 2)
    (True, 0.5)
    """
    discipline = check_choice(discipline, "discipline", ("fcfs", "ps", "rr"))
    slices = check_count(slices, "slices", 1)
    admission = check_choice(admission, "admission", ADMISSIONS)
    if discipline != "rr" and admission != "fifo":
        raise ValueError(f"admission applies to discipline='rr' only, got discipline={discipline!r} with "
                         f"admission={admission!r}")
    delay_service = None
    if isinstance(slice_delay, Service):
        if slice_delay.shape != ():
            raise ValueError(f"slice_delay must have scalar parameters for a simulation, got parameter "
                             f"shape {slice_delay.shape}")
        delay_service = slice_delay
        slice_delay = float(slice_delay.mean)
    else:
        sd = check_nonnegative(slice_delay, "slice_delay")
        if sd.ndim != 0 or not np.isfinite(sd):
            raise ValueError(f"slice_delay must be one finite number of seconds >= 0 or a Service, "
                             f"got {slice_delay!r}")
        slice_delay = float(sd)
    if discipline != "rr" and (slices != 1 or slice_delay != 0.0 or delay_service is not None):
        raise ValueError(f"slices and slice_delay need discipline='rr', got discipline={discipline!r} "
                         f"with slices={slices!r}, slice_delay={slice_delay!r}")
    c_arr = check_servers(servers, "servers")
    if c_arr.ndim != 0:
        raise ValueError(f"servers must be a single integer, got {servers!r}")
    processes = check_count(processes, "processes", 1)
    machines = check_count(machines, "machines", 1)
    dispatch = check_choice(dispatch, "dispatch", DISPATCH)
    on_timeout = check_choice(on_timeout, "on_timeout", ON_TIMEOUT)
    queue = check_choice(queue, "queue", QUEUES)
    if timeout is not None:
        timeout = float(check_positive(timeout, "timeout"))
    retries = check_count(retries, "retries", 0)
    if retries and timeout is None:
        raise ValueError(f"retries needs a timeout (retries happen after a timeout), got retries={retries!r} "
                         f"and timeout=None")
    retry_backoff = float(check_nonnegative(retry_backoff, "retry_backoff"))
    retry_backoff_factor = float(check_positive(retry_backoff_factor, "retry_backoff_factor"))
    if retry_backoff_factor < 1:
        raise ValueError(f"retry_backoff_factor must be >= 1, got {retry_backoff_factor!r}")
    if queue == "adaptive_lifo":
        if discipline != "fcfs":
            raise ValueError(f"queue='adaptive_lifo' needs discipline='fcfs' (a PS process has no "
                             f"queue), got discipline={discipline!r}")
        if queue_delay_bound is None:
            if timeout is None:
                raise ValueError("queue_delay_bound must be given for queue='adaptive_lifo' without a "
                                 "timeout (its default is 0.1 * timeout), got None")
            queue_delay_bound = 0.1 * timeout
        queue_delay_bound = float(check_nonnegative(queue_delay_bound, "queue_delay_bound"))
    elif queue_delay_bound is not None:
        queue_delay_bound = float(check_nonnegative(queue_delay_bound, "queue_delay_bound"))
    if progress is not None and not callable(progress):
        raise ValueError(f"progress must be a callable or None, got {progress!r}")
    if not isinstance(drain, (bool, np.bool_)):
        raise ValueError(f"drain must be True or False, got {drain!r}")
    svc = as_service(service)
    if svc.shape != ():
        raise ValueError(f"service must have scalar parameters for a simulation, got parameter shape "
                         f"{svc.shape}")
    if not drain and duration is None and np.ndim(arrivals) != 0 and not isinstance(arrivals, pd.Series):
        raise ValueError("duration must be given with drain=False (the run ends at duration), got None")
    rng = np.random.default_rng(seed)
    origin = None
    if isinstance(arrivals, pd.Series):
        times, horizon, origin = _series_arrivals(arrivals, duration, rng)
    else:
        times, horizon = _arrival_times(arrivals, duration, rng)
    sizes = np.asarray(svc.sample(times.size, rng), dtype=float).reshape(-1)
    options = _Options(discipline=discipline, servers=int(c_arr), processes=processes, machines=machines,
                       dispatch=dispatch, timeout=timeout, on_timeout=on_timeout, queue=queue,
                       queue_delay_bound=queue_delay_bound, retries=retries, retry_backoff=retry_backoff,
                       retry_backoff_factor=retry_backoff_factor, drain=bool(drain), progress=progress,
                       slices=slices, slice_delay=slice_delay, delay_service=delay_service, admission=admission)
    return _run(times, sizes, discipline, int(c_arr), horizon, options, rng, origin)
