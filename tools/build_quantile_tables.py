#!/usr/bin/env python
"""Build the shipped response-time quantile tables ``capacity/tables/<discipline>_quantiles.npz``.

Usage (from the repository root)::

    python tools/build_quantile_tables.py ps lognormal:7:18             # ~30 min of CPU per family
    python tools/build_quantile_tables.py fcfs lognormal gamma          # ~1 min
    python tools/build_quantile_tables.py ps gamma:3:18                 # adds gamma, keeps lognormal
    python tools/build_quantile_tables.py --check ps lognormal          # error between the nodes
    python tools/build_quantile_tables.py ps_phase_type hyperexponential  # ~3 min; for the fits
    python tools/build_quantile_tables.py ps_heavy_tail gamma           # gamma scv 3.8-53 for capacity.ps
    python tools/build_quantile_tables.py ps_heavy_tail lognormal       # 11.7-53; 36.5 and 53 ~1.5 h of CPU each
    python tools/build_quantile_tables.py ps_deterministic              # M/D/1-PS (atom exact), ~3 min
    python tools/build_quantile_tables.py ps_c4 lognormal gamma         # M/G/4-PS, ~12 min of CPU

Each family is computed into ``build/<discipline>_tables/<family>_<i>.npz`` (one file per scv
value, so an interrupted build resumes), then the families named are assembled into the
shipped table of that discipline.

What is tabulated (see :mod:`capacity._quantile_table` for how it is read): for every
utilisation ``rho`` of ``RHO`` and scv of ``SCV[family]``, a mean-1 service of that family, the
quantiles at the levels ``z = log(-log(1 - q))`` of ``Z``, stored as ``log((1 - rho) t_q)``
(smooth in ``(logit rho, log scv, z)``):

* ``fcfs``: :func:`capacity.fcfs.response_quantile` (exact M/G/1) at the levels directly;
* ``ps``: the survival function ``P(T > t)`` from :func:`capacity.ps.response_sf` (the exact
  M/PH/1-PS transform of a hyper-Erlang fit of the law) on ``T_POINTS`` log-spaced times,
  inverted by monotone (PCHIP) interpolation of ``log t`` against ``z``; the raw survival
  functions are kept in the build folder so the levels can change without recomputing.
"""
from __future__ import annotations

import functools
import os
import pathlib
import sys
import time

import numpy as np
from scipy.interpolate import PchipInterpolator

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capacity import Service, fcfs, ps  # noqa: E402
from capacity import _quantile_table as table_mod  # noqa: E402
from capacity._quantile_table import RHO, SCV, Z  # noqa: E402
from capacity import _ps_deterministic_table as det_table  # noqa: E402

table_mod.disabled = True  # a rebuild computes every point directly, never from an old table

T_POINTS = 72
# Times added, evenly spaced up to the grid's end, for the heavy-tailed gamma piece: on T_POINTS
# log-spaced times from 1e-40 to 1e5 (scv 8, utilisation 0.998) P(T > t) fell from 1e-3 to 0
# between two points, so no row reached the last level.
TAIL_POINTS = 48

#: Families a discipline's table must not carry.  FCFS hyperexponential: a table read between
#: its nodes misses the H2's leap from its fast branch to its slow one (up to 33 % off at p95,
#: light load, even on 40 levels), while the exact M/H2/1 costs only 5-15 ms for a fit's batch
#: of 500-1500 points, so capacity computes it directly.  A build drops such a family from the
#: shipped file rather than keeping it.
UNTABULATED = {"fcfs": ("hyperexponential",)}


# How far short of the last level (in z) a row's resolved tail may stop and be extrapolated.
TAIL_REACH = 0.35


def _levels(t: np.ndarray, sf: np.ndarray, rho: float, Z: np.ndarray = Z) -> np.ndarray | None:
    """log((1 - rho) t_q) at the levels Z from one row of P(T > t), or None if not covered.

    Near rho = 1 the transform resolves P(T > t) only to ~1e-6 absolute at the huge t of the far
    tail (heavy-tailed gamma above scv 1.2 at rho >= 0.986 stops near P = 4e-5).  A row whose tail
    reaches within TAIL_REACH of the last level is extrapolated there linearly in (z, log t), with
    the slope of its last 0.5 in z: the PS tail is exponential, -log P(T > t) ~ g t, so log t is
    asymptotically z - log g, slope 1."""
    ok = (sf > 1e-12) & (sf < 1.0 - 1e-12)
    g = np.log(-np.log(sf[ok]))
    y = np.log(t[ok])
    g, y = _monotone(g, y)
    if g.size < 8 or g[0] > Z[0] or g[-1] < Z[-1] - TAIL_REACH:
        return None
    return _at_levels(g, y, Z) + np.log1p(-rho)


