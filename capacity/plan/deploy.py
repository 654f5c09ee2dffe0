"""Rolling deploys: the capacity lost while k of N processes restart and warm up.  :func:`rolling_deploy`.

A rolling deploy takes ``k`` processes out at a time, restarts them on the new version, lets the
balancer ramp their traffic back up while they warm (:mod:`capacity.plan.warmup`), and moves to
the next ``k``.  While a batch is down the others carry its share; while it warms it carries less
than its share, or -- with no ramp -- its full share slowly.  The question an SRE asks before
deploying at peak: does the fleet keep the SLO all along, and if not, how many processes (the
"N + 1") would?  See :mod:`capacity.plan`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from .._checks import check_count, check_nonnegative, check_positive
from .._common import progress_ticker
from .._result import Result
from ..distributions import Service
from ._text import _DISCIPLINE_TEXT, _describe_service, _fmt_q, _fmt_rate, _fmt_time
from ._warmup_model import _admitted, _ceiling_grid, _Ceilings, _check_ramp, _law, _Law
from .warmup import _inputs

__all__ = ["RollingDeploy", "rolling_deploy"]

#: Points of one deploy cycle's grid, and the most earlier batches followed while they warm.
_CYCLE_GRID = 2001
_MAX_OVERLAP = 100


@dataclass(frozen=True, repr=False)
class RollingDeploy(Result):
    """Result of :func:`rolling_deploy`.

    Attributes
    ----------
    table : pandas.DataFrame
        One deploy cycle in its steady state (index ``time``: seconds since the current batch went
        down): ``weight`` (the processes' total balancer weight, ``N`` when all are up and warm),
        ``capacity_qps`` (the fleet's SLO capacity with those weights), ``multiplier`` (the coldest
        process up), and one ``pQ_s`` column per SLO percentile: the worst process's at the peak.
    slo_ok : bool
        Whether the fleet keeps the SLO at ``arrival_rate`` through the whole deploy.
    min_capacity_qps : float
        The lowest SLO capacity during the deploy, requests/s.
    capacity_qps : float
        The SLO capacity of the fleet with every process up and warm, ``N x`` the process's ceiling.
    capacity_loss : float
        ``1 - min_capacity_qps / capacity_qps``.
    binding : str
        What limits the lowest capacity: ``"warm"`` (the warm processes carrying the missing ones'
        share) or ``"cold"`` (a warming process's share is too much for it).
    peak_response : dict
        Per SLO percentile, the worst process's largest value at ``arrival_rate`` (s; inf: overloaded).
    processes_needed : int or None
        The fewest processes with which the deploy keeps the SLO at ``arrival_rate`` (None when no
        number does: the cold service alone breaks the SLO and the ramp starts from zero weight).
    min_processes : int
        The fewest processes that keep the SLO with nobody deploying.
    deploy_time : float
        Seconds from the first batch going down until the last takes its full share.
    cycle_time : float
        Seconds between two batches going down: ``restart_time + min_ready``.
    batches, overlap : int
        Batches, and earlier batches still ramping or warming while a batch restarts.
    arrival_rate, processes, batch_size, surge, restart_time, ramp, min_ready, cold_multiplier,
    warmup_requests, warmup_time, servers, discipline, slices, slice_delay, admission, slo
        What was asked.
    explanation : str
    """

    table: pd.DataFrame
    slo_ok: bool
    min_capacity_qps: float
    capacity_qps: float
    capacity_loss: float
    binding: str
    peak_response: dict
    processes_needed: int | None
    min_processes: int
    deploy_time: float
    cycle_time: float
    batches: int
    overlap: int
    arrival_rate: float
    processes: int
    batch_size: int
    surge: bool
    restart_time: float
    ramp: float
    min_ready: float
    cold_multiplier: float
    warmup_requests: float | None
    warmup_time: float | None
    servers: int
    discipline: str
    slices: int
    slice_delay: float
    admission: str
    slo: dict
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("slo_ok", "min_capacity_qps", "processes_needed", "deploy_time")


def _cycle(law: _Law, ceil: _Ceilings, lam: float, n: int, k: int, down: float, ramp: float,
           period: float, responses: bool = True, surge: bool = False) -> dict:
    """The fleet over one deploy cycle in its steady state.

    Time ``u`` in ``[0, P)`` since the current batch of ``k`` went down; batch ``j = 0, 1, ..., J``
    went down at ``-j P`` and has been up for ``u + j P - D`` seconds (down while that is negative).
    Earlier batches and the processes not yet deployed are up and warm.  A process of weight ``w``
    gets ``lambda w / W`` of the traffic (``W`` the total weight: a weighted balancer); the requests
    law counts the requests a process has been given since it came back up.  With ``surge`` the old
    processes of a batch serve, warm, until the new ones join (age 0), and leave then."""
    warm = law.warm_progress()
    if law.by == "requests":
        # Seconds to serve that many requests at the smallest share a process can have (1 / n of lambda).
        warm = warm * n / lam
    batches = -(-n // k)
    # Batches that restarted more than _MAX_OVERLAP cycles ago count as warm (bounds the arrays).
    overlap = int(min(batches - 1, math.ceil((ramp + warm) / period), _MAX_OVERLAP))
    # The instant the batch is back (age 0, the coldest moment) is a grid point.
    u = np.unique(np.append(np.linspace(0.0, period, _CYCLE_GRID), down))
    age = u[:, None] + period * np.arange(overlap + 1)[None, :] - down         # (K, J + 1)
    # Before age 0 a batch is down; with surge its old processes still serve, warm, at full weight.
    weight = np.where(age < 0, 1.0 if surge else 0.0, _admitted(np.maximum(age, 0.0), ramp))
    total = max(n - k * (overlap + 1), 0) + k * weight.sum(axis=1)             # W(u)
    if law.by == "time":
        mult = law.multiplier(np.maximum(age, 0.0))
    else:
        # Requests given to a process of age s: int_0^s lambda a(v) / W((v + D) mod P) dv, on a fine age grid.
        s = np.linspace(0.0, period * (overlap + 1), min(_CYCLE_GRID * (overlap + 1), 40_001))
        rate = lam * _admitted(s, ramp) / np.interp((s + down) % period, u, total)
        served = np.concatenate([[0.0], np.cumsum(0.5 * (rate[1:] + rate[:-1]) * np.diff(s))])
        mult = law.multiplier(np.interp(np.maximum(age, 0.0), s, served))
    if surge:
        mult = np.where(age < 0, 1.0, mult)
    up = weight > 0
    ceiling = _ceiling_at(ceil, law.cold, mult)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(up, ceiling / np.where(up, weight, 1.0), np.inf)      # lambda_max / W per process
    warm_ratio = ceil.qps(np.array([1.0]))[0] if n > k * (overlap + 1) else np.inf
    cold_min = ratio.min(axis=1)
    # No process up (a batch of the whole fleet down): no capacity, not 0 x inf.
    with np.errstate(invalid="ignore"):
        capacity = np.where(total > 0, total * np.minimum(cold_min, warm_ratio), 0.0)
    out = dict(time=u, weight=total, capacity=capacity, overlap=overlap, batches=batches)
    if not responses:   # the search for N needs the capacity only
        return out
    share = lam * weight / total[:, None]
    rho = share * ceil.mean * mult / ceil.servers
    resp = np.where(up[..., None], ceil.quantiles(rho, mult), 0.0)
    if n > k * (overlap + 1):
        warm_resp = ceil.quantiles(lam / total * ceil.mean / ceil.servers, np.ones_like(total))
        resp = np.concatenate([resp, warm_resp[:, None, :]], axis=1)
    coldest = np.where(up, mult, 1.0).max(axis=1)
    return dict(out, multiplier=coldest, response=resp.max(axis=1),
                binding=np.where(cold_min < warm_ratio, "cold", "warm"))


def _ceiling_at(ceil: _Ceilings, top: float, m: np.ndarray) -> np.ndarray:
    """``C(m)`` for many multipliers at once, interpolated in ``ln(m - 1)`` on the 20 001-point grid of
    :func:`~capacity.plan._warmup_model._ceiling_grid` (relative error ~1e-7: the grid step is 1e-3 in
    ``ln(m - 1)`` and ``C`` is smooth there); exact read of the curve when there is no warm-up."""
    if top <= 1.0:
        return ceil.qps(m)
    cache = ceil.__dict__.setdefault("_grid_by_top", {})   # one deploy's search for N reuses it for every N
    if top not in cache:
        grid_m, grid_c = _ceiling_grid(ceil, top)
        cache[top] = (np.log(grid_m - 1.0)[::-1], grid_c[::-1])
    xs, cs = cache[top]
    x = np.log(np.maximum(np.asarray(m, dtype=float) - 1.0, 1e-300))
    return np.interp(x, xs, cs)


def _keeps_slo(law: _Law, ceil: _Ceilings, lam: float, n: int, k: int, down: float, ramp: float,
               period: float, surge: bool) -> bool:
    return bool(_cycle(law, ceil, lam, n, k, down, ramp, period, responses=False, surge=surge)["capacity"].min()
                >= lam * (1 - 1e-9))


def _fewest(law: _Law, ceil: _Ceilings, lam: float, k: int, down: float, ramp: float, period: float,
            start: int, surge: bool) -> int | None:
    """The fewest processes (>= ``start``) that keep the SLO through the deploy: doubling, then bisection."""
    hi = max(start, k + 1)
    while not _keeps_slo(law, ceil, lam, hi, k, down, ramp, period, surge):
        if hi > 2 ** 16:
            return None
        hi *= 2
    lo = start - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid >= 1 and _keeps_slo(law, ceil, lam, mid, k, down, ramp, period, surge):
            hi = mid
        else:
            lo = mid
    return hi


def rolling_deploy(arrival_rate: float, service: Service | float, processes: int, cold_multiplier: float, *,
                   warmup_requests: float | None = None, warmup_time: float | None = None, batch_size: int = 1,
                   restart_time: float = 30.0, ramp: float = 0.0, min_ready: float | None = None,
                   surge: bool = False, servers: int = 1, slo: Mapping[float, float] | None = None, discipline: str = "ps",
                   slices: int = 1, slice_delay: float = 0.0, admission: str = "fifo",
                   progress: Callable[[int, int], Any] | None = None) -> RollingDeploy:
    """The SLO capacity of a fleet while it deploys ``batch_size`` processes at a time, and the N it needs.

    Parameters
    ----------
    arrival_rate : float
        The fleet's traffic during the deploy (the peak, if you deploy at peak), requests/s.
    service : Service or float
        CPU time per request of a warm process, seconds.
    processes : int
        Processes of the fleet (``N``), each with ``servers`` cores and its own queue.
    cold_multiplier, warmup_requests, warmup_time
        The warm-up law of a restarted process, as in :func:`capacity.plan.warmup_transient`.
    batch_size : int, optional
        Processes restarted at once (``k``; Kubernetes ``maxUnavailable``; default 1).
    restart_time : float, optional
        Seconds a process is out of the balancer while it restarts (default 30).
    ramp : float, optional
        Seconds over which the balancer raises a restarted process's weight from 0 to 1 (default 0).
    min_ready : float, optional
        Seconds a restarted batch is up before the next goes down (Kubernetes ``minReadySeconds``;
        default: the ramp).
    surge : bool, optional
        Start each batch's new processes beside the old ones and take the old ones out when the new
        join (Kubernetes ``maxSurge = batch_size``, ``maxUnavailable = 0``): no process is missing
        while the new ones boot, the fleet runs ``N + batch_size`` processes meanwhile.  Default
        False: a batch is out while it restarts (``maxUnavailable = batch_size``, ``maxSurge = 0``).
    servers, slo, discipline, slices, slice_delay, admission
        As in :func:`capacity.plan.warmup_transient`.
    progress : callable, optional
        ``progress(done, total)`` after the response curve, the deploy and the search for N.

    Returns
    -------
    RollingDeploy

    Notes
    -----
    *Traffic*: a weighted balancer gives a process of weight ``w_i`` the share
    ``lambda w_i / W``, ``W = sum w``: 1 when up and ramped, ``a(t) = min(1, t / R)`` ``t`` s after
    it is back, 0 while down (Dubbo, Envoy's slow start).  *Capacity*: process ``i`` keeps the SLO
    while its share is at most its ceiling ``C(m_i)`` (:func:`capacity.plan.qps_ceiling` with the
    service ``m_i`` times longer), so the fleet does while
    ``lambda <= W min_i C(m_i) / w_i`` -- its SLO capacity.  By hand, with every process warm but
    ``k`` down: ``(N - k) C(1)``, a share ``(N - k) / N`` of the full fleet's.  With no ramp a process
    comes back with the full weight and the cold ceiling, and the fleet's capacity falls to
    ``N C(m0)``: one cold process at full share breaks the SLO for everyone it serves.

    *Deploy*: batch ``b`` goes down at ``b P``, ``P = restart_time + min_ready``, and is back at
    ``b P + restart_time``.  With ``surge`` its old processes serve, warm and at full weight,
    until then: the boot costs no capacity, and what is left is the new processes' ramp and
    warm-up (the old ones leave as the new join, as a Deployment's readiness gate does).  The
    table is one cycle in its steady state, with the earlier batches that are still ramping or
    warming (``overlap``); the first cycle has none of those and the last has no batch down after
    it, so neither is worse.  The requests law counts the requests given to a process (its share,
    no backlog).  Pointwise stationary, as :func:`ramp_needed`.

    References
    ----------
    Seed article 001 (Ctrip), sections 3.7-3.8.  Kubernetes Deployment ``RollingUpdate``
    (``maxUnavailable``, ``maxSurge``, ``minReadySeconds``).  As :func:`warmup_transient`.

    Examples
    --------
    Ten FCFS processes of 10 ms at 500 requests/s in all (50 each: ceiling 81.6 each), one at a
    time, warm: 9 of 10 up hold 9 x 81.6 = 734 requests/s.

    >>> from capacity import plan
    >>> r = plan.rolling_deploy(500.0, 0.010, 10, 1.0, warmup_time=1.0, discipline="fcfs", slo={0.99: 0.25})
    >>> round(r.min_capacity_qps, 1), round(r.capacity_loss, 3), r.slo_ok
    (734.2, 0.1, True)
    """
    svc, c, slo, rr = _inputs(service, servers, slo, discipline, slices, slice_delay, admission)
    lam = float(check_positive(arrival_rate, "arrival_rate"))
    n = check_count(processes, "processes", 1)
    k = check_count(batch_size, "batch_size", 1)
    if k > n:
        raise ValueError(f"batch_size must be at most processes ({n}), got {batch_size!r}")
    law = _law(cold_multiplier, warmup_requests, warmup_time)
    down = float(check_positive(restart_time, "restart_time"))
    r = _check_ramp(ramp)
    ready = r if min_ready is None else float(check_nonnegative(min_ready, "min_ready"))
    period = down + ready
    tick = progress_ticker(progress, 3)
    ceil = _Ceilings(svc, c, slo, discipline, rr)
    tick()
    cyc = _cycle(law, ceil, lam, n, k, down, r, period, surge=bool(surge))
    tick()
    c1 = float(ceil.qps(np.array([1.0]))[0])
    steady = max(1, math.ceil(lam / c1 * (1 - 1e-12))) if c1 > 0 else None
    # A process that comes back with a cold service that alone breaks the SLO breaks it whatever its share.
    cold_fits = law.cold < ceil.fit_multiplier
    needed = None if steady is None or not cold_fits else _fewest(law, ceil, lam, k, down, r, period,
                                                                  max(steady, k + 1), bool(surge))
    tick()
    i = int(np.argmin(cyc["capacity"]))
    table = pd.DataFrame({"weight": cyc["weight"], "capacity_qps": cyc["capacity"], "multiplier": cyc["multiplier"],
                          **{f"{_fmt_q(q)}_s": cyc["response"][:, j] for j, q in enumerate(ceil.qs)}},
                         index=pd.Index(cyc["time"], name="time"))[::10]
    res = dict(table=table, slo_ok=bool(cyc["capacity"].min() >= lam * (1 - 1e-9)),
               min_capacity_qps=float(cyc["capacity"][i]), capacity_qps=n * c1,
               capacity_loss=float(1.0 - cyc["capacity"][i] / (n * c1)) if c1 > 0 else math.nan,
               binding=str(cyc["binding"][i]),
               peak_response={float(q): float(cyc["response"][:, j].max()) for j, q in enumerate(ceil.qs)},
               processes_needed=needed, min_processes=steady or 0,
               deploy_time=(cyc["batches"] - 1) * period + down + r, cycle_time=period, batches=cyc["batches"],
               overlap=cyc["overlap"], arrival_rate=lam, processes=n, batch_size=k, surge=bool(surge),
               restart_time=down, ramp=r,
               min_ready=ready, cold_multiplier=law.cold, warmup_requests=law.scale if law.by == "requests" else None,
               warmup_time=law.scale if law.by == "time" else None, servers=c, discipline=discipline,
               slices=rr[0], slice_delay=rr[1], admission=rr[2], slo={float(q): float(t) for q, t in zip(ceil.qs, ceil.ts)})
    return RollingDeploy(**res, explanation=_explain(res, svc))


def _explain(r: dict, svc: Service) -> str:
    n, k, lam = r["processes"], r["batch_size"], r["arrival_rate"]
    ramp = "no ramp" if r["ramp"] == 0 else f"a {_fmt_time(r['ramp'])} ramp"
    text = (f"{n} processes with {_describe_service(svc)} under {_DISCIPLINE_TEXT[r['discipline']]} hold "
            f"{_fmt_rate(r['capacity_qps'])} within the SLO when all are up and warm. Deploying {k} at a time "
            + (f"(new ones booting {_fmt_time(r['restart_time'])} beside the old, {k} extra meanwhile, " if r["surge"]
               else f"({_fmt_time(r['restart_time'])} down each, ")
            + f"{ramp}, a process {r['cold_multiplier']:.3g} x slower when it "
            f"comes back) takes {r['batches']} batches and {_fmt_time(r['deploy_time'])}, and the capacity falls to "
            f"{_fmt_rate(r['min_capacity_qps'])} ({100 * r['capacity_loss']:.3g} % lost")
    text += (", the warm processes carrying the share of those restarting)." if r["binding"] == "warm" else
             ", a process coming back cold getting more than it can take).")
    peak = ", ".join(f"{_fmt_q(q)} {_fmt_time(v)}" for q, v in r["peak_response"].items())
    if r["slo_ok"]:
        text += f" At {_fmt_rate(lam)} the SLO holds throughout (worst process: {peak})."
    else:
        text += f" At {_fmt_rate(lam)} the SLO breaks during the deploy (worst process: {peak})."
    if r["processes_needed"] is None:
        text += (" No number of processes fixes it: the cold service alone breaks the SLO, so a restarted process "
                 "must be pre-warmed before it takes traffic (see ramp_needed).")
    else:
        extra = r["processes_needed"] - r["min_processes"]
        text += (f" Without a deploy {r['min_processes']} processes would do; deploying at this rate needs "
                 f"{r['processes_needed']} (N + {extra}).")
    return text
