"""The shipped M/G/1 quantile tables (capacity._quantile_table) against the direct computation.

Reference: a table interpolates results computed point by point -- for PS the hyper-Erlang fit +
exact M/PH/1-PS transform of capacity.ps, for FCFS the exact M/G/1 of capacity.fcfs.  Here the
same direct computation is run at points *between* the grid nodes in every coordinate (the
worst place for an interpolant), with the table disabled, and compared with the interpolated
value.
"""
from __future__ import annotations

import numpy as np
import pytest

from capacity import Service, fcfs, ps, simulate
from capacity import _quantile_table as table

needs_ps = pytest.mark.skipif(not table.path("ps").exists(), reason="shipped PS table missing")


def _mid(grid: np.ndarray, i: int, log: bool = True) -> float:
    """Midpoint between grid nodes i and i + 1 (geometric for log-spaced grids)."""
    return float(np.sqrt(grid[i] * grid[i + 1]) if log else 0.5 * (grid[i] + grid[i + 1]))


def _logit_mid(i: int) -> float:
    x = 0.5 * (np.log(table.RHO[i] / (1 - table.RHO[i]))
               + np.log(table.RHO[i + 1] / (1 - table.RHO[i + 1])))
    return float(1 / (1 + np.exp(-x)))


@pytest.mark.parametrize("discipline", table.DISCIPLINES)
def test_tables_match_their_grids(discipline):
    if not table.path(discipline).exists():
        pytest.skip(f"shipped {discipline} table missing")
    with np.load(table.path(discipline)) as data:
        np.testing.assert_array_equal(data["rho"], table.RHO)
        np.testing.assert_array_equal(data["z"], table.Z)
        fams = [f[len("scv_"):] for f in data.files if f.startswith("scv_")]
        assert "lognormal" in fams and (discipline == "ps" or "gamma" in fams)
        for fam in fams:
            scv = data[f"scv_{fam}"]      # a contiguous run of the family's grid
            assert scv.size >= 8
            i0 = int(np.argmin(np.abs(table.SCV[fam] - scv[0])))
            np.testing.assert_array_equal(scv, table.SCV[fam][i0:i0 + scv.size])
            values = data[f"log_scaled_{fam}"]
            assert values.shape == (table.RHO.size, scv.size, table.Z.size)
            assert np.isfinite(values).all()
            # Quantiles increase with the level q at every (rho, scv) node (strictly for PS, whose
            # P(T > t) is read by solving for the level; FCFS quantiles below 1e-9 E[S], e.g. the
            # p1 of a gamma with scv 25, are floored there by capacity.fcfs).
            steps = np.diff(values, axis=-1)
            assert np.all(steps > 0) if discipline == "ps" else np.all(steps >= 0)
    assert set(table.families(discipline)) == set(fams)


@pytest.mark.parametrize("family", ["lognormal", "gamma"])
def test_fcfs_table_between_nodes_matches_exact_mg1(family):
    """Every cell midpoint (rho, scv) at off-grid levels: within 0.2 % of the exact M/G/1
    (gamma: scv <= 10; at scv ~20 its p50 is ~1e-6 E[S] and the table is off by 2 %)."""
    lr = np.log(table.RHO / (1 - table.RHO))
    rho = 1 / (1 + np.exp(-0.5 * (lr[:-1] + lr[1:])))
    ls = np.log(table.SCV[family])
    scv = np.exp(0.5 * (ls[:-1] + ls[1:]))
    scv = scv[scv <= 10]
    q = np.array([0.5, 0.9, 0.99, 0.999])
    r, c, qq = np.meshgrid(rho, scv, q, indexing="ij")
    got = table.tabled_quantile("fcfs", qq, r, getattr(Service, family)(1.0, c))
    ref = np.asarray(fcfs.response_quantile(qq, r, getattr(Service, family)(1.0, c)))
    np.testing.assert_allclose(got, ref, rtol=2e-3)


