"""capacity.plan's answers: one result protocol, same-kind answers, this release's renames.

* Every plan result is a :class:`capacity._result.Result`: a short ``repr`` of its headline
  numbers, ``str`` = its explanation, ``to_frame()`` a DataFrame, ``to_dict()`` plain JSON.
* Every "how much QPS" answer is a :class:`~capacity.plan.Ceiling` (``ceiling_from_curve`` too),
  ``burst_tolerance`` a :class:`~capacity.plan.BurstTolerance`.
* The names renamed in this release (docs/glossary.md, last table) warn naming the new one and
  give the same answer.
"""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from capacity import Service, plan
from capacity._result import Result


def _results():
    curve = plan.response_curve(Service.gamma(0.010, 0.5), 2, "fcfs", quantiles=(0.5, 0.99), delay=0.003)
    return {
        "Ceiling": plan.qps_ceiling(0.025, slo={0.99: 0.5, 0.999: 0.6}, discipline="fcfs"),
        "Ceiling[array]": plan.qps_ceiling(0.025, servers=[1, 2, 4], slo={0.99: 0.5}, discipline="fcfs"),
        "Ceiling[curve]": plan.ceiling_from_curve(curve, {0.99: 0.08}),
        "ServersNeeded": plan.servers_needed(500.0, 0.025, {0.99: 0.2}, discipline="fcfs", servers_per_machine=4,
                                             redundancy=1),
        "TimeoutSafeRate": plan.timeout_safe_rate(0.025, 1, 1.0, discipline="fcfs", burst_qps=60.0),
        "BurstTolerance": plan.burst_tolerance(0.025, 1, 1.0, 60.0, "fcfs"),
        "TimeoutAdvice": plan.recommend_timeout(None, core=False, service=0.025, arrival_rate=20.0,
                                                discipline="fcfs"),
        "ResponseCurve": curve,
        "GCWhatIf": plan.gc_whatif(0.01, 0.2, 0.02, 5.0, new_gc_cpu_share=0.1, measured_gain=0.05),
        "RateLimits": plan.rate_limits(0.025, 1, 4, 1.0, peak_qps=150.0, discipline="fcfs"),
        "RateLimits[no peak]": plan.rate_limits(0.025, 1, 4, 1.0, discipline="fcfs"),
        "ScalingComparison": plan.compare_scaling(100.0, 0.025, {0.99: 0.5},
                                                  [plan.ScalingOption(1, 4), plan.ScalingOption(2, 2, "random")],
                                                  discipline="fcfs"),
    }


NAMES = ["Ceiling", "Ceiling[array]", "Ceiling[curve]", "ServersNeeded", "TimeoutSafeRate", "BurstTolerance",
         "TimeoutAdvice", "ResponseCurve", "GCWhatIf", "RateLimits", "RateLimits[no peak]", "ScalingComparison"]


@pytest.fixture(scope="module")
def results():
    out = _results()
    assert list(out) == NAMES
    return out


@pytest.mark.parametrize("name", NAMES)
def test_every_plan_result_follows_the_protocol(results, name):
    res = results[name]
    cls = name.split("[")[0]
    assert isinstance(res, Result) and type(res).__name__ == cls
    with pytest.raises(AttributeError):   # frozen
        res.explanation = "x"
    text = repr(res)
    assert text.startswith(f"{cls}(") and "\n" not in text and len(text) < 160, text
    assert all(f"{field}=" in text for field in type(res)._headline)
    explained = str(res)
    assert explained != text and len(explained) > 40          # words, not the repr
    if hasattr(res, "explanation"):
        assert explained == res.explanation
    frame = res.to_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) >= 1 and len(frame.columns) >= 1
    d = res.to_dict()
    assert json.loads(json.dumps(d)) == d                      # plain JSON, nothing lost on a round trip


