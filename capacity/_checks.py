"""Input checks shared by every public function: the one private home of them.

Each check raises ``ValueError`` naming the parameter and the offending value,
so a mistake in a planning script points at the argument that caused it.  The
words of each message are the same wherever the parameter appears: a choice is
``"<name> must be one of [...], got <value>"`` (the choices sorted), a count
``"<name> must be an integer >= <minimum>, got <value>"``.
"""
from __future__ import annotations

import itertools
import numbers
from typing import Any, Iterable

import numpy as np

__all__ = [
    "ADMISSIONS",
    "DISCIPLINES",
    "as_float_array",
    "check_admission",
    "check_broadcast",
    "check_choice",
    "check_count",
    "check_discipline",
    "check_nonnegative",
    "check_positive",
    "check_quantile",
    "check_rr",
    "check_servers",
    "scalar_out",
]

#: Service disciplines of one queue (see docs/glossary.md): first come first served, processor
#: sharing (the ideal event loop), round robin over the slices between awaits (the event loop as it
#: schedules).
DISCIPLINES = ("fcfs", "ps", "rr")

#: When a new request joins an event loop's run queue (``discipline="rr"``): at once
#: (``"fifo"``) or only when nothing in flight is runnable (``"idle"``); see capacity.rr.
ADMISSIONS = ("fifo", "idle")


def scalar_out(arr: Any):
    """Scalars in, scalars out (as ``scipy.stats`` does): a 0-d result becomes a Python number."""
    arr = np.asarray(arr)
    return arr.item() if arr.ndim == 0 else arr


def check_choice(value: Any, name: str, choices: Iterable[str]) -> str:
    """``value`` if it is one of ``choices`` (strings), else ``ValueError`` listing them."""
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def check_discipline(value: Any, allowed: Iterable[str] = DISCIPLINES, *, name: str = "discipline") -> str:
    """A service discipline among ``allowed`` (by default every one capacity models)."""
    return check_choice(value, name, allowed)


def check_count(value: Any, name: str, minimum: int = 1) -> int:
    """A whole number ``>= minimum`` (``4.0`` is accepted; ``2.5``, booleans and strings are not)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.integer, np.floating)) \
            or not np.isfinite(float(value)) or not float(value).is_integer() or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_admission(discipline: str, admission: Any) -> str:
    """The event loop's admission rule; only ``discipline="rr"`` may ask for ``"idle"``."""
    check_choice(admission, "admission", ADMISSIONS)
    if admission != "fifo" and discipline != "rr":
        raise ValueError(f"admission applies to discipline='rr' only, got admission={admission!r} with "
                         f"discipline={discipline!r}")
    return admission


def check_rr(discipline: str, slices: Any, slice_delay: Any, admission: Any = "fifo",
             allowed: Iterable[str] = DISCIPLINES) -> tuple[int, float, str]:
    """Validated ``(slices, slice_delay, admission)`` of a discipline; only ``"rr"`` may set them.

    ``slices`` is the number of CPU slices a request's work is split into by its awaits,
    ``slice_delay`` the pause (seconds) between two slices, ``admission`` when a new request joins
    the run queue (see docs/glossary.md).
    """
    check_discipline(discipline, allowed)
    if np.ndim(slices) != 0:
        raise ValueError(f"slices must be an integer >= 1, got {slices!r}")
    k = check_count(slices, "slices", 1)
    d = float(check_nonnegative(slice_delay, "slice_delay"))
    if discipline != "rr" and (k != 1 or d != 0):
        raise ValueError(f"slices and slice_delay apply to discipline='rr' only, got {discipline!r}")
    return k, d, check_admission(discipline, admission)


def _first_bad(arr: np.ndarray, bad: np.ndarray) -> object:
    """The first offending element, for the error message."""
    return arr[bad].flat[0].item() if arr.ndim else arr.item()


def _is_text(raw: np.ndarray) -> bool:
    """True for an array of strings, or of objects among which a string (numpy would parse
    ``"5"`` as 5.0)."""
    if raw.dtype.kind in "US":
        return True
    return raw.dtype == object and any(isinstance(v, (str, bytes)) for v in raw.flat)


def as_float_array(value, name: str) -> np.ndarray:
    """Convert to a float array, rejecting booleans, strings and NaN."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    def not_numbers() -> ValueError:
        return ValueError(f"{name} must be a number or an array of numbers, got {value!r}")

    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):   # ragged nested lists
        raise not_numbers() from None
    if _is_text(raw):
        # A planning script that passes "5" has read a number from text and not converted it:
        # say so instead of quietly parsing (and, for "5ms", failing with numpy's words).
        raise ValueError(f"{name} must be a number or an array of numbers, not text; got {value!r}")
    try:
        arr = raw.astype(float, copy=False)
    except (TypeError, ValueError):
        raise not_numbers() from None
    nan = np.isnan(arr)
    if nan.any():
        raise ValueError(f"{name} must not be NaN, got {value!r}")
    return arr


def check_broadcast(**arrays) -> tuple[int, ...]:
    """The broadcast shape of the named arrays, or ``ValueError`` naming the two that clash.

    numpy's own message ("Mismatch is between arg 0 with shape (3,) and arg 2 with shape (2,)")
    names no parameter; this one says ``arrival_rate has shape (3,) and servers has shape (2,)``.
    """
    shapes = {name: np.shape(value) for name, value in arrays.items()}
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        pass
    # Shapes broadcast together iff every pair does (per axis: sizes equal or 1), so a clash is a pair.
    for (a, sa), (b, sb) in itertools.combinations(shapes.items(), 2):
        try:
            np.broadcast_shapes(sa, sb)
        except ValueError:
            raise ValueError(f"{b} has shape {sb} and {a} has shape {sa}: their shapes do not broadcast "
                             f"(use arrays of equal length, or a scalar)") from None
    raise AssertionError("unreachable")  # pragma: no cover - broadcast_shapes failed above


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
