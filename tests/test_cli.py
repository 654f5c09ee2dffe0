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
import pathlib
import shlex
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
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


@pytest.mark.parametrize("sub", [None, "example", "ceiling", "servers", "timeout", "scaling", "gc", "threads",
                                 "handoff", "steal", "fit"])
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


# ---------------------------------------------------------------------------------------------- fit
# Hand-checked case: M/M/1 FCFS response time is exponential with rate mu - lambda (Kleinrock 1975,
# eq. 3.28), so at 8 req/s and 25 ms CPU (mu = 40) the q-quantile is ln(1/(1-q)) / 32 s.  Fitting
# those percentiles must return 25 ms exactly, and the implied p99 <= 500 ms ceiling is the closed
# form 40 - ln(100)/0.5 = 30.79 QPS.  The other fits recover the model that generated their data
# (an exact M/G/1 FCFS quantile, a seeded simulation).

def _mm1_percentiles(qs=(0.5, 0.9, 0.99)) -> str:
    return ",".join(f"{cli._fmt_pct(q)}={1e3 * math.log(1 / (1 - q)) / 32:.9f}ms" for q in qs)


def test_fit_percentiles_mm1_json_through_subprocess():
    out = spawn("fit", _mm1_percentiles(), "--qps", "8qps", "--discipline", "fcfs", "--family", "exponential",
                "--slo", "p99=500ms", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["command"] == "fit" and data["source"]["kind"] == "percentiles"
    assert data["cpu_per_request_s"] == pytest.approx(0.025, rel=1e-4)
    assert data["scv"] == 1.0 and data["delay"] is None
    assert data["capacity_qps"] == pytest.approx(40.0, rel=1e-4)
    assert [r["q"] for r in data["comparison"]] == ["p50", "p90", "p99"]
    assert all(abs(r["rel_error"]) < 1e-4 for r in data["comparison"])
    assert data["ceiling"]["qps"] == pytest.approx(40 - math.log(100) / 0.5, rel=1e-4)
    assert data["ceiling"]["binding"] == "p99"
    assert data["warnings"] == []
    assert data["cpu_per_request_interval_s"] == [None, None]   # no --requests: no interval


def test_fit_percentiles_measured_in_process(tmp_path):
    """--measured-at in_process: the percentiles of a blocking handler's middleware timer are its
    CPU time's (the queue is in front of the timer).  Lognormal CPU, mean 50 ms, scv 2, written
    out with scipy; read as in-process they give back 50 ms and scv 2, read as the clients' they
    cannot (the same numbers would hold the queue too).  A log takes the flag too (a proxy's log
    sees the whole response, as the default client does: the same CPU, said in the model)."""
    from scipy import stats

    sigma = math.sqrt(math.log(1 + 2.0))
    law = stats.lognorm(sigma, scale=0.05 / math.sqrt(1 + 2.0))
    text = ",".join(f"{cli._fmt_pct(q)}={1e3 * float(law.ppf(q)):.9f}ms" for q in (0.5, 0.9, 0.99))
    common = ("fit", text, "--qps", "8", "--cpu-util", "40%", "--discipline", "fcfs", "--family", "lognormal",
              "--json")
    inside = json.loads(run(*common, "--measured-at", "in_process").stdout)
    assert inside["cpu_per_request_s"] == pytest.approx(0.05, rel=1e-3)
    assert inside["scv"] == pytest.approx(2.0, rel=1e-2)
    client = json.loads(run(*common).stdout)
    assert client["scv"] < 1.5
    import pandas as pd

    from capacity import Service, simulate

    req = simulate(pd.Series(np.repeat([8.0, 16.0, 24.0], 600)), Service.lognormal(0.025, 1.0), "fcfs",
                   seed=3).requests
    pd.DataFrame({"time": req["completion"], "duration_s": req["response"]}).to_csv(tmp_path / "log.csv",
                                                                                   index=False)
    default, proxy = (json.loads(run("fit", "--log", str(tmp_path / "log.csv"), "--discipline", "fcfs", "--json",
                                     *extra).stdout) for extra in ([], ["--measured-at", "proxy"]))
    assert "measured at the proxy" in proxy["model"] and "measured at" not in default["model"]
    assert proxy["cpu_per_request_s"] == pytest.approx(default["cpu_per_request_s"], rel=1e-9)
    assert default["cpu_per_request_s"] == pytest.approx(0.025, rel=0.05)


def test_fit_percentiles_lognormal_table_with_intervals():
    """Percentiles of M/G/1 FCFS with 50 ms lognormal CPU (scv 2) at 8 req/s (exact model quantiles)."""
    from capacity import Service, fcfs

    svc = Service.lognormal(0.05, 2.0)
    qs = [0.5, 0.9, 0.99, 0.999]
    text = ",".join(f"{cli._fmt_pct(q)}={1e3 * float(fcfs.response_quantile(q, 8.0, svc)):.9f}ms" for q in qs)
    assert "p99.9=" in text
    out = run("fit", text, "--qps", "8", "--discipline", "fcfs", "--requests", "30000", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["cpu_per_request_s"] == pytest.approx(0.05, rel=1e-3)
    assert data["scv"] == pytest.approx(2.0, rel=1e-2)
    lo, hi = data["cpu_per_request_interval_s"]
    assert lo < 0.05 < hi and hi / lo < 1.5
    out = run("fit", text, "--qps", "8", "--discipline", "fcfs", "--requests", "30000", "--slo", "p99=1s")
    assert out.returncode == 0, out.stderr
    for words in ("CPU per request", "50 ms", "95% interval", "observed vs model", "p99.9", "QPS ceiling",
                  "binds: p99"):
        assert words in out.stdout


def _simulated_log(rates, seconds, seed):
    """Seeded M/G/1 FCFS log, 40 ms lognormal CPU (scv 1), rate stepping through ``rates``."""
    import numpy as np
    import pandas as pd

    from capacity import Service
    from capacity.sim import simulate

    req = simulate(pd.Series(np.repeat(rates, seconds)), Service.lognormal(0.04, 1.0), "fcfs", seed=seed).requests
    return req["completion"].to_numpy(), req["response"].to_numpy()


def test_fit_csv_log_table_through_subprocess(tmp_path):
    done, response = _simulated_log([5.0, 10.0, 15.0], 1200, seed=3)
    path = tmp_path / "requests.csv"
    path.write_text("time,duration_ms\n" + "".join(f"{float(t)!r},{1e3 * float(r)!r}\n" for t, r in zip(done, response)))
    out = spawn("fit", "--log", str(path), "--discipline", "fcfs", "--bins", "3", "--slo", "p99=500ms")
    assert out.returncode == 0, out.stderr
    assert "3 load bins" in out.stdout and "observed vs model" in out.stdout and "QPS ceiling" in out.stdout
    line = next(x for x in out.stdout.splitlines() if x.startswith("CPU per request"))
    cost_ms = float(line.split()[3])                  # "CPU per request  39.4 ms  [..."
    assert abs(cost_ms / 40 - 1) < 0.05


def test_fit_nginx_log(tmp_path):
    import datetime as dt

    done, response = _simulated_log([5.0, 15.0], 600, seed=4)
    t0 = dt.datetime(2024, 3, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
    # nginx stamps the completion time (one-second resolution in $time_local).
    lines = [f'10.0.0.1 - - [{(t0 + dt.timedelta(seconds=float(t))).strftime("%d/%b/%Y:%H:%M:%S %z")}] '
             f'"GET /api HTTP/1.1" 200 12 "-" "curl/8" {r:.3f} {r:.3f}\n' for t, r in zip(done, response)]
    path = tmp_path / "access.log"
    path.write_text("".join(lines) + "garbage line\n")
    out = run("fit", "--log", str(path), "--discipline", "fcfs", "--bins", "2", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["source"]["format"] == "nginx" and data["source"]["lines_skipped"] == 1
    assert any("malformed" in w.lower() or "skipped" in w.lower() for w in data["warnings"])
    assert abs(data["cpu_per_request_s"] / 0.04 - 1) < 0.1


def test_fit_unreadable_log_exits_2(tmp_path):
    path = tmp_path / "access.log"
    path.write_text("not an nginx line\nnor this\n")
    for target in (str(path), str(tmp_path / "missing.log")):
        out = run("fit", "--log", target)
        assert out.returncode == 2 and "Traceback" not in out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "argument --log" in lines[0] and target in lines[0]


@pytest.mark.parametrize("args,flag", [
    (["fit", "p50=45ms,p99=30ms", "--qps", "8"], "PERCENTILES"),        # decreasing latencies
    (["fit", "p50=45ms,p100=1s", "--qps", "8"], "PERCENTILES"),         # q = 1
    (["fit", "p0=1ms,p50=45ms", "--qps", "8"], "PERCENTILES"),          # q = 0
    (["fit", "p999=1s,p50=45ms", "--qps", "8"], "PERCENTILES"),         # ambiguous
    (["fit", "p50=45ms,p50=50ms", "--qps", "8"], "PERCENTILES"),        # twice
    (["fit", "p50,p99=300ms", "--qps", "8"], "PERCENTILES"),
    (["fit", "p50=fast,p99=300ms", "--qps", "8"], "PERCENTILES"),
    (["fit", "--qps", "8"], "PERCENTILES"),
    (["fit", "p50=45ms,p99=300ms"], "--qps"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "0"], "--qps"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--log", "x.log"], "--log"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--slices", "3"], "--slices"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--discipline", "rr", "--slices", "0"], "--slices"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--discipline", "rr", "--admission", "lifo"], "--admission"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--admission", "idle"], "--admission"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--discipline", "fcfs", "--admission", "fifo"],
     "--admission"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--slice-delay", "1ms"], "--slice-delay"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--discipline", "rr", "--slice-delay", "-1ms"],
     "--slice-delay"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--cpu-util", "150%"], "--cpu-util"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--delay", "50ms"], "--delay"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--delay", "sometimes"], "--delay"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--family", "weibull"], "--family"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--discipline", "lifo"], "--discipline"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--bins", "3"], "--bins"),
    (["fit", "p50=45ms,p99=300ms", "--qps", "8", "--slo", "p99=soon"], "--slo"),
    (["fit", "--log", "requests.csv", "--qps", "8"], "--qps"),
    (["fit", "--log", "requests.csv", "--requests", "100"], "--requests"),
    (["fit", "--log", "requests.csv", "--format", "csv", "--log-format", "$status"], "--log-format"),
])
def test_fit_bad_input_exits_2_naming_the_argument(args, flag):
    out = run(*args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0] and flag in lines[0], lines


