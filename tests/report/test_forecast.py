"""Forecasts: inputs after the data (numbers and dates), the best model's and the
BIC-weighted mixture's predictive, forecast.csv, the rolling-origin check and the CLI."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import QUICK_CKS, ROOT

from prolas.cli import main
from prolas.data import (
    Dataset,
    decimal_years_to_timestamps,
    extrapolation_split,
    load_csv,
    timestamps_to_decimal_years,
)
from prolas.errors import DataError, DataWarning, ProlasError
from prolas.expr import parse
from prolas.gp import fit_gp, predict
from prolas.records import Evaluation, SearchResult
from prolas.report.forecast import (
    BAND_SCALE_BOUNDS,
    ForecastError,
    band_scale,
    forecast,
    forecast_title,
    future_x,
    mixture_quantiles,
    rolling_origin_check,
    rolling_origins,
    rolling_pick,
    rolling_weights,
    top_fits,
)

AIRLINE_TRAIN = str(ROOT / "data" / "airline_train.csv")

_erf = np.vectorize(math.erf)


def numpy_mixture_cdf(q, means, sds, weights) -> np.ndarray:
    """Reference: Σ w_i Φ((q - m_i) / s_i) with Φ from math.erf."""
    z = (np.asarray(q)[None, :] - means) / sds
    return (np.asarray(weights)[:, None] * 0.5 * (1 + _erf(z / math.sqrt(2)))).sum(0)


def monthly_csv(tmp_path, n: int = 40) -> Path:
    dates = pd.date_range("2001-01-01", periods=n, freq="MS")
    t = np.arange(n)
    y = 10 + 0.2 * t + np.sin(2 * np.pi * t / 12)
    path = tmp_path / "monthly.csv"
    pd.DataFrame({"month": dates.strftime("%Y-%m-%d"), "sales": y}).to_csv(path, index=False)
    return path


# --- dates -------------------------------------------------------------------------------


def test_dates_round_trip_through_decimal_years() -> None:
    rng = np.random.default_rng(0)
    seconds = rng.integers(0, 250 * 365 * 86400, 2000)
    dates = pd.Timestamp("1850-01-01") + pd.to_timedelta(seconds, unit="s")
    edges = pd.to_datetime(["2000-02-29 23:59:59", "1999-12-31 23:59:59", "2001-01-01 00:00:00"])
    dates = pd.Series(dates.append(edges))
    years = timestamps_to_decimal_years(dates)
    back = decimal_years_to_timestamps(years)
    assert (back == pd.DatetimeIndex(dates)).all()  # exact at the default second resolution
    raw = decimal_years_to_timestamps(years, resolution=None)
    assert abs(raw - pd.DatetimeIndex(dates)).max() < pd.Timedelta(seconds=1)
    assert decimal_years_to_timestamps(2001.5)[0] == pd.Timestamp("2001-07-02 12:00")
    with pytest.raises(DataError, match="cannot be shown as a date"):
        decimal_years_to_timestamps([1e6])


def test_date_column_is_recorded_and_kept(tmp_path) -> None:
    ds = load_csv(monthly_csv(tmp_path, 60))
    assert ds.x_is_date and not load_csv(AIRLINE_TRAIN).x_is_date
    assert ds.x_dates[0] == pd.Timestamp("2001-01-01")
    assert ds.x_dates[-1] == pd.Timestamp("2005-12-01")
    train, test = extrapolation_split(ds)
    assert train.x_is_date and test.x_is_date and ds.thinned(20).x_is_date
    assert ds.subset(ds.x > 2002).x_is_date


# --- inputs after the data ---------------------------------------------------------------


def test_future_x_continues_the_spacing(trend_season, tmp_path) -> None:
    x, shown = future_x(trend_season, 5)
    np.testing.assert_allclose(x, trend_season.x[-1] + np.arange(1, 6) / 12)
    assert shown is x
    dated = load_csv(monthly_csv(tmp_path))  # last month 2004-04-01
    x, dates = future_x(dated, 13)
    assert list(dates[[0, 1, -1]].strftime("%Y-%m-%d")) == [
        "2004-05-01",
        "2004-06-01",
        "2005-05-01",
    ]
    np.testing.assert_allclose(x, timestamps_to_decimal_years(pd.Series(dates)))
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ForecastError, match="positive integer"):
            future_x(trend_season, bad)


def gap_month_csv(tmp_path, sep: str = ",", decimal: str = ".") -> Path:
    """Month starts 2020-01 to 2020-08 with May's value missing (dropped by --dropna)."""
    rows = [(f"2020-0{m}-01", "" if m == 5 else f"{m + (m % 3) / 4}") for m in range(1, 9)]
    text = f"date{sep}sales\n" + "".join(f"{d}{sep}{v.replace('.', decimal)}\n" for d, v in rows)
    path = tmp_path / "gap.csv"
    path.write_text(text)
    return path


def test_future_dates_keep_month_starts_across_a_missing_month(tmp_path) -> None:
    """The median step of the gap series is 31 days; the calendar step stays a month."""
    with pytest.warns(UserWarning, match="dropped 1 row"):
        ds = load_csv(gap_month_csv(tmp_path), dropna=True)
    x, dates = future_x(ds, 3)
    assert list(dates.strftime("%Y-%m-%d")) == ["2020-09-01", "2020-10-01", "2020-11-01"]
    np.testing.assert_array_equal(x, timestamps_to_decimal_years(pd.Series(dates)))
    fc = forecast(fit_gp("LIN", ds, restarts=1), ds, 3)
    assert (fc.x_display == dates).all() and np.array_equal(fc.x, x)


