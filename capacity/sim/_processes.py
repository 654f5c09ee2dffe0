"""Per-process event objects: one worker process that reacts to timeouts, one event at a time.

Where the vectorised engines (``capacity.sim._engines``) cannot be used -- the server drops
or skips requests, the queue is adaptive LIFO, the dispatcher looks at open connections,
clients retry -- each worker process is an object with the same small interface:

* ``arrive(a, i)`` -- request ``i`` arrives at ``a``; returns the time of its next event;
* ``advance(T)`` -- process every event up to ``T``; returns the time of the next one (it
  returns early after a timeout that schedules a retry, so the caller can queue it);
* ``finalize(T)`` -- record the CPU received so far by the requests still present.

:class:`_PSProcess` (processor sharing, abandoning requests at their deadline or not),
:class:`_FCFSProcess` (FCFS with drop, deadline and adaptive LIFO) and
:class:`_RRProcess` (event-loop round robin) write every request's times into one shared
:class:`_Book`, the per-request records of the run.
"""
from __future__ import annotations

import array
import bisect
import heapq
import math
from collections import deque
from typing import Any, Callable

import numpy as np

from ._engines import _Busy

_INF = math.inf
_NAN = math.nan
# Request states in _Book.state.
_WAITING, _SERVING, _DONE, _DROPPED, _ABORTING = 0, 1, 2, 3, 4


def _typed(code: str, values: np.ndarray) -> array.array:
    """``values`` as an :class:`array.array` of type ``code`` (one copy, no Python objects)."""
    out = array.array(code)
    out.frombytes(memoryview(np.ascontiguousarray(values, dtype=np.dtype(code))).cast("B"))
    return out


class _Book:
    """Per-request records, indexed by request id.

    Typed :mod:`array` columns (8 bytes a time, 4 an integer) rather than
    lists of Python floats (about 32 bytes an element): the event loops touch
    one element at a time, where an ``array.array`` reads and writes almost as
    fast as a list (numpy scalar access is several times slower), and the run
    needs a quarter of the memory (``benchmarks/bench_sim_memory.py``).  The
    columns grow when retries add requests; :meth:`column` hands one to numpy
    without a copy once the run is over.
    """

    def __init__(self, arrival: np.ndarray, size: np.ndarray, timeout: float | None, n_proc: int,
                 retries: int, backoff: float, factor: float):
        n = arrival.size
        self.arrival = _typed("d", arrival)
        self.size = _typed("d", size)
        self.deadline = _typed("d", arrival + timeout if timeout is not None else np.full(n, _INF))
        self.start = _typed("d", np.full(n, _NAN))
        self.completion = _typed("d", np.full(n, _NAN))
        self.departure = _typed("d", np.full(n, _NAN))
        self.cpu = _typed("d", np.zeros(n))
        self.state = bytearray(n)
        self.client_done = bytearray(n)
        self.attempt = _typed("i", np.zeros(n, dtype=np.int32))
        self.request_id = _typed("q", np.arange(n, dtype=np.int64))
        self.process = _typed("i", np.full(n, -1, dtype=np.int32))
        self.timeout = timeout
        self.open = [0] * n_proc  # connections the dispatcher sees open, per process
        self.retries = retries
        self.backoff = backoff
        self.factor = factor
        self.outbox: list[tuple[float, int]] = []  # (retry arrival time, failed request id)

    def column(self, name: str) -> np.ndarray:
        """Column ``name`` as a numpy array sharing the book's memory (the book must not grow
        any more)."""
        values = getattr(self, name)
        return np.frombuffer(values, dtype=values.typecode) if len(values) else \
            np.zeros(0, dtype=values.typecode)

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

    Same virtual-time scheme as :func:`~capacity.sim._engines._ps`:
    ``dV/dt = min(1, c/n)``, a heap of finish virtual times, ``V`` reset
    whenever the process empties.  One event loop serves both server
    behaviours; they differ only in what the heap holds:

    * the server ignores timeouts (``abandon`` False): its crowd grows
      without bound in overload, so the heap holds bare floats, cheaper to
      sift than ``(time, id)`` tuples, and ``owner`` maps a finish
      virtual time to its request (``twins`` holds further requests with the
      same one: they leave at the same instant, so which of them is handed
      out first changes nothing);
    * ``abandon``: the request is removed at its deadline, so the heap holds
      ``(finish virtual time, id)`` and a dropped request's entry is deleted
      lazily, when it reaches the top (``fin`` keeps each present request's
      finish virtual time, for the CPU it received).

    With ``watch`` the process keeps its client deadlines so that timeouts
    happen as events (connection counts, retries).  Deadlines are
    ``arrival + timeout`` and requests arrive in time order, so they are
    kept in a sorted deque (O(1) per request) rather than a heap.
    """

    __slots__ = ("g", "c", "book", "abandon", "watch", "t", "v", "n", "heap", "owner", "twins", "dl", "fin",
                 "hold")

    def __init__(self, g: int, c: int, book: _Book, abandon: bool, watch: bool):
        self.g, self.c, self.book = g, c, book
        self.abandon, self.watch = abandon, watch or abandon
        self.t = 0.0
        self.v = 0.0
        self.n = 0
        # Finish virtual times: (time, id) with abandon, bare floats without.
        self.heap: list[Any] = []
        self.owner: dict[float, int] = {}  # not abandon: finish virtual time -> request
        self.twins: dict[float, list[int]] = {}  # not abandon: further requests with that time
        self.dl: deque[tuple[float, int]] = deque()  # (client deadline, id), sorted
        self.fin: dict[int, float] = {}  # abandon: request present -> its finish virtual time
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
        owner, twins = self.owner, self.twins
        dlh = self.dl if self.watch else None
        abandon = self.abandon
        book = self.book
        state, cdone, outbox = book.state, book.client_done, book.outbox
        departure, completion, cpu, size = book.departure, book.completion, book.cpu, book.size
        open_, g, retries = book.open, self.g, book.retries
        pop = heapq.heappop
        popleft = dlh.popleft if dlh is not None else None
        i = -1
        while True:
            if abandon:
                while state[heap[0][1]] == _DROPPED:
                    pop(heap)
                fv, i = heap[0]
            else:
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
            if abandon:
                del self.fin[i]
            elif twins and fv in twins:
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
        if self.abandon:
            self.fin[i] = fv
            heapq.heappush(heap, (fv, i))
            state = book.state
            while state[heap[0][1]] == _DROPPED:
                heapq.heappop(heap)
            first = heap[0][0]
        else:
            owner = self.owner
            if fv in owner:
                self.twins.setdefault(fv, []).append(i)
            else:
                owner[fv] = i
            heapq.heappush(heap, fv)
            first = heap[0]
        n += 1
        self.n = n
        book.state[i] = _SERVING
        book.open[self.g] += 1
        tc = a + (first - v) if n <= c else a + (first - v) * n / c
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
        if self.abandon:
            present = [(fv, i) for i, fv in self.fin.items()]
        else:
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
