"""The report's pictures: the fit, the additive components, the search's convergence.

* :func:`fit_figure` / :func:`plot_fit`: data, posterior mean and 95 % predictive band
  (noise included), extrapolated :data:`EXTRAPOLATE` of the span beyond the data.
* :func:`components_figure` / :func:`plot_components`: one panel per additive term
  (posterior mean ± 2 sd, :func:`prolas.gp.decompose`) with its share of the fitted
  mean's variance (:func:`prolas.gp.anatomy.term_shares`); a white-noise term (``WN``,
  ``LIN*WN``) is noise, so its panel shows the ± 2 sd band of the noise it adds around 0.
* :func:`mark_changes` marks change-points (dashed line, ±2-width band) and
  change-windows (shaded span) on them (:func:`prolas.gp.anatomy.fit_changes`).
* :func:`convergence_figure` / :func:`plot_convergence`: best BIC so far against the
  evaluation index.

The ``*_figure`` functions return a matplotlib ``Figure`` made without pyplot
(:mod:`prolas.report.figure`: no backend is selected, a notebook shows it once) and draw
on ``ax`` when given one; the ``plot_*`` functions save it as a PNG file.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from prolas.data import Dataset
from prolas.expr import CHANGE_FACTORS
from prolas.gp import FitResult, decompose
from prolas.gp.anatomy import (
    FitChange,
    active_bounds,
    fit_changes,
    noise_terms,
    term_conditions,
    term_shares,
)
from prolas.records import SearchResult
from prolas.report.metrics import predictive_mean_sd
from prolas.report.words import in_years, say_active_range, say_position, say_window

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = [
    "DPI",
    "EXTRAPOLATE",
    "components_figure",
    "convergence_figure",
    "fit_figure",
    "mark_changes",
    "plot_components",
    "plot_convergence",
    "plot_fit",
]


#: Plots extend this fraction of the data span beyond the last input.
EXTRAPOLATE = 0.2

#: Resolution of the PNG files the report writes.
DPI = 110


def _plot_grid(dataset: Dataset, test_dataset: Dataset | None, n: int = 400) -> np.ndarray:
    """``n`` inputs from the first input to ``EXTRAPOLATE`` of the span beyond the last
    (and over the test inputs); the data's validation leaves room for this."""
    lo, hi = dataset.x[0], dataset.x[-1] + EXTRAPOLATE * dataset.span
    if test_dataset is not None:
        lo, hi = min(lo, test_dataset.x[0]), max(hi, test_dataset.x[-1])
    return np.linspace(lo, hi, n)


def _drawable(values: np.ndarray) -> np.ndarray:
    """Non-finite values as NaN: matplotlib leaves a gap instead of failing on inf."""
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.isfinite(values), values, np.nan)


def mark_changes(ax, fit: FitResult, dataset: Dataset, groups=None) -> list:
    """Mark the transitions of ``fit``'s change operators on ``ax`` (x axis = x's units).

    A change-point: a dashed vertical line at its location, labelled ``"change-point
    ~1973.4"``, over a light band of ±2 widths (where its sigmoid runs from 12 % to
    88 %), capped to the axis and labelled ``"transition ~1971.4 to 1975.4"`` unless it
    fits between two neighbouring inputs (an abrupt change); a change-window: a light
    span from its start to its end, labelled ``"change-window ~1971.2-1973.9"``. Only
    what lies within the axis' current x range is drawn (the x limits are kept).
    ``groups``: the change groups to mark (all by default). Returns the artists drawn.
    """
    years = in_years(dataset)
    lo, hi = ax.get_xlim()
    artists = []
    for c in fit_changes(fit, dataset):  # held transitions at +-inf: spans run off the axis
        if groups is not None and c.group not in groups:
            continue
        w = c.params["width"]
        if c.op == "CP":
            loc = c.params["location"]
            if not lo <= loc <= hi:
                continue
            band = (max(lo, loc - 2 * w), min(hi, loc + 2 * w))
            # a gradual change's band can cover most of the plot: the legend says what it is
            gradual = dataset.n > 1 and 4 * w >= dataset.spacing
            ends = (say_position(loc + d * w, dataset, years) for d in (-2, 2))
            label = "transition ~{} to {}".format(*ends) if gradual else None
            artists.append(ax.axvspan(*band, color="C2", alpha=0.15, lw=0, label=label))
            artists.append(
                ax.axvline(
                    loc,
                    color="C2",
                    ls="--",
                    lw=1.2,
                    label=f"change-point ~{say_position(loc, dataset, years)}",
                )
            )
        else:
            start, end = c.params["start"], c.params["end"]
            if not (end > start and start <= hi and end >= lo):
                continue
            label = f"change-window {say_window(c, dataset, years)}"
            artists.append(
                ax.axvspan(max(lo, start), min(hi, end), color="C4", alpha=0.15, lw=0, label=label)
            )
    ax.set_xlim(lo, hi)
    return artists


