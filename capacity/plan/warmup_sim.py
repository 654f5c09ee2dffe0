"""The warm-up transient by exact simulation: the check of :mod:`capacity.plan.warmup`.
:func:`warmup_simulation`.

Many independent runs of one fresh process under a ramp, each request's CPU time multiplied by the
cold multiplier of the warm-up law, and per time bucket the pooled response-time percentiles with
confidence intervals.  The queueing engines are the simulator's (:mod:`capacity.sim`), used as they
are: the requests law only changes each request's size, and the time law is a change of clock (a
process at speed ``1 / m(t)`` is the warm process seen through ``G(t) = int_0^t ds / m(s)``), so
the arrivals are moved to ``G``, simulated, and the completions moved back.  See
:mod:`capacity.plan`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from .._checks import check_count, check_positive
from .._common import progress_ticker
from .._result import Result, jsonable
from ..distributions import Service
from ._text import _fmt_q, _fmt_time
from ._warmup_model import _admitted_integral, _Ceilings, _check_ramp, _default_horizon, _law, _Law
from .warmup import _inputs

__all__ = ["WarmupSimulation", "warmup_simulation"]

#: Requests per call: one vectorised FCFS core, and the event engines (PS, several cores); slices per call
#: for round robin (its engine takes about 0.1-0.6 us a slice, with slice delays the slower end).
_MAX_VECTOR, _MAX_EVENTS, _MAX_SLICES = 4_000_000, 600_000, 3_000_000

#: Groups of runs for the confidence intervals (sectioning).
_GROUPS = 10


@dataclass(frozen=True, repr=False)
class WarmupSimulation(Result):
    """Result of :func:`warmup_simulation`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per bucket (index ``time``, its start): ``admitted_rate`` (arrivals per second per
        run), per SLO percentile ``pQ_s`` with its 95 % interval ``pQ_low``, ``pQ_high`` (requests
        arriving in the bucket, pooled over the runs), and with a timeout ``timeout_fraction``
        (``_low``, ``_high``).
    peak_response : dict
        Per SLO percentile, the largest bucket value (s).
    seconds_over_slo : float
        Seconds of buckets in which some percentile is above its target.
    timeout_fraction : tuple or None
        With a timeout: the share of all simulated requests that took longer, and its interval.
    requests : int
        Requests simulated in all.
    arrival_rate, ramp, cold_multiplier, warmup_requests, warmup_time, servers, discipline, slices,
    slice_delay, admission, slo, timeout, horizon, bucket, replications, seed
        What was asked.
    explanation : str
    """

    table: pd.DataFrame
    peak_response: dict
    seconds_over_slo: float
    timeout_fraction: tuple | None
    requests: int
    arrival_rate: float
    ramp: float
    cold_multiplier: float
    warmup_requests: float | None
    warmup_time: float | None
    servers: int
    discipline: str
    slices: int
    slice_delay: float
    admission: str
    slo: dict
    timeout: float | None
    horizon: float
    bucket: float
    replications: int
    seed: Any
    explanation: str

    _headline: ClassVar[tuple[str, ...]] = ("peak_response", "seconds_over_slo", "timeout_fraction", "requests")

    def to_dict(self) -> dict:
        """The summary and the explanation, JSON-ready (the table is ``to_frame()``)."""
        return {name: jsonable(getattr(self, name)) for name in self._fields() if name != "table"}


def _arrivals(lam: float, ramp: float, horizon: float, runs: int, rng: np.random.Generator) -> np.ndarray:
    """Poisson arrivals at rate ``lambda a(t)``, one row per run, padded with inf: unit-rate points in the
    admitted time ``A(t)`` mapped back by ``A^-1``."""
    total = lam * float(_admitted_integral(np.array(horizon), ramp))
    width = int(total + 8.0 * math.sqrt(total) + 16)
    y = np.cumsum(rng.exponential(1.0 / lam, size=(runs, width)), axis=1)
    t = y if ramp == 0 else np.where(y <= ramp / 2, np.sqrt(2.0 * ramp * y), y + ramp / 2)
    return np.where(y <= total / lam, t, np.inf)


def _lindley_rows(arr: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """FCFS waits on one core for every row at once: ``W = X - running min X`` with ``X`` the partial sums
    of ``S_{n-1} - (A_n - A_{n-1})`` (``X_0 = 0``).  Padding (arrivals at inf) comes last and is cut."""
    gaps = np.diff(np.where(np.isfinite(arr), arr, 0.0), axis=1)
    x = np.concatenate([np.zeros((arr.shape[0], 1)), np.cumsum(sizes[:, :-1] - gaps, axis=1)], axis=1)
    return x - np.minimum.accumulate(x, axis=1)


def _responses(arr: np.ndarray, base: np.ndarray, law: _Law, ceil: _Ceilings, tick: Callable) -> np.ndarray:
    """Response times, shape of ``arr`` (NaN on the padding)."""
    from ..sim._engines import _fcfs, _ps, _rr

    c, discipline = ceil.servers, ceil.discipline

    live = np.isfinite(arr)
    if law.by == "requests":
        sizes = base * law.multiplier(np.arange(arr.shape[1]))[None, :]   # the n-th request: m(n)
        clock = arr
    else:
        sizes, clock = base, np.where(live, law.clock(np.where(live, arr, 0.0)), np.inf)
    out = np.full(arr.shape, np.nan)
    if ceil.kind == "fcfs" and c == 1:
        done = np.where(live, clock, 0.0) + _lindley_rows(clock, np.where(live, sizes, 0.0)) + sizes
        done_rows = [done[i, live[i]] for i in range(arr.shape[0])]
        tick()
    else:
        def engine(a: np.ndarray, x: np.ndarray) -> np.ndarray:
            if discipline == "rr":
                return _rr(a, x, c, ceil.slices, ceil.slice_delay, None, ceil.admission)[0].completion
            return (_ps if discipline == "ps" else _fcfs)(a, x, c).completion

        done_rows = []
        for i in range(arr.shape[0]):     # one event-driven run per replication (the engines are per process)
            done_rows.append(engine(clock[i, live[i]], sizes[i, live[i]]))
            tick()
    for i, done in enumerate(done_rows):
        real = done if law.by == "requests" else law.clock_inverse(done)
        out[i, live[i]] = real - arr[i, live[i]]
    return out


def _order_statistics(key: np.ndarray, value: np.ndarray, qs: np.ndarray, n_keys: int) -> np.ndarray:
    """Per key, the ``q`` quantiles of its values (inverted CDF), shape ``(n_keys, len(qs))``; NaN if empty."""
    order = np.lexsort((value, key))
    counts = np.bincount(key, minlength=n_keys)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    idx = first[:, None] + np.maximum(np.ceil(qs[None, :] * counts[:, None]) - 1, 0).astype(int)
    sorted_values = value[order]
    return np.where(counts[:, None] > 0, sorted_values[np.minimum(idx, value.size - 1)], np.nan)


def _interval(estimate: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """95 % sectioning interval: the pooled estimate +/- t_{G-1} sd(groups) / sqrt(G) (Law 2015, 9.4)."""
    g = np.sum(np.isfinite(groups), axis=0)
    sd = np.nanstd(groups, axis=0, ddof=1) if groups.shape[0] > 1 else np.full(estimate.shape, np.nan)
    half = student_t.ppf(0.975, np.maximum(g - 1, 1)) * sd / np.sqrt(np.maximum(g, 1))
    return estimate - half, estimate + half


def warmup_simulation(arrival_rate: float, service: Service | float, cold_multiplier: float, *,
                      warmup_requests: float | None = None, warmup_time: float | None = None, ramp: float = 0.0,
                      servers: int = 1, slo: Mapping[float, float] | None = None, discipline: str = "ps",
                      slices: int = 1, slice_delay: float = 0.0, admission: str = "fifo",
                      timeout: float | None = None, horizon: float | None = None, bucket: float | None = None,
                      replications: int = 40, seed: Any = None,
                      progress: Callable[[int, int], Any] | None = None) -> WarmupSimulation:
    """Simulate a fresh process added under load, many times over, and read its percentiles per bucket.

    Parameters
    ----------
    arrival_rate, service, cold_multiplier, warmup_requests, warmup_time, ramp, servers, slo, discipline, timeout
        As in :func:`capacity.plan.warmup_transient`.
    slices, slice_delay, admission : optional
        ``discipline="rr"`` only, as in :func:`capacity.plan.warmup_transient`.  A slice delay is a
        wall-clock wait, which the time law's change of clock cannot carry: with ``warmup_time`` it
        must be 0 (``ValueError`` otherwise; the requests law simulates it exactly).
    horizon, bucket : float, optional
        Seconds simulated from the moment the process takes traffic (default: the model's horizon),
        and the width of a bucket (default: a sixtieth of it).
    replications : int, optional
        Independent runs (default 40), pooled per bucket; their requests in all are limited to
        4 million for one FCFS core (vectorised: 2.7 s and 0.5 GB at the limit on the development
        machine) and 600 000 otherwise (one event-driven run each: about 0.9 s at the limit); for
        round robin also 3 million slices (requests times ``slices``: about 0.5-2 s).
    seed : optional
        Anything :func:`numpy.random.default_rng` accepts.
    progress : callable, optional
        ``progress(done, total)`` after each run (PS or several cores take about a second per
        100 000 requests).

    Returns
    -------
    WarmupSimulation

    Notes
    -----
    Exact (no time step), per run: Poisson arrivals at rate ``lambda a(t)`` (unit-rate points in
    the admitted time ``A(t) = int_0^t a`` mapped back), CPU sizes drawn from ``service``, and
    the process empty at ``t = 0``.  Requests law: the ``n``-th request (``n = 0, 1, ...``, in
    arrival order, which is the order FCFS starts them) needs ``S_n m(n)``.  Time law: the
    process runs at speed ``1 / m(t)``, i.e. the warm queue in the clock ``G``: arrivals at
    ``G(t_n)``, sizes ``S_n``, completions mapped back by ``G^-1`` -- exact for FCFS, PS and round
    robin without slice delays (every one of them only shares the CPU).  One FCFS core:
    Lindley's recursion for all runs at once; otherwise the simulator's engines
    (:mod:`capacity.sim`; round robin: ``simulate(discipline="rr")``'s engine with its slices, slice
    delay and admission), one run at a time.  Round robin's requests law gives the ``n``-th request
    to arrive ``S_n m(n)`` (all of its slices), as the model prices it.

    Per bucket the percentiles pool every run's requests that arrived in it (the ensemble
    percentile, which the model's pointwise percentile is, smoothed over the bucket).  Their 95 %
    intervals come from sectioning: the runs split into 10 groups (fewer with fewer runs), each group's percentile, and
    ``t_9`` times their standard error around the pooled value (Law 2015, sec. 9.4) -- the runs are
    independent, the requests of one run are not.

    References
    ----------
    A. M. Law, *Simulation Modeling and Analysis*, 5th ed., McGraw-Hill (2015), sec. 9.4.  D. V.
    Lindley (1952), see :mod:`capacity.sim`.

    Examples
    --------
    >>> from capacity import plan
    >>> run = plan.warmup_simulation(60.0, 0.010, 3.0, warmup_time=20.0, ramp=60.0, discipline="fcfs",
    ...                              slo={0.99: 0.25}, horizon=120.0, bucket=10.0, seed=1)
    >>> bool(run.peak_response[0.99] < 0.3), run.seconds_over_slo
    (True, 0.0)
    """
    svc, c, slo, rr = _inputs(service, servers, slo, discipline, slices, slice_delay, admission)
    lam = float(check_positive(arrival_rate, "arrival_rate"))
    law = _law(cold_multiplier, warmup_requests, warmup_time)
    if law.by == "time" and rr[1] > 0 and rr[0] > 1:
        raise ValueError(f"slice_delay must be 0 with warmup_time (a wall-clock wait does not slow down with the "
                         f"process, so the time law's change of clock does not hold), got slice_delay={slice_delay!r}")
    r = _check_ramp(ramp)
    tau = None if timeout is None else float(check_positive(timeout, "timeout"))
    runs = check_count(replications, "replications", 2)
    ceil = _Ceilings(svc, c, slo, discipline, rr)
    span = _default_horizon(law, ceil, lam, r) if horizon is None else float(check_positive(horizon, "horizon"))
    width = span / 60 if bucket is None else float(check_positive(bucket, "bucket"))
    expected = runs * lam * float(_admitted_integral(np.array(span), r))
    vector = ceil.kind == "fcfs" and c == 1
    limit = _MAX_VECTOR if vector else min(_MAX_EVENTS, _MAX_SLICES // rr[0])
    if expected > limit:
        raise ValueError(f"replications x requests per run must stay below {limit:,} (about a few seconds), got "
                         f"{runs} x {expected / runs:,.0f}: lower replications={replications!r} or the horizon")
    rng = np.random.default_rng(seed)
    tick = progress_ticker(progress, 1 if vector else runs)
    arr = _arrivals(lam, r, span, runs, rng)
    base = np.asarray(svc.sample(arr.size, rng), dtype=float).reshape(arr.shape)
    resp = _responses(arr, base, law, ceil, tick)
    return _summarise(arr, resp, ceil, lam, law, r, tau, span, width, runs, seed)


def _summarise(arr: np.ndarray, resp: np.ndarray, ceil: _Ceilings, lam: float, law: _Law, ramp: float,
               tau: float | None, span: float, width: float, runs: int, seed: Any) -> WarmupSimulation:
    n_b = int(math.ceil(span / width - 1e-9))
    groups = min(_GROUPS, runs)
    live = np.isfinite(arr)
    bucket = np.minimum((arr[live] / width).astype(int), n_b - 1)
    group = (np.arange(runs)[:, None] * groups // runs + np.zeros(arr.shape, dtype=int))[live]
    value = resp[live]
    pooled = _order_statistics(bucket, value, ceil.qs, n_b)
    by_group = _order_statistics(group * n_b + bucket, value, ceil.qs, groups * n_b).reshape(groups, n_b, -1)
    low, high = _interval(pooled, by_group)
    cols: dict[str, Any] = {"admitted_rate": np.bincount(bucket, minlength=n_b) / (runs * width)}
    for i, q in enumerate(ceil.qs):
        name = _fmt_q(q)
        cols.update({f"{name}_s": pooled[:, i], f"{name}_low": low[:, i], f"{name}_high": high[:, i]})
    fraction = None
    if tau is not None:
        late = (value > tau).astype(float)
        share = np.bincount(bucket, late, n_b) / np.maximum(np.bincount(bucket, minlength=n_b), 1)
        g_share = (np.bincount(group * n_b + bucket, late, groups * n_b)
                   / np.maximum(np.bincount(group * n_b + bucket, minlength=groups * n_b), 1)).reshape(groups, n_b)
        cols["timeout_fraction"] = share
        cols["timeout_fraction_low"], cols["timeout_fraction_high"] = _interval(share, g_share)
        total = late.mean()
        per_group = np.bincount(group, late, groups) / np.maximum(np.bincount(group, minlength=groups), 1)
        lo, hi = _interval(np.array(total), per_group)
        fraction = (float(total), float(lo), float(hi))
    table = pd.DataFrame(cols, index=pd.Index(np.arange(n_b) * width, name="time"))
    over = np.any(pooled > ceil.ts[None, :], axis=1)
    res = dict(table=table, peak_response={float(q): float(np.nanmax(pooled[:, i])) for i, q in enumerate(ceil.qs)},
               seconds_over_slo=float(np.count_nonzero(over) * width), timeout_fraction=fraction,
               requests=int(live.sum()), arrival_rate=lam, ramp=ramp, cold_multiplier=law.cold,
               warmup_requests=law.scale if law.by == "requests" else None,
               warmup_time=law.scale if law.by == "time" else None, servers=ceil.servers,
               discipline=ceil.discipline, slices=ceil.slices, slice_delay=ceil.slice_delay, admission=ceil.admission,
               slo={float(q): float(t) for q, t in zip(ceil.qs, ceil.ts)}, timeout=tau,
               horizon=span, bucket=width, replications=runs, seed=seed)
    return WarmupSimulation(**res, explanation=_explain(res))


def _explain(r: dict) -> str:
    peak = ", ".join(f"{_fmt_q(q)} {_fmt_time(v)}" for q, v in r["peak_response"].items())
    text = (f"{r['replications']} simulated runs of {_fmt_time(r['horizon'])} ({r['requests']:,} requests), pooled per "
            f"{_fmt_time(r['bucket'])} bucket: the percentiles peak at {peak}, and "
            + (f"some SLO percentile is over its target in {_fmt_time(r['seconds_over_slo'])} of buckets."
               if r["seconds_over_slo"] else "every SLO percentile is within its target in every bucket."))
    if r["timeout_fraction"] is not None:
        f, lo, hi = r["timeout_fraction"]
        text += (f" {100 * f:.3g} % of the requests took longer than the {_fmt_time(r['timeout'])} timeout "
                 f"(95 % interval {100 * lo:.3g}-{100 * hi:.3g} %).")
    return text
