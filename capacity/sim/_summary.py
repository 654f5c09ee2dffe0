"""A simulation's statistics without its per-request table: what ``keep="summary"`` stores.

:func:`_summarise` reads the per-request columns of a finished run once, in blocks of
:data:`_BLOCK` requests, and keeps only

* the per-second table (:func:`_per_second`), exact: the same counts, in-flight numbers,
  busy-core areas and per-second latency quantiles as the full result computes;
* the busy-core and number-in-system integrals over the horizon (utilisation, mean number),
  exact;
* the outcome counts and, per *segment* of arrival time (``segment`` seconds wide, at most
  :data:`_SEGMENTS` segments), the count and sum of the response times (and of the waits for
  FCFS) and a log-binned histogram of them (:class:`_Stream`).

Means are exact; quantiles come from the histogram, whose bins are :data:`_RATIO` wide in
ratio: the value reported for a quantile is within :data:`RELATIVE_RESOLUTION` (0.05 %) of the
exact empirical quantile (times under 1 ns count as 0).  A ``warmup`` is applied at segment
boundaries (rounded up to a multiple of ``segment``), and batch means cut the batches at
segment boundaries (nearly equal counts).

References
----------
A. M. Law, *Simulation Modeling and Analysis*, 5th ed., McGraw-Hill (2015), sec. 9.5.3 (batch
means).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

#: Requests read at a time when summarising (bounds the temporary arrays).
_BLOCK = 1 << 18
#: At most this many arrival-time segments (the warm-up and batch resolution).
_SEGMENTS = 1024
#: At most this many cells (segments x bins) in one histogram: 64 MB of 32-bit counts.
_CELLS = 1 << 24
#: Histogram bins are [x0 r^(j-1), x0 r^j) with r = _RATIO; bin 0 holds the times below x0.
_RATIO = 1.001
_FLOOR = 1e-9
_BINS = 50_000  # x0 r^_BINS is about 5e12 s: every finite time of a run fits
#: Largest relative distance between a reported quantile and the exact one: a bin's
#: geometric midpoint is within sqrt(r) - 1 of every value in the bin, and the linear
#: interpolation between two order statistics keeps that bound.
RELATIVE_RESOLUTION = math.sqrt(_RATIO) - 1.0


#: The outcomes of a request, in the order of the ``outcome`` categorical.
OUTCOMES = ("ok", "timed_out", "dropped", "in_flight")


def _rr_busy_path(core_busy: tuple, end: float) -> tuple[np.ndarray, np.ndarray]:
    """Busy cores as a step function from round robin's record (+1 when a core leaves
    idleness, -1 when it goes idle; a NaN time is still busy at ``end``)."""
    times, steps, _ = core_busy
    times = np.where(np.isnan(times), end, times)
    order = np.argsort(times, kind="stable")
    return times[order], np.cumsum(steps[order])


def _integral(T: np.ndarray, B: np.ndarray, x: np.ndarray) -> np.ndarray:
    """integral_0^x B(u) du for the step function (T, B) (B = 0 before T[0])."""
    if T.size == 0:
        return np.zeros_like(x, dtype=float)
    area = np.concatenate([[0.0], np.cumsum(np.diff(T) * B[:-1])])
    j = np.searchsorted(T, x, side="right") - 1
    jj = np.clip(j, 0, None)
    return np.where(j < 0, 0.0, area[jj] + B[jj] * (x - T[jj]))


class _Columns(NamedTuple):
    """The per-request columns of a run (see :class:`~capacity.sim.SimulationResult`)."""

    arrival: np.ndarray
    start: np.ndarray
    completion: np.ndarray
    response: np.ndarray
    service: np.ndarray
    code: np.ndarray  # outcome codes, int8, in the order of OUTCOMES
    attempt: np.ndarray
    request_id: np.ndarray
    process: np.ndarray
    departure: np.ndarray
    cpu: np.ndarray
    deadline: np.ndarray


def _bins(x: np.ndarray) -> np.ndarray:
    """Histogram bin of each time (s): 0 below 1 ns, else 1 + floor(log_r(x / 1 ns))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        j = np.floor(np.log(x / _FLOOR) / math.log(_RATIO)) + 1.0
    return np.clip(np.where(x >= _FLOOR, j, 0.0), 0, _BINS - 1).astype(np.int64)


