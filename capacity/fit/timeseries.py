"""Fit a dashboard export: one row per time window with its QPS, CPU % and latency percentiles.

A Grafana, Datadog or CloudWatch panel exported to CSV gives, per minute (or five), the request
rate, the CPU utilisation and a few percentiles.  :func:`from_timeseries` reads such a table,
takes the units from the column names (``p99_ms``, ``latency_p50 (s)``, ``cpu_percent``) and
fits all rows jointly with :func:`capacity.fit.from_percentiles`.  A column whose unit the name
does not say is refused with a message saying how to state it: a time column read in the wrong
unit is a silently wrong fit by a factor of 1000.
"""
from __future__ import annotations

import math
import os
import re
from typing import Any

import numpy as np

from ..units import parse_quantile
from .percentiles import PercentileFit, from_percentiles

__all__ = ["from_timeseries"]

_TIME_FACTORS = {"us": 1e-6, "µs": 1e-6, "microseconds": 1e-6, "ms": 1e-3, "milliseconds": 1e-3,
                 "s": 1.0, "sec": 1.0, "seconds": 1.0}
# latency_p99_ms, p99 (ms), response_time_p99.9[s], p50_seconds, http.p95 ms
_PERCENTILE = re.compile(
    r"^(?:[a-z_.]*?[_. ])?(p\d+(?:\.\d+)?)(?:[_ .]*[(\[]?\s*(us|µs|ms|s|sec|seconds|milliseconds|microseconds)"
    r"\s*[)\]]?)?$")
_RATE = ("qps", "rps", "requests_per_second", "req_per_sec", "rate", "throughput", "arrival_rate")
_COUNT = ("requests", "count", "request_count", "hits")
_CPU_PERCENT = ("cpu_percent", "cpu_pct", "cpu%", "cpu (%)", "cpu_%", "cpu_usage_percent", "cpu percent")
_CPU_FRACTION = ("cpu_utilization", "cpu_util", "utilization", "cpu_fraction")
_CPU_CORES = ("cpu_cores", "busy_cores", "cpu_seconds_per_second")
_TIME = ("time", "timestamp", "ts", "date", "datetime")


def _norm(name: str) -> str:
    return str(name).strip().lower()


