"""Which forecast should a user get? The best-BIC model, a mixture, or a rolling-origin check.

Reads the cells of an extrapolation run (``prolas bench --extrapolation``), and for every
(data set, method, seed) cell takes the search's ``K`` highest-BIC distinct expressions,
fits each on all training points (the cell's own final model is reused for the best),
and forecasts the test file three ways:

* ``best``: the highest-BIC model's Gaussian predictive (what ``prolas fit`` reports);
* ``bma``: the BIC-weighted mixture of the K models' predictives
  (:func:`prolas.report.forecast.forecast` with ``method="bma"``);
* ``rolling``: the one of the K models that forecasts the last 10 % of the training data
  best (:func:`prolas.report.forecast.rolling_pick`, 5 origins, lowest RMSE);
* ``rolling_mix``: the K models' mixture weighted by their summed log predictive density
  on the same check (:func:`prolas.report.forecast.rolling_weights`, ``method="rolling-mix"``);
* ``horizon_mix``: the K models' mixture weighted by forecasts at the test's lead times
  from hyperparameters refitted before each origin
  (:func:`prolas.report.forecast.horizon_weights`, ``method="horizon-mix"``);
* ``best_all``: where the search ran on a subsample (``n_search < n_train``), the model of
  highest BIC on all training points among the K refits; elsewhere the best model (the
  search's BICs are already on all points).

Writes ``forecast_choice.csv`` (one row per cell and way) and ``forecast_choice.md``
(RMSE per data set, mean over seeds; standardised by ABCD's published RMSE).

Usage::

    python benchmarks/scripts/forecast_choice.py benchmarks/results/extrapolation \
        --methods cks:change --out DIR
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.bench import ABCD_RMSE
from prolas.data import Dataset, load_csv
from prolas.gp import FitConfig, FitResult, fit_gp
from prolas.report.forecast import forecast

WAYS = ("best", "bma", "rolling", "rolling_mix", "horizon_mix", "best_all")
#: The series every default was decided on (benchmarks/RESULTS.md, "How the defaults were chosen").
TUNING = ("airline", "call-centre", "sulphuric")


def _rmse(fc, test) -> float:
    return float(np.sqrt(np.mean((fc.mean - test.y) ** 2)))


def ranked_history(cell: dict) -> list[dict]:
    """The cell's successful evaluations, highest BIC first (ties: the earlier)."""
    ok = [h for h in cell["history"] if h["status"] == "ok" and h["bic"] is not None]
    return sorted(ok, key=lambda h: (-h["bic"], h["index"]))


def top_expressions(cell: dict, k: int) -> list[str]:
    """The cell's ``k`` highest-BIC distinct ok expressions, best first."""
    out: list[str] = []
    for h in ranked_history(cell):
        if h["expression"] not in out:
            out.append(h["expression"])
        if len(out) == k:
            break
    return out


def cell_fits(
    cell: dict,
    data_dir: Path,
    k: int,
    restarts: int,
    lengthscale_floor: float = 0.0,
    fit_seed: int = 0,
) -> tuple[Dataset, Dataset, FitResult, list[FitResult]]:
    """``(train, test, final, fits)``: the cell's final model and its ``k`` best distinct
    expressions fitted on all training points (the final model reused), highest BIC first."""
    name = cell["dataset"]
    train = load_csv(data_dir / f"{name}_train.csv")
    test = load_csv(data_dir / f"{name}_test.csv")
    final = FitResult.from_json(cell["test"]["final"], n=train.n)
    fits = [final]
    for expr in top_expressions(cell, k):
        if expr != final.expression:
            config = FitConfig(
                restarts=restarts, seed=fit_seed, lengthscale_floor=lengthscale_floor
            )
            fit = fit_gp(expr, train, config)
            if fit.ok:
                fits.append(fit)
    fits.sort(key=lambda f: -f.bic)
    return train, test, final, fits


def evaluate_cell(
    cell: dict,
    data_dir: Path,
    k: int,
    restarts: int,
    lengthscale_floor: float = 0.0,
    fit_seed: int = 0,
) -> list[dict]:
    name = cell["dataset"]
    train, test, final, fits = cell_fits(cell, data_dir, k, restarts, lengthscale_floor, fit_seed)
    rows = []
    base = {"dataset": name, "method": cell["method"], "seed": cell["seed"], "k": len(fits)}
    best = forecast(final, train, x_new=test.x)
    rows.append({**base, "way": "best", "expression": final.expression, "rmse": _rmse(best, test)})
    ways = (
        ("bma", "bma"),
        ("rolling", "rolling"),
        ("rolling_mix", "rolling-mix"),
        ("horizon_mix", "horizon-mix"),
    )
    for way, method in ways:
        fc = forecast(fits, train, x_new=test.x, method=method)
        what = fc.models[0]  # the pick
        if method != "rolling":
            what = f"{len(fits)} models, top weight {max(fc.weights):.3f}"
        rows.append({**base, "way": way, "expression": what, "rmse": _rmse(fc, test)})
    top = fits[0] if cell["n_search"] < cell["n_train"] else final
    rmse = _rmse(forecast(top, train, x_new=test.x), test)
    rows.append({**base, "way": "best_all", "expression": top.expression, "rmse": rmse})
    return rows


