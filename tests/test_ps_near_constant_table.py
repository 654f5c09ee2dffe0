"""The PS table of nearly constant CPU times (``capacity/tables/ps_near_constant_quantiles.npz``).

Fixed-work handlers have CPU times of scv 0.01-0.1.  Their PS quantiles are computed by
:mod:`capacity._ps_near_constant` (accurate against simulation, see test_ps_near_constant.py)
in 0.15-0.2 s per point, too slow for a fit; the table answers them in microseconds.  The
references here: that direct computation, run with the tables disabled at points between the
table's nodes in every coordinate (the worst place for an interpolant), exact PS simulation, and
the service law itself (PS never beats a request's own CPU time).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from capacity import Service, fcfs, ps, simulate
from capacity import _quantile_table as table

pytestmark = pytest.mark.skipif(not table.near_constant_path("ps").exists(),
                                reason="shipped near-constant PS table missing")


def _grid():
    with np.load(table.near_constant_path("ps")) as data:
        return {k: data[k] for k in data.files}


def _mid(a: float, b: float) -> float:
    return float(np.sqrt(a * b))


def _logit_mid(a: float, b: float) -> float:
    x = 0.5 * (np.log(a / (1 - a)) + np.log(b / (1 - b)))
    return float(1 / (1 + np.exp(-x)))


def test_the_table_joins_the_main_one():
    """Same utilisation and level end points as the main table, finite, increasing in q at every
    node, and each family's scv range overlapping the main table's (so the two blend)."""
    data = _grid()
    assert data["rho"][0] == pytest.approx(table.RHO[0]) and data["rho"][-1] == pytest.approx(table.RHO[-1])
    assert data["z"][0] == pytest.approx(table.Z[0]) and data["z"][-1] == pytest.approx(table.Z[-1])
    with np.load(table.path("ps")) as main:
        for fam in ("gamma", "lognormal"):
            values = data[f"log_scaled_{fam}"]
            assert values.shape == (data["rho"].size, data[f"scv_{fam}"].size, data["z"].size)
            assert np.isfinite(values).all()
            assert np.all(np.diff(values, axis=-1) > 0)
            assert data[f"scv_{fam}"][0] <= 0.01 and data[f"scv_{fam}"][-1] > main[f"scv_{fam}"][0]
    lo, hi = table.scv_range("ps", "gamma")
    assert lo <= 0.01 and hi > 5


@pytest.mark.parametrize("family, i_rho, j_scv", [("gamma", 10, 0), ("gamma", 30, 4), ("lognormal", 20, 2),
                                                  ("lognormal", 40, 9)])
def test_reproduces_the_direct_computation_at_its_nodes(direct, family, i_rho, j_scv):
    """On the grid (rho, scv and q all nodes) the table returns the direct computation, up to the
    build's inversion of P(T > t) on 224 times and float32 storage (measured: within 0.45 %, at
    utilisation 0.995)."""
    data = _grid()
    rho, scv = float(data["rho"][i_rho]), float(data[f"scv_{family}"][j_scv])
    q = -np.expm1(-np.exp(data["z"][[10, 30, 50, 62]]))
    svc = getattr(Service, family)(0.02, scv)
    got = np.asarray(ps.response_quantile(q, rho / 0.02, svc))
    ref = direct(ps.response_quantile, q, rho / 0.02, svc)
    np.testing.assert_allclose(got, ref, rtol=5e-3)


@pytest.mark.parametrize("family, i_rho, j_scv", [("gamma", 9, 0), ("gamma", 18, 2), ("gamma", 27, 5),
                                                  ("lognormal", 13, 1), ("lognormal", 24, 6),
                                                  ("lognormal", 36, 9)])
def test_between_the_nodes(direct, family, i_rho, j_scv):
    """Midway between nodes in rho and scv, at levels between the table's: within TOL of the
    direct computation (``tools/build_near_constant_table.py --check``; see capacity.ps)."""
    data = _grid()
    rho = _logit_mid(data["rho"][i_rho], data["rho"][i_rho + 1])
    scv = _mid(data[f"scv_{family}"][j_scv], data[f"scv_{family}"][j_scv + 1])
    q = np.array([0.3, 0.7, 0.95, 0.995, 0.9995])
    svc = getattr(Service, family)(1.0, scv)
    got = np.asarray(ps.response_quantile(q, rho, svc))
    ref = direct(ps.response_quantile, q, rho, svc)
    np.testing.assert_allclose(got, ref, rtol=BETWEEN_TOL)


BETWEEN_TOL = 5e-3


@pytest.mark.parametrize("family, lo, hi", [("gamma", 0.1, 0.2), ("lognormal", 0.55, 1.0)])
def test_the_blend_is_smooth_in_scv(family, lo, hi):
    """Across the switch from the near-constant table to the main one, the quantiles move
    smoothly with scv: no step between neighbouring scv values 0.1 % apart bigger than 0.1 %
    (a fit differentiates them with steps of 1e-4 in log scv), and the blended value lies between
    the two tables' own values."""
    scv = np.geomspace(lo, hi, 600)
    q = np.array([0.5, 0.99, 0.999])[:, None]
    for rho in (0.05, 0.5, 0.9):
        t = np.asarray(ps.response_quantile(q, rho, getattr(Service, family)(1.0, scv)))
        steps = np.abs(np.diff(np.log(t), axis=1))
        assert steps.max() < 1e-3, (rho, steps.max())
    pieces = table._interpolators("ps")[family]
    # The near-constant piece, the main one and the heavy-tail piece above (gamma from 3.76,
    # lognormal from 11.7).
    assert len(pieces) == 3
    inside = scv[(scv > pieces[1].lo) & (scv < pieces[0].hi)]
    z = np.log(-np.log1p(-0.99)) * np.ones(inside.size)
    r = np.full(inside.size, 0.7)
    a, b = pieces[0].log_t(z, r, inside), pieces[1].log_t(z, r, inside)
    blended = table._log_t("ps", family, z, r, inside)
    assert np.all(blended >= np.minimum(a, b) - 1e-12) and np.all(blended <= np.maximum(a, b) + 1e-12)


