"""Cached response curves, the curve-based ceiling, round robin in the planners, burst tolerance.

References: the forward models themselves (``capacity.fcfs/ps/rr``) called directly, the exact
solver ``plan.qps_ceiling(method="exact")``, the M/M/1 closed form (Kleinrock 1975, sec. 3.2:
T ~ Exp(mu - lambda)), and the fluid overload law W(u) = (rho - 1) u (Harchol-Balter 2013, ch. 22;
``capacity.overload``).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from capacity import Service, fcfs, overload, plan, ps, rr
from capacity.plan.curves import _unit_table
from capacity.plan.timeouts import _burst_seconds

# A short PS grid: one-core PS quantiles cost ~50 ms a point on a busy machine.
PS_GRID = np.array([0.05, 0.3, 0.6, 0.8, 0.9, 0.95])


def test_fcfs_curve_equals_direct_forward_calls():
    """The rescaled table equals fcfs.response_quantile at the grid's arrival rates (same model)."""
    svc = Service.gamma(0.010, 0.5)
    curve = plan.response_curve(svc, 2, "fcfs", quantiles=(0.5, 0.99, 0.999), delay=0.003)
    direct = np.asarray(fcfs.response_quantile(np.array([0.5, 0.99, 0.999])[:, None], curve.arrival_rate, svc, 2))
    np.testing.assert_allclose(curve.response, direct + 0.003, rtol=1e-8)
    assert curve.capacity_qps == pytest.approx(200.0)
    np.testing.assert_allclose(curve.arrival_rate, curve.utilization * 200.0, rtol=1e-15)
    frame = curve.to_frame()
    assert list(frame.columns) == ["utilization", "arrival_rate", "p50", "p99", "p99.9"]


def test_mm1_curve_matches_closed_form():
    """M/M/1 FCFS: quantile_q(T) = ln(1 / (1 - q)) / (mu - lambda) (Kleinrock 1975, sec. 3.2)."""
    curve = plan.response_curve(0.020, 1, "fcfs", quantiles=(0.9, 0.99))
    lam = curve.arrival_rate
    expected = np.log(1.0 / (1.0 - np.array([0.9, 0.99])))[:, None] / (50.0 - lam)
    np.testing.assert_allclose(curve.response, expected, rtol=1e-8)
    np.testing.assert_allclose(curve.zero_load, np.log([10.0, 100.0]) / 50.0, rtol=1e-8)


def test_ps_and_rr_curves_equal_direct_calls():
    svc = Service.exponential(0.010)
    curve = plan.response_curve(svc, 1, "ps", quantiles=(0.99,), utilization=PS_GRID)
    direct = np.asarray(ps.response_quantile(0.99, curve.arrival_rate, svc, 1))
    np.testing.assert_allclose(curve.response[0], direct, rtol=1e-7)
    # rr with a slice delay: the model adds (k - 1) d to the delay-free quantile.
    curve = plan.response_curve(svc, 1, "rr", quantiles=(0.99, 0.999), utilization=PS_GRID, slices=3,
                               slice_delay=0.002, delay=0.005)
    direct = np.asarray(rr.response_quantile(np.array([0.99, 0.999])[:, None], curve.arrival_rate, svc, 1,
                                             slices=3, slice_delay=0.002))
    np.testing.assert_allclose(curve.response, direct + 0.005, rtol=1e-7)


def test_rescaling_invariance():
    """Curve for E[S] = 10 ms is the curve for 1 s scaled by 0.01 (the cache's rescaling), and the
    forward model itself obeys the time-scaling invariance the cache relies on."""
    for svc_small, svc_big in ((Service.hyperexponential(0.010, 4.0), Service.hyperexponential(1.0, 4.0)),
                               (Service.deterministic(0.010), Service.deterministic(1.0))):
        small = plan.response_curve(svc_small, 3, "fcfs")
        big = plan.response_curve(svc_big, 3, "fcfs")
        np.testing.assert_allclose(small.response, 0.01 * big.response, rtol=1e-12)
        np.testing.assert_allclose(small.arrival_rate, 100.0 * big.arrival_rate, rtol=1e-12)
        # Independent of the cache: the model at 10 ms vs the model at 1 s.
        q = np.array([0.5, 0.99, 0.999])[:, None]
        direct_small = np.asarray(fcfs.response_quantile(q, small.arrival_rate, svc_small, 3))
        direct_big = np.asarray(fcfs.response_quantile(q, big.arrival_rate, svc_big, 3))
        np.testing.assert_allclose(direct_small, 0.01 * direct_big, rtol=1e-7)


