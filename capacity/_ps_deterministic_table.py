"""M/D/1 processor sharing from a shipped table: deterministic CPU time on one core.

Why a table
-----------
:mod:`capacity.ps` computes the M/D/1-PS response time from the exact transform of a request of
known size among others represented as Erlang-24 (:func:`capacity.ps.response_sf`): 60-280 ms
for four quantiles at one point, so a percentile fit (tens of evaluations) took 0.8-1.3 s, and
round robin's PS half the same.  In units of the CPU time ``S`` the response time depends only
on the utilisation ``rho``, so that computation is done once on a grid
(``tools/build_quantile_tables.py ps_deterministic``) and read here.

The atom, exactly
-----------------
``T >= S`` path by path, and ``T = S`` exactly when the request arrives to an empty core and
nobody arrives while it runs: ``P(T = S) = a = (1 - rho) exp(-rho)`` (PASTA, then Poisson
arrivals over ``S``; ``lambda S = rho``).  Every level ``q <= a`` has the quantile ``S`` exactly.
Above it the table holds the law of ``T`` given ``T > S``, at the conditional level
``p = (q - a) / (1 - a)``, so the jump of ``P(T <= t)`` at ``S`` is never interpolated:

    log((1 - rho) t_p / S)   on a grid in (logit rho, z),  z = log(-log(1 - p)),

48 utilisations from 0.001 to 0.999 and 120 levels from p = 0.01 to 1 - 1e-6, read by the cubic
tensor spline of :func:`capacity._quantile_table._tensor_spline`.  Between ``p = 0`` and the
first level, ``t_p`` is linear in ``p`` from ``S``: the density of ``T`` just above ``S`` is
finite (``2 rho (1 - rho) exp(-rho) / S``: one arrival during the request's solo run, or one
other present with a uniform residual), so ``t_p - S`` is proportional to ``p`` there.  Below
utilisation 0.001 the value at 0.001 is used (the atom stays exact).  ``P(T > t)`` is the same
spline solved for the level.

Accuracy
--------
Against the direct computation midway between the nodes (1371 cell midpoints: every other
utilisation and level cell, q from the atom to 1 - 1e-6; ``tools/build_quantile_tables.py --check
ps_deterministic 2``; ``tests/test_ps_deterministic_table.py``): from utilisation 0.2 up at most
0.69 % (near t = 2S, where the density drops and the spline rounds the kink), 99th percentile
0.32 %, median 3e-6; below 0.2 and q <= 0.999 at most 4.9 % (99th percentile 2.4 %); beyond
q = 0.999 below 0.2 up to 40 %.  There the direct computation rings (its Euler inversion, +-1e-5
to 3e-4 absolute in P(T > t) beyond 2S at utilisation 0.001-0.1) and the table, built through
it, is the closer of the two to exact PS simulation (99 % CIs of 1.5e6-4e6 requests)::

    rho    q                       table                   direct
    0.012  0.999 / 0.9995 / 0.9997 +0.3 / +1.4 / +2.4 %    +1.2 / +1.6 / +6.7 %
    0.038  0.995 / 0.9978          +0.2 / +1.2 %           +1.1 / -3.4 %
    0.113  0.99 / 0.999 / 0.9993   -1.1 / -0.6 / +0.5 %    +0.4 / -2.8 / +3.7 %
    0.2    0.9 / 0.99 / 0.999      +0.2 / -0.3 / -0.0 %    +0.2 / +1.0 / +0.9 %

Each row is resolved only up to where its direct P(T > t) stops falling (``z_resolved``: every
level from utilisation ~0.2 up; below, from p ~0.998 at 0.001 to p ~0.986 at 0.03).  Beyond, the
direct computation is as wrong as it is slow (0.4 s for four levels at one point; a histogram
fit of deterministic CPU, which needs every level at every window, took 697 s through it), so
the table continues each such row by the straight line in ``(z, log t)`` through its last
resolved node and the node ``_TAIL_RUN`` = 0.5 below, then holds every level's nodes
non-decreasing in the load (:func:`_filled`).  Against PS simulation (4e6 requests a point,
``S = 1``; q 0.9999 / 0.99999; the direct computation in brackets)::

    rho    line                  direct
    0.02   -10.2 / -15.2 %       (-6.7 / +36 %)
    0.05   -0.3 / -3.1 %         (+12.5 / +34 %)
    0.1    -9.1 / -12.4 %        (-6.1 / +14 %)
    0.15   +1.2 / -2.1 %         (-2.9 / -2.9 %)

(the simulated quantiles at 0.99999 rest on 40 requests each, about +-5 %).  Between the nodes the
spline keeps each conditional level non-decreasing in the load to 1.6e-4 in ``log t`` (a scan of
23,000 utilisations by 110 levels; 6e-6 in the levels resolved before, 2.4e-4 in ``z`` as before).
At a fixed level ``q`` of the whole law it does not: the atom's mass moves with the load, and the
quantile falls by up to 2.3 % as the load rises (q = 1 - 1e-6, utilisation 0.049 -> 0.061; 1.1 %
at q = 0.99999, none found at q <= 0.9999) and by up to 0.43 % as ``q`` rises (utilisation
0.044, q 0.9975 -> 0.9979): scans of 6,000 utilisations and 3,000 levels.  Reading it monotone
would move the round-robin constants fitted through this table (``tools/calibrate_rr.py``), so
it waits for a refit of them.  Just
above the atom the direct computation is off too (its inversion puts 0.4 % of the conditional
mass on ``S`` itself and then lags, up to 0.15 % in ``t`` for p < 0.05); below p = 0.01 the
table is the exact linear start, and within 1.5e-3 of it up to p = 0.01.  Elsewhere the error
against simulation is the direct computation's (:func:`capacity.ps.response_quantile`, the
deterministic rows).

Several cores, utilisation above 0.999 and levels above 1 - 1e-6 are computed directly.
"""
from __future__ import annotations

