"""steal_whatif: CPU steal as cores running at speed 1 - steal (seed 001, section 3.9).

References: the M/M/1 FCFS ceiling in closed form, ``lambda = mu (1 - s) - ln(1/(1-q)) / t``
(Kleinrock 1975, section 3.2), worked by hand; the time-scaling identity
``ceiling(s; t) = (1 - s) ceiling(0; (1 - s) t)`` against independent ``qps_ceiling`` calls; the
simulator with steal as many short interruptions of each request (Gaver 1962), whose mean and
p99 the reduced-speed model must fall inside of, and long interruptions, which it must not.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _cli import run_cli
from capacity import Service, fcfs, ps, simulate
from capacity.plan import qps_ceiling, steal_whatif

LN100 = math.log(100.0)


def test_mm1_fcfs_by_hand():
    # 25 ms exponential, one core, p99 <= 500 ms: ceiling 40 (1 - s) - ln(100) / 0.5.
    steal = [0.0, 0.05, 0.1, 0.3]
    r = steal_whatif(0.025, slo={0.99: 0.5}, steal=steal, discipline="fcfs", arrival_rate=25.0,
                     max_ceiling_loss=0.2)
    by_hand = [40 * (1 - s) - LN100 / 0.5 for s in steal]
    assert r.table["ceiling_qps"].tolist() == pytest.approx(by_hand, rel=1e-9)
    assert r.table["capacity_qps"].tolist() == pytest.approx([40 * (1 - s) for s in steal], rel=1e-12)
    assert r.ceiling_qps == pytest.approx(40 - LN100 / 0.5, rel=1e-9)
    # The SLO breaks at 25 QPS when 40 (1 - s) - 9.21 = 25.
    assert r.slo_steal == pytest.approx(1 - (25 + LN100 / 0.5) / 40, rel=1e-6)
    # 20 % of the ceiling is lost when 40 (1 - s) - 9.21 = 0.8 x 30.79.
    assert r.loss_steal == pytest.approx(1 - (0.8 * (40 - LN100 / 0.5) + LN100 / 0.5) / 40, rel=1e-6)
    assert r.move_steal == min(r.slo_steal, r.loss_steal)
    # M/M/1 response is exponential with rate mu (1 - s) - lambda: p99 = ln(100) / that.
    assert r.table["p99_s"].tolist() == pytest.approx([LN100 / (40 * (1 - s) - 25) for s in steal], rel=1e-6)
    assert "moving to a quieter host pays" in r.explanation


def test_ceiling_is_time_scaled_ceiling_on_several_cores():
    svc = Service.lognormal(0.020, 2.0)
    slo = {0.99: 0.4}
    r = steal_whatif(svc, servers=2, slo=slo, steal=[0.1, 0.25])
    for s in (0.1, 0.25):
        scaled = qps_ceiling(svc, 2, {0.99: 0.4 * (1 - s)}).qps * (1 - s)
        assert r.table.loc[s, "ceiling_qps"] == pytest.approx(scaled, rel=1e-5)


def test_slo_steal_is_where_the_percentile_reaches_its_target():
    svc = Service.gamma(0.025, 0.5)
    r = steal_whatif(svc, servers=4, slo={0.99: 0.3, 0.999: 0.5}, arrival_rate=100.0)
    s = r.slo_steal
    slowed = Service.gamma(0.025 / (1 - s), 0.5)
    p = ps.response_quantile([0.99, 0.999], 100.0, slowed, 4)
    # One percentile sits on its target, the other below it.
    assert max(p[0] / 0.3, p[1] / 0.5) == pytest.approx(1.0, rel=1e-4)


def test_already_broken_and_no_criterion():
    calls = []
    r = steal_whatif(0.025, slo={0.99: 0.5}, discipline="fcfs", arrival_rate=35.0,
                     progress=lambda done, total: calls.append((done, total)))
    assert r.slo_steal == 0.0 and "already broken" in r.explanation and "cannot fix" in r.explanation
    assert calls == [(1, 3), (2, 3), (3, 3)]
    r2 = steal_whatif(0.025, slo={0.99: 0.5}, discipline="fcfs")
    assert r2.move_steal is None and r2.slo_steal is None and "p99_s" not in r2.table


@settings(max_examples=25, deadline=None)
@given(mean=st.floats(0.001, 0.2), t_over_mean=st.floats(8.0, 100.0),
       percent=st.lists(st.integers(0, 60), min_size=2, max_size=5, unique=True))
def test_ceiling_falls_faster_than_the_steal(mean, t_over_mean, percent):
    s = np.sort(np.array(percent)) / 100.0
    r = steal_whatif(mean, slo={0.99: mean * t_over_mean}, steal=s, discipline="fcfs", arrival_rate=0.3 / mean)
    ceil = r.table["ceiling_qps"].to_numpy()
    # Strictly falling while any load meets the SLO; 0 once even an idle, slowed core misses it.
    assert np.all(np.where(ceil[:-1] > 0, np.diff(ceil) < 0, ceil[1:] == 0))
    # The SLO ceiling loses at least the steal share (strictly more where steal > 0).
    assert np.all(ceil[s > 0] < r.ceiling_qps * (1 - s[s > 0]))
    assert np.all(np.diff(r.table["p99_s"].to_numpy()) > 0)


@pytest.mark.parametrize("kwargs, name", [
    (dict(steal=[0.1, 1.0]), "steal"), (dict(steal=-0.1), "steal"), (dict(max_ceiling_loss=1.5), "max_ceiling_loss"),
    (dict(arrival_rate=-3.0), "arrival_rate"), (dict(servers=0), "servers"), (dict(discipline="rr"), "discipline"),
    (dict(slo={1.5: 0.5}), "slo quantile")])
def test_bad_input_names_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        steal_whatif(0.025, **kwargs)
    with pytest.raises(ValueError, match="service"):
        steal_whatif(Service.empirical([0.01, 0.02]))


def _interrupted(rng, mean, steal, period, n):
    """CPU times of exponential requests interrupted by steal periods of constant length ``period``
    arriving as a Poisson process of rate r during service, r period / (1 + r period) = steal."""
    x = rng.exponential(mean, n)
    rate = steal / ((1 - steal) * period)
    return x + period * rng.poisson(rate * x)


def test_fine_grained_steal_is_a_slower_cpu_against_the_simulator():
    # 10 ms requests, 20 % steal in 0.5 ms slices, 56 QPS (70 % busy at the reduced speed).
    rng = np.random.default_rng(3)
    mean, s, lam = 0.010, 0.2, 56.0
    svc = Service.empirical(_interrupted(rng, mean, s, 0.0005, 400_000))
    run = simulate(lam, svc, "fcfs", horizon=4000.0, seed=11)
    slowed = Service.exponential(mean / (1 - s))
    m = run.confidence_interval("mean", level=0.99, warmup=10.0)
    p = run.confidence_interval(0.99, level=0.99, warmup=10.0)
    assert m.low <= fcfs.mean_response(lam, slowed) <= m.high
    assert p.low <= fcfs.response_quantile(0.99, lam, slowed) <= p.high
    r = steal_whatif(mean, slo={0.99: 0.5}, steal=[s], discipline="fcfs", arrival_rate=lam)
    assert p.low <= r.table.loc[s, "p99_s"] <= p.high


def test_fine_grained_steal_under_processor_sharing_on_four_cores_against_the_simulator():
    # The default discipline on several cores: 10 ms requests, 20 % steal in 0.5 ms slices, 224 QPS
    # (70 % busy at the reduced speed) on four PS cores; the mean and p99 of cores slowed by the
    # steal inside the simulation's 99 % batch-means intervals.
    rng = np.random.default_rng(5)
    mean, s, c = 0.010, 0.2, 4
    lam = 0.7 * c / (mean / (1 - s))
    svc = Service.empirical(_interrupted(rng, mean, s, 0.0005, 400_000))
    run = simulate(lam, svc, "ps", servers=c, horizon=3000.0, seed=13)
    m = run.confidence_interval("mean", level=0.99, warmup=10.0)
    p = run.confidence_interval(0.99, level=0.99, warmup=10.0)
    r = steal_whatif(mean, servers=c, slo={0.99: 0.5}, steal=[s], discipline="ps", arrival_rate=lam)
    assert p.low <= r.table.loc[s, "p99_s"] <= p.high
    assert m.low <= ps.mean_response(lam, Service.exponential(mean / (1 - s)), c) <= m.high


def test_long_steal_periods_hurt_more_than_the_model_says():
    # The same 20 % as 50 ms periods: Gaver's extra variance E[S] s v / (1 - s) raises the scv from
    # 1 to 1.8; the reduced-speed model is optimistic, Pollaczek-Khinchine with that scv is right.
    rng = np.random.default_rng(4)
    mean, s, lam, v = 0.010, 0.2, 56.0, 0.05
    svc = Service.empirical(_interrupted(rng, mean, s, v, 400_000))
    run = simulate(lam, svc, "fcfs", horizon=4000.0, seed=12)
    m = run.confidence_interval("mean", level=0.99, warmup=10.0)
    assert m.low > fcfs.mean_response(lam, Service.exponential(mean / (1 - s)))
    scv = 1 + mean * s * v / (1 - s) / (mean / (1 - s)) ** 2
    assert m.low <= fcfs.mean_response(lam, Service.gamma(mean / (1 - s), scv)) <= m.high
    # The planner told the period: mean (Pollaczek-Khinchine, exact with Gaver's two moments) and
    # p99 (the two-moment law, approximate) inside the 99 % intervals.
    p = run.confidence_interval(0.99, level=0.99, warmup=10.0)
    r = steal_whatif(mean, slo={0.99: 0.5}, steal=[s], discipline="fcfs", arrival_rate=lam, steal_period=v)
    assert p.low <= r.table.loc[s, "p99_s"] <= p.high, (p, r.table)
    fine = steal_whatif(mean, slo={0.99: 0.5}, steal=[s], discipline="fcfs", arrival_rate=lam)
    assert fine.table.loc[s, "p99_s"] < p.low and r.ceiling_qps == fine.ceiling_qps and r.slo_steal < fine.slo_steal
    with pytest.raises(ValueError, match="steal_period"):
        steal_whatif(mean, steal=[s], discipline="ps", steal_period=v)


def test_cli_steal_table_json_and_errors():
    import json

    code, out, _ = run_cli("steal", "--cpu", "25ms", "--discipline", "fcfs", "--steal", "0,10%", "--qps", "25",
                       "--max-loss", "20%", "--json")
    data = json.loads(out)
    assert code == 0 and data["slo_steal"] == pytest.approx(1 - (25 + LN100 / 0.5) / 40, rel=1e-6)
    assert [row["ceiling_qps"] for row in data["rows"]] == pytest.approx([40 - LN100 / 0.5, 36 - LN100 / 0.5])
    code, out, _ = run_cli("steal", "--cpu", "25ms", "--discipline", "fcfs", "--qps", "25")
    assert code == 0 and "move host above 14.5 % steal" in out
    code, out, _ = run_cli("steal", "--cpu", "25ms", "--discipline", "fcfs", "--qps", "25", "--steal-period", "50ms",
                           "--json")
    assert code == 0 and json.loads(out)["slo_steal"] < data["slo_steal"]
    code, _, err = run_cli("steal", "--cpu", "25ms", "--steal-period", "50ms")
    assert code == 2 and "--steal-period" in err and "Traceback" not in err
    for args, flag in ((["--steal", "0,150%"], "--steal"), (["--max-loss", "0"], "--max-loss")):
        code, _, err = run_cli("steal", "--cpu", "25ms", *args)
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1 and flag in err