def _read(frame_or_csv):
    import pandas as pd

    if isinstance(frame_or_csv, pd.DataFrame):
        return frame_or_csv.copy()
    if isinstance(frame_or_csv, (str, os.PathLike)):
        try:
            return pd.read_csv(frame_or_csv)
        except (OSError, UnicodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
            raise ValueError(f"frame_or_csv: cannot read {os.fspath(frame_or_csv)!r} as CSV: {reason}") from None
    raise ValueError(f"frame_or_csv must be a pandas DataFrame or a CSV path, got {type(frame_or_csv).__name__}")


def _percentile_columns(df, duration_unit: str | None) -> dict[float, tuple[str, float]]:
    """{q: (column, seconds per unit)} of the percentile columns."""
    out: dict[float, tuple[str, float]] = {}
    for col in df.columns:
        m = _PERCENTILE.match(_norm(col))
        if not m:
            continue
        q = parse_quantile(m.group(1))
        unit = m.group(2)
        if unit is None:
            if duration_unit is None:
                raise ValueError(
                    f"column {col!r}: its unit is not in its name, and a latency read in the wrong unit is "
                    f"wrong by a factor of 1000; rename it (e.g. {m.group(1)}_ms or {m.group(1)}_s) or pass "
                    "duration_unit='ms' (or 's', 'us') for every percentile column without one")
            unit = duration_unit
        if q in out:
            raise ValueError(f"columns {out[q][0]!r} and {col!r} are both the {m.group(1)}")
        out[q] = (col, _TIME_FACTORS[unit])
    if not out:
        raise ValueError(f"no percentile column (p50_ms, p99 (s), latency_p99.9_ms, ...) among {list(df.columns)}")
    return dict(sorted(out.items()))


def _one(df, names: tuple, what: str):
    found = [c for c in df.columns if _norm(c) in names]
    if len(found) > 1:
        raise ValueError(f"several {what} columns: {found}; keep one")
    return found[0] if found else None


def from_timeseries(frame_or_csv, servers: int = 1, *, duration_unit: str | None = None,
                    window: float | None = None, **options) -> PercentileFit:
    """Fit a queue model to a dashboard's per-window QPS, CPU % and latency percentiles.

    Parameters
    ----------
    frame_or_csv : DataFrame or path
        One row per window.  Columns, recognised by name (case-insensitive):

        * percentiles: ``p50_ms``, ``p99 (s)``, ``latency_p99.9_ms``, ``p95_seconds`` -- the
          unit from the name (us, ms, s), else ``duration_unit``; at least one;
        * the request rate: ``qps``, ``rps``, ``rate``, ``requests_per_second``, or a count per
          window (``requests``, ``count``) with the window length from ``window`` or the
          ``time`` column's spacing;
        * optionally the CPU: ``cpu_percent`` (0-100), ``cpu_utilization`` (0-1) or
          ``busy_cores``; it holds the mean CPU per request by the utilisation law;
        * optionally ``time`` (ISO text or Unix seconds).

        Rows with a missing or non-positive value are dropped and counted in ``warnings_``.
    servers : int, default 1
        Cores the CPU % is measured over and the requests share (1 per event loop).
    duration_unit : {"us", "ms", "s"}, optional
        The unit of percentile columns whose name does not state one.
    window : float, optional
        Window length in seconds, for a count column (default: the spacing of ``time``).
    **options
        Passed to :func:`capacity.fit.from_percentiles` (``discipline``, ``family``, ``delay``, ...).

    Returns
    -------
    PercentileFit
        With ``source_`` naming the columns read and the rows used.

    Raises
    ------
    ValueError
        A percentile column without a unit (and no ``duration_unit``), no rate column, a CPU
        column whose kind the name does not say, CPU above 100 %, no usable row.

    Notes
    -----
    Each row becomes one observation of :func:`from_percentiles`; with a count column the
    row's requests also give ``n_requests`` (and so intervals).  A dashboard's percentile is
    usually already an estimate from a histogram or a sketch, and per-minute percentiles at
    low QPS rest on few requests: weight the day by giving the counts.
    """
    import pandas as pd

    df = _read(frame_or_csv)
    if df.empty:
        raise ValueError("frame_or_csv has no rows")
    if duration_unit is not None and duration_unit not in _TIME_FACTORS:
        raise ValueError(f"duration_unit must be one of 'us', 'ms', 's', got {duration_unit!r}")
    pcols = _percentile_columns(df, duration_unit)
    rate_col, count_col = _one(df, _RATE, "rate"), _one(df, _COUNT, "request count")
    time_col = _one(df, _TIME, "time")
    if rate_col is None and count_col is None:
        raise ValueError(f"no request-rate column (qps, rps, rate, requests_per_second) or count column "
                         f"(requests, count) among {list(df.columns)}")
    if rate_col is not None:
        rate = pd.to_numeric(df[rate_col], errors="coerce").to_numpy(float)
        count = None if count_col is None else pd.to_numeric(df[count_col], errors="coerce").to_numpy(float)
    else:
        count = pd.to_numeric(df[count_col], errors="coerce").to_numpy(float)
        if window is None:
            if time_col is None:
                raise ValueError(f"column {count_col!r} counts requests per window, but the window length is "
                                 "unknown: give window= (seconds) or a time column")
            t = _times(df[time_col])
            steps = np.diff(t)
            if steps.size == 0 or not np.all(steps > 0):
                raise ValueError(f"column {time_col!r} must increase to give the window length; give window=")
            window = float(np.median(steps))
        elif not (window > 0 and math.isfinite(window)):
            raise ValueError(f"window must be positive seconds, got {window!r}")
        rate = count / window
    util = None
    cpu_cols = {kind: _one(df, names, f"CPU ({kind})") for kind, names in
                (("percent", _CPU_PERCENT), ("fraction", _CPU_FRACTION), ("cores", _CPU_CORES))}
    given = {k: c for k, c in cpu_cols.items() if c is not None}
    if len(given) > 1:
        raise ValueError(f"several CPU columns: {list(given.values())}; keep one")
    bare = [c for c in df.columns if _norm(c) == "cpu"]
    if bare and not given:
        raise ValueError(f"column {bare[0]!r}: is it a percentage (0-100), a fraction (0-1) or busy cores? "
                         "rename it cpu_percent, cpu_utilization or busy_cores")
    if given:
        kind, col = next(iter(given.items()))
        raw = pd.to_numeric(df[col], errors="coerce").to_numpy(float)
        util = {"percent": raw / 100.0, "fraction": raw, "cores": raw / servers}[kind]
        over = util > 1.0 + 1e-9
        if np.any(over):
            raise ValueError(f"column {col!r} reads {raw[over][0]:g}, over 100 % of servers={servers}; give "
                             "servers= the cores it was measured over")
    values = {q: pd.to_numeric(df[c], errors="coerce").to_numpy(float) * f for q, (c, f) in pcols.items()}
    ok = np.isfinite(rate) & (rate > 0)
    for v in values.values():
        ok &= np.isfinite(v) & (v > 0)
    if util is not None:
        ok &= np.isfinite(util) & (util > 0)
    if count is not None:
        ok &= np.isfinite(count) & (count > 0)
    if not ok.any():
        raise ValueError("no row has a positive rate, every percentile and the CPU")
    rows = np.flatnonzero(ok)
    records = []
    for i in rows:
        rec: dict[str, Any] = {"percentiles": {q: float(v[i]) for q, v in values.items()},
                               "arrival_rate": float(rate[i])}
        if util is not None:
            rec["utilization"] = float(util[i])
        if count is not None:
            rec["n_requests"] = float(count[i])
        records.append(rec)
    fit = from_percentiles(records, servers=servers, **options)
    dropped = int(df.shape[0] - rows.size)
    fit.source_ = {"kind": "timeseries", "rows": int(df.shape[0]), "rows_used": int(rows.size),
                   "percentiles": {c: q for q, (c, _) in pcols.items()}, "rate": rate_col or count_col,
                   "cpu": next(iter(given.values())) if given else None}
    if dropped:
        from ..exceptions import FitWarning

        fit._warn(FitWarning, f"{dropped} of {df.shape[0]} row(s) had a missing or non-positive value and "
                              "were not used")
        fit._emit_warnings(stacklevel=2)
    return fit


def _times(col) -> np.ndarray:
    import pandas as pd

    if pd.api.types.is_numeric_dtype(col):
        return col.to_numpy(float)
    parsed = pd.to_datetime(col, errors="coerce", utc=True)
    if parsed.isna().any():
        raise ValueError(f"column {col.name!r}: {int(parsed.isna().sum())} value(s) are not times")
    # total_seconds, not astype(int64): the datetime resolution (ns, us) depends on the pandas version
    return (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(float)
