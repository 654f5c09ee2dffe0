"""Timing of capacity.fcfs quantiles (run: python benchmarks/bench_fcfs.py).

Prints best-of-N wall times in ms for
* four response quantiles (p50/p90/p99/p99.9) at one (rho, service) point,
* the same four quantiles over a 200-point utilisation sweep (rho 0.01..0.99),
  of the response and of the wait, for every service family,
  against the targets (10 ms per point, 0.5 s per sweep),
* a naive baseline in the same process: mpmath Talbot inversion per point and a
  scalar brentq root per quantile (timed on a few points, extrapolated to 200),
* what the fits read below the FCFS tables' scv 0.01 (a busy loop's CPU, scv 0.005): log t
  linear in cv between M/D/1 and the table, against the exact M/G/1 inversion on the same sweep,
  with the largest difference between the two.
"""
from __future__ import annotations

import time

import mpmath as mp
import numpy as np
from scipy import optimize

from capacity import Service, fcfs

Q = np.array([0.5, 0.9, 0.99, 0.999])
SERVICES = {
    "exponential": Service.exponential(0.025),
    "deterministic": Service.deterministic(0.025),
    "erlang-4": Service.erlang(0.025, 4),
    "hyperexp scv 4": Service.hyperexponential(0.025, 4.0),
    "lognormal scv 4": Service.lognormal(0.025, 4.0),
    "lognormal scv 0.25": Service.lognormal(0.025, 0.25),
    "gamma scv 0.5": Service.gamma(0.025, 0.5),
}
POINT_TARGET_MS, SWEEP_TARGET_MS = 10.0, 500.0


def best_ms(func, repeat=5):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


def naive_quantiles(lam, m):
    """Erlang-4 M/G/1: mpmath Talbot (15 digits) of the response tail, brentq per quantile."""
    k = 4
    lam_, rho = mp.mpf(lam), lam * m

    def sf(t):
        b = lambda s: (1 + s * m / k) ** (-k)  # noqa: E731
        w = lambda s: (1 - rho) * s / (s - lam_ * (1 - b(s)))  # noqa: E731
        return float(mp.invertlaplace(lambda s: (1 - w(s) * b(s)) / s, t, method="talbot"))

    return [optimize.brentq(lambda t: sf(t) - (1 - q), 1e-6 * m, 1e4 * m, xtol=1e-12 * m) for q in Q]


def main() -> None:
    m = 0.025
    print("one point, rho = 0.8, four response quantiles (best of 7):")
    for name, svc in SERVICES.items():
        ms = best_ms(lambda: fcfs.response_quantile(Q, 0.8 / m, svc), repeat=7)
        print(f"  {name:18s} {ms:8.2f} ms  {'ok' if ms < POINT_TARGET_MS else 'MISSES'} (< {POINT_TARGET_MS:g} ms)")
    rho = np.linspace(0.01, 0.99, 200)
    lam = (rho / m)[:, None]
    print("200-point sweep (rho 0.01..0.99) x four quantiles (best of 3): response / wait")
    sweep = {}
    for name, svc in SERVICES.items():
        ms = best_ms(lambda: fcfs.response_quantile(Q, lam, svc), repeat=3)
        wms = best_ms(lambda: fcfs.wait_quantile(Q, lam, svc), repeat=3)
        sweep[name] = ms
        ok = "ok" if max(ms, wms) < SWEEP_TARGET_MS else "MISSES"
        print(f"  {name:18s} {ms:8.1f} ms / {wms:8.1f} ms  {ok} (< {SWEEP_TARGET_MS:g} ms)")
    with mp.workdps(15):
        pts = [0.3, 0.8, 0.95]
        t0 = time.perf_counter()
        for r in pts:
            naive_quantiles(r / m, m)
        per_point = (time.perf_counter() - t0) / len(pts)
    naive_ms = 200 * per_point * 1e3
    print(f"naive baseline (mpmath Talbot + brentq, Erlang-4): {1e3 * per_point:.0f} ms per point, "
          f"~{naive_ms / 1e3:.0f} s for the sweep (extrapolated from {len(pts)} points)")
    print(f"speed-up of the vectorised sweep (Erlang-4): {naive_ms / sweep['erlang-4']:.0f}x")
    below_the_tables(lam, m)


def below_the_tables(lam, m) -> None:
    from capacity import _quantile_table

    for family in ("lognormal", "gamma"):
        svc = getattr(Service, family)(m, 0.005)
        exact_ms = best_ms(lambda: fcfs.response_quantile(Q, lam, svc), repeat=2)
        read_ms = best_ms(lambda: _quantile_table.tabled_quantile("fcfs", Q, lam, svc), repeat=5)
        worst = np.max(np.abs(_quantile_table.tabled_quantile("fcfs", Q, lam, svc)
                              / fcfs.response_quantile(Q, lam, svc) - 1))
        print(f"below the tables ({family} scv 0.005, 200-point sweep x 4 quantiles): exact "
              f"{exact_ms:.0f} ms, cv interpolation {read_ms:.1f} ms ({exact_ms / read_ms:.0f}x), "
              f"largest difference {100 * worst:.2f} %")


if __name__ == "__main__":
    main()
