"""The ``capacity`` command line.

``capacity --version`` prints the version; ``capacity example`` prints the
worked example from the README (the QPS at which a 25 ms-per-request Node.js
process crosses a 1 s p99).  The planning subcommands ``ceiling``,
``servers``, ``timeout``, ``scaling``, ``gc``, ``threads``, ``handoff`` and ``steal`` are thin front ends to :mod:`capacity.plan`:
each prints a table and a paragraph of explanation, or JSON with ``--json``.  ``fit`` fits the
CPU time per request to observed latency percentiles (:func:`capacity.fit.from_percentiles`) or to
an access log (:func:`capacity.fit.from_requests`).  ``logs convert`` parses request logs once into
Parquet (:func:`capacity.logs.convert`); ``fleet`` fits many services at once and reports each one's
ceiling and headroom in one table (:func:`capacity.fit.fleet`).  ``warmup`` and ``deploy`` plan
the traffic ramp of a fresh process and the capacity of a rolling deploy (:func:`capacity.plan.ramp_needed`,
:func:`capacity.plan.rolling_deploy`).

Times take units (``250us``, ``25ms``, ``1.5s``, ``2min``; a bare number is
seconds), rates take ``qps`` or a bare number (:mod:`capacity.units` reads them).  Bad input
exits with status 2 and a one-line message naming the flag; output piped into ``head`` that
closes early ends quietly.  The pieces: ``_parser`` (the flags), ``_types`` (their values),
``_plan_commands`` and ``_fit_command`` (what each subcommand does), ``_help`` (texts and the
worked example).
"""
from __future__ import annotations

import json
import os
import sys
from typing import Sequence

from ._cache_commands import _cmd_cache, _cmd_endpoints
from ._deploy_commands import _cmd_deploy, _cmd_warmup
from ._common import _jsonable, _UsageError
from ._fit_command import _cmd_fit
from ._fleet_command import _cmd_fleet
from ._help import _example
from ._logs_command import _cmd_logs
from ._parser import build_parser
from ._plan_commands import (_cmd_ceiling, _cmd_gc, _cmd_handoff, _cmd_jvm_gc, _cmd_pool, _cmd_scaling, _cmd_servers,
                             _cmd_steal, _cmd_threads, _cmd_timeout)
# The argument types stay importable from here (tests call them directly).
from ._types import (_fmt_pct, _fraction, _memory, _option, _percentiles, _rates,  # noqa: F401
                     _signed_fraction, _slo, _time)

__all__ = ["build_parser", "main"]

_COMMANDS = {"ceiling": _cmd_ceiling, "servers": _cmd_servers, "timeout": _cmd_timeout,
             "scaling": _cmd_scaling, "gc": _cmd_gc, "jvm-gc": _cmd_jvm_gc, "threads": _cmd_threads, "pool": _cmd_pool, "handoff": _cmd_handoff,
             "steal": _cmd_steal, "cache": _cmd_cache, "endpoints": _cmd_endpoints, "fit": _cmd_fit, "fleet": _cmd_fleet,
             "logs": _cmd_logs, "warmup": _cmd_warmup, "deploy": _cmd_deploy}


def _run(args) -> int:
    """Run the parsed command; every error the user can cause is one line and status 2."""
    if args.command in (None, "example"):
        print(_example(getattr(args, "cpu_ms", 25.0), getattr(args, "p99_ms", 1000.0)))
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
    sys.stdout.flush()   # a closed pipe shows here, inside main's guard
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, return the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except BrokenPipeError:
        # `capacity ... | head -3`: the reader has what it wanted.  Point stdout at devnull so
        # the interpreter's final flush does not raise again, and end quietly (Python docs,
        # "Note on SIGPIPE").
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
