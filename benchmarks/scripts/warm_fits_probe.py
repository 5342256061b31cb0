"""Warm-started against cold fits along fixed PROLAS histories (benchmarks/results/warm_fits/).

A search with ``--warm-fits`` changes its own path (other BICs, other proposals), so its
best BIC mixes the fits' quality with the path's luck. This script holds the path fixed:
it replays the committed default (cold) PROLAS searches of ``../extrapolation/`` and,
for every evaluation after the initial design, fits the expression twice in this process
with the grid's settings (8 restarts, fit seed 0, lengthscale floor 1, the search's
points): cold, and warm-started from the fits the Evaluator would pass
(:func:`prolas.search.evaluator.related_fits` of the history before it). It reports the
log-likelihood gain and the time ratio, both from this one run. The cold refit must equal
the committed fit (checked; with ``--other-machine`` a difference is counted instead: a CPU
whose BLAS kernels round differently can end a refit in another local optimum, and the
warm-against-cold comparison, made in this one process, stays valid).

    python benchmarks/scripts/warm_fits_probe.py airline:0 call-centre:0 sulphuric:0 \\
        --out benchmarks/results/warm_fits/probe.md
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from prolas.data import load_csv
from prolas.expr import parse
from prolas.gp import FitConfig, GPScorer, fit_gp
from prolas.records import Evaluation
from prolas.search.cache import CachedScorer
from prolas.search.evaluator import related_fits

ROOT = Path(__file__).resolve().parents[2]
GRID = ROOT / "benchmarks" / "results" / "extrapolation"
MAX_POINTS = 400
# no offset start: a cold fit here is the random restarts that a warm fit holds too
CONFIG = FitConfig(restarts=8, seed=0, lengthscale_floor=1.0, offset_start=False)


def probe(dataset: str, seed: int, n_init: int = 10, strict: bool = True) -> list[dict]:
    """One row per evaluation after the first ``n_init`` of the seed's committed search;
    ``strict``: stop if a cold refit differs from the committed fit, else mark the row
    (``cold_is_committed``)."""
    ds = load_csv(ROOT / "data" / f"{dataset}_train.csv")
    if ds.n > MAX_POINTS:
        ds = ds.thinned(MAX_POINTS)
    # the grid's fit cache, read only (lookup never fits); its fingerprint must match
    # the committed fits were written by the first fitter (prolas.search.cache)
    cache = CachedScorer(GPScorer(ds, CONFIG), GRID / "fits" / f"{dataset}.jsonl", recorded_by=1)
    cell = json.loads((GRID / "cells" / f"{dataset}__prolas__seed{seed}.json").read_text())
    history: list[Evaluation] = []
    rows = []
    for h in cell["history"]:
        expr = h["expression"]
        committed = cache.lookup(expr)
        if committed is None:
            raise SystemExit(f"{dataset}: {expr} is not in the grid's fit cache at these settings")
        if committed.ok and len(history) >= n_init:
            sources = related_fits(parse(expr), history)
            t0 = time.perf_counter()
            cold = fit_gp(expr, ds, CONFIG)
            t_cold = time.perf_counter() - t0
            t0 = time.perf_counter()
            warm = fit_gp(expr, ds, CONFIG, init=sources)
            t_warm = time.perf_counter() - t0
            same = abs(cold.log_likelihood - committed.log_likelihood) <= 1e-6 * max(
                1.0, abs(committed.log_likelihood)
            )
            if strict and not same:
                raise SystemExit(f"{dataset}:{seed} {expr}: cold refit differs from the cache")
            rows.append(
                {
                    "expression": expr,
                    "gain": warm.log_likelihood - cold.log_likelihood,
                    "t_cold": t_cold,
                    "t_warm": t_warm,
                    "cold_is_committed": same,
                }
            )
        history.append(
            Evaluation(
                len(history) + 1,
                expr,
                "ok" if committed.ok else "failed",
                committed.bic if committed.ok else None,
                committed.log_likelihood if committed.ok else None,
                committed.n_params,
                committed.seconds,
                None,
                fit=committed if committed.ok else None,
            )
        )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="SERIES:SEED of committed default PROLAS searches")
    p.add_argument("--out", type=Path, help="write the Markdown table here too")
    p.add_argument(
        "--other-machine",
        action="store_true",
        help="count cold refits that differ from the committed fits instead of stopping "
        "(another CPU's BLAS rounding)",
    )
    args = p.parse_args()
    warnings.simplefilter("ignore")
    lines = [
        "| search | fits | mean gain (nats) | gain > 0.5 | gain < -0.5 | largest | "
        "warm / cold time |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in args.runs:
        dataset, seed = run.split(":")
        rows = probe(dataset, int(seed), strict=not args.other_machine)
        moved = sum(not r["cold_is_committed"] for r in rows)
        if moved:
            print(
                f"{dataset}:{seed}: {moved} of {len(rows)} cold refits differ from the "
                "committed fits"
            )
        g = np.array([r["gain"] for r in rows])
        ratio = sum(r["t_warm"] for r in rows) / sum(r["t_cold"] for r in rows)
        lines.append(
            f"| {dataset} seed {seed} | {len(g)} | {g.mean():+.2f} | {np.sum(g > 0.5)} | "
            f"{np.sum(g < -0.5)} | {g.max():+.2f} | {ratio:.2f} |"
        )
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
