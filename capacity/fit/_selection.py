"""Selection layer of the fits: candidate models compared by QAIC, the best one returned.

Every fit that chooses its model from the data (percentiles, histograms and the readers built
on them) fits each candidate -- a discipline, a family, a delay -- and hands the results here:
:func:`select` ranks them by the quasi-likelihood AIC, puts the table on the best fit
(``candidates_``), gives it the candidates' Akaike weights for its prediction intervals, and
warns when another discipline or family is about as good.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..exceptions import IdentifiabilityWarning

__all__ = ["candidate_families", "candidate_grid", "delay_label", "qaic_scores", "select"]


def candidate_families(discipline: str) -> tuple[str, ...]:
    """The families tried when none is given: lognormal and gamma where a shipped table answers
    them (fcfs always; ps and rr as far as the PS table holds them), else lognormal alone --
    computed point by point, one PS fit takes minutes."""
    from .._quantile_table import families

    if discipline == "fcfs":
        return ("lognormal", "gamma")
    tabled = tuple(f for f in ("lognormal", "gamma") if f in families("ps"))
    return tabled or ("lognormal",)


def candidate_grid(disciplines: Sequence[str], families_of, delays: Sequence) -> list[tuple]:
    """Every (discipline, family, delay) to fit: ``families_of(discipline)`` gives the families."""
    return [(d, f, dl) for d in disciplines for f in families_of(d) for dl in delays]


def delay_label(delay) -> str:
    """How a candidate's delay reads in the table: none, constant or held seconds."""
    if delay is None:
        return "none"
    return delay if isinstance(delay, str) else f"{delay:g} s"


def qaic_scores(deviance, free, dof) -> tuple[np.ndarray, float]:
    """``(QAIC per candidate, c)``: ``deviance / c + 2 k``, c the dispersion of the most general
    candidate (see :func:`select`)."""
    deviance, free, dof = (np.asarray(a, dtype=float) for a in (deviance, free, dof))
    general = int(np.lexsort((deviance / np.maximum(dof, 1), -free))[0])
    c_hat = max(1.0, float(deviance[general] / max(dof[general], 1)))
    return deviance / c_hat + 2 * free, c_hat


