"""benchmarks/scripts/forecast_rules.py: per-model records and the rules applied to them."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
from conftest import DATA, ROOT, load_script

from prolas.gp import hold_unseen_transitions
from prolas.report.forecast import forecast, rolling_origin_check

fr = load_script("forecast_rules")
fc = sys.modules[fr.cell_fits.__module__]  # the forecast_choice module the script imported


@pytest.fixture(scope="module")
def airline_record():
    """A committed airline cell's record (2 models, quick refits), and its fits."""
    cell = json.loads(
        (ROOT / "benchmarks/results/extrapolation/cells/airline__prolas__seed0.json").read_text()
    )
    real_fit = fc.fit_gp
    fc.fit_gp = lambda expr, data, config: real_fit(
        expr, data, type(config)(restarts=1, seed=config.seed, lengthscale_floor=1.0)
    )
    try:
        rec = fr.record_cell(cell, DATA, fit_seed=0, floor=1.0, refit_check=True, k=2)
        train, test, _, fits = fc.cell_fits(cell, DATA, 2, 8, 1.0, 0)
    finally:
        fc.fit_gp = real_fit
    return rec, train, test, [hold_unseen_transitions(f, train) for f in fits]


def test_record_keeps_the_products_check_per_origin(airline_record) -> None:
    rec, train, test, fits = airline_record
    assert [m["expression"] for m in rec["models"]] == [f.expression for f in fits]
    table = rolling_origin_check(fits, train)
    for m, (_, row) in zip(rec["models"], table.iterrows()):
        assert len(m["fixed"]) == row["n_origins"] == 5
        count = sum(o["count"] for o in m["fixed"])
        assert count == row["n_predictions"]
        rmse = math.sqrt(sum(o["sse"] for o in m["fixed"]) / count)
        assert rmse == pytest.approx(row["rmse"], rel=1e-9)
        assert sum(o["slpd"] for o in m["fixed"]) / count == pytest.approx(row["mlpd"], rel=1e-9)
        for o in m["fixed"]:  # the pointwise densities behind each origin's sum
            assert len(o["lpd"]) == o["count"] and sum(o["lpd"]) == pytest.approx(o["slpd"])
        # the refitted check predicts the same points with other hyperparameters
        assert [o["count"] for o in m["refit"]] == [o["count"] for o in m["fixed"]]
        assert all(math.isfinite(o["slpd"]) for o in m["refit"])
        assert m["test_rmse"] == pytest.approx(
            float(np.sqrt(np.mean((np.asarray(m["test_mean"]) - test.y) ** 2)))
        )


def test_rules_reproduce_the_products_forecasts(airline_record) -> None:
    rec, train, test, fits = airline_record
    rules = fr.rule_rmses(rec)

    def rmse(method: str) -> float:
        f = forecast(fits, train, x_new=test.x, method=method)
        return float(np.sqrt(np.mean((f.mean - test.y) ** 2)))

    assert rules["fixed_mix"] == pytest.approx(rmse("rolling-mix"), rel=1e-9)
    assert rules["fixed_rmse"] == pytest.approx(rmse("rolling"), rel=1e-9)
    assert rules["bma"] == pytest.approx(rmse("bma"), rel=1e-9)
    assert rules["best"] == pytest.approx(rmse("best"), rel=1e-6)
    # stacking's mean is a convex combination of the models' means, so by the triangle
    # inequality its RMSE is at most the worst model's
    assert rules["fixed_stack"] <= max(m["test_rmse"] for m in rec["models"]) + 1e-9


def _model(name: str, bic: float, mean: list[float], sse: list[float], slpd: list[float]):
    checks = [
        {"origin": i, "sse": s, "slpd": d, "count": 2} for i, (s, d) in enumerate(zip(sse, slpd))
    ]
    return {"expression": name, "bic": bic, "test_rmse": abs(mean[0] - 1.0), "test_mean": mean,
            "test_sd": [1.0], "fixed": checks, "refit": None}  # fmt: skip


def test_rules_on_a_hand_made_record() -> None:
    # A: higher BIC, one bad origin; B: better pooled density and two better origins
    rec = {
        "dataset": "airline",
        "seed": 0,
        "fit_seed": 0,
        "test_y": [1.0],
        "models": [
            _model("A", 10.0, [3.0], sse=[20.0, 1.0, 1.0], slpd=[-50.0, -1.0, -1.0]),
            _model("B", 10.0 - math.log(3), [0.0], sse=[4.0, 4.0, 4.0], slpd=[-5.0, -5.0, -5.0]),
        ],
    }
    r = fr.rule_rmses(rec)
    assert r["best"] == 2.0 and r["bma"] == pytest.approx(abs(0.75 * 3.0 - 1.0))  # w 3:1
    assert r["fixed_rmse"] == 1.0  # pooled squared error: A 22, B 12
    assert r["fixed_mlpd"] == 1.0  # A -52, B -15
    assert r["fixed_logrmse"] == 2.0  # mean log: A (log 10 + 2 log 0.5) / 3 < B log 2
    assert r["fixed_rank"] == 2.0  # A first at two origins of three; ties to A
    w_a = 1.0 / (1.0 + math.exp(37.0))
    assert r["fixed_mix"] == pytest.approx(abs(w_a * 3.0 - 1.0))
    w_a = 1.0 / (1.0 + math.exp(37.0 - math.log(3)))
    assert r["fixed_bicmix"] == pytest.approx(abs(w_a * 3.0 - 1.0))
    assert "refit_mix" not in r  # no refitted check recorded
    assert "fixed_stack" not in r  # no pointwise densities recorded
    text = fr.tables([rec, {**rec, "seed": 1}])
    assert "| fixed_mix |" in text and "tuning series, pooled" in text
    # against ABCD's published airline RMSE (16.67): best 2 / 16.67, below it
    assert f"| best | {2 / 16.67:.3f} | 1 of 1 (airline) |" in text


