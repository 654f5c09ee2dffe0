"""One fit and one ceiling per service of a fleet, in one table: :func:`fleet`.

Each service's latency histograms -- its logs aggregated per window (:func:`capacity.logs.aggregate`),
or its share of one Prometheus query grouped by a label -- are fitted by
:func:`capacity.fit.from_histograms` (discipline, family and delay chosen from the data unless given),
and the fit answers the QPS ceiling at the SLO with its interval (:meth:`PercentileFit.ceiling`).
:class:`FleetReport` holds one row per service.  Given a Dask client the logs' files are aggregated on
the cluster and each service's fit is one task there; the rows are those of the local run, exactly
(the fits are deterministic and their interval draws seeded).
"""
from __future__ import annotations

import math
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from .._checks import check_choice, check_positive, check_quantile, check_servers
from .._result import Result
from ..exceptions import CapacityWarning, FitWarning
from ..units import format_quantile, format_rate, format_time
from ._fleet_sources import (PerService, ServiceData, bucket_table, error_text, fleet_kind, log_service,
                             observed_quantile, prometheus_service)
from ._inputs import check_confidence
from ._model import FAMILIES, MEASURED_AT

__all__ = ["FleetReport", "fleet"]

#: The columns of :attr:`FleetReport.table`, in order.
COLUMNS = ["service", "source", "requests", "windows", "peak_qps", "p99", "discipline", "family", "servers",
           "delay", "cpu_per_request", "cpu_per_request_low", "cpu_per_request_high", "scv", "capacity_qps",
           "slo", "ceiling_qps", "ceiling_low", "ceiling_high", "binding", "headroom", "warnings", "error"]
_DISPATCHERS = 8   # services whose logs are read at once on a Dask cluster (threads here only wait)


@dataclass(frozen=True, repr=False)
class FleetReport(Result):
    """Result of :func:`fleet`: one row per service.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per service (:data:`COLUMNS`): ``service``, ``source`` (its logs or its Prometheus
        label), ``requests`` and ``windows`` fitted, ``peak_qps`` (the busiest window's request
        rate), ``p99`` (seconds, all requests, read off the histogram: see Notes of :func:`fleet`),
        the model (``discipline``, ``family``, ``servers``, ``delay`` in seconds or NaN),
        ``cpu_per_request`` with its interval (``_low``, ``_high``), ``scv``, ``capacity_qps``, the
        ``slo`` (text), ``ceiling_qps`` with its interval (``ceiling_low``, ``ceiling_high``),
        ``binding`` (the SLO quantile that binds), ``headroom`` (``ceiling_qps / peak_qps - 1``),
        ``warnings`` (a tuple of sentences: lines skipped, the fit's caveats, the ceiling's
        contradictions with the data, an extrapolated ceiling) and ``error`` (why a service has no
        fit; empty otherwise).
    fits : dict
        Service -> its fit's record (``HistogramFit.to_dict()``: parameters with intervals, fit
        quality, candidates' model, warnings).
    slo : dict
        Service -> its SLO ``{q: seconds}`` (None where none was given).
    source : str
        Where the services came from.
    confidence_level : float
        Coverage of every interval.
    explanation : str
        The table as text, with the warnings and the service with the least headroom (``str()``).
    """

    table: pd.DataFrame
    fits: dict
    slo: dict
    source: str
    confidence_level: float
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("source", "table", "confidence_level")


