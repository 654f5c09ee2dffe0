"""Input layer of the fits: what the user gives, checked and parsed into typed records.

Every ``from_*`` starts here, so a bad argument fails before any model is evaluated, with a
message that names the argument:

* :func:`check_confidence` -- the interval coverage every fit takes;
* :func:`parse_percentiles` -> :class:`PercentileObservations` (one row per observed
  percentile) and :func:`check_percentile_options` -> :class:`PercentileOptions` (discipline,
  family, delay, held values; the event-loop arguments through :func:`capacity._checks.check_rr`);
* :func:`read_request_log` -> :class:`RequestLog`, :func:`check_request_options`, and the
  aggregation of a log into percentile records: :func:`windows`, :func:`load_bins`;
* :func:`check_windows` (per-window rate and CPU) and :func:`check_sweep` (a load-test sweep).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence

import numpy as np

from .._checks import (
    as_float_array,
    check_discipline,
    check_nonnegative,
    check_positive,
    check_rr,
    check_servers,
)
from ._model import FAMILIES, SCV_DOMAIN, TWO_PARAM

#: Slice counts a round-robin fit profiles over when ``slices="fit"``.
SLICE_CANDIDATES = (1, 2, 3, 5, 8, 13, 20, 50)
_MIN_TAIL = 10          # a percentile q is used in a load bin only with >= 10 requests above it


def check_confidence(confidence: float) -> float:
    """The coverage of a fit's intervals, strictly between 0 and 1."""
    if not (0 < confidence < 1) or isinstance(confidence, bool):
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    return confidence


def _check_count(value, name: str, minimum: int, upper: str = "") -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name} must be {upper or f'an integer >= {minimum}'}, got {value!r}")
    return int(value)


# ---------------------------------------------------------------------- percentiles
@dataclasses.dataclass(frozen=True)
class PercentileObservations:
    """Observed percentiles flattened: one row per (observation, percentile).

    ``q``, ``t`` (seconds), ``lam`` (requests/s), ``servers``, ``obs_index`` and ``n_requests``
    (NaN: unknown) have one value per row; ``utilization`` (NaN: unknown) one per observation;
    ``n_obs`` observations in all.
    """

    q: np.ndarray
    t: np.ndarray
    lam: np.ndarray
    servers: np.ndarray
    obs_index: np.ndarray
    n_requests: np.ndarray
    utilization: np.ndarray
    n_obs: int

    @property
    def have_n(self) -> bool:
        """Whether every observation says how many requests its percentiles come from."""
        return not np.isnan(self.n_requests).any()

    def utilization_law(self) -> tuple[float | None, float]:
        """E[S] by the utilisation law (None without utilisation): ``sum(U_i c_i) /
        sum(lambda_i)``, or where the observations' CPU against their rate shows a background, the
        requests' mean on cores slowed by it (:func:`capacity.fit._cpu_law.held_mean`); and the
        spread of the per-observation costs over their pooled value, the background taken out
        first where one was read (a background alone spreads the ratios, more at light load)."""
        util = self.utilization
        if np.isnan(util).any():
            return None, 0.0
        from ._cpu_law import held_mean

        lam_o, srv_o = self._per_observation()
        readings = self.cpu_readings()
        busy = util * srv_o - readings.background
        per = busy / lam_o
        pooled = float(np.sum(busy) / np.sum(lam_o))
        return held_mean(readings), (float(np.ptp(per) / pooled) if per.size > 1 else 0.0)

    def cpu_readings(self):
        """Both readings of the utilisation law (:func:`capacity.fit._cpu_law.cpu_readings`);
        None without utilisation."""
        return self._readings

    @functools.cached_property
    def _readings(self):
        # Once per set of observations: its robust line (~2 ms) is read by every candidate model's
        # search space, fit and intervals (three times a candidate in a model selection).
        if np.isnan(self.utilization).any():
            return None
        from ._cpu_law import cpu_readings

        lam_o, srv_o = self._per_observation()
        return cpu_readings(lam_o, self.utilization, srv_o)

    def _per_observation(self) -> tuple[np.ndarray, np.ndarray]:
        """Each observation's arrival rate and servers (the percentile rows repeat them)."""
        first = np.array([np.flatnonzero(self.obs_index == i)[0] for i in range(self.n_obs)])
        return self.lam[first], self.servers[first]


