"""The ``capacity`` command line.

``capacity --version`` prints the version; ``capacity example`` prints the
worked example from the README (the QPS at which a 25 ms-per-request Node.js
process crosses a 1 s p99).  The planning subcommands ``ceiling``,
``servers``, ``timeout``, ``scaling`` and ``gc`` are thin front ends to :mod:`capacity.plan`:
each prints a table and a paragraph of explanation, or JSON with ``--json``.  ``fit`` fits the
CPU time per request to observed latency percentiles (:func:`capacity.fit.from_percentiles`) or to
an access log (:func:`capacity.fit.from_requests`).

Times take units (``250us``, ``25ms``, ``1.5s``, ``2min``; a bare number is
seconds), rates take ``qps`` or a bare number.  Bad input exits with status 2
and a one-line message naming the flag.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from decimal import Decimal
from typing import Any, Sequence

import numpy as np

from ._version import __version__

EXAMPLE_HELP = """\
example:
  capacity example                  # 25 ms of CPU per request, p99 <= 1 s
  capacity example --cpu-ms 40 --p99-ms 500
"""

MAIN_HELP = """\
examples:
  capacity example                                        # the README's worked example
  capacity ceiling --cpu 25ms --slo p99=500ms             # QPS before p99 breaks (event loop)
  capacity ceiling --cpu 25ms --scv 2 --servers 1,2,4,8 --discipline fcfs --slo p99=500ms,p99.9=2s
  capacity servers --qps 500 --cpu 25ms --slo p99=200ms --per-machine 4 --redundancy 1
  capacity timeout --cpu 25ms --servers 4 --timeout 1s --max-fraction 0.1%
  capacity timeout --p999 120ms --user-limit 2s            # the 3 x P99.9 rule
  capacity scaling --qps 300 --cpu 25ms --slo p99=500ms --cores-per-machine 8   # cluster vs machine
  capacity gc --cpu 9.4ms --gc-share 27.5% --new-gc-share 7.14% --pause 47ms --new-pause 38ms
  capacity fit p50=45ms,p90=80ms,p99=300ms --qps 8 --slo p99=500ms   # CPU/request from a dashboard
  capacity fit --log access.log --slo p99=500ms           # ... or from an nginx access log
  capacity ceiling --cpu 25ms --slo p99=500ms --json      # machine-readable output

Times take units (250us, 25ms, 1.5s, 2min; a bare number is seconds); rates take
qps or a bare number.
"""

CEILING_HELP = """\
examples:
  capacity ceiling --cpu 25ms --slo p99=500ms
  capacity ceiling --cpu 25ms --scv 4 --family hyperexponential --slo p99=500ms,p99.9=2s
  capacity ceiling --cpu 25ms --servers 1,2,4,8 --discipline fcfs --slo p99=500ms --delay 5ms
"""

SERVERS_HELP = """\
examples:
  capacity servers --qps 500 --cpu 25ms --slo p99=200ms
  capacity servers --qps 500 --cpu 25ms --slo p99=200ms --per-machine 4 --redundancy 1
  capacity servers --qps 0.0556 --cpu 180s --discipline fcfs --slo-on wait --slo p80=20s   # Erlang C
"""

TIMEOUT_HELP = """\
examples:
  capacity timeout --cpu 25ms --servers 4 --timeout 1s --max-fraction 0.1%   # timeout-safe QPS
  capacity timeout --p999 120ms                                              # core call: 3 x P99.9
  capacity timeout --p999 120ms --non-core --user-limit 150ms
  capacity timeout --p999 120ms --cpu 25ms --qps 20 --discipline fcfs        # + model's timed-out share
  capacity timeout --cpu 25ms --timeout 1s --burst-qps 60                    # + how long a 60 QPS burst may last
"""

SCALING_HELP = """\
examples:
  capacity scaling --qps 300 --cpu 25ms --slo p99=500ms --cores-per-machine 8
  capacity scaling --qps 300 --cpu 25ms --slo p99=500ms --cores 16 --cores-per-machine 4 \\
      --cost-per-machine 120 --cost-per-core 15 --memory-per-process 300MB --machine-memory 8GB
  capacity scaling --qps 300 --cpu 25ms --option 1x16:rr --option 4x4:lc --option 4x4:rr --option 4x4:pooled

--option MxP[xS][:DISPATCH]: M machines x P worker processes (x S cores each, default 1);
DISPATCH is rr (round robin, default), lc (least connections), random or pooled (the ideal).
"""

GC_HELP = """\
examples:
  # seed article: 3 Node processes saturate at 320 QPS (9.4 ms CPU/request); semi-space 16 -> 64 MB
  capacity gc --cpu 9.375ms --processes 3 --gc-share 27.5% --pause 47.3ms --pause-rate 5.6 \\
      --new-gc-share 7.14% --new-pause 37.8ms --new-pause-rate 1.73 --measured-gain 10%
  capacity gc --cpu 9.4ms --gc-share 27.5% --new-gc-share 7.14% --pause 55ms --discipline ps
"""

FIT_HELP = """\
examples:
  capacity fit p50=45ms,p90=80ms,p99=300ms --qps 8                   # what does a request cost?
  capacity fit p50=45ms,p90=80ms,p99=300ms,p99.9=600ms --qps 8 --discipline fcfs --slo p99=500ms
  capacity fit p50=45ms,p99=300ms --qps 8 --cpu-util 35% --delay constant --requests 28800
  capacity fit --log access.log --slo p99=500ms                      # nginx log (combined + times)
  capacity fit --log requests.csv --discipline fcfs --json           # CSV: time, duration[, endpoint]

