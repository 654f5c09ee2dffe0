"""Small helpers for the notebooks in ``notebooks/``: style, live figures, timing, saving.

Nothing here models anything; the notebooks call the model functions of the
package and use these helpers only to show the answers:

* :func:`use_style` -- one matplotlib look for every notebook (labelled axes,
  grid, a colour per discipline), deterministic SVG/PNG output;
* :class:`LivePlot` -- a matplotlib figure shown in an ``ipywidgets.Image``
  and redrawn in place, so a slider callback costs one PNG render and one
  widget message (no flicker, no growing output area);
* :func:`readout` -- an ``ipywidgets.HTML`` that shows named numbers, each in
  a ``<span data-key=...>`` so a browser test can read them back;
* :func:`timed` and :func:`time_slider_moves` -- measure what a slider move
  costs (recompute + redraw) inside the kernel;
* :func:`strip_notebook` -- drop saved widget state, widget views and
  volatile metadata before a notebook is committed (used by
  ``tools/notebook.py``).

Examples
--------
>>> import nbformat
>>> nb = nbformat.v4.new_notebook(metadata={"widgets": {"state": {}}})
>>> "widgets" in strip_notebook(nb).metadata
False
"""
from __future__ import annotations

import functools
import html
import io
import statistics
import time
from typing import Any, Callable, Iterable, Mapping

__all__ = [
    "COLORS",
    "LivePlot",
    "readout",
    "set_readout",
    "strip_notebook",
    "time_slider_moves",
    "timed",
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


def timed(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: record the wall time of every call, in seconds, in ``func.timings``.

    Examples
    --------
    >>> @timed
    ... def f(x):
    ...     return x + 1
    >>> f(1), len(f.timings)
    (2, 1)
    """
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            wrapper.timings.append(time.perf_counter() - t0)

    wrapper.timings = []  # type: ignore[attr-defined]
    return wrapper


def time_slider_moves(moves: Iterable[tuple[Any, Any]], repeat: int = 1) -> dict[str, float]:
    """Move widgets programmatically and time each move (recompute + redraw).

    Setting ``widget.value`` runs every ``observe`` callback synchronously in
    the kernel, so the measured time is exactly what a user's slider move
    costs on the kernel side (the browser then decodes one PNG).  Each
    widget is put back to its original value afterwards (untimed).

    Parameters
    ----------
    moves : iterable of (widget, value)
        The moves to make, in order.
    repeat : int
        How many times to run the whole sequence.

    Returns
    -------
    dict
        ``moves``, ``median_ms``, ``max_ms``.

    Examples
    --------
    >>> import ipywidgets
    >>> s = ipywidgets.IntSlider(value=1, min=0, max=10)
    >>> s.observe(lambda change: time.sleep(0.001), names="value")
    >>> t = time_slider_moves([(s, 2), (s, 3)])
    >>> t["moves"], t["max_ms"] >= 1.0, s.value
    (2, True, 1)
    """
    moves = list(moves)
    originals = {}
    for widget, _ in moves:
        originals.setdefault(id(widget), (widget, widget.value))
    times = []
    for _ in range(repeat):
        for widget, value in moves:
            t0 = time.perf_counter()
            widget.value = value
            times.append(time.perf_counter() - t0)
        for widget, value in originals.values():  # so the next round moves again
            widget.value = value
    return {
        "moves": len(times),
        "median_ms": 1e3 * statistics.median(times) if times else float("nan"),
        "max_ms": 1e3 * max(times) if times else float("nan"),
    }


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