def _one_percentile_map(p, where: str):
    if not isinstance(p, Mapping) or not p:
        raise ValueError(f"percentiles{where} must be a non-empty mapping {{q: seconds}}, got {p!r}")
    text = [k for k in p if isinstance(k, (str, bytes))]
    if text:
        # {0.5: .1, "0.5": .12} would hold the median twice under two keys: refuse text keys outright.
        raise ValueError(f"percentiles{where}: quantile keys must be numbers such as 0.99, got the text "
                         f"{text[0]!r} (capacity.units.parse_quantile reads 'p99' or '0.99')")
    qs = as_float_array(list(p.keys()), f"percentiles{where} quantile")
    ts = as_float_array(list(p.values()), f"percentiles{where} latency")
    bad = ~((qs > 0) & (qs < 1))
    if bad.any():
        raise ValueError(f"percentiles{where}: quantile q must lie strictly between 0 and 1, "
                         f"got {qs[bad][0]!r}")
    bad = ~((ts > 0) & np.isfinite(ts))
    if bad.any():
        raise ValueError(f"percentiles{where}: latencies must be positive and finite seconds, "
                         f"got {ts[bad][0]!r}")
    order = np.argsort(qs)
    qs, ts = qs[order], ts[order]
    if np.any(np.diff(qs) == 0):
        raise ValueError(f"percentiles{where}: quantile listed twice ({qs[np.diff(qs) == 0][0]!r})")
    dec = np.diff(ts) < 0
    if dec.any():
        k = int(np.argmax(dec))
        raise ValueError(f"percentiles{where}: latencies must not decrease as q increases, got "
                         f"q={qs[k]:g}: {ts[k]:g} s but q={qs[k + 1]:g}: {ts[k + 1]:g} s")
    return qs, ts


def _per_obs(value, name: str, n: int, default=math.nan):
    if value is None:
        return np.full(n, default)
    arr = as_float_array(value, name)
    if arr.ndim == 0:
        return np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"{name} must be one number or one per observation ({n}), got shape {arr.shape}")
    return arr.astype(float)


def _records(percentiles):
    """``(items, single)``: the observations as a list, and whether one mapping was given."""
    if isinstance(percentiles, Mapping):
        return [percentiles], True
    if isinstance(percentiles, Sequence) and not isinstance(percentiles, (str, bytes)):
        items = list(percentiles)
        if not items:
            raise ValueError("percentiles must not be empty")
        return items, False
    raise ValueError("percentiles must be a mapping {q: seconds} or a list of them, "
                     f"got {percentiles!r}")


def _merge(values: np.ndarray, per_record: list, key: str, convert=None) -> np.ndarray:
    """Per-observation values, each record's own ``key`` overriding the argument's."""
    for i, v in enumerate(per_record):
        if v is not None:
            where = f"percentiles[{i}]['{key}']"
            values[i] = convert(v, where) if convert else float(as_float_array(v, where))
    return values


def _all_or_none(values: np.ndarray, name: str) -> None:
    if np.isnan(values).any() and not np.isnan(values).all():
        raise ValueError(f"{name} must be given for every observation or for none")


