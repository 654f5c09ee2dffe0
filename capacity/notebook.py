"""Small helpers for the notebooks in ``notebooks/``: style, controls, live figures, saving.

Nothing here models anything; the notebooks call the model functions of the
package and use these helpers only to show the answers:

* :func:`use_style` -- one matplotlib look for every notebook (labelled axes,
  grid, a colour per discipline), deterministic SVG/PNG output;
* :func:`prepare_controls` and :func:`control_values` -- lay out a panel's
  sliders (CSS class ``capacity-slider-<name>`` for the browser test and the
  benchmark), refuse a default the browser cannot show exactly, and read the
  values back as the decimals the slider shows;
* :class:`LivePlot` -- a matplotlib figure shown in an ``ipywidgets.Image``
  and redrawn in place, so a slider callback costs one PNG render and one
  widget message (no flicker, no growing output area);
* :func:`readout` -- an ``ipywidgets.HTML`` that shows named numbers, each in
  a ``<span data-key=...>`` so a browser test can read them back;
* :func:`strip_notebook` -- drop saved widget state, widget views and
  volatile metadata before a notebook is committed (used by
  ``tools/notebook.py``).

What a slider move costs is measured outside the notebooks, by
``benchmarks/bench_notebooks.py`` (figures in ``notebooks/README.md``): a
notebook that moves its own widgets after showing them races the browser,
which answers every value the kernel sets with the value its slider snapped
to, and the browser's answer can arrive after the kernel has moved on.

Examples
--------
>>> import nbformat
>>> nb = nbformat.v4.new_notebook(metadata={"widgets": {"state": {}}})
>>> "widgets" in strip_notebook(nb).metadata
False
"""
from __future__ import annotations

import html
import io
import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "COLORS",
    "LivePlot",
    "control_values",
    "prepare_controls",
    "readout",
    "set_readout",
    "snap_to_step",
    "strip_notebook",
    "use_style",
]

#: One colour per idea, the same in every notebook.
COLORS = {
    "ps": "#d62728",        # processor sharing / event loop: red
    "fcfs": "#1f77b4",      # first come first served: blue
    "measured": "#2ca02c",  # data from the seed articles: green
    "model": "#7f7f7f",     # a model curve or a bound: grey
    "limit": "#ff7f0e",     # a timeout, an SLO, a ceiling: orange
    "closed": "#9467bd",    # closed-loop load test: purple
}

_RC = {
    "figure.figsize": (8.0, 4.0),
    "figure.dpi": 80,
    "savefig.dpi": 80,
    "figure.constrained_layout.use": True,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 12,
    "axes.titleweight": "bold",
    "axes.labelsize": 11,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "lines.linewidth": 2.0,
    # Stable ids in SVG output, so re-running a notebook does not change the file.
    "svg.hashsalt": "capacity",
    "path.simplify": True,
}


def use_style() -> None:
    """Apply the notebooks' matplotlib style (rcParams) to the current session.

    Examples
    --------
    >>> import matplotlib
    >>> use_style()
    >>> matplotlib.rcParams["axes.grid"]
    True
    """
    import matplotlib

    matplotlib.rcParams.update(_RC)


# -------------------------------------------------------------------- controls
def _step_decimals(step: float) -> int:
    """Decimals of a slider step as written (0.5 -> 1, 0.125 -> 3, 10 -> 0)."""
    for decimals in range(13):
        if abs(round(step, decimals) - step) <= 1e-12 * max(1.0, abs(step)):
            return decimals
    return 12


def _float_step(widget: Any) -> float | None:
    """The step of a float slider, or None for every other widget."""
    import ipywidgets

    if isinstance(widget, (ipywidgets.FloatSlider, ipywidgets.BoundedFloatText)) and widget.step:
        return float(widget.step)
    return None


