"""capacity: how much traffic can this service take before it falls over?

Queueing models of a backend service, in seconds and requests per second:

- :class:`Service` -- CPU time per request as a distribution;
- :mod:`capacity.erlang` -- Erlang B and C, square-root staffing;
- :mod:`capacity.fcfs` -- first-come-first-served queues (exact M/G/1 and M/M/c);
- :mod:`capacity.ps` -- processor sharing, the ideal of an event loop serving requests;
- :mod:`capacity.rr` -- the event loop as it schedules: round robin over the slices between awaits;
- :mod:`capacity.closed` -- Mean Value Analysis for closed-loop load tests;
- :mod:`capacity.symbolic` -- the key formulas as sympy expressions;
- :mod:`capacity.sim` -- an exact simulator that checks them and shows overload;
- :mod:`capacity.overload` -- bursts, timeouts, retries: the collapse and its mitigations;
- :mod:`capacity.incident` -- the seed incident: its traffic reconstructed, replayed, and fixes compared;
- :mod:`capacity.fit` -- per-request CPU cost from percentiles, logs, utilisation and load tests;
- :mod:`capacity.logs` -- nginx and per-request log readers;
- :mod:`capacity.plan` -- QPS ceiling, servers needed, timeout-safe rates;
- :mod:`capacity.units` -- ``25ms``, ``300qps``, ``p99.9=2s`` read into seconds and requests/s, and written back.

``fcfs`` and ``ps`` offer the same functions (``mean_response``,
``response_quantile``, ``response_sf``, ...), so they are used through their
module: ``capacity.ps.response_quantile(0.99, arrival_rate, service)``.
"""
import importlib
from typing import Any

from . import closed, erlang, fcfs, ps, rr
from ._version import __version__
from .closed import mva
from .distributions import Service
from .erlang import erlang_b, erlang_c, sqrt_staffing

# Heavier modules (sympy, pandas-based simulation, fitting, planning) load on
# first use, so `capacity --version` and the formulas start quickly.
_LAZY_MODULES = {"fit", "incident", "logs", "overload", "plan", "sim", "symbolic", "units"}


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name == "simulate":
        return importlib.import_module(".sim", __name__).simulate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)

__all__ = [
    "Service",
    "__version__",
    "closed",
    "erlang",
    "erlang_b",
    "erlang_c",
    "fcfs",
    "fit",
    "incident",
    "logs",
    "mva",
    "overload",
    "plan",
    "ps",
    "rr",
    "sim",
    "simulate",
    "sqrt_staffing",
    "symbolic",
    "units",
]
