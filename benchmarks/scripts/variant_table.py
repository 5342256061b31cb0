"""PROLAS variants against the default on the same extrapolation cells (issue 18 studies).

Each variant is a folder of ``prolas bench --extrapolation`` cells (``<dir>/cells`` or the
cells themselves) run with the same settings as the reference grid but a changed search.
For every series and variant: mean ± s.e. of the best BIC after the budget; the median
over seeds of the fits needed to reach the final BIC of CKS with the change rules (from
the reference grid; a seed that never does counts as never); the mean test RMSE of the
chosen models; the mean strategy seconds; random search's mean best BIC (the reference
grid's ``random`` cells, all its seeds); and, paired by seed against the default, the
mean ± s.e. of the difference in best BIC and the mean log(test RMSE / the default's).
Only the seeds every variant ran are compared (the reference grid may hold more).

    python benchmarks/scripts/variant_table.py benchmarks/results/extrapolation \\
        --datasets airline,call-centre,sulphuric --variant edits_local=DIR ... --out FILE.md
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from prolas.bench.stats import cell_trace, fmt, mean_se, summary_rows

REFERENCE = "cks:change"


def load(folder: Path, dataset: str, method: str = "prolas") -> dict[int, dict]:
    """Cells of one series and method by seed (``folder`` or ``folder/cells``; a label's
    ``:`` is ``-`` in file names, as :func:`prolas.bench.cells.cell_path` writes them)."""
    folder = folder / "cells" if (folder / "cells").is_dir() else folder
    label = method.replace(":", "-")
    cells = (json.loads(p.read_text()) for p in folder.glob(f"{dataset}__{label}__seed*.json"))
    return {int(c["seed"]): c for c in cells}


def variant_rows(
    reference: Path, variants: dict[str, Path], datasets: list[str], budget: int
) -> list[dict]:
    """One row per (series, variant), the default (``reference``'s PROLAS cells) first.

    The BIC and fit statistics are :func:`prolas.bench.stats.summary_rows`' on each
    variant's cells relabelled as a method, with ``reference``'s ``cks:change`` cells as
    the CKS column; the mean test RMSE is added here."""
    rows = []
    for dataset in datasets:
        cks = list(load(reference, dataset, REFERENCE).values())
        if not cks:
            raise SystemExit(f"no {REFERENCE} cell for {dataset} in {reference}")
        runs = {"default": load(reference, dataset)}
        runs.update((name, load(folder, dataset)) for name, folder in variants.items())
        seeds = sorted(set.intersection(*(set(r) for r in runs.values())))
        cells = cks + [{**r[s], "method": name} for name, r in runs.items() for s in seeds]
        stats = {r["method"]: r for r in summary_rows(cells, budget, reference=REFERENCE)}
        random = [cell_trace(c, budget)[-1] for c in load(reference, dataset, "random").values()]

        def best(cell: dict) -> float:
            return cell_trace(cell, budget)[-1]

        ref = runs["default"]
        for name, r in runs.items():
            row = stats[name]
            diff = mean_se(np.array([best(r[s]) - best(ref[s]) for s in seeds]))
            log_rmse = [math.log(r[s]["test"]["rmse"] / ref[s]["test"]["rmse"]) for s in seeds]
            rows.append(
                {
                    "dataset": dataset,
                    "variant": name,
                    "seeds": row["seeds"],
                    "cks_final": row["cks_final_bic"],
                    "cks_fits": row["cks_evals"],
                    "best_mean": row[f"best_at_{budget}_mean"],
                    "best_se": row[f"best_at_{budget}_se"],
                    "fits_median": row["evals_to_cks_median"],  # inf: most seeds never
                    "reached": row["seeds"] - row["evals_to_cks_never"],
                    "rmse_mean": float(np.mean([r[s]["test"]["rmse"] for s in seeds])),
                    "strategy_s": row["strategy_seconds_per_seed"],
                    "random_mean": float(np.mean(random)) if random else math.nan,
                    "diff_mean": diff[0],
                    "diff_se": diff[1],
                    "log_rmse_ratio": float(np.mean(log_rmse)),
                }
            )
    return rows


def markdown(rows: list[dict], budget: int) -> str:
    lines = [
        "| data (CKS final BIC, its fits) | variant | seeds | "
        f"mean best BIC at {budget} | median fits to CKS's BIC (seeds reaching it) | "
        "test RMSE, mean | strategy s | random mean best | "
        "best BIC − default's (paired) | log(RMSE / default's), mean |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        fits = "never" if not math.isfinite(r["fits_median"]) else f"{r['fits_median']:g}"
        lines.append(
            f"| {r['dataset']} ({r['cks_final']:.2f}, {r['cks_fits']:g}) | "
            f"{r['variant']} | {r['seeds']} | "
            f"{fmt(r['best_mean'])} ± {fmt(r['best_se'])} | {fits} ({r['reached']}/{r['seeds']}) | "
            f"{r['rmse_mean']:.4g} | {r['strategy_s']:.0f} | {fmt(r['random_mean'])} | "
            f"{r['diff_mean']:+.2f} ± {fmt(r['diff_se'])} | {r['log_rmse_ratio']:+.3f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reference", type=Path, help="the extrapolation grid (default PROLAS, CKS)")
    p.add_argument("--datasets", required=True, help="comma-separated series")
    p.add_argument("--variant", action="append", default=[], help="NAME=DIR (repeatable)")
    p.add_argument("--budget", type=int, default=50)
    p.add_argument("--out", type=Path, help="write the markdown table here")
    args = p.parse_args()
    variants = dict(v.split("=", 1) for v in args.variant)
    rows = variant_rows(
        args.reference,
        {k: Path(v) for k, v in variants.items()},
        args.datasets.split(","),
        args.budget,
    )
    text = markdown(rows, args.budget)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
