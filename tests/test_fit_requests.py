"""Tests of capacity.fit.from_requests (issue 4, section 3).

References: synthetic per-request logs from seeded simulations (capacity.sim, exact
request-by-request simulators) with a known CPU cost; the printed request-log excerpt of seed
article 000 (data/incident_request_log.csv) for the "too little data" path.
"""
from __future__ import annotations

import pathlib
import warnings

import numpy as np
import pandas as pd
import pytest

from capacity import Service
from capacity.exceptions import FitWarning, IdentifiabilityWarning
from capacity.fit import RequestsFit, from_requests
from capacity.sim import simulate

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
MEAN = 0.04


def _log(mean=MEAN, scv=1.0, rates=(5.0, 10.0, 15.0, 20.0), seconds=3000, seed=1, start="2024-03-01"):
    """A per-request log of an M/G/1 FCFS server whose rate steps through ``rates``."""
    series = pd.Series(np.repeat(np.asarray(rates, float), seconds))
    req = simulate(series, Service.lognormal(mean, scv), "fcfs", seed=seed).requests
    t0 = pd.Timestamp(start, tz="UTC")
    return pd.DataFrame({"time": t0 + pd.to_timedelta(req["completion"].to_numpy(), unit="s"),
                         "duration": req["response"].to_numpy()}), req


