"""Cost of the rolling-origin check behind ``--forecast rolling-mix`` on a long series.

A synthetic daily series of N points (trend + yearly cycle + noise); five models are
fitted on a 400-point thinning and refitted on all points (exactly up to 2 000 points,
SGPR beyond, as ``prolas fit`` does); then, in this one process, the seconds of the BIC
mixture's 100-step forecast and of :func:`prolas.report.forecast.rolling_weights`.

Usage::

    python benchmarks/scripts/forecast_check_cost.py 2000 10000 100000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from prolas.data import Dataset
from prolas.gp import FitConfig, fit_gp
from prolas.gp.scalable import refit_sgpr
from prolas.pipeline import EXACT_REFIT_LIMIT
from prolas.report.forecast import forecast, rolling_weights

MODELS = ("LIN + PER", "PER + SE", "LIN*SE + PER", "SE", "LIN + SE")


def measure(n: int) -> dict:
    """Seconds of the BIC mixture's forecast and of the rolling-origin weights at N = n."""
    rng = np.random.default_rng(0)
    x = np.arange(n) / 365.25
    y = 0.5 * x + np.sin(2 * np.pi * x) + 0.3 * rng.standard_normal(n)
    ds = Dataset.from_arrays(x, y, name=f"synthetic{n}")
    thin = ds.take(np.unique(np.linspace(0, n - 1, min(n, 400)).round().astype(int)), "thin")
    fits = []
    for expr in MODELS:
        f = fit_gp(expr, thin, FitConfig(restarts=2, seed=0, lengthscale_floor=1.0))
        if n > EXACT_REFIT_LIMIT:
            fits.append(refit_sgpr(f, ds, lengthscale_floor=1.0))
        else:
            fits.append(fit_gp(expr, ds, FitConfig(restarts=1, seed=0), init=[f]))
    t = time.perf_counter()
    forecast(fits, ds, 100, method="bma")
    t_bma = time.perf_counter() - t
    t = time.perf_counter()
    w, _ = rolling_weights(fits, ds)
    t_check = time.perf_counter() - t
    return {"n": n, "bma_s": t_bma, "check_s": t_check, "weights": np.round(w, 3).tolist()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sizes", type=int, nargs="+", help="series lengths N")
    for n in p.parse_args().sizes:
        r = measure(n)
        print(
            f"N={r['n']}: BIC mixture forecast {r['bma_s']:.1f} s, rolling-origin check "
            f"{r['check_s']:.1f} s ({r['check_s'] / r['bma_s']:.1f}x), weights {r['weights']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
