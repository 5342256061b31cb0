"""benchmarks/scripts/forecast_pairs.py: two arms' forecasts paired per (series, fit seed)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import load_script


def _run(folder, rmse: dict[str, float], method: str = "prolas") -> None:
    """A run folder whose ``method`` scored RMSE ``rmse[series]`` (interval score twice
    it, coverage 0.9), with a peer's row and a failed row that must be ignored."""
    folder.mkdir()
    rows = [
        {"series": s, "method": method, "status": "ok", "rmse": r,
         "interval_score_scaled": 2 * r, "coverage": 0.9}
        for s, r in rmse.items()
    ]  # fmt: skip
    rows.append({"series": "x", "method": method, "status": "failed", "rmse": 1.0,
                 "interval_score_scaled": 1.0, "coverage": 0.0})  # fmt: skip
    rows.append({"series": "A", "method": "ets", "status": "ok", "rmse": 0.1,
                 "interval_score_scaled": 0.1, "coverage": 0.95})  # fmt: skip
    pd.DataFrame(rows).to_csv(folder / "forecast_scores.csv", index=False)


def test_pairs_are_per_series_and_seed_and_the_summary_counts_them(tmp_path):
    script = load_script("forecast_pairs")
    a = [tmp_path / "a0", tmp_path / "a1"]
    b = [tmp_path / "b0", tmp_path / "b1"]
    _run(a[0], {"A": 10.0, "B": 4.0})
    _run(a[1], {"A": 10.0, "B": 4.0})
    _run(b[0], {"A": 5.0, "B": 8.0})  # A better, B worse
    _run(b[1], {"A": 20.0, "B": 2.0})  # A worse, B better
    table = script.pair_table(a, b)
    assert len(table) == 4 and set(table.seed) == {0, 1}  # the failed and peer rows dropped
    row = table[(table.series == "A") & (table.seed == 0)].iloc[0]
    assert (row.rmse_a, row.rmse_b, row.is_b) == (10.0, 5.0, 10.0)
    assert row.log_ratio == pytest.approx(math.log(0.5))
    s = script.summary(table, ["A"])
    assert s["pairs"] == 2 and s["b_lower"] == 1
    assert s["mean_log_ratio"] == pytest.approx((math.log(0.5) + math.log(2.0)) / 2)
    assert (s["mean_is_a"], s["mean_is_b"]) == (20.0, 25.0)
    assert script.summary(table)["b_lower"] == 2  # all series: A at seed 0, B at seed 1


def test_arms_with_different_numbers_of_runs_are_refused(tmp_path):
    script = load_script("forecast_pairs")
    _run(tmp_path / "a0", {"A": 1.0})
    with pytest.raises(SystemExit, match="one per fit seed"):
        script.pair_table([tmp_path / "a0"], [tmp_path / "a0", tmp_path / "a0"])