def fleet(services, slo, *, client=None, servers=1, discipline: str | None = None, family: str | None = None,
          delay: str | float | None = "auto", measured_at: str | None = None, confidence: float = 0.95,
          window: float = 60.0, timing: str = "duration", log_format: str | None = None, duration_unit=None,
          histogram: str | None = None, selector: str = "", label: str = "job", start=None, end=None,
          step: float = 300.0, cpu: str | None = "process_cpu_seconds_total") -> FleetReport:
    """Fit every service of a fleet and answer its QPS ceiling at the SLO, in one table.

    Parameters
    ----------
    services : mapping, str, os.PathLike or list
        The services: ``{name: logs}`` (each a file, a glob, a directory or a list of them: nginx
        access logs, CSV or Parquet request tables, as :func:`capacity.logs.aggregate` reads them);
        a directory whose subdirectories are the services; a list of logs, one service each, named
        after its directory or file; or a Prometheus server's address (``"http://prom:9090"``) with
        ``histogram``, one service per value of ``label``.
    slo : mapping
        The latency objective ``{q: seconds}`` of every service, or per service
        ``{name: {q: seconds}}`` with ``"*"`` for the services not named.  A service without one has
        no ceiling (its row says so).
    client : dask.distributed.Client, optional
        Read each service's log files and fit each service on this Dask cluster (the files must be
        readable there); the table is the one of the run without it.
    servers : int or mapping, default 1
        Cores sharing each service's queue, for all or per service (``{name: n}``, ``"*"``).
    discipline, family, delay
        As in :func:`capacity.fit.from_histograms` (None, None, ``"auto"``: chosen from each
        service's data); ``discipline`` ``"ps"`` or ``"fcfs"``.
    measured_at : {"client", "proxy", "in_process"}, optional
        Where the latencies were timed; default ``"proxy"`` for logs (nginx's ``$request_time``) and
        ``"in_process"`` for Prometheus (as :func:`from_prometheus`).
    confidence : float, default 0.95
        Coverage of the intervals of the CPU per request and of the ceiling.
    window : float, default 60
        Logs: the window length in seconds.
    timing : {"duration", "upstream"}, default "duration"
        Logs: the whole request time or the upstream time (nginx ``$upstream_response_time``).
    log_format : str, optional
        Logs: the nginx ``log_format`` (default :data:`capacity.logs.COMBINED_WITH_TIMES`).
    duration_unit : {"s", "ms", "us", "ns"} or mapping, optional
        Logs in CSV or Parquet tables: the unit of the duration column, for all or per service
        (``{name: unit}``, ``"*"``), where its name does not say it (``latency`` rather than
        ``latency_ms``: such a service is otherwise a row with an error asking for it).  nginx's
        ``$request_time`` is in seconds by definition; a unit given for an nginx log is not used.
    histogram, selector, label, start, end, step, cpu
        Prometheus: the histogram's name, label matchers, the label whose values are the services
        (``"job"``), the range (default the last 24 hours), the window length in seconds and the CPU
        counter, as in :func:`capacity.fit.from_prometheus`.

    Returns
    -------
    FleetReport
        ``table`` (one row per service), ``fits``, ``slo``; ``str()`` prints the table.

    Raises
    ------
    ValueError
        Bad arguments (named), before any work.  A service that cannot be read or fitted is a row
        with its ``error``, never an exception.
    SourceError
        The Prometheus server unreachable or refusing the query.

    Warns
    -----
    FitWarning
        Once, naming the services that could not be fitted and those whose rows carry warnings.

    Notes
    -----
    Logs give no CPU reading, so their fits rest on how the latency histogram changes with the load
    (the windows must span several loads; one load leaves CPU variability and delay apart
    unidentified, which the warnings say).  Prometheus fits use the CPU counter too, when it has
    the grouping label.  ``peak_qps`` is the busiest window's rate and ``p99`` the 99th percentile
    of every request in the fitted windows, interpolated in its bucket (linearly in log time; within
    the bucket's width, a factor 1.26 for the logs' default edges).  ``headroom`` compares the
    ceiling with the peak: negative where the peak already exceeded it.  A ceiling at a higher
    utilisation than the busiest window's extrapolates the model, and its row says so.

    Examples
    --------
    With ``logs/api/access.log*.gz`` and ``logs/search/requests.csv``, and a tighter SLO for search::

        from capacity.fit import fleet
        report = fleet("logs/", {"*": {0.99: 0.3}, "search": {0.99: 0.1}})
        print(report)                  # the table, the warnings, the service with the least headroom
        report.table                   # one row per service (seconds, requests per second)

    ``tests/test_fleet.py`` runs it on simulated services against their single-service fits and their
    known truth.
    """
    kind, listed = fleet_kind(services)
    slo_of = PerService(slo, "slo", _check_slo, default=None)
    servers_of = PerService(servers, "servers", lambda v: int(check_servers(v)), default=1)
    unit_of = PerService(duration_unit, "duration_unit", _check_unit, default=None)
    options = _fit_options(discipline, family, delay, confidence)
    measured_at = check_choice(measured_at or ("proxy" if kind == "logs" else "in_process"), "measured_at",
                               MEASURED_AT)
    if client is not None and not all(callable(getattr(client, m, None)) for m in ("submit", "scatter")):
        raise ValueError(f"client must be a dask.distributed.Client or None, got {client!r}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if kind == "logs":
            _refuse_prometheus_options(histogram, selector, start, end)
            data, where = _read_logs(listed, slo_of, servers_of, unit_of, window, timing, log_format, client)
            if isinstance(services, (str, os.PathLike)):
                where = f"{os.fspath(services)}, {where}"
        else:
            if duration_unit is not None:
                raise ValueError(f"duration_unit={duration_unit!r} applies to logs, not to a Prometheus URL "
                                 "(its histogram's buckets are in seconds)")
            data, where = _read_prometheus(listed, histogram, selector, label, start, end, step, cpu, slo_of,
                                           servers_of)
        settings = [(servers_of.get(d.name), slo_of.get(d.name)) for d in data]
        results = _fit_all(data, settings, measured_at, options, client)
    _rewarn(caught)
    table = pd.DataFrame([row for row, _ in results], columns=COLUMNS)
    fits = {d.name: record for d, (_, record) in zip(data, results) if record is not None}
    report = FleetReport(table=table, fits=fits, slo={d.name: s for d, (_, s) in zip(data, settings)},
                         source=where, confidence_level=float(confidence),
                         explanation=_fleet_text(table, where, confidence))
    _warn_summary(table)
    return report


# ---------------------------------------------------------------------- checks
def _check_slo(slo) -> dict | None:
    if slo is None:
        return None
    if isinstance(slo, str) or not hasattr(slo, "items") or len(slo) == 0:
        raise ValueError(f"slo must be a non-empty mapping quantile -> seconds, e.g. {{0.99: 0.3}}, or one "
                         f"per service {{name: {{0.99: 0.3}}}}; got {slo!r}")
    return {float(check_quantile(q, "slo quantile")): float(check_positive(t, f"slo[{q}]"))
            for q, t in slo.items()}


def _check_unit(unit) -> str | None:
    from .._log_columns import _UNITS

    if unit is not None and unit not in _UNITS:
        raise ValueError(f"duration_unit must be one of {sorted(_UNITS)!r} or a mapping of them per service, "
                         f"got {unit!r}")
    return unit


def _fit_options(discipline, family, delay, confidence) -> dict:
    if discipline is not None:
        check_choice(discipline, "discipline", ("ps", "fcfs"))
    if family is not None and family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES} or None, got {family!r}")
    if not (delay is None or delay in ("auto", "constant")
            or (isinstance(delay, (int, float)) and not isinstance(delay, bool) and delay >= 0)):
        raise ValueError(f"delay must be 'auto', 'constant', None or seconds >= 0, got {delay!r}")
    check_confidence(confidence)
    return dict(discipline=discipline, family=family, delay=delay, confidence=float(confidence))


