"""Shipped tables of M/G/1 response-time quantiles (processor sharing and FCFS) for
lognormal, gamma and hyperexponential service.

Why tables
----------
On one core, in units of ``E[S]``, the response time of an M/G/1 queue depends only on the
utilisation ``rho``, the *shape* of the service law (family and scv) and the level ``q`` -- a
change of time unit, see :mod:`capacity.plan.curves`.  Two consumers need many evaluations
at arbitrary ``(rho, scv, q)`` fast:

* :mod:`capacity.ps` for lognormal and gamma service, which are not phase-type: the direct
  computation (a 16-phase hyper-Erlang fit of the law and the exact M/PH/1-PS sojourn
  transform) costs about 0.5 s for four quantiles at one point -- too slow for a slider or a
  least-squares fit.  For them the table *is* the method (it reproduces the direct
  computation, itself an approximation whose error against simulation is in
  :func:`capacity.ps.response_quantile`).
* :func:`capacity.fit.from_percentiles`, which evaluates the model tens of times per fit: it
  reads FCFS (exact M/G/1, :mod:`capacity.fcfs`, 10 ms per evaluation) from the FCFS table.

So the direct computation is done once, offline (``tools/build_quantile_tables.py``), on a
grid, and shipped.

What is stored
--------------
``log((1 - rho) t_q / E[S])`` -- smooth and bounded in all three coordinates -- on a regular
grid in ``(logit rho, log scv, z)``, ``z = log(-log(1 - q))``: 32 utilisations from 0.001 to
0.999, scv values evenly spaced in log scv from 0.04 (18 up to 25; a table may stop at a lower
scv, each file stores its grid) and 40 levels from q = 0.001 to q = 1 - 1e-6.  It is read with a
tensor-product cubic spline (not-a-knot, :class:`scipy.interpolate.NdBSpline`, see
:func:`_tensor_spline`).  Below
``rho = 0.001`` the value at 0.001 is used (within ~0.1 % of the limit); at exactly zero
arrivals the callers return the service time's own distribution.  ``P(T > t)`` is the same spline solved for ``z`` (bracketed on the grid levels, then Illinois
iterations).  Interpolation errors against the direct computation, between the nodes, are
measured by ``python tools/build_quantile_tables.py --check`` and quoted where each table is
used.

PS on 2, 4, 8, 16, 32 and 64 cores has a table of its own per core count (:data:`PS_MANY_CORES`, the
same coordinates, scv from 0.0088: below 0.04 the rows of :mod:`capacity._ps_narrow_many_cores`;
:class:`Coverage` picks each point's); a core count between two of them is read from
the two either side (:func:`_log_t_between`).  One core's PS table is carried above its top to
utilisation 0.9999 (:func:`_log_t_one_core_heavy`), several cores' to 0.999 (:func:`_log_t_heavy`).
More cores than the largest table are read towards infinitely many, where nobody shares a core,
up to utilisation 0.85 (:data:`BEYOND_LARGEST_TOP`).  Outside the grids (higher utilisations,
scv or q beyond the ranges) the callers
compute the point directly; :class:`Coverage` says which points of a batch a table answers.
A family is answered from a table exactly when the shipped file holds it, so the PS file holds
only laws without an exact phase-type computation (this release: lognormal from scv 0.57 to 25 and
gamma from 0.085 to 5.5, both continued to scv 53 by ``ps_heavy_tail_quantiles.npz``, :data:`PS_HEAVY_TAIL`).
Deterministic CPU under PS (M/D/1-PS, whose atom at ``S`` a table in scv cannot hold) has its own
table, :mod:`capacity._ps_deterministic_table`.  The FCFS file holds lognormal and gamma; hyperexponential FCFS is computed
exactly (the M/H2/1 costs 5-15 ms for a fit's batch, where a 10-node table piece was up to 33 %
off between its nodes: it missed the leap from the H2's fast branch to its slow one).

Phase-type laws for the fits (PS)
---------------------------------
Hyperexponential CPU has an exact M/H2/1-PS transform in :mod:`capacity.ps` (which stays exact),
but at 40-80 ms a point a fit of tens of evaluations took 1.6-5.5 s.  ``ps_phase_type_quantiles.npz``
(``tools/build_quantile_tables.py ps_phase_type hyperexponential``, 25 scv nodes from 1 to 25 on the
same rho grid, finer levels) is read by the PS fits and by round robin's PS half
(``capacity.rr._ps_quantile``), through ``tabled_or_direct(PS_PHASE_TYPE, ...)``; interpolation
error against the exact transform in
:data:`PS_PHASE_TYPE_SCV`'s comment and ``tests/test_quantile_table.py``.

Nearly constant CPU times (PS)
------------------------------
Below those scv values a second PS file, ``ps_near_constant_quantiles.npz``
(``tools/build_near_constant_table.py``), tabulates :mod:`capacity._ps_near_constant` for gamma
(scv 0.01-0.16) and lognormal (0.01-0.8) on a finer grid of its own (44 utilisations, 72 levels
with the same end points): the response time of such a law has a knee (the request served alone)
that the main grid resolves only to ~2 %.  Each family's tables are *pieces* in increasing scv;
across the upper half (in log scv) of two pieces' overlap the two are blended with a smoothstep
in ``log t``, so the quantiles stay smooth in scv where a fit differentiates them (gamma 0.117 -
0.16, lognormal 0.67 - 0.8; the main gamma table is off below 0.124, see
:func:`capacity.ps.response_quantile`).  FCFS has the same kind of file,
``fcfs_near_constant_quantiles.npz`` (gamma and lognormal, scv 0.01-0.06, exact M/G/1 at the
levels, blended over 0.049-0.06), for the fits and rr's FCFS half: within 0.9 % of the exact
M/G/1 between its nodes (worst at scv 0.012, where the knee at q = 1 - rho is sharpest; median
1e-5), where the exact computation costs ~5 ms per point.  Below its scv 0.01 (a busy loop's
CPU) those callers get ``log t`` linear in cv between the exact M/D/1 and the table at 0.01
(:func:`_fcfs_below_table`: median 0.2 % off the exact M/G/1, at most 4.4 % near the knee).
"""
from __future__ import annotations

import functools
import math
import pathlib
from typing import NamedTuple

import numpy as np

from ._level_solver import solve_level

# Utilisations evenly spaced in logit(rho) from 0.001 to 0.999.
RHO = 1.0 / (1.0 + np.exp(-np.linspace(np.log(0.001 / 0.999), np.log(0.999 / 0.001), 32)))
# Squared coefficients of variation, evenly spaced in log(scv).
SCV = {
    "lognormal": np.geomspace(0.04, 25.0, 18),
    "gamma": np.geomspace(0.04, 25.0, 18),
}
# Quantile levels as z = log(-log(1 - q)), evenly spaced from q = 0.001 to q = 1 - 1e-6.
Z = np.linspace(np.log(-np.log1p(-0.001)), np.log(-np.log(1e-6)), 40)

