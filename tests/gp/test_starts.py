"""Where a cold fit starts and hops to: the periodogram's candidate periods and the
single-parameter moves of the basin hops (prolas.gp.starts, prolas.gp.fit)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import DATA
from scipy.signal import lombscargle

from prolas.bench.cells import load_series, thin
from prolas.expr import parse
from prolas.gp.fit import _hop_moves
from prolas.gp.gram import GramModel
from prolas.gp.starts import (
    candidate_periods,
    candidate_windows,
    initial_thetas,
    lomb_scargle,
    parameter_keys,
)


def test_lomb_scargle_equals_scipys() -> None:
    rng = np.random.default_rng(3)
    t = np.sort(rng.uniform(0.0, 7.0, 150))  # irregular
    y = np.sin(2 * np.pi * t / 0.7) + rng.normal(0.0, 0.5, t.size)
    y -= y.mean()
    freqs = np.geomspace(0.1, 40.0, 700)
    expected = lombscargle(t, y, 2 * np.pi * freqs)
    np.testing.assert_allclose(lomb_scargle(t, y, freqs), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("series", ["airline", "gas-production", "mauna", "sulphuric"])
def test_the_year_is_the_first_candidate_of_monthly_seasonal_series(series: str) -> None:
    """Slow cycles carry more power than the seasonal line on these series (ranked by power
    alone, the year came third or lower); the harmonic score puts the year first, refined
    to a fraction of a percent."""
    ds = thin(load_series(DATA / f"{series}_train.csv"), 400)
    t = (ds.x - ds.x[0]) / ds.span
    first = candidate_periods(t, ds.y_standardised, 2 * ds.spacing / ds.span)[0] * ds.span
    assert first == pytest.approx(1.0, rel=0.005)


def test_a_planted_non_sinusoidal_period_is_found_to_a_fraction_of_the_resolution() -> None:
    """A sawtooth of period 1.37 (its harmonics carry a third of its power) under a trend
    and a slower, stronger cycle: the first candidate is the sawtooth's period."""
    rng = np.random.default_rng(5)
    t = np.linspace(0.0, 20.0, 400)
    y = (
        0.2 * t
        + 2.0 * np.sin(2 * np.pi * t / 7.3)
        + ((t / 1.37) % 1.0 - 0.5)
        + rng.normal(0.0, 0.2, t.size)
    )
    periods = candidate_periods(t / 20.0, y, 2 * (t[1] - t[0]) / 20.0) * 20.0
    # the periodogram resolves 1/span in frequency, 7 % here; the refined peak is within 0.3 %
    assert periods[0] == pytest.approx(1.37, rel=3e-3)
    assert any(abs(p / 7.3 - 1) < 0.05 for p in periods[:6])  # the slow cycle is a candidate


def test_a_sinusoid_in_part_of_the_data_ranks_first_not_its_aliases_or_subharmonics() -> None:
    """A sine of period 1 over the last third of 150 evenly spaced points: its window's
    side lobes and its alias above the Nyquist frequency once summed, as "harmonics", to
    a subharmonic (period 4) or an alias (0.11) ranked above it."""
    rng = np.random.default_rng(0)
    x = np.linspace(1960.0, 1975.0, 150)
    y = np.where(x > 1970.0, np.sin(2 * np.pi * x), 0.0) + 0.05 * rng.normal(size=150)
    spacing = x[1] - x[0]
    periods = candidate_periods(x, (y - y.mean()) / y.std(), spacing)
    assert periods[0] == pytest.approx(1.0, rel=0.01)
    assert periods.min() >= 2 * spacing * 0.999  # nothing above the Nyquist frequency


@pytest.mark.parametrize("n", [3, 4, 5, 8])
def test_a_handful_of_points_gets_finite_candidate_periods(n: int) -> None:
    """Below an octave between 1/span and the Nyquist frequency there is no periodogram to
    rank (its filters' widths would be unbounded): the grid alone."""
    t = np.linspace(0.0, 1.0, n)
    periods = candidate_periods(t, np.sin(7 * t) + t, 1.0 / (n - 1))
    assert periods.size >= 6 and np.all(np.isfinite(periods)) and np.all(periods > 0)


def test_candidate_periods_are_remembered_as_copies() -> None:
    t = np.linspace(0.0, 1.0, 100)
    y = np.sin(2 * np.pi * t * 9) + np.random.default_rng(2).normal(0.0, 0.3, t.size)
    first = candidate_periods(t, y, 0.02)
    first[:] = -1.0  # a caller's change does not reach the remembered candidates
    again = candidate_periods(t, y, 0.02)
    assert np.all(again > 0) and again[0] == pytest.approx(1 / 9, rel=1e-3)


