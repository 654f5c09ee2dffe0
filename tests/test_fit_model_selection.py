"""Model selection, weighting and consistency checks of capacity.fit.from_percentiles.

References: seeded simulations of known queues (capacity.simulate) at a day's spread of loads,
summarised as a dashboard does (p50/p90/p99/p99.9 and the request count per window); the exact
M/G/1 quantiles at a load the fit never saw; the sampling covariance of empirical quantiles
recomputed here from the exact model's distribution function (Serfling 1980, sec. 2.3).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from capacity import Service, fcfs, ps, simulate
from capacity.exceptions import FitWarning
from capacity.fit import from_percentiles

QS = [0.5, 0.9, 0.99, 0.999]


def _day(svc, discipline, seed, rhos=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7), horizon=1800.0, column="response",
         utilization=False):
    """One dashboard record per window: its percentiles, rate and request count (and CPU share)."""
    out = []
    for i, rho in enumerate(rhos):
        rate = rho / float(svc.mean)
        req = simulate(rate, svc, discipline=discipline, horizon=horizon, seed=seed + i).requests
        req = req[req["arrival"] > 60.0]          # the first minute is warm-up
        t = req[column].to_numpy()
        record = {"percentiles": dict(zip(QS, np.quantile(t, QS).tolist())), "arrival_rate": rate,
                  "n_requests": t.size}
        if utilization:
            record["utilization"] = float(req["service"].sum() / (horizon - 60.0))
        out.append(record)
    return out


def _quiet(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return from_percentiles(*args, **kwargs)


CASES = [("ps", Service.lognormal(0.02, 0.6)), ("ps", Service.lognormal(0.03, 1.5)),
         ("ps", Service.gamma(0.02, 3.0)), ("ps", Service.lognormal(0.015, 4.0)),
         ("ps", Service.exponential(0.025)),
         ("fcfs", Service.lognormal(0.02, 0.6)), ("fcfs", Service.lognormal(0.03, 1.5)),
         ("fcfs", Service.gamma(0.02, 3.0)), ("fcfs", Service.lognormal(0.015, 4.0)),
         ("fcfs", Service.exponential(0.025))]


@pytest.mark.parametrize("utilization", [False, True])
def test_the_model_is_chosen_from_dashboard_percentiles(utilization):
    """Ten days (five PS, five FCFS queues; lognormal, gamma and exponential CPU of scv 0.6-4; seven
    windows at utilisation 0.1-0.7), each window's p50/p90/p99/p99.9 and request count, with and
    without the CPU share: with nothing else given, the true discipline in at least 9 of 10 days,
    and on every day (issue 15's targets) the mean CPU within 3 % and the p99 at utilisation 0.8
    within 10 % of the exact one.  Measured: 10 of 10 disciplines with and without the CPU (the PS
    gamma scv 3 day once went to rr, before the PS gamma table reached its scv); the p99 within
    7.4 %, the mean within 1.6 %."""
    right, close, mean_ok, rows = 0, 0, 0, []
    for i, (discipline, svc) in enumerate(CASES):
        fit = _quiet(_day(svc, discipline, seed=100 * i, utilization=utilization))
        # 2 disciplines x 2 families x 2 delays, and rr (two admission rules) where they all miss
        assert len(fit.candidates_) == (10 if "rr" in set(fit.candidates_["discipline"]) else 8)
        module = ps if discipline == "ps" else fcfs
        lam = 0.8 / float(svc.mean)
        err = fit.predict(0.99, lam) / float(module.response_quantile(0.99, lam, svc)) - 1
        rows.append((discipline, fit.discipline, fit.family, round(err, 3)))
        right += fit.discipline == discipline
        close += abs(err) < 0.10
        mean_ok += abs(fit.cpu_per_request_ / float(svc.mean) - 1) < 0.03
    assert right >= 9, rows
    assert close == len(CASES), rows
    assert mean_ok == len(CASES), rows


@pytest.mark.parametrize("admission", ["fifo", "idle"])
def test_round_robin_is_a_candidate_where_ps_and_fcfs_miss(admission):
    """Percentiles of the event-loop model itself (5 slices per request, 10 ms lognormal CPU) at
    utilisation 0.2, 0.4 and 0.6: PS and FCFS miss them by 5-13 % RMS, so rr is fitted too, with
    its slice count profiled, for both admission rules; the right rule and count win."""
    from capacity import rr

    svc = Service.lognormal(0.01, 1.0)
    recs = [{"percentiles": dict(zip(QS, rr.response_quantile(QS, r, svc, slices=5, admission=admission))),
             "arrival_rate": r, "utilization": 0.01 * r} for r in (20.0, 40.0, 60.0)]
    fit = _quiet(recs)
    assert (fit.discipline, fit.admission_, fit.slices_) == ("rr", admission, 5)
    assert len(fit.candidates_) == 10 and fit.candidates_["slices"].iloc[0] == 5
    assert fit.predict(0.99, 80.0) == pytest.approx(float(rr.response_quantile(0.99, 80.0, svc, slices=5,
                                                                               admission=admission)), rel=0.01)


def test_prediction_intervals_from_percentiles_cover_the_truth():
    """Forty days (twenty PS, twenty FCFS; 20 ms lognormal CPU of scv 1.5; six windows of 20
    minutes at utilisation 0.1-0.6): the 90 % intervals of the p99 and of the mean at
    utilisation 0.8 cover the exact values in at least 85 % of them.  Measured: p99 39 of 40
    (median width 12 % PS, 23 % FCFS), mean 40 of 40."""
    svc = Service.lognormal(0.02, 1.5)
    hits, mean_hits, total = 0, 0, 0
    for discipline, module in (("ps", ps), ("fcfs", fcfs)):
        truth = float(module.response_quantile(0.99, 40.0, svc))
        mean_truth = float(module.mean_response(40.0, svc))
        for trial in range(20):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = from_percentiles(_day(svc, discipline, seed=1000 + 37 * trial,
                                            rhos=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6), horizon=1200.0))
                pred = fit.predict(0.99, 40.0, interval=0.9)
                mean = fit.predict_mean(40.0, interval=0.9)
            assert pred.low <= pred.estimate <= pred.high
            hits += pred.low <= truth <= pred.high
            mean_hits += mean.low <= mean_truth <= mean.high
            total += 1
    assert hits >= 0.85 * total, (hits, total)
    assert mean_hits >= 0.85 * total, (mean_hits, total)


def test_one_low_load_cannot_tell_the_disciplines_apart_and_says_so():
    """p50/p90/p99 at 10 % CPU of a PS queue, read off a dashboard (p90 2 % high, p99 2 % low):
    PS and FCFS fit about as well, the warning says the data barely tell them apart and names the
    data that would; the prediction interval at 80 % mixes the candidates, so it is wider than
    the chosen model's own interval."""
    svc = Service.lognormal(0.02, 1.0)
    obs = {q: float(ps.response_quantile(q, 5.0, svc)) * e for q, e in zip((0.5, 0.9, 0.99), (1.0, 1.02, 0.98))}
    with pytest.warns(Warning, match="barely tell the chosen model from the runner-up.*above 50 % CPU"):
        fit = from_percentiles(obs, 5.0, utilization=0.1, n_requests=30_000)
    assert fit.candidates_["weight"].iloc[1] > 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mixed = fit.predict(0.99, 40.0, interval=0.9)
        alone = from_percentiles(obs, 5.0, utilization=0.1, n_requests=30_000, discipline=fit.discipline,
                                 family=fit.family, delay=fit._model.delay).predict(0.99, 40.0, interval=0.9)
    assert mixed.high - mixed.low > 1.5 * (alone.high - alone.low)


def test_deviance_is_the_percentile_chi_square():
    """The deviance of a fit with n_requests is r^T Sigma^-1 r, Sigma the sampling covariance of
    the empirical log-quantiles (q(1-q) / (n f(x)^2 x^2) on the diagonal, p(1-q) / (n f f x x)
    off it) plus 1 % squared on the diagonal.  Recomputed here with the exact M/G/1 density
    from a central difference of fcfs.response_sf at the fitted service."""
    svc = Service.lognormal(0.05, 2.0)
    n = 20_000
    obs = {q: float(fcfs.response_quantile(q, 8.0, svc)) * (1 + e) for q, e in zip(QS, (0.01, -0.02, 0.03, -0.04))}
    fit = _quiet(obs, 8.0, discipline="fcfs", family="lognormal", delay=None, n_requests=n)
    q = np.array(QS)
    x = np.asarray(fcfs.response_quantile(q, 8.0, fit.service_))
    h = 1e-6 * x
    f = (fcfs.response_sf(x - h, 8.0, fit.service_) - fcfs.response_sf(x + h, 8.0, fit.service_)) / (2 * h)
    g = 1.0 / (f * x)                                    # d log x / d q
    sigma = np.minimum.outer(q, q) * (1 - np.maximum.outer(q, q)) * np.outer(g, g) / n + 1e-4 * np.eye(4)
    r = np.log(x) - np.log(np.array([obs[k] for k in QS]))
    assert fit.deviance_ == pytest.approx(float(r @ np.linalg.solve(sigma, r)), rel=0.01)
    assert fit.degrees_of_freedom_ == 2


def test_weighting_trusts_the_precise_percentiles():
    """The p99.9 of 3000 requests rests on three of them: with n_requests the fit weighs it by
    its sampling variance, and a p99.9 off by 40 % moves the fitted mean less than in the
    unweighted fit (which counts every percentile alike)."""
    svc = Service.lognormal(0.02, 1.5)
    recs = []
    for rate in (10.0, 25.0):
        tq = {q: float(fcfs.response_quantile(q, rate, svc)) for q in QS}
        tq[0.999] *= 1.4
        recs.append({"percentiles": tq, "arrival_rate": rate, "n_requests": 3000})
    weighted = _quiet(recs, discipline="fcfs", family="lognormal", delay=None)
    flat = _quiet([{k: v for k, v in r.items() if k != "n_requests"} for r in recs], discipline="fcfs",
                  family="lognormal", delay=None)
    assert abs(math.log(weighted.cpu_per_request_ / 0.02)) < 0.5 * abs(math.log(flat.cpu_per_request_ / 0.02))


def test_in_process_percentiles_of_a_blocking_handler():
    """A blocking handler's middleware percentiles are its CPU time alone (the queue is in front
    of it): fitted as measured there, with the CPU share, the client's p99 at utilisation 0.8 is
    predicted within 10 %; fitted as if a client had measured them, the same percentiles give a
    p99 more than a third too low."""
    svc = Service.gamma(0.01, 0.5)
    recs = _day(svc, "fcfs", seed=3, rhos=(0.2, 0.35, 0.5, 0.65), horizon=2400.0, column="service",
                utilization=True)
    fit = _quiet(recs, discipline="fcfs", measured_at="in_process")
    assert fit.measured_at == "in_process" and "measured at the in_process" in fit.model
    truth = float(fcfs.response_quantile(0.99, 80.0, svc))
    assert fit.predict(0.99, 80.0) == pytest.approx(truth, rel=0.10)
    blind = [{k: v for k, v in r.items() if k != "utilization"} for r in recs]
    assert _quiet(blind, discipline="fcfs").predict(0.99, 80.0) < truth / 1.5
    with pytest.raises(ValueError, match="measured_at='in_process' with discipline='rr' and admission='idle'"):
        from_percentiles(recs, discipline="rr", slices=3, admission="idle", family="exponential",
                         measured_at="in_process")
    with pytest.raises(ValueError, match="measured_at must be one of"):
        from_percentiles(recs, measured_at="browser")


def test_cpu_cost_that_contradicts_the_percentiles_is_said():
    """Percentiles of an FCFS queue with 20 ms of CPU per request, but a CPU share that says 40 ms
    (half the CPU spent elsewhere): the fit holds the CPU's cost, misses the percentiles, and says
    that the percentiles alone need about 20 ms.  With the true CPU share it says nothing."""
    svc = Service.lognormal(0.02, 1.0)
    rates = (10.0, 20.0)
    recs = [{"percentiles": {q: float(fcfs.response_quantile(q, r, svc)) for q in QS}, "arrival_rate": r,
             "utilization": 0.04 * r} for r in rates]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = from_percentiles(recs, discipline="fcfs", family="lognormal", delay=None)
    assert any(issubclass(w.category, FitWarning) and
               str(w.message).startswith("the data contradict each other: the CPU utilisation implies 40 ms")
               for w in caught), [str(w.message) for w in caught]
    assert len(fit.contradictions_) == 1 and "GC, timers" in fit.contradictions_[0]
    assert fit.fit_quality_["cpu_per_request_from_percentiles"] == pytest.approx(0.02, rel=0.02)
    c = fit.ceiling({0.99: 0.5})
    assert fit.contradictions_[0] in c.contradictions[-1] and "contradict each other" in str(c)
    for rec, r in zip(recs, rates):
        rec["utilization"] = 0.02 * r
    honest = _quiet(recs, discipline="fcfs", family="lognormal", delay=None)
    assert honest.contradictions_ == () and honest.ceiling({0.99: 0.5}).contradictions == ()


def test_a_multi_core_event_loop_ceiling_names_the_node_cluster_reading():
    """A PS fit on four cores plans one four-core queue; the ceiling's text says that four Node.js
    workers are four one-core event loops, to be planned per worker.  FCFS (a worker pool on four
    cores) and one core say nothing of it."""
    svc = Service.exponential(0.02)
    obs = {q: float(ps.response_quantile(q, 120.0, svc, servers=4)) for q in QS}
    fit = _quiet(obs, 120.0, servers=4, discipline="ps", family="exponential", delay=None)
    assert "4 one-core queues, not one 4-core processor-sharing queue" in str(fit.ceiling({0.99: 0.2}))
    pool = _quiet(obs, 120.0, servers=4, discipline="fcfs", family="exponential", delay=None)
    one = _quiet({q: float(ps.response_quantile(q, 30.0, svc)) for q in QS}, 30.0, discipline="ps",
                 family="exponential", delay=None)
    assert "Node.js" not in str(pool.ceiling({0.99: 0.2})) and "Node.js" not in str(one.ceiling({0.99: 0.2}))


def test_a_candidate_on_the_edge_of_its_model_does_not_win(monkeypatch):
    # The exact M/H2/1-PS quantiles of a CPU time with scv 60, beyond the scv the PS search reaches
    # (held here where the tables stopped when this rule was made, lognormal at 20 and gamma at
    # 11.7; they now reach 53, where this lognormal fits inside at scv 21): the PS lognormal fit
    # runs to its bound and, truncated there, still has the smallest QAIC (by 0.28 before this
    # rule).  A truncation is not a fitted model; it is ranked after the candidates fitted inside
    # their range.
    from capacity import _quantile_table

    tops = {"lognormal": 20.0, "gamma": 11.72}
    monkeypatch.setattr(_quantile_table, "ps_scv_range", lambda family, servers: (0.01, tops[family]))
    q = np.array(QS)
    t = ps.response_quantile(q, 50.0, Service.hyperexponential(0.01, 60.0))
    data = dict(zip(QS, t.tolist()))
    edge = _quiet(data, arrival_rate=50.0, discipline="ps", family="lognormal")
    assert edge._at_an_edge() == ["log_scv"] and edge.scv_ == pytest.approx(20.0, rel=1e-3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        best = from_percentiles(data, arrival_rate=50.0)
    table = best.candidates_
    assert best._at_an_edge() == [] and table.loc[0, "at_an_edge"] == ""
    on_edge = table["at_an_edge"] != ""
    assert on_edge.sum() >= 2 and (table.loc[on_edge, "weight"] == 0).all()
    assert table["weight"].sum() == pytest.approx(1.0)
    # every candidate fitted inside its range is ranked before every truncated one
    assert list(on_edge) == sorted(on_edge)
    ps_lognormal = table[(table["discipline"] == "ps") & (table["family"] == "lognormal") & (table["delay"] == "none")]
    assert ps_lognormal["delta_qaic"].iloc[0] < 0       # it did fit better, and is said to
    assert "set aside because an estimate sits on the edge" in best.method
    # Setting it aside narrows the intervals; that the data do not rule it out is said.
    said = [str(w.message) for w in caught if "reached the edge of what it can compute" in str(w.message)]
    assert len(said) == 1 and "ps, lognormal, delay none: log_scv on its bound" in said[0], said


@pytest.mark.parametrize("servers, family, scv", [(4, "gamma", 0.02), (4, "gamma", 12.0), (6, "lognormal", 2.0),
                                                  (48, "gamma", 1.0)])
def test_a_default_fit_on_several_cores_reads_only_the_tables(monkeypatch, servers, family, scv):
    """The default fit's PS candidates search the scv range the M/G/c-PS tables hold for that core
    count (``_quantile_table.ps_scv_range``: to 8 for gamma, from 0.0088 for both), so no
    evaluation is computed directly (0.1-0.7 s a load): on 4 cores a default fit of a busy loop's
    percentiles took 4.6 s, on 3 or 6 cores any fit 8-9 s, and one of gamma scv 12 10 s."""
    import capacity.ps as ps_module

    svc = getattr(Service, family)(0.05, scv)
    lam = 0.6 * servers / 0.05
    q = [0.5, 0.9, 0.99, 0.999]
    obs = dict(zip(q, np.asarray(ps.response_quantile(q, lam, svc, servers=servers))))

    def direct(*args, **kwargs):
        raise AssertionError("an M/G/c-PS point was computed directly")

    monkeypatch.setattr(ps_module, "_mgc_sf_pdf", direct)
    monkeypatch.setattr(ps_module, "_det_sf_pdf", direct)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = from_percentiles(obs, lam, servers=servers)
    # Gamma of scv 12 lies beyond the tables' 8: the fit says so at its bound (FCFS may then fit
    # better); inside them PS is found.
    assert fit.discipline == "ps" or scv > 8


def test_a_wrong_model_is_searched_once_and_a_failed_search_twice(monkeypatch):
    """``capacity.fit._solve.fit_space`` restarts a poor fit from a small grid only where a grid
    point already fits better than the first optimum, or the first search failed.  PS with gamma
    CPU on exact M/G/1 lognormal percentiles at three loads misses them by 16 % RMS (the misfit
    is the model's): one search, and the same optimum as a restart forced there reaches.  A
    search stopped after one evaluation (``max_nfev=1``) is searched again."""
    from capacity.fit import _solve

    q = [0.5, 0.9, 0.99, 0.999]
    svc = Service.lognormal(0.02, 2.0)
    data = [{"percentiles": dict(zip(q, fcfs.response_quantile(q, lam, svc))), "arrival_rate": lam}
            for lam in (10.0, 20.0, 30.0)]
    searches = []
    least_squares, grid_start = _solve._least_squares, _solve.grid_start

    def counted(space, theta0, max_nfev):
        sol = least_squares(space, theta0, max_nfev)
        searches.append(sol.status)
        return sol

    monkeypatch.setattr(_solve, "_least_squares", counted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        once = from_percentiles(data, discipline="ps", family="gamma", delay=None)
        assert once.fit_quality_["rms_rel_error"] > 0.1 and len(searches) == 1, searches
        searches.clear()
        # the former rule: always search again from the grid's best point
        monkeypatch.setattr(_solve, "grid_start", lambda space, theta: (grid_start(space, theta)[0], -1.0))
        forced = from_percentiles(data, discipline="ps", family="gamma", delay=None)
        assert len(searches) == 2, searches
        assert forced.cpu_per_request_ == pytest.approx(once.cpu_per_request_, rel=1e-9)
        assert forced.deviance_ == pytest.approx(once.deviance_, rel=1e-9)
        monkeypatch.setattr(_solve, "grid_start", grid_start)
        searches.clear()
        from_percentiles(data, discipline="ps", family="gamma", delay=None, max_nfev=1)
    assert len(searches) == 2 and searches[0] <= 0, searches
