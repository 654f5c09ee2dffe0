"""capacity.fit.from_prometheus against a real Prometheus server.

The test starts Debian's ``prometheus`` binary on a loopback port with a temporary config and
data directory; it scrapes, every second, a local ``prometheus_client`` exporter whose
histogram and CPU counter are fed in wall-clock time by a seeded simulation of an M/G/1-PS
queue (a 2 ms lognormal CPU time at utilisation 0.2, 0.4 and 0.6, ten seconds each).  The fit
then goes through the server's HTTP API.  Skips with the reason when the binary or the client
library is absent; ``.ci/run`` installs both.

The saved-answer reader and the error messages are tested without a server on hand-written
query_range answers.
"""
from __future__ import annotations

import contextlib
import json
import math
import pathlib
import shutil
import time

import numpy as np
import pytest

from capacity import Service, ps
from capacity.exceptions import FitWarning, SourceError
from capacity.fit import from_prometheus, from_prometheus_json

import _concurrent_setups  # noqa: E402 -- tests/ helper
from _scripts import load_script  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
LE = [0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128]
SERVICE = Service.lognormal(0.002, 1.0)
PHASE = 10.0                    # seconds at each load
RATES = (100.0, 200.0, 300.0)   # utilisation 0.2, 0.4, 0.6
# Load runs LEAD seconds before the first window and after the last at the first and last rate:
# increase() extrapolates to a window's edges from the scrapes inside it, which is right only
# when the counters were already moving steadily at the edge (from a standstill at the very
# edge, 28 % of the first window's requests went missing).
LEAD = 5.0


def _harness():
    return load_script("tools/prometheus_harness.py")


harness = _harness()


@contextlib.contextmanager
def _prometheus_run():
    if shutil.which("prometheus") is None:
        pytest.skip("the prometheus binary is not installed (Debian package 'prometheus'; .ci/run installs it)")
    pytest.importorskip("prometheus_client", reason="prometheus_client is not installed")
    schedule = list(zip(RATES, (LEAD + PHASE, PHASE, PHASE + LEAD)))
    rows = harness.simulated_requests(SERVICE, schedule, seed=40)
    with harness.exporter(LE) as (target, hist, cpu), harness.run_prometheus([target]) as url:
        harness.wait_for_scrapes(url, 1, count=1)   # the empty histogram scraped first: increases start at 0
        t0 = harness.feed(rows, hist, cpu)
        harness.wait_for_scrapes(url, 1, after=time.time())   # a scrape after the last request
        yield url, t0 + LEAD


# This module's own Prometheus and exporter, run at the same time as the other modules' (conftest.py)
_concurrent_setups.register("prometheus_run", _prometheus_run)


@pytest.fixture(scope="module")
def prometheus_run(concurrent_setups):
    with concurrent_setups.enter("prometheus_run") as run:
        yield run


def test_fit_through_a_real_prometheus(prometheus_run):
    """Three windows of 10 s at 100, 200 and 300 req/s: E[S] from the CPU counter within 5 %,
    the request rates within 10 %, and the p99 at utilisation 0.8 (400 req/s, never seen)
    within 25 % of the exact model (5,000-6,000 requests per load: the tail is coarse)."""
    url, t0 = prometheus_run
    with np.errstate(all="ignore"):
        fit = from_prometheus(url, "demo_request_duration_seconds", start=t0, end=t0 + 3 * PHASE,
                              step=PHASE, measured_at="client")
    assert fit.source_["kind"] == "prometheus" and fit.source_["windows"] == 3
    assert "increase(demo_request_duration_seconds_bucket{}[10s])" in fit.source_["queries"]["buckets"]
    rates = fit.windows_["arrival_rate"].to_numpy()
    np.testing.assert_allclose(rates, RATES, rtol=0.10)
    assert fit.cpu_per_request_ == pytest.approx(0.002, rel=0.05)
    assert fit.summary.loc["cpu_per_request", "note"].startswith("from the utilisation law")
    truth = float(ps.response_quantile(0.99, 400.0, SERVICE))
    assert fit.predict(0.99, 400.0) == pytest.approx(truth, rel=0.25)


