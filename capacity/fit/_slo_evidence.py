"""Whether a window's requests show that a latency SLO held: an exact bound on the share of slow
requests, with the queue's correlation and the number of windows checked allowed for.

A fitted model's ceiling is checked against the data it came from (:meth:`PercentileFit.ceiling`):
a window at a higher rate where the SLO held contradicts it.  One window meeting a p99 target is
weak evidence on its own.  In a simulated FCFS queue (lognormal 20 ms CPU, scv 1) at 30 QPS, whose
exact p99 is 257 ms (2.4 % of requests over 200 ms), one 60 s window of 1,800 requests had only
0.93 % over 200 ms: it "met" p99 <= 200 ms by chance.  So a window counts as evidence only when the
upper confidence bound of its share of requests over the SLO time is within ``1 - q``.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np

__all__ = ["SloEvidence", "correlation_dispersion", "held_text", "local_dispersion", "observations_held",
           "share_upper_bound", "slo_held", "windows_held"]

_NEIGHBOURS = 30          # windows nearest in rate whose scatter measures a window's dispersion ...
_MIN_NEIGHBOURS = 10      # ... and the fewest that measure it at all


def share_upper_bound(over, n_requests, level, dispersion=1.0) -> np.ndarray:
    """One-sided upper confidence bound of the share of requests slower than a time.

    Parameters
    ----------
    over : array_like
        Requests slower than the time (k; fractional counts are fine).
    n_requests : array_like
        Requests in the window (n >= k).
    level : float or array_like
        Confidence of the bound, in (0, 1).
    dispersion : float or array_like, default 1
        Variance of k over the binomial variance (c >= 1): the requests count as ``n / c``
        independent ones, ``k / c`` of them slow.

    Returns
    -------
    ndarray
        ``u = B^-1(level; k / c + 1, (n - k) / c)``, B the beta distribution function; 1 where
        ``k >= n`` or n is not positive; broadcast over the inputs.

    Notes
    -----
    Clopper-Pearson: u is the share at which ``P(Binomial(n, u) <= k) = 1 - level``, the exact
    bound for independent requests (its coverage is at least ``level`` for every true share).
    Requests in a queue are not independent: a busy period makes many consecutive requests
    slow together, so the count of slow requests varies c times more than a binomial one.
    Dividing n and k by c (the quasi-binomial effective sample size) keeps the bound's width
    right to first order; it is an approximation whose accuracy depends on c's, see
    :func:`local_dispersion`.  The bound increases with k: fewer slow requests never give a
    higher bound.

    References
    ----------
    C. J. Clopper, E. S. Pearson, "The use of confidence or fiducial limits illustrated in the case
    of the binomial", Biometrika 26, 1934.  A. Agresti, *Categorical Data Analysis*, 3rd ed.,
    Wiley 2013, sec. 1.4 (the beta form) and 4.7 (overdispersion, quasi-likelihood).

    Examples
    --------
    >>> round(float(share_upper_bound(17, 1800, 0.95)), 4)
    0.0141
    """
    from scipy import stats

    k, n, c, lv = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (over, n_requests, dispersion, level)))
    c = np.maximum(c, 1.0)
    ok = (n > 0) & (k < n) & np.isfinite(k) & np.isfinite(n)
    a = np.where(ok, np.maximum(k, 0.0) / c + 1.0, 1.0)
    b = np.where(ok, (n - np.maximum(k, 0.0)) / c, 1.0)
    with np.errstate(all="ignore"):
        u = stats.beta.ppf(lv, a, b)
    return np.where(ok, u, 1.0)


@dataclasses.dataclass(frozen=True)
class SloEvidence:
    """Groups of windows whose requests show, jointly with confidence ``level``, that every SLO
    percentile held (see :func:`slo_held`); one row per group, busiest first.

    ``rate_low``/``rate_high`` (req/s) the group's least and most loaded window, ``windows`` its
    size, ``n_requests`` its requests, ``over`` (G, J) its requests slower than the checked times,
    ``upper`` (G, J) the bounds of those shares, ``dispersion`` (G, J) the deflation used;
    ``n_tests`` the groups checked, ``level`` the joint confidence; :meth:`members` the windows
    of a group.
    """

    rate_low: np.ndarray
    rate_high: np.ndarray
    windows: np.ndarray
    n_requests: np.ndarray
    over: np.ndarray
    upper: np.ndarray
    dispersion: np.ndarray
    n_tests: int
    level: float
    start: np.ndarray
    order: np.ndarray

    def members(self, i: int) -> np.ndarray:
        """Indices of the windows of group ``i``."""
        return self.order[self.start[i]:self.start[i] + self.windows[i]]


def slo_held(arrival_rate, over, n_requests, allowed, level: float, dispersion=1.0) -> SloEvidence:
    """Which windows, alone or pooled with those next to them in load, show that the SLO held.

    Parameters
    ----------
    arrival_rate : array_like, shape (W,)
        Each window's request rate (req/s).
    over : array_like, shape (W, J)
        Per window, per SLO percentile: requests slower than a time at or below the SLO time (so at
        least as many as were slower than the SLO time itself); NaN where unknown.
    n_requests : array_like, shape (W,)
        Requests per window.
    allowed : array_like, shape (J,)
        ``1 - q`` per SLO percentile: the largest share of slow requests the SLO allows.
    level : float
        Joint confidence over every group checked, e.g. 0.95.
    dispersion : array_like, broadcast to (W, J)
        Variance inflation of each window's counts (:func:`share_upper_bound`).

    Returns
    -------
    SloEvidence
        The groups that held, busiest (highest ``rate_low``) first.

    Notes
    -----
    The groups: the windows sorted by rate, every run of 1, 2, 4, 8, ... consecutive ones.  A
    group holds when, for every SLO percentile, the upper bound of its pooled share of slow
    requests ``sum k / sum n`` is within ``1 - q``, with the deflation ``sum c n / sum n`` (the
    pooled count's variance is ``sum c_w n_w p (1 - p)``, windows being independent of one
    another).  Pooling windows at nearby loads gives short windows (a minute of a few hundred
    requests cannot show a p99 alone) the power of their sum; since a queue's share of slow
    requests grows with its load, a pooled share within the allowance shows the SLO held at the
    group's least loaded window, and that is the load the group is claimed for.  Every percentile
    must hold (an intersection of hypotheses: no correction within a group); one false "held"
    among the groups would raise a contradiction, so each is tested at
    ``1 - (1 - level) / n_tests`` (Bonferroni over the groups): the chance that any group is
    declared held where the SLO was in truth missed is at most ``1 - level`` (to the accuracy of
    the deflation).  Fewer slow requests in any window never turn a held group into one not held.

    Measured (``tests/test_fit_slo_evidence.py`` and the same set-up over more seeds): simulated
    days of one-minute histograms, 30 minutes at each of 5-34 QPS, fitted with the true model,
    SLO p99 <= 200 ms.  FCFS, lognormal 20 ms CPU of scv 1 (ceiling 24 QPS), ten days: a false
    contradiction on none with the deflation of :func:`local_dispersion`, on 7 with the fit's
    ``G / df`` (about 3) alone, on all 10 without a deflation, and on all 10 with the old check
    (any window at most 1 % over).  PS, lognormal 20 ms CPU of scv 2 (ceiling 14 QPS), eight
    days: none (old check: all 8).  The FCFS days fitted with the scv held at 4 (ceiling 3.9
    QPS): the contradiction said on all ten, each at a load (15 or 20 QPS) where the exact share
    over 200 ms is within 1 %.
    """
    lam = np.asarray(arrival_rate, dtype=float)
    n = np.asarray(n_requests, dtype=float)
    k = np.atleast_2d(np.asarray(over, dtype=float)).reshape(lam.size, -1)
    k = np.where(np.isnan(k), n[:, None], np.minimum(np.maximum(k, 0.0), n[:, None]))   # unknown: all slow
    c = np.broadcast_to(np.maximum(np.asarray(dispersion, dtype=float), 1.0), k.shape)
    order = np.argsort(lam, kind="stable")
    w = lam.size
    cum = (lambda a: np.concatenate([np.zeros((1,) + a.shape[1:]), np.cumsum(a[order], axis=0)]))
    cn, ck, ccn = cum(n), cum(k), cum(c * n[:, None])
    sizes = 2 ** np.arange(int(math.log2(max(w, 1))) + 1)
    start = np.concatenate([np.arange(w - g + 1) for g in sizes])
    size = np.concatenate([np.full(w - g + 1, g) for g in sizes])
    end = start + size
    pooled_n = cn[end] - cn[start]
    pooled_k = ck[end] - ck[start]
    pooled_c = (ccn[end] - ccn[start]) / np.maximum(pooled_n, 1e-300)[:, None]
    n_tests = int(start.size)
    upper = share_upper_bound(pooled_k, pooled_n[:, None], 1.0 - (1.0 - float(level)) / max(n_tests, 1), pooled_c)
    held = np.all(upper <= np.asarray(allowed, dtype=float)[None, :], axis=1)
    low, high = lam[order][start], lam[order][end - 1]
    pick = np.flatnonzero(held)
    pick = pick[np.lexsort((size[pick], -low[pick]))]        # busiest first; the smaller group first
    return SloEvidence(low[pick], high[pick], size[pick], pooled_n[pick], pooled_k[pick], upper[pick],
                       pooled_c[pick], n_tests, float(level), start[pick], order)


def local_dispersion(arrival_rate, over, n_requests, neighbours: int = _NEIGHBOURS) -> np.ndarray:
    """Per window, the dispersion of its neighbours' counts of slow requests (NaN: too few).

    Parameters
    ----------
    arrival_rate, over, n_requests : array_like, shape (W,)
        Each window's rate (req/s), its count of requests slower than the checked time (NaN:
        not known in that window) and its requests.
    neighbours : int, default 30
        Windows nearest in rate that measure each window's dispersion.

    Returns
    -------
    ndarray, shape (W,)
        Pearson's ``X^2 / (m - 1) = sum_j (k_j - n_j p)^2 / (n_j p (1 - p)) / (m - 1)`` over the m
        windows nearest in rate (the window itself left out), p their pooled share; NaN with
        fewer than 10 neighbours that know their count, 1 where none of them had a slow request.

    Notes
    -----
    The scatter of the share of slow requests among windows at about the same load measures the
    variance inflation of the count (a queue's busy periods make slow requests come in clusters)
    without a model: in a simulated FCFS queue (lognormal 20 ms CPU, scv 1; 60 s windows) the
    count of requests over 200 ms at 30 QPS varies 16 times more than a binomial count, over
    60 ms at 10 QPS twice as much -- more than the fits' dispersion ``G / df`` (2-5) says, which
    averages over all buckets and loads.  Neighbours by load, not one pooled figure, because the
    inflation grows with the load.  The neighbours' shares are taken as equal, so a trend with the
    load across them adds to the figure: it can only overstate the inflation (a more cautious
    check).  The window is left out of its own figure, so its count does not move its dispersion.
    """
    lam, k, n = (np.asarray(a, dtype=float) for a in (arrival_rate, over, n_requests))
    w = lam.size
    known = np.isfinite(k) & (n > 0)
    k, n = np.where(known, k, 0.0), np.where(known, n, 0.0)
    order = np.argsort(lam, kind="stable")
    rank = np.empty(w, dtype=np.int64)
    rank[order] = np.arange(w)
    span = min(neighbours + 1, w)                 # the window and its neighbours
    start = np.clip(rank - span // 2, 0, w - span)
    idx = order[start[:, None] + np.arange(span)[None, :]]        # (W, span), the window among them
    mine = idx == np.arange(w)[:, None]
    kk, nn = np.where(mine, 0.0, k[idx]), np.where(mine, 0.0, n[idx])
    m = np.sum(~mine & known[idx], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = kk.sum(axis=1) / nn.sum(axis=1)
        var = nn * (p * (1.0 - p))[:, None]
        x2 = np.sum(np.where(nn > 0, (kk - nn * p[:, None]) ** 2 / var, 0.0), axis=1)
        phi = x2 / (m - 1)
    phi = np.where((p <= 0) | (p >= 1), 1.0, phi)
    return np.where(m >= _MIN_NEIGHBOURS, phi, np.nan)


def correlation_dispersion(quality: Mapping, own: str, miss: str, max_miss: float) -> tuple[float, str]:
    """The dispersion a fit measured, for when the windows cannot measure it: (c >= 1, its source).

    Only while the fit describes its data (``miss`` within ``max_miss``: beyond that the figure
    measures the misfit, not the correlation, and would hide the very contradiction checked
    for): the most general candidate's (``qaic_dispersion``) when the model was chosen from the
    data, else the fit's own ``own`` (``G / df`` or the reduced chi-square).  Otherwise 1, said
    as not allowed for.
    """
    if not float(quality.get(miss, math.inf)) <= max_miss:
        return 1.0, ""
    for key in ("qaic_dispersion", own):
        value = float(quality.get(key, math.nan))
        if math.isfinite(value):
            return max(1.0, value), "the fit's dispersion"
    return 1.0, ""


def held_text(evidence: SloEvidence, i: int, what: str, parts: list[str], source: str) -> str:
    """The sentence for held group ``i``: ``at 30 QPS the window of 52,338 requests met the SLO with
    95 % confidence: p99 (only 0.61 % over 500 ms, at most 0.68 %) (how sure, and why)``."""
    from ..units import format_rate

    e, c = evidence, float(np.max(evidence.dispersion[i]))
    low, high, sure = format_rate(e.rate_low[i]), format_rate(e.rate_high[i]), f"with {100 * e.level:g} % confidence"
    if e.windows[i] == 1:
        who = f"at {low} the {what} of {e.n_requests[i]:,.0f} requests met the SLO {sure}"
    elif low == high:
        who = f"at {low} {e.windows[i]} {what}s ({e.n_requests[i]:,.0f} requests) together met the SLO {sure}"
    else:
        who = (f"at {low.removesuffix(' QPS')}-{high} {e.windows[i]} {what}s ({e.n_requests[i]:,.0f} requests) "
               f"together met the SLO {sure}, so it held at {low}")
    if source and c > 1.0:
        counted = f"the requests counted as {c:.2g}x fewer independent ones for the queue's correlation, by {source}"
    elif source:
        counted = f"no correlation between requests to allow for, by {source}"
    else:
        counted = ("the queue's correlation not allowed for: nothing here measures it ("
                   + ("too few windows, and " if what == "window" else "")
                   + "the fit misses its data too far for its dispersion to)")
    jointly = (f"jointly over the {e.n_tests:,} {what}s and runs of {what}s next in load above the ceiling; "
               if e.n_tests > 1 else "")
    return f"{who}: {'; '.join(parts)} ({jointly}{counted})"


def windows_held(comparison, windows, slo: dict, above: float, quality: Mapping, level: float,
                 max_miss: float) -> tuple[float, str, bool] | None:
    """(rate, the sentence, True) for the busiest window, or run of windows next in load, above
    ``above`` (req/s) whose histogram counts show every SLO percentile met (:func:`slo_held`);
    None if none.  ``comparison`` and ``windows`` are a :class:`HistogramFit`'s tables.

    At the largest bucket bound b at or below each SLO time, the requests slower than b (at
    least as many as were slower than the SLO time) are the count judged.  Each window's
    deflation is :func:`local_dispersion` of the windows nearest in load, never below the fit's
    own (:func:`correlation_dispersion`; ``max_miss`` the RMS log-time miss beyond which the
    fit's ``G / df`` measures its misfit instead).
    """
    from ..units import format_quantile, format_time

    n, lam = windows["n_requests"].to_numpy(float), windows["arrival_rate"].to_numpy(float)
    quantiles = list(slo)
    over, bound = np.full((n.size, len(quantiles)), np.nan), np.full((n.size, len(quantiles)), np.nan)
    for j, q in enumerate(quantiles):
        last = comparison[comparison["le"] <= slo[q]].groupby("window").last()
        bound[last.index, j] = last["le"].to_numpy()
        over[last.index, j] = last["observed_share_above"].to_numpy() * n[last.index]
    fallback, source = correlation_dispersion(quality, "dispersion", "rms_log_time_miss", max_miss)
    local = np.column_stack([local_dispersion(lam, over[:, j], n) for j in range(len(quantiles))])
    tested = np.flatnonzero(lam > above * 1.001)
    if not tested.size:
        return None
    got = slo_held(lam[tested], over[tested], n[tested], [1.0 - q for q in quantiles], level,
                   np.fmax(local[tested], fallback))
    if not got.windows.size:
        return None
    members = tested[got.members(0)]
    parts = []
    for j, q in enumerate(quantiles):
        low, high = np.min(bound[members, j]), np.max(bound[members, j])
        at = format_time(low) if low == high else f"{format_time(low)}-{format_time(high)}"
        parts.append(f"{format_quantile(q)} (only {100 * got.over[0, j] / got.n_requests[0]:.2g} % over {at}, "
                     f"at most {100 * got.upper[0, j]:.2g} %)")
    how = "the windows nearest in load" if np.isfinite(local[members]).all() else source
    return float(got.rate_low[0]), held_text(got, 0, "window", parts, how), True


def observations_held(groups: list, slo: dict, quality: Mapping, level: float) -> tuple[float, str, bool] | None:
    """(rate, the sentence, True) for the busiest observation, or run of observations next in
    load, whose percentiles and ``n_requests`` show every SLO percentile met; None if none.
    ``groups``: one frame per observation (rows of a :class:`PercentileFit`'s ``comparison_``
    with its ``n_requests``).

    For an SLO percentile q with time T, the observation's highest measured percentile at or
    below T (level q*) leaves at most ``n (1 - q*)`` requests slower than T: that is the count
    judged, so a p99 SLO is shown by a p99.9 under its time, never by the p99 alone (a sample
    p99 just under T leaves up to 1 % slower).  The deflation is the fit's own dispersion
    (:func:`correlation_dispersion`: its reduced chi-square while it describes its data).
    """
    from ..units import format_quantile, format_time
    from ._diagnostics import _MAX_RMS

    quantiles = list(slo)
    # Per observation and SLO percentile: the highest measured level whose time met the SLO time.
    top = np.array([[max([float(q) for q, t in zip(rows["q"], rows["observed"]) if t <= slo[s]], default=np.nan)
                     for s in quantiles] for rows in groups])
    n = np.array([float(rows["n_requests"].iloc[0]) for rows in groups])
    lam = np.array([float(rows["arrival_rate"].iloc[0]) for rows in groups])
    dispersion, source = correlation_dispersion(quality, "reduced_chi2", "rms_rel_error", _MAX_RMS)
    got = slo_held(lam, n[:, None] * (1.0 - top), n, [1.0 - q for q in quantiles], level, dispersion)
    if not got.windows.size:
        return None
    parts = []
    for j, q in enumerate(quantiles):
        seen = [f"{format_quantile(top[m, j])} {format_time(groups[m]['observed'][groups[m]['q'] == top[m, j]].iloc[0])}"
                for m in got.members(0)]
        parts.append(f"{format_quantile(q)} (measured {', '.join(seen)}: at most "
                     f"{100 * got.over[0, j] / got.n_requests[0]:.2g} % over {format_time(slo[q])}, at most "
                     f"{100 * got.upper[0, j]:.2g} % allowing for noise)")
    return float(got.rate_low[0]), held_text(got, 0, "observation", parts, source), True
