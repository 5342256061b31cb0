"""The horizon mixture: weights from forecasts at the forecast's own lead times, each
model refitted before each origin, and its band factor cross-fitted over the origins."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import prolas.report.forecast as fc_module
from prolas.gp import fit_gp, predict
from prolas.report.forecast import (
    BAND_SCALE_MIN_POINTS,
    band_scale,
    forecast,
    forecast_title,
    held_out_weights,
    horizon_band_scale,
    horizon_check,
    horizon_weights,
    origin_weights,
    rolling_weights,
)


def _log_normal(y, mean, var):
    return -0.5 * (np.log(2 * np.pi * var) + (y - mean) ** 2 / var)


def test_check_forecasts_h_steps_from_five_origins_with_refitted_models(
    trend_season, fits, monkeypatch
) -> None:
    """n = 60, horizon 12: origins evenly in [36, 48], 12 points each, every model
    refitted on each prefix (5 origins x 3 models), pairs labelled by origin."""
    calls = []
    real = fc_module._refit

    def spy(fit, prefix):
        calls.append((fit.expression, prefix.n))
        return real(fit, prefix)

    monkeypatch.setattr(fc_module, "_refit", spy)
    check = horizon_check(fits, trend_season, 12, refit=True)
    assert check is not None and check.refit and check.n_origins == 5
    assert check.n_pairs == 60 and check.means.shape == check.sds.shape == (3, 60)
    assert sorted({n for _, n in calls}) == [36, 39, 42, 45, 48] and len(calls) == 15
    np.testing.assert_array_equal(check.origin, np.repeat(np.arange(5), 12))
    # the pairs are the standardised points after each origin
    expected = np.concatenate([trend_season.y[o : o + 12] for o in (36, 39, 42, 45, 48)])
    np.testing.assert_allclose(check.y, trend_season.standardise(expected))
    # a horizon longer than a third of the data is cut to n // 3
    assert horizon_check(fits[:1], trend_season, 50).n_pairs == 5 * 20
    assert horizon_check(fits[:1], trend_season.take(np.arange(2), "2"), 12) is None


def test_weights_are_the_summed_log_density_of_refitted_forecasts_by_hand(
    trend_season, fits
) -> None:
    """w_i ∝ exp(Σ_o Σ_t log p(y_t | y_<o, M_i refitted on y_<o)), recomputed with
    fit_gp and predict directly (no code of the check)."""
    from prolas.gp import FitConfig

    horizon, origins = 6, np.linspace(60 - 12, 60 - 6, 5).round().astype(int)
    total = np.zeros(len(fits))
    for o in origins:
        prefix = trend_season.take(np.arange(o), "prefix")
        for i, f in enumerate(fits):
            g = fit_gp(f.expression, prefix, FitConfig(restarts=1), init=f, cold=False)
            mean, var = predict(g, prefix.standardised_view(), trend_season.x[o : o + horizon])
            var = var + g.noise_variance
            y = trend_season.standardise(trend_season.y[o : o + horizon])
            total[i] += _log_normal(y, mean, var).sum()
    expected = np.exp(total - total.max())
    expected /= expected.sum()
    w, table, check = horizon_weights(fits, trend_season, horizon)
    np.testing.assert_allclose(w, expected, rtol=1e-6, atol=1e-300)
    assert check is not None and check.n_pairs == 30
    assert list(table["model"]) == [f.expression for f in fits]
    np.testing.assert_allclose(table["horizon_weight"], w)
    assert (table["n_predictions"] == 30).all() and (table["n_origins"] == 5).all()
    # the model of the data's structure forecasts its end best, 6 steps out
    assert w[0] > 0.99


def test_the_weights_follow_the_forecasts_not_the_bic(trend_season, fits) -> None:
    inflated = dataclasses.replace(fits[1], bic=fits[0].bic + 10.0)
    mix = forecast([fits[0], inflated, fits[2]], trend_season, 12, method="horizon-mix")
    assert mix.models == ("LIN + PER", "SE", "LIN") and mix.weights[0] > 0.99
    assert sum(mix.weights) == pytest.approx(1.0)
    np.testing.assert_allclose(mix.mean, np.asarray(mix.weights) @ mix.component_means)
    assert mix.check is not None and "horizon_weight" in mix.check
    assert forecast_title(mix).endswith("weighted by their refitted forecasts at its lead times")


def test_held_out_weights_score_each_origin_with_the_other_origins(trend_season, fits) -> None:
    check = horizon_check(fits, trend_season, 6, refit=True)
    bics = [f.bic for f in fits]
    w = held_out_weights(check, bics)
    assert w.shape == (3, check.n_pairs)
    np.testing.assert_allclose(w.sum(axis=0), 1.0)
    lpd = fc_module._log_normal(check.y, check.means, check.sds)
    for r in range(check.n_origins):
        mine = check.origin == r
        total = lpd[:, ~mine].sum(axis=1)
        expected = np.exp(total - total.max())
        expected /= expected.sum()
        np.testing.assert_allclose(w[:, mine], np.repeat(expected[:, None], mine.sum(), 1))
    # one origin: nothing to hold out, every column is the weights of all pairs
    one = dataclasses.replace(check, origin=np.zeros_like(check.origin), n_origins=1)
    full, _, _ = horizon_weights(fits, trend_season, 6)
    np.testing.assert_allclose(held_out_weights(one, bics), np.repeat(full[:, None], 30, 1))


def test_cross_fitted_band_of_one_model_is_the_refitted_band(trend_season, fits) -> None:
    """A single model has weight 1 whatever is held out: the cross-fitted factor is
    band_scale's refitted one."""
    narrow = dataclasses.replace(fits[0], noise_variance=fits[0].noise_variance / 25)
    check = horizon_check([narrow], trend_season, 12, refit=True)
    assert horizon_band_scale(check, [narrow.bic]) == band_scale(
        [narrow], trend_season, [1.0], 12, refit=True
    )