def test_cpu_counter_with_its_own_matchers(prometheus_run):
    """A histogram timed by a proxy lives under another job than the process's CPU counter: a
    ``cpu`` with its own matchers is queried with them, whatever the histogram's selector."""
    url, t0 = prometheus_run
    with np.errstate(all="ignore"):
        fit = from_prometheus(url, "demo_request_duration_seconds", selector='job="demo"', start=t0,
                              end=t0 + 3 * PHASE, step=PHASE, cpu='process_cpu_seconds_total{job="demo"}',
                              measured_at="client")
    assert fit.source_["queries"]["cpu"] == 'sum(rate(process_cpu_seconds_total{job="demo"}[10s]))'
    assert fit.cpu_per_request_ == pytest.approx(0.002, rel=0.05)
    with pytest.warns(FitWarning, match="CPU query returned no series"), np.errstate(all="ignore"):
        from_prometheus(url, "demo_request_duration_seconds", start=t0, end=t0 + 3 * PHASE, step=PHASE,
                        cpu='process_cpu_seconds_total{job="elsewhere"}', measured_at="client",
                        discipline="ps", family="lognormal", delay=None)


def test_server_errors_become_messages(prometheus_run):
    url, t0 = prometheus_run
    with pytest.raises(SourceError, match="no series"):
        from_prometheus(url, "no_such_histogram", start=t0, end=t0 + 30, step=10, cpu=None)
    with pytest.raises(SourceError, match="answered 400"):
        from_prometheus(url, "demo_request_duration_seconds", selector='job=~"(', start=t0, end=t0 + 30,
                        step=10, cpu=None)


@contextlib.contextmanager
def _stub_prometheus(status: int, body: bytes, content_type: str = "application/json"):
    """A local HTTP server that answers every query_range with ``status`` and ``body``: the answers
    a real Prometheus gives only under conditions a test cannot make (an overloaded server's 503,
    a 422 from a query that fails while running), and a proxy's HTML page in front of it."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):   # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status,body,content_type,message", [
    (422, b'{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}',
     "application/json", r"answered 422 .*many-to-many matching not allowed \(the query could not be executed\)"),
    (503, b'{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}',
     "application/json", r"answered 503 .*timed out.*\(the server is overloaded or the query timed out"),
    (502, b"<html><body>Bad Gateway</body></html>", "text/html", r"answered 502 .*Bad Gateway.*see the server log"),
    (200, b"<html>login</html>", "text/html", r"did not answer JSON: is http://127\.0\.0\.1:\d+ a Prometheus"),
    (200, b'{"status":"error","errorType":"bad_data","error":"invalid parameter"}', "application/json",
     r"bad_data: invalid parameter"),
])
def test_every_kind_of_server_answer_becomes_a_message(status, body, content_type, message):
    """Errors of the server (and of what stands in front of it) are SourceErrors naming the server,
    the code and the reason -- and through the CLI one line on stderr, exit code 2, no traceback."""
    from _cli import run_cli

    with _stub_prometheus(status, body, content_type) as url:
        with pytest.raises(SourceError, match=message):
            from_prometheus(url, "h", start=0, end=600, step=60, cpu=None)
        code, out, err = run_cli("fit", "--prometheus", url, "--histogram", "h")
    assert code == 2 and "Traceback" not in err + out and len(err.strip().splitlines()) == 1, err


def test_unreachable_server_and_bad_ranges():
    port = harness.free_port()
    with pytest.raises(SourceError, match="could not reach Prometheus"):
        from_prometheus(f"http://127.0.0.1:{port}", "h", start=0, end=600, step=60)
    with pytest.raises(ValueError, match="limit of 11000; use step >= 8 s"):
        from_prometheus("http://127.0.0.1:1", "h", start=0, end=86400, step=5)
    with pytest.raises(ValueError, match="start .* must be before end"):
        from_prometheus("http://127.0.0.1:1", "h", start=100, end=50)
    with pytest.raises(ValueError, match="url"):
        from_prometheus("localhost:9090", "h")
    with pytest.raises(ValueError, match="selector"):
        from_prometheus("http://127.0.0.1:1", "h", selector='{job="api"}')
    for bad in ("rate(x[5m])", 'x{job="a"}{b="c"}', "", 3):
        with pytest.raises(ValueError, match="cpu must be a counter's name"):
            from_prometheus("http://127.0.0.1:1", "h", start=0, end=600, step=60, cpu=bad)


# ---------------------------------------------------------------------- saved answers
def _answer(series: list[tuple[dict, list[float]]], t0: float = 1_700_000_000.0, step: float = 60.0) -> dict:
    return {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": metric, "values": [[t0 + step * i, repr(float(v)) if not math.isinf(v) else "+Inf"]
                                      for i, v in enumerate(values)]}
        for metric, values in series]}}


def _exact_buckets(rates, le, n_per_window, svc):
    """Cumulative bucket increases whose shares are the exact PS model's, per window."""
    series = []
    below = np.array([1.0 - np.asarray(ps.response_sf(le, r, svc)) for r in rates])   # (W, B)
    for j, bound in enumerate(le):
        series.append(({"le": repr(bound)}, list(n_per_window * below[:, j])))
    series.append(({"le": "+Inf"}, list(np.full(len(rates), float(n_per_window)))))
    return series


