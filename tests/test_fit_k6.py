"""capacity.fit.from_k6: the lines ``k6 run --out json=FILE`` writes.

The files are written here the way k6 writes them (a Metric line, then one Point line per
request with an RFC 3339 time stamp in nanoseconds and the duration in milliseconds), from a
seeded simulation of an M/G/1-PS queue at three loads; the fit must give back its CPU law.
"""
from __future__ import annotations

import datetime as dt
import gzip
import json

import numpy as np
import pytest

from capacity import Service, simulate
from capacity.exceptions import FitWarning
from capacity.fit import from_k6

SVC = Service.lognormal(0.02, 1.5)
T0 = dt.datetime(2026, 12, 3, 10, 0, 0, tzinfo=dt.timezone.utc).timestamp()
METRIC = {"type": "Metric", "metric": "http_req_duration",
          "data": {"name": "http_req_duration", "type": "trend", "contains": "time", "thresholds": [],
                   "submetrics": None}}


def _points(rates=(10.0, 20.0, 30.0), seconds=600.0):
    lines, begin = [], 0.0
    for i, rate in enumerate(rates):
        req = simulate(rate, SVC, discipline="ps", horizon=seconds, seed=i).requests
        for end, response in zip(req["completion"] + begin, req["response"]):
            stamp = dt.datetime.fromtimestamp(T0 + end, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")
            lines.append(json.dumps({"type": "Point", "metric": "http_req_duration",
                                     "data": {"time": stamp + "417+00:00", "value": 1e3 * response,
                                              "tags": {"status": "200", "method": "GET"}}}))
        begin += seconds
    return lines


@pytest.fixture(scope="module")
def k6_lines():
    other = json.dumps({"type": "Point", "metric": "vus", "data": {"time": "2026-12-03T10:00:00Z", "value": 5}})
    return [json.dumps(METRIC), other] + _points()


def test_fits_a_k6_run(tmp_path, k6_lines):
    """Three loads of 10 minutes, 60 s windows: E[S] within 3 %, scv within 15 %, the rates
    right, the model chosen PS; a line that is not JSON is skipped and said, and the partial
    last window left out and said."""
    path = tmp_path / "run.json"
    path.write_text("\n".join(k6_lines[:4] + ["not json {"] + k6_lines[4:]) + "\n")
    with pytest.warns(FitWarning) as caught:
        fit = from_k6(path)
    said = " ".join(str(w.message) for w in caught)
    assert "1 line(s) skipped" in said and "partial" in said
    assert fit.cpu_per_request_ == pytest.approx(0.02, rel=0.03)
    assert fit.scv_ == pytest.approx(1.5, rel=0.15)
    assert fit.discipline == "ps"
    rates = np.sort(fit.windows_["arrival_rate"].to_numpy())
    assert rates[:5].mean() == pytest.approx(10.0, rel=0.1) and rates[-5:].mean() == pytest.approx(30.0, rel=0.1)
    assert fit.source_["points"] == len(k6_lines) - 2 and fit.source_["lines_skipped"] == 1


def test_gzip_and_other_metrics(tmp_path, k6_lines):
    path = tmp_path / "run.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(k6_lines) + "\n")
    with pytest.warns(FitWarning, match="partial"):
        fit = from_k6(path, window=120.0, discipline="ps", family="lognormal", delay=None)
    assert fit.cpu_per_request_ == pytest.approx(0.02, rel=0.03)
    assert fit.source_["window"] == 120.0


def test_malformed_runs_are_refused(tmp_path, k6_lines):
    no_metric = tmp_path / "a.json"
    no_metric.write_text(json.dumps({"type": "Point", "metric": "vus", "data": {"time": "x", "value": 1}}) + "\n")
    with pytest.raises(ValueError, match="no Metric line for 'http_req_duration'"):
        from_k6(no_metric)
    early = tmp_path / "b.json"
    early.write_text("\n".join(k6_lines[2:5]) + "\n")
    with pytest.raises(ValueError, match="point before its Metric line"):
        from_k6(early)
    counts = tmp_path / "c.json"
    counts.write_text(json.dumps({"type": "Metric", "metric": "http_req_duration",
                                  "data": {"type": "counter", "contains": "default"}}) + "\n")
    with pytest.raises(ValueError, match="not durations"):
        from_k6(counts)
    with pytest.raises(ValueError, match="cannot read"):
        from_k6(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="window"):
        from_k6(counts, window=0)
