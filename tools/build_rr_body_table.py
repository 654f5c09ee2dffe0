#!/usr/bin/env python3
"""Simulate the table of event-loop round-robin quantiles that corrects ``capacity.rr``'s FIFO body.

Usage (from the repository root)::

    python tools/build_rr_body_table.py --simulate [--jobs 2]   # the grid -> capacity/tables/rr_fifo_quantiles.csv
    python tools/build_rr_body_table.py --held-out [--jobs 2]   # off-grid points: the corrected model's error
    python tools/build_rr_body_table.py --admission idle --simulate [--jobs 2]   # -> rr_idle_quantiles.csv

Why.  ``capacity.rr``'s formula blends the FCFS and PS quantiles with weights calibrated on the
mean and p90-p99.9 only; below p90 it holds the p90 weights, and with ``admission="fifo"`` the
body of the distribution comes out 10-40 % too low at 30-70 % CPU (scv 1-2), so a histogram fit
of an event-loop day prefers FCFS with a wider CPU law (issue 15.8).  No closed form is known
for equal slices with ``1 < k < inf`` (see the ``capacity.rr`` docstring), so the body is
measured: this script simulates the exact model over a grid and ``capacity._rr_body`` turns the
simulated quantiles into a multiplicative correction of the formula.

The grid (:data:`GRID`): one core, E[S] = 1, ``admission="fifo"``, no slice delay;
utilisation 0.15/0.3/0.5/0.65/0.8/0.9 x slices 2/3/5/8/13/20/50 x 13 service laws
(deterministic; gamma and lognormal of scv 0.25/0.5/1/2/4; hyperexponential of scv 2/4) = 546
points; ``1e6 x max(1, (0.5 / (1 - rho))^2)`` requests per point, at most 5e6; the first 1 % of
each run dropped.  Per point the response time's quantiles at :data:`LEVELS` and their 99 %
batch-means half-widths (30 batches).  Seeded: ``--simulate`` reproduces the shipped file bit
for bit.

``--admission idle`` does the same for ``admission="idle"`` (a new request enters the run queue
only when no request in flight is runnable; no slice delay), whose formula's body is as far off
(13-27 % low at p10-p50 for scv 1-2 at 30-60 % CPU): slices 2/3/5/8/13/20 (:data:`IDLE_SLICES`;
an idle simulation costs about twice a FIFO one, and 50 slices alone would double the grid),
the same laws and loads, 468 points, seeds from ``SEED0 + 100000``, into
``capacity/tables/rr_idle_quantiles.csv``.
"""
from __future__ import annotations

import argparse
import itertools
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import capacity  # noqa: E402
from capacity import Service  # noqa: E402
from capacity.sim import simulate  # noqa: E402

TABLE_FILE = {"fifo": ROOT / "capacity" / "tables" / "rr_fifo_quantiles.csv",
              "idle": ROOT / "capacity" / "tables" / "rr_idle_quantiles.csv"}
#: Probabilities at which the quantiles are kept (the package reads them from the file's columns).
LEVELS = (0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999)
RHO = (0.15, 0.3, 0.5, 0.65, 0.8, 0.9)
SLICES = (2, 3, 5, 8, 13, 20, 50)
IDLE_SLICES = (2, 3, 5, 8, 13, 20)
#: Seed offset of each admission rule's grid.
SEED_OFFSET = {"fifo": 0, "idle": 100_000}
#: (family, scv): the laws of the grid; deterministic is the scv-0 end of gamma and lognormal,
#: exponential (gamma scv 1) the scv-1 end of hyperexponential.
LAWS = (("deterministic", 0.0),
        *(("gamma", s) for s in (0.25, 0.5, 1.0, 2.0, 4.0)),
        *(("lognormal", s) for s in (0.25, 0.5, 1.0, 2.0, 4.0)),
        ("hyperexponential", 2.0), ("hyperexponential", 4.0))
BASE_REQUESTS = 1e6
MAX_REQUESTS = 5e6
WARMUP_SHARE = 0.01
BATCHES = 30
LEVEL = 0.99
SEED0 = 20261205

#: Off-grid points for --held-out: (family, scv, slices, rho).
HELD_OUT = (("gamma", 0.7, 4, 0.4), ("gamma", 1.5, 10, 0.7), ("gamma", 3.0, 6, 0.85),
            ("lognormal", 0.7, 4, 0.55), ("lognormal", 1.5, 10, 0.75), ("lognormal", 3.0, 30, 0.6),
            ("hyperexponential", 3.0, 4, 0.7), ("exponential", 1.0, 7, 0.6), ("gamma", 0.35, 16, 0.85),
            ("lognormal", 0.35, 2, 0.25), ("gamma", 1.0, 3, 0.7), ("lognormal", 2.0, 8, 0.45))


def requests_at(rho: float) -> float:
    """Requests simulated at utilisation ``rho`` (the relative noise grows like 1 / (1 - rho))."""
    return min(MAX_REQUESTS, BASE_REQUESTS * max(1.0, (0.5 / (1.0 - rho)) ** 2))


