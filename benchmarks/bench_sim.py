"""Throughput of the simulator engines, in requests simulated per second.

Run from the repository root::

    python benchmarks/bench_sim.py

Part 1 -- the one-queue engines: M/M/c at utilisation 0.9, mean service
1 s; each figure is the best of 3 runs of the engine alone (arrivals and
sizes drawn beforehand), plus the full ``simulate`` call (random draws and
the result DataFrame included).

Part 2 -- the overload simulator (issue 3): full ``simulate`` calls with a
10 s client timeout, exponential 1 s CPU, at utilisation 0.9 and in
overload (1.5x capacity), for each engine that the options select:
the vectorised engines (server ignores the timeout), the per-process event
objects (drop/deadline/adaptive LIFO), and the global event loop
(least connections, retries).  ``.per_second`` is not included (it is
computed on first access; its cost is reported separately).

Target: processor sharing with timeouts >= 100,000 requests/s.
"""
from __future__ import annotations

import time

import numpy as np

from capacity.sim import simulate
from capacity.sim._engines import _ENGINES


def best_of(func, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return min(times)


def engines() -> None:
    rho = 0.9
    cases = [("fcfs", 1, 1_000_000), ("fcfs", 4, 200_000), ("ps", 1, 200_000), ("ps", 4, 200_000)]
    print(f"{'discipline':<10} {'servers':>7} {'requests':>10} {'engine req/s':>14} {'simulate() req/s':>17}")
    for discipline, servers, n in cases:
        rng = np.random.default_rng(2024)
        rate = rho * servers
        arrivals = np.sort(rng.uniform(0.0, n / rate, n))
        sizes = rng.exponential(1.0, n)
        engine = _ENGINES[discipline]
        t_engine = best_of(lambda: engine(arrivals, sizes, servers))
        t_full = best_of(lambda: simulate(rate, 1.0, discipline=discipline, servers=servers,
                                          horizon=n / rate, seed=1))
        print(f"{discipline:<10} {servers:>7} {n:>10,} {n / t_engine:>14,.0f} {n / t_full:>17,.0f}")


def overload(n: int = 200_000) -> None:
    cases = [
        ("ps, timeout, continue", dict(discipline="ps")),
        ("ps, timeout, drop", dict(discipline="ps", on_timeout="drop")),
        ("ps, 4 procs least_conn", dict(discipline="ps", processes=4, dispatch="least_connections")),
        ("ps, 4 procs least_conn drop", dict(discipline="ps", processes=4, dispatch="least_connections",
                                             on_timeout="drop")),
        ("ps, retries=2, drop", dict(discipline="ps", on_timeout="drop", retries=2)),
        ("fcfs, timeout, continue", dict()),
        ("fcfs, timeout, drop", dict(on_timeout="drop")),
        ("fcfs, adaptive_lifo drop", dict(on_timeout="drop", queue="adaptive_lifo")),
        ("fcfs, 4 procs least_conn", dict(processes=4, dispatch="least_connections")),
        ("fcfs, retries=2, drop", dict(on_timeout="drop", retries=2)),
    ]
    print(f"\n{'overload simulator (timeout 10 s)':<32} {'load':>5} {'rows':>9} {'req/s':>10}")
    for load in (0.9, 1.5):
        for label, kw in cases:
            cores = kw.get("processes", 1)
            rate = load * cores
            duration = n / rate
            holder = {}

            def call():
                holder["run"] = simulate(rate, 1.0, timeout=10.0, horizon=duration, seed=3, **kw)

            t = best_of(call, repeat=2)
            rows = len(holder["run"].requests)
            print(f"{label:<32} {load:>5} {rows:>9,} {rows / t:>10,.0f}")
    run = simulate(1.5, 1.0, discipline="ps", timeout=10.0, horizon=n / 1.5, seed=3)
    t0 = time.perf_counter()
    run.per_second
    print(f"\nper_second table for {len(run.requests):,} requests / {len(run.per_second):,} s: "
          f"{time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    engines()
    overload()


# ---------------------------------------------------------------------------- issue 7: event-loop round robin
def round_robin(n: int = 200_000) -> None:
    """Part 3 -- discipline="rr": full ``simulate`` calls, exponential 1 s CPU
    at utilisation 0.8, one core unless stated.  Target: >= 50,000 requests/s
    with 5 slices (about 10 events per request)."""
    cases = [
        ("rr k=5", dict(slices=5)),
        ("rr k=5, slice_delay 0.1", dict(slices=5, slice_delay=0.1)),
        ("rr k=5, 4 cores", dict(slices=5, servers=4)),
        ("rr k=5, timeout drop (objects)", dict(slices=5, timeout=10.0, on_timeout="drop")),
        ("rr k=5, least_conn 4 procs", dict(slices=5, processes=4, dispatch="least_connections")),
        ("rr k=50", dict(slices=50)),
    ]
    print(f"\n{'event-loop round robin':<34} {'rows':>9} {'req/s':>10}")
    for label, kw in cases:
        cores = kw.get("servers", 1) * kw.get("processes", 1)
        rate = 0.8 * cores
        m = n // 10 if kw.get("slices") == 50 else n
        holder = {}

        def call():
            holder["run"] = simulate(rate, 1.0, discipline="rr", horizon=m / rate, seed=3, **kw)

        t = best_of(call, repeat=2)
        rows = len(holder["run"].requests)
        print(f"{label:<34} {rows:>9,} {rows / t:>10,.0f}")


if __name__ == "__main__":
    round_robin()
