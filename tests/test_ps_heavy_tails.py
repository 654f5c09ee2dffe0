"""Processor sharing with heavy-tailed service (issue 14: "silently wrong today").

The reproducer: ``ps.response_quantile(0.99, 0.5, Service.gamma(1.0, 10.0))`` gave 0.048 s where
exact simulation gives ~35 s and the service's own p99 is 15.9 s; scv 25 gave 0.0.  The cause was
the hyper-Erlang fit, which spent branches on sizes of 1e-20 s (rates up to 1e59 / mean) that
broke the sojourn transform and left the tail unfitted.

References: seeded exact PS simulation (:func:`capacity.sim.simulate`) with 99 % batch-means
confidence intervals; the service law itself (every request's response is at least its own CPU
time under PS, so each response quantile is at least the service quantile of the same level);
scipy's gamma for the fit's survival function, evaluated independently by ``scipy.linalg.expm``.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import expm

from capacity import Service, plan, ps
from capacity.phasetype import SIZE_FLOOR, _ph_mean, phase_type
from capacity.sim import simulate


@pytest.mark.parametrize("scv", [6.0, 10.0, 25.0])
def test_gamma_quantiles_against_simulation(scv):
    """p90 / p99 / p99.9 at utilisation 0.5 within the simulation's 99 % CI widened by 6 % of the
    estimate (measured, 2e6 s runs: scv 6 +1.7 / +0.3 / +2.3 %, scv 10 +1.4 / -1.0 / +0.2 %,
    scv 25 -5.0 / -3.8 / +0.3 %; the fit's tail error is up to 10 % in probability)."""
    svc = Service.gamma(1.0, scv)
    res = simulate(0.5, svc, discipline="ps", horizon=1e6, seed=int(scv))
    qs = [0.9, 0.99, 0.999]
    model = ps.response_quantile(qs, 0.5, svc)
    for q, m in zip(qs, model):
        ci = res.confidence_interval(q, level=0.99, warmup=100.0)
        assert abs(m - ci.estimate) <= ci.half_width + 0.06 * ci.estimate, (scv, q, m, ci)


def test_the_reproducer_is_above_the_service_p99_and_near_simulation():
    got = ps.response_quantile(0.99, 0.5, Service.gamma(1.0, 10.0))
    assert got > Service.gamma(1.0, 10.0).ppf(0.99)            # 15.9 s: PS never beats the CPU time
    assert 31.0 < got < 38.0                                   # simulation: 34.5 +/- 0.7 s (2e6 s run)


def test_the_planner_no_longer_answers_full_utilisation():
    """`capacity ceiling --cpu 25ms --scv 10 --family gamma --slo p99=500ms` answered 39.99 QPS
    (100 % utilisation); the simulated p99 at the new answer must be the SLO."""
    svc = Service.gamma(0.025, 10.0)
    ceiling = plan.qps_ceiling(svc, 1, {0.99: 0.5}, discipline="ps")
    assert 0.1 < ceiling.utilization < 0.3
    res = simulate(ceiling.qps, svc, discipline="ps", horizon=3e5, seed=3)
    ci = res.confidence_interval(0.99, level=0.99, warmup=10.0)
    assert abs(ci.estimate - 0.5) <= ci.half_width + 0.05 * 0.5, ci


@pytest.mark.parametrize("scv", [2.0, 10.0, 25.0, 50.0])
def test_gamma_fit_keeps_the_tail_and_no_absurd_rates(scv):
    """The fit's P(S > x) at the gamma's p90 ... p99.99 within 25 % of the true tail probability
    (measured: within 12 %; before, 6e-6 against 1e-3 at p99.9 for scv 25), mean exact, and no
    phase faster than 1 / (SIZE_FLOOR x mean) (before: 1e18 at scv 10, 1e59 at scv 50)."""
    svc = Service.gamma(2.0, scv)
    beta, tm = phase_type(svc, fit="distribution")
    assert _ph_mean(beta, tm) == pytest.approx(2.0, rel=1e-9)
    assert np.max(-np.diag(tm)) <= 1.0 / (SIZE_FLOOR * 2.0) * (1 + 1e-5)   # the mean restored after the cap
    one = np.ones(beta.size)
    for u in (0.9, 0.99, 0.999, 0.9999):
        sf = beta @ expm(tm * float(svc.ppf(u))) @ one
        assert sf / (1 - u) == pytest.approx(1.0, rel=0.25), (u, sf)


_SCV = [0.05, 0.3, 1.0, 2.0, 6.0, 10.0, 25.0, 50.0]   # a fixed set: each law's fit is cached


@settings(max_examples=40, deadline=None)
@given(family=st.sampled_from(["gamma", "lognormal"]), scv=st.sampled_from(_SCV),
       q=st.floats(1e-4, 1 - 1e-6), rho=st.floats(1e-6, 0.95))
def test_quantile_is_at_least_the_service_quantile(family, scv, q, rho):
    """T >= S path by path under PS, so the q-quantile of the response is at least the service's
    (1e-6 relative: the transform inversion's accuracy).  Lognormal service between utilisation
    0.001 and 0.999 is read from the shipped table, which stays smooth in load and keeps its
    documented light-load error: up to 4.5 % below the bound (p99, scv 3), so 5 % there."""
    if family == "lognormal" and scv > 25:
        scv = 25.0
    svc = getattr(Service, family)(1.0, scv)
    got = ps.response_quantile(q, rho, svc)
    tabled = family == "lognormal" and 0.39 <= scv <= 25 and 1e-3 <= rho <= 0.999 and 1e-3 <= q <= 1 - 1e-6
    assert got >= float(svc.ppf(q)) * (1 - (0.05 if tabled else 1e-6)), (got, float(svc.ppf(q)))


@settings(max_examples=30, deadline=None)
@given(family=st.sampled_from(["gamma", "lognormal", "exponential", "deterministic"]), scv=st.sampled_from(_SCV),
       q=st.floats(1e-3, 0.999), rho=st.floats(1e-6, 0.9))
def test_sf_is_at_least_the_service_sf(family, scv, q, rho):
    """P(T > t) >= P(S > t) at the service's own quantiles (the same bound, read as an sf)."""
    svc = {"exponential": lambda: Service.exponential(1.0), "deterministic": lambda: Service.deterministic(1.0)
           }.get(family, lambda: getattr(Service, family)(1.0, min(scv, 25.0)))()
    t = float(svc.ppf(q)) * 1.5 if family != "deterministic" else 1.0 + q
    assert ps.response_sf(t, rho, svc) >= float(svc.sf(t)) - 1e-9


@settings(max_examples=60, deadline=None)
@given(scv=st.floats(5.5, 53.0), rho=st.floats(1e-6, 0.99), r2=st.floats(1e-6, 0.99),
       q=st.floats(1e-4, 1 - 1e-6), q2=st.floats(1e-4, 1 - 1e-6))
def test_heavy_tailed_gamma_is_bounded_and_monotone(scv, rho, r2, q, q2):
    """Gamma of scv 5.5-53 from the heavy-tail piece (read relative to the law's own quantile, its
    body from the small-request limit): at least the CPU time's own quantile, and no shorter at a
    higher level or a higher load (1e-9 relative: the spline's rounding)."""
    assert _bound_or_order_broken(Service.gamma(1.0, scv), rho, r2, q, q2) == []


@settings(max_examples=30, deadline=None)
@given(scv=st.floats(11.7, 53.0), rho=st.floats(1e-6, 0.99), r2=st.floats(1e-6, 0.99),
       q=st.floats(1e-3, 1 - 1e-6), q2=st.floats(1e-3, 1 - 1e-6))
def test_heavy_tailed_lognormal_is_bounded_and_monotone(scv, rho, r2, q, q2):
    """As for gamma, over lognormal scv 11.7-53 (the main table blended into the heavy-tail piece
    over 17-25, the piece alone above), at the tables' levels (beyond them the direct computation
    takes 1-4 s a point here, and the level-edge hold is the gamma property's)."""
    assert _bound_or_order_broken(Service.lognormal(1.0, scv), rho, r2, q, q2) == []


def _bound_or_order_broken(svc: Service, rho: float, r2: float, q: float, q2: float) -> list:
    """What breaks among: at least the CPU time's own quantile, and no shorter at a higher level or
    a higher load (1e-9 relative: the spline's rounding); empty when nothing does."""
    (lo_r, hi_r), (lo_q, hi_q) = sorted((rho, r2)), sorted((q, q2))
    t = np.asarray(ps.response_quantile([lo_q, hi_q, lo_q, hi_q], [lo_r, lo_r, hi_r, hi_r], svc), dtype=float)
    own = np.asarray(svc.ppf([lo_q, hi_q]), dtype=float)
    broken = []
    if not (np.all(t[:2] >= own * (1 - 1e-9)) and np.all(t[2:] >= own * (1 - 1e-9))):
        broken.append(("below the CPU time", t, own))
    if not (t[1] >= t[0] * (1 - 1e-9) and t[3] >= t[2] * (1 - 1e-9)):
        broken.append(("falls in the level", t))
    if not (t[2] >= t[0] * (1 - 1e-9) and t[3] >= t[1] * (1 - 1e-9)):
        broken.append(("falls in the load", t))
    return broken
