"""A real browser moves a slider and sees the number the package computes.

Each notebook is served by Voilà on 127.0.0.1 (a free port, no token) and
opened in headless Chromium driven by Playwright.  Voilà runs the notebook in a
kernel and renders only its outputs and widgets, so the test waits for one
thing -- the widget readout to appear -- instead of driving JupyterLab's menus
and guessing when "Run All" has finished.  The test then moves a slider with
the keyboard (focus the slider handle, press the arrow key: what a user does),
waits until the readout text changes, and compares the new number with the
value the package computes for the new slider setting.  A screenshot goes to
the test's tmp_path.

Skips with the reason when Playwright, Voilà or Chromium is missing
(`.ci/run` installs them).  Debian's chromium is used (Playwright's own
browser download does not work here); set CAPACITY_CHROMIUM to use another.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CHROMIUM = os.environ.get("CAPACITY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
LOAD_TIMEOUT_MS = 90_000   # Voilà executes the whole notebook before it shows the widgets
MOVE_TIMEOUT_MS = 15_000   # one slider move: recompute + redraw + one websocket round trip

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
pytest.importorskip("voila", reason="voila is not installed (pip install voila)")
if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def voila(tmp_path):
    """Start Voilà on one notebook; yields a function notebook name -> URL."""
    procs = []

    def serve(name: str) -> str:
        port = _free_port()
        env = dict(os.environ)
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        log = open(tmp_path / f"voila-{port}.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "voila", str(NOTEBOOKS / name), "--no-browser", f"--port={port}",
             "--Voila.ip=127.0.0.1", "--Voila.open_browser=False", "--show_tracebacks=True",
             "--ServerApp.token=", "--ServerApp.password="],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append((proc, log))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"voila exited with {proc.returncode}: {(tmp_path / f'voila-{port}.log').read_text()}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return f"http://127.0.0.1:{port}/"
            time.sleep(0.2)
        pytest.fail("voila did not start listening within 30 s")

    yield serve
    for proc, log in procs:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


def _value(page, key: str) -> str:
    return page.locator(f".capacity-readout [data-key='{key}']").inner_text()


def _move_slider(page, name: str, presses: int, arrow: str = "ArrowRight") -> None:
    """Focus a slider's handle and press an arrow key ``presses`` times (as a user would)."""
    handle = page.locator(f".capacity-slider-{name} .noUi-handle")
    handle.focus()
    for _ in range(presses):
        handle.press(arrow)


def _wait_for_readout(page, key: str, expected: str) -> str:
    """Wait until the readout shows ``expected`` for ``key`` (every intermediate move may show first)."""
    try:
        page.wait_for_function(
            "([key, want]) => { const el = document.querySelector(`.capacity-readout [data-key='${key}']`);"
            " return el && el.textContent === want; }", arg=[key, expected], timeout=MOVE_TIMEOUT_MS)
    except sync_api.TimeoutError:
        pass  # the assertion below reports what is shown instead
    return _value(page, key)


def _slider_value(page, name: str) -> float:
    text = page.locator(f".capacity-slider-{name} .widget-readout").inner_text()
    return float(text.replace(",", ""))


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    page.set_default_timeout(LOAD_TIMEOUT_MS)
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector(".capacity-readout [data-key]", timeout=LOAD_TIMEOUT_MS)
    page.wait_for_selector(".capacity-plot", timeout=LOAD_TIMEOUT_MS)
    return page


def test_notebook_01_burst_slider(browser, voila, tmp_path):
    """Raise the burst rate by one QPS; the timed-out count must be the simulator's for that burst."""
    from capacity import Service, overload

    page = _open(browser, voila("01_why_requests_time_out_together.ipynb"))
    assert _slider_value(page, "burst_qps") == 67
    before = _value(page, "timed_out")
    _move_slider(page, "burst_qps", presses=3)
    qps = _slider_value(page, "burst_qps")
    assert qps == 70, "three ArrowRight presses move the burst-QPS slider 67 -> 70"
    # The notebook's scenario (its constants BASE_QPS, BURST_START, DURATION, TIMEOUT, SEED):
    rates = np.full(240, 8.0)
    rates[45:45 + 30] = qps
    res = overload.replay(pd.Series(rates), Service.exponential(0.025), processes=1, discipline="ps",
                          timeout=30.0, seed=2024)
    expected = str(int((res.run.requests["outcome"] == "timed_out").sum()))
    shown = _wait_for_readout(page, "timed_out", expected)
    assert shown == expected != before, (before, shown, expected)
    page.screenshot(path=str(tmp_path / "notebook01.png"), full_page=True)
    assert (tmp_path / "notebook01.png").stat().st_size > 10_000


def test_notebook_07_concurrency_slider(browser, voila, tmp_path):
    """Raise the concurrency by five clients; the load-test throughput must be MVA's at that N."""
    from capacity import closed, ps

    page = _open(browser, voila("07_load_tests_mislead.ipynb"))
    assert _slider_value(page, "users") == 15
    before = _value(page, "closed_qps")
    _move_slider(page, "users", presses=5)
    users = int(_slider_value(page, "users"))
    assert users == 20, "five ArrowRight presses move the concurrency slider 15 -> 20"
    x = float(closed.mva(0.010, 0.100, users).throughput[-1])
    expected = f"{x:.1f}"
    shown = _wait_for_readout(page, "closed_qps", expected)
    assert shown == expected != before, (before, shown, expected)
    open_ms = 1e3 * float(ps.mean_response(x, 0.010))
    assert _wait_for_readout(page, "open_ms", f"{open_ms:.1f}") == f"{open_ms:.1f}"
    # The story: at the same QPS the open loop is far slower than the load test says.
    assert open_ms > 10 * float(_value(page, "closed_ms"))
    page.screenshot(path=str(tmp_path / "notebook07.png"), full_page=True)
    assert (tmp_path / "notebook07.png").stat().st_size > 10_000