def test_cache_hit_shares_the_table():
    _unit_table.cache_clear()
    plan.response_curve(Service.gamma(0.004, 0.25), 1, "fcfs")
    plan.response_curve(Service.gamma(0.5, 0.25), 1, "fcfs", delay=0.1)
    info = _unit_table.cache_info()
    assert (info.hits, info.misses) == (1, 1)
    assert not plan.response_curve(Service.gamma(0.5, 0.25), 1, "fcfs").unit.flags.writeable


# The measured accuracy of the curve-based ceiling (PCHIP on the 40-point default grid): worst
# 7.9e-5 relative over these cases on the development run; 2e-4 leaves margin for platform
# differences and still fails a wrong grid, wrong rescaling or wrong delay handling (each >= 1e-2).
CURVE_RTOL = 2e-4


@pytest.mark.parametrize("svc,servers,slo,delay", [
    (Service.exponential(0.010), 1, {0.99: 0.100}, 0.0),
    (Service.gamma(0.010, 0.5), 4, {0.999: 0.100}, 0.0),
    (Service.hyperexponential(0.010, 4.0), 2, {0.99: 0.250, 0.999: 0.6}, 0.02),
    (Service.deterministic(0.025), 4, {0.999: 0.4}, 0.04),
    (Service.lognormal(0.005, 2.0), 1, {0.99: 0.08}, 0.0),
])
def test_curve_ceiling_matches_exact_fcfs(svc, servers, slo, delay):
    exact = plan.qps_ceiling(svc, servers, slo, discipline="fcfs", delay=delay)
    fast = plan.qps_ceiling(svc, servers, slo, discipline="fcfs", delay=delay, method="curve")
    assert exact.qps > 0
    assert fast.qps == pytest.approx(exact.qps, rel=CURVE_RTOL)
    assert fast.binding == exact.binding
    curve = plan.response_curve(svc, servers, "fcfs", quantiles=tuple(sorted(slo)), delay=delay)
    assert plan.ceiling_from_curve(curve, slo).qps == pytest.approx(exact.qps, rel=CURVE_RTOL)


def test_curve_ceiling_matches_exact_ps_and_infeasible():
    svc = Service.exponential(0.010)
    curve = plan.response_curve(svc, 1, "ps", quantiles=(0.99,))
    t = np.array([0.03, 0.1, 1.0])
    exact = np.array([plan.qps_ceiling(svc, 1, {0.99: x}, discipline="ps").qps for x in t])
    np.testing.assert_allclose(plan.ceiling_from_curve(curve, {0.99: t}).qps, exact, rtol=CURVE_RTOL)
    # Below the bare service time's p99 (ln(100) * 10 ms = 46 ms) at zero load: no load meets it.
    assert plan.ceiling_from_curve(curve, {0.99: 0.04}).qps == 0.0
    res = plan.qps_ceiling(svc, 1, {0.99: 0.04}, discipline="ps", method="curve")
    assert res.qps == 0.0 and not res.feasible
    # The delay alone uses up the threshold.
    assert plan.qps_ceiling(svc, 1, {0.99: 0.1}, discipline="ps", delay=0.2, method="curve").qps == 0.0


def test_timeout_safe_rate_curve_path():
    svc = Service.exponential(0.010)
    exact = plan.timeout_safe_rate(svc, 1, 0.5, 1e-3, "fcfs", burst_qps=150.0)
    fast = plan.timeout_safe_rate(svc, 1, 0.5, 1e-3, "fcfs", burst_qps=150.0, method="curve")
    # M/M/1: 100 - ln(1000) / 0.5 = 86.18 QPS.
    assert exact.qps == pytest.approx(100.0 - math.log(1000.0) / 0.5, rel=1e-7)
    assert fast.qps == pytest.approx(exact.qps, rel=CURVE_RTOL)
    assert fast.burst_seconds == exact.burst_seconds


def test_rr_one_slice_is_fcfs_exactly():
    svc = Service.gamma(0.010, 0.5)
    slo = {0.99: 0.08, 0.999: 0.12}
    a = plan.qps_ceiling(svc, 2, slo, discipline="rr", slices=1)
    b = plan.qps_ceiling(svc, 2, slo, discipline="fcfs")
    assert a.qps == b.qps and a.rates == b.rates
    ca = plan.response_curve(svc, 2, "rr", slices=1)
    cb = plan.response_curve(svc, 2, "fcfs")
    np.testing.assert_array_equal(ca.response, cb.response)


