"""Long series with planted periods, and the options for what their search sees.

The study behind the search view of long series (docs/long-series.md,
benchmarks/results/long_series/): series whose structure includes periods that an evenly
spaced subsample of 400 points cannot resolve, and the views a search could be given.

Series (:data:`SERIES`; each ``name -> (generator, planted periods in x's units)``):

* ``hourly-daily-yearly``: hourly values, x in days: a daily cycle (amplitude 1), a yearly
  cycle (amplitude 2) and noise (sd 0.5). At N = 20 000 (2.3 years) the subsample of 400
  points is 2.1 days apart: the daily cycle is below its Nyquist floor.
* ``hourly-daily-weekly``: hourly values, x in days: a daily cycle (1), a weekly cycle
  (0.6), a slow smooth component and noise (0.5); N = 8 760 is a year of hourly values.
* ``daily-centuries``: the series of the issue that asked for the view, x in decimal
  years from 1750: a slow trend, a yearly cycle of amplitude 3, a smooth component of
  lengthscale 400 days (a GP sample, sd 1) and noise (sd 0.5); N = 100 000 is 274 years.
* ``daily-weekly-yearly``: :func:`daily_series` (yearly 2, weekly 0.5), the series
  ``prolas bench --performance`` times.

Views (:data:`OPTIONS`), each a :class:`~prolas.data.Dataset` the search fits:

* ``plain``: the evenly spaced subsample alone, without starting periods (what prolas
  searched before the view); its refit does not sharpen periods either;
* ``hints``: the same points, with the full series' significant periods as starting
  periods (``--search-windows 0``);
* ``windows``: the subsample of M points plus a dense window per significant period it
  cannot resolve, with starting periods (the default until the windows joined the
  budget);
* ``windows-nohints``: the same points without the starting periods;
* ``windows-in-budget``: the windows count in the M points, the evenly spaced points
  making room for them down to 3/4 of M (the default: :mod:`prolas.search.view`);
* ``dense``: one evenly spaced subsample dense enough to resolve every significant period
  (``RESOLVED_SPACINGS`` spacings per shortest period), at most :data:`DENSE_CAP` points,
  with starting periods.
"""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable, Sequence

import numpy as np

from prolas.data import Dataset
from prolas.gp import FitResult
from prolas.kernels import factor as kernel_of
from prolas.kernels.spec import PERIODIC
from prolas.spectrum import scan_dataset

__all__ = [
    "DENSE_CAP",
    "OPTIONS",
    "SERIES",
    "century_daily_series",
    "daily_series",
    "fitted_periods",
    "hourly_series",
    "hourly_week_series",
    "option_view",
    "recovered",
    "run_option",
]

#: The densest subsample the ``dense`` option searches on.
DENSE_CAP = 2000
#: The views a search of a long series could see (module docstring).
OPTIONS = ("plain", "hints", "windows", "windows-nohints", "windows-in-budget", "dense")


def hourly_series(n: int = 20_000, seed: int = 0) -> Dataset:
    """``n`` hourly values (x in days from 0): a daily cycle of amplitude 1, a yearly
    cycle of amplitude 2 and Gaussian noise of sd 0.5."""
    rng = np.random.default_rng(seed)
    x = np.arange(n) / 24.0
    y = np.sin(2 * np.pi * x) + 2.0 * np.sin(2 * np.pi * x / 365.25)
    return Dataset.from_arrays(x, y + 0.5 * rng.standard_normal(n), name=f"hourly-{n}")


def _smooth(n: int, lengthscale: float, rng: np.random.Generator) -> np.ndarray:
    """A stationary smooth sample of unit sd: white noise convolved with a Gaussian of sd
    ``lengthscale / sqrt(2)`` (in steps), which has the SE kernel of that lengthscale."""
    from scipy.ndimage import gaussian_filter1d

    pad = int(4 * lengthscale)
    z = gaussian_filter1d(rng.standard_normal(n + 2 * pad), lengthscale / math.sqrt(2.0))
    z = z[pad : pad + n]
    return z / z.std()


def hourly_week_series(n: int = 8_760, seed: int = 0) -> Dataset:
    """``n`` hourly values (x in days from 0): a daily cycle (amplitude 1), a weekly cycle
    (0.6), a smooth component of lengthscale 20 days (sd 1) and noise (sd 0.5)."""
    rng = np.random.default_rng(seed)
    x = np.arange(n) / 24.0
    y = np.sin(2 * np.pi * x) + 0.6 * np.sin(2 * np.pi * x / 7.0) + _smooth(n, 20 * 24.0, rng)
    return Dataset.from_arrays(x, y + 0.5 * rng.standard_normal(n), name=f"hourly-week-{n}")


def century_daily_series(n: int = 100_000, seed: int = 0) -> Dataset:
    """``n`` daily values from 1750 (x in decimal years): a slow trend (0.01 per year), a
    yearly cycle of amplitude 3, a smooth component of lengthscale 400 days (sd 1) and
    noise (sd 0.5): 274 years at n = 100 000."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 365.25
    y = 0.01 * t + 3.0 * np.sin(2 * np.pi * t) + _smooth(n, 400.0, rng)
    return Dataset.from_arrays(1750.0 + t, y + 0.5 * rng.standard_normal(n), name=f"daily-{n}")


def daily_series(n: int, seed: int = 0) -> Dataset:
    """``n`` daily observations from 2000-01-01 (x in decimal years): a linear trend, a
    yearly cycle, a weekly cycle and noise. The span grows with n, like a user's data."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 365.25
    y = (
        5.0
        + 0.8 * t
        + 2.0 * np.sin(2 * np.pi * t)
        + 0.5 * np.sin(2 * np.pi * t * 365.25 / 7.0)
        + 0.4 * rng.standard_normal(n)
    )
    return Dataset.from_arrays(2000.0 + t, y, name=f"daily-{n}")


