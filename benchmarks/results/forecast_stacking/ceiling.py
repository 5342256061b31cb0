"""How far can any choice among a search's top 5 models go? A bound, not a rule.

For each record (one search's top 5 models, refitted, with their test forecasts), the
default forecast (``fixed_mix``, the rolling-origin mixture) beside the model that
forecast the test period best *in hindsight*, and the worst. No rule that picks or mixes
the top 5 from the training data can beat the hindsight pick on RMSE by more than a
mixture's averaging; where even the hindsight pick is above ABCD's published RMSE, the
models, not the choice among them, are what lose.

The second table widens the pool to every distinct expression any method fitted on the
series in the committed grid (``extrapolation_base_kernels/fits/NAME.jsonl``: PROLAS, CKS
with and without the change rules, random search; fit seed 0). Each forecasts the test period
with the hyperparameters of that fit (made on the search's points: all training points, or
the 400-point thinning above 400), conditioned on all training points, without a refit.
Per series: how many forecast below ABCD's RMSE, the best of them in hindsight, and how
far below the series' best BIC the highest-BIC one of them is: the margin a rule choosing
from training data would have to see through.

Run from the repository root: ``python benchmarks/results/forecast_stacking/ceiling.py``
(``--fitted`` adds the second table; about a minute a series). Reads every
``records_fit_seed_*.jsonl`` in this folder; prints markdown tables.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "scripts"))
from forecast_rules import rule_rmses  # noqa: E402

from prolas.bench import ABCD_RMSE  # noqa: E402
from prolas.data import load_csv  # noqa: E402
from prolas.gp import FitResult, hold_unseen_transitions  # noqa: E402
from prolas.report.forecast import forecast  # noqa: E402

GRID = HERE.parent / "extrapolation_base_kernels"
DATA = HERE.parents[2] / "data"


def fitted_pool(name: str) -> pd.DataFrame:
    """Every distinct expression fitted on ``name`` in the grid: its search BIC and the
    test RMSE of its forecast (the grid's hyperparameters, all training points)."""
    train, test = load_csv(DATA / f"{name}_train.csv"), load_csv(DATA / f"{name}_test.csv")
    rows: dict[str, dict] = {}
    for line in (GRID / "fits" / f"{name}.jsonl").read_text().splitlines():
        entry = json.loads(line)
        fit = entry["fit"]
        if fit["status"] != "ok" or entry["expression"] in rows:
            continue
        model = hold_unseen_transitions(FitResult.from_json(fit["best"], n=train.n), train)
        mean = forecast(model, train, x_new=test.x).mean
        rmse = float(np.sqrt(np.mean((mean - test.y) ** 2)))
        rows[entry["expression"]] = {"bic": fit["best"]["bic"], "rmse": rmse}
    return pd.DataFrame.from_dict(rows, orient="index")


def fitted_table(names: list[str]) -> None:
    print("\nEvery expression fitted on the series (all methods, fit seed 0), in hindsight\n")
    print("| data | expressions | below ABCD | best RMSE (its BIC gap) | highest-BIC one below "
          "ABCD: BIC gap, RMSE | the best-BIC model's RMSE | ABCD |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name in names:
        pool, abcd = fitted_pool(name), ABCD_RMSE[name]
        top = pool["bic"].max()
        best = pool.loc[pool["rmse"].idxmin()]
        below = pool[pool["rmse"] < abcd]
        first = (
            f"{top - below['bic'].max():.1f}, {below.loc[below['bic'].idxmax(), 'rmse']:.4g}"
            if len(below)
            else "none"
        )
        print(
            f"| {name} | {len(pool)} | {len(below)} | {best['rmse']:.4g} "
            f"({top - best['bic']:.1f}) | {first} | {pool.loc[pool['bic'].idxmax(), 'rmse']:.4g} "
            f"| {abcd:.4g} |"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fitted", action="store_true", help="add the every-fitted-model table")
    args = p.parse_args()
    rows = []
    for path in sorted(HERE.glob("records_fit_seed_*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            rmses = [m["test_rmse"] for m in rec["models"]]
            rows.append(
                {
                    "dataset": rec["dataset"],
                    "fit_seed": rec["fit_seed"],
                    "default": rule_rmses(rec)["fixed_mix"],
                    "hindsight": min(rmses),
                    "worst": max(rmses),
                }
            )
    table = pd.DataFrame(rows)
    for fit_seed, part in table.groupby("fit_seed"):
        mean = part.groupby("dataset")[["default", "hindsight", "worst"]].mean()
        print(f"\nFit seed {fit_seed}: mean test RMSE over seeds (RMSE / ABCD's published)\n")
        print("| data | searches | default (rolling-mix) | best of top 5 in hindsight | worst "
              "of top 5 | ABCD |")  # fmt: skip
        print("|---|---|---|---|---|---|")
        wins = {"default": 0, "hindsight": 0}
        for name, row in mean.iterrows():
            abcd = ABCD_RMSE[name]
            cells = []
            for col in ("default", "hindsight", "worst"):
                cells.append(f"{row[col]:.4g} ({row[col] / abcd:.2f})")
                if col in wins and row[col] < abcd:
                    wins[col] += 1
            count = int((part["dataset"] == name).sum())
            print(f"| {name} | {count} | " + " | ".join(cells) + f" | {abcd:.4g} |")
        print(
            f"\nSeries below ABCD's RMSE: default {wins['default']} of {len(mean)}, "
            f"hindsight pick {wins['hindsight']} of {len(mean)}."
        )
    if args.fitted:
        fitted_table(sorted(set(table["dataset"])))


if __name__ == "__main__":
    main()
