"""One method's forecasts in two arms of ``prolas bench --forecast`` runs, paired per
(series, fit seed): how a forecast rule written before the runs is read.

    python benchmarks/scripts/forecast_pairs.py \\
        --a OLD_SEED0,OLD_SEED1,OLD_SEED2 --b NEW_SEED0,NEW_SEED1,NEW_SEED2 \\
        --series call-centre,sulphuric [--method prolas]

``--a`` (the baseline) and ``--b`` (the candidate) are run folders holding
``forecast_scores.csv``, one per fit seed, in the same order. Prints, per series and
fit seed, both arms' test RMSE, scaled interval score and 95 % coverage and the log ratio
``log(RMSE_b / RMSE_a)``; then, over the pairs of ``--series`` (all series if not given):
how many pairs have a lower RMSE in ``b`` than in ``a``, the mean log ratio, and both
arms' mean scaled interval score (``benchmarks/results/fixed_long/``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

COLUMNS = {"rmse": "rmse", "interval_score_scaled": "is", "coverage": "cov"}


def arm_rows(folders: list[Path], method: str) -> pd.DataFrame:
    """``method``'s scored rows of each run, with the run's position as ``seed``."""
    frames = []
    for seed, folder in enumerate(folders):
        t = pd.read_csv(folder / "forecast_scores.csv")
        t = t[(t.method == method) & (t.status == "ok")]
        frames.append(t[["series", *COLUMNS]].assign(seed=seed))
    return pd.concat(frames, ignore_index=True)


def pair_table(a: list[Path], b: list[Path], method: str = "prolas") -> pd.DataFrame:
    """One row per (series, seed) scored in both arms: ``rmse_a``, ``rmse_b``, ``is_a``,
    ``is_b``, ``cov_a``, ``cov_b`` and ``log_ratio`` = log(rmse_b / rmse_a)."""
    if len(a) != len(b):
        raise SystemExit(f"--a has {len(a)} runs and --b {len(b)}: one per fit seed in each")
    sides = {
        side: arm_rows(runs, method).rename(columns={c: f"{k}_{side}" for c, k in COLUMNS.items()})
        for side, runs in (("a", a), ("b", b))
    }
    table = sides["a"].merge(sides["b"], on=["series", "seed"])
    table["log_ratio"] = np.log(table.rmse_b / table.rmse_a)
    return table.sort_values(["seed", "series"], ignore_index=True)


def summary(table: pd.DataFrame, series: list[str] | None = None) -> dict:
    """Over the pairs of ``series`` (all if None): ``pairs``, ``b_lower`` (pairs with
    rmse_b < rmse_a), ``mean_log_ratio``, ``mean_is_a`` and ``mean_is_b``."""
    t = table if series is None else table[table.series.isin(series)]
    return {
        "pairs": len(t),
        "b_lower": int((t.rmse_b < t.rmse_a).sum()),
        "mean_log_ratio": float(t.log_ratio.mean()),
        "mean_is_a": float(t.is_a.mean()),
        "mean_is_b": float(t.is_b.mean()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="the baseline's run folders, comma-separated")
    ap.add_argument("--b", required=True, help="the candidate's run folders, in seed order")
    ap.add_argument("--series", help="comma-separated series the summary is over")
    ap.add_argument("--method", default="prolas")
    args = ap.parse_args()
    table = pair_table(
        [Path(p) for p in args.a.split(",")], [Path(p) for p in args.b.split(",")], args.method
    )
    print(table.round(4).to_string(index=False))
    series = args.series.split(",") if args.series else None
    s = summary(table, series)
    print(
        f"\nover {s['pairs']} pairs ({args.series or 'all series'}): b lower in "
        f"{s['b_lower']}, mean log(RMSE_b / RMSE_a) {s['mean_log_ratio']:+.4f}, "
        f"mean scaled interval score a {s['mean_is_a']:.4f}, b {s['mean_is_b']:.4f}"
    )


if __name__ == "__main__":
    main()
