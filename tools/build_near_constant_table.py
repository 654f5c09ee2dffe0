#!/usr/bin/env python
"""Build the shipped PS table of nearly constant CPU times, ``capacity/tables/ps_near_constant_quantiles.npz``.

Usage (from the repository root)::

    python tools/build_near_constant_table.py gamma lognormal     # ~20 min of CPU per family
    python tools/build_near_constant_table.py --check gamma         # error between the nodes
    python tools/build_near_constant_table.py fcfs gamma lognormal  # the FCFS one (exact M/G/1, ~2 min)

Why a second PS table
---------------------
Fixed-work handlers have CPU times of scv 0.01-0.5.  Their one-core PS quantiles come from
:mod:`capacity._ps_near_constant` (the tagged request's exact size, the others as a two-moment
Erlang mixture), which costs 0.15-0.2 s for four quantiles at one point -- far too slow for a
fit, which evaluates the model tens of times.  The main table (``tools/build_quantile_tables.py``)
starts where the hyper-Erlang fits behind it are smooth in scv (gamma 0.085, lognormal 0.57), and
its grid is too coarse for these laws: their response time has an atom-like peak (the request
served alone, ``P = (1 - rho) exp(-lambda x)``) that leaves a knee in the quantile as a function
of the level and of the load.  Measured on gamma scv 0.01 with the main grid: up to 2.2 % in
``log t`` between the levels (rho 0.05, q = 1 - 4e-6) and 1.2 % between the utilisations (p70 at
rho 0.1).  This table has its own, finer grid: 44 utilisations (evenly spaced in logit rho from
0.001 to 0.999), 72 levels (the same end points as the main table, q = 0.001 to 1 - 1e-6) and scv
values evenly spaced in log scv (gamma 0.01-0.16, lognormal 0.01-0.8), overlapping the main table
so that :mod:`capacity._quantile_table` can blend the two smoothly.

What is tabulated: as in the main table, ``log((1 - rho) t_q)`` of a mean-1 law, from
``P(T > t)`` on a grid of times (dense over the CPU time's own range, where the knee is, then
log-spaced into the tail), inverted by monotone interpolation of ``log t`` against
``z = log(-log(1 - q))`` (``_levels`` of ``build_quantile_tables.py``).  Each scv value is
written to ``build/ps_near_tables/<family>_<i>.npz`` (an interrupted build resumes).
"""
from __future__ import annotations

import os
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from build_quantile_tables import _levels  # noqa: E402

from capacity import Service, ps  # noqa: E402
from capacity import _quantile_table as table_mod  # noqa: E402
from capacity._ps_near_constant import NEAR_CONSTANT_SCV  # noqa: E402

table_mod.disabled = True   # computed directly, never from an old table

RHO = 1.0 / (1.0 + np.exp(-np.linspace(np.log(0.001 / 0.999), np.log(0.999 / 0.001), 44)))
Z = np.linspace(np.log(-np.log1p(-0.001)), np.log(-np.log(1e-6)), 72)
SCV = {"gamma": np.geomspace(0.01, 0.16, 9), "lognormal": np.geomspace(0.01, 0.8, 13)}
# FCFS (exact M/G/1): its main table starts at scv 0.04; below it the exact computation costs
# ~5 ms per point (rr's FCFS half of a fixed-work handler's fit: 0.6 s).
SCV_FCFS = {"gamma": np.geomspace(0.01, 0.06, 6), "lognormal": np.geomspace(0.01, 0.06, 6)}
OUT = ROOT / "capacity" / "tables" / "ps_near_constant_quantiles.npz"
OUT_FCFS = ROOT / "capacity" / "tables" / "fcfs_near_constant_quantiles.npz"
BUILD = ROOT / "build" / "ps_near_tables"
BODY_POINTS = 64     # times over the CPU time's own range
TAIL_POINTS = 160    # log-spaced times from the CPU time's median into the tail


