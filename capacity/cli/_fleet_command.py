"""The ``fleet`` subcommand: one fit and one QPS ceiling per service in one table (:func:`capacity.fit.fleet`).

``capacity fleet logs/ --slo p99=300ms`` (each subdirectory of ``logs/`` a service),
``capacity fleet api=logs/api/*.log search=logs/search --slo p99=300ms --slo search:p99=1s``, or
``capacity fleet --prometheus URL --histogram NAME --slo p99=300ms`` (one service per ``job``).
"""
from __future__ import annotations

import argparse
import os
import re
import time
import warnings

from .. import units
from ._common import _one_line, _UsageError
from ._logs_command import _connect
from ._types import _delay, _time

_FAMILIES = ("lognormal", "gamma", "hyperexponential", "exponential", "deterministic")   # as `capacity fit`
_NAMED = re.compile(r"^(?P<name>[^=/\\]+?)=(?P<path>.+)$")
_NAMED_SLO = re.compile(r"^(?P<name>.+):(?P<slo>p[0-9.]+=.*)$")


def _fleet_slo(text: str) -> tuple[str | None, dict]:
    """``--slo p99=300ms`` (every service) or ``--slo NAME:p99=300ms`` (one service)."""
    match = _NAMED_SLO.match(text.strip())
    name, body = (match["name"], match["slo"]) if match else (None, text)
    try:
        return name, units.parse_slo(body)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(_one_line(exc)) from None


def _fleet_servers(text: str) -> tuple[str | None, int]:
    """``--servers 4`` (every service) or ``--servers NAME:4`` (one service)."""
    name, _, count = text.strip().rpartition(":")
    try:
        value = int(count)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or NAME:N, got {text!r}")
    return (name or None), value


def _fleet_unit(text: str) -> tuple[str | None, str]:
    """``--duration-unit ms`` (every service) or ``--duration-unit NAME:ms`` (one service)."""
    name, _, unit = text.strip().rpartition(":")
    if unit not in ("s", "ms", "us", "ns"):
        raise argparse.ArgumentTypeError(f"expected s, ms, us or ns, or NAME:UNIT, got {text!r}")
    return (name or None), unit


def _per_service(given: list, what: str) -> object:
    """The API's form of repeated ``--slo`` / ``--servers``: one value, or ``{name: value, "*": value}``."""
    common = [v for n, v in given if n is None]
    named = {n: v for n, v in given if n is not None}
    if len(common) > 1:
        raise _UsageError(f"argument --{what}: given twice for every service; name a service as NAME:...")
    if not named:
        return common[0]
    return {**named, **({"*": common[0]} if common else {})}


def _services(args: argparse.Namespace):
    """The ``services`` argument of :func:`capacity.fit.fleet` from the positional arguments."""
    if args.prometheus is not None:
        if args.services:
            raise _UsageError("argument SERVICES: not used with --prometheus (its label gives the services)")
        return args.prometheus
    if not args.services:
        raise _UsageError("argument SERVICES: give a directory of services, logs (NAME=LOGS), or "
                          "--prometheus URL --histogram NAME")
    if len(args.services) == 1 and not _NAMED.match(args.services[0]) and os.path.isdir(args.services[0]):
        return args.services[0]
    named = [_NAMED.match(s) for s in args.services]
    if any(named):
        if not all(named):
            raise _UsageError("argument SERVICES: name every service (NAME=LOGS) or none")
        services = {m["name"]: m["path"] for m in named}
        if len(services) != len(named):
            raise _UsageError("argument SERVICES: a service name is given twice")
        return services
    return list(args.services)


def _check_flags(args: argparse.Namespace) -> None:
    if args.prometheus is None:
        for flag, value in (("--histogram", args.histogram), ("--selector", args.selector or None),
                            ("--since", args.since), ("--step", args.step), ("--label", args.label)):
            if value is not None:
                raise _UsageError(f"argument {flag}: applies to --prometheus only")
    else:
        if not args.prometheus.startswith(("http://", "https://")):
            raise _UsageError(f"argument --prometheus: {args.prometheus!r} is not an http(s):// address")
        if args.histogram is None:
            raise _UsageError("argument --histogram: required with --prometheus (the metric's name)")
        for flag, value in (("--window", args.window), ("--timing", args.timing),
                            ("--log-format", args.log_format), ("--duration-unit", args.duration_unit)):
            if value is not None:
                raise _UsageError(f"argument {flag}: applies to logs, not to --prometheus")
    if args.delay == "lognormal":
        raise _UsageError("argument --delay: lognormal has no ceiling; use constant, a time, or 0")


def _cmd_fleet(args: argparse.Namespace):
    """Run ``fleet``; returns (data for --json, text)."""
    from ..exceptions import SourceError
    from ..fit import fleet

    _check_flags(args)
    services = _services(args)
    options = dict(slo=_per_service(args.slo, "slo"), servers=_per_service(args.servers or [(None, 1)], "servers"),
                   discipline=args.discipline, family=args.family,
                   delay="auto" if args.delay is None else (None if args.delay == 0 else args.delay),
                   measured_at=args.measured_at)
    if args.prometheus is not None:
        end = time.time()
        options.update(histogram=args.histogram, selector=args.selector or "", label=args.label or "job",
                       start=end - (args.since if args.since is not None else 86400.0), end=end,
                       step=args.step if args.step is not None else 300.0)
    else:
        unit = _per_service(args.duration_unit, "duration-unit") if args.duration_unit else None
        options.update(window=args.window or 60.0, timing=args.timing or "duration",
                       log_format=args.log_format, duration_unit=unit)
    client = _connect(args.scheduler) if args.scheduler is not None else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # the report's table holds every warning
            report = fleet(services, client=client, **options)
    except SourceError as exc:
        raise _UsageError(f"argument --prometheus: {_one_line(exc)}") from None
    except ValueError as exc:
        raise _UsageError(_flag_words(_one_line(exc))) from None
    except Exception as exc:   # the cluster's own failures (a lost scheduler, ...): one line, not a traceback
        if client is None:
            raise
        raise _UsageError(f"argument --scheduler: the Dask cluster failed: {type(exc).__name__}: "
                          f"{_one_line(exc)}") from None
    finally:
        if client is not None:
            client.close()
    return dict(report.to_dict(), command="fleet"), str(report)


