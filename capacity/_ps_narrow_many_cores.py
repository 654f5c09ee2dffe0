"""Processor sharing on c > 1 cores with nearly constant CPU times (gamma or lognormal, scv below
0.04): the response read between deterministic CPU and the same law at scv 0.04 (used by
:mod:`capacity.ps`; approximation).

Why not the M/G/c-PS computation of :mod:`capacity._ps_many_cores`: it carries the tagged
request's CPU law as a phase-type fit of at most 16-20 phases, which cannot follow a law this narrow,
and its quantiles fell far below the truth -- gamma scv 0.0106 on 4 cores at utilisation 0.8
(E[S] = 1): p50 / p90 / p99 / p99.9 of 0.996 / 1.29 / 2.90 / 4.95 against 1.37 / 3.08 / 5.68 /
8.53 in exact PS simulation.  The rule (``log t`` linear in the coefficient of variation)::

    log t_q(cv) = (1 - w) log t_q(deterministic) + w log t_q(scv 0.04),   w = sqrt(scv / 0.04),

both ends computed by :mod:`capacity.ps` (deterministic CPU by its extra-delay path, scv 0.04 from
the M/G/c-PS tables or directly).  Why cv: the response's spread about the knee (the request served
alone) scales with the CPU time's standard deviation, as for FCFS below its tables
(:func:`capacity._quantile_table._fcfs_below_table`).  The M/G/c-PS tables' rows below scv 0.04 are
this rule (``tools/build_quantile_tables.py``), so the points they hold are read from them (above
their top utilisation, 0.991, through one core's table from scv 0.01); this module answers the
others (scv below 0.01 above 0.991, utilisation above 0.999, more cores than the largest table).

Against exact PS simulation (1-1.5e6 requests, E[S] = 1 s; 99 % batch-means half-widths in
brackets; the first and last rows are in ``tests/test_ps_many_cores.py``)::

    law                 c  rho   p50            p90            p99            p99.9
    gamma scv 0.01      4  0.8   -0.6 (0.7) %   +1.2 (1.6) %   +3.0 (3.3) %   +3.3 (7.0) %
    gamma scv 0.0106    4  0.95  -2.3 (4.1) %   -2.1 (8.8) %   -0.2 (11) %    -0.3 (8.7) %
    gamma scv 0.02      4  0.5   -1.5 (0.1) %   +2.0 (0.3) %   +3.0 (1.0) %   +2.7 (2.5) %
    lognormal scv 0.0155 4 0.9   -1.8 (1.5) %   -0.2 (3.4) %   +5.2 (6.0) %   +9.0 (8.3) %
    lognormal scv 0.02  8  0.6   -1.2 (0.1) %   +2.5 (0.2) %   +7.7 (0.9) %   +9.5 (2.8) %

High in the tails, where the law at scv 0.04 is itself a few per cent high on many cores
(lognormal, 16 cores, rho 0.8: p99 +4.7 %, p99.9 +5.5 %).
"""
from __future__ import annotations

import numpy as np

from ._common import prepare
from ._quantile_table import MANY_CORES_NEAR_CONSTANT_BELOW, Z, solve_level
from .distributions import Service

__all__: list[str] = []

_FAMILIES = ("gamma", "lognormal")


def narrow(inp, shape: tuple) -> np.ndarray | None:
    """Flat mask of the points (of a broadcast batch) with nearly constant gamma or lognormal CPU on
    several cores; None when there are none."""
    if inp.service.family not in _FAMILIES:
        return None
    scv = np.broadcast_to(np.asarray(inp.service._params["scv"], dtype=float), shape).ravel()
    servers = np.broadcast_to(inp.servers, shape).ravel()
    mask = (servers > 1) & (scv < MANY_CORES_NEAR_CONSTANT_BELOW * (1 - 1e-9))
    return mask if mask.any() else None


def _law(inp, shape: tuple, mask: np.ndarray) -> Service:
    """The CPU-time law of the chosen points (flat)."""
    flat = lambda v: np.broadcast_to(np.asarray(v, dtype=float), shape).ravel()[mask]  # noqa: E731
    return getattr(Service, inp.service.family)(flat(inp.service._params["mean"]), flat(inp.service._params["scv"]))


def _rule(inp, shape: tuple, mask: np.ndarray, ps_quantile):
    """``log_t(q, rows)``: the rule's log t_q at rows ``rows`` of the chosen points (flat), both
    ends by ``ps_quantile`` (:func:`capacity.ps.response_quantile`, passed in: no import circle)."""
    lam = np.broadcast_to(np.asarray(inp.arrival_rate, dtype=float), shape).ravel()[mask]
    servers = np.broadcast_to(inp.servers, shape).ravel()[mask]
    law = _law(inp, shape, mask)
    mean, scv = law._params["mean"], law._params["scv"]
    w = np.sqrt(scv / MANY_CORES_NEAR_CONSTANT_BELOW)

    def log_t(q: np.ndarray, rows: np.ndarray) -> np.ndarray:
        m = mean[rows]
        anchor = getattr(Service, inp.service.family)(m, np.full(rows.size, MANY_CORES_NEAR_CONSTANT_BELOW))
        t_det = np.asarray(ps_quantile(q, lam[rows], Service.deterministic(m), servers[rows]), dtype=float)
        t_anchor = np.asarray(ps_quantile(q, lam[rows], anchor, servers[rows]), dtype=float)
        return (1.0 - w[rows]) * np.log(t_det) + w[rows] * np.log(t_anchor)

    return log_t


