"""The long-series study: which view lets a search find the planted periods, at what cost.

One (series, N, option, seed) per call, in this process; the record is appended as one
JSON line to --out (prolas.bench.long_series.run_option). Run the cells one after another
(the machine's other jobs contend for the cores; CPU seconds are the measure):

    python benchmarks/scripts/long_series_study.py --series hourly-daily-yearly --n 20000 \
        --option windows --out benchmarks/results/long_series/runs.jsonl
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from prolas.bench.long_series import OPTIONS, SERIES, run_option


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--series", choices=sorted(SERIES), required=True)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--option", choices=OPTIONS, required=True)
    p.add_argument("--method", default="prolas")
    p.add_argument("--budget", type=int, default=50)
    p.add_argument("--restarts", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--out", required=True)
    args = p.parse_args()
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
