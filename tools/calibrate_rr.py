#!/usr/bin/env python3
"""Calibrate ``capacity.rr`` against the exact simulator: simulate the grid, fit the constants, check them.

Usage (from the repository root)::

    python tools/calibrate_rr.py --simulate [--jobs 2]   # re-run both grids into capacity/tables/rr_calibration.csv
    python tools/calibrate_rr.py --fit                   # fit the constants from that file; print them and the errors
    python tools/calibrate_rr.py --check                 # exit 0 iff capacity.rr's constants are the fit's (3 digits)

``capacity.rr`` approximates the event-loop round robin with a formula whose constants were
fitted to exact simulations; this script holds the whole chain so that anyone can regenerate
the simulations and refit or check the constants:

1. **The grid** (:data:`GRIDS`).  ``fifo``: 80 points, utilisation 0.3/0.5/0.7/0.8/0.9 x slices
   2/5/10/50 x scv 0/0.5/1/2 (deterministic, Erlang-2, exponential, H2), no slice delay, 4e5
   requests per point.  ``idle``: 270 points, ``admission="idle"``, utilisation as above x slices
   2/5/10 x scv 0/1/2 x gap 0/0.25/0.5/1/2/5 (the slice delay over the mean slice, ``x = d k /
   E[S]``), 1.5e5 requests per point.  Both scale the requests by ``max(1, (0.5 / (1 - rho))^2)``
   (x25 at 0.9: 1e7 and 3.75e6), because the relative noise of a simulated statistic grows like
   ``1 / (1 - rho)``.
2. **The simulation** of a point (:func:`simulate_point`): ``capacity.sim.simulate(rho, law,
   discipline="rr", slices=k, slice_delay=gap / k, admission=..., horizon=requests / rho,
   seed=7 + index)``, one core, E[S] = 1, the first 1 % of the run dropped; the mean and the
   p50/p90/p99/p99.9 of the response time with their 99 % batch-means half-widths (30 batches,
   :meth:`~capacity.sim.SimulationResult.confidence_interval`).  The simulator is exact and
   seeded, so ``--simulate`` reproduces the shipped file bit for bit.
3. **The fit** (:func:`fit`), from the shipped file alone.  For every point the FCFS and PS
   values come from :mod:`capacity.fcfs` / :mod:`capacity.ps` (as the package computes them) and
   the model from ``capacity.rr``'s own formula functions with trial constants, so the fit and the
   package cannot drift apart.  Each statistic (mean, p90, p99, p99.9) is fitted on its own by
   least squares of the residuals ``(model - sim) / s``: first ``(beta, gamma, delta)`` on the
   fifo grid with ``s = sim`` (relative errors; ``delta`` bounded to [-0.9, 3], so that ``1 +
   delta rho`` stays positive), then, with those constants rounded to 4 decimals, ``(a1, a2, a3,
   c1, c2, c3)`` on the idle grid with ``s = sqrt((0.01 sim)^2 + hw^2)`` (1 % of the value and
   the simulation's 99 % half-width ``hw``).
4. **The check** (:func:`check`): the constants in ``capacity.rr`` must equal the fit's to 3
   significant digits.

See the ``capacity/rr.py`` module docstring for the formula, and the header of the shipped file
for its provenance.

History.  The idle grid is the one the 0.1.0 constants were fitted to: this script's 0.1.0
version with ``--gap 0,0.25,0.5,1,2,5`` (its default listed five gaps) gives these 270 rows bit
for bit, and the fit above, given that release's fifo constants, reproduces its idle constants
from them to 3 significant digits for the mean, p99 and p99.9 (its p90 row was not the optimum of the objective: weighted
sum of squares 383.8 against 381.3).  The fifo grid of 0.1.0 (4e5 requests at every load) left
no code or seeds; it was re-simulated here with more requests near saturation and the fifo
constants refitted, which moved the idle ones too.
"""
from __future__ import annotations

