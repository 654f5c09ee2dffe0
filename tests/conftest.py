"""Test-suite settings.

Hypothesis is derandomised so every run (and CI) draws the same examples: a
failure is reproducible, and no run passes by luck of the draw.

Tests that measure in wall-clock time -- a real server's latencies, a load played in real time
into a Prometheus, a browser waiting for a widget -- are marked ``wallclock`` here (the modules
and tests in :data:`WALLCLOCK`).  The README's test command runs the rest on every core, a
file to a worker (``pytest -n auto --dist loadfile -m "not wallclock"``, pytest-xdist), and then
these alone, one at a time, so that no other test's CPU shows in what they measure.  A plain
``pytest`` runs everything in one process, as before.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from capacity import rr

settings.register_profile(
    "capacity",
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("capacity")

#: Where a neighbour's CPU would show in the measurement: module -> the tests of it (None: all).
WALLCLOCK = {
    "test_browser.py": None,            # Chromium and a Jupyter server, waiting on widgets
    "test_browser_lab.py": None,
    "test_prometheus.py": None,         # a load fed in real time into a scraped exporter
    "test_prometheus_server.py": None,  # a real Koa server's in-process latencies
    "test_fleet.py": None,              # a load fed into a Prometheus, and a Dask LocalCluster
    "test_log_dask.py": None,           # a Dask LocalCluster's worker processes and timeouts
    "test_validation_harness.py": None,  # the real server measured against the models
    "test_validation_user_path.py": {"test_the_short_user_path_runs_and_reports",
                                     "test_loadgen_schedule_plays_each_phase_at_its_rate"},
}


def pytest_configure(config):
    config.addinivalue_line("markers", "wallclock: measures in wall-clock time; run alone, not beside "
                                       "other tests (see tests/conftest.py)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        tests = WALLCLOCK.get(item.path.name, ())
        if tests is None or (tests and item.originalname in tests):
            item.add_marker(pytest.mark.wallclock)


@pytest.fixture(params=["shipped", "stand-in"])
def idle_constants(request, monkeypatch):
    """capacity.rr's admission="idle" constants as shipped, or arbitrary non-zero stand-ins of the
    same shape, under which the slice delay changes the idle quantiles non-additively (a planner
    that drops it, or takes (k - 1) d off the threshold as for fifo, fails).  Tests using it
    compare the planners, fits and curves with rr itself, never with numbers that depend on the
    constants."""
    if request.param == "stand-in":
        n = len(rr._IDLE_MEAN)
        monkeypatch.setattr(rr, "_IDLE_MEAN", tuple(np.linspace(0.3, 0.7, n)))
        rows = rr._IDLE_Q.shape[0]
        monkeypatch.setattr(rr, "_IDLE_Q", np.linspace(0.2, 0.6, n)[None, :] + 0.1 * np.arange(rows)[:, None])
    return request.param


@pytest.fixture
def direct(monkeypatch):
    """Run a function with the shipped quantile tables disabled: the direct computation they
    interpolate (the reference of test_quantile_table.py and test_ps_near_constant_table.py)."""
    from capacity import _quantile_table

    def run(func, *args, **kw):
        monkeypatch.setattr(_quantile_table, "disabled", True)
        try:
            return np.asarray(func(*args, **kw), dtype=float)
        finally:
            monkeypatch.setattr(_quantile_table, "disabled", False)
    return run


@pytest.fixture(scope="session")
def concurrent_setups(request):
    """The slow wall-clock setups of several modules (a real Prometheus under a played load), run
    side by side: see _concurrent_setups.py.  Stops whatever is still running at the session's end."""
    import _concurrent_setups

    runner = _concurrent_setups.Runner(request.session)
    yield runner
    runner.close()
