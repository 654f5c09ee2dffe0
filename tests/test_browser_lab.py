"""After Kernel > Restart Kernel and Run All Cells in real JupyterLab, notebook 02's panel shows its default state.

The bug this guards against: a notebook cell that moved the panel's sliders after
showing them (to time the moves) raced the browser, which answers every value the
kernel sets with the value its slider snapped to; the browser's answer arrived
after the kernel had put the slider back, and the panel ended on SLO 300 ms and a
75.9 QPS ceiling while the notebook's text said 100 ms and 40.9 QPS.  Voilà does
not show it (it runs the notebook before any view exists), so this test drives
JupyterLab itself.

A temporary copy of the notebook (and of ``data/``, which it reads) is served by ``jupyter lab`` on 127.0.0.1 (a free
port, a random token, ``--no-browser``, its own config, runtime, settings and
workspace directories), opened in headless Chromium driven by Playwright, and run
with the ``notebook:restart-run-all`` command (the menu's *Restart Kernel and Run
All Cells…*; ``--LabApp.expose_app_in_browser`` gives the page ``window.jupyterapp``)
with its confirmation dialog accepted.  When the run has finished and the kernel is
idle, the test reads every control and every readout number from the page and
checks them against the defaults and against what ``capacity.plan`` computes for
them, asks the kernel for the values it holds, and compares the panel with the
notebook's own text output of the default state.  Screenshots (the whole page and
the panel alone) go to the test's tmp_path.

Skips with the reason when JupyterLab, Playwright or Chromium is missing (`.ci/run`
installs Chromium; JupyterLab comes with the ``lab`` extra).
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "02_qps_ceiling.ipynb"
CHROMIUM = os.environ.get("CAPACITY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
START_TIMEOUT_S = 60       # jupyter lab listening
OPEN_TIMEOUT_MS = 60_000   # the notebook open with an idle kernel
RUN_TIMEOUT_MS = 120_000   # restart + run all (the notebook alone runs in ~15 s)

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed (pip install -e '.[lab]')")
if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

# The defaults notebook 02's prose and text output describe.
DEFAULT = {"cpu_ms": 10.0, "scv": 1.0, "servers": 1, "slo_q": 0.99, "slo_ms": 100.0, "discipline": "ps",
           "slices": 4, "admission": "fifo", "delay_ms": 0.0}
# How the page shows them: a slider's readout, or the label of the active toggle button.
SHOWN = {"cpu_ms": "10.00", "scv": "1 (exponential)", "servers": "1", "slo_q": "p99", "slo_ms": "100.00",
         "discipline": "event loop (ps)", "slices": "4", "admission": "setImmediate", "delay_ms": "0.00"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """JupyterLab serving a copy of notebook 02; yields its URL (token included)."""
    root = tmp_path / "root"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(NOTEBOOK, root / "notebooks" / NOTEBOOK.name)
    shutil.copytree(ROOT / "data", root / "data")   # the notebook reads ../data, as in the repository
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ)
    # The "python3" kernelspec starts `python` from PATH: make it this interpreter.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                     ("JUPYTERLAB_SETTINGS_DIR", "settings"), ("JUPYTERLAB_WORKSPACES_DIR", "workspaces")):
        env[var] = str(tmp_path / sub)   # nobody's own Jupyter settings, nothing left behind
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--LabApp.expose_app_in_browser=True"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")   # CI containers run as root
    log_path = tmp_path / "lab.log"
    with open(log_path, "w") as log:
        yield from _serve(cmd, root, env, log, log_path, port, token)


def _serve(cmd, root, env, log, log_path, port, token):
    """Run the server, wait until it listens, yield the notebook's URL, stop it."""
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}: {log_path.read_text()[-3000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not listen within {START_TIMEOUT_S} s: {log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/lab/tree/notebooks/{NOTEBOOK.name}?token={token}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_KERNEL = "window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"


def _kernel_output(page, code: str) -> str:
    """Run ``code`` in the notebook's kernel (not in a cell) and return what it printed."""
    return page.evaluate(
        """async (code) => {
            const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
            let text = '';
            const future = kernel.requestExecute({code, silent: false, store_history: false});
            future.onIOPub = (msg) => {
                if (msg.header.msg_type === 'stream') text += msg.content.text;
                if (msg.header.msg_type === 'error') text += msg.content.ename + ': ' + msg.content.evalue;
            };
            await future.done;
            return text;
        }""", code)


def _shown(page, name: str) -> str:
    control = page.locator(f".capacity-slider-{name}")
    if control.locator(".widget-readout").count():
        return control.locator(".widget-readout").text_content().strip()
    return control.locator("button.mod-active").text_content().strip()


def _readout(page) -> dict[str, str]:
    return page.evaluate("() => Object.fromEntries(Array.from(document.querySelectorAll("
                         "'.capacity-readout [data-key]')).map(e => [e.dataset.key, e.textContent]))")


def test_notebook_02_restart_and_run_all_shows_the_default_state(lab, tmp_path):
    from capacity import Service, plan

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1400})
            page.goto(lab, wait_until="domcontentloaded")
            page.wait_for_function(f"() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                                   f" && window.jupyterapp.shell.currentWidget.sessionContext.session"
                                   f" && {_KERNEL} && {_KERNEL}.status === 'idle'", timeout=OPEN_TIMEOUT_MS)
            # The stored notebook holds no widget state: a readout can only come from this run.
            assert page.locator(".capacity-readout").count() == 0
            page.evaluate("() => { window.__capacityRun = null; window.jupyterapp.commands"
                          ".execute('notebook:restart-run-all').then(r => { window.__capacityRun = r; }); }")
            page.locator(".jp-Dialog .jp-mod-accept").click(timeout=OPEN_TIMEOUT_MS)   # "Restart Kernel?"
            page.wait_for_function(f"() => window.__capacityRun !== null && {_KERNEL}.status === 'idle'",
                                   timeout=RUN_TIMEOUT_MS)
            # A cell that raised ends the run with false: say which error, not "timeout".
            errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            assert page.evaluate("() => window.__capacityRun") is True, (
                "Restart and Run All stopped on an error: "
                + " | ".join(errors.nth(i).text_content()[-1500:] for i in range(errors.count())))
            page.wait_for_selector(".capacity-readout [data-key='ceiling_qps']", timeout=RUN_TIMEOUT_MS)
            # The browser answers each slider's value with the one it snapped to; let those answers land
            # (each runs the panel's callback once more) and the kernel fall idle again.
            readout, settled_since = None, time.monotonic()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                now = (_readout(page), page.evaluate(f"() => {_KERNEL}.status"))
                if now != readout:
                    readout, settled_since = now, time.monotonic()
                elif now[1] == "idle" and time.monotonic() - settled_since > 2.0:
                    break
                time.sleep(0.25)
            readout = readout[0]

            shown = {name: _shown(page, name) for name in SHOWN}
            assert shown == SHOWN, "after Restart and Run All every control shows its default"
            held = json.loads(_kernel_output(page, "import json; print(json.dumps(control_values(sliders)))"))
            assert held == DEFAULT, "and the kernel computes with the defaults"

            service = Service.from_moments(DEFAULT["cpu_ms"] / 1e3, DEFAULT["scv"])
            slo = {DEFAULT["slo_q"]: DEFAULT["slo_ms"] / 1e3}
            curve = plan.response_curve(service, DEFAULT["servers"], DEFAULT["discipline"], quantiles=(0.5, 0.99, 0.999))
            from_curve = plan.ceiling_from_curve(curve, slo)
            from_curve = from_curve.qps
            exact = plan.qps_ceiling(service, DEFAULT["servers"], slo, discipline=DEFAULT["discipline"])
            assert readout["ceiling_qps"] == f"{from_curve:,.1f}"
            assert abs(float(readout["ceiling_qps"].replace(",", "")) - exact.qps) <= 0.1, (readout, exact.qps)
            assert readout["ceiling_qps"] == "40.9"   # what the notebook's prose says
            assert readout["capacity_qps"] == f"{exact.capacity_qps:,.1f}" == "100.0"
            assert readout["ceiling_pct"] == f"{100 * from_curve / exact.capacity_qps:.1f}"
            label = page.locator(".capacity-readout").text_content()
            assert "p99 ≤ 100 ms" in label, label

            # The notebook's text output of the default state says the same numbers.
            text = page.locator(".jp-OutputArea-output", has_text="ceiling (p99 ≤ 100 ms, QPS):").first.text_content()
            assert f"ceiling (p99 ≤ 100 ms, QPS): {readout['ceiling_qps']}" in text, text
            assert f"capacity (QPS): {readout['capacity_qps']}" in text, text

            page.screenshot(path=str(tmp_path / "lab-notebook02.png"), full_page=True)
            panel = page.locator(".jp-OutputArea-output", has=page.locator(".capacity-readout")).first
            panel.screenshot(path=str(tmp_path / "notebook02.png"))
            assert (tmp_path / "notebook02.png").stat().st_size > 10_000
        finally:
            browser.close()
