"""Quantiles of one kind of request in a queue that serves many kinds.

Endpoints that share one queue see the same queue, but each endpoint's requests have their own
CPU law ``S_i``.  These are the response quantiles of a request of law ``S_i`` when the queue's
own law (the mix of all kinds) is given: used by :func:`capacity.plan.endpoint_mix` (the mix of
the given endpoints) and :func:`capacity.fit.from_requests` (the fitted queue's law, each
endpoint's law fitted to its own percentiles).

*FCFS*: with Poisson arrivals a request's wait does not depend on its own size, so
``T_i = W + S_i`` and ``P(T_i > t) = E[P(W > t - S_i)]``, with ``W`` the wait of the mix
(:func:`capacity.fcfs.wait_sf`), integrated by 96-point Gauss-Legendre in the quantile of ``S_i``.

*Processor sharing, one core*: the tagged request's conditional sojourn (Ott 1984) integrated
over its own law, the others entering through the three-moment PH fit of the mix (Whitt 1982)
(:mod:`capacity._ps_tagged`).

*The mix itself* (:func:`mix_atoms`): :class:`~capacity.Service` has no mixture family, so a mix
whose whole law matters (the FCFS wait on one core) is carried as atoms of each kind's law,
spread to its exact variance -- the mean and second moment of the mix exact.

References
----------
T. J. Ott, "The sojourn-time distribution in the M/G/1 queue with processor sharing", J. Appl.
Prob. 21 (1984) 360-378.  W. Whitt, "Approximating a point process by a renewal process, I: two
basic methods", Operations Research 30 (1982) 125-147.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .distributions import Service

__all__: list[str] = []

# Gauss-Legendre nodes in the quantile variable for P(W + S_i > t) = E[P(W > t - S_i)].
_GL_U, _GL_W = np.polynomial.legendre.leggauss(96)
_GL_U, _GL_W = 0.5 * (_GL_U + 1.0), 0.5 * _GL_W


def fcfs_tagged_sf(t: np.ndarray, lam: float, mix: Service, c: int, laws: Sequence[Service]) -> np.ndarray:
    """``P(W + S_i > t_i)`` for each law in ``laws`` (``t``: one time per law; W: the wait of the
    FCFS queue of ``c`` servers with service ``mix`` at ``lam`` requests/s)."""
    return _sf_at_nodes(np.asarray(t, float), _nodes(laws), lam, mix, c)


def _nodes(laws: Sequence[Service]) -> np.ndarray:
    """Each law's quantiles at the Gauss-Legendre nodes (laws x nodes)."""
    return np.stack([np.asarray(s.ppf(_GL_U), float) for s in laws])


def _sf_at_nodes(t: np.ndarray, x: np.ndarray, lam: float, mix: Service, c: int) -> np.ndarray:
    from . import fcfs

    slack = t[:, None] - x
    return np.where(slack > 0, np.asarray(fcfs.wait_sf(np.maximum(slack, 0.0), lam, mix, c), float), 1.0) @ _GL_W


def mix_atoms(laws: Sequence[Service], weights: Sequence[float], per_law: int = 64, total: int = 2 ** 16) -> Service:
    """The mix of ``laws`` (kind ``i`` with probability ``weights[i]``) as an empirical law of
    atoms, whose Laplace transform the FCFS wait needs (:class:`Service` has no mixture family):
    a deterministic law is its one atom; any other is ``per_law`` atoms at the mid-quantiles
    ``(j + 1/2) / per_law``, spread about its mean to its exact variance (the mid-quantiles alone
    miss the tail's share of it), so the mix has the exact mean and second moment -- the
    Pollaczek-Khinchine mean wait is exact.  Weights are carried as repeat counts of the atoms
    (about ``total`` in all: a kind of weight ``w`` is off by at most ``per_law / (2 w total)``
    of itself, 0.05 % at ``w = 1``, 5 % at ``w = 0.01``)."""
    out = []
    for law, w in zip(laws, weights):
        if law.family == "deterministic":
            out.append(np.full(max(int(round(float(w) * total)), 1), float(law.mean)))
            continue
        x = np.asarray(law.ppf((np.arange(per_law) + 0.5) / per_law), float)
        mean, sd = float(law.mean), math.sqrt(float(law.variance))
        spread = x.std()
        if spread > 0:
            x = np.maximum(mean + (x - x.mean()) * (sd / spread), 0.0)
        # The same count for every atom (cutting a repeat short would drop the top atoms' copies).
        out.append(np.repeat(x, max(int(round(float(w) * total / per_law)), 1)))
    return Service.empirical(np.concatenate(out))


