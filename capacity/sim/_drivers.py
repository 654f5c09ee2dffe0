"""The three ways to run a simulation, and the table they all produce.

:func:`_run` picks one from the options (they give the same answer where they overlap; the
tests compare them):

1. :func:`_run_static` -- the vectorised one-queue engines of ``capacity.sim._engines``, once
   per process, when dispatch does not depend on the state (round robin, random) and the
   server never reacts to a timeout;
2. :func:`_run_per_process` -- the event objects of ``capacity.sim._processes``, one process
   after the other, when the server drops or skips requests or uses adaptive LIFO but
   dispatch is still state-free and nobody retries;
3. :func:`_run_global` -- one event loop over every process in time order: least-connections
   dispatch needs every process's open connections at each arrival, retries are new arrivals
   created by timeouts, and ``progress`` needs a clock that can stop anywhere.

Each ends in the per-request table (:func:`_assemble`) of a
:class:`~capacity.sim.SimulationResult`.
"""
from __future__ import annotations

import heapq
import time
from typing import Any, Callable

import numpy as np
import pandas as pd

from ._engines import _ENGINES, _NAN, _rr, _Trace
from ._options import _Options
from ._processes import _INF, _Book, _FCFSProcess, _PSProcess, _RRProcess, _typed
from ._storage import _small_int, _storage
from ._summary import _Columns, _summarise
from .result import OUTCOMES, SimulationResult


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
    book.process = _typed("i", assign)
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


class _Progress:
    """The caller's ``progress(now, total)``, called at most once per
    :data:`_PROGRESS_INTERVAL` of wall time; :meth:`stops` says whether it
    asked the run to stop (it returned ``False``, exactly)."""

    def __init__(self, progress: Callable[[float, float], Any], total: float):
        self.progress, self.total = progress, total
        self.last = -_INF

    def stops(self, now: float) -> bool:
        wall = time.perf_counter()
        if wall - self.last < _PROGRESS_INTERVAL:
            return False
        self.last = wall
        return self.progress(now, self.total) is False


def _run_global(book: _Book, assign: np.ndarray | None, opts: _Options, t_end: float, total: float,
                rng: np.random.Generator) -> tuple[int, float, bool, list[Any]]:
    """Engine 3: one event loop over every process, in time order.

    Events at equal times: process events (completions, deadlines) first,
    then retries, then original arrivals.  Returns the number of original
    requests dispatched, the time reached and whether ``progress`` stopped
    the run, and the process objects.
    """
    procs = _make_processes(book, opts, rng)
    if opts.progress is None and not book.retries:
        return _run_global_arrivals(book, assign, opts, t_end, procs)
    if opts.n_proc == 1:
        return _run_global_one(book, opts, t_end, total, procs[0])
    return _run_global_heap(book, assign, opts, t_end, total, rng, procs)


def _run_global_arrivals(book: _Book, assign: np.ndarray | None, opts: _Options, t_end: float,
                         procs: list[Any]) -> tuple[int, float, bool, list[Any]]:
    """Engine 3 without retries or ``progress``: processes interact only
    through the dispatcher, which looks at them at arrival instants alone.
    Bring the processes with an event up to each arrival (completions and
    deadlines first at equal times), then dispatch: no heap of processes is
    needed, and each process runs on its own clock as in engine 2."""
    n_proc, machines, processes = opts.n_proc, opts.machines, opts.processes
    n0 = len(book.arrival)
    arrival0, proc_of, open_ = book.arrival, book.process, book.open  # read below n0 only
    dispatch = opts.dispatch if n_proc > 1 else "single"
    pre = assign.tolist() if assign is not None else None
    nxt = [_INF] * n_proc  # each process's next event
    advs = [p.advance for p in procs]
    arrs = [p.arrive for p in procs]
    for p in procs:
        if isinstance(p, _PSProcess):
            p.hold = True  # the clock moves at the process's own events and arrivals only
    gs = range(n_proc)
    rr = 0
    j = 0
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


