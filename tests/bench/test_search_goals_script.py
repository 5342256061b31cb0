"""benchmarks/scripts/search_goals.py: issue 18's four goals from bench cells."""

from __future__ import annotations

import json
import math

import pytest
from conftest import bench_cell, load_script


def _script():
    return load_script("search_goals")


def test_seconds_to_reach_adds_fit_seconds_and_a_share_of_the_strategy() -> None:
    sg = _script()
    cell = bench_cell("prolas", 0, [1.0, None, 5.0, 2.0], seconds=2.0, strategy=4.0)
    assert sg.seconds_to_reach(cell, 5.0, 4) == pytest.approx(3 * 2.0 + 4.0 * 3 / 4)
    assert sg.seconds_to_reach(cell, 1.0, 4) == pytest.approx(2.0 + 1.0)
    assert math.isinf(sg.seconds_to_reach(cell, 5.5, 4))
    assert sg.search_seconds(cell) == 12.0


def test_best_by_seconds_counts_only_evaluations_finished_in_time() -> None:
    sg = _script()
    # each evaluation ends 2 s of fit plus 1 s of strategy after the last: at 3, 6, 9, 12 s
    cell = bench_cell("prolas", 0, [1.0, None, 5.0, 7.0], seconds=2.0, strategy=4.0)
    assert sg.best_by_seconds(cell, 2.9, 4) == -math.inf
    assert sg.best_by_seconds(cell, 3.0, 4) == 1.0
    assert sg.best_by_seconds(cell, 8.9, 4) == 1.0  # the failed fit scores nothing
    assert sg.best_by_seconds(cell, 9.0, 4) == 5.0
    assert sg.best_by_seconds(cell, 100.0, 3) == 5.0  # never past the budget
    assert sg.best_by_seconds(cell, 100.0, 4) == 7.0


def test_goals_follow_their_definitions() -> None:
    sg = _script()
    cells = [
        # CKS reaches its final BIC 5 at fit 3 of 4, in 4 s (one core)
        bench_cell("cks:change", 0, [1.0, 2.0, 5.0, 5.0]),
        bench_cell("cks", 0, [1.0, 9.0, 9.0, 9.0]),  # plain CKS is not the reference
        bench_cell("prolas", 0, [5.0, 6.0, 6.0, 6.0], seconds=3.0),  # fit 1, 3 s
        bench_cell("prolas", 1, [0.0, 5.0, 5.0, 5.0], seconds=3.0),  # fit 2, 6 s
        bench_cell("prolas", 2, [0.0, 0.0, 0.0, 4.0], seconds=3.0),  # never
        bench_cell("random", 0, [4.0, 4.0, 4.0, 4.0]),
    ]
    (row,) = sg.goal_rows(cells, budget=4)
    assert row["cks_final_bic"] == 5.0 and row["cks_fits"] == 3.0 and row["cks_seconds"] == 4.0
    assert row["fits_to_cks"] == 2.0 and row["never"] == 1
    assert row["seconds_to_cks"] == 6.0
    assert row["best_mean"] == pytest.approx(5.0)
    assert row["fits"] and row["bic"] and row["random"]
    assert not row["time"] and not row["time_two_cores"]  # 6 s against 4 s and 2 s
    # by CKS's 4 s each seed has its first fit only: 5, 0 and 0
    assert row["at_cks_time_mean"] == pytest.approx(5.0 / 3) and not row["at_cks_time"]
    text = sg.goals_markdown([row], 4, "prolas", "cks:change")
    # one random seed: no t-test, and no p-value printed
    assert "| d | 3 | 5.00 (3, 4.0) | 5.00 ± 0.58 | 2 (1/3) | 6.0 | 4.00 (1) |" in text
    assert math.isnan(row["random_p"])
    assert "| mean best BIC ≥ CKS's final | 1 of 1 | 8 |" in text
    # against plain CKS's 9, PROLAS never gets there and misses the BIC goal
    (plain,) = sg.goal_rows(cells, budget=4, reference="cks")
    assert math.isinf(plain["fits_to_cks"]) and not plain["bic"] and not plain["fits"]


