"""The calibration of ``capacity.rr`` is reproducible: ``tools/calibrate_rr.py`` on the shipped grid.

* ``--check`` passes on the shipped grid ``capacity/tables/rr_calibration.csv`` (the constants in
  ``capacity.rr`` are what the fit gives) and fails, naming the constant, when one is perturbed;
* the tool's model is ``capacity.rr`` itself (same values at every grid point);
* a grid row is regenerated bit for bit by a fresh simulation with its recorded seed and settings.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from capacity import rr
from capacity.rr import _fifo_correction as fifo_correction
from capacity.rr import _idle_correction as idle_correction
from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


def _load_tool():
    return load_script("tools/calibrate_rr.py")


tool = _load_tool()


@pytest.fixture(scope="module")
def grid():
    return tool.read_grid()


@pytest.fixture(scope="module")
def references(grid):
    return tool.references(grid)


@pytest.fixture(scope="module")
def fitted(grid, references):
    t0 = time.perf_counter()
    out = tool.fit(grid, references)
    # The check must stay cheap enough to run with the tests (seconds, not minutes).
    assert time.perf_counter() - t0 < 60
    return out


def test_shipped_grid_is_complete(grid):
    """Every point of both grids once, with its seed, settings, statistics and half-widths."""
    for name, g in tool.GRIDS.items():
        rows = grid[grid["grid"] == name]
        assert len(rows) == len(g.points())
        assert rows["index"].tolist() == list(range(len(rows)))
        assert (rows["seed"] == g.seed + rows["index"]).all()
    assert len(grid) == 80 + 270
    for stat in ("mean", "p50", "p90", "p99", "p999"):
        # (a half-width is 0 only where every batch has the same quantile: the deterministic median)
        assert (grid[stat] > 0).all() and (grid[stat + "_hw"] >= 0).all() and (grid["mean_hw"] > 0).all()
    assert np.allclose(grid["horizon"], grid["requests"] / grid["rho"], rtol=1e-12)


def test_check_passes_on_shipped_grid(fitted, capsys):
    assert tool.check(fitted) == []
    assert tool.main(["--check"]) == 0
    assert "match" in capsys.readouterr().out


@pytest.mark.parametrize("name, index", [("_IDLE_Q", (1, 4)), ("_IDLE_MEAN", 2), ("_Q_PARAMS", (2, 0)),
                                         ("_MEAN_PARAMS", 1)])
def test_perturbed_constant_is_detected(fitted, monkeypatch, name, index):
    """A constant off by 1 % (beyond 3 significant digits) fails the check, named."""
    value = np.array(getattr(rr, name), dtype=float)
    value[index] *= 1.01
    monkeypatch.setattr(rr, name, value if isinstance(getattr(rr, name), np.ndarray) else tuple(value))
    problems = tool.check(fitted)
    assert len(problems) == 1 and problems[0].startswith(f"capacity.rr.{name}["), problems


def test_check_command_fails_on_perturbed_constant(monkeypatch, capsys):
    monkeypatch.setattr(rr, "_IDLE_MEAN", (0.5,) + tuple(rr._IDLE_MEAN[1:]))
    assert tool.main(["--check"]) == 1
    assert "capacity.rr._IDLE_MEAN[0]" in capsys.readouterr().err


def test_same_to_3_digits():
    assert tool.same_to_3_digits(0.6908, 0.69084) and tool.same_to_3_digits(-0.0563, -0.05634)
    assert not tool.same_to_3_digits(0.6908, 0.6918) and not tool.same_to_3_digits(0.0604, 0.0608)
    assert not tool.same_to_3_digits(1.0, -1.0)


def test_tool_model_is_the_package(grid):
    """The fit's model at the package constants is what capacity.rr returns at every grid point
    (quantiles: before capacity._rr_body's measured corrections, which multiply the FIFO value
    and the idle value without gaps)."""
    for fifo in (True, False):
        rows = np.flatnonzero((grid["grid"] == ("fifo" if fifo else "idle")).to_numpy())[::7]
        for i in rows:
            r = grid.iloc[i]
            svc = tool.LAWS[float(r["scv"])][1]()
            kw = {"slices": int(r["slices"]), "slice_delay": float(r["slice_delay"]), "admission": r["admission"]}
            ref = tool.references(grid.iloc[[i]])  # this point alone, as rr computes it
            consts = tool.package_constants()
            for j, stat in enumerate(tool.FITTED):
                idle = None if fifo else tuple(consts["idle"][j])
                scale = 1.0 if fifo or stat == "mean" else \
                    idle_correction(tool.QUANTILES[stat], r["rho"], int(r["slices"]), svc, 1)
                got = tool.model(ref, stat, tuple(consts["fifo"][j]), idle, scale)[0]
                if fifo and stat != "mean":
                    got *= fifo_correction(tool.QUANTILES[stat], r["rho"], int(r["slices"]), svc, 1)
                want = rr.mean_response(r["rho"], svc, **kw) if stat == "mean" else \
                    rr.response_quantile(tool.QUANTILES[stat], r["rho"], svc, **kw)
                assert got == pytest.approx(want, rel=1e-12), (i, stat)


def test_a_grid_row_is_regenerated_bit_for_bit(grid):
    """The simulator is exact and seeded: the cheapest row of each grid comes out the same."""
    for name in ("fifo", "idle"):
        rows = grid[grid["grid"] == name]
        r = rows.loc[(rows["requests"] * rows["slices"]).idxmin()]
        p = {k: r[k] for k in ("grid", "index", "seed", "rho", "slices", "scv", "service", "gap", "admission",
                               "requests")}
        p = {k: (v.item() if hasattr(v, "item") else v) for k, v in p.items()}
        fresh = tool.simulate_point(p)
        for stat in ("mean", "mean_hw", "p50", "p90", "p99", "p999", "p999_hw"):
            assert fresh[stat] == r[stat], (name, stat)
