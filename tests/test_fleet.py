"""capacity.fit.fleet and `capacity fleet` (issue 18, point 3): one fit and one ceiling per service.

References: per-request logs of seeded exact simulations (capacity.sim) with a known CPU cost -- an
nginx access log of a blocking (FCFS) service and a CSV table of an event-loop (PS) service, each at four
loads -- so each row is checked against the single-service fit of the same log (exactly), against the
known truth (inside the fit's stated interval), and its p99 against the exact p99 of the logged
durations (within the histogram's bucket width).  The Dask run is checked against the local run
(exactly), and a real Prometheus server (Debian's binary; skipped without it) gives the per-job grouping.
"""
from __future__ import annotations

import contextlib
import functools
import gzip
import json
import math
import shutil
import time
import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("polars")
pytest.importorskip("pyarrow")

from capacity import Service, logs  # noqa: E402
from capacity.exceptions import FitWarning  # noqa: E402
from capacity.fit import FleetReport, fleet, from_histograms, from_prometheus  # noqa: E402
from capacity.plan import qps_ceiling  # noqa: E402
from capacity.sim import simulate  # noqa: E402

import _concurrent_setups  # noqa: E402
from _cli import run_cli  # noqa: E402
from _scripts import load_script  # noqa: E402

T0 = pd.Timestamp("2024-03-01", tz="UTC")
SLO = {0.99: 0.2}
#: name -> (E[S] seconds, scv, discipline, the four request rates), 600 s at each rate
TRUTH = {"api": (0.02, 1.0, "fcfs", (10.0, 20.0, 30.0, 40.0)),
         "search": (0.01, 2.0, "ps", (20.0, 40.0, 60.0, 75.0))}
EDGE_RATIO = 10 ** 0.1   # the width of the default buckets of logs.aggregate