DISCIPLINES = ("ps", "fcfs")
#: Processor-sharing quantiles of laws :mod:`capacity.ps` computes exactly (phase-type:
#: hyperexponential, 40-80 ms a point), tabulated for the PS fits, which evaluate them tens of
#: times (:func:`capacity.fit._model.queue_quantile`), and for round robin's PS half
#: (``capacity.rr._ps_quantile``), while ``capacity.ps`` itself stays exact.  Read like the
#: others: ``tabled_or_direct(PS_PHASE_TYPE, ...)``.
PS_PHASE_TYPE = "ps_phase_type"
#: Its scv grid, 25 nodes from 1 to 25 (a 10-node grid was far too coarse): the balanced-means
#: H2's slow branch holds 1-p of the requests, 2-5 % at scv 10-25, and its p95-p99 move fast with
#: the scv.  Against the exact transform between the nodes (``tools/build_quantile_tables.py
#: --check ps_phase_type hyperexponential``, 192 cell midpoints): at most 0.66 % at p99 (light
#: load, on the leap below), 0.08 % at p90, 0.007 % at p50 and p99.9, median 2e-5.
PS_PHASE_TYPE_SCV = {"hyperexponential": np.geomspace(1.0, 25.0, 25)}
#: Its levels, three times finer than :data:`Z` over the same range: at light load the response of
#: an H2 law is the law itself, whose quantile leaps (log t by ~2 within 0.4 in z) where the slow
#: branch takes over from the fast one; 40 levels put one or two nodes on that step (and left the
#: spline 14-16 % off at p99 there).
PS_PHASE_TYPE_Z = np.linspace(Z[0], Z[-1], 3 * Z.size - 2)
#: Processor-sharing quantiles of heavy-tailed CPU, a third piece of the PS table (read by
#: ``capacity.ps`` like the main one and blended into it over gamma scv 4.5-5.5): the main grid's
#: spacing in log scv continued to 53 (``tools/build_quantile_tables.py ps_heavy_tail gamma``, from
#: its node 3.76, 25 min of CPU; the time grid adds linearly spaced points in the tail, where a log
#: grid from 1e-40 to 1e5 stepped over the fall of P(T > t) at utilisation 0.998).
#:
#: Gamma's nodes blend two computations (``small_request_body`` in the builder): the direct one
#: where a request is large next to the residual CPU time of those it shares the CPU with, and the
#: small-request limit ``T = S (1 + N)``, N geometric (``tools/small_job_ps.py``), where it is small
#: or the load light -- the direct computation's hyper-Erlang fit floors sizes at 1e-6 E[S] and
#: missed the body (scv 40, utilisation 0.9: p50 8e4 times the simulated one, p70 +23 %; the
#: reason its spline failed above scv 11.7 before).  The piece is read relative to the law's own
#: quantile (:func:`_log_own_quantile`): the median of a shape-0.02 gamma is 1e-15 of its mean.
#: Against simulation (``tools/measure_heavy_tail_ps.py``, 8 runs of 2e6 s at scv 5.5/8/12/20/40/44,
#: utilisation 0.1-0.9): p30-p99 within 3.8 % (the runs' 95 % half-widths 0.4-4 %), p99.9 within 5.6 %
#: but +13.5 % at scv 40, utilisation 0.9 (half-width 5 %; the direct computation +7.1 %).  As the
#: load vanishes, within 0.23 % of the law's own exact quantile (T -> S) at p50-p99.9.  In the tail
#: of a loaded queue (utilisation 0.2-0.999, ``--check ps_heavy_tail gamma``, 40 cell midpoints),
#: within 1.2 % (p99) and 1.9 % (p99.9) of the direct computation; p90 up to 21 % apart at scv 44,
#: where simulation sides with the table (utilisation 0.3: +0.9 % against the direct -3.8 %).
#:
#: Lognormal's piece, scv 11.7-53 (blended into the main table over 17-25), is built and read the
#: same way; its nodes at 11.7-25 are the main table's rows, at 36.5 and 53 the direct computation's
#: (about 1.5 h of CPU each).  The direct computation's body is closer here (within 3.5 % of
#: simulation) but 3.6-4.4 % high at p50 as the load vanishes, where the blend is within 0.16 % of
#: the exact law.  Against simulation (8 runs of 2e6 s; half-widths 0.1-3.7 %), p30-p99.9: scv 30
#: at utilisation 0.5 within 1.9 %, 40 at 0.2 within 1.5 %, 45 at 0.85 within 1.2 %.  Against the
#: direct computation at cell midpoints (scv 30 and 44): at utilisation 0.39-0.999 p99 / p99.9
#: within 1.4 / 1.7 %; at 0.04-0.2 up to 5.5 % (p99, scv 44), where simulation sides with the
#: table (scv 40 at 0.2, p99: table -0.4 %, direct -3.1 %).
PS_HEAVY_TAIL = "ps_heavy_tail"
_HEAVY_TAIL_NODES = np.geomspace(0.04, 25.0 * (25.0 / 0.04) ** (2 / 17), 20)
PS_HEAVY_TAIL_SCV = {"lognormal": _HEAVY_TAIL_NODES[15:], "gamma": _HEAVY_TAIL_NODES[12:]}
#: The families whose heavy-tail piece is read relative to the law's own quantile (:func:`_log_own_quantile`)
#: and whose nodes blend in the small-request limit.
HEAVY_TAIL_RELATIVE = ("gamma", "lognormal")
#: Processor sharing on c > 1 cores (M/G/c-PS, the approximation of :mod:`capacity._ps_many_cores`:
#: the tagged request's own CPU law exact, the others leaving as if theirs were exponential),
#: tabulated for lognormal and gamma CPU at powers of two up to a large machine's 64 cores, one file
#: each (``tools/build_quantile_tables.py ps_c4 lognormal gamma``, ~12-20 min of CPU): the direct
#: computation costs 0.1-0.7 s per load (4-14 s above utilisation 0.99), so a fit of tens of
#: evaluations took 4-20 s.  Core counts between them are read from the two either side
#: (:func:`_log_t_between`); more than 64 towards infinitely many (:data:`BEYOND_LARGEST_TOP`).
PS_MANY_CORES = {c: f"ps_c{c}" for c in (2, 4, 8, 16, 32, 64)}
#: Their utilisations: :data:`RHO` up to 0.991 (above it, where the direct computation needs
#: 10^3-10^4 states, computed directly).
PS_MANY_CORES_RHO = RHO[:27]
#: Their scv nodes: the main grid continued down by four of its steps to 0.0088 (a busy loop's CPU,
#: scv 0.001-0.01, is fitted there: below 0.04 each load took 40-80 ms directly, and a default fit
#: on several cores 4-5 s), gamma up to 8.0 (at 11.7 the build's time grid stepped over the
#: fall of P(T > t) at utilisation 0.75-0.92, as on one core, where the heavy-tail piece needed a
#: finer one; above 8 the M/G/c-PS gamma is computed directly).
#: Below this scv a M/G/c-PS table's rows are not the direct computation's (whose phase-type fit of
#: a law this narrow fails) but ``log t`` linear in cv between deterministic CPU and this node
#: (``near_constant_rows`` in ``tools/build_quantile_tables.py``, its error there).
MANY_CORES_NEAR_CONSTANT_BELOW = 0.04
_MANY_CORES_SCV = np.geomspace(0.04 * (0.04 / 25.0) ** (4 / 17), 25.0, 22)
PS_MANY_CORES_SCV = {"lognormal": _MANY_CORES_SCV, "gamma": _MANY_CORES_SCV[:19]}
#: More cores than the largest table are read between it and infinitely many cores, where nobody
#: shares one (T = S; :func:`_log_t_between`), up to this utilisation, and computed directly above
#: it.  Against the direct computation (``python tools/measure_core_interpolation.py 96 128 256
#: 1000``, its grid plus utilisation 0.98), the largest error at p50-p99.9 by utilisation::
#:
#:     c      0.1-0.5   0.7       0.85      0.95        0.98      (lognormal / gamma, %)
#:     96     0 / 0     1.1/0.2   2.5/2.3   9.0/10.8    16.2/15.8
#:     128    0 / 0     0.8/0.2   2.3/3.2   16.1/15.5   20.2/19.5
#:     256    0 / 0     0.4/0.1   3.7/3.9   6.8/11.1    18.0/16.4
#:     1000   0 / 0     0.1/0.0   1.2/1.0   3.0/2.6     6.9/6.8
#:
#: so the reading stops at 0.85 (within 3.9 %; the direct computation takes 0.3-5 s for 50 loads).
BEYOND_LARGEST_TOP = 0.85
FOLDER = pathlib.Path(__file__).resolve().parent / "tables"
# Set by tools/build_quantile_tables.py so that a rebuild computes every point directly.
disabled = False

