"""KernelSearch: one object for the whole job, from a table to a report, a forecast and plots.

Example::

    import pandas as pd, prolas
    df = pd.read_csv("notebooks/example_airline_dates.csv")  # month (dates), passengers
    ks = prolas.KernelSearch(method="prolas", budget=50, seed=0).fit(
        df, x="month", y="passengers"
    )
    ks.best_.expression, ks.describe()
    fc = ks.forecast(horizon=24, level=95)  # x, mean, lower, upper, components
    ks.plot(horizon=24), ks.plot_components(), ks.plot_convergence()
    ks.save("out/airline", horizon=24)  # exactly what `prolas fit` writes

It follows the conventions time-series users know: ``fit`` returns the object, whose
fitted attributes end in an underscore (scikit-learn): ``data_`` (the
:class:`~prolas.data.Dataset`), ``result_`` (the search's
:class:`~prolas.records.SearchResult`), ``best_`` (the best model, a
:class:`~prolas.gp.FitResult` that carries its data, so ``prolas.predict(ks.best_, x)``
needs no dataset), ``top_`` (the top distinct models a forecast mixes, refitted on all
points after a search on a subsample; computed when first read) and ``searched_on_``.
``forecast`` takes a horizon or inputs and a ``level`` in percent (statsforecast) and
returns a frame with one column per component of the model (Prophet); the plots return
matplotlib figures (``ax=`` where one axes suffices) without touching the backend.

``prolas fit`` is this object: argument parsing, then :meth:`KernelSearch.fit` (with the
journal of its output directory) and :meth:`KernelSearch.save`, so the same seed gives
the same files from either. Every method leaves the caller's torch and BLAS thread
settings as it found them (:func:`prolas.threads.restore_threads`).
"""

from __future__ import annotations

import dataclasses
import html
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from prolas.data import Dataset, as_dataset, timestamps_to_decimal_years
from prolas.errors import DataError, ProlasError
from prolas.fitjob import ForecastSettings, Outputs, no_model_error, searched_indices
from prolas.limits import (
    DEFAULT_FORECAST,
    DEFAULT_FORECAST_BAND,
    DEFAULT_FORECAST_SOURCE,
    DEFAULT_FORECAST_TREND,
    FORECAST_BAND_CHOICES,
    FORECAST_METHODS,
    FORECAST_MODELS,
    FORECAST_SOURCES,
    FORECAST_TRENDS,
)
from prolas.search.config import SearchConfig
from prolas.search.executors import check_executor_options
from prolas.threads import restore_threads

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from prolas.gp import FitResult
    from prolas.records import Evaluation, SearchResult
    from prolas.report.forecast import Forecast
    from prolas.search.journal import Journal

__all__ = ["KernelSearch", "SearchInterrupted"]

#: The forecast frame's column holding y's mean, which the model's terms vary about.
DATA_MEAN = "data_mean"
#: A mixture forecast's column: its mean minus its dominant model's mean.
OTHER_MODELS = "other_models"


class SearchInterrupted(KeyboardInterrupt):
    """Ctrl-C during :meth:`KernelSearch.fit`: a KeyboardInterrupt that keeps what was done.

    Attributes:
        result: the evaluations finished so far (a partial SearchResult), or None.
        path: the partial result.json written beside the search's journal, or None.
        budget: the search's budget.
    """

    def __init__(self, result: SearchResult | None, path: Path | None, budget: int) -> None:
        done = f"after {result.evaluations} of {budget} evaluations" if result else "at the start"
        super().__init__(f"search interrupted {done}")
        self.result, self.path, self.budget = result, path, budget


