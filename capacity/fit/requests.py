"""Fit the CPU cost and service-time distribution from per-request logs (time, duration, endpoint).

:func:`from_requests` reads the log (:mod:`._inputs`: columns, arrival times, windows, load
bins), fits the load bins with :func:`~capacity.fit.from_percentiles` (the other layers), and
adds the log's own caveats (:mod:`._diagnostics`), overall and per endpoint.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from .._deprecation import renamed_parameters
from ..exceptions import CapacityWarning, FitWarning
from . import _diagnostics as diag
from . import _endpoint_shares as shares
from ._inputs import RequestLog, check_request_options, load_bins, read_request_log, window_seconds, windows
from ._result import FitResult
from .percentiles import PercentileFit, from_percentiles

__all__ = ["RequestsFit", "from_requests"]

_ENDPOINT_COLUMNS = ["endpoint", "requests", "share", "cpu_per_request", "scv", "rms_rel_error", "status"]


class RequestsFit(FitResult):
    """Result of :func:`from_requests`.

    Attributes
    ----------
    windows_ : pandas.DataFrame
        One row per ``window``: ``start`` (s, epoch for datetimes),
        ``requests``, ``qps``, latency percentiles, ``max`` (by arrival time).
    bins_ : pandas.DataFrame
        The load bins the fit used (of ``fit_window`` windows): QPS range,
        windows, requests, pooled ``arrival_rate``, ``dispersion`` (window
        count variance over its Poisson value) and percentiles.
    fit_ : PercentileFit or None
        The joint :func:`from_percentiles` fit over the bins (None when the
        data were too thin to fit).
    endpoint_fits_ : dict of str to PercentileFit
        With ``endpoint_queue="own"``: one fit per endpoint with enough
        requests, each as a queue of its own (empty otherwise).
    endpoints_ : pandas.DataFrame
        Tidy per-endpoint summary (requests, share, CPU per request, scv,
        ``rms_rel_error`` of its percentiles, status).
    service_, cpu_per_request_, scv_, delay_, capacity_qps_
        From ``fit_`` (NaN/None without a fit).
    """

    def predict(self, q, arrival_rate):
        """Latency quantile(s) at ``arrival_rate`` from the overall fit (see PercentileFit.predict)."""
        if self.fit_ is None:
            raise ValueError("no fit: the log was too thin (see warnings_)")
        return self.fit_.predict(q, arrival_rate)

    def _description(self) -> dict:
        return {"load_bins": len(self.bins_), "endpoints": self.endpoints_}


def _fit_quiet(recs, kwargs):
    """from_percentiles with its warnings captured (they are re-recorded on the RequestsFit)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = from_percentiles(recs, **kwargs)
    return fit, [(w.category, str(w.message)) for w in caught if issubclass(w.category, CapacityWarning)]


