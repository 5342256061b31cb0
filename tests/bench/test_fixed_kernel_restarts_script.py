"""benchmarks/scripts/fixed_kernel_restarts.py: the fixed kernel's cold fits over seeds,
forecast and scored as the product forecasts a short series."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import ROOT, load_script

DATA = ROOT / "data"


def test_rows_reproduce_the_products_fixed_forecast_and_the_summary_counts(tmp_path):
    from prolas.bench.forecast_bench import suite_series
    from prolas.gp import FitConfig, fit_gp
    from prolas.limits import FIXED_FORECAST_KERNEL
    from prolas.report.forecast import forecast
    from prolas.report.scoring import forecast_predictive, score_forecast, seasonal_naive_scale

    script = load_script("fixed_kernel_restarts")
    out, md = tmp_path / "rows.csv", tmp_path / "summary.md"
    args = ["--series", "N1410", "--seeds", "0,1", "--candidates", "R8,P8"]
    assert (
        script.main([*args, "--data-dir", str(DATA), "--out", str(out), "--markdown", str(md)]) == 0
    )
    rows = pd.read_csv(out)
    assert len(rows) == 4 and (rows["status"] == "ok").all()
    assert set(rows["candidate"]) == {"R8", "P8"} and set(rows["seed"]) == {0, 1}
    # R8 at seed 1 is fit_gp at the defaults, forecast rolling-mix with the refitted band
    ((series, _),) = suite_series("m3-monthly", str(DATA), "all", ("N1410",))
    fit = fit_gp(FIXED_FORECAST_KERNEL, series.train, FitConfig(restarts=8, seed=1))
    fc = forecast([fit], series.train, x_new=series.test_x, method="rolling-mix", band="refitted")
    scores = score_forecast(
        series.test_y, forecast_predictive(fc), seasonal_naive_scale(series.train.y, 12)
    )
    row = rows[(rows["candidate"] == "R8") & (rows["seed"] == 1)].iloc[0]
    assert row["log_likelihood"] == pytest.approx(fit.log_likelihood, rel=1e-12)
    assert row["mase"] == pytest.approx(scores["mase"], rel=1e-9)
    r8 = rows[rows["candidate"] == "R8"].set_index("seed")["log_likelihood"]
    # the summary's stable count is the share of series whose span is within 0.5 nats
    span = r8.max() - r8.min()
    text = md.read_text()
    assert f"| R8 | 1 | {int(span <= 0.5)} (" in text and "| P8 | 1 |" in text
    with pytest.raises(SystemExit):
        script.main(["--candidates", "R9", "--out", str(out)])


def test_log_candidates_forecast_on_log_y_and_exponentiate_every_quantile(tmp_path):
    import numpy as np

    from prolas.bench.forecast_bench import suite_series
    from prolas.gp import FitConfig, fit_gp
    from prolas.limits import FIXED_FORECAST_KERNEL
    from prolas.report.forecast import forecast

    script = load_script("fixed_kernel_restarts")
    ((series, _),) = suite_series("m3-monthly", str(DATA), "all", ("N1410",))
    logged = script.log_dataset(series.train)
    np.testing.assert_allclose(logged.y, np.log(series.train.y), rtol=1e-15)
    fit = fit_gp(FIXED_FORECAST_KERNEL, logged, FitConfig(restarts=8, seed=0))
    fc = forecast([fit], logged, x_new=series.test_x, method="rolling-mix", band="refitted")
    pred = script.exp_predictive(fc)
    # one Gaussian on log y: the median is exp(mean), the band's ends exp(log-scale ends)
    np.testing.assert_allclose(pred.mean, np.exp(fc.mean), rtol=1e-9)
    np.testing.assert_allclose(pred.lower, np.exp(fc.lower), rtol=1e-12)
    assert np.all(np.diff(pred.quantiles, axis=1) > 0) and np.all(pred.lower > 0)
    # the script's L8 row is that forecast's scores
    out = tmp_path / "rows.csv"
    args = ["--series", "N1410", "--seeds", "0", "--candidates", "L8", "--out", str(out)]
    assert script.main([*args, "--data-dir", str(DATA)]) == 0
    row = pd.read_csv(out).iloc[0]
    assert bool(row["on_log_y"]) and row["log_likelihood"] == pytest.approx(fit.log_likelihood)
    scale = script.seasonal_naive_scale(series.train.y, 12)
    scores = script.score_forecast(series.test_y, pred, scale)
    assert row["mase"] == pytest.approx(scores["mase"], rel=1e-9)


def test_season_candidates_hold_the_period_as_the_product_does(tmp_path):
    from prolas.bench.forecast_bench import suite_series
    from prolas.gp import FitConfig, fit_gp
    from prolas.limits import FIXED_FORECAST_KERNEL
    from prolas.report.forecast import forecast
    from prolas.report.scoring import forecast_predictive, score_forecast, seasonal_naive_scale

    script = load_script("fixed_kernel_restarts")
    out = tmp_path / "rows.csv"
    args = ["--series", "N1410", "--seeds", "0", "--candidates", "S1", "--out", str(out)]
    assert script.main([*args, "--data-dir", str(DATA)]) == 0
    row = pd.read_csv(out).iloc[0]
    ((series, _),) = suite_series("m3-monthly", str(DATA), "all", ("N1410",))
    season = 12 * series.train.spacing
    fit = fit_gp(FIXED_FORECAST_KERNEL, series.train, FitConfig(restarts=8, season=season))
    assert fit.season == season and row["period"] == pytest.approx(season, rel=1e-12)
    assert row["log_likelihood"] == pytest.approx(fit.log_likelihood, rel=1e-12)
    fc = forecast([fit], series.train, x_new=series.test_x, method="rolling-mix", band="refitted")
    scores = score_forecast(
        series.test_y, forecast_predictive(fc), seasonal_naive_scale(series.train.y, 12)
    )
    assert row["mase"] == pytest.approx(scores["mase"], rel=1e-9)
    assert row["interval_score_scaled"] == pytest.approx(scores["interval_score_scaled"], rel=1e-9)


def test_dumped_band_material_replays_the_products_bands(tmp_path):
    import json
    import math

    from prolas.bench.forecast_bench import suite_series
    from prolas.gp import FitConfig, fit_gp
    from prolas.limits import FIXED_SEASONAL_KERNEL
    from prolas.report.forecast import forecast
    from prolas.report.scoring import forecast_predictive, score_forecast, seasonal_naive_scale

    script = load_script("fixed_kernel_restarts")
    rules = load_script("band_rules_offline")
    out, dump = tmp_path / "rows.csv", tmp_path / "dump"
    args = ["--series", "N1410", "--seeds", "0", "--candidates", "Q3", "--out", str(out)]
    assert script.main([*args, "--data-dir", str(DATA), "--dump", str(dump)]) == 0
    row = pd.read_csv(out).iloc[0]
    assert [p.name for p in dump.iterdir()] == ["N1410_0_Q3.npz"]
    replay = tmp_path / "rules.csv"
    assert (
        rules.main([str(dump), "--rules", "refitted,shrink:0.5:1.0,const:1", "--out", str(replay)])
        == 0
    )
    got = pd.read_csv(replay).set_index("rule")
    # refitted: the script's own factor and scores, from the dumped check alone
    assert got.loc["refitted", "factor"] == pytest.approx(row["band_scale"], rel=1e-12)
    for k in ("interval_score_scaled", "crps_scaled", "coverage", "mase"):
        assert got.loc["refitted", k] == pytest.approx(row[k], rel=1e-9)
    # shrink:0.5:1.0 is the product's shrunk band: the same fits forecast with band="shrunk"
    assert got.loc["shrink:0.5:1.0", "factor"] == pytest.approx(math.sqrt(row["band_scale"]))
    ((series, _),) = suite_series("m3-monthly", str(DATA), "all", ("N1410",))
    held = 12 * series.train.spacing
    fits = [
        fit_gp(FIXED_SEASONAL_KERNEL, series.train, FitConfig(restarts=8, seed=s, season=held))
        for s in (0, 3, 6)
    ]
    fc = forecast(
        fits, series.train, x_new=series.test_x, method="bma", weights=[1, 1, 1], band="shrunk"
    )
    scores = score_forecast(
        series.test_y, forecast_predictive(fc), seasonal_naive_scale(series.train.y, 12)
    )
    assert fc.band_scale == pytest.approx(got.loc["shrink:0.5:1.0", "factor"], rel=1e-12)
    for k in ("interval_score_scaled", "crps_scaled"):
        assert got.loc["shrink:0.5:1.0", k] == pytest.approx(scores[k], rel=1e-9)
    # --band shrunk: the script's row is the product's shrunk forecast itself
    shrunk_out = tmp_path / "shrunk.csv"
    argv = [*args[:-1], str(shrunk_out), "--data-dir", str(DATA), "--band", "shrunk"]
    assert script.main(argv) == 0
    shrunk = pd.read_csv(shrunk_out).iloc[0]
    assert shrunk["band"] == "shrunk" and row["band"] == "refitted"
    assert shrunk["band_scale"] == pytest.approx(fc.band_scale, rel=1e-12)
    for k in ("interval_score_scaled", "crps_scaled", "mase"):
        assert shrunk[k] == pytest.approx(scores[k], rel=1e-9)
    # a constant factor of 1 is the models' own band: narrower here than the refitted one
    assert got.loc["const:1", "width_scaled"] < got.loc["refitted", "width_scaled"]
    # --bench: the same forecast as a bench run records it (test_predictive.json, its
    # shrunk factor) gives back the refitted band's scores and its own
    folder = tmp_path / "run" / "prolas" / "N1410"
    folder.mkdir(parents=True)
    doc = {
        "band": "shrunk",
        "band_scale": fc.band_scale,
        "weights": list(fc.weights),
        "component_means": fc.component_means.tolist(),
        "component_sds": fc.component_sds.tolist(),
        "y": series.test_y.tolist(),
        "scores": {"scale": seasonal_naive_scale(series.train.y, 12)},
    }
    (folder / "test_predictive.json").write_text(json.dumps(doc))
    bench = tmp_path / "bench.csv"
    argv = [str(tmp_path / "run"), "--bench", "--rules", "refitted,shrink:0.5:1.0"]
    assert rules.main([*argv, "--out", str(bench)]) == 0
    again = pd.read_csv(bench).set_index("rule")
    for rule in ("refitted", "shrink:0.5:1.0"):
        for k in ("factor", "interval_score_scaled", "crps_scaled"):
            assert again.loc[rule, k] == pytest.approx(got.loc[rule, k], rel=1e-9)
    with pytest.raises(SystemExit, match="needs the check's pairs"):
        rules.main([str(tmp_path / "run"), "--bench", "--rules", "interval", "--out", str(bench)])


def test_trend_combination_mixes_q3s_and_d3s_fits_equally(tmp_path):
    import numpy as np

    script = load_script("fixed_kernel_restarts")
    out, dump = tmp_path / "rows.csv", tmp_path / "dump"
    args = ["--series", "N1410", "--seeds", "0", "--candidates", "Q3,D3,QD6", "--band", "shrunk"]
    assert (
        script.main([*args, "--data-dir", str(DATA), "--out", str(out), "--dump", str(dump)]) == 0
    )
    rows = pd.read_csv(out).set_index("candidate")
    q3, d3, qd6 = (np.load(dump / f"N1410_0_{c}.npz") for c in ("Q3", "D3", "QD6"))
    # QD6's six components are Q3's three fits, then D3's three, each weighted 1/6
    np.testing.assert_allclose(qd6["means"], np.vstack([q3["means"], d3["means"]]), rtol=1e-12)
    np.testing.assert_allclose(qd6["weights"], np.full(6, 1 / 6), rtol=1e-12)
    assert rows.loc["QD6", "log_likelihood"] == rows.loc["Q3", "log_likelihood"]
    # so its point forecast is the average of the two candidates' point forecasts
    point = 0.5 * (q3["means"].mean(axis=0) + d3["means"].mean(axis=0))
    mase = np.mean(np.abs(qd6["test_y"] - point)) / float(qd6["scale"])
    assert rows.loc["QD6", "mase"] == pytest.approx(mase, rel=1e-9)
