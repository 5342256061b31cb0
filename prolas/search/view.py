"""What the search of a long series sees: evenly spaced points, plus a dense window for
each significant period of the full series that they cannot resolve, within one budget
of ``--search-points M`` points.

A series longer than M is searched on evenly spaced points
(:meth:`prolas.data.Dataset.spaced_indices`), spaced ``Δ``. A period ``p < 2 Δ`` lies below
their Nyquist floor and no search on them can find it; one below
:data:`RESOLVED_SPACINGS` ``Δ`` is seen only as a few points per cycle. So, before the
search, the whole series is scanned (:func:`prolas.spectrum.scan_dataset`, O(N log N)), and
for each significant period ``p < RESOLVED_SPACINGS Δ`` (strongest first, at most
``--search-windows`` of them) the search also sees a **window**: the points of a
contiguous stretch :data:`WINDOW_CYCLES` ``p`` long in the middle of the series, thinned
evenly to at most :data:`WINDOW_POINTS_PER_CYCLE` per cycle. The search then fits one
data set, the union of the evenly spaced points and the windows (:class:`SearchView`):

* **Budget.** M bounds the union, since a fit's cost grows with the cube of its points:
  the evenly spaced points make room for the windows, down to
  :data:`EVENLY_SPACED_SHARE` of M (:func:`build_view`). Without windows they are M.
* **Floors.** Δ (the period floor 2Δ and the lengthscale floor, docs/conventions.md) is
  the spacing of the densest window, not the union's median spacing (which the evenly
  spaced points dominate): the window resolves the short period, so the fit may use it
  (:attr:`prolas.data.Dataset.fixed_spacing`). Without windows Δ is the evenly spaced
  points' own.
* **Starting periods.** Every fit on the view also starts from the full series'
  significant periods (:attr:`prolas.data.Dataset.period_hints`), those at or above the
  view's floor: measured on all N points they are far sharper than a periodogram of the
  few hundred points fitted.
* **Standardisation.** The full series' (``y_mean``, ``y_std``), as for any subsample, so
  the hyperparameters fitted on the view are valid starting values on all points.

Both the floors and the starting periods are inputs of the fits, so they belong to the
view's identity (:meth:`prolas.data.Dataset.fit_identity`: fit caches, journals).

The view's ``to_json`` is result.json's ``search.searched_on`` block (docs/result-json.md);
which option was measured against which is in docs/long-series.md and
benchmarks/results/long_series/README.md.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from prolas.data import Dataset
from prolas.limits import EVENLY_SPACED_SHARE
from prolas.spectrum import Peak, Spectrum, scan_dataset

__all__ = [
    "EVENLY_SPACED_RULE",
    "EVENLY_SPACED_SHARE",
    "RESOLVED_SPACINGS",
    "SearchView",
    "WINDOW_CYCLES",
    "WINDOW_POINTS_PER_CYCLE",
    "Window",
    "build_view",
    "cached_view",
    "view_message",
]

#: A period is resolved by evenly spaced points when it spans at least this many of
#: their spacings (Nyquist is 2).
RESOLVED_SPACINGS = 4.0
#: A window covers this many cycles of its period ...
WINDOW_CYCLES = 8
#: ... sampled evenly (by position) at no more than this many points per cycle.
WINDOW_POINTS_PER_CYCLE = 16
#: ``searched_on.rule`` of the evenly spaced points.
EVENLY_SPACED_RULE = "evenly spaced by position in x order"


@dataclass(frozen=True)
class Window:
    """A contiguous stretch of the series that the search sees densely.

    Attributes:
        period: the full series' significant period it is there for (x's units).
        indices: its points' positions in the full data (x order, increasing).
        x_start, x_end: the first and last input of the window.
        spacing: the median spacing of its points.
    """

    period: float
    indices: np.ndarray
    x_start: float
    x_end: float
    spacing: float

    @property
    def n(self) -> int:
        return int(self.indices.size)

    def to_json(self) -> dict:
        return {
            "period": float(self.period),
            "n": self.n,
            "x_start": float(self.x_start),
            "x_end": float(self.x_end),
            "spacing": float(self.spacing),
        }


@dataclass(frozen=True, eq=False)
class SearchView:
    """The points a search of a long series fits, and why (module docstring).

    Attributes:
        dataset: the union of the evenly spaced points and the windows, with the full
            series' standardisation, floors and starting periods: what every fit of the
            search is on.
        indices: its points' positions in the full data (increasing).
        evenly_spaced: how many evenly spaced points the view holds.
        spacing: the evenly spaced points' median spacing ``Δ``.
        windows: the dense windows, strongest period first.
        spectrum: the scan of the full series.
        hidden: significant periods of the full series that the view cannot resolve
            (below ``RESOLVED_SPACINGS Δ`` and given no window: ``--search-windows``).
    """

    dataset: Dataset
    indices: np.ndarray
    evenly_spaced: int
    spacing: float
    windows: tuple[Window, ...]
    spectrum: Spectrum
    hidden: tuple[Peak, ...] = ()

    @property
    def rule(self) -> str:
        if not self.windows:
            return EVENLY_SPACED_RULE
        return f"{EVENLY_SPACED_RULE}, plus contiguous windows for short periods"

    def to_json(self) -> dict:
        """result.json's ``search.searched_on`` block."""
        return {
            "n": int(self.indices.size),
            "rule": self.rule,
            "indices": [int(i) for i in self.indices],
            "evenly_spaced": int(self.evenly_spaced),
            "windows": [w.to_json() for w in self.windows],
            "spacing": float(self.dataset.spacing),
            "start_periods": [float(p) for p in self.dataset.period_hints],
        }


