"""The services of a fleet and the latency histograms of each, for :func:`capacity.fit.fleet`.

A fleet is named three ways: a mapping ``{name: logs}`` (a file, a glob, a directory or a list of
them per service), a directory whose subdirectories are the services, or a Prometheus server whose
histogram is grouped by a label (``job``).  This module turns each service into the ``windows`` of
:func:`capacity.fit.from_histograms` -- by :func:`capacity.logs.aggregate` of its logs, or from its
share of one grouped Prometheus query (:func:`.prometheus.labelled_results`) -- with the notes of
what was read (skipped lines, counter resets), and reads off what was observed: the requests, the
peak request rate and the p99.  A service that cannot be read keeps its error message.
"""
from __future__ import annotations

import glob
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__: list[str] = []   # private: capacity.fit.fleet is the public face

#: The key of a per-service mapping (``slo``, ``servers``) that holds the value of every service it
#: does not name.
EVERY = "*"
_LOG_SUFFIXES = r"(\.(log|txt|csv|tsv|parquet|pq|parq|gz|zst|zstd|bz2|xz))+$"


@dataclass
class ServiceData:
    """One service as read: its windows (None when it could not be read) and the notes on them."""

    name: str
    source: str
    windows: list | None = None
    notes: list[str] = field(default_factory=list)
    error: str = ""


# ---------------------------------------------------------------------- naming the services
def fleet_kind(services) -> tuple[str, Any]:
    """``("logs", [(name, source), ...])`` or ``("prometheus", url)`` for the ``services`` argument."""
    if isinstance(services, Mapping):
        if not services:
            raise ValueError("services must name at least one service, got an empty mapping")
        for name in services:
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"services: every name must be a non-empty string, got {name!r}")
        return "logs", list(services.items())
    if isinstance(services, (str, os.PathLike)):
        text = os.fspath(services)
        if text.startswith(("http://", "https://")):
            return "prometheus", text
        if os.path.isdir(text):
            subdirs = sorted(d for d in os.listdir(text)
                             if os.path.isdir(os.path.join(text, d)) and not d.startswith("."))
            if not subdirs:
                raise ValueError(f"services={text!r} is a directory without subdirectories, and each "
                                 f"subdirectory is one service; to fit its files as one service give "
                                 f"{{'name': {text!r}}}")
            return "logs", [(d, os.path.join(text, d)) for d in subdirs]
        services = [services]
    if isinstance(services, (list, tuple)) and services:
        pairs = [(_name_of(s), s) for s in services]
        seen: dict[str, Any] = {}
        for name, source in pairs:
            if name in seen:
                raise ValueError(f"services: {seen[name]!r} and {source!r} both make the service name "
                                 f"{name!r}; name them with a mapping {{name: logs}}")
            seen[name] = source
        return "logs", pairs
    raise ValueError("services must be a mapping {name: logs}, a directory whose subdirectories are the "
                     "services, a list of log paths or globs (one service each), or a Prometheus URL; "
                     f"got {services!r}")


def _name_of(source) -> str:
    """A service's name from its logs: a directory's name, a glob's last plain directory, or a file's
    name without its log and compression suffixes."""
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"services: {source!r} is not a path or a glob; name the services with a mapping "
                         "{name: logs}")
    path = os.fspath(source).rstrip("/\\") or os.fspath(source)
    if glob.has_magic(path):
        head = path
        while head and glob.has_magic(os.path.basename(head)):
            head = os.path.dirname(head)
        return os.path.basename(head) or path
    base = os.path.basename(path)
    if os.path.isdir(path):
        return base
    return re.sub(_LOG_SUFFIXES, "", base, flags=re.IGNORECASE) or base


class PerService:
    """A setting given once for every service, or per service: ``{name: value}``, with ``"*"`` for the
    services not named (``default`` for a service the mapping does not cover).  Every value is checked
    when given; the names once the services are known."""

    def __init__(self, value, what: str, check: Callable[[Any], Any], default=None):
        self.what, self.default = what, default
        self.per = isinstance(value, Mapping) and bool(value) and all(isinstance(k, str) for k in value)
        if self.per:
            self.values = {k: check(v) for k, v in value.items()}
        else:
            self.common = check(value)

    def check_names(self, names: list[str]) -> None:
        if self.per:
            unknown = sorted(set(self.values) - set(names) - {EVERY})
            if unknown:
                raise ValueError(f"{self.what} names services that are not in the fleet: {unknown}; the "
                                 f"services are {sorted(names)}")

    def get(self, name: str):
        """The service's value (``default`` when the mapping gives it none)."""
        if not self.per:
            return self.common
        return self.values.get(name, self.values.get(EVERY, self.default))


