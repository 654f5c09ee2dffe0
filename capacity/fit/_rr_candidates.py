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
(Burnham and Anderson 2002, sec. 6.5; :func:`~capacity.fit._intervals.consistent_slices`), or
the windows do not tell them apart (:func:`_windows_tell`).

An rr fit joins the comparison only if it stays ahead of the best PS/FCFS model with any one
window left out (:func:`rests_on_one_window`): the windows are a day's independent units (the
requests inside one are correlated), and one window's long busy period -- heavy-tailed CPU in a
five-minute window -- can favour rr's extra shape parameter there alone (a deletion diagnostic,
Cook 1977, with the window as the unit), and only if its gain is consistent across the windows
(:func:`_window_z`) -- a condition waived when the day's histograms refute the best PS/FCFS fit
and not rr (:func:`rests_on_one_window`).
"""
from __future__ import annotations

import numpy as np
from scipy import stats

from ._inputs import SLICE_CANDIDATES, check_percentile_options
from ._selection import qaic_scores

__all__: list[str] = []

_SPREAD = 1.5     # the busiest window at least this many times the least busy one's arrival rate
#: The admission rules rr is tried with, by whether the latencies were timed in-process: a
#: middleware timer's view of rr is modelled for FIFO admission only (capacity._rr_in_process).
RR_ADMISSIONS = {False: ("fifo", "idle"), True: ("fifo",)}


def rr_can_be_told(data) -> bool:
    """Whether rr can be told from PS and FCFS: the windows span loads (the busiest at least
    :data:`_SPREAD` times the least busy), since rr differs from them only in how the latencies
    change with load.

    rr used to be tried only when the best PS/FCFS fit's dispersion ``G / df`` was above 8; short
    windows of an event loop rarely reach it (7 of 10 simulated rr days stayed below, and the
    await-sliced setImmediate handler of the validation server's day at 3.8, where rr fits better
    by 230 in deviance).  Tried on every such day (``tools/fit_discipline_recovery.py``, 30 days):
    rr recognised on 4 of 10 rr days instead of 1, FCFS and PS days still 10 of 10 each (with
    :func:`rests_on_one_window` guarding them), at 0.5-0.6 s per fit instead of 0.2 s.  Timed
    in-process too: the middleware misses the wait for the first slice, which
    :mod:`capacity._rr_in_process` takes out (FIFO admission only).  ``data``: anything with the
    windows' or observations' arrival rates as ``lam``."""
    spread = float(np.max(data.lam) / np.min(data.lam))
    return spread >= _SPREAD


#: Whether rr is tried with deterministic CPU where the best PS/FCFS fit's scv lies below what rr
#: can search (:func:`rr_family`).  On; a switch for the validation harness
#: (``validation/run.py --user-path --repredict DIR --rr-near-constant off``,
#: ``tools/rescore_user_path.py``), which measured it on the saved real-server days
#: (validation/README.md): with the CPU's line held (:data:`capacity.fit._cpu_law.HOLD`) it took
#: the p99s within 20 % from 43 to 48 of 56 peak points; not a user option.
RR_NEAR_CONSTANT = True


def rr_family(best: str, top, family, servers) -> str:
    """The CPU-time family rr is tried with: the best PS/FCFS fit's, or, with
    :data:`RR_NEAR_CONSTANT` (on), deterministic where that fit's scv lies below the range rr can search
    with it (the PS tables' floor, 0.01): a handler of fixed work in await-separated slices fits
    there as FCFS with scv 0.001, and rr held to 0.01 had a body too wide for the day's light
    windows (seed-4 day of the validation server: 2,000 worse in deviance than FCFS + delay, whose
    p99 was then 16-28 % low at the peaks)."""
    if not RR_NEAR_CONSTANT or family is not None or top.scv_ is None:
        return best
    from .._quantile_table import ps_scv_range

    reach = ps_scv_range(best, servers)
    return "deterministic" if reach is not None and top.scv_ < reach[0] else best


def rr_candidates(fit_one, data, measured_at: str, family: str, delay, options: dict) -> list[tuple]:
    """``[(fit, label), ...]``: the best rr fit per admission rule, its slice count profiled.

    ``fit_one(data, opts, measured_at)`` fits one model; ``options`` holds the caller's ``scv``,
    ``confidence``, ``max_nfev`` and ``slice_delay``."""
    import pandas as pd

    out = []
    ks = [k for k in SLICE_CANDIDATES if k > 1]
    for rule in RR_ADMISSIONS[measured_at == "in_process"]:
        fits, opts, start = {}, {}, None
        for k in ks:
            opts[k] = check_percentile_options("rr", family, delay, options["scv"], options["confidence"],
                                               options["max_nfev"], k, rule, options["slice_delay"])
            # Each count starts from the next smaller count's answer: the model moves little from
            # one count to the next (a day's fit evaluates it a third fewer times; saved full run).
            fits[k] = fit_one(data, opts[k], measured_at, start)
            start = fits[k]._theta
        best_k = min(ks, key=lambda k: fits[k].deviance_)
        if best_k != ks[0]:
            # The chosen count refitted from the usual start, so that the answer does not depend
            # on the path to it (rr asked for by name profiles from another best family and delay
            # and must reach the same model to the solver's last digits).
            fits[best_k] = fit_one(data, opts[best_k], measured_at)
        best = fits[best_k]
        dispersion = max(1.0, best.deviance_ / max(best.degrees_of_freedom_, 1))
        excess = {k: (fits[k].deviance_ - best.deviance_) / dispersion for k in ks}
        consistent = [k for k in ks
                      if excess[k] <= stats.chi2.ppf(0.95, 1) or not _windows_tell(fits[k], best)]
        rule_delay = delay
        if delay is not None and best.delay_ is not None and best.delay_ <= 1e-9 * best.cpu_per_request_:
            # A constant delay fitted to zero is no delay: the model without it (one parameter
            # fewer), so the fit reports only parameters it uses -- and is the same model that
            # the automatic choice reaches from a delay-free start.
            rule_delay = None
            opts_free = check_percentile_options("rr", family, None, options["scv"], options["confidence"],
                                                 options["max_nfev"], best_k, rule, options["slice_delay"])
            best = fit_one(data, opts_free, measured_at)
        best.slices_range_ = (min(consistent), max(consistent))
        best.slice_profile_ = pd.DataFrame(
            {"slices": ks, "deviance": [fits[k].deviance_ for k in ks],
             "consistent": [k in consistent for k in ks]}).set_index("slices")
        best._add_table("slices profile", best.slice_profile_)
        best._n_free += 1          # the slice count was chosen from the data
        out.append((best, ("rr" if rule == "fifo" else "rr, idle admission", family, rule_delay)))
    return out


def admitted(tried: list[tuple], fits: list, top, max_miss: float) -> tuple[list[tuple], list[dict]]:
    """``(kept, set_aside)``: the rr ``(fit, label)`` pairs of :func:`rr_candidates` that join the
    comparison, and a record per one set aside (:func:`rests_on_one_window`), judged against
    ``top``, the best of the PS/FCFS ``fits``, with the dispersion c that
    :func:`~capacity.fit._selection.select` would use on all of them together.  ``max_miss``: the
    RMS log-time miss above which a fit does not describe its histograms (``top`` beyond it and
    rr within it waive the across-windows z, see :func:`rests_on_one_window`)."""
    every = fits + [fit for fit, _ in tried]
    _, c_hat = qaic_scores([f.deviance_ for f in every], [f._n_free for f in every],
                           [f.degrees_of_freedom_ for f in every])
    kept, set_aside = [], []
    for fit, label in tried:
        verdict, figures = _judged(fit, top, c_hat, max_miss)
        if verdict == "set aside":
            set_aside.append({"discipline": label[0], "slices": fit.slices_, **figures})
            continue
        kept.append((fit, label))
        if verdict == "kept, z waived":
            # Said next to the model, in case it is the one chosen.
            fit.method += (f"; kept although its gain over the best PS/FCFS fit is not consistent "
                           f"across windows (z = {figures['window_z']:.2f}, {_Z_NEEDED:.2f} needed): that "
                           f"fit misses its histograms by {100 * top._model_error():.0f} % in time, this "
                           f"one by {100 * fit._model_error():.0f} %")
    return kept, set_aside


def rests_on_one_window(rr_fit, top, dispersion: float, max_miss: float | None = None) -> dict | None:
    """Why ``rr_fit`` shows no gain over ``top`` (the best PS/FCFS fit) beyond one window, or None.

    Each window's deviance is the sum of its buckets' squared deviance residuals (the fits'
    ``windows_["deviance"]``), so the QAIC of either model without window w is its total less
    that window's share over ``dispersion`` (the c of :func:`~capacity.fit._selection.select`),
    plus twice its free parameters.  rr is kept when it stays ahead of ``top`` with its most
    favourable window w* left out::

        (G_top - G_rr) - (G_top,w* - G_rr,w*) > 2 c (k_rr - k_top)

    and when its gain is consistent across the windows (:func:`_window_z` above 1.28) -- unless
    the histograms refute ``top`` and not rr: ``top`` misses them by more than ``max_miss`` (the
    RMS log-time miss of the fit's miss warning, beyond sampling noise and the models' stated
    accuracy) and rr by no more than that (``max_miss`` None: never waived).

    (no refit without w*: the fitted parameters are the whole day's).  Otherwise the figures of
    the case are returned (window, gains, the gain needed) for the table of the models set aside:
    an rr fit that wins only through one window, or not at all, has shown nothing the day supports,
    and left in the comparison it would still take Akaike weight into the prediction intervals.

    Why the exception: the z test (Vuong's) chooses between two models that both describe the
    data, and asks that the gain not rest on a few windows.  But rr and PS/FCFS differ only in
    how the latencies grow with load, so rr's gain lies in the busy windows by its nature, and a
    day with a few busy hours has a large spread of per-window gains whatever the truth.  Where
    ``top`` describes the day, that caution costs little; where ``top`` is refuted by its own
    histograms, keeping it over a model that fits them on the strength of a spread the structure
    itself creates would answer from the model known to be wrong.  The one-window deletion check
    still applies.  The day that showed it (validation/runs/2026-12-06b-user-path-immediate-seed4,
    the setImmediate-sliced handler timed in-process): rr with 5 slices and FIFO admission, the
    handler's structure, ahead by 1,410 in deviance (886 without its best window) and 9.5 % off
    in time, set aside at z = 1.24 for FCFS with gamma CPU, 33 % off.  Why rr must describe the
    data too: on the simulated FCFS day of lognormal CPU of scv 4 in 5-minute windows
    (``tools/fit_discipline_recovery.py``, the z = 0.91 day of :func:`_window_z`) the true FCFS
    fit misses by 11.7 % and idle rr with 3 slices by 10.9 % -- both at the noise of heavy-tailed
    short windows, neither refuted by the other; "rr closer than ``top``" alone chose rr there.
    With the rule as it stands the tool's 30 days (10 each of FCFS, PS and rr) and the 16 saved
    real-server day fits choose as before, except the seed-4 day's in-process fit.

    Measured (``tools/fit_discipline_recovery.py``, with the rr body recalibrated on branch
    ``rr-body``; on this release's calibration no day changes): on a day of heavy-tailed FCFS (lognormal
    scv 4, 5-minute windows) rr k = 2 gained 32.5 in G (4.1 c, QAIC 2.1 ahead), 34.1 of it in one
    window of twelve; on the three event-loop days rr was tried on, the gain without the best
    window was 4.2-74 times the 2 c needed (and 50 times on the idle-admission day of
``tests/test_fit_histograms.py``), so they were kept.

    References
    ----------
    R. D. Cook, "Detection of influential observation in linear regression", Technometrics 19
    (1977) 15-18 (deletion diagnostics).
    """
    verdict, figures = _judged(rr_fit, top, dispersion, max_miss)
    return None if verdict.startswith("kept") else figures


def _judged(rr_fit, top, dispersion: float, max_miss: float | None) -> tuple[str, dict]:
    """``(verdict, figures)`` of :func:`rests_on_one_window`: "kept", "kept, z waived" or "set
    aside", and rr's deviance gain over ``top`` -- in all, in its most favourable window and
    without it, the gain its extra parameters need (``2 c`` each), the across-windows z."""
    gain = top.windows_["deviance"].to_numpy() - rr_fit.windows_["deviance"].to_numpy()
    need = 2.0 * dispersion * (rr_fit._n_free - top._n_free)
    worst = int(np.argmax(gain))
    total, without = float(gain.sum()), float(gain.sum() - gain[worst])
    figures = {"window": worst, "deviance_gain": total, "gain_in_window": float(gain[worst]),
               "gain_without_it": without, "gain_needed": need, "window_z": _window_z(gain, need)}
    if without <= need:
        return "set aside", figures
    if figures["window_z"] > _Z_NEEDED:
        return "kept", figures
    if max_miss is not None and top._model_error() > max_miss >= rr_fit._model_error():
        return "kept, z waived", figures
    return "set aside", figures


def _windows_tell(fit, best) -> bool:
    """Whether the day's windows tell ``fit`` (another slice count) from ``best``: the per-window
    deviance excess ``d_w = G_k,w - G_best,w`` is consistently positive, ``sum d / (sqrt(n) sd(d))``
    above the one-sided 95 % t quantile with ``n - 1`` degrees of freedom (windows as independent
    units, as in :func:`_window_z`).

    Why: ``c = G / df`` is one dispersion for the whole day, but the slice counts differ mostly in
    the tail of the busiest windows, where busy periods make the bucket counts far more variable
    than the multinomial.  On a seeded day of idle round robin with 8 slices (7 half-hour windows,
    gamma CPU of scv 0.5; ``tests/test_fit_histograms.py``) the measured body put 20 slices
    ahead of the true 8 by 23.5 in deviance (14.8 c), 16.1 of it in the busiest window; per
    window the excess was -3.7 to +16.1, t = 1.44: not told apart."""
    d = fit.windows_["deviance"].to_numpy() - best.windows_["deviance"].to_numpy()
    if d.size < 3:
        return True
    spread = float(np.std(d, ddof=1))
    if spread == 0.0:
        return bool(d.sum() > 0)
    return bool(d.sum() / (np.sqrt(d.size) * spread) > stats.t.ppf(0.95, d.size - 1))


#: The one-sided 90 % normal quantile that :func:`_window_z` must pass.
_Z_NEEDED = float(stats.norm.ppf(0.90))


def _window_z(gain: np.ndarray, need: float) -> float:
    """Vuong's statistic for two non-nested models with the windows as the independent units: the
    total deviance gain less the parameter penalty, over its standard error from the spread of the
    per-window gains, ``(sum g - need) / (sqrt(n) sd(g))``.

    Why: a day's windows at the same load disagree when the CPU law is heavy-tailed (one window's
    long busy period), and a flexible model gains in some windows and loses in others.  Once the
    body of idle-admission rr was measured (capacity._rr_body), idle rr with 3 slices beat exact
    FCFS on a day of lognormal CPU of scv 4 in 5-minute windows by 92 in deviance -- +65 in one
    window, -42 in another at the same load -- and kept its lead without its best window.  Its z
    was 0.91.  Measured (``tools/fit_discipline_recovery.py``, 26 days): the true rr candidate's z
    on the 10 rr days 1.56-8.7; every rr candidate on the 8 FCFS and 8 PS days -0.01 ... -4.6
    except that one day's (0.91, and 0.50 for FIFO rr).  The threshold is the one-sided 90 % normal
    quantile, 1.28 (Vuong's test at 10 %).

    References
    ----------
    Q. H. Vuong, "Likelihood ratio tests for model selection and non-nested hypotheses",
    Econometrica 57(2) (1989) 307-333.
    """
    if gain.size < 3:
        return float("inf") if gain.sum() > need else float("-inf")
    spread = float(np.std(gain, ddof=1))
    if spread == 0.0:
        return float("inf") if gain.sum() > need else float("-inf")
    return float((gain.sum() - need) / (np.sqrt(gain.size) * spread))
