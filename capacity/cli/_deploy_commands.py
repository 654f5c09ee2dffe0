"""The ``warmup`` and ``deploy`` subcommands: their arguments and their output.

Thin front ends to :func:`capacity.plan.ramp_needed`, :func:`~capacity.plan.warmup_transient` and
:func:`~capacity.plan.rolling_deploy`, each returning ``(data, text)`` as the other planning
subcommands do (:mod:`capacity.cli._plan_commands`).
"""
from __future__ import annotations

import argparse
import math

from ._common import _jsonable, _ms, _q, _service, _service_json, _service_text, _stderr_progress, _wrap
from ._types import _count, _rate, _slo, _time, _time_or_zero

WARMUP_HELP = """\
examples:
  # seed 001, 3.8: JIT warm-up -- 3x slower at first, warm after ~5 x 2000 requests; what ramp?
  capacity warmup --qps 60 --cpu 10ms --cold 3 --warmup-requests 2000 --slo p99=250ms --discipline fcfs
  # seed 001, 3.7: connection pools opening (20 s time constant); what a 60 s ramp does
  capacity warmup --qps 60 --cpu 10ms --cold 3 --warmup-time 20s --ramp 60s --timeout 2s
  # a Node.js handler with 4 awaits (5 slices) that JIT-compiles as it serves
  capacity warmup --qps 60 --cpu 10ms --cold 3 --warmup-requests 2000 --slo p99=250ms --discipline rr --slices 5
"""

DEPLOY_HELP = """\
examples:
  # 10 processes at 500 QPS, one at a time, 30 s restarts, 60 s ramp: does the SLO hold? which N would?
  capacity deploy --qps 500 --cpu 10ms --processes 10 --cold 3 --warmup-time 30s --ramp 60s --slo p99=250ms
  capacity deploy --qps 500 --cpu 10ms --processes 20 --batch 2 --cold 3 --warmup-requests 2000 --json
"""


def _multiplier(text: str) -> float:
    """A cold multiplier: a plain number >= 1, or with an ``x`` (``3x``)."""
    try:
        value = float(text.strip().lower().rstrip("x"))
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 1):
        raise argparse.ArgumentTypeError(f"expected a cold multiplier >= 1 such as 3 or 3x (cold service time over "
                                         f"warm), got {text!r}")
    return value


def _add_service_and_loop(p: argparse.ArgumentParser, add_service) -> None:
    """The parser's service group with ``--discipline rr`` allowed, and the event loop's options."""
    g = add_service(p, disciplines=("ps", "fcfs", "rr"))
    g.add_argument("--slices", type=_count, default=1, metavar="K",
                   help="with --discipline rr: CPU slices per request, the awaits plus one (default 1: FCFS)")
    g.add_argument("--slice-delay", type=_time_or_zero, default=0.0, metavar="TIME",
                   help="with --discipline rr: non-CPU wait between two slices, e.g. 1ms (default 0)")
    g.add_argument("--admission", choices=("fifo", "idle"), default="fifo",
                   help="with --discipline rr: a new request joins the run queue at once (fifo, default) or "
                        "only when nothing in flight is runnable (idle: Node.js 20 handlers that await setTimeout)")


def _loop_kwargs(args: argparse.Namespace) -> dict:
    return dict(slices=args.slices, slice_delay=args.slice_delay, admission=args.admission)


