"""Endpoint mixes: per-endpoint latency on a shared event loop or worker pool, what to optimise
first, and what moving an endpoint to its own process buys.  :func:`endpoint_mix`.

The Node.js incident (seed 000): during the fault even static files served by the same process
did not load.  Endpoints that share one queue share its delay -- under processor sharing (an
event loop) every request is slowed by the same factor, under FCFS (a blocking worker pool)
every request waits the same queue first.  See :mod:`capacity.plan`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from .._checks import check_discipline, check_positive, check_quantile, check_servers
from .._common import progress_ticker
from .._result import Result
from .._tagged import fcfs_tagged_quantile, mix_atoms, ps_tagged_quantile
from ..distributions import Service, as_service
from ._mixture import _mix
from ._text import _DISCIPLINE_TEXT, _fmt_q, _fmt_rate, _fmt_time

__all__ = ["EndpointMix", "endpoint_mix"]

ArrayLike = Any

@dataclass(frozen=True, repr=False)
class EndpointMix(Result):
    """Result of :func:`endpoint_mix`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per endpoint (index ``endpoint``): ``arrival_rate``, ``mean_cpu_s``, ``scv``,
        ``cpu_share`` (its share of the CPU), ``mean_response_s``, ``slowdown``
        (``mean_response / mean_cpu``), under FCFS ``mean_wait_s``, ``pQ_s`` (its response
        percentile at ``q``; under PS on one core only), ``capacity_gain_qps_per_ms`` and
        ``ceiling_gain_qps_per_ms`` (total QPS gained per millisecond of CPU saved on one of its
        requests), and with ``isolate``
        ``mean_response_split_s`` (that endpoint on its own process, the rest as before) and
        ``mean_response_pooled_s`` (all endpoints on the cores of both).
    utilization : float
        CPU busy share with the mix on ``servers`` (``inf`` responses at or above 1).
    capacity_qps, ceiling_qps : float
        Total rate at utilisation 1 and at the SLO (same mix), requests/s.
    optimise_first : str
        The endpoint with the largest SLO-ceiling gain per millisecond saved.
    isolate : str or None
        The endpoint moved to its own process, if asked.
    servers, isolated_servers, discipline, slo, q
        What was asked.
    explanation : str
    """

    table: pd.DataFrame
    utilization: float
    capacity_qps: float
    ceiling_qps: float
    optimise_first: str
    isolate: str | None
    servers: int
    isolated_servers: int
    discipline: str
    slo: dict
    q: float | None
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("utilization", "ceiling_qps", "optimise_first", "isolate")


def _endpoints(endpoints: Any, arrival_rate: float | None) -> tuple[list[str], np.ndarray, list[Service]]:
    """Names, rates and CPU laws from a mapping ``{name: (rate, service)}`` or a per-endpoint fit
    table (``capacity.fit.from_requests(...).endpoints_``: share, cpu_per_request, scv)."""
    if isinstance(endpoints, pd.DataFrame):
        need = {"endpoint", "share", "cpu_per_request", "scv"}
        if not need <= set(endpoints.columns):
            raise ValueError(f"endpoints table must have columns {sorted(need)}, got {list(endpoints.columns)}")
        if arrival_rate is None:
            raise ValueError("arrival_rate (the total request rate) is needed with an endpoints table of shares")
        lam = float(check_positive(arrival_rate, "arrival_rate"))
        ok = endpoints.dropna(subset=["cpu_per_request", "scv"])
        if ok.empty:
            raise ValueError("endpoints table has no fitted endpoint (cpu_per_request is NaN everywhere)")
        share = ok["share"].to_numpy(float) / ok["share"].sum()
        return ([str(e) for e in ok["endpoint"]], lam * share,
                [Service.from_moments(m, s) for m, s in zip(ok["cpu_per_request"], ok["scv"])])
    if not isinstance(endpoints, Mapping) or not endpoints:
        raise ValueError(f"endpoints must be a non-empty mapping name -> (arrival_rate, service), got {endpoints!r}")
    names, rates, laws = [], [], []
    for name, spec in endpoints.items():
        try:
            rate, service = spec
        except (TypeError, ValueError):
            raise ValueError(f"endpoints[{name!r}] must be (arrival_rate, service), got {spec!r}") from None
        rates.append(float(check_positive(rate, f"endpoints[{name!r}] arrival_rate")))
        svc = as_service(service, f"endpoints[{name!r}] service")
        if np.ndim(svc.mean):
            raise ValueError(f"endpoints[{name!r}] service must have scalar parameters, got {svc!r}")
        names.append(str(name))
        laws.append(svc)
    return names, np.array(rates), laws


def _means(rates: np.ndarray, laws: list[Service], c: int, discipline: str) -> tuple[np.ndarray, float]:
    """Per-endpoint mean response and (FCFS) the common mean wait on one queue of ``c`` cores."""
    from .. import fcfs, ps

    mix = _mix(list(rates / rates.sum()), laws)
    m = np.array([float(s.mean) for s in laws])
    lam = float(rates.sum())
    if discipline == "ps":
        # E[T | x] = x E[T] / E[S]: one slowdown factor for every size (exact, insensitive).
        return m * float(ps.mean_response(lam, mix, c)) / float(mix.mean), math.nan
    wait = float(fcfs.mean_wait(lam, mix, c))
    return m + wait, wait


def _fcfs_quantiles(q: float, lam: float, mix: Service, c: int, laws: list[Service],
                    rates: np.ndarray) -> np.ndarray:
    """The q quantile of ``W + S_i`` per endpoint (:func:`capacity._tagged.fcfs_tagged_quantile`):
    on one core the wait of the mix itself (its atoms, :func:`capacity._tagged.mix_atoms`), on
    several that of the two-moment stand-in ``mix``."""
    if c == 1:
        mix = mix_atoms(laws, rates / rates.sum())
    return fcfs_tagged_quantile(q, lam, mix, c, laws)


def _ps_quantiles(q: float, lam: float, rates: np.ndarray, laws: list[Service]) -> np.ndarray:
    """The q quantile of each endpoint's response on one processor-sharing core: its own CPU law
    exact, the others' through the three-moment PH fit of the mix
    (:func:`capacity._tagged.ps_tagged_quantile`)."""
    w = rates / rates.sum()
    moments = [sum(wi * float(s.moment(k)) for wi, s in zip(w, laws)) for k in (1, 2, 3)]
    return ps_tagged_quantile(q, lam, moments, laws)


def endpoint_mix(endpoints: Mapping[str, tuple] | pd.DataFrame, servers: int = 1, discipline: str = "ps",
                 slo: Mapping[float, float] | None = None, *, arrival_rate: float | None = None,
                 isolate: str | None = None, isolated_servers: int = 1,
                 q: float | None = 0.99, progress: Callable[[int, int], Any] | None = None) -> EndpointMix:
    """Per-endpoint latency of endpoints sharing one queue, which to optimise first, and what isolating one buys.

    Parameters
    ----------
    endpoints : mapping or pandas.DataFrame
        ``{name: (arrival_rate, service)}``: each endpoint's requests/s and CPU per request
        (a :class:`~capacity.Service` with scalar parameters, or a mean in seconds meaning
        exponential); or the per-endpoint table of :func:`capacity.fit.from_requests`
        (``.endpoints_``: ``endpoint``, ``share``, ``cpu_per_request``, ``scv``) with ``arrival_rate``.
    servers : int, optional
        Cores (event loop: 1) or worker processes of the one queue (default 1).
    discipline : {"ps", "fcfs"}, optional
        Processor sharing (an event loop; default) or FCFS (a blocking worker pool).
    slo : mapping, optional
        Quantile -> seconds on the response time of all requests together, for the ceiling and the
        gains (default ``{0.99: 0.5}``).
    arrival_rate : float, optional
        Total requests/s, with an endpoints table of shares.
    isolate : str, optional
        An endpoint to move to its own process(es) of ``isolated_servers`` cores.
    isolated_servers : int, optional
        Cores of that process (default 1).
    q : float or None, optional
        The per-endpoint response percentile of the table (default 0.99; None: none, the means
        alone, which are faster under PS).  Under PS it is computed on one core only.
    progress : callable, optional
        ``progress(done, total)`` after the percentiles, the ceiling gains and the isolation.

    Returns
    -------
    EndpointMix

    Notes
    -----
    Requests of endpoint ``i`` arrive as Poisson at ``lambda_i`` with CPU ``S_i``; the queue sees
    the mix ``S`` (kind ``i`` with probability ``lambda_i / lambda``), carried by its first two
    moments (:mod:`capacity.plan._mixture`).

    *Processor sharing*: ``E[T | S = x] = x E[T] / E[S]`` exactly for any service law on any
    number of cores (one core: ``x / (1 - rho)``; Kleinrock 1976, eq. 4.17; Cohen 1979), so every
    endpoint is slowed by the same factor: a 1 ms static file by as much as a 40 ms API call.
    Per-endpoint percentiles under PS (one core) come from the conditional sojourn law of a
    request of size ``x`` (Ott 1984), integrated over the endpoint's own CPU law
    (:mod:`capacity._ps_tagged`); the other requests enter through the three-moment PH fit of the
    mix (Whitt 1982), the one approximation.  Against the simulator (8 x 2000 s, three endpoints
    of gamma scv 0.5, lognormal scv 2 and exponential CPU at utilisation 0.36, 0.71 and 0.89): p99
    within -2.5 % to +1.5 %, each within about two standard errors of the simulation's; with one
    endpoint it is the queue's own quantile (M/M/1, M/E2/1 and M/H2/1-PS at p50-p99.9: within
    0.34 %, the Euler inversion beside the request's own size).  On several cores they are
    not computed (the mix on c cores has no tagged-request transform here).

    *FCFS*: with Poisson arrivals an arriving request sees the time-average queue (PASTA) and its
    wait does not depend on its own size, so ``T_i = W + S_i`` with ``W`` the wait of the mix:
    ``E[T_i] = E[W] + E[S_i]``, exact on one core (Pollaczek-Khinchine needs only the two
    moments), Allen-Cunneen on several.  ``P(T_i > t) = E[P(W > t - S_i)]``, integrated by
    96-point Gauss-Legendre in the quantile of ``S_i``.  On one core ``W`` is the exact M/G/1
    wait of the mix carried as atoms (:func:`capacity._tagged.mix_atoms`: each endpoint's law at
    64 mid-quantiles spread to its exact variance; the mix's mean and second moment exact):
    against the simulator (six 2000 s runs, gamma/lognormal/exponential endpoints at
    utilisation 0.36-0.86) each p99 within -3.5 % to +1.2 %, within two standard errors; the
    two-moment gamma stand-in it replaced read +15 % and +20 % on the 40 ms + 1 ms mix at 0.5.
    On several cores ``W`` is the stand-in's (approximate): -1.6 % to -0.3 % on the three laws
    at 0.71-0.86, -1 % to +5 % on the two-point mix at 0.5-0.85.

    *What to optimise first*: the capacity ``c / E[S]`` gains ``c (lambda_i / lambda) / E[S]^2``
    per second saved on endpoint ``i`` -- proportional to its share of requests, not of CPU.
    The SLO ceiling's gain is a finite difference of :func:`~capacity.plan.qps_ceiling` (each
    endpoint's law scaled so its mean is 0.1 ms or 10 % less, whichever is less), at the same
    mix; under FCFS it also counts the variance a cheaper expensive endpoint removes.  FCFS on one
    core: the ceilings of the mixes themselves (their atoms, exact as the percentiles); against
    the simulator the ceilings of an API/static-file mix and of its two cuts hold the p99 SLO
    within 2 %, and the order of the cuts is the simulator's (the two-moment stand-in reversed
    it).  Otherwise the mixes' two-moment stand-ins (approximate): on one event loop the same
    mix's ceilings (and its cuts') read 6-8 % high in p99 (simulated 0.53-0.54 s at them for a
    0.5 s SLO), and the order of the gains is not checked there.

    *Isolating an endpoint*: it gets its own queue of ``isolated_servers`` cores, the others keep
    ``servers``; compared with pooling all endpoints on ``servers + isolated_servers`` cores.
    Pooling gives the lower mean at the same total cores; isolation keeps the moved endpoint's
    latency independent of the others' load -- it keeps answering when they overload.

    References
    ----------
    L. Kleinrock, *Queueing Systems, Vol. 2* (1976), section 4.4.  T. J. Ott, "The sojourn-time
    distribution in the M/G/1 queue with processor sharing", J. Appl. Prob. 21 (1984) 360-378.
    W. Whitt, "Approximating a point process by a renewal process, I: two basic methods",
    Operations Research 30 (1982) 125-147.  J. W. Cohen, "The multiple
    phase service network with generalized processor sharing", Acta Informatica 12 (1979)
    245-284.  M. Harchol-Balter, *Performance Modeling and Design of Computer Systems* (2013),
    ch. 23 and 30.  Seed article 000: "故障期间连服务器上的静态资源文件也拉不下来".

    Examples
    --------
    An API at 20/s of 40 ms and static files at 50/s of 1 ms on one event loop (85 % busy):

    >>> from capacity import plan
    >>> r = plan.endpoint_mix({"/api": (20.0, 0.040), "/static": (50.0, 0.001)})
    >>> r.table["mean_response_s"].round(4).tolist()     # 40 ms / 0.15, 1 ms / 0.15
    [0.2667, 0.0067]
    >>> r.table["slowdown"].round(3).tolist()
    [6.667, 6.667]
    """
    names, rates, laws = _endpoints(endpoints, arrival_rate)
    c, c_iso = int(check_servers(servers)), int(check_servers(isolated_servers, "isolated_servers"))
    check_discipline(discipline, ("fcfs", "ps"))
    level = None if q is None else float(check_quantile(q, "q"))
    if isolate is not None and isolate not in names:
        raise ValueError(f"isolate must be one of the endpoints {names}, got {isolate!r}")
    lam = float(rates.sum())
    m = np.array([float(s.mean) for s in laws])
    scv = np.array([float(s.scv) for s in laws])
    mix = _mix(list(rates / lam), laws)
    mean_s = float(mix.mean)
    rho = lam * mean_s / c
    tick = progress_ticker(progress, 3)
    resp, wait = _means(rates, laws, c, discipline)
    table = pd.DataFrame({"arrival_rate": rates, "mean_cpu_s": m, "scv": scv, "cpu_share": rates * m / (lam * mean_s),
                          "mean_response_s": resp, "slowdown": resp / m}, index=pd.Index(names, name="endpoint"))
    if discipline == "fcfs":
        table["mean_wait_s"] = wait
    if level is not None and discipline == "fcfs":
        table[f"{_fmt_q(level)}_s"] = _fcfs_quantiles(level, lam, mix, c, laws, rates) if rho < 1 else np.inf
    elif level is not None and c == 1:
        table[f"{_fmt_q(level)}_s"] = _ps_quantiles(level, lam, rates, laws) if rho < 1 else np.inf
    tick()
    slo = {0.99: 0.5} if slo is None else slo
    ceil, gain = _ceiling_gains(rates, laws, c, slo, discipline)
    tick()
    table["capacity_gain_qps_per_ms"] = c * (rates / lam) / mean_s ** 2 * 1e-3
    table["ceiling_gain_qps_per_ms"] = gain
    if isolate is not None:
        _add_isolation(table, names.index(isolate), rates, laws, c, c_iso, discipline)
    tick()
    res = dict(table=table, utilization=rho, capacity_qps=c / mean_s, ceiling_qps=ceil,
               optimise_first=str(table["ceiling_gain_qps_per_ms"].idxmax()), isolate=isolate, servers=c,
               isolated_servers=c_iso, discipline=discipline,
               slo={float(k): float(v) for k, v in sorted(slo.items())}, q=level)
    return EndpointMix(**res, explanation=_explain(res))


def _ceiling_gains(rates: np.ndarray, laws: list[Service], c: int, slo: Mapping,
                   discipline: str) -> tuple[float, np.ndarray]:
    """The SLO ceiling of the mix and its gain (QPS per ms) when each endpoint's law is scaled so its
    mean is ``delta_i = min(0.1 ms, 10 %)`` less: the n + 1 mixes' ceilings in one call of
    :func:`capacity.plan._mixture._mix_ceilings` (exact on one FCFS core, the percentiles' law)."""
    from ..incident import _scaled
    from ._mixture import _mix_ceilings

    m = np.array([float(s.mean) for s in laws])
    delta = np.minimum(1e-4, 0.1 * m)
    w = rates / rates.sum()
    cut = [[_scaled(s, 1.0 - delta[i] / m[i]) if j == i else s for j, s in enumerate(laws)] for i in range(len(laws))]
    qps = _mix_ceilings([(w, laws)] + [(w, mixed) for mixed in cut], c, slo, discipline)
    return float(qps[0]), (qps[1:] - qps[0]) / delta * 1e-3


def _add_isolation(table: pd.DataFrame, k: int, rates: np.ndarray, laws: list[Service], c: int, c_iso: int,
                   discipline: str) -> None:
    """Columns ``mean_response_split_s`` (endpoint k alone on c_iso cores, the rest on c) and
    ``mean_response_pooled_s`` (everything on c + c_iso cores)."""
    split = np.empty(len(laws))
    split[[k]] = _means(rates[[k]], [laws[k]], c_iso, discipline)[0]
    rest = [i for i in range(len(laws)) if i != k]
    if rest:
        split[rest] = _means(rates[rest], [laws[i] for i in rest], c, discipline)[0]
    table["mean_response_split_s"] = split
    table["mean_response_pooled_s"] = _means(rates, laws, c + c_iso, discipline)[0]


def _explain(r: dict) -> str:
    t, c, disc = r["table"], r["servers"], r["discipline"]
    head = (f"{len(t)} endpoints, {_fmt_rate(float(t['arrival_rate'].sum()))} in all, share {c} "
            f"core{'s' if c > 1 else ''} under {_DISCIPLINE_TEXT[disc]} at {100 * r['utilization']:.3g} % "
            "utilisation.")
    if r["utilization"] >= 1:
        return head + (" That is at or above capacity: every endpoint's latency grows without bound, the cheapest "
                       "ones included -- the seed incident's static files that would not load.")
    small, big = t["mean_cpu_s"].idxmin(), t["mean_cpu_s"].idxmax()
    if disc == "ps":
        text = (f" Processor sharing slows every request by the same factor, {t['slowdown'].iloc[0]:.3g}: "
                f"{small} takes {_fmt_time(t.loc[small, 'mean_response_s'])} for {_fmt_time(t.loc[small, 'mean_cpu_s'])} "
                f"of CPU, {big} {_fmt_time(t.loc[big, 'mean_response_s'])} for {_fmt_time(t.loc[big, 'mean_cpu_s'])}.")
        col = None if r["q"] is None else f"{_fmt_q(r['q'])}_s"
        if col in t:
            text += (f" Their {_fmt_q(r['q'])}: {small} {_fmt_time(t.loc[small, col])}, "
                     f"{big} {_fmt_time(t.loc[big, col])}.")
    else:
        text = (f" Every request first waits {_fmt_time(float(t['mean_wait_s'].iloc[0]))} on average behind the "
                f"others: {small} takes {_fmt_time(t.loc[small, 'mean_response_s'])} for "
                f"{_fmt_time(t.loc[small, 'mean_cpu_s'])} of CPU -- a slowdown of {t.loc[small, 'slowdown']:.3g} "
                f"against {t.loc[big, 'slowdown']:.3g} for {big}.")
    best = r["optimise_first"]
    slo_text = ", ".join(f"{_fmt_q(q)} <= {_fmt_time(x)}" for q, x in r["slo"].items())
    text += (f" The SLO ({slo_text}, all requests) holds up to {_fmt_rate(r['ceiling_qps'])} at this mix; each "
             f"millisecond saved on {best} raises it by {_fmt_rate(float(t.loc[best, 'ceiling_gain_qps_per_ms']))}, "
             f"the most of any endpoint (a request of it can save at most its own "
             f"{_fmt_time(float(t.loc[best, 'mean_cpu_s']))}): optimise or cache it first.")
    if r["isolate"] is not None:
        k, n_iso = r["isolate"], r["isolated_servers"]
        text += (f" On its own process of {n_iso} core{'s' if n_iso > 1 else ''}, {k} takes "
                 f"{_fmt_time(t.loc[k, 'mean_response_split_s'])} on average (pooling every endpoint on all "
                 f"{c + n_iso} cores instead: {_fmt_time(t.loc[k, 'mean_response_pooled_s'])}) and no longer "
                 "depends on the others' load: when they overload, it keeps answering.")
    return head + text
