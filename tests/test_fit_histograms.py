"""capacity.fit.from_histograms: bucketed latencies of many windows, fitted by their likelihood.

References: exact seeded simulations of the queue (capacity.simulate) at a day's spread of
loads, bucketed as a Prometheus client does (cumulative counts per ``le``); the simulated p99
at a load the fit never saw, with its batch-means confidence interval.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from capacity import Service, fcfs, ps, simulate
from capacity.exceptions import FitWarning, IdentifiabilityWarning
from capacity.fit import from_histograms

# prom-client's and prometheus_client's default buckets, seconds
DEFAULT_LE = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]


def _buckets(times: np.ndarray, le=DEFAULT_LE) -> dict:
    """Cumulative counts per upper bound, +Inf included (what a Prometheus histogram exports)."""
    cum = np.searchsorted(np.sort(times), le, side="right").astype(float)
    return dict(zip(list(le) + [math.inf], list(cum) + [float(times.size)]))


def _windows(svc, rhos, discipline, horizon, seed, column="response", utilization=False):
    out = []
    for i, rho in enumerate(rhos):
        rate = rho / svc.mean
        run = simulate(rate, svc, discipline=discipline, horizon=horizon, seed=seed + i)
        req = run.requests
        req = req[req["arrival"] > 60.0]          # the first minute is warm-up
        record = {"buckets": _buckets(req[column].to_numpy()), "arrival_rate": rate}
        if utilization:
            record["utilization"] = float(req["service"].sum() / (horizon - 60.0))
        out.append(record)
    return out


def test_recovers_a_ps_queue_and_predicts_an_unseen_peak():
    """PS, lognormal 20 ms CPU of scv 2, eight windows at utilisation 0.1-0.6 (a day with a busy
    hour), 2e4-1.3e5 requests each: the mean CPU within 3 %, the scv within 15 %, and the p99 at
    utilisation 0.8 (never observed) within 10 % of a simulation there."""
    svc = Service.lognormal(0.02, 2.0)
    windows = _windows(svc, [0.1, 0.15, 0.2, 0.3, 0.35, 0.4, 0.5, 0.6], "ps", 3600.0, seed=11)
    fit = from_histograms(windows)
    assert fit.cpu_per_request_ == pytest.approx(0.02, rel=0.03)
    assert fit.scv_ == pytest.approx(2.0, rel=0.15)
    lo, hi = fit.summary.loc["cpu_per_request", ["lower", "upper"]]
    assert lo < fit.cpu_per_request_ < hi
    peak = simulate(40.0, svc, discipline="ps", horizon=2e4, seed=5)
    ci = peak.confidence_interval(0.99, level=0.95, warmup=100.0)
    assert fit.predict(0.99, 40.0) == pytest.approx(ci.estimate, rel=0.10 + ci.half_width / ci.estimate)
    assert fit.fit_quality_["rms_log_time_miss"] < 0.05


def test_in_process_histogram_of_a_blocking_handler():
    """A blocking (FCFS) handler timed in its middleware measures the CPU time alone: the queue in
    front of it is invisible in-process.  Fitted as measured there, with the measured CPU share,
    the model predicts the client's p99 at utilisation 0.8 within 10 %.  The same histograms
    taken for the client's time are said not to fit (the queue the model expects is missing);
    without the CPU share that reading under-predicts the p99 by more than a third."""
    svc = Service.gamma(0.01, 0.5)
    windows = _windows(svc, [0.2, 0.35, 0.5, 0.65], "fcfs", 2400.0, seed=3, column="service",
                       utilization=True)
    fit = from_histograms(windows, discipline="fcfs", family="gamma", measured_at="in_process")
    assert fit.measured_at == "in_process"
    assert fit.cpu_per_request_ == pytest.approx(0.01, rel=0.03)
    truth = float(fcfs.response_quantile(0.99, 80.0, svc))
    assert fit.predict(0.99, 80.0) == pytest.approx(truth, rel=0.10)
    with pytest.warns(FitWarning, match="misses the histograms"):
        from_histograms(windows, discipline="fcfs", family="gamma", measured_at="client")
    blind = [{k: v for k, v in w.items() if k != "utilization"} for w in windows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrong = from_histograms(blind, discipline="fcfs", family="gamma", measured_at="client")
    assert wrong.predict(0.99, 80.0) < truth / 1.5


def test_exact_model_histograms_are_fitted_back():
    """Histograms whose bucket shares are the model's own (ps.response_sf), so the fit's only
    error is its reading of the model's distribution between the quantile levels: within 0.3 %."""
    svc = Service.lognormal(0.02, 2.0)
    le = np.array(DEFAULT_LE)
    windows = []
    for rate in (5.0, 15.0, 25.0, 35.0):
        below = 1.0 - np.asarray(ps.response_sf(le, rate, svc))
        windows.append({"bounds": le, "counts": 1e5 * np.diff(np.r_[0.0, below, 1.0]), "arrival_rate": rate})
    fit = from_histograms(windows)
    assert fit.cpu_per_request_ == pytest.approx(0.02, rel=0.003)
    assert fit.scv_ == pytest.approx(2.0, rel=0.01)