def _add_warmup_law(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("warm-up of a fresh process (give --warmup-requests or --warmup-time)")
    g.add_argument("--cold", type=_multiplier, required=True, metavar="X",
                   help="service time of a fresh process over a warm one, e.g. 3 (3x slower at start)")
    law = g.add_mutually_exclusive_group(required=True)
    law.add_argument("--warmup-requests", type=_count, default=None, metavar="N",
                     help="it warms with the requests it serves (JIT): the excess falls by e every N requests")
    law.add_argument("--warmup-time", type=_time, default=None, metavar="TIME",
                     help="it warms with time (pools, caches): the excess falls by e every TIME, e.g. 20s")


def _add_warmup(sub, add_service) -> None:
    """``add_service``: the parser's own --cpu/--scv/--family/--discipline group (passed in: the parser
    imports this module)."""
    wa = sub.add_parser("warmup", help="a fresh process under load: the ramp it needs, and what no ramp does",
                        description="A fresh process is slow at first (JIT, connection pools). The shortest "
                                    "linear traffic ramp that keeps the SLO while it warms (and the pre-warming "
                                    "it needs when its cold service alone breaks the SLO), and the transient "
                                    "with no ramp; with --ramp, the transient under that ramp.",
                        epilog=WARMUP_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    wa.add_argument("--qps", type=_rate, required=True, metavar="RATE", help="the process's full share, e.g. 60")
    _add_service_and_loop(wa, add_service)
    _add_warmup_law(wa)
    wa.add_argument("--servers", type=_count, default=1, metavar="N", help="cores of the process (default 1)")
    wa.add_argument("--slo", type=_slo, default={0.99: 0.5}, metavar="pQ=TIME,...",
                    help="latency objective (default p99=500ms)")
    wa.add_argument("--ramp", type=_time_or_zero, default=None, metavar="TIME",
                    help="show the transient under this ramp instead of solving for one (0: no ramp)")
    wa.add_argument("--timeout", type=_time, default=None, metavar="TIME",
                    help="client timeout: adds the requests that time out")
    wa.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_deploy(sub, add_service) -> None:
    de = sub.add_parser("deploy", help="capacity during a rolling deploy; the N (N+1) it needs",
                        description="A rolling deploy restarts --batch processes at a time; each is down for "
                                    "--restart-time, then ramps up and warms. The fleet's SLO capacity through "
                                    "the deploy against --qps, and the fewest processes that keep the SLO.",
                        epilog=DEPLOY_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    de.add_argument("--qps", type=_rate, required=True, metavar="RATE", help="the fleet's rate during the deploy")
    _add_service_and_loop(de, add_service)
    de.add_argument("--processes", type=_count, required=True, metavar="N", help="processes of the fleet")
    _add_warmup_law(de)
    de.add_argument("--batch", type=_count, default=1, metavar="K", help="processes restarted at once (default 1)")
    de.add_argument("--restart-time", type=_time, default=30.0, metavar="TIME",
                    help="time a process is out of the balancer (default 30s)")
    de.add_argument("--ramp", type=_time_or_zero, default=0.0, metavar="TIME",
                    help="traffic ramp of a restarted process (default 0: full share at once)")
    de.add_argument("--min-ready", type=_time_or_zero, default=None, metavar="TIME",
                    help="time a batch is up before the next goes down (default: the ramp)")
    de.add_argument("--surge", action="store_true",
                    help="boot each batch beside the old processes, which leave when the new join "
                         "(Kubernetes maxSurge = K, maxUnavailable = 0)")
    de.add_argument("--servers", type=_count, default=1, metavar="N", help="cores per process (default 1)")
    de.add_argument("--slo", type=_slo, default={0.99: 0.5}, metavar="pQ=TIME,...",
                    help="latency objective (default p99=500ms)")
    de.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _law_kwargs(args: argparse.Namespace) -> dict:
    return dict(warmup_requests=args.warmup_requests, warmup_time=args.warmup_time)


def _rows(table, columns: list[str], every: int) -> list[str]:
    lines = [f"{'t':>8}" + "".join(f"{c:>14}" for c in columns)]
    for t, row in table.iloc[::every].iterrows():
        cells = []
        for c in columns:
            v = float(row[c])
            cells.append(_ms(v) if c.endswith("_s") or c == "delay" else f"{v:.4g}")
        lines.append(f"{_ms(t) if t > 0 else '0 s':>8}" + "".join(f"{x:>14}" for x in cells))
    return lines


def _cmd_warmup(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    service = _service(args)
    common = dict(servers=args.servers, slo=args.slo, discipline=args.discipline, timeout=args.timeout,
                  **_law_kwargs(args), **_loop_kwargs(args))
    loop = "" if args.discipline != "rr" else f" ({args.slices} slices" + (
        f", {_ms(args.slice_delay)} apart" if args.slice_delay else "") + f", {args.admission} admission)"
    head = f"Warm-up: {_service_text(args, service)}{loop}, {args.servers} core{'s' if args.servers > 1 else ''}, " \
           f"{args.cold:g}x cold, {args.qps:g} QPS share"
    qcols = [f"{_q(q)}_s" for q in sorted(args.slo)]
    if args.ramp is not None:
        res = plan.warmup_transient(args.qps, service, args.cold, ramp=args.ramp, progress=_stderr_progress(),
                                    **common)
        text = [head + f", {_ms(args.ramp)} ramp", "", f"verdict: {res.verdict}", ""]
        text += _rows(res.table, ["admitted_rate", "multiplier", "utilization", "delay"] + qcols, 10)
    else:
        res = plan.ramp_needed(args.qps, service, args.cold, progress=_stderr_progress(), **common)
        ramp = "none (pre-warming fails)" if not res.feasible else _ms(res.ramp)
        text = [head, "", f"ramp needed: {ramp}"]
        if res.prewarm_requests or res.prewarm_time:
            text.append("pre-warm first: " + (f"{res.prewarm_requests:,.0f} requests" if res.prewarm_requests
                                              else _ms(res.prewarm_time)) + f" (to {res.start_multiplier:.3g}x)")
        text += [f"no ramp: {res.no_ramp.verdict}, peak delay {_ms(res.no_ramp.peak_delay)}, SLO broken for "
                 f"{_ms(res.no_ramp.seconds_over_slo)}", ""]
        text += _rows(res.table, ["admitted_rate", "multiplier"] + qcols + [f"no_ramp_{c}" for c in qcols], 10)
    data = {"command": "warmup", "service": _service_json(args, service), "discipline": args.discipline,
            **({"slices": args.slices, "slice_delay": args.slice_delay, "admission": args.admission}
               if args.discipline == "rr" else {}),
            "servers": args.servers, "arrival_rate": args.qps, "cold_multiplier": args.cold,
            "slo": {_q(q): float(v) for q, v in sorted(args.slo.items())}, "explanation": res.explanation,
            "result": res.to_dict(), "table": _jsonable(res.to_frame())}
    return data, "\n".join(text + ["", _wrap(res.explanation)])


def _cmd_deploy(args: argparse.Namespace) -> tuple[dict, str]:
    from .. import plan

    service = _service(args)
    res = plan.rolling_deploy(args.qps, service, args.processes, args.cold, batch_size=args.batch,
                              restart_time=args.restart_time, ramp=args.ramp, min_ready=args.min_ready,
                              surge=args.surge, servers=args.servers, slo=args.slo, discipline=args.discipline,
                              progress=_stderr_progress(), **_law_kwargs(args), **_loop_kwargs(args))
    needed = "no number (pre-warm first)" if res.processes_needed is None else \
        f"{res.processes_needed} (N + {res.processes_needed - res.min_processes})"
    text = [f"Rolling deploy: {args.processes} x {_service_text(args, service)}, {args.batch} at a time"
            + (" (surge)" if args.surge else "") + ", "
            f"{args.cold:g}x cold", "",
            f"SLO at {args.qps:g} QPS: {'holds' if res.slo_ok else 'BREAKS'}; capacity {res.min_capacity_qps:.4g} QPS "
            f"at worst of {res.capacity_qps:.4g} ({100 * res.capacity_loss:.3g} % lost, {res.binding})",
            f"processes needed: {needed}; deploy takes {_ms(res.deploy_time)}", "", "one cycle:"]
    text += _rows(res.table, ["weight", "capacity_qps", "multiplier"] + [f"{_q(q)}_s" for q in sorted(args.slo)], 20)
    data = {"command": "deploy", "service": _service_json(args, service), "discipline": args.discipline,
            "arrival_rate": args.qps, "processes": args.processes, "explanation": res.explanation,
            "result": res.to_dict()}
    return data, "\n".join(text + ["", _wrap(res.explanation)])
