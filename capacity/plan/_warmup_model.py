"""The warm-up model behind :mod:`capacity.plan.warmup` and :mod:`capacity.plan.deploy`.

Three pieces, each vectorised over a time grid:

* :class:`_Law` -- the cold multiplier ``m(x) = 1 + (m0 - 1) exp(-x / L)`` of a fresh process,
  ``x`` the requests it has started (JIT: hot code compiles after enough invocations) or the
  seconds since it started (connection pools and caches fill with time), with its integral and,
  for the time law, the process's work clock and its inverse;
* :class:`_Ceilings` -- the SLO ceiling and the stationary response quantiles of a process whose
  service is ``S m`` for any multiplier ``m``, read off one cached scale-free response curve
  (:func:`capacity.plan.response_curve`): ``ceiling(S m; t) = ceiling(S; t / m) / m`` because
  multiplying every service time by ``m`` only changes the time unit;
* :func:`_transient` -- the pointwise-stationary approximation of the response quantiles, with
  the fluid backlog on top where the cold process cannot keep up (FCFS; processor sharing's fluid
  in :mod:`._warmup_ps`, round robin's in :mod:`._warmup_rr`).

See :func:`capacity.plan.warmup_transient` for the model, its assumptions and references.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import PchipInterpolator
from scipy.stats import norm

from .._checks import as_float_array, check_positive
from ..distributions import Service
from ..rr import _fifo_correction
from ._solve import _parse_slo
from .ceiling import ceiling_from_curve
from ._warmup_ps import _ps_fluid
from ._warmup_rr import ceiling_by_bisection, idle_quantiles, rr_fluid
from .curves import ResponseCurve, response_curve

#: How a cold process warms: with the requests it has served, or with time.
WARMUP_BY = ("requests", "time")

#: The multiplier counts as warm within this share of its cold excess (``m - 1 <= 1 % (m0 - 1)``).
_WARM_SHARE = 0.01

#: Points of the internal time grid of a transient (the fluid and the quantiles are exact at them).
_GRID = 4001


@dataclass(frozen=True)
class _Law:
    """The warm-up law ``m(x) = 1 + (cold - 1) exp(-x / scale)``; ``by`` says what ``x`` counts."""

    cold: float
    scale: float
    by: str

    def multiplier(self, x: np.ndarray) -> np.ndarray:
        return 1.0 + (self.cold - 1.0) * np.exp(-np.asarray(x, dtype=float) / self.scale)

    def integral(self, x: np.ndarray) -> np.ndarray:
        """``int_0^x m = x + (m0 - 1) L (1 - exp(-x / L))``: the warm-equivalent cost of the first ``x``."""
        x = np.asarray(x, dtype=float)
        return x - (self.cold - 1.0) * self.scale * np.expm1(-x / self.scale)

    def progress_to(self, m: np.ndarray) -> np.ndarray:
        """The progress at which the multiplier has fallen to ``m`` (0 at or above cold, inf at 1)."""
        m = np.asarray(m, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            x = self.scale * np.log((self.cold - 1.0) / (m - 1.0))
        return np.where(m >= self.cold, 0.0, np.where(m <= 1.0, np.inf, x))

    def warm_progress(self) -> float:
        """Progress until ``m - 1 <= 1 %`` of the cold excess: ``L ln 100``."""
        return 0.0 if self.cold == 1.0 else self.scale * math.log(1.0 / _WARM_SHARE)

    # The time law as a slower clock: the process does ``dt / m(t)`` seconds of warm work in ``dt``.
    def clock(self, t: np.ndarray) -> np.ndarray:
        """``G(t) = int_0^t ds / m(s) = t + L ln((1 + b e^{-t/L}) / (1 + b))``, ``b = m0 - 1``."""
        t = np.asarray(t, dtype=float)
        b = self.cold - 1.0
        return t + self.scale * (np.log1p(b * np.exp(-t / self.scale)) - math.log1p(b))

    def clock_inverse(self, v: np.ndarray) -> np.ndarray:
        """``G^-1(v)`` by Newton's method from ``t = v`` (``G`` is convex and ``G(t) <= t``, so the
        first step lands above the root and the iterates then decrease to it)."""
        v = np.asarray(v, dtype=float)
        t = v.copy()
        for _ in range(60):
            step = (self.clock(t) - v) * self.multiplier(t)
            t = t - step
            if np.all(np.abs(step) <= 1e-13 * np.maximum(t, 1.0)):
                break
        return t


def _law(cold_multiplier: float, warmup_requests: float | None, warmup_time: float | None) -> _Law:
    """The validated law: ``cold_multiplier >= 1`` and exactly one of the two scales."""
    m0 = as_float_array(cold_multiplier, "cold_multiplier")
    if m0.ndim or not (math.isfinite(float(m0)) and float(m0) >= 1.0):
        raise ValueError(f"cold_multiplier must be a number >= 1 (a fresh process's service time over its warm "
                         f"one), got {cold_multiplier!r}")
    if (warmup_requests is None) == (warmup_time is None):
        raise ValueError("give exactly one of warmup_requests (the process warms with the requests it serves: JIT) "
                         f"and warmup_time (it warms with time: pools, caches), got warmup_requests="
                         f"{warmup_requests!r}, warmup_time={warmup_time!r}")
    name, value = ("warmup_requests", warmup_requests) if warmup_time is None else ("warmup_time", warmup_time)
    scale = check_positive(value, name)
    if scale.ndim:
        raise ValueError(f"{name} must be a single number, got {value!r}")
    # A cold excess within 1e-9 of 1 is no warm-up: the grids of multipliers 1 + f (m0 - 1), f down to
    # 1e-9 (_ceiling_grid), round to exactly 1 there (m0 = 1 + 2.2e-16 took log(0) in a deploy plan).
    cold = 1.0 if float(m0) - 1.0 <= 1e-9 else float(m0)
    return _Law(cold, float(scale), "requests" if warmup_time is None else "time")


def _check_ramp(ramp: float) -> float:
    r = as_float_array(ramp, "ramp")
    if r.ndim or not (math.isfinite(float(r)) and float(r) >= 0):
        raise ValueError(f"ramp must be a non-negative number of seconds (0: no ramp), got {ramp!r}")
    return float(r)


def _admitted(t: np.ndarray, ramp: float) -> np.ndarray:
    """The share of its full traffic the balancer admits ``t`` s after the process is up: ``min(1, t / R)``."""
    t = np.asarray(t, dtype=float)
    if ramp == 0:
        return np.ones_like(t)
    with np.errstate(over="ignore"):      # a ramp of 1e-311 s: t / R is inf, admitted in full
        return np.clip(t / ramp, 0.0, 1.0)


def _admitted_integral(t: np.ndarray, ramp: float) -> np.ndarray:
    """``int_0^t min(1, s / R) ds``: ``t^2 / (2R)`` during the ramp, ``t - R/2`` after."""
    t = np.asarray(t, dtype=float)
    if ramp == 0:
        return t
    with np.errstate(over="ignore"):      # the branch not taken overflows for a ramp of 1e-311 s
        return np.where(t <= ramp, t * t / (2.0 * ramp), t - 0.5 * ramp)


class _Ceilings:
    """SLO ceilings and stationary response quantiles of one process whose service is ``S m``.

    Round robin (``discipline="rr"``, ``rr = (slices, slice_delay, admission)``): ``slices = 1`` is
    FCFS exactly.  With ``admission="fifo"`` the ``(k - 1) d`` of slice delays is a constant after
    the queue (``offset``), so the scale-free table of zero-delay rr serves every multiplier:
    ``T_q(S m) = m E[S] unit_q(rho) + (k - 1) d``.  With ``"idle"`` the delay decides who waits and
    enters as ``d / (m E[S])``, which changes with ``m``: the quantiles are rr's idle formula applied
    to the FCFS and zero-delay rr tables at that ratio (:func:`._warmup_rr.idle_quantiles`), and the
    ceiling is found by bisection in load (:func:`._warmup_rr.ceiling_by_bisection`)."""

    def __init__(self, service: Service, servers: int, slo: Mapping[float, float], discipline: str,
                 rr: tuple[int, float, str] = (1, 0.0, "fifo")):
        self.qs, self.ts = _parse_slo(slo)
        self.service, self.servers, self.discipline = service, servers, discipline
        self.slices, self.slice_delay, self.admission = rr
        k, d = self.slices, self.slice_delay
        # The queue that decides the percentiles: rr with one slice is FCFS, with its own run queue.
        self.kind = "fcfs" if discipline == "rr" and k == 1 else (
            "rr_idle" if discipline == "rr" and self.admission == "idle" else discipline)
        self.gaps = (k - 1) * d if self.kind.startswith("rr") else 0.0   # a request's own sleeps
        self.offset = self.gaps if self.kind == "rr" else 0.0            # a constant after the queue
        self.mean = float(service.mean)
        qs = tuple(self.qs.tolist())
        if self.kind == "rr":
            self.curve = response_curve(service, servers, "rr", quantiles=qs, slices=k)
        else:
            self.curve = response_curve(service, servers, "fcfs" if self.kind == "rr_idle" else self.kind,
                                        quantiles=qs)
        self.service_quantiles = np.atleast_1d(np.asarray(service.ppf(self.qs), dtype=float))
        self.second_moment = float(service.moment(2))
        self.z = norm.isf((1.0 - self.qs) / 2.0)
        self._reader = _UnitReader(self.curve)
        if self.kind == "rr_idle":
            self._rr_reader = _UnitReader(response_curve(service, servers, "rr", quantiles=qs, slices=k))
        # The largest multiplier at which zero load still meets every percentile.
        self.fit_multiplier = (self._idle_fit_multiplier() if self.kind == "rr_idle"
                               else float(np.min((self.ts - self.offset) / self.curve.zero_load)))

    def _idle_fit_multiplier(self) -> float:
        """``admission="idle"``: the zero-load percentiles are not proportional to ``m`` (the slice delay
        enters as ``d / (m E[S])``), so the largest ``m`` that meets them is found by bisection in
        ``ln m`` over ``[1e-6, 1e6]`` (they increase with ``m``)."""
        lo, hi = math.log(1e-6), math.log(1e6)
        zero = np.zeros(1)
        if not np.all(self.quantiles(zero, np.exp([lo]))[0] <= self.ts):
            return 0.0
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if np.all(self.quantiles(zero, np.exp([mid]))[0] <= self.ts) else (lo, mid)
        return math.exp(lo)

    def qps(self, m: np.ndarray) -> np.ndarray:
        """Per-process SLO ceiling (requests/s) with service ``S m``: ``ceiling(S; (t - offset) / m) / m``."""
        m = np.asarray(m, dtype=float)
        if self.kind == "rr_idle":
            return ceiling_by_bisection(self.quantiles, self.ts, m, self.servers / self.mean)
        left = self.ts - self.offset
        if np.any(left <= 0):
            return np.zeros(m.shape)   # the slice delays alone pass a target: no load meets the SLO
        rates = ceiling_from_curve(self.curve, {q: t / m for q, t in zip(self.qs, left)}).qps
        return np.asarray(rates, dtype=float) / m

    def quantiles(self, rho: np.ndarray, m: np.ndarray) -> np.ndarray:
        """Stationary response quantiles, shape ``rho.shape + (len(qs),)``, seconds (inf at rho >= 1).

        ``E[S] m unit_q(rho) + offset``, the cached unit table interpolated by a monotone cubic in
        ``(-ln(1 - rho), ln unit_q)`` and its last segment continued beyond the grid (rho > 0.995);
        for rr with ``admission="idle"`` rr's idle formula on the FCFS and rr tables."""
        rho = np.asarray(rho, dtype=float)
        m = np.asarray(m, dtype=float)
        if self.kind == "rr_idle":
            # rr's idle formula starts from the zero-delay FIFO formula before its measured
            # correction (capacity.rr._quantile), so the corrected curve is divided back.
            formula = self._rr_reader(rho) / _fifo_correction(self.qs, rho[..., None], float(self.slices),
                                                                self.service, self.servers)
            unit = idle_quantiles(self.qs, self._reader(rho), formula,
                                  self.service_quantiles / self.mean, rho, self.slices,
                                  self.slice_delay / (self.mean * m), self.service, self.servers)
        else:
            unit = self._reader(rho)
        return unit * (self.mean * m)[..., None] + self.offset


