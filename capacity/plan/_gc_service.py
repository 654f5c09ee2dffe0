"""The service of a request under garbage collection, for :mod:`capacity.plan.gc`.

A request's CPU time plus the stop-the-world pauses that land in it: :func:`_setting` gives the
effective service's moments for a GC CPU share and a pause law, :func:`_queue_service` the law the
queue models take for it, and :func:`_timeout_fraction` the share of requests over a timeout when the
pauses also leave a backlog behind them (a queue on a paused clock, :mod:`._pause_clock`; under
processor sharing on one core the pile-up law of :mod:`._gc_ps_pileup`).  The model, its
assumptions and its measured error are in the Notes of :func:`capacity.plan.gc_whatif`.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..distributions import Service
from ._gc_ps_pileup import ps1_timeout_fraction
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
    :func:`._pause_clock.paused_response_sf`.  Processor sharing on one core goes to
    :func:`._gc_ps_pileup.ps1_timeout_fraction` (a pause's cost by the request's own work); on
    ``c >= 2`` cores it keeps the constant fall of :func:`_ps_pause_cost`.
    """
    rho = per * st["service_mean_s"] / servers
    if rho >= 1:
        return 1.0  # unstable: the backlog grows without bound and every request ends up late
    from .. import fcfs, ps

    wall_rate = st["pause_rate_per_s"] * rho                 # pauses per wall-clock second
    paused = wall_rate * st["pause_mean_s"]                  # share of wall time in pauses
    rho_x = per * st["_ex"] / servers                        # load of the work between pauses
    x = _queue_service(st["_ex"], st["_scv"])
    rate = per / (1.0 - paused)                              # arrivals in the time between pauses

    def queue_sf(t: np.ndarray) -> np.ndarray:
        return np.asarray(mod.response_sf(t, rate, x, servers), dtype=float)

    if wall_rate == 0:
        return float(queue_sf(np.array([timeout]))[0])
    if mod is ps and servers == 1:
        # One core: what a pause costs depends on the request's own work (_gc_ps_pileup); the
        # constant fall below stays for c >= 2, where those formulas do not carry over.
        v = st["pause_mean_s"]
        cost = _ps_pause_cost(rho_x, per, st["_ex"], v, pause_scv)[:2]
        return ps1_timeout_fraction(timeout, queue_sf, per, st["_ex"], wall_rate, v, pause_scv, cost,
                                    _queue_service(v / (1.0 - rho_x), pause_scv),
                                    st["_ex"] if x.family == "deterministic" else None)

    # The delay the pauses leave jumps by V at each and falls at 1 - rho_x (FCFS: the pile-up queues
    # behind the requests in flight); under PS a pause costs the pause plus a share of the pile-up,
    # and the delay falls faster.  Its drain time is the M/G/1 workload of "jobs" V / fall arriving
    # at the pause rate.
    pause, fall = st["pause_mean_s"], 1.0 - rho_x
    if mod is ps:
        pause, pause_scv, fall = _ps_pause_cost(rho_x, per / servers, st["_ex"], pause, pause_scv)
    drain = _queue_service(pause / fall, pause_scv)
    load = min(wall_rate * pause / fall, 1.0 - 1e-12)

    def backlog_sf(s: np.ndarray) -> np.ndarray:
        return pause_backlog_sf(s, lambda u: fcfs.wait_sf(u / fall, wall_rate, drain), load, pause, pause_scv)

    scale = st["_ex"] / max(1.0 - rate * st["_ex"] / servers, 1e-12)   # ~ mean of R_0, for the panels
    starts = wall_rate / (1.0 - paused)                      # pauses begun per unpaused second
    return paused_response_sf(timeout, queue_sf, backlog_sf, starts, pause, pause_scv, scale,
                              st["_ex"] if x.family == "deterministic" else None)


