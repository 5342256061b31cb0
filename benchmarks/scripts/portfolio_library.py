"""Fit the warm-start library's candidate expressions on the benchmark series.

The library (``prolas/search/portfolio_bic.json``) ranks expressions by their BIC on
the benchmark series; :mod:`prolas.search.portfolio` picks PROLAS's initial design from
it, leaving the searched series out. This script scores every candidate on every series
with today's fit core, the same way for all of them, into one fit cache per series
(``OUT/fits/<name>.jsonl``): ``data/<name>.csv`` thinned evenly to ``--max-points``,
``--restarts`` restarts, fit seed 0, the default lengthscale floor.

Candidates (written to ``OUT/candidates.txt``): the expressions of the current library
and every expression of the ``change`` grammar with at most one operation (the base
kernels with C, and CP(A, B), CW(A, B) of two base kernels or C), so that the initial
design can hold a change-point or change-window.

    python benchmarks/scripts/portfolio_library.py --series airline,solar,... \\
        --out benchmarks/results/portfolio_library
    python benchmarks/scripts/build_portfolio.py benchmarks/results/portfolio_library/fits/*.jsonl

Two processes may share ``OUT`` when their ``--series`` do not overlap.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from prolas.bench import thin
from prolas.bench.cells import load_series
from prolas.expr import parse
from prolas.gp import FitConfig, GPScorer
from prolas.grammar import Grammar, sequence_expression
from prolas.search.cache import CachedScorer
from prolas.search.portfolio import BenchmarkScores

ROOT = Path(__file__).resolve().parents[2]


def one_operation_expressions() -> list[str]:
    """The ``change`` grammar's expressions with at most one operation (canonical
    strings, in the grammar's enumeration order)."""
    change = Grammar.from_file(ROOT / "grammars" / "change.toml")
    return list(dict.fromkeys(str(sequence_expression(q)) for q in change.enumerate_sequences(1)))


def candidates() -> list[str]:
    """The current library's expressions, then the ``change`` grammar's expressions with
    at most one operation that it lacks (canonical strings, in a fixed order)."""
    out = list(BenchmarkScores.load().expressions)
    return out + [e for e in one_operation_expressions() if e not in out]


def fit_candidates(name: str, data, exprs: list[str], fits: Path, config: FitConfig) -> None:
    """Fits every expression of ``exprs`` on ``data`` into the fit cache
    ``fits/<name>.jsonl`` (cached fits are kept) and prints one line of counts."""
    scorer = CachedScorer(GPScorer(data, config), fits / f"{name}.jsonl")
    t0 = time.perf_counter()
    failed = sum(scorer(parse(e)).status != "ok" for e in exprs)
    print(
        f"{name}: {len(exprs)} candidates on {data.n} points, {scorer.misses} new fits, "
        f"{failed} failed, {time.perf_counter() - t0:.0f} s",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", required=True, help="comma-separated names in data/")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-points", type=int, default=200)
    ap.add_argument("--restarts", type=int, default=4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    exprs = candidates()
    (args.out / "fits").mkdir(parents=True, exist_ok=True)
    (args.out / "candidates.txt").write_text("\n".join(exprs) + "\n")
    config = FitConfig(restarts=args.restarts, seed=0)
    for name in args.series.split(","):
        data = thin(load_series(ROOT / "data" / f"{name}.csv"), args.max_points)
        fit_candidates(name, data, exprs, args.out / "fits", config)


if __name__ == "__main__":
    main()