def prepare_controls(controls: Mapping[str, Any], description_width: str = "150px",
                     width: str | None = "480px", button_width: str | None = None) -> Mapping[str, Any]:
    """Lay out a panel's controls and check that the browser can show their defaults exactly.

    Each control gets the CSS class ``capacity-slider-<name>`` (the browser test and
    ``benchmarks/bench_notebooks.py`` find it by that), the description width and,
    for sliders and text boxes, the width; toggle buttons get ``button_width``.

    A float slider in the browser (noUiSlider) snaps its value to the step grid
    ``min + k * step`` when it is shown and sends the snapped value back to the
    kernel: a default off that grid (37.82 on a 0.1 grid) silently becomes
    another setting (37.8) the moment the panel appears, and the panel then shows
    numbers the notebook's text does not.  So every default must lie on the grid.

    Parameters
    ----------
    controls : mapping
        ``name -> widget``, in display order.
    description_width, width, button_width : str, optional
        CSS widths.

    Returns
    -------
    mapping
        ``controls`` itself.

    Raises
    ------
    ValueError
        When a slider's default is not ``min + k * step`` for an integer ``k``.

    Examples
    --------
    >>> import ipywidgets
    >>> c = prepare_controls({"cpu_ms": ipywidgets.FloatSlider(value=10.0, min=1.0, max=50.0, step=0.5)})
    >>> c["cpu_ms"]._dom_classes
    ('capacity-slider-cpu_ms',)
    >>> prepare_controls({"pause_ms": ipywidgets.FloatSlider(value=37.82, min=1.0, max=200.0, step=0.1)})
    Traceback (most recent call last):
    ...
    ValueError: control 'pause_ms': default 37.82 is not min + k * step (min 1.0, step 0.1): the browser would snap it to 37.8
    """
    import ipywidgets

    for name, widget in controls.items():
        step = _float_step(widget)
        if step is None and isinstance(widget, ipywidgets.IntSlider):
            step = float(widget.step)
        if step is not None:
            k = (widget.value - widget.min) / step
            if abs(k - round(k)) > 1e-6:
                snapped = round(widget.min + round(k) * step, _step_decimals(step))
                raise ValueError(f"control {name!r}: default {widget.value!r} is not min + k * step (min "
                                 f"{widget.min!r}, step {step!r}): the browser would snap it to {snapped!r}")
        widget.add_class(f"capacity-slider-{name}")
        widget.style.description_width = description_width
        if isinstance(widget, ipywidgets.ToggleButtons):
            if button_width is not None:
                widget.style.button_width = button_width
        elif width is not None:
            widget.layout.width = width
    return controls


def control_values(controls: Mapping[str, Any]) -> dict[str, Any]:
    """The controls' values, each float slider's rounded to the decimals of its step.

    The browser answers a float slider's value with ``min + k * step`` computed in
    its own floating point (10.0 comes back as 9.999999999999998 on a 0.5 grid
    from 1): rounding to the step's decimals gives the model the number the
    slider shows, so a panel computes the same numbers in JupyterLab, in Voilà
    and in a kernel without a browser.

    Examples
    --------
    >>> import ipywidgets
    >>> s = ipywidgets.FloatSlider(value=9.999999999999998, min=1.0, max=50.0, step=0.5)
    >>> control_values({"cpu_ms": s, "mode": ipywidgets.ToggleButtons(options=["ps", "fcfs"])})
    {'cpu_ms': 10.0, 'mode': 'ps'}
    """
    out = {}
    for name, widget in controls.items():
        step = _float_step(widget)
        value = widget.value
        out[name] = round(value, _step_decimals(step)) + 0.0 if step is not None and math.isfinite(value) else value
    return out



def snap_to_step(value: float, widget: Any) -> float:
    """The value a slider shows for ``value``: the nearest ``min + k * step``, to the step's decimals.

    Use it where a default or a preset comes from data (a pause of 11.8 s / 312 =
    37.82 ms on a 0.1 ms slider): the panel then starts from the value the
    browser will show, and :func:`prepare_controls` accepts it.

    Examples
    --------
    >>> import ipywidgets
    >>> snap_to_step(37.820512, ipywidgets.FloatSlider(min=1.0, max=200.0, step=0.1))
    37.8
    """
    step = float(widget.step)
    k = round((value - widget.min) / step)
    k = min(max(k, 0), math.floor((widget.max - widget.min) / step + 1e-9))
    return round(widget.min + k * step, _step_decimals(step)) + 0.0


