"""The default forecast's mixture weights against other weightings, on the same fits.

Reads the series folders of a ``prolas bench --forecast SUITE`` run (``RUN/prolas/<series>/``:
the search's journal with every fit, and ``test_predictive.json``), rebuilds each
search's top K distinct models from the journal (the highest BIC first, as
:func:`prolas.report.forecast.top_fits` orders them), and forecasts the test inputs with
each candidate through :func:`prolas.report.forecast.forecast`:

* ``R0``: the run's own forecast (its method, models and band; its scores must come out
  again — a mismatch is an error);
* ``H5``, ``H10``: ``horizon-mix`` over the top 5 or 10 models, band ``refitted``
  (:func:`prolas.report.forecast.horizon_weights`);
* ``P5``: the same over the top 5 with pseudo-BMA+ weights (1 000 Bayesian-bootstrap
  draws over the check's origins, :func:`prolas.report.forecast.origin_weights`);
* ``P5i``: P5 with its band factor chosen by the interval score instead of the log
  density (:func:`prolas.report.forecast.horizon_band_scale` with ``score="interval"``);
* ``B5``: the run's method (``rolling-mix``) over the top 5 of the journal's ranking,
  band ``refitted`` (R0's forecast from :func:`ranked` instead of the run's own models);
* ``T5``: B5 over the top 5 models without a polynomial trend (no canonical term with two
  or more ``LIN`` factors; ``benchmarks/results/trend_guard/``);
* ``F1``: the fixed additive kernel ``LIN + PER + SE`` alone (:data:`FIXED`; its fit from
  the journal when the search fitted it, else a cold :func:`prolas.gp.fit_gp` with the
  run's fit settings), ``rolling-mix`` of the one model, band ``refitted``;
* ``M6``: T5's five models (the default's: the trend guard is on) plus F1's model when it
  is not among them (``benchmarks/results/fixed_kernel/``);
* ``F1m``, ``F1c``: F1 with band ``model`` or ``calibrated``; ``F2``, ``F2m``, ``F2c``: the
  fixed kernel ``LIN + LIN*PER + SE`` (a seasonal amplitude linear in x) with band
  ``refitted``, ``model`` or ``calibrated`` (:data:`FIXED_KERNELS`;
  ``benchmarks/results/fixed_kernel_variants/``);
* ``F3``: the product's fixed forecast since ``benchmarks/results/fixed_kernel_seeds_b/``:
  F1's fit and cold fits at the run's fit seed plus 3 and 6
  (:data:`prolas.limits.FIXED_FORECAST_SEED_OFFSETS`), mixed with equal weights, band
  ``refitted``. A run whose forecast came from the fixed kernel (``source`` ``fixed`` in
  its ``test_predictive.json``) is R0 = F3; a run made before it forecast from F1 alone;
  a run whose ``test_predictive.json`` records a ``season`` forecast from
  ``LIN + PER*SE + SE`` with the period held there (``benchmarks/results/fixed_season/``),
  and its R0 does too (F3 stays ``LIN + PER + SE`` with a free period).

The search and its fits are the same for every candidate, so the comparison is paired
and free of search and fit noise. Prints the means per candidate (MASE, coverage,
interval score, CRPS, forecast seconds) and the paired sign test and bootstrap interval
of each candidate against R0 (:mod:`prolas.bench.paired`); writes one row per (series,
candidate).

    OMP_NUM_THREADS=1 python benchmarks/scripts/forecast_weights_offline.py RUN \\
        --half tuning --candidates R0,H5,H10 --workers 2 --out tuning_seed1.csv
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from band_calibration import journal_fits  # the sibling script (benchmarks/scripts/)

from prolas.bench.forecast_bench import suite_series
from prolas.bench.paired import bootstrap_interval, differences, sign_test, verdict
from prolas.gp import FitResult, hold_unseen_transitions
from prolas.limits import FIXED_FORECAST_SEED_OFFSETS, FIXED_SEASONAL_KERNEL
from prolas.report.forecast import forecast, polynomial_trend
from prolas.report.scoring import forecast_predictive, score_forecast, seasonal_naive_scale

SCORES = ("mase", "rmse", "coverage", "interval_score_scaled", "crps_scaled")
#: name -> (method, models, Bayesian-bootstrap draws, band score); R0 is the run's own.
#: ``rolling-mix`` ones are ranked by :func:`ranked` (T5 with the trend guard).
CANDIDATES = {
    "R0": None,
    "H5": ("horizon-mix", 5, 0, "log"),
    "H10": ("horizon-mix", 10, 0, "log"),
    "P5": ("horizon-mix", 5, 1000, "log"),
    "P5i": ("horizon-mix", 5, 1000, "interval"),
    "B5": ("rolling-mix", 5, 0, "log"),
    "T5": ("rolling-mix", 5, 0, "log"),
    "F1": ("rolling-mix", 0, 0, "log"),
    "M6": ("rolling-mix", 5, 0, "log"),
    "F1m": ("rolling-mix", 0, 0, "log"),
    "F1c": ("rolling-mix", 0, 0, "log"),
    "F2": ("rolling-mix", 0, 0, "log"),
    "F2m": ("rolling-mix", 0, 0, "log"),
    "F2c": ("rolling-mix", 0, 0, "log"),
    "F3": ("bma", 0, 0, "log"),
}

#: The fixed additive kernel of F1 and M6: a linear trend, a periodic part and a smooth
#: part (Corani, Benavoli & Zaffalon 2021's composition without its spectral mixture).
FIXED = "LIN + PER + SE"

#: The fixed-kernel candidates: ``name -> (expression, band)``.
FIXED_KERNELS = {
    "F1": (FIXED, "refitted"),
    "F1m": (FIXED, "model"),
    "F1c": (FIXED, "calibrated"),
    "F2": ("LIN + LIN*PER + SE", "refitted"),
    "F2m": ("LIN + LIN*PER + SE", "model"),
    "F2c": ("LIN + LIN*PER + SE", "calibrated"),
}


def fixed_fit(fits: dict[str, FitResult], train, config, expression: str = FIXED) -> FitResult:
    """A fixed kernel's fit (:data:`FIXED` by default): the journal's when the search
    fitted it, else a cold fit with the run's fit settings (its fit seed, restarts and
    lengthscale floor)."""
    from prolas.expr import parse
    from prolas.gp import fit_gp

    key = str(parse(expression))
    if key in fits:
        return fits[key]
    fit = fit_gp(key, train, config.fit_config)
    if not fit.ok:
        raise SystemExit(f"{train.name}: {key} failed to fit: {fit.error}")
    return fit


def fixed_fits(fits: dict[str, FitResult], train, config, season: float = 0.0) -> list[FitResult]:
    """The product's fixed forecast models (:func:`prolas.report.forecast.fixed_fits`):
    :func:`fixed_fit` at the run's fit seed, then cold fits at the other seed offsets;
    with a ``season`` (a run since ``benchmarks/results/fixed_season/``) every fit is a
    cold fit of :data:`prolas.limits.FIXED_SEASONAL_KERNEL` with its period held there."""
    from prolas.gp import fit_gp

    if season > 0:
        out = []
        for offset in FIXED_FORECAST_SEED_OFFSETS:
            held = replace(config.replace(seed=config.seed + offset).fit_config, season=season)
            fit = fit_gp(FIXED_SEASONAL_KERNEL, train, held)
            if not fit.ok:
                raise SystemExit(f"{train.name}: {fit.expression} failed to fit: {fit.error}")
            out.append(fit)
        return out
    out = [fixed_fit(fits, train, config)]
    for offset in FIXED_FORECAST_SEED_OFFSETS[1:]:
        fit = fit_gp(FIXED, train, config.replace(seed=config.seed + offset).fit_config)
        if not fit.ok:
            raise SystemExit(f"{train.name}: {FIXED} failed to fit: {fit.error}")
        out.append(fit)
    return out


def ranked(fits: dict[str, FitResult], k: int) -> list[FitResult]:
    """The ``k`` highest-BIC fits (ties: first fitted first)."""
    order = sorted(enumerate(fits.values()), key=lambda t: (-t[1].bic, t[0]))
    return [f for _, f in order[:k]]


def run_config(run: Path):
    """The search settings of a ``prolas bench --forecast`` run (its ``bench.json``)."""
    from prolas.search.config import SearchConfig

    settings = json.loads((run / "bench.json").read_text())["settings"]
    return SearchConfig(
        budget=settings["budget"], restarts=settings["restarts"], seed=settings["fit_seed"]
    )


def on_all_points(fits: list[FitResult], train, config, cache: dict) -> list[FitResult]:
    """The fits refitted on all of ``train`` where the search ran on a subsample of it,
    as :func:`prolas.report.forecast.top_fits` refits them (``cache``: by expression)."""
    from prolas.pipeline import refit
    from prolas.search.config import search_data

    if search_data(train, config).n == train.n:
        return fits
    for f in fits:
        if f.expression not in cache:
            cache[f.expression] = refit(f, train, config)
    return [cache[f.expression] for f in fits]


def series_rows(run: Path, series, season_length: int, candidates: list[str]) -> list[dict]:
    """One row per candidate for one series ([] when the run has no test forecast). Where
    the search ran on a subsample (the long tsdl series), each model is refitted on all
    training points first, as the run's forecast refitted it."""
    folder = run / "prolas" / series.folder
    pred_path = folder / "test_predictive.json"
    if not pred_path.exists() or series.train is None:
        return []
    pred = json.loads(pred_path.read_text())
    train = series.train
    fits = journal_fits(folder / "journal.jsonl", train.n)
    config, refits = run_config(run), {}
    scale = seasonal_naive_scale(train.y, season_length)
    rows = []
    for name in candidates:
        weights = None
        if CANDIDATES[name] is None and pred.get("source") == "fixed" and pred["method"] == "bma":
            # the fixed kernel's fits at three seeds, mixed equally (--forecast-from,
            # default auto on a short series)
            models = fixed_fits(fits, train, config, pred.get("season") or 0.0)
            weights = pred["weights"]
            method, band, draws, score = "bma", pred.get("band", "refitted"), 0, "log"
        elif CANDIDATES[name] is None:
            # the run's forecast models; the fixed kernel (a run from before the mixture
            # over seeds) is fitted cold when the search never evaluated it
            models = [
                fits[m] if m in fits or m != FIXED else fixed_fit(fits, train, config)
                for m in pred["models"]
            ]
            method, band, draws, score = pred["method"], pred.get("band", "refitted"), 0, "log"
        elif name == "F3":
            models = fixed_fits(fits, train, config)
            weights = [1.0] * len(models)
            method, band, draws, score = "bma", "refitted", 0, "log"
        else:
            method, k, draws, score = CANDIDATES[name]
            pool = fits
            if name in ("T5", "M6"):  # the trend guard (the product's own test of a model)
                pool = {e: f for e, f in fits.items() if not polynomial_trend(e)}
            models, band = ranked(pool, k), "refitted"
            if name in FIXED_KERNELS or name == "M6":
                expression, band = FIXED_KERNELS.get(name, (FIXED, "refitted"))
                fixed = fixed_fit(fits, train, config, expression)
                if all(m.expression != fixed.expression for m in models):
                    models = models + [fixed]
        models = on_all_points(models, train, config, refits)
        models = [hold_unseen_transitions(f, train) for f in models]
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fc = forecast(
                models,
                train,
                x_new=series.test_x,
                method=method,
                weights=weights,
                band=band,
                draws=draws,
                band_score=score,
            )
        seconds = time.perf_counter() - t0
        scores = score_forecast(series.test_y, forecast_predictive(fc), scale)
        if name == "R0":
            for key in ("mase", "coverage", "interval_score_scaled", "crps_scaled"):
                if not math.isclose(scores[key], pred["scores"][key], rel_tol=1e-6, abs_tol=1e-9):
                    raise SystemExit(
                        f"{series.name}: {key} {scores[key]} does not reproduce the run's "
                        f"{pred['scores'][key]}"
                    )
        top = int(np.argmax(fc.weights))
        rows.append(
            {
                "series": series.name,
                "candidate": name,
                **{key: scores[key] for key in SCORES},
                "band_scale": fc.band_scale,
                "seconds": seconds,
                "top_model": fc.models[top],
                "top_weight": fc.weights[top],
                "models": " | ".join(f"{m}:{w:.2f}" for m, w in zip(fc.models, fc.weights)),
            }
        )
    return rows