def test_fit_rr_admission_is_passed_through_and_recorded():
    """--admission reaches the rr model: with the mean held by --cpu-util the model percentiles are
    rr's own for that admission (whatever rr's fitted constants), and the JSON records it."""
    import numpy as np

    from capacity import Service, rr

    svc, qs = Service.exponential(0.01), [0.9, 0.99, 0.999]
    text = ",".join(f"{cli._fmt_pct(q)}={1e3 * float(x):.9f}ms"
                    for q, x in zip(qs, rr.response_quantile(qs, 50.0, svc, slices=5, admission="idle")))
    base = ["fit", text, "--qps", "50", "--cpu-util", "50%", "--discipline", "rr", "--slices", "5",
            "--family", "exponential", "--json"]
    for extra, admission in (([], "fifo"), (["--admission", "fifo"], "fifo"),
                             (["--admission", "idle"], "idle")):
        out = run(*base, *extra)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["admission"] == admission and data["slices"] == 5
        assert ("idle admission" in data["model"]) == (admission == "idle")
        expected = np.asarray(rr.response_quantile(qs, 50.0, svc, slices=5, admission=admission))
        np.testing.assert_allclose([r["model_s"] for r in data["comparison"]], expected, rtol=1e-9)
    out = run("fit", text, "--qps", "50", "--cpu-util", "50%", "--discipline", "fcfs",
              "--family", "exponential", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["admission"] is None
    # --slice-delay: the timer gaps are part of the rr model the percentiles come from
    gapped = ",".join(f"{cli._fmt_pct(q)}={1e3 * float(x):.9f}ms" for q, x in zip(
        qs, rr.response_quantile(qs, 50.0, svc, slices=5, admission="idle", slice_delay=0.0011)))
    out = run("fit", gapped, *base[2:], "--admission", "idle", "--slice-delay", "1.1ms")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["slice_delay_s"] == pytest.approx(0.0011)
    np.testing.assert_allclose([r["model_s"] for r in data["comparison"]], np.asarray(
        rr.response_quantile(qs, 50.0, svc, slices=5, admission="idle", slice_delay=0.0011)), rtol=1e-9)
    help_text = " ".join(run("fit", "--help").stdout.split())   # argparse wraps to the terminal width
    assert "--admission {fifo,idle}" in help_text and "no request in flight is runnable" in help_text


@pytest.fixture
def from_requests_spy(tmp_path, monkeypatch):
    """A small CSV log, and fit.from_requests replaced by a spy that records its keyword arguments
    and stops the command (exit 2, "spy" on stderr): (path, the recorded kwargs)."""
    import capacity.fit

    seen = {}

    def spy(df, **kwargs):
        seen.update(kwargs)
        raise ValueError("spy: stop here")

    monkeypatch.setattr(capacity.fit, "from_requests", spy)
    path = tmp_path / "requests.csv"
    path.write_text("time,duration_ms\n1.0,10\n2.0,12\n3.0,11\n")
    return path, seen


def test_fit_log_passes_admission(from_requests_spy):
    """--log goes through from_requests, which hands admission on to from_percentiles."""
    path, seen = from_requests_spy
    out = run("fit", "--log", str(path), "--discipline", "rr", "--slices", "5", "--admission", "idle")
    assert out.returncode == 2 and "spy" in out.stderr
    assert seen["admission"] == "idle" and seen["slices"] == 5 and seen["discipline"] == "rr"
    seen.clear()
    run("fit", "--log", str(path), "--discipline", "rr", "--slice-delay", "1ms")
    assert seen["slice_delay"] == pytest.approx(0.001)
    seen.clear()
    run("fit", "--log", str(path), "--discipline", "rr")
    assert "admission" not in seen    # from_percentiles' default (fifo)


def test_fit_model_error_is_one_line():
    # one percentile cannot identify a mean and an scv: the library's ValueError, on one line
    out = run("fit", "p99=300ms", "--qps", "8", "--discipline", "fcfs")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot identify 2 free parameters" in lines[0]
    assert "argument PERCENTILES" in lines[0] and "--cpu-util" in lines[0]
    # 100 % CPU at 8 req/s gives E[S] = 1/8 s by the utilisation law: a saturated queue, no finite latency
    out = run("fit", "p50=45ms,p99=300ms", "--qps", "8", "--cpu-util", "100%", "--discipline", "fcfs")
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and "--cpu-util" in lines[0], lines


def test_percentile_parsing():
    assert cli._percentiles("p99=300ms,p50=45ms,p99.9=2s") == {0.5: 0.045, 0.99: 0.3, 0.999: 2.0}
    assert list(cli._percentiles("p99=1s,p50=1s")) == [0.5, 0.99]         # equal latencies are allowed
    assert cli._percentiles("0.95=120ms") == {0.95: 0.12}
    with pytest.raises(Exception, match="ambiguous"):
        cli._percentiles("p999=2s")


# ------------------------------------------------------------------ the glossary's flag names, and the pipe
def test_timing_flag_and_its_old_name(from_requests_spy):
    """--timing chooses the measured time a log fit models; --latency (its old name) still works for one
    release and says so on stderr, once."""
    path, seen = from_requests_spy
    out = run("fit", "--log", str(path), "--timing", "upstream")
    assert seen["timing"] == "upstream" and "latency" not in seen and "--latency" not in out.stderr
    seen.clear()
    out = run("fit", "--log", str(path), "--latency", "upstream")
    assert seen["timing"] == "upstream"
    assert out.stderr.splitlines()[0] == ("capacity: --latency is now --timing; the old name will be removed "
                                          "in the next release")
    assert "--latency" not in run("fit", "--help").stdout          # hidden: the help shows the new name


@pytest.mark.parametrize("args, message", [
    (["ceiling", "--cpu", "-25ms"], "argument --cpu: expected a positive time, got '-25ms'"),
    (["ceiling", "--cpu", "25ms", "--scv", "-1"],
     "argument --scv: expected a squared coefficient of variation >= 0 (a plain number such as 0.5 or 4), got '-1'"),
    (["ceiling", "--cpu", "25ms", "--scv", "2", "--family", "exponential"],
     "argument --scv: scv must be 1 for the exponential family, got 2.0"),
    (["ceiling", "--cpu", "25ms", "--slo", "p99=5 parsecs"],
     "argument --slo: expected a time like 25ms, 1.5s or 250us, got '5 parsecs'"),
])
def test_bad_values_are_one_line_naming_the_flag(args, message):
    """--cpu -25ms said "expected one argument" (argparse took it for an option), --scv -1 "expected a
    non-negative time"; each now says what is wrong with the value."""
    out = run(*args)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [f"capacity {args[0]}: error: {message}"]


def test_output_piped_into_head_ends_quietly():
    """`capacity ceiling ... | head -1`: head closes the pipe after one line, while the CLI still has
    ~300 kB to write (more than a pipe buffers); it must not print a BrokenPipeError traceback."""
    servers = ",".join(str(c) for c in range(1, 3001))
    cmd = (f"{shlex.quote(sys.executable)} -m capacity ceiling --cpu 25ms --discipline fcfs "
           f"--servers {servers} | head -1")
    proc = subprocess.Popen(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    assert out.startswith("QPS ceiling:") and len(out.splitlines()) == 1
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_json_carries_the_results_own_record():
    """--json of fit holds the result's to_dict() under "result" beside the command's fields."""
    out = run("fit", "p50=45ms,p90=80ms,p99=300ms", "--qps", "8", "--discipline", "fcfs", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["result"]["model"] == data["model"]
    assert data["result"]["parameters"]["cpu_per_request"]["estimate"] == pytest.approx(data["cpu_per_request_s"])


@pytest.mark.parametrize("args", [
    ["ceiling", "--cpu", "25ms"], ["servers", "--qps", "500", "--cpu", "25ms"],
    ["timeout", "--cpu", "25ms", "--timeout", "1s"], ["timeout", "--p999", "300ms"],
    ["scaling", "--qps", "300", "--cpu", "25ms", "--cores", "16", "--cores-per-machine", "4"],
    ["gc", "--cpu", "9.375ms", "--gc-share", "27.5%", "--pause", "47.3ms"],
    ["threads", "--qps", "1000", "--response", "100ms", "--calls", "3"],
    ["handoff", "--task", "1.6ms", "--servers", "2", "--cpu-util", "31%", "--burst", "5ms"],
    ["steal", "--cpu", "25ms", "--servers", "4", "--qps", "100", "--max-loss", "20%"]])
def test_planning_json_carries_the_results_own_record(args):
    """Every planning command's --json holds the plan result's to_dict() under "result" (the result
    protocol: to_dict is what --json prints), beside the command's own context fields."""
    out = run(*args, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["command"] == args[0]
    assert data["result"]["explanation"] == data["explanation"]


def test_ceiling_on_several_cores_with_any_cpu_law():
    """Processor sharing on several cores answers for every CPU law (it raised before)."""
    out = run("ceiling", "--cpu", "25ms", "--scv", "2", "--servers", "2", "--slo", "p99=500ms", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    qps = data["result"]["qps"] if "qps" in data["result"] else data["rows"][0]["qps"]
    assert 0 < qps < 80


def _saved_bucket_answer(path, rates, svc, le=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5), step=60.0):
    """A query_range answer of bucket increases whose shares are the exact PS model's."""
    from capacity import ps

    below = np.array([1.0 - np.asarray(ps.response_sf(list(le), r, svc)) for r in rates])
    result = [{"metric": {"le": repr(b)}, "values": [[1.7e9 + step * i, repr(float(step * r * below[i, j]))]
                                                      for i, r in enumerate(rates)]} for j, b in enumerate(le)]
    result.append({"metric": {"le": "+Inf"}, "values": [[1.7e9 + step * i, repr(float(step * r))]
                                                         for i, r in enumerate(rates)]})
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}))


def test_fit_saved_prometheus_answer(tmp_path):
    """A saved query_range answer of four 60 s windows (exact PS model, 20 ms lognormal CPU of scv
    2): the table shows the fit and the bucket comparison; --json the same numbers and the source."""
    from capacity import Service

    path = tmp_path / "buckets.json"
    _saved_bucket_answer(path, [5.0, 10.0, 20.0, 30.0], Service.lognormal(0.02, 2.0))
    out = run("fit", "--prometheus", str(path), "--measured-at", "client", "--slo", "p99=500ms")
    assert out.returncode == 0, out.stderr
    assert "4 windows of 60 s" in out.stdout and "share of requests slower" in out.stdout
    assert "QPS ceiling for p99 <= 500 ms" in out.stdout
    data = json.loads(run("fit", "--prometheus", str(path), "--measured-at", "client", "--json").stdout)
    assert data["source"]["kind"] == "prometheus_json" and data["source"]["windows"] == 4
    assert data["cpu_per_request_s"] == pytest.approx(0.02, rel=0.01)
    assert data["comparison"][0]["le_s"] == 0.005


def test_fit_prometheus_with_round_robin_profiles_the_slice_count(tmp_path):
    """--discipline rr on histograms without --slices: the count is profiled, as from_histograms
    does (it once held one slice, which is FCFS under another name).  An exact rr day (gamma CPU
    of 10 ms, scv 0.3, four slices; utilisation 0.1-0.7): the CPU within 2 %, more than one slice,
    and --slices fit the same answer; --slices 4 holds four."""
    from capacity import Service, rr

    le = (0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5)
    rates, step, svc = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0], 300.0, Service.gamma(0.01, 0.3)
    below = np.array([1.0 - np.asarray(rr.response_sf(list(le), r, svc, slices=4)) for r in rates])
    result = [{"metric": {"le": repr(b)}, "values": [[1.7e9 + step * i, repr(float(step * r * below[i, j]))]
                                                      for i, r in enumerate(rates)]} for j, b in enumerate(le)]
    result.append({"metric": {"le": "+Inf"}, "values": [[1.7e9 + step * i, repr(float(step * r))]
                                                         for i, r in enumerate(rates)]})
    path = tmp_path / "rr.json"
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}))
    base = ["fit", "--prometheus", str(path), "--measured-at", "client", "--discipline", "rr", "--json"]
    profiled, fit_word, held = (json.loads(run(*base, *extra).stdout) for extra in ([], ["--slices", "fit"],
                                                                                     ["--slices", "4"]))
    assert profiled["discipline"] == "rr" and profiled["slices"] >= 2, profiled["slices"]
    assert profiled["cpu_per_request_s"] == pytest.approx(0.01, rel=0.02)
    assert fit_word["slices"] == profiled["slices"]
    assert held["slices"] == 4 and held["cpu_per_request_s"] == pytest.approx(0.01, rel=0.02)