@needs_ps
# Lognormal node 0 (scv 0.57) is answered by the near-constant table since it covers scv to 0.8
# (test_ps_near_constant_table.py); node 1 (0.82) is the first the main table answers alone.
@pytest.mark.parametrize("i_rho, j_scv", [(12, 1), (20, 3), (27, 6), (31, 8)])
def test_ps_table_reproduces_direct_computation_at_its_nodes(direct, i_rho, j_scv):
    """At grid nodes (rho, scv and level q all on the grid) the table returns what the direct
    computation gives, up to the build's inversion of P(T > t) on 72 points and float32 storage.
    Between the nodes the direct computation is not a smooth function of scv (its hyper-Erlang
    fit changes structure), so the reference there is the truth: simulation (next test) and, at
    light load, the service law itself (test_light_load)."""
    with np.load(table.path("ps")) as data:
        scv = float(data["scv_lognormal"][j_scv])
    rho = float(table.RHO[i_rho])
    q = -np.expm1(-np.exp(table.Z[[8, 20, 30, 36]]))
    svc = Service.lognormal(0.02, scv)
    got = np.asarray(ps.response_quantile(q, rho / 0.02, svc))
    ref = direct(ps.response_quantile, q, rho / 0.02, svc)
    np.testing.assert_allclose(got, ref, rtol=2e-3)


@needs_ps
@pytest.mark.parametrize("rho, scv, tol", [(0.79, 1.46, 0.03), (0.5, 0.47, 0.03), (0.93, 4.55, 0.03)])
def test_ps_table_against_simulation(rho, scv, tol):
    """Lognormal service between the table's scv nodes against exact seeded PS simulation
    (capacity.sim, 1.2e6 s): p50/p90/p99 within the 99 % batch-means CI widened by ``tol`` of the
    estimate (measured: within 1.6 %, capacity.ps.response_quantile)."""
    from capacity.sim import simulate

    svc = Service.lognormal(1.0, scv)
    res = simulate(rho, svc, discipline="ps", horizon=1.2e6, seed=11)
    qs = [0.5, 0.9, 0.99]
    model = ps.response_quantile(qs, rho, svc)
    for q, m in zip(qs, model):
        ci = res.confidence_interval(q, level=0.99, warmup=100.0)
        assert abs(m - ci.estimate) <= ci.half_width + tol * ci.estimate, (q, m, ci)


@needs_ps
def test_sf_inverts_the_quantile_and_matches_direct(direct):
    svc = Service.lognormal(0.01, 2.0)
    lam = 63.0
    q = np.array([0.3, 0.7, 0.9, 0.99, 0.999])
    t = np.asarray(ps.response_quantile(q, lam, svc))
    np.testing.assert_allclose(ps.response_sf(t, lam, svc), 1 - q, rtol=1e-7)
    np.testing.assert_allclose(ps.response_sf(t, lam, svc), direct(ps.response_sf, t, lam, svc),
                               rtol=2e-2, atol=2e-4)


@needs_ps
def test_light_load():
    """At exactly zero arrivals the response is the service time (scipy's lognormal ppf); below
    the first utilisation node (0.001) the node's value stands, continuous there; and at light
    load, where T -> S, the table is within a few per cent of the lognormal's own quantiles (the
    hyper-Erlang fit's error in the service law, documented in capacity.ps)."""
    svc = Service.lognormal(1.0, 1.5)
    q = np.array([0.5, 0.9, 0.99])
    np.testing.assert_allclose(ps.response_quantile(q, 0.0, svc), svc.ppf(q), rtol=1e-12)
    r0 = table.RHO[0]
    below, above = ps.response_quantile(0.9, [r0 * (1 - 1e-9), r0 * (1 + 1e-9)], svc)
    assert below == pytest.approx(above, rel=1e-6)
    light = np.asarray(ps.response_quantile(q, 1e-4, svc))
    np.testing.assert_allclose(light, svc.ppf(q), rtol=0.06)
    # Between scv nodes the table can beat the direct computation: scv 3.1 (p90, p99).
    svc = Service.lognormal(1.0, 3.115)
    np.testing.assert_allclose(ps.response_quantile(q, 1e-4, svc), svc.ppf(q), rtol=0.04)


@needs_ps
def test_monotone_in_load_and_level():
    svc = Service.lognormal(1.0, 3.0)
    rho = np.linspace(0.001, 0.9985, 400)
    q = np.array([0.5, 0.9, 0.99, 0.9999])[:, None]
    x = np.asarray(ps.response_quantile(q, rho, svc))
    assert np.all(np.diff(x, axis=0) > 0)
    # Strictly rising in load wherever the answer is above the service's own quantile, the floor
    # T >= S puts under every answer: at light load the table's spline dipped below it (p99 4.5 %
    # below at rho 0.001-0.03 for this law), and there the floor holds the answer flat.
    own = np.asarray(svc.ppf(q))
    assert np.all(x >= own)
    above = x > own * (1 + 1e-12)
    step = np.diff(x, axis=1)
    assert np.all(step >= 0) and np.all(step[above[:, :-1] & above[:, 1:]] > 0)