def _run_global_heap(book: _Book, assign: np.ndarray | None, opts: _Options, t_end: float, total: float,
                     rng: np.random.Generator, procs: list[Any]) -> tuple[int, float, bool, list[Any]]:
    """Engine 3 with several processes and retries or ``progress``: a heap of
    each process's next event, a heap of retries, the original arrivals."""
    n_proc, machines, processes = opts.n_proc, opts.machines, opts.processes
    n0 = len(book.arrival)
    # The book grows with retries; the loop reads original arrivals (below n0) only.
    arrival0, proc_of, open_, outbox = book.arrival, book.process, book.open, book.outbox
    dispatch = opts.dispatch
    pre = assign.tolist() if assign is not None else None
    rand_block: list[int] = []
    push, pop = heapq.heappush, heapq.heappop
    nxt = [_INF] * n_proc
    ph: list[tuple[float, int]] = []  # (next event time, process)
    rh: list[tuple[float, int, int]] = []  # (retry arrival, sequence, failed request)
    seq = rr = j = events = 0
    now = 0.0
    progress = _Progress(opts.progress, total) if opts.progress is not None else None
    stopped = False
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
            if dispatch == "least_connections":
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
        if progress is not None and not events % _PROGRESS_CHECK_EVERY and progress.stops(now):
            stopped = True
            break
    return _finish_global(j, now, stopped, t_end, procs)


def _run_global_one(book: _Book, opts: _Options, t_end: float, total: float,
                    proc: Any) -> tuple[int, float, bool, list[Any]]:
    """Engine 3 for one process: the loop of :func:`_run_global_heap` without the
    heap of processes (same events in the same order, same arithmetic)."""
    n0 = len(book.arrival)
    arrival0 = book.arrival  # read below n0 only (retries are appended after)
    proc_of = book.process
    outbox = book.outbox
    add_retry = book.add_retry
    advance, arrive = proc.advance, proc.arrive
    push, pop = heapq.heappush, heapq.heappop
    rh: list[tuple[float, int, int]] = []  # (retry arrival, sequence, failed request)
    seq = j = events = 0
    now = 0.0
    progress = _Progress(opts.progress, total) if opts.progress is not None else None
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
            if not events % _PROGRESS_CHECK_EVERY and progress.stops(now):
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


def _book_columns(book: _Book, n_orig: int, n_total_orig: int, opts: _Options) -> _Columns:
    """The per-request columns from the records of engines 2 and 3 (numpy views of the
    book, copied only when a stopped run leaves out requests that never arrived)."""
    full = n_orig == n_total_orig
    keep = None if full else np.r_[np.arange(n_orig), np.arange(n_total_orig, len(book.arrival))]

    def col(name: str) -> np.ndarray:
        values = book.column(name)
        return values if keep is None else values[keep]

    arrival, completion = col("arrival"), col("completion")
    start = np.full(arrival.size, np.nan) if opts.discipline == "ps" else col("start")
    return _columns(arrival, start, completion, completion - arrival, col("size"), col("attempt"),
                    col("request_id"), col("process"), col("departure"), col("cpu"), col("deadline"), opts)


def _columns(arrival: np.ndarray, start: np.ndarray, completion: np.ndarray, response: np.ndarray,
             service: np.ndarray, attempt: np.ndarray, request_id: np.ndarray, process: np.ndarray,
             departure: np.ndarray, cpu: np.ndarray, deadline: np.ndarray, opts: _Options) -> _Columns:
    """The columns in their stored dtypes (outcome codes still to fill)."""
    n = arrival.size
    return _Columns(arrival, start, completion, response, service, np.zeros(n, np.int8),
                    attempt.astype(_small_int(opts.retries), copy=False),
                    request_id.astype(_small_int(n), copy=False),
                    process.astype(_small_int(opts.n_proc), copy=False), departure, cpu, deadline)


def _outcome_codes(cols: _Columns, end: float) -> None:
    """Fill ``cols.code`` (in place): the index in OUTCOMES of each request's outcome."""
    code = cols.code
    done = ~np.isnan(cols.completion)
    left = ~np.isnan(cols.departure)
    code[:] = 3  # in_flight
    code[~left & (cols.deadline <= end)] = 1  # still running, client gone
    code[left & ~done] = 2  # dropped
    code[done] = np.where(cols.completion[done] <= cols.deadline[done], 0, 1)