def _monotone(g: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points of (level, log t) where the level keeps rising: the transform's absolute error
    (~1e-9) can make the far tail wiggle."""
    keep = np.concatenate([[True], np.diff(g) > 0]) & (g >= np.maximum.accumulate(g))
    return g[keep], y[keep]


def _at_levels(g: np.ndarray, y: np.ndarray, z: np.ndarray, min_slope: float = -np.inf) -> np.ndarray:
    """log t at the levels ``z``: monotone (PCHIP) interpolation of ``y`` against ``g``, and beyond
    the last point linear with the slope of its last 0.5 in level (at least ``min_slope``)."""
    inside = z <= g[-1]
    out = np.empty(z.size)
    out[inside] = PchipInterpolator(g, y)(z[inside])
    if not inside.all():
        last = g >= g[-1] - 0.5
        slope = max(np.polyfit(g[last], y[last], 1)[0] if last.sum() >= 2 else 1.0, min_slope)
        out[~inside] = y[-1] + slope * (z[~inside] - g[-1])
    return out


def one_scv_fcfs(family: str, scv: float) -> np.ndarray:
    """log((1 - rho) t_q) for every rho of RHO (rows) and z of Z (columns), exact M/G/1."""
    q = -np.expm1(-np.exp(Z))
    t = np.asarray(fcfs.response_quantile(q[None, :], RHO[:, None], getattr(Service, family)(1.0, scv)))
    return np.log(t) + np.log1p(-RHO)[:, None]


def _t_grid(lo: np.ndarray, hi: np.ndarray, tail: int) -> np.ndarray:
    """T_POINTS log-spaced times from ``lo`` to ``hi`` per row, plus ``tail`` evenly spaced ones
    below ``hi`` (where the exponential tail of P(T > t) falls), sorted: shape (rows, times)."""
    t = np.exp(np.linspace(np.log(lo), np.log(hi), T_POINTS).T)
    if tail:
        t = np.sort(np.concatenate([t, hi[:, None] * np.arange(1, tail + 1) / (tail + 1)], axis=1), axis=1)
    return t


def one_scv(family: str, scv: float, z: np.ndarray = Z, tail: int = 0, servers: int = 1) -> np.ndarray:
    """log((1 - rho) t_q) for every rho of RHO (rows; on ``servers`` cores, the rows of
    :data:`table_mod.PS_MANY_CORES_RHO`) and level of ``z`` (columns); ``tail`` extra times in
    the tail (:func:`_t_grid`)."""
    RHO = table_mod.RHO if servers == 1 else table_mod.PS_MANY_CORES_RHO  # noqa: N806
    svc = getattr(Service, family)(1.0, scv)
    et = 1.0 / (1.0 - RHO)                                     # E[T] with E[S] = 1
    # The hyper-Erlang fit of a low-scv law has a heavier lower tail than the law itself.
    lo = np.full(RHO.size, 0.1 * float(svc.ppf(1e-5)))
    if tail:
        # Heavy-tailed gamma: its ppf(1e-5) underflows (scv 50: 1e-250), while the fit floors sizes
        # at phasetype.SIZE_FLOOR (1e-6 E[S]); a row short of the first level is widened below.
        lo = np.maximum(lo, 1e-9)
    hi = np.maximum(float(svc.ppf(1.0 - 1e-9)) * et, 200.0 * et)
    out = np.full((RHO.size, z.size), np.nan)
    width = T_POINTS + tail + (z.size if servers > 1 else 0)
    raw_t = np.empty((RHO.size, width))
    raw_sf = np.empty((RHO.size, width))
    todo = np.arange(RHO.size)
    for _ in range(6):
        t = _t_grid(lo[todo], hi[todo], tail)                  # (rows, T)
        if servers > 1:
            # On several cores T = S until a request shares one, and T >= S: the law's own
            # quantiles at the levels bracket the first one (a nearly constant law's P(T > t) falls
            # from 0.999 to 0.99 between two log-spaced points).
            own = np.asarray(svc.ppf(-np.expm1(-np.exp(z))), dtype=float)
            t = np.sort(np.concatenate([t, np.broadcast_to(own, (t.shape[0], own.size))], axis=1), axis=1)
        sf = np.asarray(ps.response_sf(t, servers * RHO[todo, None], svc, servers), dtype=float)
        failed = []
        for row, i in enumerate(todo):
            raw_t[i], raw_sf[i] = t[row], sf[row]
            levels = _levels(t[row], sf[row], RHO[i], Z=z)
            if levels is None:
                failed.append(i)
                # Widen whichever end fell short.
                if sf[row, 0] < 1.0 - 1e-4:
                    lo[i] /= 10.0
                if sf[row, -1] > 1e-7:
                    hi[i] *= 4.0
            else:
                out[i] = levels
        if not failed:
            return out, raw_t, raw_sf
        todo = np.array(failed)
    raise RuntimeError(f"{family} scv={scv}: t grid does not cover the levels at rho={RHO[todo]}")


def _scv_grid(discipline: str, family: str) -> np.ndarray:
    """The scv nodes of a family in a discipline's table (the phase-type and heavy-tail PS tables
    have their own)."""
    own = {table_mod.PS_PHASE_TYPE: table_mod.PS_PHASE_TYPE_SCV,
           table_mod.PS_HEAVY_TAIL: table_mod.PS_HEAVY_TAIL_SCV,
           **{name: table_mod.PS_MANY_CORES_SCV for name in table_mod.PS_MANY_CORES.values()}}
    return own.get(discipline, SCV)[family]


def _servers(discipline: str) -> int:
    """The core count of a discipline's table (1 but for the M/G/c-PS ones)."""
    return next((c for c, name in table_mod.PS_MANY_CORES.items() if name == discipline), 1)


