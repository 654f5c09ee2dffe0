#!/usr/bin/env python
"""M/G/c-PS quantiles at core counts between the shipped tables, against the direct computation.

Usage (from the repository root)::

    python tools/measure_core_interpolation.py                 # c = 3 5 6 7 12 24 48, ~3 min
    python tools/measure_core_interpolation.py 3 24 48         # other core counts
    python tools/measure_core_interpolation.py 96 128 256 1000 # above the largest table, ~4 min

For each core count, lognormal CPU (scv 0.015, 0.1, 0.5, 1, 2, 5, 15) and gamma CPU (0.015, 0.1, 1, 4), at
utilisations 0.1, 0.3, 0.5, 0.7, 0.85 and 0.95 and levels p50, p90, p99, p99.9, it prints the
largest and the median relative difference between :func:`capacity.ps.response_quantile` (read
between the two shipped core counts either side, ``capacity._quantile_table._log_t_between``) and
the direct computation of :mod:`capacity._ps_many_cores` (every table disabled), then the largest
per level.  Core counts with a table of their own are read from it (the table's own error is in
:func:`capacity.ps.response_quantile`).  Above the largest table (64 cores), read towards infinitely
many cores, utilisation 0.98 is added and the reading is measured up to it, past
:data:`capacity._quantile_table.BEYOND_LARGEST_TOP` where capacity stops using it; the largest
error per utilisation follows.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from capacity import Service, ps
from capacity import _quantile_table as table_mod

FAMILIES = {"lognormal": (0.015, 0.1, 0.5, 1.0, 2.0, 5.0, 15.0), "gamma": (0.015, 0.1, 1.0, 4.0)}
RHO = (0.1, 0.3, 0.5, 0.7, 0.85, 0.95)
LEVELS = (0.5, 0.9, 0.99, 0.999)


def errors(family: str, servers: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Relative errors (scv x rho x level, flattened), the levels, the utilisations, and the direct
    computation's seconds."""
    beyond = servers > max(table_mod.PS_MANY_CORES)
    scv, rho, q = (g.ravel() for g in np.meshgrid(FAMILIES[family], RHO + (0.98,) * beyond, LEVELS, indexing="ij"))
    svc = getattr(Service, family)(1.0, scv)
    cap = table_mod.BEYOND_LARGEST_TOP
    table_mod.BEYOND_LARGEST_TOP = 0.99 if beyond else cap
    try:
        tabled = np.asarray(ps.response_quantile(q, servers * rho, svc, servers=servers), dtype=float)
    finally:
        table_mod.BEYOND_LARGEST_TOP = cap
    t0 = time.perf_counter()
    table_mod.disabled = True
    try:
        direct = np.asarray(ps.response_quantile(q, servers * rho, svc, servers=servers), dtype=float)
    finally:
        table_mod.disabled = False
    return tabled / direct - 1.0, q, rho, time.perf_counter() - t0


def main(counts: list[int]) -> None:
    print(f"{'family':10s} {'c':>3s}  {'max':>7s} {'median':>7s}   " + "  ".join(f"p{100 * q:g}" for q in LEVELS))
    for family in FAMILIES:
        for c in counts:
            err, q, rho, seconds = errors(family, c)
            per_level = "  ".join(f"{100 * np.max(np.abs(err[q == lv])):4.1f}%" for lv in LEVELS)
            print(f"{family:10s} {c:3d}  {100 * np.max(np.abs(err)):6.2f}% {100 * np.median(np.abs(err)):6.2f}%   "
                  f"{per_level}   (direct {seconds:.1f} s)", flush=True)
            if c > max(table_mod.PS_MANY_CORES):
                print("    by utilisation: " + "  ".join(f"{r:g} {100 * np.max(np.abs(err[rho == r])):.1f}%"
                                                     for r in np.unique(rho)), flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [3, 5, 6, 7, 12, 24, 48])
