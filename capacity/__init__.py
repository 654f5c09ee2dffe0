"""capacity: how much traffic can this service take before it falls over?

Queueing models of a backend service, in seconds and requests per second:

- :class:`Service` -- CPU time per request as a distribution;
- :mod:`capacity.erlang` -- Erlang B and C, square-root staffing;
- :mod:`capacity.fcfs` -- first-come-first-served queues (exact M/G/1 and M/M/c);
- :mod:`capacity.ps` -- processor sharing, how an event loop serves requests;
- :mod:`capacity.closed` -- Mean Value Analysis for closed-loop load tests;
- :mod:`capacity.symbolic` -- the key formulas as sympy expressions;
- :mod:`capacity.sim` -- an exact simulator that checks them.

``fcfs`` and ``ps`` offer the same functions (``mean_response``,
``response_quantile``, ``response_sf``, ...), so they are used through their
module: ``capacity.ps.response_quantile(0.99, arrival_rate, service)``.
"""
from . import closed, erlang, fcfs, ps, sim, symbolic
from ._version import __version__
from .closed import mva
from .distributions import Service
from .erlang import erlang_b, erlang_c, sqrt_staffing
from .sim import simulate

__all__ = [
    "Service",
    "__version__",
    "closed",
    "erlang",
    "erlang_b",
    "erlang_c",
    "fcfs",
    "mva",
    "ps",
    "sim",
    "simulate",
    "sqrt_staffing",
    "symbolic",
]