# ---------------------------------------------------------------------- reading
def log_service(name: str, source, window: float, timing: str, log_format: str, client,
                duration_unit: str | None = None) -> ServiceData:
    """A service's windows from its logs (on the Dask cluster of ``client`` when given);
    ``duration_unit`` that of a table's duration column whose name does not say it."""
    from .. import logs

    described = _describe(source)
    try:
        stated = {} if duration_unit is None else {"duration_unit": duration_unit}
        agg = logs.aggregate(source, window=window, log_format=log_format, timing=timing, by_endpoint=False,
                             client=client, **stated)
        windows = agg.windows()
    except Exception as exc:   # the service's row says why; the others go on
        text = error_text(exc)
        text = text[len(described) + 2:] if text.startswith(f"{described}: ") else text   # said once
        return ServiceData(name, described, error=f"cannot read {described}: {text}")
    notes = []
    if agg.skipped:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(agg.skipped_by_kind.items()))
        first = agg.skipped_examples[0]
        notes.append(f"skipped {agg.skipped} of {agg.lines} log lines ({kinds}); the first: "
                     f"{os.path.basename(str(first[0]))} line {first[1]}")
    if agg.undecodable:
        notes.append(f"{agg.undecodable} log line(s) held bytes that are not valid UTF-8 (read with "
                     "replacement characters)")
    return ServiceData(name, described, windows=windows, notes=notes)


def prometheus_service(name: str, series: tuple, step: float, servers: int, where: str) -> ServiceData:
    """A service's windows from its share of the grouped bucket (and CPU) series."""
    from .prometheus import _windows

    try:
        windows, _, notes = _windows(series[0], series[1], step, servers, False, where)
    except Exception as exc:
        return ServiceData(name, where, error=error_text(exc))
    return ServiceData(name, where, windows=[{k: w[k] for k in ("buckets", "arrival_rate", "utilization")
                                              if k in w} for w in windows], notes=list(notes))


def _describe(source) -> str:
    if isinstance(source, (list, tuple)):
        return ", ".join(os.fspath(s) for s in source) if len(source) <= 2 else f"{len(source)} paths"
    return os.fspath(source) if isinstance(source, (str, os.PathLike)) else repr(source)


def error_text(exc: BaseException) -> str:
    """An exception as one line: its message, with its type where the type says something."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return text if isinstance(exc, (ValueError, OSError)) else f"{type(exc).__name__}: {text}"


# ---------------------------------------------------------------------- what was observed
def bucket_table(windows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Upper bounds (the last ``inf``) and per-bucket counts summed over the windows.  Every window of a
    service has the same bounds (one log's edges, one histogram's ``le``)."""
    bounds, total = None, None
    for w in windows:
        if "counts" in w:
            upper = np.r_[np.asarray(w["bounds"], float), math.inf]
            counts = np.asarray(w["counts"], float)
        else:
            items = sorted((float(k), float(v)) for k, v in w["buckets"].items())
            upper = np.array([k for k, _ in items])
            counts = np.diff(np.r_[0.0, np.maximum.accumulate([v for _, v in items])])
        if bounds is None:
            bounds, total = upper, counts.copy()
        elif upper.shape != bounds.shape or np.any(upper != bounds):
            raise ValueError("the windows' bucket bounds differ; the p99 needs one set of bounds")
        else:
            total += counts
    return bounds, total


def observed_quantile(bounds: np.ndarray, counts: np.ndarray, q: float) -> float:
    """The ``q`` quantile of the durations counted in buckets with upper ``bounds`` (the last ``inf``).

    Approximation: inside its bucket the quantile is interpolated linearly in log time (linearly from
    0 in the first bucket); the error is at most the bucket's width -- a factor 10^0.1 = 1.26 for
    the default edges of :func:`capacity.logs.aggregate`, whatever the law.  ``inf`` when the quantile
    lies above the largest finite bound.  (Prometheus's ``histogram_quantile`` interpolates linearly
    in time, which errs towards the upper bound in wide buckets.)
    """
    cum = np.cumsum(counts)
    n = cum[-1]
    if not n > 0:
        return math.nan
    target = q * n
    k = int(np.searchsorted(cum, target, side="left"))
    if not math.isfinite(bounds[k]):
        return math.inf
    before = cum[k - 1] if k > 0 else 0.0
    share = (target - before) / counts[k] if counts[k] > 0 else 1.0
    if k == 0:
        return float(bounds[0] * share)
    low, high = float(bounds[k - 1]), float(bounds[k])
    return low * (high / low) ** share
