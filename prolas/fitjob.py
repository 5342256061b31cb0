"""What a finished search of one series writes: ``prolas fit``'s files, shared with fit-many.

After :func:`prolas.pipeline.run_search`, one series' outputs are

* ``result.json``, ``report.md`` and the plots (:func:`write_outputs`, through
  :func:`prolas.report.write_report`), with the best model's held-out RMSE and log
  predictive density when a test set is given;
* with a horizon, ``forecast.csv``, ``forecast.png`` and, for the rolling-origin
  methods, ``forecast_check.csv`` (:class:`ForecastSettings`; the forecast of
  :mod:`prolas.report.forecast` from the search's top models, or on a short series from
  the fixed kernel, :data:`prolas.limits.FIXED_SEASONAL_KERNEL` with its period held at a
  known season, else :data:`prolas.limits.FIXED_FORECAST_KERNEL`: :func:`forecast_fits`);
* with test points, the forecast evaluated **at the test inputs** by the same forecast
  method and its scores (:func:`write_test_forecast`): ``test_forecast.csv`` (x, y, mean,
  lower, upper) and ``test_predictive.json`` (the predictive mixture's components, so
  the forecast can be rescored without refitting).

``prolas fit`` (one series, its fits parallel inside the search, through
:meth:`prolas.KernelSearch.save`) and ``prolas fit-many`` (many series, one process
each; :mod:`prolas.many`) both write through this module, so a series' folder from
fit-many holds what ``prolas fit`` would have written.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.data import Dataset
from prolas.errors import ProlasError
from prolas.gp import FitResult
from prolas.limits import (
    DEFAULT_FORECAST,
    DEFAULT_FORECAST_BAND,
    DEFAULT_FORECAST_SOURCE,
    DEFAULT_FORECAST_TREND,
    FIXED_FORECAST_BELOW,
    FIXED_FORECAST_KERNELS,
    FIXED_FORECAST_SEED_OFFSETS,
    FIXED_SEASONAL_KERNEL,
    FORECAST_BAND_CHOICES,
    FORECAST_METHODS,
    FORECAST_MODELS,
    FORECAST_SOURCES,
    FORECAST_TRENDS,
)
from prolas.records import SearchResult, json_clean, write_json
from prolas.search.config import SearchConfig, search_data, search_view

__all__ = [
    "ForecastSettings",
    "Outputs",
    "TEST_FORECAST_FILES",
    "band_used",
    "forecast_fits",
    "forecast_source",
    "source_used",
    "no_model_error",
    "periods_of",
    "searched_indices",
    "searched_on",
    "write_outputs",
    "write_partial_result",
    "write_test_forecast",
]

#: Files :func:`write_test_forecast` writes into a series' folder.
TEST_FORECAST_FILES = ("test_forecast.csv", "test_predictive.json")


@dataclass(frozen=True)
class ForecastSettings:
    """How a series is forecast (``prolas fit --horizon H --forecast M --forecast-models K``).

    Attributes:
        horizon: future steps after the last input for forecast.csv/png; None writes none.
        method: one of :data:`prolas.limits.FORECAST_METHODS` (default ``rolling-mix``).
        models: the number of top distinct models mixed or chosen from.
        band: ``model`` (the models' own predictive band), ``calibrated``,
            ``refitted`` (scaled by :func:`prolas.report.forecast.band_scale`), ``shrunk``
            (``refitted``'s factor to the power :data:`prolas.limits.BAND_SHRINK_POWER`) or
            ``auto`` (``shrunk`` for the fixed seasonal kernel, else ``refitted``;
            :func:`band_used`).
        trend: ``linear`` leaves the models with a polynomial trend out of the top
            models (:func:`prolas.report.forecast.top_fits`), ``any`` keeps them.
        source: the models forecast from (``--forecast-from``): ``search`` (the search's
            top ``models``), ``fixed`` (the fixed kernel alone:
            :data:`prolas.limits.FIXED_SEASONAL_KERNEL` with its period held at a known
            season, else :data:`prolas.limits.FIXED_FORECAST_KERNEL`) or ``auto`` (``fixed``
            for a series of fewer than :data:`prolas.limits.FIXED_FORECAST_BELOW`
            points, else ``search``; :func:`forecast_source`). ``method="best"`` always
            forecasts from the search's best model.
        season_length: the season in steps of the data's spacing at which the fixed
            kernel's period is held (``--season-length``;
            :func:`prolas.report.forecast.season_period`): ``None`` reads it from the
            calendar (one year for dates a month or quarter apart), 0 or 1 fits the
            period.
    """

    horizon: int | None = None
    method: str = DEFAULT_FORECAST
    models: int = FORECAST_MODELS
    band: str = DEFAULT_FORECAST_BAND
    trend: str = DEFAULT_FORECAST_TREND
    source: str = DEFAULT_FORECAST_SOURCE
    season_length: int | None = None

    def __post_init__(self) -> None:
        if self.method not in FORECAST_METHODS:
            raise ProlasError(f"--forecast must be one of {', '.join(FORECAST_METHODS)}")
        if self.band not in FORECAST_BAND_CHOICES:
            raise ProlasError(f"--forecast-band must be one of {', '.join(FORECAST_BAND_CHOICES)}")
        if self.trend not in FORECAST_TRENDS:
            raise ProlasError(f"--forecast-trend must be one of {', '.join(FORECAST_TRENDS)}")
        if self.source not in FORECAST_SOURCES:
            raise ProlasError(f"--forecast-from must be one of {', '.join(FORECAST_SOURCES)}")
        if self.source == "fixed" and self.method == "best":
            raise ProlasError(
                "--forecast best forecasts from the search's best model and --forecast-from "
                "fixed from the fixed kernel; choose one"
            )
        if self.models < 1:
            raise ProlasError("--forecast-models must be a positive integer")
        if self.horizon is not None and self.horizon < 1:
            raise ProlasError("--horizon must be a positive integer")
        if self.season_length is not None and self.season_length < 0:
            raise ProlasError("--season-length must be an integer >= 0")


@dataclass(frozen=True, eq=False)
class Outputs:
    """What :func:`write_outputs` wrote: the result.json document, its test block (or
    None), the forecast's summary line (or None), the models forecast with (None when
    no forecast was made), for a test forecast to reuse, and the files written."""

    doc: dict
    test: dict | None
    forecast_line: str | None
    fits: list[FitResult] | None
    files: tuple[Path, ...] = ()


def no_model_error(result: SearchResult) -> ProlasError:
    """The error of a search in which every evaluation failed (nothing to report)."""
    return ProlasError(
        f"every one of the {result.evaluations} evaluations failed; see the errors with "
        "--search cks --budget 4, or check the data"
    )


def searched_indices(dataset: Dataset, config: SearchConfig) -> list[int] | None:
    """Positions of the points a search ran on, or None when it ran on all of them."""
    view = search_view(dataset, config)
    return None if view is None else view.indices.tolist()


def searched_on(dataset: Dataset, config: SearchConfig) -> dict | None:
    """result.json's ``search.searched_on``: what the search saw (evenly spaced points,
    windows, floors, starting periods), or None when it ran on all points."""
    view = search_view(dataset, config)
    return None if view is None else view.to_json()


def periods_of(dataset: Dataset, config: SearchConfig, best: FitResult | None) -> dict:
    """result.json's ``periods``: the whole series' significant periods, which of them the
    search could not see and which the best model explains
    (:func:`prolas.report.periods.periods_block`)."""
    from prolas.report.periods import periods_block

    view = search_view(dataset, config)
    hidden = () if view is None else tuple(p.period for p in view.hidden)
    return periods_block(dataset, best, hidden=hidden)


def forecast_source(settings: ForecastSettings, dataset: Dataset) -> str:
    """Where ``settings`` take a forecast's models from on ``dataset``: ``"best"`` for
    ``method="best"`` (the search's best model), else ``"fixed"`` (the fixed kernel) or
    ``"search"`` (its top models); ``auto`` is ``fixed`` below
    :data:`prolas.limits.FIXED_FORECAST_BELOW` points."""
    if settings.method == "best":
        return "best"
    if settings.source != "auto":
        return settings.source
    return "fixed" if dataset.n < FIXED_FORECAST_BELOW else "search"


def source_used(settings: ForecastSettings, dataset: Dataset, fits: Sequence[FitResult]) -> str:
    """The source a forecast from ``fits`` (:func:`forecast_fits`'s) came from:
    :func:`forecast_source`'s, but ``"search"`` where the fixed kernel failed to fit and
    the search's models stood in."""
    source = forecast_source(settings, dataset)
    fixed = bool(fits) and all(f.expression in FIXED_FORECAST_KERNELS for f in fits)
    if source == "fixed" and not fixed:
        return "search"
    return source


def band_used(settings: ForecastSettings, dataset: Dataset, fits: Sequence[FitResult]) -> str:
    """The band of :func:`prolas.report.forecast.forecast` for ``fits``
    (:func:`forecast_fits`'s): ``settings.band`` unless it is ``auto``, which is ``shrunk``
    when they are the fixed seasonal kernel's fits (:data:`FIXED_SEASONAL_KERNEL`, the
    period held at a season) and ``refitted`` otherwise
    (benchmarks/results/band_factor/ measured the fixed seasonal kernel only)."""
    if settings.band != "auto":
        return settings.band
    seasonal = source_used(settings, dataset, fits) == "fixed" and all(
        f.expression == FIXED_SEASONAL_KERNEL and f.season > 0 for f in fits
    )
    return "shrunk" if seasonal else "refitted"


def forecast_mixing(
    settings: ForecastSettings, dataset: Dataset, fits: Sequence[FitResult]
) -> tuple[str, list[float] | None]:
    """The ``method`` and ``weights`` of :func:`prolas.report.forecast.forecast` for
    ``fits`` (:func:`forecast_fits`'s): the fixed kernel's fits at several fit seeds are
    mixed with equal weights (``bma``, weights 1 each), whatever ``settings.method``;
    otherwise ``settings.method`` and its own weights (None)."""
    if source_used(settings, dataset, fits) == "fixed":
        return "bma", [1.0] * len(fits)
    return settings.method, None


def forecast_fits(
    result: SearchResult,
    dataset: Dataset,
    config: SearchConfig,
    best: FitResult,
    settings: ForecastSettings,
    *,
    cache: dict | None = None,
    log: Callable[[str], None] | None = None,
) -> list[FitResult]:
    """The models a forecast uses (:func:`forecast_source`): the best alone for
    ``best``; the fixed kernel's fits at the fit seeds of
    :data:`prolas.limits.FIXED_FORECAST_SEED_OFFSETS`
    (:func:`prolas.report.forecast.fixed_fits`, mixed with equal weights:
    :func:`forecast_mixing`); or the search's top ``settings.models`` distinct models
    (:func:`prolas.report.forecast.top_fits`; with ``settings.trend="linear"``, those
    without a polynomial trend).

    A fixed fit that fails is left out of the mixture; when all fail, the forecast falls
    back to the search's top models. Either is said (``log``, else a warning).
    ``cache``: a dict the caller keeps to reuse the fixed fits and the top models across
    forecasts of the same search (the first ``k`` of a longer top list made before are
    the shorter list).
    """
    from prolas.report.forecast import fixed_fits, season_period, top_fits

    source = forecast_source(settings, dataset)
    if source == "best":
        return [best]
    cache = {} if cache is None else cache
    if source == "fixed":
        fresh = "fixed" not in cache
        if fresh:
            season = season_period(dataset, settings.season_length)
            cache["fixed"] = fixed_fits(result, dataset, config, season)
        fits = cache["fixed"]
        ok = [f for f in fits if f.ok]
        failed = [f for f in fits if not f.ok]
        if ok and failed:
            message = (
                f"forecast: {len(failed)} of the fixed kernel's {len(fits)} fits failed "
                f"({failed[0].error}); mixing the other {len(ok)}"
            )
        elif not ok:
            message = (
                f"forecast: the fixed kernel {failed[0].expression} failed to fit "
                f"({failed[0].error}); forecasting from the search's top models instead"
            )
        if failed and fresh:  # said once per search, not at every forecast
            if log is not None:
                log(message)
            else:
                warnings.warn(message, RuntimeWarning, stacklevel=2)
        if ok:
            return ok
    k, key = settings.models, ("top", settings.trend)
    top, made = cache.get(key, ([], 0))
    if k > made:
        top = top_fits(result, dataset, config, k, best=best, trend=settings.trend)
        cache[key] = (top, k)
    return list(top[:k])


def write_outputs(
    out: Path,
    dataset: Dataset,
    config: SearchConfig,
    result: SearchResult,
    best: FitResult | None,
    *,
    test_dataset: Dataset | None = None,
    forecast: ForecastSettings | None = None,
    log: Callable[[str], None] | None = None,
    cache: dict | None = None,
) -> Outputs:
    """result.json, report.md, the plots and (with a horizon) the forecast files.

    The forecast's models are :func:`forecast_fits`'s (``cache``: its cache, to reuse
    models made for earlier forecasts of the same search).

    Raises:
        ProlasError: every evaluation failed (no model to report).
    """
    from prolas import report

    if best is None:
        raise no_model_error(result)
    test = None
    if test_dataset is not None:
        metrics = report.test_metrics(best, dataset, test_dataset)
        test = {"path": test_dataset.path, "n": test_dataset.n, **metrics}
    doc = report.result_to_json(
        dataset,
        result,
        best,
        method=config.method,
        seed=config.seed,
        budget=config.budget,
        checkpoint=config.checkpoint if config.method == "prolas" else None,
        test=test,
        searched_on=searched_on(dataset, config),
        periods=periods_of(dataset, config, best),
    )
    files = report.write_report(
        out, dataset, result, best, doc, test=test, test_dataset=test_dataset
    )
    if forecast is None or forecast.horizon is None:
        return Outputs(doc, test, None, None, tuple(files))
    source = forecast_source(forecast, dataset)
    if log is not None and source != "best":
        # refits of the top models on all points and the rolling check take a while on a
        # long series (about 80 s for the check alone at 100 000 points)
        models = (
            "the fixed kernel" if source == "fixed" else f"the top models (up to {forecast.models})"
        )
        what = (
            f"mixing {models}"
            if forecast.method == "bma"
            else f"scoring {models} on the data's end"
        )
        log(f"forecast: {what}…")
    fits = forecast_fits(result, dataset, config, best, forecast, cache=cache, log=log)
    line, written = _write_forecast(out, dataset, config, best, fits, forecast)
    return Outputs(doc, test, line, fits, tuple(files) + tuple(written))


def _write_forecast(
    out: Path,
    dataset: Dataset,
    config: SearchConfig,
    best: FitResult,
    fits: list[FitResult],
    settings: ForecastSettings,
) -> tuple[str, list[Path]]:
    """forecast.csv, forecast.png (and forecast_check.csv); returns the summary line and
    the files."""
    from prolas.report.forecast import forecast, plot_forecast, polynomial_trend

    horizon = settings.horizon
    method, weights = forecast_mixing(settings, dataset, fits)
    band = band_used(settings, dataset, fits)
    fc = forecast(fits, dataset, horizon, method=method, weights=weights, band=band)
    written = [fc.to_csv(out / "forecast.csv")]
    # the plot marks the transitions of the model forecast with: the pick, or the
    # mixture's dominant model (weight at least 0.5; rolling-mix is nearly always one)
    top = max(range(len(fc.weights)), key=fc.weights.__getitem__)
    dominant = fc.weights[top] >= 0.5
    picked = {f.expression: f for f in fits}.get(fc.models[top]) if dominant else None
    written.append(plot_forecast(out / "forecast.png", fc, dataset, fit=picked))
    scores = ""
    if fc.check is not None:  # rolling, rolling-mix, horizon-mix: the check's scores
        fc.check.to_csv(out / "forecast_check.csv", index=False)
        written.append(out / "forecast_check.csv")
        scores = "; scores in forecast_check.csv"
    fixed = source_used(settings, dataset, fits) == "fixed"
    if fixed:
        why = (
            f"a series of fewer than {FIXED_FORECAST_BELOW} points"
            if settings.source == "auto"
            else "--forecast-from fixed"
        )
        seeds = ", ".join(str(config.seed + d) for d in FIXED_FORECAST_SEED_OFFSETS)
        short = len(FIXED_FORECAST_SEED_OFFSETS) - len(fits)  # failed fits (logged)
        failed = f", {short} of which failed" if short else ""
        held = f", its period held at the season ({fits[0].season:.6g})" if fits[0].season else ""
        how = (
            f"the fixed kernel {fits[0].expression}{held}, its fits at fit seeds "
            f"{seeds}{failed} mixed equally ({why}; --forecast-from search forecasts from "
            "the search's models)"
        )
    elif method == "best":
        how = fc.models[0]
    elif method == "rolling":
        how = f"{fc.models[0]} (rolling-origin pick of {len(fits)} models{scores})"
    elif method == "rolling-mix":
        how = "mixture weighted by each model's forecast of the last 10% of the data: "
        how += ", ".join(f"{m} ({w:.2f})" for m, w in zip(fc.models, fc.weights)) + scores
    elif method == "horizon-mix":
        how = (
            "mixture weighted by each model's forecasts of the data's end up to "
            f"{min(horizon, dataset.n // 3)} steps ahead, refitted before each origin: "
        )
        how += ", ".join(f"{m} ({w:.2f})" for m, w in zip(fc.models, fc.weights)) + scores
    else:
        how = "BIC-weighted mixture of " + ", ".join(
            f"{m} ({w:.2f})" for m, w in zip(fc.models, fc.weights)
        )
        if search_data(dataset, config).n < dataset.n:
            # the search ranked the models on its subsample; the weights rank them again
            # on all points, and a user should not read a contradiction into that
            how += f"; weights from the BIC on all {dataset.n} points"
            top_model = fc.models[fc.weights.index(max(fc.weights))]
            if top_model != best.expression:
                how += f", where {top_model} ranks above the search's best"
    if band != "model":
        what = "the factor" if band != "shrunk" else "the square root of the factor"
        how += f"; band scaled by {fc.band_scale:.2f}, {what} that best forecast the training "
        how += "data's end"
    left_out = best.expression not in fc.models and polynomial_trend(best.expression)
    if method != "best" and not fixed and settings.trend == "linear" and left_out:
        how += (
            f"; the best model, {best.expression}, has a polynomial trend and is left out "
            "(--forecast-trend any keeps it)"
        )
    first, last = (str(v.date()) if fc.is_dates else f"{v:.6g}" for v in fc.x_display[[0, -1]])
    line = f"wrote {out}/forecast.csv and forecast.png: {horizon} steps, {first} to {last}, {how}"
    return line, written


def write_test_forecast(
    out: Path,
    dataset: Dataset,
    fits: Sequence[FitResult],
    settings: ForecastSettings,
    test_x: np.ndarray,
    test_y: np.ndarray,
    season_length: int,
) -> dict[str, float]:
    """Forecast the test inputs with ``settings.method`` and score it against ``test_y``.

    The forecast is :func:`prolas.report.forecast.forecast` with ``x_new=test_x`` (the
    test points themselves, not continued steps), from ``fits``
    (:func:`forecast_fits`). Its scores are :func:`prolas.report.scoring.score_forecast`
    with the seasonal naive scale of the training values at period ``season_length``.
    Writes ``test_forecast.csv`` and ``test_predictive.json`` (the components' means and
    standard deviations at the test inputs, the weights, the scores and, as a check on
    the quantile CRPS, the mixture's closed-form CRPS ``crps_mixture``).

    Returns:
        the scores (:data:`prolas.report.scoring.SCORE_COLUMNS`).
    """
    from prolas.report.forecast import forecast
    from prolas.report.scoring import (
        crps_gaussian_mixture,
        forecast_predictive,
        score_forecast,
        seasonal_naive_scale,
    )

    test_x = np.asarray(test_x, dtype=np.float64).reshape(-1)
    test_y = np.asarray(test_y, dtype=np.float64).reshape(-1)
    method, weights = forecast_mixing(settings, dataset, fits)
    band = band_used(settings, dataset, fits)
    fc = forecast(list(fits), dataset, x_new=test_x, method=method, weights=weights, band=band)
    scale = seasonal_naive_scale(dataset.y, season_length)
    scores = score_forecast(test_y, forecast_predictive(fc), scale)
    frame = fc.to_frame()
    frame.insert(1, "y", test_y)
    if fc.is_dates:
        frame["x"] = pd.DatetimeIndex(fc.x_display).strftime("%Y-%m-%d")
    frame.to_csv(out / "test_forecast.csv", index=False)
    crps_mixture = crps_gaussian_mixture(test_y, fc.component_means, fc.component_sds, fc.weights)
    doc = {
        "method": fc.method,
        "source": source_used(settings, dataset, fits),
        "trend": settings.trend,
        "season_length": season_length,
        "models": list(fc.models),
        # the period the fixed kernel's fits held (0: fitted; not the fixed kernel: None)
        "season": fits[0].season if source_used(settings, dataset, fits) == "fixed" else None,
        "weights": list(fc.weights),
        "band": band,
        "band_scale": fc.band_scale,
        "x": test_x.tolist(),
        "y": test_y.tolist(),
        "component_means": fc.component_means.tolist(),
        "component_sds": fc.component_sds.tolist(),
        "scores": scores,
        "crps_mixture": float(np.mean(crps_mixture)),
    }
    write_json(out / "test_predictive.json", json_clean(doc), indent=1)
    return scores


def write_partial_result(
    out: Path, dataset: Dataset, config: SearchConfig, evaluator, journal
) -> SearchResult | None:
    """Ctrl-C: a valid result.json of the evaluations finished so far (the best model as
    fitted on the searched points, no refit on all); None if none had finished."""
    from prolas import records, report
    from prolas.pipeline import best_fit, make_evaluator

    searched = search_data(dataset, config)
    if evaluator is None:  # interrupted while starting: the journal is all there is
        evaluator = make_evaluator(searched, config)
        evaluator.preload(journal.entries, elapsed=journal.elapsed, repairs=journal.repairs)
    result = evaluator.result(config.method, config.seed, {"interrupted": True})
    if not result.history:
        return None
    doc = report.result_to_json(
        dataset,
        result,
        best_fit(result, searched, config),
        method=config.method,
        seed=config.seed,
        budget=config.budget,
        checkpoint=config.checkpoint if config.method == "prolas" else None,
        searched_on=searched_on(dataset, config),
    )
    records.write_json(out / "result.json", doc)
    return result