def _ps_pause_cost(rho_x: float, lam: float, mean: float, pause_mean: float,
                   pause_scv: float) -> tuple[float, float, float]:
    """Under processor sharing: a pause's cost to a request it catches, and how the delay falls after it.

    Parameters
    ----------
    rho_x : float
        Load of the work between pauses per core, ``lambda E[X] / c`` (< 1).
    lam : float
        Arrival rate per core, ``lambda / c``, requests/s.
    mean : float
        ``m = E[X]``, the pause-free CPU time per request, s.
    pause_mean, pause_scv : float
        ``E[V]`` (s) and the scv of the pause length.

    Returns
    -------
    cost_mean, cost_scv, fall : float
        Mean (s) and scv of ``V' = V + K g(U)`` (below), and the rate ``d`` at which the delay
        ``D`` falls.

    Notes
    -----
    A pause of length ``V`` stops every core while the ``K ~ Poisson(lambda V)`` arrivals it holds
    pile up; when it ends they share the cores with every request in flight (under FCFS they
    queue behind it instead).  For M/M/1-PS, a request with remaining work ``u`` that finds ``n``
    others takes on average (Coffman, Muntz & Trotter 1970, checked against the PS simulator)

    ``E[T | u, n] = u / a + (n a - rho) (1 - exp(-a u / m)) m / a^2``, ``a = 1 - rho``,

    so each of the ``K`` extra jobs costs it ``g(u) = m (1 - exp(-a u / m)) / a``: ``u`` while
    ``u`` is short, the job's whole work stretched by ``1 / a`` while it is long.  The remaining
    work ``U`` of a request in flight is exponential of mean ``m`` (memoryless), as is the work
    of a fresh arrival that finds the pile: ``E[g] = m / (1 + a)``,
    ``E[g^2] = (m / a)^2 (1 - 2 / (1 + a) + 1 / (1 + 2 a))``.  A pause therefore costs the
    requests it catches ``V' = V + K g(U)``, with

    ``E[V'] = E[V] (1 + kappa)``, ``kappa = lambda E[g] = rho_x / (2 - rho_x)``,
    ``E[V'^2] = E[V^2] (1 + 2 kappa) + (lambda E[V] + lambda^2 E[V^2]) E[g^2]``,

    which the paused clock takes as the pause law (gamma of these two moments; a constant pause
    stays constant while that scv is below 1e-4).  The delay ahead of an arrival jumps by
    ``V (1 + kappa)`` at a pause (the pause, then the whole pile), falls at 1 while it lasts and
    at ``a / (1 + a)`` after it (the pile's work ``rho_x V`` drains at ``a``; each of its jobs
    costs ``E[g]``); ``d`` is the constant rate of fall with that jump and the same mean
    (area) per pause, ``d = (1 + kappa)^2 / (1 + 2 kappa + kappa^2 (1 + a) / a)``.  Limits:
    ``rho_x -> 0`` gives ``V' = V`` and ``d = 1``, FCFS's light-traffic view; pauses much shorter
    than the work keep ``E[V'] = V (1 + kappa)`` while ``K -> 0``, so the clock runs ``1 + p kappa``
    slower than the CPU-overhead view (``p`` the share of time paused), whose pile-up ``R_0``'s
    arrival rate already counts (a few per cent; ``tests/test_plan_gc.py``).  Assumed: exponential work
    (other laws take these moments with their own mean), one core (on ``c`` the pile shares
    ``c`` cores: ``lambda`` and ``rho_x`` per core), a pause's cost independent of the
    request's own remaining time.  On one core only ``V'`` is used (the clock's pause, in
    :mod:`._gc_ps_pileup`, whose pile-up law replaces ``D``); the whole model serves ``c >= 2``.
    Measured error: the Notes of :func:`gc_whatif`.
    """
    a = 1.0 - rho_x
    eg = mean / (1.0 + a)
    eg2 = (mean / a) ** 2 * (1.0 - 2.0 / (1.0 + a) + 1.0 / (1.0 + 2.0 * a))
    ev, ev2 = pause_mean, pause_mean ** 2 * (1.0 + pause_scv)
    kappa = lam * eg
    m1 = ev * (1.0 + kappa)
    m2 = ev2 * (1.0 + 2.0 * kappa) + (lam * ev + lam * lam * ev2) * eg2
    scv = max(m2 / (m1 * m1) - 1.0, 0.0)
    if pause_scv == 0 and scv < 1e-4:
        scv = 0.0        # a gamma of shape > 1e4 is a constant to the clock, and its quantiles cost more
    fall = (1.0 + kappa) ** 2 / (1.0 + 2.0 * kappa + kappa * kappa * (1.0 + a) / a)
    return m1, scv, fall
