"""The fixed forecast kernel's cold fit over fit seeds: how stable, how good a forecast.

For every series of a suite half (M3 monthly by default), the fixed kernel
:data:`prolas.limits.FIXED_FORECAST_KERNEL` is fitted cold (:func:`prolas.gp.fit_gp`) at
each fit seed with each candidate's fit settings, and forecast at the test inputs as
the product forecasts a short series (``rolling-mix`` of the one model, band
``refitted``, or ``--band``'s: ``shrunk`` is the product's for the fixed seasonal kernel),
then scored (:func:`prolas.report.scoring.score_forecast`, seasonal naive
scale at period 12). Candidates (``benchmarks/results/fixed_kernel_restarts/``):

* ``R8``: today's fit settings (8 restarts, the screen keeps the best 2);
* ``R32``: 32 restarts (the screen keeps the best 2);
* ``P8``: 8 restarts, all 8 polished (``keep=8``);
* ``E3``: R8's fits at seeds s, s + 3, s + 6 mixed with equal weights (``bma`` with
  weights 1, 1, 1; stage 2).
* ``S3``, ``S1``: E3 and R8 with ``PER``'s period held at the season, ``SEASON_STEPS``
  steps of the data's median spacing (one year on M3's x): ``FitConfig.season``, which
  the band's refits keep (``benchmarks/results/fixed_season/``; its first runs used a
  patch of the fitter's layout that gave the same fits).
* ``Q3``: S3 with the kernel ``LIN + PER*SE + SE`` (:data:`KERNELS`): the seasonal shape,
  held at the season, may drift over the ``SE`` factor's lengthscale (``fixed_season``'s
  second protocol).
* ``D3``: Q3 with a trend that may flatten beyond the data, ``LIN*SE + PER*SE + SE``: the
  linear trend's slope is correlated over the ``SE`` factor's lengthscale, so the forecast
  carries it for about that long (a damped trend; ``LIN`` at the lengthscale's limit;
  ``benchmarks/results/damped_trend/``).
* ``QD6``: Q3's three fits and D3's three fits, the six mixed with equal weights: a
  forecast combination of the global linear trend and the locally linear one
  (``benchmarks/results/trend_combination/``).
* ``L8``, ``LE3``: R8 and E3 fitted and forecast on log y (when every training value is
  positive; else as R8 and E3), back on y's scale: every quantile is exp of the log-scale
  quantile, the point forecast exp of the log-scale median
  (``benchmarks/results/log_forecast/``).

Writes one row per (series, seed, candidate) and prints, per candidate, the share of
series whose log-likelihoods over the seeds span at most 0.5 nats, the median seconds
per fit and, per seed, the mean MASE, 95 % coverage, scaled interval score and CRPS.

    OMP_NUM_THREADS=1 python benchmarks/scripts/fixed_kernel_restarts.py --half tuning \\
        --seeds 0,1,2 --workers 2 --out rows.csv --markdown summary.md
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.bench.forecast_bench import suite_series
from prolas.data import Dataset
from prolas.gp import FitConfig, fit_gp
from prolas.limits import FIXED_FORECAST_KERNEL, FORECAST_BANDS, LENGTHSCALE_FLOOR
from prolas.report.forecast import (
    Forecast,
    _components,
    _steps,
    forecast,
    horizon_check,
    mixture_quantiles,
)
from prolas.report.scoring import (
    QUANTILE_LEVELS,
    Predictive,
    forecast_predictive,
    score_forecast,
    seasonal_naive_scale,
)

#: ``name -> FitConfig fields`` besides the seed and the lengthscale floor.
CANDIDATES = {
    "R8": {"restarts": 8},
    "R32": {"restarts": 32},
    "P8": {"restarts": 8, "keep": 8},
    "E3": {"restarts": 8},
    "L8": {"restarts": 8},
    "LE3": {"restarts": 8},
    "S3": {"restarts": 8},
    "S1": {"restarts": 8},
    "Q3": {"restarts": 8},
    "D3": {"restarts": 8},
    "QD6": {"restarts": 8},
}

#: Candidates fitting other kernels than :data:`prolas.limits.FIXED_FORECAST_KERNEL`, each
#: at every seed offset, in this order.
KERNELS = {
    "Q3": ("LIN + PER*SE + SE",),
    "D3": ("LIN*SE + PER*SE + SE",),
    "QD6": ("LIN + PER*SE + SE", "LIN*SE + PER*SE + SE"),
}

#: Candidates whose fits are mixtures over seeds, and those fitted on log y.
MIXTURES = ("E3", "LE3", "S3", "Q3", "D3", "QD6")
ON_LOG_Y = ("L8", "LE3")
#: Candidates whose ``PER`` period is held at the season (``FitConfig.season``).
SEASONAL = ("S3", "S1", "Q3", "D3", "QD6")
#: The season in steps of the data's spacing (monthly series).
SEASON_STEPS = 12

#: E3's fits: seed s and these offsets from it.
MIXTURE_SEED_OFFSETS = (0, 3, 6)

SCORES = ("rmse", "mase", "coverage", "interval_score_scaled", "crps_scaled")

#: Log-likelihoods of one series over the seeds within this many nats count as stable.
STABLE_NATS = 0.5


def series_row(
    series, seed: int, name: str, dump: Path | None = None, band: str = "refitted"
) -> dict:
    """One (series, seed, candidate): the cold fits, their forecast of the test inputs with
    ``band`` (:func:`prolas.report.forecast.forecast`'s) and their scores; with ``dump`` a
    folder, also the band's raw material (:func:`dump_band`)."""
    offsets = MIXTURE_SEED_OFFSETS if name in MIXTURES else (0,)
    on_log = name in ON_LOG_Y and bool(np.all(series.train.y > 0))
    data = log_dataset(series.train) if on_log else series.train
    # the product's FitConfig.season (x's units); the band's refits keep it (FitResult.season)
    season = SEASON_STEPS * data.spacing if name in SEASONAL else 0.0
    settings = {**CANDIDATES[name], "season": season}
    t0 = time.perf_counter()
    fits = [
        fit_gp(
            kernel,
            data,
            FitConfig(seed=seed + k, lengthscale_floor=LENGTHSCALE_FLOOR, **settings),
        )
        for kernel in KERNELS.get(name, (FIXED_FORECAST_KERNEL,))
        for k in offsets
    ]
    row = {"series": series.name, "seed": seed, "candidate": name, "on_log_y": on_log, "band": band}
    failed = [f for f in fits if not f.ok]
    if failed:
        seconds = time.perf_counter() - t0
        return {**row, "fit_seconds": seconds, "status": "failed", "error": failed[0].error}
    fit = fits[0]  # seed s's own fit (of the first kernel): the log-likelihood reported
    method = "bma" if name in MIXTURES else "rolling-mix"
    weights = [1.0] * len(fits) if name in MIXTURES else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = forecast(
            fits,
            data,
            x_new=series.test_x,
            method=method,
            weights=weights,
            band=band,
        )
    seconds = time.perf_counter() - t0
    scale = seasonal_naive_scale(series.train.y, series.season_length or 12)
    if dump is not None and not on_log:
        dump_band(dump / f"{series.name}_{seed}_{name}.npz", fits, data, series, fc, scale)
    pred = exp_predictive(fc) if on_log else forecast_predictive(fc)
    scores = score_forecast(series.test_y, pred, scale)
    return {
        **row,
        "fit_seconds": seconds,
        "status": "ok",
        "log_likelihood": fit.log_likelihood,
        "band_scale": fc.band_scale,
        "period": fit.period("PER"),
        # the scaled interval score's two parts: the band's mean width and the penalty of
        # the points outside it (2/alpha times the miss), so a gap can be placed
        "width_scaled": float(np.mean(pred.upper - pred.lower)) / scale,
        "miss_scaled": scores["interval_score_scaled"]
        - float(np.mean(pred.upper - pred.lower)) / scale,
        **{k: scores[k] for k in SCORES},
    }


def dump_band(path: Path, fits, data: Dataset, series, fc: Forecast, scale: float) -> None:
    """What a band rule needs, saved so that rules can be compared without fitting again
    (``band_rules_offline.py``): the refitted check's pairs at the forecast's lead times
    (:func:`prolas.report.forecast.horizon_check`, standardised y: ``check_y`` ``(P,)``,
    ``check_means``/``check_sds`` ``(K, P)``, ``check_origin`` ``(P,)``), the test
    forecast's components before any band factor in y's units (``means``/``sds``
    ``(K, h)``), the mixture weights ``(K,)``, the test values ``(h,)``, the seasonal naive
    scale and the product's own band factor."""
    steps = _steps(data, np.asarray(series.test_x, dtype=np.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check = horizon_check(fits, data, steps, refit=True)
    means, sds = _components(fits, data, np.asarray(series.test_x, dtype=np.float64))
    empty = np.zeros((len(fits), 0))
    np.savez(
        path,
        check_y=check.y if check is not None else np.zeros(0),
        check_means=check.means if check is not None else empty,
        check_sds=check.sds if check is not None else empty,
        check_origin=check.origin if check is not None else np.zeros(0, dtype=int),
        means=data.unstandardise(means),
        sds=sds * data.y_std,
        weights=np.asarray(fc.weights, dtype=np.float64),
        test_y=np.asarray(series.test_y, dtype=np.float64),
        scale=float(scale),
        band_scale=float(fc.band_scale),
    )


def log_dataset(data: Dataset) -> Dataset:
    """``data`` with y replaced by log y (every y must be positive)."""
    return Dataset.from_arrays(
        data.x, np.log(data.y), name=data.name, path=data.path, x_is_date=data.x_is_date
    )


def exp_predictive(fc: Forecast) -> Predictive:
    """A forecast of log y as a predictive of y: each quantile (the 95 % band's ends among
    them) is exp of log y's, exactly, as exp is increasing; the point forecast is exp of
    log y's median, the median of y's predictive."""

    def quantile(p: float) -> np.ndarray:
        return np.exp(mixture_quantiles(p, fc.component_means, fc.component_sds, fc.weights))

    q = np.column_stack([quantile(float(p)) for p in QUANTILE_LEVELS])
    return Predictive(quantile(0.5), np.exp(fc.lower), np.exp(fc.upper), q)


def _job(args: tuple) -> dict:
    return series_row(*args)


def summary(rows: pd.DataFrame) -> list[str]:
    """Markdown: stability and cost per candidate, then the forecast means per seed."""
    ok = rows[rows["status"] == "ok"]
    lines = [
        f"| candidate | series | stable (log-lik. span ≤ {STABLE_NATS} nats over the seeds) "
        "| median span | median s per series (fits, forecast) | failed fits |",
        "|---|---|---|---|---|---|",
    ]
    for name, t in ok.groupby("candidate", sort=False):
        span = t.groupby("series")["log_likelihood"].agg(lambda v: v.max() - v.min())
        failed = int((rows[rows["candidate"] == name]["status"] != "ok").sum())
        lines.append(
            f"| {name} | {span.size} | {int((span <= STABLE_NATS).sum())} "
            f"({(span <= STABLE_NATS).mean():.0%}) | {span.median():.2f} | "
            f"{t['fit_seconds'].median():.2f} | {failed} |"
        )
    lines += [
        "",
        "| candidate | seed | MASE | 95 % coverage | interval score | CRPS |",
        "|---|---|---|---|---|---|",
    ]
    for (name, seed), t in ok.groupby(["candidate", "seed"], sort=False):
        lines.append(
            f"| {name} | {seed} | {t['mase'].mean():.4f} | {t['coverage'].mean():.3f} | "
            f"{t['interval_score_scaled'].mean():.3f} | {t['crps_scaled'].mean():.4f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="m3-monthly")
    ap.add_argument("--half", default="tuning")
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--series", help="comma-separated series names (default: the half's)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--candidates", default=",".join(CANDIDATES))
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument(
        "--band",
        default="refitted",
        choices=FORECAST_BANDS,
        help="the forecast's band (refitted: every study before band_factor; shrunk: the "
        "product's for the fixed seasonal kernel)",
    )
    ap.add_argument("--out", type=Path, required=True, help="CSV of the rows")
    ap.add_argument("--markdown", type=Path, help="the summary as a markdown file")
    ap.add_argument(
        "--dump",
        type=Path,
        help="a folder for each row's band material (.npz, for band_rules_offline.py)",
    )
    args = ap.parse_args(argv)
    candidates = [c.strip() for c in args.candidates.split(",") if c.strip()]
    unknown = [c for c in candidates if c not in CANDIDATES]
    if unknown:
        ap.error(f"unknown candidates {unknown}; choose from {', '.join(CANDIDATES)}")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    only = tuple(s.strip() for s in (args.series or "").split(",") if s.strip())
    pairs = suite_series(args.suite, args.data_dir, args.half, only)
    jobs = [
        (s, seed, name, args.dump, args.band)
        for s, _ in pairs
        if s.train is not None and s.test_x.size
        for name in candidates
        for seed in seeds
    ]
    if args.dump is not None:
        args.dump.mkdir(parents=True, exist_ok=True)
    pool = ProcessPoolExecutor(max_workers=args.workers) if args.workers > 1 else None
    try:
        rows = list(pool.map(_job, jobs) if pool is not None else map(_job, jobs))
    finally:
        if pool is not None:
            pool.shutdown()
    table = pd.DataFrame(rows)
    table.to_csv(args.out, index=False)
    text = "\n".join(summary(table))
    print(text)
    if args.markdown is not None:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
