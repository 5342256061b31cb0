"""Batch proposals on both cores: PROLAS with q = 1 (one process) against q = 2 (two workers).

Issue 18 asks whether PROLAS can reach CKS's final BIC before CKS finishes, in wall time on
2 cores. CKS already fits each level on both cores (``default_workers``); PROLAS proposes
one expression per BO step and fits it in one process. With ``--batch 2`` each step
proposes the two best new expressions of the acquisition and fits them in parallel, so a
50-fit search takes 25 surrogate steps instead of 40 and uses both cores.

Every run is the real CLI (``prolas fit data/<name>.csv``, defaults otherwise), so the
times are what a user waits for. Per series this records CKS's final BIC, its number of
fits and its search time, and for each q and seed: the best BIC after 50 fits, the search
time, and the fits and seconds (the journal's ``elapsed``) to first reach CKS's final BIC.

    python benchmarks/scripts/batch_proposals.py --datasets airline,call-centre,sulphuric \\
        --seeds 3 --out benchmarks/results/batch_proposals

Runs are never timed in parallel with each other; ``--resume`` keeps finished runs.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

from prolas.bench.stats import reach as fits_to_reach
from prolas.records import best_so_far

ROOT = Path(__file__).resolve().parents[2]


def run(cmd: list[str], out: Path, resume: bool) -> dict:
    """One ``prolas fit`` into ``out`` (kept with --resume); its result.json."""
    result = out / "result.json"
    if not (resume and result.exists()):
        subprocess.run(cmd + ["--out", str(out), "--force", "--quiet"], check=True, cwd=ROOT)
    return json.loads(result.read_text())


def journal(out: Path) -> list[dict]:
    lines = (out / "journal.jsonl").read_text().splitlines()[1:]
    return [json.loads(line) for line in lines if line.strip()]


def reach(entries: list[dict], target: float) -> tuple[float, float]:
    """Fits and seconds (the journal's ``elapsed``) until the running best BIC first
    reaches ``target`` within the benchmarks' tolerance (inf: never)."""
    trace = best_so_far(e["bic"] if e["status"] == "ok" else None for e in entries)
    fits = fits_to_reach(np.asarray(trace), target)
    return fits, (float(entries[int(fits) - 1]["elapsed"]) if math.isfinite(fits) else math.inf)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="airline,call-centre,sulphuric")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--batches", default="1,2")
    ap.add_argument("--budget", type=int, default=50)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args(argv)
    prolas = [sys.executable, "-m", "prolas", "fit"]
    rows = []
    for name in args.datasets.split(","):
        data = str(ROOT / "data" / f"{name}.csv")
        cks_out = args.out / "runs" / name / "cks"
        cks = run(prolas + [data, "--search", "cks"], cks_out, args.resume)
        target = cks["best"]["bic"]
        rows.append(
            {
                "data": name,
                "method": "cks",
                "seed": 0,
                "best_bic": target,
                "evaluations": cks["search"]["evaluations"],
                "wall_seconds": cks["search"]["wall_seconds"],
                "fits_to_cks": float(cks["search"]["evaluations"]),
                "seconds_to_cks": cks["search"]["wall_seconds"],
            }
        )
        for q in [int(b) for b in args.batches.split(",")]:
            for seed in range(args.seeds):
                out = args.out / "runs" / name / f"prolas_q{q}_s{seed}"
                cmd = prolas + [data, "--seed", str(seed), "--budget", str(args.budget)]
                res = run(cmd + ["--batch", str(q)], out, args.resume)
                fits, secs = reach(journal(out), target)
                rows.append(
                    {
                        "data": name,
                        "method": f"prolas q={q}",
                        "seed": seed,
                        "best_bic": res["best"]["bic"],
                        "evaluations": res["search"]["evaluations"],
                        "wall_seconds": res["search"]["wall_seconds"],
                        "fits_to_cks": fits,
                        "seconds_to_cks": secs,
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "runs.json").write_text(json.dumps(rows, indent=1) + "\n")
    (args.out / "summary.md").write_text(summary(rows))
    print(summary(rows))


def summary(rows: list[dict]) -> str:
    """One line per series and method: mean best BIC (± s.e.), median search seconds,
    median fits and seconds to reach CKS's final BIC (inf: the median seed never did)."""
    out = [
        "| data | method | seeds | mean best BIC (± s.e.) | median search s | "
        "median fits to CKS's BIC | median s to CKS's BIC | seeds reaching it |",
        "|---|---|---|---|---|---|---|---|",
    ]
    keys = dict.fromkeys((r["data"], r["method"]) for r in rows)
    for data, method in keys:
        rs = [r for r in rows if r["data"] == data and r["method"] == method]
        bics = [r["best_bic"] for r in rs]
        se = statistics.stdev(bics) / math.sqrt(len(bics)) if len(bics) > 1 else math.nan
        se_text = "-" if math.isnan(se) else f"{se:.2f}"
        hit = sum(math.isfinite(r["fits_to_cks"]) for r in rs)
        out.append(
            f"| {data} | {method} | {len(rs)} | {statistics.mean(bics):.2f} ± {se_text} | "
            f"{statistics.median(r['wall_seconds'] for r in rs):.1f} | "
            f"{statistics.median(r['fits_to_cks'] for r in rs):g} | "
            f"{statistics.median(r['seconds_to_cks'] for r in rs):.1f} | {hit}/{len(rs)} |"
        )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