@needs_ps
def test_points_outside_the_table_are_computed_directly(direct):
    """rho above 0.9999 (or above 0.999 below p10), an scv beyond the grid and q beyond 1 - 1e-6
    fall back to the direct computation, so they agree with it exactly."""
    cases = [(0.99995, Service.lognormal(1.0, 1.0), 0.99), (0.9995, Service.lognormal(1.0, 1.0), 0.05),
             (0.5, Service.lognormal(1.0, 60.0), 0.99),
             (0.5, Service.lognormal(1.0, 1.0), 1 - 1e-7)]
    for lam, svc, q in cases:
        assert ps.response_quantile(q, lam, svc) == pytest.approx(
            float(direct(ps.response_quantile, q, lam, svc)), rel=1e-12)


@needs_ps
def test_one_core_above_the_top_holds_the_tables_scaled_value(direct):
    """Above utilisation 0.999 to 0.9999 one core's quantiles from p10 up are the top's
    ``(1 - rho) t_q`` held (the heavy-traffic limit ``(1 - rho) T -> S E``): within the 3.4 % the
    docstring of ``_log_t_one_core_heavy`` states of the direct computation (which took ~1 s a
    point there); ``sf`` inverts them, and levels below p10 are the direct computation's."""
    q = np.array([0.1, 0.5, 0.9, 0.99, 0.999])
    for svc in (Service.lognormal(1.0, 0.1), Service.gamma(1.0, 0.5), Service.gamma(1.0, 1.0)):
        for rho in (0.9995, 0.9999):
            got = np.asarray(ps.response_quantile(q, rho, svc))
            want = np.asarray(direct(ps.response_quantile, q, rho, svc))
            np.testing.assert_allclose(got, want, rtol=0.034)
            np.testing.assert_allclose(ps.response_sf(got, rho, svc), 1 - q, rtol=1e-7)
            # The rule is not the table's value at the top: it grows as 1 / (1 - rho).
            top = np.asarray(ps.response_quantile(q, table.RHO[-1], svc))
            np.testing.assert_allclose(got * (1 - rho), top * (1 - table.RHO[-1]), rtol=1e-9)
    svc = Service.gamma(1.0, 0.5)
    low = ps.response_sf(2.0, 0.9995, svc)          # P(T > 2 E[S]) near 1: off the rule's levels
    assert low > 0.9 and low == pytest.approx(float(direct(ps.response_sf, 2.0, 0.9995, svc)), rel=1e-12)


@pytest.mark.parametrize("discipline", ["ps", "fcfs"])
def test_the_spline_interpolates_every_stored_node(discipline):
    """The tables are read by a spline through their nodes: at every node it gives the stored value
    held in load order (``_in_load_order``: no quantile shorter than the quieter row's), which moves
    no answered node by more than 0.2 % in t below q = 0.999 (0.52 % in the heavy-tail gamma piece's
    light-load body, inside its stated error).  scipy 1.17's
    RegularGridInterpolator(method="cubic"), used before, solved iteratively and missed the FCFS
    gamma table's nodes by 5e-3 in log t."""
    from capacity._quantile_table import PS_HEAVY_TAIL, _in_load_order, _interpolators, path

    files = (path(discipline),) + ((path(PS_HEAVY_TAIL),) if discipline == "ps" else ())
    for file in files:
        with np.load(file) as data:
            for family, pieces in _interpolators(discipline).items():
                if f"scv_{family}" not in data.files:
                    continue
                rho, scv, z = data["rho"], data[f"scv_{family}"], data["z"]
                # This file's piece: the one starting at its first scv node.
                piece = next(p for p in pieces if p.lo == float(scv[0]))
                grid = np.stack(np.meshgrid(np.log(rho / (1 - rho)), np.log(scv), z, indexing="ij"), -1)
                stored = data[f"log_scaled_{family}"].astype(float)
                nodes = _in_load_order(rho, stored)
                # The heavy-tail gamma piece's spline is relative to the law's own quantile.
                own = 0.0 if piece.own is None else table._log_own_quantile(
                    piece.own, grid[..., 2], np.exp(grid[..., 1]))
                np.testing.assert_allclose(piece.spline(grid.reshape(-1, 3)), (nodes - own).ravel(),
                                           rtol=0, atol=1e-10, err_msg=f"{file.name} {family}")
                assert np.all(nodes >= stored - 1e-12)
                body = -np.expm1(-np.exp(z)) < 0.999
                heavy = file == path(PS_HEAVY_TAIL)
                # The heavy-tail piece's light-load body moves up to 0.52 % (scv 8, rho 0.08, p24),
                # inside its stated error.
                assert np.max((nodes - stored)[:, :, body]) <= (6e-3 if heavy else 2e-3), file.name


