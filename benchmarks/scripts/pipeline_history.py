"""The N = 1 000 cell of ``prolas bench --performance`` (a default ``prolas fit`` of the
daily series: search on its view, refit on all points), with the search's history kept,
so two runs can be compared fit by fit.

    python benchmarks/scripts/pipeline_history.py OUT.json [--n 1000] [--budget 50]

Prints wall seconds, CPU seconds, seconds inside the GP scorer and the best expression;
OUT.json holds them and every evaluation (expression, BIC, seconds). Run it alone on the
machine: two runs of the same code a few minutes apart differed by 10 % in fit seconds.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from prolas.bench.grid import TimedScorer
from prolas.bench.long_series import daily_series
from prolas.gp import GPScorer
from prolas.pipeline import run_search
from prolas.search.config import SearchConfig, search_data
from prolas.search.evaluator import Evaluator
from prolas.threads import fit_threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--budget", type=int, default=50)
    args = parser.parse_args()
    ds = daily_series(args.n)
    config = SearchConfig(budget=args.budget)
    # as prolas fit's in-process evaluator (prolas.pipeline.make_evaluator)
    scorer = GPScorer(search_data(ds, config), config.fit_config, workers=fit_threads())
    timed = TimedScorer(scorer)
    cpu, start = time.process_time(), time.perf_counter()
    result, best = run_search(ds, config, evaluator=Evaluator(timed, args.budget))
    doc = {
        "n": args.n,
        "wall": time.perf_counter() - start,
        "cpu": time.process_time() - cpu,
        "fit_seconds": timed.seconds,
        "threads": fit_threads(),
        "best": best.expression if best is not None else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "history": [e.to_json() for e in result.history],
    }
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(
        f"wall {doc['wall']:.1f} s, CPU {doc['cpu']:.1f} s, in fits {doc['fit_seconds']:.1f} s, "
        f"best {doc['best']}"
    )


if __name__ == "__main__":
    main()
