"""Finding and normalising the columns of a per-request table (CSV, Parquet, a DataFrame).

Which column is the time, the duration, the endpoint, the upstream time and the status, read
from its name (``latency_ms``, ``duration``, ``request_time``...) or stated; the duration's unit
from the name's suffix or stated, never guessed (an ambiguous unit is refused).  Used by
:func:`capacity.logs.read_requests` and :func:`capacity.logs.iter_requests`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._log_io import _Stats

__all__: list[str] = []   # private: capacity.logs is the public face


_TIME_NAMES = ("time", "timestamp", "ts", "start", "start_time", "started_at", "starttime", "datetime",
               "date", "time_local", "@timestamp", "request_start", "arrival", "arrival_time", "received_at")
_DURATION_NAMES = ("duration", "latency", "request_time", "response_time", "elapsed", "elapsed_time",
                   "took", "rt", "total_time", "request_duration", "response_duration", "time_taken")
_ENDPOINT_NAMES = ("endpoint", "route", "path", "url", "uri", "handler", "operation", "request_path")
_UPSTREAM_NAMES = ("upstream_time", "upstream_response_time", "upstream", "upstream_duration",
                   "upstream_latency", "backend_time", "backend_duration")
_STATUS_NAMES = ("status", "status_code", "http_status", "response_code")
_UNIT_SUFFIXES = {"_ms": 1e-3, "_msec": 1e-3, "_millis": 1e-3, "_milliseconds": 1e-3,
                  "_us": 1e-6, "_usec": 1e-6, "_micros": 1e-6, "_microseconds": 1e-6,
                  "_ns": 1e-9, "_nanos": 1e-9, "_nanoseconds": 1e-9,
                  "_s": 1.0, "_sec": 1.0, "_secs": 1.0, "_seconds": 1.0}
_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def _split_unit(name: str) -> tuple[str, float | None]:
    low = name.strip().lower().replace("-", "_").replace(" ", "_")
    for suffix in sorted(_UNIT_SUFFIXES, key=len, reverse=True):
        if low.endswith(suffix) and len(low) > len(suffix):
            return low[: -len(suffix)], _UNIT_SUFFIXES[suffix]
    return low, None


def _find_column(columns, candidates, explicit, role: str, required: bool):
    if explicit is not None:
        if explicit not in columns:
            raise ValueError(f"{role}_column={explicit!r} is not a column; columns are {list(columns)!r}")
        return explicit
    bases = {c: _split_unit(str(c))[0] for c in columns}
    for cand in candidates:
        for c in columns:
            if str(c).strip().lower() == cand or bases[c] == cand:
                return c
    if required:
        raise ValueError(
            f"cannot find the {role} column among {list(columns)!r} (looked for {', '.join(candidates)}); "
            f"pass {role}_column=..."
        )
    return None


#: Column names whose unit is seconds by definition: nginx's ``$request_time`` and
#: ``$upstream_response_time`` (seconds with millisecond resolution), and ``upstream_time``, the
#: name these readers give the upstream seconds (so what :func:`capacity.logs.convert` writes reads back).
_SECONDS_NAMES = frozenset({"request_time", "upstream_response_time", "upstream_time"})


def _duration_scale(column: str, unit: str | None, role: str) -> float:
    """Seconds per unit of a duration column: stated (``unit``), from the name's suffix
    (``latency_ms``), or seconds for the names a log format fixes (:data:`_SECONDS_NAMES`);
    any other name without a unit is refused -- a ``latency`` of 25 is 25 ms as often as 25 s."""
    if unit is not None:
        if unit not in _UNITS:
            raise ValueError(f"{role}_unit must be one of {sorted(_UNITS)!r}, got {unit!r}")
        return _UNITS[unit]
    base, scale = _split_unit(str(column))
    if scale is not None:
        return scale
    if base in _SECONDS_NAMES:
        return 1.0
    # The command line states the duration's unit only (--duration-unit); an upstream column is renamed.
    cli = "; on the command line --duration-unit ms" if role == "duration" else ""
    raise ValueError(f"the {role} column {str(column)!r} has no unit in its name, and its unit is not "
                     f"guessed: state it ({role}_unit='ms', 's', 'us' or 'ns'{cli}) or name the column "
                     f"with its unit ({base}_ms, {base}_s)")


@dataclass
class _RequestColumns:
    time: str
    duration: str
    endpoint: str | None
    upstream: str | None
    status: str | None
    duration_scale: float
    upstream_scale: float
    unit_from_name: bool


def _resolve_columns(columns, time_column, duration_column, endpoint_column, upstream_column,
                     duration_unit, upstream_unit) -> _RequestColumns:
    tcol = _find_column(columns, _TIME_NAMES, time_column, "time", True)
    rest = [c for c in columns if c != tcol]
    dcol = _find_column(rest, _DURATION_NAMES, duration_column, "duration", True)
    rest = [c for c in rest if c != dcol]
    ecol = _find_column(rest, _ENDPOINT_NAMES, endpoint_column, "endpoint", False) \
        if endpoint_column is not False else None
    ucol = _find_column(rest, _UPSTREAM_NAMES, upstream_column, "upstream", False) \
        if upstream_column is not False else None
    scol = _find_column(rest, _STATUS_NAMES, None, "status", False)
    return _RequestColumns(
        time=tcol, duration=dcol, endpoint=ecol, upstream=ucol, status=scol,
        duration_scale=_duration_scale(dcol, duration_unit, "duration"),
        upstream_scale=_duration_scale(ucol, upstream_unit, "upstream") if ucol is not None else 1.0,
        unit_from_name=duration_unit is None and _split_unit(str(dcol))[1] is None,
    )


def _parse_times(raw: pd.Series, time_unit: str | None) -> tuple[pd.Series, np.ndarray]:
    """Timestamps (UTC) from strings/datetimes, or float seconds from numbers; plus an 'unparsable' mask."""
    missing = raw.isna().to_numpy()
    if pd.api.types.is_datetime64_any_dtype(raw.dtype):
        t = raw if getattr(raw.dtype, "tz", None) is not None else raw.dt.tz_localize("UTC")
        return t.dt.tz_convert("UTC").reset_index(drop=True), missing
    if pd.api.types.is_numeric_dtype(raw.dtype) and not pd.api.types.is_bool_dtype(raw.dtype):
        secs = raw.astype(float) * _UNITS[time_unit or "s"]
        return secs.reset_index(drop=True), missing
    text = raw.astype(object)
    num = pd.to_numeric(text, errors="coerce")
    if num.notna().sum() == (~missing).sum() and (~missing).any():
        # a text column that holds numbers only (e.g. read with dtype=str): epoch or relative seconds
        return (num.astype(float) * _UNITS[time_unit or "s"]).reset_index(drop=True), missing
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # pandas' "could not infer format" chatter
        # ISO 8601 first (fast, strict); then the format pandas infers from the first value (fast);
        # nginx's $time_local; per-value parsing (slow) only if all leave values unparsed.
        t = None
        for fmt in ("ISO8601", None, "%d/%b/%Y:%H:%M:%S %z", "mixed"):
            try:
                alt = pd.to_datetime(text, errors="coerce", utc=True, format=fmt)
            except (ValueError, TypeError):
                continue
            if t is None or alt.isna().sum() < t.isna().sum():
                t = alt
            if t.isna().sum() == missing.sum():
                break
        if t is None:  # pragma: no cover - "mixed" with errors="coerce" does not raise
            t = pd.Series(pd.NaT, index=text.index, dtype="datetime64[us, UTC]")
    bad = t.isna().to_numpy() & ~missing
    return pd.Series(t).dt.as_unit("us").reset_index(drop=True), bad | missing


def _parse_seconds(raw: pd.Series, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Seconds from a duration column; NaN for missing values; mask of unparsable or negative values."""
    missing = raw.isna().to_numpy()
    if raw.dtype == object or pd.api.types.is_string_dtype(raw.dtype):
        stripped = raw.astype(object).where(~raw.isna(), None)
        blank = np.array([isinstance(v, str) and v.strip() in ("", "-") for v in stripped], dtype=bool)
        missing = missing | blank
    vals = np.asarray(pd.to_numeric(raw.where(~missing) if missing.any() else raw, errors="coerce"),
                      dtype=float)
    bad = (np.isnan(vals) & ~missing) | (vals < 0) | np.isinf(vals)
    return vals * scale, bad


