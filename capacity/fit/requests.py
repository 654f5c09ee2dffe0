"""Fit the CPU cost and service-time distribution from per-request logs (time, duration, endpoint)."""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from ..exceptions import CapacityWarning, FitWarning, IdentifiabilityWarning
from ._result import FitResult
from .percentiles import from_percentiles

__all__ = ["RequestsFit", "from_requests"]

_TIME = ("time",)
_DURATION = ("duration", "request_time")
_ENDPOINT = ("endpoint", "path")
_UPSTREAM = ("upstream_time", "upstream_response_time")
_MIN_TAIL = 10          # a percentile q is used in a bin only with >= 10 requests above it
_MAX_DISPERSION = 4.0   # window-count variance / Poisson variance above which a bin mixes loads


def _pick(df: pd.DataFrame, names, given, role: str, required: bool):
    if given is not None:
        if given is False:
            return None
        if given not in df.columns:
            raise ValueError(f"{role}_column={given!r} is not a column of df; "
                             f"columns are {list(df.columns)!r}")
        return given
    for n in names:
        if n in df.columns:
            return n
    if required:
        raise ValueError(f"df has no {role} column (looked for {', '.join(names)}); columns are "
                         f"{list(df.columns)!r}; read the log with capacity.logs.read_requests/read_nginx "
                         f"or pass {role}_column=")
    return None


def _seconds(t: pd.Series) -> np.ndarray:
    """Times as float seconds (datetimes: since the Unix epoch)."""
    if pd.api.types.is_datetime64_any_dtype(t):
        v = t.to_numpy()
        if hasattr(t.dt, "tz") and t.dt.tz is not None:
            v = t.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
        return (v.astype("datetime64[ns]").astype(np.int64) / 1e9).astype(float)
    if pd.api.types.is_numeric_dtype(t):
        return t.to_numpy(dtype=float)
    raise ValueError(f"the time column must hold datetimes or numbers of seconds, got dtype {t.dtype}")


def _window_seconds(window) -> float:
    if isinstance(window, (int, float)) and not isinstance(window, bool):
        w = float(window)
    else:
        try:
            w = pd.Timedelta(window).total_seconds()
        except (TypeError, ValueError):
            raise ValueError("window must be a duration such as '1s', '10s', '1min' or seconds, "
                             f"got {window!r}") from None
    if not (w > 0 and math.isfinite(w)):
        raise ValueError(f"window must be a positive duration, got {window!r}")
    return w


def _windows(arrival: np.ndarray, lat: np.ndarray, width: float,
             quantiles) -> tuple[pd.DataFrame, np.ndarray]:
    """Per-window table (indexed by window start) and each request's window number."""
    t0 = math.floor(arrival.min() / width) * width
    k = np.floor((arrival - t0) / width).astype(np.int64)
    n_win = int(k.max()) + 1
    counts = np.bincount(k, minlength=n_win)
    frame = pd.DataFrame({"window": k, "latency": lat})
    g = frame.groupby("window")["latency"]
    table = pd.DataFrame({"start": t0 + width * np.arange(n_win), "requests": counts,
                          "qps": counts / width})
    for q in quantiles:
        table[f"p{100 * q:g}"] = g.quantile(q).reindex(range(n_win)).to_numpy()
    table["max"] = g.max().reindex(range(n_win)).to_numpy()
    return table, k


def _bins(table: pd.DataFrame, k: np.ndarray, lat: np.ndarray, width: float, n_bins: int, quantiles):
    """Group windows into load bins by their QPS; pool their requests; one observation per bin."""
    qps = table["qps"].to_numpy()
    # Windows with no traffic count as time at zero load; they dilute no bin, so drop them.
    busy = np.flatnonzero(qps > 0)
    edges = np.unique(np.quantile(qps[busy], np.linspace(0, 1, n_bins + 1)))
    if edges.size < 2:
        edges = np.array([qps[busy].min(), qps[busy].max()])
    win_bin = np.full(qps.size, -1)
    win_bin[busy] = np.clip(np.searchsorted(edges, qps[busy], side="right") - 1, 0, edges.size - 2)
    req_bin = win_bin[k]
    rows, recs = [], []
    for b in range(edges.size - 1):
        wins = np.flatnonzero(win_bin == b)
        if wins.size == 0:
            continue
        x = lat[req_bin == b]
        rate = x.size / (wins.size * width)
        usable = [q for q in quantiles if x.size * (1 - q) >= _MIN_TAIL]
        counts = table["requests"].to_numpy()[wins]
        cm = counts.mean()
        row = {"bin": b, "qps_low": edges[b], "qps_high": edges[b + 1], "windows": wins.size,
               "requests": x.size, "arrival_rate": rate,
               # variance of the window counts over the Poisson variance (= mean): ~1 for one load
               "dispersion": float(counts.var() / cm) if wins.size > 1 and cm > 0 else math.nan,
               "rate_cv": float(counts.std() / cm) if cm > 0 else math.nan}
        for q in quantiles:
            row[f"p{100 * q:g}"] = float(np.quantile(x, q)) if q in usable else math.nan
        rows.append(row)
        if usable:
            recs.append({"percentiles": {q: float(np.quantile(x, q)) for q in usable},
                         "arrival_rate": rate, "n_requests": float(x.size)})
    return pd.DataFrame(rows), recs


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
        One fit per endpoint with enough requests.
    endpoints_ : pandas.DataFrame
        Tidy per-endpoint summary (requests, share, fitted cost, scv, status).
    service_, cpu_per_request_, scv_, delay_, capacity_qps_
        From ``fit_`` (NaN/None without a fit).
    """

    def predict(self, q, arrival_rate):
        """Latency quantile(s) at ``arrival_rate`` from the overall fit (see PercentileFit.predict)."""
        if self.fit_ is None:
            raise ValueError("no fit: the log was too thin (see warnings_)")
        return self.fit_.predict(q, arrival_rate)


def _fit_quiet(recs, kwargs):
    """from_percentiles with its warnings captured (they are re-recorded on the RequestsFit)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = from_percentiles(recs, **kwargs)
    return fit, [(w.category, str(w.message)) for w in caught if issubclass(w.category, CapacityWarning)]


