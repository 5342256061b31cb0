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

A term with a white-noise factor (``WN``, ``LIN*WN``, ``CP(WN, C)``'s noise side;
:func:`prolas.kernels.is_noise_term`) is noise, not signal: it is in ``K`` (the data's
covariance), but not in ``K(x*, X)`` or ``K(x*, x*)`` of the latent function, and with
``include_noise`` its prior variance at ``x*`` (``v (x* - c)^2`` for ``LIN*WN``; a new
input's white noise is uncorrelated with the data's) joins the observation noise. So the
band of a forecast widens as a ``LIN*WN`` term's noise grows. In the decomposition a noise
term's mean is 0 and its variance is that noise variance at ``x*``.

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
from prolas.kernels import is_noise_term

__all__ = ["predict", "decompose"]

#: Extra diagonal jitter tried, in order, when a Cholesky fails (bounded retries).
JITTER_SCHEDULE = (0.0, 1e-8, 1e-6, 1e-4)


def _sum(parts: list[torch.Tensor], which: list[int], shape: tuple[int, int]) -> torch.Tensor:
    """``sum_{i in which} parts[i]`` as :func:`dense_covariance` sums them (zeros if none)."""
    if not which:
        return torch.zeros(shape, dtype=DTYPE)
    chosen = [parts[i] for i in which]
    return torch.stack(chosen, 0).sum(0) if len(chosen) > 1 else chosen[0]


def _posterior(
    fit: FitResult, dataset: Dataset, x_new: np.ndarray, per_term: bool
) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """Per term (or for their sum, the signal) ``(mean, variance)`` at ``x_new``,
    standardised units, and the variance of the white-noise terms at ``x_new`` (module
    docstring)."""
    module = natural_covar_module(fit)
    noise = [is_noise_term([f.kernel for f in t.factors]) for t in fit.terms]
    signal = [i for i, n in enumerate(noise) if not n]
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
        cross = dense_covariance(module, xs, x, True)
        prior = dense_covariance(module, xs, xs, True)
        noise_var = _sum(prior, [i for i, n in enumerate(noise) if n], (len(xs), len(xs)))
        m = len(xs)
        blocks = (
            list(zip(cross, prior, noise))
            if per_term
            else [(_sum(cross, signal, (m, dataset.n)), _sum(prior, signal, (m, m)), False)]
        )
        out = []
        for Ksx, Kss, is_noise in blocks:
            if is_noise:  # no mean; its own variance at x_new
                out.append((np.zeros(m), np.clip(torch.diagonal(Kss).numpy(), 0.0, None)))
                continue
            mean = (Ksx @ alpha)[:, 0]
            v = torch.cholesky_solve(Ksx.T, L)
            var = torch.diagonal(Kss) - (Ksx * v.T).sum(-1)
            out.append((mean.numpy(), np.clip(var.numpy(), 0.0, None)))
    return out, np.clip(torch.diagonal(noise_var).numpy(), 0.0, None)


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
    noise variance if ``include_noise`` (and the variance of its white-noise terms at
    ``x_new``, which are noise, not part of the latent function). A fit made with an approximation
    (``fit.approximation``, e.g. SGPR on a long series) predicts with that approximation.

    Raises:
        ProlasError: no dataset given and none carried by ``fit``.
    """
    dataset, x_new = _data_and_inputs("predict", fit, dataset_or_x, x_new)
    if fit.approximation is not None:
        return predict_sgpr(fit, dataset, x_new, include_noise=include_noise)
    parts, noise_var = _posterior(fit, dataset, x_new, per_term=False)
    mean, var = parts[0]
    if include_noise:
        var = var + noise_var + fit.noise_variance
    return dataset.unstandardise(mean), var * dataset.y_std**2


def decompose(
    fit: FitResult, dataset_or_x: Dataset | np.ndarray, x_new: np.ndarray | None = None
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Additive decomposition: posterior mean and variance of each term at ``x_new``.

    Called as ``decompose(fit, dataset, x_new)`` or ``decompose(fit, x_new)`` with the
    data the fit carries (:attr:`FitResult.dataset`).

    Term t's posterior is ``m_t = K_t(x*, X) K^{-1} y'`` and
    ``v_t = K_t(x*, x*) - K_t(x*, X) K^{-1} K_t(X, x*)`` (Duvenaud et al. 2013); the
    means sum to the full posterior mean. A white-noise term (module docstring) has mean
    0 and, as variance, its noise variance at ``x_new``. Returned in original y units, without the
    data mean (add ``dataset.y_mean`` to the sum to get :func:`predict`'s mean).
    Returns ``[(term label, mean (m,), variance (m,))]`` in the canonical order of terms.
    """
    dataset, x_new = _data_and_inputs("decompose", fit, dataset_or_x, x_new)
    if fit.approximation is not None:
        return decompose_sgpr(fit, dataset, x_new)
    parts, _ = _posterior(fit, dataset, x_new, per_term=True)
    return [
        (term.label, mean * dataset.y_std, var * dataset.y_std**2)
        for term, (mean, var) in zip(fit.terms, parts)
    ]