@pytest.mark.slow
@pytest.mark.parametrize(("sep", "decimal"), [(",", "."), (";", ",")])
def test_cli_forecasts_month_starts_after_a_missing_month(tmp_path, capsys, sep, decimal) -> None:
    """End to end, also for the ';'-separated decimal-comma file of the same series."""
    out = tmp_path / "out"
    data = str(gap_month_csv(tmp_path, sep, decimal))
    argv = ["fit", data, *QUICK_CKS, "--dropna", "--horizon", "3", "--forecast", "best"]
    with pytest.warns(DataWarning, match="dropped 1 row"):  # the missing month's row
        code = main([*argv, "--out", str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    assert "7 points" in err and "x='date', y='sales'" in err
    frame = pd.read_csv(out / "forecast.csv")
    assert frame["x"].tolist() == ["2020-09-01", "2020-10-01", "2020-11-01"]
    assert "3 steps, 2020-09-01 to 2020-11-01" in err
    assert (out / "forecast.png").stat().st_size > 1000


# --- the forecast ------------------------------------------------------------------------


def test_forecast_csv_schema_and_best_band(trend_season, fits, tmp_path) -> None:
    fc = forecast(fits, trend_season, 12, method="best")  # the highest-BIC fit
    assert fc.method == "best" and fc.models == ("LIN + PER",) and fc.weights == (1.0,)
    path = fc.to_csv(tmp_path / "forecast.csv")
    frame = pd.read_csv(path)
    assert list(frame.columns) == ["x", "mean", "lower", "upper"] and len(frame) == 12
    assert np.all(np.diff(frame["x"]) > 0) and frame["x"].iloc[0] > trend_season.x[-1]
    assert np.all(frame["lower"] <= frame["mean"]) and np.all(frame["mean"] <= frame["upper"])
    # a Gaussian predictive: mean ± 1.96 sd of predict(..., include_noise=True)
    mean, var = predict(fits[0], trend_season, fc.x, include_noise=True)
    np.testing.assert_allclose(fc.mean, mean, rtol=1e-10)
    np.testing.assert_allclose(fc.upper - fc.mean, 1.959963984540054 * np.sqrt(var), rtol=1e-9)
    np.testing.assert_allclose(fc.mean - fc.lower, fc.upper - fc.mean, rtol=1e-9)
    # the trend continues: a year ahead is about 3 units higher than the last year
    assert 2 < fc.mean[-1] - trend_season.y[-12:].mean() < 5


def test_forecast_csv_has_iso_dates_when_the_input_had_dates(tmp_path) -> None:
    ds = load_csv(monthly_csv(tmp_path))
    fc = forecast(fit_gp("LIN + PER", ds, restarts=1), ds, 3)
    frame = pd.read_csv(fc.to_csv(tmp_path / "forecast.csv"))
    assert list(frame["x"]) == ["2004-05-01", "2004-06-01", "2004-07-01"]
    assert np.all(frame["lower"] < frame["upper"])


def test_bma_with_one_model_equals_best(trend_season, fits) -> None:
    best = forecast(fits[0], trend_season, 8)
    bma = forecast([fits[0]], trend_season, 8, method="bma")
    for a, b in ((best.mean, bma.mean), (best.lower, bma.lower), (best.upper, bma.upper)):
        np.testing.assert_array_equal(a, b)


def test_bma_weights_follow_bic(trend_season, fits) -> None:
    fc = forecast(fits, trend_season, 4, method="bma")
    bics = np.array([f.bic for f in fits])
    expected = np.exp(bics - bics.max()) / np.exp(bics - bics.max()).sum()
    np.testing.assert_allclose(fc.weights, expected)
    assert fc.models == tuple(f.expression for f in fits)


def test_bma_band_of_two_separated_models_is_the_mixture_quantiles(trend_season, fits) -> None:
    # LIN + PER keeps climbing and SE returns to the mean: years out they disagree
    x_far = trend_season.x[-1] + np.array([6.0, 8.0, 10.0])
    fc = forecast(fits[:2], trend_season, x_new=x_far, method="bma", weights=[0.6, 0.4])
    m, s = fc.component_means, fc.component_sds
    assert np.all(np.abs(m[0] - m[1]) > 4 * (s[0] + s[1]))  # well separated
    assert np.all(fc.lower < m.min(0)) and np.all(m.max(0) < fc.upper)
    np.testing.assert_allclose(fc.mean, 0.6 * m[0] + 0.4 * m[1])
    cdf = lambda q: numpy_mixture_cdf(q, m, s, [0.6, 0.4])  # noqa: E731
    np.testing.assert_allclose(cdf(fc.lower), 0.025, atol=1e-9)
    np.testing.assert_allclose(cdf(fc.upper), 0.975, atol=1e-9)
    # not a Gaussian with the mixture's variance: that band would be symmetric
    assert not np.allclose(fc.upper - fc.mean, fc.mean - fc.lower, rtol=1e-2)


def test_mixture_quantiles_match_a_numpy_cdf() -> None:
    rng = np.random.default_rng(1)
    means = rng.normal(0, 5, (3, 50))
    sds = rng.uniform(0.1, 2, (3, 50))
    w = np.array([0.2, 0.5, 0.3])
    for p in (0.025, 0.5, 0.975):
        q = mixture_quantiles(p, means, sds, w)
        np.testing.assert_allclose(numpy_mixture_cdf(q, means, sds, w), p, atol=1e-10)


def test_forecast_rejects_bad_arguments(trend_season, fits) -> None:
    with pytest.raises(ForecastError, match="exactly one"):
        forecast(fits[0], trend_season)
    with pytest.raises(ForecastError, match="method"):
        forecast(fits[0], trend_season, 3, method="mean")
    with pytest.raises(ForecastError, match="weights"):
        forecast(fits, trend_season, 3, method="bma", weights=[1, 1])
    with pytest.raises(ForecastError, match="level"):
        forecast(fits[0], trend_season, 3, level=1.5)


# --- rolling origin ----------------------------------------------------------------------


def test_rolling_origin_check_scores_the_end_of_the_data(trend_season, fits) -> None:
    table = rolling_origin_check(fits, trend_season, fraction=0.2, n_origins=4)
    assert list(table["model"]) == ["LIN + PER", "SE", "LIN", "bma"]
    assert set(table["n_origins"]) == {4}
    good, se = table.iloc[0], table.iloc[1]
    assert good["rmse"] < se["rmse"] and good["mlpd"] > se["mlpd"]
    assert good["rmse"] < 0.3  # noise sd 0.1, a well-specified model
    # one origin, one step: the prefix posterior with the full data's standardisation
    one = rolling_origin_check(fits[:1], trend_season, fraction=0.01, n_origins=1)
    n = trend_season.n
    prefix = Dataset(
        trend_season.x[:-1], trend_season.y[:-1], trend_season.y_mean, trend_season.y_std
    )
    mean, var = predict(fits[0], prefix, trend_season.x[-1:], include_noise=True)
    resid = trend_season.y[-1] - mean[0]
    assert one["n_predictions"].iloc[0] == 1 and n - math.ceil(0.01 * n) == n - 1
    assert one["rmse"].iloc[0] == pytest.approx(abs(resid), rel=1e-9)
    lpd = -0.5 * (math.log(2 * math.pi * var[0]) + resid**2 / var[0])
    assert one["mlpd"].iloc[0] == pytest.approx(lpd, rel=1e-9)


def _noise_times(fit, factor: float):
    return dataclasses.replace(fit, noise_variance=fit.noise_variance * factor)


def test_band_scale_widens_a_band_too_narrow_and_narrows_one_too_wide(trend_season, fits):
    """The model that generated the data needs about no correction; the same model with
    its noise variance divided (multiplied) by 25, a band about 5 times too narrow (too
    wide), is widened (narrowed) by the factor, up to its bounds."""
    good = fits[0]
    s_good, points = band_scale([good], trend_season, [1.0], 12)
    s_narrow, _ = band_scale([_noise_times(good, 1 / 25)], trend_season, [1.0], 12)
    s_wide, _ = band_scale([_noise_times(good, 25.0)], trend_season, [1.0], 12)
    assert points == 5 * 12  # five origins in [n - 2h, n - h], h points each
    assert 0.6 <= s_good <= 1.6
    assert s_narrow >= min(3.0 * s_good, BAND_SCALE_BOUNDS[1])
    assert s_wide <= max(s_good / 3.0, BAND_SCALE_BOUNDS[0])


def test_refitted_band_scale_forecasts_from_hyperparameters_fitted_before_each_origin(
    trend_season, fits, monkeypatch
) -> None:
    """With ``refit`` every origin's forecast comes from the model refitted on the points
    before it (5 origins x 1 model), a model refitted from a too-small noise finds the
    noise again, and the factor needs no correction then."""
    import prolas.report.forecast as fc_module

    calls = []
    real = fc_module._refit

    def spy(fit, prefix):
        calls.append(prefix.n)
        return real(fit, prefix)

    monkeypatch.setattr(fc_module, "_refit", spy)
    narrow = _noise_times(fits[0], 1 / 25)
    s_fixed, _ = band_scale([narrow], trend_season, [1.0], 12)
    s_refit, points = band_scale([narrow], trend_season, [1.0], 12, refit=True)
    assert calls == [36, 39, 42, 45, 48] and points == 60
    assert 0.6 <= s_refit <= 1.6 < s_fixed


def test_band_refits_stop_at_the_refit_limit(trend_season, fits, monkeypatch) -> None:
    """Prefixes longer than BAND_REFIT_LIMIT keep the model's fit (25 exact refits of a
    long series would cost minutes); shorter ones are refitted."""
    import prolas.report.forecast as fc_module

    monkeypatch.setattr(fc_module, "BAND_REFIT_LIMIT", 40)
    fit = fits[0]
    assert fc_module._refit(fit, trend_season.take(np.arange(45), "45")) is fit
    refitted = fc_module._refit(fit, trend_season.take(np.arange(36), "36"))
    assert refitted is not fit and refitted.ok and refitted.n == 36


def test_a_calibrated_forecast_keeps_its_mean_and_scales_its_band(trend_season, fits) -> None:
    narrow = _noise_times(fits[0], 1 / 25)
    own = forecast(narrow, trend_season, horizon=12, method="best")
    cal = forecast(narrow, trend_season, horizon=12, method="best", band="calibrated")
    s, _ = band_scale([narrow], trend_season, [1.0], 12)
    assert own.band_scale == 1.0 and cal.band_scale == s > 1.0
    np.testing.assert_array_equal(cal.mean, own.mean)
    np.testing.assert_allclose(cal.upper - cal.mean, s * (own.upper - own.mean), rtol=1e-6)
    np.testing.assert_allclose(cal.component_sds, s * own.component_sds, rtol=1e-12)


def test_a_shrunk_band_is_scaled_by_the_square_root_of_the_refitted_factor(
    trend_season, fits
) -> None:
    narrow = _noise_times(fits[0], 1 / 25)  # a band far too narrow: refitted widens it
    refitted = forecast(narrow, trend_season, horizon=12, method="best", band="refitted")
    shrunk = forecast(narrow, trend_season, horizon=12, method="best", band="shrunk")
    s, _ = band_scale([narrow], trend_season, [1.0], 12, refit=True)
    assert refitted.band_scale == s > 1.1  # (1.24: the refits fit the noise again)
    assert shrunk.band_scale == pytest.approx(s**0.5, rel=1e-12)
    np.testing.assert_array_equal(shrunk.mean, refitted.mean)
    np.testing.assert_allclose(shrunk.component_sds, refitted.component_sds / s**0.5, rtol=1e-12)
    # between the models' own band and refitted's, in log midway
    own = forecast(narrow, trend_season, horizon=12, method="best")
    assert np.all(own.upper - own.lower < shrunk.upper - shrunk.lower)
    assert np.all(shrunk.upper - shrunk.lower < refitted.upper - refitted.lower)


def test_band_auto_is_shrunk_for_the_fixed_seasonal_kernel_only(trend_season, fits) -> None:
    from prolas.fitjob import ForecastSettings, band_used
    from prolas.gp import FitConfig
    from prolas.limits import FIXED_FORECAST_KERNEL, FIXED_SEASONAL_KERNEL

    held = fit_gp(FIXED_SEASONAL_KERNEL, trend_season, FitConfig(restarts=1, season=1.0))
    free = fit_gp(FIXED_FORECAST_KERNEL, trend_season, restarts=1)
    short = trend_season.take(np.arange(50), "50 points")  # auto forecasts from the fixed kernel
    auto = ForecastSettings(horizon=6)
    assert auto.band == "auto"
    assert band_used(auto, short, [held, held]) == "shrunk"
    assert band_used(auto, short, [free, free]) == "refitted"  # no season: as measured before
    assert band_used(auto, short, fits) == "refitted"  # the search's models stood in
    searched = ForecastSettings(horizon=6, source="search")
    assert band_used(searched, short, [held]) == "refitted"
    for band in ("model", "calibrated", "refitted", "shrunk"):
        assert band_used(ForecastSettings(horizon=6, band=band), short, [held]) == band
    with pytest.raises(ProlasError, match="--forecast-band must be one of auto, model"):
        ForecastSettings(horizon=6, band="wide")


def test_band_scale_leaves_the_band_alone_on_too_few_points(trend_season, fits) -> None:
    narrow = _noise_times(fits[0], 1 / 25)
    assert band_scale([narrow], trend_season.take(np.arange(5), "5 points"), [1.0], 12) == (1.0, 2)
    assert band_scale([narrow], trend_season.take(np.arange(2), "2 points"), [1.0], 12) == (1.0, 0)


def test_rolling_origins_sit_in_the_last_part_of_the_data() -> None:
    # call-centre's 162 training points: the last 17 (ceil 16.2), 5 origins across them
    assert rolling_origins(162).tolist() == [145, 149, 153, 157, 161]
    assert rolling_origins(10, 0.1, 5).tolist() == [9]  # one point: one origin
    for args, fragment in (
        ((100, 0.0), "fraction"),
        ((100, 1.0), "fraction"),
        ((100, 0.1, 0), "n_origins"),
        ((2, 0.5), "no prefix"),
    ):
        with pytest.raises(ForecastError, match=fragment):
            rolling_origins(*args)


def test_rolling_forecast_picks_by_forecast_error_not_bic(trend_season, fits) -> None:
    # the SE model given the highest BIC: `best` follows the BIC, `rolling` the check
    inflated = dataclasses.replace(fits[1], bic=fits[0].bic + 10.0)
    models = [fits[0], inflated, fits[2]]
    best = forecast(models, trend_season, 6, method="best")
    rolled = forecast(models, trend_season, 6, method="rolling")
    assert best.models == ("SE",) and rolled.models == ("LIN + PER",)
    table = rolling_origin_check(models, trend_season)
    assert rolled.check is not None and list(rolled.check["model"]) == ["LIN + PER", "SE", "LIN"]
    np.testing.assert_allclose(rolled.check["rmse"], table["rmse"][:3])
    assert rolled.check["rmse"].idxmin() == 0
    # the pick's forecast is that model's own predictive
    alone = forecast(fits[0], trend_season, 6)
    np.testing.assert_allclose(rolled.mean, alone.mean)
    np.testing.assert_allclose(rolled.upper, alone.upper)
    # one model is its own pick, without a check
    assert rolling_pick(fits[:1], trend_season) == (fits[0], None)
    with pytest.raises(ForecastError, match="weights"):
        forecast(models, trend_season, 3, method="rolling", weights=[1, 1, 1])


def test_rolling_mix_weights_each_model_by_its_summed_log_predictive_density(
    trend_season, fits
) -> None:
    # one origin, last two points: w_i ∝ exp(Σ_t log p(y_t | y_{<o}, M_i)) by hand
    n = trend_season.n
    prefix = Dataset(
        trend_season.x[:-2], trend_season.y[:-2], trend_season.y_mean, trend_season.y_std
    )
    total = []
    for f in fits:
        mean, var = predict(f, prefix, trend_season.x[-2:], include_noise=True)
        resid = trend_season.y[-2:] - mean
        total.append(np.sum(-0.5 * (np.log(2 * np.pi * var) + resid**2 / var)))
    expected = np.exp(np.array(total) - max(total))
    expected /= expected.sum()
    w, table = rolling_weights(fits, trend_season, fraction=2 / n, n_origins=1)
    np.testing.assert_allclose(w, expected, rtol=1e-8, atol=1e-300)
    assert list(table["model"]) == [f.expression for f in fits]
    np.testing.assert_allclose(table["rolling_weight"], w)
    assert rolling_weights(fits[:1], trend_season) == (pytest.approx([1.0]), None)


def test_rolling_mix_forecast_follows_the_check_not_the_bic(trend_season, fits) -> None:
    # SE given the highest BIC: bma puts its weight there, rolling-mix on LIN + PER
    inflated = dataclasses.replace(fits[1], bic=fits[0].bic + 10.0)
    models = [fits[0], inflated, fits[2]]
    bma = forecast(models, trend_season, 6, method="bma")
    mix = forecast(models, trend_season, 6, method="rolling-mix")
    assert max(bma.weights) == bma.weights[1] > 0.99
    assert mix.models == ("LIN + PER", "SE", "LIN") and mix.weights[0] > 0.99
    assert sum(mix.weights) == pytest.approx(1.0)
    # the mixture mean is the weighted sum of the components' means
    np.testing.assert_allclose(mix.mean, np.asarray(mix.weights) @ mix.component_means)
    w, table = rolling_weights(models, trend_season)
    np.testing.assert_allclose(mix.weights, w)
    assert mix.check is not None and list(mix.check["rolling_weight"]) == list(w)
    with pytest.raises(ForecastError, match="weights"):
        forecast(models, trend_season, 3, method="rolling-mix", weights=[1, 1, 1])
    # the check's table keeps the BIC weights beside the weights used, named apart
    np.testing.assert_allclose(mix.check["bic_weight"], bma.weights)
    assert "weight" not in mix.check


def test_forecast_plot_title_names_the_model_or_the_mixture(trend_season, fits) -> None:
    titles = {
        method: forecast_title(forecast(fits, trend_season, 6, method=method))
        for method in ("best", "bma", "rolling", "rolling-mix")
    }
    assert titles == {
        "best": "forecast, 6 steps: LIN + PER",
        "bma": "forecast, 6 steps: BIC-weighted mixture of 3 models",
        "rolling": "forecast, 6 steps: LIN + PER (rolling-origin pick)",
        "rolling-mix": "forecast, 6 steps: mixture of 3 models weighted by their forecasts "
        "of the data's end",
    }
    # one kernel's fits at several seeds (the fixed kernel's forecast) are not a BIC mixture
    seeds = [fit_gp("LIN + PER", trend_season, restarts=1, seed=s) for s in (0, 3)]
    equal = forecast(seeds, trend_season, 6, method="bma", weights=[1, 1])
    assert forecast_title(equal) == "forecast, 6 steps: LIN + PER, 2 fits mixed equally"
    unequal = forecast(seeds, trend_season, 6, method="bma", weights=[1, 3])
    assert forecast_title(unequal) == "forecast, 6 steps: LIN + PER, 2 fits mixed"


def test_rolling_mix_weights_stay_finite_when_scores_are_not(trend_season, fits, monkeypatch):
    import prolas.report.forecast as fc_module

    real = fc_module.rolling_origin_check

    def scores(mlpd):
        def check(models, dataset, **options):
            table = real(models, dataset, **options)
            table.loc[: len(mlpd) - 1, "mlpd"] = mlpd
            return table

        return check

    monkeypatch.setattr(fc_module, "rolling_origin_check", scores([0.0, -np.inf, np.nan]))
    w, _ = rolling_weights(fits, trend_season)
    assert list(w) == [1.0, 0.0, 0.0]
    # nothing finite: the BIC weights
    monkeypatch.setattr(fc_module, "rolling_origin_check", scores([-np.inf, np.nan, -np.inf]))
    w, _ = rolling_weights(fits, trend_season)
    np.testing.assert_allclose(w, fc_module.bic_weights([f.bic for f in fits]))


def test_top_fits_are_refitted_on_all_points_after_a_thinned_search(trend_season) -> None:
    from prolas.pipeline import run_search
    from prolas.search.config import SearchConfig

    config = SearchConfig(method="cks", budget=4, restarts=1, search_points=30)
    result, best = run_search(trend_season, config)
    tops = top_fits(result, trend_season, config, 3, best=best)
    assert len(tops) == 3 and all(f.ok and f.n == trend_season.n for f in tops)
    assert tops[0] is best and len({f.expression for f in tops}) == 3


@pytest.mark.parametrize(
    "expression, polynomial",
    [
        ("LIN*LIN", True),
        ("LIN*LIN*PER + SE", True),  # a seasonal amplitude growing as x^2
        ("C + LIN*LIN*LIN", True),
        ("CP(LIN*LIN, SE)", True),  # two LIN factors in one canonical term
        ("LIN*(LIN + SE)", True),  # canonical form: LIN*LIN + LIN*SE
        ("LIN*PER + LIN*SE", False),  # one LIN per term: linear growth
        ("CW(LIN, LIN)", False),
        ("LIN + PER*SE", False),
        ("SE", False),
    ],
)
def test_polynomial_trend_is_two_lin_factors_in_one_canonical_term(expression, polynomial):
    from prolas.report.forecast import polynomial_trend

    assert polynomial_trend(expression) is polynomial


def _history_of(fits_and_bics) -> SearchResult:
    """A search result whose history holds these fits at these BICs (rank order)."""
    history = [
        Evaluation(i, f.expression, "ok", bic, f.log_likelihood, f.n_params, 0.0, None, fit=f)
        for i, (f, bic) in enumerate(fits_and_bics, 1)
    ]
    return SearchResult("cks", 0, len(history), history, 0.0)


def test_top_fits_leave_polynomial_trends_out_unless_nothing_else_is_left(trend_season):
    from prolas.search.config import SearchConfig

    config = SearchConfig(method="cks", budget=4, restarts=1)
    fit = {e: fit_gp(e, trend_season, restarts=1) for e in ("LIN*LIN + PER", "LIN + PER", "SE")}
    fit["LIN*LIN"] = fit_gp("LIN*LIN", trend_season, restarts=1)
    # the polynomial model ranks first
    result = _history_of([(fit["LIN*LIN + PER"], 10.0), (fit["LIN + PER"], 9.0), (fit["SE"], 1.0)])
    linear = top_fits(result, trend_season, config, 2)  # the default: linear
    assert [f.expression for f in linear] == ["LIN + PER", "SE"]
    every = top_fits(result, trend_season, config, 2, trend="any")
    assert [f.expression for f in every] == ["LIN*LIN + PER", "LIN + PER"]
    # a search that fitted nothing else still forecasts, with what it has
    only = _history_of([(fit["LIN*LIN + PER"], 10.0), (fit["LIN*LIN"], 2.0)])
    assert [f.expression for f in top_fits(only, trend_season, config, 5)] == [
        "LIN*LIN + PER",
        "LIN*LIN",
    ]
    with pytest.raises(ForecastError, match="trend must be one of linear, any"):
        top_fits(result, trend_season, config, 2, trend="quadratic")


def test_fixed_fit_is_the_searchs_own_fit_else_a_cold_fit_with_its_settings(trend_season):
    from prolas.limits import FIXED_FORECAST_KERNEL
    from prolas.report.forecast import fixed_fit
    from prolas.search.config import SearchConfig

    config = SearchConfig(method="cks", budget=2, restarts=2, seed=3)
    key = str(parse(FIXED_FORECAST_KERNEL))
    assert key == FIXED_FORECAST_KERNEL
    # the search fitted it: its fit (the better of two evaluations), carrying the data
    better = fit_gp(key, trend_season, restarts=1, seed=0)
    worse = dataclasses.replace(better, log_likelihood=better.log_likelihood - 5.0)
    result = _history_of([(worse, 1.0), (better, 0.5), (fit_gp("SE", trend_season), 9.0)])
    got = fixed_fit(result, trend_season, config)
    assert got.log_likelihood == better.log_likelihood and got.dataset is trend_season
    # it did not: the cold fit that fit_gp gives with the search's fit settings
    result = _history_of([(fit_gp("SE", trend_season, restarts=1), 9.0)])
    got = fixed_fit(result, trend_season, config)
    cold = fit_gp(key, trend_season, config.fit_config)
    assert got.ok and got.expression == key and got.dataset is trend_season
    assert got.log_likelihood == cold.log_likelihood
    # a search on a subsample: fitted on the subsample, then refitted on all points
    thinned = SearchConfig(method="cks", budget=2, restarts=1, search_points=30)
    got = fixed_fit(result, trend_season, thinned)
    assert got.ok and got.n == trend_season.n == 60


def test_fixed_fits_with_a_season_are_cold_fits_holding_it(trend_season) -> None:
    from prolas.limits import FIXED_FORECAST_KERNEL, FIXED_SEASONAL_KERNEL
    from prolas.report.forecast import fixed_fit, fixed_fits
    from prolas.search.config import SearchConfig

    config = SearchConfig(method="cks", budget=2, restarts=2, seed=3)
    searched = fit_gp(FIXED_FORECAST_KERNEL, trend_season, restarts=1, seed=0)
    result = _history_of([(searched, 1.0)])
    # the search's own fit has a fitted period: a held season is another model
    got = fixed_fit(result, trend_season, config, season=1.0)
    held = dataclasses.replace(config.fit_config, season=1.0)
    cold = fit_gp(FIXED_SEASONAL_KERNEL, trend_season, held)
    assert got.expression == FIXED_SEASONAL_KERNEL == str(parse(FIXED_SEASONAL_KERNEL))
    assert got.log_likelihood == cold.log_likelihood != searched.log_likelihood
    assert got.season == 1.0 and got.period("PER") == pytest.approx(1.0, rel=1e-12)
    assert got.dataset is trend_season
    fits = fixed_fits(result, trend_season, config, season=1.0)
    assert [f.season for f in fits] == [1.0] * 3
    k = parse(FIXED_SEASONAL_KERNEL).n_params - 1  # the held period is not counted
    assert [f.n_params for f in fits] == [k] * 3
    assert [f.expression for f in fixed_fits(result, trend_season, config)] == [
        FIXED_FORECAST_KERNEL
    ] * 3  # no season: LIN + PER + SE with its period fitted


def test_prolas_fit_holds_the_season_of_a_dated_monthly_series(tmp_path, capsys) -> None:
    data = monthly_csv(tmp_path, 40)
    lines, frames = {}, {}
    for name, extra in (("calendar", []), ("free", ["--season-length", "0"])):
        out = tmp_path / name
        code = main(["fit", str(data), *QUICK_CKS, "--horizon", "6", *extra, "--out", str(out)])
        _, printed = capsys.readouterr()
        assert code == 0, printed
        lines[name] = next(t for t in printed.splitlines() if "forecast.csv" in t)
        frames[name] = pd.read_csv(out / "forecast.csv")
    held = "the fixed kernel LIN + PER*SE + SE, its period held at the season (1), its fits"
    assert held in lines["calendar"]
    assert "held" not in lines["free"] and "the fixed kernel LIN + PER + SE" in lines["free"]
    # the default band: shrunk for the seasonal kernel, refitted for the free one
    assert "the square root of the factor that best forecast" in lines["calendar"]
    assert "; band scaled by" in lines["free"] and "square root" not in lines["free"]
    assert not np.allclose(frames["calendar"]["mean"], frames["free"]["mean"])
    # the option needs a forecast, and a count of steps (a usage error, exit 2)
    bad = ["fit", str(data), *QUICK_CKS, "--out", str(tmp_path / "bad")]
    code = main([*bad, "--season-length", "12"])
    _, err = capsys.readouterr()
    assert code != 0 and "--season-length need --horizon H" in err, err
    for value, message in (("x", "expected an integer, got 'x'"), ("-1", ">= 0, got -1")):
        with pytest.raises(SystemExit) as exit_info:
            main([*bad, "--horizon", "6", "--season-length", value])
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert exit_info.value.code == 2 and "argument --season-length" in last
        assert message in last, last
    assert not (tmp_path / "bad").exists()


def test_forecast_source_auto_is_the_fixed_kernel_below_144_points(airline) -> None:
    from prolas.fitjob import ForecastSettings, forecast_source
    from prolas.limits import FIXED_FORECAST_BELOW

    assert FIXED_FORECAST_BELOW == 144 and airline.n == 144
    short = airline.take(np.arange(143), "airline[:143]")
    auto = ForecastSettings(horizon=3)
    assert auto.source == "auto"
    assert forecast_source(auto, short) == "fixed"
    assert forecast_source(auto, airline) == "search"
    for source in ("search", "fixed"):
        settings = ForecastSettings(horizon=3, source=source)
        assert forecast_source(settings, short) == forecast_source(settings, airline) == source
    # the best model's predictive is the search's best, whatever the length
    assert forecast_source(ForecastSettings(horizon=3, method="best"), short) == "best"
    with pytest.raises(ProlasError, match="--forecast-from must be one of auto, search, fixed"):
        ForecastSettings(horizon=3, source="both")
    with pytest.raises(ProlasError, match="choose one"):
        ForecastSettings(horizon=3, method="best", source="fixed")


def test_forecast_fits_use_the_fixed_kernel_once_and_fall_back_when_it_fails(
    trend_season, monkeypatch, fixed_fit_calls, tmp_path
) -> None:
    import prolas.report.forecast as fc_module
    from prolas.fitjob import ForecastSettings, forecast_fits, forecast_mixing, source_used
    from prolas.gp import FitResult
    from prolas.limits import FIXED_FORECAST_KERNEL, FIXED_FORECAST_SEED_OFFSETS
    from prolas.search.config import SearchConfig

    config = SearchConfig(method="cks", budget=2, restarts=1, seed=2)
    best = fit_gp("LIN + PER", trend_season, restarts=1)
    result = _history_of([(best, 10.0), (fit_gp("SE", trend_season, restarts=1), 9.0)])
    made = fixed_fit_calls
    settings, cache = ForecastSettings(horizon=3), {}
    first = forecast_fits(result, trend_season, config, best, settings, cache=cache)
    again = forecast_fits(result, trend_season, config, best, settings, cache=cache)
    # one fit per seed offset: the search's fit seed s, then cold fits at s + 3, s + 6
    assert FIXED_FORECAST_SEED_OFFSETS == (0, 3, 6)
    assert [f.expression for f in first] == [FIXED_FORECAST_KERNEL] * 3
    assert all(a is b for a, b in zip(first, again)) and len(made) == 1  # cached
    for fit, seed in zip(first, (2, 5, 8)):
        cold = fit_gp(FIXED_FORECAST_KERNEL, trend_season, config.replace(seed=seed).fit_config)
        assert fit.log_likelihood == cold.log_likelihood and fit.dataset is trend_season
    assert source_used(settings, trend_season, first) == "fixed"
    # mixed with equal weights whatever --forecast says (it chooses among search models)
    for method in ("rolling-mix", "bma", "rolling", "horizon-mix"):
        chosen = dataclasses.replace(settings, method=method)
        assert forecast_mixing(chosen, trend_season, first) == ("bma", [1.0, 1.0, 1.0])
    search = dataclasses.replace(settings, source="search")
    fits = forecast_fits(result, trend_season, config, best, search, cache=cache)
    assert [f.expression for f in fits] == ["LIN + PER", "SE"]
    assert forecast_mixing(search, trend_season, fits) == ("rolling-mix", None)
    # one of the three fails: the other two are mixed, and that is said once
    failed = FitResult.failed(FIXED_FORECAST_KERNEL, 60, 6, "no optimum", 0.0)
    monkeypatch.setattr(fc_module, "fixed_fits", lambda *args: [first[0], failed, first[2]])
    said, cache = [], {}
    for _ in range(2):
        fits = forecast_fits(
            result, trend_season, config, best, settings, cache=cache, log=said.append
        )
        assert fits == [first[0], first[2]]
    assert said == [
        "forecast: 1 of the fixed kernel's 3 fits failed (no optimum); mixing the other 2"
    ]
    assert source_used(settings, trend_season, fits) == "fixed"
    # the summary line says which seeds were fitted and that one failed
    from prolas.fitjob import _write_forecast

    line, _ = _write_forecast(tmp_path, trend_season, config, best, fits, settings)
    assert "its fits at fit seeds 2, 5, 8, 1 of which failed mixed equally" in line
    line, _ = _write_forecast(tmp_path, trend_season, config, best, first, settings)
    assert "its fits at fit seeds 2, 5, 8 mixed equally" in line
    # all fail: the search's models, and the reason said
    monkeypatch.setattr(fc_module, "fixed_fits", lambda *args: [failed] * 3)
    said = []
    fits = forecast_fits(result, trend_season, config, best, settings, log=said.append)
    assert [f.expression for f in fits] == ["LIN + PER", "SE"]
    assert len(said) == 1 and "failed to fit (no optimum)" in said[0]
    assert source_used(settings, trend_season, fits) == "search"  # what stood in
    assert forecast_mixing(settings, trend_season, fits) == ("rolling-mix", None)
    with pytest.warns(RuntimeWarning, match="forecasting from the search's top models"):
        forecast_fits(result, trend_season, config, best, settings)


def test_forecast_line_says_when_the_best_model_is_left_out(trend_season, tmp_path) -> None:
    from prolas.fitjob import ForecastSettings, _write_forecast, forecast_fits
    from prolas.search.config import SearchConfig

    config = SearchConfig(method="cks", budget=2, restarts=1)
    best = fit_gp("LIN*LIN + PER", trend_season, restarts=1)
    other = fit_gp("LIN + PER", trend_season, restarts=1)
    result = _history_of([(best, 10.0), (other, 9.0)])
    for trend, models in (("linear", ["LIN + PER"]), ("any", ["LIN*LIN + PER", "LIN + PER"])):
        settings = ForecastSettings(horizon=3, trend=trend, source="search")
        fits = forecast_fits(result, trend_season, config, best, settings)
        assert [f.expression for f in fits] == models
        line, _ = _write_forecast(tmp_path, trend_season, config, best, fits, settings)
        left_out = "the best model, LIN*LIN + PER, has a polynomial trend and is left out"
        assert (left_out in line) is (trend == "linear")
    with pytest.raises(ProlasError, match="--forecast-trend must be one of linear, any"):
        ForecastSettings(horizon=3, trend="cubic")


# --- command line ------------------------------------------------------------------------


def test_cli_mixture_line_says_its_weights_rank_a_thinned_search_on_all_points(
    tmp_path, capsys
) -> None:
    """After a search on a subsample the mixture's weights come from the BIC on all
    points, and may rank another model first: the summary line says both, so a user
    does not read "best: A" and "A (0.00)" as a contradiction."""
    import json
    import re

    # a random walk's 30-point thinning ranks PER first (seed 3, 200 points); all 200
    # points rank RQ far above it. A straight line's 30-point thinning and all points agree
    # on LIN (weight 1.00 at data seeds 0-2; airline's thinnings flip with the fitter).
    walk, line_csv = tmp_path / "walk.csv", tmp_path / "line.csv"
    y = np.cumsum(np.random.default_rng(3).normal(size=200))
    pd.DataFrame({"x": np.arange(200.0), "y": y}).to_csv(walk, index=False)
    y = 0.05 * np.arange(200.0) + np.random.default_rng(0).normal(size=200)
    pd.DataFrame({"x": np.arange(200.0), "y": y}).to_csv(line_csv, index=False)
    reordered = []
    for data, n, budget, points in ((str(line_csv), 200, "3", "30"), (str(walk), 200, "6", "30")):
        out = tmp_path / Path(data).stem
        args = ["fit", data, *QUICK_CKS, "--budget", budget, "--search-points", points]
        argv = [*args, "--horizon", "6", "--forecast", "bma", "--forecast-models", "3"]
        code = main([*argv, "--out", str(out)])
        _, printed = capsys.readouterr()  # the summary goes to stderr
        assert code == 0, printed
        line = next(t for t in printed.splitlines() if "BIC-weighted mixture of" in t)
        assert f"weights from the BIC on all {n} points" in line
        listed = line.split("mixture of ", 1)[1].split(";", 1)[0]
        weights = {m: float(w) for m, w in re.findall(r"\s*(.+?) \((\d\.\d\d)\),?", listed)}
        assert len(weights) == 3
        best = json.loads((out / "result.json").read_text())["best"]["expression"]
        top = max(weights, key=weights.get)
        assert (f"where {top} ranks above the search's best" in line) == (top != best)
        reordered.append(top != best)
    assert reordered == [False, True]  # both branches of the sentence are exercised
    # an unthinned search has nothing to explain
    code = main(
        ["fit", AIRLINE_TRAIN, *QUICK_CKS, "--horizon", "6", "--forecast", "bma"]
        + ["--forecast-from", "search", "--out", str(tmp_path / "all")]
    )
    _, printed = capsys.readouterr()
    assert code == 0, printed
    assert "BIC-weighted mixture of" in printed and "weights from the BIC" not in printed


def test_cli_default_forecast_of_the_search_is_the_rolling_origin_mixture(
    tmp_path, capsys, monkeypatch
) -> None:
    import prolas.report.forecast as fc_module

    drawn = {}
    real_plot = fc_module.plot_forecast

    def spy(path, fc, dataset, fit=None):
        drawn["fit"] = fit
        return real_plot(path, fc, dataset, fit=fit)

    monkeypatch.setattr(fc_module, "plot_forecast", spy)
    out = tmp_path / "default"
    argv = ["fit", AIRLINE_TRAIN, *QUICK_CKS, "--horizon", "6", "--forecast-from", "search"]
    code = main([*argv, "--out", str(out)])
    _, printed = capsys.readouterr()
    assert code == 0, printed
    assert "forecast: scoring the top models (up to 5) on the data's end…" in printed
    line = next(t for t in printed.splitlines() if "forecast.csv" in t)
    assert "mixture weighted by each model's forecast of the last 10% of the data" in line
    scores = pd.read_csv(out / "forecast_check.csv")
    assert len(scores) == 3 and scores["rolling_weight"].sum() == pytest.approx(1.0)  # budget 3
    # the weights in the summary line are the check's
    listed = line.split("of the data: ", 1)[1].split(";", 1)[0]
    for model, weight in zip(scores["model"], scores["rolling_weight"]):
        assert f"{model} ({weight:.2f})" in listed
    # the plot marks the transitions of the dominant model (weight >= 0.5), if any
    top = scores.loc[scores["rolling_weight"].idxmax()]
    if top["rolling_weight"] >= 0.5:
        assert drawn["fit"] is not None and drawn["fit"].expression == top["model"]
    else:
        assert drawn["fit"] is None


def test_cli_default_forecast_of_a_short_series_is_the_fixed_kernel(tmp_path, capsys) -> None:
    """airline_train (129 points) is forecast from LIN + PER + SE by default, whatever
    the search found; the whole airline series (144 points) from the search's models;
    --forecast-from chooses either on any series; the search and result.json stay."""
    import json

    outs = {}
    runs = (
        ("short-auto", AIRLINE_TRAIN, []),
        ("short-fixed", AIRLINE_TRAIN, ["--forecast-from", "fixed"]),
        ("short-search", AIRLINE_TRAIN, ["--forecast-from", "search"]),
        ("long-auto", str(ROOT / "data" / "airline.csv"), []),
        ("long-fixed", str(ROOT / "data" / "airline.csv"), ["--forecast-from", "fixed"]),
    )
    lines = {}
    for name, data, extra in runs:
        outs[name] = out = tmp_path / name
        code = main(["fit", data, *QUICK_CKS, "--horizon", "6", *extra, "--out", str(out)])
        _, printed = capsys.readouterr()
        assert code == 0, printed
        lines[name] = next(t for t in printed.splitlines() if "forecast.csv" in t)
    fixed = "the fixed kernel LIN + PER + SE, its fits at fit seeds 0, 3, 6 mixed equally"
    assert f"{fixed} (a series of fewer than 144 points;" in lines["short-auto"]
    assert f"{fixed} (--forecast-from fixed;" in lines["short-fixed"]
    assert f"{fixed} (--forecast-from fixed;" in lines["long-fixed"]
    for name in ("short-search", "long-auto"):
        assert "fixed kernel" not in lines[name]
        assert "mixture weighted by each model's forecast" in lines[name]
    frames = {k: pd.read_csv(v / "forecast.csv") for k, v in outs.items()}
    pd.testing.assert_frame_equal(frames["short-auto"], frames["short-fixed"])
    assert not np.allclose(frames["short-auto"]["mean"], frames["short-search"]["mean"])
    best = {k: json.loads((v / "result.json").read_text())["best"] for k, v in outs.items()}
    assert best["short-auto"] == best["short-search"]  # the search does not change


@pytest.mark.slow
def test_cli_calibrated_band_has_the_models_mean_and_says_its_factor(tmp_path, capsys) -> None:
    outs = {}
    for band in ("model", "calibrated"):
        outs[band] = tmp_path / band
        argv = ["fit", AIRLINE_TRAIN, *QUICK_CKS, "--horizon", "12", "--forecast-band", band]
        assert main([*argv, "--out", str(outs[band])]) == 0
        _, err = capsys.readouterr()
        assert ("band scaled by" in err) == (band == "calibrated")
    model, cal = (pd.read_csv(outs[b] / "forecast.csv") for b in ("model", "calibrated"))
    np.testing.assert_allclose(cal["mean"], model["mean"], rtol=1e-12)
    assert not np.allclose(cal["upper"] - cal["lower"], model["upper"] - model["lower"])


@pytest.mark.slow
def test_cli_horizon_writes_forecast_csv_and_png(tmp_path, capsys) -> None:
    for method in ("best", "bma", "rolling", "rolling-mix"):
        out = tmp_path / method
        code = main(
            [
                "fit",
                AIRLINE_TRAIN,
                *QUICK_CKS,
                "--horizon",
                "12",
                "--forecast",
                method,
                "--forecast-models",
                "2",
                "--forecast-from",
                "search",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        _, err = capsys.readouterr()
        assert code == 0, err
        frame = pd.read_csv(out / "forecast.csv")
        assert list(frame.columns) == ["x", "mean", "lower", "upper"] and len(frame) == 12
        assert frame["x"].iloc[0] == pytest.approx(1959.7083333 + 1 / 12)  # the next month
        assert np.all(np.diff(frame["x"]) > 0)
        assert np.all(frame["lower"] <= frame["mean"]) and np.all(frame["mean"] <= frame["upper"])
        assert (out / "forecast.png").stat().st_size > 1000
        check = out / "forecast_check.csv"
        assert check.exists() == method.startswith("rolling")
        if method.startswith("rolling"):
            scores = pd.read_csv(check)
            assert len(scores) == 2  # the two models it chose from or mixed
            if method == "rolling-mix":
                assert scores["rolling_weight"].sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--horizon", "0"], "--horizon must be a positive integer, got 0"),
        (["--horizon", "abc"], "--horizon must be a positive integer, got 'abc'"),
        (["--horizon", "2.5"], "--horizon must be a positive integer"),
        (["--horizon", "3", "--forecast-models", "0"], "--forecast-models must be"),
        (["--forecast", "bma"], "need --horizon"),
        (["--forecast-band", "calibrated"], "need --horizon"),
        (["--forecast-trend", "any"], "need --horizon"),
        (["--forecast-from", "fixed"], "need --horizon"),
        (["--horizon", "3", "--forecast", "best", "--forecast-from", "fixed"], "choose one"),
    ],
)
def test_cli_bad_horizon_is_a_one_line_error(tmp_path, capsys, extra, fragment) -> None:
    out = tmp_path / "o"
    argv = ["fit", AIRLINE_TRAIN, "--search", "cks", "--budget", "1", "--out", str(out)]
    code = main([*argv, "--quiet", *extra])
    stdout, err = capsys.readouterr()
    assert code != 0 and stdout == ""
    assert err.startswith("prolas: error:") and fragment in err and err.count("\n") == 1
    assert not out.exists()


def test_forecast_trend_reaches_the_choice_of_models(tmp_path, monkeypatch, capsys) -> None:
    """``--forecast-trend`` (CLI) and ``trend=`` (API) decide which top models a forecast
    takes; the default is ``linear``; a bad value is a one-line error."""
    import prolas.report.forecast as fc_module
    from prolas import KernelSearch
    from prolas.errors import ProlasError

    seen = []
    real = fc_module.top_fits

    def spy(*args, **kwargs):
        seen.append(kwargs.get("trend"))
        return real(*args, **kwargs)

    monkeypatch.setattr(fc_module, "top_fits", spy)
    for extra, trend in (([], "linear"), (["--forecast-trend", "any"], "any")):
        out = tmp_path / trend
        argv = ["fit", AIRLINE_TRAIN, *QUICK_CKS, "--horizon", "3", "--forecast-from", "search"]
        argv += [*extra, "--out", str(out)]
        assert main([*argv, "--quiet"]) == 0
        assert seen[-1] == trend
    capsys.readouterr()
    with pytest.raises(SystemExit):  # argparse's own error for a bad choice
        main(["fit", AIRLINE_TRAIN, "--horizon", "3", "--forecast-trend", "cubic"])
    assert "invalid choice: 'cubic'" in capsys.readouterr().err
    ks = KernelSearch(method="cks", budget=3, restarts=1).fit(AIRLINE_TRAIN)
    ks.forecast(3, trend="any", source="search")
    assert seen[-1] == "any"
    with pytest.raises(ProlasError, match="trend must be one of linear, any, got 'cubic'"):
        ks.forecast(3, trend="cubic")


def test_cli_help_explains_horizon(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--horizon H" in text and "forecast.csv" in text
    assert "--forecast {best,bma,rolling,rolling-mix,horizon-mix}" in text
