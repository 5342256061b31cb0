"""Scalable refit on all N points: SGPR, the collapsed variational bound of Titsias (2009).

The structure search fits on an evenly spaced subsample; when the series is too long
for an exact GP, the chosen model is refitted on all N points here, and predicts with
the same approximation. Same model and conventions as :mod:`prolas.gp`
(docs/conventions.md). The pieces:

* :mod:`prolas.gp.sgpr_kernel`: :class:`SGPRModel`, the expression's kernel on scaled
  inputs (each factor's part from the kernel registry) and its parameters;
* :mod:`prolas.gp.sgpr_bound`: the bound ``F <= log p(y')`` with M inducing inputs,
  evaluated exactly in chunks of the data, and its exact closed-form gradient;
* this module: the inducing inputs, the refit (:func:`refit_sgpr`), the bound at a fit
  (:func:`sgpr_bound`) and the predictions (:func:`predict_sgpr`,
  :func:`decompose_sgpr`).

Optimisation: L-BFGS-B in a log parametrisation on scaled inputs ``t = (x - x0)/span``
(as :mod:`prolas.gp`), from the subsample fit's hyperparameters; the result is
converted back to x's units (lengthscales and periods times span, LIN offset
``c = x0 + span c_t``, a term's variance divided by ``span^2`` per LIN factor).
PER's period stays >= 2Δ and the noise variance >= :data:`prolas.gp.NOISE_FLOOR`.

>>> from prolas.data import Dataset
>>> from prolas.gp import fit_gp
>>> import numpy as np
>>> x = np.linspace(0, 100, 20_000); y = np.sin(2 * np.pi * x / 7) + 0.01 * x
>>> ds = Dataset.from_arrays(x, y)
>>> fit = fit_gp("LIN + PER", ds.subset(ds.spaced_indices(500)))  # doctest: +SKIP
>>> big = refit_sgpr(fit, ds, inducing=256)  # doctest: +SKIP
>>> big.approximation, round(big.period(), 1)  # doctest: +SKIP
('sgpr-256', 7.0)
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import torch
from scipy.optimize import minimize

from prolas.data import Dataset
from prolas.gp.fit import DTYPE, FitResult, bic
from prolas.gp.sgpr_bound import CHUNK, SGPRError, SGPRProblem, chunks, sgpr_threads
from prolas.gp.sgpr_kernel import NO_WHITE_NOISE, SGPRModel
from prolas.kernels import is_noise_term

__all__ = [
    "DEFAULT_INDUCING",
    "CHUNK",
    "SGPRModel",
    "inducing_inputs",
    "sgpr_bound",
    "refit_sgpr",
    "predict_sgpr",
    "decompose_sgpr",
]


#: Default number of inducing points (``benchmarks/results/sgpr_refit/SCALABLE.md``): the
#: largest M whose refit at N = 100 000 stays within ~5 minutes on 2 cores (172 s for three terms),
#: with room for structure down to a few x span / M (M = 128 already loses 0.1 nats on a
#: series with lengthscale span / 80; M = 1 024 cost 5x more and gained nothing there).
DEFAULT_INDUCING = 512


def inducing_inputs(x: np.ndarray, m: int) -> np.ndarray:
    """``m`` evenly spaced inducing inputs over ``[min x, max x]`` (deterministic).

    If ``m`` is at least the number of distinct inputs, the distinct inputs themselves
    (then ``Q_ff = K_ff`` and the bound is the exact log marginal likelihood).
    """
    u = np.unique(np.asarray(x, dtype=np.float64))
    if m >= u.size:
        return u
    return np.linspace(u[0], u[-1], max(int(m), 1))


def _problem(
    fit: FitResult,
    dataset: Dataset,
    inducing: int,
    cache_bytes: float = 3e9,
    lengthscale_floor: float = 0.0,
) -> tuple[SGPRProblem, np.ndarray]:
    """The :class:`SGPRProblem` of ``fit`` on ``dataset`` and ``fit``'s ``theta``."""
    model = SGPRModel(fit, dataset, lengthscale_floor)
    theta = model.theta_from_fit(fit)
    tf = torch.tensor(model.scale(dataset.x), dtype=DTYPE)
    tu = torch.tensor(model.scale(inducing_inputs(dataset.x, inducing)), dtype=DTYPE)
    y = torch.tensor(dataset.y_standardised, dtype=DTYPE)
    return SGPRProblem(model, tu, tf, y, cache_bytes), theta


