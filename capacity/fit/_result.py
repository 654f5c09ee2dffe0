"""Common base of every fit result (lifelines / scikit-learn conventions).

A fit result is an object whose fitted quantities end in ``_``
(``cpu_per_request_``, ``sigma_``, ``service_``).  Every fit fills:

* parameters with an estimate and a confidence interval, shown by
  :attr:`FitResult.summary` (a :class:`pandas.DataFrame` indexed by
  parameter name, columns ``estimate``, ``lower``, ``upper``, ``unit``,
  ``note``);
* fit-quality figures (R², residual scale, number of observations, ...) in
  :attr:`FitResult.fit_quality_` (a :class:`pandas.Series`);
* optional extra tables (for example observed vs model per percentile) in
  :attr:`FitResult.tables_`, a dict of DataFrames that
  :meth:`FitResult.print_summary` prints after the parameters;
* ``warnings_``: the messages of every :class:`~capacity.exceptions.CapacityWarning`
  the fit emitted, so a caveat survives even when warnings are filtered.

Subclasses call :meth:`_add_parameter`, :meth:`_set_quality`,
:meth:`_add_table` and :meth:`_warn` while fitting, then
:meth:`_emit_warnings` once, from the public function, so each warning points
at the user's call site.

A fit result follows the package's result protocol (:class:`capacity._result.Result`):
``repr`` is one line (the model and the first estimates), ``str`` is the text
:meth:`FitResult.print_summary` prints, ``to_frame()`` is :attr:`FitResult.summary`, and
``to_dict()`` holds the parameters with their intervals, the fit quality, the warnings and
the model description as JSON-ready Python.
"""
from __future__ import annotations

import io
import math
import sys
import warnings
from typing import Any, TextIO

import numpy as np

from .._result import Result, jsonable

__all__ = ["FitResult"]


def _as_float(value: Any) -> float:
    return float(np.asarray(value, dtype=float))


