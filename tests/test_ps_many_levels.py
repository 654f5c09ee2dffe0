"""Many levels of one processor-sharing queue read from one grid of P(T > t) (capacity.ps).

Reference: the same package's Newton solve per level (below the grid's threshold of levels the
per-level path is taken), an independent computation of each quantile from the transform."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

from capacity import Service, ps


@pytest.mark.parametrize("service, rho, rtol", [
    (Service.hyperexponential(1.0, 3.0), 0.5, 1e-5),
    (Service.hyperexponential(1.0, 8.0), 0.05, 1e-5),
    (Service.hyperexponential(0.02, 2.0), 0.9 / 0.02, 1e-5),
    (Service.erlang(1.0, 3), 0.7, 1e-5),
])
def test_a_latency_curve_from_the_grid_matches_the_solve_per_level(service, rho, rtol):
    """60 levels from 1e-4 to 1 - 1e-6 go through the grid (asserted); every 6th of them, solved
    on its own (10 levels: below the threshold), agrees within ``rtol``, and the curve increases."""
    levels = np.r_[1e-4, np.linspace(0.01, 0.99, 57), 0.9999, 1 - 1e-6]
    with mock.patch.object(ps, "_quantiles_on_grid", wraps=ps._quantiles_on_grid) as grid:
        curve = np.asarray(ps.response_quantile(levels, rho, service))
    assert grid.call_count == 1
    some = levels[::6]
    alone = np.asarray(ps.response_quantile(some, rho, service))
    np.testing.assert_allclose(curve[::6], alone, rtol=rtol)
    assert np.all(np.diff(curve) > 0)
    assert np.all(curve >= np.asarray(service.ppf(levels)) * (1 - 1e-12))


def test_the_grid_is_not_used_across_loads_or_for_few_levels():
    """Different loads are different queues, and a few levels are cheaper solved one by one."""
    svc = Service.hyperexponential(1.0, 3.0)
    with mock.patch.object(ps, "_quantiles_on_grid", wraps=ps._quantiles_on_grid) as grid:
        ps.response_quantile(np.linspace(0.05, 0.95, 60), np.linspace(0.1, 0.8, 60), svc)
        ps.response_quantile(np.linspace(0.05, 0.95, 10), 0.5, svc)
    assert grid.call_count == 0


def test_unstable_points_stay_infinite_beside_the_grid():
    """A curve over levels at a load above capacity is inf; at a stable load it is finite."""
    svc = Service.hyperexponential(1.0, 3.0)
    levels = np.linspace(0.01, 0.99, 60)
    assert np.all(np.isinf(ps.response_quantile(levels, 1.2, svc)))
    both = np.asarray(ps.response_quantile(levels[:, None], np.array([0.5, 1.2]), svc))
    assert np.all(np.isfinite(both[:, 0])) and np.all(np.isinf(both[:, 1]))