def sgpr_bound(fit: FitResult, dataset: Dataset, *, inducing: int = DEFAULT_INDUCING) -> float:
    """The collapsed bound ``F`` (nats, summed over points) at ``fit``'s hyperparameters
    with ``inducing`` evenly spaced inducing inputs; NaN on a numerical failure."""
    try:
        with sgpr_threads(inducing, dataset.n):
            problem, theta = _problem(fit, dataset, inducing, cache_bytes=0.0)
            value, _ = problem.value_and_grad(theta, grad=False)
    except (SGPRError, ValueError, KeyError, RuntimeError):
        return math.nan
    return value if math.isfinite(value) else math.nan


# --- refit --------------------------------------------------------------------------


def _failed(fit: FitResult, dataset: Dataset, t0: float, error: str, name: str) -> FitResult:
    return FitResult.failed(
        fit.expression, dataset.n, fit.n_params, error, time.perf_counter() - t0, approximation=name
    )


def refit_sgpr(
    fit: FitResult,
    dataset: Dataset,
    *,
    inducing: int = DEFAULT_INDUCING,
    max_iter: int = 50,
    lengthscale_floor: float = 0.0,
) -> FitResult:
    """Refit ``fit``'s hyperparameters on all points of ``dataset`` by the SGPR bound.

    Starts from ``fit`` (natural units, e.g. fitted on a subsample), maximises the
    collapsed bound ``F`` (module docstring) with L-BFGS-B for at most ``max_iter``
    iterations (``2 max_iter + 10`` evaluations), inducing inputs fixed at
    ``inducing`` evenly spaced locations (:func:`inducing_inputs`). If the optimiser
    ends below the starting bound, the start is kept.
    ``lengthscale_floor``: SE and RQ lengthscales at least this many median spacings
    (:attr:`prolas.gp.FitConfig.lengthscale_floor`); a start below it is clipped up.

    The optimiser sees ``-F / N`` and stops when an iteration gains less than about
    ``1e-3`` nats in all (``ftol = 1e-3 / N``), when the projected gradient of ``F / N``
    is below ``1e-5`` per log-parameter, or after ``max_iter`` iterations. Cost per
    evaluation: three M^2 N matrix products and a few passes over the M x N grid
    (module docstring); measured in ``benchmarks/results/sgpr_refit/SCALABLE.md``
    (N = 100 000, M = 512, three terms: 172 s, 2.0 GB peak RSS on 2 shared cores).

    Returns an ``"ok"`` FitResult in natural units with ``log_likelihood = F`` (a lower
    bound on the exact log marginal likelihood, nats summed over N points),
    ``bic = F - k/2 ln N`` and ``approximation = "sgpr-M"`` (M = the number of
    inducing inputs actually used, at most the number of distinct inputs); or, on a
    numerical failure (non-finite bound, Cholesky failing after the bounded jitter
    schedule, an input fit that is not ``"ok"``) or for a model with white noise
    (``WN``, which inducing points cannot carry:
    :data:`prolas.gp.sgpr_kernel.NO_WHITE_NOISE`), a ``"failed"`` result with the
    reason. Never raises for numerical trouble; an ``"ok"`` result holds only finite
    numbers.
    """
    t0 = time.perf_counter()
    z = inducing_inputs(dataset.x, max(1, int(inducing)))
    with sgpr_threads(z.size, dataset.n):
        return _refit(fit, dataset, z, max_iter, t0, lengthscale_floor)


