"""The level at which a tabled response-time quantile reaches a given time.

A table answers ``log t_q`` at a level ``z = log(-log(1 - q))``; ``P(T > t)`` is the level where
that curve crosses ``log t``.  Every table increases in z at each node (the tests check it), so the
crossing is bracketed between two stored levels and found there by the Illinois variant of regula
falsi (Dowell and Jarratt 1971), which keeps the bracket and converges superlinearly.
"""
from __future__ import annotations

import numpy as np


def solve_level(residual, levels: np.ndarray, nodes: np.ndarray, iterations: int = 40) -> np.ndarray:
    """Per row, the level ``z`` in ``[levels[0], levels[-1]]`` where ``residual(z, rows)`` (a table's
    log t minus the target, evaluated at rows ``rows`` of the batch) is zero; NaN where the root lies
    outside the levels.  ``nodes`` (rows x levels): the residual at every level, increasing along a
    row (the tables increase in z at every node, checked by the tests), so the bracket is unique;
    then Illinois iterations inside it."""
    out = np.full(nodes.shape[0], np.nan)
    k = np.sum(nodes <= 0, axis=1) - 1
    ok = (k >= 0) & (k < levels.size - 1)
    exact_top = nodes[:, -1] == 0
    out[exact_top] = levels[-1]
    ok &= ~exact_top
    if ok.any():
        idx = np.flatnonzero(ok)
        kk = k[idx]
        a, b = levels[kk], levels[kk + 1]
        fa, fb = nodes[idx, kk], nodes[idx, kk + 1]
        side = np.zeros(idx.size, dtype=int)
        x = a
        for _ in range(iterations):
            with np.errstate(invalid="ignore", divide="ignore"):
                x = np.where(fb != fa, b - fb * (b - a) / (fb - fa), 0.5 * (a + b))
            x = np.where(np.isfinite(x) & (x > a) & (x < b), x, 0.5 * (a + b))
            fx = residual(x, idx)
            right = fx > 0
            b, a = np.where(right, x, b), np.where(right, a, x)
            fb = np.where(right, fx, np.where(side == -1, 0.5 * fb, fb))
            fa = np.where(right, np.where(side == 1, 0.5 * fa, fa), fx)
            side = np.where(right, 1, -1)
            if np.all((np.abs(fx) < 1e-13) | (b - a < 1e-12)):
                break
        out[idx] = x
    return out