def test_fit_prometheus_day_of_windows_prints_one_line_per_window(tmp_path):
    from capacity import Service

    path = tmp_path / "day.json"
    _saved_bucket_answer(path, list(np.linspace(2.0, 30.0, 24)), Service.lognormal(0.02, 2.0))
    out = run("fit", "--prometheus", str(path), "--measured-at", "client")
    assert out.returncode == 0, out.stderr
    assert "windows (12 of 24, spread over the loads" in out.stdout


@pytest.mark.parametrize("args,message", [
    (["fit", "--prometheus", "http://127.0.0.1:9"], "--histogram: required"),
    (["fit", "--prometheus", "http://127.0.0.1:9", "--histogram", "h"], "could not reach Prometheus"),
    (["fit", "--prometheus", "nowhere.json"], "neither an http(s):// address nor a file"),
    (["fit", "--prometheus", "x.json", "--qps", "5"], "--qps: not used with --prometheus"),
    (["fit", "p50=1s", "--qps", "3", "--since", "2h"], "--since: applies to --prometheus only"),
    (["fit", "p50=1s", "--qps", "3", "--prometheus", "x.json"], "give one of PERCENTILES, --log, --prometheus"),
])
def test_fit_prometheus_usage_errors(args, message):
    out = run(*args)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert message in out.stderr


