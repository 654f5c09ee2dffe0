"""Every cache key expiring at once, with client retries, against an exact simulation (issue 17,
part 2): :func:`capacity.plan.cache_expiry`.

Reference: a request-by-request simulation independent of the planner's fluid.  One FCFS core;
Poisson requests, a share ``h`` of them for one of ``keys`` equally popular keys, the rest
uncacheable (always a miss); warm for 60 s, then every key expires at t = 0.  A request for a
key misses when it is the first one for that key since the expiry (``fill_time = 0``), and so
does a retry (it reads the key like any request).  Exponential CPU of 1 ms per hit and 20 ms per
miss.  A request is answered at ``max(free, arrival) + size`` (Lindley, in arrival order through
a heap that holds the retries); one that took longer than the timeout has failed, and the
server has still done its work (``on_timeout="continue"``); the client sends it again at
``arrival + timeout``, up to ``retries`` times.
"""
from __future__ import annotations

import heapq

import numpy as np
import pytest

from capacity import plan

H, HIT, MISS, TIMEOUT, WARM = 0.9, 0.001, 0.020, 1.0, 60.0


def _expiry_run(lam: float, keys: int, retries: int, end: float, seed: int):
    """Per second from -WARM to ``end``: attempts, attempts that timed out, and the mean response."""
    rng = np.random.default_rng(seed)
    n = rng.poisson(lam * (WARM + end))
    arrive = np.sort(rng.uniform(-WARM, end, n))
    cacheable = rng.random(n) < H
    key = rng.integers(0, keys, n)
    heap = [(float(arrive[j]), j, 0) for j in range(n)]
    heapq.heapify(heap)
    seen = np.zeros(keys, dtype=bool)
    free = -WARM
    seconds = int(WARM + end)
    attempts, timed_out, response = np.zeros(seconds), np.zeros(seconds), np.zeros(seconds)
    while heap:
        a, j, k = heapq.heappop(heap)
        if a >= end:
            continue
        if not cacheable[j]:
            miss = True
        elif a < 0:
            miss = False                                   # warm before the expiry
        else:
            miss = not seen[key[j]]
            seen[key[j]] = True
        free = max(free, a) + rng.exponential(MISS if miss else HIT)
        r = free - a
        b = int(a + WARM)
        attempts[b] += 1
        response[b] += r
        if r > TIMEOUT:
            timed_out[b] += 1
            if k < retries:
                heapq.heappush(heap, (a + TIMEOUT, j, k + 1))
    return attempts[int(WARM):], timed_out[int(WARM):], response[int(WARM):] / np.maximum(attempts[int(WARM):], 1)


def _last_over(r) -> float:
    """End of the last second whose fluid delay is past the timeout."""
    over = np.flatnonzero(r.table["backlog_delay"].to_numpy() > TIMEOUT)
    return float(r.table.index[over[-1]] + 1.0)


def test_retries_hold_the_service_overloaded_where_the_fluid_says():
    """200 requests/s, 300 keys, two retries: the burst (3.5 s of delay without retries) sends
    attempts past the 1 s timeout; their retries triple the attempts, 600/s of 2.9 ms = 1.74
    cores once every key is back: the planner says metastable, and every seeded run is still
    timing out every attempt at three times the first attempts' rate 150 s after the expiry."""
    r = plan.cache_expiry(200.0, H, HIT, MISS, keys=300, timeout=TIMEOUT, retries=2, discipline="fcfs")
    assert r.verdict == "metastable" and r.held_by_retries and r.recovery_time == np.inf
    for seed in range(3):
        attempts, timed_out, _ = _expiry_run(200.0, 300, 2, 200.0, seed)
        tail = slice(150, 200)
        assert timed_out[tail].sum() / attempts[tail].sum() > 0.99
        assert attempts[tail].mean() == pytest.approx(600.0, rel=0.05)


def test_without_retries_the_same_burst_times_out_and_passes():
    """The same burst without retries: the fluid's peak delay (3.5 s) against the simulated peak
    of the per-second mean response (3.3-3.7 s over four seeds), and the last timeout at 10-14 s
    where the fluid's delay is back under the timeout at 11 s (the fluid is what the averages
    force; the random queue on top lasts a little longer): within 30 %."""
    r = plan.cache_expiry(200.0, H, HIT, MISS, keys=300, timeout=TIMEOUT, discipline="fcfs")
    assert r.verdict == "timeouts" and not r.held_by_retries
    for seed in range(4):
        attempts, timed_out, response = _expiry_run(200.0, 300, 0, 120.0, seed)
        assert response.max() == pytest.approx(r.peak_delay, rel=0.15)
        assert np.flatnonzero(timed_out)[-1] + 1 == pytest.approx(_last_over(r), rel=0.30)


def test_below_the_retries_tipping_rate_the_service_recovers_late():
    """100 requests/s and 3000 keys, two retries: all three attempts of every request, 300/s of
    2.9 ms, are 0.87 of the core once the keys are back, so the service recovers -- but with the
    retries' work the fluid's delay stays past the timeout until 419 s (68 s without retries)
    and peaks at 48.6 s (12.5 s).  The simulation: the last timeout within 25 % of that, the peak
    per-second mean response within 20 %."""
    r = plan.cache_expiry(100.0, H, HIT, MISS, keys=3000, timeout=TIMEOUT, retries=2, discipline="fcfs")
    alone = plan.cache_expiry(100.0, H, HIT, MISS, keys=3000, timeout=TIMEOUT, discipline="fcfs")
    assert r.verdict == "timeouts" and not r.held_by_retries and np.isfinite(r.recovery_time)
    assert _last_over(r) > 4 * _last_over(alone) and r.peak_delay > 3 * alone.peak_delay
    for seed in range(3):
        attempts, timed_out, response = _expiry_run(100.0, 3000, 2, 700.0, seed)
        assert timed_out[-100:].sum() == 0                               # recovered by itself
        assert np.flatnonzero(timed_out)[-1] + 1 == pytest.approx(_last_over(r), rel=0.25)
        assert response.max() == pytest.approx(r.peak_delay, rel=0.20)


def test_a_small_burst_is_only_delayed():
    """30 keys at 200 requests/s, two retries: the fluid's delay peaks at 0.15 s, under the
    timeout ("delayed"); no simulated request times out."""
    r = plan.cache_expiry(200.0, H, HIT, MISS, keys=30, timeout=TIMEOUT, retries=2, discipline="fcfs")
    assert r.verdict == "delayed"
    for seed in range(3):
        _, timed_out, _ = _expiry_run(200.0, 30, 2, 60.0, seed)
        assert timed_out.sum() == 0
