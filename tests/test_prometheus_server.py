"""A real Node.js server instrumented with prom-client, scraped by a real Prometheus, fitted
through the HTTP API with nothing given but the address, the metric and the time range.

The validation server (``validation/server``, ``--metrics``) times each request in its Koa
middleware into ``http_request_duration_fine_seconds`` and exports prom-client's process metrics;
the open-loop generator (``validation/loadgen``) sends Poisson load to the blocking 5 ms
handler at about 20 % and then 50 % CPU, the server and the generator pinned to cores of their
own.  In-process, a blocking handler's time is its CPU time whatever the load (the queue is in
front of the middleware), so the blocking (FCFS) model must describe the histograms best, and the
fit must choose it or say that its choice misses them (see the test), and read the CPU per request
off ``process_cpu_seconds_total``.

Skips with the reason where Node.js, the server's npm packages or Prometheus are absent.
"""
from __future__ import annotations

import contextlib
import json
import pathlib
import shutil
import subprocess
import time
import warnings

import pytest

from capacity.fit import from_prometheus

import _concurrent_setups  # noqa: E402 -- tests/ helper
from _scripts import load_script  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SERVER = ROOT / "validation" / "server"
LOADGEN = ROOT / "validation" / "loadgen" / "loadgen.js"
PHASES = ((40.0, 16.0), (100.0, 16.0))     # (req/s, seconds): 5 ms handler at ~20 % and ~50 % CPU
LEAD = 4.0                                  # seconds of load before the first and after the last window


def _harness():
    return load_script("tools/prometheus_harness.py")


@contextlib.contextmanager
def _scraped_server():
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js (node) is not on PATH")
    if not (SERVER / "node_modules" / "prom-client").is_dir():
        pytest.skip("validation/server/node_modules lacks prom-client: run `npm ci --prefix validation/server`")
    if shutil.which("prometheus") is None:
        pytest.skip("the prometheus binary is not installed (Debian package 'prometheus'; .ci/run installs it)")
    h = _harness()
    server_core, loadgen_core = h.server_and_load_cores()
    server = subprocess.Popen([node, str(SERVER / "server.js"), "--metrics", "--port", "0", "--max-seconds", "300"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=h.pinned(server_core))
    try:
        port = json.loads(server.stdout.readline())["port"]
        with h.run_prometheus([f"127.0.0.1:{port}"]) as url:
            h.wait_for_scrapes(url, 1, count=1)   # the idle server scraped first
            start = time.time()
            schedule = [(PHASES[0][0], LEAD + PHASES[0][1]), (PHASES[1][0], PHASES[1][1] + LEAD)]
            spun = [h.spin_times(port)]
            for i, (rate, seconds) in enumerate(schedule):
                subprocess.run([node, str(LOADGEN), "--port", str(port), "--path", "/cpu?ms=5", "--rate", str(rate),
                                "--duration", str(seconds), "--seed", str(7 + i), "--max-p99-lag-ms", "1e9",
                                "--max-mean-lag-frac", "1e9", "--server-stats", "0"],
                               check=True, capture_output=True, timeout=seconds + 60,
                               preexec_fn=h.pinned(loadgen_core))
                spun.append(h.spin_times(port))
            h.wait_for_scrapes(url, 1, after=time.time())   # a scrape after the last request
            # each phase's share of its busy loops' wall time in which the server had the CPU
            shares = [(c1 - c0) / (w1 - w0) for (w0, c0), (w1, c1) in zip(spun, spun[1:])]
            yield url, start + LEAD, shares
    finally:
        server.terminate()
        server.wait(timeout=10)


# This module's own server and Prometheus, run at the same time as the other modules' (conftest.py)
_concurrent_setups.register("scraped_server", _scraped_server)


@pytest.fixture(scope="module")
def scraped_server(concurrent_setups):
    with concurrent_setups.enter("scraped_server") as run:
        yield run


def test_blocking_handler_from_its_middleware_histogram(scraped_server):
    url, t0, shares = scraped_server
    end = t0 + sum(seconds for _, seconds in PHASES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = from_prometheus(url, "http_request_duration_fine_seconds", start=t0, end=end, step=PHASES[0][1])
    assert fit.measured_at == "in_process"
    # The blocking model's times are the nearest to the histograms at their bucket bounds.
    candidates = fit.candidates_
    nearest = candidates.loc[candidates["rms_log_time_miss"].idxmin()]
    # (the share of its busy loops' wall time the server had the CPU, per phase, said on failure:
    # the loops are wall-clock, so a host that takes the CPU away cuts the CPU per request under
    # unchanged middleware times -- unpinned, 0.57-0.89 on the idle development VM; pinned,
    # 0.71-1.0)
    assert nearest["discipline"] == "fcfs", (shares, candidates)
    # And the fit chooses it, or says that what it chose misses the histograms.  The middleware's
    # times are a near-constant 5-6 ms with a few per cent of requests stalled to 8-30 ms (GC, the
    # host) at either load: no single CPU law of one scv carries both, and in the bucket counts
    # those few slow requests can outweigh everything else, where a queue model makes a tail of
    # them -- at the cost of a body that grows with the load as the middleware's does not.  In 18
    # runs on the development VM (six pinned) the FCFS candidate was the nearest in time in every
    # one; the fit chose round robin or PS in six (one pinned, with another job on its core), each
    # time with the warning that its times miss the histograms (25-59 % RMS against FCFS's
    # 12-18 %).  A law with a rare stall tail is the fit's next step (issue 16); until then such
    # an answer must not pass silently.
    misses = any("misses the histograms" in w for w in fit.warnings_)
    assert fit.discipline == "fcfs" or misses, (shares, candidates, fit.warnings_)
    # 5 ms of busy loop plus Node's, Koa's and prom-client's per-request CPU (and GC): 5-7 ms
    assert 0.0045 < fit.cpu_per_request_ < 0.0075, fit.summary
    assert fit.summary.loc["cpu_per_request", "note"].startswith("from the utilisation law")
    rates = sorted(fit.windows_["arrival_rate"])
    assert rates[0] == pytest.approx(PHASES[0][0], rel=0.2) and rates[-1] == pytest.approx(PHASES[1][0], rel=0.2)