def _erlang_fcfs_response_quantile(q: float, rho: float, k: int, guess: float) -> float:
    """Exact M/E_k/1 FCFS response quantile, mean CPU 1, from its phase-type chain (independent of
    capacity.fcfs's transform inversion): the wait is PH(alpha+, S + s alpha+) with
    alpha+ = lambda alpha (-S)^-1 (Asmussen, Applied Probability and Queues, 2003, VIII.5), the
    response that wait followed by one more service; P(T > t) by expm_multiply, solved by brentq
    from a bracket around ``guess``."""
    import scipy.sparse as sp
    from scipy.optimize import brentq
    from scipy.sparse.linalg import expm_multiply

    mu = float(k)
    S = sp.diags([-mu * np.ones(k), mu * np.ones(k - 1)], [0, 1], format="csr")
    alpha, s = np.eye(k)[0], np.eye(k)[-1] * mu
    alpha_plus = np.full(k, rho / mu)   # lambda = rho: time spent in each phase is 1/mu
    G = sp.bmat([[S + sp.csr_matrix(np.outer(s, alpha_plus)), sp.csr_matrix(np.outer((1 - rho) * s, alpha))],
                 [None, S]], format="csc")
    start = np.concatenate([alpha_plus, (1 - rho) * alpha])

    def miss(t):
        return expm_multiply(G.T * t, start).sum() - (1 - q)

    return brentq(miss, guess * 0.9, guess * 1.1, xtol=1e-12, rtol=1e-9)


def test_fcfs_below_the_tables_scv_matches_an_exact_erlang_chain():
    """Below the FCFS tables (scv < 0.01: a busy loop's CPU) the fits read log t linear in cv
    between M/D/1 and the table's lowest scv.  Gamma with scv 1/k is Erlang-k, whose response
    time is an exact phase-type chain: within 2 % at the knee q = 1 - rho (measured 1.6 %), 0.6 %
    elsewhere (measured 0.4 %) -- and every point is an interpolation, none the direct fallback."""
    for k in (200, 300):
        for rho, q in ((0.3, 0.2), (0.3, 0.99), (0.5, 0.5), (0.8, 0.2), (0.8, 0.9), (0.95, 0.999)):
            svc = Service.gamma(1.0, 1.0 / k)
            got = float(table.tabled_quantile("fcfs", q, rho, svc))
            ref = _erlang_fcfs_response_quantile(q, rho, k, got)
            knee = abs(q - (1 - rho)) < 0.05
            assert got == pytest.approx(ref, rel=0.02 if knee else 0.006), (k, rho, q)


@pytest.mark.parametrize("family", ["lognormal", "gamma"])
def test_fcfs_below_the_tables_is_continuous_and_monotone(family):
    """At the tables' lowest scv the interpolation meets the table; at scv 0 it is M/D/1 exactly;
    quantiles grow with the level and the load (the fits differentiate them)."""
    lo = table.scv_range("fcfs", family)[0]
    q = np.linspace(0.01, 0.999, 60)[:, None]
    rho = np.linspace(0.02, 0.98, 40)[None, :]
    law = getattr(Service, family)
    just_below = table.tabled_quantile("fcfs", q, rho, law(1.0, lo * (1 - 1e-6)))
    at = table.tabled_quantile("fcfs", q, rho, law(1.0, lo))
    np.testing.assert_allclose(just_below, at, rtol=1e-5)
    tiny = table.tabled_quantile("fcfs", q, rho, law(1.0, 1e-12))
    np.testing.assert_allclose(tiny, fcfs.response_quantile(q, rho, Service.deterministic(1.0)), rtol=1e-4)
    mid = table.tabled_quantile("fcfs", q, rho, law(1.0, 0.003))
    assert np.all(np.diff(mid, axis=0) >= 0) and np.all(np.diff(mid, axis=1) >= 0)


needs_phase_type = pytest.mark.skipif(not table.path(table.PS_PHASE_TYPE).exists(),
                                      reason="shipped phase-type PS table missing")


