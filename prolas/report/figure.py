"""The figures prolas draws: matplotlib ``Figure`` objects made without pyplot.

Every picture of the report, the forecast and the benchmarks is a :class:`ReportFigure`
made by :func:`subplots`. It needs no GUI backend to be drawn or saved, and making one
never selects a backend (no ``matplotlib.use``), so prolas leaves the caller's matplotlib
setup as it found it. Nor is it registered with pyplot: nothing has to close it, and a
notebook shows a returned figure once, through its ``_repr_png_``, whether or not
pyplot's inline backend is active.

Importing this module imports matplotlib; the modules that draw import it when they
draw, so reading results does not load matplotlib.

>>> fig, ax = subplots(figsize=(4, 3))
>>> _ = ax.plot([0, 1], [1, 0])
>>> fig.savefig(io.BytesIO(), format="png")
"""

from __future__ import annotations

import io

from matplotlib.figure import Figure

__all__ = ["ReportFigure", "subplots"]


class ReportFigure(Figure):
    """A matplotlib ``Figure`` that a notebook displays by itself (``_repr_png_``), with
    no pyplot, no backend and no registration to close."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()


def subplots(
    nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], **options
) -> tuple[ReportFigure, object]:
    """``(figure, axes)`` as ``pyplot.subplots`` makes them, as a :class:`ReportFigure`
    outside pyplot (``options`` go to :meth:`Figure.subplots`: ``sharex``, ``squeeze``,
    ...)."""
    fig = ReportFigure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **options)


def own_axes(ax, figsize: tuple[float, float]) -> tuple[Figure, object, bool]:
    """``(figure, axes, made)``: ``ax`` and its figure when given, else a new figure of
    ``figsize`` and its one axes (``made`` True: the caller lays it out)."""
    if ax is not None:
        return ax.figure, ax, False
    fig, ax = subplots(figsize=figsize)
    return fig, ax, True
