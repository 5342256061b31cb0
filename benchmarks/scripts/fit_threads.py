"""One fit on 1 and on 2 threads (``fit_gp(..., workers=w)``): seconds and whether the
results agree to the last bit.

    python benchmarks/scripts/fit_threads.py view      # the N = 1 000 daily series' view
    python benchmarks/scripts/fit_threads.py airline   # data/airline.csv, 144 points

Times are wall seconds of one fit each, fit seed 0; run it alone on the machine.
"""

from __future__ import annotations

import sys
import time

import prolas.gp.fit as fit_module
from prolas import load_csv
from prolas.bench.long_series import daily_series
from prolas.gp.fit import fit_gp
from prolas.search.config import SearchConfig, search_data

EXPRESSIONS = ("LIN*PER + SE", "C + PER*PER", "PER*SE + LIN*SE", "CP(LIN, PER*SE)")


def main(which: str) -> None:
    if which == "airline":
        ds = load_csv("data/airline.csv")
    else:
        ds = search_data(daily_series(1000), SearchConfig())
    fit_module.THREADED_FIT_POINTS = 1  # threads at any size, to measure them
    print(f"{ds.n} points")
    for expr in EXPRESSIONS:
        out = []
        for workers in (1, 2):
            start = time.perf_counter()
            fit = fit_gp(expr, ds, workers=workers)
            out.append((fit.log_likelihood, time.perf_counter() - start))
        same = out[0][0] == out[1][0]
        print(
            f"{expr:>18}: 1 thread {out[0][1]:.3f} s, 2 threads {out[1][1]:.3f} s, "
            f"ratio {out[1][1] / out[0][1]:.2f}, same log-likelihood: {same}"
        )


if __name__ == "__main__":
    from prolas.processes import main_module_is_guarded

    main_module_is_guarded()  # this script runs nothing on import: fits may split
    main(sys.argv[1] if len(sys.argv) > 1 else "view")
