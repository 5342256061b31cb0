"""Extrapolation: search on ``<name>_train.csv``, predict ``<name>_test.csv``.

:func:`run_extrapolation` runs a grid (:mod:`prolas.bench.grid`) on the training files
and scores each cell's best model on the held-out test file: RMSE in y's original
units and mean log predictive density (noise included), next to the Automatic
Statistician's published RMSE (:data:`ABCD_RMSE`), with single-SE and single-LIN
baselines (:data:`prolas.bench.grid.BASELINES`). Standardised RMSE per data set = RMSE
/ (the smallest RMSE of any method on that data set, ABCD included), as in Lloyd et al.
(2014).

Long series. A search on more than ``max_points`` training points runs on an evenly
spaced thinning (:func:`prolas.bench.cells.thin`) with the full series'
standardisation. Held-out predictions then condition on *all* training points with the
hyperparameters found on the thinning (``final_model = "conditioned"``), or, with
``refit_full``, on hyperparameters re-optimised on all training points (``"refit"``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.bench.cells import (
    cell_path,
    cell_record,
    evaluations_frame,
    load_cells,
    load_series,
    prepare_out,
    thin,
    write_cell,
)
from prolas.bench.grid import (
    BASELINES,
    DATASETS,
    BenchConfig,
    BenchRun,
    GridProgress,
    MethodSpec,
    cached_scorer,
    run_cell,
)
from prolas.bench.stats import fmt
from prolas.data import Dataset
from prolas.expr import parse
from prolas.gp import FitResult, hold_unseen_transitions
from prolas.pipeline import refit
from prolas.records import Evaluation, SearchResult
from prolas.search.cache import CachedScorer
from prolas.search.config import SearchConfig

__all__ = [
    "ABCD_RMSE",
    "run_extrapolation",
    "extrapolation_table",
    "standardised_rmse",
    "plot_standardised_rmse",
    "plot_forecasts",
    "extrapolation_markdown",
    "write_extrapolation_outputs",
]

#: Published extrapolation RMSE of ABCD (accuracy variant) on the 90/10 splits
#: (Lloyd et al. 2014).
ABCD_RMSE = {
    "airline": 16.67,
    "solar": 0.383,
    "mauna": 1.925,
    "temperature": 2.763,
    "internet": 5160.0,
    "call-centre": 40.68,
    "gas-production": 3036.0,
    "sulphuric": 29.07,
    "wages": 14.90,
}


def _final_model(
    fit: FitResult, search: Dataset, train: Dataset, config: BenchConfig
) -> tuple[FitResult, str]:
    """The model that predicts the test set (see the module docstring), with the
    transitions the training data cannot see held off (a cached fit may predate the
    rule, :func:`prolas.gp.fit.hold_unseen_transitions`)."""
    if search is train:
        return hold_unseen_transitions(fit, train), "same"
    if config.refit_full:
        # the product's refit: warm-started at the thinning's fit (exact up to
        # EXACT_REFIT_LIMIT points, else SGPR), so never worse than conditioning on it
        full = refit(fit, train, SearchConfig(restarts=config.restarts, seed=config.fit_seed))
        if full.ok:
            return full, "refit"
    return hold_unseen_transitions(fit, train), "conditioned"


def run_extrapolation(
    config: BenchConfig,
    out: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> BenchRun:
    """Search on ``<name>_train.csv``, predict ``<name>_test.csv`` for every cell, plus
    the single-SE and single-LIN baselines (fitted once, the same way).

    Writes evaluations.csv, extrapolation.csv, extrapolation.md, standardised_rmse.png
    and forecasts.png (each data set's forecasts against its test points).
    """
    import torch

    from prolas.report import test_metrics

    torch.set_num_threads(1)
    log = log or (lambda s: None)
    out = Path(out)
    prepare_out(out, "extrapolation", config.settings(), config.to_json(), resume)
    run = BenchRun(out)
    base_specs = [MethodSpec(b, "single") for b in BASELINES]  # fitted directly, no search
    grid = [(d, m, s) for d in config.datasets for m in config.methods for s in range(config.seeds)]
    grid += [(d, b, 0) for d in config.datasets for b in base_specs]
    todo = [g for g in grid if not cell_path(out, g[0], g[1].label, g[2]).exists()]
    run.cells_skipped = len(grid) - len(todo)
    total = sum(config.budget if m.label not in BASELINES else 1 for _, m, _ in grid)
    done = sum(config.budget if m.label not in BASELINES else 1 for _, m, _ in grid) - sum(
        config.budget if m.label not in BASELINES else 1 for _, m, _ in todo
    )
    bar = GridProgress(total, done, progress)
    try:
        data: dict[str, tuple[Dataset, Dataset, Dataset, CachedScorer]] = {}
        for name, spec, seed in todo:
            if name not in data:
                train = load_series(Path(config.data_dir) / f"{name}_train.csv")
                test = load_series(Path(config.data_dir) / f"{name}_test.csv")
                search = thin(train, config.max_points)
                if search is not train:
                    log(f"extrapolation: {name}: search on {search.n} of {train.n} training points")
                data[name] = (train, test, search, cached_scorer(search, config, out, name))
            train, test, search, scorer = data[name]
            bar.start(f"{name} {spec.label} seed {seed}")
            if spec.label in BASELINES:
                cell, best = _baseline_cell(spec.label, name, search, scorer)
                bar.finish(1)
            else:
                cell, _, best = run_cell(
                    search, spec, seed, config, scorer, bar.on_result, name=name
                )
                bar.finish(config.budget)
            cell["n_train"], cell["n_search"], cell["n_test"] = train.n, search.n, test.n
            if best is not None and best.ok:
                final, how = _final_model(best, search, train, config)
                metrics = test_metrics(final, train, test)
                cell["test"] = {
                    "final_model": how,
                    "expression": final.expression,
                    "rmse": metrics["rmse"],
                    "mean_log_predictive_density": metrics["mean_log_predictive_density"],
                    "final": final.to_json(),
                }
            else:
                cell["test"] = None
            write_cell(out, cell)
            run.cells_run += 1
            run.new_fits += cell["new_fits"]
    finally:
        bar.close()
    run.files = write_extrapolation_outputs(out, config)
    return run


def _baseline_cell(
    label: str, name: str, search: Dataset, scorer: CachedScorer
) -> tuple[dict, FitResult | None]:
    """A single-kernel baseline: ``label`` fitted once through the data set's scorer, as
    a one-evaluation cell (no search, so its strategy time is 0)."""
    misses = scorer.misses
    t0 = time.perf_counter()
    score = scorer(parse(label))
    best = score.fit if isinstance(score.fit, FitResult) else None
    ev = Evaluation(
        1,
        score.expression,
        score.status,
        score.bic,
        score.log_likelihood,
        score.n_params,
        score.seconds,
        score.error,
    )
    wall = time.perf_counter() - t0
    cell = cell_record(
        SearchResult(label, 0, 1, [ev], wall),
        dataset=name,
        method=label,
        seed=0,
        n=search.n,
        budget=1,
        wall_seconds=wall,
        scoring_seconds=wall,
        new_fits=scorer.misses - misses,
        best=best,
    )
    return cell, best


def extrapolation_table(cells: Sequence[dict]) -> pd.DataFrame:
    """One row per extrapolation cell: data set, method, seed, expression, RMSE, MLPD."""
    rows = []
    for c in cells:
        t = c.get("test")
        rows.append(
            {
                "dataset": c["dataset"],
                "method": c["method"],
                "seed": c["seed"],
                "expression": t["expression"] if t else None,
                "search_bic": c["best"]["bic"] if c.get("best") else None,
                "evaluations": c["evaluations"],
                "n_train": c.get("n_train"),
                "n_search": c.get("n_search"),
                "n_test": c.get("n_test"),
                "final_model": t["final_model"] if t else None,
                "rmse": t["rmse"] if t else math.nan,
                "mean_log_predictive_density": (
                    t["mean_log_predictive_density"] if t else math.nan
                ),
                "abcd_rmse": ABCD_RMSE.get(c["dataset"], math.nan),
                "fit_seconds": c["fit_seconds"],
            }
        )
    return pd.DataFrame(rows)


def standardised_rmse(table: pd.DataFrame, include_abcd: bool = True) -> pd.DataFrame:
    """Data set x method matrix of RMSE / best RMSE on that data set (mean over seeds).

    ABCD's published RMSE is a column when ``include_abcd`` (it then also counts for
    "best").
    """
    rmse = table.groupby(["dataset", "method"])["rmse"].mean().unstack("method")
    if include_abcd:
        rmse["ABCD"] = [ABCD_RMSE.get(d, math.nan) for d in rmse.index]
    return rmse.div(rmse.min(axis=1), axis=0)


def _method_order(methods: Iterable[str]) -> list[str]:
    pref = ["prolas", "cks", "random", "ABCD", "SE", "LIN"]
    methods = list(dict.fromkeys(methods))
    return [m for m in pref if m in methods] + sorted(m for m in methods if m not in pref)


def plot_standardised_rmse(std: pd.DataFrame, path: str | Path | None = None, ax=None):
    """Standardised RMSE per method across data sets: box plot plus one dot per data set
    (log scale; 1 = best method on that data set)."""
    from prolas.report.figure import subplots

    own = ax is None
    if own:
        fig, ax = subplots(figsize=(7.5, 4.2))
    methods = _method_order(std.columns)
    values = [std[m].dropna().to_numpy() for m in methods]
    ax.boxplot(values, showfliers=False, widths=0.5)
    ax.set_xticks(range(1, len(methods) + 1), methods)
    rng = np.random.default_rng(0)
    markers = "os^vDP*Xhp"
    for j, dataset in enumerate(std.index):
        xs = [i + 1 + rng.uniform(-0.12, 0.12) for i in range(len(methods))]
        ys = [std.loc[dataset, m] for m in methods]
        ax.plot(xs, ys, markers[j % len(markers)], ms=5, mfc="none", label=dataset, alpha=0.8)
    ax.set_yscale("log")
    ax.axhline(1.0, color="0.6", lw=0.8)
    ax.set_ylabel("RMSE / best RMSE on the data set")
    ax.set_title("Extrapolation: standardised RMSE (lower is better)", fontsize=10)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if own:
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
    return ax


def plot_forecasts(
    cells: Sequence[dict], config: BenchConfig, path: str | Path, methods: Sequence[str]
) -> Path:
    """One panel per data set: the end of the training data, the test points and each
    method's predictive mean (and 95 % band for the first method)."""
    from prolas.gp import predict
    from prolas.report.figure import subplots

    datasets = list(dict.fromkeys(c["dataset"] for c in cells))
    ncol = 3
    nrow = math.ceil(len(datasets) / ncol)
    fig, axes = subplots(nrow, ncol, figsize=(13, 3.2 * nrow), squeeze=False)
    for ax, name in zip(axes.ravel(), datasets):
        train = load_series(Path(config.data_dir) / f"{name}_train.csv")
        test = load_series(Path(config.data_dir) / f"{name}_test.csv")
        lo = train.x[-1] - 2.0 * (test.x[-1] - train.x[-1])
        keep = train.x >= lo
        xs = np.linspace(lo, test.x[-1], 300)
        ax.plot(train.x[keep], train.y[keep], "k.", ms=2.5, label="train")
        ax.plot(test.x, test.y, "o", color="C3", ms=3, mfc="none", label="test")
        for i, method in enumerate(methods):
            mine = [c for c in cells if c["dataset"] == name and c["method"] == method]
            mine = [c for c in mine if c.get("test")]
            if not mine:
                continue
            c = min(mine, key=lambda c: c["seed"])
            fit = FitResult.from_json(c["test"]["final"], n=train.n)
            mean, var = predict(fit, train, xs, include_noise=True)
            ax.plot(xs, mean, color=f"C{i}", lw=1.3, label=f"{method}")
            if i == 0:
                sd = np.sqrt(var)
                ax.fill_between(xs, mean - 1.96 * sd, mean + 1.96 * sd, color="C0", alpha=0.15)
        ax.axvline(train.x[-1], color="0.6", ls="--", lw=0.8)
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.ticklabel_format(axis="x", useOffset=False)
    for ax in axes.ravel()[len(datasets) :]:
        ax.axis("off")
    axes[0, 0].legend(fontsize=7, frameon=False)
    fig.suptitle(f"Extrapolation forecasts (band: 95 % predictive, {methods[0]})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    return Path(path)


def _section_head(title: str, columns: Sequence[str]) -> list[str]:
    """Markdown lines opening a section whose table has one row per data set."""
    return [
        "",
        f"## {title}",
        "",
        "| data | " + " | ".join(columns) + " |",
        "|" + "---|" * (len(columns) + 1),
    ]


def extrapolation_markdown(table: pd.DataFrame, std: pd.DataFrame, config: BenchConfig) -> str:
    """Tables: RMSE per data set and method next to ABCD, MLPD, standardised RMSE."""
    rmse = table.groupby(["dataset", "method"])["rmse"].mean().unstack("method")
    mlpd = table.groupby(["dataset", "method"])["mean_log_predictive_density"].mean()
    mlpd = mlpd.unstack("method")
    methods = _method_order(rmse.columns)
    datasets = [d for d in DATASETS if d in rmse.index] + [
        d for d in rmse.index if d not in DATASETS
    ]
    seeds = table[~table["method"].isin(BASELINES)].groupby("method")["seed"].nunique()
    lines = [
        "# Extrapolation (fit on `<name>_train.csv`, predict `<name>_test.csv`)",
        "",
        f"Searches: budget {config.budget} unique GP fits, {config.restarts} restarts per fit, "
        f"seeds per method: "
        + ", ".join(f"{m} {int(s)}" for m, s in seeds.items())
        + f"; series with more than {config.max_points} training points are searched on an "
        f"evenly spaced {config.max_points}-point thinning, and the final model "
        + (
            "is re-optimised on all training points."
            if config.refit_full
            else "keeps the thinning's hyperparameters and conditions on all training points."
        )
        + " RMSE in the data's own units on the full test file (mean over seeds).",
        "",
        "## RMSE",
        "",
        "| data | n train (searched) | " + " | ".join(methods) + " | ABCD (published) |",
        "|" + "---|" * (len(methods) + 3),
    ]
    sizes = table.groupby("dataset")[["n_train", "n_search"]].first()
    for d in datasets:
        best = std.loc[d].idxmin()
        cells = []
        for m in methods:
            v = rmse.loc[d, m]
            text = f"{v:.4g}" if math.isfinite(v) else "-"
            cells.append(f"**{text}**" if m == best else text)
        abcd = ABCD_RMSE.get(d, math.nan)
        abcd_text = f"{abcd:.4g}"
        n_tr, n_se = sizes.loc[d, "n_train"], sizes.loc[d, "n_search"]
        n_text = f"{n_tr}" + (f" ({n_se})" if n_se != n_tr else "")
        lines.append(
            f"| {d} | {n_text} | "
            + " | ".join(cells)
            + f" | {'**' + abcd_text + '**' if best == 'ABCD' else abcd_text} |"
        )
    lines += ["", "Bold: the best RMSE on the data set.", ""]
    lines += [
        "## Expressions found",
        "",
        "Every seed's best expression, with its test RMSE where a method ran several seeds.",
        "",
        "| data | " + " | ".join(m for m in methods if m not in BASELINES) + " |",
        "|" + "---|" * (1 + len([m for m in methods if m not in BASELINES])),
    ]
    for d in datasets:
        cells = []
        for m in methods:
            if m in BASELINES:
                continue
            sub = table[(table.dataset == d) & (table.method == m)].sort_values("seed")
            if len(sub) <= 1:
                cells.append(f"`{sub.iloc[0]['expression']}`" if len(sub) else "-")
            else:
                rows = (f"{int(r.seed)}: `{r.expression}` ({r.rmse:.4g})" for r in sub.itertuples())
                cells.append("<br>".join(rows))
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    lines += _section_head(
        "Mean test log predictive density (nats per point, higher is better)", methods
    )
    for d in datasets:
        cells = [f"{mlpd.loc[d, m]:.3f}" if math.isfinite(mlpd.loc[d, m]) else "-" for m in methods]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    cols = _method_order(std.columns)
    lines += _section_head(
        "Standardised RMSE (RMSE / best RMSE on the data set, ABCD included)", cols
    )
    for d in datasets:
        lines.append(f"| {d} | " + " | ".join(fmt(std.loc[d, m]) for m in cols) + " |")
    lines.append("| **median** | " + " | ".join(f"**{fmt(std[m].median())}**" for m in cols) + " |")
    lines += ["", "## Against ABCD", ""]
    for m in methods:
        have = [d for d in datasets if d in ABCD_RMSE and math.isfinite(rmse.loc[d, m])]
        beats = sum(bool(rmse.loc[d, m] < ABCD_RMSE[d]) for d in have)
        lines.append(
            f"- `{m}` has a lower RMSE than ABCD on {beats} of {len(have)} series"
            + (
                f" (no result yet on {len(datasets) - len(have)})"
                if len(have) < len(datasets)
                else ""
            )
            + f"; median standardised RMSE {fmt(std[m].median())}."
        )
    lines += ["", "![standardised RMSE](standardised_rmse.png)", "", "![forecasts](forecasts.png)"]
    return "\n".join(lines) + "\n"


def write_extrapolation_outputs(out: str | Path, config: BenchConfig) -> list[Path]:
    out = Path(out)
    cells = load_cells(out)
    files = []
    evaluations_frame(cells).to_csv(out / "evaluations.csv", index=False)
    files.append(out / "evaluations.csv")
    if not cells:
        return files
    table = extrapolation_table(cells)
    table.to_csv(out / "extrapolation.csv", index=False)
    std = standardised_rmse(table)
    (out / "extrapolation.md").write_text(extrapolation_markdown(table, std, config))
    plot_standardised_rmse(std, out / "standardised_rmse.png")
    methods = _method_order(m for m in table["method"].unique())
    searched = [m for m in methods if m not in BASELINES]
    plot_forecasts(cells, config, out / "forecasts.png", searched or methods)
    files += [
        out / "extrapolation.csv",
        out / "extrapolation.md",
        out / "standardised_rmse.png",
        out / "forecasts.png",
    ]
    return files