import functools

import numpy as np

from . import _quantile_table

#: Name of the shipped file (``capacity/tables/ps_deterministic_quantiles.npz``).
PS_DETERMINISTIC = "ps_deterministic"
#: Utilisations, evenly spaced in logit(rho) from 0.001 to 0.999.
RHO = 1.0 / (1.0 + np.exp(-np.linspace(np.log(0.001 / 0.999), np.log(0.999 / 0.001), 48)))
#: Conditional levels above the atom, z = log(-log(1 - p)) evenly spaced from p = 0.01 to 1 - 1e-6.
Z = np.linspace(np.log(-np.log1p(-0.01)), np.log(-np.log(1e-6)), 120)
#: The highest level q answered (as for the other tables): beyond it, the direct computation.
Q_MAX = 1.0 - 1e-6
_SLACK = 1e-9
#: How a light-load row is continued beyond its last resolved level (:func:`_filled`): the run of
#: levels (in z) its line is fitted over, and the least slope the line may have (log t increasing).
_TAIL_RUN = 0.5
_MIN_SLOPE = 1e-3


def atom(rho: np.ndarray) -> np.ndarray:
    """``P(T = S)`` on one core: ``(1 - rho) exp(-rho)`` (empty at arrival, nobody arriving during S)."""
    return (1.0 - rho) * np.exp(-rho)


@functools.lru_cache(maxsize=None)
def _table():
    """The spline in (logit rho, z) through the shipped nodes, those beyond a row's last resolved
    level filled by :func:`_filled`, or None when the file is missing."""
    file = _quantile_table.path(PS_DETERMINISTIC)
    if not file.exists():
        return None
    with np.load(file) as data:
        rho, z, values = data["rho"], data["z"], data["log_scaled"].astype(float)
        resolved = data["z_resolved"]
    return _quantile_table._tensor_spline((np.log(rho / (1.0 - rho)), z), _filled(rho, z, values, resolved))