import argparse
import io
import itertools
import math
import platform
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import capacity
from capacity import Service, fcfs, ps, rr
from capacity.sim import simulate

GRID_FILE = ROOT / "capacity" / "tables" / "rr_calibration.csv"

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}
FITTED = ("mean", "p90", "p99", "p999")  # the statistics with constants (the median is not modelled)
# The service laws by scv, each of mean 1 (the labels go into the grid file).
LAWS = {0.0: ("deterministic", lambda: Service.deterministic(1.0)),
        0.5: ("erlang2", lambda: Service.erlang(1.0, 2)),
        1.0: ("exponential", lambda: Service.exponential(1.0)),
        2.0: ("hyperexponential2", lambda: Service.hyperexponential(1.0, 2.0))}
WARMUP_SHARE = 0.01  # the first 1 % of each run is dropped (initial transient)
LEVEL, BATCHES = 0.99, 30  # the batch-means half-widths


@dataclass(frozen=True)
class Grid:
    """One calibration grid: every combination of its axes, in ``itertools.product`` order.

    Point ``n`` (0-based, in that order) is simulated with seed ``seed + n`` and ``requests``
    requests, times ``max(1, (0.5 / (1 - rho))^2)`` if ``scale_with_load``."""

    admission: str
    rho: tuple[float, ...]
    slices: tuple[int, ...]
    scv: tuple[float, ...]
    gap: tuple[float, ...]
    requests: int
    scale_with_load: bool
    seed: int = 7

    def points(self) -> list[dict]:
        out = []
        for n, (rho, k, scv, gap) in enumerate(itertools.product(self.rho, self.slices, self.scv, self.gap)):
            factor = max(1.0, (0.5 / (1.0 - rho)) ** 2) if self.scale_with_load else 1.0
            out.append({"grid": self.admission, "index": n, "seed": self.seed + n, "rho": rho, "slices": k,
                        "scv": scv, "service": LAWS[scv][0], "gap": gap, "admission": self.admission,
                        "requests": int(self.requests * factor)})
        return out


GRIDS = {
    # The grid of the FIFO constants (_MEAN_PARAMS, _Q_PARAMS).
    "fifo": Grid("fifo", rho=(0.3, 0.5, 0.7, 0.8, 0.9), slices=(2, 5, 10, 50), scv=(0.0, 0.5, 1.0, 2.0),
                 gap=(0.0,), requests=400_000, scale_with_load=True),
    # The grid of the admission="idle" constants (_IDLE_MEAN, _IDLE_Q).
    "idle": Grid("idle", rho=(0.3, 0.5, 0.7, 0.8, 0.9), slices=(2, 5, 10), scv=(0.0, 1.0, 2.0),
                 gap=(0.0, 0.25, 0.5, 1.0, 2.0, 5.0), requests=150_000, scale_with_load=True),
}

# The constants of capacity.rr, by name: rows are the statistics of FITTED (the mean constants are
# one tuple, the quantile tables one row per level p90, p99, p99.9), columns their parameters.
CONSTANTS = {"fifo": ("_MEAN_PARAMS", "_Q_PARAMS", ("beta", "gamma", "delta")),
             "idle": ("_IDLE_MEAN", "_IDLE_Q", ("a1", "a2", "a3", "c1", "c2", "c3"))}


