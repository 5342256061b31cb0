"""Held-out metrics and the predictive in y's original units.

:func:`test_metrics` scores the best model on held-out data in y's original units:

    RMSE = sqrt(mean_i (y_i - m_i)^2),
    MLPD = mean_i log N(y_i | m_i, v_i),

where ``m_i, v_i`` are :func:`prolas.gp.predict`'s mean and variance *including the
noise* (original units). Predictions, metrics and plots are computed for the
standardised y and scaled back (``sd = sqrt(v') * y_std``, never ``v' * y_std**2``), so
data of any representable scale (``1e-300`` to ``1e300``) stays finite;
:func:`predictive_mean_sd` is that scaled-back predictive for the plots.
"""

from __future__ import annotations

import math

import numpy as np

from prolas.data import Dataset
from prolas.gp import FitResult, predict

__all__ = ["predictive_mean_sd", "test_metrics"]


def predictive_mean_sd(
    fit: FitResult, dataset: Dataset, xs: np.ndarray, include_noise: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Predictive mean and standard deviation at ``xs`` (shape ``(m,)`` each) in y's
    original units, the noise included if ``include_noise``.

    :func:`prolas.gp.predict` on the standardised data gives ``(m', v')``; they are
    scaled back as ``mean = y_mean + m' y_std`` and ``sd = sqrt(v') y_std`` (never
    ``v' y_std**2``, which overflows for y near the float limits).
    """
    mean, var = predict(fit, dataset.standardised_view(), xs, include_noise=include_noise)
    return dataset.unstandardise(mean), np.sqrt(var) * dataset.y_std


def test_metrics(fit: FitResult, train: Dataset, test: Dataset) -> dict:
    """RMSE and mean log predictive density of ``fit`` (fitted on ``train``) on ``test``.

    Both in y's original units; the predictive distribution of ``y_i`` is
    ``N(m_i, v_i)`` with ``(m, v) = predict(fit, train, test.x, include_noise=True)``.
    Returns the result.json test block ``{path, n, rmse, mean_log_predictive_density}``.
    """
    mean, var = predict(fit, train.standardised_view(), test.x, include_noise=True)
    # residuals and variances in standardised units; scaled back in logs and once in
    # the RMSE, so y values near the float limits neither overflow nor underflow
    resid = train.standardise(test.y) - mean
    rmse = float(np.sqrt(np.mean(resid**2))) * train.y_std
    var = np.maximum(var, np.finfo(np.float64).tiny)
    lpd = -0.5 * (np.log(2 * np.pi * var) + resid**2 / var) - math.log(train.y_std)
    return {
        "path": test.path,
        "n": test.n,
        "rmse": rmse,
        "mean_log_predictive_density": float(np.mean(lpd)),
    }


# pytest would otherwise collect ``test_metrics`` wherever it is imported into a test module
test_metrics.__test__ = False