@renamed_parameters(latency="timing")
def from_requests(
    df: pd.DataFrame,
    *,
    window: str | float = "1s",
    fit_window: str | float = "1min",
    time_is: str = "end",
    timing: str = "duration",
    servers: int = 1,
    discipline: str | None = None,
    family: str | None = None,
    delay: str | float | None = "auto",
    quantiles=(0.5, 0.9, 0.99, 0.999),
    bins: int = 4,
    by_endpoint: bool | None = None,
    endpoint_queue: str = "shared",
    min_requests: int = 2000,
    time_column: str | None = None,
    duration_column: str | None = None,
    endpoint_column: str | bool | None = None,
    confidence: float = 0.95,
    **fit_kwargs: Any,
) -> RequestsFit:
    """Fit the queue model to a per-request log: windows -> load bins -> :func:`from_percentiles`.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per request, as returned by :func:`capacity.logs.read_requests`
        (``time``, ``duration``, optional ``endpoint``, ``upstream_time``) or
        :func:`capacity.logs.read_nginx` (``time``, ``request_time``, ``path``,
        ``upstream_response_time``).  Times are datetimes or float seconds.
    window : str or float, default "1s"
        Window length of the per-window QPS/percentile table ``windows_`` (a
        pandas duration string or seconds).
    fit_window : str or float, default "1min"
        Window length used to sort time into load bins for the fit (at least
        ``window``); see Notes for why it is longer than one second.
    time_is : {"end", "start"}, default "end"
        Whether the time stamps a request's completion (nginx, and most access
        logs, write the line when the request finishes; then arrival = time -
        duration) or its arrival.
    timing : {"duration", "upstream"}, default "duration"
        Which latency to model: the whole request, or the upstream (backend)
        time -- with an nginx log in front of the application, the latter is
        the application's own response time.  Formerly ``latency``.
    servers, discipline, family, delay
        As in :func:`from_percentiles`.
    quantiles : sequence of float
        Percentiles taken per load bin (a bin uses only those with at least
        10 requests above them).
    bins : int, default 4
        Load bins: windows are grouped by their QPS into ``bins`` groups of
        equal window count (fewer when QPS takes few values); each bin pools
        its requests into one observation at its mean rate.
    by_endpoint : bool, optional
        Also fit each endpoint (default: when an endpoint column exists and
        has more than one value).
    endpoint_queue : {"shared", "own"}, default "shared"
        How the endpoints are served: ``"shared"``, by the one queue fitted
        to all requests (one process's log: each endpoint's CPU law is what,
        served by that queue, gives its latencies -- see Notes); ``"own"``,
        each by a queue of its own (a log that pools separate services),
        each fitted alone.
    min_requests : int, default 2000
        Endpoints with fewer requests are not fitted (listed as skipped).
    time_column, duration_column, endpoint_column : str, optional
        Override the column detection; ``endpoint_column=False`` ignores endpoints.
    confidence : float
        Interval coverage.
    **fit_kwargs
        Passed to :func:`from_percentiles` (``scv``, ``max_nfev``, and for
        ``discipline="rr"`` ``slices`` and ``admission``); not
        ``utilization`` (one value cannot describe every load bin).

    Returns
    -------
    RequestsFit
        ``windows_``, ``bins_``, ``fit_``, ``endpoint_fits_``, ``endpoints_``,
        ``summary``, ``print_summary()``, ``predict``.

    Warns
    -----
    FitWarning, IdentifiabilityWarning
        Those of the underlying fits (prefixed with the endpoint), rows
        without a duration, windows short compared with the latencies, too
        few requests to fit, endpoints skipped.

    Notes
    -----
    Each bin is treated as a steady state of the queue at the bin's mean
    rate: the requests arriving in ``fit_window`` windows of similar QPS are
    pooled and their percentiles fitted jointly across bins (several loads
    make CPU time and non-CPU delay separable).  This needs windows long
    compared with the response times (the queue forgets its past within a
    window; a median latency above 10 % of the window triggers a warning)
    and long enough that the count in a window measures the rate rather than
    Poisson noise.  Measured on the synthetic log of the tests (40 ms
    lognormal CPU, rate stepping 5/10/15/20 req/s): bins of 1 s windows
    misestimate the cost by -5 % (and the fit warns of large residuals),
    10 s and 60 s windows by under 0.2 %.  The price of long windows: bursts
    shorter than ``fit_window`` (a 20 req/s second each minute) are averaged
    away, and the Poisson model at the average rate then understates their
    queueing.  A bin whose windows' counts vary far more than Poisson noise
    (it pools different loads, e.g. ``bins=1`` on a varying rate) is
    reported with a FitWarning.

    Endpoints that share one process share its queue: a 1 ms static file on
    an event loop that runs 40 ms API calls is slowed as much as they are.
    With ``endpoint_queue="shared"`` each endpoint's mean CPU is its mean
    latency less the fitted queue's wait (FCFS) or divided by its slowdown
    (processor sharing; round robin taken as PS), and its scv the one whose
    tagged-request percentiles on that queue match its own per bin
    (:mod:`capacity.fit._endpoint_shares`); the table feeds
    :func:`capacity.plan.endpoint_mix`.  Measured on simulated logs of a 40 ms
    API and 1 ms static files: the means within 3 % under PS and FCFS,
    where a queue of its own per endpoint read the static file at 3.8 times
    its cost.  ``endpoint_fits_`` holds per-endpoint fits only with
    ``endpoint_queue="own"``.

    The n_requests behind each bin feed the intervals of
    :func:`from_percentiles` (delta method; optimistic because latencies of
    neighbouring requests are correlated).

    Examples
    --------
    A synthetic log: an M/G/1 FCFS server with 40 ms lognormal CPU (scv 1)
    at 5, 10 and 15 req/s, stamped at completion like nginx does:

    >>> import numpy as np, pandas as pd
    >>> from capacity import Service
    >>> from capacity.sim import simulate
    >>> from capacity.fit import from_requests
    >>> rates = pd.Series(np.repeat([5.0, 10.0, 15.0], 4000))
    >>> req = simulate(rates, Service.lognormal(0.04, 1.0), "fcfs", seed=1).requests
    >>> log = pd.DataFrame({"time": req["completion"], "duration": req["response"]})
    >>> res = from_requests(log, discipline="fcfs", bins=3)
    >>> abs(res.cpu_per_request_ / 0.04 - 1) < 0.03
    True
    """
    qs = check_request_options(df, time_is, timing, bins, min_requests, quantiles, fit_kwargs)
    width = window_seconds(window)
    fit_width = max(window_seconds(fit_window), width)
    log = read_request_log(df, time_is, timing, time_column, duration_column, endpoint_column)
    if by_endpoint is None:
        by_endpoint = log.endpoints is not None and pd.unique(log.endpoints).size > 1
    elif by_endpoint and log.endpoints is None:
        raise ValueError("by_endpoint=True but df has no endpoint column")
    if endpoint_queue not in ("shared", "own"):
        raise ValueError(f"endpoint_queue must be 'shared' or 'own', got {endpoint_queue!r}")
    fit_args = dict(servers=servers, discipline=discipline, family=family, delay=delay,
                    confidence=confidence, **fit_kwargs)

    def fit_subset(arrival, latency):
        return _fit_subset(arrival, latency, width, fit_width, qs, int(bins), fit_args)

    table, bin_table, fit, caught, req_bin = fit_subset(log.arrival, log.latency)
    res = RequestsFit(
        (fit.model if fit is not None else "no fit")
        + f"; {len(bin_table)} load bins of {fit_width:g} s windows",
        confidence_level=confidence, n_observations=log.arrival.size,
        method=("from_percentiles over load bins" + (f"; {fit.method}" if fit is not None else "")),
    )
    res.windows_, res.bins_, res.fit_ = table, bin_table, fit
    for category, message in diag.log_warnings(log, timing, fit_width) + caught:
        res._warn(category, message)
    _adopt(res, fit, bin_table)
    res.endpoint_fits_ = {}
    rows = []
    if by_endpoint and endpoint_queue == "own":
        rows = _fit_endpoints(res, log, fit_subset, min_requests)
    elif by_endpoint:
        rows = _shared_endpoints(res, log, req_bin, qs, min_requests)
    res.endpoints_ = pd.DataFrame(rows, columns=_ENDPOINT_COLUMNS)
    if len(res.endpoints_):
        res._add_table("endpoints", res.endpoints_)
    res._emit_warnings(stacklevel=4)   # 4: through the renamed_parameters wrapper to the caller
    return res