# ---------------------------------------------------------------------------- simulation
def simulate_point(p: dict) -> dict:
    """Simulate one grid point (a row of :meth:`Grid.points`): the statistics and half-widths."""
    rho, k = p["rho"], p["slices"]
    horizon = p["requests"] / rho
    warm = WARMUP_SHARE * horizon
    run = simulate(rho, LAWS[p["scv"]][1](), discipline="rr", slices=k, slice_delay=p["gap"] / k,
                   admission=p["admission"], horizon=horizon, seed=p["seed"])
    row = dict(p, slice_delay=p["gap"] / k, horizon=horizon, warmup=warm, simulated=len(run.requests))
    row["mean"] = float(run.mean_response(warm))
    row["mean_hw"] = float(run.confidence_interval("mean", LEVEL, BATCHES, warm).half_width)
    for name, q in QUANTILES.items():
        row[name] = float(run.response_quantile(q, warm))
        row[name + "_hw"] = float(run.confidence_interval(q, LEVEL, BATCHES, warm).half_width)
    return row


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "capacity"], capture_output=True,
                               text=True, check=True).stdout.strip()
        return out + (" (capacity/ has uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _header(grids: list[str], seconds: float, jobs: int) -> str:
    lines = [
        "Exact simulations of the event-loop round robin: the calibration grid of capacity.rr.",
        "Regenerate: python tools/calibrate_rr.py --simulate ; fit and check: --fit / --check.",
        (f"Made with capacity {capacity.__version__} at git {_git_commit()}, numpy {np.__version__}, "
         f"Python {platform.python_version()}; {seconds / 60:.0f} min wall time with {jobs} process(es)."),
        "Each row: capacity.sim.simulate(rho, <service>, discipline='rr', slices=slices,",
        "  slice_delay=gap/slices, admission=admission, horizon=requests/rho, seed=seed), one core,",
        "  Poisson arrivals, mean service 1 s; statistics of the response time over the requests",
        f"  arriving after warmup = {WARMUP_SHARE:g} * horizon; *_hw = {LEVEL:g} batch-means half-width",
        f"  ({BATCHES} batches, SimulationResult.confidence_interval). 'simulated' = rows of the run.",
        "Service laws: deterministic(1), erlang(1, 2), exponential(1), hyperexponential(1, scv=2).",
        "Grids (tools/calibrate_rr.py GRIDS): seed = 7 + index in itertools.product(rho, slices, scv, gap):",
    ]
    for name in grids:
        g = GRIDS[name]
        lines.append(f"  {name}: rho {g.rho} slices {g.slices} scv {g.scv} gap {g.gap}, {g.requests} requests"
                     + (" x max(1, (0.5/(1-rho))^2)" if g.scale_with_load else " per point"))
    return "".join(f"# {line}\n" for line in lines)


def run_simulations(grids: list[str], out: Path, jobs: int = 1) -> pd.DataFrame:
    """Simulate the named grids (in parallel over ``jobs`` processes) and write ``out``."""
    points = [p for name in grids for p in GRIDS[name].points()]
    # The slowest points first, so the processes finish together.
    order = sorted(range(len(points)), key=lambda i: -points[i]["requests"] * points[i]["slices"])
    rows: dict[int, dict] = {}
    t0 = time.time()
    partial = out.with_suffix(".partial.csv")
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for i, row in zip(order, pool.map(simulate_point, [points[i] for i in order])):
            rows[i] = row
            if len(rows) % 10 == 0 or len(rows) == len(points):
                pd.DataFrame([rows[j] for j in sorted(rows)]).to_csv(partial, index=False)
            print(f"{len(rows)}/{len(points)} {row['grid']} rho {row['rho']} k {row['slices']} scv {row['scv']} "
                  f"gap {row['gap']}: mean {row['mean']:.3f} p99 {row['p99']:.3f} ({time.time() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
    df = pd.DataFrame([rows[i] for i in range(len(points))])
    with open(out, "w") as f:
        f.write(_header(grids, time.time() - t0, jobs))
        df.to_csv(f, index=False)
    partial.unlink(missing_ok=True)
    return df


def read_grid(path: Path = GRID_FILE) -> pd.DataFrame:
    """The shipped grid (one row per simulated point; see its header)."""
    # Exact floats back (the file holds them as repr): pandas 3 parses them so by default and
    # deprecates the option that pandas 2 needs.
    exact = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
    return pd.read_csv(path, comment="#", **exact)


# ---------------------------------------------------------------------------- the model
def references(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per row: the FCFS and PS values of every fitted statistic and its zero-load value (the
    service time's mean or quantile), from the package, one vectorised call per law."""
    n = len(df)
    ref = {f"{kind}_{s}": np.full(n, np.nan) for kind in ("fcfs", "ps", "base") for s in FITTED}
    for scv, rows in df.groupby("scv").indices.items():
        svc = LAWS[float(scv)][1]()
        # The queue values depend on (law, rho) only: compute each distinct utilisation once.
        rho, at = np.unique(df["rho"].to_numpy()[rows], return_inverse=True)
        ref["fcfs_mean"][rows] = np.asarray(fcfs.mean_response(rho, svc))[at]
        ref["ps_mean"][rows] = np.asarray(ps.mean_response(rho, svc))[at]
        ref["base_mean"][rows] = svc.mean
        for s in FITTED[1:]:
            ref[f"fcfs_{s}"][rows] = np.asarray(rr._fcfs_quantile(QUANTILES[s], rho, svc, 1))[at]
            ref[f"ps_{s}"][rows] = np.asarray(rr._ps_quantile(QUANTILES[s], rho, svc, 1))[at]
            ref[f"base_{s}"][rows] = svc.ppf(QUANTILES[s])
    for col in ("rho", "slices", "scv", "slice_delay"):
        ref[col] = df[col].to_numpy(dtype=float)
    return ref


def model(ref: dict, stat: str, fifo_params, idle_params=None, idle_scale=1.0) -> np.ndarray:
    """capacity.rr's value of ``stat`` at every row with the given constants (``idle_params``
    None: admission="fifo"), computed by rr's own formula functions, before the measured
    corrections of :mod:`capacity._rr_body` (``idle_scale``: the idle one, to compare with rr)."""
    es = np.ones_like(ref["rho"])
    t_f, t_p = ref[f"fcfs_{stat}"], ref[f"ps_{stat}"]
    t_r0 = rr._fifo(t_f, t_p, es, ref["rho"], ref["scv"], ref["slices"], fifo_params)
    if idle_params is None:
        return t_r0 + (ref["slices"] - 1.0) * ref["slice_delay"]
    return rr._idle(t_f, t_r0, ref[f"base_{stat}"], ref["rho"], ref["slices"], ref["slice_delay"], es,
                    idle_params, idle_scale)


def package_constants() -> dict[str, np.ndarray]:
    """The constants as capacity.rr holds them now: (rows of FITTED) x parameters per grid."""
    out = {}
    for grid, (mean_name, q_name, _) in CONSTANTS.items():
        out[grid] = np.vstack([np.asarray(getattr(rr, mean_name), dtype=float)[None, :],
                               np.asarray(getattr(rr, q_name), dtype=float)])
    return out


# ---------------------------------------------------------------------------- the fit
# Bounds and starting points: delta >= -0.9 keeps 1 + delta rho > 0 on the grid; the idle
# starting point is the middle of the interpolation (w = 1/2) with no overlap.
_FIFO_BOUNDS = ([0.05, 0.0, -0.9], [3.0, 5.0, 3.0])
_FIFO_START = (0.5, 0.2, 0.0)
_IDLE_START = (0.5, 0.0, 0.0, 0.5, 0.0, 0.0)


def _sigma(df: pd.DataFrame, stat: str, grid: str) -> np.ndarray:
    """The residual scale: the simulated value (fifo: relative errors), or 1 % of it and the
    simulation's 99 % half-width (idle)."""
    sim = df[stat].to_numpy()
    return sim if grid == "fifo" else np.hypot(0.01 * sim, df[stat + "_hw"].to_numpy())


def _solve(residual, start, bounds=(-np.inf, np.inf)) -> np.ndarray:
    sol = least_squares(residual, np.asarray(start, dtype=float), bounds=bounds, method="trf",
                        x_scale=1.0, xtol=1e-14, ftol=1e-14, gtol=1e-14, max_nfev=20_000)
    return sol.x


def fit(df: pd.DataFrame | None = None, ref: dict | None = None) -> dict[str, np.ndarray]:
    """The constants fitted to the grid, rounded to 4 decimals as capacity.rr holds them:
    ``{"fifo": 4 x 3, "idle": 4 x 6}`` (rows: mean, p90, p99, p99.9)."""
    df = read_grid() if df is None else df
    fifo_rows = (df["grid"] == "fifo").to_numpy()
    idle_rows = (df["grid"] == "idle").to_numpy()
    ref = references(df) if ref is None else ref
    sub = {key: {k: v[rows] for k, v in ref.items()} for key, rows in (("fifo", fifo_rows), ("idle", idle_rows))}
    out = {"fifo": np.zeros((len(FITTED), 3)), "idle": np.zeros((len(FITTED), 6))}
    for i, stat in enumerate(FITTED):
        sim, s = df[stat].to_numpy()[fifo_rows], _sigma(df[fifo_rows], stat, "fifo")
        x = _solve(lambda p, stat=stat, sim=sim, s=s: (model(sub["fifo"], stat, p) - sim) / s, _FIFO_START,
                   _FIFO_BOUNDS)
        out["fifo"][i] = np.round(x, 4)
    for i, stat in enumerate(FITTED):
        sim, s = df[stat].to_numpy()[idle_rows], _sigma(df[idle_rows], stat, "idle")
        fifo_p = tuple(out["fifo"][i])
        x = _solve(lambda p, stat=stat, fifo_p=fifo_p, sim=sim, s=s: (model(sub["idle"], stat, fifo_p, p) - sim) / s,
                   _IDLE_START)
        out["idle"][i] = np.round(x, 4)
    return out


def same_to_3_digits(a: float, b: float) -> bool:
    """|a - b| within half a unit of the third significant digit of the larger."""
    big = max(abs(a), abs(b))
    return big == 0 or abs(a - b) <= 0.5 * 10.0 ** (math.floor(math.log10(big)) - 2)


def check(fitted: dict[str, np.ndarray] | None = None) -> list[str]:
    """Every constant of capacity.rr that differs from the fit beyond 3 significant digits,
    as messages naming it (empty: all match)."""
    fitted = fit() if fitted is None else fitted
    have = package_constants()
    problems = []
    for grid, (mean_name, q_name, params) in CONSTANTS.items():
        for i, stat in enumerate(FITTED):
            for j, par in enumerate(params):
                a, b = float(have[grid][i, j]), float(fitted[grid][i, j])
                if not same_to_3_digits(a, b):
                    name = f"{mean_name}[{j}]" if i == 0 else f"{q_name}[{i - 1}, {j}]"
                    problems.append(f"capacity.rr.{name} ({stat} {par}) is {a:g}, the fit gives {b:g}")
    return problems


# ---------------------------------------------------------------------------- error tables
def errors(df: pd.DataFrame, constants: dict[str, np.ndarray], ref: dict | None = None) -> pd.DataFrame:
    """Model / simulation - 1 (percent) of every fitted statistic at every grid row."""
    ref = references(df) if ref is None else ref
    out = df[["grid", "rho", "slices", "scv", "gap"]].copy()
    for i, stat in enumerate(FITTED):
        fifo_p = tuple(constants["fifo"][i])
        idle = (df["grid"] == "idle").to_numpy()
        m = np.where(idle, model(ref, stat, fifo_p, tuple(constants["idle"][i])), model(ref, stat, fifo_p))
        out[stat] = 100.0 * (m / df[stat].to_numpy() - 1.0)
    return out


def error_table(err: pd.DataFrame, grid: str, before: pd.DataFrame | None = None) -> str:
    """The largest error in size per (rho, slices) over the other axes, then the grid's maxima and
    rms; with ``before`` (the errors of other constants), each figure is followed by its own there."""
    def summary(e: pd.DataFrame):
        e = e[e["grid"] == grid]

        def signed_max(x):
            return x.iloc[int(np.argmax(np.abs(x.to_numpy())))]

        return (e.groupby(["rho", "slices"])[list(FITTED)].agg(signed_max),
                {s: e[s].abs().max() for s in FITTED}, {s: float(np.sqrt(np.mean(e[s] ** 2))) for s in FITTED})

    cells, peak, rms = summary(err)
    old = summary(before) if before is not None else None
    width = 6 if old is None else 14
    names = {"mean": "mean", "p90": "p90", "p99": "p99", "p999": "p99.9"}
    lines = ["    rho     k  " + "".join(f"{names[s]:>{width}}" for s in FITTED)]
    for (rho, k), r in cells.iterrows():
        figs = [f"{r[s]:+.1f}" + ("" if old is None else f" ({old[0].loc[(rho, k), s]:+.1f})") for s in FITTED]
        lines.append(f"    {rho:<5g} {k:>3d}  " + "".join(f"{f:>{width}}" for f in figs))
    for label, now, then in (("max |error|", peak, old and old[1]), ("rms error", rms, old and old[2])):
        lines.append(f"    {label + ':':<13}" + ", ".join(
            f"{names[s]} {now[s]:.1f}" + ("" if then is None else f" ({then[s]:.1f})") for s in FITTED) + " %")
    return "\n".join(lines)


def format_constants(fitted: dict[str, np.ndarray]) -> str:
    """The fitted constants as the Python lines of capacity/rr.py."""
    buf = io.StringIO()
    for grid, (mean_name, q_name, _) in CONSTANTS.items():
        rows = fitted[grid]
        buf.write(f"{mean_name} = ({', '.join(f'{v:.4f}' for v in rows[0])})\n")
        body = (",\n" + " " * (len(q_name) + 13)).join("[" + ", ".join(f"{v:.4f}" for v in r) + "]" for r in rows[1:])
        buf.write(f"{q_name} = np.array([{body}])\n")
    return buf.getvalue()


# ---------------------------------------------------------------------------- command line
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--simulate", action="store_true", help="re-run the simulations and write the grid file")
    what.add_argument("--fit", action="store_true", help="fit the constants from the grid file and print them")
    what.add_argument("--check", action="store_true", help="exit 1 unless capacity.rr's constants are the fit's")
    p.add_argument("--grid-file", type=Path, default=GRID_FILE, help="the grid file (default: the shipped one)")
    p.add_argument("--grids", default="fifo,idle", help="with --simulate: which grids (fifo, idle)")
    p.add_argument("--jobs", type=int, default=1, help="with --simulate: processes to use")
    a = p.parse_args(argv)
    if a.simulate:
        grids = [g for g in a.grids.split(",") if g]
        unknown = set(grids) - set(GRIDS)
        if unknown:
            p.error(f"unknown grid(s) {sorted(unknown)}; choose from {sorted(GRIDS)}")
        run_simulations(grids, a.grid_file, a.jobs)
        return 0
    df = read_grid(a.grid_file)
    ref = references(df)
    fitted = fit(df, ref)
    if a.fit:
        print("# fitted constants (paste into capacity/rr.py)")
        print(format_constants(fitted))
        err, before = errors(df, fitted, ref), errors(df, package_constants(), ref)
        for grid in GRIDS:
            print(f"# {grid} grid: model / simulation - 1 (percent), largest in size over the other axes, "
                  "with the fit (with capacity.rr's constants as they are)")
            print(error_table(err, grid, before))
        return 0
    problems = check(fitted)
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print(f"{len(problems)} constant(s) of capacity.rr differ from the fit to {a.grid_file}; "
              "run tools/calibrate_rr.py --fit", file=sys.stderr)
        return 1
    print(f"capacity.rr's constants match the fit to {a.grid_file.name} ({len(df)} points) to 3 significant digits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