def quantile(q: np.ndarray, inp, shape: tuple, mask: np.ndarray, ps_quantile) -> np.ndarray:
    """``t_q`` (seconds) at the points ``mask`` (flat) of the batch; ``q`` over those points."""
    log_t = _rule(inp, shape, mask, ps_quantile)
    # Never below the CPU time's own quantile (PS never beats it), which the rule does not promise.
    return np.maximum(np.exp(log_t(q, np.arange(q.size))), _law(inp, shape, mask).ppf(q))


def sf(t: np.ndarray, inp, shape: tuple, mask: np.ndarray, ps_quantile, iterations: int = 12) -> np.ndarray:
    """``P(T > t)`` at the points ``mask`` (flat), ``t`` (seconds) over those points: the level
    whose :func:`quantile` is ``t``, bracketed on the tables' levels (q 0.001 to 1 - 1e-6) and
    refined by Illinois steps.  Below the first level's time 0.999, beyond the last the last two
    levels' slope in ``(log t, z)`` continued; never below the CPU time's own ``P(S > t)``
    (T >= S).  Costs 40 quantiles of each end per point: for the few points off the tables."""
    rule = _rule(inp, shape, mask, ps_quantile)
    n = t.size
    levels = -np.expm1(-np.exp(Z))

    def log_t(z: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return rule(-np.expm1(-np.exp(z)), rows)

    all_rows = np.repeat(np.arange(n), Z.size)
    nodes = log_t(np.tile(Z, n), all_rows).reshape(n, Z.size)
    nodes = np.maximum.accumulate(nodes, axis=1)          # the ends' solvers' noise, ~1e-9
    with np.errstate(divide="ignore"):
        target = np.log(t)
    z = solve_level(lambda x, rows: log_t(x, rows) - target[rows], Z, nodes - target[:, None], iterations)
    out = np.exp(-np.exp(z))
    below = target < nodes[:, 0]
    out[below] = 1.0 - levels[0]
    above = target > nodes[:, -1]
    if above.any():
        # Beyond q = 1 - 1e-6: the last two levels' slope in (log t, z) continued.
        slope = (Z[-1] - Z[-2]) / np.maximum(nodes[above, -1] - nodes[above, -2], 1e-12)
        out[above] = np.exp(-np.exp(Z[-1] + slope * (target[above] - nodes[above, -1])))
    return np.maximum(out, _law(inp, shape, mask).sf(t))


def _subset(inp, shape: tuple, mask: np.ndarray):
    """The queue inputs of the points ``mask`` (flat)."""
    lam = np.broadcast_to(np.asarray(inp.arrival_rate, dtype=float), shape).ravel()[mask]
    return prepare(lam, _law(inp, shape, mask), np.broadcast_to(inp.servers, shape).ravel()[mask])


def direct_quantile(qb: np.ndarray, inp, shape: tuple, stable: np.ndarray, direct, ps_quantile) -> np.ndarray:
    """``direct(qb, inp, shape, stable)`` (the M/G/c-PS computation) with the nearly constant
    points on several cores answered by :func:`quantile` instead."""
    mask = narrow(inp, shape)
    if mask is None:
        return direct(qb, inp, shape, stable)
    mask = mask & np.broadcast_to(stable, shape).ravel()
    out = np.full(int(np.prod(shape)), np.nan)
    qf = np.broadcast_to(qb, shape).ravel()
    out[mask] = quantile(qf[mask], inp, shape, mask, ps_quantile)
    others = ~mask
    if others.any():
        sub = _subset(inp, shape, others)
        out[others] = np.asarray(direct(qf[others], sub, sub.shape, sub.stable), dtype=float)
    return out.reshape(shape)


def direct_sf(t: np.ndarray, inp, shape: tuple, direct, ps_quantile) -> np.ndarray:
    """``direct(t, inp, shape)`` (P(T > t) of the M/G/c-PS computation) with the nearly constant
    points on several cores answered by :func:`sf` instead."""
    mask = narrow(inp, shape)
    if mask is None:
        return direct(t, inp, shape)
    stable = np.broadcast_to(inp.stable, shape).ravel()
    tf = np.broadcast_to(t, shape).ravel()
    mask = mask & stable & (tf > 0)
    out = np.full(tf.size, np.nan)
    if mask.any():
        out[mask] = sf(tf[mask], inp, shape, mask, ps_quantile)
    others = ~mask
    if others.any():
        sub = _subset(inp, shape, others)
        out[others] = np.asarray(direct(tf[others], sub, sub.shape), dtype=float)
    return out.reshape(shape)