def test_rr_ceiling_solves_the_rr_quantile_and_sits_below_fcfs():
    """The rr ceiling is where rr.response_quantile reaches the threshold; with exponential service
    rr's p99 lies above FCFS's (module docstring of capacity.rr: the large-k limit is heavier than
    both FCFS and PS), so more slices lower the ceiling, starting from FCFS at k = 1."""
    svc = Service.exponential(0.010)
    t = 0.100
    ceilings = []
    for k in (1, 2, 4, 16):
        c = plan.qps_ceiling(svc, 1, {0.99: t}, discipline="rr", slices=k)
        ceilings.append(c.qps)
        assert float(rr.response_quantile(0.99, c.qps, svc, 1, slices=k)) == pytest.approx(t, rel=1e-6)
    assert ceilings[0] == pytest.approx(100.0 - math.log(100.0) / t, rel=1e-9)   # M/M/1 closed form
    assert all(a > b for a, b in zip(ceilings, ceilings[1:]))
    # The slice delay is a constant (k - 1) d: it only shrinks the threshold.
    with_d = plan.qps_ceiling(svc, 1, {0.99: t}, discipline="rr", slices=4, slice_delay=0.005).qps
    shrunk = plan.qps_ceiling(svc, 1, {0.99: t - 3 * 0.005}, discipline="rr", slices=4).qps
    assert with_d == pytest.approx(shrunk, rel=1e-12)
    # The curve path for rr.
    fast = plan.qps_ceiling(svc, 1, {0.99: t}, discipline="rr", slices=4, method="curve").qps
    assert fast == pytest.approx(ceilings[2], rel=CURVE_RTOL)




@pytest.mark.parametrize("idle_constants", ["shipped", "stand-in"], indirect=True)
def test_rr_idle_curve_equals_direct_calls(idle_constants):
    """admission="idle": the curve (idle formula on the cached FCFS and zero-delay rr tables, at
    slice_delay / E[S]) equals rr.response_quantile with the slice delay, for two E[S] (two ratios);
    only the constant delay is an offset, and the cached fifo tables are left as they were."""
    qs = (0.99, 0.999)
    q = np.array(qs)
    kw = dict(slices=3, slice_delay=0.002, admission="idle")
    svc = Service.exponential(0.004)
    fifo_before = plan.response_curve(svc, 1, "rr", quantiles=qs, utilization=PS_GRID, slices=3).response.copy()
    for mean in (0.004, 0.020):
        svc = Service.exponential(mean)
        curve = plan.response_curve(svc, 1, "rr", quantiles=qs, utilization=PS_GRID, delay=0.005, **kw)
        direct = np.asarray(rr.response_quantile(q[:, None], curve.arrival_rate, svc, 1, **kw))
        np.testing.assert_allclose(curve.response, direct + 0.005, rtol=1e-7)
        zero = np.asarray(rr.response_quantile(q, 0.0, svc, 1, **kw))
        np.testing.assert_allclose(curve.zero_load, zero + 0.005, rtol=1e-7)
        assert curve.offset == 0.005 and curve.admission == "idle" and curve.slice_delay == 0.002
        assert not curve.unit.flags.writeable
    svc = Service.exponential(0.004)
    again = plan.response_curve(svc, 1, "rr", quantiles=qs, utilization=PS_GRID, slices=3)
    np.testing.assert_array_equal(again.response, fifo_before)
    assert again.admission == "fifo" and again.offset == 0.0
    # One slice: both rules are FCFS.
    one = plan.response_curve(svc, 1, "rr", quantiles=qs, utilization=PS_GRID, slices=1, slice_delay=0.002,
                             admission="idle")
    fcfs_curve = plan.response_curve(svc, 1, "fcfs", quantiles=qs, utilization=PS_GRID)
    np.testing.assert_array_equal(one.response, fcfs_curve.response)


@pytest.mark.parametrize("idle_constants", ["shipped", "stand-in"], indirect=True)
def test_rr_idle_curve_ceiling_matches_exact(idle_constants):
    svc = Service.exponential(0.010)
    kw = dict(slices=4, slice_delay=0.002, admission="idle")
    exact = plan.qps_ceiling(svc, 1, {0.99: 0.1}, discipline="rr", delay=0.003, **kw)
    fast = plan.qps_ceiling(svc, 1, {0.99: 0.1}, discipline="rr", delay=0.003, method="curve", **kw)
    assert exact.qps > 0
    assert fast.qps == pytest.approx(exact.qps, rel=CURVE_RTOL)
    curve = plan.response_curve(svc, 1, "rr", quantiles=(0.99,), delay=0.003, **kw)
    assert plan.ceiling_from_curve(curve, {0.99: 0.1}).qps == pytest.approx(exact.qps, rel=CURVE_RTOL)


