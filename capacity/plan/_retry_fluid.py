"""The fluid backlog of a burst when clients retry what times out.

:func:`capacity.overload.backlog` drives the backlog with the offered work alone.  When clients
retry, every attempt that meets a delay past the timeout comes back ``timeout`` seconds later as
another attempt, up to ``retries`` times, so a burst that pushes the delay past the timeout
multiplies the attempts: with every attempt failing the work is ``(retries + 1)`` times the
first attempts', and if that is more than the cores do, the backlog never drains after the burst
has ended -- the retries hold the service overloaded (a metastable failure; Bronson et al. 2021).

Per bucket ``k`` of ``dt`` seconds: the attempts of order ``o`` (``o = 0``: first attempts at
``lambda``) that arrive while the backlog delay ``B / c`` is above the timeout fail (the share of
the bucket the linear fluid path spends above it), and return ``L = max(1, round(timeout / dt))``
buckets later as order ``o + 1``.  The work is ``sum_o A_o,k cost_k dt`` and the backlog follows
Lindley's recursion.  While the backlog is more than a timeout's worth above what the cores can
clear in the coming buckets every attempt there fails, so many buckets go at once.  A retry reads
its key like any request, so the keys refill at the rate of all attempts: a key's requests miss
until the first one for it (first attempt or retry) has been filled, ``P(miss) = exp(-p_i C(t -
fill))`` with ``C`` the cacheable attempts since the expiry (the independent reference model of
:func:`capacity.plan.cache_expiry` with the attempt rate in place of ``lambda``).  Attempts less
than ``L`` buckets apart do not depend on each other, so each block of ``L`` buckets is one
vectorised recursion.  An attempt fails or not by the fluid delay (no partial failures from the
randomness of the queue: :func:`capacity.overload.retry_fixed_points` has those, at steady
state).

Measured against an exact request-by-request simulation of a cache expiry with retries (FCFS,
``tests/test_plan_cache_expiry_sim.py``): where the retries hold the service overloaded the
simulation stays overloaded, and where they do not it recovers, at the time this recursion says
within a quarter.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..overload._backlog import _fluid_lindley, _fraction_above

__all__: list[str] = []

#: The recursion stops after this many buckets (then ``held`` says whether it was still overloaded).
_MAX_BUCKETS = 200_000
#: Longest block of buckets taken in one step while every attempt is sure to fail (bounds the
#: groups x buckets array of the miss chance).
_LONG_BLOCK = 2048


class RetryFluid(NamedTuple):
    attempts: np.ndarray     # attempts per second, per bucket
    backlog: np.ndarray      # CPU seconds queued at the end of each bucket
    failed: np.ndarray       # share of each bucket's attempts that meet a delay past the timeout
    miss: np.ndarray         # share of each bucket's attempts that miss the cache
    held: bool               # the retries keep the backlog growing after the burst: it never drains


class Keys(NamedTuple):
    """The expired keys: groups of ``weight`` (share of the cacheable requests) and ``pop`` (one
    key's share of them), the hit ratio ``h``, the fill time, and the CPU of a hit and a miss."""

    weight: np.ndarray
    pop: np.ndarray
    h: float
    fill: float
    m_hit: float
    m_miss: float


def _cost(keys: Keys, cum: np.ndarray, times: np.ndarray, t0: float, t1: np.ndarray) -> np.ndarray:
    """CPU per attempt in buckets ``[t0, t1[0]], [t1[0], t1[1]], ...``: a cacheable attempt misses
    while no cacheable attempt for its key (first or retry: a retry reads the key too) arrived
    before ``t - fill``.  ``cum`` holds the cacheable attempts since the expiry at ``times``
    (piecewise linear), so ``P(miss) = exp(-pop C(t - fill))``, averaged over each bucket exactly."""
    edges = np.concatenate([[t0], t1]) - keys.fill
    c_at = np.interp(edges, times, cum, left=0.0)               # C(u) = 0 before the expiry
    lo, hi = c_at[:-1], c_at[1:]
    # The groups come most popular first; those refilled by the bucket's start (miss chance below
    # e^-27.7 = 1e-12) add nothing, so the sum runs over the rest.
    first = int(np.searchsorted(-keys.pop * lo[0], -27.7))
    r = keys.pop[first:, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        grow = r * (hi - lo)
        avg = np.where(grow > 1e-12, (np.exp(-r * lo) - np.exp(-r * hi)) / grow, np.exp(-r * lo))
    hot = keys.weight[first:] @ avg
    miss = (1.0 - keys.h) + keys.h * hot
    return keys.m_hit + miss * (keys.m_miss - keys.m_hit), miss


def retry_backlog(keys: Keys, lam: float, servers: float, dt: float, timeout: float, retries: int,
                  first_work: np.ndarray) -> RetryFluid:
    """The fluid with retries from the expiry on, until the backlog has drained, no retry is
    pending and the first attempts alone never overload the cores again (``first_work``: their
    CPU-seconds per second per bucket without retries, an upper bound since retries refill the
    keys sooner; the steady work after it), or every attempt fails at a work that never falls
    below the cores' (``held``; then for as long as ``first_work``), or :data:`_MAX_BUCKETS`."""
    lag = max(1, int(round(timeout / dt)))
    level = timeout * servers
    steady_cost = keys.h * keys.m_hit + (1.0 - keys.h) * keys.m_miss
    held_work = lam * (retries + 1) * steady_cost      # every attempt failing, the cache warm
    size = 4 * lag + 1024
    orders = np.zeros((retries + 1, size))
    orders[0] = lam
    back, failed, miss = np.zeros(size), np.zeros(size), np.zeros(size)
    cum = np.zeros(size + 1)                          # cacheable attempts since the expiry, at bucket ends
    start, b0, held, refilled = 0, 0.0, False, False
    # Whether the first attempts overload the cores at bucket k or later (then more can fail).
    later = np.maximum.accumulate((first_work > servers)[::-1])[::-1]
    steady_over = lam * steady_cost > servers
    while start < _MAX_BUCKETS:
        # A backlog of b0 falls by at most the cores' work per bucket, so while it stays above the
        # timeout's worth every attempt fails (p = 1) and the retries are a known shift: a block of
        # many buckets is then one vectorised step (a drain of hours takes a few of them).
        sure = int((b0 - level) / (servers * dt)) - 1
        block = max(lag, min(sure, _LONG_BLOCK)) if sure > lag else lag
        if start + block + lag > size:                 # room for this block and its retries
            grow = max(size, block + lag)
            orders = np.concatenate([orders, np.zeros((retries + 1, grow))], axis=1)
            orders[0, size:] = lam
            back, failed, miss = (np.concatenate([a, np.zeros(grow)]) for a in (back, failed, miss))
            cum = np.concatenate([cum, np.zeros(grow)])
            size += grow
        end = start + block
        if block > lag:                                # all fail: order o at t is order o - 1 at t - lag
            for o in range(1, retries + 1):
                orders[o, start + lag:end] += orders[o - 1, start:end - lag]
        attempts = orders[:, start:end].sum(axis=0)
        t1 = (np.arange(start, end) + 1) * dt
        cum[start + 1:end + 1] = cum[start] + keys.h * np.cumsum(attempts) * dt
        if refilled:
            cost, miss[start:end] = np.full(block, steady_cost), 1.0 - keys.h
        else:
            times = np.arange(end + 1) * dt
            cost, miss[start:end] = _cost(keys, cum[:end + 1], times, start * dt, t1)
            # Every key back (its miss chance below 1e-12): the cost is the steady one from here.
            refilled = bool(np.min(keys.pop) * np.interp(t1[-1] - keys.fill, times, cum[:end + 1], left=0.0)
                            > 27.7)
        work = attempts * cost * dt
        net = work - servers * dt
        b = _fluid_lindley(net, b0)
        prev = np.concatenate([[b0], b[:-1]])
        p = _fraction_above(prev, net, level)
        back[start:end], failed[start:end] = b, p
        if retries:                                    # the block's last lag buckets retry after it
            orders[1:, end:end + lag] += orders[:-1, end - lag:end] * p[-lag:]
        b0, start = float(b[-1]), end
        quiet = not (later[start] if start < later.size else steady_over)
        if quiet and b0 <= 0.0 and not orders[1:, start:start + lag].any():
            break
        # Every attempt failing at the full amplification, (retries + 1) lambda, whose work is at
        # least held_work (the cost only falls, to the steady one, as keys refill): it never drains.
        if p.min() >= 1.0 and held_work >= servers and attempts.min() >= lam * (retries + 1) * (1 - 1e-9):
            held = True
        if held and start >= first_work.size:          # the table as long as the first attempts' one
            break
    attempts = orders[:, :start].sum(axis=0)
    return RetryFluid(attempts, back[:start], failed[:start], miss[:start], held)


def summary(fluid: RetryFluid, work_rate: np.ndarray, servers: float, dt: float) -> dict:
    """Peak delay, seconds past the timeout and recovery time of the fluid with retries (the
    recovery from the end of the last bucket whose work exceeded the cores; inf when held)."""
    b = fluid.backlog
    over = float(np.sum(fluid.failed) * dt)
    if fluid.held:
        return dict(peak_delay=math.inf, seconds_over_timeout=math.inf, recovery_time=math.inf)
    overloaded = np.flatnonzero(work_rate > servers)
    if overloaded.size == 0:
        return dict(peak_delay=float(b.max(initial=0.0)) / servers, seconds_over_timeout=over,
                    recovery_time=math.nan)
    last = int(overloaded[-1])
    drained = np.flatnonzero(b[last:] <= 0.0)
    recovery = float(drained[0] * dt) if drained.size else math.inf
    return dict(peak_delay=float(b.max()) / servers, seconds_over_timeout=over, recovery_time=recovery)
