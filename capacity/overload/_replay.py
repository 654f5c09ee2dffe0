"""Replay a traffic shape through the exact simulator, with or without a rate limit in front.

:func:`replay` turns a per-second rate series (Poisson arrivals within each second) or a list of
arrival times into a run of :func:`capacity.sim.simulate`; :func:`apply_rate_limit` is the
fixed-window limiter it puts in front of the service when asked.  The incident scenario
(:mod:`capacity.incident`) compares fixes with it.

Units: seconds and requests per second.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from .._checks import as_float_array, check_nonnegative, check_positive
from .._result import Result, jsonable
from ..distributions import Service
from ..units import format_rate, format_time
from ._backlog import _rates

__all__ = ["ReplayResult", "apply_rate_limit", "replay"]

ArrayLike = Any


def _poisson_seconds(rates: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Poisson arrival times at a per-second piecewise-constant rate (as capacity.sim does)."""
    counts = rng.poisson(rates)
    return np.sort(np.repeat(np.arange(rates.size, dtype=float), counts)
                   + rng.uniform(0.0, 1.0, int(counts.sum())))


def apply_rate_limit(arrivals: ArrayLike, limit: float) -> tuple[np.ndarray, np.ndarray]:
    """Fixed-window rate limiter: admit at most ``floor(limit)`` requests in each whole second.

    Parameters
    ----------
    arrivals : array_like
        Arrival times, s (non-decreasing, >= 0).
    limit : float
        Requests admitted per second (>= 0).

    Returns
    -------
    (admitted, rejected) : tuple of ndarray
        Arrival times of the admitted and of the rejected requests.

    Notes
    -----
    ``rate_limit`` before this release (``capacity.overload.rate_limit`` still works for one
    release, with a ``DeprecationWarning``).

    Examples
    --------
    >>> from capacity.overload import apply_rate_limit
    >>> ok, no = apply_rate_limit([0.1, 0.2, 0.3, 1.5], 2)
    >>> ok.tolist(), no.tolist()
    ([0.1, 0.2, 1.5], [0.3])
    """
    t = _arrival_array(arrivals)
    r = math.floor(float(check_nonnegative(limit, "limit")))
    sec = np.floor(t).astype(np.int64)
    first = np.searchsorted(sec, sec, side="left")   # index of the first arrival in the same second
    keep = (np.arange(t.size) - first) < r
    return t[keep], t[~keep]


def _arrival_array(arrivals: ArrayLike) -> np.ndarray:
    """Arrival times as a 1-d float array, refused unless finite, >= 0 and non-decreasing."""
    t = as_float_array(arrivals, "arrivals").reshape(-1) if np.ndim(arrivals) else None
    if t is None:
        raise ValueError(f"arrivals must be an array of arrival times, got {arrivals!r}")
    bad = ~np.isfinite(t) | (t < 0)
    if bad.any():
        raise ValueError(f"arrivals must be non-negative and finite, got {t[bad][0]!r}")
    dips = np.flatnonzero(np.diff(t) < 0)
    if dips.size:
        k = int(dips[0])
        raise ValueError(f"arrivals must be non-decreasing (times go backwards: {t[k]!r} then "
                         f"{t[k + 1]!r} at positions {k} and {k + 1})")
    return t


@dataclass(frozen=True, repr=False)
class ReplayResult(Result):
    """Result of :func:`replay`.

    Attributes
    ----------
    per_second : pandas.DataFrame
        The simulator's per-second table plus ``rejected`` (requests the rate
        limiter turned away in that second).
    run : capacity.sim.SimulationResult
        The simulation itself (``run.requests`` is the per-request table).
    rejected : ndarray
        Arrival times of the rejected requests, s.
    horizon : float
        Seconds of traffic replayed.
    goodput : float
        Requests answered within the timeout per second of traffic.
    timeout_fraction : float
        Share of all requests (rejected ones included) whose client timed out
        or whose request was dropped.
    explanation : str
        The answer in words (``str(result)``).

    ``to_frame()`` is ``per_second``; ``to_dict()`` holds the counts (``requests``, ``ok``,
    ``timed_out``, ``rejected`` -- a count there), ``goodput``, ``timeout_fraction``, the
    completed requests' ``max_latency`` and ``p99_latency``, and the explanation (never the rows).
    """

    per_second: pd.DataFrame
    run: Any
    rejected: np.ndarray
    horizon: float = math.nan
    goodput: float = math.nan
    timeout_fraction: float = math.nan
    explanation: str = ""

    _headline: ClassVar[tuple[str, ...]] = ("horizon", "goodput", "timeout_fraction")

    def to_frame(self) -> pd.DataFrame:
        """The per-second table (a copy)."""
        return self.per_second.copy()

    def to_dict(self) -> dict:
        """Counts, goodput, timeout fraction, worst and p99 response, and the explanation, JSON-ready."""
        out = {"horizon": self.horizon, **_outcomes(self.run, self.rejected, self.horizon),
               "timeout_fraction": self.timeout_fraction, "explanation": self.explanation}
        return jsonable(out)


