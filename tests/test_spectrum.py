"""The whole series' periodogram (prolas.spectrum): planted periods are found and
sharpened, noise and trends are not periods, harmonics are attributed to their
fundamental, uneven inputs are resampled."""

from __future__ import annotations

import numpy as np
import pytest

from prolas.bench.long_series import hourly_week_series
from prolas.data import Dataset
from prolas.spectrum import (
    FALSE_ALARM,
    MAX_HARMONIC,
    MIN_SCAN_POINTS,
    explains,
    scan,
    scan_dataset,
)


def _hourly(n: int, seed: int = 0, daily: float = 1.0, yearly: float = 2.0) -> tuple:
    rng = np.random.default_rng(seed)
    x = np.arange(n) / 24.0  # days
    y = daily * np.sin(2 * np.pi * x) + yearly * np.sin(2 * np.pi * x / 365.25)
    return x, y + 0.5 * rng.standard_normal(n)


def test_planted_daily_and_weekly_periods_are_found_and_sharpened() -> None:
    rng = np.random.default_rng(1)
    x = np.arange(30_000) / 24.0
    y = np.sin(2 * np.pi * x) + 0.6 * np.sin(2 * np.pi * x / 7.0) + 0.5 * rng.normal(size=x.size)
    spectrum = scan(x, y)
    periods = sorted(p.period for p in spectrum.fundamentals)
    assert periods == [pytest.approx(1.0, rel=1e-4), pytest.approx(7.0, rel=1e-3)]
    daily = next(p for p in spectrum.peaks if abs(p.period - 1.0) < 0.01)
    assert daily.amplitude == pytest.approx(1.0, rel=0.05)
    # the share of the variance about the trend line: 0.5 of (0.5 + 0.18 + 0.25)
    assert daily.share == pytest.approx(0.5 / 0.93, abs=0.05)
    assert spectrum.peaks[0] is daily  # the largest share first


@pytest.mark.parametrize("seed", range(5))
def test_white_noise_shows_no_period(seed: int) -> None:
    """Under the null the scan's false-alarm probability is FALSE_ALARM (1 %)."""
    rng = np.random.default_rng(seed)
    assert scan(np.arange(20_000.0), rng.normal(size=20_000)).peaks == ()


def test_a_trend_and_a_random_walk_are_not_periods() -> None:
    rng = np.random.default_rng(3)
    x = np.arange(10_000.0)
    walk = np.cumsum(rng.normal(size=x.size))
    assert scan(x, walk + 0.001 * x**2).peaks == ()


@pytest.mark.parametrize("seed", range(4))
def test_a_smooth_random_component_is_not_a_period(seed: int) -> None:
    """A year of hourly values with a daily and a weekly cycle and a smooth component of
    lengthscale 20 days: only the two cycles are periods. (A background made of 16-bin
    band medians alone called the smooth component's steep low-frequency spectrum a
    period of 80-112 days in three of these four series.)"""
    ds = hourly_week_series(8_760, seed)
    found = sorted(p.period for p in scan(ds.x, ds.y).fundamentals)
    assert found == [pytest.approx(1.0, rel=1e-3), pytest.approx(7.0, rel=1e-3)]


def test_a_non_sinusoidal_cycle_has_its_harmonics_attributed_to_it() -> None:
    rng = np.random.default_rng(4)
    x = np.arange(8_000.0)
    square = np.sign(np.sin(2 * np.pi * x / 50.0))  # odd harmonics 50/3, 50/5, ...
    spectrum = scan(x, square + 0.2 * rng.normal(size=x.size))
    assert [p.period for p in spectrum.fundamentals] == [pytest.approx(50.0, rel=1e-3)]
    harmonics = sorted((p.period for p in spectrum.peaks if p.harmonic_of), reverse=True)
    assert harmonics and harmonics[0] == pytest.approx(50.0 / 3, rel=1e-3)
    assert all(p.harmonic_of == spectrum.fundamentals[0].period for p in spectrum.peaks[1:])


def test_uneven_inputs_are_resampled_and_the_period_found() -> None:
    rng = np.random.default_rng(5)
    x = np.sort(rng.uniform(0.0, 400.0, 6_000))
    x = x[(x < 150) | (x > 180)]  # a gap
    y = 2.0 * np.sin(2 * np.pi * x / 9.5) + 0.3 * rng.normal(size=x.size)
    spectrum = scan(x, y)
    assert spectrum.resampled
    assert [p.period for p in spectrum.fundamentals] == [pytest.approx(9.5, rel=1e-3)]


def test_too_few_cycles_or_points_are_not_scanned() -> None:
    x, y = _hourly(20_000)  # 2.28 years: the yearly cycle repeats too few times
    found = [p.period for p in scan(x, y).peaks]
    assert found == [pytest.approx(1.0, rel=1e-4)]
    short = scan(np.arange(MIN_SCAN_POINTS - 1.0), np.sin(np.arange(MIN_SCAN_POINTS - 1.0)))
    assert short.peaks == () and short.tested == 0


def test_scan_dataset_is_made_once_per_dataset() -> None:
    x, y = _hourly(2_000)
    ds = Dataset.from_arrays(x, y)
    assert scan_dataset(ds) is scan_dataset(ds)
    assert scan_dataset(ds).threshold == pytest.approx(
        np.log(scan_dataset(ds).tested / FALSE_ALARM), rel=0.01
    )


@pytest.mark.parametrize(
    "model, period, expected",
    [
        (1.0, 1.0, True),
        (1.015, 1.0, True),  # within 2 %
        (1.03, 1.0, False),
        (2.0, 1.0, True),  # a period of 2 repeats a cycle of 1
        (0.5, 1.0, False),  # but not the other way round
        (3.27, 1.0, False),
        (365.25, 1.0, False),  # beyond the harmonics a periodic kernel is said to repeat
        (float(MAX_HARMONIC), 1.0, True),
    ],
)
def test_explains(model: float, period: float, expected: bool) -> None:
    assert explains(model, period, 0.02) is expected