class SearchProgress:
    """A progress bar over unique evaluations showing the best BIC and expression so far
    (:func:`prolas.progress.progress_bar`: a widget in a notebook, a bar in a terminal,
    whole lines in a log); nothing when not ``shown``."""

    def __init__(self, total: int, shown: bool) -> None:
        self.bar = None
        self.best = None
        if shown:
            from prolas.progress import progress_bar

            self.bar = progress_bar(total, unit="fit", desc="search")

    def update_eval(self, ev: Evaluation) -> None:
        if ev.ok and (self.best is None or ev.bic > self.best.bic):
            self.best = ev
        if self.bar is not None:
            # the postfix first: a log's line is written by update() and must show this fit
            if self.best is not None:
                self.bar.set_postfix_str(f"best BIC {self.best.bic:.2f}: {self.best.expression}")
            self.bar.update(1)

    def writer(self, fallback: Callable[[str], None]) -> Callable[[str], None]:
        """A log function that prints above the bar instead of through it."""
        if self.bar is None:
            return fallback
        return lambda text: self.bar.write(text, file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _positive_or_none(value: int | None, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ProlasError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _forecast_settings(
    horizon: int | None,
    method: str,
    models: int,
    band: str = DEFAULT_FORECAST_BAND,
    trend: str = DEFAULT_FORECAST_TREND,
    source: str = DEFAULT_FORECAST_SOURCE,
    season_length: int | None = None,
) -> ForecastSettings:
    """The forecast arguments of :meth:`KernelSearch.forecast` and ``save``, checked with
    the names the caller used."""
    if method not in FORECAST_METHODS:
        raise ProlasError(f"method must be one of {', '.join(FORECAST_METHODS)}, got {method!r}")
    if band not in FORECAST_BAND_CHOICES:
        raise ProlasError(f"band must be one of {', '.join(FORECAST_BAND_CHOICES)}, got {band!r}")
    if trend not in FORECAST_TRENDS:
        raise ProlasError(f"trend must be one of {', '.join(FORECAST_TRENDS)}, got {trend!r}")
    if source not in FORECAST_SOURCES:
        raise ProlasError(f"source must be one of {', '.join(FORECAST_SOURCES)}, got {source!r}")
    if source == "fixed" and method == "best":
        raise ProlasError(
            "method='best' forecasts from the search's best model and source='fixed' from "
            "the fixed kernel; choose one"
        )
    horizon = _positive_or_none(horizon, "horizon")
    models = _positive_or_none(models, "models")
    return ForecastSettings(horizon, method, models, band, trend, source, season_length)


class KernelSearch:
    """Search kernel structures for a series, then report, forecast and plot it.

    Args:
        method: ``prolas`` (BO in the KG-VAE latent space, the default), ``cks``,
            ``random`` or ``structural``.
        budget: unique GP fits the search may spend.
        restarts: random restarts per GP fit.
        seed: seeds the search and every fit (the same seed gives the same result).
        workers: local worker processes fitting in parallel (default as ``prolas fit``:
            the available cores for CKS or batch proposals with more than 10 fits, else
            in-process); ``scheduler`` (a Dask address) and ``dask_local`` (a Dask
            LocalCluster of N workers) fit on Dask instead. Where the fits run does not
            change the result.
        season_length: the season in steps of the data's spacing at which the fixed
            forecast kernel's period is held (12 for monthly data; 0: fitted; None, the
            default: one year when x holds dates a month or a quarter apart, else fitted;
            :func:`prolas.report.forecast.season_period`). Forecasts only.
        **settings: the other fields of :class:`prolas.search.config.SearchConfig`
            (``depth``, ``change``, ``grammar``, ``checkpoint``, ``batch``,
            ``search_points``, ``lengthscale_floor``, ``warm_start``, ...).

    Raises:
        ProlasError: a bad setting (one line, before any fit).
    """

    def __init__(
        self,
        method: str = "prolas",
        budget: int = 50,
        *,
        restarts: int = 8,
        seed: int = 0,
        workers: int | None = None,
        scheduler: str | None = None,
        dask_local: int | None = None,
        season_length: int | None = None,
        **settings,
    ) -> None:
        known = {f.name for f in dataclasses.fields(SearchConfig)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ProlasError(
                f"KernelSearch: unknown setting {unknown[0]!r}; the settings are "
                f"{', '.join(sorted(known - {'method', 'budget', 'restarts', 'seed'}))}"
            )
        for name, value in (("budget", budget), ("restarts", restarts), ("seed", seed)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise ProlasError(f"{name} must be an integer, got {value!r}")
        self.config = SearchConfig(
            method=method, budget=int(budget), restarts=int(restarts), seed=int(seed), **settings
        )
        if season_length is not None and (
            isinstance(season_length, bool)
            or not isinstance(season_length, int | np.integer)
            or season_length < 0
        ):
            raise ProlasError(f"season_length must be an integer >= 0, got {season_length!r}")
        self.season_length = None if season_length is None else int(season_length)
        self.workers = _positive_or_none(workers, "workers")
        self.dask_local = _positive_or_none(dask_local, "dask_local")
        self.scheduler = scheduler
        check_executor_options(self.workers, scheduler, self.dask_local)
        self._columns: tuple[str | None, str | None, bool] = (None, None, False)
        # the forecasts' models made so far (prolas.fitjob.forecast_fits's cache: the
        # fixed kernel's fits, and per trend the top models and the k they were made for)
        self._models: dict = {}
        self._forecasts: dict[tuple, tuple[Forecast, list[FitResult]]] = {}

    # --- fitting -----------------------------------------------------------------------

    def fit(
        self,
        data: Dataset | pd.DataFrame | pd.Series | str | Path | np.ndarray | None = None,
        x: str | np.ndarray | Sequence | None = None,
        y: str | np.ndarray | Sequence | None = None,
        *,
        dropna: bool = False,
        journal: Journal | None = None,
        progress: bool = False,
        log: Callable[[str], None] | None = None,
    ) -> KernelSearch:
        """Run the search on a series and keep its result; returns ``self``.

        Args:
            data: a DataFrame (``x``, ``y`` name its columns; its index is x when it
                holds dates), a Series (y over its index), a CSV path, a Dataset, or y
                values (then x are positions); or pass arrays as ``x=`` and ``y=``
                (:func:`prolas.data.as_dataset`: dates become decimal years, missing
                values are a one-line error unless ``dropna``).
            dropna: drop rows whose x or y is missing, NaN or infinite.
            journal: append every finished fit to this crash-safe journal and replay
                the fits it holds (``prolas fit --resume``;
                :func:`prolas.search.journal.open_journal`).
            progress: show a progress bar (a widget in a notebook).
            log: where the search's messages go (e.g. ``print``); silent by default.

        Raises:
            ProlasError: bad data (one line), or every evaluation failed.
            SearchInterrupted: Ctrl-C; it holds the finished evaluations, and with a
                journal a partial result.json is written beside it.
        """
        dataset = as_dataset(data, x, y, dropna=dropna)
        self._columns = (
            None if dataset.x_column == "index" else dataset.x_column,
            dataset.y_column,
            dropna,
        )
        self._models, self._forecasts = {}, {}
        with restore_threads():
            result, best = self._search(dataset, journal, progress, log or (lambda s: None))
        self.data_, self.result_, self.best_ = dataset, result, best
        self.searched_on_ = searched_indices(dataset, self.config)
        if best is None:
            raise no_model_error(result)
        return self

    def _search(self, dataset: Dataset, journal, progress: bool, say) -> tuple:
        """The search as ``prolas fit`` runs it: executor, journal, progress, Ctrl-C."""
        from prolas import pipeline
        from prolas.search.config import search_view
        from prolas.search.executors import default_workers, make_executor
        from prolas.search.view import view_message

        config = self.config
        view = search_view(dataset, config)
        searched = dataset if view is None else view.dataset
        if view is not None:
            say(view_message(view, dataset))
        dask = self.scheduler is not None or self.dask_local is not None
        workers = self.workers or (
            1 if dask else default_workers(config.method, config.batch, config.budget)
        )
        if journal is not None and journal.entries:
            n = len(journal.entries)
            say(f"resuming: {n} journalled evaluations are replayed, not refitted")
        if dask or workers > 1:
            where = self.scheduler or (
                f"a Dask LocalCluster of {self.dask_local}" if dask else None
            )
            say(f"fitting in parallel on {where or f'{workers} worker processes'}")
        bar = SearchProgress(config.budget, progress)
        for e in journal.entries if journal is not None else ():
            bar.update_eval(e)
        ev = None
        try:
            with make_executor(
                self.workers if dask else workers, self.scheduler, self.dask_local
            ) as pool:
                ev = pipeline.make_evaluator(
                    searched, config, executor=pool, on_result=bar.update_eval
                )
                return pipeline.run_search(
                    dataset, config, evaluator=ev, journal=journal, log=bar.writer(say)
                )
        except KeyboardInterrupt:
            bar.close()
            raise self._interrupted(dataset, ev, journal) from None
        finally:
            bar.close()

    def _interrupted(self, dataset: Dataset, ev, journal) -> SearchInterrupted:
        """What a Ctrl-C leaves: the finished evaluations, and with a journal a partial
        result.json beside it (:func:`prolas.fitjob.write_partial_result`)."""
        from prolas.fitjob import write_partial_result

        config = self.config
        if journal is not None:
            out = Path(journal.path).parent
            result = write_partial_result(out, dataset, config, ev, journal)
            return SearchInterrupted(result, out / "result.json" if result else None, config.budget)
        result = ev.result(config.method, config.seed, {"interrupted": True}) if ev else None
        return SearchInterrupted(result if result and result.history else None, None, config.budget)

    def _fitted(self) -> None:
        if not hasattr(self, "result_"):
            raise ProlasError("this KernelSearch is not fitted yet; call .fit(data) first")
        if self.best_ is None:
            raise no_model_error(self.result_)

    # --- the models --------------------------------------------------------------------

    @property
    def top_(self) -> list[FitResult]:
        """The search's top :data:`prolas.limits.FORECAST_MODELS` distinct models by BIC,
        each fitted on all points and carrying its data, without the models with a
        polynomial trend (:func:`prolas.report.forecast.top_fits`; ``result_.history``
        has every model): what the default forecast mixes on a series of 144 points or
        more (a shorter one is forecast from the fixed kernel, ``source="auto"``).
        Computed when first read."""
        settings = ForecastSettings(method="bma", source="search")
        return self._forecast_models(settings)

    def _forecast_models(self, settings: ForecastSettings) -> list[FitResult]:
        """The models a forecast with ``settings`` uses (:func:`forecast_fits`), kept."""
        from prolas.fitjob import forecast_fits

        self._fitted()
        with restore_threads():
            return forecast_fits(
                self.result_,
                self.data_,
                self.config,
                self.best_,
                settings,
                cache=self._models,
            )

    def describe(self) -> str:
        """The best model in plain sentences, one per line (report.md's words:
        :func:`prolas.report.describe_fit`)."""
        from prolas.report import describe_fit

        self._fitted()
        with restore_threads():
            return "\n".join(describe_fit(self.best_, self.data_))

    def summary(self, top: int = 5) -> str:
        """The table ``prolas fit`` prints: the ``top`` models by BIC, the counts, the best."""
        from prolas.report import summary_table

        self._fitted()
        return summary_table(self.result_, self.best_, top)

    # --- forecasts ---------------------------------------------------------------------

    def _inputs(self, x) -> np.ndarray:
        """Forecast inputs in x's units: dates (for a dated series) or numbers."""
        arr = x.to_numpy() if isinstance(x, pd.Series | pd.Index) else np.asarray(x).reshape(-1)
        values = pd.Series(arr)
        if values.empty:
            raise ProlasError("x must hold at least one input to forecast at")
        numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
        if numeric:
            return values.to_numpy(dtype=np.float64)
        if not self.data_.x_is_date:
            raise ProlasError(
                f"x: the series' x ({self.data_.x_column!r}) is numeric; give numbers, not "
                f"{values.dtype} values"
            )
        try:
            return timestamps_to_decimal_years(values)
        except (ValueError, TypeError, DataError) as exc:
            raise ProlasError(f"x: not dates ({str(exc).splitlines()[0]})") from None

    def _forecast(
        self,
        horizon,
        x,
        level,
        method,
        models,
        band,
        trend=DEFAULT_FORECAST_TREND,
        source=DEFAULT_FORECAST_SOURCE,
    ) -> tuple[Forecast, list[FitResult]]:
        """The Forecast and the models it came from (the last few kept by arguments)."""
        from prolas.fitjob import band_used, forecast_mixing
        from prolas.report.forecast import forecast

        self._fitted()
        if isinstance(level, bool) or not isinstance(level, int | float | np.number):
            raise ProlasError(f"level is a percentage such as 95, got {level!r}")
        if not 1 <= float(level) < 100:
            raise ProlasError(f"level is a percentage between 1 and 100 (e.g. 95), got {level}")
        if (horizon is None) == (x is None):
            raise ProlasError("give exactly one of horizon (future steps) and x (inputs)")
        settings = _forecast_settings(
            horizon, method, models, band, trend, source, self.season_length
        )
        xs = None if x is None else self._inputs(x)
        xkey = None if xs is None else xs.tobytes()
        key = (horizon, xkey, float(level), method, models, band, trend, source)
        if key not in self._forecasts:
            fits = self._forecast_models(settings)
            mixing, weights = forecast_mixing(settings, self.data_, fits)
            with restore_threads():
                fc = forecast(
                    fits,
                    self.data_,
                    horizon,
                    x_new=xs,
                    method=mixing,
                    level=float(level) / 100,
                    weights=weights,
                    band=band_used(settings, self.data_, fits),
                )
            if len(self._forecasts) >= 8:
                self._forecasts.pop(next(iter(self._forecasts)))
            self._forecasts[key] = (fc, fits)
        return self._forecasts[key]

    def forecast(
        self,
        horizon: int | None = None,
        *,
        x=None,
        level: float = 95,
        method: str = DEFAULT_FORECAST,
        models: int = FORECAST_MODELS,
        band: str = DEFAULT_FORECAST_BAND,
        trend: str = DEFAULT_FORECAST_TREND,
        source: str = DEFAULT_FORECAST_SOURCE,
    ) -> pd.DataFrame:
        """y's forecast with its band and the model's components, one row per input.

        Args:
            horizon: future steps after the last x, continuing the data's spacing
                (calendar steps when x came from dates); or
            x: the inputs: dates for a dated series (or decimal years), else numbers.
            level: the central predictive band in percent (95: from the 2.5 % to the
                97.5 % quantile).
            method, models: as ``prolas fit --forecast M --forecast-models K``; the
                default is the CLI's, ``rolling-mix`` (the top ``models`` mixed by how
                well each forecast the last 10 % of the data).
            band: as ``--forecast-band``: ``auto`` (default: ``shrunk`` for the fixed
                seasonal kernel, else ``refitted``), ``model`` (the models' own band),
                ``calibrated`` or ``refitted`` (scaled by the factor that best forecast
                the data's end), ``shrunk`` (by that factor's square root).
            trend: as ``--forecast-trend``: ``linear`` (default) leaves the models with
                a polynomial trend (a term with two or more LIN factors) out of the
                top models, ``any`` keeps them.
            source: as ``--forecast-from``: ``auto`` (default: the fixed kernel,
                :data:`prolas.limits.FIXED_SEASONAL_KERNEL` with its period held at a
                known season, else :data:`prolas.limits.FIXED_FORECAST_KERNEL`, for a
                series of fewer than
                :data:`prolas.limits.FIXED_FORECAST_BELOW` points, else the search's top
                models), ``search`` or ``fixed``. The fixed kernel's forecast mixes its
                fits at three fit seeds with equal weights, whatever ``method`` says
                (:data:`prolas.limits.FIXED_FORECAST_SEED_OFFSETS`).

        Returns:
            a DataFrame with columns ``x`` (dates when the input had dates), ``mean``,
            ``lower``, ``upper`` (y's units), then the components, which sum to
            ``mean``: ``data_mean`` (y's mean, constant) and one column per additive
            term of the model, its posterior mean (:func:`prolas.gp.decompose`; named
            by its kernels, e.g. ``LIN*PER*SE``). A mixture of several models (``bma``,
            ``rolling-mix``) has the terms of its dominant model (the highest weight;
            with the rolling-mix default it usually holds nearly all of it) and a last
            column ``other_models``: the mixture's mean minus that model's mean, what
            the other models add. ``frame.attrs`` holds the ``method``, ``level``, the
            ``models`` and their ``weights`` and ``components_of`` (the model whose
            terms the columns are).
        """
        from prolas.gp import decompose

        fc, fits = self._forecast(horizon, x, level, method, models, band, trend, source)
        frame = fc.to_frame()
        top = int(np.argmax(fc.weights))
        if len(fc.models) == len(fits):  # a mixture of all (the fixed kernel's: one per seed)
            model = fits[top]
        else:  # a pick of one
            model = {f.expression: f for f in fits}[fc.models[top]]
        view = self.data_.standardised_view()
        with restore_threads():
            parts = decompose(model, view, fc.x)
        frame[DATA_MEAN] = self.data_.y_mean
        for label, mean, _ in parts:
            column, k = label, 2
            while column in frame.columns:  # a term label is unique in a canonical model
                column, k = f"{label} ({k})", k + 1
            frame[column] = mean * self.data_.y_std
        if len(fc.models) > 1:  # what the other models add to the mixture's mean
            frame[OTHER_MODELS] = fc.mean - fc.component_means[top]
        frame.attrs.update(
            method=fc.method,
            level=float(level),
            models=list(fc.models),
            weights=list(fc.weights),
            band_scale=fc.band_scale,
            components_of=model.expression,
        )
        return frame

    # --- pictures ----------------------------------------------------------------------

    def plot(
        self,
        horizon: int | None = None,
        *,
        x=None,
        level: float = 95,
        method: str = DEFAULT_FORECAST,
        models: int = FORECAST_MODELS,
        band: str = DEFAULT_FORECAST_BAND,
        trend: str = DEFAULT_FORECAST_TREND,
        source: str = DEFAULT_FORECAST_SOURCE,
        ax=None,
    ) -> Figure:
        """The best model's fit (fit.png: data, posterior mean and 95 % band, 20 % of
        the span beyond the data), or with ``horizon`` or ``x`` the forecast
        (forecast.png, from the same arguments as :meth:`forecast`). Returns the
        matplotlib figure; draws on ``ax`` when given."""
        from prolas.report import fit_figure
        from prolas.report.forecast import forecast_figure

        self._fitted()
        with restore_threads():
            if horizon is None and x is None:
                return fit_figure(self.best_, self.data_, ax=ax)
            fc, fits = self._forecast(horizon, x, level, method, models, band, trend, source)
            top = int(np.argmax(fc.weights))  # marks as forecast.png: a dominant model's
            fit = (
                {f.expression: f for f in fits}[fc.models[top]] if fc.weights[top] >= 0.5 else None
            )
            return forecast_figure(fc, self.data_, fit, ax=ax)

    def plot_components(self) -> Figure:
        """One panel per additive term of the best model (components.png)."""
        from prolas.report import components_figure

        self._fitted()
        with restore_threads():
            return components_figure(self.best_, self.data_)

    def plot_convergence(self, *, ax=None) -> Figure:
        """Best BIC so far against the evaluations (convergence.png); draws on ``ax``."""
        from prolas.report import convergence_figure

        if not hasattr(self, "result_"):
            raise ProlasError("this KernelSearch is not fitted yet; call .fit(data) first")
        return convergence_figure(self.result_, ax=ax)

    # --- files -------------------------------------------------------------------------

    def _test_data(self, test) -> Dataset | None:
        """A test set with the training data's columns (as ``prolas fit --test``)."""
        if test is None or isinstance(test, Dataset | pd.Series):
            return as_dataset(test) if test is not None else None
        x, y, dropna = self._columns
        return as_dataset(test, x, y, dropna=dropna)

    def save(
        self,
        out: str | Path,
        test=None,
        *,
        horizon: int | None = None,
        method: str = DEFAULT_FORECAST,
        models: int = FORECAST_MODELS,
        band: str = DEFAULT_FORECAST_BAND,
        trend: str = DEFAULT_FORECAST_TREND,
        source: str = DEFAULT_FORECAST_SOURCE,
        force: bool = False,
        log: Callable[[str], None] | None = None,
    ) -> Outputs:
        """Write what ``prolas fit`` writes into ``out``: result.json, report.md,
        fit.png, components.png, convergence.png and, with a ``horizon``, forecast.csv,
        forecast.png (and forecast_check.csv).

        Args:
            test: held-out points (a CSV path or a table with the training data's
                columns, a Series, or a Dataset): result.json's test block and fit.png.
            horizon, method, models, band, trend, source: the forecast (as
                ``--horizon``, ``--forecast``, ``--forecast-models``,
                ``--forecast-band``, ``--forecast-trend``, ``--forecast-from``).
            force: replace a result already in ``out`` (only prolas's own files).
            log: where progress messages go.

        Returns:
            the :class:`prolas.fitjob.Outputs`: the result.json document, the test
            block, the forecast's summary line and the files written.

        Raises:
            OutputExistsError: ``out`` holds a result and ``force`` is not given.
            OutputBusyError: another process writes to ``out``.
        """
        from prolas.fitjob import write_outputs
        from prolas.output_lock import claim_output_dir

        self._fitted()
        test_data = self._test_data(test)
        settings = _forecast_settings(
            horizon, method, models, band, trend, source, self.season_length
        )
        with claim_output_dir(Path(out), "KernelSearch.save", force=force, resume=False):
            with restore_threads():
                written = write_outputs(
                    Path(out),
                    self.data_,
                    self.config,
                    self.result_,
                    self.best_,
                    test_dataset=test_data,
                    forecast=settings,
                    log=log,
                    cache=self._models,  # the models of earlier forecasts, and for later
                )
        return written

    # --- display -----------------------------------------------------------------------

    def __repr__(self) -> str:
        c = self.config
        head = f"KernelSearch(method={c.method!r}, budget={c.budget}, seed={c.seed})"
        if not hasattr(self, "result_"):
            return head
        best = self.best_.expression if self.best_ is not None else "no model"
        return f"{head} fitted on {self.data_.n} points: {best}"

    def _repr_html_(self) -> str:
        """The notebook view: the top models by BIC and the best model in words."""
        c = self.config
        head = (
            f"<b>KernelSearch</b> (method {html.escape(c.method)}, budget {c.budget}, "
            f"seed {c.seed})"
        )
        if not hasattr(self, "result_"):
            return f"<div>{head}: not fitted</div>"
        r, d = self.result_, self.data_
        failed = sum(not e.ok for e in r.history)
        lines = [
            f"<div>{head} on {d.n} points of {html.escape(d.y_column)}: {r.evaluations} "
            f"evaluations ({failed} failed) in {r.wall_seconds:.1f} s</div>",
            "<table><tr><th>rank</th><th>expression</th><th>BIC</th><th>log-lik</th>"
            "<th>k</th></tr>",
        ]
        ranked = sorted((e for e in r.history if e.ok), key=lambda e: (-e.bic, e.index))
        for rank, e in enumerate(ranked[:5], 1):
            loglik = f"{e.log_likelihood:.2f}" if e.log_likelihood is not None else "-"
            lines.append(
                f"<tr><td>{rank}</td><td><code>{html.escape(e.expression)}</code></td>"
                f"<td>{e.bic:.2f}</td><td>{loglik}</td><td>{e.n_params}</td></tr>"
            )
        lines.append("</table>")
        if self.best_ is not None:
            words = "".join(f"<li>{html.escape(s)}</li>" for s in self.describe().splitlines())
            lines.append(
                f"<div>best: <code>{html.escape(self.best_.expression)}</code>, BIC "
                f"{self.best_.bic:.2f}</div><ul>{words}</ul>"
            )
        return "\n".join(lines)
