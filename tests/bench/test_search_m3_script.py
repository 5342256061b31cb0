"""benchmarks/scripts/search_m3.py: PROLAS against CKS from a bench --forecast run."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import load_script

sm = load_script("search_m3")


def _run(tmp_path):
    """A bench --forecast folder with two series: its score table and PROLAS's journals
    (elapsed seconds and BIC per evaluation)."""
    rows = [
        # series a: PROLAS ends higher, but only after CKS's wall time (10 s)
        ("a", "tuning", "prolas", -70.0, 20.0),
        ("a", "tuning", "cks", -72.0, 10.0),
        # series b: PROLAS ends 0.05 lower (a tie) and is there by CKS's wall time
        ("b", "report", "prolas", -50.05, 8.0),
        ("b", "report", "cks", -50.0, 16.0),
        ("b", "report", "ets", None, 0.1),
    ]
    table = pd.DataFrame(rows, columns=["series", "half", "method", "bic", "search_seconds"])
    table["status"] = "ok"
    table.to_csv(tmp_path / "forecast_scores.csv", index=False)
    journals = {
        "a": [(3.0, -75.0), (9.0, -73.0), (15.0, -70.0)],
        "b": [(2.0, -60.0), (7.5, -50.05)],
    }
    for name, entries in journals.items():
        folder = tmp_path / "prolas" / name
        folder.mkdir(parents=True)
        lines = [json.dumps({"prolas_journal": 1})]
        lines += [json.dumps({"status": "ok", "bic": b, "elapsed": t}) for t, b in entries]
        lines.append(json.dumps({"status": "failed", "bic": None, "elapsed": 1.0}))
        (folder / "journal.jsonl").write_text("\n".join(lines) + "\n")
    # series a's searches, result.json: 20 s of wall time, of which fits 3 + 5 (PROLAS)
    for method, wall, seconds in (("prolas", 20.0, [3.0, 5.0]), ("cks", 10.0, [4.0, None])):
        folder = tmp_path / method / "a"
        folder.mkdir(parents=True, exist_ok=True)
        history = [{"seconds": s} for s in seconds]
        result = {"search": {"wall_seconds": wall}, "history": history}
        (folder / "result.json").write_text(json.dumps(result))
    return tmp_path


def test_per_series_reads_both_searches_and_the_best_at_cks_wall_time(tmp_path) -> None:
    table = sm.per_series(_run(tmp_path)).set_index("series")
    assert list(table.index) == ["a", "b"]
    assert table.loc["a", "difference"] == pytest.approx(2.0)
    assert table.loc["a", "time_ratio"] == pytest.approx(2.0)
    # by CKS's 10 s, PROLAS had reached -73 (the -70 came at 15 s)
    assert table.loc["a", "prolas_bic_at_cks_time"] == -73.0
    assert table.loc["b", "prolas_bic_at_cks_time"] == -50.05


def test_per_series_splits_each_search_s_wall_time_into_fits_and_its_own(tmp_path) -> None:
    table = sm.per_series(_run(tmp_path)).set_index("series")
    # PROLAS on a: 20 s wall, fits 3 + 5 = 8 s, so 12 s its own, 2 fits
    assert table.loc["a", "prolas_fit_seconds"] == 8.0
    assert table.loc["a", "prolas_own_seconds"] == 12.0
    assert table.loc["a", "prolas_fits"] == 2
    # CKS on a: a failed fit has no seconds (None counts as 0): 4 s of fits, 6 s its own
    assert table.loc["a", "cks_own_seconds"] == 6.0
    # no result.json for b: NaN, and the medians skip it
    assert pd.isna(table.loc["b", "prolas_own_seconds"])
    assert sm.time_split(table, "run") == "| run | 8.0 / 12.0 / 2 | 4.0 / 6.0 / 2 |"


def test_summary_counts_ties_within_bic_tie(tmp_path) -> None:
    line = sm.summary(sm.per_series(_run(tmp_path)), "run")
    cells = [c.strip() for c in line.strip("|").split("|")]
    # both at least CKS's (b within 0.1); a higher, none lower; median ratio of 2 and 0.5
    assert cells[:3] == ["run", "2", "2 (100%)"]
    assert cells[3].startswith("1 / 0")
    assert cells[4] == "1.25" and cells[5] == "50%"
    assert cells[6] == "1 (50%)"  # only b was at CKS's BIC by CKS's wall time
