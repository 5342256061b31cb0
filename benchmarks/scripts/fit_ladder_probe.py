"""Probe: does a cold fit reach the same optimum at every fit seed when it first fits every
model its expression contains and starts from their optima?

For each (series, expression) pair of a ``fit_stability.py draw`` file, the fit of E is
preceded, recursively, by the fits of its one-step sub-models
(:func:`prolas.nesting.one_step_submodels`, ``C`` left out), each started from the optima
of its own; E is then fitted with all of them as ``init`` (each sub-model's optimum embedded
exactly, :func:`prolas.gp.starts.embed_theta`), as a search's fits are started. Every fit
uses the default :class:`prolas.gp.FitConfig` at the fit seed, on the grid's points
(``fit_stability.py``: training split thinned to 400 points, lengthscale floor 1). One JSON
line per (pair, seed): the log-likelihood, CPU seconds and the number of sub-fits.

    python benchmarks/scripts/fit_ladder_probe.py benchmarks/results/cold_fit/tune_pairs.json \\
        --every 5 --shard 0/2 --out ladder.jsonl          # and --shard 1/2 in a second process

Summarise with ``fit_stability.py summarise`` (the lines carry ``variant: ladder``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit_stability import _grid_points  # noqa: E402  (the script beside this one)

from prolas.expr import parse  # noqa: E402
from prolas.gp import FitConfig, FitResult, fit_gp  # noqa: E402
from prolas.nesting import one_step_submodels  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def ladder_fit(expr: str, data, config: FitConfig, memo: dict[str, FitResult]) -> FitResult:
    """Fit ``expr`` from the optima of its sub-models, each fitted the same way first."""
    if expr not in memo:
        subs = sorted(s for s in one_step_submodels(parse(expr)) if s != "C")
        inits = [f for f in (ladder_fit(s, data, config, memo) for s in subs) if f.ok]
        memo[expr] = fit_gp(expr, data, config, init=inits or None)
    return memo[expr]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", type=Path)
    ap.add_argument("--every", type=int, default=1, help="every k-th pair of the file")
    ap.add_argument("--fit-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--shard", default="0/1")
    ap.add_argument("--data-dir", type=Path, default=ROOT / "data")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    i, k = (int(v) for v in args.shard.split("/"))
    pairs = json.loads(args.pairs.read_text())[:: args.every][i::k]
    data = {}
    with args.out.open("a") as out:
        for pair in pairs:
            s, e = pair["series"], pair["expression"]
            data.setdefault(s, _grid_points(s, args.data_dir, 400))
            for seed in args.fit_seeds:
                memo: dict[str, FitResult] = {}
                t = time.process_time()
                fit = ladder_fit(
                    str(parse(e)), data[s], FitConfig(seed=seed, lengthscale_floor=1.0), memo
                )
                row = {"variant": "ladder", "series": s, "expression": e, "fit_seed": seed,
                       "n": data[s].n, "status": fit.status, "log_likelihood": fit.log_likelihood,
                       "seconds": time.process_time() - t, "subfits": len(memo) - 1}  # fmt: skip
                out.write(json.dumps(row) + "\n")
                out.flush()
            print(s, e, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