def _rho_grid(discipline: str) -> np.ndarray:
    return RHO if _servers(discipline) == 1 else table_mod.PS_MANY_CORES_RHO


def _z_grid(discipline: str) -> np.ndarray:
    """The levels of a discipline's table (the phase-type PS table has finer ones)."""
    return table_mod.PS_PHASE_TYPE_Z if discipline == table_mod.PS_PHASE_TYPE else Z


def _relevel(raw_t: np.ndarray, raw_sf: np.ndarray, z: np.ndarray) -> np.ndarray:
    """A PS build file's rows of P(T > t) read at other levels (no recomputation)."""
    rows = [_levels(raw_t[i], raw_sf[i], rho, Z=z) for i, rho in enumerate(RHO[:raw_t.shape[0]])]
    if any(r is None for r in rows):
        raise RuntimeError("the saved rows of P(T > t) do not cover these levels: rebuild")
    return np.array(rows)


def near_constant_rows(family: str, scv: float, servers: int, anchor: np.ndarray) -> np.ndarray:
    """The rows of an M/G/c-PS table (c > 1) at an scv below its anchor node
    :data:`capacity._quantile_table.MANY_CORES_NEAR_CONSTANT_BELOW` (0.04): ``log t`` linear in the
    coefficient of variation between deterministic CPU on ``servers`` cores (cv = 0, the extra-delay
    path of :mod:`capacity._ps_many_cores`) and the anchor's rows (``anchor``, log((1 - rho) t_q)).

    Not the direct computation: its phase-type fit of the tagged request's law cannot follow a law
    this narrow (16-20 phases), and its quantiles fall far below the truth (gamma scv 0.0106 on 4
    cores at utilisation 0.8, E[S] = 1: p50 / p90 / p99 0.996 / 1.29 / 2.90, PS simulation 1.37 /
    3.08 / 5.68).  Why cv: the response's spread about the knee (the request served alone) scales
    with the CPU time's standard deviation, as for FCFS (``capacity._quantile_table._fcfs_below_table``)."""
    w = np.sqrt(scv / table_mod.MANY_CORES_NEAR_CONSTANT_BELOW)
    return (1.0 - w) * _deterministic_rows(servers) + w * anchor


