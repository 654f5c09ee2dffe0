"""Argument types of the command line: text with units to the API's seconds and requests/s.

Each type is :mod:`capacity.units` (the one parser the CLI and the notebooks share) with its
``ValueError`` turned into ``argparse.ArgumentTypeError``, which argparse reports in one line
naming the flag (``capacity ceiling: error: argument --cpu: expected a time like 25ms ...``).
The few kinds units does not cover (counts, costs, deployment options, fit choices) are here.
"""
from __future__ import annotations

import argparse
import math
import re
from typing import Callable

from .. import units


def _typed(parse: Callable[[str], object], name: str) -> Callable[[str], object]:
    """``parse`` with its ValueError as argparse's ArgumentTypeError; ``name`` shows in argparse's
    message when a type raises something else ("invalid <name> value")."""
    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = name
    return convert


_time = _typed(units.parse_time, "time")
_time_or_zero = _typed(lambda text: units.parse_time(text, allow_zero=True), "time")
_rate = _typed(units.parse_rate, "rate")
_fraction = _typed(units.parse_share, "share")
_util = _typed(lambda text: units.parse_share(text, allow_one=True), "CPU share")
_signed_fraction = _typed(units.parse_relative_change, "relative change")
_memory = _typed(units.parse_memory, "memory size")
_slo = _typed(units.parse_slo, "slo")
_percentiles = _typed(units.parse_percentiles, "percentiles")


def _steals(text: str) -> list[float]:
    """CPU steal shares, e.g. ``0,5%,10%``: each in [0, 1) (0 is the quiet host)."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if part.rstrip("%") in ("0", "0.0"):
            out.append(0.0)
            continue
        try:
            out.append(units.parse_share(part))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected steal shares like 0,5%,10%, got {text!r}") from None
    return out


def _rates(text: str) -> list[float]:
    return [_rate(part) for part in text.split(",")]


def _scv(text: str) -> float:
    """A squared coefficient of variation: a plain number >= 0 (it has no unit)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a squared coefficient of variation >= 0 (a plain number "
                                         f"such as 0.5 or 4), got {text!r}")
    return value


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
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


def _money(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a non-negative cost, got {text!r}")
    return value


_DISPATCH_ALIASES = {"rr": "round_robin", "round_robin": "round_robin", "lc": "least_connections",
                     "least_connections": "least_connections", "random": "random", "pooled": "pooled"}


def _option(text: str) -> dict:
    """A deployment ``MxP[xS][:dispatch]``: M machines x P processes x S cores per process."""
    m = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)(?:\s*x\s*(\d+))?\s*(?::\s*([a-z_]+))?\s*", text.lower())
    if not m or (m.group(4) and m.group(4) not in _DISPATCH_ALIASES) or int(m.group(1)) < 1 \
            or int(m.group(2)) < 1 or (m.group(3) and int(m.group(3)) < 1):
        raise argparse.ArgumentTypeError(f"expected MxP[xS][:rr|lc|random|pooled] like 4x8:lc, got {text!r}")
    return dict(machines=int(m.group(1)), processes=int(m.group(2)), servers=int(m.group(3) or 1),
                dispatch=_DISPATCH_ALIASES[m.group(4) or "rr"])


def _delay(text: str) -> str | float:
    if text.strip().lower() in ("constant", "lognormal"):
        return text.strip().lower()
    try:
        return units.parse_time(text, allow_zero=True)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected constant, lognormal or a time like 5ms, got {text!r}") \
            from None


def _slices(text: str) -> int | str:
    if text.strip().lower() == "fit":
        return "fit"
    try:
        return _count(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'fit', got {text!r}") from None


#: How the CLI writes a quantile as a percentile (tests build percentile text with it).
_fmt_pct = units.format_quantile
