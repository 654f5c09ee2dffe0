"""The ``cache`` and ``endpoints`` subcommands: their arguments, their types and their output.

Thin front ends to :func:`capacity.plan.cache_ceiling`, :func:`~capacity.plan.cache_expiry` and
:func:`~capacity.plan.endpoint_mix`, each returning ``(data, text)`` as the other planning
subcommands do (:mod:`capacity.cli._plan_commands`).
"""
from __future__ import annotations

import argparse

from .. import units
from ._common import _jsonable, _ms, _q, _stderr_progress, _UsageError, _wrap
from ._types import _count, _nonneg_int, _rate, _slo, _time, _time_or_zero

_T = {"time": _time, "time_or_zero": _time_or_zero, "rate": _rate, "count": _count, "slo": _slo,
      "nonneg_int": _nonneg_int}

CACHE_HELP = """\
examples:
  # seed 001, 3.3: the ceiling against the hit ratio; the hit ratio 60 QPS needs
  capacity cache --hit-cpu 1ms --miss-cpu 25ms --hit-ratio 0,80%,90%,98% --qps 60
  # every one of 10 000 keys expiring at once at 200 QPS, 2 client retries after a 1 s timeout
  capacity cache --hit-cpu 1ms --miss-cpu 20ms --hit-ratio 90% --qps 200 --keys 10000 --timeout 1s --retries 2
  # seed 000: the CPU fell from 20 % to 4.5 % at the same traffic after caching (25 ms a request before)
  capacity cache --hit-cpu 0.1ms --miss-cpu 25ms --cpu-drop 20%:4.5%
"""


def _cpu_drop(text: str) -> tuple[float, float]:
    """``BEFORE:AFTER`` CPU utilisations, e.g. ``20%:4.5%``, each a share in (0, 1)."""
    parts = text.split(":")
    try:
        before, after = (units.parse_share(p) for p in parts) if len(parts) == 2 else (None, None)
    except ValueError:
        before = after = None
    if before is None or not (0 < before < 1 and 0 < after < 1):
        raise argparse.ArgumentTypeError(f"expected BEFORE:AFTER CPU utilisations like 20%:4.5%, got {text!r}")
    return before, after

ENDPOINTS_HELP = """\
examples:
  # seed 000: the static files that timed out too -- one event loop, then a blocking pool
  capacity endpoints /api=20qps:40ms,/static=50qps:1ms
  capacity endpoints /api=20qps:40ms,/static=50qps:1ms --discipline fcfs --isolate /static
  capacity endpoints /api=20qps:40ms:4,/static=50qps:1ms:0 --slo p99=300ms --json   # NAME=RATE:CPU[:SCV]
  # from one process's request log (time, duration, endpoint): each endpoint's CPU on the shared queue
  capacity endpoints --log access.csv --qps 90
"""


def _shares(text: str) -> list[float]:
    """Hit ratios such as ``0,80%,0.9,1``: each in [0, 1]."""
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = float(part[:-1]) / 100 if part.endswith("%") else float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected hit ratios like 0,80%,98%, got {text!r}") from None
        if not 0 <= value <= 1:
            raise argparse.ArgumentTypeError(f"expected hit ratios in [0, 100%], got {text!r}")
        out.append(value)
    return out


def _endpoint_specs(text: str) -> dict[str, tuple]:
    """``NAME=RATE:CPU[:SCV],...`` (e.g. ``/api=20qps:40ms,/static=50qps:1ms:0``) as
    ``{name: (rate, Service)}``; a missing scv is 1 (exponential)."""
    from ..distributions import Service

    out: dict[str, tuple] = {}
    for part in text.split(","):
        name, eq, spec = part.strip().rpartition("=")
        fields = spec.split(":")
        if not eq or not name or len(fields) not in (2, 3):
            raise argparse.ArgumentTypeError(f"expected NAME=RATE:CPU[:SCV],... like /api=20qps:40ms, got {part!r}")
        try:
            rate, cpu = units.parse_rate(fields[0]), units.parse_time(fields[1])
            scv = float(fields[2]) if len(fields) == 3 else 1.0
            out[name] = (rate, Service.from_moments(cpu, scv))
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"endpoint {name}: {' '.join(str(exc).split())}") from None
    return out