@functools.lru_cache(maxsize=None)
def _deterministic_rows(servers: int) -> np.ndarray:
    """log((1 - rho) t_q) of deterministic CPU (E[S] = 1) on ``servers`` cores at the M/G/c-PS
    tables' utilisations and levels (~40 s)."""
    rho = table_mod.PS_MANY_CORES_RHO
    q = -np.expm1(-np.exp(Z))
    det = np.asarray(ps.response_quantile(q[None, :], servers * rho[:, None], Service.deterministic(1.0),
                                          servers=servers), dtype=float)
    # The extra-delay path's quantiles may step back by ~1e-9 between levels (its solver's noise).
    det = np.maximum.accumulate(det, axis=1)
    return np.log(det) + np.log1p(-rho)[:, None]


#: Sizes, in units of the mean residual CPU time of the requests found, E[S^2] / (2 E[S]) =
#: (1 + scv) / 2 E[S], between which the heavy-tail piece's nodes move from the small-request
#: limit (below) to the direct computation (above); and utilisations between which they do
#: (below the first, the small-request limit at every size).  Smoothsteps in log size and log
#: utilisation (:func:`small_request_body`).
SMALL_REQUEST_SIZES = (0.05, 2.0)
SMALL_REQUEST_LOADS = (0.01, 0.1)


def _smoothstep(x: np.ndarray, a: float, b: float) -> np.ndarray:
    u = np.clip((x - a) / (b - a), 0.0, 1.0)
    return u * u * (3.0 - 2.0 * u)


def small_request_body(family: str, values: np.ndarray, scv_grid: np.ndarray) -> np.ndarray:
    """The heavy-tail piece's nodes (log((1 - rho) t_q), shape (rho, scv, z)) taken from the
    small-request limit of M/G/1-PS (``tools/small_job_ps.py``) where it holds, from the direct
    computation elsewhere, log-linearly blended with weight ``w_size(s_q) w_load(rho)`` on the
    direct one (:data:`SMALL_REQUEST_SIZES`, :data:`SMALL_REQUEST_LOADS`).

    Why: the direct computation's hyper-Erlang fit floors sizes at 1e-6 E[S] and misses the body
    of a heavy-tailed gamma (scv 40, utilisation 0.9: p50 8e4 times the simulated one, p70 +23 %;
    at light load, where ``T -> S``, p90 up to 19 % above the law's own), where the small-request
    limit is within 4 % of simulation (``tools/measure_heavy_tail_ps.py``).  That limit gives a
    request the spread of ``S (1 + N)``; a request is "small" next to what it shares the CPU with,
    whose residual CPU time is (1 + scv) / 2 E[S] on average (22 E[S] at scv 44), and at light load
    it shares with nobody.  It is high in the far tail of a loaded queue, and a little low
    around a size equal to that residual (scv 5.5, utilisation 0.5, p90: -4 %), where the direct
    computation is within 2 %."""
    import small_job_ps

    q = -np.expm1(-np.exp(Z))
    out = values.astype(float).copy()
    w_load = _smoothstep(np.log(RHO), *np.log(SMALL_REQUEST_LOADS))
    for j, scv in enumerate(scv_grid):
        own = np.log(small_job_ps.service_quantile(family, float(scv), q) / (0.5 * (1.0 + scv)))
        w_size = _smoothstep(own, *np.log(SMALL_REQUEST_SIZES))
        for i, rho in enumerate(RHO):
            w = w_size * w_load[i]                     # weight of the direct computation
            if np.all(w == 1.0):
                continue
            small = small_job_ps.log_quantile(q, float(rho), family, float(scv)) + np.log1p(-rho)
            out[i, j] = (1.0 - w) * small + w * out[i, j]
    # Held in load order here, as the reader would (the blend in load lifts a light-load tail from
    # the small-request limit, exact there, towards the direct computation's, a few % high).
    return table_mod._in_load_order(RHO, out)


