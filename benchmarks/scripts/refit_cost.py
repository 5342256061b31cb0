"""The refit of a searched model on all points, two ways, from the same fit on the view:

* ``cold``: ``fit_gp(..., restarts=1, init=[fit, sharpened])`` as before 2026-11-27 — one
  random restart besides the two starts, and hop rounds from the restart's optimum and
  from the best;
* ``best_only``: the same with ``hop_from_best_only=True`` (:func:`prolas.pipeline.refit`
  now) — the restart and the two starts polished, hop rounds from the best only.

    python benchmarks/scripts/refit_cost.py [--out FILE.jsonl]

Series: every library training split longer than the search's 400 points (each refit on
all of its points) and the N = 1 000 daily series of ``prolas bench --performance``.
Expressions: a fixed list of structures the searches choose. Prints, per pair, the wall
seconds and log-likelihood of each way (the two ways run back to back, on the process's
cores as ``prolas fit`` runs them); run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from prolas import load_csv
from prolas.bench.long_series import daily_series
from prolas.gp.fit import fit_gp
from prolas.pipeline import sharpened_periods
from prolas.search.config import SearchConfig, search_data
from prolas.threads import fit_threads

SERIES = ("gas-production", "internet", "mauna", "sulphuric", "daily1000")
EXPRESSIONS = ("LIN + PER*SE", "PER*SE + SE", "LIN*PER*SE + LIN*SE", "CP(LIN, PER*SE) + SE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="append one JSON line per pair")
    args = parser.parse_args()
    config = SearchConfig()
    rows = []
    for name in SERIES:
        ds = daily_series(1000) if name == "daily1000" else load_csv(f"data/{name}_train.csv")
        view = search_data(ds, config)
        for expr in EXPRESSIONS:
            fit = fit_gp(expr, view, config.fit_config, workers=fit_threads())
            sharp = sharpened_periods(fit, ds)
            starts = [fit] if sharp is None else [fit, sharp]
            row = {"series": name, "n": ds.n, "view": view.n, "expression": expr}
            for way, kwargs in (
                ("cold", {}),
                ("best_only", {"hop_from_best_only": True}),
            ):
                t = time.perf_counter()
                refit = fit_gp(
                    expr,
                    ds,
                    replace(config.fit_config, restarts=1),
                    init=starts,
                    workers=fit_threads(),
                    **kwargs,
                )
                row[f"{way}_seconds"] = round(time.perf_counter() - t, 3)
                row[f"{way}_ll"] = refit.log_likelihood
            rows.append(row)
            print(
                f"{name:>15} {expr:>22}: cold {row['cold_seconds']:7.2f} s "
                f"{row['cold_ll']:10.3f}   best_only {row['best_only_seconds']:7.2f} s "
                f"{row['best_only_ll']:10.3f}   Δll {row['best_only_ll'] - row['cold_ll']:+.3f}",
                flush=True,
            )
            if args.out:
                with open(args.out, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
    cold = sum(r["cold_seconds"] for r in rows)
    best_only = sum(r["best_only_seconds"] for r in rows)
    worse = [r for r in rows if r["best_only_ll"] < r["cold_ll"] - 0.1]
    print(f"total: cold {cold:.1f} s, best_only {best_only:.1f} s ({best_only / cold:.2f}x)")
    print(f"best_only below cold by more than 0.1 nats: {len(worse)} of {len(rows)}")
    for r in worse:
        print(f"   {r['series']} {r['expression']}: {r['best_only_ll'] - r['cold_ll']:+.3f}")


if __name__ == "__main__":
    from prolas.processes import main_module_is_guarded

    main_module_is_guarded()  # this script runs nothing on import: fits may split
    main()
