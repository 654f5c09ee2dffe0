"""The command line's argument parser: one function per subcommand, so each reads on its own."""
from __future__ import annotations

import argparse
import re

from .._version import __version__
from ._cache_commands import _add_cache, _add_endpoints
from ._deploy_commands import _add_deploy, _add_warmup
from ._fleet_command import _add_fleet
from ._help import (CEILING_HELP, EXAMPLE_HELP, FIT_HELP, GC_HELP, HANDOFF_HELP, MAIN_HELP, SCALING_HELP, SERVERS_HELP,
                    JVM_GC_HELP, POOL_HELP, STEAL_HELP, THREADS_HELP, TIMEOUT_HELP)
from ._types import (_count, _counts, _delay, _fraction, _memory, _money, _nonneg_int, _option, _percentiles,
                     _positive, _rate, _rates, _scv, _signed_fraction, _slices, _slo, _steals, _time,
                     _time_or_zero, _util)

_FAMILIES = ("exponential", "lognormal", "gamma", "deterministic", "hyperexponential")
_FIT_FAMILIES = ("lognormal", "gamma", "hyperexponential", "exponential", "deterministic")
#: The deprecated spelling of --timing (one release): it still works and says so on stderr.
OLD_TIMING_FLAG = "capacity: --latency is now --timing; the old name will be removed in the next release"


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line (no usage dump) and exit with status 2, and a value
    that starts with a minus sign (``--cpu -25ms``) is a value (refused by its type with a
    message), not an unknown option ("expected one argument")."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")

    def _parse_optional(self, arg_string):  # argparse's hook deciding "option or value"
        if re.match(r"-\d|-\.\d", arg_string):
            return None
        return super()._parse_optional(arg_string)


class _OldTimingFlag(argparse.Action):
    """``--latency`` (renamed ``--timing``): store the value under ``timing`` and say so."""

    def __call__(self, parser, namespace, values, option_string=None):
        import sys

        print(OLD_TIMING_FLAG, file=sys.stderr)
        setattr(namespace, "timing", values)


def _add_service(p: argparse.ArgumentParser, required: bool = True,
                 disciplines: tuple[str, ...] = ("ps", "fcfs")) -> argparse._ArgumentGroup:
    """--cpu, --scv, --family and --discipline (among ``disciplines``); returns the group, for more."""
    g = p.add_argument_group("service (CPU time per request)")
    g.add_argument("--cpu", type=_time, required=required, metavar="TIME",
                   help="mean CPU time per request, e.g. 25ms")
    g.add_argument("--scv", type=_scv, default=None, metavar="X",
                   help="squared coefficient of variation of the CPU time (default 1)")
    g.add_argument("--family", choices=_FAMILIES, default=None,
                   help="distribution of the CPU time (default by scv: 0 deterministic, below 1 gamma, "
                        "1 exponential, above 1 lognormal)")
    g.add_argument("--discipline", choices=disciplines, default="ps",
                   help="ps: event loop / time-sliced CPU (default); fcfs: blocking worker pool"
                        + ("; rr: event-loop round robin over --slices slices per request" if "rr" in disciplines
                           else ""))
    return g


def build_parser() -> argparse.ArgumentParser:
    """The ``capacity`` argument parser with every subcommand."""
    parser = _Parser(
        prog="capacity",
        description="How much traffic can this service take? Queueing models for backend capacity planning.",
        epilog=MAIN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"capacity {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for add in (_add_example, _add_ceiling, _add_servers, _add_timeout, _add_scaling, _add_gc, _add_threads,
                _add_jvm_gc, _add_handoff, _add_pool, _add_steal, _add_cache, _add_endpoints, _add_fit, _add_fleet, _add_logs):
        add(sub)
    _add_warmup(sub, _add_service)
    _add_deploy(sub, _add_service)
    return parser


