"""Warm-up after a deploy (seed 001, sections 3.7-3.8): warmup_transient, ramp_needed,
warmup_simulation, rolling_deploy.

References: M/M/1 FCFS in closed form (the response is exponential with rate ``mu - lambda``, so
the SLO ceiling is ``1 / (E[S] m) - ln(100) / t``), worked by hand for the ramp of both warm-up
laws and for the fluid backlog of a cold start; the time law's clock against numerical
quadrature; the exact simulation (``warmup_simulation``, itself checked against the steady state
with confidence intervals) for the ramp and the no-ramp transient; the rolling deploy's
``(N - k) / N`` by hand; hypothesis properties.  The article's section 3.8 has no numbers, only
its figure 22 (under a warm-up ramp the request rate rises while the response time falls): its
shape is checked.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import quad
from scipy.optimize import brentq

from _cli import run_cli
from capacity import plan
from capacity.plan._warmup_model import _law

LN100 = math.log(100.0)
FCFS = dict(discipline="fcfs", slo={0.99: 0.25})


def _mm1_ceiling(mean: float, m: float, t: float) -> float:
    return 1.0 / (mean * m) - LN100 / t


# ---------------------------------------------------------------------------------------------
# Hand-worked cases


def test_no_warmup_is_the_steady_state():
    r = plan.warmup_transient(60.0, 0.010, 1.0, warmup_time=5.0, horizon=120.0, **FCFS)
    steady = LN100 / (100.0 - 60.0)
    # Late in the transient (the queue has had time to build) the p99 is the M/M/1 one.
    assert r.table["p99_s"].iloc[-10:].to_numpy() == pytest.approx(steady, rel=1e-6)
    assert r.verdict == "meets_slo" and r.peak_delay == 0 and r.cold_utilization == pytest.approx(0.6)
    need = plan.ramp_needed(60.0, 0.010, 1.0, warmup_requests=100.0, **FCFS)
    assert need.ramp == 0 and need.cold_ceiling_qps == pytest.approx(need.ceiling_qps, rel=1e-12)
    assert need.ceiling_qps == pytest.approx(_mm1_ceiling(0.010, 1.0, 0.25), rel=2e-4)


def test_ramp_time_law_by_hand():
    # lambda t / R <= C(m(t)) for every t: R = max over t of lambda t / C(m(t)) where C < lambda.  When the
    # ratio rises all the way, that is where the ceiling reaches the share, m(R) = 1 / (E[S] (lambda +
    # ln 100 / t)): R = tau ln((m0 - 1) / (m(R) - 1)).
    for m0, tau, lam, at_end in ((3.0, 20.0, 60.0, True), (2.0, 5.0, 70.0, True), (5.0, 60.0, 40.0, False)):
        r = plan.ramp_needed(lam, 0.010, m0, warmup_time=tau, **FCFS)
        m_lam = 1.0 / (0.010 * (lam + LN100 / 0.25))
        t_lam = tau * math.log((m0 - 1.0) / (m_lam - 1.0))
        t = np.linspace(0.0, t_lam, 400_001)[1:]
        by_hand = np.max(lam * t / _mm1_ceiling(0.010, 1 + (m0 - 1) * np.exp(-t / tau), 0.25))
        assert r.ramp == pytest.approx(by_hand, rel=1e-4)
        assert (by_hand == pytest.approx(t_lam, rel=1e-6)) == at_end
        assert r.cold_ceiling_qps == pytest.approx(max(_mm1_ceiling(0.010, m0, 0.25), 0.0), rel=2e-4, abs=1e-9)
        assert r.with_ramp.verdict == "meets_slo"


def test_ramp_requests_law_by_hand():
    # With R the ramp reaches the rate r after r^2 R / (2 lambda) requests; it needs L ln((m0-1)/(m-1))
    # of them at the multiplier m whose ceiling is r: R = max over m of 2 lambda x(m) / C(m)^2.
    lam, m0, big_l = 60.0, 3.0, 2000.0
    r = plan.ramp_needed(lam, 0.010, m0, warmup_requests=big_l, **FCFS)
    m_lam = 1.0 / (0.010 * (lam + LN100 / 0.25))
    m = np.linspace(m_lam, m0, 200_001)[:-1]
    c = 1.0 / (0.010 * m) - LN100 / 0.25
    ok = c > 0
    by_hand = np.max(2 * lam * big_l * np.log((m0 - 1) / (m[ok] - 1)) / c[ok] ** 2)
    assert r.ramp == pytest.approx(by_hand, rel=1e-3)
    assert r.prewarm_requests == 0 and r.prewarm_time is None


def test_cold_service_alone_breaks_the_slo_so_prewarm_first():
    # 10 ms exponential: p99 of the bare service is 46 ms, so at m0 = 6 the first requests alone
    # take 276 ms > 250 ms.  The fit multiplier is 0.25 / 0.0461 = 5.43.
    r = plan.ramp_needed(60.0, 0.010, 6.0, warmup_time=20.0, **FCFS)
    assert r.cold_ceiling_qps == 0
    assert r.start_multiplier <= 0.25 / (0.010 * LN100) + 1e-9
    assert r.prewarm_time == pytest.approx(20.0 * math.log(5.0 / (r.start_multiplier - 1.0)), rel=1e-9)
    assert r.with_ramp.verdict == "meets_slo" and r.no_ramp.verdict == "backlog"
    assert "pre-warm" in r.explanation


def test_time_law_clock_against_quadrature():
    law = _law(4.0, None, 7.0)
    for t in (0.3, 5.0, 40.0):
        g = quad(lambda s: 1.0 / float(law.multiplier(s)), 0.0, t, epsabs=1e-12)[0]
        assert float(law.clock(t)) == pytest.approx(g, rel=1e-10)
        assert float(law.clock_inverse(law.clock(t))) == pytest.approx(t, rel=1e-12)


def test_cold_start_fluid_backlog_by_hand():
    # Time law, no ramp: the process does warm work at speed 1 / m(t), so a request arriving at t
    # starts when the clock G has done all the work arrived before it: at G^-1(lambda E[S] t).  Its
    # wait G^-1(lambda E[S] t) - t is largest for the request that starts when m = 1 / (lambda E[S])
    # (the derivative lambda E[S] m(start) - 1 vanishes), at t* = tau ln((m0 - 1) / (m* - 1)); it
    # arrived at G(t*) / (lambda E[S]).
    lam, mean, m0, tau = 60.0, 0.010, 3.0, 20.0
    r = plan.warmup_transient(lam, mean, m0, warmup_time=tau, **FCFS)
    t_star = tau * math.log((m0 - 1) / (1 / (lam * mean) - 1))

    def clock(t):
        return quad(lambda s: 1.0 / (1 + (m0 - 1) * math.exp(-s / tau)), 0.0, t, epsabs=1e-12)[0]

    assert r.peak_delay == pytest.approx(t_star - clock(t_star) / (lam * mean), rel=1e-3)
    # The backlog drains when the clock has caught up with all the work: G(t) = lambda E[S] t.
    drained = brentq(lambda t: clock(t) - lam * mean * t, t_star * 1.01, 20 * t_star, xtol=1e-12)
    assert r.recovery_time == pytest.approx(drained, rel=5e-3)
    assert r.verdict == "backlog"


def test_figure_22_shape_rate_rises_response_falls():
    # Seed 001, figure 22: with warm-up on, the request rate rises and the response time falls.
    r = plan.warmup_transient(50.0, 0.010, 4.0, warmup_time=20.0, ramp=150.0, **FCFS)
    head = r.table[r.table.index <= 100]
    assert np.all(np.diff(head["admitted_rate"].to_numpy()) > 0)
    assert head["p99_s"].iloc[-1] < 0.6 * head["p99_s"].iloc[0]
    assert r.verdict == "meets_slo"


# ---------------------------------------------------------------------------------------------
# Against the simulation (confidence intervals)


def test_simulation_steady_state_interval_covers_the_formula():
    run = plan.warmup_simulation(60.0, 0.010, 1.0, warmup_time=20.0, horizon=200.0, bucket=50.0,
                                 replications=60, seed=2, **FCFS)
    steady = LN100 / (100.0 - 60.0)
    late = run.table.iloc[1:]
    assert np.all((late["p99_low"] < steady) & (steady < late["p99_high"]))
    assert np.all(late["p99_high"] - late["p99_low"] < 0.2 * steady)   # the interval can fail


@pytest.mark.parametrize("discipline", ["fcfs", "ps"])
def test_simulation_on_two_cores_uses_the_simulator_engines(discipline):
    # M/M/2 at 75 %: the event engines of capacity.sim, one run at a time.
    from capacity import Service, fcfs, ps

    run = plan.warmup_simulation(150.0, 0.010, 1.0, warmup_time=5.0, servers=2, discipline=discipline,
                                 slo={0.99: 0.25}, horizon=100.0, bucket=50.0, replications=20, seed=4)
    exact = (fcfs if discipline == "fcfs" else ps).response_quantile(0.99, 150.0, Service.exponential(0.010), 2)
    late = run.table.iloc[1]
    assert late["p99_low"] < exact < late["p99_high"] and late["p99_high"] - late["p99_low"] < 0.25 * exact


CASES = [("fcfs", dict(warmup_time=20.0)), ("fcfs", dict(warmup_requests=2000.0)),
         ("ps", dict(warmup_time=20.0)), ("ps", dict(warmup_requests=2000.0))]


@pytest.mark.parametrize("discipline, law", CASES, ids=[f"{d}-{next(iter(k))}" for d, k in CASES])
def test_simulated_ramp_keeps_the_p99_near_its_target(discipline, law):
    # At the ramp ramp_needed gives, no window of the simulation has significantly more than 1.5 % of
    # its requests over the p99 target (measured: 0.8-1.4 %); a ramp 0.6 x as long puts clearly more
    # than 1 % over (3-38 %) for all but the slowest-warming case, where the excess is within noise.
    r = plan.ramp_needed(60.0, 0.010, 3.0, discipline=discipline, slo={0.99: 0.25}, **law)
    reps = 16 if discipline == "ps" else 100
    for factor in (1.0, 0.6):
        run = plan.warmup_simulation(60.0, 0.010, 3.0, ramp=factor * r.ramp, discipline=discipline,
                                     slo={0.99: 0.25}, timeout=0.25, horizon=1.3 * r.ramp,
                                     bucket=0.1 * r.ramp, replications=reps, seed=3, **law)
        low = run.table["timeout_fraction_low"].max()
        if factor == 1.0:
            assert low <= 0.015
        elif not (discipline == "ps" and "warmup_requests" in law):
            assert low > 0.01


def test_simulated_cold_start_matches_the_fluid_model():
    args = dict(arrival_rate=60.0, service=0.010, cold_multiplier=3.0, discipline="fcfs",
                slo={0.5: 0.25, 0.99: 0.5}, timeout=2.0)
    for law in (dict(warmup_time=20.0), dict(warmup_requests=2000.0)):
        model = plan.warmup_transient(**args, **law, bucket=5.0)
        run = plan.warmup_simulation(**args, **law, horizon=model.horizon, bucket=5.0, replications=40, seed=5)
        # Requests timed out per run: the fluid's count (delay >= timeout) within 6 % (measured 1-3 %).
        per_run = run.timeout_fraction[0] * run.requests / run.replications
        assert model.timed_out == pytest.approx(per_run, rel=0.06)
        # While the backlog grows (t in 5-20 s): the p99 within 12 % (measured 0.3-9 %), the median within
        # 18 % (measured 4-14 %, the model above).
        sim = run.table.loc[5.0:20.0]
        for col, tol in (("p50_s", 0.18), ("p99_s", 0.12)):
            mod = np.interp(sim.index + 2.5, model.table.index, model.table[col])
            assert mod == pytest.approx(sim[col].to_numpy(), rel=tol)


@pytest.mark.parametrize("law", [dict(warmup_time=20.0), dict(warmup_requests=2000.0)], ids=["time", "requests"])
def test_seconds_over_the_slo_against_the_simulator(law):
    """With no ramp the SLO breaks while the cold process catches up: how long, by the model and by
    40 simulated runs read in 1 s buckets.  Measured 45 s against 51 s (time law) and 93 s against
    102 s (requests law): the model 9-13 % short (its fluid backlog drains faster than the random
    queue after it); asserted between 80 % of the simulation and one bucket above it."""
    args = dict(arrival_rate=60.0, service=0.010, cold_multiplier=3.0, discipline="fcfs",
                slo={0.5: 0.25, 0.99: 0.5}, timeout=2.0)
    model = plan.warmup_transient(**args, **law, bucket=1.0)
    run = plan.warmup_simulation(**args, **law, horizon=model.horizon, bucket=1.0, replications=40, seed=5)
    assert 0.8 * run.seconds_over_slo <= model.seconds_over_slo <= run.seconds_over_slo + 1.0


def test_ps_fluid_overload_by_hand():
    # No warm-up, 150 requests/s of 10 ms exponential on one core: 150 % utilisation.  Fluid PS with
    # exponential sizes: dN/dt = lambda - mu min(N, c), so N = c + k (t - t_c) once N > c (k = lambda - c mu,
    # t_c = -ln(1 - c mu / lambda) / mu).  Every request present gets c / N, so a size x arriving at a
    # leaves when (c / k) ln(N(t) / N(a)) = x: its response is (N(a) / k)(exp(k x / c) - 1), the
    # q-quantile with x = E[S] ln(1 / (1 - q)).
    from capacity import Service
    from capacity.plan._warmup_model import _Ceilings, _ps_fluid

    lam, mean, mu = 150.0, 0.010, 100.0
    k, t_c = lam - mu, -math.log(1.0 - mu / lam) / mu
    r = plan.warmup_transient(lam, mean, 1.0, warmup_time=1.0, discipline="ps", slo={0.5: 1.0, 0.99: 2.0},
                              horizon=120.0, bucket=1.0)
    assert r.verdict == "overloaded"
    a = r.table.index.to_numpy()
    sel = (a >= 2.0) & (a <= 8.0)
    for q in (0.5, 0.99):
        by_hand = (1.0 + k * (a[sel] - t_c)) / k * np.expm1(k * mean * math.log(1.0 / (1.0 - q)))
        assert r.table[f"p{q * 100:g}_s"].to_numpy()[sel] == pytest.approx(by_hand, rel=5e-3)
    t = np.linspace(0.0, 60.0, 4001)
    fluid = _ps_fluid(_law(1.0, None, 1.0), _Ceilings(Service.exponential(mean), 1, {0.99: 1.0}, "ps"), t, lam * t)
    k_grid = np.searchsorted(t, [1.0, 5.0, 30.0, 60.0])
    # Within lambda du / 10 (0.2 requests) of 51-3000 in the crowd.
    assert fluid.crowd(k_grid) == pytest.approx(1.0 + k * (t[k_grid] - t_c), abs=0.1 * lam * t[1])


PS_CASES = [(60.0, "exponential", dict(warmup_time=20.0), 1), (60.0, "gamma", dict(warmup_requests=2000.0), 1),
            (240.0, "exponential", dict(warmup_time=20.0), 4)]


@pytest.mark.parametrize("rate, family, law, servers", PS_CASES, ids=["exp-time-1", "gamma-requests-1", "exp-time-4"])
def test_simulated_ps_overload_matches_the_fluid_model(rate, family, law, servers):
    # Processor sharing with no ramp, 180 % utilisation cold: while the fluid backlog is 2 s or more the
    # crowd shares the cores and the percentiles spread; the fluid PS model's p50 and p99 (bucket middle)
    # within 0.75-1.3 x the simulated ones (measured: p50 0.98-1.25, p99 0.79-1.05; the former model, the
    # FCFS backlog plus a stationary part, had p99 0.1-0.45 x and p50 1.3-1.8 x).
    from capacity import Service

    svc = Service.exponential(0.010) if family == "exponential" else Service.gamma(0.010, 2.0)
    args = dict(discipline="ps", slo={0.5: 0.25, 0.99: 0.5}, servers=servers, **law)
    model = plan.warmup_transient(rate, svc, 3.0, timeout=2.0, **args)
    span = min(model.horizon, 100.0)
    run = plan.warmup_simulation(rate, svc, 3.0, timeout=2.0, horizon=span, bucket=5.0,
                                 replications=30 if servers == 1 else 10, seed=11, **args)
    sim = run.table
    deep = (sim.index >= 5.0) & (np.interp(sim.index + 5.0, model.table.index, model.table["delay"]) >= 2.0)
    assert deep.sum() >= 5
    for col in ("p50_s", "p99_s"):
        ratio = np.interp(sim.index[deep] + 2.5, model.table.index, model.table[col]) / sim[col][deep]
        assert np.all((ratio > 0.75) & (ratio < 1.3)), (col, ratio)
    # The intervals are narrow enough for the comparison to fail.
    assert np.all(sim["p99_high"][deep] - sim["p99_low"][deep] < 0.3 * sim["p99_s"][deep])
    # Requests over the 2 s timeout: the fluid's share of sizes the crowd does not finish in time, within
    # 15 % of the simulation's (measured 3-7 % below; the FCFS backlog count was 28-58 % above).
    if servers == 1:
        per_run = run.timeout_fraction[0] * run.requests / run.replications * model.horizon / span
        assert model.timed_out == pytest.approx(per_run, rel=0.15) or span < model.horizon


# ---------------------------------------------------------------------------------------------
# Rolling deploys


def test_rolling_deploy_warm_by_hand():
    c1 = _mm1_ceiling(0.010, 1.0, 0.25)
    for n, k in ((10, 1), (12, 3)):
        r = plan.rolling_deploy(500.0, 0.010, n, 1.0, warmup_time=1.0, batch_size=k, restart_time=20.0, **FCFS)
        assert r.min_capacity_qps == pytest.approx((n - k) * c1, rel=2e-4)
        assert r.capacity_loss == pytest.approx(k / n, rel=1e-6)
        assert r.processes_needed == k + math.ceil(500.0 / c1)
        assert r.min_processes == math.ceil(500.0 / c1)
        assert r.deploy_time == pytest.approx(math.ceil(n / k) * 20.0)
        assert r.binding == "warm" and r.slo_ok == ((n - k) * c1 >= 500.0)


def test_rolling_deploy_with_surge_by_hand():
    # New processes boot beside the old ones, which leave when the new join: warm, nothing is
    # lost (N C(1)); with a cold process back at full share, the fleet holds N C(m0) as without
    # surge, but the boot no longer costs the k processes.
    c1 = _mm1_ceiling(0.010, 1.0, 0.25)
    for n, k in ((10, 1), (12, 3)):
        r = plan.rolling_deploy(500.0, 0.010, n, 1.0, warmup_time=1.0, batch_size=k, restart_time=20.0,
                                surge=True, **FCFS)
        assert r.min_capacity_qps == pytest.approx(n * c1, rel=2e-4) and r.capacity_loss == pytest.approx(0, abs=1e-6)
        assert r.processes_needed == math.ceil(500.0 / c1) == r.min_processes
        assert r.surge and "beside the old" in r.explanation
    cold = plan.rolling_deploy(500.0, 0.010, 10, 3.0, warmup_time=30.0, restart_time=30.0, min_ready=300.0,
                               surge=True, **FCFS)
    assert cold.min_capacity_qps == pytest.approx(10 * _mm1_ceiling(0.010, 3.0, 0.25), rel=2e-4)
    # With a ramp the capacity dips to (N - k + k a) min(C(m) / a, C(1)) while the new ones ramp: by
    # hand at the moment they join (a = 0, the old ones gone, the batch before warm): (N - k) C(1).
    ramped = plan.rolling_deploy(500.0, 0.010, 10, 2.0, warmup_time=1.0, batch_size=2, restart_time=20.0,
                                 ramp=20.0, surge=True, **FCFS)
    at_join = ramped.table["capacity_qps"].loc[20.0]
    assert at_join == pytest.approx(8 * c1, rel=2e-4)


def test_a_cold_multiplier_a_hair_above_one_is_no_warm_up():
    """m0 = 1 + 2.2e-16 (found by hypothesis) took log(0) in the deploy plan's grid of multipliers
    1 + f (m0 - 1), which rounds to 1 there; within 1e-9 of 1 the plan is the one without warm-up."""
    args = dict(warmup_time=20.0, batch_size=1, restart_time=5.0, **FCFS)
    hair = plan.rolling_deploy(400.0, 0.010, 9, 1.0000000000000002, **args)
    none = plan.rolling_deploy(400.0, 0.010, 9, 1.0, **args)
    assert hair.min_capacity_qps == none.min_capacity_qps
    assert hair.processes_needed == none.processes_needed
    assert plan.rolling_deploy(400.0, 0.010, 9, 1.001, **args).min_capacity_qps < none.min_capacity_qps


@settings(max_examples=15, deadline=None)
@given(m0=st.floats(1.0, 3.0), ramp=st.floats(0.0, 60.0), k=st.integers(1, 3), down=st.floats(5.0, 60.0))
def test_surge_never_loses_more_than_taking_processes_down(m0, ramp, k, down):
    args = dict(warmup_time=20.0, batch_size=k, restart_time=down, ramp=ramp, **FCFS)
    out = plan.rolling_deploy(400.0, 0.010, 9, m0, **args)
    surge = plan.rolling_deploy(400.0, 0.010, 9, m0, surge=True, **args)
    assert surge.min_capacity_qps >= out.min_capacity_qps * (1 - 1e-9)
    assert surge.processes_needed <= out.processes_needed


def test_rolling_deploy_without_ramp_is_bound_by_the_cold_process():
    # A process back with its full weight and the cold ceiling: the fleet holds N C(m0).
    r = plan.rolling_deploy(500.0, 0.010, 10, 3.0, warmup_time=30.0, restart_time=30.0, min_ready=300.0, **FCFS)
    assert r.min_capacity_qps == pytest.approx(10 * _mm1_ceiling(0.010, 3.0, 0.25), rel=2e-4)
    assert r.binding == "cold" and not r.slo_ok
    ramped = plan.rolling_deploy(500.0, 0.010, 10, 3.0, warmup_time=30.0, restart_time=30.0, ramp=60.0,
                                 min_ready=300.0, **FCFS)
    assert ramped.min_capacity_qps > r.min_capacity_qps
    assert ramped.processes_needed < r.processes_needed


def test_rolling_deploy_needs_prewarming_when_the_cold_service_breaks_the_slo():
    r = plan.rolling_deploy(500.0, 0.010, 10, 6.0, warmup_time=30.0, ramp=60.0, **FCFS)
    assert r.processes_needed is None and "pre-warmed" in r.explanation


# ---------------------------------------------------------------------------------------------
# Properties


@settings(max_examples=20, deadline=None)
@given(m0=st.floats(1.0, 4.0), tau=st.floats(2.0, 60.0), share=st.floats(0.2, 0.75),
       r1=st.floats(0.0, 100.0), extra=st.floats(1.0, 100.0))
def test_longer_ramp_is_never_worse_time_law(m0, tau, share, r1, extra):
    lam = share * 100.0
    peaks = [plan.warmup_transient(lam, 0.010, m0, warmup_time=tau, ramp=r, horizon=400.0, **FCFS)
             for r in (r1, r1 + extra)]
    assert peaks[1].peak_response[0.99] <= peaks[0].peak_response[0.99] * (1 + 1e-9)
    assert peaks[1].peak_delay <= peaks[0].peak_delay + 1e-12


@settings(max_examples=20, deadline=None)
@given(m0=st.floats(1.0, 3.5), more=st.floats(0.05, 2.0), scale=st.floats(100.0, 5000.0),
       share=st.floats(0.2, 0.75), ramp=st.floats(0.0, 60.0), by_time=st.booleans())
def test_p99_is_monotone_in_the_cold_multiplier(m0, more, scale, share, ramp, by_time):
    law = dict(warmup_time=scale / 100.0) if by_time else dict(warmup_requests=scale)
    runs = [plan.warmup_transient(share * 100.0, 0.010, m, ramp=ramp, horizon=300.0, discipline="ps",
                                  slo={0.99: 0.25}, **law) for m in (m0, m0 + more)]
    a, b = (x.table["p99_s"].to_numpy() for x in runs)
    assert np.all(b >= a * (1 - 1e-9))
    need = [plan.ramp_needed(share * 100.0, 0.010, m, discipline="fcfs", slo={0.99: 0.5}, **law).ramp
            for m in (m0, m0 + more)]
    assert need[1] >= need[0] * (1 - 1e-6)


# ---------------------------------------------------------------------------------------------
# Input errors, results, command line


@pytest.mark.parametrize("kwargs, match", [
    (dict(cold_multiplier=0.5, warmup_time=1.0), "cold_multiplier"),
    (dict(cold_multiplier=float("nan"), warmup_time=1.0), "cold_multiplier"),
    (dict(cold_multiplier=2.0), "exactly one of warmup_requests"),
    (dict(cold_multiplier=2.0, warmup_time=1.0, warmup_requests=5.0), "exactly one of warmup_requests"),
    (dict(cold_multiplier=2.0, warmup_time=-1.0), "warmup_time"),
    (dict(cold_multiplier=2.0, warmup_requests=0), "warmup_requests"),
    (dict(cold_multiplier=2.0, warmup_time=1.0, ramp=-5.0), "ramp"),
    (dict(cold_multiplier=2.0, warmup_time=1.0, discipline="lifo"), "discipline"),
    (dict(cold_multiplier=2.0, warmup_time=1.0, servers=0), "servers"),
    (dict(cold_multiplier=2.0, warmup_time=1.0, timeout=0.0), "timeout"),
])
def test_bad_input_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plan.warmup_transient(60.0, 0.010, **kwargs)
    with pytest.raises(ValueError, match="arrival_rate"):
        plan.ramp_needed(-1.0, 0.010, 2.0, warmup_time=1.0)


def test_bad_deploy_and_simulation_input():
    with pytest.raises(ValueError, match="batch_size"):
        plan.rolling_deploy(100.0, 0.010, 4, 2.0, warmup_time=1.0, batch_size=5)
    with pytest.raises(ValueError, match="restart_time"):
        plan.rolling_deploy(100.0, 0.010, 4, 2.0, warmup_time=1.0, restart_time=0.0)
    with pytest.raises(ValueError, match="processes"):
        plan.rolling_deploy(100.0, 0.010, 0, 2.0, warmup_time=1.0)
    with pytest.raises(ValueError, match="replications"):
        plan.warmup_simulation(100.0, 0.010, 2.0, warmup_time=1.0, replications=1)
    with pytest.raises(ValueError, match="replications"):
        plan.warmup_simulation(1000.0, 0.001, 2.0, warmup_time=100.0, replications=10_000, discipline="ps")


def test_overloaded_even_when_warm_is_said_plainly():
    r = plan.ramp_needed(120.0, 0.010, 2.0, warmup_time=10.0, **FCFS)
    assert not r.feasible and r.ramp == math.inf and "more processes" in r.explanation
    assert r.no_ramp.verdict == "overloaded"


def test_results_follow_the_protocol_and_progress_is_reported():
    calls = []
    r = plan.ramp_needed(60.0, 0.010, 3.0, warmup_requests=2000, timeout=1.0, progress=lambda d, t: calls.append((d, t)),
                         **FCFS)
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]
    calls.clear()
    plain = plan.warmup_transient(60.0, 0.010, 3.0, warmup_requests=2000, **FCFS)
    shown = plan.warmup_transient(60.0, 0.010, 3.0, warmup_requests=2000, progress=lambda d, t: calls.append((d, t)),
                                  **FCFS)
    assert calls == [(1, 2), (2, 2)] and shown.to_dict() == plain.to_dict()
    for res in (r, r.no_ramp, plan.rolling_deploy(300.0, 0.010, 6, 2.0, warmup_time=10.0, ramp=20.0),
                plan.warmup_simulation(30.0, 0.010, 2.0, warmup_time=5.0, horizon=20.0, replications=4, seed=1)):
        assert "\n" not in repr(res) and len(repr(res)) < 200
        json.dumps(res.to_dict())
        assert len(res.to_frame()) > 5 and len(str(res)) > 80


def test_cli_warmup_through_a_subprocess_and_help():
    out = subprocess.run([sys.executable, "-m", "capacity", "warmup", "--qps", "60", "--cpu", "10ms", "--cold", "3",
                          "--warmup-time", "20s", "--slo", "p99=250ms", "--discipline", "fcfs"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ramp needed: 39.7 s" in out.stdout, out.stderr
    for sub in ("warmup", "deploy"):
        code, text, _ = run_cli(sub, "--help")
        assert code == 0 and "examples:" in text and f"capacity {sub} " in text


def test_cli_warmup_and_deploy():
    code, out, err = run_cli("warmup", "--qps", "60", "--cpu", "10ms", "--cold", "3", "--warmup-time", "20s",
                             "--slo", "p99=250ms", "--discipline", "fcfs")
    assert code == 0 and "ramp needed: 39.7 s" in out, err
    code, out, _ = run_cli("warmup", "--qps", "60", "--cpu", "10ms", "--cold", "3x", "--warmup-requests", "2000",
                           "--ramp", "60s", "--timeout", "2s", "--json")
    data = json.loads(out)
    assert code == 0 and data["result"]["ramp"] == 60.0 and data["result"]["verdict"] in ("backlog", "slo_broken")
    code, out, _ = run_cli("deploy", "--qps", "500", "--cpu", "10ms", "--processes", "10", "--cold", "3",
                           "--warmup-time", "30s", "--ramp", "60s", "--slo", "p99=250ms", "--json")
    assert code == 0 and json.loads(out)["result"]["processes_needed"] >= 10
    code, out, _ = run_cli("deploy", "--qps", "500", "--cpu", "10ms", "--processes", "10", "--cold", "1",
                           "--warmup-time", "30s", "--surge", "--slo", "p99=250ms", "--discipline", "fcfs")
    assert code == 0 and "(surge)" in out and "0 % lost" in out
    for args, flag in ((("--cold", "0.5", "--warmup-time", "3s"), "--cold"),
                       (("--cold", "2", "--warmup-time", "3s", "--warmup-requests", "4"), "--warmup-requests"),
                       (("--cold", "2", "--warmup-time", "-3s"), "--warmup-time")):
        code, out, err = run_cli("warmup", "--qps", "60", "--cpu", "10ms", *args)
        assert code == 2 and flag in err and "Traceback" not in err
    code, _, err = run_cli("deploy", "--qps", "60", "--cpu", "10ms", "--processes", "2", "--batch", "3",
                           "--cold", "2", "--warmup-time", "3s")
    assert code == 2 and "batch_size" in err and "Traceback" not in err
