"""Each endpoint's CPU law when the endpoints of a log share one queue.

A process's access log mixes endpoints that wait in the same queue: a 1 ms static file served by
the event loop that also runs 40 ms API calls is slowed by the same factor as they are (processor
sharing), or waits behind them (FCFS).  Fitting each endpoint as a queue of its own takes that
shared wait for the endpoint's own cost (the static file reads about 5 ms at 85 % CPU).  Here the
queue is the one fitted to all requests together, and each endpoint's CPU law is what, served by
that queue, gives the endpoint's latencies:

*Mean*: the log's own mean latency per endpoint ``i`` and load bin ``b``, ``M_ib``, less the
fitted queue's mean non-CPU delay ``d``, is a two-way layout with one term per endpoint and one
per bin:

- processor sharing: ``M_ib - d = E[S_i] f_b``, with ``f_b`` the one slowdown of every size in
  bin ``b`` (``E[T | x] = x E[T] / E[S]``, exact on any number of cores; Kleinrock 1976,
  eq. 4.17; Cohen 1979);
- FCFS: ``M_ib - d = W_b + E[S_i]``, with ``W_b`` the mean wait in bin ``b``, the same for
  every endpoint (a request's wait does not depend on its own size; Poisson arrivals see the
  time-average queue);
- round robin: as processor sharing (it shares the CPU in turn; its mean slowdown differs from
  PS's by the slices' granularity).

Both sides are fitted by alternating weighted least squares (each sweep solves one side exactly
given the other), started from the fitted queue's own slowdown or wait, and pinned by
``sum_i share_i E[S_i] = E[S]``, the fitted queue's CPU per request.  The bins' slowdown or wait
is therefore the log's, not the model's: where the model's mean misses the log's, the costs do
not inherit the miss (:func:`capacity.fit.from_requests` says by how much it misses).  The price:
the error of the fitted ``E[S]`` carries over, as a common factor under processor sharing and
as a common shift of the same seconds under FCFS -- 1 % of a 12 ms ``E[S]`` is 12 % of a 1 ms
endpoint's cost there.  ``d`` is the same for every endpoint: an endpoint that waits on IO
longer than the others has the difference counted as its CPU.

*Shape*: the scv of ``S_i`` (a gamma law below 1, lognormal above, deterministic at 0, as
:meth:`capacity.Service.from_moments` chooses) that brings the tagged request's percentiles
(:mod:`capacity._tagged`: the fitted queue's law for the others, the endpoint's own law exact)
plus ``d`` nearest the endpoint's observed percentiles per load bin -- the model's probability
below each observed percentile against its level, on the normal scale -- over a grid of scv
values refined once between the best one's neighbours, at the rate where the fitted queue's mean
slowdown or wait is the log's (:func:`matched_rates`).  One core of processor sharing (and round
robin, taken as processor sharing) or FCFS on any number of cores; processor sharing on several
cores has no tagged model here, and the scv is the queue's.  The scv is weakly told where an
endpoint's latency is mostly the queue's: the queue's fitted family then shapes it.

Measured against the simulator (``tests/test_fit_requests.py``; 40 ms lognormal API and 1 ms
static files, utilisation 0.2-0.8, two seeds): under processor sharing the means within 2 %;
under FCFS the API within 3 % and the static file's error no larger than the fitted ``E[S]``'s
in seconds (up to 8 %); fitted as queues of their own the static file read 2.2 ms (PS) and
14 ms (FCFS).  The scv: the API 1.3 for 1.0, the static file 0.15 (PS) and up to 2 (FCFS) for 0.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import special

from ..distributions import Service
from .._tagged import fcfs_tagged_sf

__all__: list[str] = []

#: The scv values tried for an endpoint's law (refined once between the best one's neighbours).
_SCV_GRID = np.array([0.0, 0.25, 0.6, 1.0, 2.0, 4.0, 10.0, 25.0])
#: Alternating least-squares sweeps between the endpoints' costs and the bins' slowdown or wait
#: (a two-way layout: each sweep solves one side exactly given the other).
_SWEEPS = 200
#: A percentile of an endpoint's bin enters the shape fit with at least this many requests above it.
_MIN_TAIL = 10


def delay_mean(fit) -> float:
    """The fitted queue's mean non-CPU delay, seconds (0 without one)."""
    d = fit.delay_
    if d is None:
        return 0.0
    return float(d.mean) if isinstance(d, Service) else float(d)


