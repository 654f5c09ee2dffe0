"""Caches: CPU per request at a hit ratio, the ceiling it buys, and mass expiry against active refresh.

Three lessons of the seed articles.  The Ctrip timeout article (seed 001, section 3.3) traced
timeouts to cache misses, and warned that fixed expiry makes many keys fail at once and send
their requests to the database; it moved to active renewal and raised the hit ratio above 98 %.
The Node.js incident (seed 000) ended with a Redis cache on common computations that took the
CPU from 15-25 % to 4-5 %.  Here:

* :func:`cache_service` -- CPU per request as the mixture of hit and miss costs at hit ratio
  ``h`` (its first two moments exactly; see :mod:`capacity.plan._mixture`);
* :func:`cache_ceiling` -- the SLO ceiling as a function of the hit ratio (one vectorised solve),
  and the hit ratio today's rate needs;
* :func:`cache_expiry` -- every key expiring at once: the burst of misses, its CPU, the fluid
  backlog against the timeout, and whether client retries can hold the service overloaded
  after the keys are back (the metastable range of :func:`capacity.overload.retry_fixed_points`),
  against active refresh;
* :func:`cache_whatif` -- a measured CPU drop after caching (the incident's 15-25 % -> 4-5 %)
  turned into the hit ratio it implies, the ceiling before and after, and the incident's burst
  replayed through the fluid backlog.

See :mod:`capacity.plan`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from .._checks import as_float_array, check_count, check_discipline, check_nonnegative, check_positive, \
    check_servers
from .._common import progress_ticker
from .._result import Result, jsonable
from .._tagged import mix_atoms
from ..distributions import Service, as_service
from ._mixture import _mix, _mix_ceilings, _moments
from ._text import _DISCIPLINE_TEXT, _fmt_q, _fmt_rate, _fmt_time
from .ceiling import qps_ceiling

__all__ = ["CacheCeiling", "CacheExpiry", "CacheWhatIf", "cache_ceiling", "cache_expiry", "cache_service",
           "cache_whatif"]

ArrayLike = Any

#: Hit ratios of :func:`cache_ceiling`'s table when none are given.
DEFAULT_HIT_RATIO = (0.0, 0.5, 0.8, 0.9, 0.95, 0.98, 0.99)


def _hit_ratio(hit_ratio: ArrayLike) -> np.ndarray:
    h = as_float_array(hit_ratio, "hit_ratio")
    if not np.all((h >= 0) & (h <= 1)):
        raise ValueError(f"hit_ratio must be a share in [0, 1], got {hit_ratio!r}")
    return h


def _scalar_service(service: Any, name: str) -> Service:
    svc = as_service(service, name)
    if np.ndim(svc.mean):
        raise ValueError(f"{name} must have scalar parameters, got {svc!r}")
    return svc


def cache_service(hit_ratio: ArrayLike, hit_service: Service | ArrayLike,
                  miss_service: Service | ArrayLike) -> Service:
    """CPU time per request of a cached service: a hit with probability ``hit_ratio``, else a miss.

    Parameters
    ----------
    hit_ratio : float or array_like
        Share of requests answered from the cache, in [0, 1] (an array: one law per element).
    hit_service, miss_service : Service or float
        CPU time of a hit (cache lookup, deserialisation) and of a miss (the computation, or the
        database call's CPU, plus filling the cache), seconds; a bare number is an exponential
        mean.  Scalar parameters.

    Returns
    -------
    Service
        The gamma law with the mixture's mean and second moment.

    Notes
    -----
    ``E[S] = h E[S_hit] + (1 - h) E[S_miss]`` and ``E[S^2] = h E[S_hit^2] + (1 - h) E[S_miss^2]``
    exactly; the law returned is the gamma with those two moments.  Means computed from it are
    exact (Pollaczek-Khinchine for FCFS on one core needs only these two moments; processor
    sharing only the mean); percentiles are the gamma's, not the bimodal mixture's.  Measured
    against the simulator on the true mixture (``tests/test_plan_cache.py``; 1 ms hits and 25 ms
    misses, both deterministic, h = 0.8, one core 60 % busy): the p99 response is 12 % above the
    simulated one under FCFS (125 ms against 112 +/- 6 ms: conservative) and within 3 % under
    processor sharing (144 ms against 148 +/- 7 ms).  Where the percentiles matter,
    :func:`cache_ceiling` (FCFS on one core) and :func:`cache_whatif` use the mixture itself.

    References
    ----------
    Seed article 001 (Ctrip), section 3.3 (hits and misses); M. Harchol-Balter, *Performance
    Modeling and Design of Computer Systems* (2013), ch. 23 (the moments a mean needs).

    Examples
    --------
    >>> from capacity import Service, plan
    >>> s = plan.cache_service(0.8, Service.deterministic(0.001), Service.deterministic(0.025))
    >>> round(s.mean, 6), round(float(s.moment(2)), 9)    # 0.8 x 1 ms + 0.2 x 25 ms; 0.8e-6 + 0.2 x 625e-6
    (0.0058, 0.0001258)
    """
    h = _hit_ratio(hit_ratio)
    return _mix([h, 1.0 - h], [_scalar_service(hit_service, "hit_service"),
                               _scalar_service(miss_service, "miss_service")])


# ---------------------------------------------------------------------------------------------
# The ceiling against the hit ratio


@dataclass(frozen=True, repr=False)
class CacheCeiling(Result):
    """Result of :func:`cache_ceiling`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per hit ratio (index ``hit_ratio``): ``mean_cpu_s``, ``scv``, ``capacity_qps``,
        ``ceiling_qps`` and, with ``arrival_rate``, ``utilization`` at that rate.
    needed_hit_ratio : float or None
        With ``arrival_rate``: the smallest hit ratio at which that rate meets the SLO (0: it
        does without a cache; NaN: no hit ratio suffices).
    arrival_rate, servers, discipline, slo
        What was asked.
    explanation : str
    """

    table: pd.DataFrame
    needed_hit_ratio: float | None
    arrival_rate: float | None
    servers: int
    discipline: str
    slo: dict
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("needed_hit_ratio", "arrival_rate", "servers", "table")


def cache_ceiling(hit_service: Service | ArrayLike, miss_service: Service | ArrayLike,
                  hit_ratio: ArrayLike = DEFAULT_HIT_RATIO, servers: int = 1,
                  slo: Mapping[float, float] | None = None, discipline: str = "ps",
                  arrival_rate: float | None = None,
                  progress: Callable[[int, int], Any] | None = None) -> CacheCeiling:
    """The SLO ceiling as a function of the cache hit ratio, and the hit ratio a rate needs.

    Parameters
    ----------
    hit_service, miss_service : Service or float
        CPU time of a hit and of a miss, seconds (see :func:`cache_service`).
    hit_ratio : float or sequence of float, optional
        Hit ratios of the table, each in [0, 1] (default 0, 50, 80, 90, 95, 98, 99 %).
    servers : int, optional
        Cores (or worker processes) serving one queue (default 1).
    slo : mapping, optional
        Quantile -> seconds (default ``{0.99: 0.5}``).
    discipline : {"ps", "fcfs"}, optional
        Processor sharing (an event loop; default) or FCFS (a blocking worker pool).
    arrival_rate : float, optional
        Today's rate, requests/s: adds the utilisation and ``needed_hit_ratio``.
    progress : callable, optional
        ``progress(done, total)`` after the ceilings and after the needed hit ratio (processor
        sharing on several cores takes seconds).

    Returns
    -------
    CacheCeiling

    Notes
    -----
    The capacity is ``c / (h E[S_hit] + (1 - h) E[S_miss])``: it rises with ``h`` and steeply near
    ``h = 1`` (from 98 % to 99 % halves the misses).  FCFS on one core: the SLO ceilings of the
    mixtures themselves, carried as atoms (:func:`capacity._tagged.mix_atoms`) through the exact
    M/G/1 wait (on the incident's 25 ms misses and free hits at ``h = 0.775``: 139.1 requests/s,
    the simulator's 139).  Otherwise one call of :func:`~capacity.plan.qps_ceiling` on the array
    of two-moment stand-ins of the mixture (:func:`capacity.plan._mixture._ceilings`: gamma for
    FCFS; for processor sharing a hyperexponential at scv >= 1 and an Erlang below, as
    ``capacity.ps`` is slow on a gamma law with scv below 1 -- the same case: 148.6 against
    about 142 simulated, +5 %; the gamma stand-in on one FCFS core read 136.7, -2 %).
    ``needed_hit_ratio`` is the root in ``h`` of ``ceiling(h) = arrival_rate`` (Brent), the
    ceiling being increasing in ``h`` whenever a hit costs less than a miss.

    References
    ----------
    Seed article 001 (Ctrip), section 3.3 (hit ratio raised above 98 %).  M. Harchol-Balter,
    *Performance Modeling and Design of Computer Systems* (2013), ch. 23 (P-K formula).

    Examples
    --------
    1 ms hits, 25 ms misses (exponential), one event loop, p99 within 500 ms:

    >>> from capacity import plan
    >>> r = plan.cache_ceiling(0.001, 0.025, hit_ratio=[0.0, 0.9], arrival_rate=60.0)
    >>> r.table["capacity_qps"].round(2).tolist()     # 1 / 25 ms, 1 / (0.9 ms + 2.5 ms)
    [40.0, 294.12]
    >>> 0.5 < r.needed_hit_ratio < 0.9
    True
    """
    hit, miss = _scalar_service(hit_service, "hit_service"), _scalar_service(miss_service, "miss_service")
    h = np.atleast_1d(_hit_ratio(hit_ratio))
    if h.ndim != 1:
        raise ValueError(f"hit_ratio must be a share or a one-dimensional list of them, got {hit_ratio!r}")
    c = int(check_servers(servers))
    check_discipline(discipline, ("fcfs", "ps"))
    lam = None if arrival_rate is None else float(check_positive(arrival_rate, "arrival_rate"))
    slo = {0.99: 0.5} if slo is None else slo
    from ._solve import _parse_slo

    qs, ts = _parse_slo(slo)
    m1, m2 = _moments([h, 1.0 - h], [hit, miss])
    tick = progress_ticker(progress, 1 + (lam is not None))
    table = pd.DataFrame({"mean_cpu_s": m1, "scv": m2 / m1 ** 2 - 1.0, "capacity_qps": c / m1,
                          "ceiling_qps": _mixture_ceilings(h, hit, miss, c, slo, discipline)},
                         index=pd.Index(h, name="hit_ratio"))
    tick()
    needed = None
    if lam is not None:
        table["utilization"] = lam * table["mean_cpu_s"] / c
        needed = _needed_hit_ratio(lam, hit, miss, c, slo, discipline)
        tick()
    slo_d = {float(q): float(t) for q, t in zip(qs, ts)}
    res = dict(table=table, needed_hit_ratio=needed, arrival_rate=lam, servers=c, discipline=discipline, slo=slo_d)
    return CacheCeiling(**res, explanation=_explain_ceiling(res, hit, miss))


def _mixture_ceilings(h: np.ndarray, hit: Service, miss: Service, c: int, slo: Mapping, discipline: str) -> np.ndarray:
    """SLO ceilings of the hit/miss mixtures at hit ratios ``h``
    (:func:`capacity.plan._mixture._mix_ceilings`: exact on one FCFS core)."""
    h = np.atleast_1d(np.asarray(h, dtype=float))
    return _mix_ceilings([([hi, 1.0 - hi], [hit, miss]) for hi in h], c, slo, discipline)


def _needed_hit_ratio(lam: float, hit: Service, miss: Service, c: int, slo: Mapping, discipline: str) -> float:
    """The root in h of ceiling(h) = lam (0 if h = 0 suffices, NaN if h = 1 does not)."""
    from scipy import optimize

    def gap(h: float) -> float:
        return float(_mixture_ceilings(np.array([h]), hit, miss, c, slo, discipline)[0]) - lam

    if gap(0.0) >= 0:
        return 0.0
    if gap(1.0) < 0:
        return math.nan
    return float(optimize.brentq(gap, 0.0, 1.0, xtol=1e-6))


def _explain_ceiling(r: dict, hit: Service, miss: Service) -> str:
    t, c = r["table"], r["servers"]
    slo_text = ", ".join(f"{_fmt_q(q)} <= {_fmt_time(x)}" for q, x in r["slo"].items())
    lo, hi = t.index[0], t.index[-1]
    text = (f"Hits cost {_fmt_time(float(hit.mean))} of CPU and misses {_fmt_time(float(miss.mean))}; on {c} "
            f"core{'s' if c > 1 else ''} under {_DISCIPLINE_TEXT[r['discipline']]} with the SLO {slo_text}, the "
            + (f"ceiling is {_fmt_rate(t['ceiling_qps'].iloc[0])} at a {100 * lo:.3g} % hit ratio." if len(t) == 1 else
               f"ceiling goes from {_fmt_rate(t['ceiling_qps'].iloc[0])} at a {100 * lo:.3g} % hit ratio to "
               f"{_fmt_rate(t['ceiling_qps'].iloc[-1])} at {100 * hi:.3g} %.")
            + " Each miss avoided frees a miss's CPU, so the last points of hit ratio buy the most: at 98 % there "
            "are half the misses of 96 %.")
    if r["arrival_rate"] is not None:
        need, lam = r["needed_hit_ratio"], r["arrival_rate"]
        if need == 0:
            text += f" Today's {_fmt_rate(lam)} meets the SLO even with every request a miss."
        elif math.isnan(need):
            text += (f" No hit ratio holds today's {_fmt_rate(lam)} within the SLO: even hits alone are too "
                     "much CPU for these cores.")
        else:
            text += (f" Today's {_fmt_rate(lam)} needs a hit ratio of at least {100 * need:.3g} %; below it the "
                     "SLO breaks, and a mass expiry that takes the hit ratio to 0 is an overload "
                     "(cache_expiry).")
    if r["discipline"] == "fcfs" and r["servers"] == 1:
        return text + " The ceilings are those of the hit/miss mixture itself (exact on one FCFS core)."
    stand_in = "gamma" if r["discipline"] == "fcfs" else "hyperexponential or Erlang"
    return text + (f" Ceilings use a two-moment ({stand_in}) law of the hit/miss mix, not the mix itself "
                   "(percentiles approximate, means exact).")


# ---------------------------------------------------------------------------------------------
# Mass expiry


@dataclass(frozen=True, repr=False)
class CacheExpiry(Result):
    """Result of :func:`cache_expiry`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per bucket (index ``time``, its start in seconds after the expiry): ``hit_ratio``,
        ``miss_rate`` (misses/s), ``attempt_rate`` (first attempts and retries per second),
        ``utilization`` (CPU offered / cores), ``backlog`` (seconds of CPU work queued at the end
        of the bucket) and ``backlog_delay`` (``backlog / servers``).  When requests time out and
        are retried the table is that of the fluid with retries, from the expiry until the
        backlog has drained for good (where the retries hold it, see ``held_by_retries``, as
        long as the first attempts' table).
    extra_misses : float
        Misses the expiry adds: ``keys + hit_ratio * arrival_rate * fill_time``.
    extra_cpu : float
        CPU seconds they add (``extra_misses * (E[S_miss] - E[S_hit])``).
    steady_utilization, peak_utilization : float
        Utilisation with the hit ratio at ``hit_ratio``, and in the worst bucket after the expiry.
    refill_time : float
        Seconds until the hit ratio is back within 1 point of ``hit_ratio`` (first attempts only:
        retries refill the keys sooner).
    peak_delay, seconds_over_timeout, recovery_time : float
        Of the fluid backlog (:func:`capacity.overload.backlog`; with retries, the fluid that
        sends every attempt meeting a delay past the timeout back as a retry); inf when the
        retries hold the service overloaded.
    held_by_retries : bool
        The retries of the timed-out requests keep the work above the cores after every key is
        back: the backlog never drains.
    bistable_range : tuple of float or None
        With ``retries``: the first-attempt rates at which the retry equation has two stable
        states (:func:`capacity.overload.retry_fixed_points`).
    refresh_utilization : float or None
        With ``refresh_interval``: the steady utilisation with active refresh instead of expiry
        (no burst; each key recomputed once per interval).
    steady_p99, refresh_p99 : float or None
        With ``refresh_interval``: the requests' p99 response time (s) at ``arrival_rate`` with
        the cache warm, without and with the refresh job's work in the same queue (inf where the
        cores cannot keep up).
    verdict : str
        ``"absorbed"`` (no bucket above capacity), ``"delayed"`` (a backlog, below the timeout),
        ``"timeouts"`` (requests time out, the service recovers by itself), ``"metastable"``
        (requests time out and their retries hold the service overloaded after the keys are
        back: ``held_by_retries``) or ``"overloaded"`` (above capacity even with the cache warm).
    arrival_rate, hit_ratio, keys, zipf, fill_time, timeout, retries, servers, discipline
        What was asked.
    explanation : str
    """

    table: pd.DataFrame
    extra_misses: float
    extra_cpu: float
    steady_utilization: float
    peak_utilization: float
    refill_time: float
    peak_delay: float
    seconds_over_timeout: float
    recovery_time: float
    held_by_retries: bool
    bistable_range: tuple | None
    refresh_utilization: float | None
    steady_p99: float | None
    refresh_p99: float | None
    verdict: str
    arrival_rate: float
    hit_ratio: float
    keys: int
    zipf: float
    fill_time: float
    timeout: float
    retries: int
    servers: int
    discipline: str
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("verdict", "peak_utilization", "peak_delay", "extra_misses")

    def to_dict(self) -> dict:
        """Every field but the per-bucket table (``to_frame()``), JSON-ready."""
        return {name: jsonable(getattr(self, name)) for name in self._fields() if name != "table"}


def _popularity(keys: int, zipf: float) -> tuple[np.ndarray, np.ndarray]:
    """Groups of keys ``(weight, popularity)``: the share of hot requests each group gets and the
    request share of one key in it, with ``p_i ~ i^-zipf``.  Ranks up to 2000 are exact; beyond,
    ranks are grouped with a ratio of 1.005 between group ends and the sums taken by the midpoint
    integral (relative error of a group's miss term below 0.005 / e = 0.2 %)."""
    if zipf == 0:
        return np.array([1.0]), np.array([1.0 / keys])
    head = np.arange(1, min(keys, 200) + 1, dtype=float)
    s1, s2 = head ** -zipf, head ** (-2 * zipf)
    if keys > 200:
        edges = np.unique(np.round(np.geomspace(201, keys + 1, int(math.log((keys + 1) / 201) / 0.005) + 2)))

        def integral(a: np.ndarray, b: np.ndarray, z: float) -> np.ndarray:
            # sum_{i=a}^{b-1} i^-z ~ int_{a-1/2}^{b-1/2} x^-z dx
            lo, hi = a - 0.5, b - 0.5
            return np.log(hi / lo) if z == 1 else (hi ** (1 - z) - lo ** (1 - z)) / (1 - z)
        a, b = edges[:-1], edges[1:]
        s1 = np.concatenate([s1, integral(a, b, zipf)])
        s2 = np.concatenate([s2, integral(a, b, 2 * zipf)])
    total = s1.sum()
    return s1 / total, (s2 / s1) / total


def _hot_miss_average(weight: np.ndarray, pop: np.ndarray, hot_rate: float, fill: float,
                      edges: np.ndarray) -> np.ndarray:
    """Average over each bucket ``[edges[k], edges[k+1]]`` of the hot requests' miss fraction
    ``sum_g weight_g exp(-hot_rate pop_g (t - fill)^+)``, exactly, by its antiderivative
    ``F(t) = min(t, fill) + (1 - exp(-r (t - fill)^+)) / r``."""
    r = (hot_rate * pop)[:, None]
    # F at every edge is groups x edges numbers: taken in column blocks to bound the memory.
    step = max(1, 2_000_000 // r.shape[0])
    big_f = np.empty(edges.size)
    for lo in range(0, edges.size, step):
        e = edges[lo:lo + step]
        big_f[lo:lo + step] = weight @ (np.minimum(e, fill)[None, :] - np.expm1(-r * np.maximum(e - fill, 0.0)) / r)
    return np.diff(big_f) / np.diff(edges)


def _refill_horizon(weight: np.ndarray, pop: np.ndarray, hot_rate: float, fill: float) -> float:
    """Seconds until the hot miss fraction falls below 1e-3 (doubling search)."""
    t = 1.0
    while float(weight @ np.exp(-hot_rate * pop * t)) > 1e-3 and t < 1e7:
        t *= 2.0
    return fill + t


def cache_expiry(arrival_rate: float, hit_ratio: float, hit_service: Service | float,
                 miss_service: Service | float, keys: int, servers: int = 1, *, zipf: float = 0.0,
                 fill_time: float = 0.0, timeout: float = 30.0, retries: int = 0,
                 refresh_interval: float | None = None, discipline: str = "ps", bucket: float = 1.0,
                 horizon: float | None = None, progress: Callable[[int, int], Any] | None = None) -> CacheExpiry:
    """Every cache key expiring at once: the burst of misses, the backlog, and whether it tips the service.

    Parameters
    ----------
    arrival_rate : float
        Requests/s (steady, Poisson).
    hit_ratio : float
        Steady hit ratio with the cache warm, in [0, 1].
    hit_service, miss_service : Service or float
        CPU time of a hit and of a miss, seconds (only the means enter the fluid backlog).
    keys : int
        Distinct cached keys that expire together (>= 1).
    servers : int, optional
        Cores of the queue (default 1).
    zipf : float, optional
        Key popularity ``p_i ~ i^-zipf`` (default 0: uniform).  Popular keys refill at once,
        rare ones late.
    fill_time : float, optional
        Seconds from a key's first miss until its value is in the cache (the database call);
        requests for the key in that window miss too (no request coalescing).  Default 0.
    timeout : float, optional
        Client timeout, seconds (default 30, nginx's in the seed incident).
    retries : int, optional
        Client retries after a timeout: adds the metastability check (default 0).
    refresh_interval : float, optional
        Active refresh instead: every key recomputed once per this many seconds, by the same
        cores; adds ``refresh_utilization``.
    discipline : {"ps", "fcfs"}, optional
        For the retry analysis (default processor sharing).
    bucket, horizon : float, optional
        Time step and length of the table, seconds (default 1 s; until the hit ratio is back
        within 0.1 point, at least 60 s).
    progress : callable, optional
        ``progress(done, total)`` after each of the (up to three) steps; the retry analysis
        takes a second or two.

    Returns
    -------
    CacheExpiry

    Notes
    -----
    *Model (independent reference, lazy loading).*  A share ``h`` of requests goes to ``K``
    cacheable keys, key ``i`` with probability ``p_i`` (so at rate ``r_i = h lambda p_i``); the
    other ``1 - h`` miss whatever happens (cold or uncacheable keys), which keeps the steady hit
    ratio at ``h``.  At time 0 every key expires.  A request for key ``i`` at time ``t`` misses if
    no request for it arrived before ``t - d`` (``d = fill_time``): with Poisson arrivals
    ``P = exp(-r_i (t - d)^+)``.  The hit ratio recovers as

    ``h(t) = h (1 - sum_i p_i exp(-r_i (t - d)^+))``,

    and the expiry adds ``sum_i (1 + r_i d) = K + h lambda d`` misses: every key once, plus
    those arriving while its first miss is being filled.  The CPU offered is
    ``lambda (E[S_hit] + (1 - h(t)) (E[S_miss] - E[S_hit]))``, averaged exactly over each bucket,
    and drives the fluid backlog of :func:`capacity.overload.backlog` (a lower bound on the mean
    backlog; random arrivals add queueing on top).  If the backlog delay passes the timeout,
    requests time out; with retries each timeout comes back ``timeout`` seconds later as another
    attempt (:mod:`capacity.plan._retry_fluid`): every attempt meeting a delay past the timeout
    fails, and if the first attempts and their retries, ``(retries + 1) lambda E[S]`` with the
    cache warm again, are more than the cores do, the backlog never drains -- the retries hold
    the service overloaded after the push has ended (metastable).  The retry equation
    (:func:`capacity.overload.retry_fixed_points`, on the warm-cache law) gives the bistable
    range at steady state for comparison.  Against an exact request-by-request simulation (FCFS,
    one core, 300 and 3000 keys at 100-200 requests/s, 1 s timeout, two retries;
    ``tests/test_plan_cache_expiry_sim.py``): the verdict held in every seeded run, and where
    the retries did not hold it the simulated service recovered when this fluid says, within a
    quarter (without retries the peak delay within 15 %).

    What it leaves out: the database's own slowdown under the burst (a longer ``fill_time``;
    pass the slow value), request coalescing (set ``fill_time=0``), keys that were never cached.

    *Active refresh* (the article's fix): keys never expire under load; a background job
    recomputes each once per ``refresh_interval`` at the cost of a miss, a steady
    ``K E[S_miss] / refresh_interval`` of CPU instead of a burst.  Its recomputations are taken
    as a Poisson stream of misses through the same queue, and the requests' p99 is that of a
    request of the hit/miss law among them (:func:`_refresh_p99`): FCFS exact on one core (the
    mixtures' atoms and the tagged request's wait), on several with the two-moment stand-in's
    wait; processor sharing on one core by the tagged request's law (the three-moment PH fit of
    the queue's mix), on several the p99 of all jobs on the stand-in.  Against the simulator
    (``tests/test_plan_cache.py``): FCFS and PS on one core within three standard errors plus
    3 %.

    References
    ----------
    Seed article 001 (Ctrip), section 3.3 ("fixed expiry makes many keys fail at once and go
    straight to the database"; active renewal).  R. Fagin, "Asymptotic miss ratios over
    independent references", J. Computer and System Sciences 14 (1977) 222-250 (the
    independent reference model).  N. Bronson et al., "Metastable failures in distributed
    systems", HotOS (2021).

    Examples
    --------
    10 000 keys, 90 % hits, 1 ms hits and 20 ms misses at 200 requests/s on one core:

    >>> from capacity import plan
    >>> r = plan.cache_expiry(200.0, 0.9, 0.001, 0.020, keys=10_000)
    >>> round(r.steady_utilization, 3), r.extra_misses, round(r.extra_cpu, 1)   # 200 x 2.9 ms; 10^4 x 19 ms
    (0.58, 10000.0, 190.0)
    >>> r.verdict      # at t = 0 every request misses: 200 x 20 ms = 4 cores' worth of CPU
    'timeouts'
    """
    lam = float(check_positive(arrival_rate, "arrival_rate"))
    h = float(_hit_ratio(hit_ratio))
    m_hit = float(_scalar_service(hit_service, "hit_service").mean)
    m_miss = float(_scalar_service(miss_service, "miss_service").mean)
    k = check_count(keys, "keys", 1)
    z, d = float(check_nonnegative(zipf, "zipf")), float(check_nonnegative(fill_time, "fill_time"))
    tau, dt = float(check_positive(timeout, "timeout")), float(check_positive(bucket, "bucket"))
    r_max, c = check_count(retries, "retries", 0), int(check_servers(servers))
    check_discipline(discipline, ("fcfs", "ps"))
    tick = progress_ticker(progress, 2 + (r_max > 0))
    weight, pop = _popularity(k, z)
    span = (max(60.0, _refill_horizon(weight, pop, h * lam, d)) if horizon is None
            else float(check_positive(horizon, "horizon")))
    n = int(min(math.ceil(span / dt), 200_000))
    edges = np.arange(n + 1) * dt
    hot_miss = _hot_miss_average(weight, pop, h * lam, d, edges) if h > 0 else np.zeros(n)
    tick()
    miss = (1.0 - h) + h * hot_miss
    steady = lam * (h * m_hit + (1 - h) * m_miss) / c
    from ..overload import backlog, retry_fixed_points

    work = lam * (m_hit + miss * (m_miss - m_hit))
    # backlog() takes a rate and a mean cost; CPU-seconds per second at a cost of 1 s is the same work.
    bl = backlog(work, Service.deterministic(1.0), c, bucket=dt, timeout=tau)
    fluid = dict(peak_delay=bl.peak_delay, seconds_over_timeout=bl.seconds_over_timeout,
                 recovery_time=bl.recovery_time)
    table = pd.DataFrame({"hit_ratio": 1.0 - miss, "miss_rate": lam * miss, "attempt_rate": np.full(n, lam),
                          "utilization": work / c, "backlog": bl.table["backlog"].to_numpy(),
                          "backlog_delay": bl.table["backlog_delay"].to_numpy()},
                         index=pd.Index(edges[:-1], name="time"))
    refill = np.flatnonzero(table["hit_ratio"].to_numpy() >= h - 0.01)
    held = False
    if r_max > 0 and bl.seconds_over_timeout > 0:
        # Attempts time out: their retries add work (without timeouts there is nothing to retry).
        from ._retry_fluid import Keys, retry_backlog, summary

        run = retry_backlog(Keys(weight, pop, h, d, m_hit, m_miss), lam, c, dt, tau, r_max, work)
        m = run.backlog.size
        retry_work = run.attempts * (m_hit + run.miss * (m_miss - m_hit))
        fluid = summary(run, retry_work, c, dt)
        held = run.held
        table = pd.DataFrame({"hit_ratio": 1.0 - run.miss, "miss_rate": run.attempts * run.miss,
                              "attempt_rate": run.attempts, "utilization": retry_work / c, "backlog": run.backlog,
                              "backlog_delay": run.backlog / c}, index=pd.Index(np.arange(m) * dt, name="time"))
    tick()
    bistable = None
    if r_max > 0:
        mix = cache_service(h, hit_service, miss_service)
        bistable = tuple(retry_fixed_points(lam, mix, tau, r_max, discipline, servers=c, grid=120).bistable_range)
        tick()
    res = dict(table=table, extra_misses=float(k + h * lam * d), extra_cpu=float((k + h * lam * d) * (m_miss - m_hit)),
               steady_utilization=steady, peak_utilization=float(table["utilization"].max()),
               refill_time=float(edges[refill[0]]) if refill.size else math.inf, **fluid,
               held_by_retries=held, bistable_range=bistable,
               refresh_utilization=None if refresh_interval is None else
               steady + k * m_miss / float(check_positive(refresh_interval, "refresh_interval")) / c,
               **_refresh_p99(lam, h, hit_service, miss_service, k, refresh_interval, c, discipline),
               arrival_rate=lam, hit_ratio=h, keys=k, zipf=z, fill_time=d, timeout=tau, retries=r_max, servers=c,
               discipline=discipline)
    res["verdict"] = _verdict(res)
    return CacheExpiry(**res, explanation=_explain_expiry(res, m_hit, m_miss))


def _refresh_p99(lam: float, h: float, hit_service, miss_service, keys: int, interval: float | None, c: int,
                 discipline: str) -> dict:
    """``steady_p99`` and ``refresh_p99``: the requests' p99 (s) without and with the refresh
    job's recomputations (Poisson, ``keys / interval`` per second, each a miss) in the queue."""
    if interval is None:
        return dict(steady_p99=None, refresh_p99=None)
    from .. import ps
    from .._tagged import fcfs_tagged_quantile, ps_tagged_quantile

    hit, miss = _scalar_service(hit_service, "hit_service"), _scalar_service(miss_service, "miss_service")
    request = miss if h <= 0 else hit if h >= 1 else mix_atoms([hit, miss], [h, 1.0 - h])
    out = {}
    for name, r in (("steady_p99", 0.0), ("refresh_p99", keys / float(interval))):
        total = lam + r
        w = [lam * h / total, lam * (1.0 - h) / total, r / total]
        if total * (w[0] * float(hit.mean) + (w[1] + w[2]) * float(miss.mean)) >= c:
            out[name] = math.inf
        elif discipline == "fcfs":
            queue = mix_atoms([hit, miss, miss], w) if c == 1 else _mix(w, [hit, miss, miss])
            out[name] = float(fcfs_tagged_quantile(0.99, total, queue, c, [request])[0])
        elif c == 1:
            moments = [sum(wi * float(s.moment(j)) for wi, s in zip(w, (hit, miss, miss))) for j in (1, 2, 3)]
            out[name] = float(ps_tagged_quantile(0.99, total, moments, [request])[0])
        else:
            out[name] = float(ps.response_quantile(0.99, total, _mix(w, [hit, miss, miss]), c))
    return out


def _verdict(r: dict) -> str:
    if r["steady_utilization"] >= 1:
        return "overloaded"
    if r["peak_utilization"] <= 1 or r["peak_delay"] == 0:
        return "absorbed"
    if not r["seconds_over_timeout"] > 0:
        return "delayed"
    return "metastable" if r["held_by_retries"] else "timeouts"


def _explain_expiry(r: dict, m_hit: float, m_miss: float) -> str:
    lam, c, v = r["arrival_rate"], r["servers"], r["verdict"]
    text = (f"At {_fmt_rate(lam)} with a {100 * r['hit_ratio']:.3g} % hit ratio ({_fmt_time(m_hit)} per hit, "
            f"{_fmt_time(m_miss)} per miss) the CPU is {100 * r['steady_utilization']:.3g} % busy.")
    if v == "overloaded":
        return text + (" That is at or above capacity even with the cache warm: the service is overloaded "
                       "before any expiry; it needs a higher hit ratio, cheaper misses or more cores.")
    text += (f" If all {r['keys']:,} keys expire at once, the expiry adds {r['extra_misses']:,.0f} misses, "
             f"{_fmt_time(r['extra_cpu'])} of CPU, and the hit ratio is back within 1 point after "
             f"{_fmt_time(r['refill_time']) if math.isfinite(r['refill_time']) else 'longer than the table'}; "
             f"the CPU peaks at {100 * r['peak_utilization']:.3g} % of {c} core{'s' if c > 1 else ''}.")
    if v == "absorbed":
        text += " No second needs more than the cores can do: the burst is absorbed without a queue."
    elif v == "delayed":
        text += (f" A backlog builds up to {_fmt_time(r['peak_delay'])} of delay, below the "
                 f"{_fmt_time(r['timeout'])} timeout, and drains {_fmt_time(r['recovery_time'])} after the "
                 "overload: slow responses, no timeouts.")
    elif v == "metastable":
        peak = float(r["table"]["attempt_rate"].max())
        text += (f" The backlog delay passes the {_fmt_time(r['timeout'])} timeout; every attempt then times out "
                 f"and comes back, {r['retries']} time{'s' if r['retries'] > 1 else ''} at most, so the attempts "
                 f"climb to {_fmt_rate(peak)}: {100 * r['table']['utilization'].iloc[-1]:.3g} % of the cores even "
                 "with every key back. The retries hold the service overloaded after the burst -- a metastable "
                 "failure that only shedding load (or fewer retries) ends")
        if r["bistable_range"] is not None and r["bistable_range"][0] <= lam:
            lo, hi = r["bistable_range"]
            text += (f"; {_fmt_rate(lam)} lies in the retries' bistable range at steady state ({_fmt_rate(lo)} "
                     f"to {_fmt_rate(hi)})")
        text += "."
    else:
        text += (f" The backlog delay reaches {_fmt_time(r['peak_delay'])}, past the {_fmt_time(r['timeout'])} "
                 f"timeout for {_fmt_time(r['seconds_over_timeout'])}: requests time out")
        if r["retries"]:
            peak = float(r["table"]["attempt_rate"].max())
            text += (f"; their retries raise the attempts to {_fmt_rate(peak)}, which the cores still do once the "
                     f"keys are back, so the service recovers by itself "
                     f"{_fmt_time(r['recovery_time'])} after the overload.")
        else:
            text += "; without retries the service recovers once the keys are back."
    if r["refresh_utilization"] is not None:
        text += (f" Active refresh instead keeps the hit ratio and costs a steady "
                 f"{100 * (r['refresh_utilization'] - r['steady_utilization']):.3g} points of CPU "
                 f"({100 * r['refresh_utilization']:.3g} % in all) with no burst"
                 + (": more than the cores have." if r["refresh_utilization"] >= 1 else
                    f"; the requests' p99 goes from {_fmt_time(r['steady_p99'])} to {_fmt_time(r['refresh_p99'])}."))
    return text + " (Fluid backlog: a lower bound; random arrivals add queueing on top.)"


# ---------------------------------------------------------------------------------------------
# A measured CPU drop after caching, as a what-if


@dataclass(frozen=True, repr=False)
class CacheWhatIf(Result):
    """Result of :func:`cache_whatif`.

    Attributes
    ----------
    cost_factor : float
        CPU per request after caching over before: ``utilization_after / utilization_before``.
    implied_hit_ratio : float
        The hit ratio that explains it: ``(1 - cost_factor) / (1 - hit_cost_ratio)`` (NaN above 1:
        hits that expensive cannot explain the drop).
    mean_cpu_before, mean_cpu_after : float
        Seconds of CPU per request.
    ceiling_before, ceiling_after : float
        SLO ceilings, requests/s.
    peak_delay_before, peak_delay_after, seconds_over_timeout_before, seconds_over_timeout_after : float or None
        With a per-second ``arrival_rate`` series: the fluid backlog's peak delay and the time
        its delay spends past the timeout, before and after.
    utilization_before, utilization_after, hit_cost_ratio, servers, discipline, slo, timeout
        What was asked.
    explanation : str
    """

    cost_factor: float
    implied_hit_ratio: float
    mean_cpu_before: float
    mean_cpu_after: float
    ceiling_before: float
    ceiling_after: float
    peak_delay_before: float | None
    peak_delay_after: float | None
    seconds_over_timeout_before: float | None
    seconds_over_timeout_after: float | None
    utilization_before: float
    utilization_after: float
    hit_cost_ratio: float
    servers: int
    discipline: str
    slo: dict
    timeout: float
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("cost_factor", "implied_hit_ratio", "ceiling_before", "ceiling_after")


def cache_whatif(service: Service | float, utilization_before: float, utilization_after: float,
                 arrival_rate: Any = None, servers: int = 1, *, hit_cost_ratio: float = 0.0,
                 slo: Mapping[float, float] | None = None, discipline: str = "ps",
                 timeout: float = 30.0, progress: Callable[[int, int], Any] | None = None) -> CacheWhatIf:
    """A measured CPU drop after adding a cache: the hit ratio it implies and what it buys.

    Parameters
    ----------
    service : Service or float
        CPU time per request before the cache, seconds (scalar parameters).
    utilization_before, utilization_after : float
        CPU utilisation at the same traffic before and after caching, shares in (0, 1).
    arrival_rate : pandas.Series or array_like, optional
        Per-second request rates (e.g. :func:`capacity.incident.incident_traffic`): adds the
        fluid backlog before and after.
    servers : int, optional
        Cores (default 1).
    hit_cost_ratio : float, optional
        CPU of a hit as a share of a miss's, in [0, 1) (default 0: a hit is free).
    slo : mapping, optional
        Quantile -> seconds for the ceilings (default ``{0.99: 0.5}``).
    discipline : {"ps", "fcfs"}, optional
        Default processor sharing (one Node.js process).
    timeout : float, optional
        Client timeout for the backlog, seconds (default 30).
    progress : callable, optional
        ``progress(done, total)`` after each of the two ceilings (processor sharing on the
        mixture takes a second or two).

    Returns
    -------
    CacheWhatIf

    Notes
    -----
    At the same traffic the CPU is proportional to the mean CPU per request, so the cache
    multiplied it by ``f = utilization_after / utilization_before``.  Every request that misses
    costs what it did before and a hit ``kappa = hit_cost_ratio`` of that, so
    ``f = 1 - h (1 - kappa)`` and ``h = (1 - f) / (1 - kappa)``.  The service after is the hit/miss
    mixture: with probability ``h`` the service before times ``kappa``, else the service before
    -- far more variable than the service before scaled by ``f`` (the incident's free hits: scv
    7.9 against 1), and its tail sets the ceiling.  The ceilings are those of
    :func:`cache_ceiling` at ``h``: FCFS on one core exact (the mixture's atoms through the exact
    M/G/1 wait), otherwise the mixture's two-moment stand-in.  Measured against the simulator
    on the incident's numbers (25 ms exponential, ``h = 0.775``, p99 <= 0.5 s, one core): the
    true ceilings are 139 (FCFS) and about 142 (PS) requests/s; this gives 139.1 (FCFS) and
    148.6 (PS, +5 %), where the law scaled by ``f`` said 169 and 162 -- at which the true p99 is
    2.2 s and 1.2 s.  Where no hit ratio explains the drop (``h`` outside (0, 1)) the law after
    is the one before scaled by ``f``.  Backlogs by :func:`capacity.overload.backlog` (the mean
    alone).

    References
    ----------
    Seed article 000 (the Node.js incident): "后来也给常用计算逻辑添加了 redis 缓存, 将 CPU 负载由
    15%~25% 降低到了 4%~5%" (``data/incident_facts.toml``, ``fix_redis_cache``).

    Examples
    --------
    The incident's midpoints, 20 % -> 4.5 %, with the 25 ms per request its CPU reading implies:

    >>> from capacity import plan
    >>> r = plan.cache_whatif(0.025, 0.20, 0.045)
    >>> round(r.cost_factor, 3), round(r.implied_hit_ratio, 3), round(r.mean_cpu_after * 1000, 3)
    (0.225, 0.775, 5.625)
    """
    svc = _scalar_service(service, "service")
    before = float(check_positive(utilization_before, "utilization_before"))
    after = float(check_positive(utilization_after, "utilization_after"))
    for name, u in (("utilization_before", before), ("utilization_after", after)):
        if u >= 1:
            raise ValueError(f"{name} must be a share below 1, got {u!r}")
    kappa = float(check_nonnegative(hit_cost_ratio, "hit_cost_ratio"))
    if kappa >= 1:
        raise ValueError(f"hit_cost_ratio must be below 1 (a hit cheaper than a miss), got {hit_cost_ratio!r}")
    c, tau = int(check_servers(servers)), float(check_positive(timeout, "timeout"))
    check_discipline(discipline, ("fcfs", "ps"))
    f = after / before
    h = (1.0 - f) / (1.0 - kappa)
    from ..incident import _scaled
    from ..overload import backlog

    cheap = _scaled(svc, f)                    # the mean after
    slo = {0.99: 0.5} if slo is None else slo
    tick = progress_ticker(progress, 2)
    ceil_before = qps_ceiling(svc, c, slo, discipline)
    tick()
    if 0.0 < h < 1.0:                          # a hit ratio explains the drop: the law is the mixture
        hit = _scaled(svc, kappa) if kappa > 0 else Service.deterministic(1e-12 * float(svc.mean))
        ceil_after = float(_mixture_ceilings(np.array([h]), hit, svc, c, slo, discipline)[0])
    else:
        ceil_after = float(qps_ceiling(cheap, c, slo, discipline).qps)
    tick()
    res = dict(cost_factor=f, implied_hit_ratio=h if 0 <= h <= 1 else math.nan, mean_cpu_before=float(svc.mean),
               mean_cpu_after=float(cheap.mean), ceiling_before=float(ceil_before.qps), ceiling_after=ceil_after,
               peak_delay_before=None, peak_delay_after=None, seconds_over_timeout_before=None,
               seconds_over_timeout_after=None, utilization_before=before, utilization_after=after,
               hit_cost_ratio=kappa, servers=c, discipline=discipline,
               slo={float(q): float(t) for q, t in ceil_before.slo.items()}, timeout=tau)
    if arrival_rate is not None:
        runs = [backlog(arrival_rate, s, c, timeout=tau) for s in (svc, cheap)]
        res.update(peak_delay_before=runs[0].peak_delay, peak_delay_after=runs[1].peak_delay,
                   seconds_over_timeout_before=runs[0].seconds_over_timeout,
                   seconds_over_timeout_after=runs[1].seconds_over_timeout)
    return CacheWhatIf(**res, explanation=_explain_whatif(res))


def _explain_whatif(r: dict) -> str:
    f, h = r["cost_factor"], r["implied_hit_ratio"]
    text = (f"The CPU fell from {100 * r['utilization_before']:.3g} % to {100 * r['utilization_after']:.3g} % at the "
            f"same traffic: each request now costs {f:.3g} x what it did ({_fmt_time(r['mean_cpu_before'])} -> "
            f"{_fmt_time(r['mean_cpu_after'])}).")
    text += (f" With hits costing {100 * r['hit_cost_ratio']:.3g} % of a miss, that is a {100 * h:.3g} % hit ratio."
             if not math.isnan(h) else " Hits that expensive cannot explain a drop that large.")
    text += (f" The SLO ceiling goes from {_fmt_rate(r['ceiling_before'])} to {_fmt_rate(r['ceiling_after'])} "
             f"({r['ceiling_after'] / r['ceiling_before']:.3g} x)." if r["ceiling_before"] > 0 else
             f" The SLO ceiling goes from 0 to {_fmt_rate(r['ceiling_after'])}.")
    if r["peak_delay_before"] is not None:
        b, a, tau = r["seconds_over_timeout_before"], r["seconds_over_timeout_after"], _fmt_time(r["timeout"])
        text += (f" On the traffic given, the fluid backlog's delay peaks at {_fmt_time(r['peak_delay_before'])} "
                 f"before ({_fmt_time(b) if b else 'never'} past the {tau} timeout) and "
                 f"{_fmt_time(r['peak_delay_after']) if r['peak_delay_after'] else 'nothing'} after "
                 f"({_fmt_time(a) if a else 'never'} past it).")
    return text