@needs_phase_type
def test_phase_type_ps_table_matches_its_grid():
    with np.load(table.path(table.PS_PHASE_TYPE)) as data:
        np.testing.assert_array_equal(data["rho"], table.RHO)
        np.testing.assert_array_equal(data["z"], table.PS_PHASE_TYPE_Z)
        # To the last bit but one: numpy's geomspace rounds differently across releases (2.4).
        np.testing.assert_allclose(data["scv_hyperexponential"], table.PS_PHASE_TYPE_SCV["hyperexponential"],
                                   rtol=1e-15, atol=0)
        values = data["log_scaled_hyperexponential"]
        assert values.shape == (table.RHO.size, table.PS_PHASE_TYPE_SCV["hyperexponential"].size,
                                table.PS_PHASE_TYPE_Z.size)
        assert np.isfinite(values).all() and np.all(np.diff(values, axis=-1) > 0)
    assert table.families(table.PS_PHASE_TYPE) == ("hyperexponential",)
    # capacity.ps itself stays exact: the PS families it answers from a table are unchanged.
    assert "hyperexponential" not in table.families("ps")


@needs_phase_type
def test_phase_type_ps_table_between_nodes_matches_the_exact_transform():
    """Hyperexponential service at cell midpoints (every fourth rho and scv cell) and four levels
    against capacity.ps's exact M/H2/1-PS transform (the build's --check over every other cell:
    max 0.66 % at p99, where an H2's quantile leaps from its fast branch to its slow one at light
    load; 0.08 % at p90, 0.007 % at p50 and p99.9; median 2e-5)."""
    lr = np.log(table.RHO / (1 - table.RHO))
    rho = (1 / (1 + np.exp(-0.5 * (lr[:-1] + lr[1:]))))[::4]
    ls = np.log(table.PS_PHASE_TYPE_SCV["hyperexponential"])
    scv = np.exp(0.5 * (ls[:-1] + ls[1:]))[1::4]
    q = np.array([0.5, 0.9, 0.99, 0.999])
    r, c, qq = np.meshgrid(rho, scv, q, indexing="ij")
    svc = Service.hyperexponential(1.0, c)
    got = table.tabled_quantile(table.PS_PHASE_TYPE, qq, r, svc)
    ref = np.asarray(ps.response_quantile(qq, r, svc))
    np.testing.assert_allclose(got, ref, rtol=7e-3)


@needs_phase_type
def test_a_hyperexponential_ps_fit_reads_the_table_and_recovers_the_law():
    """Percentiles from the exact transform at three loads, fitted with family and discipline
    given: the table-backed fit (tens of evaluations, no longer 40-80 ms each) finds the mean and
    scv within 1 %."""
    from capacity.fit import from_percentiles

    svc = Service.hyperexponential(0.02, 6.0)
    levels = [0.5, 0.9, 0.99, 0.999]
    records = [{"percentiles": dict(zip(levels, np.asarray(ps.response_quantile(levels, rate, svc)))),
                "arrival_rate": rate} for rate in (10.0, 25.0, 40.0)]
    fit = from_percentiles(records, discipline="ps", family="hyperexponential")
    assert fit.cpu_per_request_ == pytest.approx(0.02, rel=0.01)
    assert fit.scv_ == pytest.approx(6.0, rel=0.01)


def test_fcfs_hyperexponential_is_the_exact_mg1_where_a_table_piece_was_33_percent_off():
    """The FCFS table no longer carries a hyperexponential piece (its 10 scv nodes and 40 levels
    missed the H2's leap from its fast branch to its slow one: up to 33 % off at p95, light load),
    so the fits' and rr's FCFS path (``tabled_or_direct("fcfs", ...)``) is the exact M/H2/1 at
    every cell midpoint of the old piece's grid, p50-p99.9, to rounding."""
    with np.load(table.path("fcfs")) as data:
        assert "scv_hyperexponential" not in data.files and "log_scaled_hyperexponential" not in data.files
    assert "hyperexponential" not in table.families("fcfs")
    lr = np.log(table.RHO / (1 - table.RHO))
    rho = 1 / (1 + np.exp(-0.5 * (lr[:-1] + lr[1:])))
    ls = np.log(np.geomspace(1.0, 25.0, 10))          # the dropped piece's scv nodes
    scv = np.exp(0.5 * (ls[:-1] + ls[1:]))
    q = np.array([0.5, 0.9, 0.95, 0.99, 0.999])
    r, c, qq = np.meshgrid(rho, scv, q, indexing="ij")
    svc = Service.hyperexponential(1.0, c)
    got = table.tabled_or_direct("fcfs", qq, r, svc, 1, fcfs.response_quantile)
    ref = np.asarray(fcfs.response_quantile(qq, r, svc))
    np.testing.assert_allclose(got, ref, rtol=1e-2)
    # Where the piece was worst (p90-p99 of the light-load leap), the exact path is the H2's own
    # quantile (from its closed-form sf, an independent code path) as the load vanishes.
    c = np.array([2.0, 6.0, 20.0])[:, None]
    q = np.array([0.9, 0.95, 0.97, 0.99])
    h2 = Service.hyperexponential(1.0, c)
    got = table.tabled_or_direct("fcfs", q, 1e-7, h2, 1, fcfs.response_quantile)
    np.testing.assert_allclose(got, h2.ppf(q), rtol=1e-4)


