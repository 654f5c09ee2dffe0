"""What one measurement window can show: the luck of a finite window, simulated from a fitted model.

A fit's interval for the long-run p99 says how well the data pin the model down.  A p99 *measured*
over a minute of traffic also moves with the luck of that minute's arrivals and service times: a
busy period that starts near the end of the window, or none at all.  At 80 % CPU the p99 of a
60 s window of an M/G/1 queue with 16 ms of CPU ranges 97-172 ms (5-95 %) about its long-run
129 ms.  A prediction that is to be compared with one window -- a load test, a peak minute on a
dashboard -- needs that spread next to the parameters' (:meth:`PercentileFit.predict` with
``window=``).

The spread is simulated (:func:`capacity.simulate`) from the fitted model at its estimate: Poisson
arrivals, the fitted service law, discipline, cores and round-robin settings, the fitted non-CPU
delay added to each request.  One run is cut into consecutive windows; each window's statistic
(a quantile, or the mean) is divided by the statistic of the whole run, so the spread is centred
and the model's own long-run answer stays the centre of the interval.  There is no closed form:
the asymptotic variance of a sample quantile of a correlated sequence,
``q (1 - q) tau / (n f(x_q)^2)``, needs the integrated autocorrelation ``tau`` of the tail
indicator, which no M/G/1 result gives.

Bounded: about :data:`REQUESTS_PER_LOAD` simulated requests per load (0.1-1 s), at most four times
that (plus the dropped first window) when each window must hold 50 requests above a thin tail's
quantile (p99.99 over long windows), beyond which it simulates 24 windows of ``REQUESTS_PER_LOAD /
24`` requests and scales them as below.  When a
window holds more requests than that budget allows, shorter windows are simulated and their
log-spread scaled by ``sqrt(simulated / asked)`` -- the central-limit rate of a statistic over a
window much longer than the queue's relaxation time (``E[S] / (1 - sqrt(rho))^2``, about 1.4 s at
80 % of 16 ms; the shortest window simulated holds 50 tail requests, well over a relaxation time
at the loads worth predicting).

Reference: P. W. Glynn and W. Whitt, "The asymptotic efficiency of simulation estimators",
Operations Research 40 (1992) -- the 1/sqrt(length) rate; the rest is measured by simulation.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["REQUESTS_PER_LOAD", "MAX_LOADS", "window_log_spread"]

#: Simulated requests per load, the usual cost of one spread (rr with 5 slices: about 0.6 s); a
#: thin tail may take up to four times this (see the module docstring).
REQUESTS_PER_LOAD = 200_000
#: Loads one call may ask a window's spread for (each is a simulation).
MAX_LOADS = 8
_MIN_WINDOWS, _MAX_WINDOWS = 24, 64
_TAIL_REQUESTS = 50          # a simulated window holds at least this many requests above its quantile
_MIN_REQUESTS = 20           # a window with fewer expected requests is refused


def window_log_spread(model, params: dict, stats: np.ndarray, rate: float, servers: int, window: float,
                      seed: int = 20261205) -> np.ndarray:
    """log(window statistic / long-run statistic) of each simulated window, shape (W, len(stats)).

    Parameters
    ----------
    model : capacity.fit._model.QueueModel
        The fitted model (discipline, family, delay, round-robin settings).
    params : dict
        Its natural parameters at the estimate, arrays of shape (1,) (``mean``, ``scv``, and
        ``delay`` or ``delay_mean``/``delay_scv`` when the model has a delay).
    stats : ndarray
        Quantile levels in (0, 1), or NaN for the mean.
    rate, servers
        The load: requests per second, cores.
    window : float
        Seconds of traffic the measured statistic pools.
    """
    import capacity

    from ._model import make_service

    stats = np.asarray(stats, dtype=float)
    tail = np.where(np.isnan(stats), 0.5, np.minimum(stats, 1.0 - stats))
    want = rate * window
    need = _TAIL_REQUESTS / max(float(tail.min()), 1e-9)
    per_window = max(min(want, REQUESTS_PER_LOAD / _MAX_WINDOWS), min(need, want))
    n_windows = int(np.clip(REQUESTS_PER_LOAD // per_window, _MIN_WINDOWS, _MAX_WINDOWS))
    if per_window * n_windows > 4 * REQUESTS_PER_LOAD:
        # A tail too thin for the budget (p99.99 over an hour): fewer, still sound, windows.
        per_window = REQUESTS_PER_LOAD / _MIN_WINDOWS
        n_windows = _MIN_WINDOWS
    span = per_window / rate
    service = make_service(model.family, float(params["mean"][0]), float(params["scv"][0]))
    # One window more than asked: the first starts from an empty queue and is dropped.
    run = capacity.simulate(rate, service, model.discipline, servers=int(servers),
                            horizon=span * (n_windows + 1), seed=seed, slices=int(model.slices),
                            admission=model.admission, slice_delay=float(model.slice_delay))
    frame = run.requests
    arrival = frame["arrival"].to_numpy()
    response = frame["response"].to_numpy(dtype=float)
    response = response + _delays(model, params, response.size, seed)
    keep = (arrival >= span) & np.isfinite(response)
    cell = np.minimum(((arrival[keep] - span) // span).astype(np.int64), n_windows - 1)
    response = response[keep]
    order = np.argsort(cell, kind="stable")
    cell, response = cell[order], response[order]
    parts = np.split(response, np.flatnonzero(np.diff(cell)) + 1)
    out = np.empty((len(parts), stats.size))
    pooled = np.empty(stats.size)
    for j, s in enumerate(stats):
        if math.isnan(s):
            pooled[j] = response.mean()
            out[:, j] = [p.mean() for p in parts]
        else:
            pooled[j] = np.quantile(response, s)
            out[:, j] = [np.quantile(p, s) for p in parts]
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.log(out / pooled)
    scale = math.sqrt(min(1.0, span / window))
    return np.where(np.isfinite(spread), spread * scale, 0.0)


def _delays(model, params: dict, n: int, seed: int) -> np.ndarray | float:
    """The fitted non-CPU delay of ``n`` requests: a constant, lognormal draws, or 0."""
    if model.delay == "constant":
        return float(params["delay"][0])
    if model.delay == "lognormal":
        mean, scv = float(params["delay_mean"][0]), float(params["delay_scv"][0])
        sigma2 = math.log1p(scv)
        rng = np.random.default_rng(seed + 1)
        return rng.lognormal(math.log(mean) - 0.5 * sigma2, math.sqrt(sigma2), n)
    return 0.0


def window_factors(model, params: dict, stats: np.ndarray, rates: np.ndarray, servers: np.ndarray,
                   window: float, draws: int, seed: int = 20261205) -> np.ndarray:
    """Multiplicative luck of a ``window``-second measurement, shape (draws, N), for N points.

    Point n is the statistic ``stats[n]`` (a quantile level, NaN for the mean) at
    ``rates[n]``/``servers[n]``; each column resamples the simulated windows of its load
    (:func:`window_log_spread`, one simulation per distinct load).  1 where the load is unstable
    (no window of an unstable queue has a long-run value to spread about).
    """
    loads = {}
    for n, (lam, c) in enumerate(zip(rates.tolist(), servers.tolist())):
        loads.setdefault((lam, int(c)), []).append(n)
    few = min(lam for lam, _ in loads) * window
    if few < _MIN_REQUESTS:
        raise ValueError(f"window: {window:g} s at {min(lam for lam, _ in loads):g} req/s holds about "
                         f"{few:.1f} requests; a latency measured over so few says next to nothing -- "
                         f"give a window of at least {_MIN_REQUESTS} requests")
    if len(loads) > MAX_LOADS:
        raise ValueError(f"window: a window's spread is simulated per load, at most {MAX_LOADS} loads per call; "
                         f"got {len(loads)} (ask for the interval at the loads you will measure)")
    rng = np.random.default_rng(seed)
    out = np.ones((draws, stats.size))
    mean = float(params["mean"][0])
    for (lam, c), cols in loads.items():
        if lam * mean >= c:
            continue
        levels = np.unique(stats[cols])          # NaN (the mean) sorts last and is kept once
        spread = window_log_spread(model, params, levels, lam, c, window, seed)
        for n in cols:
            j = int(np.flatnonzero(np.isnan(levels) if math.isnan(stats[n]) else levels == stats[n])[0])
            out[:, n] = np.exp(spread[rng.integers(0, spread.shape[0], draws), j])
    return out
