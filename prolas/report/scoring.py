"""Forecast scores: point accuracy, interval quality and the CRPS, comparable across methods.

For test observations ``y_t`` (t = 1..h), point forecasts ``f_t``, the central 95 %
predictive interval ``[l_t, u_t]`` and predictive quantiles ``q_{t,k}`` at the levels
:data:`QUANTILE_LEVELS`, with the training part ``z_1..z_n`` and a seasonal period m:

* ``RMSE = (mean_t (y_t - f_t)²)^½`` in y's units (:func:`rmse`);
* ``sMAPE = mean_t 200 |y_t - f_t| / (|y_t| + |f_t|)`` in percent, a term with
  ``y_t = f_t = 0`` counting 0 (:func:`smape`);
* the **scale** ``s = mean_{t > m} |z_t - z_{t-m}|``, the in-sample mean absolute error
  of the seasonal naive forecast (:func:`seasonal_naive_scale`; m = 1 is the naive
  forecast), and ``MASE = mean_t |y_t - f_t| / s`` (Hyndman & Koehler 2006; :func:`mase`);
* **coverage**: the share of test points with ``l_t <= y_t <= u_t`` (:func:`coverage`);
* the **interval score** at ``α = 0.05`` (Gneiting & Raftery 2007, eq. 43),
  ``IS_t = (u_t - l_t) + (2/α)(l_t - y_t) 1[y_t < l_t] + (2/α)(y_t - u_t) 1[y_t > u_t]``,
  averaged over t (:func:`interval_score`) and reported divided by s, like MASE;
* the **CRPS** ``∫ (F_t(v) - 1[v >= y_t])² dv``, averaged over t and reported divided by
  s. Every method's CRPS is computed the same way, from its quantiles
  (:func:`crps_quantiles`): with ``ρ_τ(u) = u (τ - 1[u < 0])`` the pinball loss,
  ``CRPS = 2 ∫_0^1 ρ_τ(y - F⁻¹(τ)) dτ`` (Laio & Tamea 2007), and the midpoint rule on K
  equal bins, ``CRPS ≈ (2/K) Σ_k ρ_{τ_k}(y - q_k)`` with ``τ_k = (k - ½)/K``. With
  K = 100 it is within 0.1 % of the closed form for a Gaussian (measured for
  ``|y - μ| <= 10σ``; ``tests/report/test_scoring.py``). The closed forms are here as
  references: :func:`crps_gaussian` and, for a mixture of Gaussians such as prolas's
  ``rolling-mix`` forecast, :func:`crps_gaussian_mixture` (Grimit et al. 2006).

Peers that give intervals at requested levels supply the quantiles as the ends of the
central intervals at levels ``1 - 2τ`` (:data:`INTERVAL_LEVELS`); prolas's come from its
predictive mixture (:func:`forecast_predictive`). Quantiles are sorted per point before
use (a simulated predictive can give crossing quantiles).

>>> import numpy as np
>>> round(float(crps_gaussian(np.array([0.0]), 0.0, 1.0)[0]), 4)
0.2337
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from prolas.errors import ProlasError
from prolas.report.forecast import Forecast, mixture_quantiles

__all__ = [
    "ALPHA",
    "INTERVAL_LEVELS",
    "QUANTILE_LEVELS",
    "SCORE_COLUMNS",
    "Predictive",
    "ScoringError",
    "coverage",
    "crps_gaussian",
    "crps_gaussian_mixture",
    "crps_quantiles",
    "forecast_predictive",
    "interval_score",
    "mase",
    "rmse",
    "score_forecast",
    "seasonal_naive_scale",
    "smape",
]

#: Miscoverage of the scored interval: the central 95 % interval.
ALPHA = 0.05

#: The CRPS's quantile levels: midpoints of 100 equal bins, 0.005, 0.015, ..., 0.995.
QUANTILE_LEVELS = (np.arange(100) + 0.5) / 100

#: Central-interval levels in percent whose ends are :data:`QUANTILE_LEVELS`
#: (1, 3, ..., 99: the interval at level L has ends at τ = (1 ∓ L/100) / 2).
INTERVAL_LEVELS = tuple(range(1, 100, 2))

#: The columns :func:`score_forecast` returns, in order.
SCORE_COLUMNS = (
    "rmse",
    "smape",
    "mase",
    "coverage",
    "interval_score",
    "interval_score_scaled",
    "crps",
    "crps_scaled",
    "scale",
)


class ScoringError(ProlasError, ValueError):
    """Scores asked of arrays of different lengths, or of non-finite forecasts."""


def _arrays(*values: np.ndarray | Sequence[float]) -> list[np.ndarray]:
    out = [np.asarray(v, dtype=np.float64).reshape(-1) for v in values]
    if len({v.size for v in out}) != 1:
        raise ScoringError(f"scores need arrays of one length, got {[v.size for v in out]}")
    return out


def rmse(y: np.ndarray, f: np.ndarray) -> float:
    """``(mean (y - f)²)^½``."""
    y, f = _arrays(y, f)
    return float(np.sqrt(np.mean((y - f) ** 2)))


def smape(y: np.ndarray, f: np.ndarray) -> float:
    """``mean 200 |y - f| / (|y| + |f|)`` in percent (a point with y = f = 0 counts 0)."""
    y, f = _arrays(y, f)
    denom = np.abs(y) + np.abs(f)
    terms = np.divide(200.0 * np.abs(y - f), denom, out=np.zeros_like(y), where=denom > 0)
    return float(np.mean(terms))


def seasonal_naive_scale(train: np.ndarray, m: int) -> float:
    """``mean_{t > m} |z_t - z_{t-m}|`` over the training values ``z`` (shape ``(n,)``).

    NaN when the training part has no more than m points or the scale is 0 (a series
    that repeats exactly every m steps): MASE and the scaled scores are then undefined,
    never infinite.
    """
    z = np.asarray(train, dtype=np.float64).reshape(-1)
    if int(m) != m or m < 1:
        raise ScoringError(f"the seasonal period must be a positive integer, got {m}")
    m = int(m)
    if z.size <= m:
        return math.nan
    s = float(np.mean(np.abs(z[m:] - z[:-m])))
    return s if s > 0 else math.nan


def mase(y: np.ndarray, f: np.ndarray, scale: float) -> float:
    """``mean |y - f| / scale`` (:func:`seasonal_naive_scale`)."""
    y, f = _arrays(y, f)
    return float(np.mean(np.abs(y - f)) / scale)


def coverage(y: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    """Share of points with ``lower <= y <= upper``."""
    y, lower, upper = _arrays(y, lower, upper)
    return float(np.mean((y >= lower) & (y <= upper)))


def interval_score(
    y: np.ndarray, lower: np.ndarray, upper: np.ndarray, alpha: float = ALPHA
) -> float:
    """Mean interval score of the central ``1 - alpha`` intervals (module docstring)."""
    y, lower, upper = _arrays(y, lower, upper)
    below = (2.0 / alpha) * (lower - y) * (y < lower)
    above = (2.0 / alpha) * (y - upper) * (y > upper)
    return float(np.mean((upper - lower) + below + above))


def crps_gaussian(y: np.ndarray, mu: np.ndarray | float, sigma: np.ndarray | float) -> np.ndarray:
    """CRPS of ``N(mu, sigma²)`` at each ``y``, closed form (Gneiting et al. 2005):
    ``σ [z (2Φ(z) - 1) + 2φ(z) - 1/√π]`` with ``z = (y - μ)/σ``."""
    y = np.asarray(y, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    z = (y - mu) / sigma
    pdf = np.exp(-0.5 * z**2) / math.sqrt(2 * math.pi)
    return sigma * (z * (2 * ndtr(z) - 1) + 2 * pdf - 1 / math.sqrt(math.pi))


def _a(mu: np.ndarray, var: np.ndarray) -> np.ndarray:
    """``E|X|`` for ``X ~ N(mu, var)``: ``2σ φ(μ/σ) + μ (2Φ(μ/σ) - 1)``."""
    sd = np.sqrt(var)
    z = mu / sd
    return 2 * sd * np.exp(-0.5 * z**2) / math.sqrt(2 * math.pi) + mu * (2 * ndtr(z) - 1)


def crps_gaussian_mixture(
    y: np.ndarray, means: np.ndarray, sds: np.ndarray, weights: Sequence[float]
) -> np.ndarray:
    """CRPS of the mixture ``Σ_i w_i N(m_i, s_i²)`` at each ``y``, closed form.

    ``CRPS = E|X - y| - ½ E|X - X'|`` (X, X' independent draws) gives, with
    ``A(μ, σ²) = E|N(μ, σ²)|`` (Grimit, Gneiting, Berrocal & Johnson 2006),
    ``Σ_i w_i A(y - m_i, s_i²) - ½ Σ_i Σ_j w_i w_j A(m_i - m_j, s_i² + s_j²)``.
    ``means``, ``sds``: ``(K, h)``; ``y``: ``(h,)``.
    """
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    means = np.atleast_2d(np.asarray(means, dtype=np.float64))
    var = np.atleast_2d(np.asarray(sds, dtype=np.float64)) ** 2
    w = np.asarray(weights, dtype=np.float64).reshape(-1, 1)
    first = (w * _a(y[None, :] - means, var)).sum(0)
    pair_mu = means[:, None, :] - means[None, :, :]
    pair_var = var[:, None, :] + var[None, :, :]
    second = (w[:, None] * w[None, :] * _a(pair_mu, pair_var)).sum((0, 1))
    return first - 0.5 * second


def crps_quantiles(
    y: np.ndarray, quantiles: np.ndarray, levels: np.ndarray = QUANTILE_LEVELS
) -> np.ndarray:
    """CRPS at each ``y`` from quantiles ``(h, K)`` at ``levels`` ``(K,)``, the midpoints
    of K equal bins: ``(2/K) Σ_k ρ_{τ_k}(y - q_k)`` (module docstring). Each row of
    quantiles is sorted first."""
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    q = np.sort(np.atleast_2d(np.asarray(quantiles, dtype=np.float64)), axis=1)
    tau = np.asarray(levels, dtype=np.float64).reshape(1, -1)
    if q.shape != (y.size, tau.size):
        raise ScoringError(f"quantiles of shape {q.shape}, expected {(y.size, tau.size)}")
    u = y[:, None] - q
    return 2.0 * np.mean(u * (tau - (u < 0)), axis=1)


@dataclass(frozen=True, eq=False)
class Predictive:
    """A forecast of h test points as the scores need it, in y's units.

    Attributes:
        mean: point forecasts, ``(h,)``.
        lower, upper: the central 95 % interval, ``(h,)`` each.
        quantiles: ``(h, K)`` at :data:`QUANTILE_LEVELS`.
    """

    mean: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    quantiles: np.ndarray

    def __post_init__(self) -> None:
        h = np.asarray(self.mean).size
        shapes = [np.shape(self.lower), np.shape(self.upper)]
        if any(s != (h,) for s in shapes) or np.shape(self.quantiles) != (
            h,
            QUANTILE_LEVELS.size,
        ):
            raise ScoringError(
                f"a predictive of {h} points needs lower/upper of shape ({h},) and "
                f"quantiles of shape ({h}, {QUANTILE_LEVELS.size})"
            )
        for name in ("mean", "lower", "upper", "quantiles"):
            if not np.all(np.isfinite(getattr(self, name))):
                raise ScoringError(f"the forecast's {name} has non-finite values")


def forecast_predictive(fc: Forecast) -> Predictive:
    """A :class:`Forecast` (one Gaussian or a mixture) as a :class:`Predictive`: its mean,
    its band (its ``level`` must be 0.95) and the mixture's quantiles at
    :data:`QUANTILE_LEVELS` (:func:`prolas.report.forecast.mixture_quantiles`)."""
    if not math.isclose(fc.level, 1 - ALPHA):
        raise ScoringError(f"scores use the 95 % band; the forecast's band is {fc.level:.0%}")
    q = np.column_stack(
        [
            mixture_quantiles(float(p), fc.component_means, fc.component_sds, fc.weights)
            for p in QUANTILE_LEVELS
        ]
    )
    return Predictive(np.asarray(fc.mean), np.asarray(fc.lower), np.asarray(fc.upper), q)


def score_forecast(y: np.ndarray, pred: Predictive, scale: float) -> dict[str, float]:
    """Every score of the module docstring for test values ``y`` ``(h,)``.

    ``scale`` is :func:`seasonal_naive_scale` of the training part; the scaled scores
    (``mase``, ``interval_score_scaled``, ``crps_scaled``) are NaN when it is.
    Returns a dict with the keys :data:`SCORE_COLUMNS`.
    """
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if y.size != pred.mean.size:
        raise ScoringError(f"{y.size} test values for a forecast of {pred.mean.size} points")
    if not np.all(np.isfinite(y)):
        raise ScoringError("test values must be finite")
    score = interval_score(y, pred.lower, pred.upper)
    crps = float(np.mean(crps_quantiles(y, pred.quantiles)))
    return {
        "rmse": rmse(y, pred.mean),
        "smape": smape(y, pred.mean),
        "mase": mase(y, pred.mean, scale),
        "coverage": coverage(y, pred.lower, pred.upper),
        "interval_score": score,
        "interval_score_scaled": score / scale,
        "crps": crps,
        "crps_scaled": crps / scale,
        "scale": float(scale),
    }
