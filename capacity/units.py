"""Reading and writing quantities with their units: the one parser the CLI and the notebooks share.

The API works in seconds and requests per second; people type ``25ms``, ``1.5s``, ``300qps``,
``55%`` and ``p99.9=2s``.  Each ``parse_*`` function turns such text into the API's unit and
raises ``ValueError`` with a message that says what was expected (the CLI reports it in one line
and exits with status 2); each ``format_*`` function writes a value the way people read it.

Conventions, one per kind of text:

=================  ==================================================  =============================
kind               accepted                                            value
=================  ==================================================  =============================
time               ``250us``, ``25ms``, ``1.5s``, ``2min``, ``1h``;     seconds
                   a bare number is seconds (the API's unit)
rate               ``120``, ``120qps``, ``120rps``, ``120/s``           requests per second
share              ``0.1%``, ``55%``, ``0.55``                          a fraction
percentile         ``p50``, ``p99``, ``p99.9`` (or ``0.999``)           the quantile, exactly
                   ``p999`` is refused as ambiguous (p99.9 or nonsense)
memory             ``300MB``, ``2GiB``, ``8GB``, a bare number of bytes  bytes
=================  ==================================================  =============================

Percentiles are read with :class:`decimal.Decimal`, so ``p99.9`` is exactly ``0.999`` (the float
``99.9 / 100`` is ``0.9990000000000001``, which would miss a dict lookup and print as p99.90000001).
"""
from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

__all__ = [
    "format_quantile",
    "format_rate",
    "format_time",
    "parse_memory",
    "parse_percentiles",
    "parse_quantile",
    "parse_rate",
    "parse_relative_change",
    "parse_share",
    "parse_slo",
    "parse_time",
]

_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_TIME_UNITS = {"": 1.0, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0,
               "h": 3600.0}
_MEMORY_UNITS = {"": 1.0, "b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "k": 1e3, "m": 1e6, "g": 1e9,
                 "kib": 2.0 ** 10, "mib": 2.0 ** 20, "gib": 2.0 ** 30, "tib": 2.0 ** 40}


# ---------------------------------------------------------------------------------------------
# Parsing


def parse_time(text: str, *, allow_zero: bool = False) -> float:
    """A time with its unit (``25ms``, ``1.5s``, ``250us``, ``2min``), in seconds.

    >>> parse_time("25ms"), parse_time("2min"), parse_time("0.5")
    (0.025, 120.0, 0.5)
    """
    m = re.fullmatch(rf"\s*({_NUMBER})\s*([a-zµ]*)\s*", str(text))
    if not m or m.group(2) not in _TIME_UNITS:
        raise ValueError(f"expected a time like 25ms, 1.5s or 250us, got {text!r}")
    value = float(m.group(1)) * _TIME_UNITS[m.group(2)]
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"expected a {'non-negative' if allow_zero else 'positive'} time, got {text!r}")
    return value


def parse_rate(text: str) -> float:
    """A positive request rate (``120``, ``120qps``, ``120rps``, ``120/s``), requests per second.

    >>> parse_rate("7.5qps")
    7.5
    """
    m = re.fullmatch(rf"\s*({_NUMBER})\s*(qps|rps|/s|req/s)?\s*", str(text), flags=re.IGNORECASE)
    if not m or not (float(m.group(1)) > 0 and math.isfinite(float(m.group(1)))):
        raise ValueError(f"expected a positive rate like 120 or 120qps, got {text!r}")
    return float(m.group(1))


def _fraction(text: str, what: str) -> float:
    t = str(text).strip()
    try:
        return float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise ValueError(f"expected {what}, got {text!r}") from None


def parse_share(text: str, *, allow_one: bool = False) -> float:
    """A share such as ``0.1%``, ``55%`` or ``0.55``, as a fraction strictly inside (0, 1)
    (or in (0, 1] with ``allow_one``: a CPU utilisation may be 100 %).

    >>> parse_share("0.1%"), parse_share("55%")
    (0.001, 0.55)
    """
    value = _fraction(text, "a share like 0.001, 0.1% or 55%")
    if not (0 < value < 1 or (allow_one and value == 1)):
        bound = "in (0, 100%]" if allow_one else "strictly between 0 and 1"
        raise ValueError(f"expected a share {bound}, got {text!r}")
    return value


def parse_relative_change(text: str) -> float:
    """A relative change such as ``10%``, ``-5%`` or ``0.1``, as a fraction above -1.

    >>> parse_relative_change("+10%")
    0.1
    """
    value = _fraction(text, "a relative change like 0.1 or 10%")
    if not (math.isfinite(value) and value > -1):
        raise ValueError(f"expected a relative change above -100%, got {text!r}")
    return value