#: name -> (generator(n, seed), planted periods in x's units)
SERIES: dict[str, tuple[Callable[[int, int], Dataset], tuple[float, ...]]] = {
    "hourly-daily-yearly": (hourly_series, (1.0, 365.25)),
    "hourly-daily-weekly": (hourly_week_series, (1.0, 7.0)),
    "daily-centuries": (century_daily_series, (1.0,)),
    "daily-weekly-yearly": (daily_series, (1.0, 7.0 / 365.25)),
}


def fitted_periods(fit: FitResult | None) -> list[float]:
    """The periods of every periodic factor (PER, PERC) of ``fit``."""
    if fit is None or not fit.ok:
        return []
    return [
        float(f.params["period"])
        for t in fit.terms
        for f in t.factors
        if kernel_of(f.kernel).role == PERIODIC
    ]


def recovered(fit: FitResult | None, planted: Sequence[float], tol: float = 0.01) -> list[bool]:
    """Per planted period, whether ``fit`` has a periodic factor within ``tol`` of it."""
    found = fitted_periods(fit)
    return [any(abs(q / p - 1.0) <= tol for q in found) for p in planted]


def option_view(dataset: Dataset, option: str, search_points: int = 400) -> Dataset:
    """The points (with their floors and starting periods) a search sees under ``option``
    (module docstring)."""
    from prolas.search.view import RESOLVED_SPACINGS, build_view

    if option == "plain":
        return dataset.thinned(search_points)
    if option == "hints":
        return build_view(dataset, search_points, 0).dataset
    if option == "windows":
        return build_view(dataset, search_points, 2, evenly_spaced_share=1.0).dataset
    if option == "windows-in-budget":
        return build_view(dataset, search_points, 2).dataset
    if option == "windows-nohints":
        view = build_view(dataset, search_points, 2, evenly_spaced_share=1.0).dataset
        return view.with_fit_hints(view.fixed_spacing, ())
    if option == "dense":
        shortest = min((p.period for p in scan_dataset(dataset).fundamentals), default=math.inf)
        m = search_points
        if math.isfinite(shortest):
            m = max(m, math.ceil(RESOLVED_SPACINGS * dataset.span / shortest) + 1)
        m = min(m, DENSE_CAP, dataset.n)
        view = build_view(dataset, m, 0).dataset if m < dataset.n else dataset
        return view
    raise ValueError(f"unknown option {option!r}; choose from {OPTIONS}")


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_option(
    series: str,
    n: int,
    option: str,
    *,
    method: str = "prolas",
    budget: int = 50,
    restarts: int = 8,
    seed: int = 0,
    data_seed: int = 0,
) -> dict:
    """One search of a planted series under one view, then the refit on all points, in
    this process (one thread): what was found, whether the planted periods were
    recovered within 1 % (by the search's best on the view, and after the refit), the
    periods the report would say the model leaves out, CPU and wall seconds, peak RSS."""
    import torch

    from prolas.gp.scalable import refit_sgpr
    from prolas.limits import EXACT_REFIT_LIMIT
    from prolas.pipeline import best_fit, make_evaluator, refit, run_strategy
    from prolas.report.periods import periods_block
    from prolas.search.config import SearchConfig

    torch.set_num_threads(1)
    make, planted = SERIES[series]
    dataset = make(n, data_seed)
    cpu0, wall0 = _cpu(), time.perf_counter()
    view = option_view(dataset, option)
    config = SearchConfig(method=method, budget=budget, restarts=restarts, seed=seed)
    ev = make_evaluator(view, config)
    result = run_strategy(ev, view, config)
    found = best_fit(result, view, config)
    cpu1, wall1 = _cpu(), time.perf_counter()
    if found is None:
        best = None
    elif option == "plain" and dataset.n > EXACT_REFIT_LIMIT:  # the refit before the view
        best = refit_sgpr(found, dataset, lengthscale_floor=config.lengthscale_floor)
    elif option == "plain":
        from dataclasses import replace

        from prolas.gp import fit_gp

        best = fit_gp(found.expression, dataset, replace(config.fit_config, restarts=1), init=found)
    else:
        best = refit(found, dataset, config)
    cpu2, wall2 = _cpu(), time.perf_counter()
    block = periods_block(dataset, best) if best is not None and best.ok else None
    windows = getattr(view, "fixed_spacing", None) is not None
    return {
        "series": series,
        "n": dataset.n,
        "option": option,
        "method": method,
        "budget": budget,
        "restarts": restarts,
        "seed": seed,
        "data_seed": data_seed,
        "planted": list(planted),
        "searched_points": view.n,
        "windows": windows,
        "start_periods": list(view.period_hints),
        "floor_spacing": view.spacing,
        "evaluations": result.evaluations,
        "search_best": None if found is None else found.expression,
        "search_bic": None if found is None else found.bic,
        "search_periods": fitted_periods(found),
        "search_recovered": recovered(found, planted),
        "best": None if best is None else best.expression,
        "best_status": None if best is None else best.status,
        "refit": None if best is None else (best.approximation or "exact"),
        "refit_periods": fitted_periods(best),
        "refit_log_likelihood": None if best is None else best.log_likelihood,
        "refit_recovered": recovered(best, planted),
        "left_out": [] if block is None else block["unexplained"],
        "search_cpu_seconds": cpu1 - cpu0,
        "refit_cpu_seconds": cpu2 - cpu1,
        "search_wall_seconds": wall1 - wall0,
        "refit_wall_seconds": wall2 - wall1,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }
