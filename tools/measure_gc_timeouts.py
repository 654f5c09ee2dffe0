"""gc_whatif's timeout fraction against the pause simulation: the figures in gc_whatif's Notes.

Runs ``_simulate_pauses`` (``tests/test_plan_gc.py``: the queue in unpaused time, Poisson pauses
that stop every core, arrivals during a pause entering at its start) on the grid the *Timeouts*
Notes of :func:`capacity.plan.gc_whatif` describe -- pauses of 10 ms, 100 ms, 500 ms and 2 s
taking 3 % of the wall time, exponential requests of 2-20 ms (2 ms with 10 ms pauses, 5 ms with
100 ms, 20 ms with 500 ms and 2 s), rho_x 0.2, 0.5 and 0.85, constant and exponential pauses,
timeouts of 0.5, 0.9, 1.5 and 3 pauses -- FCFS on 1 and 2 cores, PS on one core (pauses of
10-500 ms), and prints per point the model, the simulated share with its 95 % interval (Student t
over the replications) and the error, then the summary: median |error|, the share of points
within the interval plus 10 % and plus 20 % of the simulated share, and the worst errors.  Only
points with a simulated share above 1e-4 count.

    nice -n 10 python tools/measure_gc_timeouts.py [--discipline ps|fcfs|both] [--reps 4] [--n 250000]
                                                   [--ps-cores 1 2]

The default -- 4 replications of 2.5 x 10^5 requests per setting (up to 10^6 where the pauses
are rare per request, so that each run sees about 10^3 of them), fewer than the Notes' first
FCFS figures used -- takes about 20 CPU seconds for FCFS (48 settings) and 1 CPU minute for PS
(18 settings per core count); the PS figures in the Notes and in the table of
:mod:`capacity.plan._gc_ps_pileup` (one core) were measured with it.  The interval
shrinks with more requests (``--n 1000000``, about 4x the time).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_plan_gc import _model_of_simulation, _simulate_pauses  # noqa: E402

from capacity.sim._engines import _fcfs, _ps  # noqa: E402

PAUSED = 0.03                                    # share of the wall time in pauses
CPU = {0.01: 0.002, 0.1: 0.005, 0.5: 0.020, 2.0: 0.020}
TIMEOUTS = (0.5, 0.9, 1.5, 3.0)                  # in pauses


def settings(discipline: str, ps_cores: tuple[int, ...] = (1,)):
    pauses = (0.01, 0.1, 0.5) if discipline == "ps" else (0.01, 0.1, 0.5, 2.0)
    cores = ps_cores if discipline == "ps" else (1, 2)
    for pause in pauses:
        for pause_scv in (0.0, 1.0):
            for rho_x in (0.2, 0.5, 0.85):
                for servers in cores:
                    yield pause, pause_scv, rho_x, servers


def measure(discipline: str, reps: int, n: int, ps_cores: tuple[int, ...] = (1,)) -> list[dict]:
    engine = _ps if discipline == "ps" else _fcfs
    rows = []
    for pause, pause_scv, rho_x, servers in settings(discipline, ps_cores):
        cpu = CPU[pause]
        lam = rho_x * servers / cpu
        alpha = PAUSED / (1 - PAUSED) / pause        # pauses per unpaused second
        # Long pauses are rare per request: more requests so that each run sees ~10^3 of them.
        size = int(max(n, min(4 * n, 1000 / (alpha / lam))))
        sims = [_simulate_pauses(lam, cpu, servers, alpha, pause, size, seed, pause_scv, engine=engine)
                for seed in range(reps)]
        for k in TIMEOUTS:
            timeout = k * pause
            fr = np.array([(r > timeout).mean() for r in sims])
            half = stats.t.ppf(0.975, reps - 1) * fr.std(ddof=1) / np.sqrt(reps)
            model = float(_model_of_simulation(lam, cpu, servers, alpha, pause, timeout, pause_scv, discipline))
            rows.append(dict(pause=pause, scv=pause_scv, rho_x=rho_x, c=servers, k=k, model=model,
                             sim=fr.mean(), half=half))
    return rows


def summary(rows: list[dict], label: str) -> None:
    print(f"\n{label}: {'pause':>6} {'scv':>3} {'rho_x':>5} {'c':>1} {'T/V':>4} {'model':>10} {'sim':>10} "
          f"{'+-95%':>9} {'error':>7}")
    kept = []
    for r in rows:
        err = r["model"] / r["sim"] - 1 if r["sim"] > 0 else np.inf
        mark = "" if r["sim"] > 1e-4 else "  (share <= 1e-4: not counted)"
        print(f"{'':{len(label) + 1}} {1000 * r['pause']:5.0f}ms {r['scv']:3.0f} {r['rho_x']:5.2f} {r['c']:1d} "
              f"{r['k']:4.1f} {r['model']:10.3e} {r['sim']:10.3e} {r['half']:9.2e} {100 * err:+6.1f}%{mark}")
        if r["sim"] > 1e-4:
            kept.append((err, abs(r["model"] - r["sim"]) - r["half"], r))
    err = np.array([e for e, _, _ in kept])
    excess = np.array([x / r["sim"] for _, x, r in kept])
    print(f"{label}: {len(kept)} points; median |error| {100 * np.median(np.abs(err)):.1f} %, "
          f"within CI + 10 % {100 * np.mean(excess <= 0.10):.0f} %, "
          f"within CI + 20 % {100 * np.mean(excess <= 0.20):.0f} %, "
          f"errors {100 * err.min():+.0f} % to {100 * err.max():+.0f} % "
          f"(5th-95th percentile {100 * np.percentile(err, 5):+.0f} % to {100 * np.percentile(err, 95):+.0f} %)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--discipline", choices=("ps", "fcfs", "both"), default="both")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--n", type=int, default=250_000)
    ap.add_argument("--ps-cores", type=int, nargs="+", default=[1], help="cores for the PS grid (default 1)")
    args = ap.parse_args()
    for d in (("fcfs", "ps") if args.discipline == "both" else (args.discipline,)):
        summary(measure(d, args.reps, args.n, tuple(args.ps_cores)), d.upper())


if __name__ == "__main__":
    main()