def test_against_random_search_is_a_one_sided_welch_test_over_the_seeds() -> None:
    sg = _script()
    cells = [bench_cell("cks:change", 0, [1.0, 5.0])]
    cells += [bench_cell("prolas", k, [0.0, 6.0 + 0.1 * k]) for k in range(4)]
    cells += [bench_cell("random", k, [0.0, 5.0 + 0.1 * k]) for k in range(4)]
    (row,) = sg.goal_rows(cells, budget=2)
    # means 6.15 against 5.15, both s.d. 0.129: t = 10.95 on 6 degrees of freedom
    assert row["random"] and row["random_p"] == pytest.approx(1.7e-5, rel=0.05)
    # the other way round (PROLAS below random search): p near 1
    flipped = [
        {**c, "method": {"prolas": "random", "random": "prolas"}.get(c["method"], c["method"])}
        for c in cells
    ]
    (low,) = sg.goal_rows(flipped, budget=2)
    assert not low["random"] and low["random_p"] > 0.99
    # equal means: p = 1/2
    same = [c for c in cells if c["method"] != "random"]
    same += [{**c, "method": "random"} for c in cells if c["method"] == "prolas"]
    (tie,) = sg.goal_rows(same, budget=2)
    assert tie["random_p"] == pytest.approx(0.5)
    # every seed of both at one optimum (to the last bits): no test, and not above
    flat = [bench_cell("cks:change", 0, [1.0, 5.0])]
    flat += [
        bench_cell(m, k, [0.0, 5.0 + 1e-12 * k]) for m in ("prolas", "random") for k in range(4)
    ]
    (level,) = sg.goal_rows(flat, budget=2)
    assert math.isnan(level["random_p"]) and not level["random"]


def test_script_writes_the_goals_and_the_summary(tmp_path) -> None:
    sg = _script()
    cells_dir = tmp_path / "grid" / "cells"
    cells_dir.mkdir(parents=True)
    for cell in [
        bench_cell("cks:change", 0, [1.0, 5.0]),
        bench_cell("prolas", 0, [6.0, 6.0]),
        bench_cell("prolas", 1, [0.0, 5.0]),
        {**bench_cell("SE", 0, [3.0]), "method": "SE"},  # baselines are left out
    ]:
        name = f"d__{cell['method'].replace(':', '-')}__seed{cell['seed']}.json"
        (cells_dir / name).write_text(json.dumps(cell))
    sg.main([str(tmp_path / "grid"), "--out", str(tmp_path / "out"), "--budget", "2"])
    text = (tmp_path / "out" / "search_goals.md").read_text()
    assert "| d | 2 | 5.00 (2, 2.0) |" in text and "| – |" in text  # no random cells
    assert "CKS's final BIC at budget 2: 5.00." in (tmp_path / "out" / "summary.md").read_text()
    assert (tmp_path / "out" / "convergence_d.png").stat().st_size > 0


def test_compare_puts_grids_side_by_side(tmp_path) -> None:
    """One grid where PROLAS meets the BIC goal and one where it does not (another fit
    seed's draw); the second lacks random cells and a series."""
    sg = _script()
    met = [
        bench_cell("cks:change", 0, [1.0, 5.0]),
        bench_cell("prolas", 0, [6.0, 6.0]),
        bench_cell("random", 0, [4.0, 4.0]),
        {**bench_cell("cks:change", 0, [1.0, 2.0]), "dataset": "e"},
        {**bench_cell("prolas", 0, [1.0, 1.0]), "dataset": "e"},
    ]
    # the second grid: a reference directory whose PROLAS cell a later directory of cells
    # (no cells/ inside) replaces
    missed = [bench_cell("cks:change", 0, [1.0, 5.0]), bench_cell("prolas", 0, [9.0, 9.0])]
    missed_prolas = [bench_cell("prolas", 0, [1.0, 4.0])]
    for name, cells in [("a/cells", met), ("b/cells", missed), ("c", missed_prolas)]:
        (tmp_path / name).mkdir(parents=True)
        for cell in cells:
            file = f"{cell['dataset']}__{cell['method'].replace(':', '-')}__seed{cell['seed']}"
            (tmp_path / name / f"{file}.json").write_text(json.dumps(cell))
    out = tmp_path / "out"
    sg.main(
        ["--compare", f"s0={tmp_path / 'a'}", "--compare", f"s1={tmp_path / 'b'},{tmp_path / 'c'}"]
        + ["--out", str(out), "--budget", "2"]
    )
    text = (out / "compare.md").read_text()
    # time, 2 cores: PROLAS at 1 s is not before CKS's 2 s halved
    assert "| d | y / n | y / n | y / n | n / n | y / – |" in text
    assert "| e | n / – | n / – | n / – | n / – | – / – | n / – |" in text
    assert "| d | y / n | y / n | y / n | n / n | y / – | y / n |" in text
    assert "| at CKS's time | 1 of 2 | 0 of 1 | 7 |" in text
    assert "| BIC | 1 of 2 | 0 of 1 | 8 |" in text
    assert "| random | 1 of 1 | 0 of 0 | 9 |" in text
    assert (
        "| d | 1 | 5.00 (2, 2.0) | 4.00 ± " in (out / "search_goals_s1.md").read_text()
    )  # the later cell
    with pytest.raises(SystemExit):
        sg.main([str(tmp_path / "a"), "--compare", f"s0={tmp_path / 'a'}", "--out", str(out)])
    with pytest.raises(SystemExit):  # a grid without its label
        sg.main(["--compare", str(tmp_path / "a"), "--out", str(out)])
