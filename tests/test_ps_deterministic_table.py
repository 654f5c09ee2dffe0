"""The shipped M/D/1-PS table (capacity._ps_deterministic_table).

References, independent of the table: the atom P(T = S) = (1 - rho) exp(-rho) and the density
2 rho (1 - rho) exp(-rho) / S just above it (hand-worked: see the module docstring); the direct
computation of capacity.ps (table disabled) midway between the nodes; seeded exact PS simulation.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from capacity import Service, ps
from capacity import _ps_deterministic_table as det
from capacity import _quantile_table as table
from capacity.sim import simulate

pytestmark = pytest.mark.skipif(not table.path(det.PS_DETERMINISTIC).exists(),
                                reason="shipped M/D/1-PS table missing")


def _direct(func, *args):
    table.disabled = True
    try:
        return np.asarray(func(*args), dtype=float)
    finally:
        table.disabled = False


def test_the_file_matches_its_grid():
    with np.load(table.path(det.PS_DETERMINISTIC)) as data:
        np.testing.assert_array_equal(data["rho"], det.RHO)
        np.testing.assert_array_equal(data["z"], det.Z)
        values = data["log_scaled"]
        assert values.shape == (det.RHO.size, det.Z.size)
        assert np.isfinite(values).all() and np.all(np.diff(values, axis=1) > 0)
        # From utilisation 0.25 up the direct computation resolves every level.
        assert np.all(data["z_resolved"][det.RHO >= 0.25] >= det.Z[-1])


def test_the_atom_is_exact():
    """Hand-worked: at rho = 0.5, P(T = S) = 0.5 exp(-0.5) = 0.30327; every level up to it is S."""
    svc = Service.deterministic(0.02)
    lam = 25.0
    a = 0.5 * np.exp(-0.5)
    assert det.atom(0.5) == pytest.approx(0.3032653298563167, rel=1e-14)
    q = np.array([0.01, 0.2, a, a + 1e-9])
    got = np.asarray(ps.response_quantile(q, lam, svc))
    assert np.all(got[:3] == 0.02) and got[3] > 0.02
    sf = np.asarray(ps.response_sf([0.02 * (1 - 1e-12), 0.02, 0.02 * (1 + 1e-9)], lam, svc))
    assert sf[0] == 1.0 and sf[1] == pytest.approx(1 - a, rel=1e-14) and sf[2] < 1 - a


@pytest.mark.parametrize("rho", [0.05, 0.3, 0.7])
def test_just_above_the_atom_the_density_is_the_hand_worked_one(rho):
    """t_p = S (1 + p (1 - a) / f), f = 2 rho (1 - rho) exp(-rho): one arrival during the request's
    solo run, or one other present with a uniform residual.  Below the first level (p = 0.01) the
    table is that line; from it on it follows the direct computation, whose inversion puts
    conditional mass 0.004 on S itself and then lags (measured here: 1.4e-3 at rho 0.3, p 0.009)."""
    a = det.atom(rho)
    f = 2 * rho * (1 - rho) * np.exp(-rho)
    p = np.array([0.001, 0.004, 0.009])
    got = det.quantile(a + (1 - a) * p, np.full(3, rho))
    np.testing.assert_allclose(got, 1 + p * (1 - a) / f, rtol=1.5e-3)


def test_between_the_nodes_it_matches_the_direct_computation():
    """Cell midpoints in utilisation and conditional level, utilisation 0.2-0.99 (the build's
    ``--check ps_deterministic 2``, 838 points from utilisation 0.2: at most 0.69 %, at t ~ 2S)."""
    lr = np.log(det.RHO / (1 - det.RHO))
    mid = 1 / (1 + np.exp(-0.5 * (lr[:-1] + lr[1:])))
    zc = 0.5 * (det.Z[:-1] + det.Z[1:])
    for rho in mid[[25, 33, 41]]:
        a = det.atom(rho)
        q = a + (1 - a) * -np.expm1(-np.exp(zc[5::16]))
        q = q[q <= det.Q_MAX]
        got = det.quantile(q, np.full(q.size, rho))
        ref = _direct(ps.response_quantile, q, rho, Service.deterministic(1.0))
        np.testing.assert_allclose(got, ref, rtol=5e-3)


@pytest.mark.parametrize("rho, levels", [(0.0379, (0.995, 0.997825)), (0.2, (0.99, 0.999))])
def test_against_simulation_where_the_direct_computation_rings(rho, levels):
    """Light load, tail levels beyond the density's drop at 2S, where the direct computation's
    inversion rings (measured, 99 % CI of 1.1e6-2e7 s runs: direct +1.1 % / -3.4 % at rho 0.038,
    +1.0 % / +0.9 % at rho 0.2; table +0.2 % / +1.2 % and -0.3 % / -0.0 %): the table within the
    99 % batch-means CI widened by 1.5 %."""
    svc = Service.deterministic(1.0)
    res = simulate(rho, svc, discipline="ps", horizon=1.5e6 / rho, seed=7)
    for q, m in zip(levels, ps.response_quantile(list(levels), rho, svc)):
        ci = res.confidence_interval(q, level=0.99, warmup=100.0)
        assert abs(m - ci.estimate) <= ci.half_width + 0.015 * ci.estimate, (q, m, ci)


@pytest.mark.parametrize("rho", [0.02, 0.1, 0.15])
def test_beyond_the_resolved_levels_the_rows_line_against_simulation(rho):
    """Light load above the levels the direct computation resolves (it rings there: -7 % to +36 %
    against simulation at q 0.9999-0.99999), the table continues each row by a straight line in
    (z, log t), held non-decreasing in the load.  Measured against 4e6-request PS simulations:
    -10 / -15 % (q 0.9999 / 0.99999) at rho 0.02, -0.3 / -3 % at 0.05, -9 / -12 % at 0.1, +1 / -2 %
    at 0.15.  Here (1e6 requests) at q 0.9999, beyond each row's resolved levels, where the line's
    worst is -10 %: within the 99 % batch-means interval widened by 12 %."""
    svc = Service.deterministic(1.0)
    q = 0.9999
    a = det.atom(rho)
    assert np.log(-np.log1p(-(q - a) / (1 - a))) > det.direct_resolved(rho)   # the line, not the spline
    res = simulate(rho, svc, discipline="ps", horizon=1e6 / rho, seed=17)
    ci = res.confidence_interval(q, level=0.99, warmup=100.0)
    got = float(ps.response_quantile(q, rho, svc))
    assert abs(got - ci.estimate) <= ci.half_width + 0.12 * ci.estimate, (got, ci)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 0.999), st.floats(0.0, 0.999), st.floats(1e-4, 1 - 1e-6), st.floats(1e-4, 1 - 1e-6))
def test_monotone_in_the_level_and_the_load(r1, r2, q1, q2):
    (r1, r2), (q1, q2) = sorted([r1, r2]), sorted([q1, q2])
    t = det.quantile(np.array([q1, q2, q1, q2]), np.array([r1, r1, r2, r2]))
    if np.isfinite(t).all():
        assert t[0] <= t[1] and t[2] <= t[3] and t[0] <= t[2] and t[1] <= t[3]
    assert np.all(t[np.isfinite(t)] >= 1.0)


def test_sf_inverts_the_quantile_and_beyond_the_table_it_is_direct():
    svc = Service.deterministic(0.01)
    lam = np.array([[20.0], [60.0], [95.0]])
    q = np.array([0.7, 0.9, 0.99, 0.999])
    t = np.asarray(ps.response_quantile(q, lam, svc))
    np.testing.assert_allclose(ps.response_sf(t, lam, svc), np.broadcast_to(1 - q, t.shape), rtol=1e-8)
    # Utilisation above 0.9999, and below p10 above 0.999, is computed directly (several cores:
    # the next test).
    for level, lam_high in ((0.99, 99.995), (0.05, 99.95)):
        assert ps.response_quantile(level, lam_high, svc) == pytest.approx(
            _direct(ps.response_quantile, level, lam_high, svc), rel=1e-12)
    assert ps.response_quantile(0.9, 120.0, svc) == np.inf


def test_above_the_top_utilisation_the_tables_scaled_value_is_held():
    """From utilisation 0.999 to 0.9999, p10 and up, the top's ``(1 - rho) t_q`` is held (the
    heavy-traffic rule of capacity._quantile_table._log_t_one_core_heavy): within 0.9 % of the
    direct computation (70 ms a point there), and P(T > t) inverts it."""
    svc = Service.deterministic(1.0)
    q = np.array([0.1, 0.5, 0.9, 0.99, 0.999])
    for rho in (0.9995, 0.9999):
        got = np.asarray(ps.response_quantile(q, rho, svc))
        np.testing.assert_allclose(got, _direct(ps.response_quantile, q, rho, svc), rtol=9e-3)
        # Held: (1 - rho) t_q as at the top (to the atom's move, under 4e-4), where t_q grew 2-10x.
        np.testing.assert_allclose(got * (1 - rho), det.quantile(q, np.full(q.size, det.RHO[-1])) * (1 - det.RHO[-1]),
                                   atol=4e-4)
        np.testing.assert_allclose(ps.response_sf(got, rho, svc), 1 - q, rtol=1e-7)
    # At S itself the atom is exact (P(T > S) = 1 - (1 - rho) exp(-rho)), computed directly.
    assert ps.response_sf(1.0, 0.9995, svc) == pytest.approx(1 - 0.0005 * np.exp(-0.9995), rel=1e-6)


def test_several_cores_are_read_through_the_many_core_tables():
    """Deterministic CPU on 2 and 16 cores: the M/G/c-PS tables' gamma rows taken to cv 0 (and
    above their top utilisation the heavy-traffic reading), against the direct computation, with
    quantiles that rise in q and an sf that inverts them.  Fails on the old path (direct, ~2 s for
    these points) only in time; fails on a wrong extrapolation (the rows at scv 0.0088 alone are
    up to 4-5 % off here, at p99.9) in value."""
    svc = Service.deterministic(0.01)
    q = np.array([0.3, 0.5, 0.9, 0.99, 0.999])
    for servers, rho in ((2, 0.75), (16, 0.9)):
        lam = servers * rho / 0.01
        read = np.asarray(ps.response_quantile(q, lam, svc, servers))
        direct = np.asarray(_direct(ps.response_quantile, q, lam, svc, servers))
        np.testing.assert_allclose(read, direct, rtol=6e-3)
        np.testing.assert_allclose(ps.response_sf(read[read > 0.0101], lam, svc, servers),
                                   1 - q[read > 0.0101], rtol=1e-8)
    # A grid of 10^5 utilisations reads one cached row grid per core count (point by point it took 9 s).
    many = np.asarray(ps.response_quantile(0.99, np.linspace(0.01, 0.99, 100_000) * 4 / 0.01, svc, 4))
    assert np.all(np.isfinite(many)) and np.all(np.diff(many) >= 0)
    fine = np.linspace(0.01, 0.999999, 400)
    for servers, rho in ((2, 0.3), (16, 0.3), (8, 0.72), (32, 0.85), (4, 0.995)):
        t = np.asarray(ps.response_quantile(fine, servers * rho / 0.01, svc, servers))
        assert np.all(np.diff(t) >= 0), (servers, rho)
        assert np.all(t >= 0.01)


def test_deterministic_ps_and_rr_fits_recover_the_cpu_time():
    """From the model's own percentiles at two loads the table-backed fits find E[S]."""
    from capacity import rr
    from capacity.fit import from_percentiles

    svc = Service.deterministic(0.02)
    q = [0.5, 0.9, 0.99, 0.999]
    for discipline, func, kw in (("ps", ps.response_quantile, {}),
                                 ("rr", lambda *a: rr.response_quantile(*a, slices=4), {"slices": 4})):
        records = [{"percentiles": dict(zip(q, np.asarray(func(q, rate, svc)))), "arrival_rate": rate}
                   for rate in (15.0, 35.0)]
        fit = from_percentiles(records, discipline=discipline, family="deterministic", delay=None, **kw)
        assert fit.cpu_per_request_ == pytest.approx(0.02, rel=1e-4)