def test_a_wrong_discipline_is_said_to_miss_the_data():
    """FCFS histograms at utilisation up to 0.8 (lognormal CPU of scv 0.3) fitted as processor
    sharing with lognormal CPU and no delay: 37 % RMS off in time at the bounds, and the result
    says so.  Left free, the selection picks FCFS (the best PS candidate, gamma, is 8.5 % off and
    1500 QAIC points behind)."""
    svc = Service.lognormal(0.02, 0.3)
    windows = _windows(svc, [0.3, 0.55, 0.8], "fcfs", 3600.0, seed=21)
    with pytest.warns(FitWarning, match="misses the histograms"):
        fit = from_histograms(windows, discipline="ps", family="lognormal", delay=None)
    assert fit.fit_quality_["rms_log_time_miss"] > 0.10
    good = from_histograms(windows)
    assert good.discipline == "fcfs" and good.fit_quality_["rms_log_time_miss"] < 0.05


def test_empty_windows_are_skipped_and_counted():
    svc = Service.exponential(0.02)
    windows = _windows(svc, [0.2, 0.5], "ps", 1200.0, seed=1, )
    windows.insert(1, {"buckets": {0.1: 0.0, math.inf: 0.0}, "arrival_rate": 0.0})
    with pytest.warns(FitWarning, match="1 window.*skipped"):
        fit = from_histograms(windows, family="exponential")
    assert fit.n_observations == 2


def test_an_opentelemetry_first_bound_of_zero_is_merged_into_the_next_bucket():
    """OpenTelemetry SDKs export explicit bounds starting at 0 ms by default: the requests in
    that bucket (timed at 0 s) are below the next bound, so the fit equals the one without it
    (same likelihood, same estimate); a negative bound is still refused."""
    svc = Service.lognormal(0.02, 1.0)
    plain = _windows(svc, [0.3, 0.6], "fcfs", 900.0, seed=4)
    otel = []
    for w in plain:
        le = sorted(w["buckets"])
        cum = [w["buckets"][x] for x in le]
        counts = np.diff(np.r_[0.0, cum])
        counts[0] -= 3.0                 # three requests timed at 0 s move to the bucket (-inf, 0]
        otel.append({"bounds": [0.0] + le[:-1], "counts": [3.0] + counts.tolist(),
                     "arrival_rate": w["arrival_rate"]})
    a = from_histograms(plain, discipline="fcfs", family="lognormal", delay=None)
    b = from_histograms(otel, discipline="fcfs", family="lognormal", delay=None)
    assert b.cpu_per_request_ == pytest.approx(a.cpu_per_request_, rel=1e-9)
    assert b.scv_ == pytest.approx(a.scv_, rel=1e-9)
    bad = [dict(otel[0], bounds=[-0.001] + otel[0]["bounds"][1:])]
    with pytest.raises(ValueError, match="bucket bounds must be positive"):
        from_histograms(bad, discipline="fcfs", family="lognormal", delay=None)


@pytest.mark.parametrize("windows,match", [
    ([{"buckets": {0.1: 5.0, 0.5: 9.0}, "arrival_rate": 1.0}], "no \\+Inf bucket"),
    ([{"buckets": {0.1: 5.0, 0.5: 4.0, math.inf: 9.0}, "arrival_rate": 1.0}], "must not decrease"),
    ([{"bounds": [0.1, 0.5], "counts": [1.0, 2.0], "arrival_rate": 1.0}], "one entry per bucket"),
    ([{"buckets": {0.1: 5.0, math.inf: 9.0}}], "no 'arrival_rate'"),
    ([{"edges": [0.1]}], "must hold 'buckets'"),
    ({"buckets": {}}, "non-empty list"),
    ([{"buckets": {0.1: 1.0, math.inf: 2.0}, "arrival_rate": 1.0, "utilization": 1.5}], "utilization"),
])
def test_malformed_windows_are_refused(windows, match):
    with pytest.raises(ValueError, match=match):
        from_histograms(windows)


def test_options_are_checked():
    w = [{"buckets": {0.01: 10.0, 0.1: 90.0, math.inf: 100.0}, "arrival_rate": 5.0}]
    with pytest.raises(ValueError, match="measured_at"):
        from_histograms(w, measured_at="server")
    with pytest.raises(ValueError, match="in_process.*rr.*admission='idle'"):
        from_histograms(w, discipline="rr", slices=3, admission="idle", measured_at="in_process")
    with pytest.raises(ValueError, match="free parameters"):
        from_histograms([{"buckets": {0.01: 10.0, math.inf: 100.0}, "arrival_rate": 5.0}], delay="constant")