_SLACK = 1e-9  # relative tolerance on the grid edges (rounding in callers' scv and rho)
#: One core's PS table is carried above its top utilisation (0.999) up to this one, at the levels
#: from :data:`ONE_CORE_HEAVY_LEVEL` up (:func:`_log_t_one_core_heavy`); beyond either, directly.
ONE_CORE_HEAVY_TOP = 0.9999
ONE_CORE_HEAVY_LEVEL = 0.1
#: Range of the power in 1 - rho by which the M/G/c-PS ratio to its heavy-traffic limit shrinks
#: above a table's top (:func:`_log_t_heavy`; measured 0.26 at p1 to 0.98 at p99 for M/M/16-PS).
_HEAVY_POWER = (0.25, 1.5)


def path(discipline: str) -> pathlib.Path:
    return FOLDER / f"{discipline}_quantiles.npz"


def near_constant_path(discipline: str) -> pathlib.Path:
    """The table of nearly constant CPU times (``tools/build_near_constant_table.py``)."""
    return FOLDER / f"{discipline}_near_constant_quantiles.npz"


def _tensor_spline(grid: tuple, values: np.ndarray):
    """The cubic not-a-knot tensor-product spline through ``values`` on ``grid``, by exact 1-D
    solves along one axis after the other (the tensor-product system separates).

    Not ``RegularGridInterpolator(method="cubic")``: scipy 1.17 solves the whole system
    iteratively (GCROT(m, k)), which took 0.4-1.3 s per table -- most of a fresh process's first
    PS call -- and under scipy 1.17 stopped short of interpolating: 5e-3 off in log t at the FCFS
    gamma table's own nodes (this construction: 1e-14, in 1 ms)."""
    from scipy.interpolate import NdBSpline, make_interp_spline

    coefs, knots = values, []
    for axis, x in enumerate(grid):
        spline = make_interp_spline(x, coefs, k=3, axis=axis)
        knots.append(spline.t)
        coefs = np.moveaxis(spline.c, 0, axis)    # BSpline keeps the interpolated axis first
    return NdBSpline(tuple(knots), coefs, 3)


class _Piece(NamedTuple):
    """One family's table over one scv range: its spline in (logit rho, log scv, z) and grids."""

    spline: object
    lo: float            # scv range
    hi: float
    rho: np.ndarray      # utilisation grid
    z: np.ndarray        # level grid
    own: str | None = None   # the family whose own quantile the spline is relative to, or None

    def log_t(self, z: np.ndarray, rho: np.ndarray, scv: np.ndarray) -> np.ndarray:
        r = np.clip(rho, self.rho[0], self.rho[-1])
        ls = np.clip(np.log(scv), np.log(self.lo), np.log(self.hi))
        zc = np.clip(z, self.z[0], self.z[-1])
        pts = np.stack([np.log(r / (1.0 - r)), ls, zc], axis=-1)
        # Below the first node the value at rho = 0.001 stands (it differs from the rho -> 0 limit
        # by ~0.1 %); the callers give the service time's own quantile at exactly zero arrivals.
        out = self.spline(pts.reshape(-1, 3)).reshape(np.shape(z)) - np.log1p(-r)
        return out if self.own is None else out + _log_own_quantile(self.own, zc, np.exp(ls))


def _log_own_quantile(family: str, z: np.ndarray, scv: np.ndarray) -> np.ndarray:
    """log s_q of the mean-1 law at level z: what the heavy-tail gamma piece is relative to.

    Why: the median of a shape-0.02 gamma is 1e-15 of its mean and its p10 1e-50, so log t_q / E[S]
    moves by tens across one scv step at the low levels and a cubic in log scv cannot follow it,
    while t_q / s_q (>= 1, as PS never beats the request's own CPU time) moves by a few tenths."""
    from .distributions import Service

    return np.log(getattr(Service, family)(1.0, scv).ppf(-np.expm1(-np.exp(z))))


@functools.lru_cache(maxsize=None)
def _interpolators(discipline: str) -> dict[str, tuple[_Piece, ...]]:
    """Each family's pieces, in increasing scv: the main table and, for PS, the table of nearly
    constant CPU times below it and the heavy-tail one above it (each file holds its own grids)."""
    out: dict[str, list[_Piece]] = {}
    heavy = (path(PS_HEAVY_TAIL),) if discipline == "ps" else ()
    for file in (near_constant_path(discipline), path(discipline), *heavy):
        if not file.exists():
            continue
        with np.load(file) as data:
            rho, z = data["rho"], data["z"]
            # Every family the file holds (a file carries only the families worth a table).
            for key in (k for k in data.files if k.startswith("log_scaled_")):
                fam = key[len("log_scaled_"):]
                scv = data[f"scv_{fam}"]   # a table may stop short of its family's grid
                grid = (np.log(rho / (1.0 - rho)), np.log(scv), z)
                values = _in_load_order(rho, data[key].astype(float))
                own = fam if (file == path(PS_HEAVY_TAIL) and fam in HEAVY_TAIL_RELATIVE) else None
                if own is not None:
                    ls, zz = np.meshgrid(np.log(scv), z, indexing="ij")
                    values = values - _log_own_quantile(own, zz, np.exp(ls))[None]
                piece = _Piece(_tensor_spline(grid, values), float(scv[0]), float(scv[-1]), rho, z, own)
                out.setdefault(fam, []).append(piece)
    # In a fixed order (the fits list their candidates in it), whatever order the files hold.
    order = ("lognormal", "gamma", "hyperexponential", "deterministic")
    return {fam: tuple(sorted(out[fam], key=lambda p: p.lo))
            for fam in sorted(out, key=lambda f: order.index(f) if f in order else len(order))}


