"""prolas bench: a real (tiny) grid writes every file, --resume refits nothing, the
summary statistics follow their definitions, and the extrapolation table is right."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DATA, QUICK_CKS, ROOT, bench_cell

from prolas import bench
from prolas.bench import BenchConfig, MethodSpec, parse_methods
from prolas.bench.cells import EVALUATION_COLUMNS
from prolas.cli import main
from prolas.data import load_csv
from prolas.errors import OutputExistsError, ProlasError


def _airline_config(methods: str, seeds: int, budget: int) -> BenchConfig:
    """A small grid on the bundled airline data, one restart per fit."""
    return BenchConfig(
        datasets=("airline",),
        methods=parse_methods(methods),
        seeds=seeds,
        budget=budget,
        restarts=1,
        data_dir=str(DATA),
    )


def _grid_args(out: Path, seeds: int = 2, *extra: str) -> list[str]:
    return [
        "bench",
        "--datasets",
        "airline",
        "--methods",
        "cks,random",
        "--seeds",
        str(seeds),
        "--budget",
        "4",
        "--restarts",
        "1",
        "--data-dir",
        str(DATA),
        "--out",
        str(out),
        "--quiet",
        *extra,
    ]


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "grid"
    assert main(_grid_args(out)) == 0
    return out


def test_grid_writes_every_file_with_the_right_columns(grid: Path) -> None:
    ev = pd.read_csv(grid / "evaluations.csv")
    assert tuple(ev.columns) == EVALUATION_COLUMNS
    assert EVALUATION_COLUMNS[:5] == ("dataset", "method", "seed", "index", "expression")
    assert set(ev["method"]) == {"cks", "random"} and set(ev["seed"]) == {0, 1}
    # every cell used its budget of 4 unique evaluations, indexed 1..4
    for _, g in ev.groupby(["method", "seed"]):
        assert list(g["index"]) == [1, 2, 3, 4]
        assert g["expression"].is_unique
    # CKS is deterministic and every score comes from one fit cache: identical histories
    cks = ev[ev.method == "cks"]
    assert list(cks[cks.seed == 0]["bic"]) == list(cks[cks.seed == 1]["bic"])
    # the same expression has the same score whoever proposed it (one Evaluator config)
    assert (ev.groupby("expression")["bic"].nunique(dropna=False) == 1).all()

    summary = pd.read_csv(grid / "summary.csv")
    assert set(summary["method"]) == {"cks", "random"}
    for col in ("best_at_4_mean", "best_at_4_se", "evals_to_cks_median", "evals_to_cks_never"):
        assert col in summary.columns
    assert "fit_seconds_per_seed" in summary.columns
    row = summary.set_index("method").loc["cks"]
    assert row["best_at_4_mean"] == pytest.approx(cks["bic"].max())
    assert row["best_at_4_se"] == 0.0
    # CKS reaches its own final BIC exactly where its best evaluation sits
    first_best = int(cks[cks.seed == 0].sort_values("bic").iloc[-1]["index"])
    assert row["evals_to_cks_median"] == first_best and row["evals_to_cks_never"] == 0
    md = (grid / "summary.md").read_text()
    assert "## airline" in md and "`random`" in md
    assert (grid / "convergence_airline.png").stat().st_size > 5000
    fits = (grid / "fits" / "airline.jsonl").read_text().splitlines()
    assert len(fits) == ev["expression"].nunique()  # each distinct expression fitted once
    # provenance: the library versions a trajectory depends on are recorded with the run
    import torch

    run = json.loads((grid / "bench.json").read_text())["runs"][-1]
    assert run["packages"]["torch"] == torch.__version__
    assert set(bench.PROVENANCE_PACKAGES) == set(run["packages"])
    # and the machine: the same code and versions can fit differently on another CPU's BLAS
    assert run["machine"]["cpu"] and run["machine"]["cores"] >= 1
    assert any(b.startswith("openblas") for b in run["machine"]["blas"]), run["machine"]


def test_resume_skips_finished_cells_and_refits_nothing(grid: Path, tmp_path: Path) -> None:
    cells = sorted((grid / "cells").glob("*.json"))
    assert len(cells) == 4
    stamps = {p: p.stat().st_mtime_ns for p in cells}
    cache = grid / "fits" / "airline.jsonl"
    size = cache.stat().st_size

    config = _airline_config("cks,random", seeds=2, budget=4)
    run = bench.run_bench(config, grid, resume=True, progress=False)
    assert (run.cells_run, run.cells_skipped, run.new_fits) == (0, 4, 0)
    assert {p: p.stat().st_mtime_ns for p in cells} == stamps
    assert cache.stat().st_size == size

    # a lost cell is recomputed from the fit cache alone, with the same history
    lost = grid / "cells" / "airline__random__seed1.json"
    before = json.loads(lost.read_text())
    lost.unlink()
    run = bench.run_bench(config, grid, resume=True, progress=False)
    assert (run.cells_run, run.new_fits) == (1, 0)
    after = json.loads(lost.read_text())
    assert after["history"] == before["history"] and after["new_fits"] == 0
    assert cache.stat().st_size == size


def test_bench_refuses_to_clobber_or_mix_settings(grid: Path, capsys) -> None:
    assert main(_grid_args(grid)) != 0
    assert "--resume" in capsys.readouterr().err
    config = _airline_config("cks", seeds=1, budget=5)
    with pytest.raises(ProlasError, match="budget"):
        bench.run_bench(config, grid, resume=True, progress=False)
    with pytest.raises(OutputExistsError):
        bench.run_bench(config, grid, resume=False, progress=False)


def test_bench_fit_seed_gives_other_fits_and_is_a_setting_resume_must_share(
    grid: Path, tmp_path: Path, capsys
) -> None:
    def keys(out: Path) -> set[str]:
        lines = (out / "fits" / "airline.jsonl").read_text().splitlines()
        return {json.loads(line)["key"] for line in lines}

    other = tmp_path / "fit_seed_1"
    assert main(_grid_args(other, 1, "--fit-seed", "1")) == 0
    assert json.loads((other / "bench.json").read_text())["settings"]["fit_seed"] == 1
    assert json.loads((grid / "bench.json").read_text())["settings"]["fit_seed"] == 0
    assert keys(other).isdisjoint(keys(grid))  # the fit seed is part of every fit's key
    capsys.readouterr()
    assert main(_grid_args(grid, 2, "--fit-seed", "1", "--resume")) != 0
    assert "fit_seed" in capsys.readouterr().err


def test_method_specs_parse_and_reject() -> None:
    assert MethodSpec.parse("structural:ot:local") == MethodSpec(
        "structural:ot:local", "structural", "ot", "local"
    )
    spec = MethodSpec.parse("structural:arc")
    assert (spec.surrogate, spec.acq_opt) == ("arc", "ea")
    assert MethodSpec.parse("cks").method == "cks"
    for bad in ("greedy", "structural:nope", "structural:arc:nope", "cks:arc"):
        with pytest.raises(ProlasError):
            MethodSpec.parse(bad)
    with pytest.raises(ProlasError, match="twice"):
        parse_methods("cks,cks")
    with pytest.raises(ProlasError):
        bench.parse_datasets("nonexistent-series", DATA)
    assert bench.parse_datasets("all", DATA) == bench.DATASETS


def test_summary_statistics_follow_their_definitions() -> None:
    cells = [
        bench_cell("cks", 0, [1.0, 5.0, 3.0]),  # stops early at 3 evaluations, final 5
        bench_cell("x", 0, [None, 2.0, 6.0, 0.0]),  # reaches 5 at n = 3
        bench_cell("x", 1, [7.0, 1.0, 1.0, 1.0]),  # reaches 5 at n = 1
        bench_cell("x", 2, [0.0, 1.0, 2.0, 3.0]),  # never
    ]
    tr = bench.best_traces(cells, "d", "x", 4)
    assert np.isnan(tr[0, 0]) and list(tr[0, 1:]) == [2.0, 6.0, 6.0]
    assert list(bench.best_traces(cells, "d", "cks", 4)[0]) == [1.0, 5.0, 5.0, 5.0]
    s = bench.summarise(cells, budget=4, budgets=(2,)).set_index("method")
    x = s.loc["x"]
    v = np.array([2.0, 7.0, 1.0])
    assert x["best_at_2_mean"] == pytest.approx(v.mean())
    assert x["best_at_2_se"] == pytest.approx(v.std(ddof=1) / math.sqrt(3))
    assert x["best_at_4_mean"] == pytest.approx(np.mean([6.0, 7.0, 3.0]))
    assert x["cks_final_bic"] == 5.0
    assert x["evals_to_cks_median"] == 3.0 and x["evals_to_cks_never"] == 1
    assert s.loc["cks", "evals_to_cks_median"] == 2.0
    assert math.isnan(s.loc["cks", "best_at_4_se"])  # one seed has no standard error
    # more than half the seeds never reaching the target gives an infinite median
    cells.append(bench_cell("x", 3, [0.0, 0.0, 0.0, 0.0]))
    cells.append(bench_cell("x", 4, [0.0, 0.0, 0.0, 0.0]))
    s = bench.summarise(cells, budget=4).set_index("method")
    assert math.isinf(s.loc["x", "evals_to_cks_median"]) and s.loc["x", "evals_to_cks_never"] == 3
    assert ">4 (3/5)" in bench.summary_markdown(s.reset_index(), 4)


def test_step_time_summary_follows_its_definition() -> None:
    """Median, linear-interpolation 90th percentile and mean of the strategy's
    milliseconds per BO step (PERFORMANCE.md's PROLAS row)."""
    from prolas.bench.performance import step_time_summary

    s = step_time_summary([40.0, 10.0, 30.0, 20.0, 100.0])
    assert s == {"steps": 5, "median_ms": 30.0, "p90_ms": 76.0, "mean_ms": 40.0}
    empty = step_time_summary([])
    assert empty["steps"] == 0 and math.isnan(empty["median_ms"]) and math.isnan(empty["p90_ms"])
    kinds = ["pool", "incumbent", "pool", "incumbent", "pool"]
    by = step_time_summary([40.0, 10.0, 30.0, 20.0, 100.0], kinds)["by_kind"]
    assert by == {
        "pool": {"steps": 3, "median_ms": 40.0, "mean_ms": 170.0 / 3},
        "incumbent": {"steps": 2, "median_ms": 15.0, "mean_ms": 15.0},
    }


def test_a_performance_cell_keeps_its_search_history() -> None:
    """The ``prolas fit`` cell of the performance bench records every evaluation, so two
    runs can be compared fit by fit; the history is the search's, its best the cell's."""
    from prolas.bench.performance import measure_pipeline

    record = measure_pipeline(150, 3)
    history = record["history"]
    assert len(history) == record["evaluations"] == 3
    ok = [e for e in history if e["status"] == "ok"]
    assert max(ok, key=lambda e: e["bic"])["expression"] == record["best"]
    # each entry is a fit's own seconds (rounded to 0.1 ms) inside the timed scorer
    assert 0.0 < sum(e["seconds"] for e in history) <= record["fit_seconds"] + 1e-3


def test_the_performance_bench_stops_at_once_without_its_search_data(tmp_path) -> None:
    """A missing search data file is an error before any measurement, and the output
    folder is not made."""
    from prolas.bench.performance import run_performance

    out = tmp_path / "perf"
    with pytest.raises(ProlasError, match="nowhere.csv: file not found"):
        run_performance(out, data=tmp_path / "nowhere.csv", progress=False)
    assert not out.exists()


def test_a_grid_without_plain_cks_measures_against_cks_with_change_rules() -> None:
    from prolas.bench.grid import reference_column

    cells = [bench_cell("cks:change", 0, [1.0, 3.0, 5.0])]
    cells += [bench_cell("x", k, [0.0, 4.0, 6.0]) for k in range(2)]
    assert reference_column(cells) == "cks:change"
    assert reference_column([*cells, bench_cell("cks", 0, [2.0])]) == "cks"
    s = bench.summarise(cells, budget=3, reference="cks:change").set_index("method")
    assert s.loc["x", "cks_final_bic"] == 5.0 and s.loc["x", "evals_to_cks_median"] == 3.0
    text = bench.summary_markdown(s.reset_index(), 3, "cks:change")
    assert "reach `cks:change`'s final BIC" in text and "| `x` | 2 |" in text


def test_reaching_a_target_allows_an_absolute_tolerance() -> None:
    from prolas.bench.stats import TOL, reach

    trace = np.array([np.nan, 1.0, 2.0, 3.0])
    assert reach(trace, 3.0 + 0.5 * TOL) == 4.0  # closer than TOL counts as equal
    assert reach(trace, 3.0 + 2 * TOL) == math.inf
    assert reach(trace, 1.5) == 3.0


def test_thinning_keeps_standardisation_and_endpoints() -> None:
    ds = load_csv(DATA / "mauna_train.csv")
    th = bench.thin(ds, 100)
    assert th.n == 100 and th.x[0] == ds.x[0] and th.x[-1] == ds.x[-1]
    assert (th.y_mean, th.y_std) == (ds.y_mean, ds.y_std)
    assert np.all(np.diff(th.x) > 0) and np.isin(th.x, ds.x).all()
    assert bench.thin(ds, ds.n) is ds


def test_extrapolation_table_on_one_small_series(tmp_path: Path) -> None:
    from prolas.gp import FitResult, predict

    config = _airline_config("cks", seeds=1, budget=3)
    run = bench.run_extrapolation(config, tmp_path / "ex", progress=False)
    out = tmp_path / "ex"
    assert run.cells_run == 3  # cks + the SE and LIN baselines
    table = pd.read_csv(out / "extrapolation.csv")
    assert set(table["method"]) == {"cks", "SE", "LIN"}
    assert (table["abcd_rmse"] == bench.ABCD_RMSE["airline"]).all()
    assert (table["final_model"] == "same").all() and (table["n_test"] == 15).all()
    # RMSE recomputed independently from the stored final model
    train, test = load_csv(DATA / "airline_train.csv"), load_csv(DATA / "airline_test.csv")
    for method in ("cks", "SE"):
        cell = json.loads((out / "cells" / f"airline__{method}__seed0.json").read_text())
        fit = FitResult.from_json(cell["test"]["final"], n=train.n)
        mean, _ = predict(fit, train, test.x)
        rmse = float(np.sqrt(np.mean((test.y - mean) ** 2)))
        assert table.set_index("method").loc[method, "rmse"] == pytest.approx(rmse, rel=1e-9)
    std = bench.standardised_rmse(table)
    assert std.loc["airline"].min() == pytest.approx(1.0)
    md = (out / "extrapolation.md").read_text()
    assert "ABCD" in md and "16.67" in md and "of 1 series" in md
    for name in ("standardised_rmse.png", "forecasts.png"):
        assert (out / name).stat().st_size > 5000


def test_extrapolation_markdown_lists_every_seeds_expression() -> None:
    """The RMSE table averages over seeds, so the expressions table must not show seed 0
    alone as if it were the method's model."""
    table = pd.read_csv(ROOT / "benchmarks" / "results" / "extrapolation" / "extrapolation.csv")
    table = table[table["dataset"] == "airline"]
    config = BenchConfig(datasets=("airline",), methods=parse_methods("cks,prolas"), seeds=3)
    md = bench.extrapolation_markdown(table, bench.standardised_rmse(table), config)
    row = next(
        line for line in md.split("## Expressions found")[1].splitlines() if "airline" in line
    )
    prolas = table[table["method"] == "prolas"].sort_values("seed")
    assert len(prolas) == 10
    for method in ("prolas", "cks"):
        runs = table[table["method"] == method].sort_values("seed")
        if len(runs) == 1:  # one seed: the expression alone
            assert f"| `{runs.iloc[0].expression}` |" in row
        for r in runs.itertuples() if len(runs) > 1 else ():
            assert f"{r.seed}: `{r.expression}` ({r.rmse:.4g})" in row


def test_fit_with_test_file_reports_held_out_rmse(tmp_path: Path, capsys) -> None:
    from prolas.gp import FitResult, predict
    from prolas.report import validate_result_json

    out = tmp_path / "fit"
    code = main(
        [
            "fit",
            str(DATA / "airline_train.csv"),
            "--test",
            str(DATA / "airline_test.csv"),
            *QUICK_CKS,
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    doc = json.loads((out / "result.json").read_text())
    validate_result_json(doc)
    train, test = load_csv(DATA / "airline_train.csv"), load_csv(DATA / "airline_test.csv")
    fit = FitResult.from_json(doc["best"], n=train.n)
    mean, _ = predict(fit, train, test.x)
    rmse = float(np.sqrt(np.mean((test.y - mean) ** 2)))
    assert doc["test"]["n"] == 15 and doc["test"]["rmse"] == pytest.approx(rmse, rel=1e-9)
    assert f"test: RMSE {rmse:.4g}" in err
    assert (out / "fit.png").stat().st_size > 5000  # forecast against the test points


def test_performance_finds_the_restart_benchmark_from_any_working_directory(
    tmp_path, monkeypatch
) -> None:
    """The restart table reads benchmarks/scripts/core.py of the checkout the package runs
    from, not of the working directory (a run from /tmp lost the table)."""
    from prolas.bench.performance import source_checkout

    monkeypatch.chdir(tmp_path)
    assert source_checkout() == ROOT.resolve()
    assert (source_checkout() / "benchmarks" / "scripts" / "core.py").is_file()
