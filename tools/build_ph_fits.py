#!/usr/bin/env python
"""Build the shipped hyper-Erlang fits ``capacity/tables/ph_fits.npz`` (lognormal and gamma).

Usage (from the repository root)::

    python tools/build_ph_fits.py            # ~5 minutes
    python tools/build_ph_fits.py --check    # error of the read-back fits between the nodes

The processor-sharing models need a phase-type form of the CPU-time law; for lognormal and
non-integer gamma it is the hyper-Erlang distribution fit of :mod:`capacity.phasetype`
(:func:`_hyper_erlang_fit`, ~0.5-1.5 s per scv).  These are scale families, so one fit per scv
at mean 1 serves every mean.  This script makes them once on ``phasetype.FIT_TABLE_SCV``
(log-spaced from 0.01 to 50, 1/6 of the step of the shipped quantile tables' scv grid, whose
nodes it contains) and stores, for each node, the fit as the live code makes it, and for each
interval between two nodes the branch structure of its left node with that structure's
parameters at both ends (the right end re-fitted from the left one, so the parameters follow
one continuous path).  :func:`capacity.phasetype._table_fit` reads a node exactly and
interpolates ``log alpha`` and ``log lam`` linearly in ``log scv`` inside an interval.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capacity import Service  # noqa: E402
from capacity import phasetype as ph  # noqa: E402

OUT = ROOT / "capacity" / "tables" / "ph_fits.npz"
FAMILIES = ("lognormal", "gamma")


def _unit(family: str, scv: float) -> Service:
    return getattr(Service, family)(1.0, float(scv))


def _pack(orders, alpha, lam) -> tuple[int, np.ndarray]:
    """Structure index and (MAX_BRANCHES, 2) array of (log alpha, log lam), NaN-padded."""
    structure = ph._FIT_STRUCTURES.index(tuple(int(o) for o in orders))
    out = np.full((ph._FIT_TABLE_BRANCHES, 2), np.nan)
    out[:len(orders), 0] = np.log(np.maximum(alpha, 1e-300))
    out[:len(orders), 1] = np.log(lam)
    return structure, out


def _start(alpha, lam) -> np.ndarray:
    return np.concatenate([np.log(np.maximum(alpha[1:], 1e-300) / max(alpha[0], 1e-300)), np.log(lam)])


def build() -> None:
    grid = ph.FIT_TABLE_SCV
    arrays: dict[str, np.ndarray] = {"scv": grid}
    for family in FAMILIES:
        t0 = time.perf_counter()
        n = grid.size
        node_structure = np.zeros(n, dtype=np.int16)
        node = np.full((n, ph._FIT_TABLE_BRANCHES, 2), np.nan)
        fits = []
        for i, scv in enumerate(grid):
            orders, alpha, lam = ph._hyper_erlang_fit(_unit(family, scv).ppf, 1.0)
            fits.append((orders, alpha, lam))
            node_structure[i], node[i] = _pack(orders, alpha, lam)
        right = np.full((n - 1, ph._FIT_TABLE_BRANCHES, 2), np.nan)
        for i in range(n - 1):
            orders, alpha, lam = fits[i]
            targets = ph._fit_targets(_unit(family, grid[i + 1]).ppf, 1.0)
            got = ph._fit_structure(targets, orders, starts=[_start(alpha, lam)])
            if got is None:
                raise RuntimeError(f"{family}: the continuation fit failed at scv {grid[i + 1]}")
            _, a, lam_r = got
            _, a, lam_r = ph._finish_fit(np.asarray(orders), a, lam_r, 1.0)
            right[i] = _pack(orders, a, lam_r)[1]
        arrays[f"{family}_node_structure"] = node_structure
        arrays[f"{family}_node"] = node
        arrays[f"{family}_right"] = right
        print(f"{family}: {n} nodes in {time.perf_counter() - t0:.0f} s", flush=True)
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT.relative_to(ROOT)}")


def _quantiles(orders, alpha, lam, levels) -> np.ndarray:
    """Quantiles of a hyper-Erlang by bisection on its distribution function (log x)."""
    from scipy.special import gammainc

    lo = np.full(levels.shape, -60.0)
    hi = np.full(levels.shape, 10.0)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        cdf = (alpha[:, None] * gammainc(orders[:, None], lam[:, None] * np.exp(mid)[None, :])).sum(0)
        lo, hi = np.where(cdf < levels, mid, lo), np.where(cdf < levels, hi, mid)
    return np.exp(0.5 * (lo + hi))


def check() -> None:
    """Quantile error of the read-back fits against each law half-way between the nodes, beside
    a live fit's at the same scv (levels whose size is above the size floor)."""
    levels = ph._FIT_U[::4]
    grid = ph.FIT_TABLE_SCV
    for family in FAMILIES:
        rows = []
        for scv in np.sqrt(grid[1:] * grid[:-1]):
            svc = _unit(family, scv)
            x = svc.ppf(levels)
            keep = x >= ph.SIZE_FLOOR
            table = np.abs(np.log(_quantiles(*ph._table_fit(family, float(scv)), levels) / x))[keep].max()
            live = np.abs(np.log(_quantiles(*ph._hyper_erlang_fit(svc.ppf, 1.0), levels) / x))[keep].max()
            rows.append((scv, table, live))
        rows = np.array(rows)
        print(f"{family}: max |log(x_fit(u) / x(u))| between the nodes: table {rows[:, 1].max():.3f}, "
              f"live fits {rows[:, 2].max():.3f}; median {np.median(rows[:, 1]):.3f} / {np.median(rows[:, 2]):.3f}")
        for scv, table, live in rows[rows[:, 1] > rows[:, 2] + 0.02]:
            print(f"    scv {scv:8.4f}: table {table:.3f}, live {live:.3f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    check() if args.check else build()
