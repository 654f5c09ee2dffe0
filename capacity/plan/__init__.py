"""Capacity planning: solve a queueing model for the argument you do not know.

A forward model answers "at this load, with these cores, what is the p99?".
Planning asks the inverse questions:

===========================  ===============================================  ===========================
function                     question                                         answer
===========================  ===============================================  ===========================
:func:`qps_ceiling`          how much QPS before a latency SLO breaks?        :class:`Ceiling`
:func:`servers_needed`       how many cores / worker processes for a load?    :class:`ServersNeeded`
:func:`timeout_safe_rate`    how much QPS before too many requests time out?  :class:`TimeoutSafeRate`
:func:`burst_tolerance`      how long may a burst above capacity last?        :class:`BurstTolerance`
:func:`response_curve`       p50/p99/p99.9 against QPS (cached, rescaled)     :class:`ResponseCurve`
:func:`ceiling_from_curve`   the ceiling read off such a curve (fast)         :class:`Ceiling`
:func:`recommend_timeout`    which client timeout should callers set?         :class:`TimeoutAdvice`
:func:`compare_scaling`      one big machine (Node cluster) or many small?    :class:`ScalingComparison`
:func:`rate_limits`          which per-machine and cluster rate limits?       :class:`RateLimits`
:func:`gc_whatif`            is GC tuning worth it?                           :class:`GCWhatIf`
:func:`jvm_gc_whatif`        the same from a JVM GC log (young pauses/min)    :class:`GCWhatIf`
:func:`thread_demand`        how many threads, blocking calls or NIO?         :class:`ThreadDemand`
:func:`cpu_load`             what load average at this CPU utilisation?       :class:`CpuLoad`
:func:`pool_size`            how many pool threads for a latency SLO?         :class:`ServersNeeded`
:func:`thread_pool`          which pool size, its threads sharing the cores?  :class:`ThreadPool`
:func:`handoff_cost`         does handing a task to a pool pay?               :class:`HandoffCost`
:func:`steal_whatif`         what does CPU steal cost; when to move host?     :class:`StealWhatIf`
:func:`cache_ceiling`        what ceiling does a cache hit ratio buy?         :class:`CacheCeiling`
:func:`cache_expiry`         does a mass key expiry tip the service over?     :class:`CacheExpiry`
:func:`cache_whatif`         what did a measured CPU drop after caching buy?  :class:`CacheWhatIf`
:func:`endpoint_mix`         per-endpoint latency; optimise or isolate which? :class:`EndpointMix`
:func:`warmup_transient`     a fresh process under load: p99 over time        :class:`WarmupTransient`
:func:`ramp_needed`          how long a traffic ramp after a deploy?          :class:`RampNeeded`
:func:`warmup_simulation`    the same transient simulated, with intervals     :class:`WarmupSimulation`
:func:`rolling_deploy`       capacity while k of N restart; the N it needs    :class:`RollingDeploy`
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

Every planner answers with a result (:class:`capacity._result.Result`): the number, the
constraint that binds, a one-paragraph ``explanation`` (``str(result)``), ``to_frame()`` and
``to_dict()``.  Questions of the same kind get the same kind of answer: every "how much QPS"
is a :class:`Ceiling`.

The package is split by idea, and its modules import in one direction
(``_solve``, ``_text`` <- ``curves`` <- ``ceiling`` <- ``timeouts`` <- ``limits``; ``servers``
<- ``scaling``; ``ceiling`` <- ``gc``; ``servers`` <- ``threads``; ``ceiling`` <- ``steal``; ``handoff``
on its own):

* :mod:`capacity.plan._solve` -- the one solver (SLO parsing, the forward model's tail, the rate
  and integer searches, the rr constant delay);
* :mod:`capacity.plan._text` -- the explanations;
* :mod:`capacity.plan.curves` -- cached response curves (:func:`response_curve`);
* :mod:`capacity.plan.ceiling` -- :func:`qps_ceiling`, :func:`ceiling_from_curve`;
* :mod:`capacity.plan.servers` -- :func:`servers_needed`;
* :mod:`capacity.plan.timeouts` -- :func:`timeout_safe_rate`, :func:`burst_tolerance`,
  :func:`recommend_timeout`;
* :mod:`capacity.plan.scaling` -- dispatch models, :func:`dispatch_response`, :func:`compare_scaling`;
* :mod:`capacity.plan.limits` -- :func:`rate_limits`;
* :mod:`capacity.plan.gc` -- :func:`gc_whatif`, :func:`jvm_gc_whatif` (a request's service under GC
  pauses in ``_gc_service``; ``_pause_clock`` <- ``_gc_service`` <- ``gc``);
* :mod:`capacity.plan.threads` -- :func:`thread_demand`, :func:`cpu_load`, :func:`pool_size`;
* :mod:`capacity.plan.pool_on_cores` -- :func:`thread_pool`;
* :mod:`capacity.plan.handoff` -- :func:`handoff_cost`;
* :mod:`capacity.plan.steal` -- :func:`steal_whatif`;
* :mod:`capacity.plan.cache` -- :func:`cache_service`, :func:`cache_ceiling`, :func:`cache_expiry`,
  :func:`cache_whatif` (``ceiling`` <- ``cache``);
* :mod:`capacity.plan.endpoints` -- :func:`endpoint_mix` (``ceiling`` <- ``endpoints``);
* :mod:`capacity.plan.warmup` -- :func:`warmup_transient`, :func:`ramp_needed` (the model in
  ``_warmup_model``, with the fluid processor sharing of ``_warmup_ps`` and the round robin of
  ``_warmup_rr``; the summary and explanations in ``_warmup_report``; ``curves``, ``ceiling`` <-
  ``_warmup_model`` <- ``_warmup_report`` <- ``warmup``);
* :mod:`capacity.plan.warmup_sim` -- :func:`warmup_simulation` (``warmup`` <- ``warmup_sim``);
* :mod:`capacity.plan.deploy` -- :func:`rolling_deploy` (``warmup`` <- ``deploy``).

Everything public is importable from ``capacity.plan``.
"""
from __future__ import annotations

