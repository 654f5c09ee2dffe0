"""Simulation results that fit in memory (issue 18, point 4): a compact per-request table, a
summary computed in one pass for long runs, and a ceiling (``max_memory``) the user can set."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from capacity import Service
from capacity.sim import simulate
from capacity.sim._summary import RELATIVE_RESOLUTION

SUMMARY_CASES = [
    dict(),
    dict(servers=3),
    dict(discipline="ps"),
    dict(discipline="ps", servers=2, processes=3),
    dict(processes=4, dispatch="random"),
    dict(timeout=5.0, on_timeout="drop"),
    dict(discipline="ps", timeout=5.0, on_timeout="drop"),
    dict(discipline="rr", slices=3),
    dict(processes=3, dispatch="least_connections", timeout=4.0),
    dict(queue="adaptive_lifo", timeout=5.0, on_timeout="drop"),
    dict(drain=False, timeout=3.0),
    dict(timeout=5.0, on_timeout="deadline", retries=2),
]


def _pair(load: float, **kw):
    cores = kw.get("servers", 1) * kw.get("processes", 1)
    args = (load * cores, Service.lognormal(1.0, 1.5))
    full = simulate(*args, horizon=3000, seed=5, keep="requests", **kw)
    summary = simulate(*args, horizon=3000, seed=5, keep="summary", **kw)
    return full, summary


# ---------------------------------------------------------------------------- the compact table
def test_table_is_compact_and_holds_the_same_values():
    """Integer columns in the smallest dtype that holds them, times in float64; the values are
    those of the 64-bit layout (request ids are row numbers, machines the process's machine)."""
    run = simulate(30.0, 0.1, processes=3, machines=2, horizon=2000, seed=1, timeout=1.0, retries=1)
    req = run.requests
    assert {c: req[c].dtype for c in ("attempt", "request_id", "process", "machine")} == \
        {"attempt": np.int8, "request_id": np.int32, "process": np.int8, "machine": np.int8}
    for c in ("arrival", "start", "completion", "response", "service", "departure", "cpu", "deadline"):
        assert req[c].dtype == np.float64
    n0 = int((req["attempt"] == 0).sum())
    np.testing.assert_array_equal(req["request_id"].to_numpy()[:n0], np.arange(n0))
    np.testing.assert_array_equal(req["machine"].astype(np.int64), req["process"].astype(np.int64) // 3)
    assert set(req["attempt"]) == {0, 1}
    # 8 float64 columns + outcome, attempt, process, machine (1 byte each) + request_id (4),
    # plus the outcome's four category names: 72 bytes a row (97 with 64-bit integers).
    used = int(req.memory_usage(index=False, deep=False).sum())
    assert len(req) * 72 <= used <= len(req) * 72 + 1000


def test_chunked_lindley_recursion_is_the_one_pass_one():
    from capacity.sim._engines import _LINDLEY_CHUNK, _fcfs_one, _lindley_waits
    rng = np.random.default_rng(7)
    n = 2 * _LINDLEY_CHUNK + 777
    for load in (0.7, 1.1):
        a = np.sort(rng.uniform(0, n / load, n))
        x = rng.exponential(1.0, n)
        w = _lindley_waits(a, x)  # one call over the whole run
        trace = _fcfs_one(a, x)
        np.testing.assert_array_equal(trace.start, a + w)
        np.testing.assert_array_equal(trace.response, w + x)


# ---------------------------------------------------------------------------- summary vs table
@pytest.mark.slow
@pytest.mark.parametrize("kw", SUMMARY_CASES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "mm1")
@pytest.mark.parametrize("load", [0.8, 1.3])
def test_summary_answers_as_the_table_does(kw, load):
    full, summary = _pair(load, **kw)
    assert (full.keep, summary.keep) == ("requests", "summary")
    pd.testing.assert_frame_equal(summary.per_second, full.per_second, check_exact=False, rtol=1e-9, atol=1e-9)
    assert summary.utilization() == pytest.approx(full.utilization(), rel=1e-10)
    assert summary.mean_number() == pytest.approx(full.mean_number(), rel=1e-10)
    d_full, d_summary = full.to_dict(), summary.to_dict()
    for key in ("n_requests", "n_retries", "outcomes", "end", "horizon"):
        assert d_summary[key] == d_full[key]
    segment = summary._digest.segment
    for warmup in (0.0, 300.0, 299.5):
        kept = math.ceil(warmup / segment) * segment  # a summary's warmup: whole segments
        assert summary.mean_response(warmup) == pytest.approx(full.mean_response(kept), rel=1e-12)
        levels = np.array([0.1, 0.5, 0.9, 0.99, 0.999])
        exact = full.response_quantile(levels, kept)
        np.testing.assert_allclose(summary.response_quantile(levels, warmup), exact,
                                   rtol=RELATIVE_RESOLUTION * (1 + 1e-9))
    w300 = math.ceil(300 / segment) * segment
    ci_full, ci_summary = full.confidence_interval(warmup=w300), summary.confidence_interval(warmup=300)
    assert ci_summary.estimate == pytest.approx(ci_full.estimate, rel=1e-12)
    q_full, q_summary = full.confidence_interval(0.9, warmup=w300), summary.confidence_interval(0.9, warmup=300)
    assert q_summary.estimate == pytest.approx(q_full.estimate, rel=RELATIVE_RESOLUTION * (1 + 1e-9))
    if not kw.get("retries"):
        # Same batches but cut at whole segments (1 to 9 s here): the half-widths agree closely.
        assert ci_summary.half_width == pytest.approx(ci_full.half_width, rel=0.1)
        assert q_summary.half_width == pytest.approx(q_full.half_width, rel=0.1)
    if kw.get("discipline", "fcfs") == "fcfs":
        assert summary.mean_response(300) >= summary.confidence_interval(warmup=300, metric="wait").estimate
        assert summary.confidence_interval(warmup=300, metric="wait").estimate == \
            pytest.approx(full.confidence_interval(warmup=w300, metric="wait").estimate, rel=1e-12)


def test_summary_result_refuses_the_rows_and_says_why():
    run = simulate(0.9, 1.0, horizon=2000, seed=2, keep="summary")
    with pytest.raises(ValueError, match="keep='requests'.*max_memory"):
        run.requests
    with pytest.raises(ValueError, match="requests: this result keeps a summary"):
        run.to_frame()
    n = run.to_dict()["n_requests"]
    assert repr(run).endswith(f"requests=<summary of {n} rows>)")
    assert f"Simulated {n:,} requests" in str(run)
    with pytest.raises(ValueError, match="metric 'wait' needs a FCFS run"):
        simulate(0.9, 1.0, discipline="ps", horizon=200, seed=2, keep="summary").confidence_interval(metric="wait")
    with pytest.raises(ValueError, match="batches"):
        simulate(0.9, 1.0, horizon=20, seed=2, keep="summary").confidence_interval(batches=30)


# ---------------------------------------------------------------------------- the ceiling
def test_auto_keeps_the_table_under_the_ceiling_and_a_summary_above():
    small = simulate(100.0, 0.005, horizon=100, seed=1)  # 1e4 rows: far under the default 1 GB
    assert small.keep == "requests"
    # 5e5 rows: about 165 MB with the table, 135 MB as a summary.
    args = dict(horizon=5000, seed=1)
    full = simulate(100.0, 0.005, keep="requests", max_memory=None, **args)
    tight = simulate(100.0, 0.005, max_memory="150MB", **args)
    assert tight.keep == "summary" and full.keep == "requests"
    assert tight.mean_response() == pytest.approx(full.mean_response(), rel=1e-12)
    pd.testing.assert_frame_equal(tight.per_second, full.per_second, check_exact=False, rtol=1e-9)
    assert simulate(100.0, 0.005, max_memory=2e8, **args).keep == "requests"


def test_a_run_that_cannot_fit_is_refused_naming_max_memory():
    with pytest.raises(ValueError, match=r"max_memory=1e\+05 bytes is too small for keep='summary'"):
        simulate(100.0, 0.005, horizon=100, seed=1, max_memory=100_000)
    with pytest.raises(ValueError, match="too small for keep='requests'.*keep='summary'"):
        simulate(100.0, 0.005, horizon=100, seed=1, keep="requests", max_memory="1MB")
    # Retries count: every original may come back, so the bound is n * (1 + retries) rows.
    with pytest.raises(ValueError, match="with up to 3 retries each"):
        simulate(100.0, 0.005, horizon=100, seed=1, timeout=1.0, retries=3, max_memory="1MB")


@pytest.mark.parametrize("bad", ["lots", "1 parsec", "-1GB", 0, -5, float("nan"), True, [1e9]])
def test_bad_max_memory_names_the_parameter(bad):
    with pytest.raises(ValueError, match="max_memory"):
        simulate(1.0, 0.1, horizon=10, max_memory=bad)


def test_bad_keep_names_the_parameter():
    with pytest.raises(ValueError, match="keep"):
        simulate(1.0, 0.1, horizon=10, keep="rows")


def test_max_memory_reads_units():
    assert simulate(1.0, 0.1, horizon=10, max_memory="2GiB").max_memory == 2 ** 31
    assert simulate(1.0, 0.1, horizon=10, max_memory=5e8).max_memory == 5e8
    assert math.isinf(simulate(1.0, 0.1, horizon=10, max_memory=None).max_memory)


_CHILD = r"""
import json, resource, sys
from capacity.sim import simulate

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
base = peak()
kw = json.loads(sys.argv[1])
run = simulate(9000.0, 0.0001, horizon=1e7 / 9000.0, seed=1, **kw)
run.per_second; run.confidence_interval(0.99); run.to_dict()
print(json.dumps({"peak": peak() - base, "keep": run.keep, "rows": run.to_dict()["n_requests"]}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("kw", [{}, {"discipline": "ps", "servers": 4}])
def test_ten_million_requests_stay_under_the_default_ceiling(kw):
    """1e7 requests with the default max_memory (1 GB): a summary is kept, and the process's
    peak resident memory above its imports stays under the ceiling (measured in a fresh
    process; run and statistics included)."""
    if kw.get("servers"):
        kw = dict(kw)
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(kw)], capture_output=True, text=True,
                         check=True, timeout=600)
    got = json.loads(out.stdout)
    assert got["keep"] == "summary" and got["rows"] > 9_900_000
    assert got["peak"] < 1e9


def test_replay_reads_a_summary_as_it_reads_the_table():
    from capacity.overload import replay
    rates = pd.Series([5.0] * 200)
    full = replay(rates, 0.3, seed=1, timeout=2.0).to_dict()
    summary = replay(rates, 0.3, seed=1, timeout=2.0, keep="summary").to_dict()
    for key in ("requests", "ok", "timed_out", "goodput", "max_latency", "timeout_fraction"):
        assert summary[key] == full[key]
    assert summary["p99_latency"] == pytest.approx(full["p99_latency"], rel=RELATIVE_RESOLUTION * (1 + 1e-9))


def test_ten_million_requests_through_the_event_engine_are_refused_before_the_run():
    """The event engines need about 115 bytes a row even for a summary: 1e7 requests with
    drops do not fit in the default 1 GB, and the refusal says so at once, with the figures."""
    with pytest.raises(ValueError, match=r"max_memory=1e\+09 bytes is too small for keep='summary'.*MB"):
        simulate(9000.0, 0.0001, horizon=1e7 / 9000.0, seed=1, timeout=0.01, on_timeout="drop")
