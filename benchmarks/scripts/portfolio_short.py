"""Fit a short-series warm-start library's candidates on the M3 tuning half (issue 43).

PROLAS's initial design is the base kernels and then a portfolio of expressions that
scored well on a library of other series (:mod:`prolas.search.portfolio`). The shipped
library's series have 144–200 points, so its portfolio holds expressions of ten and more
parameters, which a short monthly series rarely supports. This script builds the
material of a library for short series from the M3 tuning half alone:

* ``candidates RUN OUT``: the candidate expressions, from a ``prolas bench --forecast
  m3-monthly --methods prolas,cks`` run folder: every expression among the five best by
  BIC of either search on at least two tuning-half series, then every expression of the
  ``change`` grammar with at most one operation (as ``portfolio_library.py``), written to
  ``OUT/candidates.txt``.
* ``fit OUT [--shard i/n]``: every candidate fitted on every tuning-half series's
  training part (the last 18 points, the test part, play no role) with ``--restarts``
  restarts and fit seed 0, into one fit cache per series, ``OUT/fits/<series>.jsonl``.
  Two processes with different shards may share ``OUT``.

Then ``build_portfolio.py OUT/fits/*.jsonl --out LIBRARY`` writes the library. Only
tuning-half series enter it, so the report half's own scores never inform its searches,
and a tuning series is left out of its own portfolio (:func:`excluded_series`).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import torch

from prolas.bench.forecast_bench import suite_series
from prolas.gp import FitConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))

from portfolio_library import (  # noqa: E402  (the script beside this one)
    fit_candidates,
    one_operation_expressions,
)

ROOT = Path(__file__).resolve().parents[2]


def tuning_series() -> list:
    """The M3 tuning half's series (``LongSeries``), in the file's order."""
    return [s for s, _ in suite_series("m3-monthly", ROOT / "data", "tuning")]


def top_expressions(run: Path, names: list[str], top: int = 5, at_least: int = 2) -> list[str]:
    """Expressions among the ``top`` best by BIC of the prolas or cks search on at least
    ``at_least`` of the series ``names`` (most frequent first, then by name)."""
    count: collections.Counter[str] = collections.Counter()
    for name in names:
        best: set[str] = set()
        for method in ("prolas", "cks"):
            result = json.loads((run / method / name / "result.json").read_text())
            fitted = [h for h in result["history"] if h.get("bic") is not None]
            fitted.sort(key=lambda h: -h["bic"])
            best |= {h["expression"] for h in fitted[:top]}
        count.update(best)
    return sorted((e for e, c in count.items() if c >= at_least), key=lambda e: (-count[e], e))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("candidates", help="write OUT/candidates.txt from a bench run")
    c.add_argument("run", type=Path, help="bench --forecast m3-monthly run folder")
    c.add_argument("out", type=Path)
    f = sub.add_parser("fit", help="fit OUT/candidates.txt on the tuning half")
    f.add_argument("out", type=Path)
    f.add_argument("--restarts", type=int, default=4)
    f.add_argument("--shard", default="0/1", help="i/n: every n-th series from the i-th")
    args = ap.parse_args()
    series = tuning_series()
    if args.command == "candidates":
        exprs = top_expressions(args.run, [s.name for s in series])
        n_top = len(exprs)
        exprs += [e for e in one_operation_expressions() if e not in exprs]
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "candidates.txt").write_text("\n".join(exprs) + "\n")
        print(f"{len(exprs)} candidates ({n_top} from the searches) -> {args.out}")
        return
    torch.set_num_threads(1)
    exprs = [e for e in (args.out / "candidates.txt").read_text().splitlines() if e]
    i, n = (int(v) for v in args.shard.split("/"))
    (args.out / "fits").mkdir(parents=True, exist_ok=True)
    config = FitConfig(restarts=args.restarts, seed=0)
    for s in series[i::n]:
        fit_candidates(s.name, s.train, exprs, args.out / "fits", config)


if __name__ == "__main__":
    main()
