"""Test-suite settings.

Hypothesis is derandomised so every run (and CI) draws the same examples: a
failure is reproducible, and no run passes by luck of the draw.
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
