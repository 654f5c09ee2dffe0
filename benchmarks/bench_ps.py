"""Timing of capacity.ps quantiles (run: python benchmarks/bench_ps.py [--sweep]).

Prints best-of-N wall times in ms for four response quantiles (p50/p90/p99/p99.9)
at one point (rho 0.5 and 0.9) per service family, and optionally a 200-point
utilisation sweep of the p99 (one quantile; the 4-quantile sweep is 4x the
work).  Baseline: the previous method (three-moment PH fit,
``phase_type(svc, fit="moments")``, Erlang-24 for deterministic), run in the
same process by patching the fit, so the ratio compares like with like.
"""
from __future__ import annotations

import sys
import time

import numpy as np

import capacity.ps as ps_mod
from capacity import Service, ps
from capacity.phasetype import phase_type

Q = np.array([0.5, 0.9, 0.99, 0.999])
SERVICES = {
    "exponential": Service.exponential(1.0),
    "erlang-2": Service.erlang(1.0, 2),
    "hyperexp scv 4": Service.hyperexponential(1.0, 4.0),
    "lognormal scv 1": Service.lognormal(1.0, 1.0),
    "lognormal scv 4": Service.lognormal(1.0, 4.0),
    "deterministic": Service.deterministic(1.0),
}


def best_ms(func, repeat=3):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


def main() -> None:
    for rho in (0.5, 0.9):
        print(f"one point, rho = {rho}, four response quantiles (best of 3):")
        for name, svc in SERVICES.items():
            new = best_ms(lambda: ps.response_quantile(Q, rho, svc))
            ps_mod.phase_type = lambda s, fit="moments": phase_type(s, fit="moments")
            deterministic = svc.family == "deterministic"
            if deterministic:  # old path: Erlang-24 for the tagged request too
                svc_old = Service.erlang(1.0, 24)
            old = best_ms(lambda: ps.response_quantile(Q, rho, svc_old if deterministic else svc), repeat=1)
            ps_mod.phase_type = phase_type
            print(f"  {name:18s} {new:9.1f} ms   previous method {old:9.1f} ms   ratio {old / new:6.2f}")
    if "--sweep" in sys.argv:
        rhos = np.linspace(0.01, 0.99, 200)
        for name in ("exponential", "erlang-2", "hyperexp scv 4", "lognormal scv 4", "deterministic"):
            ms = best_ms(lambda: ps.response_quantile(0.99, rhos, SERVICES[name]), repeat=1)
            print(f"sweep 200 points, p99, {name}: {ms:.0f} ms")


if __name__ == "__main__":
    main()