def grid_points(admission: str = "fifo") -> list[dict]:
    slices = SLICES if admission == "fifo" else IDLE_SLICES
    return [{"index": i, "seed": SEED0 + SEED_OFFSET[admission] + i, "family": fam, "scv": scv, "slices": k,
             "rho": rho, "requests": requests_at(rho), "admission": admission}
            for i, ((fam, scv), k, rho) in enumerate(itertools.product(LAWS, slices, RHO))]


def service(family: str, scv: float) -> Service:
    if family == "deterministic":
        return Service.deterministic(1.0)
    if family == "exponential":
        return Service.exponential(1.0)
    return Service.from_moments(1.0, scv, family)


def simulate_point(p: dict) -> dict:
    """The quantiles of one point and their batch-means half-widths."""
    rho = p["rho"]
    horizon = p["requests"] / rho
    run = simulate(rho, service(p["family"], p["scv"]), discipline="rr", slices=p["slices"], horizon=horizon,
                   seed=p["seed"], keep="requests", max_memory=4e9, admission=p.get("admission", "fifo"))
    req = run.requests
    t = req.loc[req["arrival"] >= WARMUP_SHARE * horizon, "response"].to_numpy()
    row = {key: value for key, value in p.items() if key != "admission"}
    row["simulated"] = t.size
    levels = np.array(LEVELS)
    row.update({f"q{q:g}": v for q, v in zip(LEVELS, np.quantile(t, levels))})
    # Batch means over consecutive requests: the spread of the batch quantiles, as
    # SimulationResult.confidence_interval does it, for all levels at once.
    n = t.size // BATCHES
    per_batch = np.quantile(t[:n * BATCHES].reshape(BATCHES, n), levels, axis=1)
    hw = stats.t.ppf(0.5 + LEVEL / 2, BATCHES - 1) * per_batch.std(axis=1, ddof=1) / np.sqrt(BATCHES)
    row.update({f"hw{q:g}": v for q, v in zip(LEVELS, hw)})
    return row


def _header(seconds: float, jobs: int, admission: str = "fifo") -> str:
    flag = "" if admission == "fifo" else f" --admission {admission}"
    lines = [
        f"Exact simulations of event-loop round robin (admission='{admission}', no slice delay, one core, E[S] = 1):",
        "the response time's quantiles that capacity._rr_body turns into a correction of capacity.rr's formula.",
        f"Regenerate: python tools/build_rr_body_table.py{flag} --simulate (seeded: bit for bit).",
        (f"Made with capacity {capacity.__version__}, numpy {np.__version__}, Python {platform.python_version()}; "
         f"{seconds / 60:.0f} min wall time with {jobs} process(es)."),
        "Each row: capacity.sim.simulate(rho, <law of mean 1 and scv>, discipline='rr', slices=slices,",
        f"  admission='{admission}', horizon=requests/rho, seed=seed); quantiles q<p> of the responses of requests arriving after",
        f"  {WARMUP_SHARE:g} * horizon; hw<p> = {LEVEL:g} batch-means half-width ({BATCHES} batches).",
        f"Grid: laws {LAWS}; slices {SLICES if admission == 'fifo' else IDLE_SLICES}; rho {RHO};",
        f"  requests = min({MAX_REQUESTS:g}, {BASE_REQUESTS:g} * max(1, (0.5/(1-rho))^2)); "
        f"seed = {SEED0 + SEED_OFFSET[admission]} + index.",
    ]
    return "".join(f"# {line}\n" for line in lines)


def run(points: list[dict], jobs: int) -> tuple[pd.DataFrame, float]:
    order = sorted(range(len(points)), key=lambda i: -points[i]["requests"] * (2 + points[i]["slices"]))
    rows: dict[int, dict] = {}
    t0 = time.time()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for i, row in zip(order, pool.map(simulate_point, [points[i] for i in order])):
            rows[i] = row
            print(f"{len(rows)}/{len(points)} {row['family']} scv {row['scv']} k {row['slices']} rho {row['rho']}: "
                  f"p50 {row['q0.5']:.3f} p99 {row['q0.99']:.3f} ({time.time() - t0:.0f} s)", file=sys.stderr,
                  flush=True)
    return pd.DataFrame([rows[i] for i in range(len(points))]), time.time() - t0


