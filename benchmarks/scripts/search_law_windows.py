"""tests/search/test_latent.py's search law (PROLAS finds LIN + PER + SE sooner than
random search) for other LatentBOConfig settings: the first hit of each of 24 search
seeds (budget 40; budget + 1 if never), and Welch's one-sided t-test against random
search's 300 seeds, as the test computes it.

    python benchmarks/scripts/search_law_windows.py run LABEL [key=value ...] --out F.jsonl \
        [--seeds 0-23]
    python benchmarks/scripts/search_law_windows.py summary F.jsonl --base LABEL

``--seeds A-B`` runs other search seeds than the test's 24 (more power); rows are compared
pairwise with the base only when they ran the same seeds.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "search"), str(Path(__file__).parent)]

from strategy_speed import _seeds  # noqa: E402  (the script beside this one: "0-23", "0,3,7")

TARGET, BUDGET, SEEDS, RANDOM_SEEDS = "LIN + PER + SE", 40, 24, 300


def _law():
    from test_latent import Similarity, _first_hit  # the test's objective and count

    from prolas.expr import parse
    from prolas.search.evaluator import Evaluator
    from prolas.vae import load_checkpoint

    return Similarity, _first_hit, parse, Evaluator, load_checkpoint("default")


def run(label: str, overrides: list[str], out: str, seeds: Sequence[int] = range(SEEDS)) -> None:
    from prolas.search.config import SearchConfig
    from prolas.search.latent import LatentBOConfig, search_prolas

    Similarity, first_hit, parse, Evaluator, trained = _law()
    torch.set_num_threads(1)
    base = ["base_kernels=false", "warm_start=0", "n_init=5", "surrogate=ot"]
    opts = LatentBOConfig.from_overrides([*base, *overrides])
    optimum = Similarity(TARGET).score(parse(TARGET))
    hits = []
    for s in seeds:
        ev = Evaluator(Similarity(TARGET), BUDGET)
        res = search_prolas(
            ev, None, SearchConfig(budget=BUDGET, seed=s), trained=trained, options=opts
        )
        hits.append(first_hit(res, optimum, BUDGET))
    with open(out, "a") as fh:
        row = {"label": label, "options": overrides, "hits": hits, "seeds": list(seeds)}
        fh.write(json.dumps(row) + "\n")
    print(label, overrides, "mean first hit", np.mean(hits), file=sys.stderr)


def summary(path: str, base: str) -> None:
    from scipy import stats

    from prolas.search.random_search import search_random

    Similarity, first_hit, parse, Evaluator, trained = _law()
    optimum = Similarity(TARGET).score(parse(TARGET))
    rnd = []
    for s in range(RANDOM_SEEDS):
        ev = Evaluator(Similarity(TARGET), BUDGET)
        rnd.append(first_hit(search_random(ev, trained.grammar, seed=s), optimum, BUDGET))
    rows = {r["label"]: r for r in map(json.loads, Path(path).read_text().splitlines())}
    ref = np.asarray(rows[base]["hits"])
    ref_seeds = rows[base].get("seeds", list(range(SEEDS)))
    print(f"random search ({RANDOM_SEEDS} seeds): mean first hit {np.mean(rnd):.2f}\n")
    print(
        f"| variant | options | mean first hit | hits within {BUDGET} | p (vs random) "
        f"| paired vs {base} (mean ± se) | earlier / same / later |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, r in rows.items():
        h = np.asarray(r["hits"])
        p = stats.ttest_ind(rnd, h, equal_var=False, alternative="greater").pvalue
        if r.get("seeds", list(range(SEEDS))) == ref_seeds:
            d = h - ref
            se = d.std(ddof=1) / np.sqrt(len(d))
            paired = (
                f"{d.mean():+.2f} ± {se:.2f} | {(d < 0).sum()} / {(d == 0).sum()} / {(d > 0).sum()}"
            )
        else:  # other seeds: no pairs
            paired = "— | —"
        print(
            f"| {label} ({len(h)} seeds) | {' '.join(r['options'])} | {h.mean():.2f} "
            f"| {(h <= BUDGET).sum()} | {p:.4f} | {paired} |"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("label")
    r.add_argument("overrides", nargs="*", help="LatentBOConfig key=value")
    r.add_argument("--out", required=True)
    r.add_argument(
        "--seeds", default=f"0-{SEEDS - 1}", help="search seeds: A-B (inclusive) or A,B,C"
    )
    s = sub.add_parser("summary")
    s.add_argument("path")
    s.add_argument("--base", required=True)
    a = p.parse_args()
    if a.cmd == "run":
        run(a.label, a.overrides, a.out, _seeds(a.seeds))
    else:
        summary(a.path, a.base)


if __name__ == "__main__":
    main()
