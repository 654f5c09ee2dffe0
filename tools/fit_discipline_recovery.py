#!/usr/bin/env python3
"""Does a default histogram fit pick the true discipline from a day of telemetry?  (issue 15, point 8)

Usage (from the repository root)::

    python tools/fit_discipline_recovery.py [--days 10] [--disciplines fcfs,ps,rr] [--csv out.csv]

For each discipline, ``--days`` simulated days of a known service (:data:`SERVICES`: CPU law,
mean 10-30 ms, and for rr the slice count 3-13 and the admission rule), each a Prometheus-style
export: :data:`WINDOWS` windows over a diurnal load curve from 10 % to 70 % CPU, each window
``window_s`` seconds long (5-30 minutes: 1.5e3-6e4 requests), bucketed with one of
:data:`LAYOUTS` (prometheus_client's default, a finer microservice layout, an OpenTelemetry-like
one).  The latencies are the exact simulator's (:func:`capacity.sim.simulate`, seeded per day), so
every figure is reproducible.  Each day is fitted with :func:`capacity.fit.from_histograms` and
every default, and the script tabulates per day the chosen discipline, family, delay and slice
count, the error of the fitted CPU per request, and the error of the fit's p99 at 80 % CPU (a load
no window saw) against the truth: :mod:`capacity.fcfs` / :mod:`capacity.ps` (exact) for those
disciplines, a simulation of ``--peak-requests`` requests at 80 % for rr (its 95 % batch-means
half-width printed).  It ends with the confusion table (true discipline x chosen discipline) and
the fit times.

The days are built by :func:`simulated_day`, which ``tests/test_fit_discipline_recovery.py`` reuses.
OpenTelemetry SDKs export a first bound of 0 by default (``from_histograms`` merges it into the
next bucket); the ``otel_like`` layout has it.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from capacity import Service, fcfs, ps, simulate  # noqa: E402
from capacity.fit import from_histograms  # noqa: E402

#: Bucket layouts (upper bounds, seconds; +Inf is added).
LAYOUTS = {
    "prometheus_default": (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0),
    "microservice": (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12),
    "otel_like": (0.0, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0),
}
#: Windows per day: every other hour of a diurnal curve, utilisation 0.1 (night) to 0.7 (peak).
WINDOWS = 12
#: Held-out load of the p99 check.
PEAK_UTILIZATION = 0.8


def _service(family: str, mean: float, scv: float) -> Service:
    return Service.from_moments(mean, scv, family)


#: Per discipline, the services of its days (cycled): (family, mean CPU s, scv, slices, admission).
SERVICES = {
    "fcfs": [("lognormal", 0.02, 1.5, 1, "fifo"), ("gamma", 0.015, 0.5, 1, "fifo"),
             ("lognormal", 0.03, 0.6, 1, "fifo"), ("gamma", 0.02, 3.0, 1, "fifo"),
             ("lognormal", 0.01, 4.0, 1, "fifo")],
    "ps": [("lognormal", 0.02, 1.5, 1, "fifo"), ("gamma", 0.015, 0.5, 1, "fifo"),
           ("lognormal", 0.03, 0.6, 1, "fifo"), ("gamma", 0.02, 3.0, 1, "fifo"),
           ("lognormal", 0.01, 4.0, 1, "fifo")],
    "rr": [("gamma", 0.02, 0.5, 8, "idle"), ("lognormal", 0.02, 1.0, 5, "fifo"),
           ("gamma", 0.015, 1.0, 3, "fifo"), ("lognormal", 0.03, 0.6, 13, "idle"),
           ("gamma", 0.01, 2.0, 5, "idle"), ("lognormal", 0.02, 0.5, 3, "fifo"),
           ("gamma", 0.025, 0.7, 8, "fifo"), ("lognormal", 0.015, 1.5, 13, "fifo"),
           ("gamma", 0.02, 1.0, 5, "idle"), ("lognormal", 0.02, 2.0, 8, "idle")],
}


def day_loads(windows: int = WINDOWS) -> np.ndarray:
    """Utilisation of each window: a diurnal cosine from 0.1 at night to 0.7 at the peak."""
    hours = np.arange(windows) * 24.0 / windows
    return 0.1 + 0.6 * 0.5 * (1.0 - np.cos(2.0 * math.pi * hours / 24.0))


def simulated_day(discipline: str, case: int, seed: int, windows: int = WINDOWS) -> tuple[list[dict], dict]:
    """``(windows, truth)``: a day of histograms of the ``case``-th service of ``discipline``.

    The window length (300, 600, 900 or 1800 s) and the bucket layout rotate with the seed; the
    first 30 s of each window's simulation are warm-up, dropped."""
    family, mean, scv, slices, admission = SERVICES[discipline][case % len(SERVICES[discipline])]
    svc = _service(family, mean, scv)
    window_s = (300.0, 600.0, 900.0, 1800.0)[seed % 4]
    layout_name = tuple(LAYOUTS)[seed % len(LAYOUTS)]
    le = np.array(LAYOUTS[layout_name])
    kw = {"slices": slices, "admission": admission} if discipline == "rr" else {}
    out = []
    for i, rho in enumerate(day_loads(windows)):
        rate = float(rho / mean)
        req = simulate(rate, svc, discipline=discipline, horizon=window_s + 30.0, seed=seed * 100 + i, **kw).requests
        t = np.sort(req.loc[req["arrival"] > 30.0, "response"].to_numpy())
        cum = np.searchsorted(t, le, side="right").astype(float)
        out.append({"bounds": le, "counts": np.diff(np.r_[0.0, cum, t.size]), "arrival_rate": rate})
    truth = {"discipline": discipline, "family": family, "mean": mean, "scv": scv, "slices": slices,
             "admission": admission, "service": svc, "window_s": window_s, "layout": layout_name}
    return out, truth


