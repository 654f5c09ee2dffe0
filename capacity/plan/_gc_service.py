"""The service of a request under garbage collection, for :mod:`capacity.plan.gc`.

A request's CPU time plus the stop-the-world pauses that land in it: :func:`_setting` gives the
effective service's moments for a GC CPU share and a pause law, :func:`_queue_service` the law the
queue models take for it, and :func:`_timeout_fraction` the share of requests over a timeout when the
pauses also leave a backlog behind them (a queue on a paused clock, :mod:`._pause_clock`).  The model,
its assumptions and its measured error are in the Notes of :func:`capacity.plan.gc_whatif`.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..distributions import Service
from ._pause_clock import pause_backlog_sf, paused_response_sf
from ._text import _fmt_time


def _setting(mean: float, scv: float, g: float, v: float, r: float | None, pause_scv: float,
             notes: list, label: str) -> dict:
    """Effective service moments for GC share ``g``, pauses of mean ``v`` at rate ``r``."""
    m = mean  # mutator CPU per request (GC excluded), s
    if r is None:
        p = g
        r = g / v if v > 0 else 0.0
    else:
        p = r * v
    if p > g + 1e-12:
        notes.append(f"{label}: pauses of {_fmt_time(v)} at {r:.3g}/s take {100 * p:.3g} % of the CPU, more than "
                     f"the stated GC share of {100 * g:.3g} %: the inputs disagree (measured over different windows "
                     f"or processes?); the pause rate was lowered to {g / v:.3g}/s so that pauses carry the whole "
                     "GC share.")
        p, r = g, g / v
    ex = m * (1.0 - p) / (1.0 - g)            # non-pause busy time per request (incl. concurrent GC)
    theta = r / (1.0 - p) if p < 1 else math.inf  # pauses per second of non-pause busy time
    ev2 = v * v * (1.0 + pause_scv)
    eff_mean = ex * (1.0 + theta * v)          # = m / (1 - g)
    var = scv * ex * ex * (1.0 + theta * v) ** 2 + ex * theta * ev2
    return dict(gc_cpu_share=g, pause_mean_s=v, pause_rate_per_s=r, pause_share=p, service_mean_s=eff_mean,
                service_scv=var / eff_mean ** 2, _ex=ex, _scv=scv, _theta=theta, _ev2=ev2)



def _queue_service(mean: float, scv: float) -> Service:
    """The effective service as a law for the queue: :meth:`Service.from_moments`, gamma above scv 1.

    ``S_eff`` (CPU time plus a compound-Poisson sum of pauses) has a light, exponential-like tail
    (see the Notes of :func:`gc_whatif`), which gamma has and lognormal -- ``from_moments``' own
    choice above scv 1, for measured request costs -- has not.  Checked against the exact M/G/1
    FCFS with the law of simulated ``S_eff`` samples as an empirical service
    (``tests/test_plan_gc.py``): on the seed's "before" setting (exponential CPU time, scv 2.3
    with the pauses) the p99 <= 200 ms ceiling of one process is 67.0-67.9 QPS with the sampled
    law, 68.1 with gamma and 57.8 with lognormal.
    """
    # Moments computed in floating point land a rounding error off 0 and 1 where they are exact
    # (no pauses): from_moments needs those exactly to choose deterministic and exponential.
    scv = 1.0 if abs(scv - 1.0) < 1e-9 else (0.0 if scv < 1e-12 else scv)
    return Service.from_moments(mean, scv, family="gamma" if scv > 1.0 else None)


def _timeout_fraction(st: dict, per: float, servers: int, timeout: float, pause_scv: float,
                      mod: Any) -> float:
    """Share of requests over ``timeout``: the pauses' backlog and the queue on a paused clock.

    See *Timeouts* in the Notes of :func:`gc_whatif`; ``P(C(R_0 + D) > T)`` is
    :func:`._pause_clock.paused_response_sf`.
    """
    rho = per * st["service_mean_s"] / servers
    if rho >= 1:
        return 1.0  # unstable: the backlog grows without bound and every request ends up late
    from .. import fcfs

    wall_rate = st["pause_rate_per_s"] * rho                 # pauses per wall-clock second
    paused = wall_rate * st["pause_mean_s"]                  # share of wall time in pauses
    rho_x = per * st["_ex"] / servers                        # load of the work between pauses
    x = _queue_service(st["_ex"], st["_scv"])
    rate = per / (1.0 - paused)                              # arrivals in the time between pauses

    def queue_sf(t: np.ndarray) -> np.ndarray:
        return np.asarray(mod.response_sf(t, rate, x, servers), dtype=float)

    if wall_rate == 0:
        return float(queue_sf(np.array([timeout]))[0])
    # The delay the pauses leave jumps by V at each and drains at 1 - rho_x: its drain time is the
    # M/G/1 workload of "jobs" V / (1 - rho_x) arriving at the pause rate.
    drain = _queue_service(st["pause_mean_s"] / (1.0 - rho_x), pause_scv)

    def backlog_sf(s: np.ndarray) -> np.ndarray:
        return pause_backlog_sf(s, lambda u: fcfs.wait_sf(u / (1.0 - rho_x), wall_rate, drain),
                                paused / (1.0 - rho_x), st["pause_mean_s"], pause_scv)

    scale = st["_ex"] / max(1.0 - rate * st["_ex"] / servers, 1e-12)   # ~ mean of R_0, for the panels
    starts = wall_rate / (1.0 - paused)                      # pauses begun per unpaused second
    return paused_response_sf(timeout, queue_sf, backlog_sf, starts, st["pause_mean_s"], pause_scv, scale,
                              st["_ex"] if x.family == "deterministic" else None)