def test_hop_moves_keep_a_lin_terms_size_and_stay_in_the_box() -> None:
    """A LIN offset moved from c to c' rescales its term's variance by
    mean((t - c)^2) / mean((t - c')^2); every move changes one parameter (two for an
    offset) and stays inside the box."""
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 1, 60))
    y = 2 * t + np.sin(2 * np.pi * t * 6) + rng.normal(0, 0.1, t.size)
    y = (y - y.mean()) / y.std()
    model = GramModel(parse("LIN*SE + CP(PER, RQ)"), t, 2 / 59, 1 / 59)
    theta = initial_thetas(model, y, 2 / 59, (1,), 1)[0]
    lo, hi = np.array(model.bounds).T
    moves = _hop_moves(model, theta, y)
    kinds = {model.params[k].name for k, _ in moves}
    assert {"offset", "period", "lengthscale", "location", "alpha", "noise"} <= kinds
    for k, th in moves:
        changed = set(np.flatnonzero(th != theta))
        assert np.all(th >= lo) and np.all(th <= hi)
        p = model.params[k]
        if p.name != "offset":
            assert changed == {k}
            continue
        (v,) = [j for j, q in enumerate(model.params) if q.term == p.term and q.name == "variance"]
        assert changed <= {k, v}
        before = math.exp(theta[v]) * np.mean((t - theta[k]) ** 2)
        after = math.exp(th[v]) * np.mean((t - th[k]) ** 2)
        if lo[v] < th[v] < hi[v]:
            assert after == pytest.approx(before, rel=1e-12)


def _window_series(kind: str, a: float, b: float, n: int = 300, seed: int = 0):
    """``n`` points on [0, 1] with another regime inside ``[a, b]``: a quiet stretch
    (noise 1 outside, 0.1 inside), or a level shift of 2 (noise 0.2)."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, n)
    inside = (t >= a) & (t < b)
    if kind == "quiet":
        y = rng.normal(0.0, 1.0, n) * np.where(inside, 0.1, 1.0)
    else:
        y = rng.normal(0.0, 0.2, n) + np.where(inside, 2.0, 0.0)
    return t, y


@pytest.mark.parametrize(
    ("kind", "a", "b"),
    [("quiet", 0.3, 0.55), ("quiet", 0.1, 0.4), ("level", 0.6, 0.8), ("level", 0.12, 0.3)],
)
def test_a_planted_window_is_the_first_candidate(kind: str, a: float, b: float) -> None:
    """A stretch of another regime, quieter or at another level, is the best candidate
    window to within one grid step (0.0225 spans) at both ends, also when it starts near
    the data's beginning, where a two-piece break scan ranks the window's end first."""
    t, y = _window_series(kind, a, b)
    (start, end), *rest = candidate_windows(t, y)
    assert start == pytest.approx(a, abs=0.0225) and end == pytest.approx(b, abs=0.0225)
    assert all(lo < hi for lo, hi in rest)


def test_candidate_windows_are_affine_equivariant_and_apart() -> None:
    """Moving and scaling t moves and scales the windows; rescaling y leaves them; the
    windows are distinct at one end or the other by at least four grid steps."""
    t, y = _window_series("quiet", 0.3, 0.55, seed=4)
    windows = candidate_windows(t, y)
    moved = candidate_windows(5.0 * t + 1900.0, 3.0 * y - 7.0)
    np.testing.assert_allclose(moved, 5.0 * windows + 1900.0, rtol=1e-12)
    assert len(windows) == 4 and np.all(windows[:, 0] < windows[:, 1])
    step = 0.9 / 40
    for i in range(len(windows)):
        for j in range(i):
            assert np.max(np.abs(windows[i] - windows[j])) >= 4 * step - 1e-9


@pytest.mark.parametrize("n", [3, 8, 30])
def test_a_handful_of_points_gets_a_finite_window(n: int) -> None:
    t = np.linspace(0.0, 1.0, n)
    windows = candidate_windows(t, np.sin(7.0 * t))
    assert windows.shape[1] == 2 and np.all(np.isfinite(windows))
    assert np.all((windows >= 0.0) & (windows <= 1.0)) and np.all(windows[:, 0] < windows[:, 1])


def test_change_window_restarts_and_hops_start_at_the_candidate_windows() -> None:
    """Half a window's restarts start at the candidate windows (start and end, cycled, a
    little jitter); the hops move start and end together to each candidate window."""
    t, y = _window_series("quiet", 0.3, 0.55, n=120)
    model = GramModel(parse("CW(SE, C)"), t, 2 / 119, 1 / 119)
    k_start, k_end = (
        next(k for k, p in enumerate(model.params) if p.name == name) for name in ("start", "end")
    )
    windows = candidate_windows(t, y)
    theta = initial_thetas(model, y, 2 / 119, (3,), 8)
    idx = np.arange(8)[0::2] // 2 % len(windows)
    np.testing.assert_allclose(theta[0::2, k_start], windows[idx, 0], atol=0.05)
    np.testing.assert_allclose(theta[0::2, k_end], windows[idx, 1], atol=0.05)
    assert np.all(theta[:, k_end] > theta[:, k_start])
    far = theta[0].copy()
    far[k_start], far[k_end] = 1.2, 1.24  # a window beyond the data: a nested start
    joint = [th for k, th in _hop_moves(model, far, y) if k == k_start and th[k_end] != far[k_end]]
    np.testing.assert_allclose(np.array([[th[k_start], th[k_end]] for th in joint]), windows)


@pytest.mark.parametrize(
    ("larger", "smaller"),
    [("C + PER*PER", "PER*PER"), ("LIN*SE + PER", "PER"), ("CP(LIN, SE) + C", "CP(LIN, SE)")],
)
def test_nested_models_start_their_shared_parameters_alike(larger: str, smaller: str) -> None:
    """Common random numbers: a parameter both expressions have (same name, parameter_keys)
    starts at the same values in both; a term's variance up to the 1/#terms scaling."""
    t = np.linspace(0.0, 1.0, 50)
    y = np.sin(2 * np.pi * 7 * t) + t
    big = GramModel(parse(larger), t, 0.04)
    small = GramModel(parse(smaller), t, 0.04)
    a = initial_thetas(big, y, 0.04, (3, 0), 16)
    b = initial_thetas(small, y, 0.04, (3, 0), 16)
    keys_a, keys_b = parameter_keys(big), parameter_keys(small)
    assert len(set(keys_a)) == len(keys_a) and set(keys_b) <= set(keys_a)
    shift = math.log(len(big.terms) / len(small.terms))
    for j, key in enumerate(keys_b):
        col = a[:, keys_a.index(key)]
        if key.endswith("/variance"):
            np.testing.assert_allclose(col, b[:, j] - shift, rtol=0, atol=1e-12)
        else:
            np.testing.assert_array_equal(col, b[:, j])
    # another fit seed draws other values
    assert not np.array_equal(initial_thetas(small, y, 0.04, (4, 0), 16), b)