def _heavy_tail_against_direct(direct, family: str, cells: list) -> np.ndarray:
    """|table / direct - 1| at p99 and p99.9 (rows: cells) at the midpoints of the heavy-tail
    piece's cells (j: scv node, i: utilisation node)."""
    ls = np.log(table.PS_HEAVY_TAIL_SCV[family])
    lr = np.log(table.RHO / (1 - table.RHO))
    q = np.array([0.99, 0.999])
    out = []
    for j, i in cells:
        scv = float(np.exp(0.5 * (ls[j] + ls[j + 1])))
        rho = 1 / (1 + np.exp(-0.5 * (lr[i] + lr[i + 1])))
        svc = getattr(Service, family)(1.0, scv)
        out.append(np.abs(table.tabled_quantile("ps", q, rho, svc) / direct(ps.response_quantile, q, rho, svc) - 1))
    return np.array(out)


def test_the_heavy_tail_gamma_piece_answers_to_scv_53_within_its_stated_error(direct):
    """PS gamma from scv 5.5 to 53 comes from the heavy-tail piece, read relative to the law's own
    quantile.  In the tail of a loaded queue, where its nodes are the direct computation's, against
    the direct computation at cell midpoints (scv 6.6, 9.7 and 30; utilisation 0.56 and 0.98) within what
    capacity._quantile_table.PS_HEAVY_TAIL states (p99 / p99.9 2.5 %).  As the load vanishes, against
    the service's own exact quantile (scipy's gamma ppf, independent of both: T -> S), within 0.3 %
    at p50-p99.9 for scv 5.5-53 -- where the direct computation, whose hyper-Erlang fit floors sizes
    at 1e-6 E[S], is off by orders of magnitude at p50 above scv 20."""
    from scipy import stats

    assert table.scv_range("ps", "gamma")[1] == pytest.approx(53.3, abs=0.1)
    tail = _heavy_tail_against_direct(direct, "gamma", [(j, i) for j in (1, 2, 5) for i in (16, 28)])
    assert tail.max() <= 0.025, tail
    q = np.array([0.5, 0.9, 0.99, 0.999])
    for scv in (5.5, 9.7, 20.7, 44.1, 53.0):
        svc = Service.gamma(1.0, scv)
        light = table.tabled_quantile("ps", q, 1.2e-3, svc)
        exact = stats.gamma(1 / scv, scale=scv).ppf(q)
        assert np.all(np.abs(light / exact - 1) < 3e-3), (scv, light / exact - 1)
    far = direct(ps.response_quantile, 0.5, 1.2e-3, Service.gamma(1.0, 44.1))
    assert far > 100 * stats.gamma(1 / 44.1, scale=44.1).ppf(0.5)
    assert not table.covered("ps", "gamma", np.array([0.5]), np.array([60.0]))[0]


def test_the_heavy_tail_lognormal_piece_answers_to_scv_53_within_its_stated_error(direct):
    """PS lognormal from scv 25 to 53 comes from the heavy-tail piece (it was computed directly,
    about 1 s an evaluation), built and read as gamma's.  In the tail of a loaded queue against the
    direct computation at two cell midpoints (scv 30 at utilisation 0.99, 44 at 0.61) within 2.5 %
    (capacity._quantile_table.PS_HEAVY_TAIL).  As the load vanishes, against the law's own exact
    quantile (scipy's lognorm, independent of both: T -> S) within 0.3 % at p50-p99.9 -- where the
    direct computation's median is 3.6-4.4 % high (its hyper-Erlang fit)."""
    from scipy import stats

    assert table.scv_range("ps", "lognormal")[1] == pytest.approx(53.3, abs=0.1)
    # Two cells: the direct computation takes ~10 s a cell here.
    tail = _heavy_tail_against_direct(direct, "lognormal", [(2, 28), (3, 16)])
    assert tail.max() <= 0.025, tail
    q = np.array([0.5, 0.9, 0.99, 0.999])
    for scv in (25.0, 30.2, 44.1, 53.0):
        sigma = np.sqrt(np.log1p(scv))
        exact = stats.lognorm(sigma, scale=np.exp(-0.5 * sigma**2)).ppf(q)
        light = table.tabled_quantile("ps", q, 1.2e-3, Service.lognormal(1.0, scv))
        assert np.all(np.abs(light / exact - 1) < 3e-3), (scv, light / exact - 1)
    far = direct(ps.response_quantile, 0.5, 1.2e-3, Service.lognormal(1.0, 30.2))
    assert far > 1.03 * stats.lognorm(np.sqrt(np.log1p(30.2)), scale=np.exp(-0.5 * np.log1p(30.2))).ppf(0.5)
    assert not table.covered("ps", "lognormal", np.array([0.5]), np.array([60.0]))[0]


