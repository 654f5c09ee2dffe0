"""Read latency histograms and process CPU from Prometheus, and fit them.

:func:`from_prometheus` asks a Prometheus server's HTTP API (``/api/v1/query_range``) for one
window per ``step``: the increase of each histogram bucket, and the rate of the process CPU
counter; :func:`from_prometheus_json` reads the same from saved query results.  Both hand the
windows to :func:`capacity.fit.from_histograms`.  The HTTP client is the standard library's
(no dependency); every failure of the server becomes a :class:`capacity.exceptions.SourceError`
whose message says what to change.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._checks import check_servers
from ..exceptions import SourceError
from .histograms import HistogramFit, fit_source_windows

__all__ = ["MAX_POINTS", "from_prometheus", "from_prometheus_json"]

#: Prometheus refuses a range query of more than this many points per series.
MAX_POINTS = 11_000
_HTTP_TIMEOUT = 30.0


# ---------------------------------------------------------------------- queries
def bucket_query(histogram: str, selector: str, step: float, label: str | None = None) -> str:
    """The PromQL of the bucket increases per window: ``sum by (le) (increase(h_bucket{...}[step]))``;
    with ``label``, one histogram per value of that label: ``sum by (label, le) (...)``."""
    by = "le" if label is None else f"{label}, le"
    return f"sum by ({by}) (increase({histogram}_bucket{{{selector}}}[{_duration(step)}]))"


def cpu_query(cpu: str, selector: str, step: float, label: str | None = None) -> str:
    """The PromQL of the busy cores per window: ``sum(rate(cpu{...}[step]))``.  A ``cpu`` with its
    own matchers (``process_cpu_seconds_total{job="api"}``) keeps them instead of ``selector``:
    the counter of a process whose latencies a proxy measured lives under another job.  With
    ``label``, one series per value of that label: ``sum by (label) (...)``."""
    inner = cpu if "{" in cpu else f"{cpu}{{{selector}}}"
    by = "" if label is None else f" by ({label}) "
    return f"sum{by}(rate({inner}[{_duration(step)}]))"


def _duration(step: float) -> str:
    return f"{int(step)}s" if float(step).is_integer() else f"{int(round(step * 1000))}ms"


def _unix(value, name: str) -> float:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            raise ValueError(f"{name}={value!r} has no time zone; give an aware datetime "
                             "(datetime.timezone.utc) or Unix seconds")
        return value.timestamp()
    if isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(float(value)):
        return float(value)
    raise ValueError(f"{name} must be Unix seconds or an aware datetime, got {value!r}")


def _query_range(url: str, query: str, start: float, end: float, step: float) -> list:
    """The ``result`` list of a range query (matrix), or SourceError with the server's reason."""
    endpoint = url.rstrip("/") + "/api/v1/query_range"
    body = urllib.parse.urlencode({"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                   "step": f"{step:g}"}).encode()
    request = urllib.request.Request(endpoint, data=body, method="POST",
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, timeout=_HTTP_TIMEOUT) as response:
            payload = json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as err:
        text = err.read().decode("utf-8", "replace")
        try:
            reason = json.loads(text).get("error", text)
        except ValueError:
            reason = text.strip()[:300] or err.reason
        hint = {400: "the query or its range was refused", 422: "the query could not be executed",
                503: "the server is overloaded or the query timed out (try a larger step or a shorter range)"}
        raise SourceError(f"Prometheus at {url} answered {err.code} to {query!r}: {reason} "
                          f"({hint.get(err.code, 'see the server log')})") from None
    except urllib.error.URLError as err:
        raise SourceError(f"could not reach Prometheus at {url}: {err.reason} (is the address right "
                          "and the server up?)") from None
    except (TimeoutError, OSError) as err:
        raise SourceError(f"could not reach Prometheus at {url}: {err}") from None
    except ValueError:
        raise SourceError(f"{endpoint} did not answer JSON: is {url} a Prometheus server?") from None
    return _result_of(payload, f"Prometheus at {url}")


def _result_of(payload: Any, where: str) -> list:
    if not isinstance(payload, Mapping) or "status" not in payload:
        raise SourceError(f"{where}: not a Prometheus API response (no 'status')")
    if payload["status"] != "success":
        raise SourceError(f"{where}: {payload.get('errorType', 'error')}: {payload.get('error', payload)}")
    data = payload.get("data", {})
    if data.get("resultType") != "matrix":
        raise SourceError(f"{where}: expected a range query result (resultType 'matrix'), got "
                          f"{data.get('resultType')!r}; save the answer of /api/v1/query_range")
    return data.get("result", [])


def _series(result: list, where: str) -> list[tuple[dict, np.ndarray, np.ndarray]]:
    out = []
    for item in result:
        values = item.get("values", [])
        try:
            ts = np.array([float(v[0]) for v in values])
            ys = np.array([float(v[1]) for v in values])      # "NaN", "+Inf" parse as floats
        except (TypeError, ValueError, IndexError):
            raise SourceError(f"{where}: a sample of {item.get('metric', {})} is not a number "
                              "([time, \"value\"] pairs expected)") from None
        out.append((item.get("metric", {}), ts, ys))
    return out


def _increases(ts: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray, set]:
    """Raw counter samples -> (window end times, increases, times of resets): a drop is a
    restart of the counter, and the increase after it counts from zero (Prometheus's own rule)."""
    d = np.diff(ys)
    resets = d < 0
    return ts[1:], np.where(resets, ys[1:], d), set(ts[1:][resets].tolist())


# ---------------------------------------------------------------------- windows
def _windows(bucket_result: list, cpu_result: list | None, step: float | None, servers: int,
             counters: bool, where: str) -> tuple[list[dict], float, list[str]]:
    """Windows for :func:`from_histograms` and the notes to warn with."""
    series = _series(bucket_result, where)
    if not series:
        raise SourceError(f"{where}: the bucket query returned no series (check the histogram's name, "
                          "without '_bucket', and the selector)")
    notes: list[str] = []
    by_le: dict[float, tuple[np.ndarray, np.ndarray]] = {}
    resets: set = set()
    for metric, ts, ys in series:
        if "le" not in metric:
            raise SourceError(f"{where}: a bucket series has no 'le' label ({metric}); sum the buckets "
                              "by (le)")
        le = float(metric["le"])
        if le in by_le:
            raise SourceError(f"{where}: two series for le={metric['le']} ({metric}); aggregate them with "
                              "sum by (le) (...)")
        if counters:
            ts, ys, r = _increases(ts, ys)
            resets |= r
        by_le[le] = (ts, ys)
    if math.inf not in by_le:
        raise SourceError(f"{where}: the histogram has no le=\"+Inf\" bucket; without it the requests "
                          "above the largest bound are unknown")
    if resets:
        notes.append(f"{len(resets)} counter reset(s) (process restarts) in the bucket series: the "
                     "increase after each is counted from zero")
    times = np.unique(np.concatenate([ts for ts, _ in by_le.values()]))
    if step is None:
        if times.size < 2:
            raise ValueError("step: one sample cannot tell the window length; give step= in seconds")
        step = float(np.median(np.diff(times)))
    les = np.array(sorted(by_le))
    table = np.full((times.size, les.size), np.nan)
    for j, le in enumerate(les):
        ts, ys = by_le[le]
        table[np.searchsorted(times, ts), j] = ys
    busy = np.full(times.size, np.nan)
    if cpu_result is not None:
        cpu_series = _series(cpu_result, where)
        if len(cpu_series) > 1:
            raise SourceError(f"{where}: the CPU query returned {len(cpu_series)} series; sum them "
                              "(sum(rate(...))) or narrow the selector to one process")
        if not cpu_series:
            notes.append("the CPU query returned no series: the CPU utilisation is not used")
        else:
            ts, ys = cpu_series[0][1], cpu_series[0][2]
            if counters:
                ts, ys, r = _increases(ts, ys)
                ys = ys / step
                if r:
                    notes.append(f"{len(r)} reset(s) of the CPU counter: the increase after each counts from zero")
            idx = np.searchsorted(times, ts)
            ok = (idx < times.size) & (times[np.minimum(idx, times.size - 1)] == ts)
            busy[idx[ok]] = ys[ok]
    windows, unusable = [], 0
    for i in range(times.size):
        row = table[i]
        if np.isnan(row).any():
            unusable += 1
            continue
        # Rates of different buckets come from separate series and may cross by round-off.
        cum = np.maximum.accumulate(np.maximum(row, 0.0))
        record = {"buckets": dict(zip(les.tolist(), cum.tolist())), "arrival_rate": cum[-1] / step}
        if np.isfinite(busy[i]):
            record["busy_cores"] = float(busy[i])
        windows.append(record)
    if unusable:
        notes.append(f"{unusable} of {times.size} window(s) had a bucket without samples (NaN) and were skipped")
    if not windows:
        raise SourceError(f"{where}: no window has samples in every bucket")
    have_cpu = [w for w in windows if "busy_cores" in w and w["arrival_rate"] > 0]
    if cpu_result is not None and have_cpu:
        peak = max(w["busy_cores"] for w in have_cpu)
        busy_windows = sum(1 for w in windows if w["arrival_rate"] > 0)
        if len(have_cpu) < busy_windows:
            notes.append(f"the CPU series misses {busy_windows - len(have_cpu)} window(s): the CPU "
                         "utilisation is not used")
        elif peak > servers * 1.02:
            notes.append(f"the CPU series reads up to {peak:.2f} busy cores with servers={servers}: the CPU "
                         "utilisation is not used.  Threads beside the event loop (GC, JIT, a thread pool) "
                         "can do that; so can several processes under one selector -- a Node.js cluster's "
                         "workers are separate event loops: fit one worker (select its instance or pid) and "
                         "plan per worker, or give servers= the workers to treat them as one pooled queue "
                         "(optimistic: a balancer does not pool)")
        else:
            for w in have_cpu:
                w["utilization"] = min(max(w["busy_cores"] / servers, 1e-9), 1.0)
    return windows, step, notes


def _fit(windows: list[dict], notes: list[str], servers: int, measured_at: str, source: dict,
         options: dict) -> HistogramFit:
    records = [{k: w[k] for k in ("buckets", "arrival_rate", "utilization") if k in w} for w in windows]
    return fit_source_windows(records, notes, source, servers, measured_at, options, stacklevel=4)


# ---------------------------------------------------------------------- checks and the per-label split
def _checked_query(url, histogram, selector, start, end, step, cpu) -> tuple[str, float, float, float]:
    """The arguments of a range query checked (each refusal names its parameter): the histogram's
    name without ``_bucket``, and start, end and step in seconds."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"url must be an http:// or https:// address of a Prometheus server, got {url!r}")
    if not isinstance(histogram, str) or not histogram.replace("_", "a").replace(":", "a").isalnum():
        raise ValueError(f"histogram must be a metric name such as 'http_request_duration_seconds', "
                         f"got {histogram!r}")
    if histogram.endswith("_bucket"):
        histogram = histogram[:-len("_bucket")]
    if not isinstance(selector, str) or "{" in selector or "}" in selector:
        raise ValueError(f"selector must be label matchers without braces, e.g. 'job=\"api\"', got {selector!r}")
    step = float(step)
    if not (math.isfinite(step) and step >= 1.0):
        raise ValueError(f"step must be at least 1 second, got {step!r}")
    end = time.time() if end is None else _unix(end, "end")
    start = end - 86400.0 if start is None else _unix(start, "start")
    if not start < end:
        raise ValueError(f"start ({start:.0f}) must be before end ({end:.0f})")
    points = math.floor((end - (start + step)) / step) + 1
    if points > MAX_POINTS:
        raise ValueError(f"step={step:g} s gives {points} windows between start and end, over Prometheus's "
                         f"limit of {MAX_POINTS}; use step >= {math.ceil((end - start) / MAX_POINTS)} s")
    if points < 1:
        raise ValueError(f"the range {end - start:g} s is shorter than one step ({step:g} s)")
    counter = r"[A-Za-z_:][A-Za-z0-9_:]*(\{[^{}]*\})?"      # a name, optionally with its own matchers
    if cpu is not None and (not isinstance(cpu, str) or re.fullmatch(counter, cpu) is None):
        raise ValueError(f"cpu must be a counter's name, optionally with its own label matchers "
                         f"('process_cpu_seconds_total{{job=\"api\"}}'), or None; got {cpu!r}")
    return histogram, start, end, step


def labelled_results(url: str, histogram: str, selector: str, label: str, start, end, step: float,
                     cpu: str | None) -> tuple[dict, dict]:
    """One bucket query (and one CPU query) for every value of ``label`` at once, their series
    split by that value: ``({value: (bucket series, CPU series or None)}, source)``; each pair
    is what :func:`_windows` reads for one service.  Series without the label are under ``""``."""
    if not isinstance(label, str) or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", label) is None or label == "le":
        raise ValueError(f"label must be a Prometheus label name such as 'job' (not 'le'), got {label!r}")
    histogram, start, end, step = _checked_query(url, histogram, selector, start, end, step, cpu)
    queries = {"buckets": bucket_query(histogram, selector, step, label)}
    groups: dict[str, tuple[list, list | None]] = {}
    for item in _query_range(url, queries["buckets"], start + step, end, step):
        groups.setdefault(str(item.get("metric", {}).get(label, "")), ([], None))[0].append(item)
    if cpu is not None:
        queries["cpu"] = cpu_query(cpu, selector, step, label)
        cpu_series: dict[str, list] = {}
        for item in _query_range(url, queries["cpu"], start + step, end, step):
            cpu_series.setdefault(str(item.get("metric", {}).get(label, "")), []).append(item)
        groups = {k: (b, cpu_series.get(k, [])) for k, (b, _) in groups.items()}
    source = {"kind": "prometheus", "url": url, "queries": queries, "label": label, "start": start, "end": end,
              "step": step}
    return groups, source


# ---------------------------------------------------------------------- public
def from_prometheus(url: str, histogram: str, selector: str = "", start=None, end=None,
                    step: float = 300.0, cpu: str | None = "process_cpu_seconds_total",
                    servers: int = 1, measured_at: str = "in_process", **options) -> HistogramFit:
    """Fit a queue model to a Prometheus histogram of response times, window by window.

    Parameters
    ----------
    url : str
        The Prometheus server, e.g. ``"http://localhost:9090"``.
    histogram : str
        The histogram's metric name without ``_bucket`` (``http_request_duration_seconds``).
    selector : str, default ""
        Label matchers inside the braces, e.g. ``'job="api",instance="10.0.0.7:9100"'``; they
        apply to the CPU counter too.  Fit one process (one event loop) at a time: a Node.js
        cluster's workers are separate queues.
    start, end : float or datetime, optional
        The range, Unix seconds or aware datetimes; default the last 24 hours.
    step : float, default 300
        Window length in seconds (one window per step, each the increase over the ``step``
        before its time stamp).  ``(end - start) / step`` may not exceed :data:`MAX_POINTS`.
    cpu : str or None, default "process_cpu_seconds_total"
        The process CPU-seconds counter; its rate over each window divided by ``servers`` is
        the window's utilisation, which holds E[S] (see :func:`from_histograms`).  With its own
        label matchers (``'process_cpu_seconds_total{job="api"}'``) they replace ``selector``
        for it -- the case of a histogram timed by a proxy (nginx, a load balancer) in front of
        the process.  None: fit without it (the right choice for one route of a process that
        serves several).
    servers : int, default 1
        Cores the requests run on (1 for an event loop).
    measured_at : {"in_process", "proxy", "client"}, default "in_process"
        Where the histogram was timed; an application's own histogram is timed in-process
        (middleware), which hides the queue in front of a blocking handler.
    **options
        Passed to :func:`capacity.fit.from_histograms` (``discipline``, ``family``, ``delay``,
        ``scv``, ``confidence``, ``max_nfev``, ``slices``, ...).

    Returns
    -------
    HistogramFit
        With ``source_``, the queries made.

    Raises
    ------
    SourceError
        The server unreachable or refusing the query (its reason quoted), no series, no
        ``+Inf`` bucket.
    ValueError
        Bad arguments, including a range of more than :data:`MAX_POINTS` windows.

    Notes
    -----
    Queries, one point per ``step`` from ``start + step`` to ``end``::

        sum by (le) (increase(<histogram>_bucket{<selector>}[<step>]))
        sum(rate(<cpu>{<selector>}[<step>]))

    ``increase`` handles counter resets and extrapolates to the window's edges, so counts are
    fractional.  The request rate of a window is its ``+Inf`` increase over ``step``.  A window
    with a bucket without samples is skipped, and counted in the warnings.

    References
    ----------
    Prometheus HTTP API, range queries: https://prometheus.io/docs/prometheus/latest/querying/api/
    """
    histogram, start, end, step = _checked_query(url, histogram, selector, start, end, step, cpu)
    srv = int(check_servers(servers))
    queries = {"buckets": bucket_query(histogram, selector, step)}
    buckets = _query_range(url, queries["buckets"], start + step, end, step)
    cpu_result = None
    if cpu is not None:
        queries["cpu"] = cpu_query(cpu, selector, step)
        cpu_result = _query_range(url, queries["cpu"], start + step, end, step)
    windows, step, notes = _windows(buckets, cpu_result, step, srv, False, f"Prometheus at {url}")
    source = {"kind": "prometheus", "url": url, "queries": queries, "start": start, "end": end, "step": step,
              "windows": len(windows)}
    return _fit(windows, notes, srv, measured_at, source, options)


def from_prometheus_json(buckets, cpu=None, step: float | None = None, servers: int = 1,
                         measured_at: str = "in_process", *, counters: bool = False,
                         **options) -> HistogramFit:
    """:func:`from_prometheus` from saved ``/api/v1/query_range`` answers.

    Parameters
    ----------
    buckets : path or mapping
        A saved answer (file path or the parsed JSON) of
        ``sum by (le) (increase(<histogram>_bucket{...}[<step>]))``, or, with
        ``counters=True``, of the raw ``<histogram>_bucket`` series (summed by ``le``), whose
        increases are taken here with counter resets detected.
    cpu : path, mapping or None
        A saved answer of ``sum(rate(process_cpu_seconds_total{...}[<step>]))`` (busy cores),
        or with ``counters=True`` of the raw counter.
    step : float, optional
        Window length in seconds; default the spacing of the time stamps.
    servers, measured_at, **options
        As in :func:`from_prometheus`.
    """
    srv = int(check_servers(servers))
    where = "buckets"
    bucket_result = _result_of(_load(buckets, "buckets"), where)
    cpu_result = None if cpu is None else _result_of(_load(cpu, "cpu"), "cpu")
    if step is not None:
        step = float(step)
        if not (math.isfinite(step) and step > 0):
            raise ValueError(f"step must be positive seconds, got {step!r}")
    windows, step, notes = _windows(bucket_result, cpu_result, step, srv, bool(counters), where)
    source = {"kind": "prometheus_json", "step": step, "windows": len(windows), "counters": bool(counters)}
    return _fit(windows, notes, srv, measured_at, source, options)


def _load(value, name: str):
    if isinstance(value, Mapping):
        return value
    if isinstance(value, (str, os.PathLike)):
        try:
            with open(value, encoding="utf-8") as fh:
                return json.load(fh)
        except OSError as err:
            raise ValueError(f"{name}: cannot read {os.fspath(value)!r}: {err.strerror}") from None
        except ValueError as err:
            raise SourceError(f"{name}: {os.fspath(value)!r} is not JSON ({err})") from None
    raise ValueError(f"{name} must be a file path or a parsed query_range answer, got {type(value).__name__}")