def _in_load_order(rho: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Stored nodes ``log((1 - rho) t_q)`` (utilisation first) with every quantile held at least
    the quieter row's: more load never shortens a response-time quantile, and the rows that do are
    the direct computation's far-tail misses at light load (PS gamma: at scv 5.5, q = 1 - 1e-6 it
    gave 56.9, 57.0, 43.1, 42.2, 47.2, 58.5 E[S] over utilisation 0.004-0.02, below the law's own
    quantile 56.2 where ``T >= S``; on 8 cores up to 44 % short).  Below q = 0.999 no node a table
    answers moves by more than 0.2 % (0.52 % in the heavy-tail gamma piece's light-load body, inside
    its stated error; ``tests/test_quantile_table.py``); above, PS and M/G/c-PS gamma
    nodes move by up to 30-80 %, lognormal by at most 0.3 %.  Between the nodes the cubic can
    still dip below a quieter point, in log t by up to 1.1 % on one core and 2.9 % on several
    (16 cores, gamma scv 7), only at q >= 0.9999; read from the nodes as stored, 9.9 % and 29 %
    (a scan of 800 utilisations x 80 levels, scv 0.05-20, lognormal and gamma, 1-16 cores)."""
    log_idle = np.log1p(-rho).reshape(-1, *([1] * (values.ndim - 1)))
    return np.maximum.accumulate(values - log_idle, axis=0) + log_idle


def many_cores_table(servers: int) -> str | None:
    """The table that answers PS on ``servers`` (> 1) cores: its own (:data:`PS_MANY_CORES`), one
    read between the two shipped core counts either side (:func:`_log_t_between`), or None."""
    if servers in PS_MANY_CORES:
        return PS_MANY_CORES[servers]
    return f"ps_c{servers}" if servers > min(PS_MANY_CORES) else None


@functools.lru_cache(maxsize=None)
def _between_tables(discipline: str) -> tuple[str, str, float, int, int, int] | None:
    """For ``ps_c<c>`` with c between two shipped core counts a < c < b: their tables, the weight
    of a's (linear in 1/c), a, b and c; None for every other name.  Above the largest table, b is
    infinite (where nobody shares a core, :func:`_log_t_between`) and a's table stands for both."""
    if not discipline.startswith("ps_c") or not discipline[4:].isdigit():
        return None
    c = int(discipline[4:])
    if c in PS_MANY_CORES or many_cores_table(c) is None:
        return None
    a = max(k for k in PS_MANY_CORES if k < c)
    b = min((k for k in PS_MANY_CORES if k > c), default=math.inf)
    return (PS_MANY_CORES[a], PS_MANY_CORES.get(b, PS_MANY_CORES[a]),
            (1.0 / c - 1.0 / b) / (1.0 / a - 1.0 / b), a, b, c)


def _mmc_log_mean(servers: int, rho: np.ndarray) -> np.ndarray:
    """log(E[T] / E[S]) of M/M/c (FCFS or PS alike): ``1 + C(c, c rho) / (c (1 - rho))``, C the
    Erlang C probability of waiting."""
    from .erlang import erlang_c

    return np.log1p(np.asarray(erlang_c(servers, servers * rho), dtype=float) / (servers * (1.0 - rho)))


def _log_t_between(discipline: str, family: str, z: np.ndarray, rho: np.ndarray, scv: np.ndarray) -> np.ndarray:
    """log(t_q / E[S]) of M/G/c-PS for a core count between two shipped tables (approximation).

    With a < c < b the two shipped core counts either side, each table's quantile is divided by
    the M/M/c mean response at its own core count (Erlang C, exact for any c: it carries how much
    less requests share as cores are added), ``log`` of that ratio interpolated linearly in 1/c,
    and multiplied back by the M/M/c mean at c::

        log t_c = w (log t_a - log m_a) + (1 - w) (log t_b - log m_b) + log m_c,
        w = (1/c - 1/b) / (1/a - 1/b),  m_k = 1 + C(k, k rho) / (k (1 - rho)),

    which :mod:`capacity.ps` holds at least the CPU time's own quantile (PS never beats it), as it
    does every table's.  The weights are positive, so the result rises in q as the tables do.  Against the direct computation of
    :mod:`capacity._ps_many_cores` (``python tools/measure_core_interpolation.py``: lognormal scv
    0.015-15, gamma 0.015-4, utilisation 0.1-0.95; largest / median, then the largest at p50 /
    p90 / p99 / p99.9)::

        c    lognormal                              gamma
        3    5.6 / 0.48 %   1.7 / 2.2 / 3.8 / 5.6 %   5.4 / 0.60 %   1.6 / 2.6 / 4.9 / 5.4 %
        6    5.3 / 0.33 %   1.3 / 2.6 / 3.4 / 5.3 %   6.1 / 0.30 %   1.3 / 2.5 / 4.7 / 6.1 %
        12   4.6 / 0.19 %   1.8 / 2.8 / 3.4 / 4.6 %   5.0 / 0.09 %   0.8 / 2.1 / 5.0 / 5.0 %
        24   4.4 / 0.03 %   2.0 / 3.3 / 3.2 / 4.4 %   4.1 / 0.03 %   0.8 / 2.7 / 4.1 / 3.0 %
        48   4.2 / 0.00 %   2.3 / 3.2 / 2.9 / 4.2 %   5.7 / 0.00 %   0.9 / 2.1 / 3.0 / 5.7 %

    (5 and 7 cores within 5.2 %).  Above the largest table (64 cores) b is infinite: with
    infinitely many cores nobody shares one, so ``log t_b - log m_b`` is the CPU time's own
    ``log s_q`` and ``w = 64 / c``; its error is at :data:`BEYOND_LARGEST_TOP`.  Without the M/M/c
    factor the error was about twice as large at utilisation 0.85-0.95 (interpolated quantiles 4-6 %
    low for every scv there: the tables' values fall faster than linearly in 1/c where queueing
    dominates).
    """
    a_name, b_name, w, a, b, c = _between_tables(discipline)
    # Above the largest table b is infinite: there nobody shares a core, T = S, and m_b = 1.
    at_b = (_log_own_quantile(family, z, scv) if b == math.inf
            else _log_t(b_name, family, z, rho, scv) - _mmc_log_mean(b, rho))
    return (w * (_log_t(a_name, family, z, rho, scv) - _mmc_log_mean(a, rho))
            + (1.0 - w) * at_b + _mmc_log_mean(c, rho))


def families(discipline: str) -> tuple[str, ...]:
    """Families a shipped table answers (empty when the table is missing or disabled)."""
    if disabled:
        return ()
    pair = _between_tables(discipline)
    if pair is not None:
        return tuple(f for f in families(pair[0]) if f in families(pair[1]))
    return tuple(_interpolators(discipline))


def scv_range(discipline: str, family: str) -> tuple[float, float] | None:
    """The scv range the shipped tables cover for this family, or None (no table)."""
    if family not in families(discipline):
        return None
    pair = _between_tables(discipline)
    if pair is not None:
        (a_lo, a_hi), (b_lo, b_hi) = scv_range(pair[0], family), scv_range(pair[1], family)
        return max(a_lo, b_lo), min(a_hi, b_hi)
    pieces = _interpolators(discipline)[family]
    return pieces[0].lo, pieces[-1].hi