def _outcomes(run: Any, rejected: np.ndarray, horizon: float) -> dict:
    """What happened to the replayed requests: the counts, goodput and the completed requests'
    worst and p99 response (the row :func:`capacity.incident.what_if` tabulates per scenario)."""
    if run.keep == "summary":  # a long run without its table (simulate's max_memory)
        digest = run._digest
        counts, n, done_n = digest.outcomes, digest.n_requests, int(digest.response.count.sum())
        return {"requests": int(n + rejected.size), "ok": counts["ok"],
                "timed_out": counts["timed_out"] + counts["dropped"], "rejected": int(rejected.size),
                "goodput": counts["ok"] / horizon, "max_latency": digest.response_max,
                "p99_latency": run.response_quantile(0.99) if done_n else math.nan}
    req = run.requests
    ok = int((req["outcome"] == "ok").sum())
    done = req["response"].to_numpy()
    done = done[~np.isnan(req["completion"].to_numpy())]
    return {
        "requests": int(len(req) + rejected.size),
        "ok": ok,
        # A client failure: timed out (the server may still finish it) or dropped by the server.
        "timed_out": int(req["outcome"].isin(["timed_out", "dropped"]).sum()),
        "rejected": int(rejected.size),
        "goodput": ok / horizon,
        "max_latency": float(done.max()) if done.size else math.nan,
        "p99_latency": float(np.quantile(done, 0.99)) if done.size else math.nan,
    }


def _replay_words(row: dict, horizon: float, processes: int, discipline: str, timeout: float,
                  limit: float | None) -> str:
    """ReplayResult.explanation."""
    setup = (f"{processes} {discipline.upper()} process{'es' if processes != 1 else ''}, "
             f"{format_time(timeout)} timeout" + (f", rate limit {format_rate(limit)}" if limit is not None else ""))
    text = (f"Replayed {row['requests']:,} requests over {format_time(horizon)} ({setup}): {row['ok']:,} "
            f"answered within the timeout ({format_rate(row['goodput'])} of goodput), {row['timed_out']:,} "
            f"timed out")
    text += f", {row['rejected']:,} rejected at once by the rate limit." if limit is not None else "."
    if not math.isnan(row["max_latency"]):
        text += (f" Completed requests: p99 response {format_time(row['p99_latency'])}, worst "
                 f"{format_time(row['max_latency'])}.")
    return text


def replay(arrivals: Any, service: Service | float, processes: int = 1, discipline: str = "ps",
           timeout: float = 30.0, on_timeout: str = "continue", servers: int = 1, *,
           limit: float | None = None, seed: Any = None, **options: Any) -> ReplayResult:
    """Replay a traffic shape through the exact simulator.

    Parameters
    ----------
    arrivals : pandas.Series or array_like
        A Series of per-second rates (requests/s, indexed 0, 1, ...; Poisson
        arrivals within each second), or an array of arrival times (s).
    service : Service or float
        CPU time per request, s.
    processes : int
        Worker processes (cluster mode), dispatched round robin.
    discipline : {"ps", "fcfs"}
        Inside each process.
    timeout : float
        Client (proxy) timeout, s (> 0).
    on_timeout : {"continue", "drop", "deadline"}
        As in :func:`capacity.sim.simulate`.
    servers : int
        Cores per process.
    limit : float, optional
        Rate limit in front of the service: at most ``floor(limit)`` requests
        admitted per second (fixed windows, :func:`apply_rate_limit`); the rest are
        rejected at once and never reach the simulator.
    seed : None, int or Generator
        Randomness of the arrivals and of the sizes.
    **options
        Passed to :func:`capacity.sim.simulate` (``dispatch``, ``retries``, ...).

    Returns
    -------
    ReplayResult
        ``per_second`` with the simulator's columns (arrivals, completions,
        goodput, timeouts, in_flight, cpu_busy, latency_p50/p99/max) plus
        ``rejected``; ``run``; ``goodput`` and ``timeout_fraction``.

    Examples
    --------
    >>> import pandas as pd
    >>> from capacity.overload import replay
    >>> r = replay(pd.Series([5.0] * 20), 0.05, seed=1)
    >>> int(r.per_second["timeouts"].sum()), r.timeout_fraction
    (0, 0.0)
    """
    # Imported here: the simulator is needed only to replay, not by the fluid laws or goodput.
    from ..sim import simulate

    rng = np.random.default_rng(seed)
    if isinstance(arrivals, pd.Series):
        rates, _ = _rates(arrivals, "arrivals")
        times = _poisson_seconds(rates, rng)
        horizon = float(rates.size)
    else:
        times = _arrival_array(arrivals)
        if times.size == 0:
            raise ValueError("arrivals must not be empty")
        horizon = float(max(math.ceil(times[-1]), 1.0))
    tau = float(check_positive(timeout, "timeout"))
    rejected = np.zeros(0)
    if limit is not None:
        times, rejected = apply_rate_limit(times, limit)
    run = simulate(times, service, discipline=discipline, servers=servers, processes=processes,
                   timeout=tau, on_timeout=on_timeout, horizon=horizon, seed=rng, **options)
    table = run.per_second.copy()
    rows = len(table)
    rej = np.bincount(np.minimum(np.floor(rejected).astype(np.int64), rows - 1), minlength=rows)
    table["rejected"] = rej
    row = _outcomes(run, rejected, horizon)
    fraction = row["timed_out"] / row["requests"] if row["requests"] else 0.0
    words = _replay_words(row, horizon, int(processes), str(discipline), tau, limit)
    return ReplayResult(table, run, rejected, horizon, row["goodput"], fraction, words)

