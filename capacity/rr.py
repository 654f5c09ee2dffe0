"""Event-loop round robin: each request's CPU in ``slices`` equal slices through a run queue.

How a Node.js process schedules a handler that ``await``\\ s: the CPU work
between two awaits (a *slice*) runs to completion, then the request goes to
the back of the run queue (after ``slice_delay`` seconds of non-CPU wait: a
zero-delay timer, an I/O round trip), and the next request in the queue
runs.  A request of CPU size ``S`` is ``k = slices`` slices of ``S / k``
seconds.  Arrivals are Poisson (``arrival_rate``, requests/s); ``servers``
cores serve the one run queue.  The exact model is
:func:`capacity.sim.simulate` with ``discipline="rr"``; this module gives
fast formulas.

What is exact
-------------
* ``slices=1`` is FCFS: every function here returns exactly the
  :mod:`capacity.fcfs` value (M/G/c, Pollaczek-Khinchine and its transform).
* Deterministic service (every request the same ``D``) is the classical
  round robin with a fixed quantum ``Q = D / k`` in which every request
  needs exactly ``k`` quanta; as ``k -> inf`` it tends to processor sharing
  (Kleinrock 1976, sec. 4.4; Kleinrock 1967), which the formulas below
  reproduce exactly in that limit.
* Equal slices are *not* the classical fixed-quantum round robin when sizes
  vary: the quantum ``S / k`` is proportional to the request's size, so in
  each cycle of the run queue a request gets CPU in proportion to its size.
  For large ``k`` this tends to a discriminatory processor sharing with
  weights equal to the sizes (every request needs the same ``k`` cycles),
  not to egalitarian PS; its mean response is *larger* than both FCFS and
  PS (exponential service, utilisation 0.8: about 8.5 s at ``k = 50`` in
  simulation, against 5 s for both).  Kleinrock's closed forms (geometric number of
  quanta of a fixed length) do not cover this, and we know of no closed form
  for ``1 < k < inf``; the values in between are therefore an
  approximation calibrated against the exact simulator.

The approximation
-----------------
Quantile by quantile (and for the mean) the response time is interpolated
between FCFS (``k = 1``) and a large-``k`` limit ``L``::

    T_k = T_FCFS + g(k) (L - T_FCFS),      g(k) = 1 - k^(-beta)
    L   = T_PS + gamma * scv * max(T_PS - E[S], 0) * (1 + delta * rho)

where ``T_PS`` is the PS value (:mod:`capacity.ps`) of the same statistic
and ``scv`` the squared coefficient of variation of the service time.  For
deterministic service the limit is exactly PS.  ``(beta, gamma, delta)``
are fitted by least squares of the relative errors (``delta`` held in
[-0.9, 3], so that ``1 + delta rho > 0``) to exact simulations: the ``fifo``
grid of ``tools/calibrate_rr.py`` (one core, ``E[S] = 1``; rho 0.3/0.5/0.7/
0.8/0.9 x scv 0/0.5/1/2 x k 2/5/10/50; 4e5 requests per point up to rho
0.5, times ``(0.5 / (1 - rho))^2`` above: 1e7 at rho 0.9), shipped with its
seeds in ``capacity/tables/rr_calibration.csv`` (see "Reproducing the
constants" below):

========  ======  ======  ======
stat      beta    gamma   delta
========  ======  ======  ======
mean      0.6984  0.4874  1.0075
p90       0.6241  0.2266  3.0
p99       0.6010  0.1200  0.7631
p99.9     0.4626  0.0466  -0.9
========  ======  ======  ======

Between p90 and p99.9 the parameters are interpolated linearly in
``log10(1 - q)``; outside they are held at the end values.  A quantile
is a comonotone mixture of the FCFS and limit quantiles, so the mean and the
quantiles come from one distribution only approximately (the mean has its
own parameters).

Measured error (model / simulation - 1, percent, on that grid; the largest
in size over the 4 scv of each (rho, k), scv in {0, 0.5, 1, 2}:
deterministic, Erlang-2, exponential, H2).  In brackets, the constants of
the previous release (mean 0.6908 0.4887 1.0218, p90 0.6167 0.2308 3.0, p99
0.5959 0.1180 0.8652, p99.9 0.4458 0.0604 -0.9), fitted to simulations
whose seeds were not kept, on the same grid::

    rho     k            mean           p90           p99         p99.9
    0.3     2     -0.9 (-1.0)   +2.8 (+2.9)   +1.6 (+1.6)   -4.5 (-4.2)
    0.3     5     -1.1 (-1.1)   +4.0 (+4.2)   +1.8 (+1.7)   -4.3 (-4.8)
    0.3    10     -1.9 (-1.8)   +5.4 (+5.7)   +2.8 (+2.7)   -3.4 (-2.9)
    0.3    50     -0.6 (-0.7)   +7.1 (+7.5)   +2.8 (+2.8)   +4.6 (+4.6)
    0.5     2     +0.8 (+0.8)   +2.0 (+2.1)   +2.0 (+2.0)   -4.0 (-3.9)
    0.5     5     +1.8 (+1.9)   +2.6 (+2.8)   -2.1 (-2.2)   -7.5 (-7.7)
    0.5    10     -1.8 (-1.9)   +2.5 (+2.8)   -3.5 (-3.6)   -5.7 (-6.2)
    0.5    50     +2.4 (+2.7)   +5.7 (+6.2)   -3.8 (-3.8)   -5.6 (+6.5)
    0.7     2     +1.7 (+1.7)   +2.6 (+2.7)   +3.9 (+3.8)   -7.3 (-7.5)
    0.7     5     -1.4 (-1.5)   -4.3 (-3.8)   -4.0 (-3.6) -10.0 (-10.1)
    0.7    10     -1.6 (-1.7)   -6.3 (-5.7)   -5.9 (-5.4)   -8.5 (-8.5)
    0.7    50     +1.6 (+2.0)   -3.9 (+3.4)   -1.9 (-2.0)   -6.2 (-6.6)
    0.8     2     +4.0 (+4.1)   +3.1 (+3.3)   +2.4 (+2.4)   -6.5 (-7.0)
    0.8     5     +0.7 (+0.9)   -3.8 (-3.2)   +2.6 (+2.6)   -7.5 (-7.8)
    0.8    10     -1.8 (-1.7)   -5.8 (-5.1)   -3.8 (-4.0)   -8.2 (-8.8)
    0.8    50     -1.9 (-1.6)   -4.9 (-4.0)   -2.9 (-3.0)   +6.8 (+6.3)
    0.9     2     +2.8 (+2.6)   +3.3 (+3.5)   +1.7 (+1.7)   +2.3 (-2.1)
    0.9     5     -0.8 (-0.6)   -5.2 (-4.6)   -3.8 (-4.0)   -8.2 (-9.0)
    0.9    10     -1.7 (-1.9)   -5.5 (-4.8)   -4.5 (-4.6) -11.2 (-11.9)
    0.9    50     -1.4 (-1.3)   +4.8 (+5.5)   +6.6 (+7.1) +18.0 (+17.4)
    max |error|: mean 4.0 (4.1), p90 7.1 (7.5), p99 6.6 (7.1), p99.9 18.0 (17.4) %
    rms error:   mean 1.2 (1.2), p90 2.7 (2.8), p99 2.3 (2.3), p99.9 5.2 (5.2) %

The simulations' own 99 % half-widths reach 3.4 % for the mean, 6.6 % for
p99 and 12.7 % for p99.9, so the largest errors are partly noise.  (The
previous release documented mean 2.5 %, p90 7.3 %, p99 5.2 %, p99.9 18 %
for its constants on its own simulations, with 4e5 requests at every load;
on this grid they reach the bracketed figures.)  Below p90 the formula
alone is poor (up to 53 % off at the median at scv 2; see the next
section, which corrects it on one core).  Several cores: the same
interpolation with the M/G/c FCFS and M/G/c-PS values (not calibrated for
c > 1).

The measured body (FIFO, one core)
----------------------------------
The formula's weights hold the p90 values below p90, where the exact
model is slower: against fresh simulations the formula's p10-p75 is 10-40 %
low at scv 1-2 and 30-70 % CPU, up to 73 % at scv 3 and 85 % CPU, and its
tail is off by up to 35 % for laws it was not calibrated on (lognormal,
gamma of scv 3).  So on one core with ``admission="fifo"`` every
quantile is the formula's times a measured correction
(:mod:`capacity._rr_body`): the ratio of exact simulations to the formula
on a grid (``tools/build_rr_body_table.py``, 546 seeded simulations of
1e6-5e6 requests: utilisation 0.15-0.9 x slices 2-50 x deterministic,
gamma and lognormal of scv 0.25-4 and H2 of scv 2-4, quantiles p1-p99.9,
shipped as ``capacity/tables/rr_fifo_quantiles.csv``), interpolated in
``(scv, 1/k, rho, logit q)`` and exact at zero load and at ``k = 1``.  At
12 off-grid points with fresh seeds (``--held-out``: scv 0.35-3, slices
2-30, utilisation 0.25-0.85, all between the grid's nodes) the corrected
quantiles are within 8.9 % of the simulation at p1-p80 (rms 1.9 %; the
formula alone: 73.5 %, rms 29.8 %) and within 7.2 % at p90-p99.9 (rms
1.8 %; formula 35.2 %, rms 9.2 %); the largest errors are at scv 3 and
utilisation 0.85, between the table's nodes, where the simulations' own
half-widths reach 2-9 % (and at p99.9 of a lognormal of scv 2, whose
simulated half-width there is 34 %).  In utilisation the ratio is a
monotone cubic through the nodes (no kinks, so curves against the load
stay smooth).  The mean keeps its own formula above (within
4 %).  Not corrected: several cores and laws of other families
(phase-type, empirical), which keep the formula.  ``admission="idle"``
has a table of its own (below).

The slice delay
---------------
A request sleeps ``k - 1`` times, so its response gains ``(k - 1) d``.
While it sleeps it is not in the run queue, which shortens the others'
queueing; the model ignores that relief, so it over-predicts.  Measured
(deterministic service, CPU part = response - (k-1) d, against d = 0)::

    rho   k   d/E[S]:   0.02     0.1     0.3     1.0
    0.5   5            -0.2%   -3.6%   -14%    -28%
    0.8   5            -0.1%   -2.0%   -7.9%   -20%
    0.5   2             0.0%   -0.3%   -2.6%   -10%
    0.8   2             0.0%   -0.1%   -1.4%   -6.3%

(the model error is minus these numbers on the CPU part).  For Node.js
zero-delay timers (d ~ 1 ms against slices of several ms) this is a few
percent; with long I/O waits between slices use the simulator.

Admission: when a new request joins the run queue
-------------------------------------------------
Everything above is ``admission="fifo"``: an arriving request goes to the back
of the run queue at once, as in a loop that reads its sockets between every
two slices -- Node.js handlers that yield with ``setImmediate``, which the
FIFO model predicts within 5 % in the mean on a real server
(``validation/README.md``).  ``admission="idle"`` admits a new request only
when no request in flight is runnable.  That is how Node.js 20 (libuv 1.46)
runs handlers that ``await`` a ``setTimeout``: while two requests are in
flight each one's 1 ms timer expires during the other's slice, and libuv
re-runs the overdue timer without polling the sockets, so new connections
wait until the in-flight set drains to one (measured with a per-slice trace
of the validation server).  In-flight-first keeps requests closer to FCFS
order than a FIFO run queue, and other requests' work fills a request's
timer waits.  The exact model is :func:`capacity.sim.simulate` with
``admission="idle"``.  The approximation starts from the idle-admission
queue without gaps, an interpolation ``T0`` between FCFS and the zero-delay
FIFO value ``T_R0`` of the formula above, and adds the ``G = (k - 1) d`` of
gaps less the part of them that overlaps the request's wait for the CPU::

    T0      = T_FCFS + w (T_R0 - T_FCFS),          w   = a1 + a2 rho + a3 h
    T_idle  = T0 + G - min(phi, 1) G W / (G + W),  phi = c1 + c2 rho + c3 h
    W       = max(T0 - B, 0),   h = x / (1 + x),   x = d / (E[S] / k)

with ``B`` the statistic at zero load (``E[S]``, or the service time's
quantile) and ``x`` the gap over the mean slice.  ``G W / (G + W)`` is a
smooth minimum of the gaps and the wait, so the overlap can never exceed
either, and ``phi <= 1`` keeps ``T_idle >= B + G``, its exact zero-load
value.  Fitted by least squares of the residuals ``(model - sim) / s``, ``s
= sqrt((0.01 sim)^2 + hw^2)`` (1 % of the value and the simulation's 99 %
half-width ``hw``), to the 270 exact simulations of the ``idle`` grid of
``tools/calibrate_rr.py`` (one core, rho 0.3/0.5/0.7/0.8/0.9 x k 2/5/10 x
scv 0/1/2 x x 0/0.25/0.5/1/2/5; 1.5e5 requests per point up to rho 0.5,
times ``(0.5 / (1 - rho))^2`` above: 3.75e6 at rho 0.9), with the FIFO
constants above in ``T_R0``:

========  =======  =======  =======  =======  =======  =======
stat      a1       a2       a3       c1       c2       c3
========  =======  =======  =======  =======  =======  =======
mean      0.4379   0.1531   0.1218   -0.2442  0.8347   0.0995
p90       0.5755   0.0006   0.2269   1.1929   0.1871   -0.6251
p99       0.6024   0.0915   -0.0495  0.5215   -0.9267  0.8133
p99.9     0.6654   0.1184   -0.1998  0.1879   -1.7012  1.2783
========  =======  =======  =======  =======  =======  =======

(interpolated in ``log10(1 - q)`` between p90 and p99.9, held outside, as
for FIFO).  Measured error (model / simulation - 1, percent; the largest in
size over the 18 (scv, x) points of each (rho, k)).  In brackets, the
constants of the previous release (mean 0.4395 0.1521 0.1173 -0.2454 0.8244
0.1059, p90 0.6285 -0.0563 0.2036 1.2468 0.0838 -0.6278, p99 0.6016 0.0917
-0.0582 0.5027 -0.9583 0.8440, p99.9 0.6498 0.1537 -0.2124 0.1006 -1.7445
1.3889), fitted to this same grid with that release's FIFO constants; they
change with the refitted FIFO constants::

    rho     k            mean           p90           p99         p99.9
    0.3     2     -3.4 (-3.4)   -8.9 (-9.1)   -6.2 (-6.2)   -6.3 (-6.1)
    0.3     5     +6.0 (+6.0)   -9.5 (-9.6)   -4.8 (-4.8)   -5.1 (-4.7)
    0.3    10     +7.3 (+7.3)  +10.0 (+9.6)   +7.3 (+7.3)   -6.7 (-6.4)
    0.5     2     -4.5 (-4.5)   -7.4 (-7.2)   -7.7 (-7.7) -10.6 (-10.5)
    0.5     5     +6.5 (+6.5)   -7.3 (-7.0)   -7.5 (-7.4) -11.6 (-11.4)
    0.5    10     +8.4 (+8.4)   +9.3 (+9.3)   -6.2 (-6.0)   -8.3 (-8.0)
    0.7     2     -5.7 (-5.6)   -6.1 (-5.8)   -6.7 (-6.6)   -6.3 (-6.4)
    0.7     5     -5.9 (-5.8)   -6.7 (-6.2)   -8.3 (-8.1)   -9.4 (-9.5)
    0.7    10     +6.2 (+6.2)   -5.4 (-4.6)   -6.9 (-6.6)   -9.8 (-9.6)
    0.8     2     -5.3 (-5.2)   -4.7 (-4.4)   -5.1 (-5.0)   -7.9 (-7.9)
    0.8     5     -5.9 (-5.8)   -8.2 (-7.6)   -6.7 (-6.3)   -8.1 (-8.0)
    0.8    10     -5.8 (-5.7)   -6.4 (-5.6)   -7.8 (-7.6) -10.3 (-10.2)
    0.9     2     -4.5 (-4.4)   -6.7 (-6.4)   -7.4 (-7.2) -11.7 (-11.8)
    0.9     5     +2.4 (+2.3)   +6.0 (+6.0)   -6.3 (-6.1)   -9.2 (-9.3)
    0.9    10     +4.6 (+4.5)   +8.3 (+8.3)   -5.9 (+5.7) +10.2 (+10.4)
    max |error|: mean 8.4 (8.4), p90 10.0 (9.6), p99 8.3 (8.1), p99.9 11.7 (11.8) %
    rms error:   mean 3.1 (3.0), p90 3.5 (3.5), p99 2.9 (2.9), p99.9 4.5 (4.5) %

The simulations' own 99 % half-widths reach 4.7 % for the mean and 11-12 %
for p99 and p99.9.  The median is not modelled (p90 parameters are used
below p90): at zero delay the formula's p10-p50 are 13-27 % low for scv
1-2 at 30-60 % CPU.

So, as for FIFO, the body is measured: ``tools/build_rr_body_table.py
--admission idle --simulate`` (468 exact simulations, one core, no slice
delay, the FIFO table's laws and loads, slices 2-20; 26 min with 2
processes) ships ``capacity/tables/rr_idle_quantiles.csv``, and the
quantiles use ``T0`` times the measured ratio ``simulated / T0`` of
:mod:`capacity._rr_body` (interpolated as for FIFO, held at 20 slices
above) before the gaps are added; the mean keeps the formula.  Measured
(model / simulation - 1, largest in size, rms in brackets):

* at 12 off-grid points with fresh seeds (``--admission idle
  --held-out``): p1-p80 within 4.5 % (1.0; the formula 48.6 %, 16.9),
  p90-p99.9 within 12.8 % (2.0; the formula 36.4 %, 8.2), the largest at
  p99.9 of a lognormal law of scv 3 with 30 slices (beyond the table's
  20), whose simulated half-width is 19 %;
* on the idle grid above (``--idle-grid``; 150,000-3.75e6 requests per
  point, with delays, where the ratio measured at zero delay is carried
  over): without gaps p50 2.6 % (0.8; the formula 34.0 %, 15.6), p90 3.5
  (1.2; 8.2), p99 6.1 (2.4; 7.7), p99.9 11.7 (4.6; 10.6); with gaps of
  0.25-5 slices p50 29.7 % (12.2; 36.8, 20.2: the body with gaps is not
  modelled well either way), p90 10.5 (3.7; 10.0, 3.5), p99 9.6 (2.7; 8.3,
  2.9), p99.9 15.0 (4.6; 11.7, 4.5).

A fit of an idle day's histograms needs the body: with the formula, 4 of
the 5 idle days of ``tools/fit_discipline_recovery.py`` were fitted as
FIFO round robin, their CPU per request 3-7 % low; with the table all 5
are fitted as idle, within 0.6 % (``tests/test_fit_discipline_recovery.py``).

Outside the calibration grid the idle formula keeps its limits (exact at zero
load without a slice delay, within 0.3 % with one, and for ``slices=1``) and stays increasing in load (checked for k up
to 10 and x up to 20); for gaps much longer than the slices (x >> 5, long
I/O waits) prefer the simulator.  Several cores: the same formula with the
M/G/c values (not calibrated for c > 1).

Reproducing the constants
-------------------------
Both grids are shipped as ``capacity/tables/rr_calibration.csv``: every
point's inputs, seed and simulator settings, and its simulated mean and
quantiles with their 99 % half-widths (the file's header says how it was
made).  ``python tools/calibrate_rr.py --simulate`` re-runs the 350 seeded
exact simulations (bit for bit the same file); ``--fit`` fits the four
tables of constants above from the file alone, with this module's own
formula functions, and prints them with the error tables; ``--check``
exits non-zero, naming the constant, when a constant here differs from the
fit beyond 3 significant digits (``tests/test_calibrate_rr.py`` runs it).

References
----------
L. Kleinrock, *Queueing Systems, Volume 2: Computer Applications*, Wiley
(1976), sec. 4.4 (round robin, quantum -> 0 gives processor sharing).

L. Kleinrock, "Time-shared systems: a theoretical treatment", JACM 14(2)
(1967) 242-261 (round robin with a finite quantum).

G. Fayolle, I. Mitrani and R. Iasnogorodski, "Sharing a processor among
many job classes", JACM 27(3) (1980) 519-532 (discriminatory processor
sharing, the large-``k`` limit with size weights).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import _quantile_table, fcfs, ps
from ._checks import ADMISSIONS, check_broadcast, check_choice, check_nonnegative, check_quantile, check_servers, scalar_out
from ._common import prepare
from . import _rr_body
from .distributions import Service

__all__ = ["ADMISSIONS", "conditional_mean_response", "mean_number", "mean_response", "response_quantile",
           "response_sf"]

ArrayLike = Any

# Fitted (beta, gamma, delta) of the module docstring (tools/calibrate_rr.py --fit; --check
# tells whether these still are what the shipped grid gives).
_MEAN_PARAMS = (0.6984, 0.4874, 1.0075)
_Q_LOG = np.array([-1.0, -2.0, -3.0])  # log10(1 - q) at p90, p99, p99.9
_Q_PARAMS = np.array([[0.6241, 0.2266, 3.0],
                      [0.6010, 0.1200, 0.7631],
                      [0.4626, 0.0466, -0.9]])
# Tail probabilities P(T > t) at which response_sf evaluates the quantile
# (16 levels: each costs one PS quantile per point).
_SF_LEVELS = np.array([0.9, 0.7, 0.5, 0.3, 0.2, 0.1, 0.05, 0.02, 1e-2, 5e-3, 2e-3, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7])
_SF_GRID = 1.0 - _SF_LEVELS


# admission="idle": (a1, a2, a3, c1, c2, c3) of the module docstring, for the mean and at
# p90 / p99 / p99.9 (interpolated in log10(1 - q) like _Q_PARAMS; fitted with the FIFO constants
# above by tools/calibrate_rr.py --fit).
_IDLE_MEAN = (0.4379, 0.1531, 0.1218, -0.2442, 0.8347, 0.0995)
_IDLE_Q = np.array([[0.5755, 0.0006, 0.2269, 1.1929, 0.1871, -0.6251],
                    [0.6024, 0.0915, -0.0495, 0.5216, -0.9266, 0.8131],
                    [0.6654, 0.1184, -0.1998, 0.1880, -1.7012, 1.2783]])


def _idle(t_f: np.ndarray, t_r0: np.ndarray, base: np.ndarray, rho: np.ndarray, k: np.ndarray,
          d: np.ndarray, es: np.ndarray, params, scale: Any = 1.0) -> np.ndarray:
    """The admission="idle" value of a statistic from its FCFS and zero-delay round-robin
    values and its zero-load value ``base`` (see the module docstring); ``scale`` multiplies the
    value without gaps ``T0`` (the measured correction of :func:`_idle_quantile`)."""
    a1, a2, a3, c1, c2, c3 = params
    gaps = (k - 1.0) * d
    with np.errstate(invalid="ignore", divide="ignore"):
        x = np.where(es > 0, k * d / es, 0.0)  # the gap over the mean slice
        h = x / (1.0 + x)
        w = a1 + a2 * rho + a3 * h
        # Never below the zero-load value: a correction interpolated between its nodes must not
        # take a response under the service time itself.
        no_gaps = np.maximum((t_f + w * (t_r0 - t_f)) * scale, base)
        # The queueing a request would see without gaps, and how much of it its own gaps hide
        # (at most the smaller of the two: G W / (G + W) is a smooth minimum).
        wait = np.maximum(no_gaps - base, 0.0)
        overlap = np.where(gaps + wait > 0, gaps * wait / (gaps + wait), 0.0)
        # share <= 1 keeps the response above its zero-load value plus the gaps (overlap <= wait)
        return no_gaps + gaps - np.minimum(c1 + c2 * rho + c3 * h, 1.0) * overlap


def _idle_quantile(qb: np.ndarray, t_f: np.ndarray, t_r0: np.ndarray, base: np.ndarray, rho: np.ndarray,
                   k: np.ndarray, d: np.ndarray, es: np.ndarray, service: Service, servers: Any) -> np.ndarray:
    """:func:`_idle` at probability ``qb`` with its interpolated parameters, its value without
    gaps corrected by the measured table of :mod:`capacity._rr_body` (exact at zero delay on the
    table's grid).  ``t_r0`` is the uncorrected FIFO formula, the anchor the idle constants were
    fitted with.  Shared with :mod:`capacity.plan.curves` and the warm-up planner, which apply it
    to their cached FCFS and zero-delay tables."""
    return _idle(t_f, t_r0, base, rho, k, d, es, _q_params(qb, _IDLE_Q), _idle_correction(qb, rho, k, service, servers))


def _queue_shape(inp) -> dict:
    """The queue inputs' broadcast shape under a name for check_broadcast's message (no copy)."""
    return {"arrival_rate/service/servers": np.broadcast_to(0.0, inp.shape)}


def _check_slices(slices: ArrayLike) -> np.ndarray:
    """Slice counts as a float array (whole numbers >= 1, like server counts)."""
    return check_servers(slices, "slices").astype(float)


def _check_delay(slice_delay: ArrayLike) -> np.ndarray:
    """Slice delays in seconds (finite, >= 0); a Service counts by its mean."""
    if isinstance(slice_delay, Service):
        return np.asarray(slice_delay.mean, dtype=float)
    return check_nonnegative(slice_delay, "slice_delay")


def _weights(k: np.ndarray, rho: np.ndarray, scv: np.ndarray, params) -> tuple[np.ndarray, np.ndarray]:
    """g(k) and the limit's multiplier of (T_PS - E[S]) (see the module docstring)."""
    beta, gamma, delta = params
    g = 1.0 - k ** (-beta)
    return g, gamma * scv * (1.0 + delta * rho)


def _fifo(t_f: np.ndarray, t_p: np.ndarray, es: np.ndarray, rho: np.ndarray, scv: np.ndarray, k: np.ndarray,
          params) -> np.ndarray:
    """The zero-delay FIFO value ``T_FCFS + g(k) (L - T_FCFS)`` of a statistic from its FCFS and PS
    values (see the module docstring).  Shared with ``tools/calibrate_rr.py``, which fits ``params``."""
    g, excess = _weights(k, rho, scv, params)
    with np.errstate(invalid="ignore"):
        # The size-weighted limit is slower than PS for the large requests that make up a tail.
        # Below the mean service time (low quantiles, light load) the calibrated term would turn
        # negative and, times a large scv, push the quantile below zero; a request is never
        # faster than under PS there, so the excess stops at 0 (L >= T_PS >= the service's own
        # quantile, and T_k, between T_FCFS and L, keeps that bound).
        limit = t_p + excess * np.maximum(t_p - es, 0.0)
        return t_f + g * (limit - t_f)


def _q_params(q: np.ndarray, table: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """The constants of a table (default ``_Q_PARAMS``, looked up at call time) at probability ``q``."""
    table = _Q_PARAMS if table is None else table
    x = np.clip(np.log10(np.maximum(1.0 - q, 1e-300)), -3.0, -1.0)
    return tuple(np.interp(-x, -_Q_LOG, table[:, j]) for j in range(table.shape[1]))


def _mean(inp, k: np.ndarray, d: np.ndarray, shape: tuple, admission: str = "fifo") -> np.ndarray:
    t_f = np.broadcast_to(np.asarray(fcfs.mean_response(inp.arrival_rate, inp.service, inp.servers)), shape)
    t_p = np.broadcast_to(np.asarray(ps.mean_response(inp.arrival_rate, inp.service, inp.servers)), shape)
    es = np.broadcast_to(inp.mean_service, shape)
    rho = np.broadcast_to(inp.utilization, shape)
    scv = np.broadcast_to(np.asarray(inp.service.scv, dtype=float), shape)
    stable = np.broadcast_to(inp.stable, shape)
    kb, db = np.broadcast_to(k, shape), np.broadcast_to(d, shape)
    t_r0 = _fifo(t_f, t_p, es, rho, scv, kb, _MEAN_PARAMS)
    with np.errstate(invalid="ignore"):
        out = t_r0 + (kb - 1.0) * db if admission == "fifo" else _idle(t_f, t_r0, es, rho, kb, db, es, _IDLE_MEAN)
    # k = 1 is FCFS exactly (no rounding through the interpolation).
    out = np.where(np.broadcast_to(k, shape) == 1, t_f, out)
    return np.where(stable, out, np.inf)


def mean_response(arrival_rate: ArrayLike, service: Service | ArrayLike, servers: ArrayLike = 1,
                  slices: ArrayLike = 1, slice_delay: ArrayLike = 0.0, admission: str = "fifo"):
    """Mean response time of event-loop round robin with ``slices`` slices, seconds.

    Parameters
    ----------
    arrival_rate : float or array_like
        Poisson arrival rate, requests/s (>= 0).
    service : Service or float
        CPU time per request, seconds (a bare number: exponential).
    servers : int or array_like of int
        Cores serving the one run queue.
    slices : int or array_like of int
        Slices per request (>= 1): the request's CPU ``S`` runs as ``slices``
        pieces of ``S / slices``.  1 is FCFS.
    slice_delay : float, array_like or Service
        Non-CPU delay between two slices, seconds (>= 0); a Service counts
        by its mean.
    admission : {"fifo", "idle"}
        When a new request enters the run queue: at once (``"fifo"``, a loop
        that polls its sockets between slices, e.g. ``setImmediate`` yields)
        or only when no request in flight is runnable (``"idle"``, Node.js 20
        with ``setTimeout``-awaited slices; see :func:`capacity.sim.simulate`).

    Returns
    -------
    float or ndarray
        E[T] in seconds; ``inf`` where the utilisation is >= 1.

    Notes
    -----
    ``slices=1``: exactly :func:`capacity.fcfs.mean_response`.  Otherwise an
    approximation: ``E[T_FCFS] + g(k) (L - E[T_FCFS]) + (k - 1) d`` with the
    limit ``L`` and the weight ``g`` of the module docstring, which also
    lists the measured error (within 4.0 % of exact simulation over
    utilisation 0.3-0.9, k 2-50, scv 0-2, d = 0).  Exact for deterministic
    service as ``k -> inf`` (processor sharing).

    References
    ----------
    See the module docstring (Kleinrock 1976, sec. 4.4; Kleinrock 1967).

    Examples
    --------
    >>> from capacity import Service, rr, fcfs
    >>> rr.mean_response(0.5, Service.deterministic(1.0)) == fcfs.mean_response(0.5, Service.deterministic(1.0))
    True
    >>> round(rr.mean_response(0.5, Service.deterministic(1.0), slices=5), 3)
    1.838
    """
    k = _check_slices(slices)
    d = _check_delay(slice_delay)
    adm = check_choice(admission, "admission", ADMISSIONS)
    inp = prepare(arrival_rate, service, servers)
    shape = check_broadcast(**_queue_shape(inp), slices=k, slice_delay=d)
    if k.ndim == 0 and k == 1:
        return fcfs.mean_response(arrival_rate, service, servers) if shape == inp.shape else \
            scalar_out(np.broadcast_to(np.asarray(fcfs.mean_response(arrival_rate, service, servers)), shape))
    return scalar_out(_mean(inp, k, d, shape, adm))


def mean_number(arrival_rate: ArrayLike, service: Service | ArrayLike, servers: ArrayLike = 1,
                slices: ArrayLike = 1, slice_delay: ArrayLike = 0.0, admission: str = "fifo"):
    """Mean number of requests in the process (running, queued or sleeping).

    Parameters
    ----------
    arrival_rate, service, servers, slices, slice_delay, admission
        As in :func:`mean_response`.

    Returns
    -------
    float or ndarray
        ``arrival_rate * E[T]`` (Little's law, exact given E[T]); ``inf``
        where unstable.

    Notes
    -----
    Approximate exactly as :func:`mean_response` is (exact for ``slices=1``).

    References
    ----------
    J. D. C. Little, Operations Research 9 (1961) 383-387.

    Examples
    --------
    >>> from capacity import rr
    >>> rr.mean_number(0.5, 1.0)
    1.0
    """
    et = np.asarray(mean_response(arrival_rate, service, servers, slices, slice_delay, admission), dtype=float)
    lam = np.asarray(prepare(arrival_rate, service, servers).arrival_rate, dtype=float)
    with np.errstate(invalid="ignore"):
        out = np.where(np.isfinite(et), lam * np.where(np.isfinite(et), et, 0.0), np.inf)
    return scalar_out(out)


def conditional_mean_response(size: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike,
                              servers: ArrayLike = 1, slices: ArrayLike = 1, slice_delay: ArrayLike = 0.0,
                              admission: str = "fifo"):
    """Mean response time of a request needing ``size`` seconds of CPU (approximation).

    Parameters
    ----------
    size : float or array_like
        The request's CPU time x, seconds (>= 0).
    arrival_rate, service, servers, slices, slice_delay, admission
        As in :func:`mean_response`.

    Returns
    -------
    float or ndarray
        E[T | S = x] in seconds; ``inf`` where unstable.

    Notes
    -----
    ``slices=1``: exactly ``x + E[W_FCFS]`` (the FCFS wait does not depend on
    the request's own size).  Otherwise the waiting part is split as in
    :func:`mean_response`: a FCFS share ``(1 - g) E[W_FCFS]`` independent
    of x, a PS share ``g E[W_PS] x / E[S]`` proportional to x, and the
    excess of the size-weighted limit as a constant, so that averaging over
    the size distribution gives :func:`mean_response` exactly.  An
    approximation not separately calibrated: in the large-``k`` limit every
    request needs the same number of run-queue cycles, so the response
    depends on x less than under PS.  ``admission="idle"``: ``x`` plus the
    request's own gaps plus a size-independent wait, ``E[T] - E[S] -
    (k - 1) d``, as in FCFS (requests in flight finish first, so the wait
    hardly depends on the newcomer's size); again averaging gives
    :func:`mean_response` exactly.

    References
    ----------
    See the module docstring.

    Examples
    --------
    >>> from capacity import rr
    >>> round(rr.conditional_mean_response(0.3, 0.5, 1.0), 6)  # FCFS: x + E[W] = 0.3 + 1
    1.3
    """
    x = check_nonnegative(size, "size")
    k = _check_slices(slices)
    d = _check_delay(slice_delay)
    adm = check_choice(admission, "admission", ADMISSIONS)
    inp = prepare(arrival_rate, service, servers)
    shape = check_broadcast(size=x, **_queue_shape(inp), slices=k, slice_delay=d)
    es = np.broadcast_to(inp.mean_service, shape)
    stable = np.broadcast_to(inp.stable, shape)
    w_f = np.broadcast_to(np.asarray(fcfs.mean_wait(inp.arrival_rate, inp.service, inp.servers)), shape)
    kb = np.broadcast_to(k, shape)
    xs = np.broadcast_to(x, shape)
    if adm == "idle":
        # x, the request's own gaps, and a size-independent wait: E[T | x] = x + E[T] - E[S]
        total = np.broadcast_to(_mean(inp, k, d, np.broadcast_shapes(inp.shape, k.shape, d.shape), "idle"), shape)
        out = np.where(kb == 1, xs + w_f, xs + (total - es))
        return scalar_out(np.where(stable, out, np.inf))
    t_p = np.broadcast_to(np.asarray(ps.mean_response(inp.arrival_rate, inp.service, inp.servers)), shape)
    total = np.broadcast_to(_mean(inp, k, np.zeros(()), inp.shape if k.ndim == 0 else
                                  np.broadcast_shapes(inp.shape, k.shape)), shape)
    rho = np.broadcast_to(inp.utilization, shape)
    scv = np.broadcast_to(np.asarray(inp.service.scv, dtype=float), shape)
    g, _ = _weights(kb, rho, scv, _MEAN_PARAMS)
    with np.errstate(invalid="ignore", divide="ignore"):
        w_p = t_p - es
        fixed = total - es - (1.0 - g) * w_f - g * w_p  # the size-independent excess
        out = xs + (1.0 - g) * w_f + g * w_p * xs / es + fixed + (kb - 1.0) * np.broadcast_to(d, shape)
    out = np.where(kb == 1, xs + w_f, out)
    return scalar_out(np.where(stable, out, np.inf))


def _quantile(qb: np.ndarray, inp, k: np.ndarray, d: np.ndarray, shape: tuple,
              admission: str = "fifo") -> np.ndarray:
    """Quantiles for a probability array broadcast to ``shape`` (one call each to
    the FCFS and PS quantile functions)."""
    kb = np.broadcast_to(k, shape)
    stable = np.broadcast_to(inp.stable, shape)
    lam = np.broadcast_to(inp.arrival_rate, shape)
    c = np.broadcast_to(inp.servers, shape)
    svc = inp.service
    q_f = np.broadcast_to(_fcfs_quantile(qb, lam, svc, c), shape)
    need = (kb > 1) & stable
    if not need.any():
        return np.where(stable, q_f, np.inf)
    t_r0 = _formula(qb, q_f, inp, kb, shape)
    rho = np.broadcast_to(inp.utilization, shape)
    es = np.broadcast_to(inp.mean_service, shape)
    db = np.broadcast_to(d, shape)
    base = np.broadcast_to(np.asarray(svc.ppf(qb), dtype=float), shape)  # the zero-load quantile
    if admission == "fifo":
        # The formula's body is measured wrong (10-40 % low below p90); the simulated table of
        # capacity._rr_body corrects it on one core.  idle starts from the uncorrected t_r0, the
        # anchor its constants were fitted with, and is corrected by a table of its own.  Never
        # below the service time itself, which every request needs (T >= S): near zero load an
        # Erlang law read through gamma's table came out 0.04 % under its own median.
        out = np.maximum(t_r0 * _fifo_correction(qb, rho, kb, svc, c), base) + (kb - 1.0) * db
    else:
        out = _idle_quantile(qb, q_f, t_r0, base, rho, kb, db, es, svc, c)
    out = np.where(kb == 1, q_f, out)
    return np.where(stable, out, np.inf)


def _formula(qb: np.ndarray, q_f: np.ndarray, inp, kb: np.ndarray, shape: tuple) -> np.ndarray:
    """The zero-delay FIFO formula's quantile (uncorrected) from the FCFS quantile ``q_f`` at the
    same points; :func:`_unit_formula` evaluates it on :mod:`capacity._rr_body`'s grid."""
    q_p = np.broadcast_to(_ps_quantile(qb, inp.arrival_rate, inp.service, inp.servers), shape)
    es = np.broadcast_to(inp.mean_service, shape)
    rho = np.broadcast_to(inp.utilization, shape)
    scv = np.broadcast_to(np.asarray(inp.service.scv, dtype=float), shape)
    return _blend(qb, q_f, q_p, es, rho, scv, kb)


def _unit_formula(svc: Service, lam: np.ndarray, levels: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """The formula on one core for a law of mean 1 at arrival rates ``lam`` (a column),
    probabilities ``levels`` and slice counts ``ks``: shape ``(ks, lam, levels)``.  The FCFS and
    PS quantiles depend on (rate, level) only; the blend adds the slice axis."""
    inp = prepare(lam, svc, 1)
    qb = np.broadcast_to(levels, np.broadcast_shapes(lam.shape, levels.shape))
    q_f = np.asarray(_fcfs_quantile(qb, inp.arrival_rate, svc, 1), dtype=float)
    shape = (ks.size,) + qb.shape
    return _formula(qb, q_f, inp, np.broadcast_to(ks[:, None, None], shape), shape)


def _unit_idle_formula(svc: Service, lam: np.ndarray, levels: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """The idle formula without slice delay and without its correction, as :func:`_unit_formula`
    (shape ``(ks, lam, levels)``): the table of :mod:`capacity._rr_body` is its ratio to the
    simulation."""
    t_r0 = _unit_formula(svc, lam, levels, ks)
    qb = np.broadcast_to(levels, t_r0.shape[1:])
    q_f = np.asarray(_fcfs_quantile(qb, lam, svc, 1), dtype=float)
    base = np.asarray(svc.ppf(levels), dtype=float)
    return _idle(q_f, t_r0, base, lam, ks[:, None, None], 0.0, 1.0, _q_params(qb, _IDLE_Q))


def _fifo_correction(q, rho, slices, service: Service, servers) -> np.ndarray:
    """The measured correction of the FIFO formula's quantiles (:mod:`capacity._rr_body`): a
    factor of the broadcast shape of the inputs, 1 where the table does not apply.  Shared with
    :mod:`capacity.plan.curves` and ``tools/build_rr_body_table.py``."""
    return _rr_body.correction(q, rho, slices, service, servers, _unit_formula)


def _idle_correction(q, rho, slices, service: Service, servers) -> np.ndarray:
    """The measured correction of the idle formula's value without gaps, as
    :func:`_fifo_correction` (``tools/build_rr_body_table.py --admission idle``)."""
    return _rr_body.correction(q, rho, slices, service, servers, _unit_idle_formula, "idle")


def _fcfs_quantile(q, lam, svc, servers) -> np.ndarray:
    """The FCFS half of the blend: from the shipped table of exact M/G/1 quantiles where it holds
    the point (within 0.2 % of the exact value, small beside the blend's own error, and 25x faster
    on a fit's batch of 4000 points), exactly elsewhere.  ``tools/calibrate_rr.py`` uses it too."""
    return _quantile_table.tabled_or_direct("fcfs", q, lam, svc, servers, fcfs.response_quantile)


def _ps_quantile(q, lam, svc, servers) -> np.ndarray:
    """The PS half of the blend: :func:`capacity.ps.response_quantile`, except hyperexponential and
    exponential CPU on one core, read from the shipped phase-type PS table
    (:data:`capacity._quantile_table.PS_PHASE_TYPE`, the one the PS fits read; exponential is its
    scv-1 node).  Against the exact transform at utilisation 0.05-0.95, scv 1.5-8, p1-p99.9: within
    0.19 % (p95 at light load, on the leap from the fast branch to the slow one), median 1e-5, small
    beside the blend's own error; exponential within 1.9e-5 of the exact M/M/1-PS chain.  About
    1000x faster than the H2 transform (40-80 ms a point: an rr fit of H2 CPU took 1.8 s at one load
    and 4.7-5.5 s at three, and rr's measured body 7.5 s to build on first use), 25x than the chain
    (a histogram fit of exponential CPU choosing its model, rr candidates included, took 30 s).
    Shared with :mod:`capacity.plan.curves` and ``tools/calibrate_rr.py``."""
    return np.asarray(_quantile_table.tabled_or_direct(_quantile_table.PS_PHASE_TYPE, q, lam, svc, servers,
                                                       ps.response_quantile), dtype=float)


def _blend(qb, q_f, q_p, es, rho, scv, kb) -> np.ndarray:
    """The rr quantile (no slice delay) from the FCFS and PS quantiles at the same point.

    Shared with :mod:`capacity.plan.curves`, which blends its cached FCFS and PS tables so that a
    new slice count costs no queue computation."""
    return _fifo(q_f, q_p, es, rho, scv, kb, _q_params(qb))


def response_quantile(q: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike,
                      servers: ArrayLike = 1, slices: ArrayLike = 1, slice_delay: ArrayLike = 0.0,
                      admission: str = "fifo"):
    """Quantile of the response time of event-loop round robin, seconds.

    Parameters
    ----------
    q : float or array_like
        Probability in (0, 1), e.g. 0.99.
    arrival_rate, service, servers, slices, slice_delay, admission
        As in :func:`mean_response`.

    Returns
    -------
    float or ndarray
        The q-quantile in seconds; ``inf`` where the utilisation is >= 1.

    Notes
    -----
    ``slices=1``: exactly :func:`capacity.fcfs.response_quantile`.
    Otherwise the approximation of the module docstring: the FCFS and PS
    quantiles (one vectorised call each; for hyperexponential and
    exponential CPU the PS one from the shipped phase-type table, within
    0.19 % of the exact transform) blended with weights calibrated
    per quantile level, times the measured correction of the body on one
    core (module docstring, "The measured body"), plus ``(k - 1) d``.
    Measured on one core at off-grid points: within 8.9 % at p1-p80 and
    7.2 % at p90-p99.9 (rms 1.9 and 1.8 %); with ``admission="idle"``
    within 4.5 % and 12.8 % (rms 1.0 and 2.0 %; with slice delays, see
    the module docstring).  Several cores keep the formula: p99 within
    6.5 %, p90 7.1 %, p99.9 18 % on the calibration grid, below p90
    unreliable.
    With ``servers > 1`` the PS part is :mod:`capacity.ps`'s several-core
    computation (exact for exponential service, an approximation with its
    measured error for other laws).

    References
    ----------
    See the module docstring.

    Examples
    --------
    >>> from capacity import rr, fcfs
    >>> rr.response_quantile(0.99, 0.5, 1.0) == fcfs.response_quantile(0.99, 0.5, 1.0)
    True
    """
    qq = check_quantile(q, "q")
    k = _check_slices(slices)
    d = _check_delay(slice_delay)
    adm = check_choice(admission, "admission", ADMISSIONS)
    inp = prepare(arrival_rate, service, servers)
    shape = check_broadcast(q=qq, **_queue_shape(inp), slices=k, slice_delay=d)
    if k.ndim == 0 and k == 1:
        return fcfs.response_quantile(q, arrival_rate, service, servers)
    return scalar_out(_quantile(np.broadcast_to(qq, shape), inp, k, d, shape, adm))


def response_sf(t: ArrayLike, arrival_rate: ArrayLike, service: Service | ArrayLike,
                servers: ArrayLike = 1, slices: ArrayLike = 1, slice_delay: ArrayLike = 0.0,
                admission: str = "fifo"):
    """P(T > t) for event-loop round robin.

    Parameters
    ----------
    t : float or array_like
        Time, seconds (>= 0).
    arrival_rate, service, servers, slices, slice_delay, admission
        As in :func:`mean_response`.

    Returns
    -------
    float or ndarray
        P(T > t); 1 where the utilisation is >= 1.

    Notes
    -----
    ``slices=1``: exactly :func:`capacity.fcfs.response_sf`.  Otherwise the
    inverse of :func:`response_quantile`: the quantile is evaluated once on
    a fixed grid of 16 tail probabilities (0.9 down to 1e-7) and
    ``log P(T > t)`` is interpolated linearly in t between grid points
    (the last segment extrapolated: an exponential tail; ``1 - 0.1 t /
    t_0.1`` below the first grid point).  Same accuracy as
    :func:`response_quantile` in the tail (p90 and beyond).  Cost: 16 PS
    quantiles per point (slow for non-exponential service until the PS
    quantile is fast).

    References
    ----------
    See the module docstring.

    Examples
    --------
    >>> from capacity import rr, fcfs
    >>> rr.response_sf(3.0, 0.5, 1.0) == fcfs.response_sf(3.0, 0.5, 1.0)
    True
    """
    t_arr = check_nonnegative(t, "t")
    k = _check_slices(slices)
    d = _check_delay(slice_delay)
    adm = check_choice(admission, "admission", ADMISSIONS)
    inp = prepare(arrival_rate, service, servers)
    shape = check_broadcast(t=t_arr, **_queue_shape(inp), slices=k, slice_delay=d)
    if k.ndim == 0 and k == 1:
        return fcfs.response_sf(t, arrival_rate, service, servers)
    # One quantile evaluation on the grid (a trailing axis), then interpolation.
    gshape = shape + (_SF_GRID.size,)

    def ex(a: Any) -> np.ndarray:
        return np.broadcast_to(a, shape)[..., None]

    class _Grid:  # the prepared inputs with a trailing grid axis
        arrival_rate = ex(inp.arrival_rate)
        servers = ex(inp.servers)
        mean_service = ex(inp.mean_service)
        utilization = ex(inp.utilization)
        stable = ex(inp.stable)
        service = inp.service._expand(1) if inp.service.shape != () else inp.service

    tq = _quantile(np.broadcast_to(_SF_GRID, gshape), _Grid, ex(k), ex(d), gshape, adm)
    tq = np.maximum.accumulate(tq, axis=-1)  # guard the monotonicity of the blended quantiles
    logp = np.log(_SF_LEVELS)  # log P(T > t) at the grid quantiles
    x = np.broadcast_to(t_arr, shape)
    finite = np.isfinite(tq[..., 0])
    tq = np.where(finite[..., None], tq, np.arange(_SF_GRID.size, dtype=float))
    # Row-wise linear interpolation of log P(T > t) in t (vectorised searchsorted).
    idx = np.clip((tq <= x[..., None]).sum(axis=-1), 1, _SF_GRID.size - 1)
    t0 = np.take_along_axis(tq, (idx - 1)[..., None], -1)[..., 0]
    t1 = np.take_along_axis(tq, idx[..., None], -1)[..., 0]
    l0, l1 = logp[idx - 1], logp[idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(t1 > t0, (x - t0) / (t1 - t0), 1.0)
        inner = np.exp(l0 + frac * (l1 - l0))  # extrapolates the last segment in the far tail
        head = 1.0 - (1.0 - _SF_LEVELS[0]) * x / tq[..., 0]
    out = np.where(x <= tq[..., 0], head, inner)
    out = np.where(finite, out, 1.0)
    return scalar_out(np.clip(out, 0.0, 1.0))