def fit_figure(
    fit: FitResult, dataset: Dataset, test_dataset: Dataset | None = None, *, ax=None
) -> Figure:
    """The picture of :func:`plot_fit` on ``ax``, or on a new figure; returns the figure."""
    from prolas.report.figure import own_axes

    xs = _plot_grid(dataset, test_dataset)
    mean, sd = predictive_mean_sd(fit, dataset, xs, include_noise=True)
    mean, lo, hi = (_drawable(v) for v in (mean, mean - 1.96 * sd, mean + 1.96 * sd))
    fig, ax, made = own_axes(ax, (9, 4.5))
    ax.fill_between(xs, lo, hi, color="C0", alpha=0.2, label="95% predictive band")
    ax.plot(xs, mean, color="C0", lw=1.5, label="posterior mean")
    ax.plot(dataset.x, dataset.y, "k.", ms=3, label="data")
    if test_dataset is not None:
        ax.plot(test_dataset.x, test_dataset.y, "o", color="C3", ms=3, mfc="none", label="test")
    ax.axvline(dataset.x[-1], color="0.6", ls="--", lw=0.8)
    mark_changes(ax, fit, dataset)
    ax.set_xlabel(dataset.x_column)
    ax.set_ylabel(dataset.y_column)
    ax.set_title(f"{fit.expression}   (BIC {fit.bic:.2f})")
    ax.legend(loc="best", fontsize=8, frameon=False)
    if made:
        fig.tight_layout()
    return fig


def plot_fit(
    path: Path, fit: FitResult, dataset: Dataset, test_dataset: Dataset | None = None
) -> Path:
    """Data, posterior mean and 95 % predictive band (noise included), extrapolated
    ``EXTRAPOLATE`` of the span beyond the data; test points if given; the transitions
    of change operators marked (:func:`mark_changes`)."""
    fit_figure(fit, dataset, test_dataset).savefig(path, dpi=DPI)
    return path


def _panel_label(label: str, conds: list[tuple[FitChange, int]], dataset: Dataset) -> str:
    """A component's title: its base kernels, and where a change operator lets it act
    (``"LIN  (before ~1973.4)"``); a term without change factors keeps its label."""
    if not conds:
        return label
    bases = [k for k in label.split("*") if k not in CHANGE_FACTORS] or ["C"]
    where = say_active_range(conds, dataset, in_years(dataset)).removeprefix("active only ")
    where = where.replace(" (before the data start)", "").replace(" (after the data end)", "")
    return f"{'*'.join(bases)}  ({where})"


