"""Fluid processor sharing under warm-up: the piece :mod:`capacity.plan._warmup_model` adds for ``"ps"``.

Where the cold process cannot keep up, an event loop's crowd shares the cores: a request's wait
depends on its size, not only on the backlog.  :func:`_ps_fluid` marches the fluid limit of the
processor-sharing queue (Gromoll, Puha and Williams 2002) over the transient's grid.  See
:func:`capacity.plan.warmup_transient` for the model, its assumptions and its measured error.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..distributions import Service


def _survival_table(service: Service) -> tuple[np.ndarray, np.ndarray]:
    """``(x, P(S > x))`` on a grid dense in the body (linear to the 99.9th percentile) and in the tail
    (quantiles up to ``1 - 1e-12``), for :func:`numpy.interp`: one scipy call instead of one per step."""
    tail = 1.0 - np.geomspace(1e-3, 1e-12, 120)
    x = np.unique(np.concatenate([[0.0], np.linspace(0.0, float(service.ppf(0.999)), 400),
                                  np.asarray(service.ppf(tail), dtype=float)]))
    x = x[np.isfinite(x)]
    return x, np.asarray(service.sf(x), dtype=float)


@dataclass(frozen=True)
class _PSFluid:
    """The fluid processor-sharing transient on the grid ``time``: the work clock ``u`` (``t``, or ``G(t)``
    for the time law), the service ``R(u)`` a request present all along has had (``attained``), and per
    cohort (the requests admitted between two grid times) its ``R`` on arrival, size multiplier and mass."""

    law: Any      # the warm-up law, _warmup_model._Law (which imports this module)
    time: np.ndarray
    clock: np.ndarray
    attained: np.ndarray
    arrived: np.ndarray
    scale: np.ndarray
    mass: np.ndarray
    survival: tuple[np.ndarray, np.ndarray]

    def crowd(self, k: np.ndarray) -> np.ndarray:
        """The number in system at the grid times ``k`` (indices): the cohorts before each, weighted by the
        chance that their size exceeds the service they have had."""
        k = np.asarray(k, dtype=int)
        j = np.arange(self.mass.size)
        had = (self.attained[k][:, None] - self.arrived[None, :-1]) / self.scale[None, :-1]
        left = np.interp(had, *self.survival, right=0.0)
        return np.sum(np.where(j[None, :] < k[:, None], self.mass[None, :] * left, 0.0), axis=1)

    def _attained_at(self, u: np.ndarray) -> np.ndarray:
        """``R(u)``, continued past the horizon at the last rate."""
        last = (self.attained[-1] - self.attained[-2]) / (self.clock[-1] - self.clock[-2])
        return np.where(u <= self.clock[-1], np.interp(u, self.clock, self.attained),
                        self.attained[-1] + last * (u - self.clock[-1]))

    def response(self, warm_size: np.ndarray) -> np.ndarray:
        """Response time of the request arriving at each grid time with warm size ``warm_size`` (columns):
        it leaves when ``R`` has grown by its size, ``R^-1(R(u) + x s)`` (``R`` increases)."""
        target = self.attained[:, None] + self.scale[:, None] * np.asarray(warm_size, dtype=float)[None, :]
        last = (self.attained[-1] - self.attained[-2]) / (self.clock[-1] - self.clock[-2])
        leave = np.where(target <= self.attained[-1], np.interp(target, self.attained, self.clock),
                         self.clock[-1] + (target - self.attained[-1]) / max(last, 1e-300))
        if self.law.by == "time":
            leave = self.law.clock_inverse(leave)
        return leave - self.time[:, None]

    def late_share(self, service: Service, timeout: float) -> np.ndarray:
        """Share of the requests arriving at each grid time still there ``timeout`` s later: the warm size
        above ``(R(u(t + timeout)) - R(u(t))) / s``."""
        later = self.time + timeout
        u = later if self.law.by == "requests" else self.law.clock(later)
        return np.asarray(service.sf((self._attained_at(u) - self.attained) / self.scale), dtype=float)


def _step_rate(done: np.ndarray, mass: np.ndarray, scale: np.ndarray, new: tuple[float, float], du: float, c: int,
               guess: float, tables: tuple[np.ndarray, np.ndarray, np.ndarray]) -> float:
    """The rate ``r <= 1`` every request present gets over one step of ``du``: 1 if that needs no more
    than the ``c du`` the cores can do, else the ``r`` at which the work served is ``c du``.

    The cohorts present (``mass``, size multiplier ``scale``) have had ``done`` (warm sizes); the cohort
    ``new = (mass, scale)`` arrives during the step (at its middle: it gets ``r du / 2``).  A cohort uses
    ``mass s (U(done + r du / s) - U(done))`` of work with ``U(x) = E[min(S, x)]``: requests that finish
    within the step use only what they need, which an Euler step at the rate ``c / N`` of the step's
    start would lose (a crowd of a few requests melts within a step much longer than a service time).
    The work is concave and increasing in ``r``: Newton's method from the previous step's rate (after
    its first step it is below the root and climbs to it)."""
    x_tab, sf_tab, used_tab = tables
    new_mass, new_scale = new
    allowance = du / scale
    weight = mass * scale
    base = float(np.dot(weight, np.interp(done, x_tab, used_tab)))

    def served(r: float) -> tuple[float, float]:
        x = done + r * allowance
        half = 0.5 * r * du / new_scale
        work = float(np.dot(weight, np.interp(x, x_tab, used_tab))) - base \
            + new_mass * new_scale * float(np.interp(half, x_tab, used_tab))
        slope = du * (float(np.dot(mass, np.interp(x, x_tab, sf_tab, right=0.0)))
                      + 0.5 * new_mass * float(np.interp(half, x_tab, sf_tab, right=0.0)))
        return work, slope

    need = c * du
    r = min(guess, 1.0)
    for _ in range(40):
        work, slope = served(r)
        if r == 1.0 and work <= need:
            return 1.0
        step = (work - need) / max(slope, 1e-300)
        r = min(max(r - step, 0.5 * r), 1.0)
        if abs(step) <= 1e-7 * r:
            break
    return r


def _ps_fluid(law: Any, ceil: Any, t: np.ndarray, n: np.ndarray) -> _PSFluid:
    """Fluid processor sharing under the warm-up (see warmup_transient's Notes); ``law`` and ``ceil`` are
    the :class:`._warmup_model._Law` and ``_Ceilings`` of the transient.

    In the work clock ``u`` (``t`` for the requests law, ``G(t)`` for the time law) every request
    present is served at the rate ``r(u) = min(1, c / N(u))``; ``R(u) = int r`` is the service any
    request present all along has had, so a request of size ``x`` arriving at ``u_a`` leaves at
    ``R^-1(R(u_a) + x)``, and ``N(u) = int lambda(a) P(S s_a > R(u) - R(a)) da`` with ``s_a = m(n_a)``
    for the requests law (1 for the time law, whose sizes are warm in its clock) (Gromoll, Puha and
    Williams 2002).  The requests admitted between two grid times form one cohort arriving at the
    middle of the step.  The equation is causal (``N`` now needs ``R`` up to now), so it is marched step
    by step, each step's rate from the work the cores can do in it (:func:`_step_rate`, vectorised over
    the cohorts); a cohort whose attained service passes the 1 - 1e-12 quantile of its size has left
    and drops out.  Against the closed form of an overloaded M/M/1 (``N = c + (lambda - c mu) t``) the
    crowd is within ``lambda du / 10`` and the percentiles within 0.5 % (``tests/test_plan_warmup.py``).
    """
    c = ceil.servers
    clock = t if law.by == "requests" else law.clock(t)
    scale = law.multiplier(n) if law.by == "requests" else np.ones_like(t)
    mass = np.diff(n)
    x_tab, sf_tab = _survival_table(ceil.service)
    # E[min(S, x)] = int_0^x P(S > y) dy: the service a request of warm size S uses of an allowance x.
    used_tab = np.concatenate([[0.0], np.cumsum(0.5 * (sf_tab[1:] + sf_tab[:-1]) * np.diff(x_tab))])
    biggest = x_tab[-1]
    du = np.diff(clock)
    attained = np.zeros(t.size)       # R at the grid times
    arrived = np.zeros(t.size)        # R at each cohort's arrival (the middle of its step)
    first = 0                         # cohorts before this one have all left
    rate, tables = 1.0, (x_tab, sf_tab, used_tab)
    for i in range(t.size - 1):      # causal: each step needs the rate the crowd of the previous one allows
        if i:
            arrived[i - 1] = 0.5 * (attained[i - 1] + attained[i])
            done = (attained[i] - arrived[first:i]) / scale[first:i]
            while first < i and done[0] > biggest:
                first += 1
                done = done[1:]
        else:
            done = np.zeros(0)
        rate = _step_rate(done, mass[first:i], scale[first:i], (mass[i], scale[i]), du[i], c, rate, tables)
        attained[i + 1] = attained[i] + rate * du[i]
    arrived[-2] = 0.5 * (attained[-2] + attained[-1])
    return _PSFluid(law, t, clock, attained, arrived, scale, mass, (x_tab, sf_tab))
