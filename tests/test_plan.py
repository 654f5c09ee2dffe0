"""Tests of capacity.plan: the planners invert the forward models.

References (each test names its own):
* M/M/1 FCFS: the response time is exponential with rate mu - lambda (Kleinrock, Queueing
  Systems I, 1975, section 3.2), so the p_q ceiling is lambda = mu - ln(1/(1-q)) / t.
* M/M/c FCFS: P(W > t) = C(c, a) exp(-(c mu - lambda) t) with the Erlang C formula written out
  from factorials here (Cooper, Introduction to Queueing Theory, 1981, section 3.4), and the
  response-time tail of M/M/2 convolved by hand (below).
* Erlang C staffing anchor: offered load 10 Erlangs, 3-minute calls, at most 20 % may wait over
  20 s -> 14 agents with P(wait) = 0.1741 (the classic call-centre worked example).
* Ctrip timeout rule: data/timeout_rules.toml (seed article 001, section 3.1).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

from capacity import Service, fcfs, plan, ps, rr
from capacity.plan._solve import _max_rates


def _erlang_c_by_hand(c: int, a: float) -> float:
    """Erlang C from its textbook definition with factorials (fine for c <= 30)."""
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


def _mm2_response_sf(t: float, lam: float, mu: float) -> float:
    """M/M/2 FCFS: T = W + S, W = 0 w.p. 1 - C, else Exp(theta), theta = 2 mu - lam.
    P(T > t) = e^{-mu t} + C mu (e^{-mu t} - e^{-theta t}) / (theta - mu)."""
    theta = 2 * mu - lam
    c = _erlang_c_by_hand(2, lam / mu)
    return math.exp(-mu * t) + c * mu * (math.exp(-mu * t) - math.exp(-theta * t)) / (theta - mu)


# ------------------------------------------------------------------------------------------------
# qps_ceiling


@pytest.mark.parametrize("mean,q,t", [(0.025, 0.99, 0.5), (0.025, 0.999, 2.0), (1.0, 0.9, 10.0), (0.001, 0.5, 0.01)])
def test_mm1_fcfs_ceiling_closed_form(mean, q, t):
    """Kleinrock (1975) section 3.2: lambda = mu - ln(1/(1-q)) / t."""
    expected = 1 / mean - math.log(1 / (1 - q)) / t
    res = plan.qps_ceiling(mean, slo={q: t}, discipline="fcfs")
    assert res.qps == pytest.approx(expected, rel=1e-12)
    assert res.capacity_qps == pytest.approx(1 / mean)
    assert res.utilization == pytest.approx(expected * mean)
    # The general solver path (used for everything but M/M/1 FCFS) reaches the same rate.
    rates, reason, _ = _max_rates(fcfs.response_sf, Service.exponential(mean), np.asarray(1),
                                  np.array([t]), np.array([1 - q]))
    assert reason.item() == 0
    assert rates.item() == pytest.approx(expected, rel=1e-6)


def test_mm2_fcfs_ceiling_against_hand_formula():
    """M/M/2 ceiling: brentq on the hand-derived response tail (see _mm2_response_sf)."""
    mu, t, q = 40.0, 0.5, 0.99
    expected = brentq(lambda lam: _mm2_response_sf(t, lam, mu) - (1 - q), 1.0, 2 * mu - 1e-9, xtol=1e-12)
    res = plan.qps_ceiling(1 / mu, servers=2, slo={q: t}, discipline="fcfs")
    assert res.qps == pytest.approx(expected, rel=1e-6)


def test_binding_percentile_and_per_slo_rates():
    """Two targets, M/M/1 FCFS: p99 <= 500 ms allows 40 - ln(100)/0.5 = 30.79 QPS, p99.9 <= 600 ms
    allows 40 - ln(1000)/0.6 = 28.49 QPS, so p99.9 binds."""
    res = plan.qps_ceiling(0.025, slo={0.99: 0.5, 0.999: 0.6}, discipline="fcfs")
    assert res.binding == 0.999
    assert res.rates[0.99] == pytest.approx(40 - math.log(100) / 0.5)
    assert res.rates[0.999] == pytest.approx(40 - math.log(1000) / 0.6)
    assert res.qps == pytest.approx(res.rates[0.999])
    assert "p99.9" in res.explanation and "28.49 QPS" in res.explanation
    assert res.headroom(20.0) == pytest.approx(res.qps / 20 - 1)


def test_array_servers_vectorised_against_scalar_calls():
    """servers=[1, 2, 4] gives the three scalar answers (M/M/2 checked by hand above)."""
    many = plan.qps_ceiling(0.025, servers=[1, 2, 4], slo={0.99: 0.5}, discipline="fcfs")
    assert many.qps.shape == (3,)
    for i, c in enumerate([1, 2, 4]):
        one = plan.qps_ceiling(0.025, servers=c, slo={0.99: 0.5}, discipline="fcfs")
        assert many.qps[i] == pytest.approx(one.qps, rel=1e-6)
    assert many.qps[1] == pytest.approx(
        brentq(lambda lam: _mm2_response_sf(0.5, lam, 40.0) - 0.01, 1.0, 80 - 1e-9, xtol=1e-12), rel=1e-6)


def test_delay_shrinks_threshold():
    """A constant delay d is the SLO t - d for the queue: M/M/1 FCFS mu - ln(100) / (t - d)."""
    res = plan.qps_ceiling(0.025, slo={0.99: 0.5}, discipline="fcfs", delay=0.1)
    assert res.qps == pytest.approx(40 - math.log(100) / 0.4)
    assert "100 ms" in res.explanation and "non-CPU" in res.explanation


@pytest.mark.parametrize("discipline", ["fcfs", "ps"])
def test_delay_at_or_above_threshold_is_plainly_infeasible(discipline):
    res = plan.qps_ceiling(0.025, slo={0.99: 0.5}, discipline=discipline, delay=0.5)
    assert res.qps == 0 and not res.feasible
    assert "cannot be met at any load" in res.explanation and "delay" in res.explanation


def test_service_alone_misses_slo():
    """200 ms exponential: P(S > 0.5) = e^-2.5 = 8.2 % > 1 %, so no load meets p99 <= 500 ms."""
    res = plan.qps_ceiling(0.2, slo={0.99: 0.5}, discipline="fcfs")
    assert res.qps == 0 and not res.feasible and res.binding == 0.99
    assert "idle" in res.explanation
    res = plan.qps_ceiling(0.2, servers=4, slo={0.99: 0.5}, discipline="fcfs")
    assert res.qps == 0 and not res.feasible


def test_ps_ceiling_hits_the_slo_exactly():
    """M/M/1-PS: at the ceiling P(T > t) = 1 - q, just above it the SLO fails (round trip
    through the exact PS forward model; one solve, few forward calls)."""
    res = plan.qps_ceiling(0.025, slo={0.99: 0.5}, discipline="ps")
    assert 0 < res.qps < 40
    tails = ps.response_sf(0.5, np.array([res.qps, res.qps * (1 + 1e-4)]), 0.025)
    assert tails[0] == pytest.approx(0.01, rel=1e-5)
    assert tails[1] > 0.01
    # PS has the heavier tail: its ceiling is below FCFS's.
    assert res.qps < plan.qps_ceiling(0.025, slo={0.99: 0.5}, discipline="fcfs").qps


@pytest.mark.parametrize("kwargs,match", [
    (dict(slo={1.5: 0.5}), "quantile"),
    (dict(slo={0.99: -1.0}), "slo"),
    (dict(slo={}), "slo"),
    (dict(slo={0.99: 0.5}, discipline="lifo"), "discipline"),
    (dict(slo={0.99: 0.5}, discipline="ps", slo_on="wait"), "wait"),
    (dict(slo={0.99: 0.5}, delay=-0.1), "delay"),
    (dict(slo={0.99: 0.5}, servers=0), "servers"),
    (dict(slo={1 - 1e-9: 0.5}), "quantile"),
    (dict(slo={0.99: 0.5}, discipline="rr", slices=2, admission="lifo"), "admission.*'lifo'"),
    (dict(slo={0.99: 0.5}, discipline="rr", slices=2, admission=None), "admission.*None"),
    (dict(slo={0.99: 0.5}, discipline="ps", admission="idle"), "admission.*'idle'"),
    (dict(slo={0.99: 0.5}, discipline="fcfs", admission="idle"), "admission.*'idle'"),
])
def test_ceiling_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plan.qps_ceiling(0.025, **kwargs)


# ------------------------------------------------------------------------------------------------
# rr with admission="idle": the planners solve what capacity.rr gives




def _rr_root(q, t, svc, c, **kw):
    """Independent solve: the arrival rate at which rr.response_quantile(q) reaches t."""
    cap = c / float(svc.mean)
    return brentq(lambda lam: float(rr.response_quantile(q, lam, svc, c, **kw)) - t, 1e-9 * cap, 0.999 * cap,
                  xtol=1e-12 * cap, rtol=1e-13)


def test_rr_idle_ceiling_solves_the_rr_idle_quantile(idle_constants):
    """Every per-percentile ceiling is the root of rr's idle quantile, with the slice delay inside
    the rr call and only the constant delay off the threshold."""
    svc = Service.exponential(0.010)
    slo = {0.99: 0.12, 0.999: 0.2}
    kw = dict(slices=4, slice_delay=0.003, admission="idle")
    res = plan.qps_ceiling(svc, 1, slo, discipline="rr", delay=0.004, **kw)
    for q, t in slo.items():
        assert res.rates[q] == pytest.approx(_rr_root(q, t - 0.004, svc, 1, **kw), rel=1e-6)
    assert res.qps == min(res.rates.values())
    assert res.delay == 0.004   # the idle slice delay is not reported as a constant offset


def test_rr_idle_timeout_safe_rate_solves_the_rr_idle_quantile(idle_constants):
    svc = Service.exponential(0.010)
    kw = dict(slices=3, slice_delay=0.002, admission="idle")
    res = plan.timeout_safe_rate(svc, 1, 0.25, 1e-3, "rr", **kw)
    assert res.qps == pytest.approx(_rr_root(0.999, 0.25, svc, 1, **kw), rel=1e-6)


def test_rr_admission_default_and_one_slice():
    """admission="fifo" is the default (same numbers, the slice delay still a pure offset); with
    one slice both rules are FCFS."""
    svc = Service.exponential(0.010)
    slo = {0.99: 0.1}
    default = plan.qps_ceiling(svc, 1, slo, discipline="rr", slices=4, slice_delay=0.002)
    fifo = plan.qps_ceiling(svc, 1, slo, discipline="rr", slices=4, slice_delay=0.002, admission="fifo")
    assert fifo.rates == default.rates and fifo.delay == default.delay == pytest.approx(0.006)
    idle1 = plan.qps_ceiling(svc, 1, slo, discipline="rr", slices=1, slice_delay=0.002, admission="idle")
    assert idle1.qps == plan.qps_ceiling(svc, 1, slo, discipline="fcfs").qps


def test_results_record_the_event_loop_model(idle_constants):
    """A stored ceiling or timeout-safe rate says which event-loop model it assumed."""
    kw = dict(slices=4, slice_delay=0.002, admission="idle")
    ceiling = plan.qps_ceiling(0.01, 1, {0.99: 0.1}, discipline="rr", **kw)
    safe = plan.timeout_safe_rate(0.01, 1, 0.5, discipline="rr", **kw)
    for res in (ceiling, safe):
        assert (res.slices, res.slice_delay, res.admission) == (4, 0.002, "idle")
    ps = plan.qps_ceiling(0.01, 1, {0.99: 0.1})
    assert (ps.slices, ps.slice_delay, ps.admission) == (1, 0.0, "fifo")


def test_timeout_safe_rate_bad_admission():
    with pytest.raises(ValueError, match="admission.*'sometimes'"):
        plan.timeout_safe_rate(0.01, 1, 0.5, discipline="rr", slices=2, admission="sometimes")
    with pytest.raises(ValueError, match="admission.*'idle'.*'ps'"):
        plan.timeout_safe_rate(0.01, 1, 0.5, discipline="ps", admission="idle")


# ------------------------------------------------------------------------------------------------
# servers_needed


def test_erlang_c_staffing_anchor():
    """Classic anchor: 10 Erlangs (3-minute calls), at most 20 % wait over 20 s -> 14 servers,
    P(wait) = 0.1741 at 14.  Hand check: C(13, 10) e^{-(3/180) 20} > 0.2 >= C(14, 10) e^{-(4/180) 20}."""
    lam, mean = 10 / 180, 180.0
    res = plan.servers_needed(lam, mean, {0.8: 20.0}, discipline="fcfs", slo_on="wait")
    assert res.servers == 14
    assert round(_erlang_c_by_hand(14, 10.0), 4) == 0.1741
    assert round(fcfs.wait_sf(0.0, lam, mean, res.servers), 4) == 0.1741
    assert res.tail[0.8] == pytest.approx(_erlang_c_by_hand(14, 10.0) * math.exp(-4 / 180 * 20), rel=1e-9)
    assert _erlang_c_by_hand(13, 10.0) * math.exp(-3 / 180 * 20) > 0.2
    assert res.utilization == pytest.approx(10 / 14)
    assert res.min_stable_servers == 11


def test_servers_needed_vectorised_against_brute_force():
    """Array of loads in one call == the smallest c from a full scan of the M/M/c wait tail."""
    loads = np.array([2.0, 10.0, 100.0, 1000.0])
    res = plan.servers_needed(loads / 180, 180.0, {0.8: 20.0}, discipline="fcfs", slo_on="wait")
    from capacity.erlang import erlang_c
    for a, got in zip(loads, res.servers):
        cs = np.arange(int(a) + 1, int(a) + 200)
        tail = erlang_c(cs, a) * np.exp(-(cs - a) / 180 * 20)
        assert got == cs[np.argmax(tail <= 0.2)]


def test_servers_needed_response_slo_meets_and_is_minimal():
    res = plan.servers_needed(500.0, 0.025, {0.99: 0.2, 0.999: 0.5}, discipline="fcfs")
    c = res.servers
    ok = fcfs.response_sf(np.array([0.2, 0.5]), 500.0, 0.025, c) <= np.array([0.01, 0.001])
    short = fcfs.response_sf(np.array([0.2, 0.5]), 500.0, 0.025, c - 1) <= np.array([0.01, 0.001])
    assert ok.all() and not short.all()


def test_n_plus_one_adds_a_machine_exactly_when_remaining_miss():
    """N+1: the planner adds a machine because with one down the rest miss the SLO, and the
    deployed machines minus one still meet it."""
    slo, lam, mean, k = {0.99: 0.2}, 500.0, 0.025, 4
    base = plan.servers_needed(lam, mean, slo, discipline="fcfs", servers_per_machine=k)
    n1 = plan.servers_needed(lam, mean, slo, discipline="fcfs", servers_per_machine=k, redundancy=1)
    assert base.machines == base.machines_without_redundancy == math.ceil(14 / k)  # 14 cores pooled
    assert n1.machines == base.machines + 1 and n1.servers == n1.machines * k

    def meets(machines):
        return fcfs.response_sf(0.2, lam, mean, machines * k) <= 0.01

    assert not meets(base.machines - 1)  # one down from the N plan: the SLO breaks
    assert meets(n1.machines - 1)        # one down from the N+1 plan: still holds
    assert "N+1" in n1.explanation


def test_servers_needed_bad_input():
    with pytest.raises(ValueError, match="redundancy"):
        plan.servers_needed(100.0, 0.025, {0.99: 0.5}, redundancy=1)
    with pytest.raises(ValueError, match="cannot be met"):
        plan.servers_needed(100.0, 0.025, {0.99: 0.01}, discipline="fcfs")
    with pytest.raises(ValueError, match="arrival_rate"):
        plan.servers_needed(-1.0, 0.025, {0.99: 0.5})


def test_servers_needed_ps_exponential():
    """M/M/c-PS: fewest cores; c - 1 cores miss the SLO (exact PS chain, few points)."""
    res = plan.servers_needed(100.0, 0.025, {0.99: 0.2}, discipline="ps")
    tails = ps.response_sf(0.2, 100.0, 0.025, np.array([res.servers - 1, res.servers]))
    assert tails[1] <= 0.01 < tails[0]


# ------------------------------------------------------------------------------------------------
# timeout_safe_rate and recommend_timeout


def test_timeout_safe_rate_mm1_fcfs():
    """P(T > 1 s) = e^{-(40 - lambda)} = 1e-3 -> lambda = 40 - ln(1000)."""
    res = plan.timeout_safe_rate(0.025, 1, timeout=1.0, max_timeout_fraction=1e-3, discipline="fcfs")
    assert res.qps == pytest.approx(40 - math.log(1000), rel=1e-12)
    assert "1 s timeout" in res.explanation


def test_timeout_safe_rate_infeasible_is_said_plainly():
    res = plan.timeout_safe_rate(0.5, 1, timeout=1.0, max_timeout_fraction=1e-3, discipline="fcfs")
    assert res.qps == 0 and not res.feasible and "no request rate" in res.explanation


def _timeout_rules():
    path = Path(__file__).resolve().parents[1] / "data" / "timeout_rules.toml"
    if not path.exists():
        pytest.skip("data/timeout_rules.toml not present")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return {r["id"]: r for r in tomllib.loads(path.read_text(encoding="utf-8"))["rule"]}


def test_timeout_rule_constants_match_the_article():
    rules = _timeout_rules()
    assert plan.CORE_P999_MULTIPLIER == rules["timeout_core"]["p999_multiplier"]
    assert plan.NONCORE_P999_MULTIPLIER == rules["timeout_noncore"]["p999_multiplier"]


def test_recommend_timeout_rule():
    """Ctrip 3.1: core min(3 x P99.9, limit), non-core min(1.5 x P99.9, limit)."""
    a = plan.recommend_timeout(0.1)
    assert a.timeout == pytest.approx(0.3) and a.rule == "3 x P99.9" and a.timeout_fraction is None
    a = plan.recommend_timeout(0.1, core=False)
    assert a.timeout == pytest.approx(0.15) and a.rule == "1.5 x P99.9"
    a = plan.recommend_timeout(0.1, user_limit=0.2)
    assert a.timeout == 0.2 and a.rule == "user limit"
    a = plan.recommend_timeout(0.1, user_limit=0.05)
    assert "too slow" in a.explanation
    assert "processor sharing" in a.warning and "saturation" in a.warning


def test_recommend_timeout_with_model():
    """M/M/1 FCFS at 20 of 40 QPS: T ~ Exp(20), P99.9 = ln(1000)/20, fraction e^{-20 timeout}."""
    a = plan.recommend_timeout(0.2, service=0.025, arrival_rate=20.0, discipline="fcfs")
    assert a.timeout_fraction == pytest.approx(math.exp(-20 * 0.6), rel=1e-9)
    a = plan.recommend_timeout(None, core=False, service=0.025, arrival_rate=20.0, discipline="fcfs")
    assert a.p999 == pytest.approx(math.log(1000) / 20, rel=1e-8)
    assert a.timeout_fraction == pytest.approx(math.exp(-1.5 * math.log(1000)), rel=1e-6)
    with pytest.raises(ValueError, match="overloads"):
        plan.recommend_timeout(None, service=0.025, arrival_rate=50.0, discipline="fcfs")
    with pytest.raises(ValueError, match="both"):
        plan.recommend_timeout(0.1, service=0.025)


# ------------------------------------------------------------------------------------------------
# Properties (fast models: M/M/c and M/H2/1 FCFS)

_services = st.sampled_from([Service.exponential(0.025), Service.hyperexponential(0.025, 3.0)])


@settings(max_examples=12, deadline=None)
@given(service=_services, t=st.floats(0.1, 2.0), shrink=st.floats(0.3, 0.95), q=st.sampled_from([0.9, 0.99, 0.999]))
def test_tighter_slo_never_raises_the_ceiling(service, t, shrink, q):
    loose = plan.qps_ceiling(service, 2 if service.family == "exponential" else 1, {q: t}, discipline="fcfs")
    tight = plan.qps_ceiling(service, 2 if service.family == "exponential" else 1, {q: t * shrink},
                             discipline="fcfs")
    stricter_q = plan.qps_ceiling(service, 2 if service.family == "exponential" else 1,
                                  {q: t, min(q + (1 - q) / 2, 0.9999): t}, discipline="fcfs")
    assert tight.qps <= loose.qps * (1 + 1e-6)
    assert stricter_q.qps <= loose.qps * (1 + 1e-6)


@settings(max_examples=12, deadline=None)
@given(t=st.floats(0.05, 2.0), q=st.sampled_from([0.9, 0.99, 0.999]), c=st.integers(1, 12))
def test_more_servers_never_lower_the_ceiling(t, q, c):
    res = plan.qps_ceiling(0.025, servers=[c, c + 1, 2 * c], slo={q: t}, discipline="fcfs")
    assert res.qps[0] <= res.qps[1] * (1 + 1e-6) and res.qps[1] <= res.qps[2] * (1 + 1e-6)


@settings(max_examples=12, deadline=None)
@given(service=_services, timeout=st.floats(0.05, 2.0), longer=st.floats(1.01, 3.0),
       frac=st.sampled_from([1e-2, 1e-3, 1e-4]))
def test_longer_timeout_never_lowers_the_safe_rate(service, timeout, longer, frac):
    short = plan.timeout_safe_rate(service, 1, timeout, frac, discipline="fcfs")
    long_ = plan.timeout_safe_rate(service, 1, timeout * longer, frac, discipline="fcfs")
    assert short.qps <= long_.qps * (1 + 1e-6)


@pytest.mark.parametrize("scv", [0.3, 0.99, 3.0])
def test_ps_ceiling_of_a_tabled_law_is_where_the_tail_meets_the_slo(scv):
    """A PS ceiling for a law the shipped table holds is solved on its quantiles (a gamma scv 0.3
    ceiling took 27 s through P(T > t), whose far tail at light load was computed directly): at
    the ceiling the p99 is the threshold and P(T > threshold) is 1 %, read independently."""
    svc = Service.gamma(0.025, scv)
    res = plan.qps_ceiling(svc, 1, {0.99: 0.5}, discipline="ps")
    assert 0 < res.qps < 40.0
    assert float(ps.response_sf(0.5, res.qps, svc)) == pytest.approx(0.01, rel=1e-3)