def parse_percentiles(percentiles, arrival_rate, servers, utilization, n_requests) -> PercentileObservations:
    """Check and flatten the observations of :func:`capacity.fit.from_percentiles`."""
    items, single = _records(percentiles)
    n = len(items)
    records, given = [], {key: [None] * n for key in ("arrival_rate", "utilization", "n_requests", "servers")}
    for i, it in enumerate(items):
        where = "" if single else f"[{i}]"
        if isinstance(it, Mapping) and "percentiles" in it:
            unknown = set(it) - {"percentiles", "arrival_rate", "utilization", "n_requests", "servers"}
            if unknown:
                raise ValueError(f"percentiles{where} has unknown keys {sorted(unknown)!r}")
            records.append(_one_percentile_map(it["percentiles"], where))
            for key, values in given.items():
                values[i] = it.get(key)
        else:
            records.append(_one_percentile_map(it, where))
    lam = _per_obs(arrival_rate, "arrival_rate", n) if arrival_rate is not None else np.full(n, math.nan)
    lam = _merge(lam, given["arrival_rate"], "arrival_rate")
    if np.isnan(lam).any():
        raise ValueError("arrival_rate must be given (requests/s), as an argument or per observation")
    bad = ~((lam > 0) & np.isfinite(lam))
    if bad.any():
        raise ValueError(f"arrival_rate must be positive and finite requests/s, got {lam[bad][0]!r}")
    util = _merge(_per_obs(utilization, "utilization", n), given["utilization"], "utilization")
    bad = ~np.isnan(util) & ~((util > 0) & (util <= 1))
    if bad.any():
        raise ValueError(f"utilization must be a CPU busy fraction in (0, 1], got {util[bad][0]!r}")
    _all_or_none(util, "utilization")
    nreq = _merge(_per_obs(n_requests, "n_requests", n), given["n_requests"], "n_requests")
    bad = ~np.isnan(nreq) & ~((nreq >= 1) & np.isfinite(nreq))
    if bad.any():
        raise ValueError(f"n_requests must be a count >= 1, got {nreq[bad][0]!r}")
    _all_or_none(nreq, "n_requests")
    srv = check_servers(servers, "servers")
    srv = np.broadcast_to(srv, (n,)).astype(np.int64).copy() if srv.ndim <= 1 and srv.size in (1, n) else None
    if srv is None:
        raise ValueError(f"servers must be one integer or one per observation ({n}), got {servers!r}")
    srv = _merge(srv, given["servers"], "servers", lambda v, where: int(check_servers(v, where)))
    sizes = [len(r[0]) for r in records]
    idx = np.repeat(np.arange(n), sizes)
    return PercentileObservations(np.concatenate([r[0] for r in records]),
                                  np.concatenate([r[1] for r in records]),
                                  lam[idx], srv[idx], idx, nreq[idx], util, n)


@dataclasses.dataclass(frozen=True)
class PercentileOptions:
    """The checked settings of a percentile fit.

    ``delay`` is None, "constant" or "lognormal" (a number given as ``delay=`` is held in
    ``delay_fixed``, with ``delay="constant"``); ``slices_fixed`` is the held slice count, or
    None when ``slice_candidates`` are profiled (``slices="fit"``).
    """

    discipline: str
    family: str
    delay: str | None
    delay_fixed: float | None
    scv_fixed: float | None
    slices_fixed: int | None
    slice_candidates: tuple[int, ...] | None
    admission: str
    slice_delay: float
    confidence: float
    max_nfev: int


def check_slices(discipline: str, slices) -> tuple[int | None, tuple[int, ...] | None]:
    """``(slices_fixed, profile_candidates)``: one of them is None."""
    if slices is None or (isinstance(slices, str) and slices == "fit"):
        if discipline != "rr":
            if slices is None:
                return 1, None
            raise ValueError(f"slices='fit' applies to discipline='rr' only, got {discipline!r}")
        return None, SLICE_CANDIDATES
    if isinstance(slices, (str, bytes, bool, np.bool_)) or np.ndim(slices) != 0:
        raise ValueError(f"slices must be an integer >= 1, 'fit' or None, got {slices!r}")
    try:
        k = float(slices)
    except (TypeError, ValueError):
        raise ValueError(f"slices must be an integer >= 1, 'fit' or None, got {slices!r}") from None
    if not (math.isfinite(k) and k >= 1 and k.is_integer()):
        raise ValueError(f"slices must be an integer >= 1, 'fit' or None, got {slices!r}")
    if discipline != "rr" and k != 1:
        raise ValueError(f"slices applies to discipline='rr' only, got slices={slices!r} with "
                         f"discipline={discipline!r}")
    return int(k), None


def _check_delay(delay) -> tuple[str | None, float | None]:
    _msg = "delay must be None, 'constant', 'lognormal' or non-negative seconds, got"
    if delay is not None and not isinstance(delay, str):
        delay_fixed = float(as_float_array(delay, "delay"))
        if not (delay_fixed >= 0 and math.isfinite(delay_fixed)):
            raise ValueError(f"{_msg} {delay!r}")
        return "constant", delay_fixed
    if delay not in (None, "constant", "lognormal"):
        raise ValueError(f"{_msg} {delay!r}")
    return delay, None


def _check_scv(scv, family: str) -> float | None:
    if scv is None:
        return None
    if family not in TWO_PARAM:
        raise ValueError(f"scv can only be held for lognormal, gamma or hyperexponential, not {family!r}")
    scv_fixed = float(check_positive(scv, "scv"))
    lo_s, hi_s = SCV_DOMAIN[family]
    if not lo_s <= scv_fixed <= hi_s:
        raise ValueError(f"scv must lie in [{lo_s:g}, {hi_s:g}] for {family}, got {scv!r}")
    return scv_fixed


