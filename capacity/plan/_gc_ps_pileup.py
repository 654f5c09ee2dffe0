"""The pile-up a pause leaves under processor sharing on one core: ``gc_whatif``'s timeout share.

Under FCFS the requests that pile up during a stop-the-world pause queue behind the ones in flight,
and the delay the pauses leave is a workload that falls at ``1 - rho_x`` (:mod:`._gc_service`).
Under processor sharing the pile shares the core with every request in flight, so what a pause
costs a request depends on the request's own work: a short request leaves before the pile has
cost it much, a long one waits for most of it.  :func:`ps1_timeout_fraction` writes that down for
one core; on ``c >= 2`` cores ``gc_whatif`` keeps the constant-fall model of
:func:`._gc_service._ps_pause_cost` (these formulas do not carry over: with fewer requests than
cores present nobody shares).

*The model.*  Work between pauses arrives at ``rho_x = lambda m`` (``m = E[X]``, the pause-free CPU
time per request), ``a = 1 - rho_x``; pauses begin at ``r_w`` per wall second, a share ``p = r_w
E[V]`` of the time.  In M/M/1-PS one more job present costs a request of work ``u`` on average
``g(u) = m c(u) / a`` (Coffman, Muntz & Trotter 1970), ``c(u) = 1 - exp(-a u / m)``: of a pile that
takes ``r V`` to clear (``r = rho_x / a``) it waits the share ``c(u)`` -- nothing as ``u -> 0``, all
of it as ``u -> inf``.  With the two-phase profile of a pause (the pause, then its pile clearing):

* an arrival during a pause (probability ``p``; the pause it lands in ``V_tot``, length-biased)
  waits the rest ``b = Phi V_tot`` of it (``Phi`` uniform), ``c(u) r V_tot`` for its pile and
  ``c(u) W'`` for what earlier pauses left;
* an arrival after a pause, while its pile clears, waits ``c(u)`` times the clearing time left;
* the others find no pile.

The clearing time is read from FCFS's model, which counts overlapping pauses: ``W``, the M/G/1
workload of jobs ``V / a`` arriving at ``r_w`` (``P(W > 0) = r_w E[V] / a``), gives the share after
a pause as ``P(c W > s) - P(in a pause, c (b + r V_tot + W') > s)``, and ``W'`` at
``_BACKLOG_NODES`` equal-mass quantiles of ``W`` given ``W > 0`` (and its atom at 0).  With
``F(k, y) = E[(k - y / V_tot)^+]`` -- for gamma pauses (shape ``s = 1 / c2``, scale ``beta = E[V]
c2``) ``F = k Q(s + 1, z) - y / (s beta) Q(s, z)``, ``z = y / (k beta)``, ``Q`` the regularised
upper incomplete gamma function; for constant ones ``(k - y / E[V])^+`` --

``P(b + k V_tot > y) = F(1 + k, y) - F(k, y)``,

and for constant pauses the pile is ``K ~ Poisson(lambda V)`` jobs of cost ``c(u) r / lambda``
each, taken as the gamma ``G`` of shape ``lambda V`` with that mean and variance:
``P(b + G > y) = (E[(G - y + V)^+] - E[(G - y)^+]) / V``.  The request needs

``P(Y > y) = P(R_0 > y) + P(R_0 <= y < R_0 + delay)``,

``R_0`` the M/G/1-PS response in unpaused time (exact, at ``lambda / (1 - p)``); in the second
term, given ``u``, ``R_0(u)`` is the gamma of the M/M/1-PS conditional mean ``u / (1 - rho)`` and
variance ``2 rho m u / (1 - rho)^3 - 2 rho m^2 (1 - exp(-(1 - rho) u / m)) / (1 - rho)^4``
(Coffman, Muntz & Trotter 1970; ``rho = lambda m / (1 - p)``), its part below ``y`` at
``_OWN_NODES`` equal-mass quantiles, and ``u`` exponential of mean ``m`` (``_LAGUERRE``-point
Gauss-Laguerre rule).  ``Y`` goes through the paused clock (:func:`._pause_clock.paused_clock_sf`)
with the cost ``V' = V (1 + kappa)`` of :func:`._gc_service._ps_pause_cost` for the pauses that
begin during the request.

*Assumptions*: one core; Poisson pauses independent of the queue; exponential work inside the pile
term (other service laws keep their own ``R_0``, and enter the pile through their mean); a pile
job's cost its M/M/1-PS mean ``g(u)`` (its spread left out); ``W'`` independent of the current
pause.  *Limits* (``tests/test_plan_gc.py``): no pauses, or pauses much shorter than the work, give
``R_0`` on the clock of ``_ps_pause_cost`` (the second term vanishes; within 0.6 % of the hand
formula); light traffic gives the residual pause ``r_w E[(V - T)^+] / (1 - rho_x)`` (within 1 %).
*Numerics*: ``P(Y > y)`` on 129 uniform points of ``[0, T]`` and the two gradings of
:mod:`._pause_clock`; the rules above (16 x 8 x 13 nodes) are within 1.7 % of 32 x 24 x 33 on the
grid below.  A share costs 0.03-0.15 s, about 15 % more than the constant fall's (72 of the
grid's: 8.4 s against 7.3 s), up to 0.5 s for pause scv 4 (incomplete gamma functions of shape
below 1) and 1.3 s for a deterministic service (its PS response's sf; 1.0 s before).

*Measured error* (``tools/measure_gc_timeouts.py --discipline ps``: pauses of 10, 100 and 500 ms
at 3 % of the time, constant and exponential, rho_x 0.2, 0.5, 0.85, timeouts of 0.5, 0.9, 1.5
and 3 pauses, 4 x 0.25-1 x 10^6 simulated requests per setting; 70 points with a share above
1e-4), one core:

==================================  ======================  ======================
                                    constant fall           this module
==================================  ======================  ======================
median abs error                    6.6 %                   2.8 %
within 95 % interval + 10 %         94 %                    96 %
within 95 % interval + 20 %         97 %                    97 %
5th-95th percentile                 -9 % to +23 %           -3 % to +15 %
exponential pauses, 3 pauses,       +27 %, +18 % (100 ms)   +14 %, +3 % (100 ms)
rho_x 0.5 and 0.85                  +19 %, +28 % (500 ms)   +6 %, +8 % (500 ms)
same, 16 x 10^6 requests            +20 %, +14 % (100 ms)   +7 %, -1 % (100 ms)
                                    +22 %, +18 % (500 ms)   +9 %, 0 % (500 ms)
==================================  ======================  ======================

Still out of the interval + 10 %: 1.5 constant pauses of 500 ms at rho_x 0.5 (+16 %; +15 %
before) and 1.5 constant pauses of 100 and 500 ms at rho_x 0.2 (+103 % and +143 %; +120 % and
+179 % before; shares 3-5e-4, FCFS's backlog overstating two overlapping pauses).  Two cores keep
the constant-fall model, bit for bit: median 8.8 %, 81 % within the interval + 10 %, 90 % within
it + 20 %, 5th-95th percentile +1 % to +36 % (68 points; ``--ps-cores 2``); this module's formulas
there would give 11.8 % and 74 %.

References
----------
E. G. Coffman, R. R. Muntz and H. Trotter, "Waiting time distributions for processor-sharing
systems", J. ACM 17 (1970) 123-130.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from scipy import special

from .. import fcfs
from ..distributions import Service
from ._pause_clock import _GRADING, _log_interpolant, pause_backlog_sf, paused_clock_sf

_LAGUERRE = 16          # Gauss-Laguerre points over the request's own work u = m x, x ~ Exp(1)
_BACKLOG_NODES = 12     # equal-mass quantiles of the earlier pauses' backlog W'
_OWN_NODES = 8          # equal-mass quantiles of the request's own time R_0(u)
_GRID = 129             # uniform points of [0, T] for P(Y > y) (R_0's sf costs a chain solve per point)
_X, _XW = np.polynomial.laguerre.laggauss(_LAGUERRE)


def _F(k: np.ndarray, y: np.ndarray, pause_mean: float, pause_scv: float) -> np.ndarray:
    """``E[(k - y / V_tot)^+]``, ``V_tot`` the length-biased pause (gamma of shape ``s + 1``)."""
    pos = k > 0
    ks = np.where(pos, k, 1.0)
    if pause_scv == 0:
        return np.where(pos, np.maximum(ks - y / pause_mean, 0.0), 0.0)
    s, beta = 1.0 / pause_scv, pause_mean * pause_scv
    z = y / (ks * beta)
    # One incomplete gamma per point (the costly part, tenfold for shapes below 1):
    # Q(s + 1, z) = Q(s, z) + z^s exp(-z) / Gamma(s + 1), and Q(1, z) = exp(-z).
    q_s = np.exp(-z) if s == 1.0 else special.gammaincc(s, z)
    with np.errstate(divide="ignore"):
        q_s1 = q_s + np.exp(s * np.log(z) - z - special.gammaln(s + 1.0))
    return np.where(pos, ks * q_s1 - y / (s * beta) * q_s, 0.0)


def in_pause_sf(y: np.ndarray, k: np.ndarray, pause_mean: float, pause_scv: float) -> np.ndarray:
    """``P(b + k V_tot > y)`` for an arrival during a pause: ``b = Phi V_tot`` the rest of it.

    ``V_tot`` is the length-biased pause (the one an arrival lands in), ``Phi`` uniform on (0, 1),
    ``k >= 0``: ``F(1 + k, y) - F(k, y)`` with ``F`` of the module docstring (``y < 0`` counts as 0).
    """
    y = np.maximum(y, 0.0)
    return np.clip(_F(1.0 + k, y, pause_mean, pause_scv) - _F(k, y, pause_mean, pause_scv), 0.0, 1.0)


def _gamma_excess(z: np.ndarray, shape: float, scale: np.ndarray) -> np.ndarray:
    """``E[(G - z)^+]`` for ``G`` gamma of ``shape`` and ``scale``."""
    zz = np.maximum(z, 0.0) / scale
    q = special.gammaincc(shape, zz)
    with np.errstate(divide="ignore"):
        q1 = q + np.exp(shape * np.log(zz) - zz - special.gammaln(shape + 1.0))   # Q(shape + 1, zz)
    out = scale * (shape * q1 - zz * q)
    return np.where(z < 0, shape * scale - z, out)


def in_constant_pause_sf(y: np.ndarray, k: np.ndarray, pause: float, pile: float) -> np.ndarray:
    """``P(b + G > y)``: ``b`` uniform on ``(0, V)``, ``G`` gamma of shape ``pile = lambda V``, mean ``k V``.

    The ``K ~ Poisson(lambda V)`` jobs a constant pause piles up, each costing ``k V / (lambda V)``,
    as a gamma of the same mean and variance.
    """
    scale = np.maximum(k * pause / pile, 1e-300)
    return np.clip((_gamma_excess(y - pause, pile, scale) - _gamma_excess(y, pile, scale)) / pause, 0.0, 1.0)


def own_time_nodes(s: np.ndarray, load: float, work_mean: float) -> tuple[np.ndarray, np.ndarray]:
    """``R_0(u)`` below ``s``: nodes (s, u, ``_OWN_NODES``) and their mass (s, u) per Laguerre ``u = m x``.

    ``R_0(u)`` is a gamma of the M/M/1-PS conditional mean ``u / (1 - rho)`` and variance (module
    docstring); its part below ``s`` is taken at the equal-mass quantiles ``F(s) (j + 1/2) / n``,
    each of mass ``F(s) / n``, so that every node lies below ``s`` whatever ``s``.
    """
    b = 1.0 - load
    mean = work_mean * _X / b
    # 2 rho m^2 (b x - 1 + exp(-b x)) / b^4, with expm1 against the cancellation at small b x.
    var = 2.0 * load * work_mean ** 2 * (b * _X + np.expm1(-b * _X)) / b ** 4
    ok = var > 1e-12 * mean * mean                 # else R_0(u) = its mean (light traffic)
    shape = np.where(ok, mean * mean / np.where(ok, var, 1.0), 1.0)
    scale = mean / shape
    below = np.where(ok, special.gammainc(shape, s[:, None] / scale), s[:, None] > mean)   # F(s)
    probs = below[..., None] * (np.arange(_OWN_NODES) + 0.5) / _OWN_NODES
    nodes = special.gammaincinv(shape[:, None], probs) * scale[:, None]
    return np.where(ok[:, None], nodes, mean[:, None]), below / _OWN_NODES


def _backlog(timeout: float, wall_rate: float, pause_mean: float, pause_scv: float, a: float,
             jobs: Service) -> tuple[Callable[[np.ndarray], np.ndarray], np.ndarray, np.ndarray]:
    """FCFS's clearing time ``W`` (the M/G/1 workload of ``jobs``, ``V / a``, at ``r_w``): its sf, and
    ``W'`` as nodes and masses (the atom at 0, then ``_BACKLOG_NODES`` equal-mass quantiles)."""
    load = min(wall_rate * pause_mean / a, 1.0 - 1e-12)
    # Far past T too: a request waits only the share c(u) of W, so W is read at s / c(u).
    grid = np.unique(np.concatenate([np.linspace(0.0, timeout, 513), timeout * np.geomspace(1.0, 1e4, 200)]))
    sf = pause_backlog_sf(grid, lambda w: fcfs.wait_sf(w, wall_rate, jobs), load, pause_mean / a, pause_scv)
    sf = np.minimum.accumulate(np.clip(sf, 0.0, 1.0))
    sf[0] = min(sf[0], load)       # P(W > 0) is the load exactly; the inversion at 0 is not
    interp = _log_interpolant(grid, sf)
    top = grid[-1]

    def w_sf(w: np.ndarray) -> np.ndarray:
        return np.where(w > top, 0.0, interp(np.minimum(w, top)))

    q = sf[0]
    # Equal-mass quantiles of W given W > 0: W_sf(w_j) = q (j + 1/2) / n, read off in log(sf).
    probs = q * (np.arange(_BACKLOG_NODES) + 0.5) / _BACKLOG_NODES
    logs = np.log(np.maximum(sf, 1e-300))
    nodes = np.interp(np.log(probs)[::-1], logs[::-1], grid[::-1])[::-1]
    return (w_sf, np.concatenate([[0.0], nodes]),
            np.concatenate([[1.0 - q], np.full(_BACKLOG_NODES, q / _BACKLOG_NODES)]))