def _window(dataset: Dataset, period: float) -> Window:
    """The window for ``period``: :data:`WINDOW_CYCLES` periods in the middle of the
    series (all of it when shorter), thinned by position to at most
    :data:`WINDOW_POINTS_PER_CYCLE` points per cycle."""
    x = dataset.x
    length = WINDOW_CYCLES * period
    centre = 0.5 * (x[0] + x[-1])
    lo = min(max(centre - 0.5 * length, x[0]), max(x[-1] - length, x[0]))
    first = int(np.searchsorted(x, lo, side="left"))
    last = int(np.searchsorted(x, lo + length, side="right")) - 1
    last = max(last, first + 1)
    span_idx = np.arange(first, last + 1)
    most = WINDOW_CYCLES * WINDOW_POINTS_PER_CYCLE
    if span_idx.size > most:
        span_idx = first + np.unique(np.linspace(0, span_idx.size - 1, most).round().astype(int))
    xs = np.unique(x[span_idx])
    spacing = float(np.median(np.diff(xs))) if xs.size > 1 else float(dataset.spacing)
    return Window(period, span_idx, float(x[span_idx[0]]), float(x[span_idx[-1]]), spacing)


def _short_periods(spectrum: Spectrum, sparse: float, full_spacing: float) -> list[Peak]:
    """The significant periods, strongest first, that evenly spaced points ``sparse``
    apart cannot resolve and that the full series' spacing can."""
    return [
        p
        for p in spectrum.fundamentals
        if p.period < RESOLVED_SPACINGS * sparse and p.period >= 2.0 * full_spacing
    ]


def _union(
    dataset: Dataset, spectrum: Spectrum, n_evenly: int, search_windows: int
) -> tuple[np.ndarray, float, tuple[Window, ...], tuple[Peak, ...], np.ndarray]:
    """``n_evenly`` evenly spaced indices, their spacing, the windows for the periods they
    cannot resolve (at most ``search_windows``), the periods left without one, and the
    union's indices."""
    base = dataset.spaced_indices(n_evenly)
    sparse = float(np.median(np.diff(np.unique(dataset.x[base]))))
    short = _short_periods(spectrum, sparse, dataset.spacing)
    windows = tuple(_window(dataset, p.period) for p in short[: max(int(search_windows), 0)])
    hidden = tuple(short[len(windows) :])
    indices = np.unique(np.concatenate([base, *(w.indices for w in windows)]))
    return base, sparse, windows, hidden, indices