def _wait_sf_table(lam: float, mix: Service, c: int):
    """``P(W > t)`` of the FCFS queue as a function, from 200 log-spaced values of
    :func:`capacity.fcfs.wait_sf` up to the wait's ``1 - 1e-9`` quantile, interpolated linearly in
    ``(log t, log P)`` (the tail is near exponential there); ``P(W > 0)`` below the first point."""
    from . import fcfs

    mean = float(mix.mean)
    top = float(fcfs.wait_quantile(1.0 - 1e-9, lam, mix, c))
    grid = np.geomspace(1e-4 * mean, max(top, 2e-4 * mean), 200)
    log_sf = np.log(np.maximum(np.asarray(fcfs.wait_sf(grid, lam, mix, c), float), 1e-300))
    queued = float(fcfs.wait_sf(0.0, lam, mix, c))
    log_grid = np.log(grid)

    def sf(t: np.ndarray) -> np.ndarray:
        inside = np.exp(np.interp(np.log(np.maximum(t, grid[0])), log_grid, log_sf, right=-np.inf))
        return np.where(t <= 0, 1.0, np.where(t < grid[0], queued, inside))

    return sf, top


def fcfs_tagged_quantile(q: float, lam: float, mix: Service, c: int, laws: Sequence[Service]) -> np.ndarray:
    """The q quantile of ``W + S_i`` for each law in ``laws`` (W: the wait of the FCFS queue of
    ``c`` servers with service ``mix`` at ``lam`` requests/s; the wait's law tabulated once,
    :func:`_wait_sf_table`), by bisection in log t on ``E_S[P(W > t - S_i)]``."""
    wait_sf, top = _wait_sf_table(lam, mix, c)
    x = _nodes(laws)
    lo, hi = np.log(np.min(x, axis=1) + 1e-9), np.log(np.max(x, axis=1) + top + 1.0)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        tail = wait_sf(np.exp(mid)[:, None] - x) @ _GL_W
        lo, hi = np.where(tail > 1 - q, mid, lo), np.where(tail > 1 - q, hi, mid)
    return np.exp(0.5 * (lo + hi))


def ps_tagged_quantile(q: float, lam: float, moments: Sequence[float], laws: Sequence[Service]) -> np.ndarray:
    """The q quantile of the response of a request of each law in ``laws`` on one
    processor-sharing core whose service law has the first three ``moments`` (its PH fit), at
    ``lam`` requests/s; Illinois iterations on ``-log P(T_i > t)`` in log t from the law's own
    quantile (PS never beats the CPU time) to a bracket widened as needed."""
    from ._common import solve_increasing
    from ._ps_tagged import tagged_sf
    from .phasetype import _moment_fit

    beta, tm = _moment_fit(*moments)
    laws = list(laws)
    # Each law's own quantile bounds its response from below (kept off 0 for the log).
    own = np.maximum([float(s.ppf(q)) for s in laws], 1e-9 * moments[0])

    def log_tail(t: np.ndarray) -> np.ndarray:
        return -np.log(np.maximum(tagged_sf(t, lam, beta, tm, laws), 1e-300))

    return solve_increasing(log_tail, np.full(own.size, -math.log1p(-q)), own,
                            own * 2.0 / (1.0 - lam * moments[0]), rtol=1e-7)
