# LatentBOConfig options removed later (init, duplicates, warp, trust_region, ...): run at 8905dce.
"""PROLAS design variants on a tuning series (not the airline/mauna test series).

Runs ``prolas.bench.compare.run_compare`` with a given KG-VAE checkpoint and
:class:`prolas.search.latent.LatentBOConfig` overrides, sharing one GP fit cache between
variants (CKS and random search are then served from the cache). Used for
benchmarks/results/prolas_design/README.md ("Design measurements").

    .venv/bin/python benchmarks/scripts/tune_series.py data/call-centre.csv \\
        /tmp/cc/pool_d4 benchmarks/results/prolas_design/checkpoints/kgvae_d4 0-5 50 \\
        --cache benchmarks/results/prolas_design/fits/call-centre.jsonl duplicates=restarts
"""

from __future__ import annotations

import argparse

import torch

from prolas.bench import thin
from prolas.bench.compare import run_compare
from prolas.data import load_csv
from prolas.search.latent import LatentBOConfig


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("checkpoint")
    p.add_argument("seeds", help="N (0..N-1) or A-B (A..B-1)")
    p.add_argument("budget", type=int)
    p.add_argument("options", nargs="*", help="LatentBOConfig overrides key=value (JSON values)")
    p.add_argument("--methods", default="cks,prolas,random")
    p.add_argument("--cache", help="shared fit cache (default OUT/fits.jsonl)")
    p.add_argument(
        "--max-points",
        type=int,
        help="search an evenly spaced thinning of this size, as `prolas bench --max-points` "
        "does (same data fingerprint, so a bench grid's fit cache serves it)",
    )
    args = p.parse_intermixed_args()
    torch.set_num_threads(1)
    options = LatentBOConfig.from_overrides(args.options)
    if "-" in args.seeds:
        a, b = map(int, args.seeds.split("-"))
        seeds: int | list[int] = list(range(a, b))
    else:
        seeds = int(args.seeds)
    data = load_csv(args.data)
    if args.max_points:
        data = thin(data, args.max_points)
    res = run_compare(
        data,
        args.methods.split(","),
        seeds=seeds,
        budget=args.budget,
        out=args.out,
        checkpoint=args.checkpoint,
        cache_path=args.cache,
        prolas_options=options,
        progress=False,
        log=print,
    )
    print(open(f"{args.out}/summary.md").read())
    for r in res.runs.get("prolas", []):
        keys = ("bo_steps", "free_points", "alternates", "diversifications", "stopped")
        print(r.seed, {k: r.extra.get(k) for k in keys})


if __name__ == "__main__":
    main()