def _simulate(name: str, seed: int) -> pd.DataFrame:
    mean, scv, discipline, rates = TRUTH[name]
    req = simulate(pd.Series(np.repeat(rates, 600)), Service.lognormal(mean, scv), discipline, seed=seed).requests
    return pd.DataFrame({"time": T0 + pd.to_timedelta(req["completion"].to_numpy(), unit="s"),
                         "duration": req["response"].to_numpy()})


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory):
    """logs/api/access.log.gz (nginx: 1 s time stamps, ms durations), logs/search/requests.csv, and
    logs/broken/access.log (nothing parses).  Returns (directory, {service: logged durations and times})."""
    root = tmp_path_factory.mktemp("fleet") / "logs"
    logged = {}
    api = _simulate("api", seed=3)
    api["duration"] = np.round(api["duration"].to_numpy(), 3)          # as nginx writes $request_time
    stamps = api["time"].dt.strftime("%d/%b/%Y:%H:%M:%S +0000")
    text = "".join(f'10.0.0.1 - - [{s}] "GET /api/items?id=7 HTTP/1.1" 200 512 "-" "sim" {d:.3f} {d:.3f}\n'
                   for s, d in zip(stamps, api["duration"]))
    (root / "api").mkdir(parents=True)
    (root / "api" / "access.log.gz").write_bytes(gzip.compress(text.encode()))
    logged["api"] = api.assign(time=api["time"].dt.floor("s"))
    search = _simulate("search", seed=4)
    (root / "search").mkdir()
    pd.DataFrame({"timestamp": search["time"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                  "route": "/search", "latency_s": search["duration"]}).to_csv(root / "search" / "requests.csv",
                                                                                  index=False)
    logged["search"] = search
    (root / "broken").mkdir()
    (root / "broken" / "access.log").write_text("this is not an access log\nnor is this\n")
    return root, logged


@pytest.fixture(scope="module")
def local_report(fleet_dir):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = fleet(fleet_dir[0], SLO)
    return report, caught


def _single(path):
    """The single-service pipeline the fleet must reproduce: aggregate, fit, ceiling."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        windows = logs.aggregate(path, window=60, by_endpoint=False).windows()
        fit = from_histograms(windows, measured_at="proxy")
        return windows, fit, fit.ceiling(SLO, interval=0.95)


@pytest.fixture(scope="module")
def single():
    """_single, run once per log for the module: two tests compare the fleet with the search log's fit."""
    return functools.cache(_single)


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_rows_are_the_single_service_fits_and_hold_the_truth(fleet_dir, local_report, single, name):
    root, logged = fleet_dir
    report, _ = local_report
    row = report.table.set_index("service").loc[name]
    windows, fit, (ceiling, low, high) = single(root / name)
    # exactly the single-service fit of the same log
    assert row["error"] == ""
    assert (row["discipline"], row["family"]) == (fit.discipline, fit.family)
    assert row["cpu_per_request"] == fit.cpu_per_request_ and row["scv"] == fit.scv_
    assert (row["cpu_per_request_low"], row["cpu_per_request_high"]) == \
        tuple(fit.summary.loc["cpu_per_request", ["lower", "upper"]])
    assert (row["ceiling_qps"], row["ceiling_low"], row["ceiling_high"]) == (ceiling.qps, low, high)
    assert row["peak_qps"] == max(w["arrival_rate"] for w in windows)
    assert row["headroom"] == pytest.approx(ceiling.qps / row["peak_qps"] - 1, rel=1e-12)
    assert row["windows"] == len(windows) >= 38 and report.fits[name] == fit.to_dict()
    # the known truth: the discipline, and the cost and the ceiling inside the stated 95 % intervals
    mean, scv, discipline, rates = TRUTH[name]
    truth = qps_ceiling(Service.lognormal(mean, scv), 1, SLO, discipline=discipline).qps
    assert row["discipline"] == discipline
    assert row["cpu_per_request_low"] <= mean <= row["cpu_per_request_high"]
    assert row["ceiling_low"] <= truth <= row["ceiling_high"]
    assert row["peak_qps"] == pytest.approx(rates[-1], rel=0.1)
    # p99 of the fitted windows' requests, read off the histogram: within the bucket's width of the exact one
    starts = pd.DatetimeIndex([w["start"] for w in windows])
    t = logged[name]["time"]
    inside = (t >= starts.min()) & (t < starts.max() + pd.Timedelta(seconds=60))
    assert inside.sum() == row["requests"]
    exact = np.quantile(logged[name]["duration"][inside], 0.99, method="inverted_cdf")
    assert exact / EDGE_RATIO <= row["p99"] <= exact * EDGE_RATIO


def test_a_broken_service_is_a_row_with_its_error(local_report):
    report, caught = local_report
    assert isinstance(report, FleetReport) and list(report.table["service"]) == ["api", "broken", "search"]
    broken = report.table.set_index("service").loc["broken"]
    assert broken["error"].startswith("cannot read ") and "none of the 2 lines parsed" in broken["error"]
    assert math.isnan(broken["cpu_per_request"]) and math.isnan(broken["ceiling_qps"])
    said = [str(w.message) for w in caught if issubclass(w.category, FitWarning)]
    assert len(said) == 1 and "could not be fitted: broken" in said[0]
    text = str(report)
    assert "broken: cannot read" in text and "Least headroom: " in text and "api" in text and "search" in text
    record = report.to_dict()
    json.dumps(record)   # JSON-ready
    assert [r["service"] for r in record["table"]] == ["api", "broken", "search"]
    assert report.to_frame().equals(report.table)


def test_dask_local_cluster_gives_the_same_table(fleet_dir, local_report):
    distributed = pytest.importorskip("dask.distributed", reason="dask[distributed] is not installed")
    root, _ = fleet_dir
    report, _ = local_report
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FitWarning)
            many = fleet(root, SLO, client=client)
        code, out, err = run_cli("fleet", str(root), "--slo", "p99=200ms", "--scheduler", cluster.scheduler_address,
                                 "--json")
    pd.testing.assert_frame_equal(many.table, report.table, check_exact=True)
    assert many.fits == report.fits and str(many) == str(report)
    assert code == 0, err
    assert json.loads(out)["table"] == json.loads(json.dumps(report.to_dict()))["table"]