def test_notebook_02_cpu_slider(browser, voila, tmp_path):
    """Raise the CPU per request from 10 to 12 ms; the ceiling must be plan.qps_ceiling's for 12 ms."""
    from capacity import Service, plan

    page = _open(browser, voila("02_qps_ceiling.ipynb"))
    assert _slider_value(page, "cpu_ms") == 10.0
    before = _value(page, "ceiling_qps")
    _move_slider(page, "cpu_ms", presses=4)
    cpu_ms = _slider_value(page, "cpu_ms")
    assert cpu_ms == 12.0, "four ArrowRight presses move the CPU slider 10 -> 12 ms (step 0.5)"
    # The notebook's default SLO and setting: one event-loop process (PS), p99 <= 100 ms, no IO delay.
    exact = plan.qps_ceiling(Service.exponential(cpu_ms / 1e3), 1, {0.99: 0.100}, discipline="ps")
    expected = f"{exact.qps:,.1f}"
    shown = _wait_for_readout(page, "ceiling_qps", expected)
    # The notebook reads the ceiling off a table of package quantiles (relative error < 1e-4, checked in the
    # notebook), so allow one unit in the last printed digit.
    assert shown != before and abs(float(shown.replace(",", "")) - exact.qps) <= 0.1, (before, shown, expected)
    assert _value(page, "capacity_qps") == f"{exact.capacity_qps:,.1f}"
    page.screenshot(path=str(tmp_path / "notebook02.png"), full_page=True)
    assert (tmp_path / "notebook02.png").stat().st_size > 10_000


def test_notebook_02_variability_slider_under_ps(browser, voila, tmp_path):
    """Under the default event loop (PS), move the CPU variability from 1 to 2: the slider is live (it used to
    be disabled and forced back to exponential) and the ceiling is plan.qps_ceiling's for a lognormal scv 2."""
    from capacity import Service, plan

    page = _open(browser, voila("02_qps_ceiling.ipynb"))
    readout = page.locator(".capacity-slider-scv .widget-readout")
    assert readout.inner_text() == "1 (exponential)"
    before = _value(page, "ceiling_qps")
    _move_slider(page, "scv", presses=1)
    sync_api.expect(readout).to_have_text("2")   # one ArrowRight press: 1 -> 2
    exact = plan.qps_ceiling(Service.from_moments(0.010, 2.0), 1, {0.99: 0.100}, discipline="ps")
    shown = _wait_for_readout(page, "ceiling_qps", f"{exact.qps:,.1f}")
    # Read off the curve of the shipped PS table (checked against plan.qps_ceiling in the notebook).
    assert shown != before and abs(float(shown.replace(",", "")) - exact.qps) <= 0.1, (before, shown, exact.qps)
    # ps is still the discipline: the move did not put the variability back to exponential.
    page.wait_for_timeout(500)
    assert readout.inner_text() == "2" and _value(page, "ceiling_qps") == shown


def test_notebook_09_hit_ratio_slider(browser, voila, tmp_path):
    """Raise the hit ratio from 90 to 92 %; the ceiling and the expiry verdict must be the package's for 92 %."""
    from capacity import plan

    page = _open(browser, voila("09_caches_and_endpoint_mixes.ipynb"))
    assert _slider_value(page, "hit_pct") == 90.0
    assert _value(page, "verdict") == "metastable"
    before = _value(page, "ceiling")
    _move_slider(page, "hit_pct", presses=20)
    hit_pct = _slider_value(page, "hit_pct")
    assert hit_pct == 92.0, "twenty ArrowRight presses move the hit-ratio slider 90 -> 92 % (step 0.1)"
    # The notebook's cache panel defaults: 1 ms hits, 25 ms misses (exponential), 2 cores, FCFS, p99 <= 100 ms,
    # 250 QPS, 10 000 keys, 200 ms timeout, 2 retries, refresh every 30 minutes.
    ceiling = plan.cache_ceiling(0.001, 0.025, hit_ratio=[hit_pct / 100], servers=2, slo={0.99: 0.1},
                                 discipline="fcfs").table["ceiling_qps"].iloc[0]
    expected = f"{ceiling:.0f}"
    shown = _wait_for_readout(page, "ceiling", expected)
    assert shown == expected != before, (before, shown, expected)
    expiry = plan.cache_expiry(250.0, hit_pct / 100, 0.001, 0.025, keys=10_000, servers=2, timeout=0.2, retries=2,
                               refresh_interval=1800.0, discipline="fcfs")
    assert _wait_for_readout(page, "peak_delay", f"{expiry.peak_delay:.2f}") == f"{expiry.peak_delay:.2f}"
    assert _value(page, "verdict") == expiry.verdict
    page.screenshot(path=str(tmp_path / "notebook09.png"), full_page=True)
    assert (tmp_path / "notebook09.png").stat().st_size > 10_000
