"""A parameter on its search bound: its range from the profile likelihood, not from the curvature.

When the best fit puts a parameter on the edge of its search box -- a service-time scv at its
floor (the CPU is as constant as the family allows), a delay at 0 -- the Wald interval from the
curvature of the deviance there means nothing: the deviance is often flat towards the bound (scv
0.001 and 0.01 give the same response times), so its inverse curvature is huge and the drawn
parameters, clipped to the box, pile up at the *other* end (a mix handler's scv drawn up to 100,
its predicted p99 interval reaching 16 s about a 92 ms estimate).

Here the parameter is instead stepped inward from the bound while every other free parameter is
fitted again (the profile), and the scaled rise of the deviance ``(G(t) - G(0)) / phi`` (``phi``
the dispersion, as in the covariance) is read along the way:

* the parameter's interval is ``[bound, bound + t_c]`` with ``t_c`` where the rise reaches
  ``chi2_1(confidence)`` -- the profile-likelihood interval (Venzon and Moolgavkar 1988), which
  for a parameter on a boundary holds the bound itself;
* parameter draws (for prediction intervals) put it at ``bound + s |Z|``, ``s`` where the rise
  reaches 1 (one standard error of a half-normal), and the other parameters on the profile path
  at that distance plus their conditional Wald noise (the Schur complement of the covariance) --
  the distribution of an estimate on a boundary is half a point mass and half a normal
  (Self and Liang 1987); the half-normal is the conservative side of it.

When the rise never reaches the level within the box, the data cannot bound the parameter and
the range is the whole box, which is what an honest interval then says.

References: S. G. Self and K.-Y. Liang, "Asymptotic properties of maximum likelihood estimators
and likelihood ratio tests under nonstandard conditions", JASA 82 (1987) 605-610; D. J. Venzon
and S. H. Moolgavkar, "A method for computing profile-likelihood-based confidence intervals",
Applied Statistics 37 (1988) 87-94.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
from scipy import optimize, stats

__all__ = ["BoundProfile", "draws_with_bounds", "on_bound", "profile_from_bound"]

#: A parameter this close to a bound (share of its search span) is on it (as the fit's warning says).
ON_BOUND = 1e-4
_STEPS = 14                  # inward steps, span * 2^-13 .. span
_ENOUGH = 12.0               # rise beyond any draw or interval of interest (chi2_1 at 0.9995)


class BoundProfile(NamedTuple):
    """The profile of parameter ``index`` stepped inward from ``bound`` (``direction`` +1 from the
    lower bound, -1 from the upper): ``steps`` (distances, first 0), ``path`` (the full parameter
    vector refitted at each step, shape (T, p)) and ``rise`` (scaled deviance rise at each)."""

    index: int
    bound: float
    direction: float
    steps: np.ndarray
    path: np.ndarray
    rise: np.ndarray

    def distance(self, rise: float) -> float:
        """Distance from the bound at which the scaled rise reaches ``rise`` (the last step's when it
        never does: the box bounds it, not the data)."""
        r = np.maximum.accumulate(self.rise)          # a refit may dip: the profile is taken monotone
        if r[-1] < rise:
            return float(self.steps[-1])
        j = int(np.argmax(r >= rise))
        if r[j] == r[j - 1]:
            return float(self.steps[j])
        # Monotone cubic through the profile (PCHIP keeps it monotone): between doubling steps a
        # straight line would miss a curved rise by a few percent.
        from scipy.interpolate import PchipInterpolator

        curve = PchipInterpolator(self.steps, r)
        return float(optimize.brentq(lambda t: float(curve(t)) - rise, self.steps[j - 1], self.steps[j]))

    def interval(self, confidence: float) -> tuple[float, float]:
        """The profile-likelihood interval of the parameter (search units), the bound at one end."""
        far = self.bound + self.direction * self.distance(float(stats.chi2.ppf(confidence, 1)))
        return (min(self.bound, far), max(self.bound, far))

    def shift(self, t: np.ndarray) -> np.ndarray:
        """The parameter vectors on the profile path at distances ``t`` (K,), shape (K, p)."""
        columns = [np.interp(t, self.steps, self.path[:, j]) for j in range(self.path.shape[1])]
        return np.stack(columns, axis=1)


def on_bound(theta: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[int]:
    """Indices of the parameters on a search bound."""
    span = hi - lo
    return [i for i in range(theta.size) if min(theta[i] - lo[i], hi[i] - theta[i]) < ON_BOUND * span[i]]


def profile_from_bound(residuals: Callable[[np.ndarray], np.ndarray], theta: np.ndarray, index: int,
                       lo: np.ndarray, hi: np.ndarray, dispersion: float) -> BoundProfile:
    """Step parameter ``index`` inward from its bound, refitting the others by least squares on
    ``residuals`` (whose sum of squares is the deviance), until the scaled rise passes every level
    of interest or the box ends.  At most ``14 x`` a small refit (a few residual evaluations each)."""
    lower = theta[index] - lo[index] <= hi[index] - theta[index]
    bound = float(lo[index] if lower else hi[index])
    direction = 1.0 if lower else -1.0
    span = float(hi[index] - lo[index])
    others = [j for j in range(theta.size) if j != index]
    g0 = float(np.sum(residuals(theta) ** 2))
    steps, path, rise = [0.0], [theta.copy()], [0.0]
    current = theta.copy()
    for t in span * 2.0 ** -np.arange(_STEPS - 1, -1, -1):
        point = current.copy()
        point[index] = bound + direction * t
        if others:
            def fun(x, point=point):
                full = point.copy()
                full[others] = x
                return residuals(full)

            x0 = np.clip(current[others], lo[others], hi[others])
            sol = optimize.least_squares(fun, x0, bounds=(lo[others], hi[others]), method="trf",
                                         x_scale="jac", max_nfev=30)
            point[others] = sol.x
            g = float(np.sum(sol.fun ** 2))
        else:
            g = float(np.sum(residuals(point) ** 2))
        current = point
        steps.append(float(t))
        path.append(point)
        rise.append(max((g - g0) / max(dispersion, 1.0), 0.0))
        if rise[-1] > _ENOUGH:
            break
    return BoundProfile(index, bound, direction, np.array(steps), np.array(path), np.array(rise))


def draws_with_bounds(theta: np.ndarray, cov: np.ndarray, profiles: list[BoundProfile], n: int,
                      rng: np.random.Generator) -> np.ndarray:
    """(n, p) parameter draws: each on-bound parameter at ``bound + s |Z|`` along its profile path
    (``s`` its one-standard-error distance), the free ones' Wald noise conditional on them."""
    p = theta.size
    fixed = [pr.index for pr in profiles]
    free = [j for j in range(p) if j not in fixed]
    draws = np.tile(theta, (n, 1))
    for pr in profiles:
        s = pr.distance(1.0)
        t = np.minimum(s * np.abs(rng.standard_normal(n)), pr.steps[-1])
        draws += pr.shift(t) - theta[None, :]
    if free:
        c = 0.5 * (cov + cov.T)
        cond = c[np.ix_(free, free)]
        if fixed:
            cf = c[np.ix_(free, fixed)]
            cond = cond - cf @ np.linalg.pinv(c[np.ix_(fixed, fixed)]) @ cf.T
        w, v = np.linalg.eigh(0.5 * (cond + cond.T))
        root = v * np.sqrt(np.maximum(w, 0.0))
        draws[:, free] += rng.standard_normal((n, len(free))) @ root.T
    return draws