def _flag_words(message: str) -> str:
    """A library message in the command line's words: the argument's flag for its parameter."""
    for name, flag in (("services", "SERVICES"), ("slo", "--slo"), ("servers", "--servers"), ("window", "--window"),
                       ("histogram", "--histogram"), ("label", "--label"), ("selector", "--selector"),
                       ("step", "--step"), ("start", "--since"), ("log_format", "--log-format"),
                       ("duration_unit", "--duration-unit")):
        if message.startswith((f"{name} ", f"{name}=", f"{name}:", f"{name}[")):
            return f"argument {flag}: {message}"
    return message


FLEET_HELP = """\
examples:
  capacity fleet logs/ --slo p99=300ms                       # each subdirectory of logs/ is a service
  capacity fleet api='logs/api/*.log.gz' search=logs/search --slo p99=300ms --slo search:p99=1s
  capacity fleet logs/ --slo p99=300ms --scheduler tcp://10.0.0.5:8786   # read and fit on a Dask cluster
  capacity fleet --prometheus http://prom:9090 --histogram http_request_duration_seconds --slo p99=300ms

One row per service: the fitted CPU per request and model, the peak QPS and p99 seen, the QPS ceiling at
the SLO with its interval, and the headroom (ceiling / peak - 1). A service that cannot be read or fitted
is a row with its error.
"""


def _add_fleet(sub) -> None:
    fl = sub.add_parser("fleet", help="one fit and one QPS ceiling per service, in one table",
                        description="Fit every service of a fleet (its logs, or a Prometheus histogram by job) "
                                    "and report each one's CPU per request, peak QPS, p99, QPS ceiling at the SLO "
                                    "and headroom in one table.",
                        epilog=FLEET_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    fl.add_argument("services", nargs="*", metavar="SERVICES",
                    help="a directory whose subdirectories are the services, or logs one service each (a file, "
                         "a glob or a directory), named NAME=LOGS or after their directory")
    fl.add_argument("--slo", type=_fleet_slo, action="append", required=True, metavar="[NAME:]pQ=TIME,...",
                    help="latency objective of every service, e.g. p99=300ms; NAME:p99=1s for one service "
                         "(repeat the flag)")
    fl.add_argument("--servers", type=_fleet_servers, action="append", default=None, metavar="[NAME:]N",
                    help="cores sharing each service's queue (default 1); NAME:N for one service")
    fl.add_argument("--discipline", choices=("ps", "fcfs"), default=None,
                    help="ps: event loop; fcfs: blocking worker pool (default: chosen from each service's data)")
    fl.add_argument("--family", choices=_FAMILIES, default=None,
                    help="distribution family of the CPU time (default: chosen from the data)")
    fl.add_argument("--delay", type=_delay, default=None, metavar="constant|TIME",
                    help="non-CPU latency to fit (constant) or hold (a time; 0 for none) (default: chosen)")
    fl.add_argument("--measured-at", choices=("in_process", "proxy", "client"), default=None,
                    help="where the latencies were timed (default proxy for logs, in_process for Prometheus)")
    fl.add_argument("--window", type=_time, default=None, metavar="TIME",
                    help="logs: window length, e.g. 60s or 5min (default 60s)")
    fl.add_argument("--timing", choices=("duration", "upstream"), default=None,
                    help="logs: the whole request time (default) or the upstream time")
    fl.add_argument("--log-format", default=None, metavar="FORMAT",
                    help="logs: the nginx log_format (default: combined + $request_time $upstream_response_time)")
    fl.add_argument("--duration-unit", type=_fleet_unit, action="append", default=None, metavar="[NAME:]UNIT",
                    help="logs in CSV/Parquet tables: the unit (s, ms, us, ns) of a duration column whose "
                         "name does not say it; NAME:UNIT for one service (repeat the flag)")
    fl.add_argument("--prometheus", default=None, metavar="URL",
                    help="read the services from a Prometheus server instead of logs (with --histogram)")
    fl.add_argument("--histogram", default=None, metavar="NAME",
                    help="with --prometheus: the histogram's metric name, without _bucket")
    fl.add_argument("--selector", default=None, metavar="LABELS",
                    help='with --prometheus: label matchers, e.g. env="prod"')
    fl.add_argument("--label", default=None, metavar="LABEL",
                    help="with --prometheus: the label whose values are the services (default job)")
    fl.add_argument("--since", type=_time, default=None, metavar="TIME",
                    help="with --prometheus: how far back from now to read (default 24h)")
    fl.add_argument("--step", type=_time, default=None, metavar="TIME",
                    help="with --prometheus: window length (default 5min)")
    fl.add_argument("--scheduler", default=None, metavar="ADDRESS",
                    help="read and fit on this Dask cluster, e.g. tcp://10.0.0.5:8786 (the logs must be readable "
                         "by its workers; needs capacity[dask])")
    fl.add_argument("--json", action="store_true", help="print JSON instead of a table")
