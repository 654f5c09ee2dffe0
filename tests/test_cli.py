"""The `capacity` command line.

A representative run of every subcommand goes through a subprocess, as a user runs it; the
many flag-error cases call ``capacity.cli.main`` in the same process (the same code path after
interpreter start-up, which costs seconds per subprocess).

Expected numbers are the hand-checked ones of tests/test_plan.py: M/M/1 FCFS ceiling
40 - ln(100)/0.5 = 30.79 QPS (Kleinrock 1975, section 3.2), the Erlang C staffing anchor
(10 Erlangs, 20 % may wait over 20 s -> 14 servers), the timeout-safe rate 40 - ln(1000)
= 33.09 QPS, and the Ctrip rule 3 x P99.9 (data/timeout_rules.toml).
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import subprocess
import sys
from types import SimpleNamespace

import pytest

from capacity import cli


def spawn(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "capacity", *args], capture_output=True, text=True, timeout=300)


def run(*args: str) -> SimpleNamespace:
    """``capacity ARGS`` in this process: return code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as exc:  # argparse: --help, --version, usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def test_version_through_subprocess():
    out = spawn("--version")
    assert out.returncode == 0 and out.stdout.startswith("capacity ")


@pytest.mark.parametrize("sub", [None, "example", "ceiling", "servers", "timeout", "scaling", "gc"])
def test_help_gives_examples(sub):
    out = run(*([sub] if sub else []), "--help")
    assert out.returncode == 0
    assert "example" in out.stdout and "capacity " in out.stdout


def test_ceiling_table_and_json():
    out = spawn("ceiling", "--cpu", "25ms", "--slo", "p99=500ms", "--discipline", "fcfs")
    assert out.returncode == 0, out.stderr
    assert "30.79" in out.stdout and "p99" in out.stdout
    out = run("ceiling", "--cpu", "0.025", "--slo", "p99=0.5s,p99.9=2s", "--discipline", "fcfs",
              "--servers", "1,2", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"command", "service", "discipline", "slo", "rows", "explanation"} <= data.keys()
    assert [r["servers"] for r in data["rows"]] == [1, 2]
    assert data["rows"][0]["qps"] == pytest.approx(40 - math.log(100) / 0.5, rel=1e-9)
    assert data["rows"][0]["binding"] == "p99"
    assert data["slo"] == {"p99": 0.5, "p99.9": 2.0}


def test_ceiling_default_ps_runs():
    out = run("ceiling", "--cpu", "25ms", "--slo", "p99=500ms", "--json")
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["rows"][0]
    assert 0 < row["qps"] < 30.79  # PS's heavier tail: below the FCFS ceiling


def test_ceiling_delay_that_uses_up_the_slo():
    out = run("ceiling", "--cpu", "25ms", "--slo", "p99=500ms", "--delay", "500ms", "--discipline", "fcfs")
    assert out.returncode == 0
    assert "cannot be met" in out.stdout