def _refuse_prometheus_options(histogram, selector, start, end) -> None:
    for name, value, default in (("histogram", histogram, None), ("selector", selector, ""),
                                 ("start", start, None), ("end", end, None)):
        if value != default:
            raise ValueError(f"{name}={value!r} applies to a Prometheus URL, not to logs")


# ---------------------------------------------------------------------- reading
def _read_logs(listed, slo_of, servers_of, unit_of, window, timing, log_format,
               client) -> tuple[list[ServiceData], str]:
    from .. import logs

    names = [name for name, _ in listed]
    slo_of.check_names(names)
    servers_of.check_names(names)
    unit_of.check_names(names)
    window = float(check_positive(window, "window"))
    check_choice(timing, "timing", ("duration", "upstream"))
    fmt = logs.COMBINED_WITH_TIMES if log_format is None else log_format

    def read(item):
        return log_service(item[0], item[1], window, timing, fmt, client, unit_of.get(item[0]))

    if client is None:
        data = [read(item) for item in listed]
    else:
        # logs.aggregate(client=) sends a service's files to the cluster and waits; a few services at a
        # time keep the cluster busy while these threads only wait.
        with ThreadPoolExecutor(min(_DISPATCHERS, len(listed))) as pool:
            data = list(pool.map(read, listed))
    return data, f"logs in windows of {format_time(window)}"


