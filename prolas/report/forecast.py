"""Forecasts: y's predictive distribution beyond the data, from one model or a mixture.

The inputs. ``horizon=H`` forecasts H future steps after the last input, continuing
the data's regular spacing: ``x_{n+h} = x_n + h Δ`` with Δ the median spacing of the
distinct inputs (:attr:`Dataset.spacing`). When x came from dates
(:attr:`Dataset.x_is_date`), the steps follow the data's calendar instead
(:func:`prolas.calendar_steps.continue_dates`): month starts continue as month starts,
month ends, quarters, years, weeks, business days, days and hours likewise, inferred
so that a missing point does not change the step; a series regular in no calendar
unit gets its median time step. Explicit inputs are given with ``x_new``.

One model (``method="best"``). A fitted model ``M`` (hyperparameters fixed) gives the
Gaussian predictive of a new observation,

    y* | y, M ~ N(m(x*), v(x*)),   v = latent posterior variance + noise variance,

in y's original units (:func:`prolas.gp.predict` with ``include_noise=True``); the
``level`` band is ``m ± z v^½`` with ``z = Φ⁻¹((1 + level) / 2)`` (1.96 for 95 %).

Bayesian model averaging (``method="bma"``). K fitted models with weights

    w_i = exp(BIC_i - max_j BIC_j) / Σ_k exp(BIC_k - max_j BIC_j),

i.e. ``exp(BIC)`` as the Laplace/BIC approximation of each model's evidence ``p(y | M_i)``
under a uniform prior over the models, give the mixture predictive

    p(y* | y) = Σ_i w_i N(y*; m_i, v_i),
    mean = Σ_i w_i m_i,   variance = Σ_i w_i (v_i + m_i²) - mean².

The mixture's band is between its quantiles ``F⁻¹((1 - level) / 2)`` and
``F⁻¹((1 + level) / 2)`` with ``F(q) = Σ_i w_i Φ((q - m_i) / v_i^½)``, found by
bisection (:func:`mixture_quantiles`), not by a Gaussian with the mixture's variance:
two models that disagree give a band that covers both, and a bimodal mixture is not
widened symmetrically. AutoGP.jl (Saad et al. 2023) forecasts in the same way with a
weighted mixture of its particles' posteriors.

Rolling origin (:func:`rolling_origin_check`): each model, with its hyperparameters
fixed, is conditioned on a prefix of the data and scored on the points after it, for
several origins in the last part of the data. ``method="rolling"`` forecasts with the
single model of lowest rolling-origin RMSE (:func:`rolling_pick`; the check is kept in
:attr:`Forecast.check`): a choice made on how each model extrapolated the end of its own
training data rather than on BIC.

Rolling-origin mixture (``method="rolling-mix"``, :func:`rolling_weights`). The same
models mixed as for ``bma``, but weighted by the check's summed log predictive density,

    w_i ∝ exp(Σ_o Σ_{t ≥ o} log p(y_t | y_{<o}, M_i)),

pseudo-Bayesian model averaging (Yao, Vehtari, Simpson & Gelman 2018) with the
leave-future-out predictive of a time series (Bürkner, Gabry & Vehtari 2020) in place
of leave-one-out: a model earns weight by how well it forecast, with its own uncertainty,
the end of the data it was fitted on. The hyperparameters stay those fitted on all the
data (refitting them on each prefix was measured and forecast worse:
``benchmarks/results/extrapolation/forecast_choice/``).

Horizon mixture (``method="horizon-mix"``, :func:`horizon_weights`; an option, not the
default: ``benchmarks/results/forecast_horizon_check/``). The same pseudo-BMA weights,
from forecasts at the forecast's own lead times instead: ``H_c = min(H, n // 3)`` steps
from 5 origins in ``[n - 2 H_c, n - H_c]``, each model refitted on the points before
each origin (:func:`horizon_check`), so a model whose extrapolation fails some steps out
loses its weight even when it fit the data's end. The weights are pseudo-BMA+ (the
Bayesian bootstrap over the origins, :func:`origin_weights`): consecutive origins
forecast the same points, so their log densities are not independent evidence. Its
``refitted`` band factor is cross-fitted over the origins (:func:`horizon_band_scale`).

Place in the layers: a forecast is part of what the user gets after a search
(forecast.csv, forecast.png), so it lives in the report layer. The mixture's maths
(:func:`bic_weights`, :func:`mixture_cdf`, :func:`mixture_quantiles`) stays here with
it: it is model averaging over Gaussian predictives, used only by forecasts, not GP
maths (the GP enters only through :func:`prolas.gp.predict`).

>>> from prolas import load_csv, fit_gp, forecast          # doctest: +SKIP
>>> ds = load_csv("data/airline_train.csv")                 # doctest: +SKIP
>>> fc = forecast(fit_gp("LIN*PER*SE + LIN*SE", ds), ds, horizon=12)  # doctest: +SKIP
>>> fc.to_csv("forecast.csv")                               # doctest: +SKIP
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.special import logsumexp, ndtr, ndtri

from prolas.calendar_steps import continue_dates
from prolas.data import Dataset, decimal_years_to_timestamps, timestamps_to_decimal_years
from prolas.errors import ProlasError
from prolas.expr import Expression, parse
from prolas.gp import FitResult, predict
from prolas.limits import (
    BAND_REFIT_LIMIT,
    BAND_SHRINK_POWER,
    DEFAULT_FORECAST,
    DEFAULT_FORECAST_TREND,
    FIXED_FORECAST_KERNEL,
    FIXED_FORECAST_SEED_OFFSETS,
    FIXED_SEASONAL_KERNEL,
    FORECAST_BANDS,
    FORECAST_METHODS,
    FORECAST_TRENDS,
)
from prolas.report.plots import DPI, mark_changes

if TYPE_CHECKING:  # pragma: no cover
    from prolas.records import SearchResult
    from prolas.search.config import SearchConfig

__all__ = [
    "Forecast",
    "ForecastError",
    "FORECAST_METHODS",
    "MAX_HORIZON",
    "BAND_SCALE_BOUNDS",
    "band_scale",
    "fixed_fit",
    "season_period",
    "HorizonCheck",
    "horizon_check",
    "horizon_weights",
    "horizon_band_scale",
    "BAND_SCORES",
    "held_out_weights",
    "origin_weights",
    "bic_weights",
    "forecast",
    "forecast_figure",
    "forecast_title",
    "future_x",
    "mixture_cdf",
    "mixture_quantiles",
    "plot_forecast",
    "origin_split",
    "polynomial_trend",
    "rolling_origin_check",
    "rolling_origins",
    "rolling_pick",
    "rolling_weights",
    "top_fits",
]

#: Longest forecast (steps); far beyond any horizon a GP's extrapolation can support.
MAX_HORIZON = 100_000

#: Forecast inputs predicted per batch (the predictive computes a batch x batch matrix).
_BATCH = 1000


class ForecastError(ProlasError, ValueError):
    """Bad forecast arguments (horizon, inputs, models, weights, level)."""


# --- the result ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Forecast:
    """A forecast: y's predictive distribution at the inputs ``x``.

    Attributes:
        x: inputs in x's own units (decimal years when x came from dates), shape ``(m,)``.
        x_display: the inputs as the user's data had them: a ``pandas.DatetimeIndex``
            when x came from dates, else ``x`` itself.
        mean: predictive mean in y's original units.
        lower, upper: the central ``level`` predictive interval (y's original units).
        level: probability mass between ``lower`` and ``upper`` (0.95 by default).
        method: one of :data:`FORECAST_METHODS` (``"best"``, ``"bma"``, ``"rolling"``,
            ``"rolling-mix"``, ``"horizon-mix"``).
        models: the expressions of the mixture's components (one for ``best`` and
            ``rolling``).
        weights: their weights (sum 1).
        component_means, component_sds: each component's Gaussian predictive in y's
            original units, shape ``(len(models), m)``; :meth:`log_density` uses them.
        check: ``rolling`` and ``rolling-mix``: the :func:`rolling_origin_check` table
            the model was picked from or the weights came from (one row per candidate
            model); ``horizon-mix``: :func:`horizon_weights`'s table; ``None`` otherwise.
        band_scale: the factor the components' standard deviations were multiplied by
            (:func:`band_scale`; 1 when the band is the models' own).
    """

    x: np.ndarray
    x_display: np.ndarray | pd.DatetimeIndex
    mean: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float
    method: str
    models: tuple[str, ...]
    weights: tuple[float, ...]
    component_means: np.ndarray = field(repr=False)
    component_sds: np.ndarray = field(repr=False)
    check: pd.DataFrame | None = field(default=None, repr=False)
    band_scale: float = 1.0

    def __len__(self) -> int:
        return int(self.x.size)

    @property
    def is_dates(self) -> bool:
        return isinstance(self.x_display, pd.DatetimeIndex)

    @property
    def sd(self) -> np.ndarray:
        """Standard deviation of the (mixture) predictive: ``(Σ w (v + m²) - mean²)^½``."""
        w = np.asarray(self.weights)[:, None]
        second = (w * (self.component_sds**2 + self.component_means**2)).sum(0)
        return np.sqrt(np.maximum(second - self.mean**2, 0.0))

    def log_density(self, y: np.ndarray) -> np.ndarray:
        """Log predictive density of observations ``y`` at ``x`` (y's original units),
        ``log Σ_i w_i N(y; m_i, v_i)``, per point."""
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if y.shape != self.x.shape:
            raise ForecastError(f"{y.size} observations for {self.x.size} forecast inputs")
        return _mixture_log_density(y, self.component_means, self.component_sds, self.weights)

    def to_frame(self) -> pd.DataFrame:
        """Columns ``x`` (dates when the input had dates, else numbers), ``mean``,
        ``lower``, ``upper``."""
        return pd.DataFrame(
            {"x": self.x_display, "mean": self.mean, "lower": self.lower, "upper": self.upper}
        )

    def to_csv(self, path: str | Path) -> Path:
        """Write :meth:`to_frame` as CSV; dates in ISO 8601 (``2001-07-01``, or
        ``2001-07-01T12:00:00`` when some have a time of day)."""
        frame = self.to_frame()
        if self.is_dates:
            frame["x"] = _iso(self.x_display)
        path = Path(path)
        frame.to_csv(path, index=False)
        return path


def _iso(dates: pd.DatetimeIndex) -> list[str]:
    with_time = bool((dates != dates.normalize()).any())
    return list(dates.strftime("%Y-%m-%dT%H:%M:%S" if with_time else "%Y-%m-%d"))


# --- inputs ----------------------------------------------------------------------------


def _check_horizon(horizon: object) -> int:
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise ForecastError(f"horizon must be a positive integer (future steps), got {horizon!r}")
    if horizon > MAX_HORIZON:
        raise ForecastError(f"horizon {horizon} is beyond the limit of {MAX_HORIZON} steps")
    return int(horizon)


def future_x(dataset: Dataset, horizon: int) -> tuple[np.ndarray, np.ndarray | pd.DatetimeIndex]:
    """The ``horizon`` inputs after the data's last one, continuing its spacing.

    Returns ``(x, x_display)``: x in x's units and, for a dated series, the dates
    (:func:`prolas.calendar_steps.continue_dates`: exact calendar steps, e.g. month
    starts, when the dates are regular in a calendar unit, else the median time step;
    x is their decimal years); for a numeric series ``x_display`` is ``x`` and the step
    is :attr:`Dataset.spacing`.
    """
    horizon = _check_horizon(horizon)
    if not dataset.x_is_date:
        x = dataset.x[-1] + dataset.spacing * np.arange(1, horizon + 1, dtype=np.float64)
        return x, x
    future = continue_dates(dataset.x_dates, horizon)
    return timestamps_to_decimal_years(pd.Series(future)), future


# --- mixtures --------------------------------------------------------------------------


def bic_weights(bics: Sequence[float]) -> np.ndarray:
    """``w_i ∝ exp(BIC_i - max BIC)``: BIC as the approximate log evidence."""
    b = np.asarray(bics, dtype=np.float64)
    if b.size == 0 or not np.all(np.isfinite(b)):
        raise ForecastError("BIC weights need finite BICs")
    w = np.exp(b - b.max())
    return w / w.sum()


def mixture_cdf(
    q: np.ndarray, means: np.ndarray, sds: np.ndarray, weights: Sequence[float]
) -> np.ndarray:
    """``F(q) = Σ_i w_i Φ((q - m_i) / s_i)`` per point; means, sds ``(K, m)``, q ``(m,)``,
    weights ``(K,)`` or one column per point ``(K, m)``."""
    w = np.asarray(weights, dtype=np.float64)
    w = w[:, None] if w.ndim == 1 else w
    sds = np.maximum(sds, np.finfo(np.float64).tiny)
    return (w * ndtr((np.asarray(q)[None, :] - means) / sds)).sum(0)


def mixture_quantiles(
    p: float, means: np.ndarray, sds: np.ndarray, weights: Sequence[float]
) -> np.ndarray:
    """The ``p`` quantile of the Gaussian mixture at every point, by bisection.

    The quantile lies between the smallest and the largest component quantile
    ``m_i + s_i Φ⁻¹(p)`` (at the smallest, every component's CDF is at most p, so F
    is too; at the largest, at least p). Bisection on that bracket, vectorised over
    the points, runs until the bracket cannot shrink in float64 (at most 200 halvings);
    for one component, or components with equal quantiles, the bracket is a single
    point and the answer is exact.
    """
    means = np.atleast_2d(np.asarray(means, dtype=np.float64))
    sds = np.atleast_2d(np.asarray(sds, dtype=np.float64))
    if not 0.0 < p < 1.0:
        raise ForecastError(f"quantile probability must be in (0, 1), got {p}")
    each = means + sds * ndtri(p)
    lo, hi = each.min(0), each.max(0)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.all((mid <= lo) | (mid >= hi)):
            break
        below = mixture_cdf(mid, means, sds, weights) < p
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def _log_normal(y: np.ndarray, means: np.ndarray, sds: np.ndarray) -> np.ndarray:
    """Each component's Gaussian log density ``log N(y; m_i, s_i²)``, ``(K, points)``."""
    sds = np.maximum(sds, np.finfo(np.float64).tiny)
    z = (y[None, :] - means) / sds
    return -0.5 * z**2 - np.log(sds) - 0.5 * math.log(2 * math.pi)


def _mixture_log_density(
    y: np.ndarray, means: np.ndarray, sds: np.ndarray, weights: Sequence[float]
) -> np.ndarray:
    """``log Σ_i w_i N(y; m_i, s_i²)`` per point, by log-sum-exp; ``weights`` ``(K,)``, or
    ``(K, points)`` for weights that differ between points."""
    with np.errstate(divide="ignore"):  # a zero weight is log 0 = -inf: no contribution
        log_w = np.log(np.asarray(weights, dtype=np.float64))
    if log_w.ndim == 1:  # one weight per component, (K,); else per point, (K, points)
        log_w = log_w[:, None]
    return logsumexp(_log_normal(y, means, sds) + log_w, axis=0)


# --- the forecast ----------------------------------------------------------------------


def _as_fits(
    fit_or_fits: FitResult | Sequence[FitResult], weights: Sequence[float] | None = None
) -> tuple[list[FitResult], np.ndarray | None]:
    """The successful fits, and the weights given for them (checked, normalised)."""
    fits = [fit_or_fits] if isinstance(fit_or_fits, FitResult) else list(fit_or_fits)
    if not fits:
        raise ForecastError("no model to forecast with")
    for f in fits:
        if not isinstance(f, FitResult):
            raise ForecastError(f"expected FitResult objects, got {type(f).__name__}")
    keep = np.array([f.ok and f.bic is not None and math.isfinite(f.bic) for f in fits])
    if not keep.any():
        raise ForecastError("every model given failed to fit; nothing to forecast with")
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.size != len(fits):
            raise ForecastError(f"{w.size} weights for {len(fits)} models")
        w = w[keep]
        if not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
            raise ForecastError("weights must be finite, non-negative and not all zero")
        w = w / w.sum()
    return [f for f, k in zip(fits, keep) if k], w


def _components(
    fits: Sequence[FitResult], dataset: Dataset, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each model's predictive mean and sd at ``x`` for standardised y, ``(K, m)`` each."""
    view = dataset.standardised_view()
    means, variances = np.empty((len(fits), x.size)), np.empty((len(fits), x.size))
    for i, f in enumerate(fits):
        for start in range(0, x.size, _BATCH):
            part = slice(start, start + _BATCH)
            means[i, part], variances[i, part] = predict(f, view, x[part], include_noise=True)
    return means, np.sqrt(variances)


def _conditioning_data(
    fit_or_fits: FitResult | Sequence[FitResult], dataset: Dataset | None
) -> Dataset:
    """``dataset``, or the one data set every model carries."""
    if dataset is not None:
        if not isinstance(dataset, Dataset):
            raise ForecastError(
                f"the second argument is the dataset the models were fitted on, got "
                f"{type(dataset).__name__}; give the steps as horizon=..."
            )
        return dataset
    fits = [fit_or_fits] if isinstance(fit_or_fits, FitResult) else list(fit_or_fits)
    carried = [getattr(f, "dataset", None) for f in fits]
    if not carried or any(d is None for d in carried):
        raise ForecastError(
            "the models carry no data; pass the dataset they were fitted on: "
            "forecast(fits, dataset, horizon=...)"
        )
    first = carried[0]
    for d in carried[1:]:
        if d is not first and not (np.array_equal(d.x, first.x) and np.array_equal(d.y, first.y)):
            raise ForecastError(
                "the models were fitted on different data; pass the dataset to forecast from"
            )
    return first


def forecast(
    fit_or_fits: FitResult | Sequence[FitResult],
    dataset: Dataset | None = None,
    horizon: int | None = None,
    *,
    x_new: np.ndarray | Sequence[float] | None = None,
    method: str = DEFAULT_FORECAST,
    level: float = 0.95,
    weights: Sequence[float] | None = None,
    band: str = "model",
    draws: int | None = None,
    band_score: str = "log",
) -> Forecast:
    """Forecast y from fitted models (hyperparameters fixed) conditioned on ``dataset``.

    Args:
        fit_or_fits: one :class:`FitResult` or several (failed fits are skipped),
            each fitted on ``dataset`` (the models it conditions on).
        dataset: the data the models were fitted on; by default the data they carry
            (:attr:`FitResult.dataset`: a search's best and top models carry theirs).
        horizon: number of future steps after the last input (:func:`future_x`).
        x_new: explicit inputs in x's units (decimal years for a dated series)
            instead of ``horizon``.
        method: ``"rolling-mix"`` (the default, as ``prolas fit --horizon``: the
            mixture of all the models weighted by how well they forecast the end of the
            training data, :func:`rolling_weights`), ``"best"`` (the highest-BIC model's
            Gaussian predictive), ``"bma"`` (the BIC-weighted mixture of all the models;
            see the module docstring) or ``"rolling"`` (the Gaussian predictive of the
            model that forecast the end of the training data best,
            :func:`rolling_pick`) or ``"horizon-mix"`` (the mixture weighted by forecasts
            at the forecast's lead times from refitted hyperparameters,
            :func:`horizon_weights`). With one model, every method is that model's
            predictive.
        level: probability of the central band (0.95: the 2.5 % and 97.5 % quantiles).
        weights: ``bma`` only: the mixture weights (normalised) instead of BIC weights.
        band: ``"model"``, the models' own predictive; ``"calibrated"`` or
            ``"refitted"``: every component's standard deviation times the factor that
            scored best on forecasts of the data's own end (:func:`band_scale`; with
            ``"refitted"`` each forecast there comes from hyperparameters refitted on the
            points before it); ``"shrunk"``: ``refitted``'s factor to the power
            :data:`prolas.limits.BAND_SHRINK_POWER` (its square root: the check's factor
            is a noisy estimate, benchmarks/results/band_factor/). The mean does not
            change, the band and the density do.
        draws: ``horizon-mix`` only: 0, pseudo-BMA weights; B > 0, pseudo-BMA+ with B
            Bayesian-bootstrap draws over the check's origins (:func:`origin_weights`);
            None, :data:`HORIZON_MIX_DRAWS`.
        band_score: ``horizon-mix`` with the ``refitted`` or ``shrunk`` band only: the score its
            factor minimises, ``"log"`` (the log density) or ``"interval"`` (the
            interval score of the ``level`` band; :func:`horizon_band_scale`).

    Returns:
        a :class:`Forecast` in y's original units.

    Raises:
        ForecastError: neither or both of ``horizon`` and ``x_new``; a bad horizon,
            level, method or weights; no successful fit; no dataset given and the
            models carry none (or different ones).
    """
    dataset = _conditioning_data(fit_or_fits, dataset)
    if method not in FORECAST_METHODS:
        raise ForecastError(f"unknown forecast method {method!r}; choose from {FORECAST_METHODS}")
    if not 0.0 < float(level) < 1.0:
        raise ForecastError(f"level must be between 0 and 1, got {level}")
    if (horizon is None) == (x_new is None):
        raise ForecastError("give exactly one of horizon (future steps) and x_new (inputs)")
    if horizon is not None:
        x, x_display = future_x(dataset, horizon)
    else:
        x = np.asarray(x_new, dtype=np.float64).reshape(-1)
        if x.size == 0 or not np.all(np.isfinite(x)):
            raise ForecastError("x_new must be a non-empty array of finite inputs")
        x_display = decimal_years_to_timestamps(x) if dataset.x_is_date else x
    if method != "bma" and weights is not None:
        raise ForecastError("weights apply to method='bma' only")
    if method != "horizon-mix" and draws:
        raise ForecastError("draws apply to method='horizon-mix' only")
    if draws is None:
        draws = HORIZON_MIX_DRAWS
    if band_score not in BAND_SCORES:
        raise ForecastError(f"unknown band score {band_score!r}; choose from {BAND_SCORES}")
    if band_score != "log" and method != "horizon-mix":
        raise ForecastError("band_score applies to method='horizon-mix' only")
    fits, w = _as_fits(fit_or_fits, weights)
    check = None
    pairs = None  # horizon-mix: its refitted check, reused by the refitted band
    if method == "best":
        fits, w = [max(fits, key=lambda f: f.bic)], np.ones(1)
    elif method == "rolling":
        pick, check = rolling_pick(fits, dataset)
        fits, w = [pick], np.ones(1)
    elif method == "rolling-mix":
        w, check = rolling_weights(fits, dataset)
    elif method == "horizon-mix":
        w, check, pairs = horizon_weights(fits, dataset, _steps(dataset, x), draws=draws)
    elif w is None:
        w = bic_weights([f.bic for f in fits])
    means, sds = _components(fits, dataset, x)
    scale = 1.0
    if band not in FORECAST_BANDS:
        raise ForecastError(f"unknown band {band!r}; choose from {FORECAST_BANDS}")
    refit = band in ("refitted", "shrunk")
    if refit and pairs is not None:  # horizon-mix: cross-fitted on its check
        scale, _ = horizon_band_scale(
            pairs, [f.bic for f in fits], draws, score=band_score, level=level
        )
    elif band != "model":
        scale, _ = band_scale(fits, dataset, w, _steps(dataset, x), refit=refit)
    if band == "shrunk":
        scale = scale**BAND_SHRINK_POWER
    sds = scale * sds
    mean = (w[:, None] * means).sum(0)
    tail = 0.5 * (1.0 - float(level))
    lower = mixture_quantiles(tail, means, sds, w)
    upper = mixture_quantiles(1.0 - tail, means, sds, w)
    to_y = dataset.unstandardise
    return Forecast(
        x=x,
        x_display=x_display,
        mean=to_y(mean),
        lower=to_y(lower),
        upper=to_y(upper),
        level=float(level),
        method=method,
        models=tuple(f.expression for f in fits),
        weights=tuple(float(v) for v in w),
        component_means=to_y(means),
        component_sds=sds * dataset.y_std,
        check=check,
        band_scale=float(scale),
    )


def _steps(dataset: Dataset, x: np.ndarray) -> int:
    """Steps of the data's spacing from its last input to the furthest of ``x`` (≥ 1)."""
    steps = math.ceil((float(np.max(x)) - float(dataset.x[-1])) / dataset.spacing - 1e-9)
    return max(1, steps)


# --- the top models of a search --------------------------------------------------------


def polynomial_trend(expression: Expression | str) -> bool:
    """Whether a canonical term of the expression holds two or more ``LIN`` factors: a
    mean (``LIN*LIN``) or a seasonal amplitude (``LIN*LIN*PER``) growing as a square or
    a higher power of x, which a forecast extrapolates without bound
    (``--forecast-trend``).

    >>> polynomial_trend("LIN*LIN + PER"), polynomial_trend("LIN*PER + LIN*SE")
    (True, False)
    """
    expr = parse(expression) if isinstance(expression, str) else expression
    return any(list(term).count("LIN") >= 2 for term in expr.terms)


def top_fits(
    result: SearchResult,
    dataset: Dataset,
    config: SearchConfig,
    k: int = 5,
    *,
    best: FitResult | None = None,
    trend: str = DEFAULT_FORECAST_TREND,
) -> list[FitResult]:
    """The ``k`` highest-BIC distinct successful models of a search, fitted on ``dataset``.

    With ``trend="linear"`` (the default) a model with a polynomial trend
    (:func:`polynomial_trend`) is passed over, unless the search has no other successful
    model: 18 months ahead, a quadratic trend fitted to a few years of monthly data was
    most of the forecasts' error on the M3 tuning half (benchmarks/results/trend_guard/).
    ``trend="any"`` ranks every model.

    A search keeps each evaluation's FitResult (fitted on the points it searched).
    When it searched a subsample (:func:`prolas.search.config.search_data`), each model is
    refitted on all of ``dataset`` with :func:`prolas.pipeline.refit`, as the best
    model is, so all weights compare fits on the same data; ``best`` (the pipeline's
    already refitted best model) is reused. An evaluation without a FitResult is
    fitted as :func:`prolas.pipeline.best_fit` does. Refits that fail are dropped.
    Returned in order of BIC on the searched points, each carrying ``dataset``
    (:attr:`FitResult.dataset`).
    """
    from prolas.search.config import search_data

    if trend not in FORECAST_TRENDS:
        raise ForecastError(f"trend must be one of {', '.join(FORECAST_TRENDS)}, got {trend!r}")
    searched = search_data(dataset, config)
    ranked = sorted((e for e in result.history if e.ok), key=lambda e: (-e.bic, e.index or 0))
    if trend == "linear":
        linear = [e for e in ranked if not polynomial_trend(e.expression)]
        ranked = linear or ranked
    out: list[FitResult] = []
    seen: set[str] = set()
    for e in ranked:
        if len(out) >= k:
            break
        if e.expression in seen:
            continue
        seen.add(e.expression)
        if best is not None and best.expression == e.expression and best.n == dataset.n:
            fit = _on_all_points(best.expression, best, dataset, dataset, config)
        else:
            fit = e.fit if isinstance(e.fit, FitResult) and e.fit.ok else None
            fit = _on_all_points(e.expression, fit, searched, dataset, config)
        if fit.ok:
            out.append(fit)
    return out


def season_period(dataset: Dataset, season_length: int | None = None) -> float:
    """The period, in x's units, at which the fixed forecast kernel's ``PER`` factor is
    held (:attr:`prolas.gp.FitConfig.season`); 0 when it is fitted.

    ``season_length`` ``m ≥ 2`` (``--season-length``): ``m`` steps of the data, ``m Δ``
    with Δ the median spacing, or for dates ``k`` months apart ``m k / 12`` years exactly
    (months differ in length, so their median spacing in decimal years is not a twelfth).
    ``None``: from the calendar, one year when x came from dates whose step is a whole
    fraction of a year in months (monthly, quarterly, ...:
    :func:`prolas.calendar_steps.calendar_step`; x is then in decimal years, so 1.0),
    else 0. ``0`` or ``1``: 0 (no season).

    >>> season_period(Dataset.from_arrays(np.arange(48) / 12, np.arange(48.0)), 12)
    1.0
    """
    if season_length is not None and season_length < 2:
        return 0.0
    months = 0
    if dataset.x_is_date:
        from prolas.calendar_steps import calendar_step

        step = calendar_step(dataset.x_dates)
        months = _months(step) if step is not None else 0
    if season_length is not None:
        if months:
            return float(season_length) * months / 12.0
        return float(season_length) * float(dataset.spacing)
    return 1.0 if 0 < months < 12 and 12 % months == 0 else 0.0


def _months(step) -> int:
    """The number of months of a month-based calendar step, else 0."""
    if isinstance(step, pd.offsets.MonthBegin | pd.offsets.MonthEnd):
        return int(step.n)
    if isinstance(step, pd.DateOffset) and set(step.kwds) == {"months"}:
        return int(step.kwds["months"])
    return 0


def fixed_fit(
    result: SearchResult, dataset: Dataset, config: SearchConfig, season: float = 0.0
) -> FitResult:
    """The fixed forecast kernel fitted on ``dataset`` at the search's fit seed:
    :func:`fixed_fits`' first fit. :data:`prolas.limits.FIXED_FORECAST_KERNEL` with its
    period fitted, or, with a ``season``, :data:`prolas.limits.FIXED_SEASONAL_KERNEL` with
    its period held there.

    Without a ``season``: the search's own fit when it evaluated the expression (its
    highest-likelihood successful evaluation, e.g. a repair; refitted on all of
    ``dataset`` when the search ran on a subsample, as :func:`top_fits` refits), else a
    cold :func:`prolas.gp.fit_gp` with the search's fit settings (``config.fit_config``:
    fit seed, restarts, lengthscale floor). With a ``season`` (x's units,
    :func:`season_period`) the period is held there, a model the search did not fit: a
    cold fit with those settings. Carries ``dataset``. A failed fit is returned as such
    (``ok`` False, with its reason), never raised.
    """
    from prolas.search.config import search_data

    key = FIXED_FORECAST_KERNEL  # its canonical form (tests/report/test_forecast.py)
    if season > 0:
        return _on_all_points(FIXED_SEASONAL_KERNEL, None, dataset, dataset, config, season)
    evaluated = [
        e.fit
        for e in result.history
        if e.ok and e.expression == key and isinstance(e.fit, FitResult) and e.fit.ok
    ]
    fit = max(evaluated, key=lambda f: f.log_likelihood) if evaluated else None
    return _on_all_points(key, fit, search_data(dataset, config), dataset, config)


def fixed_fits(
    result: SearchResult, dataset: Dataset, config: SearchConfig, season: float = 0.0
) -> list[FitResult]:
    """The fixed kernel's fits that ``--forecast-from fixed`` (and ``auto`` on a short
    series) mixes with equal weights: at the search's fit seed s (:func:`fixed_fit`) and
    cold on all of ``dataset`` at s + d for the other offsets d of
    :data:`prolas.limits.FIXED_FORECAST_SEED_OFFSETS`, with the search's other fit
    settings; with a positive ``season`` (:func:`season_period`) the kernel is
    :data:`prolas.limits.FIXED_SEASONAL_KERNEL` with its period held there.
    One per offset, in that order, failed fits included (``ok`` False, with their
    reasons).
    """
    kernel = FIXED_SEASONAL_KERNEL if season > 0 else FIXED_FORECAST_KERNEL
    fits = [fixed_fit(result, dataset, config, season)]
    for offset in FIXED_FORECAST_SEED_OFFSETS[1:]:
        other = config.replace(seed=config.seed + offset)  # the fit seed (fit_config)
        fits.append(_on_all_points(kernel, None, dataset, dataset, other, season))
    return fits


def _on_all_points(
    expression: str,
    fit: FitResult | None,
    searched: Dataset,
    dataset: Dataset,
    config: SearchConfig,
    season: float = 0.0,
) -> FitResult:
    """A search's model of ``expression`` ready to forecast ``dataset``: ``fit`` (its
    FitResult on the ``searched`` points, or None: fitted cold with ``config.fit_config``,
    its periods held at ``season`` when positive) refitted on all of ``dataset`` when the
    search saw a subsample (:func:`prolas.pipeline.refit`), its unseen transitions held
    (a fit from an older journal may predate the rule), carrying ``dataset``; a failed
    fit as it is."""
    from prolas.gp import fit_gp, hold_unseen_transitions
    from prolas.pipeline import refit

    if fit is None:
        fit_config = config.fit_config
        if season > 0:
            fit_config = replace(fit_config, season=float(season))
        fit = fit_gp(expression, searched, fit_config)
    if searched is not dataset and fit.ok:
        fit = refit(fit, dataset, config)
    if not fit.ok:
        return fit
    fit = hold_unseen_transitions(fit, dataset)
    return fit if fit.dataset is dataset else replace(fit, dataset=dataset)


# --- rolling origin --------------------------------------------------------------------


def rolling_origins(n: int, fraction: float = 0.1, n_origins: int = 5) -> np.ndarray:
    """The check's origins among ``n`` points: ``n_origins`` evenly spaced indices
    ``o ≥ n - ceil(fraction n)``, rounded, distinct, increasing.

    Raises:
        ForecastError: ``fraction`` outside (0, 1), ``n_origins < 1``, or fewer than 2
            points before the first origin.
    """
    if not 0.0 < fraction < 1.0:
        raise ForecastError(f"fraction must be between 0 and 1, got {fraction}")
    if n_origins < 1:
        raise ForecastError(f"n_origins must be at least 1, got {n_origins}")
    first = n - math.ceil(fraction * n)
    if first < 2:
        raise ForecastError(f"{n} points leave no prefix to condition on (fraction {fraction})")
    return np.unique(np.linspace(first, n - 1, n_origins).round().astype(int))


def origin_split(
    dataset: Dataset, origin: int, stop: int
) -> tuple[Dataset, np.ndarray, np.ndarray]:
    """``(prefix, x, y)`` at one origin: the points before it to condition on (keeping the
    full data's standardisation, for which the hyperparameters were fitted) and the
    inputs and standardised outputs ``[origin, stop)`` to predict."""
    o = int(origin)
    prefix = dataset.take(np.arange(o), f"{dataset.name}[:{o}]")
    return prefix, dataset.x[o:stop], dataset.standardise(dataset.y[o:stop])


def rolling_origin_check(
    fits: Sequence[FitResult],
    dataset: Dataset,
    *,
    fraction: float = 0.1,
    n_origins: int = 5,
    horizon: int | None = None,
    weights: Sequence[float] | None = None,
) -> pd.DataFrame:
    """Score models by forecasting the end of their own training data.

    Origins are ``n_origins`` evenly spaced point indices o in the last ``fraction``
    of the data (``o ≥ n - ceil(fraction n)``). At each origin every model, with its
    hyperparameters fixed (no refit), is conditioned on the points before it,
    ``x[:o]``, and predicts the next ``horizon`` points (all the rest by default),
    ``x[o:o+horizon]``; the posterior keeps the full data's standardisation, since
    the hyperparameters were fitted for it. Over all (origin, point) pairs, in y's
    original units:

        RMSE = (mean (y - m)²)^½,   MLPD = mean log p(y | x[:o]) with noise.

    A last row ``bma`` scores the mixture of all the models (BIC weights, or
    ``weights``) the same way, when there is more than one model. Cost: one
    conditioning (a Cholesky of at most n points) per origin and model.

    Returns:
        a DataFrame with one row per model: ``model`` (expression, or ``bma``),
        ``bic``, ``weight``, ``rmse``, ``mlpd``, ``n_predictions``, ``n_origins``.
    """
    fits, w = _as_fits(fits, weights)
    if w is None:
        w = bic_weights([f.bic for f in fits])
    if horizon is not None:
        horizon = _check_horizon(horizon)
    n = dataset.n
    origins = rolling_origins(n, fraction, n_origins)
    err, lpd = [], []  # per origin: (K, points) residuals and log densities
    mix_err, mix_lpd = [], []
    for o in origins:
        stop = n if horizon is None else min(n, o + horizon)
        prefix, x, y = origin_split(dataset, o, stop)
        means, sds = _components(fits, prefix, x)
        err.append(y[None, :] - means)
        lpd.append(_log_normal(y, means, sds))
        mix_err.append(y - (w[:, None] * means).sum(0))
        mix_lpd.append(_mixture_log_density(y, means, sds, w))
    err_all, lpd_all = np.concatenate(err, axis=1), np.concatenate(lpd, axis=1)
    log_std = math.log(dataset.y_std)  # densities of standardised y -> original units
    rows = [
        {
            "model": f.expression,
            "bic": f.bic,
            "weight": float(wi),
            "rmse": float(np.sqrt(np.mean(err_all[i] ** 2))) * dataset.y_std,
            "mlpd": float(np.mean(lpd_all[i])) - log_std,
        }
        for i, (f, wi) in enumerate(zip(fits, w))
    ]
    if len(fits) > 1:
        rows.append(
            {
                "model": "bma",
                "bic": math.nan,
                "weight": 1.0,
                "rmse": float(np.sqrt(np.mean(np.concatenate(mix_err) ** 2))) * dataset.y_std,
                "mlpd": float(np.mean(np.concatenate(mix_lpd))) - log_std,
            }
        )
    frame = pd.DataFrame(rows)
    frame["n_predictions"] = err_all.shape[1]
    frame["n_origins"] = origins.size
    return frame


#: The range of :func:`band_scale`'s factor: a band may be narrowed to half its width or
#: widened to four times.
BAND_SCALE_BOUNDS = (0.5, 4.0)
#: :func:`band_scale` leaves the band alone with fewer (origin, point) pairs than this.
BAND_SCALE_MIN_POINTS = 10


@dataclass(frozen=True, eq=False)
class HorizonCheck:
    """The (origin, point) pairs of a check at the forecast's own lead times.

    Attributes:
        y: the standardised observations predicted, shape ``(P,)``.
        means, sds: each model's predictive mean and sd (with noise) of them, standardised,
            shape ``(K, P)``.
        origin: which origin (0, 1, ...) each pair was forecast from, shape ``(P,)``.
        n_origins: how many origins the pairs come from.
        refit: whether each model was refitted on each origin's prefix.
    """

    y: np.ndarray
    means: np.ndarray
    sds: np.ndarray
    origin: np.ndarray
    n_origins: int
    refit: bool

    @property
    def n_pairs(self) -> int:
        return int(self.y.size)


def horizon_check(
    fits: Sequence[FitResult],
    dataset: Dataset,
    horizon: int,
    *,
    n_origins: int = 5,
    refit: bool = False,
) -> HorizonCheck | None:
    """Forecasts of the data's own end at the forecast's lead times.

    With ``H_c = min(horizon, n // 3)``, the origins are ``n_origins`` evenly spaced
    indices in ``[n - 2 H_c, n - H_c]`` (at least ``n // 3`` and 2 points before each);
    from each origin ``o`` every model (hyperparameters fixed at its fit on all the data,
    or with ``refit`` refitted on ``x[:o]`` first, :func:`_refit`) is conditioned on
    ``x[:o]`` and predicts the next ``H_c`` points (:func:`origin_split`). Cost: one
    conditioning per origin and model, plus a warm one-restart refit each with ``refit``.

    Returns:
        the pairs, or None when the data leave no origin (``H_c < 1``).
    """
    fits, _ = _as_fits(fits, None)
    n = dataset.n
    h = min(int(horizon), n // 3)
    first = max(n - 2 * h, n // 3, 2)
    if h < 1 or first > n - h:
        return None
    origins = np.unique(np.linspace(first, n - h, n_origins).round().astype(int))
    ys, means, sds, which = [], [], [], []
    for r, o in enumerate(origins):
        prefix, x, y = origin_split(dataset, o, min(n, o + h))
        m, sd = _components([_refit(f, prefix) for f in fits] if refit else fits, prefix, x)
        ys.append(y)
        means.append(m)
        sds.append(sd)
        which.append(np.full(y.size, r))
    return HorizonCheck(
        y=np.concatenate(ys),
        means=np.concatenate(means, axis=1),
        sds=np.concatenate(sds, axis=1),
        origin=np.concatenate(which),
        n_origins=int(origins.size),
        refit=refit,
    )


def _scale_on(
    check: HorizonCheck | None, w: np.ndarray, bounds: tuple[float, float]
) -> tuple[float, int]:
    """:func:`band_scale`'s factor on a check's pairs for the mixture weights ``w``,
    ``(K,)`` or one column per pair ``(K, P)``."""
    if check is None:
        return 1.0, 0
    if check.n_pairs < BAND_SCALE_MIN_POINTS:
        return 1.0, check.n_pairs
    grid = np.exp(np.linspace(math.log(bounds[0]), math.log(bounds[1]), 97))
    scores = np.array(
        [_mixture_log_density(check.y, check.means, g * check.sds, w).sum() for g in grid]
    )
    if not np.isfinite(scores).any():
        return 1.0, check.n_pairs
    best = int(np.nanargmax(np.where(np.isfinite(scores), scores, -np.inf)))
    return float(grid[best]), check.n_pairs


def band_scale(
    fits: Sequence[FitResult],
    dataset: Dataset,
    weights: Sequence[float],
    horizon: int,
    *,
    n_origins: int = 5,
    bounds: tuple[float, float] = BAND_SCALE_BOUNDS,
    refit: bool = False,
) -> tuple[float, int]:
    """The factor ``s`` on the components' predictive standard deviations under which
    the mixture best forecast the end of its own training data, ``(s, P)``.

    A GP's band comes from hyperparameters fixed at one optimum of the marginal
    likelihood, which scores how the data are explained, not how the model extrapolates:
    no uncertainty about the hyperparameters or the structure enters it, and a periodic
    model's band stops growing a few steps out. The factor measures how far off that is
    at the forecast's own lead times: on the ``P`` (origin, point) pairs of
    :func:`horizon_check` (``n_origins`` origins, ``H_c = min(horizon, n // 3)`` steps
    from each; the models mixed with ``weights``),

        s = argmax_s  Σ_t log Σ_i w_i N(y_t; m_i(t), s² v_i(t)),

    on a grid of 97 log-spaced values over ``bounds``: the log score is proper, so the
    factor narrows a band that was too wide and widens one too narrow. The check's
    points were fitted too, so ``s`` errs on the narrow side; with ``refit`` each model's
    hyperparameters are refitted on the prefix before it forecasts (a polish from its
    fit on all the data, :func:`prolas.gp.fit_gp` with ``cold=False``; a model whose
    refit fails keeps its fit, as every model does on prefixes longer than
    :data:`prolas.limits.BAND_REFIT_LIMIT` points), so the forecasts at the origins are
    out of sample for the hyperparameters, though not for the choice of the models.

    Returns:
        ``(s, P)``; ``s = 1`` when the data leave fewer than
        :data:`BAND_SCALE_MIN_POINTS` pairs.
    """
    fits, _ = _as_fits(fits, None)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.size != len(fits):
        raise ForecastError(f"{w.size} weights for {len(fits)} models")
    return _scale_on(
        horizon_check(fits, dataset, horizon, n_origins=n_origins, refit=refit), w, bounds
    )


def _pseudo_bma(total: np.ndarray, bics: Sequence[float]) -> np.ndarray:
    """``w_i ∝ exp(L_i - max_j L_j)`` from summed log predictive densities ``L`` ``(K,)``;
    a non-finite ``L_i`` gets weight 0, and if none is finite, the BIC weights."""
    if not np.isfinite(total).any():
        return bic_weights(bics)
    total = np.where(np.isfinite(total), total, -np.inf)
    w = np.exp(total - total.max())
    return w / w.sum()


def origin_weights(
    totals: np.ndarray, bics: Sequence[float], draws: int = 0, seed: int = 0
) -> np.ndarray:
    """Mixture weights ``(K,)`` from each model's summed log density per origin,
    ``totals`` ``(K, R)``.

    ``draws = 0``: pseudo-BMA, ``w_i ∝ exp(Σ_r L_ir)``, every pair counted as independent
    evidence. ``draws = B > 0``: pseudo-BMA+ (Yao, Vehtari, Simpson & Gelman 2018, §3.4),
    the Bayesian bootstrap of the origins, the dependent unit (consecutive origins
    forecast the same points): with ``α^b ~ Dirichlet(1, …, 1)`` over the R origins
    (``numpy.random.default_rng(seed)``, so the weights are reproducible),

        w_i = (1/B) Σ_b softmax_i(R Σ_r α^b_r L_ir),

    which leaves part of the weight with a model that wins on some origins and loses on
    others. A model with a non-finite ``L_ir`` gets weight 0; if every model has one,
    the BIC weights.
    """
    totals = np.asarray(totals, dtype=np.float64)
    finite = np.isfinite(totals).all(axis=1)
    if not finite.any():
        return bic_weights(bics)
    if draws <= 0:
        return _pseudo_bma(np.where(finite, totals.sum(axis=1), -np.inf), bics)
    r = totals.shape[1]
    alpha = np.random.default_rng(seed).dirichlet(np.ones(r), size=int(draws))  # (B, R)
    z = r * alpha @ np.where(finite[:, None], totals, 0.0).T  # (B, K)
    z = np.where(finite[None, :], z, -np.inf)
    w = np.exp(z - z.max(axis=1, keepdims=True))
    return (w / w.sum(axis=1, keepdims=True)).mean(axis=0)


def _origin_totals(check: HorizonCheck) -> np.ndarray:
    """Each model's summed log predictive density per origin, ``(K, R)``."""
    lpd = _log_normal(check.y, check.means, check.sds)  # (K, P)
    return np.stack([lpd[:, check.origin == r].sum(axis=1) for r in range(check.n_origins)], axis=1)


def held_out_weights(check: HorizonCheck, bics: Sequence[float], draws: int = 0) -> np.ndarray:
    """Per pair, the :func:`horizon_weights` of the other origins' pairs, ``(K, P)``.

    Column t holds ``w^(−r)``, the weights (:func:`origin_weights` with ``draws``) from
    every origin but the origin r of pair t, so that a band factor chosen on these
    columns (:func:`horizon_band_scale`) scores mixtures on forecasts that did not choose
    their weights. With one origin there is nothing to hold out: every column is the
    weights of all pairs.
    """
    totals = _origin_totals(check)
    out = np.empty((totals.shape[0], check.n_pairs))
    for r in range(check.n_origins):
        rest = np.arange(check.n_origins) != r if check.n_origins > 1 else slice(None)
        out[:, check.origin == r] = origin_weights(totals[:, rest], bics, draws)[:, None]
    return out


#: Bayesian-bootstrap draws of ``horizon-mix``'s pseudo-BMA+ weights by default (the
#: candidate the M3 tuning half favoured: ``benchmarks/results/forecast_horizon_check/``).
HORIZON_MIX_DRAWS = 1000

#: Scores a ``horizon-mix`` band factor can be chosen by (:func:`horizon_band_scale`).
BAND_SCORES = ("log", "interval")


def horizon_band_scale(
    check: HorizonCheck,
    bics: Sequence[float],
    draws: int = 0,
    bounds: tuple[float, float] = BAND_SCALE_BOUNDS,
    *,
    score: str = "log",
    level: float = 0.95,
) -> tuple[float, int]:
    """The band factor of a ``horizon-mix`` forecast, cross-fitted over the origins.

    :func:`band_scale`'s criterion on the pairs of ``check``, but the pairs of origin r
    are scored by the mixture weighted from the other origins only
    (:func:`held_out_weights` with ``draws``):

        s = argmax_s  Σ_r Σ_{t ∈ r} log Σ_i w^(−r)_i N(y_t; m_i(t), s² v_i(t)).

    Scoring the pairs with the weights they chose would make the mixture look better
    there than it forecasts anywhere else and narrow the band
    (``benchmarks/results/forecast_horizon_check/``, stage 1).

    ``score="interval"`` chooses ``s`` for the band's ends instead: the grid value of
    least mean interval score (Gneiting & Raftery 2007, ``α = 1 - level``) of the
    held-out mixtures' central ``level`` intervals,

        IS_α(l, u; y) = (u - l) + (2/α)(l - y)·1{y < l} + (2/α)(y - u)·1{y > u},

    a proper score for the interval, least for the one that holds ``level`` of the
    points; the log density is about the whole predictive and can leave the ends short
    where the errors have heavier tails than the models' Gaussians.

    Returns:
        ``(s, P)`` as :func:`band_scale`.
    """
    if score not in BAND_SCORES:
        raise ForecastError(f"unknown band score {score!r}; choose from {BAND_SCORES}")
    w = held_out_weights(check, bics, draws)
    if score == "log":
        return _scale_on(check, w, bounds)
    return _interval_scale_on(check, w, bounds, level)


def _interval_score(y: np.ndarray, lower: np.ndarray, upper: np.ndarray, alpha: float) -> float:
    """Mean interval score ``IS_α`` (:func:`horizon_band_scale`); the same score as
    :func:`prolas.report.scoring.interval_score`, which imports this module."""
    below = (2.0 / alpha) * (lower - y) * (y < lower)
    above = (2.0 / alpha) * (y - upper) * (y > upper)
    return float(np.mean((upper - lower) + below + above))


def _interval_scale_on(
    check: HorizonCheck, w: np.ndarray, bounds: tuple[float, float], level: float
) -> tuple[float, int]:
    """The grid factor of least mean interval score on ``check``'s pairs (weights
    ``w`` ``(K, P)``); 1 with fewer than :data:`BAND_SCALE_MIN_POINTS` pairs."""
    if check.n_pairs < BAND_SCALE_MIN_POINTS:
        return 1.0, check.n_pairs
    alpha = 1.0 - float(level)
    grid = np.exp(np.linspace(math.log(bounds[0]), math.log(bounds[1]), 97))
    scores = np.array(
        [
            _interval_score(
                check.y,
                mixture_quantiles(alpha / 2, check.means, g * check.sds, w),
                mixture_quantiles(1 - alpha / 2, check.means, g * check.sds, w),
                alpha,
            )
            for g in grid
        ]
    )
    if not np.isfinite(scores).any():
        return 1.0, check.n_pairs
    best = int(np.nanargmin(np.where(np.isfinite(scores), scores, np.inf)))
    return float(grid[best]), check.n_pairs


def horizon_weights(
    fits: Sequence[FitResult],
    dataset: Dataset,
    horizon: int,
    *,
    n_origins: int = 5,
    draws: int = 0,
) -> tuple[np.ndarray, pd.DataFrame | None, HorizonCheck | None]:
    """Mixture weights from forecasts at the forecast's own lead times, out of sample for
    the hyperparameters.

    On the pairs of :func:`horizon_check` with ``refit=True`` (each model refitted on
    each origin's prefix, forecasting ``H_c = min(horizon, n // 3)`` steps), model i's
    summed log predictive density ``L_i = Σ_t log p(y_t | y_<o, M_i)`` gives

        w_i = exp(L_i - max_j L_j) / Σ_k exp(L_k - max_j L_j),

    pseudo-BMA (Yao et al. 2018) as :func:`rolling_weights`, but on forecasts as far
    ahead as the forecast (up to a third of the data) from hyperparameters that did not
    see the points scored; with ``draws > 0``, pseudo-BMA+ over the origins
    (:func:`origin_weights`). A model whose extrapolation fails a few steps out (a
    polynomial trend, a sharpened periodic shape) loses its weight here even when it fit
    the data's end well. With fewer than :data:`BAND_SCALE_MIN_POINTS` pairs the weights
    are :func:`rolling_weights`'s. Non-finite scores get weight 0; if none is finite, the
    BIC weights.

    Returns:
        ``(w, table, check)``: the weights ``(K,)`` in the order of the successful
        ``fits``; the table (``model``, ``bic``, ``bic_weight``, ``rmse`` and ``mlpd`` of
        the check in y's units, ``n_predictions``, ``n_origins``, ``horizon_weight``;
        None for one model); the check's pairs (None for one model or a fallback), for
        :func:`band_scale` to reuse.
    """
    fits, _ = _as_fits(fits, None)
    if len(fits) == 1:
        return np.ones(1), None, None
    check = horizon_check(fits, dataset, horizon, n_origins=n_origins, refit=True)
    if check is None or check.n_pairs < BAND_SCALE_MIN_POINTS:
        w, table = rolling_weights(fits, dataset)
        return w, table, None
    lpd = _log_normal(check.y, check.means, check.sds)  # (K, P)
    w = origin_weights(_origin_totals(check), [f.bic for f in fits], draws)
    err = check.y[None, :] - check.means
    table = pd.DataFrame(
        {
            "model": [f.expression for f in fits],
            "bic": [f.bic for f in fits],
            "bic_weight": bic_weights([f.bic for f in fits]),
            "rmse": np.sqrt(np.mean(err**2, axis=1)) * dataset.y_std,
            "mlpd": lpd.mean(axis=1) - math.log(dataset.y_std),
            "n_predictions": check.n_pairs,
            "n_origins": check.n_origins,
            "horizon_weight": w,
        }
    )
    return w, table, check


def _refit(fit: FitResult, prefix: Dataset) -> FitResult:
    """``fit``'s expression fitted on ``prefix`` from ``fit`` alone; ``fit`` itself if
    that fails, or when ``prefix`` is longer than
    :data:`prolas.limits.BAND_REFIT_LIMIT` (the check's 25 exact refits would cost
    minutes there)."""
    from prolas.gp import FitConfig, fit_gp

    if prefix.n > BAND_REFIT_LIMIT:
        return fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = FitConfig(restarts=1, season=fit.season)  # a held period stays held
        refitted = fit_gp(fit.expression, prefix, config, init=fit, cold=False)
    return refitted if refitted.ok else fit


def rolling_pick(
    fits: Sequence[FitResult], dataset: Dataset, **check_options
) -> tuple[FitResult, pd.DataFrame | None]:
    """The model of lowest rolling-origin RMSE (:func:`rolling_origin_check` with
    ``check_options``; ties go to the higher BIC) and the check's table without its
    mixture row; a single model is its own pick (table None).

    >>> pick, table = rolling_pick(fits, ds)   # doctest: +SKIP
    """
    fits, _ = _as_fits(fits, None)
    if len(fits) == 1:
        return fits[0], None
    table = rolling_origin_check(fits, dataset, **check_options)
    table = table[table["model"] != "bma"].reset_index(drop=True)
    order = sorted(range(len(fits)), key=lambda i: (table["rmse"][i], -fits[i].bic))
    return fits[order[0]], table


def rolling_weights(
    fits: Sequence[FitResult], dataset: Dataset, **check_options
) -> tuple[np.ndarray, pd.DataFrame | None]:
    """Mixture weights from the rolling-origin check's log predictive density.

    With :func:`rolling_origin_check` (``check_options``) scoring model i by its mean
    log predictive density ``mlpd_i`` over the same ``P`` (origin, point) pairs,

        w_i = exp(P mlpd_i - max_j P mlpd_j) / Σ_k exp(P mlpd_k - max_j P mlpd_j),

    i.e. ``exp`` of each model's summed leave-future-out log predictive density
    (pseudo-BMA, Yao et al. 2018); the units of y shift every ``mlpd_i`` alike and
    cancel. A model that predicted the check's points far worse than another gets a
    weight near 0, however high its BIC. A model whose score is not finite gets weight 0
    (if none is finite, the weights are the BIC weights).

    Returns:
        the weights, shape ``(K,)`` in the order of the successful ``fits``, and the
        check's table without its mixture row, with the weights as a column
        ``rolling_weight``; one model gets weight 1 and no table.
    """
    fits, _ = _as_fits(fits, None)
    if len(fits) == 1:
        return np.ones(1), None
    table = rolling_origin_check(fits, dataset, **check_options)
    table = table[table["model"] != "bma"].reset_index(drop=True)
    total = table["mlpd"].to_numpy() * table["n_predictions"].to_numpy()
    w = _pseudo_bma(total, table["bic"].to_numpy())  # a NaN/inf score: weight 0
    table = table.rename(columns={"weight": "bic_weight"})  # beside the weights used
    table["rolling_weight"] = w
    return w, table


# --- the picture -----------------------------------------------------------------------


def forecast_title(fc: Forecast) -> str:
    """The forecast plot's title: the model, or which mixture of how many models."""
    if len(fc.models) == 1 and fc.method in ("bma", "rolling-mix", "horizon-mix"):
        return f"forecast, {len(fc)} steps: {fc.models[0]}"  # a mixture of one model
    if fc.method == "bma" and len(set(fc.models)) == 1:  # one kernel's fits (the fixed kernel)
        equally = " equally" if len(set(fc.weights)) == 1 else ""
        return f"forecast, {len(fc)} steps: {fc.models[0]}, {len(fc.models)} fits mixed{equally}"
    how = {
        "best": fc.models[0],
        "rolling": f"{fc.models[0]} (rolling-origin pick)",
        "bma": f"BIC-weighted mixture of {len(fc.models)} models",
        "rolling-mix": f"mixture of {len(fc.models)} models weighted by their forecasts "
        "of the data's end",
        "horizon-mix": f"mixture of {len(fc.models)} models weighted by their refitted "
        "forecasts at its lead times",
    }[fc.method]
    return f"forecast, {len(fc)} steps: {how}"


def forecast_figure(fc: Forecast, dataset: Dataset, fit: FitResult | None = None, *, ax=None):
    """Data, forecast mean, shaded band and a vertical line at the end of the data, on
    ``ax`` or on a new figure (returned); a date axis when x came from dates. With ``fit``
    (the model forecasting), its change-points and change-windows are marked
    (:func:`prolas.report.plots.mark_changes`; numeric x axes only)."""
    from prolas.report.figure import own_axes

    data_x = dataset.x_dates if fc.is_dates else dataset.x
    fig, ax, made = own_axes(ax, (9, 4.5))
    ax.plot(data_x, dataset.y, "k.-", ms=3, lw=0.5, label="data")
    ax.fill_between(
        fc.x_display,
        fc.lower,
        fc.upper,
        color="C0",
        alpha=0.25,
        label=f"{100 * fc.level:g}% predictive band",
    )
    ax.plot(fc.x_display, fc.mean, color="C0", lw=1.5, marker=".", ms=3, label="forecast mean")
    ax.axvline(data_x[-1], color="0.5", ls="--", lw=0.8, label="end of data")
    if fit is not None and not fc.is_dates:
        mark_changes(ax, fit, dataset)
    if fc.is_dates and made:
        fig.autofmt_xdate()
    ax.set_xlabel(dataset.x_column)
    ax.set_ylabel(dataset.y_column)
    ax.set_title(forecast_title(fc), fontsize=10)
    ax.legend(loc="best", fontsize=8, frameon=False)
    if made:
        fig.tight_layout()
    return fig


def plot_forecast(
    path: str | Path, fc: Forecast, dataset: Dataset, fit: FitResult | None = None
) -> Path:
    """forecast.png: :func:`forecast_figure` saved as a PNG file."""
    path = Path(path)
    forecast_figure(fc, dataset, fit).savefig(path, dpi=DPI)
    return path