Percentiles are pQ=TIME pairs (p50, p99, p99.9; 0.999=2s also works; p999 is ambiguous and
refused). The default model (ps, lognormal) is slow to fit (10 s to 2 min);
--discipline fcfs or --family exponential fits in under a second.
"""


def _rate_where_p99_crosses(response_quantile, service, threshold: float) -> float:
    """Arrival rate at which the p99 response time equals ``threshold`` (s).

    p99 rises monotonically with load, so bracket the root in utilisation
    (0, 1) and let the shared solver find it.
    """
    from ._common import solve_increasing

    mean = float(service.mean)
    utilization = solve_increasing(
        lambda rho: np.asarray(response_quantile(0.99, rho / mean, service), dtype=float),
        np.asarray(threshold), np.asarray(1e-9), np.asarray(1 - 1e-9), log=False, rtol=1e-10)
    return float(utilization) / mean


def _example(cpu_ms: float, p99_ms: float) -> str:
    from . import fcfs, ps
    from .distributions import Service

    service = Service.exponential(cpu_ms / 1000.0)
    threshold = p99_ms / 1000.0
    capacity_qps = 1.0 / service.mean
    lines = [
        f"capacity {__version__} - worked example",
        f"A Node.js process spends {cpu_ms:g} ms of CPU per request (exponential, one core).",
        f"At what request rate does the p99 latency cross {p99_ms:g} ms?",
        "",
        f"{'discipline':<30}{'p99 crosses at':>16}{'utilisation':>13}{'capacity':>12}",
    ]
    for name, module in (("processor sharing (event loop)", ps), ("FCFS (blocking server)", fcfs)):
        if float(module.response_quantile(0.99, 0.0, service)) > threshold:
            lines.append(f"{name:<30}{'never (p99 > SLO even idle)':>41}")
            continue
        rate = _rate_where_p99_crosses(module.response_quantile, service, threshold)
        lines.append(f"{name:<30}{rate:>12.1f} QPS{rate * service.mean:>13.3f}{capacity_qps:>8.1f} QPS")
    lines += ["", "p99 latency (ms) by load:", f"{'QPS':>8}{'util':>7}{'PS p99':>10}{'FCFS p99':>10}"]
    rates = capacity_qps * np.array([0.25, 0.5, 0.7, 0.8, 0.9, 0.95])
    ps_p99 = np.asarray(ps.response_quantile(0.99, rates, service)) * 1000
    fcfs_p99 = np.asarray(fcfs.response_quantile(0.99, rates, service)) * 1000
    for rate, a, b in zip(rates, ps_p99, fcfs_p99):
        lines.append(f"{rate:>8.1f}{rate * service.mean:>7.2f}{a:>10.0f}{b:>10.0f}")
    lines += ["", "Same mean latency, heavier tail: an event loop shares the CPU, so one slow",
              "second slows every in-flight request at once."]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Argument types: each raises ArgumentTypeError, which argparse reports with the flag's name.

_TIME_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0}
_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _time(text: str, *, allow_zero: bool = False) -> float:
    m = re.fullmatch(rf"\s*({_NUMBER})\s*([a-zµ]*)\s*", text)
    unit = m.group(2) if m else ""
    if not m or unit not in _TIME_UNITS and unit != "":
        raise argparse.ArgumentTypeError(f"expected a time like 25ms, 1.5s or 250us, got {text!r}")
    value = float(m.group(1)) * _TIME_UNITS.get(unit, 1.0)
    if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise argparse.ArgumentTypeError(f"expected a {'non-negative' if allow_zero else 'positive'} time, "
                                         f"got {text!r}")
    return value


def _time_or_zero(text: str) -> float:
    return _time(text, allow_zero=True)


def _rate(text: str) -> float:
    m = re.fullmatch(rf"\s*({_NUMBER})\s*(qps|rps|/s|req/s)?\s*", text, flags=re.IGNORECASE)
    if not m or not (float(m.group(1)) > 0 and np.isfinite(float(m.group(1)))):
        raise argparse.ArgumentTypeError(f"expected a positive rate like 120 or 120qps, got {text!r}")
    return float(m.group(1))


def _rates(text: str) -> list[float]:
    return [_rate(part) for part in text.split(",")]


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _counts(text: str) -> list[int]:
    return [_count(part.strip()) for part in text.split(",")]


def _nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _fraction(text: str) -> float:
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction like 0.001 or 0.1%, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction strictly between 0 and 1, got {text!r}")
    return value


_MEMORY_UNITS = {"": 1.0, "b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "k": 1e3, "m": 1e6, "g": 1e9,
                 "kib": 2.0 ** 10, "mib": 2.0 ** 20, "gib": 2.0 ** 30, "tib": 2.0 ** 40}


def _memory(text: str) -> float:
    m = re.fullmatch(rf"\s*({_NUMBER})\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _MEMORY_UNITS or not float(m.group(1)) > 0:
        raise argparse.ArgumentTypeError(f"expected a memory size like 300MB, 2GiB or 8GB, got {text!r}")
    return float(m.group(1)) * _MEMORY_UNITS[unit]


def _money(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value >= 0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a non-negative cost, got {text!r}")
    return value


def _signed_fraction(text: str) -> float:
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction like 0.1 or 10%, got {text!r}") from None
    if not (np.isfinite(value) and value > -1):
        raise argparse.ArgumentTypeError(f"expected a fraction above -100%, got {text!r}")
    return value


_DISPATCH_ALIASES = {"rr": "round_robin", "round_robin": "round_robin", "lc": "least_connections",
                     "least_connections": "least_connections", "random": "random", "pooled": "pooled"}


def _option(text: str):
    m = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)(?:\s*x\s*(\d+))?\s*(?::\s*([a-z_]+))?\s*", text.lower())
    if not m or (m.group(4) and m.group(4) not in _DISPATCH_ALIASES) or "0" in (m.group(1), m.group(2)) \
            or int(m.group(1)) < 1 or int(m.group(2)) < 1 or (m.group(3) and int(m.group(3)) < 1):
        raise argparse.ArgumentTypeError(f"expected MxP[xS][:rr|lc|random|pooled] like 4x8:lc, got {text!r}")
    return dict(machines=int(m.group(1)), processes=int(m.group(2)), servers=int(m.group(3) or 1),
                dispatch=_DISPATCH_ALIASES[m.group(4) or "rr"])


def _quantile_name(name: str) -> float:
    name = name.strip().lower()
    m = re.fullmatch(r"p(\d+(?:\.\d+)?)", name)
    # Decimal keeps p99.9 -> 0.999 exact (99.9 / 100 in binary is 0.9990000000000001).
    value = float(Decimal(m.group(1)) / 100) if m else float(name)
    if not 0 < value < 1:
        raise ValueError
    return value


def _slo(text: str) -> dict[float, float]:
    out: dict[float, float] = {}
    for part in text.split(","):
        if "=" not in part:
            raise argparse.ArgumentTypeError(f"expected percentile=time pairs like p99=500ms,p99.9=2s, got {text!r}")
        name, value = part.split("=", 1)
        try:
            q = _quantile_name(name)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a percentile like p99 or p99.9, got {name.strip()!r}") from None
        out[q] = _time(value)
    return out


def _percentiles(text: str) -> dict[float, float]:
    """``p50=45ms,p99.9=2s`` -> {0.5: 0.045, 0.999: 2.0}, sorted by q, latencies non-decreasing."""
    out: dict[float, float] = {}
    for part in text.split(","):
        if "=" not in part:
            raise argparse.ArgumentTypeError(
                f"expected percentile=time pairs like p50=45ms,p99=300ms, got {part.strip()!r}")
        name, value = (x.strip() for x in part.split("=", 1))
        m = re.fullmatch(r"[pP](\d+)", name)
        if m and len(m.group(1)) > 2 and int(m.group(1)) != 100:
            # "p999" means p99.9 to some dashboards and is meaningless as written (999 %); refuse to guess.
            raise argparse.ArgumentTypeError(
                f"ambiguous percentile {name!r}: write it with a decimal point, e.g. p99.9")
        try:
            q = _quantile_name(name)
        except (ValueError, ArithmeticError):
            raise argparse.ArgumentTypeError(
                f"expected a percentile like p50, p99 or p99.9 (strictly between p0 and p100), got {name!r}") \
                from None
        if q in out:
            raise argparse.ArgumentTypeError(f"percentile {name!r} given twice")
        out[q] = _time(value)
    out = dict(sorted(out.items()))
    items = list(out.items())
    for (q1, t1), (q2, t2) in zip(items, items[1:]):
        if t2 < t1:
            raise argparse.ArgumentTypeError(
                f"latencies must not decrease as the percentile rises, got {_fmt_pct(q1)}={_short_time(t1)} "
                f"but {_fmt_pct(q2)}={_short_time(t2)}")
    return out


def _fmt_pct(q: float) -> str:
    return "p" + f"{100 * q:.6f}".rstrip("0").rstrip(".")


def _short_time(seconds: float) -> str:
    return f"{seconds * 1e3:g}ms" if seconds < 1 else f"{seconds:g}s"


def _util(text: str) -> float:
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a CPU share like 20% or 0.2, got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a CPU share in (0, 100%], got {text!r}")
    return value


def _delay(text: str) -> str | float:
    if text.strip().lower() in ("constant", "lognormal"):
        return text.strip().lower()
    try:
        return _time(text, allow_zero=True)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected constant, lognormal or a time like 5ms, got {text!r}") \
            from None


def _slices(text: str) -> int | str:
    if text.strip().lower() == "fit":
        return "fit"
    try:
        return _count(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'fit', got {text!r}") from None


_FIT_FAMILIES = ("lognormal", "gamma", "hyperexponential", "exponential", "deterministic")


# ---------------------------------------------------------------------------------------------
# The parser


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line (no usage dump) and exit with status 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


_FAMILIES = ("exponential", "lognormal", "gamma", "deterministic", "hyperexponential")


def _add_service(p: argparse.ArgumentParser, required: bool = True) -> None:
    g = p.add_argument_group("service (CPU time per request)")
    g.add_argument("--cpu", type=_time, required=required, metavar="TIME",
                   help="mean CPU time per request, e.g. 25ms")
    g.add_argument("--scv", type=_time_or_zero, default=None, metavar="X",
                   help="squared coefficient of variation of the CPU time (default 1)")
    g.add_argument("--family", choices=_FAMILIES, default=None,
                   help="distribution of the CPU time (default: exponential if scv is 1, else lognormal)")
    g.add_argument("--discipline", choices=("ps", "fcfs"), default="ps",
                   help="ps: event loop / time-sliced CPU (default); fcfs: blocking worker pool")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="capacity",
        description="How much traffic can this service take? Queueing models for backend capacity planning.",
        epilog=MAIN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"capacity {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    ex = sub.add_parser("example", help="print the worked example from the README",
                        epilog=EXAMPLE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    ex.add_argument("--cpu-ms", type=_positive, default=25.0, help="CPU milliseconds per request (default 25)")
    ex.add_argument("--p99-ms", type=_positive, default=1000.0, help="p99 latency objective in ms (default 1000)")

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
    gc.add_argument("--pause-scv", type=_time_or_zero, default=0.0, metavar="X",
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
    fi.add_argument("--format", choices=("nginx", "csv"), default=None,
                    help="log type (default: csv for .csv/.parquet files, else nginx)")
    fi.add_argument("--log-format", default=None, metavar="FORMAT",
                    help="the nginx log_format the log was written with (default: combined + "
                         "$request_time $upstream_response_time)")
    fi.add_argument("--latency", choices=("duration", "upstream"), default=None,
                    help="with --log: model the whole request time or the upstream (backend) time")
    fi.add_argument("--bins", type=_count, default=None, metavar="N",
                    help="with --log: load bins fitted jointly (default 4)")
    fi.add_argument("--servers", type=_count, default=1, metavar="N", help="cores or worker processes (default 1)")
    fi.add_argument("--discipline", choices=("ps", "fcfs", "rr"), default="ps",
                    help="ps: event loop / time-sliced CPU (default); fcfs: blocking worker pool; "
                         "rr: round robin with --slices time slices per request")
    fi.add_argument("--slices", type=_slices, default=None, metavar="K",
                    help="with --discipline rr: time slices per request, or 'fit' (default: fit)")
    fi.add_argument("--admission", choices=("fifo", "idle"), default=None,
                    help="with --discipline rr: when a new request joins the run queue. fifo: at once "
                         "(default); idle: only when no request in flight is runnable (Node.js 20 handlers "
                         "that await setTimeout)")
    fi.add_argument("--slice-delay", type=_time_or_zero, default=None, metavar="TIME",
                    help="with --discipline rr: non-CPU wait between two slices of a request, held "
                         "fixed, e.g. 1.1ms for await setTimeout(0) on Node.js")
    fi.add_argument("--family", choices=_FIT_FAMILIES, default="lognormal",
                    help="distribution family of the CPU time (default lognormal)")
    fi.add_argument("--cpu-util", type=_util, default=None, metavar="F",
                    help="measured CPU busy share of the servers, e.g. 20%% (pins the mean by the "
                         "utilisation law)")
    fi.add_argument("--delay", type=_delay, default=None, metavar="constant|lognormal|TIME",
                    help="non-CPU latency (IO, database) to fit alongside, or a fixed time like 5ms")
    fi.add_argument("--requests", type=_count, default=None, metavar="N",
                    help="requests behind the percentiles; enables confidence intervals")
    fi.add_argument("--slo", type=_slo, default=None, metavar="pQ=TIME,...",
                    help="also report the QPS ceiling the fitted model implies, e.g. p99=500ms")
    fi.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


# ---------------------------------------------------------------------------------------------
# Commands


class _UsageError(Exception):
    """Bad input found after parsing; reported in one line, exit status 2."""


def _service(args: argparse.Namespace):
    from .distributions import Service

    scv = 1.0 if args.scv is None else args.scv
    family = args.family or ("exponential" if scv == 1.0 else "lognormal")
    if family == "exponential":
        if scv != 1.0:
            raise _UsageError(f"argument --scv: the exponential family has scv 1, got {scv:g}")
        return Service.exponential(args.cpu)
    if family == "deterministic":
        if args.scv not in (None, 0.0):
            raise _UsageError(f"argument --scv: the deterministic family has scv 0, got {scv:g}")
        return Service.deterministic(args.cpu)
    if scv <= 0:
        raise _UsageError(f"argument --scv: the {family} family needs scv > 0, got {scv:g}")
    if family == "hyperexponential" and scv < 1:
        raise _UsageError(f"argument --scv: the hyperexponential family needs scv >= 1, got {scv:g}")
    return getattr(Service, family)(args.cpu, scv)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return None if np.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def _ms(seconds: float) -> str:
    from .plan import _fmt_time
    return _fmt_time(float(seconds))


def _q(q: float) -> str:
    from .plan import _fmt_q
    return _fmt_q(float(q))


def _wrap(text: str) -> str:
    return "\n".join(textwrap.wrap(text, width=96))


def _service_text(args: argparse.Namespace, service) -> str:
    return f"{_ms(args.cpu)} CPU/request ({service.family}, scv {float(service.scv):.3g}), {args.discipline}"


def _cmd_ceiling(args: argparse.Namespace) -> tuple[dict, str]:
    from . import plan

    service = _service(args)
    servers = np.array(args.servers)
    res = plan.qps_ceiling(service, servers if servers.size > 1 else int(servers[0]), args.slo,
                           discipline=args.discipline, delay=args.delay, slo_on=args.slo_on)
    qps = np.atleast_1d(res.qps)
    cap = np.atleast_1d(res.capacity_qps)
    binding = np.atleast_1d(res.binding)
    rows = []
    for i, c in enumerate(servers):
        rows.append({"servers": int(c), "qps": float(qps[i]), "capacity_qps": float(cap[i]),
                     "utilization": float(qps[i] / cap[i]), "binding": _q(binding[i]),
                     "per_slo_qps": {_q(q): float(np.atleast_1d(r)[i]) for q, r in res.rates.items()}})
    data = {"command": "ceiling", "service": {"mean_s": args.cpu, "scv": float(service.scv),
                                              "family": service.family},
            "discipline": args.discipline, "slo": {_q(q): t for q, t in res.slo.items()}, "slo_on": args.slo_on,
            "delay_s": args.delay, "rows": rows, "explanation": res.explanation}
    what = "wait" if args.slo_on == "wait" else ""
    slo_cols = [f"{_q(q)}{' wait' if what else ''}<={_ms(t)}" for q, t in res.slo.items()]
    lines = [f"QPS ceiling: {_service_text(args, service)}" + (f", +{_ms(args.delay)} delay" if args.delay else ""),
             "",
             f"{'servers':>8}{'ceiling QPS':>14}{'util':>8}{'capacity':>12}  {'binds':<8}"
             + "".join(f"{c:>20}" for c in slo_cols)]
    for r in rows:
        lines.append(f"{r['servers']:>8}{r['qps']:>14.4g}{100 * r['utilization']:>7.1f}%{r['capacity_qps']:>12.4g}  "
                     f"{r['binding']:<8}" + "".join(f"{v:>20.4g}" for v in r["per_slo_qps"].values()))
    lines += ["", "(per-percentile columns: the QPS at which that percentile alone reaches its target)", "",
              _wrap(res.explanation)]
    return data, "\n".join(lines)


def _cmd_servers(args: argparse.Namespace) -> tuple[dict, str]:
    from . import plan

    service = _service(args)
    qps = np.array(args.qps)
    if args.redundancy and args.per_machine is None:
        raise _UsageError("argument --redundancy: needs --per-machine (redundancy counts machines)")
    res = plan.servers_needed(qps if qps.size > 1 else float(qps[0]), service, args.slo,
                              discipline=args.discipline, redundancy=args.redundancy,
                              servers_per_machine=args.per_machine, delay=args.delay, slo_on=args.slo_on)
    n = qps.size
    servers = np.broadcast_to(res.servers, (n,))
    util = np.broadcast_to(res.utilization, (n,))
    binding = np.broadcast_to(res.binding, (n,))
    machines = None if res.machines is None else np.broadcast_to(res.machines, (n,))
    rows = []
    for i in range(n):
        row = {"qps": float(qps[i]), "servers": int(servers[i]), "utilization": float(util[i]),
               "binding": _q(binding[i]),
               "tail": {_q(q): float(np.broadcast_to(v, (n,))[i]) for q, v in res.tail.items()}}
        if machines is not None:
            row["machines"] = int(machines[i])
        rows.append(row)
    data = {"command": "servers", "service": {"mean_s": args.cpu, "scv": float(service.scv),
                                              "family": service.family},
            "discipline": args.discipline, "slo": {_q(q): t for q, t in res.slo.items()}, "slo_on": args.slo_on,
            "delay_s": args.delay, "per_machine": args.per_machine, "redundancy": args.redundancy,
            "rows": rows, "explanation": res.explanation}
    lines = [f"Servers needed: {_service_text(args, service)}; SLO "
             + ", ".join(f"{_q(q)}{' wait' if args.slo_on == 'wait' else ''} <= {_ms(t)}" for q, t in res.slo.items()),
             "",
             f"{'QPS':>10}{'servers':>9}{'util':>8}" + (f"{'machines':>10}" if machines is not None else "")
             + f"  {'binds':<8}{'share over target':>18}"]
    for r in rows:
        b = r["binding"]
        lines.append(f"{r['qps']:>10.4g}{r['servers']:>9}{100 * r['utilization']:>7.1f}%"
                     + (f"{r['machines']:>10}" if machines is not None else "")
                     + f"  {b:<8}{100 * r['tail'][b]:>17.3g}%")
    if machines is not None:
        lines.append(f"\n(servers = machines x {args.per_machine} cores, N+{args.redundancy})")
    lines += ["", _wrap(res.explanation)]
    return data, "\n".join(lines)


def _cmd_timeout(args: argparse.Namespace) -> tuple[dict, str]:
    from . import plan

    if args.p999 is None and args.timeout is None:
        raise _UsageError("give --timeout (timeout-safe QPS) or --p999 (recommended timeout)")
    if args.p999 is not None:
        if args.qps is not None and args.cpu is None:
            raise _UsageError("argument --qps: needs --cpu (a model of the server)")
        model = args.cpu is not None and args.qps is not None
        service = _service(args) if args.cpu is not None else None
        adv = plan.recommend_timeout(args.p999, core=not args.non_core, user_limit=args.user_limit,
                                     service=service if model else None,
                                     arrival_rate=args.qps if model else None,
                                     servers=args.servers, discipline=args.discipline)
        data = {"command": "timeout", "mode": "recommend", "p999_s": adv.p999, "core": adv.core,
                "multiplier": adv.multiplier, "user_limit_s": adv.user_limit, "timeout_s": adv.timeout,
                "rule": adv.rule, "model_timeout_fraction": adv.timeout_fraction, "warning": adv.warning,
                "explanation": adv.explanation}
        lines = ["Recommended client timeout (rule: min(3 x P99.9, user limit) core, 1.5 x non-core)", "",
                 f"{'P99.9':>12}{'call':>10}{'rule value':>12}{'user limit':>12}{'timeout':>10}  decided by"]
        lines.append(f"{_ms(adv.p999):>12}{'core' if adv.core else 'non-core':>10}"
                     f"{_ms(adv.multiplier * adv.p999):>12}{_ms(adv.user_limit) if adv.user_limit else '-':>12}"
                     f"{_ms(adv.timeout):>10}  {adv.rule}")
        if adv.timeout_fraction is not None:
            lines.append(f"model: {100 * adv.timeout_fraction:.3g} % of requests slower than {_ms(adv.timeout)} "
                         f"at {args.qps:g} QPS")
        lines += ["", _wrap(adv.explanation)]
        return data, "\n".join(lines)
    if args.cpu is None:
        raise _UsageError("argument --cpu: required with --timeout (a model of the server)")
    service = _service(args)
    res = plan.timeout_safe_rate(service, args.servers, args.timeout, args.max_fraction,
                                 discipline=args.discipline, delay=args.delay, burst_qps=args.burst_qps)
    data = {"command": "timeout", "mode": "safe_rate", "service": {"mean_s": args.cpu, "scv": float(service.scv),
                                                                   "family": service.family},
            "discipline": args.discipline, "servers": args.servers, "timeout_s": args.timeout,
            "max_timeout_fraction": args.max_fraction, "delay_s": args.delay, "qps": res.qps,
            "capacity_qps": res.capacity_qps, "utilization": res.ratio, "burst_qps": res.burst_qps,
            "burst_seconds": res.burst_seconds, "explanation": res.explanation}
    burst = res.burst_qps is not None
    lines = [f"Timeout-safe rate: {_service_text(args, service)}, {args.servers} "
             f"server{'s' if args.servers != 1 else ''}", "",
             f"{'timeout':>10}{'max share':>11}{'safe QPS':>11}{'util':>8}{'capacity':>11}"
             + (f"{'burst QPS':>11}{'may last':>10}" if burst else ""),
             f"{_ms(args.timeout):>10}{100 * args.max_fraction:>10.3g}%{res.qps:>11.4g}{100 * res.ratio:>7.1f}%"
             f"{res.capacity_qps:>11.4g}" + (f"{res.burst_qps:>11.4g}{_ms(res.burst_seconds):>10}" if burst else ""),
             "", _wrap(res.explanation)]
    return data, "\n".join(lines)


def _cmd_scaling(args: argparse.Namespace) -> tuple[dict, str]:
    from . import plan

    service = _service(args)
    res = plan.compare_scaling(args.qps, service, args.slo, options=args.option, cores=args.cores,
                               cores_per_machine=args.cores_per_machine, cost_per_machine=args.cost_per_machine,
                               cost_per_core=args.cost_per_core, memory_per_process=args.memory_per_process,
                               machine_memory=args.machine_memory, discipline=args.discipline)
    t = res.table
    qcols = [f"{_q(q)}_s" for q in res.slo]
    rows = []
    for label, r in t.iterrows():
        row = {"option": label}
        row.update({k: _jsonable(v) for k, v in r.items()})
        rows.append(row)
    data = {"command": "scaling", "peak_qps": args.qps,
            "service": {"mean_s": args.cpu, "scv": float(service.scv), "family": service.family},
            "discipline": args.discipline, "slo": {_q(q): v for q, v in res.slo.items()}, "best": res.best,
            "rows": rows, "explanation": res.explanation}
    width = max(len("option"), *(len(str(x)) for x in t.index))
    head = (f"{'option':<{width}}{'cores':>6}{'util':>7}" + "".join(f"{c[:-2]:>9}" for c in qcols)
            + f"{'SLO':>5}{'ceiling':>9}{'headroom':>9}{'N+1':>5}" + "".join(f"{'N+1 ' + c[:-2]:>11}" for c in qcols[-1:])
            + f"{'cost':>9}" + (f"{'mem ok':>7}" if args.memory_per_process and args.machine_memory else ""))
    lines = [f"Cluster vs machine at {args.qps:g} QPS: {_service_text(args, service)}; SLO "
             + ", ".join(f"{_q(q)} <= {_ms(v)}" for q, v in res.slo.items()), "", head]
    for label, r in t.iterrows():
        lines.append(f"{label:<{width}}{int(r['cores']):>6}{100 * r['utilization']:>6.1f}%"
                     + "".join(f"{_ms(r[c]):>9}" for c in qcols)
                     + f"{'yes' if r['meets_slo'] else 'NO':>5}{r['ceiling_qps']:>9.4g}{r['headroom']:>8.2f}x"
                     + f"{'yes' if r['n1_meets_slo'] else 'NO':>5}"
                     + "".join(f"{_ms(r['n1_' + c]):>11}" for c in qcols[-1:])
                     + f"{r['cost']:>9.4g}"
                     + (f"{'yes' if r['fits_memory'] else 'NO':>7}" if args.memory_per_process and args.machine_memory
                        else ""))
    lines += ["", "(ceiling: QPS at which the SLO breaks; headroom: ceiling / peak; N+1: SLO with one machine down)",
              "", _wrap(res.explanation)]
    return data, "\n".join(lines)


def _cmd_gc(args: argparse.Namespace) -> tuple[dict, str]:
    from . import plan

    service = _service(args)
    res = plan.gc_whatif(service, args.gc_share, args.pause, args.pause_rate, args.new_gc_share, args.new_pause,
                         args.new_pause_rate, servers=args.servers, slo=args.slo, discipline=args.discipline,
                         processes=args.processes, pause_scv=args.pause_scv, arrival_rate=args.qps,
                         measured_gain=args.measured_gain)
    t = res.table
    qcols = [f"{_q(q)}_s" for q in sorted(args.slo)]
    data = {"command": "gc", "service": {"mean_s": args.cpu, "scv": float(service.scv), "family": service.family},
            "discipline": args.discipline, "processes": args.processes, "servers": args.servers,
            "slo": {_q(q): float(v) for q, v in sorted(args.slo.items())},
            "table": {k: {c: _jsonable(v) for c, v in row.items()} for k, row in t.iterrows()},
            "arrival_rate": res.arrival_rate, "predicted_capacity_gain": res.predicted_capacity_gain,
            "predicted_ceiling_gain": res.predicted_ceiling_gain, "measured_gain": res.measured_gain,
            "gap": res.gap, "implied_cpu_share": res.implied_cpu_share, "notes": res.notes,
            "explanation": res.explanation}
    lines = [f"GC what-if: {_service_text(args, service)}, {args.processes} process"
             f"{'es' if args.processes > 1 else ''}", "",
             f"{'':<8}{'GC CPU':>8}{'pause':>9}{'pauses/s':>9}{'CPU/req':>9}{'scv':>6}{'capacity':>10}{'ceiling':>10}"
             + "".join(f"{c[:-2] + ' @' + format(res.arrival_rate, '.4g') + ' QPS':>16}" for c in qcols)
             + f"{'pause wait':>11}"]
    for label, r in t.iterrows():
        lines.append(f"{label:<8}{100 * r['gc_cpu_share']:>7.3g}%{_ms(r['pause_mean_s']):>9}"
                     f"{r['pause_rate_per_s']:>9.3g}{_ms(r['service_mean_s']):>9}{r['service_scv']:>6.2f}"
                     f"{r['capacity_qps']:>10.4g}{r['ceiling_qps']:>10.4g}"
                     + "".join(f"{_ms(r[c]):>16}" for c in qcols) + f"{_ms(r['pause_delay_s']):>11}")
    lines += ["", f"predicted: capacity {100 * res.predicted_capacity_gain:+.1f} %, SLO ceiling "
                  f"{100 * res.predicted_ceiling_gain:+.1f} %"
              + (f"; measured {100 * res.measured_gain:+.1f} % (gap {100 * res.gap:.1f} points)"
                 if res.measured_gain is not None else ""), "", _wrap(res.explanation)]
    return data, "\n".join(lines)


_SLOW_FAMILIES = ("lognormal", "gamma", "hyperexponential")
_CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.xz", ".tsv", ".parquet", ".pq")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _read_log(args: argparse.Namespace):
    """The log as a DataFrame, plus the reader's warnings as plain lines."""
    import warnings

    from . import logs

    fmt = args.format or ("csv" if args.log.lower().endswith(_CSV_SUFFIXES) else "nginx")
    if args.log_format is not None and fmt != "nginx":
        raise _UsageError("argument --log-format: applies to nginx logs only (--format nginx)")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if fmt == "nginx":
                df = logs.read_nginx(args.log, args.log_format or logs.COMBINED_WITH_TIMES)
            else:
                df = logs.read_requests(args.log)
    except (OSError, ValueError, ImportError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else _one_line(exc)
        if reason.startswith(f"{args.log}: "):   # the readers name the file themselves
            reason = reason[len(args.log) + 2:]
        raise _UsageError(f"argument --log: cannot read {args.log!r} as {fmt}: {reason}") from None
    return df, fmt, [_one_line(w.message) for w in caught if issubclass(w.category, UserWarning)]


def _fit_percentiles(args: argparse.Namespace):
    from .fit import from_percentiles

    if args.qps is None:
        raise _UsageError("argument --qps: required with PERCENTILES (the request rate they were measured at)")
    for flag, value in (("--format", args.format), ("--log-format", args.log_format),
                        ("--latency", args.latency), ("--bins", args.bins)):
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
                               admission=args.admission or "fifo", slice_delay=args.slice_delay or 0.0)
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
    from .fit import from_requests

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
                        delay=args.delay, bins=args.bins or 4, latency=args.latency or "duration",
                        by_endpoint=False, **extra)
    if res.fit_ is None:
        why = "; ".join(res.warnings_) or "no usable load bin"
        raise _UsageError(f"argument --log: cannot fit {args.log!r}: {why}")
    source = {"kind": "log", "path": args.log, "format": fmt, "requests": int(res.n_observations),
              "lines_skipped": int(df.attrs.get("skipped", 0)), "load_bins": int(len(res.bins_)),
              "latency": args.latency or "duration"}
    return res, res.fit_, source, notes


