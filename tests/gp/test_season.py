"""A period held at the season (``FitConfig.season``): the layout's box, the fit, its
parameter count and BIC, the refit that keeps it, and the season read from the data."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from prolas.data import Dataset, timestamps_to_decimal_years
from prolas.errors import ProlasError
from prolas.expr import parse
from prolas.gp import FitConfig, fit_gp
from prolas.gp.gram import GramModel, parameter_layout
from prolas.report.forecast import _refit, season_period


def seasonal(n: int = 48, seed: int = 0) -> Dataset:
    """Monthly points (x in years): a trend, a yearly cycle and noise."""
    rng = np.random.default_rng(seed)
    x = 2000 + np.arange(n) / 12
    y = 0.5 * (x - 2000) + np.sin(2 * np.pi * x) + 0.2 * rng.standard_normal(n)
    return Dataset.from_arrays(x, y, name="seasonal")


def test_the_layout_holds_every_period_and_nothing_else() -> None:
    terms = tuple(tuple(t) for t in parse("LIN + PER*SE + PER").terms)
    free = parameter_layout(terms, 0.05, 0.01)
    held = parameter_layout(terms, 0.05, 0.01, fixed_period=0.25)
    assert len(free) == len(held)
    periods = [k for k, p in enumerate(free) if p.name == "period"]
    assert len(periods) == 2
    for k, (a, b) in enumerate(zip(free, held)):
        if k in periods:
            assert b.lower == b.upper == math.log(0.25)
        else:
            assert (a.lower, a.upper) == (b.lower, b.upper)
    model = GramModel(parse("LIN + PER + SE"), np.linspace(0, 1, 20), 0.05, 0.0, 0.25)
    assert model.fixed_period == 0.25
    theta = model.clip(np.zeros(model.size))
    k = next(i for i, p in enumerate(model.params) if p.name == "period")
    assert theta[k] == math.log(0.25)  # a start outside the box lands on the season


def test_a_fit_with_a_season_holds_its_period_and_counts_one_parameter_fewer() -> None:
    data = seasonal()
    free = fit_gp("LIN + PER + SE", data, FitConfig(restarts=4, seed=0))
    held = fit_gp("LIN + PER + SE", data, FitConfig(restarts=4, seed=0, season=1.0))
    assert held.ok and free.ok
    assert held.period("PER") == pytest.approx(1.0, rel=1e-12)
    assert held.season == 1.0 and free.season == 0.0
    assert held.n_params == free.n_params - 1 == parse("LIN + PER + SE").n_params - 1
    assert held.bic == pytest.approx(held.log_likelihood - held.n_params / 2 * math.log(data.n))
    # the planted cycle is yearly: the free fit finds it, and holding it costs little
    assert free.period("PER") == pytest.approx(1.0, rel=0.02)
    assert held.log_likelihood == pytest.approx(free.log_likelihood, abs=2.0)
    # the free model contains the held one: a free fit from the held optimum ends at or
    # above it (the period may move off the season by a little)
    freed = fit_gp("LIN + PER + SE", data, FitConfig(restarts=1), init=held, cold=False)
    assert freed.season == 0.0 and freed.n_params == free.n_params
    assert freed.log_likelihood >= held.log_likelihood - 1e-6
    # a model without a period is fitted as without a season
    se = fit_gp("LIN + SE", data, FitConfig(restarts=2, seed=0, season=1.0))
    plain = fit_gp("LIN + SE", data, FitConfig(restarts=2, seed=0))
    assert se.log_likelihood == plain.log_likelihood and se.n_params == plain.n_params
    assert se.season == 0.0


def test_a_season_shorter_than_two_steps_is_a_failed_fit_and_a_bad_one_an_error() -> None:
    data = seasonal()
    fit = fit_gp("LIN + PER", data, FitConfig(restarts=2, season=0.1))  # 1.2 steps
    assert not fit.ok and "season 0.1 below two steps" in fit.error
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(ProlasError, match="season must be a finite number >= 0"):
            FitConfig(season=bad)
    assert "season" not in FitConfig().key()  # cache keys written before it stay valid
    assert FitConfig(season=1.0).key()["season"] == 1.0


def test_the_forecast_bands_refit_keeps_the_season() -> None:
    data = seasonal(60)
    held = fit_gp("LIN + PER + SE", data, FitConfig(restarts=2, seed=1, season=1.0))
    prefix = data.take(np.arange(45), "prefix")
    again = _refit(held, prefix)
    assert again.ok and again is not held and again.n == 45
    assert again.period("PER") == pytest.approx(1.0, rel=1e-12) and again.season == 1.0


def test_the_season_from_the_calendar_or_the_given_length() -> None:
    def dated(freq: str, n: int = 40) -> Dataset:
        dates = pd.Series(pd.date_range("2001-01-01", periods=n, freq=freq))
        x = timestamps_to_decimal_years(dates)
        return Dataset.from_arrays(x, np.sin(np.arange(n)), x_is_date=True)

    monthly, quarterly, month_ends = dated("MS"), dated("QS"), dated("ME")
    daily, weekly = dated("D"), dated("W")
    assert monthly.x_is_date
    for ds in (monthly, quarterly, month_ends):
        assert season_period(ds) == 1.0  # one year: x is in decimal years
    for ds in (daily, weekly):
        assert season_period(ds) == 0.0  # no yearly season the calendar implies
    assert season_period(monthly, 0) == season_period(monthly, 1) == 0.0
    undated = Dataset.from_arrays(np.arange(40.0), np.sin(np.arange(40.0)))
    assert season_period(undated) == 0.0
    assert season_period(undated, 12) == 12.0
    # dates a month apart: m months exactly, not m median spacings (31/365 of a year)
    assert monthly.spacing != pytest.approx(1 / 12, rel=1e-3)
    assert season_period(monthly, 12) == 1.0 and season_period(monthly, 6) == 0.5
    assert season_period(quarterly, 4) == 1.0
    assert season_period(daily, 7) == pytest.approx(7 * daily.spacing)