def ps_scv_range(family: str, servers) -> tuple[float, float] | None:
    """The scv range the PS tables cover for this family on every core count in ``servers`` (one
    core's table, or the M/G/c-PS ones; a core count no table answers counts as one core's), or
    None.  A fit's search stays inside it, so that no evaluation is computed directly."""
    ranges = []
    for c in np.unique(np.asarray(servers, dtype=int)).tolist():
        name = many_cores_table(int(c)) if c > 1 else None
        found = scv_range(name or "ps", family)
        if found is None:
            return None
        ranges.append(found)
    if not ranges:
        return scv_range("ps", family)
    return max(r[0] for r in ranges), min(r[1] for r in ranges)


def covered(discipline: str, family: str, rho: np.ndarray, scv: np.ndarray) -> np.ndarray:
    """Which (rho, scv) points lie inside the table -- for an M/G/c-PS table, also those above its
    top utilisation that :func:`_log_t_heavy` carries to saturation (up to one core's top)."""
    if family not in families(discipline):
        return np.zeros(np.shape(rho), dtype=bool)
    inside = _inside(discipline, family, rho, scv)
    top = _top(discipline, family)
    at_top = lambda: _inside(discipline, family, np.full(np.shape(rho), top), scv)  # noqa: E731
    if discipline == "ps":
        return inside | ((rho > top * (1 + _SLACK)) & (rho <= ONE_CORE_HEAVY_TOP) & at_top())
    if _cores(discipline) is None or beyond_largest(discipline):
        return inside
    return inside | ((rho > top * (1 + _SLACK)) & at_top() & _inside("ps", family, rho, scv))


def _inside(discipline: str, family: str, rho: np.ndarray, scv: np.ndarray) -> np.ndarray:
    """Which (rho, scv) points lie inside the table's own grid."""
    pair = _between_tables(discipline)
    if pair is not None:
        both = _inside(pair[0], family, rho, scv) & _inside(pair[1], family, rho, scv)
        return both & (rho <= _top(discipline, family) * (1 + _SLACK))   # beyond 64 cores: lower
    lo, hi = scv_range(discipline, family)
    return ((rho >= 0) & (rho <= _top(discipline, family) * (1 + _SLACK))
            & (scv >= lo * (1 - _SLACK)) & (scv <= hi * (1 + _SLACK)))


def _top(discipline: str, family: str) -> float:
    """The table's top utilisation."""
    pair = _between_tables(discipline)
    if pair is not None:
        top = min(_top(pair[0], family), _top(pair[1], family))
        return min(top, BEYOND_LARGEST_TOP) if beyond_largest(discipline) else top
    return min(float(p.rho[-1]) for p in _interpolators(discipline)[family])


def beyond_largest(discipline: str) -> bool:
    """Whether ``discipline`` names more cores than the largest M/G/c-PS table (read towards
    infinitely many, :func:`_log_t_between`, up to :data:`BEYOND_LARGEST_TOP`)."""
    pair = _between_tables(discipline)
    return pair is not None and pair[4] == math.inf


def _cores(discipline: str) -> int | None:
    """The core count of an M/G/c-PS table's name (``ps_c<c>``, shipped or read between two), or None."""
    return int(discipline[4:]) if discipline.startswith("ps_c") and discipline[4:].isdigit() else None


def _blend_weights(pieces: tuple[_Piece, ...], scv: np.ndarray) -> list[np.ndarray]:
    """The weight of each piece at each scv: 1 inside its own range; across the upper half (in
    log scv) of two neighbours' overlap a smoothstep from the lower piece to the upper one, so
    the quantiles stay smooth in scv (a fit differentiates them)."""
    ls = np.log(scv)
    weights = [np.ones(np.shape(scv))]
    for below, above in zip(pieces[:-1], pieces[1:]):
        a = 0.5 * (np.log(above.lo) + np.log(below.hi))
        b = np.log(below.hi)
        u = np.clip((ls - a) / (b - a), 0.0, 1.0) if b > a else (ls >= a).astype(float)
        up = u * u * (3.0 - 2.0 * u)
        weights.append(weights[-1] * up)
        weights[-2] = weights[-2] * (1.0 - up)
    return weights


def _level_grid(discipline: str, family: str) -> np.ndarray:
    """The finest level grid among the family's pieces (they share their end points)."""
    pair = _between_tables(discipline)
    if pair is not None:
        return max((_level_grid(name, family) for name in pair[:2]), key=len)
    return max((p.z for p in _interpolators(discipline)[family]), key=len)


def _log_t(discipline: str, family: str, z: np.ndarray, rho: np.ndarray, scv: np.ndarray) -> np.ndarray:
    """log(t_q / E[S]) at level z (arrays of one shape), at covered points."""
    if discipline == "ps":
        top = _top(discipline, family)
        above = rho > top * (1 + _SLACK)
        if above.any():
            out = np.empty(np.shape(z))
            out[~above] = _log_t_inside(discipline, family, z[~above], rho[~above], scv[~above])
            out[above] = _log_t_one_core_heavy(family, top, z[above], rho[above], scv[above])
            return out
    c = _cores(discipline)
    if c is not None:
        top = _top(discipline, family)
        above = rho > top * (1 + _SLACK)
        if above.any():
            out = np.empty(np.shape(z))
            out[~above] = _log_t_inside(discipline, family, z[~above], rho[~above], scv[~above])
            out[above] = _log_t_heavy(discipline, family, c, top, z[above], rho[above], scv[above])
            return out
    return _log_t_inside(discipline, family, z, rho, scv)


def _log_t_one_core_heavy(family: str, top: float, z: np.ndarray, rho: np.ndarray, scv: np.ndarray) -> np.ndarray:
    """log(t_q / E[S]) of M/G/1-PS above the table's top utilisation ``top`` (0.999; approximation).

    The table stores ``log((1 - rho) t_q / E[S])``; above its top that value is held at the top's::

        t_q(rho) = t_q(top) (1 - top) / (1 - rho),      top < rho <= ONE_CORE_HEAVY_TOP (0.9999)

    Why: in heavy traffic the number of requests a new one finds is geometric with mean
    ``rho / (1 - rho)`` (PS is insensitive to the CPU law) and changes little while it is served,
    so ``(1 - rho) T -> S E`` in distribution, E a unit exponential independent of the request's
    own CPU time S (the heavy-traffic limit of the M/G/1-PS sojourn time; S. F. Yashkov, "On a heavy
    traffic limit theorem for the M/G/1 processor sharing queue", Stochastic Models 9, 1993): the
    stored value tends to a constant, and from 0.999 to 0.9999 it moves by at most 3.4 % at the
    levels held (measured below).  The low levels converge slowly (the request's own CPU time, ``T >= S``, holds them
    down at the top), so levels below :data:`ONE_CORE_HEAVY_LEVEL` are computed directly.

    Against the direct computation (``python tools/measure_heavy_traffic.py one``; lognormal scv
    0.01-20, gamma 0.01-10, utilisation 0.9992-0.9999): p10-p99.99 within 3.4 % (worst lognormal
    scv 0.5 at p10 +3.3 %, gamma scv 10 at p50 +3.0 %; p50-p99.9 elsewhere within 1.6 %); the
    excluded levels were off by up to 15 % (p1) and 61 % (p0.1).  The direct computation took
    0.2-2 s a point there: a fit's 90 % interval, 400 draws at utilisation 0.9992, 85-820 s against
    1-2 ms read this way (``python benchmarks/bench_ps.py --one-core-saturation``).
    """
    return (_log_t_inside("ps", family, z, np.full(np.shape(z), top), scv)
            + math.log1p(-top) - np.log1p(-rho))