def _filled(rho: np.ndarray, z: np.ndarray, values: np.ndarray, resolved: np.ndarray) -> np.ndarray:
    """The nodes ``log((1 - rho) t / S)`` with each light-load row continued beyond its last
    resolved level ``z_r`` (where the direct computation rings) by the straight line in
    ``(z, log t)`` through the row's nodes at ``z_r`` and :data:`_TAIL_RUN` below it, then held
    non-decreasing in the load at every level (more load never shortens a quantile; the rows'
    lines differ in slope).  Error against simulation in the module docstring; holding the load
    order moves 18 of the resolved nodes, by at most 3.9e-4 in log t."""
    rows = np.arange(rho.size)
    last = np.searchsorted(z, np.minimum(resolved, z[-1]), side="right") - 1   # each row's last resolved
    back = np.searchsorted(z, z[last] - _TAIL_RUN)
    slope = np.maximum((values[rows, last] - values[rows, back]) / (z[last] - z[back]), _MIN_SLOPE)
    line = values[rows, last][:, None] + slope[:, None] * (z[None, :] - z[last][:, None])
    out = np.where(np.arange(z.size)[None, :] > last[:, None], line, values)
    log_t = out - np.log1p(-rho)[:, None]
    return np.maximum.accumulate(log_t, axis=0) + np.log1p(-rho)[:, None]


def available() -> bool:
    """Whether the shipped table answers (present and not disabled by a rebuild)."""
    return not _quantile_table.disabled and _table() is not None


def direct_resolved(rho: np.ndarray) -> np.ndarray:
    """The highest conditional level z the direct computation resolves at each utilisation (the
    lower of its two neighbouring rows'): above it the table answers by its rows' lines
    (:func:`_filled`).  For the benchmark and the tests, which compare the two regimes."""
    with np.load(_quantile_table.path(PS_DETERMINISTIC)) as data:
        top = np.minimum(data["z_resolved"], Z[-1])
    rho = np.asarray(rho, dtype=float)
    k = np.clip(np.searchsorted(RHO, rho) - 1, 0, RHO.size - 2)
    return np.where(rho <= RHO[0], top[0], np.minimum(top[k], top[k + 1]))


