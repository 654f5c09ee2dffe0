"""Capacity planning: solve a queueing model for the argument you do not know.

A forward model answers "at this load, with these cores, what is the p99?".
Planning asks the inverse questions:

===========================  ===============================================  ===========================
function                     question                                         answer
===========================  ===============================================  ===========================
:func:`qps_ceiling`          how much QPS before a latency SLO breaks?        arrival rate
:func:`servers_needed`       how many cores / worker processes for a load?    servers (integer)
:func:`timeout_safe_rate`    how much QPS before too many requests time out?  arrival rate (+ burst length)
:func:`burst_tolerance`      how long may a burst above capacity last?        seconds
:func:`latency_curve`        p50/p99/p99.9 against QPS (cached, rescaled)     a curve
:func:`ceiling_from_curve`   the ceiling read off such a curve (fast)         arrival rate
:func:`recommend_timeout`    which client timeout should callers set?         a rule of thumb
:func:`compare_scaling`      one big machine (Node cluster) or many small?    a table of options
:func:`rate_limits`          which per-machine and cluster rate limits?       two limits + their effect
:func:`gc_whatif`            is GC tuning worth it?                           ceiling and p99, before/after
===========================  ===============================================  ===========================

Every SLO "the ``q`` quantile of the response time is at most ``t``" is the
same statement as "at most a fraction ``1 - q`` of requests take longer than
``t``", i.e. ``P(T > t) <= 1 - q``.  The planners work on that tail
probability, so one call of the forward model's ``response_sf`` (or
``wait_sf``) per solver iteration evaluates every SLO percentile at every
configuration at once; no quantile has to be solved inside the solver.
``P(T > t)`` rises with the arrival rate and falls with the number of
servers, so the rate is found by one bracketing root finder (in the
utilisation, which lives in (0, 1)) and the server count by a vectorised
integer search.  Closed forms are used where they exist (M/M/1 FCFS).

Each planner returns a small result object with the number, the constraint
that binds, and a one-paragraph plain-text ``explanation``.

The package is split by idea: :mod:`capacity.plan.timeouts` (the solver and the
single-queue planners), :mod:`capacity.plan.scaling` (dispatch models and
:func:`compare_scaling`), :mod:`capacity.plan.limits` (:func:`rate_limits`),
:mod:`capacity.plan.curves` (cached latency curves and the fast ``method="curve"`` path)
and :mod:`capacity.plan.gc` (:func:`gc_whatif`); everything public is
importable from ``capacity.plan``.
"""
from __future__ import annotations

from .timeouts import (
                    CORE_P999_MULTIPLIER,
                    NONCORE_P999_MULTIPLIER,
                    Ceiling,
                    ServersNeeded,
                    TimeoutAdvice,
                    TimeoutSafeRate,
                    _fmt_q,
                    _fmt_rate,
                    _fmt_time,
                    _max_rates,
                    _parse_slo,
                    _smallest_integer,
                    _tail_function,
                    burst_tolerance,
                    qps_ceiling,
                    recommend_timeout,
                    servers_needed,
                    timeout_safe_rate,
)
from .curves import DEFAULT_UTILIZATION, LatencyCurve, ceiling_from_curve, latency_curve
from .gc import GCWhatIf, gc_whatif
from .limits import RateLimits, rate_limits
from .scaling import DISPATCHES, ScalingComparison, ScalingOption, compare_scaling, dispatch_response

__all__ = [
    "CORE_P999_MULTIPLIER",
    "DEFAULT_UTILIZATION",
    "NONCORE_P999_MULTIPLIER",
    "Ceiling",
    "DISPATCHES",
    "GCWhatIf",
    "LatencyCurve",
    "RateLimits",
    "ScalingComparison",
    "ScalingOption",
    "ServersNeeded",
    "TimeoutAdvice",
    "TimeoutSafeRate",
    "burst_tolerance",
    "ceiling_from_curve",
    "compare_scaling",
    "dispatch_response",
    "gc_whatif",
    "latency_curve",
    "qps_ceiling",
    "rate_limits",
    "recommend_timeout",
    "servers_needed",
    "timeout_safe_rate",
]