def select(fits: list, candidates: list[tuple], deviance: np.ndarray, free: np.ndarray, dof: np.ndarray,
           miss_name: str, miss: Sequence[float]):
    """The candidate with the smallest QAIC, with the comparison table on it.

    ``QAIC = deviance / c + 2 k`` (k free parameters), c the dispersion ``deviance / dof`` of the
    candidate with the most parameters (the most general model; ties: the best fitting one), at
    least 1: the quasi-likelihood AIC for overdispersed data (Burnham and Anderson 2002, sec.
    6.5).  The deviance is twice the negative log-likelihood against a saturated model: the G
    statistic of bucket counts, or the chi-square ``r^T Sigma^-1 r`` of log percentiles.
    ``candidates_`` lists every candidate with ``delta_qaic`` and its Akaike weight
    ``exp(-delta / 2)`` normalised; ``_candidate_fits`` holds (fit, weight) for the intervals.

    A candidate with an estimate on an edge of its search range (``at_an_edge``: see
    ``_at_an_edge`` of the fits) is ranked after those without and has weight 0: its optimum lies
    beyond what its model can compute, so its fit is a truncation (its ``delta_qaic`` may be
    negative).  The runner-up warning compares candidates with weight.
    """
    import pandas as pd

    qaic, c_hat = qaic_scores(deviance, free, dof)
    free = np.asarray(free, dtype=float)
    # A candidate whose estimate sits on an edge of what its model can compute (an scv at the end
    # of the shipped table, say) is a truncated model, not a fitted one: its likelihood still rises
    # beyond the edge, and its predictions are those of an arbitrary point.  It is ranked after
    # every candidate that fitted inside its range and carries no weight -- unless none did.
    edge = [f._at_an_edge() for f in fits]
    inside = np.array([not e for e in edge])
    if not inside.any():
        inside[:] = True
    delta = qaic - qaic[inside].min()
    weight = np.where(inside, np.exp(-0.5 * np.where(inside, delta, 0.0)), 0.0)
    weight /= weight.sum()
    table = pd.DataFrame({
        "discipline": [c[0] for c in candidates], "family": [c[1] for c in candidates],
        "delay": [delay_label(c[2]) for c in candidates],
        "slices": [np.nan if f.slices_ is None else f.slices_ for f in fits],
        "cpu_per_request": [f.cpu_per_request_ for f in fits], "scv": [f.scv_ for f in fits],
        "free_parameters": free.astype(int), "deviance": deviance, "qaic": qaic, "delta_qaic": delta,
        "weight": weight, "at_an_edge": [", ".join(e) for e in edge], miss_name: list(miss)})
    order = np.lexsort((qaic, ~inside))
    table = table.iloc[order].reset_index(drop=True)
    table.index.name = "rank"
    best = fits[int(order[0])]
    best.candidates_ = table
    best._candidate_fits = [(fits[i], float(weight[i])) for i in order]
    best._add_table("models compared (smallest QAIC chosen)", table)
    best._set_quality("qaic_dispersion", c_hat)
    # The warning names the best candidate of another discipline or family: one that differs only
    # by a delay nests the chosen model (a delay that lowers the deviance little costs its 2 QAIC
    # points and nothing else), and it is in the table.
    chosen = (table.loc[0, "discipline"], table.loc[0, "family"])
    other = (table["discipline"] != chosen[0]) | (table["family"] != chosen[1])   # another model
    rival = [i for i in range(1, len(table)) if other[i] and not table.loc[i, "at_an_edge"]]
    runner = table.iloc[rival[0] if rival else 1]
    passed = table[table["delta_qaic"] < 0]
    if len(passed):
        first = passed.iloc[0]
        best.method += (f"; {len(passed)} candidate(s) with a smaller QAIC set aside because an estimate "
                        f"sits on the edge of what the model can compute (best: {first['discipline']}, "
                        f"{first['family']}, delay {first['delay']}, {first['at_an_edge']} on its bound, "
                        f"delta QAIC {first['delta_qaic']:.1f})")
    close = table[(table["at_an_edge"] != "") & (table["delta_qaic"] < 2.0) & other]
    if len(close):
        other = close.iloc[0]
        # Said, because setting it aside narrows the intervals: what it predicts beyond its edge is
        # unknown, not ruled out by the data.
        best._warn(IdentifiabilityWarning,
                   f"another model fits as well but reached the edge of what it can compute "
                   f"({other['discipline']}, {other['family']}, delay {other['delay']}: {other['at_an_edge']} on "
                   f"its bound, delta QAIC {other['delta_qaic']:.1f}); it is set aside and not in the prediction "
                   "intervals, which may be too narrow if it is the right one: give observations at busier "
                   "hours (above 50 % CPU) to tell them apart")
    best._set_quality("delta_qaic_runner_up", float(runner["delta_qaic"]))
    best.method += (f"; model chosen by QAIC among {len(fits)} candidates (runner-up: "
                    f"{runner['discipline']}, {runner['family']}, delay {runner['delay']}, "
                    f"delta QAIC {runner['delta_qaic']:.1f}, weight {runner['weight']:.2f})")
    if rival and runner["delta_qaic"] < 2.0:
        best._warn(IdentifiabilityWarning,
                   f"the data barely tell the chosen model from the runner-up ({runner['discipline']}, "
                   f"{runner['family']}, delay {runner['delay']}: delta QAIC {runner['delta_qaic']:.1f} < 2); "
                   "their predictions at higher load may differ (the prediction intervals mix them by "
                   "weight): compare them in candidates_, or give observations at busier hours "
                   "(above 50 % CPU)")
    return best
