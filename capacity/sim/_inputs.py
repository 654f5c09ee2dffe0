"""The arrival process of a simulation: a Poisson rate, a per-second rate series, or given times."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._checks import as_float_array, check_nonnegative, check_positive


def _series_arrivals(series: pd.Series, horizon: Any,
                     rng: np.random.Generator) -> tuple[np.ndarray, float, Any]:
    """Poisson arrivals at a piecewise-constant per-second rate."""
    n = len(series)
    if n == 0:
        raise ValueError("arrivals must not be an empty series of rates")
    index = series.index
    origin = None
    if isinstance(index, pd.DatetimeIndex):
        ns = index.as_unit("ns").asi8
        if n > 1 and not np.all(np.diff(ns) == 1_000_000_000):
            raise ValueError("arrivals: a rate series with a DatetimeIndex must have one row per "
                             "second (1 s frequency, increasing, no gaps)")
        origin = index[0]
    else:
        try:
            values = np.asarray(index, dtype=float)
        except (TypeError, ValueError):
            raise ValueError("arrivals: a rate series must be indexed by seconds 0, 1, 2, ... or by a "
                             "DatetimeIndex at 1 s frequency") from None
        if not np.array_equal(values, np.arange(n)):
            raise ValueError(f"arrivals: a rate series must be indexed by seconds 0, 1, ..., {n - 1} "
                             f"(or a DatetimeIndex at 1 s frequency), got index starting {values[:3]!r}")
    rates = check_nonnegative(series.to_numpy(dtype=float, na_value=np.nan), "arrivals")
    horizon = float(n) if horizon is None else float(check_positive(horizon, "horizon"))
    counts = rng.poisson(rates)
    # Given the count in a second, Poisson points are iid uniform in it.
    times = np.sort(np.repeat(np.arange(n, dtype=float), counts) + rng.uniform(0.0, 1.0, int(counts.sum())))
    if horizon < n:
        times = times[times <= horizon]
    return times, horizon, origin


def _arrival_times(arrivals: Any, horizon: Any, rng: np.random.Generator) -> tuple[np.ndarray, float | None]:
    """A Poisson stream at a constant rate over ``[0, horizon]``, or the given times, checked."""
    if np.ndim(arrivals) == 0:
        rate = float(check_nonnegative(arrivals, "arrivals"))
        if horizon is None:
            raise ValueError("horizon must be given (seconds) when arrivals is a Poisson rate, got None")
        horizon = float(check_positive(horizon, "horizon"))
        # Given their number, the points of a Poisson process on [0, T] are
        # iid uniform: exact, and free of the rounding drift of summing gaps.
        count = rng.poisson(rate * horizon)
        return np.sort(rng.uniform(0.0, horizon, count)), horizon
    times = as_float_array(arrivals, "arrivals")
    if times.ndim != 1:
        raise ValueError(f"arrivals must be a number (a rate) or a one-dimensional array of times, "
                         f"got shape {times.shape}")
    bad = ~np.isfinite(times) | (times < 0)
    if bad.any():
        raise ValueError(f"arrivals must be non-negative and finite, got {times[bad][0]!r}")
    dips = np.flatnonzero(np.diff(times) < 0)
    if dips.size:
        k = dips[0]
        raise ValueError(f"arrivals must be non-decreasing, got {times[k]!r} then {times[k + 1]!r} "
                         f"at positions {k} and {k + 1}")
    if horizon is not None:
        given = horizon
        horizon = float(check_positive(horizon, "horizon"))
        if times.size and times[-1] > horizon:
            raise ValueError(f"horizon must be at least the last arrival time {times[-1]!r}, "
                             f"got {given!r}")
    return times, horizon


def _draw_arrivals(arrivals: Any, horizon: Any, drain: bool,
                   rng: np.random.Generator) -> tuple[np.ndarray, float | None, Any]:
    """The arrival times (s), the length of the arrival window (None: up to the last
    completion) and the wall-clock time of second 0 (a rate series with a DatetimeIndex)."""
    if not drain and horizon is None and np.ndim(arrivals) != 0 and not isinstance(arrivals, pd.Series):
        raise ValueError("horizon must be given with drain=False (the run ends at horizon), got None")
    if isinstance(arrivals, pd.Series):
        return _series_arrivals(arrivals, horizon, rng)
    times, horizon = _arrival_times(arrivals, horizon, rng)
    return times, horizon, None