@pytest.mark.parametrize("family, scv, rho", [("gamma", 0.03, 0.6), ("gamma", 0.07, 0.85),
                                              ("lognormal", 0.25, 0.8), ("lognormal", 0.012, 0.3)])
def test_against_simulation(family, scv, rho):
    """Between the nodes, against exact seeded PS simulation (1e6 s): p50/p90/p99 within the 99 %
    batch-means interval plus 1.5 % of the estimate."""
    svc = getattr(Service, family)(1.0, scv)
    levels = (0.5, 0.9, 0.99)
    model = ps.response_quantile(levels, rho, svc)
    run = simulate(rho, svc, discipline="ps", horizon=1e6, seed=int(1e3 * scv + 10 * rho))
    for q, m in zip(levels, model):
        ci = run.confidence_interval(q, level=0.99, batches=30, warmup=2e4)
        assert abs(m - ci.estimate) <= ci.half_width + 0.015 * ci.estimate, (q, m, ci)


@settings(max_examples=60, deadline=None)
@given(scv=st.floats(0.01, 0.8), rho=st.floats(1e-3, 0.99), family=st.sampled_from(["gamma", "lognormal"]),
       q=st.floats(1e-3, 1 - 1e-5))
def test_rises_in_q_and_load_and_stays_above_the_service(scv, rho, family, q):
    """Monotone in q and in load, never below the service's own quantile (T >= S path by path).
    Below utilisation 0.1 the levels stop at 1 - 1e-5 (the direct computation resolves P(T > t)
    there only to ~1e-6, capacity.ps)."""
    if family == "gamma":
        scv = min(scv, 0.16)
    svc = getattr(Service, family)(1.0, scv)
    levels = np.array([q * 0.5, q, 1 - 0.5 * (1 - q)])
    t = np.asarray(ps.response_quantile(levels, rho, svc))
    assert np.all(np.diff(t) >= 0)
    assert np.all(t >= np.asarray(svc.ppf(levels)) * (1 - 1e-9))
    heavier = np.asarray(ps.response_quantile(levels, min(rho * 1.05, 0.995), svc))
    assert np.all(heavier >= t * (1 - 1e-9))


# ---------------------------------------------------------------------- FCFS below its main table
@pytest.mark.parametrize("family", ["gamma", "lognormal"])
def test_fcfs_near_constant_table_against_exact_m_g_1(family):
    """The FCFS table of nearly constant CPU (scv 0.01-0.06, read by the fits and by rr's FCFS
    half) midway between its nodes in rho and scv, and across its blend into the main table, at
    off-grid levels: within 1 % of the exact M/G/1 (measured: 0.9 % worst, at scv 0.012 where
    the knee of P(no wait) = 1 - rho is sharpest; median 1e-5)."""
    with np.load(table.near_constant_path("fcfs")) as data:
        rho, scv = data["rho"], data[f"scv_{family}"]
    lr = np.log(rho / (1 - rho))
    rho_mid = 1 / (1 + np.exp(-0.5 * (lr[1:] + lr[:-1])))[::3]
    scv_mid = np.r_[np.sqrt(scv[1:] * scv[:-1]), 0.052]
    q = np.array([0.1, 0.5, 0.9, 0.99, 0.999, 0.9999])
    r, c, qq = np.meshgrid(rho_mid, scv_mid, q, indexing="ij")
    svc = getattr(Service, family)(1.0, c)
    got = table.tabled_quantile("fcfs", qq, r, svc)
    ref = np.asarray(fcfs.response_quantile(qq, r, svc))
    np.testing.assert_allclose(got, ref, rtol=0.01)
    assert np.median(np.abs(got / ref - 1)) < 1e-4