def _log_t(z: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """log(t_p / S) at conditional level z (flat arrays, z inside the levels).  Above the top
    utilisation (to :data:`capacity._quantile_table.ONE_CORE_HEAVY_TOP`) the stored
    ``(1 - rho) t_p / S`` is held at the top's, the heavy-traffic rule of
    :func:`capacity._quantile_table._log_t_one_core_heavy`: against the direct computation at
    0.9992-0.9999, p10-p99.99, within 0.9 % (p50 up: 0.1 %; ``tools/measure_heavy_traffic.py
    one``), where that took 70-130 ms a point."""
    r = np.clip(rho, RHO[0], RHO[-1])
    pts = np.column_stack([np.log(r / (1.0 - r)), np.clip(z, Z[0], Z[-1])])
    return _table()(pts) - np.log1p(-np.where(rho > RHO[-1], rho, r))


def quantile(q: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """``t_q / S`` for flat arrays of one-core points with ``0 <= rho <= 0.9999``; NaN above Q_MAX
    (and above utilisation 0.999 below p10: :func:`_log_t`).

    ``S`` exactly at and below the atom; linear in the conditional level from ``S`` to the first
    node; the spline above."""
    q, rho = np.asarray(q, dtype=float), np.asarray(rho, dtype=float)
    a = atom(rho)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(a < 1.0, (q - a) / (1.0 - a), 0.0)
    out = np.ones(q.shape)
    ok = (q <= Q_MAX * (1 + _SLACK)) & ~_quantile_table.below_heavy_level(q, rho, RHO[-1])
    out[~ok] = np.nan
    p_first = -np.expm1(-np.exp(Z[0]))
    low = ok & (p > 0) & (p < p_first)
    if low.any():
        first = np.exp(_log_t(np.full(low.sum(), Z[0]), rho[low]))
        out[low] = 1.0 + (first - 1.0) * p[low] / p_first
    high = ok & (p >= p_first)
    if high.any():
        z = np.log(-np.log1p(-np.minimum(p[high], 1.0 - 1e-300)))
        out[high] = np.exp(_log_t(z, rho[high]))
    return out


def sf(t: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """``P(T > t S)`` for flat arrays (``t`` in units of S) of one-core points with
    ``0 <= rho <= 0.9999``; NaN where the answer lies beyond the table (P(T > t) < 1e-6, or above
    utilisation 0.999 P(T > t) > 0.9: :func:`_log_t`)."""
    t, rho = np.asarray(t, dtype=float), np.asarray(rho, dtype=float)
    a = atom(rho)
    out = np.where(t < 1.0, 1.0, 1.0 - a)           # P(T > S) = 1 - a exactly
    above = t > 1.0
    if not above.any():
        return out
    idx = np.flatnonzero(above)
    ta, ra, aa = t[idx], rho[idx], a[idx]
    p_first = -np.expm1(-np.exp(Z[0]))
    first = np.exp(_log_t(np.full(idx.size, Z[0]), ra))
    p = np.where(ta <= first, p_first * (ta - 1.0) / np.maximum(first - 1.0, 1e-300), np.nan)
    solve = np.flatnonzero(np.isnan(p))
    if solve.size:
        target = np.log(ta[solve])
        # The spline at every level, once per distinct utilisation (a histogram's buckets share one).
        rho_u, inv = np.unique(ra[solve], return_inverse=True)
        nodes = _log_t(np.broadcast_to(Z, (rho_u.size, Z.size)).ravel(),
                       np.repeat(rho_u, Z.size)).reshape(rho_u.size, Z.size)[inv.ravel()]
        z = _quantile_table.solve_level(lambda x, rows: _log_t(x, ra[solve][rows]) - target[rows], Z,
                                        nodes - target[:, None])
        p[solve] = -np.expm1(-np.exp(z))
    res = (1.0 - aa) * (1.0 - p)
    res[(res < (1.0 - Q_MAX) * (1 - _SLACK)) | _quantile_table.below_heavy_level(1.0 - res, ra, RHO[-1])] = np.nan
    out[idx] = res
    out[(t <= 1.0) & (rho > RHO[-1] * (1 + _SLACK))] = np.nan    # the level there is below p10
    return out


def _covered(inp, shape: tuple):
    """Flat arrays of the batch: (mask of the points the table answers, rho, mean, stable)."""
    flat = lambda v: np.broadcast_to(np.asarray(v, dtype=float), shape).ravel()  # noqa: E731
    rho, mean = flat(inp.utilization), flat(inp.service.mean)
    servers = np.broadcast_to(inp.servers, shape).ravel()
    stable = np.broadcast_to(inp.stable, shape).ravel()
    return (stable & (servers == 1) & (rho >= 0) & (rho <= _quantile_table.ONE_CORE_HEAVY_TOP),
            rho, mean, stable)


def _subset(inp, shape: tuple, mean: np.ndarray, rows: np.ndarray):
    """The queue inputs of the chosen flat points (for the direct computation)."""
    from ._common import prepare
    from .distributions import Service

    pick = lambda v: np.broadcast_to(v, shape).ravel()[rows]  # noqa: E731
    return prepare(pick(inp.arrival_rate), Service.deterministic(mean[rows]), pick(inp.servers))


#: log(t / S) below which a several-core row reads as S itself (the spline's rounding of the atom).
_AT_S = 5e-3


def _many_cores_rows(rho: np.ndarray, servers: int) -> np.ndarray | None:
    """log(t_q / S) of deterministic CPU on ``servers`` > 1 cores at the M/G/c-PS tables' levels
    :data:`capacity._quantile_table.Z`, one row per flat utilisation, or None where no table holds
    that core count.

    Read from the tables' gamma rows (:func:`capacity._quantile_table.deterministic_log_t`); above
    the table's top utilisation (0.991, up to one core's 0.999) by the heavy-traffic reading of
    :func:`capacity._quantile_table._log_t_heavy`, with this module's M/D/1-PS table as the one fast
    core.  ``T = S`` exactly while nobody shares a core, and the spline rounds that flat stretch by
    a few tenths of a per cent either way: within ``_AT_S`` of S is S.  Each row is held
    non-decreasing (the spline dips by up to 0.7 % between nodes at p99.9, 4 % beyond p99.99), and
    read linearly in z between the levels (:func:`_many_cores_quantile`), so the quantiles rise
    with q and P(T > t) inverts them exactly.

    Against the direct computation (extra-delay path, S = 1; utilisation 0.2-0.99, p30-p99.9;
    ``tools/measure_heavy_traffic.py deterministic``): within 0.44 / 0.40 / 0.46 / 0.29 % on 2 / 4 /
    16 / 64 cores (medians 0.05 % or less); 4.4 % on 3 cores (read between 2 and 4)."""
    name = _quantile_table.many_cores_table(servers)
    if name is None or "gamma" not in _quantile_table.families(name):
        return None
    levels = _quantile_table.Z
    z, r = np.tile(levels, rho.size), np.repeat(rho, levels.size)
    top = _quantile_table._top(name, "gamma")
    out = np.full(z.shape, np.nan)
    inside = r <= top * (1 + _SLACK)
    out[inside] = _quantile_table.deterministic_log_t(name, z[inside], r[inside])
    heavy = ~inside & (r <= RHO[-1] * (1 + _SLACK)) & (not _quantile_table.beyond_largest(name))
    if heavy.any():
        zh = z[heavy]
        q = -np.expm1(-np.exp(zh))
        out[heavy] = _quantile_table.heavy_traffic(
            lambda at: _quantile_table.deterministic_log_t(name, zh, np.broadcast_to(at, zh.shape)),
            lambda at: np.log(quantile(q, np.broadcast_to(at, zh.shape).astype(float))), servers, top, r[heavy])
    out = np.where(out < _AT_S, 0.0, out).reshape(rho.size, levels.size)
    return np.maximum.accumulate(out, axis=1)      # NaN rows (beyond 0.999) stay NaN


#: Utilisations (even in logit, 0.001 to 0.999) at which :func:`_many_cores_rows` is computed once
#: per core count; a point is read linearly in logit rho between two of them (point by point, a grid
#: of 1e5 utilisations took 9 s and 590 MB).  Against the rows at the point itself: within 0.5 % (at
#: the edge of the atom, where a row within ``_AT_S`` of S reads as S), 0.2 % at the 99.9th percentile.
_GRID_LOGIT = np.linspace(np.log(0.001 / 0.999), np.log(0.999 / 0.001), 481)
#: Points per block of :func:`_many_cores_sf` (each holds its row of levels).
_BLOCK = 65536


@functools.lru_cache(maxsize=None)
def _many_cores_grid(servers: int) -> np.ndarray | None:
    """:func:`_many_cores_rows` at the utilisations of ``_GRID_LOGIT`` (read-only), or None."""
    rows = _many_cores_rows(1.0 / (1.0 + np.exp(-_GRID_LOGIT)), servers)
    if rows is not None:
        rows.setflags(write=False)
    return rows


def _grid_cell(rho: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each utilisation's cell of ``_GRID_LOGIT`` (index of its lower row and weight of the upper),
    and which lie on the grid at all (0.001 to 0.999; below 0.001 the first row, as the tables)."""
    x = np.log(np.clip(rho, 1e-3, 1.0 - 1e-12) / (1.0 - np.clip(rho, 1e-3, 1.0 - 1e-12)))
    i = np.clip(np.searchsorted(_GRID_LOGIT, x) - 1, 0, _GRID_LOGIT.size - 2)
    w = np.clip((x - _GRID_LOGIT[i]) / (_GRID_LOGIT[i + 1] - _GRID_LOGIT[i]), 0.0, 1.0)
    return i, w, rho <= RHO[-1] * (1 + _SLACK)


def _many_cores_quantile(q: np.ndarray, rho: np.ndarray, servers: np.ndarray) -> np.ndarray:
    """``t_q / S`` of deterministic CPU at flat points on several cores; NaN where no table answers
    (or q lies outside the levels)."""
    levels = _quantile_table.Z
    out = np.full(q.shape, np.nan)
    with np.errstate(divide="ignore"):
        z = np.log(-np.log1p(-q))
    inside = (z >= levels[0] - _SLACK) & (z <= levels[-1] + _SLACK)
    for c in np.unique(servers[inside]).tolist():
        grid = _many_cores_grid(int(c))
        if grid is None:
            continue
        idx = np.flatnonzero(inside & (servers == c))
        i, w, on = _grid_cell(rho[idx])
        zi = np.clip(z[idx], levels[0], levels[-1])
        j = np.clip(np.searchsorted(levels, zi) - 1, 0, levels.size - 2)
        v = (zi - levels[j]) / (levels[j + 1] - levels[j])
        # bilinear in (logit rho, z) between four nodes, each row non-decreasing in z
        log_t = ((1.0 - w) * ((1.0 - v) * grid[i, j] + v * grid[i, j + 1])
                 + w * ((1.0 - v) * grid[i + 1, j] + v * grid[i + 1, j + 1]))
        out[idx] = np.where(on, np.exp(log_t), np.nan)
    return out


def _many_cores_sf(t: np.ndarray, rho: np.ndarray, servers: np.ndarray) -> np.ndarray:
    """``P(T > t S)`` of deterministic CPU at flat points on several cores (``t`` in units of S), the
    rows of :func:`_many_cores_quantile` inverted; 1 below S; NaN where no table answers or the
    answer lies outside the levels."""
    levels = _quantile_table.Z
    out = np.full(t.shape, np.nan)
    for c in np.unique(servers).tolist():
        grid = _many_cores_grid(int(c))
        if grid is None:
            continue
        every = np.flatnonzero(servers == c)
        for lo in range(0, every.size, _BLOCK):
            idx = every[lo:lo + _BLOCK]
            i, w, on = _grid_cell(rho[idx])
            rows = (1.0 - w)[:, None] * grid[i] + w[:, None] * grid[i + 1]
            with np.errstate(divide="ignore"):
                target = np.log(t[idx])
            k = np.sum(rows <= target[:, None], axis=1) - 1      # the last level at or below t
            ok = on & (k >= 0) & (k < levels.size - 1)
            r, kk = np.flatnonzero(ok), k[ok]
            below, above = rows[r, kk], rows[r, kk + 1]
            z = levels[kk] + (target[r] - below) / (above - below) * (levels[kk + 1] - levels[kk])
            res = np.full(idx.size, np.nan)
            res[r] = np.exp(-np.exp(z))
            res[on & (t[idx] < 1.0)] = 1.0                        # T >= S
            out[idx] = res
    return out


def quantile_or_direct(qb: np.ndarray, inp, shape: tuple, direct) -> np.ndarray:
    """Response-time quantiles (seconds, ``shape``) of deterministic CPU: the table where it
    answers (one core, or several through the M/G/c-PS tables), ``direct(q, inputs, shape,
    stable)`` (capacity.ps's own computation) at the other stable points, ``inf`` at the unstable
    ones."""
    mask, rho, mean, stable = _covered(inp, shape)
    qf = np.broadcast_to(qb, shape).ravel()
    out = np.full(mask.size, np.inf)
    out[mask] = mean[mask] * quantile(qf[mask], rho[mask])
    servers = np.broadcast_to(inp.servers, shape).ravel()
    many = stable & (servers > 1) & (rho >= 0)
    if many.any() and available():
        out[many] = mean[many] * _many_cores_quantile(qf[many], rho[many], servers[many])
    rest = stable & ~((mask | many) & np.isfinite(out))
    if rest.any():
        sub = _subset(inp, shape, mean, rest)
        out[rest] = direct(qf[rest], sub, sub.shape, sub.stable)
    return out.reshape(shape)


def sf_or_direct(tb: np.ndarray, inp, shape: tuple, direct) -> np.ndarray:
    """``P(T > t)`` (``shape``) of deterministic CPU: the table where it answers, ``direct(t,
    inputs, shape)`` at the other stable points, 1 at the unstable ones (as capacity.ps)."""
    mask, rho, mean, stable = _covered(inp, shape)
    tf = np.broadcast_to(tb, shape).ravel()
    out = np.ones(mask.size)
    out[mask] = sf(tf[mask] / mean[mask], rho[mask])
    servers = np.broadcast_to(inp.servers, shape).ravel()
    many = stable & (servers > 1) & (rho >= 0)
    if many.any() and available():
        out[many] = _many_cores_sf(tf[many] / mean[many], rho[many], servers[many])
    rest = stable & ~((mask | many) & np.isfinite(out))
    if rest.any():
        sub = _subset(inp, shape, mean, rest)
        out[rest] = direct(tf[rest], sub, sub.shape)
    return out.reshape(shape)