from .._deprecation import module_getattr as _module_getattr

from .cache import CacheCeiling, CacheExpiry, CacheWhatIf, cache_ceiling, cache_expiry, cache_service, cache_whatif
from .ceiling import Ceiling, ceiling_from_curve, qps_ceiling
from .curves import DEFAULT_UTILIZATION, ResponseCurve, response_curve
from .deploy import RollingDeploy, rolling_deploy
from .endpoints import EndpointMix, endpoint_mix
from .gc import GCWhatIf, gc_whatif, jvm_gc_whatif
from .handoff import HandoffCost, handoff_cost
from .limits import RateLimits, rate_limits
from .scaling import DISPATCHES, ScalingComparison, ScalingOption, compare_scaling, dispatch_response
from .servers import ServersNeeded, servers_needed
from .steal import StealWhatIf, steal_whatif
from .pool_on_cores import ThreadPool, thread_pool
from .threads import CpuLoad, ThreadDemand, cpu_load, pool_size, thread_demand
from .timeouts import (
    CORE_P999_MULTIPLIER,
    NONCORE_P999_MULTIPLIER,
    BurstTolerance,
    TimeoutAdvice,
    TimeoutSafeRate,
    burst_tolerance,
    recommend_timeout,
    timeout_safe_rate,
)
from .warmup import RampNeeded, WarmupTransient, ramp_needed, warmup_transient
from .warmup_sim import WarmupSimulation, warmup_simulation

__all__ = [
    "CORE_P999_MULTIPLIER",
    "DEFAULT_UTILIZATION",
    "DISPATCHES",
    "NONCORE_P999_MULTIPLIER",
    "BurstTolerance",
    "Ceiling",
    "CpuLoad",
    "GCWhatIf",
    "HandoffCost",
    "RateLimits",
    "ResponseCurve",
    "ScalingComparison",
    "ScalingOption",
    "ServersNeeded",
    "StealWhatIf",
    "CacheCeiling",
    "CacheExpiry",
    "CacheWhatIf",
    "EndpointMix",
    "ThreadDemand",
    "ThreadPool",
    "TimeoutAdvice",
    "TimeoutSafeRate",
    "burst_tolerance",
    "ceiling_from_curve",
    "compare_scaling",
    "cpu_load",
    "dispatch_response",
    "gc_whatif",
    "jvm_gc_whatif",
    "handoff_cost",
    "pool_size",
    "qps_ceiling",
    "rate_limits",
    "recommend_timeout",
    "response_curve",
    "servers_needed",
    "steal_whatif",
    "cache_ceiling",
    "cache_expiry",
    "cache_service",
    "cache_whatif",
    "endpoint_mix",
    "thread_demand",
    "thread_pool",
    "timeout_safe_rate",
    "RampNeeded",
    "RollingDeploy",
    "WarmupSimulation",
    "WarmupTransient",
    "ramp_needed",
    "rolling_deploy",
    "warmup_simulation",
    "warmup_transient",
]

# The names before this release, for one release (docs/glossary.md, "Renamed in this release").
__getattr__ = _module_getattr("capacity.plan", {"latency_curve": "capacity.plan:response_curve",
                                                "LatencyCurve": "capacity.plan:ResponseCurve"})