def test_fit_ceiling_that_contradicts_the_data_says_so():
    """The issue's report: a ceiling of 4.3 QPS printed as if fine although the observed p99 at
    7.5 QPS met the SLO.  With the model that gave it (ps, lognormal, no delay) the number stays
    the model's; the line under it says it contradicts the data, in the table and in --json.
    With the model chosen from the data the ceiling is above 7.5 QPS, and the line under it says
    that 55 % CPU at 7.5 QPS (73 ms per request) contradicts a 45 ms median."""
    args = ["fit", "p50=45ms,p90=120ms,p99=400ms", "--qps", "7.5", "--cpu-util", "55%", "--slo", "p99=500ms"]
    held = ["--discipline", "ps", "--family", "lognormal", "--delay", "0"]
    out = run(*args, *held)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("QPS ceiling"))
    assert lines[at + 1].startswith("  ! this contradicts the data: at 7.5 QPS the observed p99 400 ms met the SLO")
    assert lines[at + 2].startswith("  ! the data contradict each other: the CPU utilisation implies 73.3 ms")
    data = json.loads(run(*args, *held, "--json").stdout)
    assert data["ceiling"]["qps"] < 7.5 and len(data["ceiling"]["contradictions"]) == 2
    data = json.loads(run(*args, "--json").stdout)
    assert data["ceiling"]["qps"] > 7.5 and len(data["candidates"]) == 8
    assert [n[:48] for n in data["ceiling"]["contradictions"]] == ["the data contradict each other: the CPU utilisat"]