def test_parameter_keys_are_unique_and_name_what_they_are() -> None:
    model = GramModel(parse("CP(PER*PER, SE) + CW(LIN, C) + LIN*SE"), np.linspace(0, 1, 9), 0.2)
    keys = parameter_keys(model)
    assert len(set(keys)) == len(keys) == model.size
    assert "CP#0/location" in keys and "CW#0/start" in keys and keys[-1] == "noise"
    assert {"CP_BEFORE*PER*PER#0/PER#0/period", "CP_BEFORE*PER*PER#0/PER#1/period"} <= set(keys)


def test_term_twins_are_the_best_draws_with_one_term_switched_off() -> None:
    """``FitConfig.term_twins``: per additive term, the draws of highest likelihood with
    that term's variance at its lower bound (the sub-model without it); none for one term.
    The option is off by default and then absent from the fit's key (old caches match)."""
    from prolas.gp import FitConfig
    from prolas.gp.fit import _term_twins
    from prolas.gp.minimise import log_likelihood_at

    t = np.linspace(0.0, 1.0, 60)
    y = np.sin(2 * np.pi * 6 * t) + 0.5
    y = (y - y.mean()) / y.std()
    model = GramModel(parse("C + PER*SE + LIN"), t, 0.04)
    draws = initial_thetas(model, y, 0.04, (0, 0), 16)
    variances = [k for k, p in enumerate(model.params) if p.name == "variance"]
    twins = _term_twins(model, draws, model, y, 2, None)
    assert twins.shape == (2 * len(variances), model.size)
    for i, v in enumerate(variances):
        off = np.array(draws)
        off[:, v] = model.params[v].lower
        lls = [log_likelihood_at(model, th, y) for th in off]
        for row, j in zip(twins[2 * i : 2 * i + 2], np.argsort(lls)[::-1][:2]):
            np.testing.assert_array_equal(row, off[j])  # the two best, best first
    single = GramModel(parse("PER*SE"), t, 0.04)
    assert _term_twins(
        single, initial_thetas(single, y, 0.04, (0, 0), 8), single, y, 1, None
    ).shape == (0, single.size)
    assert (
        "term_twins" not in FitConfig().key() and FitConfig(term_twins=1).key()["term_twins"] == 1
    )
