"""Tests of capacity.incident: the seed incident's traffic, and the fixes compared on it.

Sources of the expected values: the seed article's measurements (data/incident_facts.toml), the
exact simulator capacity.sim.simulate (through capacity.overload.replay), and the rule that picks
the winning fix, applied by hand to the result's own table.
"""
from __future__ import annotations

import pytest

from capacity import Service, incident


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

