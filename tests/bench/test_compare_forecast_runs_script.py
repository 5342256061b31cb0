"""benchmarks/scripts/compare_forecast_runs.py: one method in two forecast runs."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import load_script

cr = load_script("compare_forecast_runs")


def _scores(path, rows) -> None:
    cols = ["series", "half", "method", "status", "bic", "search_seconds"]
    t = pd.DataFrame(rows, columns=cols)
    for m in ("mase", "interval_score_scaled", "crps_scaled", "coverage"):
        t[m] = 1.0
    t.to_csv(path, index=False)


def test_bic_counts_ties_and_keeps_series_both_runs_scored(tmp_path) -> None:
    new, old = tmp_path / "new.csv", tmp_path / "old.csv"
    _scores(
        new,
        [
            ("a", "tuning", "prolas", "ok", -10.0, 5.0),  # 2 higher
            ("b", "tuning", "prolas", "ok", -20.05, 6.0),  # within 0.1
            ("c", "tuning", "prolas", "ok", -31.0, 7.0),  # 1 lower
            ("d", "report", "prolas", "ok", -5.0, 1.0),  # another half
            ("e", "tuning", "prolas", "failed", None, None),  # failed in the new run
            ("a", "tuning", "cks", "ok", 0.0, 1.0),  # another method
        ],
    )
    _scores(
        old,
        [
            ("a", "tuning", "prolas", "ok", -12.0, 10.0),
            ("b", "tuning", "prolas", "ok", -20.0, 12.0),
            ("c", "tuning", "prolas", "ok", -30.0, 14.0),
            ("d", "report", "prolas", "ok", -5.0, 2.0),
            ("e", "tuning", "prolas", "ok", -1.0, 3.0),
        ],
    )
    table = cr.paired_runs(new, old, half="tuning")
    assert sorted(table.series.unique()) == ["a", "b", "c"]
    higher, lower, within, p = cr.bic_counts(table)
    assert (higher, lower, within) == (1, 1, 1) and p == pytest.approx(1.0)
    lines = cr.report(table)
    # every series took half the old time: log ratio log(1/2), better on all three
    row = next(line for line in lines if line.startswith("| search_seconds"))
    assert "| 3 / 0 / 0 |" in row and "-0.6931" in row
    assert any("higher by > 0.1 on 1, lower on 1, within on 1" in line for line in lines)
