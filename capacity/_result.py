"""The one protocol every result class follows (fit, plan, sim, overload, closed).

A result is what a public function answers with.  Whatever the question, it offers:

* ``repr(result)`` -- one short line: the class and its headline numbers (never a whole table);
* ``str(result)`` -- the answer explained in words (the ``explanation`` paragraph where the
  planner wrote one);
* ``result.to_frame()`` -- a :class:`pandas.DataFrame` (one row per configuration, or the
  result's own table);
* ``result.to_dict()`` -- plain JSON-ready Python (numbers, strings, lists, dicts; infinities as
  the strings ``"inf"``/``"-inf"``, NaN as ``None``): what the CLI prints with ``--json``.

Result classes are frozen dataclasses declared with ``repr=False`` (so that this ``__repr__`` is
the one used) and list their headline fields in ``_headline``.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np

__all__ = ["Result", "jsonable"]


def jsonable(x: Any) -> Any:
    """``x`` as plain JSON-ready Python, recursively (see the module docstring)."""
    if hasattr(x, "to_dict") and callable(x.to_dict) and not isinstance(x, type):
        if type(x).__module__.startswith("pandas"):
            return _frame_records(x) if hasattr(x, "columns") else jsonable(x.to_dict())
        return jsonable(x.to_dict())
    if isinstance(x, dict):
        return {_key(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, np.generic):
        return jsonable(x.item())
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if _is_service(x):
        return _service_dict(x)
    return x


def _key(k: Any) -> str:
    if isinstance(k, (float, np.floating)):
        return repr(float(k))
    return str(k)


def _frame_records(frame: Any) -> list:
    import pandas as pd

    flat = frame.reset_index() if not isinstance(frame.index, pd.RangeIndex) else frame
    records = []
    for row in flat.to_dict(orient="records"):
        records.append({str(k): jsonable(_timestamp(v)) for k, v in row.items()})
    return records


def _timestamp(v: Any) -> Any:
    return v.isoformat() if hasattr(v, "isoformat") else v


def _is_service(x: Any) -> bool:
    return type(x).__name__ == "Service" and hasattr(x, "family") and hasattr(x, "scv")


def _service_dict(service: Any) -> dict:
    out = {"family": service.family}
    try:
        out["mean_s"] = jsonable(service.mean)
        out["scv"] = jsonable(service.scv)
    except (ValueError, TypeError):  # pragma: no cover - every family has both moments
        pass
    return out


def _short(value: Any) -> str:
    """A value as it reads in a one-line ``repr``."""
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.4g}"
    if isinstance(value, np.ndarray):
        if value.size <= 4:
            return "[" + ", ".join(_short(v) for v in value.ravel().tolist()) + "]"
        return f"<array {'x'.join(map(str, value.shape))}>"
    if hasattr(value, "shape") and hasattr(value, "columns"):
        return f"<table {value.shape[0]} rows>"
    if _is_service(value):
        return repr(value)
    if isinstance(value, dict):
        if len(value) > 4:
            return f"<{len(value)} items>"
        return "{" + ", ".join(f"{_short(k)}: {_short(v)}" for k, v in value.items()) + "}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class Result:
    """Base of every result class; see the module docstring for the protocol."""

    #: Fields shown by ``repr`` (the first four fields when empty).
    _headline: ClassVar[tuple[str, ...]] = ()

    def _fields(self) -> list[str]:
        if dataclasses.is_dataclass(self):
            return [f.name for f in dataclasses.fields(self)]
        return [k for k in vars(self) if not k.startswith("_")]

    def __repr__(self) -> str:
        names = self._headline or tuple(self._fields()[:4])
        inner = ", ".join(f"{n}={_short(getattr(self, n))}" for n in names)
        return f"{type(self).__name__}({inner})"

    def __str__(self) -> str:
        text = getattr(self, "explanation", None)
        if isinstance(text, str) and text:
            return text
        return repr(self)

    def to_dict(self) -> dict:
        """Every field, as plain JSON-ready Python (what ``--json`` prints)."""
        return {name: jsonable(getattr(self, name)) for name in self._fields()}

    def to_frame(self):
        """The result as a DataFrame: its ``table`` if it has one, else one row per configuration.

        Array-valued fields (one value per configuration of a broadcast call) become columns
        of that length; scalars repeat; a mapping of per-percentile values becomes one column
        per key; text and nested objects are left out.
        """
        import pandas as pd

        table = getattr(self, "table", None)
        if isinstance(table, pd.DataFrame):
            return table.copy()
        columns: dict[str, Any] = {}
        for name in self._fields():
            value = getattr(self, name)
            if name == "explanation":
                continue
            if isinstance(value, dict):
                for k, v in value.items():
                    if _is_column(v):
                        columns[f"{name}[{_key(k)}]"] = v
            elif _is_column(value):
                columns[name] = value
        shape = np.broadcast_shapes(*(np.shape(v) for v in columns.values())) if columns else ()
        data = {k: np.broadcast_to(np.asarray(v), shape).ravel() for k, v in columns.items()}
        return pd.DataFrame(data, index=range(int(np.prod(shape, dtype=int))))


def _is_column(value: Any) -> bool:
    if isinstance(value, (bool, int, float, str, np.generic)):
        return True
    return isinstance(value, np.ndarray) and value.dtype.kind in "biufUS"