def test_servers_erlang_anchor_and_json():
    out = spawn("servers", "--qps", str(10 / 180), "--cpu", "3min", "--discipline", "fcfs", "--slo-on", "wait",
              "--slo", "p80=20s", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["rows"][0]["servers"] == 14
    out = run("servers", "--qps", "500qps", "--cpu", "25ms", "--slo", "p99=200ms", "--discipline", "fcfs",
              "--per-machine", "4", "--redundancy", "1")
    assert out.returncode == 0, out.stderr
    assert "N+1" in out.stdout and "machines" in out.stdout


def test_timeout_safe_rate_and_recommendation():
    out = spawn("timeout", "--cpu", "25ms", "--timeout", "1s", "--max-fraction", "0.1%", "--discipline", "fcfs",
                "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["mode"] == "safe_rate" and data["qps"] == pytest.approx(40 - math.log(1000), rel=1e-9)
    out = run("timeout", "--p999", "120ms", "--user-limit", "2s", "--json")
    data = json.loads(out.stdout)
    assert data["mode"] == "recommend" and data["timeout_s"] == pytest.approx(0.36) and data["rule"] == "3 x P99.9"
    out = run("timeout", "--p999", "120ms", "--non-core", "--cpu", "25ms", "--qps", "20", "--discipline", "fcfs")
    assert out.returncode == 0, out.stderr
    assert "180 ms" in out.stdout and "saturation" in out.stdout


@pytest.mark.parametrize("args,flag", [
    (["ceiling", "--cpu", "abc"], "--cpu"),
    (["ceiling", "--cpu", "25ms", "--slo", "p99=fast"], "--slo"),
    (["ceiling", "--cpu", "25ms", "--slo", "p100=1s"], "--slo"),
    (["ceiling", "--cpu", "25ms", "--servers", "0"], "--servers"),
    (["ceiling", "--cpu", "25ms", "--scv", "2", "--family", "exponential"], "--scv"),
    (["ceiling", "--cpu", "25ms", "--discipline", "lifo"], "--discipline"),
    (["servers", "--qps", "-3", "--cpu", "25ms"], "--qps"),
    (["servers", "--qps", "10", "--cpu", "25ms", "--redundancy", "1"], "--redundancy"),
    (["timeout", "--cpu", "25ms", "--timeout", "1s", "--max-fraction", "150%"], "--max-fraction"),
    (["timeout", "--cpu", "25ms"], "--timeout"),
    (["ceiling", "--cpu", "25ms", "--bogus", "1"], "--bogus"),
    (["scaling", "--cpu", "25ms"], "--qps"),
    (["scaling", "--qps", "300", "--cpu", "25ms", "--option", "3x0"], "--option"),
    (["scaling", "--qps", "300", "--cpu", "25ms", "--option", "2x4:fastest"], "--option"),
    (["scaling", "--qps", "300", "--cpu", "25ms", "--memory-per-process", "lots"], "--memory-per-process"),
    (["scaling", "--qps", "300", "--cpu", "25ms", "--cost-per-machine", "-5"], "--cost-per-machine"),
    (["scaling", "--qps", "300", "--cpu", "25ms", "--cores-per-machine", "0"], "--cores-per-machine"),
    (["gc", "--cpu", "9ms", "--pause", "50ms"], "--gc-share"),
    (["gc", "--cpu", "9ms", "--gc-share", "127%", "--pause", "50ms"], "--gc-share"),
    (["gc", "--cpu", "9ms", "--gc-share", "27%", "--pause", "-50ms"], "--pause"),
    (["gc", "--cpu", "9ms", "--gc-share", "27%", "--pause", "50ms", "--measured-gain", "-150%"], "--measured-gain"),
    (["timeout", "--cpu", "25ms", "--timeout", "1s", "--burst-qps", "0"], "--burst-qps"),
])
def test_bad_flags_exit_2_with_one_line(args, flag):
    out = run(*args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0] and flag in lines[0]


@pytest.mark.parametrize("args,words", [
    (["servers", "--qps", "100", "--cpu", "25ms", "--slo", "p99=10ms", "--discipline", "fcfs"], "cannot be met"),
    (["ceiling", "--cpu", "25ms", "--scv", "2", "--servers", "2"], "not supported"),
])
def test_model_errors_exit_2_with_one_line(args, words):
    out = run(*args)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0]


def test_bad_flag_through_subprocess_has_no_traceback():
    out = spawn("ceiling", "--cpu", "25 parsecs")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        "capacity ceiling: error: argument --cpu: expected a time like 25ms, 1.5s or 250us, got '25 parsecs'"]


@pytest.mark.parametrize("text,seconds", [("25ms", 0.025), ("1.5s", 1.5), ("250us", 2.5e-4), ("2min", 120.0),
                                          ("0.2", 0.2), ("1e-3s", 1e-3)])
def test_time_units(text, seconds):
    assert cli._time(text) == pytest.approx(seconds)