def build_family(discipline: str, family: str, layers: range | None = None) -> np.ndarray:
    build = ROOT / "build" / f"{discipline}_tables"
    build.mkdir(parents=True, exist_ok=True)
    # BUILD_REVERSE=1 walks the scv values from the top, so a second process can share a family.
    grid = _scv_grid(discipline, family)
    layers_wanted = range(grid.size) if layers is None else layers
    order = layers_wanted[::-1] if os.environ.get("BUILD_REVERSE") else layers_wanted
    servers = _servers(discipline)
    if servers > 1:
        # The near-constant rows lean on the anchor node's: computed after it.
        below = grid < table_mod.MANY_CORES_NEAR_CONSTANT_BELOW * (1 - 1e-9)
        order = [j for j in order if not below[j]] + [j for j in order if below[j]]
    done = {}
    for j in order:
        scv = grid[j]
        path = build / f"{family}_{j:02d}.npz"
        if path.exists():
            with np.load(path) as saved:
                done[j] = saved["table"]
                if done[j].shape[-1] != _z_grid(discipline).size:
                    done[j] = _relevel(saved["t"], saved["sf"], _z_grid(discipline))
            continue
        t0 = time.perf_counter()
        if discipline == "fcfs":
            table = one_scv_fcfs(family, float(scv))
            np.savez(path, table=table)
        elif servers > 1 and scv < table_mod.MANY_CORES_NEAR_CONSTANT_BELOW * (1 - 1e-9):
            anchor = int(np.argmin(np.abs(grid - table_mod.MANY_CORES_NEAR_CONSTANT_BELOW)))
            if anchor not in done:
                raise RuntimeError(f"{discipline} {family}: build the anchor scv {grid[anchor]:.4g} first")
            table = near_constant_rows(family, float(scv), servers, done[anchor])
            np.savez(path, table=table)
        else:
            tail = TAIL_POINTS if discipline == table_mod.PS_HEAVY_TAIL else 0
            table, raw_t, raw_sf = one_scv(family, float(scv), _z_grid(discipline), tail, _servers(discipline))
            np.savez(path, table=table, t=raw_t, sf=raw_sf)
        done[j] = table
        print(f"{discipline} {family} scv={scv:.4g}: {time.perf_counter() - t0:.1f} s", flush=True)
    return np.stack([done[j] for j in layers_wanted], axis=1)  # (rho, scv, z)


def check(discipline: str, family: str, levels=(0.5, 0.9, 0.99, 0.999), step: int = 2) -> None:
    """Table against the direct computation midway between nodes (every ``step``-th cell)."""
    model = ps if discipline.startswith("ps") else fcfs
    RHO, c = _rho_grid(discipline), _servers(discipline)  # noqa: N806
    lr = np.log(RHO / (1 - RHO))
    with np.load(table_mod.path(discipline)) as data:
        ls = np.log(data[f"scv_{family}"])
    # This file's piece (the one starting at its first node; PS gamma has pieces above and below).
    pieces = table_mod._interpolators(discipline)[family]
    piece = next(p for p in pieces if np.isclose(p.lo, np.exp(ls[0])))
    q = np.array(levels)
    z = np.log(-np.log1p(-q))
    worst = np.zeros(q.size)
    errs = []
    for i in range(0, RHO.size - 1, step):
        rho = 1 / (1 + np.exp(-0.5 * (lr[i] + lr[i + 1])))
        for j in range(0, ls.size - 1, step):
            scv = float(np.exp(0.5 * (ls[j] + ls[j + 1])))
            tab = np.exp(piece.log_t(z, np.full(q.size, rho), np.full(q.size, scv)))
            ref = np.asarray(model.response_quantile(q, c * rho, getattr(Service, family)(1.0, scv), c), dtype=float)
            err = tab / ref - 1
            errs.append(np.abs(err))
            worst = np.maximum(worst, np.abs(err))
            print(f"rho={rho:.4f} scv={scv:7.3f} " + " ".join(f"{e:+.1e}" for e in err), flush=True)
    errs = np.array(errs)
    print(f"{discipline} {family}: {len(errs)} points; max |rel. error| per level {dict(zip(levels, worst.round(6)))}; "
          f"median {np.median(errs):.1e}")


