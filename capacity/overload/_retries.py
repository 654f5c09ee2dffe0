"""Client retries: the effective load they create, its fixed points, and metastability.

:func:`retry_fixed_points` solves ``x = lambda * sum_{k=0}^{R} p(x)^k`` (each failed attempt is
retried up to ``R`` times, ``p`` the failed fraction of attempts from
:func:`capacity.overload.goodput`), classifies every fixed point as stable or not, and finds the
first-attempt rates with two stable states (the bistable, metastable range).

Units: seconds and requests per second.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy import optimize

from .._checks import check_count, check_nonnegative, check_positive, check_servers
from .._result import Result, jsonable
from ..distributions import Service, as_service
from ..units import format_rate
from ._goodput import goodput

__all__ = ["FixedPoint", "RetryAnalysis", "retry_fixed_points"]


@dataclass(frozen=True, repr=False)
class FixedPoint(Result):
    """One fixed point of the retry equation (see :func:`retry_fixed_points`).

    Attributes
    ----------
    load : float
        Effective arrival rate of attempts, requests/s.
    timeout_fraction : float
        Fraction of attempts that fail at that load.
    goodput : float
        Successful requests per second (``load * (1 - timeout_fraction)``).
    stable : bool
        True if the effective load returns here after a small push.
    """

    load: float
    timeout_fraction: float
    goodput: float
    stable: bool

    _headline: ClassVar[tuple[str, ...]] = ("load", "timeout_fraction", "goodput", "stable")

    def __str__(self) -> str:
        kind = "stable" if self.stable else "unstable"
        return (f"{kind} fixed point at {_attempts(self.load)}: {_share(self.timeout_fraction)} of attempts "
                f"fail, goodput {format_rate(self.goodput)}")


@dataclass(frozen=True, repr=False)
class RetryAnalysis(Result):
    """Result of :func:`retry_fixed_points`.

    Attributes
    ----------
    fixed_points : list of FixedPoint
        Every solution of ``x = lambda * sum_{k=0}^{R} p(x)^k``, in increasing load.
    bistable_range : tuple of float
        ``(low, high)``: the first-attempt rates with two stable fixed points
        (NaN, NaN if none), to the resolution of the grid.
    curve : pandas.DataFrame
        On the load grid ``x``: ``p`` (failed fraction of attempts),
        ``amplification`` (``sum_k p^k``), ``first_attempt_rate``
        (``x / amplification``, the lambda for which ``x`` is a fixed point)
        and ``excess`` (``g(x) = lambda * amplification - x``, attempts/s, at
        the analysed first-attempt rate: positive where the attempt rate
        grows, zero at the fixed points).
    explanation : str
        The answer in words (``str(result)``).

    ``to_frame()`` has one row per fixed point (the ``curve`` is its own DataFrame);
    ``to_dict()`` holds the fixed points, the bistable range and the explanation.
    """

    fixed_points: list
    bistable_range: tuple
    curve: pd.DataFrame
    explanation: str = ""

    _headline: ClassVar[tuple[str, ...]] = ("fixed_points", "bistable_range")

    def __repr__(self) -> str:
        points = ", ".join(f"{f.load:.4g} {'stable' if f.stable else 'unstable'}" for f in self.fixed_points)
        low, high = self.bistable_range
        return f"RetryAnalysis(fixed_points=[{points}], bistable_range=({low:.4g}, {high:.4g}))"

    def to_frame(self) -> pd.DataFrame:
        """One row per fixed point: ``load``, ``timeout_fraction``, ``goodput``, ``stable``."""
        return pd.DataFrame([f.to_dict() for f in self.fixed_points],
                            columns=["load", "timeout_fraction", "goodput", "stable"])

    def to_dict(self) -> dict:
        """Fixed points, bistable range and explanation, JSON-ready (the curve is ``.curve``)."""
        return {"fixed_points": [f.to_dict() for f in self.fixed_points],
                "bistable_range": jsonable(list(self.bistable_range)), "explanation": self.explanation}


def _attempts(rate: float) -> str:
    return f"{rate:,.4g} attempts/s"


def _share(p: float) -> str:
    return f"{100 * p:.3g} %"


def _retry_words(arrival_rate: float, retries: int, timeout: float, points: list, bistable: tuple) -> str:
    """RetryAnalysis.explanation: the fixed points, and whether this rate is metastable."""
    head = (f"{format_rate(arrival_rate)} of first attempts, each retried up to {retries} time"
            f"{'s' if retries != 1 else ''} after a {timeout:g} s timeout")
    listed = "; ".join(str(f) for f in points)
    many = len(points) != 1
    text = f"{head}: {len(points)} fixed point{'s' if many else ''} ({listed})."
    stable = [f for f in points if f.stable]
    if len(stable) >= 2:
        middle = next((f for f in points if not f.stable), None)
        text += (" Two stable states: the service is metastable at this rate -- a burst that pushes the "
                 "attempt rate past " + (_attempts(middle.load) if middle else "the unstable state")
                 + " leaves it in the high state after the burst has ended.")
    if math.isnan(bistable[0]):
        text += " No first-attempt rate has two stable states."
    else:
        text += (f" First-attempt rates from {format_rate(bistable[0])} to {format_rate(bistable[1])} are "
                 "metastable (to the grid's resolution; the mean-field model is optimistic about the low "
                 "state, so treat the upper end as an upper bound).")
    return text


def retry_fixed_points(arrival_rate: float, service: Service | float, timeout: float, retries: int,
                       discipline: str = "ps", on_timeout: str = "continue", queue: str = "fifo",
                       servers: int = 1, *, grid: int = 400) -> RetryAnalysis:
    """Effective load with client retries: every fixed point, its stability, and the bistable range.

    Parameters
    ----------
    arrival_rate : float
        First attempts per second, requests/s.
    service : Service or float
        CPU time per request, s (a retry costs the same again).
    timeout : float
        Client timeout per attempt, s.
    retries : int
        Retries after a failed attempt (>= 0).
    discipline, on_timeout, queue, servers
        As in :func:`goodput`.
    grid : int
        Points of the load grid scanned for sign changes (>= 20).

    Returns
    -------
    RetryAnalysis

    Notes
    -----
    With ``p(x)`` the fraction of attempts that fail when attempts arrive at
    rate ``x`` (``p = 1 - goodput(x) / x``, from :func:`goodput`), each request
    makes ``1 + p + ... + p^R`` attempts on average, so the effective load
    solves ``x = lambda * sum_{k=0}^{R} p(x)^k``.  The fixed points are the
    sign changes of ``g(x) = lambda * sum_k p(x)^k - x`` on a grid from 0 to
    ``lambda (R + 1)`` (where ``g <= 0`` always), refined by Brent's method.
    With the fluid dynamics ``dx/dt ~ g(x)`` a point is stable iff ``g``
    goes from positive to negative there.  Equivalently the fixed points
    for any ``lambda`` are where ``phi(x) = x / sum_k p(x)^k`` equals
    ``lambda``; where ``phi`` has a local maximum followed by a local minimum,
    every ``lambda`` between the two has a low stable state (few timeouts),
    an unstable middle one, and a high stable state above capacity: the
    service is *metastable* -- a burst that pushes the load past the middle
    state leaves it overloaded after the burst has ended.

    Approximations: attempts are treated as a Poisson stream (retries are
    not), ``p`` is the steady-state failure fraction at each load, and the
    retry back-off is ignored.  For PS or FCFS that keep computing,
    ``p = 1`` above capacity.  This mean-field picture is optimistic about
    the low state when the timeout is only a few service times: timeouts
    then come in synchronised waves whose retries arrive together.
    Measured (PS, 0.1 s exponential, 2 retries, no back-off, 600 s runs):
    with a 1 s timeout the predicted bistable range is (3.4, 6.9)/s, yet the
    run from empty collapsed at lambda = 4 in 3 of 3 seeds and at 3.5 in 1 of
    3; with a 5 s timeout (range (3.4, 8.8)/s) it stayed low at lambda = 4, 5
    and 6 in 3 of 3 seeds, and a 20 s burst at 20/s left it high in every
    case.  Treat the upper end of the range as an upper bound.

    References
    ----------
    N. Bronson, A. Aghayev, A. Charapko and T. Zhu, "Metastable failures in
    distributed systems", HotOS (2021).  B. Maurer, "Fail at scale", ACM
    Queue 13(8) (2015) (retry amplification).

    Examples
    --------
    PS, 0.1 s per request (capacity 10/s), 1 s timeout, two retries:

    >>> from capacity.overload import retry_fixed_points
    >>> r = retry_fixed_points(5.0, 0.1, 1.0, 2, grid=100)
    >>> [(round(f.load, 1), f.stable) for f in r.fixed_points]
    [(5.1, True), (9.7, False), (15.0, True)]
    >>> [round(v, 1) for v in r.bistable_range]   # low end: capacity / (retries + 1)
    [3.4, 6.9]
    >>> r
    RetryAnalysis(fixed_points=[5.107 stable, 9.73 unstable, 15 stable], bistable_range=(3.389, 6.919))
    """
    lam = float(check_nonnegative(arrival_rate, "arrival_rate"))
    tau = float(check_positive(timeout, "timeout"))
    r_max = check_count(retries, "retries", 0)
    grid = check_count(grid, "grid", 20)
    svc = as_service(service)
    c = int(check_servers(servers))
    cap = c / float(svc.mean)
    # Every fixed point lies below lam (R + 1); the high branch of any lam <= capacity
    # below cap (R + 1), so this grid shows the whole bistable range.
    top = max(lam, cap) * (r_max + 1) * 1.02

    def fail(x):
        x = np.asarray(x, dtype=float)
        g = np.asarray(goodput(x, svc, tau, discipline, on_timeout, queue, c), dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.clip(np.where(x > 0, 1.0 - g / np.where(x > 0, x, 1.0), 0.0), 0.0, 1.0)

    def amplification(p):
        return np.sum(p[..., None] ** np.arange(r_max + 1), axis=-1)

    x = np.linspace(top / grid, top, grid)
    # Steady-state tails are slow to evaluate within 1e-3 of capacity and p -> 1 there anyway.
    x = np.where(np.abs(x / cap - 1.0) < 1e-3, cap, x)
    p = fail(x)
    amp = amplification(p)
    g = lam * amp - x
    points = []
    if lam == 0:
        points.append(FixedPoint(0.0, float(fail(1e-9 * cap)), 0.0, True))
    else:
        sign = np.sign(g)
        idx = np.flatnonzero(sign[:-1] * sign[1:] < 0)
        # g at 0+ is lam * amp > 0, so the first grid point starts positive unless a root lies below it.
        for i in idx:
            a, b = x[i], x[i + 1]
            fa = g[i]
            if p[i + 1] - p[i] > 0.5:  # a jump of p (at capacity): the root sits at the jump
                root = b if abs(g[i + 1]) < abs(fa) else a
            else:
                root = optimize.brentq(lambda z: lam * float(amplification(fail(z))) - z, a, b,
                                       xtol=1e-10 * top)
            pr = float(fail(root))
            points.append(FixedPoint(float(root), pr, float(root * (1 - pr)), bool(g[i] > 0)))
    phi = x / amp
    lam_grid = np.linspace(phi.min(), phi.max(), 2 * grid)
    crossings = np.sum(np.diff(np.sign(phi[:, None] - lam_grid[None, :]), axis=0) != 0, axis=0)
    multi = lam_grid[crossings >= 3]
    bistable = (float(multi.min()), float(multi.max())) if multi.size else (math.nan, math.nan)
    curve = pd.DataFrame({"load": x, "p": p, "amplification": amp, "first_attempt_rate": phi, "excess": g})
    return RetryAnalysis(points, bistable, curve, _retry_words(lam, r_max, tau, points, bistable))

