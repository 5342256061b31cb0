"""The comparison harness: summary laws on hand-made histories, files on a synthetic
scorer, and the ``prolas compare`` CLI on a tiny real series (shared fit cache)."""

from __future__ import annotations

import csv
import json
import math

import pytest
from conftest import DATA

from prolas.bench.cells import cell_record
from prolas.bench.compare import compare_summary, run_compare
from prolas.bench.stats import cell_trace, reach
from prolas.records import Evaluation, SearchResult
from prolas.search.evaluator import TableScorer


def _result(method: str, seed: int, bics: list[float | None]) -> SearchResult:
    hist = [
        Evaluation(
            index=i + 1,
            expression=f"E{i}",
            status="ok" if b is not None else "failed",
            bic=b,
            log_likelihood=b,
            n_params=3,
            seconds=0.5,
            error=None if b is not None else "x",
        )
        for i, b in enumerate(bics)
    ]
    return SearchResult(method, seed, len(bics), hist, 1.0)


def _cell(method: str, result: SearchResult) -> dict:
    """A run's cell record, as run_compare keeps it."""
    return cell_record(
        result,
        dataset="d",
        method=method,
        seed=result.seed,
        n=None,
        budget=result.budget,
        wall_seconds=result.wall_seconds,
        scoring_seconds=0.0,
        new_fits=0,
    )


def test_summary_laws_on_hand_made_runs() -> None:
    cks = _result("cks", 0, [1.0, 3.0, 2.0, 5.0, 4.0])  # final 5.0 after 4 evaluations
    fast = _result("prolas", 0, [None, 6.0, 0.0, 0.0, 0.0])  # reaches 5.0 at 2
    slow = _result("prolas", 1, [0.0, 0.0, 0.0, 0.0, 5.0])  # at 5
    never = _result("random", 0, [1.0, 1.0, 1.0, 1.0, 1.0])
    assert reach(cell_trace(_cell("prolas", fast), 5), 5.0) == 2
    assert reach(cell_trace(_cell("random", never), 5), 5.0) == math.inf
    cells = [_cell("cks", cks)] + [_cell("prolas", r) for r in (fast, slow, never)]
    cells.append(_cell("random", never))
    summary, final, needed = compare_summary(cells, budget=5, methods=["cks", "prolas", "random"])
    assert (final, needed) == (5.0, 4)
    p = summary["prolas"]
    assert p["median_evals_to_cks"] == 5.0 and p["never_reach_cks"] == 1
    assert p["ratio_to_cks"] == pytest.approx(5 / 4)
    assert summary["random"]["median_evals_to_cks"] == math.inf
    assert summary["cks"]["median_evals_to_cks"] == 4 and summary["cks"]["ratio_to_cks"] == 1.0
    assert p["mean_fit_seconds_per_run"] == pytest.approx(2.5)
    assert p["mean_final_best"] == pytest.approx((6 + 5 + 1) / 3)


def test_short_runs_keep_their_final_best() -> None:
    short = _result("cks", 0, [1.0, 2.0])
    summary, _, _ = compare_summary([_cell("cks", short)], budget=12)
    assert summary["cks"]["mean_best_at_10"] == 2.0 and "mean_best_at_25" not in summary["cks"]
    # one run has no standard error
    assert math.isnan(summary["cks"]["se_final_best"])


def test_a_search_result_and_its_cell_have_one_trace() -> None:
    """SearchResult.best_trace and the statistics' cell trace are one definition
    (records.best_so_far): -inf/NaN before the first success, then the running best."""
    r = _result("random", 0, [None, 2.0, None, 1.0, 3.0])
    assert r.best_trace() == [-math.inf, 2.0, 2.0, 2.0, 3.0]
    trace = cell_trace(_cell("random", r), 7)  # padded past the end of the run
    assert math.isnan(trace[0]) and list(trace[1:]) == [2.0, 2.0, 2.0, 3.0, 3.0, 3.0]


def test_run_compare_on_a_synthetic_scorer_writes_its_files(tmp_path) -> None:
    from prolas.search.latent import LatentBOConfig

    table = {"LIN + PER": 3.0, "LIN + PER + SE": 6.0, "PER + SE": 4.0, "SE": 1.0}
    res = run_compare(
        None,
        ["cks", "random", "prolas"],
        seeds=2,
        budget=10,
        out=tmp_path,
        scorer=TableScorer(table, default=0.0, fail=frozenset({"RQ"})),
        prolas_options=LatentBOConfig(
            n_init=4, num_restarts=2, raw_samples=32, pool_sobol=128, pool_local=128
        ),
        progress=False,
    )
    names = {p.name for p in res.files}
    assert names == {"evaluations.csv", "summary.csv", "summary.md", "convergence.png"}
    assert (tmp_path / "convergence.png").stat().st_size > 5_000
    rows = list(csv.DictReader(open(tmp_path / "evaluations.csv")))
    assert len(rows) == sum(r.evaluations for rs in res.runs.values() for r in rs)
    assert {r["method"] for r in rows} == {"cks", "random", "prolas"}
    assert len(res.runs["cks"]) == 1 and len(res.runs["prolas"]) == 2
    assert any(r["status"] == "failed" and r["bic"] == "" for r in rows)
    md = (tmp_path / "summary.md").read_text()
    assert "CKS final BIC" in md and "| prolas | 2 |" in md


def test_compare_cli_on_a_tiny_series_shares_the_fit_cache(tmp_path, capsys) -> None:
    from prolas.cli import main

    lines = (DATA / "airline.csv").read_text().splitlines()[:41]  # 40 points
    data = tmp_path / "tiny.csv"
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "cmp"
    args = ["compare", str(data), "--methods", "cks,random", "--seeds", "2", "--budget", "3"]
    args += ["--restarts", "1", "--out", str(out), "--quiet"]
    assert main(args) == 0
    fits = [json.loads(x) for x in (out / "fits.jsonl").read_text().splitlines()]
    rows = list(csv.DictReader(open(out / "evaluations.csv")))
    assert len(rows) == 3 * 3  # cks once, random twice, 3 evaluations each
    # each distinct expression was fitted once, whichever run asked first
    assert len(fits) == len({r["expression"] for r in rows})
    bic = {}
    for r in rows:
        assert bic.setdefault(r["expression"], r["bic"]) == r["bic"]
    capsys.readouterr()
    assert main(args) == 0  # a rerun is served entirely from the cache
    assert len((out / "fits.jsonl").read_text().splitlines()) == len(fits)