def _log_t_heavy(discipline: str, family: str, c: int, top: float, z: np.ndarray, rho: np.ndarray,
                 scv: np.ndarray) -> np.ndarray:
    """log(t_q / E[S]) of M/G/c-PS above the table's top utilisation ``top`` (approximation).

    In heavy traffic many more requests share the CPU than there are cores, so the c cores act as
    one core c times faster: ``t_q -> t_q^(1)(rho) E[S] / c`` as rho -> 1, ``t^(1)`` one core's
    quantile at the same utilisation (its table reaches 0.999; the limit :mod:`capacity.ps` computes
    above utilisation 0.9965).  The log of the ratio to that limit, ``g``, is known at the table's
    top two utilisations and taken to shrink as a power of ``1 - rho`` from the top::

        log t_c(rho) = log t^(1)(rho) - log c + g(top) ((1 - rho) / (1 - top))^a,
        a = log(g(top) / g(prev)) / log((1 - top) / (1 - prev))   (clipped to [0.25, 1.5])

    so the quantile is continuous at the top and exact in the limit.  Why a power, not a line in
    ``1 - rho``: the low levels approach the limit slowly (M/M/16-PS at p1: ``g`` falls from 0.87 to
    0.74 between utilisation 0.991 and 0.995, a = 0.26; a line put p1 24 % low at 0.995), the high
    ones about linearly (p99: a = 0.98).  Against the direct computation
    (``python tools/measure_heavy_traffic.py``): see :func:`capacity.ps.response_quantile`.
    """
    def log_t(name: str, at) -> np.ndarray:
        return _log_t_inside(name, family, z, np.broadcast_to(at, np.shape(z)), scv)

    return heavy_traffic(lambda at: log_t(discipline, at), lambda at: log_t("ps", at), c, top, rho)


def heavy_traffic(many, one, c: int, top: float, rho: np.ndarray) -> np.ndarray:
    """The rule of :func:`_log_t_heavy` from ``many(rho)`` and ``one(rho)``, log(t / E[S]) on the c
    cores (read at the table's top two utilisations only) and on one core (at those and at
    ``rho``); shared with deterministic CPU (:mod:`capacity._ps_deterministic_table`)."""
    prev = float(PS_MANY_CORES_RHO[-2])
    g_top = many(top) - one(top) + math.log(c)
    g_prev = many(prev) - one(prev) + math.log(c)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(g_top / g_prev) / math.log((1.0 - top) / (1.0 - prev))
    a = np.clip(np.where(np.isfinite(a), a, 1.0), _HEAVY_POWER[0], _HEAVY_POWER[1])
    return one(rho) - math.log(c) + g_top * ((1.0 - rho) / (1.0 - top)) ** a