def _day(svc, discipline, seed, rhos=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7), horizon=1800.0, delay=0.0):
    """A day of windows at a spread of loads, the latencies of a seeded simulation plus ``delay``."""
    out = []
    for i, rho in enumerate(rhos):
        rate = rho / float(svc.mean)
        req = simulate(rate, svc, discipline=discipline, horizon=horizon, seed=seed + i).requests
        t = req.loc[req["arrival"] > 60.0, "response"].to_numpy() + delay
        out.append({"buckets": _buckets(t), "arrival_rate": rate})
    return out


CASES = [("ps", Service.lognormal(0.02, 0.6)), ("ps", Service.lognormal(0.03, 1.5)),
         ("ps", Service.gamma(0.02, 3.0)), ("ps", Service.lognormal(0.015, 4.0)),
         ("ps", Service.exponential(0.025)),
         ("fcfs", Service.lognormal(0.02, 0.6)), ("fcfs", Service.lognormal(0.03, 1.5)),
         ("fcfs", Service.gamma(0.02, 3.0)), ("fcfs", Service.lognormal(0.015, 4.0)),
         ("fcfs", Service.exponential(0.025))]


def test_the_discipline_is_chosen_from_the_data():
    """Ten days (five PS, five FCFS queues; lognormal, gamma and exponential CPU of scv 0.6-4;
    utilisation 0.1-0.7): with nothing given, QAIC picks the true discipline in at least 9 of 10,
    and on every day (issue 15's targets) the mean CPU is within 3 % and the chosen model's p99
    at utilisation 0.8 within 10 % of the exact one.  Measured: 10 of 10 disciplines, the mean
    within 1.1 %, the p99 within 5.8 %."""
    right, close, rows = 0, 0, []
    for i, (discipline, svc) in enumerate(CASES):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = from_histograms(_day(svc, discipline, seed=100 * i))
        assert fit.candidates_ is not None and len(fit.candidates_) in (8, 10)   # 2 x 2 x 2 (+ rr, when tried)
        module = ps if discipline == "ps" else fcfs
        truth = float(module.response_quantile(0.99, 0.8 / float(svc.mean), svc))
        err = fit.predict(0.99, 0.8 / float(svc.mean)) / truth - 1
        mean_err = fit.cpu_per_request_ / float(svc.mean) - 1
        rows.append((discipline, fit.discipline, fit.family, round(err, 3), round(mean_err, 4)))
        right += fit.discipline == discipline
        close += abs(err) < 0.10 and abs(mean_err) < 0.03
    assert right >= 9, rows
    assert close == len(CASES), rows


def test_prediction_intervals_cover_the_truth():
    """Forty days (twenty of a PS, twenty of an FCFS queue, 20 ms lognormal CPU of scv 1.5,
    seven windows of 20 minutes at utilisation 0.1-0.7, issue 15's day): the 90 % intervals of the
    p99 and of the mean at utilisation 0.8 cover the exact values in at least 85 % of them.
    Measured: 40 of 40 for both, median width of the p99's 14 % (PS) and 18 % (FCFS) of the value
    (12 % and 14 % with the same code over 0.1-0.6).  The interval is the fit's parameter uncertainty
    (window-clustered sandwich), mixed over the candidate models by their Akaike weights, with the
    fit's own miss of its data as a model error.  Without that model error the p99 intervals
    covered 95 % (PS) and 85 % (FCFS), 8 % wide, and the mean's 33 of 40; with the Fisher
    information alone, 75 % and 40 %."""
    svc = Service.lognormal(0.02, 1.5)
    hits, mean_hits, total = 0, 0, 0
    for discipline, module in (("ps", ps), ("fcfs", fcfs)):
        truth = float(module.response_quantile(0.99, 40.0, svc))
        mean_truth = float(module.mean_response(40.0, svc))
        for trial in range(20):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = from_histograms(_day(svc, discipline, seed=1000 + 37 * trial,
                                           rhos=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7), horizon=1200.0))
                pred = fit.predict(0.99, 40.0, interval=0.9)
                mean = fit.predict_mean(40.0, interval=0.9)
            assert pred.low <= pred.estimate <= pred.high
            hits += pred.low <= truth <= pred.high
            mean_hits += mean.low <= mean_truth <= mean.high
            total += 1
    assert hits >= 0.85 * total, (hits, total)
    assert mean_hits >= 0.85 * total, (mean_hits, total)


