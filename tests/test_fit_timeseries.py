"""capacity.fit.from_timeseries: a dashboard export, one row per window.

Reference: percentiles of the exact M/G/1 FCFS model (capacity.fcfs) at a day's loads, written
as a dashboard exports them; the fit must give back the CPU law, and every unit must come from
a column's name or be stated.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capacity import Service, fcfs
from capacity.exceptions import FitWarning
from capacity.fit import from_timeseries

SVC = Service.lognormal(0.02, 2.0)
RATES = np.linspace(5.0, 30.0, 12)


def _export(p50="p50_ms", p99="p99_ms", scale=1e3, cpu=("cpu_percent", 100.0)):
    cols = {"time": pd.date_range("2026-12-01", periods=RATES.size, freq="1min").astype(str), "qps": RATES}
    if cpu is not None:
        cols[cpu[0]] = cpu[1] * RATES * 0.02
    cols[p50] = scale * np.asarray(fcfs.response_quantile(0.5, RATES, SVC))
    cols[p99] = scale * np.asarray(fcfs.response_quantile(0.99, RATES, SVC))
    return pd.DataFrame(cols)


@pytest.mark.parametrize("p50,p99,scale", [("p50_ms", "p99_ms", 1e3), ("latency_p50 (s)", "latency_p99 (s)", 1.0),
                                           ("P50[ms]", "p99 ms", 1e3), ("p50_seconds", "p99_seconds", 1.0),
                                           ("http.p50_us", "http.p99_us", 1e6)])
def test_units_come_from_the_column_names(tmp_path, p50, p99, scale):
    path = tmp_path / "day.csv"
    _export(p50, p99, scale).to_csv(path, index=False)
    fit = from_timeseries(path, discipline="fcfs")
    assert fit.cpu_per_request_ == pytest.approx(0.02, rel=1e-6)
    assert fit.scv_ == pytest.approx(2.0, rel=1e-3)
    assert fit.source_["rows_used"] == RATES.size
    assert fit.source_["percentiles"] == {p50: 0.5, p99: 0.99}


def test_a_unitless_latency_column_is_refused_or_stated():
    df = _export("p50", "p99")
    with pytest.raises(ValueError, match="unit is not in its name.*duration_unit='ms'"):
        from_timeseries(df, discipline="fcfs")
    fit = from_timeseries(df, discipline="fcfs", duration_unit="ms")
    assert fit.cpu_per_request_ == pytest.approx(0.02, rel=1e-6)


@pytest.mark.parametrize("cpu,expected", [(("cpu_percent", 100.0), 0.02), (("cpu_utilization", 1.0), 0.02),
                                          (("busy_cores", 1.0), 0.02)])
def test_cpu_columns_of_each_kind(cpu, expected):
    fit = from_timeseries(_export(cpu=cpu), discipline="fcfs")
    assert fit.cpu_per_request_ == pytest.approx(expected, rel=1e-9)
    assert "utilisation law" in fit.summary.loc["cpu_per_request", "note"]


def test_bad_cpu_columns_are_refused():
    with pytest.raises(ValueError, match="percentage .*fraction .*busy cores"):
        from_timeseries(_export(cpu=("cpu", 100.0)), discipline="fcfs")
    with pytest.raises(ValueError, match="over 100 %"):
        from_timeseries(_export(cpu=("cpu_percent", 100.0 * 50)), discipline="fcfs")


def test_counts_per_window_and_dropped_rows():
    df = _export(cpu=None).rename(columns={"qps": "requests"})
    df["requests"] = df["requests"] * 60.0
    df.loc[3, "p99_ms"] = np.nan
    with pytest.warns(FitWarning, match="1 of 12 row"):
        fit = from_timeseries(df, discipline="fcfs")
    assert fit.source_["rows_used"] == 11
    assert fit.cpu_per_request_ == pytest.approx(0.02, rel=1e-4)
    lo, hi = fit.summary.loc["cpu_per_request", ["lower", "upper"]]
    assert lo < 0.02 < hi       # counts give n_requests, hence intervals
    with pytest.raises(ValueError, match="window length is unknown"):
        from_timeseries(df.drop(columns="time"), discipline="fcfs")


def test_no_rate_column_is_refused():
    with pytest.raises(ValueError, match="no request-rate column"):
        from_timeseries(_export().drop(columns="qps"))
    with pytest.raises(ValueError, match="cannot read"):
        from_timeseries("/nonexistent/day.csv")