def components_figure(fit: FitResult, dataset: Dataset) -> Figure:
    """The picture of :func:`plot_components`: one panel per additive term (a new figure)."""
    from prolas.report.figure import subplots

    xs = _plot_grid(dataset, None)
    parts = decompose(fit, dataset.standardised_view(), xs)
    shares, _ = term_shares(fit, dataset)
    conds = term_conditions(fit_changes(fit), len(fit.terms))
    noise = noise_terms(fit)
    fig, axes = subplots(
        len(parts), 1, figsize=(9, 2.4 * len(parts) + 0.4), sharex=True, squeeze=False
    )
    for i, (ax, (label, mean_z, var_z), share) in enumerate(zip(axes[:, 0], parts, shares)):
        mean, sd = mean_z * dataset.y_std, np.sqrt(var_z) * dataset.y_std
        lo, hi, mean = (_drawable(v) for v in (mean - 2 * sd, mean + 2 * sd, mean))
        ax.fill_between(xs, lo, hi, color="C1", alpha=0.25)
        ax.plot(xs, mean, color="C1", lw=1.3)
        ax.axvline(dataset.x[-1], color="0.6", ls="--", lw=0.8)
        title = _panel_label(label, conds[i], dataset)
        what = (
            "noise: ± 2 sd of what it adds"
            if noise[i]
            else f"{100 * share:.1f}% of the fitted variance"
        )
        ax.set_title(f"{title}  ({what})", fontsize=9)
        ax.set_ylabel(f"{dataset.y_column} - mean")
        lo_b, hi_b, outside = active_bounds(conds[i])  # the changes that bound this term
        groups = {b[1].group for b in (lo_b, hi_b) if b is not None} | {c.group for c in outside}
        if groups and mark_changes(ax, fit, dataset, groups=groups):
            ax.legend(loc="upper left", fontsize=7, frameon=False)
    axes[-1, 0].set_xlabel(dataset.x_column)
    fig.suptitle(f"Additive components of {fit.expression} (mean ± 2 sd)", fontsize=10)
    fig.tight_layout()
    return fig


def plot_components(path: Path, fit: FitResult, dataset: Dataset) -> Path:
    """One panel per additive term: its posterior mean ± 2 sd (y units, without the
    data mean) on the data range plus ``EXTRAPOLATE`` of the span; a term switched on
    and off by change operators has their transitions marked (:func:`mark_changes`)."""
    components_figure(fit, dataset).savefig(path, dpi=DPI)
    return path


def convergence_figure(result: SearchResult, *, ax=None) -> Figure:
    """The picture of :func:`plot_convergence` on ``ax``, or on a new figure; returns the
    figure."""
    from matplotlib.ticker import MaxNLocator

    from prolas.report.figure import own_axes

    fig, ax, made = own_axes(ax, (7, 4))
    ok = [e for e in result.history if e.ok]
    failed = [e for e in result.history if not e.ok]
    if ok:
        ax.plot(
            [e.index for e in ok],
            [e.bic for e in ok],
            "o",
            color="0.55",
            ms=3.5,
            label="evaluation",
        )
        trace = result.best_trace()
        idx = [i + 1 for i, v in enumerate(trace) if math.isfinite(v)]
        ax.step(
            idx, [trace[i - 1] for i in idx], where="post", color="C0", lw=1.8, label="best so far"
        )
        bics = [e.bic for e in ok]
        lo, hi = min(bics), max(bics)
        pad = 0.05 * (hi - lo) if hi > lo else 1.0
        ax.set_ylim(lo - 2 * pad, hi + pad)
    if failed:
        y0 = ax.get_ylim()[0] if ok else 0.0
        ax.plot(
            [e.index for e in failed],
            [y0] * len(failed),
            "x",
            color="C3",
            ms=6,
            clip_on=False,
            label="failed",
        )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("evaluation (unique GP fits)")
    ax.set_ylabel("BIC (higher is better)")
    best = result.best
    title = f"{result.method}: " + (f"best {best.expression}" if best else "no successful fit")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    if made:
        fig.tight_layout()
    return fig


def plot_convergence(path: Path, result: SearchResult) -> Path:
    """Best BIC so far against the evaluation index, each evaluation's BIC as a dot,
    failed evaluations marked with a red x at the bottom of the axis."""
    convergence_figure(result).savefig(path, dpi=DPI)
    return path