def parse_memory(text: str) -> float:
    """A memory size (``300MB``, ``2GiB``, ``8GB``; a bare number is bytes), in bytes.

    >>> parse_memory("2GiB")
    2147483648.0
    """
    m = re.fullmatch(rf"\s*({_NUMBER})\s*([a-zA-Z]*)\s*", str(text))
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _MEMORY_UNITS or not float(m.group(1)) > 0:
        raise ValueError(f"expected a memory size like 300MB, 2GiB or 8GB, got {text!r}")
    return float(m.group(1)) * _MEMORY_UNITS[unit]


def parse_quantile(name: str) -> float:
    """A percentile's name (``p50``, ``p99.9``) or a quantile (``0.999``), as the exact quantile.

    ``p999`` is refused: some dashboards mean p99.9 by it, and as written it is 999 %.

    >>> parse_quantile("p99.9"), parse_quantile("P50"), parse_quantile("0.99")
    (0.999, 0.5, 0.99)
    """
    text = str(name).strip().lower()
    m = re.fullmatch(r"p(\d+)", text)
    if m and len(m.group(1)) > 2 and int(m.group(1)) != 100:
        raise ValueError(f"ambiguous percentile {name!r}: write it with a decimal point, e.g. p99.9")
    m = re.fullmatch(r"p(\d+(?:\.\d+)?)", text)
    try:
        # Decimal keeps p99.9 -> 0.999 exact (99.9 / 100 in binary is 0.9990000000000001).
        value = float(Decimal(m.group(1)) / 100) if m else float(text)
    except (ValueError, InvalidOperation):
        value = math.nan
    if not 0 < value < 1:
        raise ValueError(f"expected a percentile like p50, p99 or p99.9 (strictly between p0 and p100), "
                         f"got {name!r}")
    return value


def _pairs(text: str, example: str) -> list[tuple[str, str]]:
    pairs = []
    for part in str(text).split(","):
        if "=" not in part:
            raise ValueError(f"expected percentile=time pairs like {example}, got {part.strip()!r}")
        name, value = (x.strip() for x in part.split("=", 1))
        pairs.append((name, value))
    return pairs


def parse_slo(text: str) -> dict[float, float]:
    """A latency objective ``p99=500ms,p99.9=2s`` as ``{quantile: seconds}``.

    >>> parse_slo("p99=500ms,p99.9=2s")
    {0.99: 0.5, 0.999: 2.0}
    """
    return {parse_quantile(name): parse_time(value) for name, value in _pairs(text, "p99=500ms,p99.9=2s")}


def parse_percentiles(text: str) -> dict[float, float]:
    """Measured percentiles ``p50=45ms,p99=300ms`` as ``{quantile: seconds}``, sorted by quantile.

    A percentile given twice, or a time that falls as the percentile rises, is refused (a
    dashboard that shows that has mixed up two series).

    >>> parse_percentiles("p99.9=900ms, p50=45ms")
    {0.5: 0.045, 0.999: 0.9}
    """
    out: dict[float, float] = {}
    for name, value in _pairs(text, "p50=45ms,p99=300ms"):
        q = parse_quantile(name)
        if q in out:
            raise ValueError(f"percentile {name!r} given twice")
        out[q] = parse_time(value)
    out = dict(sorted(out.items()))
    items = list(out.items())
    for (q1, t1), (q2, t2) in zip(items, items[1:]):
        if t2 < t1:
            raise ValueError(f"latencies must not decrease as the percentile rises, got "
                             f"{format_quantile(q1)}={_compact_time(t1)} but {format_quantile(q2)}={_compact_time(t2)}")
    return out


# ---------------------------------------------------------------------------------------------
# Formatting (display only: the API stays in seconds)


def format_time(seconds: float) -> str:
    """A time in the unit people read it in: ``'25 ms'``, ``'1.5 s'``, ``'250 us'``.

    >>> format_time(0.025), format_time(1.5), format_time(float("inf"))
    ('25 ms', '1.5 s', 'unbounded')
    """
    seconds = float(seconds)
    if not math.isfinite(seconds):
        return "unbounded"
    if seconds >= 1.0:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


def _compact_time(seconds: float) -> str:
    """As it would be typed back: ``45ms``, ``2s``."""
    return f"{seconds * 1e3:g}ms" if seconds < 1 else f"{seconds:g}s"


def format_quantile(q: float) -> str:
    """A quantile as a percentile's name: 0.99 -> ``'p99'``, 0.999 -> ``'p99.9'``.

    >>> format_quantile(0.999)
    'p99.9'
    """
    return "p" + f"{100 * float(q):.6f}".rstrip("0").rstrip(".")


def format_rate(qps: float) -> str:
    """A request rate as people say it: ``'26.37 QPS'``, ``'12,500 QPS'``.

    >>> format_rate(26.3712), format_rate(12500)
    ('26.37 QPS', '12,500 QPS')
    """
    qps = float(qps)
    return f"{qps:,.4g} QPS" if qps < 1e4 else f"{qps:,.0f} QPS"
