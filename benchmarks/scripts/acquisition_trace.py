"""Trace PROLAS's acquisition step by step on one series of the extrapolation grid.

For every BO step of a default PROLAS search (the grid's settings: training split, searched
on at most 400 points, 50 fits, 8 restarts, lengthscale floor 1), print the number of
evaluated expressions, the best BIC so far, the chosen expression with its predicted BIC
and standard deviation, and for each ``--watch`` expression its LogEI rank among the step's
candidates and its predicted BIC (nothing when the step's latent pool did not decode to it,
or when it has been evaluated). The predictions are the surrogate's own
(``_ExpressionGP.last_ranking``): BIC = predicted log-likelihood minus the exact penalty.

The search is the grid's own cell (:func:`prolas.bench.grid.run_cell`, without the final
refit) with the settings the committed cell recorded (:meth:`LatentBOConfig.from_record`;
the grid predates the base kernels in the initial design), so its history is the
committed cell's. Scores come from a copy of the grid's fit
cache (``--grid``/fits/<series>.jsonl): a search the grid ran costs no fits.

    python benchmarks/scripts/acquisition_trace.py temperature 0 --watch "PER,C + PER"
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import tempfile
from pathlib import Path

from prolas.bench.cells import load_series, thin
from prolas.bench.grid import BenchConfig, MethodSpec, run_cell
from prolas.gp import GPScorer
from prolas.pipeline import run_strategy
from prolas.search.cache import CachedScorer
from prolas.search.config import SearchConfig
from prolas.search.evaluator import Evaluator
from prolas.threads import torch_threads

# ``prolas.search`` the package is shadowed by the ``search`` function that ``prolas``
# exports, so the module is imported by name
latent = importlib.import_module("prolas.search.latent")


def trace(
    series: str, seed: int, watch: list[str], grid: Path, data: Path, budget: int = 50
) -> tuple[list[str], dict]:
    """The per-step lines of one search (also printed as they come) and its cell record.
    The search is the grid's own cell (:func:`prolas.bench.grid.run_cell`), so its
    history is the committed cell's (its first ``budget`` evaluations)."""
    config = BenchConfig(
        datasets=(series,),
        methods=(MethodSpec.parse("prolas"),),
        budget=budget,
        restarts=8,
        max_points=400,
        data_dir=str(data),
        lengthscale_floor=1.0,
        nested=False,  # the committed grid predates nested starts and repairs
    )
    searched = thin(load_series(data / f"{series}_train.csv"), config.max_points)
    lines: list[str] = []
    step = latent._LatentSearch.step

    def traced_step(search) -> int:
        n, best = len(search.E), max(search.targets()[:, 0].tolist(), default=float("nan"))
        new = step(search)
        ranking = getattr(search.surrogate, "last_ranking", [])
        if ranking:
            expr, mean, sd, _ = ranking[0]
            parts = [f"n={n} best={best:.2f} chose {expr} ({mean:.2f} ± {sd:.2f})"]
            rank = {r[0]: (i, r) for i, r in enumerate(ranking)}
            for w in watch:
                if w in rank:
                    i, (_, m, s, _) = rank[w]
                    parts.append(f"{w}: rank {i + 1}/{len(ranking)}, {m:.2f} ± {s:.2f}")
            lines.append(" | ".join(parts))
            print(lines[-1], flush=True)
        return new

    with tempfile.TemporaryDirectory() as tmp:
        source = grid / "fits" / f"{series}.jsonl"
        if source.exists():
            (Path(tmp) / "fits").mkdir()
            shutil.copy(source, Path(tmp) / "fits" / source.name)
        # the committed fits, written by the first fitter (prolas.search.cache)
        path = Path(tmp) / "fits" / f"{series}.jsonl"
        scorer = CachedScorer(GPScorer(searched, config.fit_config), path, recorded_by=1)
        latent._LatentSearch.step = traced_step
        try:
            cell, result, _ = run_cell(
                searched,
                config.methods[0],
                seed,
                config,
                scorer,
                name=series,
                search=_recorded_search(grid, series, seed),
            )
        finally:
            latent._LatentSearch.step = step
    best = max((e for e in result.history if e.ok), key=lambda e: e.bic)
    lines.append(
        f"best {best.expression} ({best.bic:.2f}); fits not in the cache: {cell['new_fits']}"
    )
    print(lines[-1])
    return lines, cell


def _recorded_search(grid: Path, series: str, seed: int):
    """The grid's search without the final fit of its best model, with the options its
    committed cell recorded (today's defaults when there is no such cell)."""
    path = grid / "cells" / f"{series}__prolas__seed{seed}.json"
    recorded = json.loads(path.read_text())["extra"]["options"] if path.exists() else None

    def search(ev: Evaluator, dataset, config: SearchConfig):
        if recorded is None:
            return run_strategy(ev, dataset, config), None
        options = latent.LatentBOConfig.from_record(recorded)
        with torch_threads(1):  # as run_strategy runs every strategy
            return latent.search_prolas(ev, dataset, config, options=options), None

    return search


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("series")
    parser.add_argument("seed", type=int)
    parser.add_argument("--watch", default="", help="comma-separated expressions to follow")
    parser.add_argument("--grid", type=Path, default=Path("benchmarks/results/extrapolation"))
    parser.add_argument("--data", type=Path, default=Path("data"))
    parser.add_argument("--budget", type=int, default=50, help="fits (the grid's 50)")
    args = parser.parse_args(argv)
    watch = [w.strip() for w in args.watch.split(",") if w.strip()]
    trace(args.series, args.seed, watch, args.grid, args.data, args.budget)


if __name__ == "__main__":
    main()