def _add_example(sub) -> None:
    ex = sub.add_parser("example", help="print the worked example from the README",
                        epilog=EXAMPLE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    ex.add_argument("--cpu-ms", type=_positive, default=25.0, help="CPU milliseconds per request (default 25)")
    ex.add_argument("--p99-ms", type=_positive, default=1000.0, help="p99 latency objective in ms (default 1000)")


def _add_ceiling(sub) -> None:
    ce = sub.add_parser("ceiling", help="highest QPS at which the latency SLO holds",
                        description="The highest request rate at which every SLO percentile holds.",
                        epilog=CEILING_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_service(ce)
    ce.add_argument("--servers", type=_counts, default=[1], metavar="N[,N...]",
                    help="cores or worker processes serving one queue; a list gives one row each (default 1)")
    ce.add_argument("--slo", type=_slo, default={0.99: 0.5}, metavar="pQ=TIME,...",
                    help="latency objective, e.g. p99=500ms,p99.9=2s (default p99=500ms)")
    ce.add_argument("--delay", type=_time_or_zero, default=0.0, metavar="TIME",
                    help="constant non-CPU latency per request (IO wait), e.g. 5ms")
    ce.add_argument("--slo-on", choices=("response", "wait"), default="response",
                    help="bound the response time (default) or, for fcfs, the wait before service")
    ce.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_servers(sub) -> None:
    se = sub.add_parser("servers", help="fewest cores / worker processes meeting the SLO at a given QPS",
                        description="The fewest servers (cores, worker processes) that keep the SLO at a load.",
                        epilog=SERVERS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    se.add_argument("--qps", type=_rates, required=True, metavar="RATE[,RATE...]",
                    help="peak request rate, e.g. 500 or 500qps; a list gives one row each")
    _add_service(se)
    se.add_argument("--slo", type=_slo, default={0.99: 0.5}, metavar="pQ=TIME,...",
                    help="latency objective, e.g. p99=500ms,p99.9=2s (default p99=500ms)")
    se.add_argument("--delay", type=_time_or_zero, default=0.0, metavar="TIME",
                    help="constant non-CPU latency per request, e.g. 5ms")
    se.add_argument("--slo-on", choices=("response", "wait"), default="response",
                    help="bound the response time (default) or, for fcfs, the wait before service")
    se.add_argument("--per-machine", type=_count, default=None, metavar="N",
                    help="cores per machine: round up to whole machines")
    se.add_argument("--redundancy", type=_nonneg_int, default=0, metavar="N",
                    help="machines that may be down with the SLO still met (1 = N+1; needs --per-machine)")
    se.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_timeout(sub) -> None:
    to = sub.add_parser("timeout", help="timeout-safe QPS, or a recommended client timeout",
                        description="With --timeout: the highest QPS at which at most --max-fraction of requests "
                                    "exceed it. With --p999: the client timeout by the rule "
                                    "min(3 x P99.9, user limit) (non-core: 1.5 x).",
                        epilog=TIMEOUT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_service(to, required=False)
    to.add_argument("--servers", type=_count, default=1, metavar="N", help="cores or worker processes (default 1)")
    to.add_argument("--timeout", type=_time, default=None, metavar="TIME", help="client timeout, e.g. 1s")
    to.add_argument("--max-fraction", type=_fraction, default=1e-3, metavar="F",
                    help="largest acceptable share of timed-out requests, e.g. 0.1%% or 1e-3 (default 0.1%%)")
    to.add_argument("--delay", type=_time_or_zero, default=0.0, metavar="TIME",
                    help="constant non-CPU latency per request, e.g. 5ms")
    to.add_argument("--p999", type=_time, default=None, metavar="TIME", help="the server's measured P99.9")
    to.add_argument("--non-core", action="store_true", help="non-core call (1.5 x P99.9 instead of 3 x)")
    to.add_argument("--user-limit", type=_time, default=None, metavar="TIME", help="longest wait users accept")
    to.add_argument("--qps", type=_rate, default=None, metavar="RATE",
                    help="current request rate, for the model's timed-out share (with --cpu)")
    to.add_argument("--burst-qps", type=_rate, default=None, metavar="RATE",
                    help="with --timeout: how long a burst at this rate may last before requests time out")
    to.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_scaling(sub) -> None:
    sc = sub.add_parser("scaling", help="cluster vs machine: compare ways to deploy the cores",
                        description="Latency, headroom, N+1 and cost of one big machine (Node cluster mode) vs "
                                    "several machines behind a load balancer vs one pooled queue.",
                        epilog=SCALING_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    sc.add_argument("--qps", type=_rate, required=True, metavar="RATE", help="peak request rate, e.g. 300")
    _add_service(sc)
    sc.add_argument("--slo", type=_slo, default={0.99: 0.5}, metavar="pQ=TIME,...",
                    help="latency objective, e.g. p99=500ms (default p99=500ms)")
    sc.add_argument("--cores", type=_count, default=None, metavar="N",
                    help="total cores to compare (default: the fewest whole machines that meet the SLO pooled)")
    sc.add_argument("--cores-per-machine", type=_count, default=8, metavar="N", help="default 8")
    sc.add_argument("--option", type=_option, action="append", default=None, metavar="MxP[xS][:D]",
                    help="a deployment to compare (repeatable); replaces the default set")
    sc.add_argument("--cost-per-machine", type=_money, default=0.0, metavar="X")
    sc.add_argument("--cost-per-core", type=_money, default=0.0, metavar="X")
    sc.add_argument("--memory-per-process", type=_memory, default=None, metavar="MEM", help="e.g. 300MB")
    sc.add_argument("--machine-memory", type=_memory, default=None, metavar="MEM", help="e.g. 8GB")
    sc.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_gc(sub) -> None:
    gc = sub.add_parser("gc", help="is GC tuning worth it? ceiling and p99 before/after",
                        description="GC as CPU overhead plus stop-the-world pauses: the predicted effect of a "
                                    "GC change on capacity, the SLO ceiling and the latency percentiles (discipline "
                                    "default here: fcfs).",
                        epilog=GC_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_service(gc)
    gc.set_defaults(discipline="fcfs")
    gc.add_argument("--gc-share", type=_fraction, required=True, metavar="F", help="GC share of CPU now, e.g. 27.5%%")
    gc.add_argument("--pause", type=_time, required=True, metavar="TIME", help="mean GC pause now, e.g. 50ms")
    gc.add_argument("--pause-rate", type=_rate, default=None, metavar="RATE",
                    help="pauses per busy second now (default: all GC time is pauses)")
    gc.add_argument("--new-gc-share", type=_fraction, default=None, metavar="F", help="GC share after, e.g. 7.14%%")
    gc.add_argument("--new-pause", type=_time, default=None, metavar="TIME", help="mean pause after")
    gc.add_argument("--new-pause-rate", type=_rate, default=None, metavar="RATE", help="pauses per second after")
    gc.add_argument("--pause-scv", type=_scv, default=0.0, metavar="X",
                    help="squared coefficient of variation of pause lengths (default 0: constant)")
    gc.add_argument("--servers", type=_count, default=1, metavar="N", help="cores per process (default 1)")
    gc.add_argument("--processes", type=_count, default=1, metavar="N",
                    help="processes sharing the traffic, each with its own GC (default 1)")
    gc.add_argument("--slo", type=_slo, default={0.99: 0.5}, metavar="pQ=TIME,...",
                    help="latency objective for the ceiling (default p99=500ms)")
    gc.add_argument("--qps", type=_rate, default=None, metavar="RATE",
                    help="rate at which to compare percentiles (default: the ceiling before)")
    gc.add_argument("--measured-gain", type=_signed_fraction, default=None, metavar="F",
                    help="measured QPS gain of the change, e.g. 10%%, to compare with the prediction")
    gc.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_jvm_gc(sub) -> None:
    jg = sub.add_parser("jvm-gc", help="JVM young-GC pauses per minute: ceiling, p99 and timeouts before/after",
                        description="The GC what-if from a JVM GC log: stop-the-world young-GC pauses counted per "
                                    "window at today's traffic, before and after a change (G1NewSizePercent, "
                                    "-Xms = -Xmx), with the share of requests over a timeout (discipline default "
                                    "here: fcfs).",
                        epilog=JVM_GC_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_service(jg)
    jg.set_defaults(discipline="fcfs")
    jg.add_argument("--qps", type=_rate, required=True, metavar="RATE", help="traffic the pauses were counted at")
    jg.add_argument("--pauses", type=_positive, required=True, metavar="N", help="young-GC pauses per window now")
    jg.add_argument("--pause-time", type=_time, required=True, metavar="TIME",
                    help="their total per window, e.g. 560ms")
    jg.add_argument("--new-pauses", type=_positive, default=None, metavar="N", help="pauses per window after")
    jg.add_argument("--new-pause-time", type=_time, default=None, metavar="TIME", help="their total after")
    jg.add_argument("--window", type=_time, default=60.0, metavar="TIME", help="window of the counts (default 1min)")
    jg.add_argument("--resize-pauses", type=_positive, default=0.0, metavar="N",
                    help="extra pauses per window from heap resizing (-Xms below -Xmx)")
    jg.add_argument("--resize-pause-time", type=_time_or_zero, default=0.0, metavar="TIME", help="their total")
    jg.add_argument("--fixed-heap", action="store_true", help="the change sets -Xms = -Xmx (no resizing pauses after)")
    jg.add_argument("--pause-scv", type=_scv, default=0.0, metavar="X",
                    help="squared coefficient of variation of pause lengths (default 0: constant)")
    jg.add_argument("--servers", type=_count, default=1, metavar="N", help="cores per JVM (default 1)")
    jg.add_argument("--processes", type=_count, default=1, metavar="N", help="JVMs sharing the traffic (default 1)")
    jg.add_argument("--slo", type=_slo, default={0.99: 0.5}, metavar="pQ=TIME,...",
                    help="latency objective for the ceiling (default p99=500ms)")
    jg.add_argument("--timeout", type=_time, default=None, metavar="TIME", help="client timeout, e.g. 100ms")
    jg.add_argument("--measured-gain", type=_signed_fraction, default=None, metavar="F",
                    help="measured QPS gain of the change, to compare with the prediction")
    jg.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_threads(sub) -> None:
    th = sub.add_parser("threads", help="threads held by blocking calls vs NIO (Little's law); CPU load",
                        description="Threads a thread-per-request service holds by Little's law, with blocking "
                                    "downstream calls on pool threads or with non-blocking IO; with --cpu-util, "
                                    "the load average (runnable threads) a CPU shows at that utilisation.",
                        epilog=THREADS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    th.add_argument("--qps", type=_rate, required=True, metavar="RATE", help="request rate, e.g. 1000")
    th.add_argument("--response", type=_time, required=True, metavar="TIME",
                    help="mean time a request holds its thread (its response time), e.g. 100ms")
    th.add_argument("--calls", type=_nonneg_int, default=0, metavar="N",
                    help="downstream calls per request made in parallel on blocking pool threads (default 0)")
    th.add_argument("--call-time", type=_time_or_zero, default=None, metavar="TIME",
                    help="mean time one call holds its pool thread (default: --response)")
    th.add_argument("--cpu-util", type=_fraction, default=None, metavar="F",
                    help="measured CPU utilisation, e.g. 45%%: adds the load average it implies")
    th.add_argument("--servers", type=_count, default=1, metavar="N", help="cores, with --cpu-util (default 1)")
    th.add_argument("--load", type=_positive, default=None, metavar="X",
                    help="measured load average, with --cpu-util, to compare")
    th.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_pool(sub) -> None:
    po = sub.add_parser("pool", help="a thread pool's size, its cores shared by the runnable threads",
                        description="Mean latency of tasks on a thread pool of each size: the threads share the "
                                    "cores (processor sharing, a context switch each quantum when more are "
                                    "runnable than there are cores) and hold their thread through blocking IO; "
                                    "tasks beyond the pool wait for a free thread.",
                        epilog=POOL_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    po.add_argument("--qps", type=_rate, required=True, metavar="RATE", help="tasks per second, e.g. 800")
    po.add_argument("--cpu", type=_time, required=True, metavar="TIME", help="mean CPU of one task, e.g. 2ms")
    po.add_argument("--delay", type=_time_or_zero, default=0.0, metavar="TIME",
                    help="mean blocking IO of one task, holding its thread (default 0)")
    po.add_argument("--cores", type=_count, default=1, metavar="N", help="cores of the pool (default 1)")
    po.add_argument("--threads", type=_counts, default=None, metavar="N[,N...]",
                    help="pool sizes to compare (default: 1 to the size past which more change nothing)")
    po.add_argument("--switch-cost", type=_time_or_zero, default=5e-6, metavar="TIME",
                    help="CPU time of one context switch, caches refilled included (default 5us)")
    po.add_argument("--quantum", type=_time, default=0.003, metavar="TIME",
                    help="time a core runs one thread before switching (default 3ms)")
    po.add_argument("--max-mean", type=_time, default=None, metavar="TIME",
                    help="the mean response the pool should keep: the fewest threads that do")
    po.add_argument("--slo", type=_slo, default=None, metavar="pQ=TIME,...",
                    help="a percentile objective on the tasks' response: the fewest threads that keep it "
                         "(plan.pool_size: Erlang C with the tasks' CPU + IO as the holding time)")
    po.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_handoff(sub) -> None:
    ho = sub.add_parser("handoff", help="does handing a short task to a thread pool pay?",
                        description="A task handed to a pool pays two wake-ups (each a wait for a core) and two "
                                    "context switches for the parallelism it buys; compared with running it in "
                                    "the calling thread, on the mean and at p99.9.",
                        epilog=HANDOFF_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    ho.add_argument("--task", type=_time, required=True, metavar="TIME", help="CPU time of one task, e.g. 1.6ms")
    ho.add_argument("--servers", type=_count, required=True, metavar="N", help="cores of the machine")
    ho.add_argument("--cpu-util", type=_fraction, required=True, metavar="F", help="CPU utilisation, e.g. 31%%")
    ho.add_argument("--burst", type=_time, required=True, metavar="TIME",
                    help="mean CPU burst of the competing threads (time slice or run until blocking), e.g. 5ms")
    ho.add_argument("--switch-cost", type=_time_or_zero, default=5e-6, metavar="TIME",
                    help="CPU time of one context switch (default 5us)")
    ho.add_argument("--parallel", type=_count, default=1, metavar="K",
                    help="tasks one call hands off at once and waits for (default 1)")
    ho.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_steal(sub) -> None:
    st = sub.add_parser("steal", help="CPU steal on a noisy host: ceiling and p99, and when to move",
                        description="CPU steal as lost capacity (each core runs at speed 1 - steal): the SLO "
                                    "ceiling and the latency percentiles against steal, and the steal above "
                                    "which moving to a quieter host pays.",
                        epilog=STEAL_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_service(st)
    st.add_argument("--servers", type=_count, default=1, metavar="N", help="cores (vCPUs) of one queue (default 1)")
    st.add_argument("--slo", type=_slo, default={0.99: 0.5}, metavar="pQ=TIME,...",
                    help="latency objective (default p99=500ms)")
    st.add_argument("--steal", type=_steals, default=None, metavar="F[,F...]",
                    help="steal shares for the table, e.g. 0,5%%,10%% (default 0,2,5,10,20,30%%)")
    st.add_argument("--qps", type=_rate, default=None, metavar="RATE",
                    help="today's request rate: adds the percentiles and the steal at which the SLO breaks")
    st.add_argument("--max-loss", type=_fraction, default=None, metavar="F",
                    help="share of the ceiling you accept losing, e.g. 20%%: adds the steal at which it is lost")
    st.add_argument("--steal-period", type=_time_or_zero, default=0.0, metavar="TIME",
                    help="how long one steal period lasts when the hypervisor takes the core in long "
                         "periods (default 0: finely interleaved); --discipline fcfs only")
    st.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_fit(sub) -> None:
    fi = sub.add_parser("fit", help="fit CPU time per request to latency percentiles or an access log",
                        description="Fit the CPU time per request (mean and variability, plus an optional "
                                    "non-CPU delay) of a queueing model to observed latency percentiles at a "
                                    "known request rate, or to a per-request log; optionally the QPS ceiling "
                                    "that the fitted model implies for an SLO.",
                        epilog=FIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    fi.add_argument("percentiles", type=_percentiles, nargs="?", default=None, metavar="PERCENTILES",
                    help="observed latency percentiles, e.g. p50=45ms,p90=80ms,p99=300ms (or give --log)")
    fi.add_argument("--qps", type=_rate, default=None, metavar="RATE",
                    help="request rate while the percentiles were measured, e.g. 8 (required without --log)")
    fi.add_argument("--log", default=None, metavar="FILE", help="fit a per-request log instead of percentiles")
    fi.add_argument("--prometheus", default=None, metavar="URL|FILE",
                    help="fit a Prometheus histogram: a server's address (with --histogram) or a saved "
                         "query_range answer of its bucket increases")
    fi.add_argument("--timeseries", default=None, metavar="FILE",
                    help="fit a dashboard export (CSV: time, qps, cpu_percent, p50_ms, p99_ms, ...; units "
                         "from the column names)")
    fi.add_argument("--k6", default=None, metavar="FILE",
                    help="fit a k6 run's --out json file (http_req_duration, per --step window, default 1min)")
    fi.add_argument("--histogram", default=None, metavar="NAME",
                    help="with --prometheus URL: the histogram's metric name, without _bucket")
    fi.add_argument("--cpu-counter", default=None, metavar="NAME|FILE",
                    help="with --prometheus URL: the process CPU counter, with its own matchers if the "
                         "histogram's do not fit it (default process_cpu_seconds_total); with --prometheus "
                         "FILE: a saved query_range answer of sum(rate(<counter>[<step>])), the busy cores "
                         "(without it the CPU per request comes from the latencies alone)")
    fi.add_argument("--selector", default="", metavar="LABELS",
                    help='with --prometheus URL: label matchers, e.g. job="api",instance="web-1:9100"')
    fi.add_argument("--since", type=_time, default=None, metavar="TIME",
                    help="with --prometheus URL: how far back from now to read (default 24h)")
    fi.add_argument("--step", type=_time, default=None, metavar="TIME",
                    help="with --prometheus: window length (default 5min for a server; a saved "
                         "answer's own spacing)")
    fi.add_argument("--measured-at", choices=("in_process", "proxy", "client"), default=None,
                    help="where the latencies were timed: with --prometheus the histogram (default "
                         "in_process: the server's own middleware, which does not see the queue in "
                         "front of a blocking handler); with PERCENTILES, --log, --timeseries or --k6 "
                         "(default client)")
    fi.add_argument("--format", choices=("nginx", "csv"), default=None,
                    help="log type (default: csv for .csv/.parquet files, else nginx)")
    fi.add_argument("--log-format", default=None, metavar="FORMAT",
                    help="the nginx log_format the log was written with (default: combined + "
                         "$request_time $upstream_response_time)")
    fi.add_argument("--timing", choices=("duration", "upstream"), default=None,
                    help="with --log: model the whole request time or the upstream (backend) time")
    fi.add_argument("--duration-unit", choices=("s", "ms", "us", "ns"), default=None,
                    help="with a CSV/Parquet --log whose duration column's name carries no unit "
                         "(duration_ms does): its unit, never guessed")
    fi.add_argument("--latency", choices=("duration", "upstream"), action=_OldTimingFlag, help=argparse.SUPPRESS)
    fi.add_argument("--bins", type=_count, default=None, metavar="N",
                    help="with --log: load bins fitted jointly (default 4)")
    fi.add_argument("--servers", type=_count, default=1, metavar="N", help="cores or worker processes (default 1)")
    fi.add_argument("--discipline", choices=("ps", "fcfs", "rr"), default=None,
                    help="ps: event loop / time-sliced CPU; fcfs: blocking worker pool; rr: round robin "
                         "with --slices time slices per request (default: ps or fcfs, chosen from the "
                         "data)")
    fi.add_argument("--slices", type=_slices, default=None, metavar="K",
                    help="with --discipline rr: time slices per request, or 'fit' (default: fit)")
    fi.add_argument("--admission", choices=("fifo", "idle"), default=None,
                    help="with --discipline rr: when a new request joins the run queue. fifo: at once "
                         "(default); idle: only when no request in flight is runnable (Node.js 20 handlers "
                         "that await setTimeout)")
    fi.add_argument("--slice-delay", type=_time_or_zero, default=None, metavar="TIME",
                    help="with --discipline rr: non-CPU wait between two slices of a request, held "
                         "fixed, e.g. 1.1ms for await setTimeout(0) on Node.js")
    fi.add_argument("--family", choices=_FIT_FAMILIES, default=None,
                    help="distribution family of the CPU time (default: lognormal or gamma, chosen "
                         "from the data)")
    fi.add_argument("--cpu-util", type=_util, default=None, metavar="F",
                    help="measured CPU busy share of the servers, e.g. 20%% (pins the mean by the "
                         "utilisation law)")
    fi.add_argument("--delay", type=_delay, default=None, metavar="constant|lognormal|TIME",
                    help="non-CPU latency (IO, database) to fit alongside, or a fixed time like 5ms "
                         "(default: none or constant, chosen from the data; 0 for none)")
    fi.add_argument("--requests", type=_count, default=None, metavar="N",
                    help="requests behind the percentiles; enables confidence intervals")
    fi.add_argument("--slo", type=_slo, default=None, metavar="pQ=TIME,...",
                    help="also report the QPS ceiling the fitted model implies, e.g. p99=500ms")
    fi.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_logs(sub) -> None:
    lo = sub.add_parser("logs", help="read request logs once: convert them to Parquet",
                        description="Work on request logs (nginx access logs, CSV or Parquet request tables).")
    lsub = lo.add_subparsers(dest="logs_command", metavar="ACTION", parser_class=_Parser)
    cv = lsub.add_parser("convert", help="parse logs once and write the requests (or per-window aggregates) "
                                         "to Parquet",
                         description="Parse request logs (a file, a glob or a directory; nginx plain, gzip or "
                                     "zstd, CSV, Parquet) once and write the parsed requests -- or with "
                                     "--aggregate the per-window, per-endpoint counts and duration histograms "
                                     "-- to Parquet. Skipped lines are counted by kind and reported.")
    cv.add_argument("log", nargs="+", metavar="LOG", help="log file(s), glob(s) or directory")
    cv.add_argument("--out", required=True, metavar="FILE.parquet", help="the Parquet file to write")
    cv.add_argument("--aggregate", action="store_true",
                    help="write per-window, per-endpoint aggregates instead of one row per request")
    cv.add_argument("--window", type=_time, default=None, metavar="TIME",
                    help="with --aggregate: window length, e.g. 60s or 5min (default 60s)")
    cv.add_argument("--format", choices=("nginx", "csv", "parquet"), default=None,
                    help="log type (default: from the file name and its first bytes; nginx otherwise)")
    cv.add_argument("--log-format", default=None, metavar="FORMAT",
                    help="the nginx log_format the log was written with (default: combined + "
                         "$request_time $upstream_response_time)")
    cv.add_argument("--timing", choices=("duration", "upstream"), default="duration",
                    help="with --aggregate: histogram the whole request time or the upstream time")
    cv.add_argument("--duration-unit", choices=("s", "ms", "us", "ns"), default=None,
                    help="CSV/Parquet logs whose duration column's name carries no unit: its unit")
    cv.add_argument("--scheduler", default=None, metavar="ADDRESS",
                    help="with --aggregate: aggregate each file on this Dask cluster, e.g. tcp://10.0.0.5:8786 "
                         "(the files must be readable by its workers; needs capacity[dask])")
    cv.add_argument("--json", action="store_true", help="print JSON instead of text")