def _job(args: tuple) -> list[dict]:
    return series_rows(*args)


def summary(table: pd.DataFrame, candidates: list[str]) -> list[str]:
    """Markdown: the means per candidate, then each candidate against R0, paired."""
    lines = [
        "| candidate | series | MASE | RMSE/R0 (median) | coverage | interval score | CRPS | "
        "band factor (median) | s per series |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    wide = {c: table[table.candidate == c].set_index("series") for c in candidates}
    base = wide.get("R0")
    for c in candidates:
        t = wide[c]
        ratio = (t["rmse"] / base["rmse"]).median() if base is not None else math.nan
        lines.append(
            f"| {c} | {len(t)} | {t['mase'].mean():.4f} | {ratio:.3f} | "
            f"{t['coverage'].mean():.3f} | {t['interval_score_scaled'].mean():.3f} | "
            f"{t['crps_scaled'].mean():.4f} | {t['band_scale'].median():.2f} | "
            f"{t['seconds'].mean():.2f} |"
        )
    if base is None:
        return lines
    lines += [
        "",
        "Against R0 (negative: the candidate is better; coverage as |coverage - 0.95|):",
        "",
    ]
    for c in candidates:
        if c == "R0":
            continue
        t = wide[c].loc[base.index]
        for key in ("mase", "coverage", "interval_score_scaled", "crps_scaled"):
            a, b = t[key].to_numpy(), base[key].to_numpy()
            if key == "coverage":
                a, b = np.abs(a - 0.95), np.abs(b - 0.95)
            d = differences(a, b, key)
            better, worse, ties, p = sign_test(d)
            mean, low, high = bootstrap_interval(d)
            lines.append(
                f"* {c} {key}: better on {better}, worse on {worse}, tied {ties} "
                f"(p = {p:.2g}); mean difference {mean:+.4f} [{low:+.4f}, {high:+.4f}]: "
                f"{verdict(low, high, better, worse, p, c, 'R0')}"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="the --out folder of a prolas bench --forecast run")
    ap.add_argument("--suite", default="m3-monthly")
    ap.add_argument("--half", default="all")
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--candidates", default="R0,H5,H10")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", type=Path, help="CSV of the rows")
    ap.add_argument("--markdown", type=Path, help="the summary as a markdown file")
    args = ap.parse_args(argv)
    candidates = [c.strip() for c in args.candidates.split(",") if c.strip()]
    unknown = [c for c in candidates if c not in CANDIDATES]
    if unknown:
        ap.error(f"unknown candidates {unknown}; choose from {', '.join(CANDIDATES)}")
    jobs = [
        (args.run, s, s.season_length or 12, candidates)
        for s, _ in suite_series(args.suite, args.data_dir, args.half)
    ]
    rows: list[dict] = []
    pool = ProcessPoolExecutor(max_workers=args.workers) if args.workers > 1 else None
    try:
        parts = pool.map(_job, jobs) if pool is not None else map(_job, jobs)
        for i, part in enumerate(parts, 1):
            rows.extend(part)
            if part:
                print(f"{i}/{len(jobs)} {part[0]['series']}", file=sys.stderr)
    finally:
        if pool is not None:
            pool.shutdown()
    table = pd.DataFrame(rows)
    if args.out:
        table.to_csv(args.out, index=False)
    text = "\n".join(summary(table, candidates))
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
