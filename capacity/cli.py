"""The ``capacity`` command line.

``capacity --version`` prints the version; ``capacity example`` prints the
worked example from the README (the QPS at which a 25 ms-per-request Node.js
process crosses a 1 s p99).  Planning subcommands join later.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

import numpy as np

from ._version import __version__

EXAMPLE_HELP = """\
example:
  capacity example                  # 25 ms of CPU per request, p99 <= 1 s
  capacity example --cpu-ms 40 --p99-ms 500
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


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="capacity",
        description="How much traffic can this service take? Queueing models for backend capacity planning.",
        epilog=EXAMPLE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"capacity {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    ex = sub.add_parser("example", help="print the worked example from the README",
                        epilog=EXAMPLE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    ex.add_argument("--cpu-ms", type=_positive, default=25.0, help="CPU milliseconds per request (default 25)")
    ex.add_argument("--p99-ms", type=_positive, default=1000.0, help="p99 latency objective in ms (default 1000)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in (None, "example"):
        cpu_ms = getattr(args, "cpu_ms", 25.0)
        p99_ms = getattr(args, "p99_ms", 1000.0)
        print(_example(cpu_ms, p99_ms))
        return 0
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover - argparse rejects first
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