# ---------------------------------------------------------------------- pipeline steps
def _fit_subset(arrival, latency, width: float, fit_width: float, qs, bins: int, fit_args: dict):
    """Windows, load bins and their joint fit for some requests: ``(windows, bins, fit or None,
    [(category, message), ...], each request's bin)``."""
    table, _ = windows(arrival, latency, width, qs)
    coarse, k = windows(arrival, latency, fit_width, qs)
    bin_table, recs, req_bin = load_bins(coarse, k, latency, fit_width, bins, qs)
    notes = diag.mixed_bin_warnings(bin_table)
    if not recs:
        return table, bin_table, None, notes + [(FitWarning, "too few requests for any percentile")], req_bin
    try:
        fit, caught = _fit_quiet(recs, fit_args)
    except ValueError as exc:
        return table, bin_table, None, notes + [(FitWarning, f"cannot fit: {exc}")], req_bin
    return table, bin_table, fit, notes + caught, req_bin


def _adopt(res: RequestsFit, fit: PercentileFit | None, bin_table) -> None:
    """The overall fit's parameters, quality and tables become the log fit's own."""
    if fit is None:
        res.service_, res.cpu_per_request_, res.scv_ = None, math.nan, math.nan
        res.delay_, res.capacity_qps_ = None, math.nan
        return
    for name, row in fit.summary.iterrows():
        res._add_parameter(name, row["estimate"], row["lower"], row["upper"], unit=row["unit"],
                           note=row["note"])
    for name, value in fit.fit_quality_.items():
        res._set_quality(name, value)
    res._add_table("load bins", bin_table)
    res._add_table("observed vs model", fit.comparison_)
    res.service_, res.cpu_per_request_, res.scv_ = fit.service_, fit.cpu_per_request_, fit.scv_
    res.delay_, res.capacity_qps_ = fit.delay_, fit.capacity_qps_


def _endpoint_codes(log: RequestLog) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Each request's endpoint code, the names, and the requests per endpoint."""
    # Group by integer codes: an array of str (astype(str)) sizes every row to the longest value,
    # and one 100 kB URL in a million-row log asked for 74 GiB.
    codes, uniques = pd.factorize(log.endpoints, use_na_sentinel=False)
    names = [str(u) for u in uniques]
    return codes, names, np.bincount(codes, minlength=len(names))


