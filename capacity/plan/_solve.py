"""The one solver behind every planner: SLO parsing, the forward model's tail, rate and integer search.

Every SLO "the ``q`` quantile of the response time is at most ``t``" is the statement
``P(T > t) <= 1 - q``.  ``P(T > t)`` rises with the arrival rate and falls with the number of
servers, so a ceiling is one bracketing root finder per percentile (:func:`_max_rates`, on the
tail; :func:`_max_rates_quantile`, on a quantile function for models whose quantile is primary,
like rr) and a server count is one vectorised integer search (:func:`_smallest_integer`).  Both
evaluate every percentile at every configuration in one call of the forward model.

Nothing here is public: :mod:`capacity.plan.ceiling`, :mod:`~capacity.plan.servers`,
:mod:`~capacity.plan.timeouts` and :mod:`~capacity.plan.scaling` build their answers on it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from .._checks import check_discipline, check_positive, check_quantile
from .._common import solve_increasing
from ..distributions import Service

# Relative accuracy of every solved rate.  The solver works on log(u), u = rho / (1 - rho), and
# d(lambda)/lambda = (1 - rho) d(log u), so a width of 1e-7 in log u bounds the rate error by 1e-7.
_RATE_RTOL = 1e-7
# The forward models' tail probabilities carry ~1e-9 absolute error (Euler inversion), so tail
# fractions below this cannot be resolved; planners refuse them rather than return noise.
_MIN_FRACTION = 1e-7


# ---------------------------------------------------------------------------------------------
# Inputs


def _tail_function(discipline: str, slo_on: str) -> Callable:
    """The forward model's ``sf(t, arrival_rate, service, servers)`` for the SLO."""
    from .. import fcfs, ps

    check_discipline(discipline, ("fcfs", "ps"))
    if slo_on not in ("response", "wait"):
        raise ValueError(f"slo_on must be 'response' or 'wait', got {slo_on!r}")
    if slo_on == "wait":
        if discipline != "fcfs":
            raise ValueError("slo_on='wait' needs discipline='fcfs': under processor sharing every request "
                             "starts at once, so there is no waiting time before service")
        return fcfs.wait_sf
    return ps.response_sf if discipline == "ps" else fcfs.response_sf


