"""The PROLAS paper's Figure 2 experiment on airline, with prolas's defaults.

Search on the first 10 / 25 / 50 / 75 % of the airline series (cut on the time range, as
the 90/10 extrapolation split), predict the rest; test RMSE of the model found and of each
base kernel alone, for PROLAS (3 seeds) and CKS (deterministic), default settings (50 fits,
8 restarts, the change grammar and checkpoint, CKS with the change rules).

Writes ``figure2.csv``, ``figure2.md`` and one ``figure2_<method>_seed<k>.png`` per run.

Usage::

    python benchmarks/scripts/figure2.py --out benchmarks/results/figure2
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from prolas.bench import fraction_study, plot_fraction_study
from prolas.data import load_csv

FRACTIONS = (0.10, 0.25, 0.50, 0.75)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="data/airline.csv")
    p.add_argument("--seeds", type=int, default=3, help="PROLAS seeds (default 3)")
    p.add_argument("--budget", type=int, default=50)
    p.add_argument("--restarts", type=int, default=8)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data = load_csv(args.data)
    rows = []
    runs = [("prolas", s) for s in range(args.seeds)] + [("cks", 0)]
    for method, seed in runs:
        print(f"{method} seed {seed}", flush=True)
        results = fraction_study(
            data, FRACTIONS, method=method, budget=args.budget, restarts=args.restarts, seed=seed
        )
        plot_fraction_study(results, args.out / f"figure2_{method}_seed{seed}.png")
        for r in results:
            rows.append(
                {
                    "method": method,
                    "seed": seed,
                    "train %": round(100 * r.fraction),
                    "n_train": r.train.n,
                    "n_test": r.test.n,
                    "expression": r.fit.expression,
                    "rmse": math.sqrt(r.test_mse),
                    **{f"rmse {b}": math.sqrt(v) for b, v in r.base_mse.items()},
                }
            )
    table = pd.DataFrame(rows)
    table.to_csv(args.out / "figure2.csv", index=False)
    mean = table.groupby(["train %", "method"])["rmse"].mean().unstack("method")
    base = table[table["method"] == "cks"].set_index("train %")
    lines = [
        "# Figure 2 of the PROLAS paper on airline (test RMSE on the rest of the series)",
        "",
        f"Defaults: {args.budget} fits, {args.restarts} restarts; PROLAS mean over "
        f"{args.seeds} seeds. Command: `python benchmarks/scripts/figure2.py --out {args.out}`.",
        "",
        "| train % | PROLAS | CKS | "
        + " | ".join(c[5:] for c in base.columns if c.startswith("rmse "))
        + " |",
        "|---|---|---|" + "---|" * sum(c.startswith("rmse ") for c in base.columns),
    ]
    for pct in mean.index:
        singles = " | ".join(
            f"{base.loc[pct, c]:.4g}" for c in base.columns if c.startswith("rmse ")
        )
        lines.append(
            f"| {pct} | {mean.loc[pct, 'prolas']:.4g} | {mean.loc[pct, 'cks']:.4g} | {singles} |"
        )
    lines += ["", "Models found:", ""]
    for _, r in table.iterrows():
        lines.append(
            f"- {r['train %']} %, {r['method']} seed {r['seed']}: `{r['expression']}` "
            f"(RMSE {r['rmse']:.4g})"
        )
    (args.out / "figure2.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