def test_protocol_details(results):
    ceiling = results["Ceiling"]
    assert repr(ceiling) == "Ceiling(qps=28.49, capacity_qps=40, utilization=0.7122, binding=0.999)"
    frame = results["Ceiling[array]"].to_frame()
    assert frame["qps"].tolist() == pytest.approx(results["Ceiling[array]"].qps.tolist())
    assert frame["servers"].tolist() == [1, 2, 4] and "rates[0.99]" in frame.columns
    assert ceiling.to_dict()["rates"] == {"0.99": pytest.approx(40 - math.log(100) / 0.5),
                                          "0.999": pytest.approx(40 - math.log(1000) / 0.6)}
    curve = results["ResponseCurve"]
    assert list(curve.to_frame().columns) == ["utilization", "arrival_rate", "p50", "p99"]
    d = curve.to_dict()
    assert "unit" not in d and np.allclose(d["response"], curve.response)
    assert d["service"] == {"family": "gamma", "mean_s": pytest.approx(0.010), "scv": pytest.approx(0.5)}
    assert "p50/p99 response time" in str(curve) and "3 ms" in str(curve)
    gc = results["GCWhatIf"]
    assert gc.to_frame().index.tolist() == ["before", "after"]
    limits = results["RateLimits"]
    assert limits.to_frame().index.tolist()[0] == "all up, limited"
    row = results["RateLimits[no peak]"].to_frame()
    assert len(row) == 1 and row.loc[0, "machine_limit"] == pytest.approx(0.8 * (40 - math.log(1000)), rel=1e-6)
    assert results["ScalingComparison"].to_frame().index.name == "option"
    # to_dict of a table result carries the table, as records.
    assert [r["index"] for r in gc.to_dict()["table"]] == ["before", "after"]


# ------------------------------------------------------------------------------------------------
# The same kind of question gets the same kind of answer


def test_ceiling_from_curve_is_a_ceiling_like_the_solvers():
    svc = Service.hyperexponential(0.010, 4.0)
    slo = {0.99: 0.25, 0.999: 0.6}
    curve = plan.response_curve(svc, 2, "fcfs", quantiles=(0.99, 0.999), delay=0.02)
    got = plan.ceiling_from_curve(curve, slo)
    fast = plan.qps_ceiling(svc, 2, slo, discipline="fcfs", delay=0.02, method="curve")
    exact = plan.qps_ceiling(svc, 2, slo, discipline="fcfs", delay=0.02)
    assert isinstance(got, plan.Ceiling)
    assert got.qps == pytest.approx(fast.qps, rel=1e-12) and got.binding == fast.binding == exact.binding
    assert got.rates.keys() == exact.rates.keys()
    for q in slo:
        assert got.rates[q] == pytest.approx(fast.rates[q], rel=1e-12)
    assert got.capacity_qps == exact.capacity_qps and got.utilization == pytest.approx(got.qps / 200.0)
    assert got.feasible and got.servers == 2 and got.discipline == "fcfs" and got.delay == 0.02
    assert got.slo == {0.99: 0.25, 0.999: 0.6}
    assert "binds first" in str(got) and "hyperexponential" in str(got)


def test_ceiling_from_curve_arrays_and_infeasible_reasons():
    curve = plan.response_curve(Service.exponential(0.010), 1, "fcfs", quantiles=(0.99,), delay=0.01)
    t = np.array([0.005, 0.04, 0.1, 1.0])
    got = plan.ceiling_from_curve(curve, {0.99: t})
    exact = [plan.qps_ceiling(0.010, 1, {0.99: x}, discipline="fcfs", delay=0.01) for x in t]
    assert got.qps.shape == (4,)
    np.testing.assert_allclose(got.qps, [e.qps for e in exact], rtol=2e-4)
    np.testing.assert_array_equal(got.feasible, [e.feasible for e in exact])   # [False, False, True, True]
    assert "4 configurations" in str(got)
    # Scalar infeasible thresholds say why, as the solver does.
    delay_only = plan.ceiling_from_curve(curve, {0.99: 0.005})
    assert delay_only.qps == 0.0 and "delay alone" in str(delay_only)
    idle = plan.ceiling_from_curve(curve, {0.99: 0.04})
    assert idle.qps == 0.0 and "idle server" in str(idle)


