"""Tests of capacity.incident: the seed incident's traffic, and the fixes compared on it.

Sources of the expected values: the seed article's measurements (data/incident_facts.toml), the
exact simulator capacity.sim.simulate (through capacity.overload.replay), and the rule that picks
the winning fix, applied by hand to the result's own table.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import warnings

import pandas as pd
import pytest

import capacity
from capacity import Service, incident
from capacity import overload as ov
from capacity._result import Result

SMALL = pd.Series([5.0] * 10 + [40.0] * 3 + [5.0] * 47)


@pytest.fixture(scope="module")
def small_what_if():
    return incident.what_if(SMALL, Service.deterministic(0.1), timeout=5.0, seed=1)


def test_incident_traffic_shape():
    """The reconstructed series holds the article's three measured rates."""
    r = incident.incident_traffic(seed=1, horizon=600)
    assert len(r) == 600 and r.max() == 67.0 and r.idxmax() == 300
    assert (r == 20.0).sum() == 10
    base = r[(r != 20.0) & (r != 67.0)]
    assert base.between(6.0, 10.0).all()
    with pytest.raises(ValueError, match="horizon"):
        incident.incident_traffic(horizon=0)
    with pytest.raises(ValueError, match="peak_at"):
        incident.incident_traffic(horizon=10, peak_at=20)
    with pytest.raises(ValueError, match="base"):
        incident.incident_traffic(base=(-1.0, 5.0))


def test_what_if_fixes_the_incident():
    """Same arrivals for every scenario (the collapse of tests/test_overload.py's
    replay test, shorter run):
    cluster mode (4 processes) and the cache (CPU x 0.2) remove every timeout
    and bring the worst latency far below the original's; the rate limit at
    capacity (10/s) rejects requests and removes the timeouts too; FCFS at
    least answers a majority in time."""
    traffic = incident.incident_traffic(seed=4, horizon=300, base=(8.0, 8.0), peak_at=100, peak_seconds=5)
    df = incident.what_if(traffic, Service.deterministic(incident.INCIDENT_COST_FROM_LOG), seed=4).table
    assert list(df.index) == ["original", "cluster", "cache", "rate_limit", "fcfs"]
    orig = df.loc["original"]
    assert orig["max_latency"] > 30.0 and orig["timed_out"] > 250
    for name in ["cluster", "cache"]:
        assert df.loc[name, "timed_out"] == 0
        assert df.loc[name, "max_latency"] < orig["max_latency"] / 5
    assert df.loc["rate_limit", "rejected"] > 0 and df.loc["rate_limit", "timed_out"] == 0
    assert df.loc["fcfs", "ok"] > orig["ok"]
    assert (df["requests"] == orig["requests"]).all()


# ============================================================================ WhatIf, the result of what_if
def test_what_if_returns_a_result_with_its_table(small_what_if):
    w = small_what_if
    assert isinstance(w, incident.WhatIf) and isinstance(w, Result)
    assert list(w.table.index) == list(incident.SCENARIOS)
    assert w.table.index.name == "scenario"
    assert list(w.table.columns) == ["requests", "ok", "timed_out", "rejected", "goodput", "max_latency",
                                     "p99_latency", "recovery_time"]
    frame = w.to_frame()
    pd.testing.assert_frame_equal(frame, w.table)
    frame.iloc[0, 0] = -1  # a copy: the result stays as it was
    assert w.table.iloc[0, 0] != -1


def test_what_if_best_is_the_fix_with_most_requests_in_time(small_what_if):
    """The rule applied by hand to the table: most ok among the four fixes, ties by lower p99."""
    w = small_what_if
    fixes = w.table.drop(index="original")
    top = fixes["ok"].max()
    tied = fixes[fixes["ok"] == top]
    assert w.best == tied["p99_latency"].fillna(math.inf).idxmin()
    assert w.best != "original"


def test_what_if_str_says_which_fix_wins_and_by_how_much(small_what_if):
    w = small_what_if
    text = str(w)
    assert text == w.explanation and "\n" not in text
    orig, best = w.table.loc["original"], w.table.loc[w.best]
    gain = int(best["ok"]) - int(orig["ok"])
    assert gain > 0  # 40/s for 3 s at 0.1 s each, 5 s timeout: the original times requests out
    assert f"Best fix: {w.best}" in text
    assert f"{gain:,} more answered in time" in text
    assert f"answers {int(orig['ok']):,} within the timeout" in text
    for other in incident.SCENARIOS[1:]:
        assert other in text


def test_what_if_repr_and_to_dict(small_what_if):
    w = small_what_if
    assert repr(w) == f"WhatIf(best={w.best!r}, table=<table 5 rows>)"
    d = w.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["best"] == w.best and d["explanation"] == w.explanation
    assert [row["scenario"] for row in d["table"]] == list(incident.SCENARIOS)
    assert d["table"][0]["ok"] == int(w.table.loc["original", "ok"])


def test_what_if_when_nothing_needs_fixing():
    """Light load: nobody times out anywhere, so no fix answers more in time; the words say so."""
    w = incident.what_if(pd.Series([2.0] * 30), Service.deterministic(0.05), seed=2)
    assert (w.table["timed_out"] == 0).all()
    assert "No fix answers more requests in time" in str(w) or "No fix does better" in str(w)


# ============================================================================ deprecations
def test_incident_traffic_duration_warns_and_means_horizon():
    with pytest.warns(DeprecationWarning, match="'duration' is now 'horizon'"):
        old = incident.incident_traffic(seed=3, duration=120)
    pd.testing.assert_series_equal(old, incident.incident_traffic(seed=3, horizon=120))
    import inspect

    params = inspect.signature(incident.incident_traffic).parameters
    assert "horizon" in params and "duration" not in params


@pytest.mark.parametrize("name", ["incident_traffic", "what_if", "INCIDENT_COST_FROM_CPU",
                                  "INCIDENT_COST_FROM_LOG"])
def test_old_overload_paths_warn_with_the_new_one(name):
    with pytest.warns(DeprecationWarning, match=re.escape(f"capacity.overload.{name} is now "
                                                          f"capacity.incident.{name}")):
        old = getattr(ov, name)
    assert old is getattr(incident, name)
    assert name not in ov.__all__


def test_old_what_if_path_gives_the_same_answer(small_what_if):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = ov.what_if(SMALL, Service.deterministic(0.1), timeout=5.0, seed=1)
    pd.testing.assert_frame_equal(old.table, small_what_if.table)
    assert old.best == small_what_if.best


def test_incident_is_a_lazy_module_of_the_package():
    assert capacity.incident is incident
    assert incident.__all__ == ["INCIDENT_COST_FROM_CPU", "INCIDENT_COST_FROM_LOG", "WhatIf",
                                "incident_traffic", "what_if"]


def test_overload_does_not_import_incident():
    """capacity.incident builds on capacity.overload, never the other way (no import circle):
    importing the package and using it leaves capacity.incident unloaded until an old name is used."""
    code = ("import sys, warnings; import capacity.overload as ov; ov.backlog([1.0], 0.5); "
            "assert 'capacity.incident' not in sys.modules; "
            "warnings.simplefilter('ignore'); ov.INCIDENT_COST_FROM_LOG; "
            "assert 'capacity.incident' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
