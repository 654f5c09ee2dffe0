"""How much of a run to keep: the per-request table or a summary, under a memory ceiling.

A run of ``n`` requests (``n (1 + retries)`` rows at most) needs, at its peak, about
:data:`_FIXED_BYTES` ``+ rows x`` :data:`_PEAK_BYTES_PER_ROW` bytes: the engines' working arrays, then either the
per-request table and the temporaries of its statistics (``keep="requests"``) or the
temporaries of the one pass that summarises it (``keep="summary"``).  The figures were
measured with ``benchmarks/bench_sim_memory.py`` (peak resident memory above the imports, at
1e6 and 1e7 requests, rounded up): with the default 1 GB a run keeps its table up to
about 3.4 million rows, a summary up to about 12.8 million rows from the vectorised engines
and 7.8 million from the event engines (drop, deadline, adaptive LIFO, least connections,
retries, ``progress``); beyond, it is refused with the figures.  :func:`_storage` picks what
to keep from the user's ``keep`` and ``max_memory`` and refuses a run that cannot fit.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..units import parse_memory

#: What :func:`~capacity.sim.simulate` keeps of a run.
KEEP = ("auto", "requests", "summary")

#: The default ceiling, bytes (1 GB: the package's bound for any public call).
DEFAULT_MAX_MEMORY = 1e9

#: Peak bytes per row, by (what is kept, engine): the vectorised one-queue engines
#: ("static") or the event engines writing a book of records ("events").  Measured at 1e7
#: requests (``benchmarks/bench_sim_memory.py``): 270-280 bytes a row with the table and its
#: statistics, 65-67 for a summary of the static engines, 112 for the event engines.
_PEAK_BYTES_PER_ROW = {
    ("requests", "static"): 290,
    ("requests", "events"): 300,
    ("summary", "static"): 70,
    ("summary", "events"): 115,
}
#: Bytes that do not grow with the run: blocks of the summary pass, its histograms.
_FIXED_BYTES = {"requests": 20e6, "summary": 100e6}


def _small_int(largest: int) -> np.dtype:
    """The smallest signed integer dtype holding ``0 .. largest``."""
    for dtype in (np.int8, np.int16, np.int32):
        if largest <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def check_max_memory(value: Any) -> float:
    """``max_memory`` in bytes: a positive number of bytes, or text with a unit (``"1GB"``,
    ``"512MiB"``; see :func:`capacity.units.parse_memory`)."""
    if isinstance(value, str):
        try:
            return parse_memory(value)
        except ValueError as err:
            raise ValueError(f"max_memory: {err}") from None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"max_memory must be a number of bytes or a size like '1GB' or '512MiB', "
                         f"got {value!r}")
    if not (value > 0) or math.isnan(value):
        raise ValueError(f"max_memory must be positive (bytes), got {value!r}")
    return float(value)


def _peak_bytes(rows: int, keep: str, static: bool) -> float:
    return _FIXED_BYTES[keep] + rows * _PEAK_BYTES_PER_ROW[(keep, "static" if static else "events")]


def _storage(opts: Any, n: int, static: bool) -> str:
    """``"requests"`` or ``"summary"`` for a run of ``n`` original requests; a ``ValueError``
    naming ``max_memory`` if even the summary would not fit."""
    retries = opts.retries if opts.timeout is not None else 0
    rows = n * (1 + retries)  # every retry a row: the most the run can have
    ceiling = opts.max_memory
    keep = opts.keep
    if keep == "auto":
        keep = "requests" if _peak_bytes(rows, "requests", static) <= ceiling else "summary"
    need = _peak_bytes(rows, keep, static)
    if need > ceiling:
        hint = ("keep='summary' (statistics without the rows) or a larger max_memory"
                if keep == "requests" else "a larger max_memory, or a shorter horizon")
        raise ValueError(f"max_memory={ceiling:.4g} bytes is too small for keep={keep!r}: {rows:,} rows "
                         f"({n:,} requests{f' with up to {retries} retries each' if retries else ''}) need "
                         f"about {need / 1e6:,.0f} MB; use {hint}")
    return keep
