"""Input checks shared by every public function.

Each check raises ``ValueError`` naming the parameter and the offending value,
so a mistake in a planning script points at the argument that caused it.
"""
from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "as_float_array",
    "check_nonnegative",
    "check_positive",
    "check_quantile",
    "check_servers",
]


def _first_bad(arr: np.ndarray, bad: np.ndarray) -> object:
    """The first offending element, for the error message."""
    return arr[bad].flat[0].item() if arr.ndim else arr.item()


def as_float_array(value, name: str) -> np.ndarray:
    """Convert to a float array, rejecting booleans, strings and NaN."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or an array of numbers, got {value!r}") from None
    if arr.dtype == bool:  # pragma: no cover - asarray(dtype=float) converts
        raise ValueError(f"{name} must be a number, got {value!r}")
    nan = np.isnan(arr)
    if nan.any():
        raise ValueError(f"{name} must not be NaN, got {value!r}")
    return arr


def check_positive(value, name: str, *, allow_inf: bool = False) -> np.ndarray:
    """A float array whose elements are all > 0 (and finite unless ``allow_inf``)."""
    arr = as_float_array(value, name)
    bad = ~(arr > 0)
    if not allow_inf:
        bad |= ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"{name} must be positive and finite, got {_first_bad(arr, bad)!r}")
    return arr


def check_nonnegative(value, name: str) -> np.ndarray:
    """A float array whose elements are all finite and >= 0."""
    arr = as_float_array(value, name)
    bad = ~(arr >= 0) | ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"{name} must be non-negative and finite, got {_first_bad(arr, bad)!r}")
    return arr


def check_quantile(value, name: str = "q") -> np.ndarray:
    """A float array with every element strictly inside (0, 1)."""
    arr = as_float_array(value, name)
    bad = ~((arr > 0) & (arr < 1))
    if bad.any():
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {_first_bad(arr, bad)!r}")
    return arr


def check_servers(value, name: str = "servers") -> np.ndarray:
    """An integer array of server counts, each >= 1.

    Floats that are whole numbers (``4.0``) are accepted; ``2.5``, ``0``,
    booleans and NaN are not.
    """
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if isinstance(value, numbers.Integral):
        if value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
        return np.asarray(value, dtype=np.int64)
    arr = as_float_array(value, name)
    bad = ~np.isfinite(arr) | (arr < 1) | (arr != np.round(arr))
    if bad.any():
        raise ValueError(f"{name} must be a positive integer, got {_first_bad(arr, bad)!r}")
    return arr.astype(np.int64)