def test_fit_k6_and_timeseries_files(tmp_path):
    """--k6 reads a k6 JSON run (model chosen from the data, said in the table); --timeseries a
    dashboard CSV whose column names carry the units, and refuses one that does not."""
    import datetime as dt

    from capacity import Service, fcfs, simulate

    svc = Service.lognormal(0.02, 1.5)
    lines = [json.dumps({"type": "Metric", "metric": "http_req_duration",
                         "data": {"type": "trend", "contains": "time"}})]
    t0, begin = dt.datetime(2026, 12, 3, tzinfo=dt.timezone.utc).timestamp(), 0.0
    for i, rate in enumerate((10.0, 25.0)):
        req = simulate(rate, svc, discipline="ps", horizon=300.0, seed=i).requests
        for end, response in zip(req["completion"] + begin, req["response"]):
            stamp = dt.datetime.fromtimestamp(t0 + end, dt.timezone.utc).isoformat()
            lines.append(json.dumps({"type": "Point", "metric": "http_req_duration",
                                     "data": {"time": stamp, "value": 1e3 * response}}))
        begin += 300.0
    run_file = tmp_path / "run.json"
    run_file.write_text("\n".join(lines) + "\n")
    out = run("fit", "--k6", str(run_file), "--step", "1min")
    assert out.returncode == 0, out.stderr
    assert "model chosen from the data" in out.stdout and "windows of 60 s" in out.stdout
    # The candidates compared, as a table: the best five of eight, then how many more --json has.
    assert "dQAIC" in out.stdout and "miss in time" in out.stdout and "(3 more in --json)" in out.stdout
    data = json.loads(run("fit", "--k6", str(run_file), "--json").stdout)
    assert data["source"]["kind"] == "k6" and len(data["candidates"]) == 8
    best = data["candidates"][0]
    row = next(line for line in out.stdout.splitlines() if line.startswith(f"  {best['discipline']} "))
    assert best["family"] in row and f"{100 * best['rms_log_time_miss']:.1f}%" in row
    assert data["cpu_per_request_s"] == pytest.approx(0.02, rel=0.05)

    rates = np.linspace(5.0, 30.0, 8)
    frame = {"time": np.arange(8) * 60.0, "qps": rates, "cpu_percent": 100 * 0.02 * rates,
             "p50_ms": 1e3 * np.asarray(fcfs.response_quantile(0.5, rates, svc)),
             "p99_ms": 1e3 * np.asarray(fcfs.response_quantile(0.99, rates, svc))}
    csv = tmp_path / "day.csv"
    csv.write_text("\n".join([",".join(frame)] + [",".join(repr(float(frame[k][i])) for k in frame)
                                                 for i in range(8)]) + "\n")
    out = run("fit", "--timeseries", str(csv), "--discipline", "fcfs")
    assert out.returncode == 0, out.stderr
    assert "8 of 8 rows" in out.stdout and "20 ms" in out.stdout
    csv.write_text(csv.read_text().replace("p99_ms", "p99"))
    out = run("fit", "--timeseries", str(csv), "--discipline", "fcfs")
    assert out.returncode == 2 and "argument --timeseries: column 'p99': its unit is not in its name" in out.stderr