def test_burst_tolerance_is_a_result_with_the_same_seconds():
    svc = Service.exponential(0.025)
    b = plan.burst_tolerance(svc, 1, 1.0, 60.0, "fcfs", delay=0.1)
    assert isinstance(b, plan.BurstTolerance)
    assert b.burst_seconds == pytest.approx((1.0 - 0.1 - 0.025) / 0.5, rel=1e-12)
    assert (b.burst_qps, b.timeout, b.capacity_qps, b.delay) == (60.0, 1.0, pytest.approx(40.0), 0.1)
    assert b.burst_seconds == plan.timeout_safe_rate(svc, 1, 1.0, discipline="fcfs", delay=0.1,
                                                     burst_qps=60.0).burst_seconds
    assert "1.75 s" in str(b) and "1.5 x capacity" in str(b)
    assert "indefinitely" in str(plan.burst_tolerance(svc, 1, 1.0, 30.0, "ps"))
    assert plan.burst_tolerance(svc, 1, 0.02, 60.0, "fcfs").burst_seconds == 0.0
    assert "even on an idle server" in str(plan.burst_tolerance(svc, 1, 0.02, 60.0, "fcfs"))
    many = plan.burst_tolerance(svc, 1, 1.0, np.array([30.0, 60.0, 80.0]), "fcfs")
    assert many.burst_seconds.shape == (3,) and "1 within capacity" in str(many)
    assert json.loads(json.dumps(many.to_dict()))["burst_seconds"][0] == "inf"


# ------------------------------------------------------------------------------------------------
# Renamed in this release: the old name warns naming the new one and gives the same answer


def _warns_with(new: str):
    return pytest.warns(DeprecationWarning, match=new)


def test_latency_curve_and_latency_curve_class_are_the_response_curve():
    with _warns_with("capacity.plan.response_curve"):
        old = plan.latency_curve
    assert old is plan.response_curve
    with _warns_with("capacity.plan.ResponseCurve"):
        assert plan.LatencyCurve is plan.ResponseCurve
    with _warns_with("response_curve"):
        from capacity.plan import latency_curve  # noqa: F401 - the import itself is checked
    with _warns_with("capacity.plan.curves.response_curve"):
        from capacity.plan.curves import latency_curve as from_module
    assert from_module is plan.response_curve
    with pytest.raises(AttributeError, match="no attribute 'lateny_curve'"):
        plan.lateny_curve   # noqa: B018


def test_curve_latency_and_frame_warn_and_match():
    curve = plan.response_curve(0.010, 1, "fcfs", quantiles=(0.99,))
    with _warns_with(r"ResponseCurve.latency is now .response"):
        assert curve.latency is curve.response
    with _warns_with(r"ResponseCurve.frame is now ResponseCurve.to_frame"):
        old = curve.frame()
    pd.testing.assert_frame_equal(old, curve.to_frame())


def test_ratio_is_utilization():
    c = plan.qps_ceiling(0.025, slo={0.99: 0.5}, discipline="fcfs")
    with _warns_with(r"Ceiling.ratio is now .utilization"):
        assert c.ratio == c.utilization == pytest.approx(c.qps / 40.0)
    s = plan.timeout_safe_rate(0.025, 1, 1.0, discipline="fcfs")
    with _warns_with(r"TimeoutSafeRate.ratio is now .utilization"):
        assert s.ratio == s.utilization == pytest.approx(s.qps / 40.0)


def test_dispatch_response_workers_is_processes():
    new = plan.dispatch_response(0.99, 2.0, 1.0, processes=4, dispatch="round_robin", discipline="fcfs")
    with _warns_with("'workers' is now 'processes'"):
        old = plan.dispatch_response(0.99, 2.0, 1.0, workers=4, dispatch="round_robin", discipline="fcfs")
    assert old == new == plan.dispatch_response(0.99, 2.0, 1.0, 4, dispatch="round_robin", discipline="fcfs")
    with pytest.raises(TypeError, match="both"):
        plan.dispatch_response(0.99, 2.0, 1.0, workers=4, processes=4)


def test_scaling_option_workers_is_total_processes():
    opt = plan.ScalingOption(3, 4, "least_connections")
    assert opt.total_processes == 12
    with _warns_with(r"ScalingOption.workers is now .total_processes"):
        assert opt.workers == 12


def test_new_names_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        curve = plan.response_curve(0.010, 1, "fcfs", quantiles=(0.99,))
        _ = curve.response, curve.to_frame(), str(curve), repr(curve)
        c = plan.ceiling_from_curve(curve, {0.99: 0.1})
        _ = c.utilization, c.to_dict(), str(c)
        plan.dispatch_response(0.99, 2.0, 1.0, 4, discipline="fcfs")
        assert plan.ScalingOption(1, 2).total_processes == 2
