"""benchmarks/scripts/forecast_choice.py: the seed-by-seed comparison of the forecasts."""

from __future__ import annotations

import json
import math

import pandas as pd
from conftest import DATA, ROOT, load_script

fc = load_script("forecast_choice")


def _rows(name: str, rmse: dict[str, list[float]]) -> list[dict]:
    return [
        {"dataset": name, "method": "prolas", "seed": s, "way": way, "rmse": v}
        for way, values in rmse.items()
        for s, v in enumerate(values)
    ]


def test_paired_reports_mean_log_ratios_and_seed_counts() -> None:
    table = pd.DataFrame(
        _rows("airline", {"best": [2.0, 1.0], "bma": [1.0, 1.0], "rolling": [0.5, 2.0]})
        + _rows("mauna", {"best": [1.0, 1.0], "bma": [1.0, 1.0], "rolling": [1.0, 4.0]})
    )
    text = fc.paired(table)
    lines = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()}
    # airline: best log 2 and 0 (mean 0.347, s.e. 0.347; 0 better, 1 worse);
    # rolling log 0.5 and log 2 (mean 0, s.e. 0.693; 1 better, 1 worse)
    ln2 = math.log(2)
    assert f"+{ln2 / 2:.3f} ± {ln2 / 2:.3f} (0/1)" in lines["airline"]
    assert f"+0.000 ± {ln2:.3f} (1/1)" in lines["airline"]
    assert f"+{math.log(4) / 2:.3f} ± {math.log(4) / 2:.3f} (0/1)" in lines["mauna"]
    # airline is a tuning series, mauna is not
    assert "(1/1)" in lines["tuning series, pooled"] and "(0/1)" in lines["other series, pooled"]
    assert "| data | method | best | rolling |" in text  # bma is the reference column


def test_refits_of_the_top_models_use_the_grids_fit_seed(monkeypatch) -> None:
    # a grid run with prolas bench --fit-seed K must be refitted with seed K, not 0
    cell = json.loads(
        (ROOT / "benchmarks/results/extrapolation/cells/airline__prolas__seed0.json").read_text()
    )
    seeds: list[int] = []
    real_fit = fc.fit_gp

    def spy(expr, data, config):
        seeds.append(config.seed)
        return real_fit(expr, data, type(config)(restarts=1, seed=config.seed))

    monkeypatch.setattr(fc, "fit_gp", spy)
    rows = fc.evaluate_cell(cell, DATA, k=2, restarts=8, lengthscale_floor=1.0, fit_seed=3)
    assert seeds and set(seeds) == {3}
    assert {r["way"] for r in rows} == {
        "best",
        "bma",
        "rolling",
        "rolling_mix",
        "horizon_mix",
        "best_all",
    }
