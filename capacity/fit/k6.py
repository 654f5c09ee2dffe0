"""Fit a k6 run from its ``--out json`` lines.

k6 writes one JSON object per line: a ``Metric`` line declaring each metric (its type and what
it ``contains``: ``time`` for durations, in milliseconds) and a ``Point`` line per sample, with
an RFC 3339 time stamp.  :func:`from_k6` streams the file (bounded memory at any length), cuts
the ``http_req_duration`` points into windows, bins each window's durations into a fine
log-spaced histogram and fits them with :func:`capacity.fit.from_histograms`.
"""
from __future__ import annotations

import datetime as _dt
import gzip
import json
import math
import os
import re

import numpy as np

from .histograms import HistogramFit, fit_source_windows

__all__ = ["from_k6"]

# 24 bins per decade from 10 us to 1000 s: a bin is 10 % wide, far finer than the models' own
# accuracy, and a window's histogram is 193 numbers however many requests it holds.
_EDGES = np.logspace(-5, 3, 8 * 24 + 1)
_FRACTION = re.compile(r"(\.\d{6})\d+")
_UNITS = {"time": 1e-3}          # k6 records durations ("contains": "time") in milliseconds


def _parse_time(text: str) -> float:
    # k6 writes nanoseconds; datetime takes at most microseconds.
    text = _FRACTION.sub(r"\1", text.replace("Z", "+00:00"))
    return _dt.datetime.fromisoformat(text).timestamp()


def _open(path):
    name = os.fspath(path)
    if name.endswith(".gz"):
        return gzip.open(name, "rt", encoding="utf-8")
    return open(name, encoding="utf-8")


def from_k6(path, window: float = 60.0, servers: int = 1, *, metric: str = "http_req_duration",
            measured_at: str = "client", **options) -> HistogramFit:
    """Fit a queue model to a k6 run's request durations, window by window.

    Parameters
    ----------
    path : str or path
        The file ``k6 run --out json=FILE`` wrote (``.gz`` is read compressed).
    window : float, default 60
        Window length in seconds; each window's request rate is its points over ``window``
        (the last, partial window is left out, and said).
    servers : int, default 1
        Cores of the service under test that share its queue.
    metric : str, default "http_req_duration"
        The duration metric (``http_req_waiting`` for time to first byte).
    measured_at : default "client"
        k6 is the client.
    **options
        Passed to :func:`capacity.fit.from_histograms` (``discipline``, ``family``, ...).

    Returns
    -------
    HistogramFit
        With ``source_``: the points read, the windows, the lines skipped.

    Raises
    ------
    ValueError
        The file unreadable, no ``Metric`` line for ``metric`` (its unit is then unknown), or
        not one usable point.

    Notes
    -----
    The unit is read from the data: the ``Metric`` line's ``contains: "time"`` means
    milliseconds.  Points are binned at their time stamp (k6 stamps a request when it ends).
    Open-loop executors (``constant-arrival-rate``, ``ramping-arrival-rate``) give the
    Poisson-like arrivals the models assume; with closed-loop virtual users the arrival rate
    follows the latency, and the fit describes the throughput the test reached, not an open
    load (notebook 07).  Lines that are not JSON, or points without a time or a number, are
    skipped and counted in the warnings, never dropped silently.

    References
    ----------
    k6 documentation, "JSON" output: https://grafana.com/docs/k6/latest/results-output/real-time/json/
    """
    window = float(window)
    if not (math.isfinite(window) and window > 0):
        raise ValueError(f"window must be positive seconds, got {window!r}")
    counts, scale, points, bad, examples = _read_points(path, window, metric)
    if scale is None:
        raise ValueError(f"{os.fspath(path)!r} has no Metric line for {metric!r}: not k6 JSON output "
                         "(k6 run --out json=FILE), or another metric name (metric=...)")
    if not counts:
        raise ValueError(f"{os.fspath(path)!r} has no usable {metric} point")
    last = max(counts)
    windows = []
    for key in sorted(counts):
        if key == last and len(counts) > 1:
            continue          # the partial last window would understate the rate
        row = counts[key]
        windows.append({"bounds": _EDGES, "counts": row, "arrival_rate": float(row.sum()) / window})
    notes = []
    if bad:
        notes.append(f"{bad} line(s) skipped as not k6 JSON or without a time or value (first at line(s) "
                     f"{examples})")
    if len(counts) > 1:
        notes.append(f"the last window ({int(counts[last].sum())} points) was partial and left out")
    source = {"kind": "k6", "path": os.fspath(path), "metric": metric, "points": points,
              "windows": len(windows), "window": window, "lines_skipped": bad}
    return fit_source_windows(windows, notes, source, servers, measured_at, options, stacklevel=3)


def _read_points(path, window: float, metric: str):
    """Stream the file: (per-window bin counts, unit scale or None, points, bad lines, examples)."""
    counts: dict[int, np.ndarray] = {}
    scale = None
    bad, points, examples = 0, 0, []
    t_first = None
    try:
        fh = _open(path)
    except OSError as exc:
        raise ValueError(f"path: cannot read {os.fspath(path)!r}: {exc.strerror}") from None
    with fh:
        # Points are buffered in chunks so that parsing, not numpy calls, sets the pace.
        buf_t: list[float] = []
        buf_v: list[float] = []

        def flush():
            nonlocal t_first
            if not buf_t:
                return
            t = np.array(buf_t)
            v = np.array(buf_v) * scale
            if t_first is None:
                t_first = float(t.min())
            w = np.floor((t - t_first) / window).astype(np.int64)
            b = np.clip(np.searchsorted(_EDGES, v, side="left"), 0, _EDGES.size)
            for key in np.unique(w):
                sel = w == key
                row = counts.setdefault(int(key), np.zeros(_EDGES.size + 1))
                np.add.at(row, b[sel], 1.0)
            buf_t.clear()
            buf_v.clear()

        try:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    bad += 1
                    if len(examples) < 3:
                        examples.append(number)
                    continue
                if obj.get("metric") != metric:
                    continue
                if obj.get("type") == "Metric":
                    contains = obj.get("data", {}).get("contains")
                    if contains not in _UNITS:
                        raise ValueError(f"metric {metric!r} contains {contains!r}, not durations ('time')")
                    scale = _UNITS[contains]
                    continue
                if obj.get("type") != "Point":
                    continue
                if scale is None:
                    raise ValueError(f"{os.fspath(path)!r} line {number}: a {metric} point before its Metric line; "
                                     "the unit is unknown (k6 writes the Metric line first: is the file complete?)")
                data = obj.get("data", {})
                try:
                    t, v = _parse_time(data["time"]), float(data["value"])
                except (KeyError, TypeError, ValueError):
                    bad += 1
                    if len(examples) < 3:
                        examples.append(number)
                    continue
                if not (v >= 0 and math.isfinite(v)):
                    bad += 1
                    continue
                buf_t.append(t)
                buf_v.append(v)
                points += 1
                if len(buf_t) >= 100_000:
                    flush()
            flush()
        except UnicodeDecodeError:
            raise ValueError(f"{os.fspath(path)!r} is not UTF-8 text: a binary or compressed file? "
                             "(name a gzip file .gz)") from None
    return counts, scale, points, bad, examples
