"""The vectorised one-queue engines: one worker process, arrivals and sizes known in advance.

Each engine takes the arrival times and CPU sizes (seconds) of the requests one process
receives and returns their start, completion and response times (:class:`_Trace`), exactly:

* :func:`_fcfs_one` -- one FCFS core, Lindley's recursion solved as a running minimum of
  partial sums, blocked so that rounding does not grow with the run;
* :func:`_fcfs_many` -- ``c`` FCFS cores, a heap of the times the cores become free;
* :func:`_ps` -- processor sharing on ``c`` cores, a heap of finish virtual times;
* :func:`_rr` (:func:`_rr_one`, :func:`_rr_many`) -- event-loop round robin over equal slices,
  which also returns the busy-core record (:class:`_Busy`).

They serve the runs where dispatch does not depend on the state and the server never reacts
to a timeout (``capacity.sim._drivers._run_static``); the event objects of
``capacity.sim._processes`` cover the rest with the same arithmetic.

References
----------
D. V. Lindley, "The theory of queues with a single server", Proc. Cambridge Philos. Soc. 48
(1952) 277-289.

L. Kleinrock, *Queueing Systems, Volume 2: Computer Applications*, Wiley (1976), ch. 4
(processor sharing) and sec. 4.4 (round robin).
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Callable, NamedTuple

import numpy as np

_INF = math.inf
_NAN = math.nan


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


def _lindley_waits(arrivals: np.ndarray, sizes: np.ndarray, block: int = _LINDLEY_BLOCK,
                   w0: float = 0.0, u0: float = 0.0) -> np.ndarray:
    """Waiting times in a FCFS single-server queue (Lindley's recursion).

    ``W_0 = 0`` and ``W_n = max(0, W_{n-1} + S_{n-1} - (A_n - A_{n-1}))``.
    With ``X_n = sum_{k<=n} (S_{k-1} - (A_k - A_{k-1}))`` the solution is
    ``W_n = X_n - min(-W_0, min_{k<=n} X_k)`` (a running minimum).  The sum
    is restarted at every block of ``block`` requests, carrying the wait of
    the block's last request into the next block's ``W_0``; only the carry
    (one value per block) is a Python loop.  ``w0`` and ``u0`` continue a run
    cut into pieces: the wait of the request before the first one, and the
    first increment ``S_prev - (A_0 - A_prev)``.
    """
    n = arrivals.size
    if n == 0:
        return np.zeros(0)
    u = np.empty(n)
    u[0] = u0
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
    w = w0
    for b in range(n_blocks):
        w_in[b] = w
        xl = x_last[b]
        w = max(w + xl, xl - m_last[b])
    waits = x - np.minimum(-w_in[:, None], run_min)
    return waits.reshape(-1)[:n]


# Requests per call of _lindley_waits in _fcfs_one: bounds its temporaries (a few arrays of
# this length) whatever the length of the run; a multiple of _LINDLEY_BLOCK, so the blocks
# and the carries are the same as in one call over the whole run.
_LINDLEY_CHUNK = 256 * _LINDLEY_BLOCK


def _fcfs_one(arrivals: np.ndarray, sizes: np.ndarray) -> _Trace:
    n = arrivals.size
    waits = np.empty(n)
    w = 0.0  # the wait of the last request of the previous chunk
    for lo in range(0, n, _LINDLEY_CHUNK):
        # Restart the recursion at the chunk's first request: W = max(0, W_prev + S_prev - gap).
        a, x = arrivals[lo:lo + _LINDLEY_CHUNK], sizes[lo:lo + _LINDLEY_CHUNK]
        # The chunk's first increment S_prev - gap, as one call over the whole run computes it.
        u0 = float(np.subtract(sizes[lo - 1], arrivals[lo] - arrivals[lo - 1])) if lo else 0.0
        waits[lo:lo + a.size] = _lindley_waits(a, x, w0=w, u0=u0)
        w = float(waits[lo + a.size - 1])
    start = arrivals + waits
    response = np.add(waits, sizes, out=waits)  # the waits are not needed any more
    return _Trace(start, start + sizes, response)


def _fcfs_many(arrivals: np.ndarray, sizes: np.ndarray, servers: int) -> _Trace:
    # FCFS starts requests in arrival order, each on the core that frees up
    # first: a heap of core free times, O(log c) per request.
    # Memoryviews read and write the arrays' own memory as Python floats: no list of n
    # float objects (32 bytes each) is ever built.
    free = [0.0] * servers
    replace = heapq.heapreplace
    start = np.empty(arrivals.size)
    out = memoryview(start)
    for i, (a, x) in enumerate(zip(_floats(arrivals), _floats(sizes))):
        f = free[0]
        s = a if a > f else f
        out[i] = s
        replace(free, s + x)
    return _Trace(start, start + sizes, (start - arrivals) + sizes)


def _floats(values: np.ndarray) -> memoryview:
    """A float64 array's memory, read element by element as Python floats (no copy)."""
    return memoryview(np.ascontiguousarray(values, dtype=float))


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
    job): comparing floats is cheaper than comparing ``(time, id)``
    tuples, which matters in overload, when the crowd (and the heap) grows
    without bound (``benchmarks/bench_sim.py`` measures the engines).  Jobs with equal finish virtual times
    leave at the same instant, so which of them the dict hands out first
    does not change any completion time.
    """
    n_req = arrivals.size
    c = servers
    done = np.zeros(n_req)
    completion = memoryview(done)  # written one element at a time, no list of floats
    heap: list[float] = []
    owner: dict[float, int] = {}  # finish virtual time -> job
    twins: dict[float, list[int]] = {}  # further jobs with the same finish virtual time (rare)
    push, pop = heapq.heappush, heapq.heappop
    t = 0.0  # time of the last event
    v = 0.0  # virtual time at t
    arr = _floats(arrivals)
    size = _floats(sizes)
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
    arr = _floats(arrivals)
    quantum = _floats(sizes / k if k > 1 else sizes)
    st = np.full(n, np.nan)
    done = np.zeros(n)
    start, completion = memoryview(st), memoryview(done)  # written in place, no lists of floats
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
    # One slice: the FCFS engines' arithmetic (wait + size), same floats.
    resp = (st - arrivals) + sizes if k == 1 else done - arrivals
    return _Trace(st, done, resp), _Busy(on, off)


def _rr_many(arrivals: np.ndarray, sizes: np.ndarray, c: int, k: int, delay: float = 0.0,
             draw: Callable[[], float] | None = None, gated: bool = False) -> tuple[_Trace, _Busy]:
    n = arrivals.size
    arr = _floats(arrivals)
    quantum = _floats(sizes / k if k > 1 else sizes)
    st = np.full(n, np.nan)
    done = np.zeros(n)
    start, completion = memoryview(st), memoryview(done)  # written in place, no lists of floats
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
    # One slice: the FCFS engines' arithmetic (wait + size), same floats.
    resp = (st - arrivals) + sizes if k == 1 else done - arrivals
    return _Trace(st, done, resp), _Busy(on, off)