def true_p99(truth: dict, peak_requests: float, seed: int = 99) -> tuple[float, float]:
    """(p99 at 80 % CPU, its 95 % half-width; 0 when exact)."""
    svc, rate = truth["service"], PEAK_UTILIZATION / truth["mean"]
    if truth["discipline"] == "fcfs":
        return float(fcfs.response_quantile(0.99, rate, svc)), 0.0
    if truth["discipline"] == "ps":
        return float(ps.response_quantile(0.99, rate, svc)), 0.0
    run = simulate(rate, svc, discipline="rr", slices=truth["slices"], admission=truth["admission"],
                   horizon=peak_requests / rate, seed=seed)
    ci = run.confidence_interval(0.99, batches=30, warmup=0.01 * peak_requests / rate)
    return float(ci.estimate), float(ci.half_width)


def run(disciplines, days: int, peak_requests: float):
    import pandas as pd

    rows, truth_cache = [], {}
    for discipline in disciplines:
        for d in range(days):
            seed = 1000 * (1 + list(SERVICES).index(discipline)) + d
            data, truth = simulated_day(discipline, d, seed)
            key = (discipline, d % len(SERVICES[discipline]))
            if key not in truth_cache:
                truth_cache[key] = true_p99(truth, peak_requests)
            p99, hw = truth_cache[key]
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = from_histograms(data)
            elapsed = time.perf_counter() - t0
            rr_tried = fit.candidates_ is not None and (fit.candidates_["discipline"] == "rr").any()
            cand = fit.candidates_
            best_rr = cand[cand["discipline"] == "rr"]["delta_qaic"].min() if rr_tried else math.nan
            best_of = {dd: cand[cand["discipline"].str.startswith(dd)]["delta_qaic"].min() for dd in ("fcfs", "ps")}
            rows.append({
                "true": discipline, "case": f"{truth['family']} {truth['mean'] * 1e3:g}ms scv {truth['scv']:g}"
                + (f" k={truth['slices']} {truth['admission']}" if discipline == "rr" else ""),
                "layout": truth["layout"], "window_s": truth["window_s"],
                "chosen": "rr" if fit.discipline == "rr" else fit.discipline, "family": fit.family,
                "delay": fit.delay_ is not None, "slices": fit.slices_, "admission": fit.admission_,
                "rr_tried": rr_tried, "dqaic_rr": best_rr, "dqaic_fcfs": best_of["fcfs"], "dqaic_ps": best_of["ps"],
                "dispersion": fit.fit_quality_["dispersion"],
                "cpu_err": fit.cpu_per_request_ / truth["mean"] - 1,
                "p99_err": float(fit.predict(0.99, PEAK_UTILIZATION / truth["mean"])) / p99 - 1,
                "p99_truth_hw": hw / p99, "fit_s": elapsed})
    return pd.DataFrame(rows)


def report(table) -> str:
    import pandas as pd

    lines = []
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_rows", 200):
        shown = table.copy()
        for col in ("cpu_err", "p99_err", "p99_truth_hw"):
            shown[col] = (100 * shown[col]).round(1)
        for col in ("dqaic_rr", "dqaic_fcfs", "dqaic_ps", "dispersion"):
            shown[col] = shown[col].round(1)
        shown["fit_s"] = shown["fit_s"].round(2)
        lines.append(shown.to_string())
        lines.append("\nconfusion (rows: true discipline, columns: chosen)")
        lines.append(pd.crosstab(table["true"], table["chosen"]).to_string())
        summary = table.groupby("true").agg(
            right=("chosen", lambda s: int((s == table.loc[s.index, "true"]).sum())), days=("chosen", "size"),
            p99_within_10pct=("p99_err", lambda s: int((s.abs() <= 0.10).sum())),
            p99_max_abs_err=("p99_err", lambda s: float(s.abs().max())),
            cpu_mean_abs_err=("cpu_err", lambda s: float(s.abs().mean())),
            fit_s_median=("fit_s", "median"), fit_s_max=("fit_s", "max"))
        lines.append("\n" + summary.to_string())
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--disciplines", default="fcfs,ps,rr")
    parser.add_argument("--peak-requests", type=float, default=1e6)
    parser.add_argument("--csv")
    args = parser.parse_args(argv)
    table = run(args.disciplines.split(","), args.days, args.peak_requests)
    print(report(table))
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