def _read_prometheus(url, histogram, selector, label, start, end, step, cpu, slo_of,
                     servers_of) -> tuple[list[ServiceData], str]:
    from .prometheus import labelled_results

    if histogram is None:
        raise ValueError("histogram: required when services is a Prometheus URL (the metric's name)")
    groups, source = labelled_results(url, histogram, selector, label, start, end, step, cpu)
    if not groups:
        from ..exceptions import SourceError

        raise SourceError(f"Prometheus at {url}: the query {source['queries']['buckets']!r} returned no "
                          "series (check the histogram's name, without '_bucket', and the selector)")
    # series without the label are one service too, named so that a per-service setting can name it
    named = {(value or f"(no {label})"): value for value in sorted(groups)}
    slo_of.check_names(list(named))
    servers_of.check_names(list(named))
    data = [prometheus_service(name, groups[value], source["step"], servers_of.get(name), f"{label}={value!r}")
            for name, value in named.items()]
    return data, f"Prometheus at {url}, {histogram} by {label} in windows of {format_time(source['step'])}"


# ---------------------------------------------------------------------- fitting
def _fit_all(data: list[ServiceData], settings, measured_at: str, options: dict, client) -> list[tuple]:
    """Each service's row and fit record, in order: here, or one task per service on the cluster."""
    args = [(d.name, d.source, d.windows, d.notes, d.error, srv, slo, measured_at, options)
            for d, (srv, slo) in zip(data, settings)]
    if client is None:
        return [_service_row(*a) for a in args]
    # the windows travel as data, not inside the task graph (a day of minutes is megabytes)
    windows = client.scatter([a[2] for a in args])
    futures = [client.submit(_service_row, *a[:2], w, *a[3:], pure=False) for a, w in zip(args, windows)]
    out = []
    for a, future in zip(args, futures):
        try:
            out.append(future.result())
        except Exception as exc:   # the cluster's own failure (a lost worker): that service's row says it
            row = _empty_row(a[0], a[1], a[5], a[6])
            row["error"] = f"the Dask cluster failed: {type(exc).__name__}: {error_text(exc)}"
            out.append((row, None))
    return out


def _service_row(name, source, windows, notes, error, servers, slo, measured_at, options) -> tuple[dict, Any]:
    """One service's row of the table and its fit's record (the task a Dask worker runs)."""
    from .histograms import from_histograms

    row = _empty_row(name, source, servers, slo)
    row["warnings"] = tuple(notes)
    if error:
        row["error"] = error
        return row, None
    try:
        bounds, counts = bucket_table(windows)
        row.update(requests=float(counts.sum()), windows=len(windows),
                   peak_qps=max(float(w["arrival_rate"]) for w in windows),
                   p99=observed_quantile(bounds, counts, 0.99))
        fit = from_histograms(windows, servers, measured_at=measured_at, **options)
    except Exception as exc:   # the service's row says why; the others go on
        row["error"] = f"cannot fit: {error_text(exc)}"
        return row, None
    lo, hi = fit.summary.loc["cpu_per_request", ["lower", "upper"]]
    row.update(discipline=fit.discipline, family=fit.family, delay=float(fit.delay_ or math.nan),
               cpu_per_request=float(fit.cpu_per_request_), cpu_per_request_low=float(lo),
               cpu_per_request_high=float(hi), scv=float(fit.scv_), capacity_qps=float(fit.capacity_qps_))
    said = list(notes) + list(fit.warnings_)
    if math.isinf(row["p99"]):
        said.append(f"the p99 is above the largest bucket bound {format_time(float(bounds[-2]))}")
    if slo is None:
        said.append("no SLO given for this service: no ceiling")
    else:
        said += _ceiling_into(row, fit, slo, options["confidence"])
    row["warnings"] = tuple(said)
    return row, fit.to_dict()


def _ceiling_into(row: dict, fit, slo: dict, confidence: float) -> list[str]:
    """Put the ceiling and its interval into ``row``; the sentences it adds to the warnings."""
    try:
        ceiling, low, high = fit.ceiling(slo, interval=confidence)
    except (NotImplementedError, ValueError) as exc:
        return [f"no ceiling: {error_text(exc)}"]
    qps = float(ceiling.qps)
    row.update(ceiling_qps=qps, ceiling_low=float(low), ceiling_high=float(high),
               binding=float(ceiling.binding),
               headroom=qps / row["peak_qps"] - 1.0 if row["peak_qps"] > 0 else math.inf)
    said = list(ceiling.contradictions)
    seen = float(fit.fit_quality_.get("max_utilization", math.nan))
    if qps > 0 and float(ceiling.utilization) > 1.05 * seen:
        said.append(f"the ceiling is at utilisation {float(ceiling.utilization):.2f}, above the busiest "
                    f"window's {seen:.2f}: it extrapolates the model")
    return said