def _assemble(cols: _Columns, opts: _Options) -> pd.DataFrame:
    """The per-request table, its columns taken as they are (no copy)."""
    return pd.DataFrame({
        "arrival": cols.arrival,
        "start": cols.start,
        "completion": cols.completion,
        "response": cols.response,
        "service": cols.service,
        "outcome": pd.Categorical.from_codes(cols.code, categories=list(OUTCOMES)),
        "attempt": cols.attempt,
        "request_id": cols.request_id,
        "process": cols.process,
        "machine": cols.process // cols.process.dtype.type(opts.processes),
        "departure": cols.departure,
        "cpu": cols.cpu,
        "deadline": cols.deadline,
    }, copy=False)


def _run(arrivals: np.ndarray, sizes: np.ndarray, discipline: str, servers: int,
         horizon: float | None, options: _Options | None = None,
         rng: np.random.Generator | None = None, origin: Any = None) -> SimulationResult:
    """Simulate given arrival times and per-request sizes (already validated)."""
    opts = options if options is not None else _Options(discipline=discipline, servers=servers)
    rng = rng if rng is not None else np.random.default_rng(0)
    n = arrivals.size
    # Least connections looks at the processes as it goes (engine 3); with one process there
    # is nothing to choose, and every engine can run it.
    state_free = opts.dispatch != "least_connections" or opts.n_proc == 1
    timeout = opts.timeout
    stopped = False
    use_global = (opts.dispatch == "least_connections" and opts.n_proc > 1) or \
        (opts.retries > 0 and timeout is not None) or opts.progress is not None or opts.engine == "global"
    static = not use_global and not opts.server_reacts and opts.drain and opts.engine != "objects"
    keep = _storage(opts, n, static)
    assign = _static_assignment(n, opts, rng) if state_free else None
    busy: list | None = [] if opts.discipline == "rr" else None
    if static:
        trace = _run_static(arrivals, sizes, assign, opts, busy, rng)
        if timeout is not None:
            deadline = arrivals + timeout
        else:  # a summary reads it without storing n copies of inf
            deadline = np.broadcast_to(np.inf, (n,)) if keep == "summary" else np.full(n, np.inf)
        end = max(horizon or 0.0, float(trace.completion.max()) if n else 0.0)
        # departure is completion and cpu is service here: shared (pandas copies on write).
        cols = _columns(arrivals, trace.start, trace.completion, trace.response, sizes,
                        np.zeros(n, np.int8), np.arange(n, dtype=_small_int(n)), assign, trace.completion,
                        sizes, deadline, opts)
        del trace, assign
    else:
        t_end = _INF if opts.drain else float(horizon if horizon is not None else
                                                (arrivals[-1] if n else 0.0))
        book = _Book(arrivals, sizes, timeout, opts.n_proc, opts.retries if timeout is not None else 0,
                     opts.retry_backoff, opts.retry_backoff_factor)
        if use_global:
            total = float(horizon) if horizon is not None else (float(arrivals[-1]) if n else 0.0)
            n_orig, end, stopped, procs = _run_global(book, assign, opts, t_end, total, rng)
        else:
            procs = _run_per_process(book, assign, opts, t_end, rng)
            n_orig, end = n, t_end
        if busy is not None:
            busy.extend((g, p.busy()) for g, p in enumerate(procs))
        del procs
        if end == _INF:
            dep = book.column("departure")
            end = max(horizon or 0.0, float(np.nanmax(dep)) if dep.size else 0.0)
        cols = _book_columns(book, n_orig, n, opts)
        del book
    _outcome_codes(cols, end)
    if horizon is None:
        done = cols.completion
        horizon = float(np.nanmax(done)) if n and not np.isnan(done).all() else 0.0
    if opts.progress is not None and not stopped:
        opts.progress(end, end)
    core_busy = _busy_arrays(busy) if busy is not None else None
    table, digest = None, None
    if keep == "summary":
        digest = _summarise(cols, opts.discipline, opts.servers, opts.servers * opts.n_proc, float(horizon),
                            float(end), core_busy)
    else:
        table = _assemble(cols, opts)
    del cols
    return SimulationResult(table, opts.discipline, opts.servers, float(horizon), opts.processes,
                            opts.machines, timeout, float(end), stopped, origin, opts.slices,
                            opts.slice_delay if opts.delay_service is None else opts.delay_service,
                            core_busy, opts.admission, digest, opts.max_memory)


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
