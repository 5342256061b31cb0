"""benchmarks/scripts/tsdl_goal.py: issue 42's nine-series goal from a bench run."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import load_script

tg = load_script("tsdl_goal")


def test_goal_row_counts_against_abcd_and_the_best_peer() -> None:
    # ABCD's published RMSE: airline 16.67, mauna 1.925, wages 14.9
    rows = [
        ("airline", "prolas", 15.0, 0.9),  # 0.900 of ABCD; below ETS's 18
        ("airline", "ets", 18.0, 0.9),
        ("airline", "theta", 20.0, 0.9),
        ("mauna", "prolas", 3.85, 0.8),  # 2.000 of ABCD; the best peer (ARIMA 1.0) lower
        ("mauna", "arima", 1.0, 0.9),
        ("wages", "prolas", 14.9, 1.0),  # equal to ABCD: not below; no peer forecast
        ("wages", "ets", None, None),
    ]
    scores = pd.DataFrame(rows, columns=["series", "method", "rmse", "coverage"])
    scores["status"] = ["ok"] * 6 + ["failed"]
    r = tg.goal_row(scores)
    assert r["series"] == 3
    assert r["below_abcd"] == 1  # airline only
    assert r["median_ratio"] == pytest.approx(1.0)  # median of 0.9, 1.0, 2.0
    # airline below the best peer; mauna not; wages has no peer (NaN): not counted
    assert r["below_best_peer"] == 1
    assert r["coverage"] == pytest.approx(0.9)
