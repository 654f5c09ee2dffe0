"""From P(T > t) to quantiles of processor sharing: a safeguarded Newton solve per level, or one
grid for many levels of one queue.

:mod:`capacity.ps` evaluates the survival function and its density on a batch (its
``_SfEvaluator``: the one-core transform of :mod:`capacity._ps_transform`, the chains of
:mod:`capacity._ps_chain` and :mod:`capacity._ps_many_cores`); this module inverts it.  Both ways
work on ``F(u) = -log P(T > e^u)``, increasing in ``u = log t`` with the slope
``F'(u) = t f(t) / P(T > t)`` that comes with every evaluation.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ._common import prepare
from .distributions import Service

__all__: list[str] = []   # private: capacity.ps is the public face


def service_rows(svc: Service, shape: tuple, rows: np.ndarray) -> Service:
    """The service law of the selected flat points of a broadcast batch (parameter families)."""
    params = {k: np.broadcast_to(np.asarray(v), shape).ravel()[rows] for k, v in svc._params.items()}
    return getattr(Service, svc.family)(*params.values())


def solve_quantile(ev, target: np.ndarray, guess: np.ndarray,
                    iterations: int = 60, floor: np.ndarray | None = None, kinked: bool = False,
                    tol: float = 1e-8, quadratic_tol: float | np.ndarray = 0.0) -> np.ndarray:
    """t with -log P(T > t) = target on flat arrays (NaN target: skipped).

    Safeguarded Newton on u = log t for F(u) = -log P(T > e^u), whose slope
    F'(u) = t f(t) / P(T > t) comes from the same transform evaluations (the
    density is the inverse of the LST itself).  A bracket [lo, hi] is kept; a
    step leaving it, or a non-positive slope, falls back to bisection (or to
    widening by e^2 while one side is still open).  ``kinked`` (deterministic CPU, whose T has
    a density with jumps): once the bracket is closed, a Newton step that did not halve |F| is
    replaced by the false-position point of the bracket (kept 1 % inside it): at a kink Newton
    alone oscillates around the root with a slowly shrinking amplitude (60 iterations left one
    point of ``plan.response_curve`` 1e-6 off).  Only there: for a near-constant gamma law the
    false-position step found another root of a ringing inversion (p0.4 at utilisation 0.53
    below the one at 0.41).  ``floor``: a known ``t`` with F < 0 (the root lies above it), or None.
    Stops when a step is below ``tol`` in log t, or (where ``quadratic_tol`` > 0) when a Newton step
    is below it and below 10 x the square of the previous step: Newton is then in its quadratic
    regime and the error after the step is ~ its square (``quadratic_tol`` 1e-3: ~1e-6), which
    saves the last evaluation, whose only use would be to see a step below ``tol``.
    """
    todo = np.isfinite(target)
    u = np.log(np.where(todo, guess, 1.0))
    lo = np.full(u.shape, -np.inf)
    if floor is not None:
        lo = np.where(todo, np.log(floor), lo)
    hi = np.full(u.shape, np.inf)
    f_lo = np.full(u.shape, -np.inf)
    f_hi = np.full(u.shape, np.inf)
    f_prev = np.full(u.shape, np.inf)
    step_prev = np.full(u.shape, np.inf)
    for _ in range(iterations):
        if not todo.any():
            break
        sf, pdf = ev.both(np.exp(u), todo)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            f = -np.log(np.maximum(sf, 1e-300)) - target
            slope = np.exp(u) * pdf / np.maximum(sf, 1e-300)
            step = f / slope
        below, above = todo & (f < 0), todo & (f > 0)
        lo, f_lo = np.where(below, u, lo), np.where(below, f, f_lo)
        hi, f_hi = np.where(above, u, hi), np.where(above, f, f_hi)
        new = u - np.clip(np.where(np.isfinite(step), step, 0.0), -2.0, 2.0)
        closed = np.isfinite(lo) & np.isfinite(hi)
        stalled = kinked & closed & (np.abs(f) > 0.5 * np.abs(f_prev))
        inside = np.isfinite(step) & (slope > 0) & (new > lo) & (new < hi) & ~stalled
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            secant = np.where(np.isfinite(f_lo) & np.isfinite(f_hi), hi - f_hi * (hi - lo) / (f_hi - f_lo), np.nan)
        with np.errstate(invalid="ignore"):   # open brackets: inf - inf, not used below
            width = hi - lo
            secant = np.clip(np.where(np.isfinite(secant), secant, 0.5 * (lo + hi)), lo + 0.01 * width,
                             hi - 0.01 * width)
            fallback = np.where(closed, np.where(stalled, secant, 0.5 * (lo + hi)),
                                np.where(np.isfinite(lo), u + 2.0, u - 2.0))
        new = np.where(inside, new, fallback)
        moved = np.abs(new - u)
        done = (moved < tol) | (f == 0) | (closed & (hi - lo < 1e-12))
        if np.any(quadratic_tol > 0):
            done |= inside & (moved < quadratic_tol) & (moved <= 10.0 * step_prev ** 2)
        step_prev = np.where(todo, np.where(inside, moved, np.inf), step_prev)
        f_prev = np.where(todo, f, f_prev)
        u = np.where(todo, new, u)
        todo &= ~done
    return np.exp(u)


#: From this many levels of one queue on, the one-core transform's quantiles come from one grid
#: of P(T > t) (:func:`quantiles_on_grid`) instead of a Newton solve per level.
GRID_FROM_LEVELS = 32
#: Points of that grid in log t.
GRID_POINTS = 128


def one_queue(inp, shape: tuple) -> bool:
    """Whether every point of a broadcast batch is the same queue (arrival rate, cores and CPU
    law), so that only the level differs."""
    arrays = [inp.arrival_rate, inp.servers, *inp.service._params.values()]
    return all(np.ptp(np.broadcast_to(np.asarray(a, dtype=float), shape)) == 0 for a in arrays)


def quantiles_on_grid(inp, shape: tuple, target: np.ndarray, evaluator: Callable,
                      mean_response: Callable) -> np.ndarray | None:
    """Quantiles of many levels of one queue, ``target = -log(1 - q)`` (flat, finite), from one
    grid of ``F(u) = -log P(T > e^u)``: the two extreme levels are solved, ``F`` and its
    derivative ``F'(u) = t f(t) / P(T > t)`` (the density comes with every transform
    evaluation) are evaluated at :data:`GRID_POINTS` points of ``u = log t`` between them, and
    ``u(F)`` is read from the cubic Hermite interpolant of the inverse function (knots ``F``,
    slopes ``1 / F'``), whose error is O(h^4) in the grid step.  About 140 transform evaluations
    instead of ~7 per level.  None where the grid is not strictly increasing (the caller then
    solves each level).

    Measured against the Newton solve per level (44 levels from 1e-4 to 1 - 1e-6): H2 of scv 2-8
    at utilisation 0.05-0.95 within 1e-5 (with 256 points: the same), Erlang-3 2e-6, gamma of scv
    20 (a 16-phase fit) 6e-5; 1043 levels of H2 in 0.5-0.8 s against about 20 ms per level (21 s)
    solved one by one (``benchmarks/bench_ps.py --many-levels``).

    ``evaluator(inputs, shape)`` is capacity.ps's batch evaluator of ``P(T > t)`` and
    ``mean_response(inputs)`` its mean response, the scale of the two end solves' starting points."""
    from scipy.interpolate import CubicHermiteSpline

    svc = inp.service
    if any(np.size(v) > 1 for v in svc._params.values()):   # a table's subset: one row of each parameter
        svc = service_rows(svc, shape, np.zeros(1, dtype=int))

    def queue(n: int):
        first = np.zeros(n, dtype=int)
        return prepare(np.broadcast_to(inp.arrival_rate, shape).ravel()[first], svc,
                       np.broadcast_to(inp.servers, shape).ravel()[first])

    ends_inp = queue(2)
    ends = np.array([target.min(), target.max()])
    mean = float(np.asarray(mean_response(ends_inp))[0])
    t_ends = solve_quantile(evaluator(ends_inp, (2,)), ends, mean * np.maximum(ends, 0.05))
    u = np.linspace(np.log(t_ends[0]) - 0.01, np.log(t_ends[1]) + 0.01, GRID_POINTS)
    sf, pdf = evaluator(queue(GRID_POINTS), (GRID_POINTS,)).both(np.exp(u))
    with np.errstate(divide="ignore", invalid="ignore"):
        f = -np.log(sf)
        slope = np.exp(u) * pdf / sf
    if not (np.all(np.isfinite(f)) and np.all(np.diff(f) > 0) and np.all(slope > 0) and np.all(np.isfinite(slope))
            and f[0] <= ends[0] and f[-1] >= ends[1]):
        return None
    return np.exp(CubicHermiteSpline(f, u, 1.0 / slope)(target))