def _empty_row(name, source, servers, slo) -> dict:
    row = dict.fromkeys(COLUMNS, math.nan)
    row.update(service=name, source=source, requests=0.0, windows=0, discipline="", family="",
               servers=servers if servers is not None else 0, warnings=(), error="",
               slo=", ".join(f"{format_quantile(q)} <= {format_time(t)}" for q, t in sorted(slo.items()))
               if slo else "")
    return row


# ---------------------------------------------------------------------- saying it
def _rewarn(caught) -> None:
    """Warnings other than the fits' and readers' caveats (the table holds those), repeated: a numerical
    warning must not be lost in a fleet."""
    from ..logs import LogReadWarning

    for w in caught:
        if not issubclass(w.category, (CapacityWarning, LogReadWarning)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _warn_summary(table: pd.DataFrame) -> None:
    failed = table.loc[table["error"] != "", "service"].tolist()
    warned = table.loc[(table["error"] == "") & (table["warnings"].map(len) > 0), "service"].tolist()
    parts = []
    if failed:
        parts.append(f"{len(failed)} service(s) could not be fitted: {', '.join(failed)}")
    if warned:
        parts.append(f"{len(warned)} service(s) carry warnings: {', '.join(warned)}")
    if parts:
        warnings.warn("fleet: " + "; ".join(parts) + " (see the report's table)", FitWarning, stacklevel=3)


def _fleet_text(table: pd.DataFrame, where: str, confidence: float) -> str:
    level = f"{100 * confidence:g}%"
    head = ["service", "peak QPS", "p99", "model", f"CPU/request [{level}]", f"ceiling QPS [{level}]",
            "headroom", "SLO"]
    rows = []
    for _, r in table.iterrows():
        if r["error"]:
            rows.append([r["service"], _num(r["peak_qps"]), _time(r["p99"]), "error: see below", "", "", "",
                         r["slo"]])
            continue
        model = f"{r['discipline']} {r['family']}"
        model += "" if math.isnan(r["delay"]) else f" +{format_time(r['delay'])}"
        cpu = f"{format_time(r['cpu_per_request'])} [{_time(r['cpu_per_request_low'])}, " \
              f"{_time(r['cpu_per_request_high'])}]"
        ceiling = "-" if math.isnan(r["ceiling_qps"]) else \
            f"{r['ceiling_qps']:.4g} [{r['ceiling_low']:.4g}, {r['ceiling_high']:.4g}]"
        headroom = "-" if math.isnan(r["headroom"]) else f"{100 * r['headroom']:+.0f}%"
        rows.append([r["service"], _num(r["peak_qps"]), _time(r["p99"]), model, cpu, ceiling, headroom,
                     r["slo"]])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    lines = [f"Fleet of {len(table)} service{'s' if len(table) != 1 else ''}: {where}", "",
             "  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    lines += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip() for row in rows]
    notes = [f"  {r['service']}: {r['error']}" for _, r in table.iterrows() if r["error"]]
    notes += [f"  {r['service']}: {w}" for _, r in table.iterrows() if not r["error"] for w in r["warnings"]]
    if notes:
        lines += ["", "errors and warnings:"] + notes
    fitted = table[np.isfinite(table["headroom"].to_numpy(dtype=float))]
    if len(fitted):
        worst = fitted.loc[fitted["headroom"].idxmin()]
        verdict = ("its peak was already above the ceiling" if worst["headroom"] < 0
                   else "its peak can grow by that much before the SLO breaks")
        lines += ["", f"Least headroom: {worst['service']}, {100 * worst['headroom']:+.0f}% (peak "
                      f"{format_rate(worst['peak_qps'])}, ceiling {format_rate(worst['ceiling_qps'])}): {verdict}."]
    return "\n".join(lines)


def _num(x) -> str:
    return "-" if not np.isfinite(x) else f"{x:.4g}"


def _time(x) -> str:
    if isinstance(x, float) and math.isnan(x):
        return "-"
    return "> largest bound" if math.isinf(x) else format_time(float(x))