def ps1_timeout_fraction(timeout: float, queue_sf: Callable[[np.ndarray], np.ndarray], arrival_rate: float,
                         work_mean: float, wall_rate: float, pause_mean: float, pause_scv: float,
                         clock_pause: tuple[float, float], clearing_job: Service,
                         service_atom: float | None = None) -> float:
    """``P(R > T)`` under PS on one core with Poisson stop-the-world pauses (module docstring).

    Parameters
    ----------
    timeout : float
        ``T``, seconds (> 0).
    queue_sf : callable
        ``P(R_0 > t)``, the M/G/1-PS response in unpaused time at ``lambda / (1 - p)``.
    arrival_rate : float
        ``lambda``, requests/s (wall clock).
    work_mean : float
        ``m = E[X]``, the pause-free CPU time per request, s.
    wall_rate : float
        ``r_w``, pauses begun per wall second (> 0).
    pause_mean, pause_scv : float
        ``E[V]`` (s) and the scv of the pause length (0 constant, else gamma).
    clock_pause : (float, float)
        Mean (s) and scv of the cost of a pause that begins during the request
        (:func:`._gc_service._ps_pause_cost`).
    clearing_job : Service
        The law of ``V / (1 - rho_x)``, the time a pause's pile takes to clear under FCFS
        (``_queue_service`` of :mod:`._gc_service`, gamma above scv 1).
    service_atom : float or None
        The service time when it is deterministic (``R_0``'s sf jumps there).

    Returns
    -------
    float
        The share of requests whose wall-clock response exceeds ``T``.
    """
    t, v, m = float(timeout), float(pause_mean), float(work_mean)
    paused = wall_rate * v
    rho_x = arrival_rate * m
    a = 1.0 - rho_x
    w_sf, w_nodes, w_mass = _backlog(t, wall_rate, v, pause_scv, a, clearing_job)
    r = rho_x / a                                 # the pile's clearing time per second of pause
    c = -np.expm1(-a * _X)                        # the share c(u) of a pile a request of work u waits
    load = arrival_rate * m / (1.0 - paused)      # R_0's: the arrivals in the unpaused time

    def extra_sf(s: np.ndarray) -> np.ndarray:
        """``P(R_0 <= s < R_0 + delay)``: the requests a pile found and holds past ``s``.

        Axes: s, u, R_0 node, W' node; ``s - R_0 > 0`` at every node (:func:`own_time_nodes`).
        """
        own, mass = own_time_nodes(s, load, m)
        s0 = s[:, None, None, None] - own[..., None]
        cc, wj = c[:, None, None], w_nodes
        rest = s0 - cc * wj                       # what the current pause and its pile must exceed
        if pause_scv == 0 and arrival_rate * v > 0:
            during = in_constant_pause_sf(rest, cc * r, v, arrival_rate * v)
        else:
            during = in_pause_sf(rest, cc * r, v, pause_scv)
        # The same arrivals by their whole clearing time c (b + r V_tot + W'), which W also counts
        # (the pile at its mean here, also for constant pauses: the measured version).
        whole = in_pause_sf(rest / cc, r, v, pause_scv)
        during, whole = paused * (during @ w_mass), paused * (whole @ w_mass)
        after = np.maximum(w_sf(np.maximum(s0[..., 0], 0.0) / cc[..., 0]) - whole, 0.0)
        return ((during + after).sum(axis=-1) * mass) @ _XW

    scale = m / max(1.0 - load, 1e-12)           # ~ mean of R_0, where to grade the grid
    grid = [np.linspace(0.0, t, _GRID), scale * _GRADING, v * _GRADING]
    if service_atom is not None:
        grid.append(service_atom * (1.0 + np.array([-1e-9, 1e-9])))
    grid = np.unique(np.clip(np.concatenate(grid), 0.0, t))
    r0 = np.asarray(queue_sf(np.maximum(grid, 1e-300)), dtype=float)
    r0[grid == 0] = 1.0
    y = np.clip(r0, 0.0, 1.0) + extra_sf(grid)     # P(R_0 > y) + P(R_0 <= y < R_0 + delay)
    y_sf = _log_interpolant(grid, np.minimum.accumulate(np.clip(y, 0.0, 1.0)))
    starts = wall_rate / (1.0 - paused)           # pauses begun per unpaused second
    return paused_clock_sf(t, y_sf, starts, clock_pause[0], clock_pause[1], (scale, v))
