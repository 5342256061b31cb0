"""Issue 42's goal on the nine series, per run of ``prolas bench --forecast tsdl``.

    python benchmarks/scripts/tsdl_goal.py OUT [OUT ...] [--method prolas]

For each run (one fit seed each; ``OUT/forecast_scores.csv``) and the method's test RMSE
per series:

* **below ABCD**: the number of series where it is below ABCD's published RMSE
  (:data:`prolas.bench.extrapolation.ABCD_RMSE`; goal ≥ 7 of 9), and the median over
  series of RMSE / ABCD's (goal < 1.00);
* **below the best peer**: the number of series where it is below the lowest RMSE of
  AutoETS, AutoARIMA and AutoTheta of the same run (goal ≥ 6 of 9);
* the mean 95 % coverage.

A goal counts as met only if it is met in every run (at every fit seed).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from prolas.bench.extrapolation import ABCD_RMSE

PEERS = ("ets", "arima", "theta")


def goal_row(scores: pd.DataFrame, method: str = "prolas") -> dict:
    """The goal's counts for one run's score table (long format: series, method, rmse,
    coverage, status)."""
    ok = scores[scores["status"] == "ok"]
    rmse = ok.pivot_table(index="series", columns="method", values="rmse")
    mine = rmse[method].dropna()
    abcd = pd.Series({s: ABCD_RMSE[s] for s in mine.index if s in ABCD_RMSE})
    ratio = (mine[abcd.index] / abcd).sort_index()
    peers = rmse.reindex(columns=list(PEERS)).loc[mine.index].min(axis=1, skipna=True)
    coverage = ok[ok["method"] == method]["coverage"]
    return {
        "series": len(mine),
        "below_abcd": int((ratio < 1.0).sum()),
        "median_ratio": float(ratio.median()),
        "below_best_peer": int((mine < peers).sum()),
        "coverage": float(coverage.mean()),
        "ratios": ratio,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="output folders of bench --forecast tsdl")
    ap.add_argument("--method", default="prolas")
    args = ap.parse_args()
    rows = [
        (out, goal_row(pd.read_csv(out / "forecast_scores.csv"), args.method)) for out in args.runs
    ]
    print(
        "| run | series | below ABCD (goal ≥ 7) | median RMSE / ABCD (goal < 1.00) "
        "| below the best of ETS / ARIMA / Theta (goal ≥ 6) | mean coverage |"
    )
    print("|---|---|---|---|---|---|")
    for out, r in rows:
        print(
            f"| {out.name} | {r['series']} | {r['below_abcd']} | {r['median_ratio']:.3f} "
            f"| {r['below_best_peer']} | {r['coverage']:.3f} |"
        )
    print()
    names = sorted(set().union(*(r["ratios"].index for _, r in rows)))
    print("| series | " + " | ".join(out.name for out, _ in rows) + " |")
    print("|---|" + "---|" * len(rows))
    for name in names:
        cells = [f"{r['ratios'].get(name, float('nan')):.3f}" for _, r in rows]
        print(f"| {name} (RMSE / ABCD) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