def one_scv(family: str, scv: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log((1 - rho) t_q) for every rho of RHO (rows) and z of Z (columns), with the raw times
    and survival functions."""
    if scv >= NEAR_CONSTANT_SCV[family]:
        raise ValueError(f"{family} scv={scv} is not computed by capacity._ps_near_constant")
    svc = getattr(Service, family)(1.0, scv)
    et = 1.0 / (1.0 - RHO)
    lo, up = float(svc.ppf(1e-7)), float(svc.ppf(1.0 - 1e-7))
    # Linear over a narrow law (its knee); geometric once the range spans a factor 100 (lognormal
    # above scv 0.22), where linear spacing left the low levels 25 % apart in t and p10 1-2 % off.
    body = np.geomspace(lo, up, BODY_POINTS) if up > 100 * lo else np.linspace(lo, up, BODY_POINTS)
    start = float(svc.ppf(0.5))
    hi = np.maximum(float(svc.ppf(1.0 - 1e-9)) * et, 60.0 * et)
    n = BODY_POINTS + TAIL_POINTS
    out = np.full((RHO.size, Z.size), np.nan)
    raw_t, raw_sf = np.empty((RHO.size, n)), np.empty((RHO.size, n))
    todo = np.arange(RHO.size)
    for _ in range(5):
        tail = np.exp(np.linspace(np.log(start), np.log(hi[todo]), TAIL_POINTS + 1)[1:].T)
        t = np.sort(np.concatenate([np.broadcast_to(body, (todo.size, BODY_POINTS)), tail], axis=1), axis=1)
        sf = np.asarray(ps.response_sf(t, RHO[todo, None], svc), dtype=float)
        failed = []
        for row, i in enumerate(todo):
            raw_t[i], raw_sf[i] = t[row], sf[row]
            levels = _levels(t[row], sf[row], RHO[i], Z)
            if levels is None:
                failed.append(i)
                hi[i] *= 4.0
            else:
                out[i] = levels
        if not failed:
            return out, raw_t, raw_sf
        todo = np.array(failed)
    raise RuntimeError(f"{family} scv={scv}: the time grid does not cover the levels at rho={RHO[todo]}")


def build_family(family: str) -> np.ndarray:
    BUILD.mkdir(parents=True, exist_ok=True)
    order = range(SCV[family].size)
    # BUILD_REVERSE=1 walks the scv values from the top, so a second process can share a family.
    done = {}
    for j in (order[::-1] if os.environ.get("BUILD_REVERSE") else order):
        path = BUILD / f"{family}_{j:02d}.npz"
        if path.exists():
            done[j] = np.load(path)["table"]
            continue
        t0 = time.perf_counter()
        table, raw_t, raw_sf = one_scv(family, float(SCV[family][j]))
        np.savez(path, table=table, t=raw_t, sf=raw_sf)
        done[j] = table
        print(f"{family} scv={SCV[family][j]:.4g}: {time.perf_counter() - t0:.1f} s", flush=True)
    return np.stack([done[j] for j in order], axis=1)   # (rho, scv, z)


def main(families: list[str]) -> None:
    arrays = {}
    if OUT.exists():
        with np.load(OUT) as old:
            if np.array_equal(old["rho"], RHO) and np.array_equal(old["z"], Z):
                arrays = {k: old[k] for k in old.files if k not in ("rho", "z")}
    for fam in families:
        arrays[f"scv_{fam}"] = SCV[fam]
        arrays[f"log_scaled_{fam}"] = build_family(fam).astype(np.float32)
    np.savez_compressed(OUT, rho=RHO, z=Z, **arrays)
    print(f"wrote {OUT.relative_to(ROOT)} with {', '.join(families)}")


def build_fcfs(families: list[str]) -> None:
    """The FCFS table of nearly constant CPU: exact M/G/1 quantiles (:func:`capacity.fcfs.response_quantile`)
    at the levels directly, on the same utilisations and levels."""
    from capacity import fcfs

    q = -np.expm1(-np.exp(Z))
    arrays = {}
    for fam in families:
        layers = []
        for scv in SCV_FCFS[fam]:
            t0 = time.perf_counter()
            t = np.asarray(fcfs.response_quantile(q[None, :], RHO[:, None], getattr(Service, fam)(1.0, float(scv))))
            layers.append(np.log(t) + np.log1p(-RHO)[:, None])
            print(f"fcfs {fam} scv={scv:.4g}: {time.perf_counter() - t0:.1f} s", flush=True)
        arrays[f"scv_{fam}"] = SCV_FCFS[fam]
        arrays[f"log_scaled_{fam}"] = np.stack(layers, axis=1).astype(np.float32)
    np.savez_compressed(OUT_FCFS, rho=RHO, z=Z, **arrays)
    print(f"wrote {OUT_FCFS.relative_to(ROOT)} with {', '.join(families)}")


def check(family: str, levels=(0.1, 0.5, 0.7, 0.9, 0.99, 0.999, 0.9999), step: int = 2) -> None:
    """The shipped table (as the package reads it) against the direct computation midway
    between its nodes (every ``step``-th cell)."""
    lr = np.log(RHO / (1 - RHO))
    ls = np.log(SCV[family])
    q = np.array(levels)
    errs = []
    for i in range(0, RHO.size - 1, step):
        rho = float(1 / (1 + np.exp(-0.5 * (lr[i] + lr[i + 1]))))
        for j in range(0, ls.size - 1, step):
            scv = float(np.exp(0.5 * (ls[j] + ls[j + 1])))
            table_mod.disabled = False
            tab = np.asarray(ps.response_quantile(q, rho, getattr(Service, family)(1.0, scv)), dtype=float)
            table_mod.disabled = True
            ref = np.asarray(ps.response_quantile(q, rho, getattr(Service, family)(1.0, scv)), dtype=float)
            err = tab / ref - 1
            errs.append(np.abs(err))
            print(f"rho={rho:.4f} scv={scv:7.4f} " + " ".join(f"{e:+.1e}" for e in err), flush=True)
    errs = np.array(errs)
    print(f"ps near-constant {family}: {len(errs)} points; max |rel. error| per level "
          f"{dict(zip(levels, errs.max(axis=0).round(5)))}; median {np.median(errs):.1e}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--check"] and len(args) > 1:
        for fam in args[1:]:
            check(fam)
    elif args[:1] == ["fcfs"] and all(a in SCV_FCFS for a in args[1:]):
        build_fcfs(args[1:])
    elif args and all(a in SCV for a in args):
        main(args)
    else:
        sys.exit(__doc__)
