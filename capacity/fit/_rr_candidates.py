"""Event-loop round robin as a candidate of a histogram fit's model selection.

Round robin over the slices between awaits lies between FCFS (one slice) and processor sharing
(many); with the FCFS half of its quantiles read from the shipped FCFS table and the PS half from
the PS tables, one rr fit of a day's histograms costs about as much as a PS fit (40 ms on 24
windows), so :func:`capacity.fit.from_histograms` tries it whenever the data can tell it apart.

The slice count is profiled, not searched continuously (the model is defined on integers): each
count of :data:`~capacity.fit._inputs.SLICE_CANDIDATES` above one is fitted with the best PS/FCFS
candidate's family and delay, for each admission rule (``fifo``: a slice waits behind the run
queue; ``idle``: it runs when the loop is idle), and the best count stands for the rule, with
one more free parameter in its QAIC.  The counts the data cannot tell apart from it form
``slices_range_``: quasi-likelihood profile, ``(G_k - G_min) / c <= chi2_1(0.95)`` with ``c``
the best fit's dispersion ``G / df`` (at least 1), as in the percentile fits' profile
(Burnham and Anderson 2002, sec. 6.5; :func:`~capacity.fit._intervals.consistent_slices`).
"""
from __future__ import annotations

import numpy as np
from scipy import stats

from ._inputs import SLICE_CANDIDATES, check_percentile_options

__all__: list[str] = []

#: Dispersion G / df of the best PS or FCFS candidate above which rr is tried: the true model gives
#: 3-5 on simulated days of minute windows (counts of a queue are correlated); a PS or FCFS fit of
#: an rr day 10-40.
RR_TRIED_ABOVE = 8.0
_SPREAD = 1.5     # the busiest window at least this many times the least busy one's arrival rate


def rr_can_be_told(data, measured_at: str, top) -> bool:
    """Whether rr is worth its 14 fits: the best PS/FCFS model misses the counts by more than a
    queue's correlation explains, the windows span loads (rr differs from PS and FCFS only in how
    the latencies change with load) and the latencies include the wait for the first slice."""
    spread = float(np.max(data.lam) / np.min(data.lam))
    misfit = top.deviance_ / max(top.degrees_of_freedom_, 1) > RR_TRIED_ABOVE
    return misfit and spread >= _SPREAD and measured_at != "in_process"


def rr_candidates(fit_one, data, measured_at: str, family: str, delay, options: dict) -> list[tuple]:
    """``[(fit, label), ...]``: the best rr fit per admission rule, its slice count profiled.

    ``fit_one(data, opts, measured_at)`` fits one model; ``options`` holds the caller's ``scv``,
    ``confidence``, ``max_nfev`` and ``slice_delay``."""
    import pandas as pd

    out = []
    ks = [k for k in SLICE_CANDIDATES if k > 1]
    for rule in ("fifo", "idle"):
        fits = {}
        for k in ks:
            opts = check_percentile_options("rr", family, delay, options["scv"], options["confidence"],
                                            options["max_nfev"], k, rule, options["slice_delay"])
            fits[k] = fit_one(data, opts, measured_at)
        best_k = min(ks, key=lambda k: fits[k].deviance_)
        best = fits[best_k]
        dispersion = max(1.0, best.deviance_ / max(best.degrees_of_freedom_, 1))
        excess = {k: (fits[k].deviance_ - best.deviance_) / dispersion for k in ks}
        consistent = [k for k in ks if excess[k] <= stats.chi2.ppf(0.95, 1)]
        best.slices_range_ = (min(consistent), max(consistent))
        best.slice_profile_ = pd.DataFrame(
            {"slices": ks, "deviance": [fits[k].deviance_ for k in ks],
             "consistent": [k in consistent for k in ks]}).set_index("slices")
        best._add_table("slices profile", best.slice_profile_)
        best._n_free += 1          # the slice count was chosen from the data
        out.append((best, ("rr" if rule == "fifo" else "rr, idle admission", family, delay)))
    return out
