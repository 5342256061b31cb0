"""Prediction with a fitted expression: posterior mean and variance, and the additive
decomposition into its terms.

For the exact fit (``fit.approximation is None``), with ``K = K(X, X) + s_n^2 I`` on the
standardised training targets ``y'`` (``N``) and test inputs ``x*`` (``m``)::

    mean = K(x*, X) K^{-1} y'                   (m,)
    var  = diag K(x*, x*) - diag K(x*, X) K^{-1} K(X, x*)     (m,)

(Rasmussen & Williams eq. 2.25-2.26), then converted back to y's units. A fit made with
the SGPR approximation (:mod:`prolas.gp.scalable`) predicts with that approximation.
Term ``t``'s share uses ``K_t(x*, X)`` in place of ``K(x*, X)`` (Duvenaud et al. 2013);
the term means sum to the full mean.

The data ``X, y`` are the dataset passed, or the one the fit carries
(:attr:`FitResult.dataset`; a search's best and top models carry theirs), so both
``predict(fit, dataset, x)`` and ``predict(fit, x)`` work.
"""

from __future__ import annotations

import numpy as np
import torch

from prolas.data import Dataset
from prolas.errors import ProlasError
from prolas.gp.fit import DTYPE, FitResult, dense_covariance, natural_covar_module
from prolas.gp.scalable import decompose_sgpr, predict_sgpr

__all__ = ["predict", "decompose"]

#: Extra diagonal jitter tried, in order, when a Cholesky fails (bounded retries).
JITTER_SCHEDULE = (0.0, 1e-8, 1e-6, 1e-4)


def _posterior(
    fit: FitResult, dataset: Dataset, x_new: np.ndarray, per_term: bool
) -> list[tuple[np.ndarray, np.ndarray]]:
    module = natural_covar_module(fit)
    x = torch.tensor(dataset.x, dtype=DTYPE).reshape(-1, 1)
    xs = torch.tensor(np.asarray(x_new, dtype=np.float64), dtype=DTYPE).reshape(-1, 1)
    y = torch.tensor(dataset.y_standardised, dtype=DTYPE)
    with torch.no_grad():
        K = dense_covariance(module, x, x) + fit.noise_variance * torch.eye(dataset.n, dtype=DTYPE)
        L = None
        for jitter in JITTER_SCHEDULE:
            L, info = torch.linalg.cholesky_ex(K + jitter * torch.eye(dataset.n, dtype=DTYPE))
            if int(info) == 0:
                break
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L)
        blocks = (
            list(zip(dense_covariance(module, xs, x, True), dense_covariance(module, xs, xs, True)))
            if per_term
            else [(dense_covariance(module, xs, x), dense_covariance(module, xs, xs))]
        )
        out = []
        for Ksx, Kss in blocks:
            mean = (Ksx @ alpha)[:, 0]
            v = torch.cholesky_solve(Ksx.T, L)
            var = torch.diagonal(Kss) - (Ksx * v.T).sum(-1)
            out.append((mean.numpy(), np.clip(var.numpy(), 0.0, None)))
    return out


def _data_and_inputs(
    what: str, fit: FitResult, dataset_or_x: Dataset | np.ndarray, x_new: np.ndarray | None
) -> tuple[Dataset, np.ndarray]:
    """``(dataset, x_new)`` from either call form of ``what`` (predict, decompose):
    ``(fit, dataset, x_new)`` or ``(fit, x_new)`` with the data the fit carries."""
    if isinstance(dataset_or_x, Dataset):
        if x_new is None:
            raise ProlasError(f"give the inputs: {what}(fit, dataset, x_new)")
        return dataset_or_x, x_new
    if x_new is not None:
        raise ProlasError(
            f"{what}(fit, x_new) takes the inputs alone; with a dataset, pass it first: "
            f"{what}(fit, dataset, x_new)"
        )
    if fit.dataset is None:
        raise ProlasError(
            f"the fit of {fit.expression} carries no data; pass the dataset it was fitted "
            f"on: {what}(fit, dataset, x_new)"
        )
    return fit.dataset, dataset_or_x


def predict(
    fit: FitResult,
    dataset_or_x: Dataset | np.ndarray,
    x_new: np.ndarray | None = None,
    include_noise: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and variance at ``x_new`` in y's original units.

    Called as ``predict(fit, dataset, x_new)`` or, with the data the fit carries
    (:attr:`FitResult.dataset`), ``predict(fit, x_new)``. Returns
    ``(mean (m,), variance (m,))``; the variance is of the latent function, plus the
    noise variance if ``include_noise``. A fit made with an approximation
    (``fit.approximation``, e.g. SGPR on a long series) predicts with that approximation.

    Raises:
        ProlasError: no dataset given and none carried by ``fit``.
    """
    dataset, x_new = _data_and_inputs("predict", fit, dataset_or_x, x_new)
    if fit.approximation is not None:
        return predict_sgpr(fit, dataset, x_new, include_noise=include_noise)
    mean, var = _posterior(fit, dataset, x_new, per_term=False)[0]
    if include_noise:
        var = var + fit.noise_variance
    return dataset.unstandardise(mean), var * dataset.y_std**2


def decompose(
    fit: FitResult, dataset_or_x: Dataset | np.ndarray, x_new: np.ndarray | None = None
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Additive decomposition: posterior mean and variance of each term at ``x_new``.

    Called as ``decompose(fit, dataset, x_new)`` or ``decompose(fit, x_new)`` with the
    data the fit carries (:attr:`FitResult.dataset`).

    Term t's posterior is ``m_t = K_t(x*, X) K^{-1} y'`` and
    ``v_t = K_t(x*, x*) - K_t(x*, X) K^{-1} K_t(X, x*)`` (Duvenaud et al. 2013); the
    means sum to the full posterior mean. Returned in original y units, without the
    data mean (add ``dataset.y_mean`` to the sum to get :func:`predict`'s mean).
    Returns ``[(term label, mean (m,), variance (m,))]`` in the canonical order of terms.
    """
    dataset, x_new = _data_and_inputs("decompose", fit, dataset_or_x, x_new)
    if fit.approximation is not None:
        return decompose_sgpr(fit, dataset, x_new)
    parts = _posterior(fit, dataset, x_new, per_term=True)
    return [
        (term.label, mean * dataset.y_std, var * dataset.y_std**2)
        for term, (mean, var) in zip(fit.terms, parts)
    ]