def check_percentile_options(discipline, family, delay, scv, confidence, max_nfev, slices, admission,
                             slice_delay) -> PercentileOptions:
    """Check the settings of :func:`capacity.fit.from_percentiles` (not the observations)."""
    check_discipline(discipline)
    slices_fixed, candidates = check_slices(discipline, slices)
    # the planner's checks of the event-loop arguments (slices are checked above: they may be "fit")
    _, slice_delay, admission = check_rr(discipline, 1, slice_delay, admission)
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    check_confidence(confidence)
    delay, delay_fixed = _check_delay(delay)
    scv_fixed = _check_scv(scv, family)
    return PercentileOptions(discipline, family, delay, delay_fixed, scv_fixed, slices_fixed, candidates,
                             admission, slice_delay, confidence, max_nfev)


def check_observations_fit(obs: PercentileObservations, options: PercentileOptions,
                           mean_fixed: float | None, free: list[str]) -> None:
    """The checks that need both the observations and the model: a held delay below every
    percentile, a utilisation-law cost that keeps the queue stable, enough percentiles."""
    if options.delay_fixed is not None and options.delay_fixed >= obs.t.min():
        raise ValueError(f"delay={options.delay_fixed!r} s is not below the smallest observed percentile "
                         f"{obs.t.min():g} s")
    if mean_fixed is not None and np.any(obs.lam * mean_fixed >= obs.servers):
        raise ValueError(f"utilization implies E[S] = {mean_fixed:g} s, which saturates the busiest "
                         "observation (utilisation >= 1)")
    p, m = len(free), obs.q.size
    if m < p:
        raise ValueError(
            f"percentiles: {m} value(s) cannot identify {p} free parameters ({', '.join(free)}); "
            "give more percentiles or loads, or fix some (utilization=, scv=, delay=<seconds>, family=)")


# ---------------------------------------------------------------------- request logs
_TIME = ("time",)
_DURATION = ("duration", "request_time")
_ENDPOINT = ("endpoint", "path")
_UPSTREAM = ("upstream_time", "upstream_response_time")


@dataclasses.dataclass(frozen=True)
class RequestLog:
    """The usable rows of a per-request log: arrival times (s), the modelled latency (s) and
    endpoints (None without an endpoint column); ``dropped`` of ``n_rows`` rows had no usable
    time or latency."""

    arrival: np.ndarray
    latency: np.ndarray
    endpoints: np.ndarray | None
    dropped: int
    n_rows: int


def _pick(df, names, given, role: str, required: bool):
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


def _seconds(t) -> np.ndarray:
    """Times as float seconds (datetimes: since the Unix epoch)."""
    import pandas as pd

    if pd.api.types.is_datetime64_any_dtype(t):
        v = t.to_numpy()
        if hasattr(t.dt, "tz") and t.dt.tz is not None:
            v = t.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
        return (v.astype("datetime64[ns]").astype(np.int64) / 1e9).astype(float)
    if pd.api.types.is_numeric_dtype(t):
        return t.to_numpy(dtype=float)
    raise ValueError(f"the time column must hold datetimes or numbers of seconds, got dtype {t.dtype}")


def window_seconds(window) -> float:
    """A window length (pandas duration string or seconds) in seconds."""
    import pandas as pd

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


def check_request_options(df, time_is, timing, bins, min_requests, quantiles, fit_kwargs) -> list[float]:
    """Check the settings of :func:`capacity.fit.from_requests`; returns the sorted quantiles."""
    import pandas as pd

    if not isinstance(df, pd.DataFrame):  # a ValueError like every other bad input of the fits
        raise ValueError(  # noqa: TRY004
            f"df must be a pandas DataFrame of per-request records, got {type(df).__name__}")
    if len(df) == 0:
        raise ValueError("df has no rows")
    if time_is not in ("end", "start"):
        raise ValueError(f"time_is must be 'end' or 'start', got {time_is!r}")
    if timing not in ("duration", "upstream"):
        raise ValueError(f"timing must be 'duration' or 'upstream', got {timing!r}")
    _check_count(bins, "bins", 1, "a positive integer")
    _check_count(min_requests, "min_requests", 1, "a positive integer")
    for key in ("utilization", "n_requests", "arrival_rate", "percentiles"):
        if key in fit_kwargs:
            raise ValueError(f"from_requests derives {key!r} per load bin itself; it cannot be passed "
                             "(to use CPU utilisation, fit from_percentiles on per-window records)")
    qs = np.asarray(quantiles, dtype=float)
    if qs.ndim != 1 or qs.size == 0 or np.any(~((qs > 0) & (qs < 1))):
        raise ValueError(f"quantiles must be values in (0, 1), got {quantiles!r}")
    return sorted(set(qs.tolist()))


