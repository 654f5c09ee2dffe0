"""CPU service-time distribution from bucketed latency histograms, one per time window.

A histogram per window (Prometheus ``*_bucket`` counters, OpenTelemetry explicit-bucket
histograms, HdrHistogram exports) tells how many requests took at most each bucket bound.
Over a day the windows sit at many loads; :func:`from_histograms` fits one queue model to all
of them at once by maximum likelihood on the bucket counts, so the load dependence of the
whole distribution separates CPU variability from non-CPU delay.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import optimize

from .._checks import as_float_array, check_choice, check_discipline, check_servers
from ..exceptions import FitWarning, IdentifiabilityWarning
from . import _diagnostics as diag
from ._inputs import check_percentile_options
from ._bound_profile import on_bound
from ._cpu_law import cpu_readings, held_mean, hold_readings
from ._intervals import WaldIntervals
from ._model import (MEASURED_AT, SCV_DOMAIN, TWO_PARAM, QueueModel, check_measured_at, make_service,
                     measured_quantiles)
from ._rr_candidates import admitted, rr_can_be_told, rr_candidates, rr_family
from ._selection import candidate_families, candidate_grid, qaic_scores, select
from ._solve import unpack_parameters
from ._fitted import PercentileFit, servers_text

__all__ = ["HistogramFit", "MEASURED_AT", "from_histograms"]

ArrayLike = Any


# Quantile levels the model's distribution function is read from: z = log(-log(1 - q)) evenly
# spaced from q = 1e-3 to 1 - 1e-6, the levels of the shipped quantile tables (so a tabled model
# answers them from its spline).  Between levels log t is linear in z; beyond them the end
# segments are extended (a Weibull-like tail), which only matters for buckets holding less than
# 0.1 % or beyond 1 - 1e-6 of the requests.
_Z = np.linspace(math.log(-math.log1p(-1e-3)), math.log(-math.log(1e-6)), 40)
_Q = -np.expm1(-np.exp(_Z))
_P_FLOOR = 1e-12          # a bucket's model probability is never taken below this (log of zero)
_MAX_RMS = 0.10           # RMS horizontal (log-time) miss above which the model does not describe the data
_MIN_TAIL_COUNT = 20      # a bound's observed share is judged only with this many requests on each side
_BUSY_TAIL_LEVEL = 0.9    # the busiest windows' tail: bounds with at least this share of requests below
_BUSY_MIN_WINDOWS = 4     # windows needed before the busiest quarter of them is judged apart


# ---------------------------------------------------------------------- result
class HistogramFit(PercentileFit):
    """Result of :func:`from_histograms` (predictions as :class:`PercentileFit`).

    Attributes
    ----------
    service_, cpu_per_request_, scv_, delay_, capacity_qps_
        As in :class:`PercentileFit`.
    measured_at : str
        Where the histograms were measured (``"client"``, ``"proxy"`` or ``"in_process"``);
        predictions are always of the response time as the client sees it.
    deviance_ : float
        The G statistic ``2 sum n log(n / e)`` of the bucket counts against the model's
        expected counts (the multinomial deviance), with ``degrees_of_freedom_``.
    comparison_ : pandas.DataFrame
        Per window and bucket bound: the observed and the model share of requests slower
        than the bound.
    windows_ : pandas.DataFrame
        Per window: arrival rate, requests, model utilisation and its deviance share.
    candidates_ : pandas.DataFrame or None
        When the model was chosen from the data: every candidate (discipline, family, delay)
        with its estimates, deviance, QAIC, ``delta_qaic`` and Akaike weight, best first.
    """

    measured_at: str

    def _slo_held(self, slo: dict, above: float) -> tuple[float, str, bool] | None:
        """(rate, what was seen, True) for the busiest window, or run of windows next in load, above
        ``above`` (req/s) whose counts show every SLO percentile met beyond noise; None if none.

        At the largest bucket bound b at or below each SLO time (at least as many requests were
        slower than b as than the SLO time) the upper confidence bound of the share slower than b
        is within 1 - q (:func:`._slo_evidence.slo_held`: Clopper-Pearson at the fit's
        ``confidence_level``, Bonferroni over the windows and runs checked, the counts deflated by
        the dispersion of the windows nearest in load, never below the fit's own)."""
        from ._slo_evidence import windows_held

        return windows_held(self.comparison_, self.windows_, slo, above, self.fit_quality_,
                            self.confidence_level, _MAX_RMS)

    def _model_error(self) -> float:
        """The larger of the RMS miss in log time over every window and the mean miss in the
        busiest windows' tail (:func:`_busy_tail_miss`): a prediction is asked for at a peak, in
        the tail, where a model that is right on average can be furthest off."""
        values = [float(self.fit_quality_.get(k, 0.0)) for k in ("rms_log_time_miss", "busy_tail_log_time_miss")]
        return max([abs(v) for v in values if math.isfinite(v)], default=0.0)

    def _miss_text(self) -> str:
        return f"{100 * float(self.fit_quality_['rms_log_time_miss']):.0f} % in time at the bucket bounds"


class _Windows:
    """Parsed windows: flat bucket arrays with their window index."""

    def __init__(self, upper: np.ndarray, counts: np.ndarray, window: np.ndarray, lam: np.ndarray,
                 util: np.ndarray, servers: np.ndarray, skipped: list[int]):
        self.upper, self.counts, self.window = upper, counts, window
        self.lam, self.util, self.servers, self.skipped = lam, util, servers, skipped
        self.n = np.bincount(window, weights=counts, minlength=lam.size)
        self.lower = np.where(np.r_[True, window[1:] != window[:-1]], 0.0, np.r_[0.0, upper[:-1]])

    @property
    def size(self) -> int:
        return int(self.lam.size)


def _bucket_counts(record: Mapping, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(upper bounds incl. inf, counts per bucket) of one window, from either input form."""
    if "buckets" in record:
        buckets = record["buckets"]
        if not isinstance(buckets, Mapping) or not buckets:
            raise ValueError(f"windows{where}['buckets'] must be a non-empty mapping {{le: cumulative "
                             f"count}}, got {buckets!r}")
        le = as_float_array([float(k) if isinstance(k, str) else k for k in buckets], f"windows{where} le")
        cum = as_float_array(list(buckets.values()), f"windows{where} bucket count")
        order = np.argsort(le)
        le, cum = le[order], cum[order]
        if not np.isinf(le[-1]):
            raise ValueError(f"windows{where}: the histogram has no +Inf bucket (le={le[-1]:g} is the "
                             "largest); without it the requests above the last bound are unknown")
        if np.any(np.diff(cum) < -1e-9 * max(1.0, cum[-1])):
            k = int(np.flatnonzero(np.diff(cum) < 0)[0])
            raise ValueError(f"windows{where}: cumulative bucket counts must not decrease with le, "
                             f"got {cum[k]:g} at le={le[k]:g} and {cum[k + 1]:g} at le={le[k + 1]:g}")
        counts = np.diff(np.r_[0.0, np.maximum.accumulate(cum)])
        return le, counts
    if "bounds" in record and "counts" in record:
        bounds = as_float_array(record["bounds"], f"windows{where} bounds")
        counts = as_float_array(record["counts"], f"windows{where} counts")
        if counts.size != bounds.size + 1:
            raise ValueError(f"windows{where}: counts must have one entry per bucket, len(bounds) + 1 = "
                             f"{bounds.size + 1} (the last is above the largest bound), got {counts.size}")
        if np.any(np.diff(bounds) <= 0):
            raise ValueError(f"windows{where}: bounds must increase, got {bounds.tolist()}")
        return np.r_[bounds, np.inf], counts
    raise ValueError(f"windows{where} must hold 'buckets' ({{le: cumulative count}}, Prometheus) or "
                     f"'bounds' and 'counts' (per bucket, OpenTelemetry); got keys {sorted(record)}")


def _parse_windows(windows, servers) -> _Windows:
    if isinstance(windows, Mapping) or not isinstance(windows, Sequence) or not windows:
        raise ValueError("windows must be a non-empty list of records, each {'buckets': {le: count}, "
                         f"'arrival_rate': r, ...}}; got {type(windows).__name__}")
    upper, counts, index, lam, util, srv, skipped = [], [], [], [], [], [], []
    for i, record in enumerate(windows):
        where = f"[{i}]"
        if not isinstance(record, Mapping):
            raise ValueError(f"windows{where} must be a mapping, got {type(record).__name__}")
        le, c = _bucket_counts(record, where)
        if le.size > 1 and le[0] == 0:
            # OpenTelemetry SDKs' default layout starts with a bound of 0: a bucket of requests
            # timed at 0 s (clock resolution).  They are below the next bound too, so it is merged
            # into that bucket rather than refused.
            c = np.r_[c[0] + c[1], c[2:]]
            le = le[1:]
        if np.any(le[:-1] <= 0):
            raise ValueError(f"windows{where}: bucket bounds must be positive seconds, got {le[0]:g}")
        if np.any(c < 0) or not np.all(np.isfinite(c)):
            raise ValueError(f"windows{where}: bucket counts must be finite and non-negative")
        if "arrival_rate" not in record:
            raise ValueError(f"windows{where} has no 'arrival_rate' (requests per second in the window)")
        rate = float(as_float_array(record["arrival_rate"], f"windows{where} arrival_rate"))
        if not (rate > 0 and math.isfinite(rate)):
            if c.sum() == 0:
                skipped.append(i)
                continue
            raise ValueError(f"windows{where}: arrival_rate must be positive, got {rate!r}")
        if c.sum() <= 0:
            skipped.append(i)
            continue
        u = record.get("utilization")
        u = math.nan if u is None else float(as_float_array(u, f"windows{where} utilization"))
        if not math.isnan(u) and not 0 < u <= 1:
            raise ValueError(f"windows{where}: utilization must be a busy fraction in (0, 1], got {u!r}")
        s = int(check_servers(record.get("servers", servers), f"windows{where} servers"))
        k = len(lam)
        upper.append(le)
        counts.append(c)
        index.append(np.full(le.size, k))
        lam.append(rate)
        util.append(u)
        srv.append(s)
    if not lam:
        raise ValueError(f"windows: every window is empty ({len(windows)} given, no requests in any)")
    return _Windows(np.concatenate(upper), np.concatenate(counts), np.concatenate(index),
                    np.array(lam), np.array(util), np.array(srv, dtype=np.int64), skipped)


# ---------------------------------------------------------------------- the model's bucket probabilities
class _BucketModel:
    """Model probability of each bucket of each window, for a batch of parameter sets."""

    def __init__(self, model: QueueModel, data: _Windows, measured_at: str, names: list[str],
                 mean_fixed: float | None, scv_fixed: float | None, delay_fixed: float | None, t_ref: float):
        self.model, self.data, self.measured_at, self.names = model, data, measured_at, names
        self.mean_fixed, self.scv_fixed = mean_fixed, scv_fixed
        self.delay_fixed, self.t_ref = delay_fixed, t_ref
        # The queue alone: a constant delay shifts the bounds instead (see probabilities).
        self._queue = QueueModel(model.discipline, model.family, None, model.slices, model.admission,
                                 model.slice_delay)

    def unpack(self, theta: np.ndarray) -> dict:
        return unpack_parameters(theta, self.names, self.model, self.mean_fixed, self.scv_fixed,
                                 self.delay_fixed, self.t_ref)

    def log_t(self, params: dict) -> np.ndarray:
        """log of the model's response (or in-process) time at the levels ``_Q``, shape (K, W, L)."""
        d, k = self.data, params["mean"].shape[0]
        q = np.tile(_Q, d.size)
        lam = np.repeat(d.lam, _Q.size)
        srv = np.repeat(d.servers, _Q.size)
        x = measured_quantiles(self._queue, params, q, lam, srv, self.measured_at).reshape(k, d.size, _Q.size)
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(x, 1e-300))

    def probabilities(self, theta: np.ndarray) -> np.ndarray:
        """P(bucket) per flat bucket, shape (K, B); NaN rows where the model is unstable."""
        params = self.unpack(theta)
        lt = self.log_t(params)                                   # (K, W, L), increasing in L
        d = self.data
        shift = params.get("delay", np.zeros(params["mean"].shape))[:, None]
        t = d.upper[None, :] - shift                                # (K, B)
        finite = np.isfinite(t) & (t > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            target = np.log(np.where(finite, t, 1.0))
        nodes = lt[:, d.window, :]                                  # (K, B, L): each bucket's window
        # The node below each bound, counted level by level (no (K, B, L) boolean array).
        j = np.zeros(target.shape, dtype=np.int64)
        for level in range(1, _Z.size - 1):
            j += nodes[..., level] <= target
        x0 = np.take_along_axis(nodes, j[..., None], -1)[..., 0]
        x1 = np.take_along_axis(nodes, (j + 1)[..., None], -1)[..., 0]
        # Piecewise-linear z(log t) through the nodes, extended by the end segments.
        with np.errstate(divide="ignore", invalid="ignore"):
            z = _Z[j] + (_Z[j + 1] - _Z[j]) * (target - x0) / (x1 - x0)
        z = np.where(np.isfinite(z), z, np.where(target > x1, np.inf, -np.inf))
        with np.errstate(over="ignore"):
            value = -np.expm1(-np.exp(np.minimum(z, 700.0)))
        cdf = np.where(np.isinf(t) & (t > 0), 1.0, np.where(finite, value, 0.0))
        # A bucket's lower bound is the previous bucket's upper bound within its window.
        first = np.r_[True, d.window[1:] != d.window[:-1]]
        previous = np.concatenate([np.zeros((cdf.shape[0], 1)), cdf[:, :-1]], axis=1)
        low = np.where(first[None, :], 0.0, previous)
        unstable = ~np.all(np.isfinite(lt), axis=(1, 2))
        p = np.maximum(cdf - low, 0.0)
        p[unstable] = np.nan
        return p


def _deviance_residuals(observed: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Signed square roots of the Poisson deviance terms; their squares sum to the multinomial
    deviance (G statistic) when the expected counts of each window add up to its observed total."""
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(observed > 0, observed * np.log(observed / expected), 0.0) - (observed - expected)
    return np.sign(observed - expected) * np.sqrt(np.maximum(2.0 * term, 0.0))


# ---------------------------------------------------------------------- public
def from_histograms(
    windows: Sequence[Mapping],
    servers: ArrayLike = 1,
    discipline: str | None = None,
    family: str | None = None,
    delay: str | float | None = "auto",
    *,
    measured_at: str = "client",
    scv: float | None = None,
    confidence: float = 0.95,
    max_nfev: int = 60,
    slices: int | str | None = None,
    admission: str = "fifo",
    slice_delay: float = 0.0,
) -> HistogramFit:
    """Fit the CPU service-time distribution to latency histograms of many windows at once.

    Parameters
    ----------
    windows : list of mappings
        One record per time window: ``{"buckets": {le: cumulative count}, "arrival_rate": r}``
        (Prometheus: ``le`` the bucket's upper bound in seconds, the ``+Inf`` bucket required,
        counts the increase over the window; fractional counts from ``rate() * step`` are
        fine), or ``{"bounds": [...], "counts": [...]}`` with one count per bucket and the last
        above the largest bound (OpenTelemetry explicit buckets).  Optional per window:
        ``"utilization"`` (the measured CPU busy fraction of ``servers``) and ``"servers"``.
        Windows without requests are skipped and counted in ``warnings_``.
    servers : int, default 1
        Cores sharing the queue (one per Node.js event loop: fit each worker process).
    discipline : {"ps", "fcfs", "rr"} or None, default None
        As in :func:`from_percentiles`; ``rr`` holds ``slices``, ``admission`` and
        ``slice_delay`` when ``slices`` is given, and otherwise profiles the slice count over 2-50
        for both admission rules (the family and delay chosen first at 5 slices), as the
        automatic choice does.  None: chosen from the data (see Notes).
    family : str or None, default None
        Service-time family (:data:`capacity.fit._model.FAMILIES`); None: chosen from the data.
    delay : "auto", None, "constant" or float, default "auto"
        A non-CPU time added to every response: fitted (``"constant"``), held (seconds), none
        (None), or chosen from the data (``"auto"``: none or constant).
    measured_at : {"client", "proxy", "in_process"}, default "client"
        Where the latencies were timed.  ``client`` and ``proxy``: the whole response time
        (queue, CPU and delay).  ``in_process`` (a histogram timed in the server's own
        middleware): the time from when the request reached the handler, so for ``fcfs`` (a
        blocking handler) the CPU time plus delay alone -- the queue in front of the handler is
        invisible in-process -- and for ``ps`` the whole sojourn (every request is in the loop
        at once), for ``rr`` the response less the wait for the first slice, about one k-th of
        the queueing with FIFO admission (:mod:`capacity._rr_in_process`; ``rr`` with idle
        admission in-process is refused: no rule holds for that wait).
    scv : float, optional
        Hold the service scv fixed.
    confidence : float, default 0.95
        Coverage of the intervals.
    max_nfev : int, default 60
        Budget of model evaluations of the solver.

    Returns
    -------
    HistogramFit
        ``service_``, ``cpu_per_request_``, ``scv_``, ``delay_``, ``capacity_qps_``,
        ``deviance_``, ``comparison_``, ``windows_``, ``candidates_`` (the models compared, with
        their scores), ``summary``, ``predict(q, arrival_rate)``, ``ceiling(slo)``.

    Raises
    ------
    ValueError
        Malformed windows (no ``+Inf`` bucket, decreasing cumulative counts, counts not
        matching the bounds, no arrival rate), an unknown discipline, family or
        ``measured_at``, ``rr`` with idle admission and ``in_process``, or more free parameters
        than the buckets can carry.

    Warns
    -----
    FitWarning
        The model misses the histograms (RMS horizontal miss above 10 %, see Notes), the solver
        did not converge, a parameter sits on its search bound, or windows were skipped.
    IdentifiabilityWarning
        All windows at one load: CPU variability and delay cannot be told apart.

    Notes
    -----
    Likelihood: in window w with N_w requests, the bucket counts are multinomial with
    probabilities ``p_k = F_w(b_k) - F_w(b_{k-1})``, F_w the model's distribution function of
    the measured time at that window's arrival rate.  Maximising
    ``sum_w sum_k n_wk log p_wk`` is least squares on the deviance residuals
    ``sign(n - e) sqrt(2 (n log(n / e) - (n - e)))``, ``e = N_w p_k`` (their squares sum to
    the G statistic), solved by :func:`scipy.optimize.least_squares` (trust-region
    reflective) over ``log E[S]``, ``log scv`` and the delay, with a forward-difference
    Jacobian computed in one batched model call.  With every window's utilisation the mean is
    held by the utilisation law ``E[S] = sum(U_w c_w) / sum(lambda_w)`` as in
    :func:`from_percentiles` (so CPU spent outside requests counts as request cost); where the
    windows' CPU against their rate shows a background (busy cores at zero QPS), the mean held
    is that of requests on cores slowed by the background, the summary has a ``background`` row,
    and the prediction intervals span the ratio too (:mod:`capacity.fit._cpu_law`).

    F_w comes from the model's quantiles at 40 levels from q = 0.001 to 1 - 1e-6 (the shipped
    tables' levels, so tabled models answer from their splines), ``log t`` linear in
    ``z = log(-log(1 - q))`` between them; this interpolation is exact at the levels and,
    between them, within 0.2 % in t for the smooth laws here (the levels are 0.42 apart in z).

    Model selection: when ``discipline`` or ``family`` is None or ``delay="auto"``, every
    combination of the candidates is fitted -- disciplines ps and fcfs; families lognormal and
    gamma (for ps those the shipped PS quantile table holds: a family computed point by point
    takes minutes per fit; give ``family=`` to have it anyway); no delay and a constant delay -- and
    the one with the smallest QAIC is returned, ``QAIC = G / c + 2 k`` (k free parameters, c
    the dispersion ``G / df`` of the candidate with the most parameters, at least 1: the
    quasi-likelihood AIC for overdispersed counts, Burnham and Anderson 2002, sec. 6.5).
    ``candidates_`` lists them with ``delta_qaic`` and Akaike weights
    ``exp(-delta / 2)`` normalised; the summary names the runner-up.  Event-loop round robin
    joins the candidates when the data can tell it apart (the windows' loads spanning a factor
    1.5, latencies not in-process): for
    each admission rule its slice count is profiled over 2-50 (one more free parameter) with
    the best candidate's family and delay, and ``slices_range_`` holds the counts the data cannot
    tell apart (``capacity.fit._rr_candidates``).  An rr fit that is not ahead by QAIC with its
    most favourable window's deviance left out (e.g. it wins only through one long busy period of
    heavy-tailed CPU), or whose gain is not consistent across the windows (Vuong's z below 1.28,
    waived when the best PS/FCFS fit misses its own histograms and rr does not), is set
    aside and listed in the table "round robin set aside".

    Fit quality: with tens of thousands of requests per window the G statistic rejects every
    model (a queue's latencies are correlated, and the models are accurate to a few per cent,
    which such counts resolve: PS with lognormal CPU simulated at utilisation 0.1-0.7 gives
    ``G / df`` of 3-5 against the exact model), so misfit is judged in time, not in counts:
    at each bound b with at least 20 requests on either side, the model's time at the observed
    share, ``log(t_model(F_obs(b)) / b)``; an RMS above 10 % (the threshold of
    :func:`from_percentiles`) is a misfit.  ``G / df`` is reported as ``dispersion``.  The same
    miss is also taken where a capacity question is answered: its mean over the slowest tenth of
    the requests of the busiest quarter of the windows (``busy_tail_log_time_miss``, signed; with
    four windows or more).  A whole-day RMS can hide a tail too light where the day was busiest,
    and then the p99 at a higher load is too low.  On a real server's days (``validation/``,
    proxy histograms): a blocking handler fitted with an RMS miss of 9 % had a busy-tail miss of
    -15 % and its p99 at 80 % CPU came out 17 % low; busy-tail misses of -22 % to -38 % (RMS
    18-25 %) went with p99s at 70-80 % CPU 9-28 % low; where the busy-tail miss was within 3 %
    the peak p99s were off by -14 % to +22 % either way.  Below -10 % it is warned; the
    prediction intervals take the larger of the two misses as their model error.

    Intervals (``summary``: Wald on the log scale): a queue's consecutive latencies are
    positively correlated, so the counts carry less information than independent draws; the
    covariance is the window-clustered sandwich, never below the Fisher information ``J^T J``
    of the deviance residuals scaled by the dispersion ``max(1, G / df)`` (see
    ``_covariance``).  Prediction intervals (``predict(..., interval=)``) add the candidate
    models and the fit's own miss as a model error (:meth:`PercentileFit.predict`).

    Unlike Prometheus's ``histogram_quantile`` (linear interpolation inside a bucket, off by
    up to a bucket width), the fit never interpolates the data: it compares counts with the
    model's probability of each bucket.

    References
    ----------
    A. Agresti, *Categorical Data Analysis*, 3rd ed., Wiley 2013, sec. 1.5 (the multinomial
    likelihood and the G statistic) and sec. 4.5 (overdispersion).
    K. P. Burnham, D. R. Anderson, *Model Selection and Multimodel Inference*, 2nd ed.,
    Springer 2002, sec. 2.5 and 6.5 (QAIC and Akaike weights).

    Examples
    --------
    Histograms of an M/G/1-PS queue with 20 ms lognormal CPU (scv 2) at three loads:

    >>> import numpy as np
    >>> from capacity import Service, ps
    >>> from capacity.fit import from_histograms
    >>> svc, le = Service.lognormal(0.02, 2.0), [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0]
    >>> windows = []
    >>> for rate in (10.0, 20.0, 30.0):
    ...     above = ps.response_sf(le, rate, svc)
    ...     cum = dict(zip(le + [float("inf")], 3600 * rate * np.r_[1 - above, 1.0]))
    ...     windows.append({"buckets": cum, "arrival_rate": rate})
    >>> fit = from_histograms(windows)
    >>> fit.discipline, fit.family, fit.delay_
    ('ps', 'lognormal', None)
    >>> round(fit.cpu_per_request_, 4), round(fit.scv_, 1)
    (0.02, 2.0)
    """
    measured_at = check_choice(measured_at, "measured_at", MEASURED_AT)  # before the data are read
    if discipline is not None:
        check_discipline(discipline)
    data = _parse_windows(windows, servers)
    auto_delay = isinstance(delay, str) and delay == "auto"
    candidates = candidate_grid(("ps", "fcfs") if discipline is None else (discipline,),
                                lambda d: candidate_families(d) if family is None else (family,),
                                (None, "constant") if auto_delay else (delay,))
    fits, set_aside = [], []
    profile_rr = discipline == "rr" and (slices is None or (isinstance(slices, str) and slices == "fit"))
    for d, f, dl in candidates:
        opts = check_percentile_options(d, f, dl, scv, confidence, max_nfev, 5 if profile_rr else slices,
                                        admission, slice_delay)
        fits.append(_fit_one(data, opts, measured_at))
    options = {"scv": scv, "confidence": confidence, "max_nfev": max_nfev, "slice_delay": slice_delay}
    top = fits[int(np.argmin(qaic_scores([f.deviance_ for f in fits], [f._n_free for f in fits],
                                         [f.degrees_of_freedom_ for f in fits])[0]))]
    _, f, dl = candidates[fits.index(top)]        # the best family and delay so far
    if profile_rr:
        # rr asked for without a slice count: the family and delay that fit best at 5 slices, then
        # the count profiled with them for either admission rule (14 fits, not 14 per family).
        pairs = rr_candidates(_fit_one, data, measured_at, f, dl, options)
        fits, candidates = [fit for fit, _ in pairs], [label for _, label in pairs]
    if discipline is None:
        if rr_can_be_told(data):
            # Event-loop round robin lies between them: with the best family and delay so far, its
            # slice count profiled, for either admission rule.
            kept, set_aside = admitted(rr_candidates(_fit_one, data, measured_at, rr_family(f, top, family, data.servers),
                                                     dl, options), fits, top, _MAX_RMS)
            for fit, label in kept:
                fits.append(fit)
                candidates = [*candidates, label]
    best = fits[0]
    if len(fits) > 1:
        best = select(fits, candidates, [f.deviance_ for f in fits], [f._n_free for f in fits],
                      [f.degrees_of_freedom_ for f in fits], "rms_log_time_miss",
                      [f.fit_quality_["rms_log_time_miss"] for f in fits])
    if set_aside:
        import pandas as pd

        # Said, not hidden: the chosen model was not the best fit of every candidate tried.
        best._add_table("round robin set aside (no gain over the best PS/FCFS fit beyond one window, "
                        "or not consistent across windows)", pd.DataFrame(set_aside))
        best.method += "; " + "; ".join(
            f"{r['discipline']} with {r['slices']} slices set aside: deviance gain "
            f"{r['deviance_gain']:.1f} over the best PS/FCFS fit, {r['gain_in_window']:.1f} in window "
            f"{r['window']} alone (without that window {r['gain_without_it']:.1f}, "
            f"{r['gain_needed']:.1f} needed; across windows z = {r['window_z']:.2f}, 1.28 needed)"
            for r in set_aside)
    _check_cpu_cost(best, data, measured_at, delay, scv, confidence, max_nfev)
    best._profile_bound_intervals()
    best._emit_warnings(stacklevel=3)
    return best


def _check_cpu_cost(best: HistogramFit, data: _Windows, measured_at: str, delay, scv, confidence: float,
                    max_nfev: int) -> None:
    """Where the CPU per request is held by the windows' utilisation, fit the chosen model again
    with it free and compare (:func:`._diagnostics.cpu_cost_contradiction`): a clear disagreement
    goes in ``contradictions_`` and a warning, as :func:`from_percentiles` does.

    Only for histograms of the whole response (client, proxy): in-process the queue in front of
    the handler is invisible, so the latencies barely tell the CPU from a delay, and a model that
    is right with the CPU's cost can fit them better with another.  Measured on the real server's
    saved days (``validation/``): the CPU + IO handler's in-process fits found 1.7-4.1 ms where its
    CPU is 6.2 ms (a false alarm every day); from the proxy every fit was within 10 % of the CPU's
    cost."""
    if np.isnan(data.util).any() or measured_at == "in_process":
        return
    m = best._model
    free_data = _Windows(data.upper, data.counts, data.window, data.lam, np.full(data.size, np.nan),
                         data.servers, data.skipped)
    held_delay = delay if isinstance(delay, (int, float)) and not isinstance(delay, bool) else m.delay
    opts = check_percentile_options(m.discipline, m.family, held_delay, scv, confidence, max_nfev,
                                    m.slices if m.discipline == "rr" else None, m.admission, m.slice_delay)
    try:
        free = _fit_one(free_data, opts, measured_at)
    except ValueError:
        return      # too few counts for one more free parameter: nothing to compare
    best._set_quality("cpu_per_request_from_histograms", free.cpu_per_request_)
    dof = max(free.degrees_of_freedom_, 1)
    lr = (best.deviance_ - free.deviance_) / max(1.0, free.deviance_ / dof)
    note = diag.cpu_cost_contradiction(
        best.cpu_per_request_, free.cpu_per_request_, lr,
        f"{100 * best.fit_quality_['rms_log_time_miss']:.0f} % RMS in time",
        f"{100 * free.fit_quality_['rms_log_time_miss']:.0f} %", "histograms")
    if note is not None:
        best.contradictions_ = (*best.contradictions_, note)
        best._warn(FitWarning, f"the data contradict each other: {note}")


def fit_source_windows(windows: list[dict], notes: list[str], source: dict, servers, measured_at: str,
                       options: dict, stacklevel: int) -> HistogramFit:
    """:func:`from_histograms` on the windows a reader made (Prometheus, k6): the reader's notes
    (lines or windows it skipped, counter resets...) are warned first, at the user's call
    (``stacklevel`` counted from here), and kept in ``warnings_``; ``source_`` says what was read."""
    import warnings

    for note in notes:
        warnings.warn(note, FitWarning, stacklevel=stacklevel)
    fit = from_histograms(windows, servers, measured_at=measured_at, **options)
    fit.source_ = source
    fit.warnings_.extend(notes)
    return fit


def _fit_one(data: _Windows, opts, measured_at: str, start: np.ndarray | None = None) -> HistogramFit:
    """One model fitted to the windows (warnings recorded, not yet emitted); ``start``: the
    parameters to start the search from (a neighbouring model's fit), else :func:`_start`'s."""
    check_measured_at(measured_at, opts.discipline, opts.delay, opts.admission)
    if opts.slice_candidates is not None:
        raise ValueError("slices must be given as an integer for a histogram fit (profiling the slice "
                         "count is available in from_percentiles)")
    if opts.delay == "lognormal":
        raise ValueError("delay='lognormal' is not available for histogram fits; use None, "
                         "'constant', 'auto' or a number of seconds")
    model = QueueModel(opts.discipline, opts.family, opts.delay, slices=opts.slices_fixed or 1,
                       admission=opts.admission, slice_delay=opts.slice_delay)
    mean_fixed, readings = None, None
    if not np.isnan(data.util).any():
        readings = cpu_readings(data.lam, data.util, data.servers)
        mean_fixed = held_mean(readings)
    names = [] if mean_fixed is not None else ["log_mean"]
    if opts.family in TWO_PARAM and opts.scv_fixed is None:
        names.append("log_scv")
    if opts.delay == "constant" and opts.delay_fixed is None:
        names.append("delay")
    n_free_cells = int(np.sum(np.bincount(data.window) - 1))
    if len(names) > n_free_cells:
        raise ValueError(f"the histograms carry {n_free_cells} independent bucket counts, fewer than "
                         f"the {len(names)} free parameters ({', '.join(names)}); give more buckets "
                         "or windows, or hold parameters (scv=..., delay=...)")
    t_ref = float(np.median(data.upper[np.isfinite(data.upper)]))
    bm = _BucketModel(model, data, measured_at, names, mean_fixed, opts.scv_fixed, opts.delay_fixed, t_ref)
    theta, sol, lo_b, hi_b = _solve(bm, data, opts, start)
    res = _result(bm, data, opts, theta, sol, lo_b, hi_b, mean_fixed, measured_at)
    if readings is not None:
        hold_readings(res, readings)
    return res


def _bounds(bm: _BucketModel, data: _Windows, opts) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = [], []
    for name in bm.names:
        if name == "log_mean":
            # The busiest window stays below utilisation 0.999.
            hi_mean = float(np.min(0.999 * data.servers / data.lam))
            lo.append(math.log(hi_mean * 1e-6))
            hi.append(math.log(hi_mean))
        elif name == "log_scv":
            a, b = SCV_DOMAIN[opts.family]
            if opts.discipline in ("ps", "rr"):
                from .._quantile_table import ps_scv_range
                a, b = ps_scv_range(opts.family, data.servers) or (max(a, 0.05), min(b, 20.0))
            lo.append(math.log(a))
            hi.append(math.log(b))
        else:  # delay, in units of t_ref: no request was faster than it
            # The smallest time seen lies in the first non-empty bucket of some window: the delay
            # is below that bucket's upper bound (below its lower bound if that is above zero).
            nonempty = (data.counts > 0) & np.isfinite(data.upper)
            first = [data.upper[nonempty & (data.window == w)].min()
                     for w in np.unique(data.window[nonempty])]
            lo.append(0.0)
            hi.append(float(min(first)) / bm.t_ref if first else 1.0)
    return np.array(lo), np.array(hi)


def _start(bm: _BucketModel, data: _Windows) -> np.ndarray:
    """Mean from the least loaded window's bucket midpoints (its load removed as for M/M/1),
    scv 1, no delay (:func:`_solve` moves it inside the search box)."""
    w = int(np.argmin(data.lam))
    sel = data.window == w
    upper, lower, c = data.upper[sel], data.lower[sel], data.counts[sel]
    mid = np.where(np.isfinite(upper), 0.5 * (upper + lower), 2.0 * lower)
    mean_t = float(np.sum(mid * c) / np.sum(c))
    mean = mean_t / (1.0 + data.lam[w] * mean_t / data.servers[w])
    theta = []
    for name in bm.names:
        theta.append({"log_mean": math.log(max(mean, 1e-12)), "log_scv": 0.0, "delay": 0.0}[name])
    return np.array(theta, dtype=float)


def _solve(bm: _BucketModel, data: _Windows, opts, start: np.ndarray | None = None):
    lo, hi = _bounds(bm, data, opts)
    observed = data.counts
    total = data.n[data.window]
    cache: dict[bytes, np.ndarray] = {}

    def residuals_batch(thetas: np.ndarray) -> np.ndarray:
        p = bm.probabilities(thetas)
        expected = total[None, :] * np.maximum(p, _P_FLOOR)
        r = _deviance_residuals(observed[None, :], expected)
        return np.where(np.isnan(p), 1e3, r)

    def fun(theta):
        key = theta.tobytes()
        if key not in cache:
            cache[key] = residuals_batch(theta[None, :])[0]
        return cache[key]

    def jac(theta):
        h = 1e-5 * np.maximum(1.0, np.abs(theta))
        # Step inward at an upper bound, so every point stays in the search box.
        h = np.where(theta + h > hi, -h, h)
        # The solver asks for the residuals at theta before their Jacobian: reuse them, so a
        # Jacobian costs p parameter sets, not p + 1 (a third of an rr fit on several cores).
        r0 = fun(theta)
        r = residuals_batch(theta[None, :] + np.diag(h))
        return ((r - r0) / h[:, None]).T

    if not bm.names:
        theta = np.zeros(0)
        r = fun(theta)
        return theta, {"fun": r, "jac": np.zeros((r.size, 0)), "nfev": 1, "success": True}, lo, hi
    span = hi - lo
    theta0 = np.clip(_start(bm, data) if start is None else start, lo + 1e-3 * span, hi - 1e-3 * span)
    sol = optimize.least_squares(fun, theta0, jac=jac, bounds=(lo, hi), method="trf", x_scale="jac",
                                 max_nfev=opts.max_nfev)
    return sol.x, {"fun": sol.fun, "jac": sol.jac, "nfev": sol.nfev, "success": bool(sol.status > 0),
                   "residuals": fun}, lo, hi


def _result(bm: _BucketModel, data: _Windows, opts, theta, sol, lo_b, hi_b, mean_fixed, measured_at):
    import pandas as pd

    model = bm.model
    res = HistogramFit(
        f"{model.discipline.upper()} queue, {model.family} CPU time"
        + ("" if model.delay is None else f" + {model.delay} delay")
        + f" (histograms measured at the {measured_at})",
        confidence_level=opts.confidence, n_observations=data.size,
        method="maximum likelihood on the bucket counts (multinomial; scipy trust-region reflective); "
               "Wald intervals from the window-clustered sandwich covariance")
    res.discipline, res.family, res.measured_at = model.discipline, model.family, measured_at
    res.servers = int(np.unique(data.servers)[0]) if np.unique(data.servers).size == 1 else data.servers
    res._servers_default = int(np.max(data.servers))
    res._model, res._space, res._theta = model, _PredictionSpace(bm, lo_b, hi_b), theta
    pars = bm.unpack(theta[None, :])
    mean, scv_hat = float(pars["mean"][0]), float(pars["scv"][0])
    res.service_ = make_service(model.family, mean, scv_hat)
    res.cpu_per_request_, res.scv_ = mean, scv_hat
    res.delay_ = float(pars["delay"][0]) if model.delay == "constant" else None
    res.capacity_qps_ = res._servers_default / mean
    res.slices_ = model.slices if model.discipline == "rr" else None
    res.admission_ = model.admission if model.discipline == "rr" else None
    res.slice_delay_ = model.slice_delay if model.discipline == "rr" else None
    res.slices_range_ = (res.slices_, res.slices_) if model.discipline == "rr" else None
    res.slice_profile_ = None
    res.residuals_ = sol["fun"]
    res.n_function_evaluations_ = int(sol["nfev"])

    # goodness of fit: the G statistic against the saturated model (reported as the dispersion
    # G / df; its chi-square p-value would reject every model, see Notes)
    g = float(np.sum(sol["fun"] ** 2))
    df = int(np.sum(np.bincount(data.window) - 1)) - len(bm.names)
    res.deviance_, res.degrees_of_freedom_ = g, df
    jac = np.asarray(sol["jac"])
    cov = None
    if bm.names:
        cov = _covariance(jac, np.asarray(sol["fun"]), data.window, g, df)
    res.covariance_ = cov
    # What a parameter on its search bound needs for its range (capacity.fit._bound_profile),
    # profiled only when asked: most candidates are never drawn from.
    res._residuals, res._dispersion = sol.get("residuals"), g / df if df > 0 else 1.0
    wald = WaldIntervals(cov, bm.names, opts.confidence, bm.t_ref)
    lo_m, hi_m = wald.interval("log_mean", mean)
    res._add_parameter("cpu_per_request", mean, lo_m, hi_m, unit="s",
                       note="CPU seconds per request" if "log_mean" in bm.names
                       else "from the utilisation law (held)")
    if model.family in TWO_PARAM:
        res._add_parameter("scv", scv_hat, *wald.interval("log_scv", scv_hat), unit="",
                           note="service-time scv" if "log_scv" in bm.names else "held fixed")
    else:
        res._add_parameter("scv", scv_hat, unit="", note=f"fixed by the {model.family} family")
    if model.delay == "constant":
        res._add_parameter("delay", res.delay_, *wald.interval("delay", res.delay_, log=False), unit="s",
                           note="non-CPU latency" if "delay" in bm.names else "held fixed")
    rate = (lambda m: math.nan if math.isnan(m) else (res._servers_default / m if m > 0 else math.inf))
    res._add_parameter("capacity_qps", res.capacity_qps_, rate(hi_m), rate(lo_m), unit="req/s",
                       note=f"{servers_text(res._servers_default)} / E[S] (100% CPU)")

    # tables: per bucket and per window
    p = bm.probabilities(theta[None, :])[0]
    total = data.n[data.window]
    obs_cum = _within_window_cumsum(data.counts, data.window)
    model_cum = _within_window_cumsum(p, data.window)
    finite = np.isfinite(data.upper)
    res.comparison_ = pd.DataFrame({
        "window": data.window[finite], "arrival_rate": data.lam[data.window][finite],
        "le": data.upper[finite], "observed_share_above": 1.0 - obs_cum[finite] / total[finite],
        "model_share_above": np.clip(1.0 - model_cum[finite], 0.0, 1.0)})
    res._add_table("observed vs model (share of requests slower than each bound)", res.comparison_)
    util = data.lam * mean / data.servers
    res.windows_ = pd.DataFrame({
        "arrival_rate": data.lam, "n_requests": data.n, "utilization_model": util,
        "utilization_measured": data.util,
        "deviance": np.bincount(data.window, weights=sol["fun"] ** 2, minlength=data.size)})
    res.windows_.index.name = "window"
    res._add_table("windows", res.windows_)
    miss, taken = _horizontal_miss(bm, data, theta, obs_cum, total)
    rms_miss = float(np.sqrt(np.mean(miss ** 2))) if miss.size else math.nan
    res._set_quality("rms_log_time_miss", rms_miss)
    res._set_quality("max_log_time_miss", float(np.max(np.abs(miss))) if miss.size else math.nan)
    busy_miss, busy_lo, busy_hi = _busy_tail_miss(miss, taken, data, obs_cum, total)
    res._set_quality("busy_tail_log_time_miss", busy_miss)
    res._set_quality("dispersion", g / df if df > 0 else math.nan)
    res._set_quality("deviance", g)
    res._set_quality("degrees_of_freedom", df)
    res._set_quality("n_windows", data.size)
    res._set_quality("n_requests", float(np.sum(data.n)))
    res._set_quality("max_utilization", float(np.max(util)))
    res._set_quality("function_evaluations", res.n_function_evaluations_)

    if data.skipped:
        res._warn(FitWarning, f"{len(data.skipped)} window(s) without requests were skipped "
                              f"(indices {data.skipped[:10]}{'...' if len(data.skipped) > 10 else ''})")
    if not sol["success"]:
        res._warn(FitWarning, f"the solver stopped after {res.n_function_evaluations_} evaluations without "
                              "converging (raise max_nfev)")
    if not miss.size:
        res._warn(FitWarning, f"the buckets are too coarse to judge the fit: no bucket bound has "
                              f"{_MIN_TAIL_COUNT} requests on each side in any window (most requests fall in "
                              "one bucket); the model is checked only by the bucket counts, and a histogram "
                              "with finer buckets around the typical latency would test it")
    if rms_miss > _MAX_RMS:
        worst = int(np.argmax(res.windows_["deviance"]))
        res._warn(FitWarning, f"the model misses the histograms: at the bucket bounds its times are "
                              f"{100 * rms_miss:.0f} % (RMS) off the observed ones, more than sampling "
                              f"noise and the models' own accuracy explain (worst window {worst} at "
                              f"{data.lam[worst]:.3g} req/s); another discipline, family or a delay may "
                              "describe the data better, and predictions from this fit are not to be trusted")
    if busy_miss < -_MAX_RMS:
        res._warn(FitWarning, f"in its busiest windows ({busy_lo:.3g}-{busy_hi:.3g} req/s) the model's slowest "
                              f"tenth of requests is {100 * -busy_miss:.0f} % faster than observed: its p99 "
                              "there is too low, and likely by more at higher loads (the prediction "
                              "intervals carry this miss as a model error, which may not be enough); see "
                              "candidates_ for a model whose tail grows with the load as the data's does")
    if np.ptp(data.lam) <= 0.1 * np.max(data.lam) and ("log_scv" in bm.names or "delay" in bm.names):
        res._warn(IdentifiabilityWarning, "every window is at about the same load "
                                          f"({np.min(data.lam):.3g}-{np.max(data.lam):.3g} req/s): CPU "
                                          "variability and delay are told apart by how the distribution "
                                          "changes with load; windows at other loads (busier hours) would")
    for i in on_bound(theta, lo_b, hi_b):
        res._warn(FitWarning, f"{bm.names[i]} sits on its search bound ({theta[i]:.4g}); the family or "
                              "model may not suit the data")
    res.candidates_, res.contradictions_, res._n_free = None, (), len(bm.names)
    res._candidate_fits = [(res, 1.0)]
    return res


def _horizontal_miss(bm: _BucketModel, data: _Windows, theta: np.ndarray, obs_cum: np.ndarray,
                     total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log(t_model(q_obs) / b)`` at each finite bound b whose observed share q_obs has at least
    ``_MIN_TAIL_COUNT`` requests on each side: how far, in log time, the model's distribution
    passes from each observed point of the empirical one.  Unlike the G statistic it does not
    grow with the number of requests, so it can be held against the models' stated accuracy.
    Returns the misses and the flat mask of the buckets they were taken at."""
    finite = np.isfinite(data.upper)
    below = obs_cum / total
    keep = finite & (obs_cum >= _MIN_TAIL_COUNT) & (total - obs_cum >= _MIN_TAIL_COUNT)
    if not keep.any():
        return np.zeros(0), keep
    params = bm.unpack(theta[None, :])
    nodes = bm.log_t(params)[0][data.window[keep]]               # (B, L)
    z = np.log(-np.log1p(-below[keep]))
    j = np.clip(np.searchsorted(_Z, z) - 1, 0, _Z.size - 2)
    rows = np.arange(j.size)
    slope = (nodes[rows, j + 1] - nodes[rows, j]) / (_Z[j + 1] - _Z[j])
    log_t = nodes[rows, j] + slope * (z - _Z[j])
    delay = float(params["delay"][0]) if "delay" in params else 0.0
    return np.log(np.exp(log_t) + delay) - np.log(data.upper[keep]), keep


def _busy_tail_miss(miss: np.ndarray, taken: np.ndarray, data: _Windows, obs_cum: np.ndarray,
                    total: np.ndarray) -> tuple[float, float, float]:
    """The model's mean miss in log time (``miss`` at the buckets ``taken``, from
    :func:`_horizontal_miss`; signed: below zero the model is
    faster than observed) over the slowest tenth of the requests (bounds whose observed share
    below is at least :data:`_BUSY_TAIL_LEVEL`) of the busiest windows (arrival rate at or above
    the upper quartile of the windows'), with those windows' lowest and highest rate; NaN with
    fewer than :data:`_BUSY_MIN_WINDOWS` windows or fewer than two such bounds.

    Why: the whole-day RMS miss averages over every window and every level, but a capacity
    question is answered at a load above the day's and mostly in the tail.  A model whose tail
    is too light where the day was busiest predicts a peak's p99 too low -- measured on a real
    server (``validation/README.md``): where this miss was -22 % to -38 %, the p99 predicted at
    70-80 % CPU was 9-28 % low."""
    if data.size < _BUSY_MIN_WINDOWS:
        return math.nan, math.nan, math.nan
    busy = data.lam >= np.quantile(data.lam, 0.75)
    tail = (obs_cum / total) >= _BUSY_TAIL_LEVEL
    chosen = (busy[data.window] & tail)[taken]
    if chosen.sum() < 2:
        return math.nan, math.nan, math.nan
    return float(np.mean(miss[chosen])), float(np.min(data.lam[busy])), float(np.max(data.lam[busy]))


class _PredictionSpace:
    """What :class:`PercentileFit`'s ``predict`` needs: model quantiles at parameter vectors."""

    def __init__(self, bm: _BucketModel, lo: np.ndarray, hi: np.ndarray):
        self.bm, self.lo, self.hi = bm, lo, hi        # lo, hi: the search bounds
        self.model = bm.model

    @property
    def names(self) -> list[str]:
        return self.bm.names

    @property
    def t_ref(self) -> float:
        return self.bm.t_ref

    def unpack(self, theta: np.ndarray) -> dict:
        return self.bm.unpack(theta)

    def quantiles_at(self, theta, q, lam, servers) -> np.ndarray:
        return self.bm.model.quantiles(self.bm.unpack(theta), q, lam, servers)


def _covariance(jac: np.ndarray, resid: np.ndarray, window: np.ndarray, g: float, df: int) -> np.ndarray:
    """Covariance of the search parameters: the window-clustered sandwich, never below the
    dispersion-scaled Fisher information.

    The counts within a window are not multinomial draws of independent requests (a busy
    period slows many together), most of all in the tail, so the Fisher information overstates
    what they carry.  Windows are independent of each other: the sandwich
    ``A^-1 (sum_w s_w s_w^T) A^-1``, ``A = J^T J``, ``s_w = J_w^T r_w`` the score of window w,
    scaled by ``W / (W - p)`` for its small-sample bias, estimates the variance from how the
    windows scatter about the model.  With few windows it is itself noisy, so the larger of it
    and ``A^-1 max(1, G / df)`` (per parameter, by the diagonal) is taken.
    """
    a_inv = np.linalg.pinv(jac.T @ jac)
    fisher = a_inv * (max(1.0, g / df) if df > 0 else 1.0)
    n_windows, p = int(window.max()) + 1, jac.shape[1]
    if n_windows <= p + 1:
        return fisher
    scores = np.zeros((n_windows, p))
    np.add.at(scores, window, jac * resid[:, None])
    sandwich = a_inv @ (scores.T @ scores) @ a_inv * (n_windows / (n_windows - p))
    scale = np.sqrt(np.maximum(np.diag(sandwich), np.diag(fisher)) / np.maximum(np.diag(fisher), 1e-300))
    return fisher * np.outer(scale, scale)


def _within_window_cumsum(values: np.ndarray, window: np.ndarray) -> np.ndarray:
    """Cumulative sums restarting at each window (flat arrays sorted by window, then bound)."""
    total = np.cumsum(values)
    first = np.r_[0, np.flatnonzero(np.diff(window)) + 1]
    before = np.r_[0.0, total][first]
    return total - np.repeat(before, np.diff(np.r_[first, values.size]))