def test_a_horizon_mix_forecast_scales_its_band_by_the_cross_fitted_factor(
    trend_season, fits
) -> None:
    own = forecast(fits, trend_season, horizon=12, method="horizon-mix")
    cal = forecast(fits, trend_season, horizon=12, method="horizon-mix", band="refitted")
    check = horizon_check(fits, trend_season, 12, refit=True)
    s, points = horizon_band_scale(check, [f.bic for f in fits], fc_module.HORIZON_MIX_DRAWS)
    assert own.band_scale == 1.0 and cal.band_scale == s and points == 60
    # the option's default weights are pseudo-BMA+ with HORIZON_MIX_DRAWS draws
    totals = fc_module._origin_totals(check)
    expected = origin_weights(totals, [f.bic for f in fits], fc_module.HORIZON_MIX_DRAWS)
    np.testing.assert_allclose(cal.weights, expected)
    assert cal.weights == own.weights
    np.testing.assert_array_equal(cal.mean, own.mean)
    np.testing.assert_allclose(cal.component_sds, s * own.component_sds, rtol=1e-12)


def test_too_few_pairs_fall_back_to_the_rolling_weights(trend_season, fits) -> None:
    """8 points, horizon 12: H_c = 8 // 3 = 2 steps from the origins 4, 5, 6, i.e. 6 pairs,
    fewer than BAND_SCALE_MIN_POINTS: the weights are rolling-mix's."""
    short = trend_season.take(np.arange(8), "8 points")
    refits = [fit_gp(f.expression, short, restarts=1) for f in fits]
    check = horizon_check(refits, short, 12, refit=True)
    assert check is not None and check.n_pairs < BAND_SCALE_MIN_POINTS
    w, table, pairs = horizon_weights(refits, short, 12)
    expected, expected_table = rolling_weights(refits, short)
    np.testing.assert_allclose(w, expected)
    assert pairs is None and "rolling_weight" in table
    assert horizon_weights(refits[:1], short, 12)[0].tolist() == [1.0]


def test_weights_stay_finite_when_no_score_is(trend_season, fits, monkeypatch) -> None:
    monkeypatch.setattr(fc_module, "_log_normal", lambda y, m, s: np.full(m.shape, -math.inf))
    w, _, _ = horizon_weights(fits, trend_season, 6)
    np.testing.assert_allclose(w, fc_module.bic_weights([f.bic for f in fits]))