def _parse_slo(slo: Mapping[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles (sorted) and thresholds of an SLO mapping ``{q: seconds}``."""
    if isinstance(slo, (int, float)) or not hasattr(slo, "items") or len(slo) == 0:
        raise ValueError(f"slo must be a non-empty mapping quantile -> seconds, e.g. {{0.99: 0.5}}, got {slo!r}")
    items = sorted((float(check_quantile(q, "slo quantile")), float(check_positive(t, f"slo[{q}]")))
                   for q, t in slo.items())
    return np.array([q for q, _ in items]), np.array([t for _, t in items])


def _tail_fractions(qs: np.ndarray) -> np.ndarray:
    """``1 - q`` for each SLO quantile (exactly for ``q`` near 1), refusing fractions the forward
    models cannot resolve."""
    p = -np.expm1(np.log(qs))
    if (p < _MIN_FRACTION).any():
        raise ValueError(f"slo quantile must be at most 1 - {_MIN_FRACTION:g} (the forward models resolve "
                         f"tail fractions only down to ~1e-9), got {qs.max()!r}")
    return p


# ---------------------------------------------------------------------------------------------
# The highest arrival rate at which P(X > t_i) <= p_i for every i


def _max_rates(sf: Callable, service: Service, servers: np.ndarray, t: np.ndarray,
               p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-constraint ceilings.

    ``t`` and ``p`` have shape ``(k,)`` (one entry per constraint, ``t`` may be <= 0 for a
    constraint no load can meet).  Returns ``(rates, reason, capacity)`` where ``rates`` has
    shape ``B + (k,)`` (``B`` = broadcast shape of ``servers`` and the service parameters),
    ``reason`` is 0 (solved), 1 (threshold <= 0: the constant delay alone uses it up) or 2 (the
    constraint fails even at zero load), and ``capacity`` (shape ``B + (1,)``) is the rate at
    utilisation 1.
    """
    svc, c, shape, capacity, tt, reason = _rate_problem(service, servers, t)
    pp = np.broadcast_to(p, shape)
    # Zero load: the response is the service time alone (the wait is 0).
    at_zero = np.asarray(sf(tt, 0.0, svc, c), dtype=float)
    reason[(reason == 0) & (at_zero > pp)] = 2

    def log_tail(rate):
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(np.asarray(sf(tt, rate, svc, c), dtype=float), 1e-300))

    return _solve_rates(log_tail, np.log(pp), shape, capacity, reason), reason, capacity


def _rate_problem(service: Service, servers: np.ndarray, t: np.ndarray):
    """Broadcast setup shared by the two rate solvers: the service with a constraint axis, the
    servers, the shape, the capacity (rate at utilisation 1), thresholds made positive, and the
    reason array (1 where the threshold is <= 0, else 0 until checked)."""
    svc = service._expand(1)
    c = servers[..., None]
    mean = np.asarray(svc.mean, dtype=float)
    shape = np.broadcast_shapes(c.shape, mean.shape, t.shape)
    capacity = np.broadcast_to(c / mean, shape[:-1] + (1,))
    tt = np.broadcast_to(np.where(t > 0, t, 1.0), shape)
    reason = np.broadcast_to(np.where(t > 0, 0, 1), shape).copy()
    return svc, c, shape, capacity, tt, reason


def _solve_rates(increasing: Callable, target: np.ndarray, shape: tuple, capacity: np.ndarray,
                 reason: np.ndarray) -> np.ndarray:
    """Rates where ``increasing(rate) = target`` for the rows with ``reason == 0`` (0 elsewhere),
    solved in u = rho / (1 - rho) so the whole stable range (0, capacity) maps to (0, inf)."""
    if not (reason == 0).any():
        return np.zeros(shape)
    target = np.where(reason == 0, target, np.nan)
    u = solve_increasing(lambda u: increasing(capacity * (u / (1.0 + u))), target,
                         np.full(shape, 1e-3), np.full(shape, 1e2), log=True, rtol=_RATE_RTOL)
    return np.where(reason == 0, capacity * (u / (1.0 + u)), 0.0)


def _mm1_fcfs_rates(service: Service, servers: np.ndarray, qs: np.ndarray, t: np.ndarray,
                    p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """M/M/1 FCFS in :func:`_max_rates`' layout, in closed form: ``T ~ Exp(mu - lambda)``, so
    ``P(T > t) = 1 - q`` gives ``lambda = mu - ln(1/(1-q)) / t`` (Kleinrock 1975, section 3.2)."""
    mean = np.asarray(service.mean, dtype=float)[..., None]
    c = servers[..., None]
    shape = np.broadcast_shapes(c.shape, mean.shape, t.shape)
    with np.errstate(divide="ignore"):
        rate = 1.0 / mean - (-np.log1p(-qs)) / np.where(t > 0, t, np.nan)
    rates = np.broadcast_to(np.where(t > 0, np.maximum(rate, 0.0), 0.0), shape)
    capacity = np.broadcast_to(c / mean, shape[:-1] + (1,))
    at_zero = np.exp(-np.where(t > 0, t, 0.0) / mean)
    reason = np.broadcast_to(np.where(t <= 0, 1, np.where(at_zero > p, 2, 0)), shape)
    return rates, reason, capacity


def _max_rates_quantile(qfunc: Callable, service: Service, servers: np.ndarray, t: np.ndarray,
                        q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """As :func:`_max_rates`, but solving ``log quantile_q(lambda) = log t`` on a quantile function
    ``qfunc(q, arrival_rate, service, servers)`` (for models whose quantile is primary, like rr)."""
    svc, c, shape, capacity, tt, reason = _rate_problem(service, servers, t)
    qq = np.broadcast_to(q, shape)
    at_zero = np.asarray(qfunc(qq, np.zeros(shape), svc, c), dtype=float)
    reason[(reason == 0) & (at_zero > tt)] = 2

    def log_quantile(rate):
        return np.log(np.asarray(qfunc(qq, rate, svc, c), dtype=float))

    return _solve_rates(log_quantile, np.log(tt), shape, capacity, reason), reason, capacity


# ---------------------------------------------------------------------------------------------
# Round robin: what of the slice delay is a constant, and the rr quantile function


def _rr_additive_delay(slices: int, slice_delay: float, admission: str) -> float:
    """The part of the rr response that is a constant added to every quantile: ``(k - 1) d`` for
    ``admission="fifo"`` (exact in :mod:`capacity.rr`), none for ``"idle"`` (there the slice delay
    also changes who waits, so it goes into the rr model itself)."""
    return (slices - 1) * slice_delay if admission == "fifo" else 0.0


def _rr_quantile(slices: int, slice_delay: float = 0.0, admission: str = "fifo") -> Callable:
    """``quantile(q, rate, svc, c)`` of :func:`capacity.rr.response_quantile`.

    ``slice_delay`` is what remains of the slice delay after :func:`_rr_additive_delay` took its
    additive part off the thresholds: 0 for ``"fifo"``, the delay itself for ``"idle"``."""
    from .. import rr

    def quantile(q, rate, svc, c):
        return rr.response_quantile(q, rate, svc, c, slices=slices, slice_delay=slice_delay,
                                    admission=admission)
    return quantile


# ---------------------------------------------------------------------------------------------
# Integer search: the smallest n with ok(n)


def _smallest_integer(ok: Callable[[np.ndarray], np.ndarray], start: np.ndarray, width: int = 8) -> np.ndarray:
    """Smallest integer ``n >= start`` with ``ok(n)`` true, elementwise, for ``ok`` monotone in n.

    ``ok`` receives candidates of shape ``start.shape + (width,)`` and returns booleans of that
    shape, so each round is one forward evaluation for all points and candidates.  A galloping
    phase (offsets 1, 2, 4, ..., 2^(width-1) times a stride that grows by 2^width per round)
    brackets the answer; a ``width``-section search then narrows the bracket by a factor
    ``width + 1`` per round (and tests every integer once the gap is at most ``width + 1``).
    """
    start = np.asarray(start, dtype=np.int64)
    lo = start - 1                                   # largest n known to fail (start - 1 does)
    hi = np.full(start.shape, -1, dtype=np.int64)    # smallest n known to pass; -1: not yet found
    stride = np.ones(start.shape, dtype=np.int64)
    steps = 2 ** np.arange(width, dtype=np.int64)
    frac = np.arange(1, width + 1) / (width + 1)
    big = np.iinfo(np.int64).max
    for _ in range(64):
        open_ = hi < 0
        narrow = ~open_ & (hi - lo > 1)
        if not (open_.any() or narrow.any()):
            break
        gallop = lo[..., None] + stride[..., None] * steps
        section = lo[..., None] + np.maximum(1, np.round((hi - lo)[..., None] * frac).astype(np.int64))
        cand = np.where(open_[..., None], gallop, np.where(narrow[..., None], section, hi[..., None]))
        good = np.asarray(ok(cand), dtype=bool)
        first_good = np.min(np.where(good, cand, big), axis=-1)
        last_bad = np.max(np.where(~good, cand, lo[..., None]), axis=-1)
        found = first_good < big
        hi = np.where(found & (open_ | (first_good < hi)), first_good, hi)
        lo = np.where(open_ | narrow, np.maximum(lo, last_bad), lo)
        stride = np.where(open_ & ~found, stride * 2 ** width, stride)
    return hi