def test_saved_answers_fit_like_the_server(tmp_path):
    """Saved query_range answers of the bucket increases (60 s windows whose counts follow the
    exact model, 20 ms lognormal CPU) and of the CPU rate are read back into the model."""
    svc = Service.lognormal(0.02, 2.0)
    rates = np.array([5.0, 10.0, 20.0, 30.0])
    le = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]
    # counts = rate x 60 s per window
    series = []
    below = np.array([1.0 - np.asarray(ps.response_sf(le, r, svc)) for r in rates])
    for j, bound in enumerate(le):
        series.append(({"le": repr(bound)}, list(60 * rates * below[:, j])))
    series.append(({"le": "+Inf"}, list(60 * rates)))
    path = tmp_path / "buckets.json"
    path.write_text(json.dumps(_answer(series)))
    cpu = _answer([({}, list(rates * 0.02))])
    fit = from_prometheus_json(path, cpu)
    np.testing.assert_allclose(fit.windows_["arrival_rate"], rates, rtol=1e-9)
    assert fit.cpu_per_request_ == pytest.approx(0.02, rel=1e-9)
    assert fit.scv_ == pytest.approx(2.0, rel=0.05)
    assert fit.source_["step"] == 60.0


def test_raw_counters_with_a_reset():
    """Raw cumulative counters with a process restart between samples 2 and 3: the increase after
    the reset counts from zero (as Prometheus's increase() does) and the reset is reported."""
    fast = [0.0, 80.0, 160.0, 50.0, 130.0]     # le=0.1: restart after the third sample
    total = [0.0, 100.0, 200.0, 60.0, 160.0]
    answer = _answer([({"le": "0.1"}, fast), ({"le": "+Inf"}, total)])
    with pytest.warns(FitWarning, match="1 counter reset"):
        fit = from_prometheus_json(answer, counters=True, family="exponential")
    np.testing.assert_allclose(fit.windows_["n_requests"], [100.0, 100.0, 60.0, 100.0])
    assert any("counter reset" in w for w in fit.warnings_)


@pytest.mark.parametrize("answer,match", [
    (_answer([({"le": "0.1"}, [1.0, 2.0])]), 'no le="\\+Inf" bucket'),
    (_answer([({"job": "x"}, [1.0, 2.0])]), "no 'le' label"),
    ({"status": "error", "errorType": "bad_data", "error": "parse error"}, "bad_data: parse error"),
    ({"status": "success", "data": {"resultType": "vector", "result": []}}, "resultType 'matrix'"),
    ({"data": []}, "not a Prometheus API response"),
    (_answer([({"le": "+Inf"}, [1.0, 2.0])]) | {"data": {"resultType": "matrix", "result": [
        {"metric": {"le": "+Inf"}, "values": [[1.0, "many"]]}]}}, "not a number"),
])
def test_malformed_saved_answers(answer, match):
    with pytest.raises(SourceError, match=match):
        from_prometheus_json(answer, step=60)


