"""Pieces every subcommand shares: the service from the flags, the usage error, JSON and formatting."""
from __future__ import annotations

import argparse
import textwrap
from typing import Any

import numpy as np

from .. import units
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