def _refit(
    fit: FitResult,
    dataset: Dataset,
    z: np.ndarray,
    max_iter: int,
    t0: float,
    lengthscale_floor: float = 0.0,
) -> FitResult:
    name = f"sgpr-{z.size}"
    if not fit.ok or not fit.terms or fit.noise_variance is None:
        return _failed(fit, dataset, t0, f"start fit is not usable ({fit.status})", name)
    if any(is_noise_term([f.kernel for f in t.factors]) for t in fit.terms):
        return _failed(fit, dataset, t0, f"{fit.expression}: {NO_WHITE_NOISE}", name)
    try:
        problem, theta0 = _problem(fit, dataset, z.size, lengthscale_floor=lengthscale_floor)
    except (ValueError, KeyError) as e:
        return _failed(fit, dataset, t0, f"cannot read the start fit: {e}", name)
    model = problem.model
    if not (torch.isfinite(problem.tf).all() and torch.isfinite(problem.y).all()):
        return _failed(fit, dataset, t0, "inputs or targets not finite after scaling", name)
    best: list = [theta0, -math.inf]
    errors: list[str] = []
    scale = float(dataset.n)  # the optimiser sees F / N (gradients of order 1)

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        try:
            value, g = problem.value_and_grad(theta, grad=True)
        except (SGPRError, RuntimeError) as e:
            errors.append(str(e))
            return 1e10, np.zeros_like(theta)
        if g is None or not math.isfinite(value):
            errors.append("non-finite bound or gradient")
            return 1e10, np.zeros_like(theta)
        if value > best[1]:
            best[0], best[1] = theta.copy(), value
        return -value / scale, -g / scale

    objective(theta0)
    start_value = best[1]
    if not math.isfinite(start_value):
        reason = errors[-1] if errors else "non-finite bound"
        return _failed(fit, dataset, t0, f"bound at the start: {reason}", name)
    if max_iter > 0:
        options = {"maxiter": max_iter, "maxfun": 2 * max_iter + 10}
        options |= {"ftol": 1e-3 / dataset.n, "gtol": 1e-5}
        try:
            minimize(
                objective,
                theta0,
                jac=True,
                method="L-BFGS-B",
                bounds=list(zip(model.lower, model.upper)),
                options=options,
            )
        except (ValueError, ArithmeticError, RuntimeError) as e:  # keep the best point seen
            errors.append(f"optimiser: {e}")
    theta, value = best  # never below the start: the start is in ``best`` too
    terms, noise = model.to_natural(theta)
    out = replace(
        fit,
        status="ok",
        n=dataset.n,
        log_likelihood=float(value),
        bic=bic(value, fit.n_params, dataset.n),
        terms=terms,
        noise_variance=float(noise),
        seconds=time.perf_counter() - t0,
        error=None,
        restart_log_likelihoods=(),
        approximation=name,
    )
    numbers = [out.log_likelihood, out.bic, out.noise_variance]
    numbers += [t.variance for t in terms] + [
        v for t in terms for f in t.factors for v in f.params.values()
    ]
    if not all(math.isfinite(v) for v in numbers):
        return _failed(fit, dataset, t0, "non-finite hyperparameter after the refit", name)
    return out


# --- prediction ---------------------------------------------------------------------


