"""The CPU law of a mix of request kinds (cache hits and misses, endpoints), by its first two moments.

A request is of kind ``i`` with probability ``w_i`` and then needs ``S_i`` of CPU, so the mix
``S`` has ``E[S] = sum w_i E[S_i]`` and ``E[S^2] = sum w_i E[S_i^2]`` exactly.  :class:`Service`
has no mixture family, so the planners carry the mix as the gamma law with those two moments
(:func:`_two_moment`).  What that choice makes exact and what approximate is the same for every
caller (:mod:`capacity.plan.cache`, :mod:`capacity.plan.endpoints`):

* every **mean** is exact -- FCFS on one core through Pollaczek-Khinchine (only ``E[S]`` and
  ``E[S^2]`` enter), processor sharing on any number of cores by insensitivity (only ``E[S]``);
* **percentiles** need the whole law and are those of the gamma stand-in (error measured in the
  callers' docstrings against the simulator run on the true mix) -- except FCFS on one core, where
  :func:`_mix_ceilings` carries the mix itself as atoms (:func:`capacity._tagged.mix_atoms`)
  through the exact M/G/1 wait.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..distributions import Service

# A mix of two deterministic costs at hit ratio 0 or 1 has scv 0, which the gamma family cannot
# take; scv 1e-6 is a gamma with standard deviation 0.1 % of its mean -- deterministic for any
# latency percentile a planner reads.
_MIN_SCV = 1e-6


def _moments(weights: Sequence[np.ndarray], services: Sequence[Service]) -> tuple[np.ndarray, np.ndarray]:
    """``(E[S], E[S^2])`` of the mix: kind ``i`` with probability ``weights[i]`` (they sum to 1)."""
    m1 = sum(np.asarray(w, float) * np.asarray(s.mean, float) for w, s in zip(weights, services))
    m2 = sum(np.asarray(w, float) * np.asarray(s.moment(2), float) for w, s in zip(weights, services))
    return np.asarray(m1, float), np.asarray(m2, float)


def _two_moment(mean: np.ndarray, m2: np.ndarray) -> Service:
    """The gamma law with mean ``mean`` and second moment ``m2`` (scv floored at 1e-6)."""
    scv = np.maximum(np.asarray(m2, float) / np.asarray(mean, float) ** 2 - 1.0, _MIN_SCV)
    return Service.gamma(mean, scv)


def _mix(weights: Sequence[np.ndarray], services: Sequence[Service]) -> Service:
    """The two-moment stand-in of the mix (see the module docstring)."""
    return _two_moment(*_moments(weights, services))


def _ceilings(mean: np.ndarray, m2: np.ndarray, servers: int, slo, discipline: str) -> np.ndarray:
    """SLO ceilings (requests/s) of the mixes with these first two moments (1-d arrays).

    FCFS uses the gamma stand-in.  Processor sharing on a gamma law with scv below 1 is slow in
    :mod:`capacity.ps` (seconds per law), so for PS the stand-in is the balanced-means
    hyperexponential where the scv is at least 1 (a mix of two exponentials, like hits and
    misses) and an Erlang-k with ``k = min(round(1 / scv), 20)`` below 1; the mean response is
    insensitive to that choice, the percentiles are not.  Each family is one
    :func:`~capacity.plan.qps_ceiling` call."""
    from .ceiling import qps_ceiling

    mean, m2 = np.atleast_1d(np.asarray(mean, float)), np.atleast_1d(np.asarray(m2, float))
    if discipline != "ps":
        return np.atleast_1d(np.asarray(qps_ceiling(_two_moment(mean, m2), servers, slo, discipline).qps, float))
    scv = np.maximum(m2 / mean ** 2 - 1.0, _MIN_SCV)
    out = np.empty(mean.shape)
    high = scv >= 1
    if high.any():
        law = Service.hyperexponential(mean[high], scv[high])
        out[high] = np.asarray(qps_ceiling(law, servers, slo, "ps").qps, float)
    if (~high).any():
        law = Service.erlang(mean[~high], np.clip(np.round(1.0 / scv[~high]), 1, 20))
        out[~high] = np.asarray(qps_ceiling(law, servers, slo, "ps").qps, float)
    return out


def _mix_ceilings(mixes: Sequence[tuple[Sequence[float], Sequence[Service]]], servers: int, slo,
                  discipline: str) -> np.ndarray:
    """SLO ceilings (requests/s) of several mixes, each ``(weights, laws)``: FCFS on one core those of
    the mixes themselves (their atoms through the exact M/G/1 wait, one
    :func:`~capacity.plan.qps_ceiling` each), otherwise :func:`_ceilings` on their two-moment
    stand-ins (one call for all)."""
    if discipline == "fcfs" and servers == 1:
        from .._tagged import mix_atoms
        from .ceiling import qps_ceiling

        out = []
        for weights, laws in mixes:
            kept = [(w, law) for w, law in zip(weights, laws) if w > 0]
            law = kept[0][1] if len(kept) == 1 else mix_atoms([k[1] for k in kept], [k[0] for k in kept])
            out.append(float(qps_ceiling(law, 1, slo, "fcfs").qps))
        return np.array(out)
    m1, m2 = (np.array([float(np.asarray(a)) for a in col]) for col in
              zip(*(_moments([np.asarray(w, float) for w in weights], laws) for weights, laws in mixes)))
    return _ceilings(m1, m2, servers, slo, discipline)
