"""The seed article's 30-request experiment: equal requests that arrive together.

:func:`simultaneous_burst` gives their completion times under processor sharing (an event loop
interleaving them: all finish together at the end) and FCFS (one unbroken CPU block each: a
staircase); :func:`fit_staircase` reads the CPU cost per request off a measured staircase
(``data/incident_facts.toml`` holds the article's two runs).

Units: seconds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._checks import check_count, check_discipline, check_nonnegative, check_positive, check_servers
from .._result import Result
from ..units import format_time

__all__ = ["Staircase", "fit_staircase", "simultaneous_burst"]

ArrayLike = Any


def simultaneous_burst(n: int = 30, size: float = 1.0, discipline: str = "ps",
                       servers: int = 1) -> np.ndarray:
    """Completion times of ``n`` equal requests that arrive together at time 0.

    Parameters
    ----------
    n : int
        Requests (>= 1).
    size : float
        CPU time of each, s (> 0).
    discipline : {"ps", "fcfs"}
        Processor sharing (an event loop interleaving the requests, the
        seed article's "sliced" handler) or FCFS (one unbroken CPU block per
        request, its "blocking" handler).
    servers : int
        Cores.

    Returns
    -------
    ndarray
        Completion time of each request, s, in arrival order.

    Notes
    -----
    PS: with ``n >= c`` requests each is served at rate ``c/n`` and all have
    the same size, so all finish together at ``n * size / c``: nobody gets
    an answer before everybody's work is done.  FCFS: request ``k`` (1-based)
    finishes at ``ceil(k / c) * size`` -- a staircase.  The mean completion
    time is ``n size / c`` for PS and about half that for FCFS.  Exact.

    Examples
    --------
    >>> from capacity.overload import simultaneous_burst
    >>> simultaneous_burst(3, 1.0, "ps").tolist(), simultaneous_burst(3, 1.0, "fcfs").tolist()
    ([3.0, 3.0, 3.0], [1.0, 2.0, 3.0])
    """
    n = check_count(n, "n", 1)
    x = float(check_positive(size, "size"))
    discipline = check_discipline(discipline, ("ps", "fcfs"))
    c = int(check_servers(servers))
    if discipline == "ps":
        return np.full(n, x * max(n / c, 1.0))
    return np.ceil(np.arange(1, n + 1) / c) * x


@dataclass(frozen=True, repr=False)
class Staircase(Result):
    """Least-squares fit ``completion_k = offset + cost * k`` (k = 1..n) of sorted completion times.

    Attributes
    ----------
    cost : float
        The step: CPU seconds per request.
    offset : float
        Seconds before the first step (a constant start-up delay).
    max_residual : float
        The worst distance of a completion from the fitted staircase, s.
    """

    cost: float
    offset: float
    max_residual: float

    _headline: ClassVar[tuple[str, ...]] = ("cost", "offset", "max_residual")

    def __str__(self) -> str:
        return (f"The sorted completions climb {format_time(self.cost)} per request: under FCFS that step "
                f"is the CPU cost of one request. The staircase starts after an offset of "
                f"{_signed_time(self.offset)}, and no completion is more than {_signed_time(self.max_residual)} "
                f"from it.")


def _signed_time(seconds: float) -> str:
    # A least-squares residual of an exact staircase is ~1e-16 s, not 0: say 0 below a nanosecond.
    return "0 s" if abs(seconds) < 1e-9 else ("-" if seconds < 0 else "") + format_time(abs(seconds))


def fit_staircase(completions: ArrayLike) -> Staircase:
    """Fit a FCFS staircase to completion times: the per-request CPU cost is the step.

    Parameters
    ----------
    completions : array_like
        Completion times (s) of requests that arrived together, any order.

    Returns
    -------
    Staircase

    Notes
    -----
    Sorted completion times of a FCFS burst are ``k * S`` plus jitter, so the
    least-squares slope against the rank ``k`` estimates the mean CPU time
    per request (robust to a constant start-up delay, which goes into
    ``offset``).

    Examples
    --------
    >>> from capacity.overload import fit_staircase
    >>> f = fit_staircase([2.0, 1.0, 3.0])
    >>> round(f.cost, 6), round(f.offset, 6)
    (1.0, 0.0)
    >>> print(fit_staircase([1.0, 2.2, 2.9]))  # doctest: +NORMALIZE_WHITESPACE
    The sorted completions climb 950 ms per request: under FCFS that step is the CPU cost of one
    request. The staircase starts after an offset of 133 ms, and no completion is more than
    167 ms from it.
    """
    t = np.sort(check_nonnegative(completions, "completions").reshape(-1))
    if t.size < 2:
        raise ValueError(f"completions must hold at least 2 times, got {t.size}")
    k = np.arange(1, t.size + 1, dtype=float)
    cost, offset = np.polyfit(k, t, 1)
    return Staircase(float(cost), float(offset), float(np.max(np.abs(t - (offset + cost * k)))))

