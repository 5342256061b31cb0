# Run at commit 8905dce: uses LatentBOConfig options and search.latent.resolve_vae since removed.
"""PROLAS vs random search on a synthetic objective over expressions (no GP fits).

score(e) = 10 * Jaccard(product terms of e, of the target)
         + 5 * Jaccard(base-kernel multisets of e, of the target)     (15 iff e == target)

Reports, per seed, the first evaluation that finds the target (budget + 1 = never) and
the mean best score at the budget.

    .venv/bin/python benchmarks/scripts/tune_synthetic.py "LIN + PER + SE" 20 8 \\
        --checkpoint benchmarks/results/prolas_design/checkpoints/kgvae_d4 n_init=5
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np
import torch

from prolas.expr import Expression, parse
from prolas.records import Score
from prolas.search.config import SearchConfig
from prolas.search.evaluator import Evaluator
from prolas.search.latent import LatentBOConfig, resolve_vae, search_prolas
from prolas.search.random_search import search_random


class Similarity:
    def __init__(self, target: str) -> None:
        self.t = parse(target)

    def __call__(self, e: Expression) -> Score:
        a, b = set(e.terms), set(self.t.terms)
        ca = Counter(f for t in e.terms for f in t)
        cb = Counter(f for t in self.t.terms for f in t)
        v = 10 * len(a & b) / len(a | b) + 5 * sum((ca & cb).values()) / sum((ca | cb).values())
        return Score(str(e), "ok", v, v, e.n_params, 0.0)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("target")
    p.add_argument("budget", type=int)
    p.add_argument("seeds", type=int)
    p.add_argument("options", nargs="*", help="LatentBOConfig overrides key=value")
    p.add_argument("--checkpoint", default="default")
    p.add_argument("--no-random", action="store_true")
    args = p.parse_intermixed_args()
    torch.set_num_threads(1)
    options = LatentBOConfig.from_overrides(args.options)

    scorer = Similarity(args.target)
    optimum = scorer(parse(args.target)).bic

    def first_hit(res) -> int:
        for e in res.history:
            if e.bic >= optimum - 1e-9:
                return e.index
        return args.budget + 1

    cfg = SearchConfig(budget=args.budget, checkpoint=args.checkpoint)
    trained = resolve_vae(None, cfg)
    hits, finals, rnd = [], [], []
    t0 = time.time()
    for s in range(args.seeds):
        ev = Evaluator(scorer, args.budget)
        res = search_prolas(ev, None, cfg.replace(seed=s), trained=trained, options=options)
        hits.append(first_hit(res))
        finals.append(max(res.best_trace()))
        if not args.no_random:
            ev = Evaluator(scorer, args.budget)
            rnd.append(first_hit(search_random(ev, trained.grammar, seed=s)))
    print(
        f"{args.checkpoint} {args.options}: prolas first hit {hits} mean {np.mean(hits):.2f}, "
        f"mean final {np.mean(finals):.2f}"
        + (f"; random first hit {rnd} mean {np.mean(rnd):.2f}" if rnd else "")
        + f" ({time.time() - t0:.0f} s)"
    )


if __name__ == "__main__":
    main()