def test_per_service_slo_and_servers(fleet_dir, local_report, single):
    root, _ = fleet_dir
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        report = fleet({"search": root / "search"}, {"search": {0.99: 0.3}}, servers={"*": 1})
    row = report.table.iloc[0]
    _, fit, _ = single(root / "search")
    assert row["ceiling_qps"] == fit.ceiling({0.99: 0.3}).qps and row["slo"] == "p99 <= 300 ms"
    assert report.slo == {"search": {0.99: 0.3}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        bare = fleet([root / "search"], {"search": None})
    assert math.isnan(bare.table.iloc[0]["ceiling_qps"]) and bare.table.iloc[0]["service"] == "search"
    assert "no SLO given" in bare.table.iloc[0]["warnings"][-1]


@pytest.mark.parametrize("kwargs, match", [
    (dict(services={}, slo=SLO), "services"),
    (dict(services=["a/x.log", "b/x.log"], slo=SLO), "both make the service name 'x'"),
    (dict(services={"a": "x.log"}, slo={0.99: -1}), r"slo\[0.99\]"),
    (dict(services={"a": "x.log"}, slo={"b": SLO}), "slo names services that are not in the fleet"),
    (dict(services={"a": "x.log"}, slo=SLO, discipline="rr"), "discipline"),
    (dict(services={"a": "x.log"}, slo=SLO, histogram="h"), "histogram='h' applies to a Prometheus URL"),
    (dict(services={"a": "x.log"}, slo=SLO, window=0), "window"),
    (dict(services={"a": "x.log"}, slo=SLO, client="tcp://127.0.0.1:8786"), "client"),
    (dict(services="http://127.0.0.1:1", slo=SLO), "histogram: required"),
    (dict(services="http://127.0.0.1:1", slo=SLO, histogram="h", label="le"), "label"),
])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fleet(**kwargs)


def test_a_missing_log_is_a_row_not_a_crash(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        report = fleet({"gone": tmp_path / "nowhere.log"}, SLO)
    assert report.table.iloc[0]["error"] == f"cannot read {tmp_path / 'nowhere.log'}: No such file or directory: " \
                                            f"{tmp_path / 'nowhere.log'}"


def test_a_table_whose_duration_column_names_no_unit_takes_it_stated(fleet_dir, tmp_path):
    """A CSV whose duration column says no unit (``latency``, in ms) is refused with the parameter
    to state it; stated for that service (API and CLI), the row is the one of the same
    milliseconds in a column that names its unit (``latency_ms``)."""
    _, logged = fleet_dir
    search = logged["search"]
    ms = np.round(1e3 * search["duration"].to_numpy(), 3)
    stamps = search["time"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    for name, column in (("named", "latency_ms"), ("bare", "latency")):
        (tmp_path / name).mkdir()
        pd.DataFrame({"timestamp": stamps, column: ms}).to_csv(tmp_path / name / "requests.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        refused = fleet({"bare": tmp_path / "bare"}, SLO)
        stated = fleet({"bare": tmp_path / "bare", "named": tmp_path / "named"}, SLO,
                       duration_unit={"bare": "ms"})
    error = refused.table.iloc[0]["error"]
    assert "duration_unit" in error and "latency" in error, error
    rows = stated.table.set_index("service")
    assert rows.loc["bare", "error"] == "", rows.loc["bare", "error"]
    same = [c for c in rows.columns if c not in ("source", "warnings")]
    pd.testing.assert_series_equal(rows.loc["bare", same], rows.loc["named", same], check_names=False)
    assert rows.loc["bare", "cpu_per_request"] == pytest.approx(TRUTH["search"][0], rel=0.2)
    code, out, err = run_cli("fleet", f"bare={tmp_path / 'bare'}", "--slo", "p99=200ms",
                             "--duration-unit", "bare:ms", "--json")
    assert code == 0, err
    assert json.loads(out)["table"][0]["ceiling_qps"] == pytest.approx(rows.loc["bare", "ceiling_qps"])
    for args, message in [
        (("--duration-unit", "minutes"), "argument --duration-unit: expected s, ms, us or ns"),
        (("--duration-unit", "ms", "--prometheus", "http://127.0.0.1:1", "--histogram", "h"),
         "argument --duration-unit: applies to logs"),
        (("--duration-unit", "other:ms"), "duration_unit names services that are not in the fleet"),
    ]:
        code, out, err = run_cli("fleet", *(() if "--prometheus" in args else (f"bare={tmp_path / 'bare'}",)),
                                 "--slo", "p99=200ms", *args)
        assert code == 2 and message in err and "Traceback" not in err, (args, err)
    with pytest.raises(ValueError, match="duration_unit must be one of"):
        fleet({"bare": tmp_path / "bare"}, SLO, duration_unit="msec")
    with pytest.raises(ValueError, match="duration_unit='ms' applies to logs"):
        fleet("http://127.0.0.1:1", SLO, histogram="h", duration_unit="ms")


def test_cli_table_and_usage_errors(fleet_dir):
    root, _ = fleet_dir
    code, out, err = run_cli("fleet", f"search={root / 'search'}", "--slo", "p99=300ms", "--servers", "search:1")
    assert code == 0, err
    assert out.splitlines()[0].startswith("Fleet of 1 service: ")
    assert "ps lognormal" in out and "p99 <= 300 ms" in out
    for args, message in [
        (("fleet", str(root)), "--slo"),
        (("fleet", "--slo", "p99=300ms"), "argument SERVICES"),
        (("fleet", str(root), "--slo", "p99=300ms", "--slo", "nope:p99=1s"), "argument --slo: slo names services"),
        (("fleet", str(root), "--slo", "p99=300ms", "--histogram", "h"),
         "argument --histogram: applies to --prometheus"),
        (("fleet", str(root), "--slo", "p99=300ms", "--prometheus", "http://127.0.0.1:1", "--histogram", "h"),
         "argument SERVICES: not used"),
        (("fleet", "--slo", "p99=300ms", "--prometheus", "http://127.0.0.1:1"), "argument --histogram: required"),
        (("fleet", str(root), "--slo", "p99=300ms", "--scheduler", "tcp://127.0.0.1:1"), "argument --scheduler"),
        (("fleet", "a=x.log", "y.log", "--slo", "p99=300ms"), "name every service"),
    ]:
        code, out, err = run_cli(*args)
        assert code == 2 and message in err and "Traceback" not in err, (args, err)


# ---------------------------------------------------------------------- a real Prometheus, one job per service
PROM_LE = [0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128]
PROM_PHASE = 10.0
PROM_LEAD = 5.0
PROM_TRUTH = {"checkout": (Service.lognormal(0.002, 1.0), "ps", (100.0, 200.0, 300.0)),
              "images": (Service.lognormal(0.004, 1.0), "fcfs", (50.0, 100.0, 150.0))}


def _harness():
    return load_script("tools/prometheus_harness.py")


def _feed(rows_by_job: dict, meters: dict, tick: float = 0.01) -> float:
    """Play every job's simulated requests into its own histogram and CPU counter in wall-clock time."""
    t0, done = time.time(), dict.fromkeys(rows_by_job, 0)
    while any(done[j] < len(rows) for j, rows in rows_by_job.items()):
        now = time.time() - t0
        for job, rows in rows_by_job.items():
            upto = int(np.searchsorted(rows[:, 0], now, side="right"))
            hist, cpu = meters[job]
            for _, response, work in rows[done[job]:upto]:
                hist.observe(response)
                cpu.inc(work)
            done[job] = upto
        time.sleep(tick)
    return t0


@contextlib.contextmanager
def _prometheus_fleet():
    if shutil.which("prometheus") is None:
        pytest.skip("the prometheus binary is not installed (Debian package 'prometheus'; .ci/run installs it)")
    pytest.importorskip("prometheus_client", reason="prometheus_client is not installed")
    h = _harness()
    rows = {job: h.simulated_requests(svc, list(zip(rates, (PROM_LEAD + PROM_PHASE, PROM_PHASE,
                                                              PROM_PHASE + PROM_LEAD))), discipline, seed=60 + i)
            for i, (job, (svc, discipline, rates)) in enumerate(PROM_TRUTH.items())}
    with h.exporter(PROM_LE) as (a_target, a_hist, a_cpu), h.exporter(PROM_LE) as (b_target, b_hist, b_cpu), \
            h.run_prometheus({"checkout": [a_target], "images": [b_target]}) as url:
        h.wait_for_scrapes(url, 2, count=1)   # the empty histograms scraped first
        t0 = _feed(rows, {"checkout": (a_hist, a_cpu), "images": (b_hist, b_cpu)})
        h.wait_for_scrapes(url, 2, after=time.time())   # a scrape of each job after the last request
        yield url, t0 + PROM_LEAD


# This module's own exporters and Prometheus, run at the same time as the other modules' (conftest.py)
_concurrent_setups.register("prometheus_fleet", _prometheus_fleet)


@pytest.fixture(scope="module")
def prometheus_fleet(concurrent_setups):
    with concurrent_setups.enter("prometheus_fleet") as run:
        yield run


def test_prometheus_fleet_one_row_per_job(prometheus_fleet):
    """Two services scraped under two jobs: one grouped query, one row each, equal to fitting each job alone
    (its own selector), and the CPU per request from the CPU counter within 5 % of the truth."""
    url, t0 = prometheus_fleet
    span = dict(start=t0, end=t0 + 3 * PROM_PHASE, step=PROM_PHASE)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        report = fleet(url, {"*": {0.99: 0.05}}, histogram="demo_request_duration_seconds", measured_at="client",
                       **span)
        alone = {job: from_prometheus(url, "demo_request_duration_seconds", f'job="{job}"', measured_at="client",
                                      **span) for job in PROM_TRUTH}
    table = report.table.set_index("service")
    assert list(table.index) == ["checkout", "images"] and (table["error"] == "").all()
    for job, (svc, discipline, rates) in PROM_TRUTH.items():
        row = table.loc[job]
        assert row["cpu_per_request"] == pytest.approx(alone[job].cpu_per_request_, rel=1e-9)
        assert row["cpu_per_request"] == pytest.approx(svc.mean, rel=0.05)
        assert row["peak_qps"] == pytest.approx(rates[-1], rel=0.1) and row["windows"] == 3
    code, out, err = run_cli("fleet", "--prometheus", url, "--histogram", "demo_request_duration_seconds",
                             "--slo", "p99=50ms", "--since", "1h", "--step", "10s")
    assert code == 0, err
    assert "checkout" in out and "images" in out
