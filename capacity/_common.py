"""Pieces shared by the queue-formula modules: input preparation and a
vectorised quantile solver."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ._checks import check_broadcast, check_nonnegative, check_servers
from .distributions import Service, as_service

__all__ = ["QueueInputs", "prepare", "solve_increasing"]


class QueueInputs:
    """Validated, broadcast inputs of an open queue.

    Attributes
    ----------
    arrival_rate : ndarray  (requests/s, >= 0)
    service : Service
    servers : ndarray of int64 (>= 1)
    utilization : ndarray  rho = arrival_rate * E[S] / servers
    shape : tuple  broadcast shape of arrival_rate, servers and the service parameters
    """

    def __init__(self, arrival_rate, service, servers=1):
        self.arrival_rate = check_nonnegative(arrival_rate, "arrival_rate")
        self.service: Service = as_service(service)
        self.servers = check_servers(servers)
        self.mean_service = np.asarray(self.service.mean, dtype=float)
        self.shape = check_broadcast(arrival_rate=self.arrival_rate, servers=self.servers, service=self.mean_service)
        self.offered_load = self.arrival_rate * self.mean_service
        self.utilization = self.offered_load / self.servers
        self.stable = self.utilization < 1



def prepare(arrival_rate, service, servers=1) -> QueueInputs:
    """Validate and broadcast ``arrival_rate``, ``service`` and ``servers``."""
    return QueueInputs(arrival_rate, service, servers)


def solve_increasing(func: Callable[[np.ndarray], np.ndarray], target: np.ndarray,
                     lo: np.ndarray, hi: np.ndarray, *, log: bool = True,
                     iterations: int = 200, rtol: float = 1e-12) -> np.ndarray:
    """Solve ``func(x) = target`` elementwise for an increasing ``func``.

    A vectorised bracketing solver (the Illinois variant of regula falsi,
    falling back to bisection), working on ``log x`` when ``log`` is true so
    that brackets spanning many orders of magnitude converge quickly.  The
    bracket ``[lo, hi]`` is widened (doubled in x, or halved for ``lo``)
    until it contains the root.  ``func`` receives an array of the broadcast
    shape and must return the same shape.  Elements whose target is not
    finite give NaN.
    """
    target, lo, hi = np.broadcast_arrays(np.asarray(target, float), np.asarray(lo, float),
                                         np.asarray(hi, float))
    lo, hi = lo.copy(), hi.copy()
    fwd = (lambda u: np.exp(u)) if log else (lambda u: u)
    inv = (lambda x: np.log(x)) if log else (lambda x: x)
    a, b = inv(lo), inv(hi)
    fa = func(fwd(a)) - target
    fb = func(fwd(b)) - target
    # Widen the bracket until it holds the root (at most 60 doublings each way).
    for _ in range(60):
        low_bad = fa > 0
        high_bad = fb < 0
        if not (low_bad.any() or high_bad.any()):
            break
        step = np.log(2.0) * 8 if log else np.maximum(np.abs(b - a), 1.0)
        a = np.where(low_bad, a - step, a)
        b = np.where(high_bad, b + step, b)
        if low_bad.any():
            fa = np.where(low_bad, func(fwd(a)) - target, fa)
        if high_bad.any():
            fb = np.where(high_bad, func(fwd(b)) - target, fb)
    side = np.zeros(a.shape, dtype=int)
    x = 0.5 * (a + b)
    for _ in range(iterations):
        # Illinois: halve the stale end's value so regula falsi keeps shrinking both sides.
        denom = fb - fa
        with np.errstate(invalid="ignore", divide="ignore"):
            x = np.where(denom != 0, b - fb * (b - a) / denom, 0.5 * (a + b))
        bad = ~np.isfinite(x) | (x <= np.minimum(a, b)) | (x >= np.maximum(a, b))
        x = np.where(bad, 0.5 * (a + b), x)
        fx = func(fwd(x)) - target
        right = fx > 0
        b_new = np.where(right, x, b)
        fb_new = np.where(right, fx, np.where(side == -1, 0.5 * fb, fb))
        a_new = np.where(right, a, x)
        fa_new = np.where(right, np.where(side == 1, 0.5 * fa, fa), fx)
        side = np.where(right, 1, -1)
        a, b, fa, fb = a_new, b_new, fa_new, fb_new
        width = np.abs(b - a)
        scale = np.maximum(np.abs(x), 1.0) if not log else 1.0
        if np.all((width <= rtol * scale) | (fx == 0) | ~np.isfinite(target)):
            break
    out = fwd(x)
    return np.where(np.isfinite(target), out, np.nan)


def progress_ticker(progress: Callable[[int, int], object] | None, total: int) -> Callable[[], None]:
    """A step counter calling ``progress(done, total)`` (nothing without ``progress``)."""
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], total)
    return tick