def held_out(jobs: int, admission: str = "fifo") -> pd.DataFrame:
    """The corrected and uncorrected model against fresh simulations at off-grid points."""
    from capacity import rr
    from capacity.rr import _fifo_correction, _idle_correction

    correction = _fifo_correction if admission == "fifo" else _idle_correction
    points = [{"index": i, "seed": SEED0 + SEED_OFFSET[admission] + 10_000 + i, "family": f, "scv": s, "slices": k,
               "rho": r, "requests": requests_at(r), "admission": admission} for i, (f, s, k, r) in enumerate(HELD_OUT)]
    df, _ = run(points, jobs)
    out = []
    levels = np.array(LEVELS)
    for _, row in df.iterrows():
        svc = service(row["family"], row["scv"])
        sim = row[[f"q{q:g}" for q in LEVELS]].to_numpy(float)
        hw = row[[f"hw{q:g}" for q in LEVELS]].to_numpy(float)
        now = np.asarray(rr.response_quantile(levels, row["rho"], svc, slices=int(row["slices"]), admission=admission))
        factor = correction(levels, row["rho"], float(row["slices"]), svc, 1)
        before = now / factor
        for q, s, h, b, a in zip(LEVELS, sim, hw, before, now):
            out.append({"family": row["family"], "scv": row["scv"], "slices": row["slices"], "rho": row["rho"],
                        "q": q, "sim": s, "hw_pct": 100 * h / s, "formula_pct": 100 * (b / s - 1),
                        "corrected_pct": 100 * (a / s - 1)})
    return pd.DataFrame(out)


def idle_grid() -> pd.DataFrame:
    """The idle model with and without its measured correction against the 270 simulations of
    ``tools/calibrate_rr.py``'s idle grid (slice delays 0-5 mean slices; p50, p90, p99, p99.9):
    model / simulation - 1, percent.  The correction is measured at zero delay only; this is
    what it does where the gaps matter."""
    from capacity import rr

    grid_file = ROOT / "capacity" / "tables" / "rr_calibration.csv"
    cal = pd.read_csv(grid_file, comment="#")
    cal = cal[cal["grid"] == "idle"]
    laws = {0.0: Service.deterministic(1.0), 1.0: Service.exponential(1.0),
            2.0: Service.hyperexponential(1.0, 2.0)}
    stats_at = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}
    levels = np.array(list(stats_at.values()))
    out = []
    for _, row in cal.iterrows():
        svc, rho, k, d = laws[float(row["scv"])], float(row["rho"]), int(row["slices"]), float(row["slice_delay"])
        sim = row[list(stats_at)].to_numpy(float)
        now = np.asarray(rr.response_quantile(levels, rho, svc, slices=k, slice_delay=d, admission="idle"))
        t_f = np.asarray(rr._fcfs_quantile(levels, rho, svc, 1), dtype=float)
        t_r0 = rr._unit_formula(svc, np.array([[rho]]), levels, np.array([float(k)]))[0, 0]
        before = rr._idle(t_f, t_r0, np.asarray(svc.ppf(levels), float), rho, float(k), d, 1.0,
                          rr._q_params(levels, rr._IDLE_Q))
        for name, s_, b_, a_ in zip(stats_at, sim, before, now):
            out.append({"rho": rho, "slices": k, "scv": row["scv"], "gap": row["gap"], "stat": name,
                        "formula_pct": 100 * (b_ / s_ - 1), "corrected_pct": 100 * (a_ / s_ - 1)})
    return pd.DataFrame(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulate", action="store_true", help="simulate the grid into the shipped table")
    parser.add_argument("--held-out", action="store_true", help="measure the corrected model off the grid")
    parser.add_argument("--idle-grid", action="store_true",
                        help="the idle model with and without the correction on calibrate_rr's idle grid")
    parser.add_argument("--admission", choices=("fifo", "idle"), default="fifo")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, help="the table file (default: the shipped one of --admission)")
    args = parser.parse_args(argv)
    if args.simulate:
        df, seconds = run(grid_points(args.admission), args.jobs)
        with open(args.out or TABLE_FILE[args.admission], "w") as f:
            f.write(_header(seconds, args.jobs, args.admission))
            df.to_csv(f, index=False, float_format="%.6g")
    if args.held_out:
        err = held_out(args.jobs, args.admission)
        pd.set_option("display.width", 200)
        print(err.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        for name, part in (("body p1-p80", err[err["q"] <= 0.8]), ("p90-p99.9", err[err["q"] >= 0.9])):
            print(f"{name}: formula max |err| {part['formula_pct'].abs().max():.1f} % "
                  f"(rms {np.sqrt((part['formula_pct'] ** 2).mean()):.1f}), corrected max "
                  f"{part['corrected_pct'].abs().max():.1f} % (rms {np.sqrt((part['corrected_pct'] ** 2).mean()):.1f})")
    if args.idle_grid:
        err = idle_grid()
        for gap_part, part in (("no gaps", err[err["gap"] == 0]), ("gaps 0.25-5 slices", err[err["gap"] > 0])):
            for stat, e in part.groupby("stat", sort=False):
                print(f"{gap_part:>18} {stat:>5}: formula max |err| {e['formula_pct'].abs().max():5.1f} % "
                      f"(rms {np.sqrt((e['formula_pct'] ** 2).mean()):4.1f}), corrected max "
                      f"{e['corrected_pct'].abs().max():5.1f} % (rms {np.sqrt((e['corrected_pct'] ** 2).mean()):4.1f})")
    if not (args.simulate or args.held_out or args.idle_grid):
        parser.error("give --simulate, --held-out and/or --idle-grid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