def test_prediction_type_and_extrapolation_warning():
    from capacity.exceptions import IdentifiabilityWarning
    from capacity.fit import Prediction

    svc = Service.lognormal(0.02, 1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = from_histograms(_day(svc, "ps", seed=7, rhos=(0.1, 0.2, 0.3)), discipline="ps", family="lognormal")
    assert isinstance(fit.predict(0.99, 10.0), float)
    pred = fit.predict([0.5, 0.99], 12.0, interval=0.9)
    assert isinstance(pred, Prediction) and pred.estimate.shape == (2,) and np.all(pred.low < pred.high)
    with pytest.warns(IdentifiabilityWarning, match="extrapolating.*utilisation 0.8"):
        far = fit.predict(0.99, 40.0, interval=0.9)
    near = fit.predict(0.99, 15.0, interval=0.9)
    # What the data cannot tell shows as width: from utilisation 0.3 data, 0.8 is less certain
    # (measured: 12 % wide against 8 % at 0.38; the model-error part is the same at both).
    assert (far.high - far.low) / far.estimate > 1.3 * (near.high - near.low) / near.estimate
    with pytest.raises(ValueError, match="confidence"):
        fit.predict(0.99, 10.0, interval=1.5)


def test_a_ceiling_below_a_load_that_met_the_slo_says_so():
    """The issue's case: p50/p90/p99 = 45/120/400 ms at 7.5 QPS with 55 % CPU, SLO p99 <= 500 ms.
    The PS lognormal model (the old default, held here) misses these percentiles by 92 % and puts
    the ceiling at 4.3 QPS, below the 7.5 QPS that met the SLO: the ceiling keeps its number and
    says it contradicts the data.  Both fits also say that the data contradict each other: 55 %
    CPU at 7.5 QPS is 73 ms per request, yet half the requests took under 45 ms."""
    from capacity.fit import from_percentiles

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = from_percentiles({0.5: 0.045, 0.9: 0.12, 0.99: 0.4}, 7.5, utilization=0.55,
                               discipline="ps", family="lognormal", delay=None)
        chosen = from_percentiles({0.5: 0.045, 0.9: 0.12, 0.99: 0.4}, 7.5, utilization=0.55)
    c = fit.ceiling({0.99: 0.5})
    assert c.qps < 7.5
    assert "at 7.5 QPS the observed p99 400 ms met the SLO" in c.contradictions[0]
    assert "contradicts the data" in str(c)
    # the model chosen from the data puts the ceiling above the load that met the SLO ...
    c = chosen.ceiling({0.99: 0.5})
    assert c.qps > 7.5 and chosen.candidates_ is not None
    # ... and says, as the held one does, that the CPU's cost and the percentiles disagree
    for f, ceiling in ((fit, fit.ceiling({0.99: 0.5})), (chosen, c)):
        assert len(f.contradictions_) == 1 and "73.3 ms of CPU per request" in f.contradictions_[0]
        assert f.contradictions_[0] in ceiling.contradictions[-1]
    # a model that describes its data gives no such sentence
    svc = Service.lognormal(0.02, 2.0)
    obs = dict(zip([0.5, 0.9, 0.99], fcfs.response_quantile([0.5, 0.9, 0.99], 20.0, svc)))
    good = from_percentiles(obs, 20.0, discipline="fcfs").ceiling({0.99: float(obs[0.99]) * 1.5})
    assert good.contradictions == () and good.qps > 20.0


def test_histogram_ceiling_checks_the_windows():
    """A PS day fitted as FCFS (held by hand): at 0.6 utilisation the windows met p99 <= 500 ms
    (under 1 % of requests over the 500 ms bound), while the FCFS model's ceiling for it is
    lower; the ceiling says so.  The PS fit's ceiling has no contradiction."""
    svc = Service.lognormal(0.02, 2.0)
    windows = _day(svc, "ps", seed=3, rhos=(0.2, 0.4, 0.6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrong = from_histograms(windows, discipline="fcfs", family="gamma", delay=None, scv=20.0)
        right = from_histograms(windows, discipline="ps", family="lognormal", delay=None)
    slo = {0.99: 0.5}
    assert float(ps.response_quantile(0.99, 30.0, svc)) < 0.5
    c = wrong.ceiling(slo)
    assert c.qps < 30.0 and c.contradictions and "p99 (only" in c.contradictions[0]
    assert right.ceiling(slo).contradictions == ()


def test_ceiling_with_an_interval():
    """ceiling(slo, interval=0.9) is Prediction(Ceiling, low, high): the interval holds the
    estimate and the exact model's ceiling (PS, 20 ms lognormal CPU of scv 1.5, p99 <= 400 ms);
    a percentile fit without n_requests has NaN bounds and says why."""
    from capacity.exceptions import IdentifiabilityWarning
    from capacity.fit import Prediction, from_percentiles
    from capacity.plan import qps_ceiling

    svc = Service.lognormal(0.02, 1.5)
    slo = {0.99: 0.4}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = from_histograms(_day(svc, "ps", seed=1000, rhos=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6), horizon=1200.0))
    got = fit.ceiling(slo, interval=0.9)
    assert isinstance(got, Prediction)
    truth = float(qps_ceiling(svc, 1, slo, discipline="ps").qps)
    assert got.low <= float(got.estimate.qps) <= got.high
    assert got.low <= truth <= got.high
    assert (got.high - got.low) / float(got.estimate.qps) < 0.2
    obs = dict(zip([0.5, 0.9, 0.99], fcfs.response_quantile([0.5, 0.9, 0.99], 20.0, svc)))
    plain = from_percentiles(obs, 20.0, discipline="fcfs")
    with pytest.warns(IdentifiabilityWarning, match="no ceiling interval"):
        nan = plain.ceiling({0.99: 1.0}, interval=0.9)
    assert math.isnan(nan.low) and math.isnan(nan.high) and nan.estimate.qps > 0


@pytest.fixture(scope="module")
def event_loop_day():
    """Seven windows of an await-sliced handler: rr, 8 slices, idle admission, gamma 20 ms CPU of
    scv 0.5, utilisation 0.1-0.7 (seeded simulation of the rr discipline itself)."""
    svc = Service.gamma(0.02, 0.5)
    day = []
    for i, rho in enumerate((0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)):
        req = simulate(rho / 0.02, svc, discipline="rr", slices=8, admission="idle", horizon=1800.0,
                       seed=7 + i).requests
        day.append({"buckets": _buckets(req.loc[req["arrival"] > 60.0, "response"].to_numpy()),
                    "arrival_rate": rho / 0.02})
    return day


def test_an_event_loop_day_brings_round_robin_into_the_choice(event_loop_day):
    """A day of an await-sliced handler (event-loop round robin, 8 slices, idle admission; gamma
    20 ms CPU of scv 0.5; seeded simulation of the rr discipline itself at utilisation 0.1-0.7):
    PS and FCFS miss its counts, rr (a candidate on every day that spans loads) wins the QAIC,
    and its slice range holds the truth; its p99 at utilisation 0.8 is within the 95 % interval
    of a simulated peak plus 10 %.  (On three other rr days -- lognormal, fifo admission, 3-5
    slices -- FCFS with a wider CPU law stayed the choice; its p99 at 0.8 was within +10 % of
    the simulation: rr's own approximation is 5-9 % off there, capacity.rr.)"""
    svc = Service.gamma(0.02, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = from_histograms(event_loop_day)
    assert len(fit.candidates_) == 10
    assert fit.discipline == "rr" and fit.admission_ == "idle"
    assert fit.slices_range_[0] <= 8 <= fit.slices_range_[1]
    assert fit.slice_profile_ is not None and fit.slice_profile_.loc[fit.slices_, "consistent"]
    peak = simulate(40.0, svc, discipline="rr", slices=8, admission="idle", horizon=3e4, seed=99)
    ci = peak.confidence_interval(0.99, batches=30, warmup=300)
    assert abs(fit.predict(0.99, 40.0) - ci.estimate) <= ci.half_width + 0.10 * ci.estimate


def test_round_robin_asked_for_without_a_slice_count_profiles_it(event_loop_day):
    """discipline="rr" alone: the slice count is profiled for both admission rules as the
    automatic choice does (it used to hold one slice -- FCFS, inverted point by point, over ten
    minutes on a real day), and the same rr model as the automatic choice comes out; with
    slices=1 given it is the FCFS fit (deviance 2e-12 apart, scv 3e-9: rounding and the solver)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = from_histograms(event_loop_day)
        asked = from_histograms(event_loop_day, discipline="rr")
        one = from_histograms(event_loop_day, discipline="rr", slices=1, family="gamma", delay=None)
        fcfs_fit = from_histograms(event_loop_day, discipline="fcfs", family="gamma", delay=None)
    assert asked.discipline == "rr" and asked.slice_profile_ is not None
    assert (asked.slices_, asked.admission_) == (auto.slices_, auto.admission_)
    assert asked.slices_range_[0] <= 8 <= asked.slices_range_[1]
    assert asked.cpu_per_request_ == pytest.approx(auto.cpu_per_request_, rel=1e-9)
    assert one.deviance_ == pytest.approx(fcfs_fit.deviance_, rel=1e-10)
    assert one.scv_ == pytest.approx(fcfs_fit.scv_, rel=1e-6)      # the solver stops within that


def test_round_robin_that_wins_through_one_window_is_set_aside():
    """Hand-worked: rr (3 free parameters) against the best PS/FCFS fit (2), dispersion c = 4, so
    rr must gain more than 2 c = 8 in deviance.  Gains per window 1, 1, 1, 40: 43 in all, 3 without
    window 3 -> set aside, naming window 3 (Vuong's z across windows (43 - 8) / (2 x 19.5) = 0.897).
    Gains 5, 5, 5, 40: 15 without window 3 and z = (55 - 8) / (2 x 17.5) = 1.343 > 1.28 -> kept.
    Gains 20, 20, -30, 25: 10 without window 3, but z = (35 - 8) / (2 x 25.94) = 0.520 (two windows
    gain, one loses as much) -> set aside.  A loss everywhere (-1 per window) -> set aside too (no
    gain at all)."""
    import types

    import pandas as pd

    from capacity.fit._rr_candidates import rests_on_one_window

    def fake(deviances, free):
        return types.SimpleNamespace(windows_=pd.DataFrame({"deviance": deviances}), _n_free=free)

    top = fake([10.0, 10.0, 10.0, 50.0], 2)
    why = rests_on_one_window(fake([9.0, 9.0, 9.0, 10.0], 3), top, 4.0)
    assert why.pop("window_z") == pytest.approx(35.0 / 39.0, rel=1e-12)
    assert why == {"window": 3, "deviance_gain": 43.0, "gain_in_window": 40.0, "gain_without_it": 3.0,
                   "gain_needed": 8.0}
    assert rests_on_one_window(fake([5.0, 5.0, 5.0, 10.0], 3), top, 4.0) is None
    why = rests_on_one_window(fake([-10.0, -10.0, 40.0, 25.0], 3), top, 4.0)
    assert why["gain_without_it"] == 10.0 and why["window_z"] == pytest.approx(0.5204, abs=1e-4)
    assert rests_on_one_window(fake([11.0, 11.0, 11.0, 51.0], 3), top, 4.0)["deviance_gain"] == -4.0


def test_round_robin_is_not_kept_out_by_the_window_z_when_the_data_refute_the_other_fit():
    """The same hand-worked gains, with a miss limit of 10 % (RMS in log time, the fits' miss
    warning): gains 20, 20, -30, 25 (z = 0.520, 10 without window 3 against the 8 needed) keep rr
    when the best PS/FCFS fit misses by 30 % and rr by 9.5 %; not when rr misses too (12 %, though
    closer -- both may be at the data's noise), nor without a limit; gains 1, 1, 1, 40 still rest
    on window 3 alone and are set aside."""
    import types

    import pandas as pd

    from capacity.fit._rr_candidates import rests_on_one_window

    def fake(deviances, free, miss):
        return types.SimpleNamespace(windows_=pd.DataFrame({"deviance": deviances}), _n_free=free,
                                     _model_error=lambda: miss)

    top = fake([10.0, 10.0, 10.0, 50.0], 2, 0.30)
    spread = [-10.0, -10.0, 40.0, 25.0]
    assert rests_on_one_window(fake(spread, 3, 0.095), top, 4.0, 0.10) is None
    assert rests_on_one_window(fake(spread, 3, 0.095), top, 4.0)["window_z"] < 1.28
    assert rests_on_one_window(fake(spread, 3, 0.12), top, 4.0, 0.10) is not None
    assert rests_on_one_window(fake(spread, 3, 0.095), fake([10.0, 10.0, 10.0, 50.0], 2, 0.08), 4.0,
                               0.10) is not None
    why = rests_on_one_window(fake([9.0, 9.0, 9.0, 10.0], 3, 0.05), top, 4.0, 0.10)
    assert why["window"] == 3 and why["gain_without_it"] == 3.0


def test_a_busy_loop_is_fitted_and_its_peak_predicted_with_an_interval():
    """A blocking handler of nearly constant CPU (gamma scv 0.002, 5 ms), a day at utilisation
    0.2-0.6 with its CPU counter: the FCFS fits find the near-constant law (scv below the FCFS
    tables' 0.01), the p99 at 0.8 of both is within 3 % of the exact M/G/1 value, and its 90 % interval
    over a 240-rate grid covers it at every rate to within 0.5 %.  (Below the tables' scv the
    fits read FCFS log t linear in cv between M/D/1 and the table, within 0.7 % of the exact
    M/G/1 at p99: each exact inversion took 0.7-6 ms a point, this grid's interval ten minutes and
    a busy loop's histogram fit 140 s.)  The same for a percentile fit."""
    from capacity.fit import from_percentiles

    svc = Service.gamma(0.005, 0.002)
    le = list(np.geomspace(0.001, 1.0, 41))
    windows = []
    for i, rho in enumerate((0.2, 0.4, 0.6)):
        req = simulate(rho / 0.005, svc, discipline="fcfs", horizon=900.0, seed=40 + i).requests
        kept = req[req["arrival"] > 60.0]
        windows.append({"buckets": _buckets(kept["response"].to_numpy(), le), "arrival_rate": rho / 0.005,
                        "utilization": float(kept["service"].sum() / 840.0)})   # the CPU counter
    fit = from_histograms(windows, discipline="fcfs", family="lognormal", delay=None)
    rates = np.array([40.0, 80.0, 120.0])
    pct = [{q: float(fcfs.response_quantile(q, r, svc)) for q in (0.5, 0.9, 0.99)} for r in rates]
    pfit = from_percentiles(pct, arrival_rate=rates, utilization=rates * 0.005, n_requests=[30000] * 3,
                            discipline="fcfs", family="gamma")
    grid = np.linspace(40.0, 170.0, 240)
    exact = np.asarray(fcfs.response_quantile(0.99, grid, svc))
    assert fit.scv_ < 0.01 and pfit.scv_ < 0.01, (fit.scv_, pfit.scv_)
    for f in (fit, pfit):
        assert float(f.predict(0.99, 160.0)) == pytest.approx(float(fcfs.response_quantile(0.99, 160.0, svc)),
                                                              rel=0.03)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            band = f.predict(0.99, grid, interval=0.9)
        assert np.all(band.low <= band.estimate) and np.all(band.estimate <= band.high)
        miss = np.maximum(band.low / exact - 1, exact / band.high - 1)
        assert np.all(miss <= 0.005), (f, miss.max())


def _exact_day(module, svc, rhos=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7), seconds=1800.0):
    """Windows whose bucket counts are the exact model's expected counts (no sampling noise), on
    25 bounds from 2 ms to 2 s."""
    le = list(np.geomspace(0.002, 2.0, 25))
    out = []
    for rho in rhos:
        rate = rho / float(svc.mean)
        above = np.asarray(module.response_sf(le, rate, svc))
        out.append({"buckets": dict(zip(le + [math.inf], seconds * rate * np.r_[1.0 - above, 1.0])),
                    "arrival_rate": rate})
    return out


def test_the_busiest_windows_tail_is_judged_apart_and_carried_into_the_interval():
    """A PS queue (lognormal 20 ms CPU, scv 2; exact counts at utilisation 0.1-0.7).  Fitted with
    its own model the busiest windows' tail is met (|miss| < 1 %) and nothing is said.  Fitted
    as FCFS, whose tail grows more slowly with the load, the whole-day RMS miss is 13 % but the
    slowest tenth of the busiest quarter's requests is more than 20 % faster than observed: the
    fit says so, and the p99 interval at utilisation 0.85 carries that miss as its model error
    (its upper end at least exp(1.645 x 0.9 |miss|) above the estimate, beyond what the RMS alone
    would give) -- the FCFS p99 there is half the true one."""
    svc = Service.lognormal(0.02, 2.0)
    day = _exact_day(ps, svc)
    rate = 0.85 / 0.02
    truth = float(ps.response_quantile(0.99, rate, svc))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        right = from_histograms(day, discipline="ps", family="lognormal", delay=None)
    assert abs(right.fit_quality_["busy_tail_log_time_miss"]) < 0.01
    assert not any("busiest windows" in str(w.message) for w in caught)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wrong = from_histograms(day, discipline="fcfs", family="lognormal", delay=None)
    busy = wrong.fit_quality_["busy_tail_log_time_miss"]
    rms = wrong.fit_quality_["rms_log_time_miss"]
    assert busy < -0.2 and rms < abs(busy), (busy, rms)
    said = [str(w.message) for w in caught if "busiest windows" in str(w.message)]
    assert len(said) == 1 and f"{100 * -busy:.0f} % faster than observed" in said[0], said
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p99 = wrong.predict(0.99, rate, interval=0.9)
    assert p99.estimate < 0.6 * truth
    assert p99.high / p99.estimate > math.exp(1.645 * 0.9 * abs(busy)) > math.exp(1.645 * rms)


def test_too_few_windows_leave_the_busiest_tail_unjudged():
    """Three windows: no busiest quarter to speak of, so no figure (NaN) and no warning about it."""
    svc = Service.lognormal(0.02, 2.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = from_histograms(_exact_day(ps, svc, rhos=(0.2, 0.4, 0.6)), discipline="fcfs",
                              family="lognormal", delay=None)
    assert math.isnan(fit.fit_quality_["busy_tail_log_time_miss"])
    assert not any("busiest windows" in str(w.message) for w in caught)


def test_where_the_latencies_were_measured_is_stated_even_by_default():
    """The summary and to_dict() say where the latencies were timed, the default included (client
    for percentiles and histograms given as such; what the caller said otherwise)."""
    from capacity.fit import from_percentiles

    pct = from_percentiles({0.5: 0.05, 0.99: 0.3}, arrival_rate=8.0, discipline="fcfs", family="lognormal",
                           delay=None)
    assert "latencies measured at: client" in str(pct) and pct.to_dict()["measured_at"] == "client"
    day = _exact_day(fcfs, Service.lognormal(0.02, 1.0), rhos=(0.2, 0.4, 0.6))
    inside = from_histograms(day, discipline="fcfs", family="lognormal", delay=None, measured_at="in_process")
    assert "latencies measured at: in-process" in str(inside)
    assert inside.to_dict()["measured_at"] == "in_process"


def test_the_load_dependence_tells_cpu_variability_from_a_delay():
    """Issue 15 point 2: one fit across the windows' loads separates CPU variability from a non-CPU
    delay.  FCFS with 20 ms lognormal CPU of scv 1 plus a constant 30 ms delay, exact counts at
    utilisation 0.1-0.7: the fit recovers all three (mean and delay within 2 %, scv within 5 %).
    At one load the same shapes can be had with more scv and less delay: the fit says the windows
    cannot tell them apart."""
    svc, delay = Service.lognormal(0.02, 1.0), 0.03
    le = list(np.geomspace(0.002, 2.0, 25))

    def windows(rhos):
        out = []
        for rho in rhos:
            rate = rho / 0.02
            above = np.asarray(fcfs.response_sf(np.maximum(np.array(le) - delay, 0.0), rate, svc))
            above = np.where(np.array(le) <= delay, 1.0, above)
            out.append({"buckets": dict(zip(le + [math.inf], 1800 * rate * np.r_[1.0 - above, 1.0])),
                        "arrival_rate": rate})
        return out

    fit = from_histograms(windows((0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)), discipline="fcfs", family="lognormal",
                          delay="constant")
    assert fit.cpu_per_request_ == pytest.approx(0.02, rel=0.02)
    assert fit.scv_ == pytest.approx(1.0, rel=0.05)
    assert fit.delay_ == pytest.approx(delay, rel=0.02)
    with pytest.warns(IdentifiabilityWarning, match="every window is at about the same load"):
        from_histograms(windows((0.4, 0.4, 0.4)), discipline="fcfs", family="lognormal", delay="constant")


def test_the_deviance_is_the_multinomial_g_statistic_worked_by_hand():
    """The fit's deviance is G = 2 sum n log(n / e) over every bucket of every window, e the window's
    count times the model's probability of the bucket -- recomputed here from the observed counts
    and the model shares the fit reports (comparison_), not from its residuals."""
    rng = np.random.default_rng(7)
    svc = Service.lognormal(0.02, 2.0)
    day = []
    for rate in (10.0, 20.0, 30.0):
        t = simulate(rate, svc, discipline="ps", horizon=600.0, seed=int(rng.integers(1 << 30))).requests
        day.append({"buckets": _buckets(t["response"].to_numpy()), "arrival_rate": rate})
    fit = from_histograms(day, discipline="ps", family="lognormal", delay=None)
    g = 0.0
    for w, record in enumerate(day):
        cum = np.array(list(record["buckets"].values()))
        counts = np.diff(np.r_[0.0, cum])
        shares = fit.comparison_.loc[fit.comparison_["window"] == w, "model_share_above"].to_numpy()
        p = np.diff(np.r_[0.0, 1.0 - shares, 1.0])
        e = cum[-1] * p
        seen = counts > 0
        g += 2.0 * np.sum(counts[seen] * np.log(counts[seen] / e[seen]))
    assert fit.deviance_ == pytest.approx(g, rel=1e-6)


def test_a_cpu_cost_that_contradicts_the_histograms_is_said():
    """FCFS, 20 ms lognormal CPU (scv 1), exact client-side counts at utilisation 0.15-0.6.  With
    the windows' true utilisation nothing is said.  With a CPU graph that also counts another
    process's 40 % of the core (the utilisation law then reads about 20 ms + 0.4/rate per
    request, 2-3x too much), the histograms alone fit 20 ms far better: the fit says the two
    contradict and why, in contradictions_ and a warning, as from_percentiles does."""
    svc = Service.lognormal(0.02, 1.0)
    rhos = (0.15, 0.3, 0.45, 0.6)
    true_day = _exact_day(fcfs, svc, rhos=rhos)
    for w, rho in zip(true_day, rhos):
        w["utilization"] = rho
    fit = from_histograms(true_day, discipline="fcfs", family="lognormal", delay=None)
    assert fit.contradictions_ == ()
    assert fit.fit_quality_["cpu_per_request_from_histograms"] == pytest.approx(0.02, rel=0.02)
    busy_day = [dict(w, utilization=min(1.0, rho + 0.4)) for w, rho in zip(true_day, rhos)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wrong = from_histograms(busy_day, discipline="fcfs", family="lognormal", delay=None)
    assert len(wrong.contradictions_) == 1 and "CPU is spent outside these requests" in wrong.contradictions_[0]
    assert any("the data contradict each other" in str(w.message) for w in caught)
    assert wrong.fit_quality_["cpu_per_request_from_histograms"] == pytest.approx(0.02, rel=0.05)
    # In-process the queue is invisible and the check is not made (see _check_cpu_cost).
    inside = from_histograms(busy_day, discipline="fcfs", family="lognormal", delay=None, measured_at="in_process")
    assert inside.contradictions_ == ()


def test_a_ps_fit_on_several_cores_searches_only_what_the_tables_hold(monkeypatch):
    """On 4 cores the M/G/c-PS gamma table stops at scv 8 (one core's reaches 11.7): a PS gamma fit
    of histograms of scv 12 stops at 8 and says so, reading every evaluation from the table, where
    it used to compute those beyond 8 directly (0.1-0.7 s a load, 24 windows an evaluation)."""
    import capacity.ps as ps_module

    svc, c = Service.gamma(0.02, 12.0), 4
    le = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]
    rates = np.linspace(40.0, 140.0, 6)
    below = 1.0 - np.asarray(ps.response_sf(le, rates[:, None], svc, servers=c))
    windows = [{"bounds": le, "counts": 600 * r * np.diff(np.r_[0.0, b, 1.0]), "arrival_rate": r}
               for r, b in zip(rates, below)]

    def direct(*args, **kwargs):
        raise AssertionError("an M/G/c-PS point was computed directly")

    monkeypatch.setattr(ps_module, "_mgc_sf_pdf", direct)
    with pytest.warns(FitWarning, match="bound"):
        fit = from_histograms(windows, servers=c, discipline="ps", family="gamma", delay=None)
    assert fit.scv_ == pytest.approx(8.03, rel=0.01)