def test_fit_on_several_cores_of_an_event_loop_says_how_to_read_a_node_cluster():
    """A processor-sharing fit on 4 servers: the table and --json say that Node.js cluster workers
    are four one-core queues, to be fitted and planned per worker; on one server, or for a blocking
    (FCFS) pool, nothing is said."""
    base = ["fit", "p50=45ms,p90=120ms,p99=400ms", "--qps", "30", "--cpu-util", "55%"]
    out = run(*base, "--servers", "4", "--discipline", "ps", "--slo", "p99=500ms")
    assert out.returncode == 0, out.stderr
    assert "note: If the 4 servers are Node.js cluster workers" in out.stdout and "plan per worker" in out.stdout
    data = json.loads(run(*base, "--servers", "4", "--discipline", "ps", "--json").stdout)
    assert len(data["notes"]) == 1 and "4 one-core queues" in data["notes"][0]
    for extra in (["--servers", "1", "--discipline", "ps"], ["--servers", "4", "--discipline", "fcfs"]):
        data = json.loads(run(*base, *extra, "--json").stdout)
        assert data["notes"] == [], extra


def test_fit_saved_prometheus_answers_with_their_cpu_answer():
    """The shipped day (data/prometheus: a real Prometheus's answers, 1 ms lognormal CPU): with
    --cpu-counter naming the saved CPU answer the CPU per request is held by the utilisation law
    (within 3 % of the 1 ms truth); a --cpu-counter file that is not there, or the flag without
    --prometheus, is one line on stderr."""
    data_dir = pathlib.Path(__file__).resolve().parents[1] / "data" / "prometheus"
    buckets, cpu = data_dir / "buckets.json", data_dir / "cpu.json"
    data = json.loads(run("fit", "--prometheus", str(buckets), "--cpu-counter", str(cpu), "--json").stdout)
    assert data["parameters"]["cpu_per_request"]["note"].startswith("from the utilisation law")
    assert data["cpu_per_request_s"] == pytest.approx(0.001, rel=0.03)
    out = run("fit", "--prometheus", str(buckets), "--cpu-counter", "nowhere.json")
    assert out.returncode == 2 and "--cpu-counter" in out.stderr and "is not a file" in out.stderr
    out = run("fit", "p50=1s", "--qps", "3", "--cpu-counter", str(cpu))
    assert out.returncode == 2 and "--cpu-counter: applies to --prometheus only" in out.stderr