def _endpoint_rows(res: RequestsFit, names: list[str], counts: np.ndarray, min_requests: int, fill) -> list[dict]:
    """Rows of ``endpoints_``, busiest endpoint first: those under ``min_requests`` requests marked
    skipped (and warned of), the others passed to ``fill(code, name, row)`` to fit."""
    total = counts.sum()
    rows, skipped = [], []
    for code in sorted(range(len(names)), key=lambda i: (-counts[i], names[i])):
        name, n = names[code], counts[code]
        row = {"endpoint": name, "requests": int(n), "share": n / total, "cpu_per_request": math.nan,
               "scv": math.nan, "rms_rel_error": math.nan, "status": ""}
        if n < min_requests:
            row["status"] = f"skipped: {n} < min_requests={min_requests}"
            skipped.append(name)
        else:
            fill(code, name, row)
        rows.append(row)
    for category, message in diag.skipped_endpoint_warnings(skipped, min_requests):
        res._warn(category, message)
    return rows


def _shared_endpoints(res: RequestsFit, log: RequestLog, req_bin: np.ndarray, quantiles,
                      min_requests: int) -> list[dict]:
    """Rows of ``endpoints_``: each endpoint's CPU law on the queue fitted to all requests
    (:mod:`._endpoint_shares`), for endpoints of at least ``min_requests`` requests."""
    codes, names, counts = _endpoint_codes(log)
    fit = res.fit_
    rates = np.full(int(req_bin.max()) + 1, np.nan)
    rates[res.bins_["bin"].to_numpy(int)] = res.bins_["arrival_rate"].to_numpy(float)
    means, matched = np.full(len(names), np.nan), rates
    if fit is not None:
        means, off = shares.shared_means(fit, log.latency, req_bin, rates, codes, len(names))
        _check_queue_against_log(res, fit, off, rates)
        matched = shares.matched_rates(fit, off, rates)

    def fill(code: int, name: str, row: dict) -> None:
        if fit is None:
            row["status"] = "no fit of the shared queue"
        elif not np.isfinite(means[code]):
            row["status"] = "no CPU left: its latency is below the fitted queue's wait and delay"
            res._warn(FitWarning, f"endpoint {name}: its mean latency is below what the fitted queue "
                      "gives any request (wait and delay); it may be served before the queue (a cache "
                      "or a proxy), or the queue's fit misses its low loads")
        else:
            sel = codes == code
            mean, scv, err, how = shares.shared_scv(fit, float(means[code]), log.latency[sel], req_bin[sel],
                                                    matched, quantiles)
            row.update(cpu_per_request=mean, scv=scv, rms_rel_error=err, status=how)

    return _endpoint_rows(res, names, counts, min_requests, fill)


def _check_queue_against_log(res: RequestsFit, fit: PercentileFit, off: np.ndarray, rates: np.ndarray) -> None:
    """The log's own slowdown (PS) or wait (FCFS) per load bin, found with the endpoints' costs,
    against the fitted queue's: where the model's mean misses, the costs rest on the log's."""
    worst = int(np.nanargmax(np.abs(off))) if np.isfinite(off).any() else None
    if worst is None:
        return
    what = "wait" if fit.discipline == "fcfs" else "slowdown"
    res._set_quality(f"endpoint_{what}_vs_model", float(off[worst]))
    if abs(off[worst]) > 0.1:
        res._warn(FitWarning, f"at {rates[worst]:.4g} req/s the requests' mean {what} is {100 * off[worst]:+.0f} % "
                  f"off the fitted queue's: the model's mean misses the log's there; the per-endpoint costs "
                  "rest on the log's own (its endpoints in the same load bins)")


def _fit_endpoints(res: RequestsFit, log: RequestLog, fit_subset, min_requests: int) -> list[dict]:
    """One fit per endpoint as a queue of its own (``endpoint_queue="own"``), with at least
    ``min_requests`` requests; rows of ``endpoints_``."""
    codes, names, counts = _endpoint_codes(log)

    def fill(code: int, name: str, row: dict) -> None:
        sel = codes == code
        _, _, efit, ecaught, _ = fit_subset(log.arrival[sel], log.latency[sel])
        for cat, msg in ecaught:
            res._warn(cat, f"endpoint {name}: {msg}")
        if efit is None:
            row["status"] = "no fit"
        else:
            res.endpoint_fits_[name] = efit
            row.update(cpu_per_request=efit.cpu_per_request_, scv=efit.scv_,
                       rms_rel_error=efit.fit_quality_["rms_rel_error"],
                       status="fitted" + (" (with warnings)" if efit.warnings_ else ""))

    return _endpoint_rows(res, names, counts, min_requests, fill)
