"""Probe: would one level of change operators around PROLAS's best have caught CKS?

For each series of an M3 half in a ``prolas bench --forecast m3-monthly --methods prolas,cks``
run, fits every change wrap of PROLAS's best expression S that its search did not evaluate,
``CP(S, B)``, ``CW(S, B)``, ``CP(B, S)``, ``CW(B, S)`` for the base kernels B (SE, LIN,
PER, RQ, C), each started from S's optimum (``init``, as a search starts it), with the
run's fit seed and the default fit settings on the series' training part. One JSON line per
wrap; ``--summary`` then counts the series where PROLAS ended below CKS's best − 0.1 and
the best wrap reaches it.

    OMP_NUM_THREADS=1 python benchmarks/scripts/change_wraps_probe.py RUN --half tuning \\
        --fit-seed 1 --shard 0/2 --out wraps.jsonl        # and --shard 1/2 beside it
    python benchmarks/scripts/change_wraps_probe.py RUN --summary wraps.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from prolas.bench.forecast_bench import suite_series
from prolas.expr import parse
from prolas.gp import FitConfig, fit_gp
from prolas.search.config import SearchConfig

BASE = ("SE", "LIN", "PER", "RQ", "C")
ROOT = Path(__file__).resolve().parents[2]


def wraps_of(expression: str) -> list[str]:
    """The canonical change wraps of an expression with one base kernel."""
    out = {
        str(parse(f"{op}({a}, {b})"))
        for k in BASE
        for op in ("CP", "CW")
        for a, b in ((expression, k), (k, expression))
    }
    return sorted(out)


def fit_wraps(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    i, k = (int(v) for v in args.shard.split("/"))
    series = [s for s, _ in suite_series("m3-monthly", args.data_dir, half=args.half)][i::k]
    config = FitConfig(seed=args.fit_seed, lengthscale_floor=SearchConfig().lengthscale_floor)
    with args.out.open("a") as out:
        for s in series:
            result = json.loads((args.run / "prolas" / s.folder / "result.json").read_text())
            seen = {h["expression"] for h in result["history"]}
            best = result["best"]["expression"]
            start = fit_gp(best, s.train, config)
            for e in wraps_of(best):
                if e in seen:
                    continue
                t = time.process_time()
                fit = fit_gp(e, s.train, config, init=[start])
                row = {"series": s.name, "best": best, "best_bic": result["best"]["bic"],
                       "expression": e, "status": fit.status, "bic": fit.bic,
                       "seconds": time.process_time() - t}  # fmt: skip
                out.write(json.dumps(row) + "\n")
                out.flush()
            print(s.name, flush=True)


def summary(run: Path, path: Path) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    wraps: dict[str, float] = {}
    for r in rows:
        if r["status"] == "ok":
            wraps[r["series"]] = max(wraps.get(r["series"], -float("inf")), r["bic"])
    behind = caught = 0
    for name in sorted({r["series"] for r in rows}):
        p = json.loads((run / "prolas" / name / "result.json").read_text())["best"]["bic"]
        c = json.loads((run / "cks" / name / "result.json").read_text())["best"]["bic"]
        if p < c - 0.1:
            behind += 1
            caught += wraps.get(name, -float("inf")) >= c - 0.1
    print(
        f"{len(wraps)} series; PROLAS below CKS - 0.1 on {behind}; a wrap reaches CKS on {caught}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--half", default="tuning")
    ap.add_argument("--fit-seed", type=int, default=1)
    ap.add_argument("--shard", default="0/1")
    ap.add_argument("--data-dir", type=Path, default=ROOT / "data")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--summary", type=Path, help="count from a finished probe's lines")
    args = ap.parse_args(argv)
    if args.summary:
        summary(args.run, args.summary)
    elif args.out:
        fit_wraps(args)
    else:
        ap.error("give --out (fit) or --summary (count)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