def test_rr_idle_curve_uncached_service(idle_constants):
    """A service without a shape key (from_scipy) is computed directly, slice delay and admission
    passed to rr."""
    from scipy import stats

    svc = Service.from_scipy(stats.expon(scale=0.01))
    kw = dict(slices=3, slice_delay=0.002, admission="idle")
    curve = plan.response_curve(svc, 1, "rr", quantiles=(0.99,), utilization=[0.3, 0.6], **kw)
    direct = np.asarray(rr.response_quantile(0.99, curve.arrival_rate, svc, 1, **kw))
    np.testing.assert_allclose(curve.response[0], direct, rtol=1e-9)
    assert curve.offset == 0.0


def test_burst_tolerance_public_equals_private_and_fluid_law():
    svc = Service.exponential(0.025)
    for disc in ("fcfs", "ps"):
        pub = plan.burst_tolerance(svc, 1, 1.0, 60.0, disc, delay=0.1).burst_seconds
        assert pub == _burst_seconds(60.0, svc, np.asarray(1), 0.9, disc)
        assert pub == plan.timeout_safe_rate(svc, 1, 1.0, discipline=disc, delay=0.1, burst_qps=60.0).burst_seconds
    # FCFS fluid law: an arrival u s into the burst waits (rho - 1) u, rho = 60 * 0.025 = 1.5.
    assert plan.burst_tolerance(svc, 1, 1.0, 60.0, "fcfs").burst_seconds == pytest.approx((1.0 - 0.025) / 0.5,
                                                                                         rel=1e-12)
    # At or below capacity (40 QPS) the fluid backlog never grows.
    assert plan.burst_tolerance(svc, 1, 1.0, 30.0, "ps").burst_seconds == math.inf
    # Vectorised over the burst rate.
    out = plan.burst_tolerance(svc, 1, 1.0, np.array([60.0, 80.0]), "fcfs").burst_seconds
    np.testing.assert_allclose(out, [0.975 / 0.5, 0.975 / 1.0], rtol=1e-12)
    with pytest.raises(ValueError, match="burst_qps"):
        plan.burst_tolerance(svc, 1, 1.0, -5.0)
    with pytest.raises(ValueError, match="discipline"):
        plan.burst_tolerance(svc, 1, 1.0, 50.0, "lifo")


def test_retry_curve_excess_column():
    """excess = lambda * amplification - load, and it changes sign exactly at the fixed points."""
    lam = 5.0
    r = overload.retry_fixed_points(lam, 0.1, 1.0, 2, grid=100)
    curve = r.curve
    np.testing.assert_allclose(curve["excess"], lam * curve["amplification"] - curve["load"], rtol=1e-12)
    x, g = curve["load"].to_numpy(), curve["excess"].to_numpy()
    flips = np.flatnonzero(np.sign(g[:-1]) * np.sign(g[1:]) < 0)
    assert len(flips) == len(r.fixed_points) == 3
    for i, f in zip(flips, r.fixed_points):
        assert x[i] <= f.load <= x[i + 1]
        assert f.stable == (g[i] > 0)


def test_bad_input():
    with pytest.raises(ValueError, match="discipline"):
        plan.response_curve(0.01, 1, "lifo")
    with pytest.raises(ValueError, match="slices"):
        plan.response_curve(0.01, 1, "fcfs", slices=2)
    with pytest.raises(ValueError, match="utilization"):
        plan.response_curve(0.01, 1, "fcfs", utilization=[0.5, 1.0])
    with pytest.raises(ValueError, match="scalar"):
        plan.response_curve(Service.exponential([0.01, 0.02]), 1, "fcfs")
    with pytest.raises(ValueError, match="method"):
        plan.qps_ceiling(0.01, 1, {0.99: 0.1}, method="fast")
    with pytest.raises(ValueError, match="slices"):
        plan.qps_ceiling(0.01, 1, {0.99: 0.1}, discipline="ps", slices=3)
    with pytest.raises(ValueError, match="admission.*'idle'"):
        plan.response_curve(0.01, 1, "ps", admission="idle")
    with pytest.raises(ValueError, match="admission.*'lifo'"):
        plan.response_curve(0.01, 1, "rr", slices=2, admission="lifo")
    with pytest.raises(ValueError, match="admission.*'idle'"):
        plan.qps_ceiling(0.01, 1, {0.99: 0.1}, discipline="fcfs", admission="idle", method="curve")
    curve = plan.response_curve(0.01, 1, "fcfs", quantiles=(0.99,))
    with pytest.raises(ValueError, match="not on this curve"):
        plan.ceiling_from_curve(curve, {0.999: 0.1})