def test_slo_and_rate_parsing():
    assert cli._slo("p99=500ms,p99.9=2s") == {0.99: 0.5, 0.999: 2.0}
    assert cli._rates("120qps,80") == [120.0, 80.0]
    assert cli._fraction("0.1%") == pytest.approx(1e-3)


# ---------------------------------------------------------------------------- scaling, gc, bursts
# Expected numbers: random split over one-core FCFS workers is M/M/1 per worker (Poisson thinning),
# p99 = ln(100) / (mu - lambda / N); the seed article's GC table (data/gc_semispace.csv): the freed
# CPU alone predicts (1 - 0.0714) / (1 - 0.275) - 1 = +28.1 % against +10 % measured.


def test_scaling_json_through_subprocess():
    out = spawn("scaling", "--qps", "100", "--cpu", "25ms", "--slo", "p99=500ms", "--discipline", "fcfs",
                "--option", "2x2:random", "--option", "1x4:rr", "--option", "1x4:pooled",
                "--cost-per-machine", "100", "--cost-per-core", "10", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["command"] == "scaling" and len(data["rows"]) == 3
    rnd, rr, pooled = data["rows"]
    assert rnd["dispatch"] == "random" and rnd["p99_s"] == pytest.approx(math.log(100) / (40 - 25), rel=1e-9)
    assert pooled["ceiling_qps"] >= rr["ceiling_qps"] >= rnd["ceiling_qps"]
    assert rnd["cost"] == 240.0 and rr["cost"] == 140.0
    assert rr["n1_meets_slo"] is False and rr["n1_p99_s"] == "inf"   # one machine: nothing left


def test_scaling_table_default_options():
    out = run("scaling", "--qps", "300", "--cpu", "25ms", "--slo", "p99=500ms", "--cores", "16",
              "--cores-per-machine", "4", "--memory-per-process", "300MB", "--machine-memory", "8GB")
    assert out.returncode == 0, out.stderr
    assert "Node cluster" in out.stdout and "least connections" in out.stdout and "pooled" in out.stdout
    assert "N+1" in out.stdout and "headroom" in out.stdout and "mem ok" in out.stdout


def test_gc_seed_numbers_through_subprocess():
    out = spawn("gc", "--cpu", str(3 / 320), "--processes", "3", "--gc-share", "27.5%", "--pause",
                str(47.7 / 1008), "--pause-rate", str(1008 / 180), "--new-gc-share", "7.14%",
                "--new-pause", str(11.8 / 312), "--new-pause-rate", str(312 / 180), "--measured-gain", "10%")
    assert out.returncode == 0, out.stderr
    assert "+28.1 %" in out.stdout and "+10.0 %" in out.stdout and "gap 18.1 points" in out.stdout
    assert "not purely CPU-bound" in out.stdout
    out = run("gc", "--cpu", "9.375ms", "--gc-share", "27.5%", "--pause", "47ms", "--new-gc-share", "7.14%",
              "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["predicted_capacity_gain"] == pytest.approx((1 - 0.0714) / (1 - 0.275) - 1, rel=1e-12)
    assert set(data["table"]) == {"before", "after"} and data["measured_gain"] is None


def test_timeout_burst_column():
    out = run("timeout", "--cpu", "25ms", "--timeout", "1s", "--burst-qps", "60", "--discipline", "fcfs", "--json")
    assert out.returncode == 0, out.stderr
    # fluid FCFS: (timeout - E[S]) / (rho - 1) = 0.975 / 0.5
    assert json.loads(out.stdout)["burst_seconds"] == pytest.approx(1.95, rel=1e-9)


def test_memory_and_option_parsing():
    assert cli._memory("300MB") == 300e6 and cli._memory("2GiB") == 2 * 2 ** 30
    assert cli._option("4x8:lc") == dict(machines=4, processes=8, servers=1, dispatch="least_connections")
    assert cli._option("2x1x4") == dict(machines=2, processes=1, servers=4, dispatch="round_robin")
    assert cli._signed_fraction("-5%") == pytest.approx(-0.05)
