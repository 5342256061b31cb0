"""What one exact log-likelihood evaluation with its gradient costs, on the expressions
a search fitted: ``GramModel.log_likelihood`` at 4 starting points of each expression of
a history (``pipeline_history.py``'s OUT.json), best of 3 repeats, one BLAS thread and the
fit's heap settings (as inside ``fit_gp``).

    python benchmarks/scripts/likelihood_passes.py HISTORY.json [--points 434]

The points are the N = 1 000 daily series' view (434 points) or, with ``--points``, that
many of them evenly spaced. Prints the total milliseconds of one evaluation of each
expression; compare checkouts with ``PYTHONPATH=CHECKOUT``, alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from threadpoolctl import threadpool_limits

from prolas.bench.long_series import daily_series
from prolas.expr import parse
from prolas.gp.gram import GramModel
from prolas.gp.starts import initial_thetas
from prolas.memory import keep_heap
from prolas.search.config import SearchConfig, search_data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("history")
    parser.add_argument("--points", type=int, default=0, help="0: all of the view's")
    args = parser.parse_args()
    keep_heap()
    ds = search_data(daily_series(1000), SearchConfig())
    idx = ds.spaced_indices(args.points or ds.n)
    x0, span = float(ds.x[0]), float(ds.span)
    t = ((ds.x - x0) / span)[idx]
    y = np.ascontiguousarray(ds.y_standardised[idx])
    floor = 2.0 * ds.spacing / span
    with open(args.history) as fh:
        expressions = [e["expression"] for e in json.load(fh)["history"]]
    total = 0.0
    with threadpool_limits(limits=1, user_api="blas"):
        for expr in expressions:
            model = GramModel(parse(expr), t, floor, 0.0)
            thetas = initial_thetas(model, y, floor, (0, 0), 4, ())
            best = np.inf
            for _ in range(3):
                start = time.perf_counter()
                for theta in thetas[:4]:
                    model.log_likelihood(theta, y)
                best = min(best, (time.perf_counter() - start) / 4)
            total += best
    print(f"{t.size} points, {len(expressions)} expressions: {1000 * total:.1f} ms")


if __name__ == "__main__":
    main()