class FitResult(Result):
    """Base class of fitted models.

    Parameters
    ----------
    model : str
        Short name of the fitted model, printed in the summary header.
    confidence_level : float
        Coverage of the intervals in :attr:`summary`, e.g. 0.95.
    n_observations : int
        Number of data points the fit used (windows, load-test points, ...).
    method : str, optional
        How the estimates and intervals were obtained (printed).

    Attributes
    ----------
    confidence_level : float
        Coverage of the intervals.
    n_observations : int
        Number of observations used.
    method : str
        Estimation method.
    warnings_ : list of str
        Messages of the warnings this fit emitted, in order.
    fit_quality_ : pandas.Series
        Goodness-of-fit figures (names depend on the model).
    tables_ : dict of str to pandas.DataFrame
        Extra tables printed by :meth:`print_summary`.
    """

    def __init__(self, model: str, *, confidence_level: float, n_observations: int, method: str = "") -> None:
        self.model = model
        self.confidence_level = float(confidence_level)
        self.n_observations = int(n_observations)
        self.method = method
        self.warnings_: list[str] = []
        self.tables_: dict[str, Any] = {}
        self._rows: dict[str, tuple[float, float, float, str, str]] = {}
        self._quality: dict[str, float] = {}
        self._pending: list[tuple[type[Warning], str]] = []

    # ------------------------------------------------------------------ building (subclasses)
    def _add_parameter(self, name: str, estimate: Any, lower: Any = math.nan, upper: Any = math.nan,
                       *, unit: str = "", note: str = "") -> None:
        """Record one summary row; ``lower``/``upper`` NaN when no interval exists."""
        self._rows[name] = (_as_float(estimate), _as_float(lower), _as_float(upper), unit, note)

    def _set_quality(self, name: str, value: Any) -> None:
        self._quality[name] = _as_float(value)

    def _add_table(self, name: str, frame: Any) -> None:
        self.tables_[name] = frame

    def _warn(self, category: type[Warning], message: str) -> None:
        """Record a caveat now; it is emitted later by :meth:`_emit_warnings`."""
        self.warnings_.append(message)
        self._pending.append((category, message))

    def _emit_warnings(self, stacklevel: int = 3) -> None:
        """Emit the recorded warnings; call from the public function (stacklevel 3 = its caller)."""
        pending, self._pending = self._pending, []
        for category, message in pending:
            warnings.warn(message, category, stacklevel=stacklevel)

    # ------------------------------------------------------------------ public views
    @property
    def summary(self):
        """Parameters as a DataFrame: ``estimate``, ``lower``, ``upper``, ``unit``, ``note``.

        ``lower``/``upper`` bound a two-sided interval of coverage
        :attr:`confidence_level`; NaN where the fit gives no interval (a
        parameter held fixed, or not identifiable).
        """
        import pandas as pd

        frame = pd.DataFrame.from_dict(
            self._rows, orient="index", columns=["estimate", "lower", "upper", "unit", "note"]
        )
        frame.index.name = "parameter"
        return frame

    @property
    def params_(self):
        """Point estimates as a :class:`pandas.Series` indexed by parameter name."""
        return self.summary["estimate"]

    @property
    def confidence_intervals_(self):
        """``lower`` and ``upper`` columns of :attr:`summary`."""
        return self.summary[["lower", "upper"]]

    @property
    def fit_quality_(self):
        """Goodness-of-fit figures as a :class:`pandas.Series`."""
        import pandas as pd

        return pd.Series(self._quality, dtype=float, name="value")

    def print_summary(self, decimals: int = 4, file: TextIO | None = None) -> None:
        """Print the parameters, fit quality, extra tables and warnings.

        Parameters
        ----------
        decimals : int, default 4
            Significant digits shown for numbers.
        file : file-like, optional
            Where to write (default ``sys.stdout``).
        """
        out = sys.stdout if file is None else file
        out.write(self._format(decimals))

    def _format(self, decimals: int) -> str:
        import pandas as pd

        buf = io.StringIO()
        level = f"{100 * self.confidence_level:g}%"
        buf.write(f"<{type(self).__name__}: {self.model}>\n")
        buf.write(f"  observations: {self.n_observations}\n")
        where = getattr(self, "measured_at", None)
        if where:
            # Said every time, the default too: where the latencies were timed decides what the
            # model takes them for (in-process: without the queue in front of a blocking handler).
            buf.write(f"  latencies measured at: {where.replace('_', '-')} (predictions are what clients see)\n")
        if self.method:
            buf.write(f"  method: {self.method}\n")
        buf.write(f"  intervals: {level}\n\n")
        fmt = f"{{:.{decimals}g}}".format
        with pd.option_context("display.width", 120, "display.max_columns", 10,
                               "display.max_colwidth", 60, "display.float_format", fmt):
            buf.write(self.summary.to_string())
            buf.write("\n")
            if self._quality:
                buf.write("\nfit quality\n")
                buf.write(self.fit_quality_.to_string())
                buf.write("\n")
            for name, table in self.tables_.items():
                buf.write(f"\n{name}\n")
                buf.write(table.to_string())
                buf.write("\n")
        if self.warnings_:
            buf.write("\nwarnings\n")
            for message in self.warnings_:
                buf.write(f"  - {message}\n")
        return buf.getvalue()

    # ------------------------------------------------------------------ result protocol
    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v[0]:.4g}" for k, v in list(self._rows.items())[:4])
        return f"<{type(self).__name__}: {self.model}; {params}>"

    def __str__(self) -> str:
        """The text :meth:`print_summary` prints (4 significant digits)."""
        return self._format(4)

    def to_frame(self):
        """The parameters with their intervals: :attr:`summary`."""
        return self.summary

    def to_dict(self) -> dict:
        """Parameters with intervals, fit quality, warnings and the model, as JSON-ready Python.

        Keys: ``result`` (the class), ``model``, ``method``, ``confidence_level``,
        ``n_observations``, the fit's own description (see ``_description``), ``parameters``
        (name -> ``estimate``, ``lower``, ``upper``, ``unit``, ``note``), ``fit_quality`` and
        ``warnings``.  Large tables (windows, comparisons) are left to the attributes.
        """
        parameters = {name: dict(zip(("estimate", "lower", "upper", "unit", "note"), row))
                      for name, row in self._rows.items()}
        return jsonable({"result": type(self).__name__, "model": self.model, "method": self.method,
                         "confidence_level": self.confidence_level, "n_observations": self.n_observations,
                         **self._description(), "parameters": parameters,
                         "fit_quality": dict(self._quality), "warnings": list(self.warnings_)})

    def _description(self) -> dict:
        """What a subclass adds to :meth:`to_dict` to describe its model (settings, not tables)."""
        return {}