def _log_score(lpd: np.ndarray, w: np.ndarray) -> float:
    with np.errstate(divide="ignore"):
        return float(np.logaddexp.reduce(lpd + np.log(w)[:, None], axis=0).sum())


def test_stacking_weights_maximise_the_mixtures_log_score() -> None:
    rng = np.random.default_rng(3)
    lpd = 2.0 * rng.normal(size=(4, 40))
    w = fr.stacking_weights(lpd)
    assert w.shape == (4,) and w.min() >= 0 and w.sum() == pytest.approx(1.0)
    best = _log_score(lpd, w)
    for _ in range(200):  # no point of the simplex scores higher
        assert _log_score(lpd, rng.dirichlet(np.ones(4))) <= best + 1e-9
    # the score is concave: moving a little towards any vertex cannot raise it
    for i in range(4):
        assert _log_score(lpd, 0.999 * w + 0.001 * np.eye(4)[i]) <= best + 1e-9


def test_stacking_splits_weight_between_models_that_each_predict_half() -> None:
    # A predicts the first half well, B the second: pseudo-BMA would pick one, stacking
    # mixes them equally; a model never better than A or B gets no weight
    good, bad = 0.0, -20.0
    lpd = np.array([[good] * 5 + [bad] * 5, [bad] * 5 + [good] * 5, [bad + 1.0] * 10])
    w = fr.stacking_weights(lpd)
    assert w[0] == pytest.approx(0.5, abs=1e-6) and w[1] == pytest.approx(0.5, abs=1e-6)
    assert w[2] < 1e-6
    # a model with a non-finite density is left out; all non-finite: uniform
    with_nan = fr.stacking_weights(np.vstack([lpd[:1], [[np.nan] * 10]]))
    assert with_nan.tolist() == [1.0, 0.0]
    assert fr.stacking_weights(np.full((2, 3), -np.inf)).tolist() == [0.5, 0.5]


def test_check_cost_script_times_both_on_a_short_series() -> None:
    cost = load_script("forecast_check_cost")
    r = cost.measure(300)
    assert r["n"] == 300 and r["bma_s"] > 0 and r["check_s"] > 0
    assert len(r["weights"]) == 5 and sum(r["weights"]) == pytest.approx(1.0, abs=0.01)


def _history(*rows: tuple[str, float]) -> dict:
    return {
        "history": [
            {"index": i + 1, "expression": e, "status": "ok", "bic": b}
            for i, (e, b) in enumerate(rows)
        ]
    }


def test_complement_is_the_best_model_of_the_missing_family() -> None:
    cell = _history(("PER", 5.0), ("CP(SE, PER)", 3.0), ("CW(LIN, SE)", 4.0), ("SE", 9.0))
    # no change model among the top: the best change model the search fitted
    assert fr.complement_expression(cell, ["SE", "PER"]) == "CW(LIN, SE)"
    # only change models among the top: the best model without one
    assert fr.complement_expression(cell, ["CW(LIN, SE)", "CP(SE, PER)"]) == "SE"
    # both families present, or none of the missing family fitted: nothing
    assert fr.complement_expression(cell, ["SE", "CW(LIN, SE)"]) is None
    assert fr.complement_expression(_history(("SE", 1.0), ("PER", 0.0)), ["SE"]) is None


def test_family_rules_mix_the_complement_by_its_check() -> None:
    models = [_model("A", 10.0, [3.0], sse=[1.0], slpd=[-2.0])]
    rec = {"dataset": "airline", "seed": 0, "fit_seed": 0, "test_y": [1.0], "models": models}
    extra = {**_model("CP(A, B)", 0.0, [1.0], sse=[1.0], slpd=[-2.0]), "has_change": True}
    r = fr.rule_rmses({**rec, "complement": extra})
    assert r["fixed_mix"] == 2.0  # one model
    assert r["fam_change"] == r["fam_both"] == pytest.approx(1.0)  # equal weights: (3 + 1) / 2
    r = fr.rule_rmses({**rec, "complement": {**extra, "has_change": False}})
    assert r["fam_change"] == 2.0 and r["fam_both"] == pytest.approx(1.0)
    r = fr.rule_rmses({**rec, "complement": None})
    assert r["fam_change"] == r["fam_both"] == 2.0
