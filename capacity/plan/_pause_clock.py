"""Stop-the-world pauses that fall *during* a request's stay: ``P(C(Y) > T)`` on a paused clock.

:func:`capacity.plan.gc_whatif` writes a request's wall-clock response under pauses as

``R = C(Y)``: the time a request needing ``Y`` seconds of pause-free ("unpaused") time takes
when pauses keep stopping the clock,

with ``Y = R_0 + D``: the response ``R_0`` of the queue without pauses plus the delay ``D`` the
pauses before the arrival left (the rest of the current pause and the backlog of the recent
ones; its law is given, see the Notes of ``gc_whatif``).  Every pause that begins before the
request leaves stops every core and delays it by the whole pause length -- the requests
already queued when the pause begins, and the second and later pauses within a long timeout.
Under FCFS this is exact given ``Y``, because later arrivals (those the pause piles up) queue
behind the request; under processor sharing they share the cores with it afterwards, which
``gc_whatif`` adds to the pause's length (``_ps_pause_cost`` in :mod:`._gc_service`).

Pauses begin at the events of a Poisson stream of rate ``alpha`` per second of *unpaused* time
(``alpha = r_w / (1 - r_w E[V])`` for ``r_w`` pauses per wall second), independent of the
queue, and last ``V`` (constant, or gamma of mean ``v`` and scv ``c2``: ``S_n = V_1 + ... +
V_n`` is gamma of shape ``n k``, ``k = 1 / c2``, scale ``b = v c2``).  Let ``Psi(T)`` be the
unpaused time in the first ``T`` wall seconds after an arrival outside a pause.  Then
``C(Y) > T`` exactly when ``Y > Psi(T)``, and with ``Y`` independent of the pauses to come,

``P(C(Y) > T) = E[G(Psi(T))]``, ``G(y) = P(Y > y)``.

The law of ``Psi(T)``, splitting on the number ``n`` of pauses begun by ``T``:

* no pause: ``Psi = T`` with probability ``exp(-alpha T)``;
* ``T`` after the ``n``-th pause has ended: ``Psi = T - S_n`` and ``n`` pauses began in that
  unpaused time, ``E[pois_n(alpha (T - S_n)) G(T - S_n); S_n < T]``, ``pois_n`` the Poisson
  probability of ``n`` (for constant pauses atoms at ``T - n v``);
* ``T`` inside the ``n``-th pause, which began at unpaused time ``psi`` (the ``n``-th event, of
  Erlang density ``erl_n(psi) = alpha (alpha psi)^(n-1) exp(-alpha psi) / (n-1)!``):
  ``int_0^T erl_n(psi) P(S_(n-1) <= T - psi < S_n) G(psi) dpsi``.

With ``G = 1`` the three add up to 1; with ``G`` the sf of an exponential and exponential
pauses, ``E[exp(-a Psi(T))]`` is the two-state Markov chain's ``[1, 0] expm(T Q) 1``,
``Q = [[-alpha - a, alpha], [1/v, -1/v]]``; for a constant pause longer than ``T`` it is
``exp(-(alpha + a) T) + alpha / (alpha + a) (1 - exp(-(alpha + a) T))`` (all three checked in
``tests/test_plan_gc.py``; the Markov chain agrees to 1e-9 relative while the share exceeds
1e-11, and the absolute error stays below 1e-20 further out).

*Numerics.*  ``n`` runs to ``alpha T + 10 sqrt(alpha T) + 12`` (the pauses begun by ``T`` are
at most Poisson of mean ``alpha T``; capped at 1000, i.e. timeouts of at most ~800 pause
intervals).  ``P(R_0 > t)`` (transform inversion under PS) is evaluated on about 260 points of
``[0, T]`` -- uniform, and graded geometrically towards 0 on the scales of the response and
the pause -- and interpolated linearly in its logarithm; ``G`` is a Stieltjes sum over ``D``'s
law on 2049 uniform cells plus those points, tabulated on the same points.  The ``psi``
integral is an 8-point Gauss-Legendre rule on panels graded towards both ends with edges at
``T - n v`` (every ``n`` for constant pauses, where only the ``n`` of each node's pause counts;
up to 256 for gamma ones); the pauses-ended term is integrated over the quantile
``p = F_(S_n)(u)`` of ``S_n``, which makes the shape-``n k < 1`` singularity of gamma pauses
smooth, on panels whose edges are the quantiles of the ``psi`` panels' edges and a grid graded
towards both ends of ``p``.  Four times the points in every table and grading changes the share by at most 4e-4
relative (median 2e-6; 96 FCFS settings like those gc_whatif is checked on, shares above 1e-6).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from scipy import special


_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)
_GRADING = 2.0 ** np.arange(-12, 13)
# Quantile panels of S_n on [0, F_n(T)], as fractions of F_n(T).
_P_EDGES = np.array([0.0, 1e-4, 1e-3, 0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99, 1.0])
_MAX_PAUSES = 1000
_STEP_EDGES = 256
_TINY = np.finfo(float).tiny


def _gl_nodes(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the 8-point rule on the panels between sorted ``edges`` (last axis)."""
    lo, hi = edges[..., :-1, None], edges[..., 1:, None]
    half = (hi - lo) / 2.0
    return (lo + half * (1.0 + _GL_X)).reshape(*edges.shape[:-1], -1), (half * _GL_W).reshape(
        *edges.shape[:-1], -1)