def _quiet(*args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = from_requests(*args, **kwargs)
    return res, caught


def test_recovers_cost_from_completion_stamped_log():
    # Truth: 40 ms lognormal (scv 1) CPU per request, FCFS, four load levels (utilisation
    # 0.2-0.8), nginx-style completion time stamps.  Target: cost within 3 % (issue 4, sec. 7).
    log, req = _log()
    res, caught = _quiet(log, window="10s", discipline="fcfs", bins=4)
    assert isinstance(res, RequestsFit)
    assert abs(res.cpu_per_request_ / MEAN - 1) < 0.03
    assert abs(res.scv_ - 1.0) < 0.15
    assert len(res.bins_) == 4
    assert res.windows_["requests"].sum() == len(req)
    assert not [w for w in caught if issubclass(w.category, FitWarning)]
    # Per-window QPS is requests / window length.
    np.testing.assert_allclose(res.windows_["qps"], res.windows_["requests"] / 10.0)


def test_start_stamped_log_gives_the_same_windows():
    log, req = _log(rates=(8.0, 16.0), seconds=2000)
    start = pd.DataFrame({"time": req["arrival"].to_numpy(), "duration": req["response"].to_numpy()})
    end = pd.DataFrame({"time": req["completion"].to_numpy(), "duration": req["response"].to_numpy()})
    a, _ = _quiet(start, window="10s", time_is="start", discipline="fcfs", bins=2)
    b, _ = _quiet(end, window="10s", time_is="end", discipline="fcfs", bins=2)
    # completion - response = arrival up to rounding, so the bins hold the same requests.
    assert a.bins_["requests"].tolist() == b.bins_["requests"].tolist()
    assert a.cpu_per_request_ == pytest.approx(b.cpu_per_request_, rel=1e-6)
    assert abs(a.cpu_per_request_ / MEAN - 1) < 0.03


def test_endpoints_fitted_separately_and_thin_ones_skipped():
    # Two endpoints served by separate single-core processes (so each is its own queue, the
    # assumption of the per-endpoint fits), costs 20 ms and 60 ms; a third with 50 requests.
    a, _ = _log(mean=0.02, rates=(10.0, 25.0), seconds=1500, seed=2)
    b, _ = _log(mean=0.06, rates=(4.0, 10.0), seconds=1500, seed=3)
    a["endpoint"], b["endpoint"] = "/api/cheap", "/api/dear"
    c = b.iloc[:50].copy()
    c["endpoint"] = "/api/rare"
    df = pd.concat([a, b, c], ignore_index=True)
    res, caught = _quiet(df, window="10s", discipline="fcfs", bins=2, min_requests=1000, endpoint_queue="own")
    assert set(res.endpoint_fits_) == {"/api/cheap", "/api/dear"}
    assert abs(res.endpoint_fits_["/api/cheap"].cpu_per_request_ / 0.02 - 1) < 0.03
    assert abs(res.endpoint_fits_["/api/dear"].cpu_per_request_ / 0.06 - 1) < 0.03
    table = res.endpoints_.set_index("endpoint")
    assert table.loc["/api/rare", "status"].startswith("skipped")
    assert table["requests"].sum() == len(df)
    assert any(issubclass(w.category, IdentifiabilityWarning) and "/api/rare" in str(w.message)
               for w in caught)


def _shared_loop(discipline, seed, api_scv=1.0):
    """A log of one queue serving a 40 ms lognormal API (2 requests in 7) and 1 ms static files
    (5 in 7), the utilisation stepping 0.2/0.4/0.6/0.8 for 1500 s each; the requests and E[S]."""
    rng = np.random.default_rng(seed)
    sizes = np.concatenate([Service.lognormal(0.040, api_scv).sample(200_000, rng), np.full(500_000, 0.001)])
    mix = Service.empirical(sizes)
    es = float(mix.mean)
    req = simulate(pd.Series(np.repeat([0.2, 0.4, 0.6, 0.8], 1500) / es), mix, discipline, seed=seed).requests
    static = req["service"].to_numpy() == 0.001
    log = pd.DataFrame({"time": req["completion"], "duration": req["response"],
                        "endpoint": np.where(static, "/static", "/api")})
    return log, req, static, es


@pytest.mark.parametrize("discipline", ["ps", "fcfs"])
@pytest.mark.parametrize("seed", [3, 4])
def test_endpoints_sharing_one_queue_get_their_own_cpu(discipline, seed):
    """An event loop (PS) or one blocking worker (FCFS) serving a 40 ms API and 1 ms static files.
    Each endpoint's CPU per request from its latencies on the shared queue.  Under PS every cost
    is within 5 % of the truth (the fitted E[S] itself is 1-2 % off: a common factor).  Under
    FCFS the attribution is additive, so the E[S] error is a shift of the same seconds for every
    endpoint: the API within 5 %, the static file within that shift (plus 5 % of its cost).
    Fitted as queues of their own, the static file read 2.2 ms (PS) and 14 ms (FCFS): it took the
    wait behind the API for its own cost."""
    log, _, _, es = _shared_loop(discipline, seed)
    res, _ = _quiet(log, discipline=discipline)
    table = res.endpoints_.set_index("endpoint")
    assert table.loc["/api", "cpu_per_request"] == pytest.approx(0.040, rel=0.05)
    static = table.loc["/static", "cpu_per_request"]
    if discipline == "ps":
        assert static == pytest.approx(0.001, rel=0.05)
    else:
        assert abs(static - 0.001) <= abs(res.cpu_per_request_ - es) + 5e-5
    assert (table["status"] == "fitted on the shared queue").all()
    own, _ = _quiet(log, discipline=discipline, endpoint_queue="own")
    assert own.endpoints_.set_index("endpoint").loc["/static", "cpu_per_request"] > 0.0015
    # The endpoints' costs add up to the queue's E[S] (the normalisation of the attribution).
    w = table["share"].to_numpy()
    assert w @ table["cpu_per_request"].to_numpy() == pytest.approx(res.cpu_per_request_, rel=1e-9)


@pytest.mark.parametrize("discipline", ["ps", "fcfs"])
def test_endpoint_table_of_a_shared_queue_plans_each_endpoints_latency(discipline):
    """The fitted table through plan.endpoint_mix at the top load bin's rate against what the
    simulated static files and API calls met there: each endpoint's mean response within 10 %
    (PS: its CPU, within 5 %, times the queue's slowdown at 80 %, which moves 5 times as fast as
    the utilisation; FCFS: the queue's wait, the same for both, plus its CPU)."""
    from capacity import plan

    log, req, static, es = _shared_loop(discipline, 3)
    res, _ = _quiet(log, discipline=discipline)
    top = (req["arrival"] > 4500.0 + 60.0).to_numpy()          # the last step, its first minute left out
    rate = top.sum() / (6000.0 - 4560.0)
    mix = plan.endpoint_mix(res.endpoints_, arrival_rate=rate, discipline=discipline, q=None).table
    for name, sel in (("/static", static), ("/api", ~static)):
        measured = req["response"].to_numpy()[top & sel].mean()
        assert mix.loc[name, "mean_response_s"] == pytest.approx(measured, rel=0.10), name


def test_endpoint_queue_must_be_shared_or_own():
    log, _ = _log(rates=(10.0,), seconds=300)
    with pytest.raises(ValueError, match="endpoint_queue"):
        from_requests(log, endpoint_queue="separate")


def test_one_huge_url_does_not_size_every_row():
    """Grouping by endpoint went through an array of str, sized to the longest value in every
    row: one 100 kB URL in this 40 000-row log asked for 16 GB.  Now its peak memory stays small."""
    import tracemalloc

    a, _ = _log(mean=0.02, rates=(10.0, 30.0), seconds=1000, seed=2)
    a["endpoint"] = "/api/cheap"
    a.loc[a.index[:3], "endpoint"] = "/search?q=" + "x" * 100_000
    tracemalloc.start()
    try:
        res, _ = _quiet(a, window="10s", discipline="fcfs", bins=2, min_requests=1000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 300e6, f"peak {peak / 1e6:.0f} MB"
    table = res.endpoints_.set_index("endpoint")
    assert table.loc["/api/cheap", "status"].startswith("fitted")
    assert table.loc["/search?q=" + "x" * 100_000, "requests"] == 3


def test_nginx_columns_are_recognised():
    # read_nginx's frame names the latency request_time and the endpoint path.
    log, _ = _log(rates=(10.0, 20.0), seconds=1500, seed=4)
    nginx = log.rename(columns={"duration": "request_time"})
    nginx["path"] = "/api/x"
    res, _ = _quiet(nginx, window="10s", discipline="fcfs", bins=2)
    assert abs(res.cpu_per_request_ / MEAN - 1) < 0.03
    assert res.endpoint_fits_ == {}                  # one endpoint: no per-endpoint fits


def test_incident_excerpt_is_too_thin_to_fit():
    # Seed article 000's printed log: 49 requests in 35 s, 9 of them stamped 09:20:25.
    raw = pd.read_csv(DATA / "incident_request_log.csv")
    df = pd.DataFrame({"time": pd.to_datetime("2024-01-01 " + raw["time"]),
                       "duration": raw["duration_s"], "endpoint": raw["endpoint"]})
    res, caught = _quiet(df, window="1s", time_is="start")
    assert res.windows_["requests"].sum() == 49
    assert res.windows_["requests"].iloc[0] == 9
    assert res.fit_ is None
    assert any(issubclass(w.category, FitWarning) for w in caught)
    with pytest.raises(ValueError, match="no fit"):
        res.predict(0.99, 10.0)


def test_missing_durations_are_counted():
    log, _ = _log(rates=(10.0, 20.0), seconds=1000, seed=5)
    log.loc[::100, "duration"] = np.nan
    res, caught = _quiet(log, window="10s", discipline="fcfs", bins=2)
    n_nan = int(log["duration"].isna().sum())
    assert any(f"{n_nan} of {len(log)} rows" in str(w.message) for w in caught)
    assert res.n_observations == len(log) - n_nan


@pytest.mark.parametrize("kwargs,match", [
    (dict(df=[1, 2, 3]), "DataFrame"),
    (dict(df=pd.DataFrame({"time": [], "duration": []})), "no rows"),
    (dict(df=pd.DataFrame({"when": [1.0], "duration": [0.1]})), "time column"),
    (dict(df=pd.DataFrame({"time": [1.0], "duration": [0.1]}), window="soon"), "window"),
    (dict(df=pd.DataFrame({"time": [1.0], "duration": [0.1]}), time_is="middle"), "time_is"),
    (dict(df=pd.DataFrame({"time": [1.0], "duration": [0.1]}), bins=0), "bins"),
    (dict(df=pd.DataFrame({"time": [1.0], "duration": [0.1]}), quantiles=[1.5]), "quantiles"),
    (dict(df=pd.DataFrame({"time": [1.0], "duration": [0.1]}), by_endpoint=True), "endpoint"),
    (dict(df=pd.DataFrame({"time": [1.0], "duration": [0.1]}), utilization=0.2), "utilization"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        from_requests(**kwargs)


def test_one_bin_over_varying_load_is_flagged():
    # Pooling 5-20 req/s into one "steady state" misstates the cost (~17 % here): the bin's
    # window counts vary ~100x more than Poisson noise, and the fit must say so.
    log, _ = _log()
    res, caught = _quiet(log, discipline="fcfs", bins=1)
    assert res.bins_["dispersion"].iloc[0] > 4
    assert any(issubclass(w.category, FitWarning) and "mixes different loads" in str(w.message)
               for w in caught)