def read_request_log(df, time_is: str, timing: str, time_column=None, duration_column=None,
                     endpoint_column=None) -> RequestLog:
    """Find the columns of a per-request log and keep the rows with a time and a positive latency."""
    import pandas as pd

    tcol = _pick(df, _TIME, time_column, "time", True)
    dcol = _pick(df, _DURATION, duration_column, "duration", True)
    ecol = _pick(df, _ENDPOINT, endpoint_column, "endpoint", False)
    ucol = _pick(df, _UPSTREAM, None, "upstream", timing == "upstream")
    t = _seconds(df[tcol])
    dur = pd.to_numeric(df[dcol], errors="coerce").to_numpy(dtype=float)
    lat = dur if timing == "duration" else pd.to_numeric(df[ucol], errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(t) & np.isfinite(dur) & np.isfinite(lat) & (dur >= 0) & (lat > 0)
    if not ok.any():
        raise ValueError(f"df has no row with a time and a positive {timing}")
    arrival = t - dur if time_is == "end" else t
    endpoints = df[ecol].to_numpy()[ok] if ecol is not None else None
    return RequestLog(arrival[ok], lat[ok], endpoints, int((~ok).sum()), len(df))


def windows(arrival: np.ndarray, lat: np.ndarray, width: float, quantiles):
    """Per-window table (indexed by window start) and each request's window number."""
    import pandas as pd

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


def load_bins(table, k: np.ndarray, lat: np.ndarray, width: float, n_bins: int, quantiles):
    """Group windows into load bins by their QPS; pool their requests; one observation per bin.

    Returns the bin table, the percentile records (``{"percentiles", "arrival_rate",
    "n_requests"}``) of :func:`capacity.fit.from_percentiles`, and each request's bin (the
    table's ``bin``).
    """
    import pandas as pd

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
    return pd.DataFrame(rows), recs, req_bin


# ---------------------------------------------------------------------- utilisation windows
@dataclasses.dataclass(frozen=True)
class UtilizationWindows:
    """Per-window request rates (req/s) and busy cores (``utilization * cores``), checked."""

    arrival_rate: np.ndarray
    utilization: np.ndarray
    cores: float
    background: float | None

    @property
    def busy(self) -> np.ndarray:
        return self.utilization * self.cores


def check_windows(arrival_rate, utilization, cores) -> UtilizationWindows:
    """Check the per-window data of :func:`capacity.fit.from_utilization` (and a held background)."""
    q = as_float_array(arrival_rate, "arrival_rate")
    u = as_float_array(utilization, "utilization")
    if q.ndim != 1:
        raise ValueError(f"arrival_rate must be a 1-D array of per-window request rates, got shape {q.shape}")
    if u.shape != q.shape:
        raise ValueError(f"utilization must have the same shape as arrival_rate {q.shape}, got {u.shape}")
    if q.size < 3:
        raise ValueError("arrival_rate needs at least 3 windows to fit a slope and an intercept, "
                         f"got {q.size}")
    bad = ~np.isfinite(q) | (q < 0)
    if bad.any():
        raise ValueError(f"arrival_rate must be non-negative and finite, got {q[bad][0]!r}")
    bad = ~np.isfinite(u) | (u < 0) | (u > 1)
    if bad.any():
        hint = ""
        if np.all((u >= 0) & (u <= 100)) and np.any(u > 1):
            hint = " (it looks like percent: pass utilization / 100)"
        raise ValueError(
            f"utilization must be the busy fraction of the given cores, in [0, 1], got {u[bad][0]!r}{hint}"
        )
    c = check_positive(cores, "cores")
    if c.ndim != 0:
        raise ValueError(f"cores must be a single positive number, got {cores!r}")
    return UtilizationWindows(q, u, float(c), None)


def check_utilization_options(data: UtilizationWindows, confidence, background, method, n_bootstrap,
                              block_size, max_theilsen: int) -> UtilizationWindows:
    """Check the settings of :func:`capacity.fit.from_utilization`; returns ``data`` with the background."""
    q, c = data.arrival_rate, data.cores
    check_confidence(confidence)
    if method not in ("huber", "theilsen"):
        raise ValueError(f"method must be 'huber' or 'theilsen', got {method!r}")
    if method == "theilsen" and q.size > max_theilsen:
        raise ValueError(f"method='theilsen' costs O(n^2) per bootstrap resample; with {q.size} windows "
                         f"(> {max_theilsen}) use method='huber'")
    if not np.any(q > 0):
        raise ValueError("arrival_rate must have at least one window with traffic (all windows are 0 req/s)")
    _check_count(n_bootstrap, "n_bootstrap", 50)
    if isinstance(block_size, bool) or int(block_size) != block_size or not 1 <= block_size <= q.size:
        raise ValueError(f"block_size must be an integer in [1, {q.size}], got {block_size!r}")
    if background is None:
        return data
    bg = as_float_array(background, "background")
    if bg.ndim != 0 or not np.isfinite(bg) or bg < 0 or bg > c:
        raise ValueError(f"background must be a number of cores in [0, cores={c:g}], got {background!r}")
    return dataclasses.replace(data, background=float(bg))


# ---------------------------------------------------------------------- load-test sweeps
@dataclasses.dataclass(frozen=True)
class Sweep:
    """A closed-loop sweep sorted by users: ``users`` (N), ``throughput`` (X, req/s),
    ``mean_response`` (R, s, or None) and a held ``think_time`` (Z, s, or None)."""

    users: np.ndarray
    throughput: np.ndarray
    mean_response: np.ndarray | None
    think_time: float | None


def _positive_like(value, name: str, shape, like: str) -> np.ndarray:
    arr = as_float_array(value, name)
    if arr.shape != shape:
        raise ValueError(f"{name} must have the same shape as {like} {shape}, got {arr.shape}")
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        raise ValueError(f"{name} must be positive and finite, got {arr[bad][0]!r}")
    return arr


def check_sweep(users, throughput, mean_response, think_time, model) -> Sweep:
    """Check a load-test sweep of :func:`capacity.fit.from_loadtest` and sort it by users."""
    n = as_float_array(users, "users")
    x = as_float_array(throughput, "throughput")
    if n.ndim != 1:
        raise ValueError(f"users must be a 1-D array of client counts, got shape {n.shape}")
    if x.shape != n.shape:
        raise ValueError(f"throughput must have the same shape as users {n.shape}, got {x.shape}")
    bad = ~np.isfinite(n) | (n < 1)
    if bad.any():
        raise ValueError(f"users must be >= 1 and finite, got {n[bad][0]!r}")
    x = _positive_like(x, "throughput", n.shape, "users")
    r = None if mean_response is None else _positive_like(mean_response, "mean_response", n.shape, "users")
    if think_time is not None:
        z = check_nonnegative(think_time, "think_time")
        if z.ndim != 0:
            raise ValueError(f"think_time must be a single number of seconds, got {think_time!r}")
        think_time = float(z)
    if model not in ("mva", "usl", "both"):
        raise ValueError(f"model must be 'mva', 'usl' or 'both', got {model!r}")
    order = np.argsort(n, kind="stable")
    n, x = n[order], x[order]
    r = None if r is None else r[order]
    distinct = np.unique(n).size
    if model in ("usl", "both") and distinct < 3:
        raise ValueError(f"users needs at least 3 distinct levels for the USL (3 parameters), got {distinct}")
    if model in ("mva", "both"):
        if np.any(n != np.round(n)):
            raise ValueError(f"users must be whole numbers of clients for MVA, got {users!r}")
        if think_time is None and r is None and distinct < 2:
            raise ValueError("users needs at least 2 distinct levels to fit MVA demand and think time, "
                             f"got {distinct}")
    return Sweep(n, x, r, think_time)


def as_user_counts(users, whole: bool) -> np.ndarray:
    """Users at which to predict a load-test model: >= 1, finite (and whole for MVA)."""
    n = np.atleast_1d(as_float_array(users, "users"))
    if np.any(~np.isfinite(n) | (n < 1)):
        raise ValueError(f"users must be >= 1 and finite, got {users!r}")
    if whole and np.any(n != np.round(n)):
        raise ValueError(f"users must be whole numbers for MVA, got {users!r}")
    return n