def shared_means(fit, latency: np.ndarray, req_bin: np.ndarray, bin_rates: np.ndarray,
                 groups: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """``E[S_i]`` per group (endpoint code) of requests on the shared queue (module docstring),
    NaN where nothing is left once the queue's wait and the delay are taken out; and per load bin
    the log's own slowdown (processor sharing) or wait (FCFS) over the fitted queue's."""
    es, d = float(fit.cpu_per_request_), delay_mean(fit)
    n_bins = bin_rates.size
    cell = groups * n_bins + req_bin
    n = np.bincount(cell, minlength=n_groups * n_bins).reshape(n_groups, n_bins).astype(float)
    total = np.bincount(cell, weights=latency - d, minlength=n_groups * n_bins).reshape(n_groups, n_bins)
    w = n.sum(axis=1) / n.sum()
    with np.errstate(all="ignore"):
        excess = total / n                                         # mean latency less delay per cell
        model = np.asarray(fit.predict_mean(np.where(np.isfinite(bin_rates), bin_rates, 1.0)), float) - d
        seen = n.sum(axis=0) > 0
        excess = np.nan_to_num(excess)                             # an endpoint absent from a bin
        if fit.discipline == "fcfs":
            queue = model - es                                     # the mean wait per bin
            for _ in range(_SWEEPS):
                own = (n * (excess - queue)).sum(axis=1) / n.sum(axis=1)
                queue = np.where(seen, (n * (excess - own[:, None])).sum(axis=0) / n.sum(axis=0), queue)
            shift = es - w @ own                                   # sum_i w_i E[S_i] = E[S]
            own, queue = own + shift, queue - shift
            off = queue / (model - es) - 1.0
        else:
            queue = model / es                                     # the slowdown per bin
            for _ in range(_SWEEPS):
                own = (n * queue * excess).sum(axis=1) / (n * queue ** 2).sum(axis=1)
                queue = np.where(seen, (n * own[:, None] * excess).sum(axis=0) / (n * own[:, None] ** 2).sum(axis=0),
                                 queue)
            scale = es / (w @ own)
            own, queue = own * scale, queue / scale
            off = queue / (model / es) - 1.0
    return np.where(np.isfinite(own) & (own > 0), own, np.nan), np.where(seen, off, np.nan)


def matched_rates(fit, off: np.ndarray, bin_rates: np.ndarray) -> np.ndarray:
    """Per load bin, the rate at which the fitted queue's mean slowdown (PS) or wait (FCFS) is the
    log's own (``off``: the log's over the model's, less 1): the tagged-request model of the shape
    fit is conditioned on the mean queue the requests met, not on the model's (which a family
    that cannot take the endpoints' mix misses)."""
    from scipy import optimize

    es, d = float(fit.cpu_per_request_), delay_mean(fit)
    cap = float(fit.capacity_qps_)
    out = bin_rates.astype(float).copy()
    for b in np.flatnonzero(np.isfinite(off) & np.isfinite(bin_rates)):
        now = float(fit.predict_mean(bin_rates[b])) - d
        want = (now - es) * (1.0 + off[b]) + es if fit.discipline == "fcfs" else now * (1.0 + off[b])
        if not want > es:                       # no queue at all: the lightest load there is
            out[b] = 1e-6 * cap
            continue
        gap = lambda lam: float(fit.predict_mean(lam)) - d - want      # noqa: E731 (increasing in lam)
        hi = cap * (1.0 - 1e-9)
        out[b] = optimize.brentq(gap, 1e-9 * cap, hi, xtol=1e-9 * cap) if gap(hi) > 0 else hi
    return out


def shared_scv(fit, mean: float, latency: np.ndarray, req_bin: np.ndarray, bin_rates: np.ndarray,
               quantiles) -> tuple[float, float, float, str]:
    """``(mean, scv, rms_rel_error, how)`` of one endpoint's CPU law of mean ``mean`` on the
    fitted queue, from its latencies ``latency`` in load bins ``req_bin`` (rates ``bin_rates``)."""
    servers = int(np.max(fit._servers_default)) if np.size(fit._servers_default) else 1
    if fit.discipline != "fcfs" and servers > 1:
        return (mean, float(fit.scv_), math.nan,
                "scv: the queue's (no tagged model of processor sharing on several cores)")
    observed = []
    for b in np.unique(req_bin):
        x = latency[req_bin == b]
        usable = [q for q in quantiles if x.size * (1 - q) >= _MIN_TAIL]
        if usable:
            # The slope d t / d q of the endpoint's own quantiles at each level turns an error in
            # probability into one in time (one Newton step; no root search per percentile).
            step = np.minimum(0.5 * (1.0 - np.asarray(usable)), 0.02)
            lo, mid, hi = (np.quantile(x, np.asarray(usable) + k * step) for k in (-1, 0, 1))
            observed.append((float(bin_rates[b]), usable, mid, (hi - lo) / (2.0 * step)))
    if not observed:
        return mean, float(fit.scv_), math.nan, f"scv: the queue's (no bin has {_MIN_TAIL} requests above its median)"
    d = delay_mean(fit)
    service = fit.service_
    if fit.discipline != "fcfs":
        from .._ps_tagged import tagged_sf
        from ..phasetype import _moment_fit

        beta, tm = _moment_fit(*[float(service.moment(k)) for k in (1, 2, 3)])

    def misses(means: np.ndarray, scvs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per candidate law (``means[k]``, ``scvs[k]``) and per percentile: the model's
        probability below the observed percentile less its level (the fit works in probability:
        one evaluation of the tagged law per percentile, where matching times would need a root
        search each), and the relative error in time it means."""
        laws = [Service.from_moments(m, g) for m, g in zip(means, scvs)]
        prob, rel = [], []
        for rate, qs, obs, slope in observed:
            for q, o, dt_dq in zip(qs, obs, slope):
                t = np.full(len(laws), max(o - d, 1e-12))
                if fit.discipline == "fcfs":
                    sf = fcfs_tagged_sf(t, rate, service, servers, laws)
                else:
                    sf = tagged_sf(t, rate, beta, tm, laws)
                cdf = np.clip(1.0 - sf, 1e-9, 1.0 - 1e-9)
                prob.append(special.ndtri(cdf) - special.ndtri(q))
                rel.append((q - cdf) * dt_dq / o)
        return np.mean(np.square(prob), axis=0), np.sqrt(np.mean(np.square(rel), axis=0))

    # The mean stays the attribution's: freed under FCFS to match the percentiles too, it ran to
    # 1.66 ms for a 1 ms static file (scv 10), bending to the fitted queue's wait law, whose
    # family cannot take the endpoints' two-humped mix.
    means = np.full(_SCV_GRID.size, mean)
    with np.errstate(all="ignore"):
        coarse, coarse_rel = misses(means, _SCV_GRID)
        k = int(np.nanargmin(coarse))
        near = np.linspace(_SCV_GRID[max(k - 1, 0)], _SCV_GRID[min(k + 1, _SCV_GRID.size - 1)], 5)
        fine, fine_rel = misses(np.full(near.size, mean), near)
    j = int(np.nanargmin(fine))
    if fine[j] < coarse[k]:
        return mean, float(near[j]), float(fine_rel[j]), "fitted on the shared queue"
    return mean, float(_SCV_GRID[k]), float(coarse_rel[k]), "fitted on the shared queue"
