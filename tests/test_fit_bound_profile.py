"""A parameter on its search bound: the profile-likelihood range (capacity.fit._bound_profile).

Hand-worked case: residuals r = ((a + b - 1) / s, (a - b + 3) / s), a >= 0.  Unconstrained the
least-squares optimum is a = -1, so the fit sits on a = 0.  Profiling b out at a = t (b = 2 for
every t, where the two residuals are equal) leaves ``G(t) = (2 t + 2)^2 / (2 s^2)``, a rise
``(2 t^2 + 4 t) / s^2`` above G(0), which reaches L at ``t = (-4 + sqrt(16 + 8 L s^2)) / 4``.
"""
import math

import numpy as np
import pytest
from scipy import stats

from capacity.fit._bound_profile import draws_with_bounds, on_bound, profile_from_bound

S = 0.5
LO, HI = np.array([0.0, -10.0]), np.array([4.0, 10.0])


def residuals(theta: np.ndarray) -> np.ndarray:
    a, b = theta
    return np.array([(a + b - 1.0) / S, (a - b + 3.0) / S])


def distance_at(rise: float) -> float:
    return (-4.0 + math.sqrt(16.0 + 8.0 * rise * S ** 2)) / 4.0


@pytest.fixture(scope="module")
def profile():
    theta = np.array([0.0, 2.0])                 # the bounded least-squares optimum
    assert on_bound(theta, LO, HI) == [0]
    return profile_from_bound(residuals, theta, 0, LO, HI, dispersion=1.0)


def test_the_profile_is_the_hand_worked_one(profile):
    t = profile.steps
    np.testing.assert_allclose(profile.rise, (2 * t ** 2 + 4 * t) / S ** 2, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(profile.path[:, 1], 2.0, atol=1e-6)
    low, high = profile.interval(0.95)
    assert low == 0.0
    # A monotone cubic through doubling steps: well within 1 %.
    assert high == pytest.approx(distance_at(stats.chi2.ppf(0.95, 1)), rel=0.01)
    assert profile.distance(1.0) == pytest.approx(distance_at(1.0), rel=0.01)


def test_a_rise_that_never_comes_leaves_the_whole_box():
    flat = profile_from_bound(lambda th: np.array([th[1] - 2.0]), np.array([0.0, 2.0]), 0, LO, HI, 1.0)
    assert flat.interval(0.95) == (0.0, 4.0)


def test_the_dispersion_widens_the_range(profile):
    wide = profile_from_bound(residuals, np.array([0.0, 2.0]), 0, LO, HI, dispersion=4.0)
    assert wide.interval(0.95)[1] == pytest.approx(distance_at(stats.chi2.ppf(0.95, 1) * 4.0), rel=0.01)
    assert wide.interval(0.95)[1] > profile.interval(0.95)[1]


def test_draws_are_half_normal_from_the_bound_and_never_cross_it(profile):
    theta = np.array([0.0, 2.0])
    cov = np.array([[1e6, 0.0], [0.0, 0.01]])      # the curvature's useless variance for a
    draws = draws_with_bounds(theta, cov, [profile], 20000, np.random.default_rng(3))
    a = draws[:, 0]
    assert a.min() >= 0.0
    # Half-normal with scale distance_at(1): its median is 0.674 of the scale.
    assert np.median(a) == pytest.approx(0.674 * distance_at(1.0), rel=0.05)
    assert np.std(draws[:, 1]) == pytest.approx(0.1, rel=0.05)


def test_an_upper_bound_is_profiled_downwards():
    # Mirror image: r = ((b - a + 1) / s, (-a - b + 3) / s) with a <= 0 ... reflected, a = -t.
    lo, hi = np.array([-4.0, -10.0]), np.array([0.0, 10.0])
    prof = profile_from_bound(lambda th: residuals(np.array([-th[0], th[1]])), np.array([0.0, 2.0]), 0,
                              lo, hi, 1.0)
    low, high = prof.interval(0.95)
    assert high == 0.0
    assert -low == pytest.approx(distance_at(stats.chi2.ppf(0.95, 1)), rel=0.01)
