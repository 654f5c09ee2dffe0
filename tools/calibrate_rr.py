#!/usr/bin/env python3
"""Simulate the event-loop round robin on a grid, for calibrating and checking ``capacity.rr``.

    python tools/calibrate_rr.py --out /tmp/rr_grid.csv [--requests 150000] [--admission idle]

For every (utilisation, slices, scv, gap) of the grid it runs
``capacity.sim.simulate(discipline="rr", ...)`` (one core, E[S] = 1, Poisson
arrivals, a fixed seed per point, the first 1 % of the run dropped) and writes
the mean and the p50/p90/p99/p99.9 of the response time with their 99 %
batch-means half-widths, next to the FCFS and PS values of the same point from
``capacity.fcfs`` / ``capacity.ps``.  The gap is the non-CPU ``slice_delay``
between two slices, given as a multiple of the mean slice ``E[S] / slices``.

The fitted constants and the error table in ``capacity/rr.py`` come from this
script's output; ``tests/test_rr.py`` checks a few points against fresh
simulations.  Runs one process; ~1-3 s per point with 2e5 requests.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capacity import Service, fcfs, ps  # noqa: E402
from capacity.sim import simulate  # noqa: E402

QUANTILES = (0.5, 0.9, 0.99, 0.999)
SCV_SERVICE = {0.0: lambda: Service.deterministic(1.0), 0.5: lambda: Service.erlang(1.0, 2),
               1.0: lambda: Service.exponential(1.0), 2.0: lambda: Service.hyperexponential(1.0, 2.0)}


def point(rho: float, k: int, scv: float, gap: float, admission: str, requests: int, seed: int) -> dict:
    svc = SCV_SERVICE[scv]()
    duration = requests / rho
    run = simulate(rho, svc, discipline="rr", slices=k, slice_delay=gap / k, admission=admission,
                   duration=duration, seed=seed)
    warm = 0.01 * duration
    row = {"rho": rho, "slices": k, "scv": scv, "gap": gap, "admission": admission, "requests": requests,
           "mean": run.mean_response(warm), "mean_hw": run.confidence_interval("mean", warmup=warm).half_width}
    for q in QUANTILES:
        name = f"p{q * 100:g}".replace(".", "")
        row[name] = float(run.response_quantile(q, warm))
        row[name + "_hw"] = run.confidence_interval(q, warmup=warm).half_width
        row["fcfs_" + name] = float(fcfs.response_quantile(q, rho, svc))
        row["ps_" + name] = float(ps.response_quantile(q, rho, svc))
    row["fcfs_mean"] = float(fcfs.mean_response(rho, svc))
    row["ps_mean"] = float(ps.mean_response(rho, svc))
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--requests", type=int, default=150_000,
                   help="requests per point at utilisation <= 0.5 (more above, see main)")
    p.add_argument("--admission", default="idle", choices=("idle", "fifo"))
    p.add_argument("--rho", default="0.3,0.5,0.7,0.8,0.9")
    p.add_argument("--slices", default="2,5,10")
    p.add_argument("--scv", default="0,1,2")
    p.add_argument("--gap", default="0,0.25,0.5,1,2")
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args(argv)
    grid = list(itertools.product([float(x) for x in a.rho.split(",")], [int(x) for x in a.slices.split(",")],
                                  [float(x) for x in a.scv.split(",")], [float(x) for x in a.gap.split(",")]))
    rows = []
    t0 = time.time()
    for n, (rho, k, scv, gap) in enumerate(grid):
        # The relative noise of a simulated quantile grows like 1/(1 - rho): more requests
        # near saturation (x6.25 at rho = 0.9) keep the half-widths comparable.
        requests = int(a.requests * max(1.0, (0.5 / (1.0 - rho)) ** 2))
        rows.append(point(rho, k, scv, gap, a.admission, requests, a.seed + n))
        pd.DataFrame(rows).to_csv(a.out, index=False)  # keep what is done if interrupted
        print(f"{n + 1}/{len(grid)} rho {rho} k {k} scv {scv} gap {gap}: mean {rows[-1]['mean']:.3f} "
              f"p99 {rows[-1]['p99']:.3f} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