def test_nan_windows_are_skipped_and_said():
    answer = _answer([({"le": "0.1"}, [50.0, math.nan, 40.0, 45.0]), ({"le": "+Inf"}, [60.0, 70.0, 50.0, 55.0])])
    with pytest.warns(FitWarning, match="1 of 4 window"):
        fit = from_prometheus_json(answer, family="exponential")
    assert fit.n_observations == 3


def test_the_recorded_day_fits_back_to_its_truth():
    """data/prometheus/: twelve 30 s windows as a real Prometheus answered them (the truth in
    day.json: PS, 1 ms lognormal CPU of scv 2).  With nothing but the two answers the fit picks
    processor sharing, E[S] within 2 % (held by the CPU counter) and the scv within 15 %."""
    day = json.loads((ROOT / "data" / "prometheus" / "day.json").read_text())
    truth = day["truth"]
    fit = from_prometheus_json(ROOT / "data" / "prometheus" / "buckets.json",
                               ROOT / "data" / "prometheus" / "cpu.json", measured_at="client")
    assert fit.discipline == truth["discipline"]
    assert fit.cpu_per_request_ == pytest.approx(truth["cpu_per_request_s"], rel=0.02)
    assert fit.scv_ == pytest.approx(truth["scv"], rel=0.15)
    assert len(fit.windows_) == len(day["schedule"])
    assert fit.fit_quality_["rms_log_time_miss"] < 0.10


def test_cpu_over_the_servers_is_not_used_and_said():
    """Four Node workers under one selector read ~2.4 busy cores with servers=1: the CPU is not
    used as the utilisation, and the warning says why and how to plan per worker."""
    svc = Service.lognormal(0.02, 2.0)
    rates = np.array([40.0, 80.0, 120.0])          # the cluster's total
    le = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]
    below = np.array([1.0 - np.asarray(ps.response_sf(le, r / 4, svc)) for r in rates])
    series = [({"le": repr(b)}, list(60 * rates * below[:, j])) for j, b in enumerate(le)]
    series.append(({"le": "+Inf"}, list(60 * rates)))
    with pytest.warns(FitWarning, match="Node.js cluster's workers are separate event loops"):
        fit = from_prometheus_json(_answer(series), _answer([({}, list(rates * 0.02))]), measured_at="client",
                                   discipline="ps", family="lognormal", delay=None)
    assert not fit.summary.loc["cpu_per_request", "note"].startswith("from the utilisation law")


def test_cli_fits_through_a_real_prometheus(prometheus_run):
    """``capacity fit --prometheus URL --histogram NAME --selector ... --since ... --step ...`` against
    the running server: the day back from now, in 10 s windows (those after the load, without
    requests, are skipped and said), the CPU per request from the CPU counter within 5 %."""
    from _cli import run_cli

    url, t0 = prometheus_run
    since = int(time.time() - t0) + 15          # back to just before the first loaded window
    code, out, err = run_cli("fit", "--prometheus", url, "--histogram", "demo_request_duration_seconds",
                             "--selector", 'job="demo"', "--since", f"{since}s", "--step", "10s",
                             "--measured-at", "client", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["source"]["kind"] == "prometheus" and 'job="demo"' in data["source"]["queries"]["buckets"]
    assert data["cpu_per_request_s"] == pytest.approx(0.002, rel=0.05)
    code, out, err = run_cli("fit", "--prometheus", url, "--histogram", "demo_request_duration_seconds",
                             "--since", f"{since}s", "--step", "10s", "--measured-at", "client")
    assert code == 0 and "Fit:" in out and "Traceback" not in err, err
