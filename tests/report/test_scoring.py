"""Forecast scores (prolas.report.scoring) against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy.special import ndtr, ndtri

from prolas.report.forecast import Forecast
from prolas.report.scoring import (
    INTERVAL_LEVELS,
    QUANTILE_LEVELS,
    Predictive,
    ScoringError,
    coverage,
    crps_gaussian,
    crps_gaussian_mixture,
    crps_quantiles,
    forecast_predictive,
    interval_score,
    mase,
    rmse,
    score_forecast,
    seasonal_naive_scale,
    smape,
)

Y = np.array([1.0, 2.0, 3.0, 4.0])
F = np.array([1.0, 3.0, 2.0, 6.0])  # errors 0, 1, -1, 2
LOWER = np.array([0.0, 2.5, 2.5, 3.0])
UPPER = np.array([2.0, 3.5, 3.5, 3.5])  # y = 2 is 0.5 below, y = 4 is 0.5 above
#: 12 months, then two more: seasonal differences |13 - 10| = 3 and |25 - 20| = 5
TRAIN = np.array([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 13, 25], dtype=float)


def test_point_scores_by_hand() -> None:
    assert rmse(Y, F) == pytest.approx(math.sqrt(6 / 4))
    # 200|y - f| / (|y| + |f|): 0, 200/5, 200/5, 400/10
    assert smape(Y, F) == pytest.approx(30.0)
    assert smape([0.0, 1.0], [0.0, 1.0]) == 0.0  # y = f = 0 counts 0, not NaN
    assert seasonal_naive_scale(TRAIN, 12) == pytest.approx(4.0)
    assert mase(Y, F, 4.0) == pytest.approx(1.0 / 4.0)  # mean |error| = 1
    # m = 1: the naive forecast's in-sample error
    assert seasonal_naive_scale([1.0, 3.0, 2.0], 1) == pytest.approx(1.5)


def test_scale_is_nan_when_undefined() -> None:
    assert math.isnan(seasonal_naive_scale(TRAIN[:12], 12))  # no point has a lag-12 value
    assert math.isnan(seasonal_naive_scale(np.tile([1.0, 2.0], 13), 2))  # exact repeats
    with pytest.raises(ScoringError):
        seasonal_naive_scale(TRAIN, 0)


def test_interval_scores_by_hand() -> None:
    assert coverage(Y, LOWER, UPPER) == 0.5
    # widths 2 + 1 + 1 + 0.5, penalties (2 / 0.05) 0.5 twice = 40; mean over 4 points
    assert interval_score(Y, LOWER, UPPER) == pytest.approx((4.5 + 40.0) / 4)
    assert interval_score(Y, Y - 1, Y + 1) == pytest.approx(2.0)  # all inside: the width


def _crps_by_integration(cdf, y: float, lo: float, hi: float) -> float:
    left = integrate.quad(lambda v: cdf(v) ** 2, lo, y, limit=200)[0]
    right = integrate.quad(lambda v: (1 - cdf(v)) ** 2, y, hi, limit=200)[0]
    return left + right


def test_crps_gaussian_closed_form() -> None:
    # at the mean: sigma (2 phi(0) - 1/sqrt(pi)) = sigma (sqrt(2/pi) - 1/sqrt(pi))
    hand = 2.0 * (math.sqrt(2 / math.pi) - 1 / math.sqrt(math.pi))
    assert crps_gaussian(np.array([3.0]), 3.0, 2.0)[0] == pytest.approx(hand, rel=1e-12)
    for y in (-1.0, 0.7, 4.0):
        numeric = _crps_by_integration(lambda v: ndtr((v - 0.5) / 1.5), y, -30, 30)
        assert crps_gaussian(np.array([y]), 0.5, 1.5)[0] == pytest.approx(numeric, rel=1e-7)


def test_crps_mixture_closed_form() -> None:
    means, sds, w = np.array([[0.0], [3.0]]), np.array([[1.0], [0.5]]), [0.3, 0.7]

    def cdf(v):
        return w[0] * ndtr((v - 0.0) / 1.0) + w[1] * ndtr((v - 3.0) / 0.5)

    for y in (-2.0, 1.0, 2.9, 6.0):
        numeric = _crps_by_integration(cdf, y, -30, 30)
        got = crps_gaussian_mixture(np.array([y]), means, sds, w)[0]
        assert got == pytest.approx(numeric, rel=1e-7)
    # one component is the Gaussian
    one = crps_gaussian_mixture(np.array([1.0]), [[0.2]], [[0.8]], [1.0])[0]
    assert one == pytest.approx(crps_gaussian(np.array([1.0]), 0.2, 0.8)[0], rel=1e-12)


def test_quantile_crps_within_a_tenth_of_a_percent_of_the_closed_form() -> None:
    """The documented tolerance: 100 midpoint quantiles, |y - mu| up to 10 sigma."""
    q = 2.0 + 3.0 * ndtri(QUANTILE_LEVELS)
    for y in (2.0, 0.5, 5.0, 11.0, -28.0):
        approx = crps_quantiles(np.array([y]), q[None, :])[0]
        exact = crps_gaussian(np.array([y]), 2.0, 3.0)[0]
        assert approx == pytest.approx(exact, rel=1e-3)
    # crossing quantiles are sorted first: a shuffled row scores the same
    shuffled = np.random.default_rng(0).permutation(q)
    assert crps_quantiles(np.array([1.0]), shuffled[None, :])[0] == pytest.approx(
        crps_quantiles(np.array([1.0]), q[None, :])[0]
    )


def test_interval_levels_are_the_ends_of_the_quantile_levels() -> None:
    ends = sorted(
        [(1 - L / 100) / 2 for L in INTERVAL_LEVELS] + [(1 + L / 100) / 2 for L in INTERVAL_LEVELS]
    )
    np.testing.assert_allclose(ends, QUANTILE_LEVELS)


def test_score_forecast_and_the_mixture_predictive() -> None:
    """A one-component Forecast scored through its quantiles agrees with the closed forms."""
    mean, sd = np.array([1.0, 2.5, 2.0, 3.0]), np.array([0.5, 0.5, 1.0, 2.0])
    fc = Forecast(
        x=np.arange(4.0),
        x_display=np.arange(4.0),
        mean=mean,
        lower=mean - 1.959963984540054 * sd,
        upper=mean + 1.959963984540054 * sd,
        level=0.95,
        method="best",
        models=("SE",),
        weights=(1.0,),
        component_means=mean[None, :],
        component_sds=sd[None, :],
    )
    pred = forecast_predictive(fc)
    np.testing.assert_allclose(pred.quantiles[:, 0], mean + sd * ndtri(0.005), rtol=1e-9)
    s = score_forecast(Y, pred, scale=4.0)
    assert s["rmse"] == pytest.approx(rmse(Y, mean))
    assert s["mase"] == pytest.approx(np.mean(np.abs(Y - mean)) / 4.0)
    assert s["interval_score_scaled"] == pytest.approx(s["interval_score"] / 4.0)
    exact = np.mean(crps_gaussian(Y, mean, sd))
    assert s["crps"] == pytest.approx(exact, rel=1e-3)
    assert s["crps_scaled"] == pytest.approx(s["crps"] / 4.0)
    assert math.isnan(score_forecast(Y, pred, scale=math.nan)["mase"])


def test_bad_predictives_are_one_line_errors() -> None:
    q = np.zeros((4, QUANTILE_LEVELS.size))
    with pytest.raises(ScoringError, match="non-finite"):
        Predictive(np.array([1.0, np.nan, 0, 0]), np.zeros(4), np.zeros(4), q)
    with pytest.raises(ScoringError, match="shape"):
        Predictive(np.zeros(4), np.zeros(3), np.zeros(4), q)
    with pytest.raises(ScoringError, match="one length"):
        rmse([1.0, 2.0], [1.0])
