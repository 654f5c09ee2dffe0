"""Overload: bursts, backlogs, timeouts, retries, and what happens when a service falls behind.

Steady-state queueing formulas (:mod:`capacity.fcfs`, :mod:`capacity.ps`) say nothing once load
exceeds capacity.  This package answers the questions a team asks during and after such an
incident, one idea per module (all names are re-exported here):

* ``_backlog`` -- the fluid overload laws: :func:`backlog` (how much CPU work piles up during a
  burst, how long a new request would wait, for how many seconds that wait exceeds the timeout,
  how long the service takes to recover) and the transient laws of an overloaded server,
  :func:`ps_growth_rate`, :func:`ps_fluid_completion`, :func:`ps_fluid_sojourn` (processor
  sharing, Jean-Marie & Robert 1994) and :func:`fcfs_overload_wait` (FCFS).
* ``_goodput`` -- :func:`goodput`: completions within the timeout per second against offered
  load, for PS and FCFS, with the server that keeps computing abandoned requests (what Node.js
  does), drops them at the timeout, skips requests that can no longer finish in time, or serves
  adaptive LIFO; :func:`goodput_method` names the model used.
* ``_retries`` -- :func:`retry_fixed_points`: the effective load with client retries, every
  fixed point and its stability, and the bistable (metastable) range.
* ``_staircase`` -- the seed article's 30-request experiment: :func:`simultaneous_burst` and
  :func:`fit_staircase`.
* ``_replay`` -- :func:`replay` a traffic shape through :func:`capacity.sim.simulate`, with
  :func:`apply_rate_limit` in front when asked.

The incident scenario (``incident_traffic``, ``what_if``, ``INCIDENT_COST_FROM_CPU``,
``INCIDENT_COST_FROM_LOG``) has its own module, :mod:`capacity.incident`; those names, and
``rate_limit`` (now :func:`apply_rate_limit`), still work here for one release with a
``DeprecationWarning`` naming the new one.

Every result (:class:`BacklogResult`, :class:`FixedPoint`, :class:`RetryAnalysis`,
:class:`Staircase`, :class:`ReplayResult`) follows the result protocol of
:class:`capacity._result.Result`: a short ``repr``, ``str`` in words, ``to_frame()``,
``to_dict()``.

Units: seconds and requests per second everywhere.
"""
from __future__ import annotations

from .._deprecation import module_getattr
from ._backlog import (
    BacklogResult,
    backlog,
    fcfs_overload_wait,
    ps_fluid_completion,
    ps_fluid_sojourn,
    ps_growth_rate,
)
from ._goodput import goodput, goodput_method
from ._replay import ReplayResult, apply_rate_limit, replay
from ._retries import FixedPoint, RetryAnalysis, retry_fixed_points
from ._staircase import Staircase, fit_staircase, simultaneous_burst

__all__ = [
    "BacklogResult",
    "FixedPoint",
    "ReplayResult",
    "RetryAnalysis",
    "Staircase",
    "apply_rate_limit",
    "backlog",
    "fcfs_overload_wait",
    "fit_staircase",
    "goodput",
    "goodput_method",
    "ps_fluid_completion",
    "ps_fluid_sojourn",
    "ps_growth_rate",
    "replay",
    "retry_fixed_points",
    "simultaneous_burst",
]

# Old names kept for one release (docs/glossary.md, "Renamed in this release").  The incident
# scenario's names are looked up in capacity.incident on first use only: capacity.incident imports
# this package, so importing it here would be a circle.
__getattr__ = module_getattr("capacity.overload", {
    "incident_traffic": "capacity.incident:incident_traffic",
    "what_if": "capacity.incident:what_if",
    "INCIDENT_COST_FROM_CPU": "capacity.incident:INCIDENT_COST_FROM_CPU",
    "INCIDENT_COST_FROM_LOG": "capacity.incident:INCIDENT_COST_FROM_LOG",
    "rate_limit": "capacity.overload:apply_rate_limit",
})
