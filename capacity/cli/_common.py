"""Pieces every subcommand shares: the service from the flags, the usage error, JSON and formatting."""
from __future__ import annotations

import argparse
import textwrap

from .. import units
from .._result import jsonable as _jsonable  # noqa: F401  (what --json prints, as results do)
from ..distributions import Service


class _UsageError(Exception):
    """Bad input found after parsing; reported in one line, exit status 2."""


def _service(args: argparse.Namespace) -> Service:
    """The CPU time per request from --cpu, --scv and --family, by :meth:`Service.from_moments`
    (the one rule the package uses: without --family, scv 0 is deterministic, below 1 gamma,
    1 exponential, above 1 lognormal)."""
    scv = args.scv if args.scv is not None else (0.0 if args.family == "deterministic" else 1.0)
    try:
        return Service.from_moments(args.cpu, scv, family=args.family)
    except ValueError as exc:
        raise _UsageError(f"argument --scv: {' '.join(str(exc).split())}") from None


def _ms(seconds: float) -> str:
    return units.format_time(float(seconds))


def _q(q: float) -> str:
    return units.format_quantile(float(q))


def _wrap(text: str) -> str:
    return "\n".join(textwrap.wrap(text, width=96))


def _service_text(args: argparse.Namespace, service) -> str:
    return f"{_ms(args.cpu)} CPU/request ({service.family}, scv {float(service.scv):.3g}), {args.discipline}"


def _service_json(args: argparse.Namespace, service) -> dict:
    return {"mean_s": args.cpu, "scv": float(service.scv), "family": service.family}


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _stderr_progress():
    """``progress(done, total)`` writing ``solving 2/4`` to a terminal's stderr (nothing when piped)."""
    import sys

    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        sys.stderr.write(f"\rsolving {done}/{total}" + ("\r" + " " * 16 + "\r" if done == total else ""))
        sys.stderr.flush()
    return show