def _many_core_mid(i: int) -> float:
    r = table.PS_MANY_CORES_RHO
    x = 0.5 * (np.log(r[i] / (1 - r[i])) + np.log(r[i + 1] / (1 - r[i + 1])))
    return float(1 / (1 + np.exp(-x)))


@pytest.mark.parametrize("c", sorted(table.PS_MANY_CORES))
def test_many_core_ps_tables_reproduce_the_direct_computation_between_nodes(direct, c):
    """M/G/c-PS from its table (capacity._quantile_table.PS_MANY_CORES) against the direct
    computation of capacity._ps_many_cores midway between the nodes in utilisation and scv, p50-p99.9:
    within what ``tools/build_quantile_tables.py --check`` measured over every other cell (3.2 % for
    lognormal, whose direct computation jumps between nearby scv values near 1; 1.5 % for gamma away
    from scv 0.1, where the direct computation is the one off: see the next test).  Points above the
    table's utilisation or outside its scv range are the direct computation itself."""
    name = table.PS_MANY_CORES[c]
    assert set(table.families(name)) == {"lognormal", "gamma"}, f"{name} is not shipped whole"
    q = np.array([0.5, 0.9, 0.99, 0.999])
    # (utilisation, scv) cells: scv indices from 0.04, the first node of the direct computation's range
    # (below it the tables' rows are _ps_narrow_many_cores's rule, tested in tests/test_ps_many_cores.py).
    start = int(np.searchsorted(table.PS_MANY_CORES_SCV["lognormal"], table.MANY_CORES_NEAR_CONSTANT_BELOW * (1 - 1e-9)))
    cells = {"lognormal": ([(8, start + 5), (14, start + 9), (22, start + 12)], 0.033),
             "gamma": ([(8, start + 9), (14, start + 12), (22, start + 6)], 0.016)}
    for family, (points, limit) in cells.items():
        scv_nodes = table.PS_MANY_CORES_SCV[family]
        for i, j in points:
            rho, scv = _many_core_mid(i), _mid(scv_nodes, j)
            svc = getattr(Service, family)(1.0, scv)
            got = np.asarray(ps.response_quantile(q, c * rho, svc, servers=c))
            ref = direct(ps.response_quantile, q, c * rho, svc, c)
            assert np.all(np.abs(got / ref - 1) <= limit), (family, rho, scv, got / ref - 1)
    top = float(table.PS_MANY_CORES_RHO[-1])
    svc = Service.lognormal(1.0, 2.0)
    # Above the top, up to one core's table (0.999), the heavy-traffic reading (the next test);
    # beyond it the direct computation.
    assert table.covered(name, "lognormal", np.array([top, 0.995, 0.9995]), np.full(3, 2.0)).tolist() == [True, True, False]
    beyond = np.asarray(ps.response_quantile(0.99, c * 0.9995, svc, servers=c))
    assert beyond == pytest.approx(direct(ps.response_quantile, 0.99, c * 0.9995, svc, c), rel=1e-12)


def test_many_core_tables_carry_to_saturation(direct):
    """Above the M/G/c-PS tables' top utilisation (0.991) the quantile is one core's c times faster
    (the heavy-traffic limit) times the ratio the table shows at its top, shrinking linearly in
    1 - rho (capacity._quantile_table._log_t_heavy): continuous at the top, rising with the load, and
    at utilisation 0.995 on 2 cores within 1 % of the tagged-request chain (about 1 s a point;
    ``tools/measure_heavy_traffic.py heavy``, 2-16 cores at 0.993-0.995: p50-p99.9 within 4.9 %, the
    largest at gamma scv 0.1 and p99.9; p10 up to 6.5 %, gamma scv 6)."""
    top = float(table.PS_MANY_CORES_RHO[-1])
    q = np.array([0.5, 0.9, 0.99, 0.999])
    for c in (2, 6, 16, 64):
        for svc in (Service.lognormal(1.0, 0.5), Service.gamma(1.0, 3.0), Service.gamma(1.0, 0.02)):
            at = np.asarray(ps.response_quantile(q, c * top, svc, servers=c))
            above = np.asarray(ps.response_quantile(q, c * top * (1 + 1e-7), svc, servers=c))
            np.testing.assert_allclose(above, at, rtol=1e-4)
            rho = np.linspace(0.985, 0.999, 15)
            t = np.asarray(ps.response_quantile(q[:, None], c * rho, svc, servers=c))
            assert np.all(np.diff(t, axis=1) > 0), (c, svc.family)
    svc = Service.lognormal(1.0, 2.0)
    read = np.asarray(ps.response_quantile(q, 2 * 0.995, svc, servers=2))
    np.testing.assert_allclose(read, direct(ps.response_quantile, q, 2 * 0.995, svc, 2), rtol=0.01)