def _cmd_fit(args: argparse.Namespace) -> tuple[dict, str]:
    import math
    import warnings

    from .distributions import Service

    if args.percentiles is None and args.log is None:
        raise _UsageError("argument PERCENTILES: give percentiles like p50=45ms,p99=300ms with --qps, "
                          "or --log FILE")
    if args.percentiles is not None and args.log is not None:
        raise _UsageError("argument --log: give PERCENTILES or --log, not both")
    if args.slices is not None and args.discipline != "rr":
        raise _UsageError("argument --slices: applies to --discipline rr only")
    if args.admission is not None and args.discipline != "rr":
        raise _UsageError("argument --admission: applies to --discipline rr only")
    if args.slice_delay is not None and args.discipline != "rr":
        raise _UsageError("argument --slice-delay: applies to --discipline rr only")
    if args.discipline in ("ps", "rr") and args.family in _SLOW_FAMILIES and args.slices != 1 \
            and sys.stderr.isatty():
        # Not an error: tell a person at a terminal why it is quiet, and how to get a fast answer.
        print(f"capacity fit: note: {args.discipline} with {args.family} CPU time takes 10 s to 2 min to fit; "
              "--discipline fcfs or --family exponential is fast", file=sys.stderr)
    with warnings.catch_warnings(record=True):
        # The fits record their caveats in warnings_; they are printed below as plain lines.
        warnings.simplefilter("always")
        if args.log is None:
            res, fit, source, notes = _fit_percentiles(args)
        else:
            res, fit, source, notes = _fit_log(args)

    params = {}
    for name, row in fit.summary.iterrows():
        params[name] = {"estimate": float(row["estimate"]), "lower": float(row["lower"]),
                        "upper": float(row["upper"]), "unit": row["unit"], "note": row["note"]}
    if isinstance(fit.delay_, Service):
        delay = {"kind": "lognormal", "mean_s": float(fit.delay_.mean), "scv": float(fit.delay_.scv)}
    elif fit.delay_ is not None:
        delay = {"kind": "constant" if args.delay == "constant" else "fixed", "seconds": float(fit.delay_)}
    else:
        delay = None
    comparison = [{"arrival_rate": float(r["arrival_rate"]), "q": _q(r["q"]), "observed_s": float(r["observed"]),
                   "model_s": float(r["model"]), "rel_error": float(r["rel_error"])}
                  for _, r in fit.comparison_.iterrows()]
    ceiling = None
    ceiling_note = None
    if args.slo is not None:
        try:
            c = fit.ceiling(args.slo)
        except NotImplementedError as exc:
            ceiling_note = f"no QPS ceiling: {_one_line(exc)}"
        else:
            ceiling = {"slo": {_q(q): t for q, t in args.slo.items()}, "qps": float(c.qps),
                       "capacity_qps": float(c.capacity_qps), "utilization": float(c.qps / c.capacity_qps),
                       "binding": _q(c.binding)}
    warn_lines = notes + list(res.warnings_)
    if ceiling_note:
        warn_lines.append(ceiling_note)
    data = {"command": "fit", "source": source, "model": fit.model, "discipline": args.discipline,
            "family": args.family, "servers": args.servers,
            "slices": None if fit.slices_ is None else int(fit.slices_),
            "admission": fit.admission_, "slice_delay_s": fit.slice_delay_,
            "cpu_per_request_s": float(fit.cpu_per_request_),
            "cpu_per_request_interval_s": [params["cpu_per_request"]["lower"], params["cpu_per_request"]["upper"]],
            "scv": float(fit.scv_), "delay": delay, "capacity_qps": float(fit.capacity_qps_),
            "confidence": fit.confidence_level, "parameters": params, "comparison": comparison,
            "fit_quality": {k: float(v) for k, v in fit.fit_quality_.items()}, "ceiling": ceiling,
            "warnings": warn_lines}

    level = f"{100 * fit.confidence_level:g}%"
    if source["kind"] == "percentiles":
        head = f"at {args.qps:g} QPS"
    else:
        head = (f"from {args.log} ({source['requests']} requests, {source['load_bins']} load bins, "
                f"{source['latency']})")
    lines = [f"Fit: {fit.model}; {head}, {args.servers} server{'s' if args.servers != 1 else ''}", "",
             f"{'parameter':<20}{'estimate':>12}  {level + ' interval':<24}note"]
    labels = {"cpu_per_request": "CPU per request", "capacity_qps": "capacity (100% CPU)"}
    for name, p in params.items():
        def show(v, unit=p["unit"]):
            if unit == "s":
                return _ms(v)
            return f"{v:.4g} QPS" if unit == "req/s" else f"{v:.4g}"
        have = math.isfinite(p["lower"]) and math.isfinite(p["upper"])
        interval = f"[{show(p['lower'])}, {show(p['upper'])}]" if have else "-"
        lines.append(f"{labels.get(name, name):<20}{show(p['estimate']):>12}  {interval:<24}{p['note']}")
    if source["kind"] == "percentiles" and args.requests is None:
        lines.append("(no intervals: give --requests N, the requests behind the percentiles)")
    lines += ["", "observed vs model", f"{'QPS':>10}{'percentile':>12}{'observed':>11}{'model':>11}{'error':>9}"]
    for r in comparison:
        lines.append(f"{r['arrival_rate']:>10.4g}{r['q']:>12}{_ms(r['observed_s']):>11}{_ms(r['model_s']):>11}"
                     f"{100 * r['rel_error']:>+8.1f}%")
    quality = fit.fit_quality_
    lines.append(f"RMS relative error {100 * float(quality['rms_rel_error']):.1f}%, "
                 f"busiest observation at utilisation {float(quality['max_utilization']):.2f}")
    if ceiling is not None:
        slo_text = ", ".join(f"{q} <= {_ms(t)}" for q, t in ceiling["slo"].items())
        lines += ["", f"QPS ceiling for {slo_text}: {ceiling['qps']:.4g} QPS "
                      f"({100 * ceiling['utilization']:.0f}% of the {ceiling['capacity_qps']:.4g} QPS capacity; "
                      f"binds: {ceiling['binding']})"]
    if warn_lines:
        lines += ["", "warnings:"] + [f"  - {w}" for w in warn_lines]
    return data, "\n".join(lines)


_COMMANDS = {"ceiling": _cmd_ceiling, "servers": _cmd_servers, "timeout": _cmd_timeout,
             "scaling": _cmd_scaling, "gc": _cmd_gc, "fit": _cmd_fit}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in (None, "example"):
        cpu_ms = getattr(args, "cpu_ms", 25.0)
        p99_ms = getattr(args, "p99_ms", 1000.0)
        print(_example(cpu_ms, p99_ms))
        return 0
    prog = f"capacity {args.command}"
    try:
        data, text = _COMMANDS[args.command](args)
    except _UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        # Library errors name the parameter; keep them to one line for the terminal.
        print(f"{prog}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except NotImplementedError as exc:
        print(f"{prog}: error: not supported: {' '.join(str(exc).split())} "
              "(try --family exponential, --discipline fcfs or --servers 1)", file=sys.stderr)
        return 2
    print(json.dumps(_jsonable(data), indent=2) if args.json else text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
