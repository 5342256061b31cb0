"""Seconds per cold fit: fitter variants, and another checkout's fitter, in one run.

    python benchmarks/scripts/fit_cost.py --series airline mauna --n 12 --rounds 3 \\
        --baseline /path/to/old/checkout --checkout candidate=/path/to/other/checkout \\
        --variant today='{}' \\
        --variant v5='{"restarts": 16, "stages": [[16, 10, 100], [8, 15, 200]], ...}'

Draws ``--n`` expressions (seed 43) from each series' grid fit cache
(``benchmarks/results/extrapolation_base_kernels/fits/``), and fits every one on the
grid's points (training split, at most 400 points, lengthscale floor 1, fit seed 0) with
each variant (``FitConfig`` fields as JSON), with the fitter of ``--baseline`` and with
those of any ``--checkout`` (their defaults). Each (variant, series) block runs in its own
process, one thread, and the blocks are interleaved over ``--rounds`` rounds, so that a
slower or busier stretch of the run hits every variant alike. Prints the median seconds
per fit of each variant and series over rounds, and each variant's ratio to the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from prolas.search.cache import cold_row

ROOT = Path(__file__).resolve().parents[2]
CACHES = ROOT / "benchmarks/results/extrapolation_base_kernels/fits"

WORKER = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
sys.path.insert(0, sys.argv[1])
from prolas.bench.cells import load_series, thin
from prolas.gp import FitConfig, fit_gp
series, exprs, cfg = sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
if "stages" in cfg:
    cfg["stages"] = tuple(tuple(s) for s in cfg["stages"])
ds = thin(load_series(sys.argv[5] + f"/{series}_train.csv"), 400)
fit_gp("SE", ds, FitConfig(restarts=2))  # warm-up: imports, first allocations
t = time.process_time()
for e in exprs:
    fit_gp(e, ds, FitConfig(seed=0, lengthscale_floor=1.0, **cfg))
print(json.dumps({"seconds": (time.process_time() - t) / len(exprs), "n": ds.n}))
"""


def draw(series: str, n: int, seed: int) -> list[str]:
    exprs = set()
    for line in (CACHES / f"{series}.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["fit"]["status"] == "ok" and cold_row(r):
            exprs.add(r["expression"])
    exprs = sorted(exprs)
    rng = np.random.default_rng(seed)
    return [exprs[i] for i in sorted(rng.choice(len(exprs), n, replace=False))]


def run_block(root: Path, series: str, exprs: list[str], cfg: dict) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            WORKER,
            str(root),
            series,
            json.dumps(exprs),
            json.dumps(cfg),
            str(ROOT / "data"),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--series", nargs="+", default=["airline", "mauna"])
    p.add_argument("--n", type=int, default=12, help="expressions per series")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--baseline", type=Path, required=True, help="checkout of the old fitter")
    p.add_argument("--variant", action="append", default=[], help="NAME=JSON FitConfig fields")
    p.add_argument(
        "--checkout", action="append", default=[], help="NAME=PATH: another checkout's fitter"
    )
    args = p.parse_args()
    variants = [("baseline", args.baseline, {})]
    for c in args.checkout:
        name, path = c.split("=", 1)
        variants.append((name, Path(path), {}))
    for v in args.variant:
        name, cfg = v.split("=", 1)
        variants.append((name, ROOT, json.loads(cfg)))
    exprs = {s: draw(s, args.n, 43) for s in args.series}
    seconds: dict[tuple[str, str], list[float]] = {}
    sizes = {}
    for r in range(args.rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        for s in args.series:
            for name, root, cfg in order:
                t0 = time.time()
                res = run_block(root, s, exprs[s], cfg)
                seconds.setdefault((name, s), []).append(res["seconds"])
                sizes[s] = res["n"]
                print(
                    f"round {r} {s} {name}: {res['seconds']:.3f} s/fit ({time.time() - t0:.0f} s)",
                    flush=True,
                )
    print()
    print(
        "| variant | "
        + " | ".join(f"{s} (N = {sizes[s]}) s/fit, ratio" for s in args.series)
        + " |"
    )
    print("|---|" + "---|" * len(args.series))
    for name, _, _ in variants:
        cells = []
        for s in args.series:
            med = float(np.median(seconds[(name, s)]))
            base = float(np.median(seconds[("baseline", s)]))
            cells.append(f"{med:.3f}, {med / base:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