def _sgpr_posterior(
    fit: FitResult, dataset: Dataset, x_new: np.ndarray, inducing: int, per_term: bool
) -> list[tuple[np.ndarray, np.ndarray]]:
    """SGPR (DTC / Titsias) predictive mean and latent variance, standardised units.

    With ``Σ = (K_uu + K_uf K_fu / s^2)^{-1}`` and ``K_*u`` the (per-term) cross
    covariance (m x M),

        mean = K_*u Σ K_uf y' / s^2 = (L_B^{-1} L^{-1} K_u*)^T c,
        var  = k_** - ||L^{-1} K_u*||^2 + ||L_B^{-1} L^{-1} K_u*||^2   (column-wise).

    For a term t, ``K_*u`` and ``k_**`` are the term's own (the prior covariance of
    f_t with f(Z) is ``K_t(x*, Z)``); the term means sum to the full mean.
    """
    with sgpr_threads(inducing, dataset.n):
        return _posterior_parts(fit, dataset, x_new, inducing, per_term)


def _posterior_parts(
    fit: FitResult, dataset: Dataset, x_new: np.ndarray, inducing: int, per_term: bool
) -> list[tuple[np.ndarray, np.ndarray]]:
    problem, theta_np = _problem(fit, dataset, inducing, cache_bytes=0.0)
    model, tu = problem.model, problem.tu
    theta = torch.tensor(theta_np, dtype=DTYPE)
    ts = torch.tensor(model.scale(np.asarray(x_new, dtype=np.float64)), dtype=DTYPE)
    _, L, LB, c = problem.factors(theta)
    with torch.no_grad():
        n_out = len(model.terms) if per_term else 1
        means = [np.empty(ts.shape[0]) for _ in range(n_out)]
        vars_ = [np.empty(ts.shape[0]) for _ in range(n_out)]
        for sl in chunks(ts.shape[0]):
            Ksu = model.cross(theta, ts[sl], tu, per_term=per_term)
            kss = model.diag(theta, ts[sl], per_term=per_term)
            if not per_term:
                Ksu, kss = [Ksu], [kss]
            for k, (K, d) in enumerate(zip(Ksu, kss)):
                t1 = torch.linalg.solve_triangular(L, K.T, upper=False)
                t2 = torch.linalg.solve_triangular(LB, t1, upper=False)
                means[k][sl] = (t2.T @ c).numpy()
                v = d - (t1 * t1).sum(0) + (t2 * t2).sum(0)
                vars_[k][sl] = np.clip(v.numpy(), 0.0, None)
    return list(zip(means, vars_))


def predict_sgpr(
    fit: FitResult,
    dataset: Dataset,
    x_new: np.ndarray,
    include_noise: bool = False,
    *,
    inducing: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """SGPR predictive mean and variance at ``x_new`` in y's original units.

    Same contract as :func:`prolas.gp.predict`: ``(mean (m,), variance (m,))``, the
    variance of the latent function plus the noise if ``include_noise``. ``inducing``
    defaults to the M of ``fit.approximation`` (``"sgpr-M"``), else
    :data:`DEFAULT_INDUCING`. Raises :class:`SGPRError` if the Cholesky fails.
    """
    m = _inducing_of(fit) if inducing is None else inducing
    mean, var = _sgpr_posterior(fit, dataset, x_new, m, per_term=False)[0]
    if include_noise:
        var = var + fit.noise_variance
    return dataset.unstandardise(mean), var * dataset.y_std**2


def decompose_sgpr(
    fit: FitResult, dataset: Dataset, x_new: np.ndarray, *, inducing: int | None = None
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Per-term SGPR posterior ``(label, mean, variance)`` at ``x_new``, original units.

    Same contract as :func:`prolas.gp.decompose`: without the data mean; the means sum
    to :func:`predict_sgpr`'s mean minus ``dataset.y_mean``.
    """
    m = _inducing_of(fit) if inducing is None else inducing
    parts = _sgpr_posterior(fit, dataset, x_new, m, per_term=True)
    return [
        (term.label, mean * dataset.y_std, var * dataset.y_std**2)
        for term, (mean, var) in zip(fit.terms, parts)
    ]


def _inducing_of(fit: FitResult) -> int:
    a = fit.approximation or ""
    if a.startswith("sgpr-") and a[5:].isdigit():
        return int(a[5:])
    return DEFAULT_INDUCING
