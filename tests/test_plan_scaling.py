"""compare_scaling / dispatch_response, rate_limits and burst tolerance.

References: the exact simulator :func:`capacity.sim.simulate` with 99 % batch-means intervals
(Law 2015, sec. 9.5.3); E_N/M/1 sojourn time exponential with rate mu (1 - omega) (Kleinrock 1975,
sec. 6.4); Poisson thinning (random split = independent M/G/1 queues); M/M/1 FCFS closed forms
(timeout-safe rate mu - ln(1/f)/timeout, p99 = ln(100)/(mu - lambda)); the fluid backlog of
:func:`capacity.overload.backlog` (Lindley 1952) for burst tolerance.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity import Service, overload, sim
from capacity.plan import (ScalingOption, compare_scaling, dispatch_response, rate_limits, servers_needed,
                           timeout_safe_rate)
from capacity.plan.scaling import _equivalent_rate

N_REQ = 150_000


def _simulate(lam, service, discipline, machines, processes, servers, dispatch, seed=7):
    if dispatch == "pooled":
        return sim.simulate(lam, service, discipline=discipline, servers=machines * processes * servers,
                            horizon=N_REQ / lam, seed=seed)
    return sim.simulate(lam, service, discipline=discipline, servers=servers, processes=processes,
                        machines=machines, dispatch=dispatch, horizon=N_REQ / lam, seed=seed)


# (discipline, machines, processes, cores per process, dispatch, load, service) -- the models
# that the module documents as within the simulator's interval.
AGREE = [
    ("fcfs", 1, 4, 1, "round_robin", 0.7, Service.exponential(1.0)),    # exact E_4/M/1
    ("fcfs", 3, 1, 2, "round_robin", 0.7, Service.exponential(1.0)),    # E_3/M/2, decay-rate match
    ("fcfs", 1, 4, 1, "round_robin", 0.7, Service.gamma(1.0, 2.0)),     # Allen-Cunneen scaling
    ("ps", 1, 4, 1, "random", 0.7, Service.exponential(1.0)),           # exact M/M/1-PS per worker
    ("fcfs", 1, 4, 1, "pooled", 0.7, Service.exponential(1.0)),         # exact M/M/4
]


@pytest.mark.parametrize("disc,m,p,s,dispatch,rho,svc", AGREE)
def test_dispatch_model_inside_simulation_interval(disc, m, p, s, dispatch, rho, svc):
    lam = rho * m * p * s / svc.mean
    res = _simulate(lam, svc, disc, m, p, s, dispatch)
    ci = res.confidence_interval(0.99, level=0.99, warmup=100)
    model = dispatch_response(0.99, lam, svc, m * p, s, dispatch, disc)
    assert ci.low <= model <= ci.high, (model, ci)


def test_round_robin_ps_mean_is_exact_for_exponential():
    # Under PS with exponential service the number present has the FCFS (E_N/M/1) law, so the mean
    # response is 1 / (mu (1 - omega)) exactly; the simulated mean must contain it.
    lam = 0.6 * 4
    res = _simulate(lam, 1.0, "ps", 2, 2, 1, "round_robin")
    ci = res.confidence_interval("mean", level=0.99, warmup=100)
    omega = float(_equivalent_rate(np.asarray(lam), Service.exponential(1.0), 4, 1, "round_robin", "ps"))
    assert ci.low <= 1.0 / (1.0 - omega) <= ci.high


def test_round_robin_root_matches_hand_solution():
    # D/M/1 limit check at N = 1: omega = rho (Poisson); N = 2, rho = 0.5, mu = 1, lam = 1:
    # omega = (1 / (2 - omega))^2  ->  omega^3 - 4 omega^2 + 4 omega - 1 = 0 -> omega = (3 - sqrt 5) / 2.
    svc = Service.exponential(1.0)
    assert float(_equivalent_rate(np.asarray(0.3), svc, 1, 1, "round_robin", "fcfs")) == pytest.approx(0.3)
    eff = float(_equivalent_rate(np.asarray(1.0), svc, 2, 1, "round_robin", "fcfs"))
    assert eff == pytest.approx((3 - math.sqrt(5)) / 2, rel=1e-12)


@pytest.mark.parametrize("disc", ["fcfs", "ps"])
def test_least_connections_documented_error(disc):
    # Documented: the JSQ model is 5-10 % optimistic at p99 (never pessimistic beyond the interval).
    lam = 0.6 * 6
    res = _simulate(lam, 1.0, disc, 2, 3, 1, "least_connections")
    ci = res.confidence_interval(0.99, level=0.99, warmup=100)
    model = dispatch_response(0.99, lam, 1.0, 6, 1, "least_connections", disc)
    assert ci.low * 0.88 <= model <= ci.high
    assert model >= dispatch_response(0.99, lam, 1.0, 6, 1, "pooled", disc)


@settings(max_examples=40, deadline=None)
@given(rho=st.floats(0.05, 0.95), n=st.integers(2, 16), disc=st.sampled_from(["ps", "fcfs"]),
       q=st.sampled_from([0.5, 0.9, 0.99]))
def test_pooled_beats_round_robin_beats_random(rho, n, disc, q):
    lam = rho * n
    t = {d: dispatch_response(q, lam, 1.0, n, 1, d, disc) for d in ("pooled", "round_robin", "random",
                                                                    "least_connections")}
    tol = 1e-9 * t["random"]
    assert t["pooled"] <= t["round_robin"] + tol
    assert t["round_robin"] <= t["random"] + tol
    assert t["pooled"] <= t["least_connections"] + tol


def test_ceiling_ordering_and_n_plus_one():
    opts = [ScalingOption(2, 4, d) for d in ("pooled", "least_connections", "round_robin", "random")]
    r = compare_scaling(250.0, 0.025, {0.99: 0.5}, opts, discipline="fcfs", cost_per_machine=100.0,
                        cost_per_core=10.0, memory_per_process=300e6, machine_memory=1e9)
    ceil = r.table["ceiling_qps"].to_numpy()
    assert np.all(np.diff(ceil) <= 1e-9 * ceil[0])
    # N+1 column = the same evaluation with machines - 1, done by hand here.
    for opt, (_, row) in zip(opts, r.table.iterrows()):
        down = compare_scaling(250.0, 0.025, {0.99: 0.5}, [ScalingOption(1, 4, opt.dispatch)],
                               discipline="fcfs").table.iloc[0]
        assert row["n1_meets_slo"] == down["meets_slo"]
        assert row["n1_ceiling_qps"] == pytest.approx(down["ceiling_qps"], rel=1e-9)
        assert row["headroom"] == pytest.approx(row["ceiling_qps"] / 250.0)
    # 2 machines x 100 + 8 cores x 10; 4 processes x 300 MB > 1 GB.
    assert r.table["cost"].tolist() == [280.0] * 4
    assert not r.table["fits_memory"].any()
    # Pooled 4 cores (one machine down), M/M/4 FCFS at 250 QPS: load 1.56 > 1, unstable.
    assert not r.table["n1_meets_slo"].any()


def test_random_split_is_m_m_1_closed_form():
    # Random split over 4 one-core FCFS workers: each M/M/1 at lam / 4; p99 = ln(100) / (mu - lam/4).
    r = compare_scaling(100.0, 0.025, {0.99: 0.5}, [ScalingOption(2, 2, "random")], discipline="fcfs")
    row = r.table.iloc[0]
    assert row["p99_s"] == pytest.approx(math.log(100) / (40 - 25), rel=1e-9)
    assert row["ceiling_qps"] == pytest.approx(4 * (40 - math.log(100) / 0.5), rel=1e-6)
    assert row["meets_slo"] and row["n1_ceiling_qps"] == pytest.approx(2 * (40 - math.log(100) / 0.5), rel=1e-6)


def test_default_options_and_best():
    r = compare_scaling(300.0, 0.025, {0.99: 0.5}, cores_per_machine=4, cost_per_machine=100.0)
    cores = servers_needed(300.0, 0.025, {0.99: 0.5}).servers
    assert set(r.table["cores"]) == {-(-cores // 4) * 4}
    assert "pooled" in set(r.table["dispatch"]) and "round_robin" in set(r.table["dispatch"])
    assert r.best is None or r.table.loc[r.best, "meets_slo"]
    assert "p99" in r.explanation


def test_bad_inputs():
    with pytest.raises(ValueError, match="dispatch"):
        ScalingOption(1, 2, "fastest")
    with pytest.raises(ValueError, match="machines"):
        ScalingOption(0, 2)
    with pytest.raises(ValueError, match="peak_qps"):
        compare_scaling(-1.0, 0.025)
    with pytest.raises(ValueError, match="processes"):
        dispatch_response(0.99, 1.0, 1.0, 0)


# ------------------------------------------------------------------------- rate limits


def test_rate_limits_hand_checked():
    # M/M/1 FCFS, E[S] = 25 ms: safe rate 40 - ln(1000)/1 = 33.0922 QPS; 80 % of it per machine.
    safe = 40 - math.log(1000)
    r = rate_limits(0.025, 1, 4, 1.0, 1e-3, 0.2, peak_qps=150.0, discipline="fcfs")
    assert r.machine_safe_qps == pytest.approx(safe, rel=1e-6)
    limit = 0.8 * safe
    assert r.machine_limit == pytest.approx(limit, rel=1e-6)
    assert r.cluster_limit == pytest.approx(4 * limit, rel=1e-6)
    assert r.cluster_limit_n1 == pytest.approx(3 * limit, rel=1e-6)
    up = r.table.loc["all up, limited"]
    assert up["admitted_qps"] == pytest.approx(4 * limit, rel=1e-6)
    assert up["rejected_fraction"] == pytest.approx(1 - 4 * limit / 150.0, rel=1e-6)
    assert up["p99_s"] == pytest.approx(math.log(100) / (40 - limit), rel=1e-6)
    assert up["timeout_fraction"] == pytest.approx(math.exp(-(40 - limit) * 1.0), rel=1e-6)
    down = r.table.loc["one down, limited"]
    assert down["admitted_qps"] == pytest.approx(3 * limit, rel=1e-6)
    # Without limits and one machine down: 50 QPS per 40-QPS machine -> unbounded queue.
    assert r.table.loc["one down, no limit", "timeout_fraction"] == 1.0
    assert "rejected" in r.explanation


def test_rate_limits_below_limit_admits_everything():
    r = rate_limits(0.025, 1, 4, 1.0, peak_qps=40.0, discipline="fcfs")
    row = r.table.loc["all up, limited"]
    assert row["rejected_fraction"] == 0.0 and row["machine_qps"] == 10.0
    assert row["p99_s"] == pytest.approx(math.log(100) / 30, rel=1e-6)


def test_rate_limits_bad_margin():
    with pytest.raises(ValueError, match="safety_margin"):
        rate_limits(0.025, 1, 4, 1.0, safety_margin=1.0)


# ------------------------------------------------------------------------- burst tolerance


def test_burst_tolerance_fcfs_matches_overload_backlog():
    # 25 ms requests, one core, 1 s timeout, bursts at 60 QPS (rho 1.5): the fluid backlog delay of
    # capacity.overload.backlog reaches timeout - E[S] = 0.975 s after 0.975 / 0.5 = 1.95 s.
    r = timeout_safe_rate(0.025, 1, 1.0, discipline="fcfs", burst_qps=60.0)
    b = overload.backlog([60.0] * 4000, 0.025, 1, bucket=0.001)
    first = np.flatnonzero(b.table["backlog_delay"].to_numpy() >= 0.975 - 1e-12)[0]
    assert r.burst_seconds == pytest.approx((first + 1) * 0.001, abs=1.5e-3)
    assert r.burst_seconds == pytest.approx(1.95, rel=1e-9)


def test_burst_tolerance_ps_exponential_closed_form():
    # Exponential PS: alpha = lambda - c mu, so a mean-size request arriving u s in stays
    # u (exp((rho - 1)) - 1): the burst may last timeout / (e^{0.5} - 1) at rho = 1.5.
    r = timeout_safe_rate(0.025, 1, 1.0, discipline="ps", burst_qps=60.0)
    assert r.burst_seconds == pytest.approx(1.0 / math.expm1(0.5), rel=1e-6)
    assert "burst" in r.explanation


def test_burst_below_capacity_is_unbounded_and_longer_timeout_helps():
    assert math.isinf(timeout_safe_rate(0.025, 2, 1.0, discipline="fcfs", burst_qps=70.0).burst_seconds)
    a = timeout_safe_rate(0.025, 1, 1.0, discipline="ps", burst_qps=80.0).burst_seconds
    b = timeout_safe_rate(0.025, 1, 2.0, discipline="ps", burst_qps=80.0).burst_seconds
    assert b > a > 0