def markdown(table: pd.DataFrame) -> str:
    mean = table.groupby(["dataset", "method", "way"])["rmse"].mean().unstack("way")
    ways = [w for w in WAYS if w in mean]  # a CSV from before a way was added lacks it
    lines = [
        "| data | method | " + " | ".join(ways) + " | ABCD (published) |",
        "|---|---|" + "---|" * len(ways) + "---|",
    ]
    std_rows = []
    for (name, method), row in mean.iterrows():
        abcd = ABCD_RMSE.get(name, math.nan)
        cells = [f"{row[w]:.4g} ({row[w] / abcd:.2f})" for w in ways]
        lines.append(f"| {name} | {method} | " + " | ".join(cells) + f" | {abcd:.4g} |")
        std_rows.append({w: row[w] / abcd for w in ways})
    std = pd.DataFrame(std_rows)
    lines.append("")
    lines.append(
        "Median standardised RMSE (RMSE / ABCD's) over the rows: "
        + ", ".join(f"{w} {std[w].median():.3f}" for w in ways)
        + "; rows where each way beats ABCD: "
        + ", ".join(f"{w} {(std[w] < 1).sum()}/{len(std)}" for w in ways)
        + "."
    )
    return "\n".join(lines) + "\n"


def paired(table: pd.DataFrame, against: str = "bma") -> str:
    """Each other way against ``against``, seed by seed: per series the mean of
    ``log(RMSE_way / RMSE_against)`` over seeds (negative: the way forecasts better) with
    its standard error, and the seeds where the way is better / worse; then the same
    pooled over the tuning series and over the others (markdown)."""
    wide = table.pivot_table(index=["dataset", "method", "seed"], columns="way", values="rmse")
    ways = [w for w in WAYS if w != against and w in wide]
    lines = [
        f"Seed by seed against `{against}`: mean log(RMSE / RMSE of {against}) ± s.e. "
        "(negative = better), then seeds better / worse.",
        "",
        "| data | method | " + " | ".join(ways) + " |",
        "|---|---|" + "---|" * len(ways),
    ]

    def cell(v: pd.Series) -> str:
        se = v.std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else math.nan
        return f"{v.mean():+.3f} ± {se:.3f} ({int((v < 0).sum())}/{int((v > 0).sum())})"

    logs = {w: np.log(wide[w] / wide[against]) for w in ways}
    for (name, method), _ in wide.groupby(level=["dataset", "method"]):
        sel = (wide.index.get_level_values(0) == name) & (wide.index.get_level_values(1) == method)
        lines.append(
            f"| {name} | {method} | " + " | ".join(cell(logs[w][sel]) for w in ways) + " |"
        )
    tuning = wide.index.get_level_values(0).isin(TUNING)
    for label, sel in (("tuning series, pooled", tuning), ("other series, pooled", ~tuning)):
        if sel.any():
            lines.append(f"| {label} | | " + " | ".join(cell(logs[w][sel]) for w in ways) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cells", type=Path, help="an extrapolation output directory (with cells/)")
    p.add_argument("--methods", default="", help="comma-separated methods to use (default all)")
    p.add_argument("--datasets", default="", help="comma-separated data sets (default all)")
    p.add_argument("--k", type=int, default=5, help="top models per search (default 5)")
    p.add_argument("--restarts", type=int, default=8, help="restarts per refit (default 8)")
    p.add_argument("--data-dir", type=Path, default=Path("data"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--from-csv",
        type=Path,
        help="rebuild the tables from an earlier run's forecast_choice.csv (no refits)",
    )
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.from_csv is not None:
        table = pd.read_csv(args.from_csv)
        write_tables(table, args.out)
        return
    methods = {m for m in args.methods.split(",") if m}
    datasets = {d for d in args.datasets.split(",") if d}
    # the refits use the run's own lengthscale floor and fit seed (bench.json; absent = 0)
    settings = json.loads((args.cells / "bench.json").read_text())["settings"]
    floor = float(settings.get("lengthscale_floor", 0.0))
    fit_seed = int(settings.get("fit_seed", 0))
    rows: list[dict] = []
    for path in sorted((args.cells / "cells").glob("*.json")):
        cell = json.loads(path.read_text())
        if cell["method"] in ("SE", "LIN") or not cell.get("test"):
            continue
        if (methods and cell["method"] not in methods) or (
            datasets and cell["dataset"] not in datasets
        ):
            continue
        print(f"{cell['dataset']} {cell['method']} seed {cell['seed']}", flush=True)
        rows += evaluate_cell(cell, args.data_dir, args.k, args.restarts, floor, fit_seed)
    table = pd.DataFrame(rows)
    table.to_csv(args.out / "forecast_choice.csv", index=False)
    write_tables(table, args.out)


def write_tables(table: pd.DataFrame, out: Path) -> None:
    """forecast_choice.md: the mean RMSE table and the seed-by-seed comparison."""
    text = markdown(table) + "\n" + paired(table)
    (out / "forecast_choice.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
