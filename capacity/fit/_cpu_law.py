"""The two readings of the utilisation law that hold a fit's CPU per request, and which its
prediction intervals span.

A fit given the CPU utilisation of its windows holds the service-time mean by the utilisation law
through the origin, ``E[S] = sum(busy cores) / sum(rate)``: every CPU second the process spent is
charged to its requests.  A process's CPU counter (``process_cpu_seconds_total``) counts more than
the requests -- timers, the metrics endpoint's scrapes, GC of its own heap, the per-turn cost of an
event loop -- and over a day of windows the counter against the request rate is then a line with an
intercept, ``busy = background + E[S] x rate`` (the law of :func:`capacity.fit.from_utilization`).
Read that way, the requests are served on cores slowed by the background's share, with mean
``E[S] / (1 - background / c)`` on ``c`` cores (the background preempts in slices shorter than a
request, as timers and scrapes do), and the CPU reaches 100 % where the line does.

A day cannot tell which reading holds at a peak it has not seen: whether the background stays or
is paid by idle turns of the loop that a busy process no longer takes.  Measured on the saved
real-server days (``validation/runs``: Koa, the counter scraped every 5 s, 23 windows of 30 s at
10-55 % CPU, peaks at 70 % and 80 %), the await-sliced and mixed handlers show 1.2-2.4 % of a core
of background and the blocking one 0-0.6 %.  Against the CPU per request that 28 peak points
measured, the line predicted it with an RMS error of 1.3 % (mean -0.3 %), the ratio 2.2 % (mean
+1.7 %, high at 22 of 28); a 2 % higher mean at 78 % CPU raises a round-robin p99 by 11 %.  On
days measured after that comparison the ratio was 0.5-6.5 % above the peaks' CPU (seeds 8 and 9,
four handlers) and the line within 2 % (seed 9); fitted holding the line, their means were within
10 % at 15 of 16 points where the ratio's met 9 (validation/README.md).  So the fit holds the line
(:data:`HOLD`), and its prediction intervals are the union of those of both readings: the same
parameter draws are evaluated again with the ratio's mean
(:meth:`capacity.fit.PercentileFit.predict`).

:func:`cpu_readings` takes the line (Huber, as ``from_utilization``) only where the windows show
its intercept: positive at the one-sided 2.5 % level (Student's t on the least-squares standard
error from the residuals about the robust line), with the rates spread (coefficient of variation
at least 0.1, the identifiability limit of ``from_utilization``), at least :data:`MIN_WINDOWS`
windows and one core count.  A negative intercept (a cost that rises with the load) is not read:
it is left to the fit's miss of its own data.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import stats

from ._solve import robust_line

__all__ = ["CpuReadings", "MIN_WINDOWS", "cpu_readings", "held_mean", "hold_readings"]

#: Fewest windows whose line is fitted with an intercept.
MIN_WINDOWS = 5
#: Which reading a fit holds where the windows show a background: ``"line"`` (``with_background``;
#: the ratio is the alternative its intervals span) or ``"ratio"``.  A switch for the validation
#: harness (``validation/run.py --user-path --repredict DIR --hold-cpu ratio``,
#: ``tools/rescore_user_path.py``), which measured both on the saved real-server days
#: (validation/README.md): not a user option.
HOLD = "line"
#: Least coefficient of variation of the rates that separates an intercept from the slope.
_MIN_RATE_CV = 0.1
#: One-sided level of the test that the intercept is above zero.
_LEVEL = 0.975


class CpuReadings(NamedTuple):
    """The service-time mean by each reading of the utilisation law.

    ``mean``: ``sum(busy) / sum(rate)``, what the fit holds; ``with_background``: the mean of the
    requests on cores slowed by the ``background`` busy cores at zero rate (equal to ``mean``, and
    ``background`` 0, where the windows show none)."""

    mean: float
    with_background: float
    background: float


def cpu_readings(lam: np.ndarray, util: np.ndarray, servers: np.ndarray) -> CpuReadings:
    """Both readings from the windows' arrival rates ``lam`` (req/s) and CPU busy fractions
    ``util`` of ``servers`` cores (arrays of one length, every value known).

    Examples
    --------
    A background of 2 % of a core under requests of 10 ms, without noise:

    >>> import numpy as np
    >>> lam = np.linspace(5.0, 50.0, 20)
    >>> r = cpu_readings(lam, 0.02 + 0.010 * lam, np.ones(20))
    >>> round(1e3 * r.with_background, 3), round(r.background, 3)
    (10.204, 0.02)
    """
    lam, util, servers = (np.asarray(v, dtype=float) for v in (lam, util, servers))
    busy = util * servers
    ratio = float(np.sum(busy) / np.sum(lam))
    none = CpuReadings(ratio, ratio, 0.0)
    if lam.size < MIN_WINDOWS or np.unique(servers).size > 1:
        return none
    mean_rate = float(np.mean(lam))
    spread = float(np.sum((lam - mean_rate) ** 2))
    if float(np.std(lam)) < _MIN_RATE_CV * mean_rate or spread <= 0:
        return none
    slope, background, _ = (float(v) for v in robust_line(lam, busy, None, "huber"))
    cores = float(servers[0])
    # The least-squares standard error of the intercept from the residuals about Huber's line, with
    # Student's t: the robust (MAD) scale with the normal 1.96 read a background on 4.8 % of 2000
    # noise-only days of 23 windows (10 % at 8 windows); this on 2.6 % (2.7 % at 8).
    dof = lam.size - 2
    sd = math.sqrt(float(np.sum((busy - background - slope * lam) ** 2)) / dof)
    se = sd * math.sqrt(1.0 / lam.size + mean_rate ** 2 / spread)
    if not (slope > 0 and float(stats.t.ppf(_LEVEL, dof)) * se < background < cores):
        return none
    return CpuReadings(ratio, slope / (1.0 - background / cores), background)


def held_mean(readings: CpuReadings) -> float:
    """The service-time mean a fit holds: the ratio, or the line's where :data:`HOLD` says so and
    the windows show a background."""
    return readings.with_background if HOLD == "line" else readings.mean


def hold_readings(fit, readings: CpuReadings) -> None:
    """Record on a fit that holds :func:`held_mean` the other reading, where the windows show a
    background: its prediction intervals then span both (``_mean_alternative``, the ratio of the
    two means) and its summary has a ``background`` row that says so."""
    if not readings.background > 0:
        return
    from ..units import format_time

    other = readings.mean if HOLD == "line" else readings.with_background
    fit._mean_alternative = other / held_mean(readings)
    fit._add_parameter("background", readings.background, unit="cores",
                       note=f"busy cores at zero QPS (the CPU's line against the rate); on cores slowed by "
                            f"it a request takes {format_time(readings.with_background)} of CPU, and the "
                            "prediction intervals span both readings")