def from_requests(
    df: pd.DataFrame,
    *,
    window: str | float = "1s",
    fit_window: str | float = "1min",
    time_is: str = "end",
    latency: str = "duration",
    servers: int = 1,
    discipline: str = "ps",
    family: str = "lognormal",
    delay: str | float | None = None,
    quantiles=(0.5, 0.9, 0.99, 0.999),
    bins: int = 4,
    by_endpoint: bool | None = None,
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
    latency : {"duration", "upstream"}, default "duration"
        Which latency to model: the whole request, or the upstream (backend)
        time -- with an nginx log in front of the application, the latter is
        the application's own response time.
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
        Also fit each endpoint separately (default: when an endpoint column
        exists and has more than one value).
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

    Per-endpoint fits treat each endpoint as its own queue at its own rate.
    When endpoints share one process, each endpoint's requests also wait
    behind the others, so the per-endpoint costs are for comparing endpoints;
    the overall fit (all requests, one queue) is the capacity model.

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
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df must be a pandas DataFrame of per-request records, got {type(df).__name__}")
    if len(df) == 0:
        raise ValueError("df has no rows")
    if time_is not in ("end", "start"):
        raise ValueError(f"time_is must be 'end' or 'start', got {time_is!r}")
    if latency not in ("duration", "upstream"):
        raise ValueError(f"latency must be 'duration' or 'upstream', got {latency!r}")
    if isinstance(bins, bool) or int(bins) != bins or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    if isinstance(min_requests, bool) or int(min_requests) != min_requests or min_requests < 1:
        raise ValueError(f"min_requests must be a positive integer, got {min_requests!r}")
    for key in ("utilization", "n_requests", "arrival_rate", "percentiles"):
        if key in fit_kwargs:
            raise ValueError(f"from_requests derives {key!r} per load bin itself; it cannot be passed "
                             "(to use CPU utilisation, fit from_percentiles on per-window records)")
    qs = np.asarray(quantiles, dtype=float)
    if qs.ndim != 1 or qs.size == 0 or np.any(~((qs > 0) & (qs < 1))):
        raise ValueError(f"quantiles must be values in (0, 1), got {quantiles!r}")
    qs = sorted(set(qs.tolist()))
    width = _window_seconds(window)
    fit_width = max(_window_seconds(fit_window), width)

    tcol = _pick(df, _TIME, time_column, "time", True)
    dcol = _pick(df, _DURATION, duration_column, "duration", True)
    ecol = _pick(df, _ENDPOINT, endpoint_column, "endpoint", False)
    ucol = _pick(df, _UPSTREAM, None, "upstream", latency == "upstream")
    t = _seconds(df[tcol])
    dur = pd.to_numeric(df[dcol], errors="coerce").to_numpy(dtype=float)
    lat = dur if latency == "duration" else pd.to_numeric(df[ucol], errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(t) & np.isfinite(dur) & np.isfinite(lat) & (dur >= 0) & (lat > 0)
    dropped = int((~ok).sum())
    if not ok.any():
        raise ValueError(f"df has no row with a time and a positive {latency}")
    arrival = t - dur if time_is == "end" else t
    arrival, lat = arrival[ok], lat[ok]
    endpoints = df[ecol].to_numpy()[ok] if ecol is not None else None
    if by_endpoint is None:
        by_endpoint = endpoints is not None and pd.unique(endpoints).size > 1
    elif by_endpoint and endpoints is None:
        raise ValueError("by_endpoint=True but df has no endpoint column")

    fit_args = dict(servers=servers, discipline=discipline, family=family, delay=delay,
                    confidence=confidence, **fit_kwargs)

    def fit_subset(arr, lt):
        table, _ = _windows(arr, lt, width, qs)
        coarse, k = _windows(arr, lt, fit_width, qs)
        bin_table, recs = _bins(coarse, k, lt, fit_width, int(bins), qs)
        notes = []
        mixed = bin_table[(bin_table["dispersion"] > _MAX_DISPERSION) & (bin_table["rate_cv"] > 0.1)]
        for _, row in mixed.iterrows():
            notes.append((FitWarning, f"load bin {int(row['bin'])} pools windows from "
                                      f"{row['qps_low']:.3g} to {row['qps_high']:.3g} req/s (count variance "
                                      f"{row['dispersion']:.1f}x Poisson): it mixes different loads; "
                                      "use more bins"))
        if not recs:
            return table, bin_table, None, notes + [(FitWarning, "too few requests for any percentile")]
        try:
            fit, caught = _fit_quiet(recs, fit_args)
        except ValueError as exc:
            return table, bin_table, None, notes + [(FitWarning, f"cannot fit: {exc}")]
        return table, bin_table, fit, notes + caught

    table, bin_table, fit, caught = fit_subset(arrival, lat)
    res = RequestsFit(
        (fit.model if fit is not None else "no fit")
        + f"; {len(bin_table)} load bins of {fit_width:g} s windows",
        confidence_level=confidence, n_observations=int(ok.sum()),
        method=("from_percentiles over load bins" + (f"; {fit.method}" if fit is not None else "")),
    )
    res.windows_, res.bins_, res.fit_ = table, bin_table, fit
    if dropped:
        res._warn(FitWarning, f"{dropped} of {len(df)} rows have no usable time or {latency}; "
                              "they were left out")
    med = float(np.median(lat))
    if med > 0.1 * fit_width:
        res._warn(FitWarning, f"median latency {med:.3g} s exceeds 10 % of the {fit_width:g} s window: "
                              "the queue "
                              "does not settle within a window, so per-window load bins are unreliable; use "
                              "longer windows")
    for cat, msg in caught:
        res._warn(cat, msg)
    if fit is not None:
        for name, row in fit.summary.iterrows():
            res._add_parameter(name, row["estimate"], row["lower"], row["upper"], unit=row["unit"],
                               note=row["note"])
        for name, value in fit.fit_quality_.items():
            res._set_quality(name, value)
        res._add_table("load bins", bin_table)
        res._add_table("observed vs model", fit.comparison_)
        res.service_, res.cpu_per_request_, res.scv_ = fit.service_, fit.cpu_per_request_, fit.scv_
        res.delay_, res.capacity_qps_ = fit.delay_, fit.capacity_qps_
    else:
        res.service_, res.cpu_per_request_, res.scv_ = None, math.nan, math.nan
        res.delay_, res.capacity_qps_ = None, math.nan

    res.endpoint_fits_ = {}
    rows = []
    if by_endpoint:
        names, counts = np.unique(endpoints.astype(str), return_counts=True)
        total = counts.sum()
        skipped = []
        for name, n in sorted(zip(names, counts), key=lambda x: -x[1]):
            row = {"endpoint": name, "requests": int(n), "share": n / total, "cpu_per_request": math.nan,
                   "scv": math.nan, "rms_rel_error": math.nan, "status": ""}
            if n < min_requests:
                row["status"] = f"skipped: {n} < min_requests={min_requests}"
                skipped.append(name)
            else:
                sel = endpoints.astype(str) == name
                _, _, efit, ecaught = fit_subset(arrival[sel], lat[sel])
                for cat, msg in ecaught:
                    res._warn(cat, f"endpoint {name}: {msg}")
                if efit is None:
                    row["status"] = "no fit"
                else:
                    res.endpoint_fits_[name] = efit
                    row.update(cpu_per_request=efit.cpu_per_request_, scv=efit.scv_,
                               rms_rel_error=efit.fit_quality_["rms_rel_error"],
                               status="fitted" + (" (with warnings)" if efit.warnings_ else ""))
            rows.append(row)
        if skipped:
            res._warn(IdentifiabilityWarning,
                      f"{len(skipped)} endpoint(s) have fewer than {min_requests} requests and were "
                      "not fitted: "
                      + ", ".join(skipped[:5]) + (" ..." if len(skipped) > 5 else ""))
    res.endpoints_ = pd.DataFrame(rows, columns=["endpoint", "requests", "share", "cpu_per_request", "scv",
                                                 "rms_rel_error", "status"])
    if len(res.endpoints_):
        res._add_table("endpoints", res.endpoints_)
    res._emit_warnings(stacklevel=3)
    return res