def _log_interpolant(grid: np.ndarray, values: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``t -> values(t)``, linear in ``log`` between the grid points (a survival function)."""
    # Zeros (underflow) stay zeros: a floor in the logarithm would add floor-sized mass everywhere.
    logs = np.log(np.clip(values, _TINY, 1.0))

    def sf(t: np.ndarray) -> np.ndarray:
        out = np.exp(np.interp(np.asarray(t, dtype=float), grid, logs))
        return np.where(out <= 2.0 * _TINY, 0.0, out)

    return sf


def _pause_sum_cdf(u: np.ndarray, n: np.ndarray, pause_mean: float, pause_scv: float) -> np.ndarray:
    """``P(S_n <= u)`` for ``n >= 0`` (``S_0 = 0``)."""
    if pause_scv == 0:
        return (u >= n * pause_mean).astype(float)
    k, b = 1.0 / pause_scv, pause_mean * pause_scv
    safe = np.maximum(n, 1)
    return np.where(n == 0, 1.0, special.gammainc(safe * k, np.maximum(u, 0.0) / b))


def residual_pause_sf(s: np.ndarray, pause_mean: float, pause_scv: float) -> np.ndarray:
    """``P(V_e > s)``: the equilibrium (residual) law of a gamma or constant pause ``V``.

    Density ``P(V > s) / E[V]`` (Kleinrock 1975, 5.2): uniform on ``(0, v)`` for a constant pause,
    exponential of the same mean for an exponential one, and for gamma pauses of shape
    ``k = 1 / c2`` and scale ``b = v c2``, ``E[(V - s)^+] / v = Q(k + 1, s/b) - (s/v) Q(k, s/b)``
    with ``Q`` the regularised upper incomplete gamma function.
    """
    s = np.maximum(np.asarray(s, dtype=float), 0.0)
    v = float(pause_mean)
    if pause_scv == 0:
        return np.clip(1.0 - s / v, 0.0, 1.0)
    if pause_scv == 1:
        return np.exp(-s / v)
    k, b = 1.0 / pause_scv, v * pause_scv
    x = s / b
    # The difference loses ~log10(x) digits far in the tail, where it is ~exp(-x) anyway.
    return np.clip(special.gammaincc(k + 1.0, x) - (x / k) * special.gammaincc(k, x), 0.0, 1.0)


def pause_backlog_sf(s: np.ndarray, workload_sf: Callable[[np.ndarray], np.ndarray], shadow_share: float,
                     pause_mean: float, pause_scv: float) -> np.ndarray:
    """``P(D > s)`` from the M/G/1 workload ``workload_sf`` (transform inversion), with a floor.

    Numerical inversion is good to about 1e-14 absolute, noise below that.  The workload is at
    least the residual of the "job" in service, present a share ``q`` of the time, so
    ``P(D > s) >= q P(V_e > s)`` (:func:`residual_pause_sf`); below 1e-12 that closed-form bound
    replaces the inversion, which keeps the tail positive and monotone however far out.
    """
    s = np.asarray(s, dtype=float)
    inverted = np.asarray(workload_sf(s), dtype=float)
    bound = shadow_share * residual_pause_sf(s, pause_mean, pause_scv)
    return np.where(inverted > 1e-12, np.maximum(inverted, bound), bound)


def paused_clock_sf(timeout: float, sf: Callable[[np.ndarray], np.ndarray], pause_start_rate: float,
                    pause_mean: float, pause_scv: float, scales: tuple[float, ...] = ()) -> float:
    """``P(C(Y) > T) = E[G(Psi(T))]`` for one timeout ``T`` (module docstring).

    Parameters
    ----------
    timeout : float
        ``T``, seconds (> 0).
    sf : callable
        ``G(y) = P(Y > y)``, vectorised and cheap (an interpolant).
    pause_start_rate : float
        ``alpha``, pauses begun per second of unpaused time (> 0).
    pause_mean, pause_scv : float
        Mean (s) and scv of the pause length (gamma; scv 0 a constant pause).
    scales : tuple of float
        Length scales of ``Y`` (s), where to grade the panels near ``psi = 0``.
    """
    t, a, v = float(timeout), float(pause_start_rate), float(pause_mean)
    mean_starts = a * t
    n_max = int(min(_MAX_PAUSES, np.ceil(mean_starts + 10.0 * np.sqrt(mean_starts) + 12.0)))
    if pause_scv == 0:
        n_max = min(n_max, int(np.floor(t / v)) + 1)        # a pause ends before T only if n v < T
    n = np.arange(1, n_max + 1, dtype=float)
    total = np.exp(-mean_starts) * float(sf(np.array([t]))[0])

    # T inside the n-th pause, begun at unpaused time psi.
    ladder = np.concatenate([s * _GRADING for s in (v, 1.0 / a, *scales) if s > 0])
    edges = [np.array([0.0, t]), ladder, t - ladder]
    # The kernel jumps (constant pauses) or steps (gamma ones) at T - n v: one panel per pause.
    edges.append(t - v * (n if pause_scv == 0 else n[:_STEP_EDGES]))
    edges = np.unique(np.clip(np.concatenate(edges), 0.0, t))
    psi, w = _gl_nodes(edges)
    u = t - psi
    if pause_scv == 0:
        # T falls in the n-th pause exactly when (n - 1) v <= T - psi < n v: one n per node.
        k = np.floor(u / v) + 1.0
        kernel = np.exp(np.log(a) + (k - 1) * np.log(a * psi) - a * psi - special.gammaln(k))
    else:
        log_erl = (np.log(a) + (n - 1) * np.log(a * psi[:, None]) - a * psi[:, None] - special.gammaln(n))
        window = (_pause_sum_cdf(u[:, None], n - 1, v, pause_scv) - _pause_sum_cdf(u[:, None], n, v, pause_scv))
        kernel = (np.exp(log_erl) * np.clip(window, 0.0, 1.0)).sum(axis=1)
    total += float(np.sum(w * kernel * sf(psi)))

    # T after the n-th pause has ended: Psi = T - S_n, with n pauses begun in it.
    if pause_scv == 0:
        ended = n[n * v < t]
        rest = t - ended * v
        log_pois = ended * np.log(a * rest) - a * rest - special.gammaln(ended + 1.0)
        total += float(np.sum(np.exp(log_pois) * sf(rest)))
    else:
        k, b = 1.0 / pause_scv, v * pause_scv
        reach = special.gammainc(n * k, t / b)              # P(S_n < T)
        # Panels graded in p near both ends: p's own grid, and the psi panels' edges mapped to p.
        p_edges = np.concatenate([reach[:, None] * _P_EDGES, special.gammainc(n[:, None] * k,
                                                                              (t - edges[None, :]) / b)], axis=1)
        p, wp = _gl_nodes(np.sort(np.minimum(p_edges, reach[:, None]), axis=1))
        s_n = np.minimum(b * special.gammaincinv(n[:, None] * k, np.clip(p, 1e-300, 1.0)), t)
        rest = t - s_n
        log_pois = n[:, None] * np.log(np.maximum(a * rest, 1e-300)) - a * rest - special.gammaln(n + 1.0)[:, None]
        total += float(np.sum(wp * np.exp(log_pois) * sf(rest)))
    return min(max(total, 0.0), 1.0)


def _convolved_sf(y: np.ndarray, queue_sf: Callable[[np.ndarray], np.ndarray],
                  backlog_sf: Callable[[np.ndarray], np.ndarray], cells: np.ndarray) -> np.ndarray:
    """``P(R_0 + D > y)`` for independent ``R_0`` and ``D >= 0``: a Stieltjes sum over ``D``'s law.

    ``P(D > y) + sum_j [F_D(e_(j+1)) - F_D(e_j)] P(R_0 > y - (e_j + e_(j+1)) / 2)`` over the
    cells ``e_j = min(cells_j, y)`` (``cells`` starts at 0, so the atom ``P(D = 0)`` is the
    first cell's, at ``R_0``'s own ``P(R_0 > y)``).
    """
    y = y[:, None]
    edges = np.minimum(np.concatenate([[-1.0], cells])[None, :], y)           # -1: the atom at 0
    cdf = 1.0 - np.where(edges < 0, 1.0, backlog_sf(np.maximum(edges, 0.0)))
    mass = np.diff(cdf, axis=1)
    mid = np.maximum((edges[:, :-1] + edges[:, 1:]) / 2.0, 0.0)
    return backlog_sf(y[:, 0]) + np.sum(mass * queue_sf(np.maximum(y - mid, 0.0)), axis=1)


def paused_response_sf(timeout: float, queue_sf: Callable[[np.ndarray], np.ndarray],
                       backlog_sf: Callable[[np.ndarray], np.ndarray], pause_start_rate: float,
                       pause_mean: float, pause_scv: float, response_scale: float,
                       service_atom: float | None = None) -> float:
    """``P(R > T)`` for one timeout: ``Y = R_0 + D`` on the paused clock.

    ``G(y) = P(R_0 + D > y)`` (``queue_sf`` is ``P(R_0 > t)``, ``backlog_sf`` is ``P(D > s)``
    with its atom at 0) is tabulated on ``[0, T]`` and put through :func:`paused_clock_sf`.
    """
    t, v = float(timeout), float(pause_mean)
    scales = (response_scale, v)
    grid = np.concatenate([np.linspace(0.0, t, 129)] + [s * _GRADING for s in scales])
    if service_atom is not None:   # the jump of P(R_0 > t) at a deterministic service time
        grid = np.concatenate([grid, service_atom * (1.0 + np.array([-1e-9, 1e-9]))])
    grid = np.unique(np.clip(grid, 0.0, t))
    r0 = np.asarray(queue_sf(np.maximum(grid, 1e-300)), dtype=float)
    r0[grid == 0] = 1.0
    r0_sf = _log_interpolant(grid, np.minimum.accumulate(np.clip(r0, 0.0, 1.0)))
    cells = np.unique(np.clip(np.concatenate([np.linspace(0.0, t, 2049), grid]), 0.0, t))
    d = np.minimum.accumulate(np.clip(np.asarray(backlog_sf(cells), dtype=float), 0.0, 1.0))
    d_sf = _log_interpolant(cells, d)
    y_sf = _log_interpolant(grid, np.minimum(_convolved_sf(grid, r0_sf, d_sf, cells), 1.0))
    return paused_clock_sf(t, y_sf, pause_start_rate, v, pause_scv, scales)
