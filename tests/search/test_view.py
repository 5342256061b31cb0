"""What the search of a long series sees (prolas.search.view): evenly spaced points plus a
dense window for each significant period of the whole series they cannot resolve, with
floors and starting periods that let a fit find it, and an identity that says so."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from prolas.bench.long_series import hourly_series
from prolas.data import Dataset
from prolas.errors import ProlasError
from prolas.gp import FitConfig, GPScorer, fit_gp
from prolas.pipeline import sharpened_periods
from prolas.search.cache import scorer_fingerprint
from prolas.search.config import SearchConfig, search_data, search_view
from prolas.search.journal import fingerprint
from prolas.search.view import RESOLVED_SPACINGS, WINDOW_CYCLES, build_view


@pytest.fixture(scope="module")
def hourly() -> Dataset:
    return hourly_series(20_000)


def test_a_period_the_subsample_cannot_resolve_gets_a_dense_window(hourly) -> None:
    view = build_view(hourly, 400, 2)
    # the 128-point window takes its room from the evenly spaced points, down to 3/4 of M
    assert view.evenly_spaced == 300 and view.indices.size <= 300 + 128
    assert view.spacing == pytest.approx(833.3 / 299, rel=0.01)  # 2.8 days: daily is hidden
    (window,) = view.windows
    assert window.period == pytest.approx(1.0, rel=1e-4)
    assert window.x_end - window.x_start == pytest.approx(WINDOW_CYCLES, rel=0.01)
    assert window.spacing <= 1.0 / 12  # 12 points per cycle or more
    # one data set: the evenly spaced points and the window, in x order
    ds = view.dataset
    np.testing.assert_array_equal(view.indices, np.unique(view.indices))
    assert set(hourly.spaced_indices(300)) <= set(view.indices)
    assert set(window.indices) <= set(view.indices)
    np.testing.assert_array_equal(ds.x, hourly.x[view.indices])
    assert (ds.y_mean, ds.y_std) == (hourly.y_mean, hourly.y_std)
    # floors from the window's spacing, not the union's median (the sparse points')
    assert float(np.median(np.diff(ds.x))) > 1.0
    assert ds.spacing == window.spacing and 2 * ds.spacing < 1.0
    assert ds.period_hints == (window.period,)
    assert view.hidden == ()


def test_the_windows_count_in_the_search_points() -> None:
    """M is the search's budget: at 1 000 daily points the weekly window's 56 points make
    the view exactly 400 (the evenly spaced points make room); the view measured first,
    M evenly spaced points with the window on top, is ``evenly_spaced_share=1``."""
    from prolas.bench.long_series import daily_series

    ds = daily_series(1000)
    view = build_view(ds, 400, 2)
    (window,) = view.windows
    assert window.period * 365.25 == pytest.approx(7.0, rel=1e-3) and window.n == 56
    assert view.indices.size == 400 and 300 <= view.evenly_spaced < 400
    assert set(ds.spaced_indices(view.evenly_spaced)) | set(window.indices) == set(view.indices)
    first = build_view(ds, 400, 2, evenly_spaced_share=1.0)
    assert first.evenly_spaced == 400 and first.indices.size == 400 + 56 - 22
    assert first.windows[0].n == window.n
    with pytest.raises(ValueError, match="evenly_spaced_share"):
        build_view(ds, 400, 2, evenly_spaced_share=0.0)


def test_a_period_the_fewer_evenly_spaced_points_cannot_resolve_gets_a_window_too() -> None:
    """Which periods need a window is decided on the evenly spaced points the view keeps:
    a 45-step period spans 4.5 spacings of 400 points of 4 000 (resolved) but fewer than 4
    of the ~300 left beside the window of a 12-step period, so it gets a window as well."""
    rng = np.random.default_rng(2)
    x = np.arange(4000.0)
    y = np.sin(2 * np.pi * x / 12) + np.sin(2 * np.pi * x / 45) + 0.3 * rng.normal(size=x.size)
    ds = Dataset.from_arrays(x, y)
    first = build_view(ds, 400, 2, evenly_spaced_share=1.0)
    assert [round(w.period) for w in first.windows] == [12]  # 45 > 4 spacings of 10
    view = build_view(ds, 400, 2)
    assert sorted(round(w.period) for w in view.windows) == [12, 45]
    assert view.evenly_spaced == 300 and RESOLVED_SPACINGS * view.spacing > 45
    assert view.hidden == ()


def test_without_windows_the_short_period_is_hidden_and_no_hint_goes_below_the_floor(
    hourly,
) -> None:
    view = build_view(hourly, 400, 0)
    assert view.windows == () and view.dataset.fixed_spacing is None
    assert [p.period for p in view.hidden] == [pytest.approx(1.0, rel=1e-4)]
    assert view.dataset.period_hints == ()  # the daily period is below 2Δ
    assert view.dataset.name == f"{hourly.name} (thinned to 400 of 20000)"
    np.testing.assert_array_equal(view.dataset.x, hourly.thinned(400).x)


def test_a_period_the_subsample_resolves_is_a_starting_period_only() -> None:
    rng = np.random.default_rng(0)
    x = np.linspace(2000.0, 2008.0, 1000)
    ds = Dataset.from_arrays(x, np.sin(2 * np.pi * x) + 0.2 * rng.normal(size=x.size))
    view = build_view(ds, 100, 2)
    assert view.spacing * RESOLVED_SPACINGS < 1.0  # 12 points per year
    assert view.windows == () and view.hidden == ()
    assert view.dataset.period_hints == (pytest.approx(1.0, rel=1e-3),)
    assert view.dataset.n == 100


def test_the_view_is_made_once_and_is_what_the_search_fits(hourly) -> None:
    config = SearchConfig(search_points=400)
    assert search_view(hourly, config) is search_view(hourly, config)
    assert search_data(hourly, config) is search_view(hourly, config).dataset
    assert search_view(hourly, config.replace(search_windows=0)).windows == ()
    assert search_view(hourly, config.replace(search_points=0)) is None
    assert search_data(hourly, config.replace(search_points=0)) is hourly


def test_the_view_s_floor_and_starting_period_let_a_fit_find_the_hidden_period() -> None:
    """A daily cycle alone: on the evenly spaced points no fit can have it (its floor is
    4.2 days); on the view a PER fit finds it, sharpened to the planted period."""
    rng = np.random.default_rng(3)
    x = np.arange(20_000) / 24.0
    ds = Dataset.from_arrays(x, np.sin(2 * np.pi * x) + 0.3 * rng.normal(size=x.size))
    view = build_view(ds, 400, 2).dataset
    fit = fit_gp("PER", view, FitConfig(restarts=2))
    assert fit.period() == pytest.approx(1.0, rel=1e-3)
    plain = fit_gp("PER", ds.thinned(400), FitConfig(restarts=2))
    assert plain.period() >= 2 * ds.thinned(400).spacing > 4.0


def test_the_view_is_part_of_the_fit_identity(hourly) -> None:
    """Floors and starting periods decide a fit: caches and journals tell a view from the
    same points without them (and an ordinary data set keeps its old fingerprint)."""
    view = build_view(hourly, 400, 2).dataset
    bare = hourly.take(build_view(hourly, 400, 2).indices, "bare")
    assert bare.fit_identity() == {}
    assert set(view.fit_identity()) == {"fixed_spacing", "period_hints"}
    config = FitConfig(restarts=1)
    assert scorer_fingerprint(GPScorer(view, config)) != scorer_fingerprint(GPScorer(bare, config))
    with_windows = fingerprint(hourly, SearchConfig(method="cks"))
    without = fingerprint(hourly, SearchConfig(method="cks", search_windows=0))
    assert with_windows["search_view"] == view.fit_identity()
    assert "search_view" not in without and without != with_windows


def test_search_windows_must_be_a_count() -> None:
    with pytest.raises(ProlasError, match="\\(--search-windows\\) must be 0"):
        SearchConfig(search_windows=-1)
    with pytest.raises(ProlasError, match="\\(--search-windows\\) must be an integer"):
        SearchConfig(search_windows=1.5)


def test_sharpened_periods_move_a_coarse_period_to_the_full_series_peak(hourly) -> None:
    view = build_view(hourly, 400, 2).dataset
    coarse = fit_gp("PER", view, FitConfig(restarts=1))
    nudged = coarse.terms[0].factors[0]
    far_off = {**nudged.params, "period": 1.05}  # what a window of 8 cycles may give
    off = replace(
        coarse,
        terms=(replace(coarse.terms[0], factors=(replace(nudged, params=far_off),)),),
    )
    sharp = sharpened_periods(off, hourly)
    assert sharp is not None and sharp.period() == pytest.approx(1.0, rel=1e-5)
    assert sharp.terms[0].variance == off.terms[0].variance  # only the period moves
    too_far = {**nudged.params, "period": 1.3}  # no significant period within 10 %
    unrelated = replace(
        coarse, terms=(replace(coarse.terms[0], factors=(replace(nudged, params=too_far),)),)
    )
    assert sharpened_periods(unrelated, hourly) is None


def test_a_view_s_periods_come_first_in_the_candidates_starts_and_hops() -> None:
    """The hints lead ``candidate_periods`` (the points' own candidates within 5 % of one
    are dropped), are part of its cache key, start restarts unjittered, and are scanned by
    the hop; without hints the candidates are the periodogram's, as on any data set."""
    from prolas.expr import parse
    from prolas.gp.fit import _hop_moves
    from prolas.gp.gram import GramModel
    from prolas.gp.starts import candidate_periods, initial_thetas, periodogram_candidates

    rng = np.random.default_rng(5)
    t = np.linspace(0.0, 1.0, 300)
    y = np.sin(2 * np.pi * t / 0.1) + 0.3 * rng.normal(size=t.size)
    plain = candidate_periods(t, y, 0.01)
    np.testing.assert_array_equal(plain, periodogram_candidates(t, y, 0.01))
    assert plain[0] == pytest.approx(0.1, rel=0.02)
    hinted = candidate_periods(t, y, 0.01, hints=(0.0999, 0.005, 0.37))
    assert list(hinted[:2]) == [0.0999, 0.37]  # in their order, none below the floor
    own = [p for p in plain if all(abs(p / h - 1) > 0.05 for h in (0.0999, 0.37))]
    np.testing.assert_array_equal(hinted[2:], own)
    # another view of the same points, other hints: not the first view's entry
    assert candidate_periods(t, y, 0.01, hints=(0.2,))[0] == 0.2
    np.testing.assert_array_equal(candidate_periods(t, y, 0.01), plain)

    model = GramModel(parse("PER"), t, 0.01)
    k = next(i for i, p in enumerate(model.params) if p.name == "period")
    starts = initial_thetas(model, y, 0.01, (1, 0), 8, (0.37,))
    assert np.exp(starts[0::2, k]) == pytest.approx(0.37, rel=1e-12)  # no jitter
    bare = initial_thetas(model, y, 0.01, (1, 0), 8)
    assert not np.any(np.isclose(np.exp(bare[:, k]), 0.37, rtol=1e-3))
    # the other parameters draw from their own streams, untouched by the hints
    np.testing.assert_array_equal(np.delete(starts, k, 1), np.delete(bare, k, 1))
    scanned = {
        round(float(np.exp(th[k])), 12)
        for i, th in _hop_moves(model, bare[0], y, (0.37,))
        if i == k
    }
    assert 0.37 in scanned