def one_rho_deterministic(rho: float, saved: tuple | None = None) -> tuple:
    """One row of the M/D/1-PS table (:mod:`capacity._ps_deterministic_table`): log((1 - rho) t_p)
    at its conditional levels p above the atom, and the last level the direct computation resolves,
    from P(T > t) of capacity.ps (S = 1) on times S + x, x log-spaced from 1e-4, plus TAIL_POINTS
    evenly spaced ones in the tail (or from the saved times and P(T > t) of an earlier build)."""
    svc = Service.deterministic(1.0)
    hi = 200.0 / (1.0 - rho)
    for _ in range(6):
        if saved is None:
            t = np.sort(np.concatenate([1.0 + np.geomspace(1e-4, hi - 1.0, 2 * T_POINTS),
                                        hi * np.arange(1, TAIL_POINTS + 1) / (TAIL_POINTS + 1)]))
            sf = np.asarray(ps.response_sf(t, rho, svc), dtype=float)
        else:
            t, sf = saved
        levels = _resolved_levels(t, sf, rho)
        if levels is not None:
            return (*levels, t, sf)
        hi *= 4.0
    raise RuntimeError(f"deterministic rho={rho}: t grid does not cover the levels")


def _resolved_levels(t: np.ndarray, sf: np.ndarray, rho: float) -> tuple | None:
    """(log((1 - rho) t_p) at the levels, z of the last resolved point) from one row of P(T > t).

    The row is kept from S up to where P(T > t) stops falling or drops below 1e-10: below
    utilisation ~0.1 the Euler inversion rings beyond the density's drop at 2S (up to 1e-5
    absolute at utilisation 0.001-0.01, 3e-4 at 0.03), and a ringing tail is no answer.  Levels
    beyond the last kept point are filled along the tail's last slope (for the spline only: the
    table does not answer there, see capacity._ps_deterministic_table)."""
    cond = sf / (1.0 - float(det_table.atom(rho)))
    start = np.searchsorted(t, 1.5)
    bad = np.flatnonzero((np.diff(sf[start:]) >= 0) | (sf[start + 1:] <= 1e-10))
    cut = start + (bad[0] if bad.size else sf.size - 1 - start)
    ok = (cond > 0) & (cond < 1.0 - 1e-12) & (np.arange(t.size) <= cut)
    g, y = _monotone(np.log(-np.log(cond[ok])), np.log(t[ok]))
    z = det_table.Z
    if g.size < 8 or g[0] > z[0] or g[-1] < z[0] + 1.0:
        return None
    return _at_levels(g, y, z, min_slope=0.2) + np.log1p(-rho), float(g[-1])


def build_deterministic() -> None:
    """The M/D/1-PS table, one build file per utilisation (an interrupted build resumes)."""
    build = ROOT / "build" / f"{det_table.PS_DETERMINISTIC}_tables"
    build.mkdir(parents=True, exist_ok=True)
    rows, tops = [], []
    for i, rho in enumerate(det_table.RHO):
        file = build / f"rho_{i:02d}.npz"
        saved = None
        if file.exists():
            with np.load(file) as data:
                saved = (data["t"], data["sf"])
        t0 = time.perf_counter()
        row, top, t, sf = one_rho_deterministic(float(rho), saved)
        if saved is None:
            np.savez(file, t=t, sf=sf)
            print(f"deterministic rho={rho:.4g}: {time.perf_counter() - t0:.1f} s", flush=True)
        rows.append(row)
        tops.append(top)
    out = table_mod.path(det_table.PS_DETERMINISTIC)
    np.savez_compressed(out, rho=det_table.RHO, z=det_table.Z, log_scaled=np.array(rows, dtype=np.float32),
                        z_resolved=np.array(tops))
    print(f"wrote {out.relative_to(ROOT)}")