def deterministic_log_t(discipline: str, z: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """log(t_q / S) of deterministic CPU on the cores of the M/G/c-PS table ``discipline``, at level
    z and ``rho`` up to its top (arrays of one shape).

    The table's gamma rows below scv 0.04 were built as ``log t`` linear in the coefficient of
    variation between deterministic CPU (its direct computation) and scv 0.04
    (``near_constant_rows`` in ``tools/build_quantile_tables.py``), so the line through its rows at
    scv 0.0088 and 0.04, taken to cv = 0, is that deterministic row again, read by the same spline
    (the spline is linear in the values it interpolates).  Above the largest table, read towards
    infinitely many cores as :func:`_log_t_between` does, where deterministic CPU is never shared
    (log(t / S) = 0): that line through gamma's own quantiles would not reach it (+4.5 %)."""
    if beyond_largest(discipline):
        a_name, _, w, a, _, c = _between_tables(discipline)
        return w * (deterministic_log_t(a_name, z, rho) - _mmc_log_mean(a, rho)) + _mmc_log_mean(c, rho)
    low = float(_MANY_CORES_SCV[0])
    w = math.sqrt(low / MANY_CORES_NEAR_CONSTANT_BELOW)
    at = lambda scv: _log_t_inside(discipline, "gamma", z, rho, np.full(np.shape(z), scv))  # noqa: E731
    return (at(low) - w * at(MANY_CORES_NEAR_CONSTANT_BELOW)) / (1.0 - w)


def _log_t_inside(discipline: str, family: str, z: np.ndarray, rho: np.ndarray, scv: np.ndarray) -> np.ndarray:
    """log(t_q / E[S]) at level z (arrays of one shape), inside the table's own grid."""
    if _between_tables(discipline) is not None:
        return _log_t_between(discipline, family, z, rho, scv)
    pieces = _interpolators(discipline)[family]
    if len(pieces) == 1:
        return pieces[0].log_t(z, rho, scv)
    out = np.zeros(np.shape(z))
    for piece, w in zip(pieces, _blend_weights(pieces, scv)):
        used = w > 0
        if used.any():
            out[used] += w[used] * piece.log_t(z[used], rho[used], scv[used])
    return out


def quantile(discipline: str, family: str, q: np.ndarray, rho: np.ndarray, scv: np.ndarray) -> np.ndarray:
    """``t_q / E[S]`` for flat arrays of covered points; NaN where q is outside the levels."""
    q, rho, scv = (np.asarray(v, dtype=float) for v in (q, rho, scv))
    with np.errstate(divide="ignore"):
        z = np.log(-np.log1p(-q))
    inside = (z >= Z[0] - _SLACK) & (z <= Z[-1] + _SLACK) & ~_below_heavy_level(discipline, family, q, rho)
    out = np.full(q.shape, np.nan)
    if inside.any():
        out[inside] = np.exp(_log_t(discipline, family, z[inside], rho[inside], scv[inside]))
    return out


def _below_heavy_level(discipline: str, family: str, q: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """:func:`below_heavy_level` of one core's PS table (none for the other tables)."""
    if discipline != "ps":
        return np.zeros(np.shape(q), dtype=bool)
    return below_heavy_level(q, rho, _top(discipline, family))


def below_heavy_level(q: np.ndarray, rho: np.ndarray, top: float) -> np.ndarray:
    """The one-core points above a table's top utilisation ``top`` whose level is below
    :data:`ONE_CORE_HEAVY_LEVEL` (:func:`_log_t_one_core_heavy` is not accurate there: the callers
    compute them directly); shared with :mod:`capacity._ps_deterministic_table`."""
    # (the slack: sf solved for a quantile at exactly p10 lands a rounding either side of it)
    return (rho > top * (1 + _SLACK)) & (q < ONE_CORE_HEAVY_LEVEL * (1 - 1e-6))


def sf(discipline: str, family: str, t: np.ndarray, rho: np.ndarray, scv: np.ndarray,
       iterations: int = 40) -> np.ndarray:
    """``P(T > t E[S])`` for flat arrays of covered points (``t`` in units of E[S]);
    NaN where the answer lies outside the levels (P(T > t) > 0.999 or < 1e-6)."""
    t, rho, scv = (np.asarray(v, dtype=float) for v in (t, rho, scv))
    n = t.size
    if n == 0:
        return np.full(0, np.nan)
    with np.errstate(divide="ignore"):
        target = np.log(t)
    Z = _level_grid(discipline, family)
    nodes = _log_t(discipline, family, np.broadcast_to(Z, (n, Z.size)).copy(),
                   np.repeat(rho[:, None], Z.size, axis=1), np.repeat(scv[:, None], Z.size, axis=1))
    z = solve_level(lambda x, rows: _log_t(discipline, family, x, rho[rows], scv[rows]) - target[rows], Z,
                    nodes - target[:, None], iterations)
    out = np.exp(-np.exp(z))
    out[_below_heavy_level(discipline, family, 1.0 - out, rho)] = np.nan
    return out


class Coverage:
    """Which points of a broadcast batch of queue inputs a table answers.

    ``mask`` is None when none can be (a family without a table); otherwise flat arrays over
    the batch: ``mask`` (stable, one core -- or for PS a core count of :data:`PS_MANY_CORES` --,
    inside the table), ``stable``, ``rho``, ``scv``,
    ``mean``; :meth:`subset` gives the queue inputs of chosen points, to compute directly.
    """

    def __init__(self, discipline: str, inp, shape: tuple):
        self.mask = None
        svc = inp.service
        if svc.family not in families(discipline):
            return
        self.family, self.size = svc.family, int(np.prod(shape))
        flat = lambda v: np.broadcast_to(np.asarray(v, dtype=float), shape).ravel()  # noqa: E731
        self.stable = np.broadcast_to(inp.stable, shape).ravel()
        self.rho, self.lam = flat(inp.utilization), flat(inp.arrival_rate)
        self.scv, self.mean = flat(svc._params["scv"]), flat(svc._params["mean"])
        self.servers = np.broadcast_to(inp.servers, shape).ravel()
        # The table of each point: the discipline's own on one core; for PS on c cores the M/G/c-PS
        # table of that c where one is shipped (PS_MANY_CORES), or the two either side of it.
        self._tables = {1: discipline}
        if discipline == "ps":
            for c in np.unique(self.servers[self.stable & (self.servers > 1)]).tolist():
                name = many_cores_table(int(c))
                if name is not None and self.family in families(name):
                    self._tables[int(c)] = name
        self.mask = np.zeros(self.size, dtype=bool)
        for c, name in self._tables.items():
            on = self.stable & (self.servers == c)
            if on.any():
                self.mask[on] = covered(name, self.family, self.rho[on], self.scv[on])

    def _by_table(self, rows: np.ndarray, read) -> np.ndarray:
        """``read(table, picked)`` on the points ``rows`` (a mask) of each table, gathered; one call
        per core count, not per point."""
        where = np.flatnonzero(rows)
        out = np.full(where.size, np.nan)
        servers = self.servers[where]
        for c, name in self._tables.items():
            picked = servers == c
            if picked.any():
                out[picked] = read(name, where[picked], picked)
        return out

    def quantile(self, q: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``t_q`` in seconds at the covered points ``rows`` (a mask; ``q`` over those points)."""
        return self._by_table(rows, lambda name, idx, picked: self.mean[idx] * quantile(
            name, self.family, q[picked], self.rho[idx], self.scv[idx]))

    def sf(self, t: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``P(T > t)`` at the covered points ``rows`` (a mask; ``t`` in seconds over those points)."""
        return self._by_table(rows, lambda name, idx, picked: sf(
            name, self.family, t[picked] / self.mean[idx], self.rho[idx], self.scv[idx]))

    def held_to_levels(self, q: np.ndarray, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``values``, direct answers at the points ``rows`` (a mask; ``q`` over every point), held
        at most the table's answer at its first level where q lies below it, at least its answer at
        its last level where q lies above: the direct computation's own error at the far levels must
        not make a quantile fall as q rises (heavy-tailed gamma, whose sizes the direct computation
        floors at 1e-6 E[S]: at scv 38, utilisation 0.5, its p0.01 was 1.7 times the tabled p50)."""
        out = np.array(values, dtype=float)
        inside = rows & self.mask
        for level, keep in ((-np.expm1(-np.exp(Z[0])), np.fmin), (-np.expm1(-np.exp(Z[-1])), np.fmax)):
            beyond = inside & ((q < level) if keep is np.fmin else (q > level))
            if beyond.any():
                at = np.flatnonzero(beyond[rows])
                out[at] = keep(out[at], self.quantile(np.full(int(beyond.sum()), level), beyond))
        return out

    def sf_held_to_levels(self, t: np.ndarray, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The same hold for ``P(T > t)``: direct answers ``values`` at the points ``rows`` (``t``
        in seconds over every point) at least ``1 - q`` of the table's first level where ``t`` lies
        below that level's time, at most ``1 - q`` of its last where ``t`` lies above its time."""
        out = np.array(values, dtype=float)
        inside = np.flatnonzero(rows & self.mask)
        if inside.size == 0:
            return out
        at = np.searchsorted(np.flatnonzero(rows), inside)
        picked = np.zeros_like(rows)
        picked[inside] = True
        for z, keep, side in ((Z[0], np.fmax, np.less), (Z[-1], np.fmin, np.greater)):
            edge = self.quantile(np.full(inside.size, -np.expm1(-np.exp(z))), picked)
            beyond = side(t[inside], edge)
            out[at[beyond]] = keep(out[at[beyond]], np.exp(-np.exp(z)))   # 1 - level, unrounded
        return out

    def service(self, rows: np.ndarray):
        """The CPU-time law of the chosen points (a broadcast :class:`~capacity.distributions.Service`)."""
        from .distributions import Service

        return getattr(Service, self.family)(self.mean[rows], self.scv[rows])

    def subset(self, rows: np.ndarray):
        from ._common import prepare

        return prepare(self.lam[rows], self.service(rows), self.servers[rows])


def one_core_batch(discipline: str, family: str, q: np.ndarray, lam: np.ndarray, servers: np.ndarray,
                   mean: np.ndarray, scv: np.ndarray) -> np.ndarray | None:
    """A fit's batch of response-time quantiles (seconds, shape (K, N)) straight from the one-core
    table, without building or validating a Service: ``mean`` and ``scv`` of shape (K, 1), ``q``,
    ``lam`` and ``servers`` of shape (N,).  The same numbers as ``tabled_or_direct`` (and, for PS,
    :func:`capacity.ps.response_quantile`, which floors them at the CPU time's own quantile) at a
    third of the cost; None unless every point is stable, loaded, on one core and inside the
    table, when the caller takes that general path."""
    if discipline not in ("fcfs", "ps") or family not in families(discipline) or np.any(servers != 1):
        return None
    rho = lam[None, :] * mean
    shape = rho.shape
    scv_b = np.broadcast_to(scv, shape)
    if not (np.all(lam > 0) and np.all(rho < 1) and np.all(covered(discipline, family, rho, scv_b))):
        return None
    q_b = np.broadcast_to(q, shape)
    t = quantile(discipline, family, q_b.ravel(), rho.ravel(), scv_b.ravel()).reshape(shape)
    if np.isnan(t).any():
        return None
    out = mean * t
    if discipline == "ps":     # PS never beats the CPU time (capacity.ps floors every table's answer)
        from scipy import special

        if family == "lognormal":
            s2 = np.log1p(scv_b)
            own = mean * np.exp(np.sqrt(s2) * special.ndtri(q_b) - 0.5 * s2)
        else:
            own = special.gammaincinv(1.0 / scv_b, q_b) * mean * scv_b
        out = np.maximum(out, own)
    return out


def tabled_quantile(discipline: str, q, arrival_rate, service, servers=1) -> np.ndarray | None:
    """Response-time quantiles (seconds) from the table, broadcast; NaN where a point is not
    covered (the caller computes those directly), ``inf`` where unstable.  None when the
    family has no table at all."""
    found = _tabled(discipline, q, arrival_rate, service, servers)
    return None if found is None else found[0]


def tabled_or_direct(discipline: str, q, arrival_rate, service, servers, direct) -> np.ndarray:
    """Quantiles from the table where it answers, from ``direct(q, arrival_rate, service,
    servers)`` at the other points only (called once, on the flat points the table misses)."""
    found = _tabled(discipline, q, arrival_rate, service, servers)
    if found is None:
        return np.asarray(direct(q, arrival_rate, service, servers), dtype=float)
    out, cov, qf = found
    miss = np.flatnonzero(np.isnan(out.ravel()))
    if miss.size and discipline == PS_PHASE_TYPE and service.family == "exponential":
        # M/M/c-PS on several cores: the M/G/c-PS gamma table at scv 1, which is the exponential
        # law itself (the exact chain costs 0.9-1.2 s for a curve of 40 utilisations).  Against the
        # chain at utilisation 0.002-0.995 (tools/measure_heavy_traffic.py exponential): p50-p99.9
        # within 0.3 % on 2-16 cores, p10 within 0.2-2.1 % (the worst at 0.995, above the tables'
        # top); 2.7 % on 3 cores (read between 2 and 4).
        from .distributions import Service

        flat = out.reshape(-1)
        many = miss[cov.servers[miss] > 1]       # one core's misses: the exact chain, as before
        if many.size:
            again = _tabled("ps", qf[many], cov.lam[many], Service.gamma(cov.mean[many], 1.0), cov.servers[many])
            if again is not None:
                flat[many] = again[0]
                miss = np.flatnonzero(np.isnan(flat))
    if miss.size:
        from .distributions import Service

        if service.family == "exponential":   # read as H2 of scv 1; computed as itself (M/M/c-PS exact)
            svc = Service.exponential(cov.mean[miss])
        else:
            svc = getattr(Service, cov.family)(cov.mean[miss], cov.scv[miss])
        flat = out.reshape(-1)
        flat[miss] = np.asarray(direct(qf[miss], cov.lam[miss], svc, cov.servers[miss]), dtype=float)
    return out


def _tabled(discipline: str, q, arrival_rate, service, servers):
    from ._common import prepare

    family = getattr(service, "family", None)
    if family not in families(discipline) and not (discipline == PS_PHASE_TYPE and family == "exponential"):
        return None     # no table of this law: skip validating and broadcasting the batch (a fit's hot path)
    if discipline == PS_PHASE_TYPE and family == "exponential":
        # M/M/1-PS: the phase-type table's scv-1 node is the exponential law itself (the balanced
        # H2 of scv 1).  Against the exact tagged-request chain at utilisation 0.01-0.98, p1-p99.99:
        # within 1.9e-5 (median 3e-6), 25x faster than the chain on a batch of 100 points.
        from .distributions import Service

        service = Service.hyperexponential(service.mean, 1.0)
    inp = prepare(arrival_rate, service, servers)
    qq = np.asarray(q, dtype=float)
    shape = np.broadcast_shapes(qq.shape, inp.shape)
    cov = Coverage(discipline, inp, shape)
    if cov.mask is None:
        return None
    m = cov.mask
    out = np.where(cov.stable, np.nan, np.inf)
    qf = np.broadcast_to(qq, shape).ravel()
    if m.any():
        out[m] = cov.quantile(qf[m], m)
    if discipline == "fcfs":
        lo = scv_range("fcfs", cov.family)[0]
        below = (cov.stable & (cov.servers == 1) & (cov.rho <= RHO[-1] * (1 + _SLACK))
                 & (cov.scv >= 0) & (cov.scv < lo * (1 - _SLACK)))
        if below.any():
            out[below] = cov.mean[below] * _fcfs_below_table(cov.family, qf[below], cov.rho[below],
                                                             cov.scv[below], lo)
    return out.reshape(shape), cov, qf


def _fcfs_below_table(family: str, q: np.ndarray, rho: np.ndarray, scv: np.ndarray, lo: float) -> np.ndarray:
    """FCFS ``t_q / E[S]`` for scv below the tables (flat arrays), NaN where q is outside the levels.

    ``log t`` is interpolated linearly in the coefficient of variation ``cv = sqrt(scv)`` between
    the exact M/D/1 quantile (cv = 0, :mod:`capacity.fcfs`, Irwin-Hall kinks in closed form) and
    the table at its lowest scv ``lo``.  Why cv and not scv: the response's spread around the knee
    at ``q = 1 - rho`` (the requests that do not wait take ``S`` itself) scales with the service
    time's standard deviation, so it moves linearly in cv; linear in scv is off by up to 6 % there.
    Against the exact M/G/1 on a dense grid (lognormal and gamma, scv 0.001-0.008, rho 0.01-0.99,
    q 0.001-0.99999): median 0.2 %, at most 4.4 % within 0.05 of the knee (worst at light load,
    where the knee sits at a high q), 2.4 % elsewhere; at a fit's typical levels (p50-p99.9,
    rho 0.3-0.95) 1.6 % at the knee and 0.4 % elsewhere against an exact Erlang-k phase-type
    chain (``tests/test_quantile_table.py``).  The exact inversion costs 0.7-6 ms a point here (a
    busy loop's histogram fit took 140 s); this costs microseconds.
    """
    from . import fcfs
    from .distributions import Service

    at_lo = quantile("fcfs", family, q, rho, np.full(q.shape, lo))
    ok = np.isfinite(at_lo)
    out = np.full(q.shape, np.nan)
    if ok.any():
        constant = np.asarray(fcfs.response_quantile(q[ok], rho[ok], Service.deterministic(1.0)), dtype=float)
        w = np.sqrt(scv[ok] / lo)
        out[ok] = np.exp((1.0 - w) * np.log(constant) + w * np.log(at_lo[ok]))
    return out
