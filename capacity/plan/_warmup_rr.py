"""Event-loop round robin under warm-up: the pieces :mod:`capacity.plan._warmup_model` adds for ``"rr"``.

* :func:`idle_quantiles` and :func:`ceiling_by_bisection` -- the stationary percentiles and the SLO
  ceiling of a process with ``admission="idle"``, whose slice delay enters the queue as the ratio
  ``d / (m E[S])`` and so changes with the cold multiplier ``m`` (no single rescaled table serves
  every ``m``, as it does for FCFS, PS and rr with ``admission="fifo"``);
* :func:`rr_fluid` -- the fluid round robin of an overloaded process: every request present gets
  one slice per cycle of the run queue, so a request leaves after ``k`` cycles whatever its size;
  with ``admission="idle"`` the loop admits the waiting requests in batches, each when the one before
  it has been served (:func:`_batches`).

See :func:`capacity.plan.warmup_transient` for the model, its assumptions and its measured error.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..distributions import Service


def idle_quantiles(qs: np.ndarray, fcfs_unit: np.ndarray, rr_unit: np.ndarray, base_unit: np.ndarray,
                   rho: np.ndarray, slices: int, unit_delay: np.ndarray, service: Service,
                   servers: int) -> np.ndarray:
    """rr ``admission="idle"`` quantiles for a mean-1 service, shape ``rho.shape + (len(qs),)``.

    :func:`capacity.rr.response_quantile`'s idle formula (its module docstring: an interpolation
    ``T0`` between FCFS and zero-delay FIFO round robin, plus the ``(k - 1) d`` of gaps less their
    overlap with the wait), applied elementwise to the FCFS and zero-delay rr unit quantiles
    ``fcfs_unit``, ``rr_unit`` at the loads ``rho``, with the slice delay over the mean service
    ``unit_delay`` (``d / (m E[S])``, one per load), with rr's measured correction of its value
    without gaps for the CPU law ``service`` on ``servers`` cores.  Infinite at ``rho >= 1``."""
    from ..rr import _idle_quantile

    rho = np.asarray(rho, dtype=float)
    d = np.broadcast_to(np.asarray(unit_delay, dtype=float), rho.shape)[..., None]
    with np.errstate(invalid="ignore"):
        out = _idle_quantile(qs, fcfs_unit, rr_unit, base_unit, rho[..., None], float(slices), d, 1.0, service,
                             servers)
    return np.where((rho < 1.0)[..., None], out, np.inf)


def ceiling_by_bisection(quantiles: Callable[[np.ndarray, np.ndarray], np.ndarray], targets: np.ndarray,
                         m: np.ndarray, warm_capacity: float) -> np.ndarray:
    """The highest arrival rate at which every percentile ``quantiles(rho, m)`` is within its target,
    for each multiplier ``m`` (0 where even zero load misses one).

    The percentiles increase with the load, so the ceiling's utilisation is found by bisection in
    ``x = -ln(1 - rho)`` over ``[0, 40]`` (``rho`` to ``1 - 4e-18``), all multipliers at once: 60 halvings
    leave ``x`` within ``4e-17``; the rate is ``rho c / (m E[S])`` (``warm_capacity = c / E[S]``)."""
    m = np.asarray(m, dtype=float)
    lo, hi = np.zeros(m.shape), np.full(m.shape, 40.0)
    for _ in range(60):      # bisection: a fixed number of halvings, vectorised over every multiplier
        mid = 0.5 * (lo + hi)
        ok = np.all(quantiles(-np.expm1(-mid), m) <= targets, axis=-1)
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    fits = np.all(quantiles(np.zeros(m.shape), m) <= targets, axis=-1)
    return np.where(fits, -np.expm1(-lo) * warm_capacity / m, 0.0)


def _cycles(clock: np.ndarray, work: np.ndarray, servers: int, slices: int) -> np.ndarray:
    """When each cohort leaves, in the work clock: the fluid round robin marched over the grid.

    The cohort of the requests admitted between grid times ``j`` and ``j + 1`` (``work[j]`` seconds of
    warm CPU: its mass times its mean size) joins the run queue at ``j + 1``.  Every request present
    has one slice queued, so a cycle of the run queue -- from one of a request's slices to its next --
    takes ``P / c`` with ``P`` the slice work of all present (``work / k`` each); a request leaves after
    ``k`` cycles.  A cohort is a stretch of the queue whose slice is served over the ``slice / c`` before
    its cycle ends, so the slice work pending when a cohort joins leaves out what is already served of
    the slice at the head of the queue (so ``k = 1`` is the FCFS fluid exactly: a cohort leaves when the work
    that arrived with and before it is done).  Within a step the cycle length is held at its value at
    the step's start, so the cycles a cohort completes in the step are counted at once instead of one
    by one."""
    n = work.size
    slice_work = work / slices
    nxt = np.full(n, np.inf)          # when the cohort's current cycle ends
    left = np.full(n, float(slices))  # cycles still to go
    leave = np.full(n, np.nan)
    present, pending, first = 0.0, 0.0, 0
    for i in range(1, clock.size):    # causal: a step's cycle length needs the crowd the earlier steps left
        cycle = max(present, 1e-300) / servers    # a full cycle serves every present request a slice
        due = np.flatnonzero(nxt[first:i - 1] <= clock[i]) + first
        if due.size:
            done = np.minimum(left[due], 1.0 + np.floor((clock[i] - nxt[due]) / cycle))
            left[due] -= done
            out = due[left[due] <= 0]
            leave[out] = nxt[out] + (done[left[due] <= 0] - 1.0) * cycle
            nxt[due] += done * cycle
            nxt[out] = np.inf
            present = max(present - float(np.sum(slice_work[out])), 0.0)
            while first < i - 1 and left[first] <= 0:
                first += 1
        # A cohort is a stretch of the run queue: the one at its head (the next cycle end) is being
        # served over the slice_work / c before its cycle ends, and what is done of it is not pending.
        served = 0.0
        if first < i - 1:
            head = first + int(np.argmin(nxt[first:i - 1]))
            if np.isfinite(nxt[head]):
                served = min(max(slice_work[head] - servers * (nxt[head] - clock[i]), 0.0), slice_work[head])
        present += slice_work[i - 1]
        pending = max(present - served, slice_work[i - 1])
        nxt[i - 1] = clock[i] + max(pending, 1e-300) / servers
    # Cohorts still there at the horizon: their remaining cycles at the last cycle length.
    todo = np.isnan(leave)
    leave[todo] = nxt[todo] + (left[todo] - 1.0) * max(present, 1e-300) / servers
    return leave


@dataclass(frozen=True)
class _RRFluid:
    """The fluid round-robin response of a request arriving at each grid time (s; 0 where the process
    keeps up: no fluid backlog) and the ``gaps = (k - 1) d`` of its own slice delays (s)."""

    response_time: np.ndarray
    gaps: float

    def late_share(self, service: Service, timeout: float) -> np.ndarray:
        """1 where the fluid request arriving then takes the ``timeout`` or longer (its size does not
        matter: every request leaves after ``k`` cycles), else 0."""
        return ((self.response_time > 0) & (self.response_time + self.gaps >= timeout)).astype(float)


def _batches(clock: np.ndarray, work: np.ndarray, backlog: np.ndarray, servers: int) -> np.ndarray:
    """When the request arriving at each grid time leaves, in the work clock, under ``admission="idle"``
    (NaN where there is no backlog).

    In overload the run queue empties only when the batch in flight has been served; the loop then
    admits every request waiting, which is the next batch.  Fluid: the batch admitted at ``s_n`` holds
    the work that arrived in ``(s_{n-1}, s_n]`` and the cores serve it by ``s_{n+1} = s_n + (W(s_n) -
    W(s_{n-1})) / c`` (``W`` the cumulative work); its requests share the cores round robin, so they all
    leave near its end: a request arriving in ``(s_{n-1}, s_n]`` leaves at ``s_{n+1}``.  A backlog episode
    (a run of grid times with a fluid FCFS backlog) starts with the work of the step before it, and its
    batches run until they are shorter than a thousandth of a grid step past its end."""
    cum = np.concatenate([[0.0], np.cumsum(work)])
    leave = np.full(clock.size, np.nan)
    step = (clock[-1] - clock[0]) / max(clock.size - 1, 1)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], backlog.astype(int), [0]])))
    for begin, end in zip(edges[::2], edges[1::2]):    # one backlog episode at a time (a few at most)
        bounds = [clock[max(begin - 1, 0)], clock[begin]]
        while len(bounds) < 1_000_000:     # one scalar step per batch: they grow geometrically in overload
            batch = (np.interp(bounds[-1], clock, cum) - np.interp(bounds[-2], clock, cum)) / servers
            bounds.append(bounds[-1] + batch)
            if (bounds[-2] >= clock[end - 1] and batch < 1e-3 * step) or bounds[-1] > clock[-1]:
                break
        s = np.array(bounds)
        idx = np.minimum(np.searchsorted(s, clock[begin:end], side="left") + 1, s.size - 1)
        leave[begin:end] = s[idx]
    return leave


def rr_fluid(time: np.ndarray, clock: np.ndarray, clock_inverse: Callable[[np.ndarray], np.ndarray],
             work: np.ndarray, backlog: np.ndarray, servers: int, slices: int, gaps: float,
             admission: str = "fifo") -> _RRFluid:
    """Fluid round robin over the grid ``time`` (see warmup_transient's Notes): :func:`_cycles` for
    ``admission="fifo"``, :func:`_batches` for ``"idle"``.

    ``clock`` is the work clock at the grid times (``time``, or ``G(time)`` for the time law) and
    ``clock_inverse`` maps it back; ``work`` the warm-equivalent CPU admitted per step (``E[S]`` times
    the requests admitted, times their multiplier for the requests law); ``backlog`` where the fluid
    FCFS delay is positive -- elsewhere the process keeps up and the fluid response is 0 (the
    stationary part carries the queue), which also drops the grid's own rounding (a cohort's own
    cycles take about ``rho`` steps)."""
    if admission == "idle":
        left_at = _batches(clock, work, backlog, servers)
    else:
        leave = _cycles(clock, work, servers, slices)
        left_at = np.interp(clock, clock[1:], leave)
    response = clock_inverse(np.where(backlog, left_at, clock)) - time
    return _RRFluid(np.where(backlog, np.maximum(response, 0.0), 0.0), gaps)
