"""The ``fit`` subcommand: CPU time per request from latency percentiles or a per-request log."""
from __future__ import annotations

import argparse
import math
import sys
import warnings

from ._common import _ms, _one_line, _q, _UsageError

_SLOW_FAMILIES = ("lognormal", "gamma", "hyperexponential")
_CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.xz", ".tsv", ".parquet", ".pq")


def _read_log(args: argparse.Namespace):
    """The log as a DataFrame, plus the reader's warnings as plain lines."""
    from .. import logs

    fmt = args.format or ("csv" if args.log.lower().endswith(_CSV_SUFFIXES) else "nginx")
    if args.log_format is not None and fmt != "nginx":
        raise _UsageError("argument --log-format: applies to nginx logs only (--format nginx)")
    unit = args.duration_unit
    if unit is not None and fmt == "nginx":
        raise _UsageError("argument --duration-unit: applies to CSV/Parquet logs (nginx's $request_time is "
                          "seconds)")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if fmt == "nginx":
                df = logs.read_nginx(args.log, args.log_format or logs.COMBINED_WITH_TIMES)
            else:
                df = logs.read_requests(args.log, duration_unit=unit)
    except (OSError, ValueError, ImportError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else _one_line(exc)
        if reason.startswith(f"{args.log}: "):   # the readers name the file themselves
            reason = reason[len(args.log) + 2:]
        raise _UsageError(f"argument --log: cannot read {args.log!r} as {fmt}: {reason}") from None
    return df, fmt, [_one_line(w.message) for w in caught if issubclass(w.category, UserWarning)]


def _fit_percentiles(args: argparse.Namespace):
    from ..fit import from_percentiles

    if args.qps is None:
        raise _UsageError("argument --qps: required with PERCENTILES (the request rate they were measured at)")
    for flag, value in (("--format", args.format), ("--log-format", args.log_format),
                        ("--timing", args.timing), ("--bins", args.bins), ("--duration-unit", args.duration_unit)):
        if value is not None:
            raise _UsageError(f"argument {flag}: applies to --log only")
    smallest = min(args.percentiles.values())
    if isinstance(args.delay, float) and args.delay >= smallest:
        raise _UsageError(f"argument --delay: {_ms(args.delay)} is not below the smallest percentile "
                          f"{_ms(smallest)}")
    try:
        res = from_percentiles(args.percentiles, args.qps, servers=args.servers, discipline=args.discipline,
                               family=args.family, utilization=args.cpu_util, delay=args.delay,
                               n_requests=args.requests, slices=args.slices,
                               admission=args.admission or "fifo", slice_delay=args.slice_delay or 0.0,
                               measured_at=args.measured_at or "client")
    except ValueError as exc:
        # Say it in the command line's words: the argument, and flags instead of keyword arguments.
        msg = _one_line(exc).replace("(utilization=, scv=, delay=<seconds>, family=)",
                                     "(--cpu-util, --delay TIME, --family exponential)")
        if msg.startswith("percentiles:"):
            msg = "argument PERCENTILES:" + msg[len("percentiles:"):]
        elif msg.startswith("utilization"):
            msg = "argument --cpu-util: " + msg
        raise _UsageError(msg) from None
    source = {"kind": "percentiles", "qps": args.qps,
              "percentiles": {_q(q): t for q, t in args.percentiles.items()},
              "cpu_util": args.cpu_util, "requests": args.requests}
    return res, res, source, []


def _fit_log(args: argparse.Namespace):
    from ..fit import from_requests

    for flag, value in (("--qps", args.qps), ("--cpu-util", args.cpu_util), ("--requests", args.requests)):
        if value is not None:
            raise _UsageError(f"argument {flag}: not used with --log (the log gives the rates and counts)")
    df, fmt, notes = _read_log(args)
    extra = {} if args.slices is None else {"slices": args.slices}
    if args.admission is not None:
        extra["admission"] = args.admission
    if args.slice_delay is not None:
        extra["slice_delay"] = args.slice_delay
    res = from_requests(df, servers=args.servers, discipline=args.discipline, family=args.family,
                        delay=args.delay, bins=args.bins or 4, timing=args.timing or "duration",
                        by_endpoint=False, measured_at=args.measured_at or "client", **extra)
    if res.fit_ is None:
        why = "; ".join(res.warnings_) or "no usable load bin"
        raise _UsageError(f"argument --log: cannot fit {args.log!r}: {why}")
    source = {"kind": "log", "path": args.log, "format": fmt, "requests": int(res.n_observations),
              "lines_skipped": int(df.attrs.get("skipped", 0)), "load_bins": int(len(res.bins_)),
              "timing": args.timing or "duration",
              "latency": args.timing or "duration"}   # the old key of "timing", kept for one release
    return res, res.fit_, source, notes


def _refuse_rate_flags(args: argparse.Namespace, source: str) -> None:
    """Flags of the percentile and log fits that a time-series source answers itself."""
    for flag, value in (("--qps", args.qps), ("--cpu-util", args.cpu_util), ("--requests", args.requests),
                        ("--bins", args.bins), ("--timing", args.timing), ("--format", args.format),
                        ("--log-format", args.log_format), ("--duration-unit", args.duration_unit)):
        if value is not None:
            raise _UsageError(f"argument {flag}: not used with {source} (its windows give the rates and counts)")


def _model_options(args: argparse.Namespace, slices_default) -> dict:
    """The model flags as fit options; the event-loop ones only for --discipline rr."""
    options = dict(discipline=args.discipline, family=args.family, delay=args.delay)
    if args.discipline == "rr":
        options.update(slices=args.slices if args.slices is not None else slices_default,
                       admission=args.admission or "fifo", slice_delay=args.slice_delay or 0.0)
    return options


def _fit_prometheus(args: argparse.Namespace):
    import os
    import time

    from ..exceptions import SourceError
    from ..fit import from_prometheus, from_prometheus_json

    _refuse_rate_flags(args, "--prometheus")
    if args.delay == "lognormal":
        raise _UsageError("argument --delay: lognormal is not available with --prometheus; use constant or a time")
    # No --slices: from_histograms profiles the count (one slice would be FCFS under another name).
    options = _model_options(args, slices_default=None)
    options["measured_at"] = args.measured_at or "in_process"
    target = args.prometheus
    try:
        if target.startswith(("http://", "https://")):
            if args.histogram is None:
                raise _UsageError("argument --histogram: required with --prometheus URL (the metric name)")
            end = time.time()
            start = end - (args.since if args.since is not None else 86400.0)
            step = args.step if args.step is not None else 300.0
            cpu = {} if args.cpu_counter is None else {"cpu": args.cpu_counter}
            res = from_prometheus(target, args.histogram, args.selector, start=start, end=end, step=step,
                                  servers=args.servers, **cpu, **options)
        else:
            for flag, value in (("--histogram", args.histogram), ("--since", args.since)):
                if value is not None:
                    raise _UsageError(f"argument {flag}: applies to --prometheus URL, not to a saved answer")
            if not os.path.exists(target):
                raise _UsageError(f"argument --prometheus: {target!r} is neither an http(s):// address nor "
                                  "a file")
            if args.cpu_counter is not None and not os.path.exists(args.cpu_counter):
                raise _UsageError(f"argument --cpu-counter: with a saved --prometheus answer it is the saved CPU "
                                  f"answer's file; {args.cpu_counter!r} is not a file")
            res = from_prometheus_json(target, args.cpu_counter, step=args.step, servers=args.servers, **options)
    except SourceError as exc:
        raise _UsageError(f"argument --prometheus: {_one_line(exc)}") from None
    return res, res, dict(res.source_), []


def _fit_file_source(args: argparse.Namespace):
    """--timeseries FILE (a dashboard export) or --k6 FILE (a k6 JSON run)."""
    from ..fit import from_k6, from_timeseries

    _refuse_rate_flags(args, "--k6" if args.k6 else "--timeseries")
    if args.k6 is not None:
        options = _model_options(args, slices_default=None)     # None: from_histograms profiles them
        try:
            res = from_k6(args.k6, window=args.step or 60.0, servers=args.servers,
                          measured_at=args.measured_at or "client", **options)
        except ValueError as exc:
            raise _UsageError(f"argument --k6: {_one_line(exc)}") from None
    else:
        options = _model_options(args, slices_default=None)     # None: from_percentiles profiles them
        try:
            res = from_timeseries(args.timeseries, servers=args.servers, window=args.step,
                                  measured_at=args.measured_at or "client", **options)
        except ValueError as exc:
            raise _UsageError(f"argument --timeseries: {_one_line(exc)}") from None
    return res, res, dict(res.source_), []


def _cmd_fit(args: argparse.Namespace) -> tuple[dict, str]:
    # What is not given is chosen from the data (the fits' candidates, compared by QAIC).
    if args.delay is None:
        args.delay = "auto"
    _check_fit_flags(args)
    with warnings.catch_warnings(record=True):
        # The fits record their caveats in warnings_; they are printed below as plain lines.
        warnings.simplefilter("always")
        if args.prometheus is not None:
            res, fit, source, notes = _fit_prometheus(args)
        elif args.k6 is not None or args.timeseries is not None:
            res, fit, source, notes = _fit_file_source(args)
        elif args.log is None:
            res, fit, source, notes = _fit_percentiles(args)
        else:
            res, fit, source, notes = _fit_log(args)
    data = _fit_record(args, res, fit, source, notes)
    return data, _fit_table(args, fit, data)


def _check_fit_flags(args: argparse.Namespace) -> None:
    """The combinations of flags that make no sense together, refused before any work."""
    given = [name for name, value in (("PERCENTILES", args.percentiles), ("--log", args.log),
                                      ("--prometheus", args.prometheus), ("--timeseries", args.timeseries),
                                      ("--k6", args.k6)) if value is not None]
    if not given:
        raise _UsageError("argument PERCENTILES: give percentiles like p50=45ms,p99=300ms with --qps, "
                          "--log FILE, or --prometheus URL --histogram NAME")
    if len(given) > 1:
        raise _UsageError(f"argument {given[1]}: give one of PERCENTILES, --log, --prometheus, --timeseries "
                          f"or --k6, not {' and '.join(given)}")
    if args.prometheus is None:
        for flag, value in (("--histogram", args.histogram), ("--since", args.since),
                            ("--selector", args.selector or None), ("--cpu-counter", args.cpu_counter)):
            if value is not None:
                raise _UsageError(f"argument {flag}: applies to --prometheus only")
    if args.prometheus is None and args.k6 is None and args.timeseries is None:
        if args.step is not None:
            raise _UsageError("argument --step: applies to --prometheus, --timeseries and --k6 only")
    for flag, value in (("--slices", args.slices), ("--admission", args.admission),
                        ("--slice-delay", args.slice_delay)):
        if value is not None and args.discipline != "rr":
            raise _UsageError(f"argument {flag}: applies to --discipline rr only")
    if args.discipline in ("ps", "rr") and args.family in _SLOW_FAMILIES and args.slices != 1 \
            and sys.stderr.isatty():
        # Not an error: tell a person at a terminal why it is quiet, and how to get a fast answer.
        print(f"capacity fit: note: {args.discipline} with {args.family} CPU time takes 10 s to 2 min to fit; "
              "--discipline fcfs or --family exponential is fast", file=sys.stderr)


def _fit_record(args: argparse.Namespace, res, fit, source: dict, notes: list) -> dict:
    """What ``--json`` prints: the fit's own record (``to_dict``) under ``result``, with the
    command's context and the fields scripts read by name."""
    from ..distributions import Service

    params = {}
    for name, row in fit.summary.iterrows():
        params[name] = {"estimate": float(row["estimate"]), "lower": float(row["lower"]),
                        "upper": float(row["upper"]), "unit": row["unit"], "note": row["note"]}
    if isinstance(fit.delay_, Service):
        delay = {"kind": "lognormal", "mean_s": float(fit.delay_.mean), "scv": float(fit.delay_.scv)}
    elif fit.delay_ is not None:
        delay = {"kind": "constant" if args.delay in ("constant", "auto") else "fixed", "seconds": float(fit.delay_)}
    else:
        delay = None
    if "le" in fit.comparison_.columns:      # histograms: share of requests above each bound
        comparison = [{"arrival_rate": float(r["arrival_rate"]), "le_s": float(r["le"]),
                       "observed_share_above": float(r["observed_share_above"]),
                       "model_share_above": float(r["model_share_above"])}
                      for _, r in fit.comparison_.iterrows()]
    else:
        comparison = [{"arrival_rate": float(r["arrival_rate"]), "q": _q(r["q"]),
                       "observed_s": float(r["observed"]), "model_s": float(r["model"]),
                       "rel_error": float(r["rel_error"])}
                      for _, r in fit.comparison_.iterrows()]
    from ..fit._fitted import node_cluster_note

    ceiling, warn_lines = _fit_ceiling(args, fit), notes + list(res.warnings_)
    said = [note for note in (node_cluster_note(fit.discipline, int(args.servers)),) if note]
    if isinstance(ceiling, str):
        warn_lines, ceiling = warn_lines + [ceiling], None
    return {"command": "fit", "source": source, "model": fit.model, "discipline": fit.discipline,
            "family": fit.family, "servers": args.servers,
            "slices": None if fit.slices_ is None else int(fit.slices_),
            "admission": fit.admission_, "slice_delay_s": fit.slice_delay_,
            "cpu_per_request_s": float(fit.cpu_per_request_),
            "cpu_per_request_interval_s": [params["cpu_per_request"]["lower"], params["cpu_per_request"]["upper"]],
            "scv": float(fit.scv_), "delay": delay, "capacity_qps": float(fit.capacity_qps_),
            "confidence": fit.confidence_level, "parameters": params, "comparison": comparison,
            "fit_quality": {k: float(v) for k, v in fit.fit_quality_.items()}, "ceiling": ceiling, "notes": said,
            "candidates": _candidates(fit),
            "warnings": warn_lines, "result": res.to_dict()}


def _candidate_lines(chosen: list[dict], shown: int = 5) -> list[str]:
    """The candidates compared, best first: each one's CPU, scv, QAIC behind the best, Akaike
    weight (how much the data favour it) and its miss of the data; the first ``shown``."""
    miss = next(k for k in chosen[0] if k.startswith("rms_"))
    what = "miss in time" if miss == "rms_log_time_miss" else "miss (RMS)"
    lines = ["", f"  {'discipline':<11}{'family':<18}{'delay':<10}{'CPU':>9}{'scv':>8}{'dQAIC':>8}{'weight':>8}"
                 f"{what:>14}"]
    for c in chosen[:shown]:
        edge = f"  ({c['at_an_edge']} on its bound: set aside)" if c["at_an_edge"] else ""
        lines.append(f"  {c['discipline']:<11}{c['family']:<18}{str(c['delay']):<10}{_ms(c['cpu_per_request_s']):>9}"
                     f"{c['scv']:>8.3g}{c['delta_qaic']:>8.1f}{c['weight']:>8.2f}{100 * c[miss]:>13.1f}%{edge}")
    if len(chosen) > shown:
        lines.append(f"  ({len(chosen) - shown} more in --json)")
    return lines


def _candidates(fit) -> list | None:
    table = getattr(fit, "candidates_", None)
    if table is None:
        return None
    miss = table.columns[-1]        # the fit's own measure of its miss (rms_rel_error, rms_log_time_miss)
    return [{"discipline": r["discipline"], "family": r["family"], "delay": r["delay"],
             "cpu_per_request_s": float(r["cpu_per_request"]), "scv": float(r["scv"]),
             "delta_qaic": float(r["delta_qaic"]), "weight": float(r["weight"]),
             "at_an_edge": r["at_an_edge"], miss: float(r[miss])} for _, r in table.iterrows()]


def _fit_ceiling(args: argparse.Namespace, fit) -> dict | str | None:
    """The QPS ceiling the fitted model implies for --slo; a sentence when it has none."""
    if args.slo is None:
        return None
    try:
        c = fit.ceiling(args.slo)
    except NotImplementedError as exc:
        return f"no QPS ceiling: {_one_line(exc)}"
    return {"slo": {_q(q): t for q, t in args.slo.items()}, "qps": float(c.qps),
            "capacity_qps": float(c.capacity_qps), "utilization": float(c.utilization), "binding": _q(c.binding),
            "contradictions": list(c.contradictions)}


def _show(value: float, unit: str) -> str:
    if unit == "s":
        return _ms(value)
    return f"{value:.4g} QPS" if unit == "req/s" else f"{value:.4g}"


def _fit_table(args: argparse.Namespace, fit, data: dict) -> str:
    """The fit as a person reads it: parameters with intervals, observed vs model, warnings."""
    source, params, ceiling = data["source"], data["parameters"], data["ceiling"]
    level = f"{100 * fit.confidence_level:g}%"
    if source["kind"] == "percentiles":
        head = f"at {args.qps:g} QPS"
    elif source["kind"].startswith("prometheus"):
        where = source.get("url", args.prometheus)
        head = f"from {where} ({source['windows']} windows of {_ms(source['step'])})"
    elif source["kind"] == "k6":
        head = f"from {args.k6} ({source['points']} requests, {source['windows']} windows of {_ms(source['window'])})"
    elif source["kind"] == "timeseries":
        head = f"from {args.timeseries} ({source['rows_used']} of {source['rows']} rows)"
    else:
        head = (f"from {args.log} ({source['requests']} requests, {source['load_bins']} load bins, "
                f"{source['timing']})")
    lines = [f"Fit: {fit.model}; {head}, {args.servers} server{'s' if args.servers != 1 else ''}"]
    chosen = data.get("candidates")
    if chosen:
        runner = next((c for c in chosen[1:] if (c["discipline"], c["family"]) != (chosen[0]["discipline"],
                                                                                 chosen[0]["family"])), chosen[1])
        lines.append(f"model chosen from the data (smallest QAIC of {len(chosen)} candidates); next other model: "
                     f"{runner['discipline']} {runner['family']}, delay {runner['delay']}, "
                     f"{runner['delta_qaic']:.1f} QAIC behind")
        lines += _candidate_lines(chosen)
    lines += ["",
             f"{'parameter':<20}{'estimate':>12}  {level + ' interval':<24}note"]
    labels = {"cpu_per_request": "CPU per request", "capacity_qps": "capacity (100% CPU)"}
    for name, p in params.items():
        have = math.isfinite(p["lower"]) and math.isfinite(p["upper"])
        interval = f"[{_show(p['lower'], p['unit'])}, {_show(p['upper'], p['unit'])}]" if have else "-"
        lines.append(f"{labels.get(name, name):<20}{_show(p['estimate'], p['unit']):>12}  {interval:<24}{p['note']}")
    if source["kind"] == "percentiles" and args.requests is None:
        lines.append("(no intervals: give --requests N, the requests behind the percentiles)")
    quality = fit.fit_quality_
    if data["comparison"] and "le_s" in data["comparison"][0] and len(fit.windows_) > 4:
        # A day of windows: one line per window, at most 12 of them spread over the loads.
        import numpy as np

        win = fit.windows_.sort_values("arrival_rate")
        pick = sorted(set(np.linspace(0, len(win) - 1, min(12, len(win))).round().astype(int)))
        lines += ["", f"windows ({len(pick)} of {len(win)}, spread over the loads; --json has all)",
                  f"{'QPS':>10}{'requests':>11}{'CPU (model)':>13}{'CPU (measured)':>16}{'deviance':>10}"]
        for _, r in win.iloc[pick].iterrows():
            measured = "-" if not np.isfinite(r["utilization_measured"]) else f"{100 * r['utilization_measured']:.0f}%"
            lines.append(f"{r['arrival_rate']:>10.4g}{r['n_requests']:>11.0f}{100 * r['utilization_model']:>12.0f}%"
                         f"{measured:>16}{r['deviance']:>10.1f}")
        lines.append(f"RMS miss in time at the bucket bounds {100 * float(quality['rms_log_time_miss']):.1f}%, "
                     f"busiest window at utilisation {float(quality['max_utilization']):.2f}")
    elif data["comparison"] and "le_s" in data["comparison"][0]:
        lines += ["", "observed vs model: share of requests slower than each bucket bound",
                  f"{'QPS':>10}{'bound':>10}{'observed':>11}{'model':>11}"]
        for r in data["comparison"]:
            lines.append(f"{r['arrival_rate']:>10.4g}{_ms(r['le_s']):>10}{r['observed_share_above']:>11.4g}"
                         f"{r['model_share_above']:>11.4g}")
        lines.append(f"RMS miss in time at the bounds {100 * float(quality['rms_log_time_miss']):.1f}%, "
                     f"busiest window at utilisation {float(quality['max_utilization']):.2f}")
    else:
        lines += ["", "observed vs model", f"{'QPS':>10}{'percentile':>12}{'observed':>11}{'model':>11}{'error':>9}"]
        for r in data["comparison"]:
            lines.append(f"{r['arrival_rate']:>10.4g}{r['q']:>12}{_ms(r['observed_s']):>11}{_ms(r['model_s']):>11}"
                         f"{100 * r['rel_error']:>+8.1f}%")
        lines.append(f"RMS relative error {100 * float(quality['rms_rel_error']):.1f}%, "
                     f"busiest observation at utilisation {float(quality['max_utilization']):.2f}")
    if ceiling is not None:
        slo_text = ", ".join(f"{q} <= {_ms(t)}" for q, t in ceiling["slo"].items())
        lines += ["", f"QPS ceiling for {slo_text}: {ceiling['qps']:.4g} QPS "
                      f"({100 * ceiling['utilization']:.0f}% of the {ceiling['capacity_qps']:.4g} QPS capacity; "
                      f"binds: {ceiling['binding']})"]
        lines += [f"  ! {note}" for note in ceiling["contradictions"]]
    if data["notes"]:
        lines += [""] + [f"note: {note}" for note in data["notes"]]
    if data["warnings"]:
        lines += ["", "warnings:"] + [f"  - {w}" for w in data["warnings"]]
    return "\n".join(lines)
