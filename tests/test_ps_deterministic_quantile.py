"""PS quantiles with deterministic CPU time: the atom at E[S] and the solver near kinks (issue 14).

References are independent of the quantile solver: the atom's mass in closed form, and brentq on
the model's own ``response_sf`` (the quantile is the root of ``P(T > t) = 1 - q``).
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from scipy import optimize

from capacity import Service, ps
from capacity._ps_transform import _expm


def _brentq_quantile(q: float, lam: float, svc: Service, servers: int, lo: float, hi: float) -> float:
    return optimize.brentq(lambda t: float(ps.response_sf(t, lam, svc, servers)) - (1.0 - q), lo, hi,
                           xtol=1e-12, rtol=1e-11)


@pytest.mark.parametrize("rho", [0.002, 0.05, 0.3])
def test_levels_inside_the_atom_are_the_cpu_time(rho):
    # One core: T = S = E[S] exactly when nobody is present at arrival and nobody arrives during
    # the service, probability (1 - rho) exp(-lambda E[S]) (Poisson arrivals, PASTA).
    mean = 0.025
    lam = rho / mean
    mass = (1.0 - rho) * np.exp(-rho)
    q = np.array([0.5 * mass, 0.999 * mass, mass + 0.5 * (1.0 - mass)])
    got = np.asarray(ps.response_quantile(q, lam, Service.deterministic(mean)))
    assert got[0] == mean and got[1] == mean
    assert got[2] > mean * (1.0 + 1e-6)


@pytest.mark.parametrize("rho, q, hi", [(0.5, 0.5, 3.0), (0.5, 0.99, 20.0), (0.9, 0.9, 40.0),
                                        (0.995, 0.999, 3000.0), (0.995, 0.5, 500.0)])
def test_one_core_quantile_is_the_root_of_the_sf(rho, q, hi):
    # rho 0.995, p99.9 is where Newton alone oscillated around a kink and stopped 2e-6 off after
    # 60 iterations; the safeguarded solver must land on the sf's root.
    svc = Service.deterministic(1.0)
    ref = _brentq_quantile(q, rho, svc, 1, 1.0 + 1e-9, hi)
    got = float(ps.response_quantile(q, rho, svc))
    assert got == pytest.approx(ref, rel=1e-7)


def test_four_cores_quantile_is_the_root_of_the_sf():
    svc = Service.deterministic(1.0)
    for rho, q, hi in [(0.3, 0.99, 10.0), (0.8, 0.9, 20.0)]:
        ref = _brentq_quantile(q, 4 * rho, svc, 4, 1.0 + 1e-9, hi)
        assert float(ps.response_quantile(q, 4 * rho, svc, 4)) == pytest.approx(ref, rel=1e-7)


def test_four_cores_light_load_is_the_cpu_time():
    # On 4 cores at utilisation 0.1 a request shares a core with probability well below 1 %:
    # the median and p99 are the CPU time itself, and the sf just above it is below 1 %.
    svc = Service.deterministic(0.02)
    lam = 4 * 0.1 / 0.02
    assert float(ps.response_sf(0.02 * (1 + 1e-6), lam, svc, 4)) < 0.01
    np.testing.assert_array_equal(ps.response_quantile([0.5, 0.99], lam, svc, 4), [0.02, 0.02])


def test_expm_with_mixed_norms_matches_scipy():
    # _expm squares each matrix of a stack as often as its own norm needs.
    rng = np.random.default_rng(7)
    scale = np.exp(rng.uniform(-4.0, 6.0, size=(30, 1, 1)))
    a = (rng.normal(size=(30, 6, 6)) + 1j * rng.normal(size=(30, 6, 6))) * scale - 2.0 * scale * np.eye(6)
    got = _expm(a)
    ref = np.array([scipy.linalg.expm(m) for m in a])
    size = np.max(np.abs(ref), axis=(-1, -2), keepdims=True)
    assert np.max(np.abs(got - ref) / size) < 1e-10