def check_deterministic(step: int = 1) -> None:
    """The M/D/1-PS table against the direct computation midway between nodes in utilisation and
    level (every ``step``-th cell of each; q from the atom to 1 - 1e-6, where the table answers)."""
    lr = np.log(det_table.RHO / (1 - det_table.RHO))
    rho = (1 / (1 + np.exp(-0.5 * (lr[:-1] + lr[1:]))))[::step]
    zc = (0.5 * (det_table.Z[:-1] + det_table.Z[1:]))[::step]
    a = det_table.atom(rho)[:, None]
    p = np.broadcast_to(-np.expm1(-np.exp(zc))[None, :], (rho.size, zc.size))
    q = np.minimum(a + (1 - a) * p, 1.0)
    table_mod.disabled = False
    tab = det_table.quantile(q.ravel(), np.repeat(rho, zc.size)).reshape(q.shape)
    table_mod.disabled = True
    svc = Service.deterministic(1.0)
    ref = np.full(q.shape, np.nan)
    for i in range(rho.size):
        ok = np.isfinite(tab[i])
        ref[i, ok] = np.asarray(ps.response_quantile(q[i, ok], rho[i], svc), dtype=float)
    err = np.abs(tab / ref - 1)
    np.savez(ROOT / "build" / "ps_deterministic_check.npz", rho=rho, q=q, p=p, tab=tab, ref=ref)
    for name, sel in (("p >= 0.05", p >= 0.05), ("p < 0.05", p < 0.05), ("all", p > 0)):
        e = err[sel & np.isfinite(err)]
        print(f"deterministic {name}: {e.size} points, max {e.max():.2e}, median {np.median(e):.1e}, "
              f"99th percentile {np.quantile(e, 0.99):.1e}")
    i, j = np.unravel_index(np.nanargmax(np.where(p >= 0.05, err, np.nan)), err.shape)
    print(f"  worst (p >= 0.05) at rho={rho[i]:.4f} q={q[i, j]:.6f} p={p[i, j]:.4f}: {tab[i, j]:.6f} vs {ref[i, j]:.6f}")


def main(discipline: str, families: list[str]) -> None:
    """``families``: names, each optionally ``name:LO:HI`` to tabulate only scv values LO..HI-1."""
    chosen = {}
    for f in families:
        name, *bounds = f.split(":")
        if name in UNTABULATED.get(discipline, ()):
            sys.exit(f"{discipline} {name} is computed exactly, never tabulated (see UNTABULATED)")
        chosen[name] = (range(int(bounds[0]), int(bounds[1])) if bounds
                        else range(_scv_grid(discipline, name).size))
    tables = {f: build_family(discipline, f, r) for f, r in chosen.items()}
    if discipline == table_mod.PS_HEAVY_TAIL:
        tables = {f: small_request_body(f, t, _scv_grid(discipline, f)[chosen[f].start:chosen[f].stop])
                  if f in table_mod.HEAVY_TAIL_RELATIVE else t for f, t in tables.items()}
    out = table_mod.path(discipline)
    out.parent.mkdir(parents=True, exist_ok=True)
    arrays = {}
    if out.exists():
        # Families already shipped and not named here are kept as they are (adding gamma to the
        # PS table does not recompute its lognormal part).
        with np.load(out) as old:
            # Same grids to rounding (numpy 2.4's geomspace moved two of 25 values by one unit).
            same = all(old[k].shape == g.shape and np.allclose(old[k], g, rtol=1e-12, atol=0.0)
                       for k, g in (("rho", _rho_grid(discipline)), ("z", _z_grid(discipline))))
            if same:
                dropped = {f"{p}_{f}" for f in UNTABULATED.get(discipline, ()) for p in ("scv", "log_scaled")}
                arrays = {k: old[k] for k in old.files if k not in ("rho", "z", *dropped)}
            else:
                print(f"{out.relative_to(ROOT)} has other grids: its other families are not kept", flush=True)
    arrays.update({f"scv_{f}": _scv_grid(discipline, f)[chosen[f].start:chosen[f].stop] for f in tables})
    arrays.update({f"log_scaled_{f}": t.astype(np.float32) for f, t in tables.items()})
    np.savez_compressed(out, rho=_rho_grid(discipline), z=_z_grid(discipline), **arrays)
    kept = sorted({k[len("scv_"):] for k in arrays if k.startswith("scv_")} - set(tables))
    print(f"wrote {out.relative_to(ROOT)} with {', '.join(tables)}" + (f" (kept {', '.join(kept)})" if kept else ""))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == [det_table.PS_DETERMINISTIC]:
        build_deterministic()
    elif args[:2] == ["--check", det_table.PS_DETERMINISTIC]:
        check_deterministic(*(int(a) for a in args[2:3]))
    elif args[:1] == ["--check"]:
        for fam in args[2:]:
            check(args[1], fam)
    elif args and args[0] in (*table_mod.DISCIPLINES, table_mod.PS_PHASE_TYPE, table_mod.PS_HEAVY_TAIL,
                              *table_mod.PS_MANY_CORES.values()) and len(args) > 1:
        main(args[0], args[1:])
    else:
        sys.exit(__doc__)
