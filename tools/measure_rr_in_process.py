#!/usr/bin/env python3
"""Measure what a middleware timer sees of event-loop round robin against the exact simulator.

Usage (from the repository root)::

    python tools/measure_rr_in_process.py            # ~15 min of CPU on one core

For every point of the grid in :mod:`capacity._rr_in_process`'s docstring (one core, E[S] = 1,
FIFO admission), one seeded ``capacity.sim.simulate(..., discipline="rr")`` run; the in-process
time of a request is ``completion - start`` (the start of its first slice), its response
``completion - arrival``.  Printed per point: the share ``(I_q - B_q) / (T_q - B_q)`` the
simulator shows at p90/p99 (the rule says ``1 - 1/k``); the rule's error with the simulated
``T_q`` (``I_rule / I_sim - 1``); and end to end, with ``T_q`` from :func:`capacity.rr.response_quantile`.
The summary lines are the figures the module docstring quotes.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capacity import Service, rr, sim  # noqa: E402
from capacity._rr_in_process import in_process_quantile  # noqa: E402

LAWS = {0: lambda: Service.deterministic(1.0), 1: lambda: Service.exponential(1.0),
        2: lambda: Service.hyperexponential(1.0, 2.0)}
LEVELS = np.array([0.9, 0.99])


def grid():
    for rho in (0.3, 0.5, 0.7, 0.85):
        for k in (2, 5, 10):
            for scv in (0, 1, 2):
                for gap in ((0.0,) if scv == 0 else (0.0, 0.25, 1.0, 5.0)):
                    yield rho, k, scv, gap


def point(rho: float, k: int, scv: int, gap: float, seed: int) -> dict:
    svc = LAWS[scv]()
    n = (1.5e5 if gap == 0 else 1e5) * max(1.0, (0.5 / (1.0 - rho)) ** 2)
    d = gap / k
    run = sim.simulate(rho, svc, discipline="rr", slices=k, slice_delay=d, horizon=n / rho, seed=seed)
    req = run.requests
    req = req[req["arrival"] > 0.01 * n / rho]
    t = (req["completion"] - req["arrival"]).to_numpy()
    i = (req["completion"] - req["start"]).to_numpy()
    tq, iq = np.quantile(t, LEVELS), np.quantile(i, LEVELS)
    base = np.asarray(svc.ppf(LEVELS)) + (k - 1) * d
    rule = in_process_quantile(tq, np.asarray(svc.ppf(LEVELS)), k, d)
    model_t = np.asarray(rr.response_quantile(LEVELS, rho, svc, slices=k, slice_delay=d))
    end = in_process_quantile(model_t, np.asarray(svc.ppf(LEVELS)), k, d)
    rule_mean = (1 + (k - 1) * d) + (1 - 1 / k) * (t.mean() - 1 - (k - 1) * d)
    return dict(share=(iq - base) / (tq - base), rule=rule / iq - 1, end=end / iq - 1,
                mean=rule_mean / i.mean() - 1)


def main() -> None:
    rows = []
    for seed, (rho, k, scv, gap) in enumerate(grid(), start=101):
        r = point(rho, k, scv, gap, seed)
        rows.append((k, r))
        print(f"rho {rho:4.2f} k {k:2d} scv {scv} gap {gap:4.2f}  share p90/p99 {r['share'][0]:.3f} "
              f"{r['share'][1]:.3f} (rule {1 - 1 / k:.3f})  rule error {100 * r['rule'][0]:+5.1f} "
              f"{100 * r['rule'][1]:+5.1f} %  mean {100 * r['mean']:+5.1f} %  end to end "
              f"{100 * r['end'][0]:+5.1f} {100 * r['end'][1]:+5.1f} %", flush=True)
    for j, name in enumerate(("p90", "p99")):
        dev = np.array([r["share"][j] - (1 - 1 / k) for k, r in rows])
        err = np.array([r["rule"][j] for _, r in rows])
        end = np.array([r["end"][j] for _, r in rows])
        print(f"{name}: share - (1 - 1/k) {dev.min():+.3f} .. {dev.max():+.3f}; rule error "
              f"{100 * err.min():+.1f} .. {100 * err.max():+.1f} %; end to end {100 * end.min():+.1f} .. "
              f"{100 * end.max():+.1f} %")
    mean = np.array([r["mean"] for _, r in rows])
    print(f"mean: rule error {100 * mean.min():+.1f} .. {100 * mean.max():+.1f} %")


if __name__ == "__main__":
    main()
