#!/usr/bin/env python
"""M/G/c-PS read from the shipped tables where they used to be computed point by point, against
the direct computation (every table disabled) in the same process.

Usage (from the repository root)::

    python tools/measure_heavy_traffic.py                  # every section, ~20 min
    python tools/measure_heavy_traffic.py heavy            # one section: heavy, exponential, deterministic, one

Sections:

* ``heavy``: lognormal (scv 0.1, 0.5, 2, 8) and gamma (0.1, 0.5, 2, 6) CPU on 2, 3, 4 and 16 cores at
  utilisation 0.993 and 0.995, above the M/G/c-PS tables' top (0.991), where
  :func:`capacity._quantile_table._log_t_heavy` carries them to saturation; the direct computation
  there is the tagged-request chain (5,000-7,000 states, seconds a point).  Levels p10-p99.9.
* ``exponential``: M/M/c-PS read from the gamma tables at scv 1 (the path of
  :func:`capacity._quantile_table.tabled_or_direct` for the fits' and round robin's PS half) against
  the exact chain, on a response curve's 40 utilisations (0.002-0.995), p10-p99.9.
* ``deterministic``: deterministic CPU on 2, 3, 4, 16 and 64 cores
  (:mod:`capacity._ps_deterministic_table`, the tables' gamma rows taken to cv 0) against the
  extra-delay path, utilisation 0.2-0.99, p30-p99.9.

* ``one``: lognormal (scv 0.01-20), gamma (0.01-10) and deterministic CPU on one core at utilisation 0.9992-0.9999,
  above the one-core PS table's top, where :func:`capacity._quantile_table._log_t_one_core_heavy`
  holds the top's ``(1 - rho) t_q``; levels p10-p99.99.

Each line: the largest and the median relative difference, the largest per level, and both
computations' seconds.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from capacity import Service, ps
from capacity import _quantile_table as table_mod
from capacity.plan.curves import DEFAULT_UTILIZATION


def _both(q, lam, svc, servers) -> tuple[np.ndarray, np.ndarray, float, float]:
    t0 = time.perf_counter()
    read = np.asarray(ps.response_quantile(q, lam, svc, servers=servers), dtype=float)
    t1 = time.perf_counter()
    table_mod.disabled = True
    try:
        direct = np.asarray(ps.response_quantile(q, lam, svc, servers=servers), dtype=float)
    finally:
        table_mod.disabled = False
    return read, direct, t1 - t0, time.perf_counter() - t1


def _line(label: str, err: np.ndarray, q: np.ndarray, levels, read_s: float, direct_s: float) -> None:
    per_level = "  ".join(f"{100 * np.max(np.abs(err[q == lv])):4.1f}%" for lv in levels)
    print(f"{label:24s} {100 * np.max(np.abs(err)):6.2f}% {100 * np.median(np.abs(err)):6.2f}%   {per_level}"
          f"   (read {1e3 * read_s:.1f} ms, direct {direct_s:.1f} s)", flush=True)


def heavy() -> None:
    levels = (0.1, 0.5, 0.9, 0.99, 0.999)
    families = {"lognormal": (0.1, 0.5, 2.0, 8.0), "gamma": (0.1, 0.5, 2.0, 6.0)}
    print("above the tables' top utilisation (0.993, 0.995)    max  median   " + "  ".join(f"p{100 * v:g}" for v in levels))
    for family, scvs in families.items():
        for c in (2, 3, 4, 16):
            scv, rho, q = (g.ravel() for g in np.meshgrid(scvs, (0.993, 0.995), levels, indexing="ij"))
            read, direct, rs, ds = _both(q, c * rho, getattr(Service, family)(1.0, scv), c)
            _line(f"{family} c {c}", read / direct - 1.0, q, levels, rs, ds)


def exponential() -> None:
    levels = (0.1, 0.5, 0.9, 0.99, 0.999)
    print("M/M/c-PS from the gamma tables at scv 1, utilisation 0.002-0.995")
    rho, q = (g.ravel() for g in np.meshgrid(DEFAULT_UTILIZATION, levels, indexing="ij"))
    for c in (2, 3, 4, 8, 16):
        t0 = time.perf_counter()
        read = table_mod.tabled_or_direct(table_mod.PS_PHASE_TYPE, q, c * rho, Service.exponential(1.0), c,
                                          ps.response_quantile)
        t1 = time.perf_counter()
        exact = np.asarray(ps.response_quantile(q, c * rho, Service.exponential(1.0), c), dtype=float)
        _line(f"exponential c {c}", read / exact - 1.0, q, levels, t1 - t0, time.perf_counter() - t1)


def deterministic() -> None:
    levels = (0.3, 0.5, 0.9, 0.99, 0.999)
    print("deterministic CPU on several cores, utilisation 0.2-0.99")
    rho, q = (g.ravel() for g in np.meshgrid((0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.95, 0.99), levels, indexing="ij"))
    for c in (2, 3, 4, 16, 64):
        read, direct, rs, ds = _both(q, c * rho, Service.deterministic(1.0), c)
        _line(f"deterministic c {c}", read / direct - 1.0, q, levels, rs, ds)


def one(families=None) -> None:
    """One core above the PS table's top (0.999) to 0.9999: the top's ``(1 - rho) t_q`` held
    (:func:`capacity._quantile_table._log_t_one_core_heavy`) against the direct computation; the
    levels below p10 are computed directly by the package, so only p10 up are compared (~12 min,
    most of it lognormal scv 4 and 20)."""
    levels = (0.1, 0.5, 0.9, 0.99, 0.999, 0.9999)
    families = families or {"lognormal": (0.01, 0.1, 0.5, 1.0, 4.0, 20.0), "gamma": (0.01, 0.1, 0.5, 1.0, 4.0, 10.0)}
    print("one core above the table's top (0.9992-0.9999)      max  median   " + "  ".join(f"p{100 * v:g}" for v in levels))
    rho, q = (g.ravel() for g in np.meshgrid((0.9992, 0.9995, 0.9999), levels, indexing="ij"))
    for family, scvs in families.items():
        for scv in scvs:
            read, direct, rs, ds = _both(q, rho, getattr(Service, family)(1.0, scv), 1)
            _line(f"{family} scv {scv:g}", read / direct - 1.0, q, levels, rs, ds)
    read, direct, rs, ds = _both(q, rho, Service.deterministic(1.0), 1)
    _line("deterministic", read / direct - 1.0, q, levels, rs, ds)


SECTIONS = {"heavy": heavy, "exponential": exponential, "deterministic": deterministic, "one": one}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(SECTIONS):
        SECTIONS[name]()
