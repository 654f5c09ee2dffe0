"""Throughput of the simulator engines, in requests simulated per second.

Run from the repository root::

    python benchmarks/bench_sim.py

M/M/c at utilisation 0.9, mean service 1 s; each figure is the best of 3 runs
of the engine alone (arrivals and sizes drawn beforehand), plus the full
``simulate`` call (random draws and the result DataFrame included).
Target: processor sharing >= 100,000 requests/s.
"""
from __future__ import annotations

import time

import numpy as np

from capacity.sim import _ENGINES, simulate


def best_of(func, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
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
                                          duration=n / rate, seed=1))
        print(f"{discipline:<10} {servers:>7} {n:>10,} {n / t_engine:>14,.0f} {n / t_full:>17,.0f}")


if __name__ == "__main__":
    main()