#: The value a bin stands for: 0 for bin 0, its geometric midpoint otherwise.
_MIDPOINTS = np.concatenate([[0.0], _FLOOR * _RATIO ** (np.arange(1, _BINS) - 0.5)])


def _hist_quantile(hist: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Linear-interpolation quantiles (numpy's default) with each order statistic replaced
    by the midpoint of its bin."""
    n = int(hist.sum())
    cum = np.cumsum(hist)
    h = q * (n - 1)
    k = np.floor(h)
    lo = _MIDPOINTS[np.searchsorted(cum, k, side="right")]
    hi = _MIDPOINTS[np.searchsorted(cum, np.minimum(k + 1, n - 1), side="right")]
    return lo + (h - k) * (hi - lo)


@dataclass(frozen=True)
class _Stream:
    """Per-segment counts, sums and histogram of one per-request time (response or wait).
    ``hist[s, j]`` counts the times of segment ``s`` in bin ``offset + j``."""

    count: np.ndarray
    total: np.ndarray
    hist: np.ndarray
    offset: int

    def n(self, first: int) -> int:
        return int(self.count[first:].sum())

    def mean(self, first: int, stop: int | None = None) -> float:
        n = self.count[first:stop].sum()
        return float(self.total[first:stop].sum() / n) if n else math.nan

    def quantile(self, q: np.ndarray, first: int, stop: int | None = None) -> np.ndarray:
        hist = self.hist[first:stop].sum(axis=0, dtype=np.int64)
        if not hist.sum():
            return np.full(q.shape, np.nan)
        full = np.zeros(_BINS, dtype=np.int64)
        full[self.offset:self.offset + hist.size] = hist
        return _hist_quantile(full, q)

    def batches(self, first: int, batches: int) -> list[tuple[int, int]]:
        """Cut the segments from ``first`` into ``batches`` runs of whole segments with nearly
        equal counts; [] if some run would be empty."""
        cum = np.cumsum(self.count[first:])
        total = cum[-1] if cum.size else 0
        cuts = np.searchsorted(cum, total * np.arange(1, batches) / batches, side="left") + 1
        edges = np.concatenate([[0], cuts, [cum.size]]) + first
        if np.any(np.diff(edges) <= 0):
            return []
        runs = list(zip(edges[:-1].tolist(), edges[1:].tolist()))
        if any(self.count[a:b].sum() == 0 for a, b in runs):
            return []
        return runs


class _StreamBuilder:
    """Accumulates a :class:`_Stream` block by block, over the bins ``lo .. hi``."""

    def __init__(self, segments: int, lo: int, hi: int):
        self.count = np.zeros(segments, dtype=np.int64)
        self.total = np.zeros(segments)
        self.offset = lo
        self.hist = np.zeros((segments, hi - lo + 1), dtype=np.int32)

    def add(self, segment: np.ndarray, x: np.ndarray) -> None:
        n_seg = self.count.size
        self.count += np.bincount(segment, minlength=n_seg)
        self.total += np.bincount(segment, weights=x, minlength=n_seg)
        np.add.at(self.hist, (segment, _bins(x) - self.offset), 1)

    def build(self) -> _Stream:
        return _Stream(self.count, self.total, self.hist, self.offset)


def _bin_range(cols: _Columns, wait: bool) -> tuple[int, int]:
    """The lowest and highest histogram bins of the responses (and waits) of a run."""
    lo, hi = _BINS, 0
    for start in range(0, cols.arrival.size, _BLOCK):
        blk = slice(start, start + _BLOCK)
        parts = [cols.response[blk]] + ([cols.start[blk] - cols.arrival[blk]] if wait else [])
        for x in parts:
            x = x[~np.isnan(x)]
            if x.size:
                b = _bins(np.array([x.min(), x.max()]))
                lo, hi = min(lo, int(b[0])), max(hi, int(b[1]))
    return (lo, hi) if lo <= hi else (0, 0)


@dataclass(frozen=True)
class _RunSummary:
    """What a ``keep="summary"`` result holds instead of the per-request table."""

    n_requests: int
    n_retries: int
    outcomes: dict
    per_second: pd.DataFrame
    busy_area: float  # core-seconds busy over [0, horizon]
    number_area: float  # integral of the number in the servers over [0, horizon]
    segment: float  # width of an arrival-time segment (s)
    response: _Stream
    wait: _Stream | None
    response_max: float

    def first_segment(self, warmup: float) -> int:
        """The first segment kept by ``warmup`` (rounded up to a segment boundary)."""
        return int(math.ceil(warmup / self.segment)) if warmup > 0 else 0


# ------------------------------------------------------------------------------ step integrals
def _step_integral(begin: np.ndarray, finish: np.ndarray, cap: float, edges: np.ndarray) -> np.ndarray:
    """``integral_0^e min(N(t), cap) dt`` at each of the sorted ``edges``, where ``N(t)`` is the
    number of intervals ``[begin_i, finish_i)`` containing ``t`` (``begin`` and ``finish``
    sorted; ``finish`` may be ``inf``).

    ``N`` just after an event time ``u`` is ``#{begin <= u} - #{finish <= u}``: every event at
    ``u`` applied at once, so zero-length intervals add nothing.  The events are visited in
    blocks of :data:`_BLOCK` starts, so the temporaries stay small."""
    out = np.zeros(edges.size)
    if begin.size == 0:
        return out
    area = 0.0  # integral up to the first event of the block
    cuts = list(range(0, begin.size, _BLOCK)) + [begin.size]
    for b in range(len(cuts) - 1):
        t_lo = begin[cuts[b]] if b else -math.inf
        t_hi = begin[cuts[b + 1]] if cuts[b + 1] < begin.size else math.inf
        f_lo, f_hi = np.searchsorted(finish, [t_lo, t_hi], side="left")
        times = np.concatenate([begin[cuts[b]:cuts[b + 1]], finish[f_lo:f_hi]])
        times = times[np.isfinite(times)]
        times.sort()
        if times.size == 0:
            continue
        number = (np.searchsorted(begin, times, side="right")
                  - np.searchsorted(finish, times, side="right")).astype(float)
        level = np.minimum(number, cap)
        gaps = np.diff(times, append=times[-1])
        if b + 1 < len(cuts) - 1 or f_hi < finish.size:
            following = min(t_hi, finish[f_hi] if f_hi < finish.size else math.inf)
            gaps[-1] = following - times[-1] if math.isfinite(following) else 0.0
        cum = area + np.concatenate([[0.0], np.cumsum(gaps * level)[:-1]])
        # Edges in [times[0], t_hi): the area at the last event at or before, plus the level since.
        e_lo, e_hi = np.searchsorted(edges, [times[0], t_hi], side="left")
        sel = edges[e_lo:e_hi]
        j = np.searchsorted(times, sel, side="right") - 1
        out[e_lo:e_hi] = cum[j] + level[j] * (sel - times[j])
        area = cum[-1] + gaps[-1] * level[-1]
    return out


def _busy_integral(cols: _Columns, discipline: str, servers: int, end: float,
                   edges: np.ndarray) -> np.ndarray:
    """Core-seconds busy in the whole cluster up to each edge: the sum over processes of
    ``integral min(units, servers)``, as ``SimulationResult._busy`` (FCFS: the requests in
    service; PS: the requests present)."""
    finish_all = cols.departure
    begin_all = cols.start if discipline == "fcfs" else cols.arrival
    total = np.zeros(edges.size)
    largest = int(cols.process.max(initial=0))
    if largest == 0:  # one process: no grouping, and no copy of a column that is already sorted
        groups: Any = [None]
    else:
        order = np.argsort(cols.process, kind="stable")
        bounds = np.searchsorted(cols.process[order], np.arange(largest + 2))
        groups = [order[bounds[g]:bounds[g + 1]] for g in range(largest + 1)]
    for idx in groups:
        begin = begin_all if idx is None else begin_all[idx]
        finish = finish_all if idx is None else finish_all[idx]
        started = ~np.isnan(begin)
        if not started.all():
            begin, finish = begin[started], finish[started]
        del started
        finish = np.where(np.isnan(finish), end, finish)
        total += _step_integral(_sorted(begin), _sorted(finish, own=True), servers, edges)
    return total


def _sorted(x: np.ndarray, own: bool = False) -> np.ndarray:
    """``x`` sorted: itself if it already is, else a sorted copy (sorted in place if ``own``)."""
    if x.size < 2 or bool(np.all(x[1:] >= x[:-1])):
        return x
    if own:
        x.sort()
        return x
    return np.sort(x)


def _number_integral(cols: _Columns, edges: np.ndarray) -> np.ndarray:
    """``integral_0^e N(t) dt`` at the edges, ``N`` the requests in the servers (arrived, not
    departed; a request still in at the end never leaves)."""
    begin = _sorted(cols.arrival)
    finish = _sorted(np.where(np.isnan(cols.departure), np.inf, cols.departure), own=True)
    return _step_integral(begin, finish, math.inf, edges)


# ------------------------------------------------------------------------------ per second
def _per_second(cols: _Columns, end: float, busy_edges: np.ndarray, cores: int) -> pd.DataFrame:
    """The per-second table of :attr:`SimulationResult.per_second`, from the columns, reading
    them a block at a time (``busy_edges``: busy core-seconds up to 0, 1, ..., n_rows)."""
    n_rows = max(int(math.ceil(end)), 1)
    counts = {name: np.zeros(n_rows, dtype=np.int64)
              for name in ("arrivals", "completions", "goodput", "timeouts", "drops")}
    upto_arrival = np.zeros(n_rows, dtype=np.int64)
    upto_departure = np.zeros(n_rows, dtype=np.int64)

    def count(t: np.ndarray) -> np.ndarray:
        t = t[~np.isnan(t)]
        return np.bincount(np.minimum(np.floor(t).astype(np.int64), n_rows - 1), minlength=n_rows)[:n_rows]

    def count_upto(t: np.ndarray) -> np.ndarray:
        # Row k counts the times <= min(k + 1, end): bin ceil(t) - 1 (row 0 for t <= 1).
        t = t[~np.isnan(t)]
        k = np.clip(np.ceil(t).astype(np.int64) - 1, 0, n_rows - 1)
        return np.bincount(k, minlength=n_rows)[:n_rows]

    for lo in range(0, cols.arrival.size, _BLOCK):
        blk = slice(lo, lo + _BLOCK)
        arrival, completion, departure = cols.arrival[blk], cols.completion[blk], cols.departure[blk]
        deadline, code = cols.deadline[blk], cols.code[blk]
        counts["arrivals"] += count(arrival)
        counts["completions"] += count(completion)
        counts["goodput"] += count(completion[code == 0])
        failed = code == 1
        counts["timeouts"] += count(deadline[failed])
        dropped = code == 2
        counts["timeouts"] += count(np.fmin(deadline[dropped], departure[dropped]))
        counts["drops"] += count(departure[dropped])
        upto_arrival += count_upto(arrival)
        upto_departure += count_upto(departure)
    index = pd.RangeIndex(n_rows, name="second")
    table = pd.DataFrame(counts, index=index)
    table["in_flight"] = np.cumsum(upto_arrival) - np.cumsum(upto_departure)
    table["cpu_busy"] = np.diff(busy_edges) / cores
    p50, p99, worst = _latency_by_second(cols, n_rows, counts["completions"])
    table["latency_p50"], table["latency_p99"], table["latency_max"] = p50, p99, worst
    return table


def _lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``a + t (b - a)`` as numpy's quantile computes it (from ``b`` when ``t >= 0.5``)."""
    d = b - a
    return np.where(t >= 0.5, b - d * (1.0 - t), a + d * t)


def _latency_by_second(cols: _Columns, n_rows: int,
                       completions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact p50, p99 and max of ``completion - arrival`` of the requests completing in each
    second, one window of seconds (about :data:`_BLOCK` completions) at a time."""
    out = [np.full(n_rows, np.nan) for _ in range(3)]
    cum = np.cumsum(completions)
    first = 0
    while first < n_rows:
        stop = int(np.searchsorted(cum, (cum[first - 1] if first else 0) + _BLOCK, side="right"))
        stop = min(max(stop, first + 1), n_rows)
        comp = cols.completion
        inside = comp >= first if stop == n_rows else (comp >= first) & (comp < stop)
        idx = np.flatnonzero(inside)
        if idx.size:
            c = comp[idx]
            latency = c - cols.arrival[idx]
            second = np.minimum(np.floor(c).astype(np.int64), n_rows - 1)
            order = np.lexsort((latency, second))
            latency, second = latency[order], second[order]
            rows, starts, sizes = np.unique(second, return_index=True, return_counts=True)
            for col, q in ((0, 0.5), (1, 0.99)):
                h = q * (sizes - 1)
                k = np.floor(h).astype(np.int64)
                a = latency[starts + k]
                b = latency[starts + np.minimum(k + 1, sizes - 1)]
                out[col][rows] = _lerp(a, b, h - k)
            out[2][rows] = latency[starts + sizes - 1]
        first = stop
    return out[0], out[1], out[2]


# ------------------------------------------------------------------------------ the summary
def _summarise(cols: _Columns, discipline: str, servers: int, cores: int, horizon: float, end: float,
               core_busy: Any) -> _RunSummary:
    """Everything a ``keep="summary"`` result answers, from the per-request columns."""
    n_rows = max(int(math.ceil(end)), 1)
    seconds = np.arange(n_rows + 1, dtype=float)
    edges = np.union1d(seconds, [horizon])
    if discipline == "rr":
        T, B = _rr_busy_path(core_busy, end)
        busy = _integral(T, B, edges)
    else:
        busy = _busy_integral(cols, discipline, servers, end, edges)
    at = np.searchsorted(edges, np.append(seconds, horizon))
    per_second = _per_second(cols, end, busy[at[:-1]], cores)
    number = _number_integral(cols, np.array([horizon])) if horizon > 0 else np.zeros(1)
    lo, hi = _bin_range(cols, discipline == "fcfs")
    # At most _CELLS histogram cells per stream, and at most _SEGMENTS segments.
    segments = max(2, min(_SEGMENTS, _CELLS // (hi - lo + 1)))
    segment = float(max(1, math.ceil(max(end, 1.0) / segments)))
    n_seg = int(math.floor(end / segment)) + 2
    response = _StreamBuilder(n_seg, lo, hi)
    wait = _StreamBuilder(n_seg, lo, hi) if discipline == "fcfs" else None
    outcomes = np.zeros(len(OUTCOMES), dtype=np.int64)
    n_retries = 0
    worst = -math.inf
    for lo in range(0, cols.arrival.size, _BLOCK):
        blk = slice(lo, lo + _BLOCK)
        arrival = cols.arrival[blk]
        seg = np.minimum((arrival // segment).astype(np.int64), n_seg - 1)
        outcomes += np.bincount(cols.code[blk], minlength=len(OUTCOMES))
        n_retries += int(np.count_nonzero(cols.attempt[blk]))
        r = cols.response[blk]
        done = ~np.isnan(r)
        response.add(seg[done], r[done])
        if done.any():
            worst = max(worst, float(r[done].max()))
        if wait is not None:
            w = cols.start[blk] - arrival
            started = ~np.isnan(w)
            wait.add(seg[started], w[started])
    return _RunSummary(int(cols.arrival.size), n_retries, dict(zip(OUTCOMES, outcomes.tolist())), per_second,
                       float(busy[at[-1]]), float(number[0]), segment, response.build(),
                       wait.build() if wait is not None else None, worst if worst > -math.inf else math.nan)