def test_exponential_on_several_cores_reads_the_gamma_tables_at_scv_1():
    """Gamma of scv 1 is the exponential law, so the fits and round robin's PS half read M/M/c-PS
    from the M/G/c-PS gamma tables (0.7-1 s for a curve through the exact chain): within 0.1 % of
    the chain on the shipped core counts, 3 % on 3 cores (read between 2 and 4); the chain is not
    called for points a table holds."""
    q = np.array([0.5, 0.9, 0.99, 0.999])[:, None]
    rho = np.array([0.1, 0.5, 0.8, 0.95, 0.99])

    def refuse(*args):
        raise AssertionError("computed directly")

    for c, tol in ((2, 1e-3), (4, 1e-3), (16, 1e-3), (3, 0.03)):
        read = table.tabled_or_direct(table.PS_PHASE_TYPE, q, c * rho, Service.exponential(1.0), c, refuse)
        exact = np.asarray(ps.response_quantile(q, c * rho, Service.exponential(1.0), c))
        np.testing.assert_allclose(read, exact, rtol=tol)


def test_many_core_gamma_table_is_closer_to_simulation_than_the_direct_computation(direct):
    """Gamma scv 0.103 on 4 cores at utilisation 0.79, between the table's scv nodes 0.085 and
    0.125 where the direct computation's phase-type fit changes its number of phases: against
    exact PS simulation (3e6 requests, 99 % batch-means intervals) the table is within the interval
    widened by 1 % at p50-p99.9 (measured -0.5 / -0.2 / -0.6 / -1.3 %), where the direct
    computation is 3.5 % and 5.6 % low at p99 and p99.9."""
    q = np.array([0.5, 0.9, 0.99, 0.999])
    svc, c, rho = Service.gamma(1.0, 0.103), 4, 0.792
    lam = rho * c
    got = np.asarray(ps.response_quantile(q, lam, svc, servers=c))
    ref = direct(ps.response_quantile, q, lam, svc, c)
    horizon = 3e6 / lam
    run = simulate(lam, svc, discipline="ps", servers=c, horizon=horizon, seed=5)
    for k, level in enumerate(q):
        ci = run.confidence_interval(level, level=0.99, batches=30, warmup=0.02 * horizon)
        assert abs(got[k] - ci.estimate) <= ci.half_width + 0.01 * ci.estimate, (level, got[k], ci)
    assert got[3] / ref[3] - 1 > 0.03       # the direct p99.9 is the low one


@pytest.mark.parametrize("family,scv,rho", [("gamma", 2.0, 0.05), ("gamma", 2.0, 0.3), ("gamma", 15.0, 0.3),
                                            ("lognormal", 2.0, 0.3), ("lognormal", 6.0, 0.7)])
def test_ps_sf_does_not_rise_across_the_tables_level_edges(family, scv, rho):
    """Just outside the table's levels (P(T > t) above 0.999 or below 1e-6) P(T > t) is computed
    directly, and there it is held on the table's side of the edge: before, it rose as t grew
    (gamma scv 2, utilisation 0.3: 0.99883 at 0.999 of the tabled p0.1, 0.99900 at 1.001 of it;
    1.013e-6 at 0.999 of the tabled p99.9999, 1.370e-6 at 1.001 of it)."""
    svc = getattr(Service, family)(1.0, scv)
    bottom, top = (float(ps.response_quantile(q, rho, svc)) for q in (1e-3, 1 - 1e-6))
    sf = np.asarray(ps.response_sf([0.999 * bottom, 1.001 * bottom, 0.999 * top, 1.001 * top], rho, svc))
    assert sf[0] >= sf[1] and sf[2] >= sf[3], sf
    assert sf[0] >= 0.999 * (1 - 1e-12) and sf[3] <= 1e-6 * (1 + 1e-12), sf