class _UnitReader:
    """The unit quantiles ``unit_q(rho)`` of a response curve at any load, shape ``rho.shape + (len(qs),)``
    (inf at rho >= 1): a monotone cubic through the table in ``(-ln(1 - rho), ln unit_q)`` -- quantiles are
    nearly linear there: the bare service at low load, ``~ 1 / (1 - rho)`` in heavy traffic -- as
    :func:`capacity.plan.ceiling_from_curve` inverts it, and its last segment continued beyond the grid."""

    def __init__(self, curve: ResponseCurve):
        u = np.concatenate([[0.0], curve.utilization])
        self._x = -np.log1p(-u)
        self._y = np.log(np.concatenate([curve.unit_zero[:, None], curve.unit], axis=1))
        self._interp = [PchipInterpolator(self._x, y, extrapolate=False) for y in self._y]

    def __call__(self, rho: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            x = -np.log1p(-np.minimum(rho, 1.0))
        out = np.empty(rho.shape + (len(self._interp),))
        last = self._x[-1]
        for i, interp in enumerate(self._interp):   # one per SLO percentile (one to three)
            y = self._y[i]
            slope = (y[-1] - y[-2]) / (last - self._x[-2])
            inside = np.minimum(x, last)
            val = np.where(x > last, y[-1] + slope * (x - last), interp(np.where(np.isfinite(inside), inside, 0.0)))
            out[..., i] = np.where(rho < 1.0, np.exp(val), np.inf)
        return out


def _fluid_start(t: np.ndarray, n: np.ndarray, law: _Law, mean: float, servers: int) -> np.ndarray:
    """When the request arriving at ``t_k`` (the ``n_k``-th admitted) starts, in the fluid model.

    FCFS fluid: ``s_k = max(t_k, s_{k-1} + cost of request k-1 / c)``, i.e. ``s = C + running max(t - C)``
    with ``C`` the cumulative cost of the requests before.  The requests law prices request ``n`` at
    ``E[S] m(n)``; the time law runs a clock ``G`` at speed ``1 / m(t)``, in which every request costs
    ``E[S]``, so the recursion runs in ``G`` and the start is mapped back by ``G^-1``.
    """
    if law.by == "requests":
        cost = mean / servers * law.integral(n)
        return cost + np.maximum.accumulate(t - cost)
    work = mean / servers * n
    virtual = work + np.maximum.accumulate(law.clock(t) - work)
    return law.clock_inverse(virtual)


def _transient(law: _Law, ceil: _Ceilings, arrival_rate: float, ramp: float, horizon: float) -> dict:
    """The transient on a grid of ``_GRID`` times in ``[0, horizon]`` (see warmup_transient's Notes)."""
    c, mean, lam = ceil.servers, ceil.mean, arrival_rate
    t = np.linspace(0.0, horizon, _GRID)
    admitted = _admitted(t, ramp)
    n = lam * _admitted_integral(t, ramp)
    start = _fluid_start(t, n, law, mean, c)
    delay = start - t
    delay = np.where(delay > 1e-9 * (1.0 + t), delay, 0.0)   # rounding of the running max is no backlog
    # The multiplier now: of the requests starting now (requests law), of the clock (time law).
    now = law.multiplier(np.interp(t, start, n) if law.by == "requests" else t)
    rho = lam * admitted * mean * now / c
    # The random part of the queue takes time to build: in the t seconds since the process took traffic the
    # queued work rises above its fluid level by no more than a Brownian motion of variance rate
    # lambda E[(S m)^2] / c^2 reaches, whose (1 - p)-quantile of the running maximum is sigma sqrt(t) z_{p/2}
    # (reflection principle).  The stationary percentile (inf at rho >= 1) never exceeds that.
    sigma = np.sqrt(lam * admitted * ceil.second_moment) * now / c
    cap = now[:, None] * ceil.service_quantiles[None, :] + (sigma * np.sqrt(t))[:, None] * ceil.z[None, :]
    psa = np.minimum(ceil.quantiles(rho, now), cap + ceil.gaps)   # rr: a request's own slice delays
    fluid = None
    if ceil.kind == "fcfs":
        resp = delay[:, None] + psa
    elif ceil.kind == "ps":
        fluid = _ps_fluid(law, ceil, t, n)
        resp = np.maximum(fluid.response(ceil.service_quantiles), psa)
    else:
        clock = t if law.by == "requests" else law.clock(t)
        work = mean * np.diff(law.integral(n) if law.by == "requests" else n)
        inverse = (lambda v: v) if law.by == "requests" else law.clock_inverse
        fluid = rr_fluid(t, clock, inverse, work, delay > 0, c, ceil.slices, ceil.gaps, ceil.admission)
        resp = fluid.response_time[:, None] + psa
    return dict(time=t, admitted=admitted, admitted_rate=lam * admitted, requests=n, multiplier=now,
                utilization=rho, delay=delay, response=resp, ceiling=ceil.qps(now), fluid=fluid)


def _default_horizon(law: _Law, ceil: _Ceilings, arrival_rate: float, ramp: float) -> float:
    """Long enough to see the process warm and any backlog drain: ``1.5 x`` the later of the ramp's end and
    the warm-up at full load, and at least 100 service times; doubled (up to 6 times) while the fluid
    backlog has not drained at the end."""
    warm = law.warm_progress()
    if law.by == "requests":
        # Seconds to admit that many requests: invert t - R/2 (after the ramp) or t^2 / 2R (during it).
        y = warm / arrival_rate
        warm = math.sqrt(2.0 * ramp * y) if y <= ramp / 2 else y + ramp / 2
    horizon = max(1.5 * max(ramp, warm), 100.0 * ceil.mean * law.cold, 1.0)
    if arrival_rate * ceil.mean >= ceil.servers:
        return horizon   # overloaded even when warm: the backlog never drains, a longer horizon shows nothing new
    for _ in range(6):
        t = np.linspace(0.0, horizon, _GRID)
        start = _fluid_start(t, arrival_rate * _admitted_integral(t, ramp), law, ceil.mean, ceil.servers)
        if start[-1] <= horizon * (1 + 1e-12):
            break
        horizon *= 2.0
    return horizon


def _ceiling_grid(ceil: _Ceilings, top: float) -> tuple[np.ndarray, np.ndarray]:
    """Multipliers from ``top`` down to ``1 + 1e-9 (top - 1)`` (20 001, geometric in ``m - 1``) and the
    process's SLO ceiling at each: one vectorised read of the response curve serves every ramp below."""
    m = 1.0 + (top - 1.0) * np.geomspace(1.0, 1e-9, 20001)
    return m, ceil.qps(m)


def _shortest_ramp(law: _Law, lam: float, start: float, grid: tuple[np.ndarray, np.ndarray]) -> float:
    """The shortest ramp from multiplier ``start`` with ``lambda a(t) <= C(m(t))`` at every ``t``.

    On the grid of multipliers ``m`` between ``start`` and 1 (the progress ``x`` of the law from
    ``start``): the time law reaches ``m`` at ``t = x`` whatever the ramp, so ``R >= lambda x / C(m)``;
    the requests law has served ``x = r^2 R / (2 lambda)`` requests when the ramp reaches the rate
    ``r``, so ``R >= 2 lambda x / C(m)^2``.  The answer is the largest bound where ``C(m) < lambda``;
    the binding range ends where ``C = lambda`` (bound ``x``, or ``2 x / lambda``), located between two
    grid points by linear interpolation -- the grid alone would miss it by a step."""
    m_all, cap_all = grid
    keep = m_all <= start * (1 + 1e-12)
    m, cap = m_all[keep], cap_all[keep]
    if start > 1.0 and (m.size == 0 or m[0] < start):
        return math.inf  # pragma: no cover - start always lies on or below the grid's top
    x = law.scale * np.log((start - 1.0) / (m - 1.0)) if start > 1.0 else np.zeros_like(m)
    short = cap < lam
    if not short.any():
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = lam * x / cap if law.by == "time" else 2.0 * lam * x / cap ** 2
    best = float(np.max(np.where(short & (x > 0), bound, 0.0)))
    enough = np.flatnonzero(~short)
    if enough.size:
        k = int(enough[0])
        if k > 0:
            x_c = x[k - 1] + (lam - cap[k - 1]) * (x[k] - x[k - 1]) / (cap[k] - cap[k - 1])
            best = max(best, float(x_c if law.by == "time" else 2.0 * x_c / lam))
    return best


def _prewarm_seconds(law: _Law, ceil: _Ceilings, start: np.ndarray) -> np.ndarray:
    """Seconds of pre-warming down to ``start``: waiting (time law), or warm-up requests served back to
    back on the process's cores (requests law: ``E[S] / c int_0^x m``)."""
    x = law.progress_to(start)
    return x if law.by == "time" else ceil.mean / ceil.servers * law.integral(x)


def _start_and_ramp(law: _Law, ceil: _Ceilings, lam: float) -> tuple[float, float]:
    """The multiplier at which to start taking traffic and the shortest ramp from there.

    ``cold_multiplier`` when the cold service meets the SLO at zero load.  Otherwise the process must
    be pre-warmed below ``fit_multiplier`` first: among 48 candidates there, the one that gets the
    process to its full share soonest (pre-warming time plus ramp).  For the requests law exactly at
    ``fit_multiplier`` the ramp would be infinite (the needed requests grow like the rate, the ramp's
    like its square), so the choice matters."""
    if law.cold <= ceil.fit_multiplier:
        return law.cold, _shortest_ramp(law, lam, law.cold, _ceiling_grid(ceil, law.cold))
    top = ceil.fit_multiplier
    grid = _ceiling_grid(ceil, top)
    cands = 1.0 + (top - 1.0) * np.geomspace(1.0, 1e-3, 48)
    ramps = np.array([_shortest_ramp(law, lam, m, grid) for m in cands])
    total = _prewarm_seconds(law, ceil, cands) + ramps
    best = int(np.argmin(total))
    return float(cands[best]), float(ramps[best])
