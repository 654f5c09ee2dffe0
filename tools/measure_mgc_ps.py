"""Measure the M/G/c processor-sharing quantiles of :mod:`capacity.ps` against simulation.

For c > 1 cores and non-exponential service, :func:`capacity.ps.response_quantile` keeps the
tagged request's own (phase-type fitted) CPU time and lets the other requests leave as if
theirs were exponential.  This script prints, for every (service, cores, utilisation) of the
grid, the model's p50/p90/p99/p99.9 against seeded runs of :func:`capacity.simulate`
(exact PS, E[S] = 1 s), as relative error with the run's 99 % batch-means half-width in
brackets.  The table in ``capacity.ps.response_quantile``'s docstring is its output.

    python tools/measure_mgc_ps.py                # the full grid (about 10 minutes)
    python tools/measure_mgc_ps.py --quick        # a few rows
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from capacity import Service, ps, simulate

LEVELS = (0.5, 0.9, 0.99, 0.999)
SERVICES = {
    "deterministic": Service.deterministic(1.0),
    "gamma scv 0.1": Service.gamma(1.0, 0.1),
    "lognormal scv 0.5": Service.lognormal(1.0, 0.5),
    "lognormal scv 4": Service.lognormal(1.0, 4.0),
    "gamma scv 10": Service.gamma(1.0, 10.0),
    "gamma scv 20": Service.gamma(1.0, 20.0),
}


def measure(name: str, svc: Service, c: int, rho: float, requests: float, seed: int) -> str:
    lam = rho * c
    model = np.asarray(ps.response_quantile(LEVELS, lam, svc, servers=c))
    horizon = requests / lam
    run = simulate(lam, svc, discipline="ps", servers=c, horizon=horizon, seed=seed)
    cells = []
    for q, pred in zip(LEVELS, model):
        ci = run.confidence_interval(q, level=0.99, batches=30, warmup=0.02 * horizon)
        cells.append(f"{100 * (pred / ci.estimate - 1):+6.1f}% ({100 * ci.half_width / ci.estimate:4.1f}%)")
    return f"{name:18s} {c:3d} {rho:5.2f}  " + "  ".join(cells)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two services, two core counts")
    ap.add_argument("--requests", type=float, default=3e6, help="simulated requests per row")
    args = ap.parse_args()
    services = dict(list(SERVICES.items())[::3]) if args.quick else SERVICES
    cores = (2, 16) if args.quick else (2, 4, 16, 64)
    rhos = (0.5, 0.9) if args.quick else (0.3, 0.6, 0.8, 0.95)
    print(f"{'service':18s} {'c':>3s} {'rho':>5s}  " + "  ".join(f"{'p' + format(100 * q, 'g'):>15s}"
                                                        for q in LEVELS))
    t0 = time.perf_counter()
    for i, (name, svc) in enumerate(services.items()):
        for c in cores:
            for rho in rhos:
                print(measure(name, svc, c, rho, args.requests, seed=1000 * i + 10 * c + int(100 * rho)),
                      flush=True)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