def test_cli_horizon_mix_writes_its_check_and_says_how_it_weighted(tmp_path, capsys) -> None:
    import pandas as pd
    from conftest import QUICK_CKS, ROOT

    from prolas.cli import main

    out = tmp_path / "out"
    argv = ["fit", str(ROOT / "data" / "airline_train.csv"), *QUICK_CKS, "--horizon", "12"]
    argv += ["--forecast", "horizon-mix", "--forecast-from", "search"]
    assert main([*argv, "--out", str(out)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "forecasts of the data's end up to 12 steps ahead, refitted before each origin" in err
    assert "band scaled by" in err  # the default band, refitted: cross-fitted here
    check = pd.read_csv(out / "forecast_check.csv")
    assert check["horizon_weight"].sum() == pytest.approx(1.0)
    assert (check["n_origins"] == 5).all() and (check["n_predictions"] == 60).all()
    assert len(pd.read_csv(out / "forecast.csv")) == 12


def test_origin_weights_without_draws_are_pseudo_bma_of_the_summed_totals() -> None:
    totals = np.array([[-3.0, -1.0, -2.0], [-2.5, -2.0, -1.0], [-9.0, -8.0, -7.0]])
    expected = np.exp(totals.sum(1) - totals.sum(1).max())
    np.testing.assert_allclose(origin_weights(totals, [0, 0, 0]), expected / expected.sum())


def test_pseudo_bma_plus_is_the_mean_softmax_over_dirichlet_draws_by_hand() -> None:
    """Yao et al. (2018) §3.4 on origins: w = mean_b softmax(R Σ_r α^b_r L_ir)."""
    totals = np.array([[-1.0, -10.0, -1.0, -1.0], [-5.0, -4.0, -6.0, -5.5]])
    alpha = np.random.default_rng(0).dirichlet(np.ones(4), size=500)
    z = 4 * alpha @ totals.T
    soft = np.exp(z - z.max(1, keepdims=True))
    expected = (soft / soft.sum(1, keepdims=True)).mean(0)
    w = origin_weights(totals, [0, 0], draws=500)
    np.testing.assert_allclose(w, expected, rtol=1e-12)
    assert w.sum() == pytest.approx(1.0)
    # model 0 wins on three origins (by 13.5) and loses on one (by 6): pseudo-BMA gives
    # it 1 - 6e-4; the bootstrap, where that one origin can weigh most, leaves model 1 more
    plain = origin_weights(totals, [0, 0])
    assert plain[0] > 1 - 1e-3 and 0.02 < w[1] < 0.5
    # reproducible, and more draws converge to the same weights
    np.testing.assert_array_equal(w, origin_weights(totals, [0, 0], draws=500))
    many = origin_weights(totals, [0, 0], draws=20_000, seed=1)
    np.testing.assert_allclose(many, w, atol=0.03)


def test_origin_weights_drop_a_model_with_a_non_finite_score() -> None:
    totals = np.array([[-1.0, np.nan], [-2.0, -2.0], [-3.0, -1.0]])
    for draws in (0, 200):
        w = origin_weights(totals, [0, 0, 0], draws)
        assert w[0] == 0.0 and w.sum() == pytest.approx(1.0)
    bics = [1.0, 3.0, 2.0]
    none = np.full((3, 2), -np.inf)
    np.testing.assert_allclose(origin_weights(none, bics, 100), fc_module.bic_weights(bics))


def test_a_bootstrapped_horizon_mix_uses_the_same_pairs(trend_season, fits) -> None:
    plain = forecast(fits, trend_season, horizon=12, method="horizon-mix", band="refitted")
    boot = forecast(
        fits, trend_season, horizon=12, method="horizon-mix", band="refitted", draws=300
    )
    check = horizon_check(fits, trend_season, 12, refit=True)
    bics = [f.bic for f in fits]
    w = origin_weights(fc_module._origin_totals(check), bics, 300)
    np.testing.assert_allclose(boot.weights, w)
    assert boot.band_scale == horizon_band_scale(check, bics, 300)[0]
    np.testing.assert_allclose(boot.component_means, plain.component_means)
    with pytest.raises(fc_module.ForecastError, match="draws"):
        forecast(fits, trend_season, horizon=12, method="rolling-mix", draws=10)
    with pytest.raises(fc_module.ForecastError, match="band_score"):
        forecast(fits, trend_season, horizon=12, method="best", band_score="interval")
    with pytest.raises(fc_module.ForecastError, match="band score"):
        forecast(fits, trend_season, horizon=12, method="horizon-mix", band_score="crps")


def _synthetic_check(k: float, n_pairs: int = 4000, seed: int = 3):
    """One model predicting N(0, 1) for points drawn from N(0, k²), five origins."""
    rng = np.random.default_rng(seed)
    y = k * rng.standard_normal(n_pairs)
    return fc_module.HorizonCheck(
        y=y,
        means=np.zeros((1, n_pairs)),
        sds=np.ones((1, n_pairs)),
        origin=np.repeat(np.arange(5), n_pairs // 5),
        n_origins=5,
        refit=True,
    )


@pytest.mark.parametrize("k", [0.7, 1.0, 2.0])
def test_interval_band_factor_finds_the_spread_of_the_errors(k) -> None:
    """Points from N(0, k²), a model saying N(0, 1): the factor of least interval score
    is k (the 95 % interval that holds 95 % of the points), as is the log-score one."""
    check = _synthetic_check(k)
    s_int, pairs = horizon_band_scale(check, [0.0], score="interval")
    s_log, _ = horizon_band_scale(check, [0.0], score="log")
    assert pairs == 4000
    assert s_int == pytest.approx(k, rel=0.08) and s_log == pytest.approx(k, rel=0.05)
    # the chosen factor's band holds about 95 % of the check's points
    inside = np.abs(check.y) <= 1.959964 * s_int
    assert 0.93 <= inside.mean() <= 0.97


def test_interval_band_factor_minimises_a_hand_written_interval_score() -> None:
    """Heavy-tailed errors (Student t, 3 degrees of freedom): brute force over the same
    grid with the closed-form Gaussian quantiles m ± 1.96 s sd."""
    rng = np.random.default_rng(7)
    y = rng.standard_t(3, size=500)
    check = fc_module.HorizonCheck(
        y=y,
        means=np.zeros((1, 500)),
        sds=np.ones((1, 500)),
        origin=np.repeat(np.arange(5), 100),
        n_origins=5,
        refit=True,
    )
    grid = np.exp(np.linspace(math.log(0.5), math.log(4.0), 97))
    z = 1.959963984540054

    def score(g):
        lo, hi = -z * g, z * g
        return np.mean((hi - lo) + 40 * (lo - y) * (y < lo) + 40 * (y - hi) * (y > hi))

    expected = grid[int(np.argmin([score(g) for g in grid]))]
    assert horizon_band_scale(check, [0.0], score="interval")[0] == pytest.approx(expected)
    with pytest.raises(fc_module.ForecastError, match="band score"):
        horizon_band_scale(check, [0.0], score="crps")


def test_mixture_cdf_takes_one_weight_column_per_point() -> None:
    rng = np.random.default_rng(0)
    means, sds = rng.normal(size=(3, 7)), rng.uniform(0.5, 2, size=(3, 7))
    w = rng.dirichlet(np.ones(3), size=7).T  # (3, 7)
    q = rng.normal(size=7)
    per_point = [
        fc_module.mixture_cdf(q[j : j + 1], means[:, j : j + 1], sds[:, j : j + 1], w[:, j])
        for j in range(7)
    ]
    np.testing.assert_allclose(fc_module.mixture_cdf(q, means, sds, w), np.concatenate(per_point))


def test_the_band_factors_interval_score_is_the_scores_interval_score() -> None:
    from prolas.report.scoring import interval_score

    rng = np.random.default_rng(2)
    y, mid = rng.normal(size=50), rng.normal(size=50)
    lower, upper = mid - rng.uniform(0.1, 2, 50), mid + rng.uniform(0.1, 2, 50)
    assert fc_module._interval_score(y, lower, upper, 0.05) == pytest.approx(
        interval_score(y, lower, upper, 0.05), rel=1e-12
    )