def _add_cache(sub) -> None:
    t = _T
    ca = sub.add_parser("cache", help="cache hit ratio: the ceiling it buys; mass expiry vs active refresh",
                        description="CPU per request as the mix of hit and miss costs: the SLO ceiling against the "
                                    "hit ratio; with --keys, every key expiring at once (the burst of misses, the "
                                    "backlog against the timeout, metastability with retries) against active "
                                    "refresh.",
                        epilog=CACHE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    ca.add_argument("--hit-cpu", type=t["time"], required=True, metavar="TIME", help="CPU time of a hit, e.g. 1ms")
    ca.add_argument("--miss-cpu", type=t["time"], required=True, metavar="TIME", help="CPU time of a miss, e.g. 25ms")
    ca.add_argument("--hit-ratio", type=_shares, default=None, metavar="H[,H...]",
                    help="hit ratios for the table, e.g. 0,80%%,98%% (default 0,50,80,90,95,98,99%%)")
    ca.add_argument("--servers", type=t["count"], default=1, metavar="N", help="cores of one queue (default 1)")
    ca.add_argument("--slo", type=t["slo"], default={0.99: 0.5}, metavar="pQ=TIME,...",
                    help="latency objective (default p99=500ms)")
    ca.add_argument("--discipline", choices=("ps", "fcfs"), default="ps",
                    help="ps: event loop (default); fcfs: blocking worker pool")
    ca.add_argument("--qps", type=t["rate"], default=None, metavar="RATE",
                    help="today's request rate: adds the hit ratio it needs (and is needed by --keys)")
    ca.add_argument("--keys", type=t["count"], default=None, metavar="N",
                    help="distinct keys expiring together: adds the mass-expiry analysis (one --hit-ratio)")
    ca.add_argument("--zipf", type=float, default=0.0, metavar="X", help="key popularity ~ rank^-X (default 0)")
    ca.add_argument("--fill-time", type=t["time_or_zero"], default=0.0, metavar="TIME",
                    help="time from a key's first miss until it is cached (default 0)")
    ca.add_argument("--timeout", type=t["time"], default=30.0, metavar="TIME", help="client timeout (default 30s)")
    ca.add_argument("--retries", type=t["nonneg_int"], default=0, metavar="N", help="client retries (default 0)")
    ca.add_argument("--refresh", type=t["time"], default=None, metavar="TIME",
                    help="active refresh interval per key, to compare (e.g. 10min)")
    ca.add_argument("--cpu-drop", type=_cpu_drop, default=None, metavar="BEFORE:AFTER",
                    help="the CPU utilisation measured at the same traffic before and after adding the cache, "
                         "e.g. 20%%:4.5%%: the hit ratio it implies (--miss-cpu the cost of a request "
                         "before, --hit-cpu of a hit) and the ceiling before and after")
    ca.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_endpoints(sub) -> None:
    t = _T
    en = sub.add_parser("endpoints", help="per-endpoint latency on one event loop or pool; what to optimise first",
                        description="Endpoints sharing one queue: each endpoint's mean and p99 latency "
                                    "(processor sharing slows all by one factor, FCFS makes all wait the "
                                    "same queue), which endpoint to optimise first (SLO ceiling gained per ms "
                                    "saved), and what moving one to its own process buys.",
                        epilog=ENDPOINTS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    en.add_argument("endpoints", type=_endpoint_specs, metavar="NAME=RATE:CPU[:SCV],...", nargs="?", default=None,
                    help="each endpoint's rate and mean CPU per request (scv default 1)")
    en.add_argument("--log", default=None, metavar="FILE",
                    help="instead: fit each endpoint's CPU from one process's request log (csv: time, "
                         "duration_ms, endpoint; or nginx), the endpoints sharing its queue")
    en.add_argument("--qps", type=t["rate"], default=None, metavar="RATE",
                    help="with --log: the total rate to plan for (default: the log's mean rate)")
    en.add_argument("--format", choices=("nginx", "csv"), default=None,
                    help="with --log: log type (default: csv for .csv/.parquet files, else nginx)")
    en.add_argument("--log-format", default=None, metavar="FORMAT",
                    help="with --log: the nginx log_format the log was written with")
    en.add_argument("--duration-unit", choices=("s", "ms", "us", "ns"), default=None,
                    help="with a CSV/Parquet --log whose duration column's name carries no unit: its unit")
    en.add_argument("--servers", type=t["count"], default=1, metavar="N", help="cores of the queue (default 1)")
    en.add_argument("--discipline", choices=("ps", "fcfs"), default="ps",
                    help="ps: event loop (default); fcfs: blocking worker pool")
    en.add_argument("--slo", type=t["slo"], default={0.99: 0.5}, metavar="pQ=TIME,...",
                    help="objective on all requests, for the ceiling (default p99=500ms)")
    en.add_argument("--isolate", default=None, metavar="NAME", help="an endpoint to move to its own process")
    en.add_argument("--isolated-servers", type=t["count"], default=1, metavar="N",
                    help="cores of that process (default 1)")
    en.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _cache_whatif_lines(args: argparse.Namespace, data: dict) -> list[str]:
    from .. import plan

    before, after = args.cpu_drop
    kappa = args.hit_cpu / args.miss_cpu
    if kappa >= 1:
        raise _UsageError("argument --hit-cpu: with --cpu-drop a hit must cost less than a miss (--miss-cpu)")
    w = plan.cache_whatif(args.miss_cpu, before, after, servers=args.servers, hit_cost_ratio=kappa, slo=args.slo,
                          discipline=args.discipline, progress=_stderr_progress())
    data["whatif"] = w.to_dict()
    return ["", f"CPU {100 * before:.3g} % -> {100 * after:.3g} % at the same traffic: each request "
                f"{w.cost_factor:.3g} x, hit ratio {100 * w.implied_hit_ratio:.3g} %; SLO ceiling "
                f"{w.ceiling_before:.4g} -> {w.ceiling_after:.4g} QPS", "", _wrap(w.explanation)]


def _cmd_cache(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    ratios = args.hit_ratio if args.hit_ratio is not None else list(plan.cache.DEFAULT_HIT_RATIO)
    if args.keys is not None and (args.qps is None or len(ratios) != 1):
        raise _UsageError("argument --keys: needs --qps and exactly one --hit-ratio (the warm cache's)")
    res = plan.cache_ceiling(args.hit_cpu, args.miss_cpu, ratios, args.servers, args.slo, args.discipline,
                             arrival_rate=args.qps, progress=_stderr_progress())
    t = res.table
    data = {"command": "cache", "hit_cpu_s": args.hit_cpu, "miss_cpu_s": args.miss_cpu, "servers": args.servers,
            "discipline": args.discipline, "slo": {_q(q): float(v) for q, v in sorted(args.slo.items())},
            "arrival_rate": args.qps, "rows": [{"hit_ratio": float(h), **{c: _jsonable(v) for c, v in r.items()}}
                                               for h, r in t.iterrows()],
            "needed_hit_ratio": _jsonable(res.needed_hit_ratio), "explanation": res.explanation}
    lines = [f"Cache: hits {_ms(args.hit_cpu)}, misses {_ms(args.miss_cpu)} of CPU, {args.discipline}, "
             f"{args.servers} core{'s' if args.servers > 1 else ''}", "",
             f"{'hit ratio':>10}{'CPU/req':>10}{'capacity':>10}{'ceiling':>10}" + ("   util @qps" if args.qps else "")]
    for h, r in t.iterrows():
        lines.append(f"{100 * h:>9.3g}%{_ms(r['mean_cpu_s']):>10}{r['capacity_qps']:>10.4g}{r['ceiling_qps']:>10.4g}"
                     + (f"{100 * r['utilization']:>11.3g}%" if args.qps else ""))
    lines += ["", _wrap(res.explanation)]
    if args.keys is not None:
        ex = plan.cache_expiry(args.qps, ratios[0], args.hit_cpu, args.miss_cpu, args.keys, args.servers,
                               zipf=args.zipf, fill_time=args.fill_time, timeout=args.timeout, retries=args.retries,
                               refresh_interval=args.refresh, discipline=args.discipline,
                               progress=_stderr_progress())
        data["expiry"] = ex.to_dict()
        lines += ["", f"mass expiry of {args.keys:,} keys: {ex.verdict}", "", _wrap(ex.explanation)]
    if args.cpu_drop is not None:
        lines += _cache_whatif_lines(args, data)
    return data, "\n".join(lines)


def _endpoints_from_log(args: argparse.Namespace):
    """The per-endpoint table of ``fit.from_requests`` on the log (endpoints sharing its queue), the
    rate to plan for, and lines saying where they came from."""
    import warnings

    from ..fit import from_requests
    from ._fit_command import _read_log

    df, fmt, notes = _read_log(args)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        res = from_requests(df, servers=args.servers, discipline=args.discipline, by_endpoint=True)
    table = res.endpoints_
    fitted = table.dropna(subset=["cpu_per_request", "scv"])
    if res.fit_ is None or fitted.empty:
        why = "; ".join(res.warnings_) or "no endpoint with enough requests"
        raise _UsageError(f"argument --log: cannot fit endpoints from {args.log!r}: {why}")
    windows = res.windows_
    log_rate = float(windows["requests"].sum() / (len(windows) * (windows["start"].iloc[1] - windows["start"].iloc[0])
                                                  if len(windows) > 1 else 1.0))
    rate = args.qps if args.qps is not None else log_rate
    left = table.loc[table["cpu_per_request"].isna()]
    lines = [f"from {args.log} ({fmt}): {int(res.n_observations):,} requests at {log_rate:.4g} QPS on average, "
             f"{len(fitted)} endpoint{'s' if len(fitted) > 1 else ''} fitted on the shared queue"]
    if len(left):
        lines.append(f"  {len(left)} endpoint{'s' if len(left) > 1 else ''} with too few requests left out "
                     f"({100 * float(left['share'].sum()):.3g} % of the requests; the others carry their share)")
    return table, rate, lines + [f"  {n}" for n in notes]


def _cmd_endpoints(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    if (args.endpoints is None) == (args.log is None):
        raise _UsageError("give the endpoints (NAME=RATE:CPU,...) or --log FILE, one of the two")
    for flag, value in (("--qps", args.qps), ("--format", args.format), ("--log-format", args.log_format),
                        ("--duration-unit", args.duration_unit)):
        if value is not None and args.log is None:
            raise _UsageError(f"argument {flag}: applies to --log only")
    head: list[str] = []
    if args.log is not None:
        endpoints, rate, head = _endpoints_from_log(args)
        names = [str(e) for e in endpoints["endpoint"]]
    else:
        endpoints, rate, names = args.endpoints, None, list(args.endpoints)
    if args.isolate is not None and args.isolate not in names:
        raise _UsageError(f"argument --isolate: expected one of {', '.join(names)}, got {args.isolate!r}")
    res = plan.endpoint_mix(endpoints, args.servers, args.discipline, args.slo, arrival_rate=rate,
                            isolate=args.isolate, isolated_servers=args.isolated_servers,
                            progress=_stderr_progress())
    t = res.table
    data = {"command": "endpoints", "servers": args.servers, "discipline": args.discipline,
            "slo": {_q(q): float(v) for q, v in sorted(args.slo.items())},
            "rows": [{"endpoint": e, **{c: _jsonable(v) for c, v in r.items()}} for e, r in t.iterrows()],
            "utilization": res.utilization, "capacity_qps": res.capacity_qps, "ceiling_qps": res.ceiling_qps,
            "optimise_first": res.optimise_first, "explanation": res.explanation}
    qcol = [c for c in t.columns if c.startswith("p") and c.endswith("_s")]
    width = max(10, max(len(e) for e in t.index) + 2)
    lines = head + [f"Endpoints on {args.servers} core{'s' if args.servers > 1 else ''}, {args.discipline}, "
                    f"{100 * res.utilization:.3g} % busy", "",
             f"{'endpoint':<{width}}{'QPS':>8}{'CPU':>10}{'mean':>10}{'slowdown':>10}"
             + "".join(f"{c[:-2]:>10}" for c in qcol) + f"{'QPS/ms saved':>14}"
             + (f"{'own process':>13}" if args.isolate else "")]
    for e, r in t.iterrows():
        lines.append(f"{e:<{width}}{r['arrival_rate']:>8.4g}{_ms(r['mean_cpu_s']):>10}{_ms(r['mean_response_s']):>10}"
                     f"{r['slowdown']:>10.3g}" + "".join(f"{_ms(r[c]):>10}" for c in qcol)
                     + f"{r['ceiling_gain_qps_per_ms']:>14.3g}"
                     + (f"{_ms(r['mean_response_split_s']):>13}" if args.isolate else ""))
    lines += ["", _wrap(res.explanation)]
    return data, "\n".join(lines)
