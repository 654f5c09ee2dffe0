"""Cluster vs machine: how the way requests are dispatched to worker processes costs latency.

A Node.js service on ``K`` cores runs ``K`` single-threaded worker processes,
each with its own queue.  Whether they sit on one big machine (Node cluster
mode: the primary hands connections round robin to its workers) or on many
small machines behind a load balancer (round robin or least connections),
the traffic is split *before* it queues, so the ``K`` cores never act as one
pooled queue.  :func:`compare_scaling` puts the options side by side;
:func:`dispatch_response` is the forward model of one option.

Dispatch models (``N`` worker queues of ``s`` cores each, Poisson arrivals
at rate ``lambda`` in total, service ``S`` with mean ``1/mu``):

``"pooled"`` -- the ideal: one queue, ``N s`` cores (M/G/Ns).  Exact where
the forward model is (:mod:`capacity.fcfs`, :mod:`capacity.ps`).  A lower
bound on the latency of every real dispatcher.

``"random"`` -- each request picks a worker uniformly at random.  A random
split of a Poisson stream is Poisson, so every worker is an exact M/G/s
queue at rate ``lambda / N``.

``"round_robin"`` -- the k-th request goes to worker ``k mod N``.  Every
worker sees every N-th arrival: Erlang-N interarrival times (squared
coefficient of variation ``ca2 = 1/N``), smoother than Poisson, so it is
better than random splitting but worse than one pooled queue.  Modelled by
an *equivalent Poisson load*: the worker is replaced by an M/G/s queue at the
arrival rate ``lambda_eff`` that gives the same congestion:

* exponential service: ``lambda_eff = omega s mu``, where ``omega`` is the
  root in (0, 1) of the GI/M/s equation ``omega = A*(s mu (1 - omega))``
  with the Erlang-N interarrival transform ``A*(x) = (lambda / (lambda +
  x))^N``.  For one core (``s = 1``) and FCFS this is **exact**: the E_N/M/1
  sojourn time is exponential with rate ``mu (1 - omega)`` (Kleinrock 1975,
  section 6.4), the M/M/1 sojourn at utilisation ``omega``.  Under PS with
  one core the number of requests present has the same law as under FCFS
  (exponential service, any arrival process), so the *mean* is exact and
  the distribution is the M/M/1-PS one at utilisation ``omega`` (an
  approximation of the tail shape).  With ``s > 1`` it matches the decay
  rate ``s mu (1 - omega)`` of the GI/M/s wait (approximation).
* other service: the Allen-Cunneen / Kingman two-moment approximation, which
  scales the M/G/s waiting time by ``(ca2 + cs2) / (1 + cs2)``; it is applied
  to ``u = rho / (1 - rho)``: ``u_eff = u (1/N + cs2) / (1 + cs2)``
  (approximation; exact mean wait for ``s = 1`` under the Kingman formula).

``"least_connections"`` -- nginx ``least_conn``, a join-the-shortest-queue
(JSQ) dispatcher.  JSQ is close to the pooled queue (Foschini & Salz 1978:
heavy-traffic optimal; Gupta, Harchol-Balter, Sigman & Whitt 2007: under PS
each server behaves approximately like an M/M/1-PS queue with a load-
dependent arrival rate, and JSQ/PS is nearly insensitive to the service
distribution).  Modelled as one worker at the constant equivalent rate
``lambda_eff`` whose *mean* response time equals that of the pooled queue
(a simplification of the SQA's load-dependent rate to one rate), and never
better than the pooled queue itself (tail probability ``max`` of the two).  Measured
against :func:`capacity.sim.simulate` (4 one-core workers, exponential
service, 60,000 requests): the simulated JSQ mean is 6 % (load 0.5) to 8 %
(load 0.8) above the pooled mean that this model reproduces, the p99 within
0-10 %; so this model is slightly optimistic, and the table says so.

Measured against :func:`capacity.sim.simulate` (150,000 requests, seed 7, 99 % batch-means
interval; ``tests/test_plan_scaling.py`` repeats the first six):

==============================================  ==============  ===================
configuration (load 0.6-0.7, E[S] = 1 s)         model p99       simulated p99
==============================================  ==============  ===================
FCFS, 4 workers, round robin, exponential       10.30           10.94 +- 0.73
FCFS, 3 machines x 2 cores, round robin, exp.   6.30            6.38 +- 0.26
FCFS, 4 workers, round robin, gamma scv 2       19.07           18.06 +- 1.37
PS, 4 workers, random, exponential (exact)      23.25           22.77 +- 1.52
FCFS, pooled 4 cores (exact)                    5.49            5.46 +- 0.19
PS, 2 x 2 workers, round robin, exponential     10.29 (-8 %)    11.24 +- 0.46
FCFS, 2 x 3 workers, least connections, exp.    4.98 (-5 %)     5.26 +- 0.11
PS, 2 x 3 workers, least connections, exp.      5.23 (-10 %)    5.84 +- 0.13
FCFS, 4 workers, round robin, deterministic     3.31 (+33 %)    2.49 +- 0.09
==============================================  ==============  ===================

So: round robin is within the simulation's interval for FCFS (exact for exponential
service) and gamma service; the PS tail under round robin and least connections is 5-10 %
optimistic; for nearly constant service times the two-moment round-robin model is
pessimistic (it does not see how regular E_N/D/1 is).

References
----------
L. Kleinrock, *Queueing Systems, Vol. 1* (1975), section 6.4 (E_r/M/1) and
6.5 (GI/M/m).
A. O. Allen, *Probability, Statistics and Queueing Theory* (2nd ed., 1990),
section 6.4 (Allen-Cunneen approximation); J. F. C. Kingman, "The single
server queue in heavy traffic", Proc. Camb. Phil. Soc. 57 (1961) 902-904.
G. J. Foschini and J. Salz, "A basic dynamic routing problem and diffusion",
IEEE Trans. Commun. 26 (1978) 320-327.
V. Gupta, M. Harchol-Balter, K. Sigman and W. Whitt, "Analysis of
join-the-shortest-queue routing for web server farms", Performance
Evaluation 64 (2007) 1062-1081.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import pandas as pd

from .._checks import (
    check_discipline,
    check_nonnegative,
    check_positive,
    check_quantile,
    check_servers,
    scalar_out,
)
from .._common import solve_increasing
from .._deprecation import deprecated_property, renamed_parameters
from .._result import Result
from ..distributions import Service, as_service
from ._solve import _max_rates, _parse_slo
from ._text import _fmt_q, _fmt_rate, _fmt_time
from .servers import servers_needed

__all__ = ["DISPATCHES", "ScalingComparison", "ScalingOption", "compare_scaling", "dispatch_response"]

ArrayLike = Any

DISPATCHES = ("pooled", "round_robin", "least_connections", "random")

_MODEL_TEXT = {
    "pooled": "M/G/c, one pooled queue (ideal)",
    "random": "M/G/s per worker at lambda/N (exact)",
    "round_robin": "E_N/G/s per worker, equivalent Poisson load",
    "least_connections": "JSQ ~ pooled mean, one worker (slightly optimistic)",
    "single": "one worker queue (M/G/s)",
}


def _modules(discipline: str):
    from .. import fcfs, ps

    check_discipline(discipline, ("fcfs", "ps"))
    return ps if discipline == "ps" else fcfs


def _check_dispatch(dispatch: str) -> str:
    if dispatch not in DISPATCHES:
        raise ValueError(f"dispatch must be one of {list(DISPATCHES)}, got {dispatch!r}")
    return dispatch


# ---------------------------------------------------------------------------------------------
# Equivalent Poisson rate of one worker


def _gim_root(lam: np.ndarray, mu: np.ndarray, s: int, n: int) -> np.ndarray:
    """Root omega in (0, 1) of omega = (lam / (lam + s mu (1 - omega)))^n, by vectorised bisection.

    ``f(w) = A*(s mu (1 - w)) - w`` is positive on (0, omega) and negative on (omega, 1) when the
    worker utilisation ``lam / (n s mu)`` is below 1 (A* is convex, equals 1 at w = 1 with slope
    1 / utilisation > 1 there).  Computed as ``exp(-n log1p(x / lam))`` so large ``n`` cannot
    underflow to a wrong root.
    """
    lo = np.zeros(np.shape(lam))
    hi = np.ones(np.shape(lam))
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        f = np.exp(-n * np.log1p(s * mu * (1.0 - mid) / lam)) - mid
        lo = np.where(f > 0, mid, lo)
        hi = np.where(f > 0, hi, mid)
    return 0.5 * (lo + hi)


def _equivalent_rate(lam: np.ndarray, svc: Service, n: int, s: int, dispatch: str, discipline: str) -> np.ndarray:
    """Poisson arrival rate at which one ``s``-core worker is as congested as under ``dispatch``."""
    mean = np.asarray(svc.mean, dtype=float)
    mu = 1.0 / mean
    lam = np.asarray(lam, dtype=float)
    rho = lam * mean / (n * s)
    stable = rho < 1.0
    if dispatch == "random" or n == 1:
        return lam / n
    if dispatch == "round_robin":
        if svc.family == "exponential":
            safe = np.where(stable & (lam > 0), lam, 1.0)
            omega = _gim_root(safe, mu, s, n)
            eff = np.where(lam > 0, omega * s * mu, 0.0)
        else:
            scv = np.asarray(svc.scv, dtype=float)
            kappa = (1.0 / n + scv) / (1.0 + scv)
            u = kappa * np.where(stable, rho, 0.5) / (1.0 - np.where(stable, rho, 0.5))
            eff = s * mu * u / (1.0 + u)
        return np.where(stable, eff, s * mu)
    # least connections: the worker rate whose mean response equals the pooled queue's.
    mod = _modules(discipline)
    target = np.asarray(mod.mean_response(np.where(stable, lam, 0.0), svc, n * s), dtype=float)
    target = np.broadcast_to(target, np.broadcast_shapes(target.shape, lam.shape))
    with np.errstate(divide="ignore", invalid="ignore"):
        if s == 1 and (discipline == "ps" or svc.family == "exponential"):
            # M/G/1-PS and M/M/1: E[T] = E[S] / (1 - rho_eff), solved in closed form.
            eff = mu * (1.0 - mean / target)
        else:
            excess = target - mean  # the wait to reproduce (> 0)
            ok = stable & (excess > 1e-15 * mean)

            def wait(x):
                return np.asarray(mod.mean_response(s * mu * x / (1.0 + x), svc, s), dtype=float) - mean

            u = solve_increasing(wait, np.where(ok, excess, np.nan), np.full(excess.shape, 1e-3),
                                 np.full(excess.shape, 1e2), log=True, rtol=1e-9)
            eff = np.where(ok, s * mu * u / (1.0 + u), 0.0)
    eff = np.where(lam > 0, np.maximum(eff, 0.0), 0.0)
    return np.where(stable, eff, s * mu)


def _sf_for(mod, n: int, s: int, dispatch: str, discipline: str):
    """``sf(t, lam, svc, c)`` of one option (``c`` is ignored: the topology is fixed)."""
    if dispatch == "pooled" or n == 1:
        return lambda t, lam, svc, c: mod.response_sf(t, lam, svc, n * s)
    if dispatch == "least_connections":
        # Never better than the pooled queue (which minimises the number present).
        return lambda t, lam, svc, c: np.maximum(
            mod.response_sf(t, _equivalent_rate(lam, svc, n, s, dispatch, discipline), svc, s),
            mod.response_sf(t, lam, svc, n * s))
    return lambda t, lam, svc, c: mod.response_sf(t, _equivalent_rate(lam, svc, n, s, dispatch, discipline),
                                                  svc, s)


def _quantile_for(mod, qq, lam, svc, n: int, s: int, dispatch: str, discipline: str):
    if dispatch == "pooled" or n == 1:
        return mod.response_quantile(qq, lam, svc, n * s)
    out = mod.response_quantile(qq, _equivalent_rate(lam, svc, n, s, dispatch, discipline), svc, s)
    if dispatch == "least_connections":
        out = np.maximum(out, mod.response_quantile(qq, lam, svc, n * s))
    return out


@renamed_parameters(workers="processes")
def dispatch_response(q: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike, processes: int,
                      servers: int = 1, dispatch: str = "round_robin", discipline: str = "ps"):
    """Response-time quantile of ``processes`` worker queues behind a dispatcher.

    Parameters
    ----------
    q : float or array_like
        Quantile(s) in (0, 1).
    arrival_rate : float or array_like
        Total Poisson arrival rate over all processes, requests/s.
    service : Service or float
        CPU time per request, seconds (scalar parameters).
    processes : int
        Worker processes, each with its own queue: all of them, over every machine
        (``ScalingOption.total_processes``).  Was ``workers``, which still works for one release.
    servers : int, optional
        Cores per worker (1 for a Node.js process).
    dispatch : {"pooled", "round_robin", "least_connections", "random"}
        See the module documentation for each model and its accuracy.
    discipline : {"ps", "fcfs"}
        Inside each worker.

    Returns
    -------
    float or ndarray
        Seconds; ``inf`` when the workers are overloaded.

    Notes
    -----
    ``pooled``: M/G/(processes x servers).  ``random``: M/G/s at ``lambda / processes`` (exact).
    ``round_robin`` and ``least_connections``: M/G/s at an equivalent Poisson rate (module
    documentation); exact for round robin with FCFS, one core and exponential service.

    References
    ----------
    See :mod:`capacity.plan.scaling`.

    Examples
    --------
    Four one-core FCFS workers, 1 s exponential requests, 2 requests/s in total (load 0.5).
    Random split: each worker is M/M/1 at 0.5/s, p99 = ln(100) / 0.5:

    >>> from capacity.plan import dispatch_response
    >>> round(dispatch_response(0.99, 2.0, 1.0, 4, dispatch="random", discipline="fcfs"), 3)
    9.21
    >>> [round(dispatch_response(0.99, 2.0, 1.0, 4, dispatch=d, discipline="fcfs"), 2)
    ...  for d in ("pooled", "least_connections", "round_robin", "random")]
    [4.76, 5.01, 6.6, 9.21]
    """
    mod = _modules(discipline)
    _check_dispatch(dispatch)
    n = int(check_servers(processes, "processes"))
    s = int(check_servers(servers, "servers"))
    qq = check_quantile(q, "q")
    lam = check_nonnegative(arrival_rate, "arrival_rate")
    svc = as_service(service)
    if np.ndim(svc.mean):
        raise ValueError("service must have scalar parameters here")
    return scalar_out(_quantile_for(mod, qq, lam, svc, n, s, dispatch, discipline))


# ---------------------------------------------------------------------------------------------
# Options and the comparison table


@dataclass(frozen=True)
class ScalingOption:
    """One deployment: ``machines`` machines, each running ``processes`` worker processes of
    ``servers`` cores (1 for Node.js), requests spread by ``dispatch``.

    ``dispatch="round_robin"`` over machines and processes is a load balancer in round robin in
    front of Node cluster mode (each worker then sees every ``machines * processes``-th
    request, exactly as :func:`capacity.sim.simulate` dispatches).  ``"pooled"`` is the ideal
    of one queue for all the cores.
    """

    machines: int
    processes: int
    dispatch: str = "round_robin"
    servers: int = 1
    name: str | None = None

    def __post_init__(self):
        for attr in ("machines", "processes", "servers"):
            v = getattr(self, attr)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{attr} must be a positive integer, got {v!r}")
        _check_dispatch(self.dispatch)

    @property
    def total_processes(self) -> int:
        """All worker processes of the deployment, ``machines * processes``."""
        return self.machines * self.processes

    workers = deprecated_property("total_processes")

    @property
    def cores_per_machine(self) -> int:
        return self.processes * self.servers

    @property
    def cores(self) -> int:
        return self.machines * self.cores_per_machine

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        how = {"pooled": "pooled queue (ideal)", "round_robin": "round robin",
               "least_connections": "least connections", "random": "random"}[self.dispatch]
        m = "machine" if self.machines == 1 else "machines"
        per = f"{self.processes} proc" + (f" x {self.servers} cores" if self.servers > 1 else "")
        return f"{self.machines} {m} x {per}, {how}"


def _as_option(x) -> ScalingOption:
    if isinstance(x, ScalingOption):
        return x
    if isinstance(x, Mapping):
        return ScalingOption(**x)
    raise ValueError(f"each option must be a ScalingOption or a dict of its fields, got {x!r}")


@dataclass(frozen=True, repr=False)
class ScalingComparison(Result):
    """Result of :func:`compare_scaling`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per option (index: the option's label): ``machines``, ``processes_per_machine``,
        ``cores_per_process``, ``cores``, ``dispatch``, ``utilization``, ``mean_s``, one
        ``pQ_s`` column per SLO percentile (at the peak), ``meets_slo``, ``ceiling_qps`` (the
        highest rate meeting the SLO), ``headroom`` (``ceiling_qps / peak_qps``),
        ``n1_meets_slo``, ``n1_ceiling_qps`` and ``n1_pQ_s`` (one machine down, same peak),
        ``cost``, ``memory_per_machine``, ``fits_memory``, ``model``.
    best : str or None
        Label of the cheapest option that meets the SLO with one machine down (else the
        cheapest meeting it with every machine up; None if none does).
    explanation : str
    """

    table: pd.DataFrame
    best: str | None
    peak_qps: float
    slo: dict
    discipline: str
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("best", "peak_qps", "discipline")


def _evaluate(opt: ScalingOption, lam: float, svc: Service, qs, ts, p, discipline: str) -> dict:
    mod = _modules(discipline)
    n, s = opt.total_processes, opt.servers
    dispatch = opt.dispatch if n > 1 else "pooled"
    out: dict = {}
    try:
        quant = np.asarray(_quantile_for(mod, qs, lam, svc, n, s, dispatch, discipline), dtype=float)
        if dispatch == "pooled":
            mean = float(mod.mean_response(lam, svc, n * s))
        else:
            eff = float(_equivalent_rate(np.asarray(lam), svc, n, s, dispatch, discipline))
            mean = float(mod.mean_response(eff, svc, s))
        rates, reason, _ = _max_rates(_sf_for(mod, n, s, dispatch, discipline), svc, np.asarray(n * s), ts, p)
        ceiling = float(np.min(rates)) if (reason == 0).all() else 0.0
    except NotImplementedError:
        quant, mean, ceiling = np.full(len(qs), np.nan), math.nan, math.nan
    out["mean_s"] = mean
    out["quantiles"] = quant
    out["ceiling"] = ceiling
    return out


def compare_scaling(peak_qps: float, service: Service | ArrayLike, slo: Mapping[float, float] | None = None,
                    options: Sequence[ScalingOption | Mapping] | None = None, *, cores: int | None = None,
                    cores_per_machine: int = 8, cost_per_machine: float = 0.0, cost_per_core: float = 0.0,
                    memory_per_process: float | None = None, machine_memory: float | None = None,
                    discipline: str = "ps") -> ScalingComparison:
    """Cluster vs machine: latency, headroom, N+1 and cost of ways to deploy the same cores.

    Parameters
    ----------
    peak_qps : float
        Peak Poisson arrival rate over the whole service, requests/s.
    service : Service or float
        CPU time per request, seconds (scalar parameters).
    slo : mapping, optional
        Quantile -> seconds (default ``{0.99: 0.5}``).
    options : sequence of ScalingOption or dict, optional
        The deployments to compare.  Default: ``cores`` cores (default: the fewest whole
        ``cores_per_machine``-core machines whose cores, pooled, meet the SLO at the peak) as
        one big machine in Node cluster mode, as ``cores / cores_per_machine`` machines with
        round-robin, least-connections and random balancing, and as one pooled queue.
    cores, cores_per_machine : int, optional
        For the default options.
    cost_per_machine, cost_per_core : float, optional
        Cost of each machine and of each core (any currency per period).
    memory_per_process, machine_memory : float, optional
        Bytes per worker process and per machine; ``fits_memory`` is False where
        ``processes * memory_per_process > machine_memory``.
    discipline : {"ps", "fcfs"}, optional
        Inside each worker (default processor sharing: an event loop).

    Returns
    -------
    ScalingComparison
        ``.table`` (a DataFrame, one row per option), ``.best``, ``.explanation``.

    Notes
    -----
    Each option is evaluated with its dispatch model (:mod:`capacity.plan.scaling`): the SLO
    percentiles at the peak, the ceiling (the rate at which the tightest percentile reaches its
    target, by the solver of :func:`qps_ceiling` on the option's tail probability), and the same
    with one machine down (``machines - 1`` machines take the whole peak; a one-machine option
    then has nothing left).  Exponential service under PS or FCFS is fast; PS with other service
    families needs a numerical inversion per evaluation and is much slower, and PS with several
    cores per worker and non-exponential service is not available (NaN in the table).

    References
    ----------
    See :mod:`capacity.plan.scaling` (Kleinrock 1975; Allen 1990; Gupta et al. 2007).

    Examples
    --------
    >>> from capacity.plan import compare_scaling, ScalingOption
    >>> opts = [ScalingOption(1, 4, "round_robin"), ScalingOption(2, 2, "least_connections"),
    ...         ScalingOption(1, 4, "pooled")]
    >>> r = compare_scaling(100.0, 0.025, {0.99: 0.5}, opts, discipline="fcfs", cost_per_machine=100)
    >>> r.table["ceiling_qps"].round(1).tolist()
    [136.2, 149.7, 150.5]
    >>> r.table["n1_meets_slo"].tolist(), r.table["cost"].tolist()
    ([False, False, False], [100.0, 200.0, 100.0])
    """
    lam = float(check_positive(peak_qps, "peak_qps"))
    svc = as_service(service)
    if np.ndim(svc.mean):
        raise ValueError("service must have scalar parameters here")
    slo = {0.99: 0.5} if slo is None else slo
    qs, ts = _parse_slo(slo)
    p = -np.expm1(np.log(qs))
    _modules(discipline)
    cpm = int(check_servers(cores_per_machine, "cores_per_machine"))
    cpm_cost = float(check_nonnegative(cost_per_machine, "cost_per_machine"))
    cpc_cost = float(check_nonnegative(cost_per_core, "cost_per_core"))
    mem_p = None if memory_per_process is None else float(check_positive(memory_per_process, "memory_per_process"))
    mem_m = None if machine_memory is None else float(check_positive(machine_memory, "machine_memory"))
    if options is None:
        if cores is None:
            need = int(servers_needed(lam, svc, slo, discipline=discipline).servers)
            cores_i = -(-need // cpm) * cpm
        else:
            cores_i = int(check_servers(cores, "cores"))
        m = max(1, -(-cores_i // cpm))
        opts = [ScalingOption(1, cores_i, "round_robin", name=f"1 machine x {cores_i} cores, Node cluster (RR)")]
        if m > 1:
            opts += [ScalingOption(m, cpm, d) for d in ("round_robin", "least_connections", "random")]
        else:
            opts += [ScalingOption(cores_i, 1, d, name=f"{cores_i} machines x 1 core, {d.replace('_', ' ')}")
                     for d in ("least_connections", "random")]
        opts.append(ScalingOption(1, cores_i, "pooled", name=f"ideal: one pooled queue of {cores_i} cores"))
    else:
        opts = [_as_option(o) for o in options]
        if not opts:
            raise ValueError("options must not be empty")
    rows = []
    mean_svc = float(svc.mean)
    for opt in opts:
        ev = _evaluate(opt, lam, svc, qs, ts, p, discipline)
        row = {"option": opt.label, "machines": opt.machines, "processes_per_machine": opt.processes,
               "cores_per_process": opt.servers, "cores": opt.cores,
               "dispatch": opt.dispatch if opt.total_processes > 1 else "single",
               "utilization": lam * mean_svc / opt.cores, "mean_s": ev["mean_s"]}
        for q, v in zip(qs, ev["quantiles"]):
            row[f"{_fmt_q(q)}_s"] = float(v)
        quant = ev["quantiles"]
        row["meets_slo"] = bool(np.all(quant <= ts)) if np.all(np.isfinite(quant)) else False
        row["ceiling_qps"] = ev["ceiling"]
        row["headroom"] = ev["ceiling"] / lam
        if opt.machines > 1:
            down = ScalingOption(opt.machines - 1, opt.processes, opt.dispatch, opt.servers)
            ev1 = _evaluate(down, lam, svc, qs, ts, p, discipline)
            q1 = ev1["quantiles"]
            row["n1_meets_slo"] = bool(np.all(q1 <= ts)) if np.all(np.isfinite(q1)) else False
            row["n1_ceiling_qps"] = ev1["ceiling"]
        else:
            q1 = np.full(len(qs), np.inf)
            row["n1_meets_slo"] = False
            row["n1_ceiling_qps"] = 0.0
        for q, v in zip(qs, q1):
            row[f"n1_{_fmt_q(q)}_s"] = float(v)
        row["cost"] = opt.machines * cpm_cost + opt.cores * cpc_cost
        row["memory_per_machine"] = math.nan if mem_p is None else opt.processes * mem_p
        row["fits_memory"] = True if (mem_p is None or mem_m is None) else opt.processes * mem_p <= mem_m
        row["model"] = _MODEL_TEXT[row["dispatch"]]
        rows.append(row)
    table = pd.DataFrame(rows).set_index("option")
    best = _best(table)
    text = _explain(table, best, lam, svc, qs, ts, discipline)
    return ScalingComparison(table=table, best=best, peak_qps=lam,
                             slo={float(q): float(t) for q, t in zip(qs, ts)}, discipline=discipline,
                             explanation=text)


def _best(table: pd.DataFrame) -> str | None:
    real = table[(table["dispatch"] != "pooled") & table["fits_memory"]]
    for col in ("n1_meets_slo", "meets_slo"):
        ok = real[real[col]]
        if len(ok):
            return str(ok.sort_values(["cost", "cores", "headroom"], ascending=[True, True, False]).index[0])
    return None


def _explain(table: pd.DataFrame, best: str | None, lam: float, svc: Service, qs, ts, discipline: str) -> str:
    q_hi = qs[-1]
    col = f"{_fmt_q(q_hi)}_s"
    slo_text = ", ".join(f"{_fmt_q(q)} <= {_fmt_time(t)}" for q, t in zip(qs, ts))
    parts = [f"At a peak of {_fmt_rate(lam)} ({_fmt_time(float(svc.mean))} of CPU per request, "
             f"{'processor sharing' if discipline == 'ps' else 'FCFS'} in each worker), SLO {slo_text}:"]
    for label, r in table.iterrows():
        if not np.isfinite(r[col]) and np.isnan(r["ceiling_qps"]):
            parts.append(f"{label}: no model for this combination.")
            continue
        verdict = "meets the SLO" if r["meets_slo"] else "misses the SLO"
        n1 = "also with a machine down" if r["n1_meets_slo"] else "not with a machine down"
        parts.append(f"{label}: {_fmt_q(q_hi)} {_fmt_time(r[col])}, {verdict} ({n1}); ceiling "
                     f"{_fmt_rate(r['ceiling_qps'])} ({r['headroom']:.2f}x the peak).")
    parts.append("Splitting traffic before it queues costs latency: a pooled queue lets any free core take "
                 "the next request; least connections comes close, round robin (Node cluster mode's default) "
                 "smooths arrivals but cannot see which worker is stuck behind a slow request, and random "
                 "splitting is worst.")
    if best:
        parts.append(f"Cheapest real option that holds: {best}.")
    else:
        parts.append("No real option meets the SLO at this peak: add cores.")
    return " ".join(parts)
