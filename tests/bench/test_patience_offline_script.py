"""benchmarks/scripts/patience_offline.py: a patience stop replayed on journals."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import load_script

po = load_script("patience_offline")


def _journal(path, bics, repair_after=None, repair_bic=None) -> None:
    """A journal of evaluations with BICs ``bics`` one second apart; optionally a repair
    (raising the best to ``repair_bic``) right after evaluation ``repair_after``."""
    lines = [json.dumps({"prolas_journal": 1})]
    for i, b in enumerate(bics, start=1):
        lines.append(json.dumps({"index": i, "status": "ok", "bic": b, "elapsed": float(i)}))
        if i == repair_after:
            row = {"index": 1, "status": "ok", "bic": repair_bic, "repaired_from": "X"}
            lines.append(json.dumps({**row, "elapsed": i + 0.5}))
    lines.append(
        json.dumps(
            {
                "index": len(bics) + 1,
                "status": "failed",
                "bic": None,
                "elapsed": float(len(bics) + 1),
            }
        )
    )
    path.write_text("\n".join(lines) + "\n")


def test_stop_rule_and_repairs(tmp_path) -> None:
    # 10 initial evaluations, then one improvement at 12, then flat
    bics = [0.0] * 10 + [0.05, 1.0] + [1.05] * 8
    _journal(tmp_path / "j.jsonl", bics, repair_after=15, repair_bic=3.0)
    best, elapsed = po.best_after_each_evaluation(tmp_path / "j.jsonl")
    assert len(best) == 21  # the failed evaluation counts, the repair does not
    assert best[14] == 3.0 and elapsed[14] == 15.5  # the repair joins evaluation 15
    # K = 3: the windows ending at 13-17 each hold a rise of more than 0.1 (to 1.0, then
    # the repair's 3.0); (15, 18] is the first flat one
    assert po.stop_at(best, 3) == 18
    assert po.stop_at(best, None) == 21
    assert po.stop_at(best, 30) == 21  # never checked: the window would start before 10
    # relative, window clamp(ceil(0.1 i*), 2, 30): at 14 the best (1.05) came at 12
    # (1.0, within 0.1), so the window is 2 and (12, 14] is flat: a stop before the repair
    assert po.stop_at(best, 30, ratio=0.1, k_min=2) == 14
    # ratio 1: the window is 12 at 14, then 15 after the repair: never flat enough
    assert po.stop_at(best, 30, ratio=1.0, k_min=2) == 21


def test_candidates_parse() -> None:
    assert po.parse_candidate("none", 25) == ("none", None, 0.0, 0)
    assert po.parse_candidate("20", 25) == ("20", 20, 0.0, 0)
    assert po.parse_candidate("r0.5/10", 25) == ("r0.5/10", 25, 0.5, 10)


def test_summary_counts_at_cks_and_ratio(tmp_path) -> None:
    rows = []
    for name, cks_bic in [("a", 1.0), ("b", 2.0)]:
        folder = tmp_path / "prolas" / name
        folder.mkdir(parents=True)
        _journal(folder / "journal.jsonl", [0.0] * 10 + [1.0] + [1.0] * 9 + [2.0])
        rows += [
            {
                "series": name,
                "half": "tuning",
                "method": "prolas",
                "status": "ok",
                "bic": 2.0,
                "search_seconds": 30.0,
            },
            {
                "series": name,
                "half": "tuning",
                "method": "cks",
                "status": "ok",
                "bic": cks_bic,
                "search_seconds": 10.0,
            },
        ]
    pd.DataFrame(rows).to_csv(tmp_path / "forecast_scores.csv", index=False)
    table = po.summary(po.per_series(tmp_path, [None, 5]))
    assert table.loc["none", "at_least_cks"] == 2
    assert table.loc["none", "median_ratio"] == pytest.approx(3.0)
    # K = 5 stops after 16 evaluations at best 1.0: a ties CKS, b is below it; the
    # journal's time after the stop (22 - 16 s) comes off the 30 s
    assert table.loc[5, "at_least_cks"] == 1 and table.loc[5, "median_evaluations"] == 16
    assert table.loc[5, "median_prolas_seconds"] == pytest.approx(30.0 - 6.0)
