"""What a timer in an event loop's own middleware sees of round robin: the response less the wait
for the request's first slice.

A histogram timed in a Node.js server's middleware (``prom-client`` in a Koa or Express
middleware, as teams instrument it) starts its clock when the request's first slice runs -- the
middleware is that slice's first code -- and stops it when the last slice ends.  The client, the
proxy and :mod:`capacity.rr` see the whole response ``T``; the middleware sees ``I = T - W1``,
where ``W1`` is the wait in the run queue before the first slice.

The rule (FIFO admission)
-------------------------
A request of ``k = slices`` slices waits in the run queue ``k`` times: before its first slice and
after each of the ``k - 1`` others (when it rejoins the back of the queue, after its slice delay
``d``).  Each wait is a pass behind whatever is queued, and with FIFO admission an arrival joins
the same queue as a returning slice, so the ``k`` waits are alike and the first is about one
``k``-th of the whole queueing.  Quantile by quantile (comonotone, like :mod:`capacity.rr`'s own
blend)::

    I_q = B_q + (1 - 1/k) (T_q - B_q),      B_q = S_q + (k - 1) d

with ``S_q`` the service time's own quantile and ``T_q`` the round-robin response quantile
(:func:`capacity.rr.response_quantile`).  It is exact at ``k = 1`` (FCFS: the middleware sees the
CPU time alone, ``I = S``) and in the processor-sharing limit ``k -> inf`` (no wait before the
first slice, ``I = T``).

Measured error (exact simulator, ``capacity.sim.simulate(..., discipline="rr")``, ``I =
completion - start`` of the first slice; one core, E[S] = 1, FIFO admission, utilisation
0.3/0.5/0.7/0.85 x slices 2/5/10 x exponential and H2 (scv 2) CPU x gap ``d k / E[S]``
0/0.25/1/5, plus deterministic CPU without delay; 1e5-1.5e5 requests x ``max(1, (0.5 / (1 -
rho))^2)`` a point; ``tools/measure_rr_in_process.py``, 108 points).  For exponential and H2 CPU
the simulator's share ``(I_q - B_q) / (T_q - B_q)`` is ``1 - 1/k`` within -0.02/+0.05 at p90 and
-0.13/0.00 at p99 (the first wait is a little more than a k-th of the far tail's queueing, most
at 2 slices: 0.37-0.47 for 0.5), so the rule applied to the simulated ``T_q`` gives the simulated
in-process quantile within -2.3/+3.1 % at p90 and +0.3/+10.6 % at p99, and the mean (``E[I] =
E[B] + (1 - 1/k) (E[T] - E[B])``) within -3.6/-0.1 %.  Deterministic CPU (in-process times on a
lattice of slice lengths) is within -4.7/+1.4 % at p90 and -14.2/-1.2 % at p99 (2 slices at light
load).  End to end, with ``T_q`` from :mod:`capacity.rr`'s calibrated formula, the errors add that
formula's own: -7.7/+16.6 % at p90 and -14.9/+17.6 % at p99 over the grid, the largest with a
slice delay of 5 mean slices (rr's "slice delay" relief, see :mod:`capacity.rr`).

Several cores share one run queue the same way, so the fits apply the same rule there; it is
measured on one core only (as :mod:`capacity.rr`'s formula is calibrated on one core only).

Admission when idle
-------------------
With ``admission="idle"`` an arrival waits outside the run queue until the loop is idle, so its
first wait is unlike the others: the simulated share runs from 0.2 to 0.9 with the load, the slice
count and above all the slice delay (a request asleep lets the loop admit at light load), and no
rule this simple holds; such a fit is refused by name.
"""
from __future__ import annotations

import numpy as np

__all__: list[str] = []


def in_process_quantile(response_q, service_q, slices: int, slice_delay: float = 0.0,
                        admission: str = "fifo") -> np.ndarray:
    """The middleware's quantile ``I_q`` from the response's ``T_q`` and the service's ``S_q`` (s).

    Parameters
    ----------
    response_q, service_q : array_like
        The round-robin response quantile and the service time's quantile at the same level,
        broadcast together (``inf`` where unstable stays ``inf``).
    slices : int
        Slices per request, ``k >= 1``.
    slice_delay : float
        Non-CPU wait after each slice but the last, seconds.
    admission : {"fifo"}
        Only FIFO admission has a rule (see the module docstring); anything else is a ValueError.
    """
    if admission != "fifo":
        raise ValueError(f"admission={admission!r}: what a middleware timer sees of round robin is "
                         "modelled for admission='fifo' only (with admission='idle' the wait for the "
                         "first slice depends on the load and the slice delay; no rule fits)")
    k = int(slices)
    base = np.asarray(service_q, dtype=float) + (k - 1) * float(slice_delay)
    resp = np.asarray(response_q, dtype=float)
    with np.errstate(invalid="ignore"):
        # inf - base is inf: an unstable response stays unstable in-process.
        return np.where(np.isinf(resp), resp, base + (1.0 - 1.0 / k) * (resp - base))
