"""Benchmark: vectorised ``erlang_c`` against the per-point loop calculators use.

Run:  python benchmarks/bench_erlang.py [--points 1000000] [--loop-points 2000] [--max-servers 1000]

Builds a seeded grid (servers uniform on 1..max_servers, utilisation uniform on
(0, 1)), times ``capacity.erlang.erlang_c`` on all of it, times the classic
pure-Python Erlang B recursion ``B_k = a B_{k-1} / (k + a B_{k-1})`` followed
by ``C = c B / (c - a (1 - B))`` point by point on a random subset,
extrapolates the loop time linearly to the full grid, and checks that both
agree on the subset.  Each time is the best of 20 runs (``--repeats``,
``--loop-repeats``, the same for both): both are short (tens of
milliseconds), so on a shared machine a single run says more about the
neighbours than about the code.

The vectorised call splits a grid this large between threads, one per core
this process may use (``CAPACITY_NUM_THREADS`` overrides); it is timed that way
and with one thread, and both ratios are printed: the pure-Python loop cannot
use a second core.

The loop costs O(c) per point and the vectorised call O(1), so the speed-up
grows linearly with ``--max-servers``.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from capacity.erlang import _threads, erlang_c


def erlang_c_loop(c: int, a: float) -> float:
    """Erlang C the way most calculators do it: the Erlang B recursion, one point at a time."""
    if a >= c:
        return 1.0
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return c * b / (c - a * (1.0 - b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--loop-points", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--loop-repeats", type=int, default=20)
    parser.add_argument("--max-servers", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    servers = rng.integers(1, args.max_servers + 1, size=args.points)
    utilisation = rng.uniform(0.0, 1.0, size=args.points)
    load = utilisation * servers

    def best_time(threads: str | None) -> tuple[float, np.ndarray]:
        old = os.environ.pop("CAPACITY_NUM_THREADS", None)
        if threads is not None:
            os.environ["CAPACITY_NUM_THREADS"] = threads
        try:
            erlang_c(servers, load)  # warm-up: imports, tables, the allocator's first grid-sized arrays
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                res = erlang_c(servers, load)
                times.append(time.perf_counter() - t0)
        finally:
            os.environ.pop("CAPACITY_NUM_THREADS", None)
            if old is not None:
                os.environ["CAPACITY_NUM_THREADS"] = old
        return min(times), res

    threads = _threads()
    t_vec, vec = best_time(None)
    t_one, vec_one = best_time("1")
    assert np.array_equal(vec, vec_one), "threaded and single-threaded results differ"

    subset = rng.choice(args.points, size=args.loop_points, replace=False)
    # plain Python numbers, as a calculator has them
    pairs = [(int(servers[i]), float(load[i])) for i in subset]
    loop_times = []
    for _ in range(args.loop_repeats):
        t0 = time.perf_counter()
        loop = np.array([erlang_c_loop(c, a) for c, a in pairs])
        loop_times.append(time.perf_counter() - t0)
    t_loop_subset = min(loop_times)
    t_loop = t_loop_subset * args.points / args.loop_points

    ref = vec[subset]
    # Compare where the loop's answer is a normal double (far-tail values
    # below ~1e-300 lose digits or underflow in the recursion itself).
    ok = loop > 1e-300
    rel = np.abs(ref[ok] / loop[ok] - 1.0)
    agree_zero = np.all(ref[~ok] < 1e-290)

    print(f"grid: {args.points:,} points, servers uniform on 1..{args.max_servers}, "
          f"utilisation uniform on (0, 1), seed {args.seed}")
    print(f"vectorised erlang_c : {t_vec:8.4f} s  (best of {args.repeats}; {threads} thread(s))")
    print(f"  on one thread     : {t_one:8.4f} s  (best of {args.repeats}; same values bit for bit)")
    print(f"per-point loop      : {t_loop_subset:8.3f} s on {args.loop_points:,} random points "
          f"(best of {args.loop_repeats}) -> {t_loop:8.1f} s extrapolated linearly to {args.points:,} points")
    print(f"speed-up            : {t_loop / t_vec:8.0f} x  ({threads} thread(s)); "
          f"{t_loop / t_one:.0f} x on one thread")
    print(f"agreement on subset : max relative difference {rel.max():.2e} over {ok.sum():,} points; "
          f"{(~ok).sum()} points below 1e-300 {'agree' if agree_zero else 'DISAGREE'}")


if __name__ == "__main__":
    main()
