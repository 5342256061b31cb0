"""A fixed-kernel candidate's forecasts against the peers', series by series.

``fixed_kernel_restarts.py`` writes one row per (series, fit seed, candidate); ``prolas
bench --forecast SUITE --methods ets,arima,theta`` writes the peers' rows in its
``forecast_scores.csv``. This pairs one candidate at each fit seed with each peer on the
series both scored and applies the benchmark's paired rule
(:func:`prolas.bench.paired.compare`: sign test and bootstrap interval of the mean
difference; negative d favours the candidate), so a mean difference is read against the
noise of the series drawn.

    python benchmarks/scripts/candidate_vs_peers.py \\
        benchmarks/results/trend_combination/report.csv \\
        benchmarks/results/forecast_peers/m3_report/forecast_scores.csv --candidate Q3
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from prolas.bench.paired import compare

PEERS = ["ets", "arima", "theta"]
METRICS = ["mase", "interval_score_scaled", "crps_scaled", "coverage"]


def paired_table(
    rows: pd.DataFrame, peers: pd.DataFrame, candidate: str, seed: int
) -> pd.DataFrame:
    """One row per (series, method): the candidate at ``seed`` as method ``candidate`` and
    the peers' ok rows, on the series the candidate scored."""
    mine = rows[(rows.candidate == candidate) & (rows.seed == seed) & (rows.status == "ok")]
    mine = mine.assign(method=candidate)[["series", "method", *METRICS]]
    theirs = peers[peers.method.isin(PEERS) & (peers.status == "ok")]
    theirs = theirs[theirs.series.isin(mine.series)][["series", "method", *METRICS]]
    return pd.concat([mine, theirs], ignore_index=True)


def report(rows: pd.DataFrame, peers: pd.DataFrame, candidate: str) -> list[str]:
    """Markdown: per fit seed and peer, the candidate's and the peer's means and the
    paired verdict on each metric."""
    lines = [
        "| fit seed | peer | metric | series | candidate / peer mean | better / worse "
        "| sign p | mean d [95 % interval] | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for seed in sorted(rows.seed.unique()):
        table = paired_table(rows, peers, candidate, int(seed))
        means = table.groupby("method")[METRICS].mean()
        verdicts = compare(table, candidate, PEERS, METRICS)
        for r in verdicts.itertuples():
            lines.append(
                f"| {seed} | {r.peer} | {r.metric} | {r.series} | "
                f"{means.loc[candidate, r.metric]:.4f} / {means.loc[r.peer, r.metric]:.4f} | "
                f"{r.better} / {r.worse} | {r.sign_p:.2g} | "
                f"{r.mean:+.4f} [{r.low:+.4f}, {r.high:+.4f}] | {r.verdict} |"
            )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=Path, help="fixed_kernel_restarts.py's --out CSV")
    ap.add_argument("peers", type=Path, help="a forecast bench's forecast_scores.csv")
    ap.add_argument("--candidate", default="Q3")
    args = ap.parse_args()
    lines = report(pd.read_csv(args.rows), pd.read_csv(args.peers), args.candidate)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
