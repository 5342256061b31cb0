"""One method's scores in two ``prolas bench --forecast`` runs, series by series.

A changed default is judged on the same series before and after. This reads two runs'
``forecast_scores.csv``, keeps one method (default ``prolas``) and, optionally, one
half, and compares the new run against the old one with the benchmark's paired rule
(:func:`prolas.bench.paired.compare`: sign test and bootstrap interval; negative d
favours the new run). Best BIC is also counted with the searches' tie of
``BIC_TIE`` (0.1): higher / lower by more than that, and the sign test on those.

    python benchmarks/scripts/compare_forecast_runs.py NEW/forecast_scores.csv \\
        OLD/forecast_scores.csv --half tuning
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.bench.forecast_bench import BIC_TIE, search_counts
from prolas.bench.paired import compare, sign_test

METRICS = ["bic", "mase", "interval_score_scaled", "crps_scaled", "coverage", "search_seconds"]


def scores(path: Path, method: str, half: str, label: str) -> pd.DataFrame:
    """``method``'s rows of a run's scores (``half``: ``all`` or one half), as ``label``."""
    t = pd.read_csv(path)
    t = t[(t.method == method) & (t.status == "ok")]
    if half != "all":
        t = t[t.half == half]
    return t.assign(method=label)


def paired_runs(new: Path, old: Path, method: str = "prolas", half: str = "all") -> pd.DataFrame:
    """``method``'s rows of both runs (``method`` column ``new`` / ``old``), on the series
    that both scored."""
    table = pd.concat([scores(new, method, half, "new"), scores(old, method, half, "old")])
    both = table.groupby("series").method.nunique() == 2
    return table[table.series.isin(both[both].index)]


def bic_counts(table: pd.DataFrame) -> tuple[int, int, int, float]:
    """``(higher, lower, within, p)``: series where the new best BIC is higher / lower
    than the old by more than ``BIC_TIE``, within it, and the sign test's p on the first
    two."""
    wide = table.pivot(index="series", columns="method", values=["bic", "search_seconds"])
    c = search_counts(
        wide["bic"]["new"] - wide["bic"]["old"],
        wide["search_seconds"]["new"] / wide["search_seconds"]["old"],
    )
    higher, lower = c["higher"], c["lower"]
    _, _, _, p = sign_test(np.concatenate([-np.ones(higher), np.ones(lower)]))
    return higher, lower, c["n"] - higher - lower, p


def report(table: pd.DataFrame) -> list[str]:
    """Markdown: both runs' means, the BIC counts and the paired table."""
    means = table.groupby("method")[METRICS].mean()
    medians = table.groupby("method")["search_seconds"].median()
    lines = [
        "| run | " + " | ".join(f"mean {m}" for m in METRICS) + " | median search_seconds |",
        "|---" * (len(METRICS) + 2) + "|",
    ]
    for run in ("new", "old"):
        cells = " | ".join(f"{means.loc[run, m]:.4g}" for m in METRICS)
        lines.append(f"| {run} | {cells} | {medians.loc[run]:.4g} |")
    higher, lower, within, p = bic_counts(table)
    lines += [
        "",
        f"best BIC, new against old: higher by > {BIC_TIE} on {higher}, lower on {lower}, "
        f"within on {within} (sign test p = {p:.3g})",
        "",
        "| metric | d | series | new better / worse / tied | sign p "
        "| mean d [95 % interval] | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in compare(table, "new", ["old"], METRICS).itertuples():
        how = r.difference.replace("|", "\\|")
        lines.append(
            f"| {r.metric} | {how} | {r.series} | {r.better} / {r.worse} / {r.ties} | "
            f"{r.sign_p:.3g} | {r.mean:.4g} [{r.low:.4g}, {r.high:.4g}] | {r.verdict} |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("new", type=Path, help="the new run's forecast_scores.csv")
    ap.add_argument("old", type=Path, help="the old run's forecast_scores.csv")
    ap.add_argument("--method", default="prolas")
    ap.add_argument("--half", default="all", choices=["all", "tuning", "report"])
    args = ap.parse_args()
    table = paired_runs(args.new, args.old, args.method, args.half)
    print(f"{args.method}, {args.half} half: {table.series.nunique()} series in both runs\n")
    print("\n".join(report(table)))


if __name__ == "__main__":
    main()