class LivePlot:
    """A matplotlib figure displayed as a PNG in an ``ipywidgets.Image``, redrawn fast.

    Build the figure once (``plot.fig``, ``plot.ax``, ``plot.axes``), with
    fixed axis limits, keep the artists that change, register them with
    :meth:`animate`, and in a slider callback update their data and call
    :meth:`redraw`.  The static part (axes, ticks, labels, legend) is
    rendered once and cached; a redraw restores that bitmap, draws only the
    animated artists (blitting) and encodes one PNG: about 10x cheaper than
    re-rendering the whole figure, which is what keeps a slider move under
    100 ms.  Call ``redraw(full=True)`` after changing anything static
    (limits, labels).  The figure is a plain
    :class:`matplotlib.figure.Figure`, not a pyplot figure, so the inline
    backend never shows a second static copy at the end of the cell.

    Parameters
    ----------
    nrows, ncols : int
        Subplot grid.
    figsize : (float, float), optional
        Inches; defaults to the style's figure size.
    **subplot_kw
        Passed to :meth:`matplotlib.figure.Figure.subplots`.

    Examples
    --------
    >>> plot = LivePlot()
    >>> line, = plot.ax.plot([0, 1], [0, 1])
    >>> plot.animate(line)
    >>> plot.redraw()
    >>> line.set_ydata([1, 0])
    >>> plot.redraw()
    >>> plot.widget.value[:4] == b"\\x89PNG"
    True
    """

    def __init__(self, nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] | None = None,
                 **subplot_kw: Any) -> None:
        import ipywidgets
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.fig = Figure(figsize=figsize, layout="constrained")
        self._canvas = FigureCanvasAgg(self.fig)
        axes = self.fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)
        self.axes = axes.ravel()
        self.ax = self.axes[0]
        self._animated: list[Any] = []
        self._background: Any = None
        self.widget = ipywidgets.Image(format="png")
        self.widget.add_class("capacity-plot")

    def animate(self, *artists: Any) -> None:
        """Mark artists as the ones that change (drawn on every :meth:`redraw`)."""
        for artist in artists:
            artist.set_animated(True)
            self._animated.append(artist)
        self._background = None

    def render(self, full: bool = False) -> bytes:
        """The figure as PNG bytes (static part from the cache unless ``full``)."""
        from PIL import Image

        canvas = self._canvas
        if full or self._background is None:
            canvas.draw()  # skips animated artists: this is the static background
            self.fig.set_layout_engine("none")  # freeze the layout: blitting needs fixed axes
            self._background = canvas.copy_from_bbox(self.fig.bbox)
        else:
            canvas.restore_region(self._background)
        for artist in self._animated:
            if artist.get_visible():
                self.fig.draw_artist(artist)
        buf = io.BytesIO()
        # Low zlib level: a 3x faster encode for a 20 % larger PNG.
        Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba()).save(
            buf, format="png", compress_level=1)
        return buf.getvalue()

    def redraw(self, full: bool = False) -> None:
        """Re-render the figure into the widget."""
        self.widget.value = self.render(full)


def _format_items(items: Mapping[str, tuple[str, float, str]]) -> str:
    parts = []
    for key, (label, value, fmt) in items.items():
        shown = format(value, fmt)
        parts.append(f"{html.escape(label)}: <b><span class='capacity-value' data-key='{html.escape(key)}'"
                     f">{shown}</span></b>")
    return "<div class='capacity-readout-body'>" + " &nbsp;·&nbsp; ".join(parts) + "</div>"


def readout(items: Mapping[str, tuple[str, float, str]] | None = None):
    """An ``ipywidgets.HTML`` showing labelled numbers, machine-readable.

    Parameters
    ----------
    items : mapping
        ``key -> (label, value, format_spec)``, e.g.
        ``{"p99_ms": ("p99", 1234.5, ",.0f")}``.  Each number is rendered in
        ``<span class="capacity-value" data-key="p99_ms">``.

    Returns
    -------
    ipywidgets.HTML
        With the CSS class ``capacity-readout``; update it with
        :func:`set_readout`.

    Examples
    --------
    >>> r = readout({"qps": ("ceiling", 40.0, ".1f")})
    >>> "data-key='qps'>40.0<" in r.value
    True
    """
    import ipywidgets

    widget = ipywidgets.HTML()
    widget.add_class("capacity-readout")
    if items:
        set_readout(widget, items)
    return widget


def set_readout(widget: Any, items: Mapping[str, tuple[str, float, str]]) -> None:
    """Replace the numbers shown by a :func:`readout` widget."""
    widget.value = _format_items(items)


# ---------------------------------------------------------------------- saving
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_VOLATILE_CELL_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime")


def strip_notebook(nb: Any) -> Any:
    """Remove saved widget state and volatile metadata from a notebook (in place).

    * ``metadata.widgets`` (the saved widget state: large, with random model
      ids, useless without a kernel);
    * outputs that are only a widget view (they point at a model that is no
      longer saved; a static viewer would show the widget's long repr);
    * per-cell execution timestamps and UI state (``execution``,
      ``collapsed``, ``scrolled``, ``ExecuteTime``);
    * the Python patch version in ``language_info`` (differs between
      machines, changes nothing).

    Parameters
    ----------
    nb : nbformat.NotebookNode
        The notebook.

    Returns
    -------
    nbformat.NotebookNode
        The same object.
    """
    nb.metadata.pop("widgets", None)
    info = nb.metadata.get("language_info")
    if info is not None:
        info.pop("version", None)
    for cell in nb.cells:
        for key in _VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
        if cell.cell_type != "code":
            continue
        cell.outputs = [out for out in cell.outputs
                        if not (out.get("output_type") in ("display_data", "execute_result")
                                and _WIDGET_VIEW in out.get("data", {}))]
    return nb
