"""A real Prometheus server scraping a local exporter fed by a simulated queue, in wall-clock time.

Used by ``tests/test_prometheus.py`` (the fit through the HTTP API) and by
``tools/record_prometheus_day.py`` (the recorded answers shipped in ``data/prometheus/``).

* :func:`run_prometheus` starts Debian's ``prometheus`` binary on a free loopback port with a
  temporary config (one scrape job) and data directory, waits until it is ready, and stops it.
* :func:`wait_for_scrapes` polls it until its targets have been scraped (so often, or since a
  given time).
* :func:`feed` plays completed requests into a ``prometheus_client`` histogram and a CPU
  counter (``process_cpu_seconds_total``, the CPU the requests used) as wall-clock time reaches
  their completion times.
* :func:`simulated_requests` makes those requests: a seeded ``capacity.simulate`` run per phase
  of a rate schedule, on one clock.

The latencies come from a simulation, not from a server: what is real is the exporter library,
the scrape, Prometheus's storage and its ``increase``/``rate`` arithmetic, and the HTTP API.
"""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence

import numpy as np


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_and_load_cores() -> tuple[int | None, int | None]:
    """A core for a Node.js server and another for the load generator (None, None on fewer than
    two cores or off Linux), as ``validation/run.py`` pins them.

    Left to the scheduler, two processes talking over loopback are woken on each other's core,
    and the generator's polling before each send then takes the server's CPU in the middle of a
    handler: unpinned, on a 2-core VM otherwise idle, the validation server had the CPU for 57-89 %
    of its busy loops' wall time (``/stats``: ``spin_cpu_ms`` against ``spin_wall_ms``)."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:      # not Linux
        return None, None
    return (cores[0], cores[1]) if len(cores) >= 2 else (None, None)


def pinned(core: int | None):
    """A ``preexec_fn`` for :class:`subprocess.Popen` pinning the child, and every thread it
    starts, to ``core`` (the system call of ``taskset -c CORE``); None leaves it to the scheduler."""
    if core is None:
        return None
    return lambda: os.sched_setaffinity(0, {core})


def spin_times(port: int) -> tuple[float, float]:
    """The validation server's busy loops' wall and CPU time since its start or last ``/reset``,
    in ms (its ``/stats``)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as response:
        stats = json.load(response)
    return stats["spin_wall_ms"], stats["spin_cpu_ms"]


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
            raise RuntimeError(f"prometheus exited with status {proc.returncode}: {err.strip()[-500:]}")
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=1.0) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"Prometheus at {url} did not become ready in {timeout:.0f} s")


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """Terminate a child process, killing it if it has not exited within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextlib.contextmanager
def run_prometheus(targets: Sequence[str] | Mapping[str, Sequence[str]], scrape_interval: float = 1.0,
                   workdir: pathlib.Path | None = None) -> Iterator[str]:
    """Start Prometheus scraping ``targets`` (``host:port``) under the job ``demo``, or each job's
    targets of a mapping ``{job: targets}``; yields its URL.  RuntimeError when the binary is
    absent or does not start."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise RuntimeError("the prometheus binary is not installed (Debian package 'prometheus')")
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = pathlib.Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="capacity-prom-")))
        config = workdir / "prometheus.yml"
        jobs = targets if isinstance(targets, Mapping) else {"demo": targets}
        scrapes = "".join(f"  - job_name: {job}\n    static_configs:\n"
                          f"      - targets: [{', '.join(repr(t) for t in listed)}]\n" for job, listed in jobs.items())
        config.write_text(
            f"global:\n  scrape_interval: {scrape_interval:g}s\n  evaluation_interval: {scrape_interval:g}s\n"
            f"scrape_configs:\n{scrapes}")
        port = free_port()
        proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url, proc)
            yield url
        finally:
            stop(proc)


def _instant(url: str, expr: str) -> list[float]:
    """The values of an instant query's vector answer, or [] when Prometheus cannot answer yet."""
    query = urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=2.0) as r:
            answer = json.load(r)
    except OSError:
        return []
    return [float(series["value"][1]) for series in answer.get("data", {}).get("result", [])]


def wait_for_scrapes(url: str, targets: int, count: int = 0, after: float | None = None,
                     timeout: float = 30.0) -> None:
    """Poll Prometheus until each of its ``targets`` scrape targets has been scraped successfully at
    least ``count`` times and, with ``after`` (Unix time), successfully since then: the samples up
    to ``after`` are then all stored.  RuntimeError after ``timeout`` seconds.

    Prometheus applies its scrape targets a few seconds after it is ready (2.42: its scrape
    manager reloads every 5 s), so a fixed pause after start-up does not ensure a first scrape."""
    deadline = time.time() + timeout
    while True:
        scraped = _instant(url, "sum_over_time(up[1h])")
        # timestamp() of a selector is its samples' time (of an expression, the evaluation's)
        latest = _instant(url, "timestamp(up) and up == 1") if after is not None else []
        if len(scraped) == targets and min(scraped) >= count and \
                (after is None or (len(latest) == targets and min(latest) > after)):
            return
        if time.time() > deadline:
            wanted = [f"{count} time(s)"] * (count > 0) + [f"since {after:.3f}"] * (after is not None)
            raise RuntimeError(f"Prometheus at {url} did not scrape its {targets} target(s) "
                               f"{' and '.join(wanted)} in {timeout:.0f} s (successful scrapes: {scraped})")
        time.sleep(0.1)


@contextlib.contextmanager
def exporter(buckets: Sequence[float], name: str = "demo_request_duration_seconds"):
    """A ``prometheus_client`` exporter on a free loopback port: yields (host:port, histogram,
    cpu counter)."""
    import prometheus_client as client

    registry = client.CollectorRegistry()
    hist = client.Histogram(name, "request duration, seconds", buckets=list(buckets), registry=registry)
    cpu = client.Counter("process_cpu_seconds", "CPU seconds the requests used", registry=registry)
    port = free_port()
    server, _thread = client.start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        yield f"127.0.0.1:{port}", hist, cpu
    finally:
        server.shutdown()


def simulated_requests(service, schedule: Sequence[tuple[float, float]], discipline: str = "ps",
                       seed: int = 0) -> np.ndarray:
    """Rows (completion time, response, cpu), sorted by completion, of a seeded simulation of each
    ``(rate, seconds)`` phase of ``schedule``, one after another on one clock from 0.  Each phase
    starts empty (a few requests of a busy phase's queue are lost at its end)."""
    from capacity import simulate

    rows, begin = [], 0.0
    for i, (rate, seconds) in enumerate(schedule):
        req = simulate(rate, service, discipline=discipline, horizon=seconds, seed=seed + i).requests
        rows.append(np.c_[req["completion"] + begin, req["response"], req["service"]])
        begin += seconds
    out = np.concatenate(rows)
    return out[np.argsort(out[:, 0])]


def feed(rows: np.ndarray, hist, cpu, tick: float = 0.01) -> float:
    """Observe each row's response and add its CPU when wall-clock time reaches its completion;
    returns the Unix time of the clock's zero."""
    t0 = time.time()
    done = 0
    while done < len(rows):
        upto = int(np.searchsorted(rows[:, 0], time.time() - t0, side="right"))
        for _, response, work in rows[done:upto]:
            hist.observe(response)
            cpu.inc(work)
        done = upto
        time.sleep(tick)
    return t0
