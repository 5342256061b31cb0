"""The long-series study: which view lets a search find the planted periods, at what cost.

One (series, N, option, seed) per call, in this process; the record is appended as one
JSON line to --out (prolas.bench.long_series.run_option). Run the cells one after another
(the machine's other jobs contend for the cores; CPU seconds are the measure):

    python benchmarks/scripts/long_series_study.py --series hourly-daily-yearly --n 20000 \
        --option windows --out benchmarks/results/long_series/runs.jsonl
    python benchmarks/scripts/long_series_study.py --table benchmarks/results/long_series/runs.jsonl
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from prolas.bench.long_series import OPTIONS, SERIES, run_option


def _yes(flags: list[bool], planted: list[float]) -> str:
    return ", ".join(f"{p:g} {'yes' if ok else 'no'}" for p, ok in zip(planted, flags))


def table(path: Path) -> str:
    """The runs of ``path`` as a markdown table, in the order they ran."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lines = [
        "| series | N | view | points searched | fits | search's best | planted periods "
        "found by the search | after the refit | left out | refit log-likelihood "
        "| search CPU s | s per fit | refit CPU s | peak RSS MB | commit |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per_fit = r["search_cpu_seconds"] / max(r["evaluations"], 1)
        left = ", ".join(f"{v:.6g}" for v in r["left_out"]) or "none"
        loglik = r.get("refit_log_likelihood")  # recorded since f0dce53
        loglik = "—" if loglik is None else f"{loglik:.1f}"
        lines.append(
            f"| {r['series']} | {r['n']} | {r['option']} | {r['searched_points']} | "
            f"{r['evaluations']} | `{r['search_best']}` | "
            f"{_yes(r['search_recovered'], r['planted'])} | "
            f"{_yes(r['refit_recovered'], r['planted'])} | {left} | {loglik} | "
            f"{r['search_cpu_seconds']:.0f} | {per_fit:.1f} | {r['refit_cpu_seconds']:.0f} | "
            f"{r['peak_rss_mb']:.0f} | {r.get('commit', '')} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", help="print the runs of this file as a markdown table and stop")
    p.add_argument("--series", choices=sorted(SERIES))
    p.add_argument("--n", type=int)
    p.add_argument("--option", choices=OPTIONS)
    p.add_argument("--method", default="prolas")
    p.add_argument("--budget", type=int, default=50)
    p.add_argument("--restarts", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--out")
    args = p.parse_args()
    if args.table:
        print(table(Path(args.table)))
        return
    if not (args.series and args.n and args.option and args.out):
        p.error("--series, --n, --option and --out are required (or --table FILE)")
    row = run_option(
        args.series,
        args.n,
        args.option,
        method=args.method,
        budget=args.budget,
        restarts=args.restarts,
        seed=args.seed,
        data_seed=args.data_seed,
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    row["commit"] = commit
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
    keys = ("series", "option", "searched_points", "search_best", "search_recovered")
    keys += ("refit_recovered", "left_out", "search_cpu_seconds", "refit_cpu_seconds")
    print({k: row[k] for k in keys})


if __name__ == "__main__":
    main()