def build_view(
    dataset: Dataset,
    search_points: int,
    search_windows: int,
    evenly_spaced_share: float = EVENLY_SPACED_SHARE,
) -> SearchView:
    """The view of ``dataset`` for a search on at most ``search_points`` points with at
    most ``search_windows`` windows (module docstring). ``dataset`` must be longer than
    ``search_points``.

    The windows are part of the budget: the evenly spaced points are as many as fit
    beside them, ``M - (window points not among them)``, but never fewer than
    ``ceil(evenly_spaced_share M)`` (the view exceeds M only when the windows alone need
    more than the rest). Fewer evenly spaced points are further apart, so which periods
    need a window is decided on the evenly spaced points actually kept (a fixed point,
    reached in a few rounds). ``evenly_spaced_share = 1`` is the view measured first: M
    evenly spaced points with the windows on top."""
    if not 0.0 < evenly_spaced_share <= 1.0:
        raise ValueError(f"evenly_spaced_share must be in (0, 1], got {evenly_spaced_share}")
    spectrum = scan_dataset(dataset)
    least = min(search_points, math.ceil(evenly_spaced_share * search_points))
    n_evenly = search_points
    base, sparse, windows, hidden, indices = _union(dataset, spectrum, n_evenly, search_windows)
    # Shrinking the evenly spaced points by the excess brings the union to the budget in
    # one round unless a window overlaps them or a new period becomes short; 8 rounds
    # are far more than the few such changes a scan's peaks allow.
    for _ in range(8):
        excess = indices.size - search_points
        if excess <= 0 or n_evenly <= least:
            break
        n_evenly = max(least, n_evenly - excess)
        base, sparse, windows, hidden, indices = _union(dataset, spectrum, n_evenly, search_windows)
    spacing = min([w.spacing for w in windows], default=sparse)
    floor = 2.0 * spacing
    hints = tuple(p.period for p in spectrum.fundamentals if p.period >= floor)
    if windows:
        many = "s" * (len(windows) != 1)
        parts = f"{base.size} evenly spaced and {len(windows)} window{many}"
        name = f"{dataset.name} (searched on {indices.size} of {dataset.n}: {parts})"
    else:  # the name a plain thinning has always had
        name = f"{dataset.name} (thinned to {indices.size} of {dataset.n})"
    view = dataset.take(indices, name).with_fit_hints(spacing if windows else None, hints)
    return SearchView(view, indices, int(base.size), sparse, windows, spectrum, hidden)


_VIEWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cached_view(dataset: Dataset, search_points: int, search_windows: int) -> SearchView:
    """:func:`build_view`, made once per Dataset object and settings (the pipeline, the
    journal, the report and the forecast all ask for it)."""
    views = _VIEWS.setdefault(dataset, {})
    key = (int(search_points), int(search_windows))
    if key not in views:
        views[key] = build_view(dataset, search_points, search_windows)
    return views[key]


def view_message(view: SearchView, dataset: Dataset) -> str:
    """The line ``prolas fit`` prints before a search on a view."""
    text = (
        f"searching on {view.indices.size} of {dataset.n} points: "
        f"{view.evenly_spaced} evenly spaced"
    )
    if view.windows:
        periods = ", ".join(f"{w.period:.4g}" for w in view.windows)
        text += (
            f" and {len(view.windows)} dense window(s) for the full series' period(s) "
            f"{periods} that they cannot resolve"
        )
    if view.hidden:
        periods = ", ".join(f"{p.period:.4g}" for p in view.hidden)
        text += f"; the search cannot see the significant period(s) {periods} (--search-windows)"
    return text + "; the best model is then refitted on all points"
