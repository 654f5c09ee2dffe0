#!/usr/bin/env python
"""Heavy-tailed CPU under processor sharing on one core: capacity.ps (its shipped tables), the
direct computation (tables disabled) and the small-request limit (``tools/small_job_ps.py``)
against simulation.

Usage (from the repository root; about 2 minutes per point of simulation)::

    python tools/measure_heavy_tail_ps.py                 # the points below
    python tools/measure_heavy_tail_ps.py gamma:20:0.5    # family:scv:utilisation

Each point: ``RUNS`` independent simulations (capacity.sim, PS, mean CPU 1) of ``HORIZON``
seconds, the first 5 % of each dropped; the quantile's mean over the runs and its 95 % half-width
(1.96 standard errors).  Requests whose simulated CPU time underflows to 0 (gamma of shape 0.02
and below) leave the lowest levels unmeasurable: those are printed as ``-``.
"""
from __future__ import annotations

import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import small_job_ps  # noqa: E402

from capacity import Service, ps  # noqa: E402
from capacity import _quantile_table as table_mod  # noqa: E402
from capacity.sim import simulate  # noqa: E402

LEVELS = np.array([0.3, 0.5, 0.7, 0.9, 0.99, 0.999])
POINTS = ["gamma:5.5:0.5", "gamma:8:0.85", "gamma:12:0.1", "gamma:20:0.5", "gamma:30:0.7", "gamma:40:0.9",
          "lognormal:30:0.5", "lognormal:40:0.2", "lognormal:45:0.85"]
RUNS, HORIZON = 8, 2e6


def simulated(family: str, scv: float, rho: float, seed0: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Mean over RUNS simulations of the response quantiles at LEVELS, and the 95 % half-width."""
    svc = getattr(Service, family)(1.0, scv)
    est = []
    for seed in range(seed0, seed0 + RUNS):
        x = simulate(rho, svc, discipline="ps", horizon=HORIZON, seed=seed).requests["response"].to_numpy()
        est.append(np.quantile(x[x.size // 20:], LEVELS))
    est = np.array(est)
    return est.mean(axis=0), 1.96 * est.std(axis=0, ddof=1) / np.sqrt(RUNS)


def one(point: str) -> None:
    family, scv, rho = point.split(":")
    scv, rho = float(scv), float(rho)
    svc = getattr(Service, family)(1.0, scv)
    t0 = time.perf_counter()
    tab = np.asarray(ps.response_quantile(LEVELS, rho, svc), dtype=float)
    t_tab = time.perf_counter() - t0
    table_mod.disabled = True
    t0 = time.perf_counter()
    direct = np.asarray(ps.response_quantile(LEVELS, rho, svc), dtype=float)
    t_direct = time.perf_counter() - t0
    table_mod.disabled = False
    small = np.exp(small_job_ps.log_quantile(LEVELS, rho, family, scv))
    sim, half = simulated(family, scv, rho)
    print(f"{family} scv {scv:g} utilisation {rho:g}: capacity.ps {1e3 * t_tab:.1f} ms, direct {t_direct:.2f} s")
    print("      q    simulated   +-95 %   capacity.ps    direct   small-request")
    for i, q in enumerate(LEVELS):
        if sim[i] <= 0:
            print(f"  {q:6.3f}          -")
            continue
        err = [f"{v / sim[i] - 1:+9.1%}" for v in (tab[i], direct[i], small[i])]
        print(f"  {q:6.3f}  {sim[i]:10.3e}  {100 * half[i] / sim[i]:6.1f} %  " + "  ".join(err))
    sys.stdout.flush()


if __name__ == "__main__":
    for p in sys.argv[1:] or POINTS:
        one(p)
