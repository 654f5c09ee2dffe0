"""The measured shape of event-loop round robin: a correction of :mod:`capacity.rr`'s formula
from tables of exact simulations, one per admission rule.

Why a table
-----------
:mod:`capacity.rr` blends the FCFS and PS quantiles with weights calibrated on the mean and on
p90-p99.9; below p90 it holds the p90 weights.  With ``admission="fifo"`` the body of the
distribution then comes out too low: against the exact simulator, 10-30 % at p10-p75 for scv 1
at 30-70 % CPU and up to 43 % at scv 2, while the tail stays within a few percent for the laws
the formula was calibrated on (up to 35 % off for lognormal laws and gamma of scv 3).  A histogram
holds the body too, so a fit of an event-loop day preferred FCFS with a wider CPU law (issue 15,
point 8).  No closed form is known for equal slices with ``1 < k < inf``, so the body is
measured: ``tools/build_rr_body_table.py`` simulates the exact model
(:func:`capacity.sim.simulate` with ``discipline="rr"``) on a grid and ships the quantiles in
``capacity/tables/rr_fifo_quantiles.csv``; this module divides them by the formula's own values
at the same points and interpolates that ratio.

The correction
--------------
::

    T_q = F_q * exp(r(scv, 1/k, rho, logit q))

where ``F_q`` is the formula's zero-delay FIFO quantile and ``r`` the interpolation of
``log(simulated / F)`` over the grid (multilinear, after a monotone cubic in utilisation onto
steps of 0.01, so that ``r`` has no kinks along the load): utilisation 0.15/0.3/0.5/0.65/0.8/0.9
(and 0, where the response is the service time itself, so ``r`` is the exact
``log(S_q / F_q)``), slices 2/3/5/8/13/20/50 (and 1, FCFS, where ``r = 0``), quantile levels
p1-p99.9, and per law family the scv nodes of the table: gamma and lognormal 0 (deterministic),
0.25, 0.5, 1, 2, 4; hyperexponential 1 (exponential), 2, 4.  Exponential, Erlang and
deterministic laws read gamma's table (an Erlang-k is a gamma of scv 1/k).  Outside the grid
every coordinate is held at its nearest edge (above p99.9, above 50 slices, above utilisation
0.9, above scv 4).  Other families (phase-type, empirical, mixtures) and several cores keep the
formula unchanged.

``admission="idle"`` has a table of its own (``capacity/tables/rr_idle_quantiles.csv``, from
``tools/build_rr_body_table.py --admission idle``: the same laws and loads, slices 2-20, held at
20 above), whose ratio is taken to rr's idle formula without slice delay, ``T0``; rr multiplies
``T0`` by it before it adds the gaps, so the correction is exact on the grid at zero delay and
carries the same ratio to requests that sleep between slices (measured there in
:mod:`capacity.rr`'s docstring).

Error: the simulations' own 99 % half-widths at p5-p80 are 0.5 % (median, utilisation 0.15) to
2.3 % (0.9), up to 10 % for the heavy-tailed laws; at p99.9 2.6-8.4 % (median), up to 39 %
(lognormal and H2 of scv 4, whose far tail one run of a few million requests pins down poorly).
The idle table's are alike: 0.4-2.0 % in the body (median), up to 14 %; p99.9 4.8 % (median), up
to 56 %.
Measured at off-grid points by ``tools/build_rr_body_table.py --held-out`` (fresh seeds): see
:mod:`capacity.rr`'s module docstring, section "The measured body".

References
----------
L. Kleinrock, *Queueing Systems, Volume 2: Computer Applications*, Wiley (1976), sec. 4.4.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from scipy.interpolate import PchipInterpolator, RegularGridInterpolator
from scipy.special import logit

__all__: list[str] = []

#: The simulated table of each admission rule.
TABLES = {"fifo": Path(__file__).resolve().parent / "tables" / "rr_fifo_quantiles.csv",
          "idle": Path(__file__).resolve().parent / "tables" / "rr_idle_quantiles.csv"}

#: Per table family, the rows of its scv nodes: (simulated family, scv).  The scv-0 node of gamma
#: and lognormal is the deterministic law; the scv-1 node of hyperexponential is the exponential
#: law (gamma's scv-1 rows).
_NODES = {
    "gamma": [("deterministic", 0.0)] + [("gamma", s) for s in (0.25, 0.5, 1.0, 2.0, 4.0)],
    "lognormal": [("deterministic", 0.0)] + [("lognormal", s) for s in (0.25, 0.5, 1.0, 2.0, 4.0)],
    "hyperexponential": [("gamma", 1.0), ("hyperexponential", 2.0), ("hyperexponential", 4.0)],
}
#: Service families that read a table, and the table.
_TABLE_OF = {"gamma": "gamma", "lognormal": "lognormal", "hyperexponential": "hyperexponential",
             "exponential": "gamma", "deterministic": "gamma", "erlang": "gamma"}


def _law(family: str, scv: float):
    from .distributions import Service

    if family == "deterministic":
        return Service.deterministic(1.0)
    if family == "gamma" and scv == 1.0:
        return Service.exponential(1.0)
    return Service.from_moments(1.0, scv, family)


@functools.cache
def _read(admission: str = "fifo") -> tuple[pd.DataFrame, np.ndarray]:
    df = pd.read_csv(TABLES[admission], comment="#")
    levels = np.array(sorted(float(c[1:]) for c in df.columns if c.startswith("q")))
    return df, levels


#: The utilisation axis the ratio is resampled onto (monotone cubic through the simulated nodes):
#: the ratio then has no kinks at the nodes, so a curve of quantiles against the load stays
#: smooth (capacity.plan.curves interpolates such curves from a grid of its own).
_FINE_RHO = np.linspace(0.0, 0.9, 91)


@functools.cache
def _interpolator(table: str, formula: Callable, admission: str = "fifo") -> RegularGridInterpolator:
    """The interpolator of ``log(simulated / formula)`` of one table family and admission rule,
    built on first use (a few milliseconds; 3-4 s for hyperexponential, whose PS quantiles are
    computed directly).

    ``formula(service, lam, levels, slices)`` is :mod:`capacity.rr`'s zero-delay formula of that
    admission rule for E[S] = 1 at arrival rates ``lam`` (a column), probabilities ``levels`` and
    slice counts ``slices``, of shape ``(slices, lam, levels)``; rr passes it in (this module does
    not import rr, which imports it)."""
    df, levels = _read(admission)
    ks = np.sort(df["slices"].unique()).astype(float)
    rhos = np.sort(df["rho"].unique())
    qcols = [f"q{q:g}" for q in levels]
    nodes = _NODES[table]
    lam = np.concatenate([[0.0], rhos])
    logs = []
    for family, scv in nodes:
        rows = df[(df["family"] == family) & np.isclose(df["scv"], scv)]
        sim = rows.set_index(["slices", "rho"]).sort_index()[qcols].to_numpy(float).reshape(ks.size, rhos.size,
                                                                                             levels.size)
        svc = _law(family, scv)
        # At zero load the exact response is the service time itself.
        exact = np.concatenate([np.broadcast_to(np.asarray(svc.ppf(levels), float), (ks.size, 1, levels.size)),
                                sim], axis=1)
        ratio = np.log(exact / formula(svc, lam[:, None], levels, ks))
        ratio = PchipInterpolator(lam, ratio, axis=1)(_FINE_RHO)
        # slices = 1 is FCFS, which the formula is exactly
        logs.append(np.concatenate([np.zeros((1,) + ratio.shape[1:]), ratio], axis=0))
    u = 1.0 / np.concatenate([[1.0], ks])  # 1/k from 1 (FCFS) down to the last node, reversed to ascend
    axes = (np.array([s for _, s in nodes]), u[::-1], _FINE_RHO, logit(levels))
    return RegularGridInterpolator(axes, np.stack(logs)[:, ::-1], method="linear")


def correction(q, rho, slices, service, servers, formula: Callable, admission: str = "fifo") -> np.ndarray:
    """The factor ``exp(r)`` that takes :mod:`capacity.rr`'s zero-delay formula quantile of the
    ``admission`` rule to the simulated one (module docstring); 1 where the table does not apply.

    Parameters
    ----------
    q, rho, slices : array_like
        Probability, utilisation and slice count, broadcast together.
    service : Service
        The CPU law (its ``family`` picks the table, its ``scv`` the node).
    servers : array_like
        Cores; only one core is corrected.
    formula : callable
        rr's formula for the table (see :func:`_interpolator`).
    admission : {"fifo", "idle"}
        The admission rule, whose table is read.

    Returns
    -------
    ndarray
        The factor, of the broadcast shape.
    """
    shape = np.broadcast_shapes(np.shape(q), np.shape(rho), np.shape(slices), np.shape(servers),
                                np.shape(service.scv))
    table = _TABLE_OF.get(service.family)
    ones = np.ones(shape)
    if table is None:
        return ones
    interp = _interpolator(table, formula, admission)
    scv_axis, u_axis, rho_axis, z_axis = interp.grid
    if service.family == "exponential":
        scv = np.ones(shape)
    elif service.family == "deterministic":
        scv = np.zeros(shape)
    else:
        scv = np.broadcast_to(np.asarray(service.scv, dtype=float), shape)
    k = np.broadcast_to(np.asarray(slices, dtype=float), shape)
    with np.errstate(divide="ignore"):
        points = np.stack([np.clip(scv, scv_axis[0], scv_axis[-1]),
                           np.clip(1.0 / np.maximum(k, 1.0), u_axis[0], u_axis[-1]),
                           np.clip(np.broadcast_to(np.nan_to_num(np.asarray(rho, float)), shape), 0.0, rho_axis[-1]),
                           np.clip(logit(np.broadcast_to(np.asarray(q, float), shape)), z_axis[0], z_axis[-1])],
                          axis=-1)
    factor = np.exp(interp(points.reshape(-1, 4))).reshape(shape)
    one_core = np.broadcast_to(np.asarray(servers) == 1, shape)
    return np.where(one_core & (k > 1), factor, ones)
