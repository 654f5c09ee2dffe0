"""The ``logs`` subcommand: ``capacity logs convert LOG... --out FILE.parquet`` parses a log once into Parquet."""
from __future__ import annotations

import argparse
import warnings

from ._common import _one_line, _UsageError


def _cmd_logs(args: argparse.Namespace):
    """Run ``logs convert``; returns (data for --json, text)."""
    from .. import logs

    if args.logs_command != "convert":
        raise _UsageError("a subcommand is required: capacity logs convert LOG... --out FILE.parquet")
    if args.window is not None and not args.aggregate:
        raise _UsageError("argument --window: applies with --aggregate only")
    if args.log_format is not None and args.format not in (None, "nginx"):
        raise _UsageError("argument --log-format: applies to nginx logs only")
    if not str(args.out).lower().endswith((".parquet", ".pq", ".parq")):
        raise _UsageError(f"argument --out: {args.out!r} should end in .parquet (it is written as Parquet)")
    if args.scheduler is not None and not args.aggregate:
        raise _UsageError("argument --scheduler: applies with --aggregate only (requests are written here)")
    source = args.log[0] if len(args.log) == 1 else list(args.log)
    client = _connect(args.scheduler) if args.scheduler is not None else None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = logs.convert(source, args.out, aggregate=args.aggregate, window=args.window or 60.0,
                                  log_format=args.log_format or logs.COMBINED_WITH_TIMES, format=args.format,
                                  timing=args.timing, client=client,
                                  **({} if args.duration_unit is None else {"duration_unit": args.duration_unit}))
    except (OSError, ValueError, ImportError, UnicodeError) as exc:
        reason = exc.strerror + f": {exc.filename}" if isinstance(exc, OSError) and exc.strerror else _one_line(exc)
        raise _UsageError(f"argument LOG: cannot convert {' '.join(args.log)}: {reason}") from None
    except Exception as exc:   # the cluster's own failures (a lost worker, ...): one line, not a traceback
        if client is None:
            raise
        raise _UsageError(f"argument --scheduler: the Dask cluster failed: {type(exc).__name__}: "
                          f"{_one_line(exc)}") from None
    finally:
        if client is not None:
            client.close()
    notes = [_one_line(w.message) for w in caught if issubclass(w.category, UserWarning)]
    what = "per-window aggregates" if args.aggregate else "requests"
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(report["skipped_by_kind"].items())) or "none"
    lines = [f"wrote {report['rows']:,} rows of {what} to {report['out']}",
             f"read {report['lines']:,} lines from {report['source']}; skipped {report['skipped']:,} ({kinds})"]
    if report["undecodable"]:
        lines.append(f"{report['undecodable']:,} lines held bytes that are not valid UTF-8 (decoded with replacement)")
    lines += [f"warning: {n}" for n in notes]
    return dict(report, notes=notes), "\n".join(lines)


def _connect(address: str):
    """A Dask client of the scheduler at ``address``; a missing package or an unreachable scheduler is a
    usage error (one line, no traceback)."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise _UsageError("argument --scheduler: needs the optional package dask[distributed] "
                          "(`pip install 'capacity[dask]'`)") from None
    try:
        return Client(address, timeout="10s")
    except (OSError, ValueError, TimeoutError) as exc:
        raise _UsageError(f"argument --scheduler: cannot reach the Dask scheduler at {address!r}: "
                          f"{_one_line(exc)}") from None