def _normalise_requests(df: pd.DataFrame, rc: _RequestColumns, time_unit, stats: _Stats,
                        first_row: int, row_offset: int) -> pd.DataFrame:
    n = len(df)
    t, tbad = _parse_times(df[rc.time], time_unit)
    d, dbad = _parse_seconds(df[rc.duration], rc.duration_scale)
    bad = tbad | dbad
    out = {"time": t, "duration": d}
    if rc.endpoint is not None:
        out["endpoint"] = df[rc.endpoint].astype(object).to_numpy()
    if rc.upstream is not None:
        u, ubad = _parse_seconds(df[rc.upstream], rc.upstream_scale)
        out["upstream_time"] = u
        bad |= ubad
    if rc.status is not None:
        out["status"] = pd.to_numeric(df[rc.status], errors="coerce").astype("Int64").to_numpy()
    frame = pd.DataFrame({k: (v.reset_index(drop=True) if isinstance(v, pd.Series) else v)
                          for k, v in out.items()})
    if bad.any():
        idx = np.flatnonzero(bad)
        texts = [",".join("" if pd.isna(v) else str(v) for v in df.iloc[i].tolist())
                 for i in idx[: stats.max_examples]]
        stats.add_bad([first_row + row_offset + int(i) for i in idx], texts)
        frame = frame[~bad].reset_index(drop=True)
    stats.lines += n
    stats.parsed += n - int(bad.sum())
    return frame
