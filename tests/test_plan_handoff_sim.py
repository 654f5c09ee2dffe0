"""Handing a short task to a thread pool (issue 17, part 3) against an independent simulation of
the CPU's run queue: :func:`capacity.plan.handoff_cost`.

Reference: ``c`` cores serving a FCFS run queue (the M/M/c model the planner assumes, simulated
event by event, not through its formulas): background threads arrive as a Poisson stream of
exponential CPU bursts; a tagged call (Poisson, rare enough to add under 2 % of the load) wakes
``k`` worker threads after one context switch, each waits its turn for a core and runs the task,
and the last one wakes the caller after another switch; the caller, too, waits for a core.  The
call's time runs from the hand-off until the caller is back on a core.  Unlike the planner, the
workers and the caller meet the same queue at nearly the same moment: their waits are not
independent.
"""
from __future__ import annotations

import heapq

import numpy as np
import pytest

from capacity import plan

SWITCH = 5e-6


def _calls(c, rho, burst, task, k, horizon, seed, call_rate=20.0):
    rng = np.random.default_rng(seed)
    bg_rate = (rho * c - call_rate * k * task) / burst           # the calls' own work is part of rho
    n_bg = rng.poisson(bg_rate * horizon)
    bg, sizes = np.sort(rng.uniform(0.0, horizon, n_bg)), rng.exponential(burst, n_bg)
    calls = np.sort(rng.uniform(0.0, horizon, rng.poisson(call_rate * horizon)))
    events = [(t, 0, i) for i, t in enumerate(bg)] + [(t, 1, i) for i, t in enumerate(calls)]
    heapq.heapify(events)
    cores = [0.0] * c                                             # when each core is next free
    waiting, last = np.zeros(calls.size, int), np.zeros(calls.size)
    out = np.full(calls.size, np.nan)
    while events:
        t, kind, i = heapq.heappop(events)
        if kind == 1:                                             # the hand-off: k workers woken
            waiting[i] = k
            for _ in range(k):
                heapq.heappush(events, (t + SWITCH, 2, i))
            continue
        start = max(t, heapq.heappop(cores))                      # FCFS: the next core to free up
        if kind == 0:
            heapq.heappush(cores, start + sizes[i])
        elif kind == 2:                                           # a worker runs the task
            heapq.heappush(cores, start + task)
            waiting[i] -= 1
            last[i] = max(last[i], start + task)
            if waiting[i] == 0:
                heapq.heappush(events, (last[i] + SWITCH, 3, i))  # the last one wakes the caller
        else:                                                     # the caller is back on a core
            heapq.heappush(cores, start)
            out[i] = start - calls[i]
    return out[np.isfinite(out)]


@pytest.mark.parametrize("c, rho, burst, task, k", [(2, 0.31, 0.005, 0.0016, 1), (4, 0.5, 0.003, 0.002, 2)])
def test_handoff_against_a_simulated_run_queue(c, rho, burst, task, k):
    """The article's setting (2 cores, 31 %, 5 ms bursts, a 1.6 ms task) and a parallel hand-off
    (4 cores, 50 %, two 2 ms tasks): the planner's mean within 15 % of the simulated calls' (it
    measured +10 % and -3 %), its P99.9 low by 10-35 % (measured 15 % and 24 %: the caller is woken
    while the run queue is as busy as it was for the workers, so its wait is not the fresh,
    independent one the planner adds); and whether the pool beats the caller running the tasks
    itself is the simulation's: on the mean it does not for one task and does for two, on the
    P99.9 it does not for either."""
    x = np.concatenate([_calls(c, rho, burst, task, k, 2000.0, seed) for seed in range(2)])
    r = plan.handoff_cost(task, servers=c, utilization=rho, burst=burst, parallel=k, switch_cost=SWITCH)
    pool = r.table.loc["pool"]
    assert pool["mean_s"] == pytest.approx(x.mean(), rel=0.15)
    ratio = pool["p99.9_s"] / np.quantile(x, 0.999)
    assert 0.65 <= ratio <= 0.90
    assert r.pays == (x.mean() < k * task) == (k > 1)
    assert r.added_quantile > 0 and np.quantile(x, 0.999) > k * task
