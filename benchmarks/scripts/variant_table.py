"""PROLAS variants against the default on the same extrapolation cells (issue 18 studies).

Each variant is a folder of ``prolas bench --extrapolation`` cells (``<dir>/cells`` or the
cells themselves) run with the same settings as the reference grid but a changed search.
For every series and variant: mean ± s.e. of the best BIC after the budget; the median
over seeds of the fits needed to reach the final BIC of CKS with the change rules (from
the reference grid; a seed that never does counts as never); the mean test RMSE of the
chosen models; the mean strategy seconds. Only the seeds every variant ran are compared
(the reference grid may hold more).

    python benchmarks/scripts/variant_table.py benchmarks/results/extrapolation \\
        --datasets airline,call-centre,sulphuric --variant edits_local=DIR ... --out FILE.md
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from prolas.bench.stats import cell_trace, fmt, mean_se, reach

REFERENCE = "cks-change"  # the cell-file label of cks:change


def load(folder: Path, dataset: str, method: str = "prolas") -> dict[int, dict]:
    """Cells of one series and method by seed (``folder`` or ``folder/cells``)."""
    folder = folder / "cells" if (folder / "cells").is_dir() else folder
    out = {}
    for path in folder.glob(f"{dataset}__{method}__seed*.json"):
        cell = json.loads(path.read_text())
        out[int(cell["seed"])] = cell
    return out


def variant_rows(
    reference: Path, variants: dict[str, Path], datasets: list[str], budget: int
) -> list[dict]:
    """One row per (series, variant), the default (``reference``'s PROLAS cells) first."""
    rows = []
    for dataset in datasets:
        cks = load(reference, dataset, REFERENCE)
        if not cks:
            raise SystemExit(f"no {REFERENCE} cell for {dataset} in {reference}")
        target = float(cell_trace(next(iter(cks.values())), budget)[-1])
        runs = {
            "default": load(reference, dataset),
            **{k: load(v, dataset) for k, v in variants.items()},
        }
        seeds = sorted(set.intersection(*(set(r) for r in runs.values())))
        for name, cells in runs.items():
            chosen = [cells[s] for s in seeds]
            best = np.array([cell_trace(c, budget)[-1] for c in chosen])
            fits = np.array([reach(cell_trace(c, budget), target) for c in chosen])
            mean, se = mean_se(best)
            rows.append(
                {
                    "dataset": dataset,
                    "variant": name,
                    "seeds": len(seeds),
                    "cks_final": target,
                    "best_mean": mean,
                    "best_se": se,
                    "fits_median": float(np.median(fits)),  # never = +inf counts
                    "reached": int(np.isfinite(fits).sum()),
                    "rmse_mean": float(np.mean([c["test"]["rmse"] for c in chosen])),
                    "strategy_s": float(np.mean([c["strategy_seconds"] for c in chosen])),
                }
            )
    return rows


def markdown(rows: list[dict], budget: int) -> str:
    lines = [
        f"| data (CKS final BIC) | variant | seeds | mean best BIC at {budget} | median fits to "
        "CKS's BIC (seeds reaching it) | test RMSE, mean | strategy s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        fits = "never" if not math.isfinite(r["fits_median"]) else f"{r['fits_median']:g}"
        lines.append(
            f"| {r['dataset']} ({r['cks_final']:.2f}) | {r['variant']} | {r['seeds']} | "
            f"{fmt(r['best_mean'])} ± {fmt(r['best_se'])} | {fits} ({r['reached']}/{r['seeds']}) | "
            f"{r['rmse_mean']:.4g} | {r['strategy_s']:.0f} |"
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
