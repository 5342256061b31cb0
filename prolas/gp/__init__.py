"""The GP layer: a kernel expression's Gaussian process, fitted, scored and used.

Imports only the layers below it (:mod:`prolas.records`, :mod:`prolas.data`,
:mod:`prolas.expr`, the kernel registry :mod:`prolas.kernels`); nothing here knows about
searches or reports.

* :mod:`prolas.gp.kernels`: GPyTorch kernel modules of the registry's kernels
  (:mod:`prolas.kernels`; docs/conventions.md), ``C`` and the change-point factors.
* :mod:`prolas.gp.gram`: the Gram matrix of an expression and the analytic gradient of
  its log marginal likelihood (NumPy/LAPACK), the fit's hot path.
* :mod:`prolas.gp.fit`: :func:`fit_gp` (batched multi-restart L-BFGS-B, BIC),
  :class:`FitResult` in natural units, :class:`GPScorer` for the Evaluator.
* :mod:`prolas.gp.scalable`: the SGPR refit of the chosen model on long series (its
  kernel in :mod:`prolas.gp.sgpr_kernel`, the bound in :mod:`prolas.gp.sgpr_bound`).
* :mod:`prolas.gp.predict`: posterior mean and variance, additive decomposition.
* :mod:`prolas.gp.anatomy`: a fitted model's parts as numbers: each term's share of
  the fitted mean's variance, factors constant on the data, the change operators'
  transitions and the terms they switch, trend slopes.

The names below are the layer's public API (``from prolas.gp import fit_gp``).
"""

from prolas.gp.anatomy import FLAT_TOLERANCE, FitChange, fit_changes, flat_factors, term_shares
from prolas.gp.fit import (
    DTYPE,
    NOISE_FLOOR,
    FactorFit,
    FitConfig,
    FitResult,
    GPScorer,
    TermFit,
    bic,
    build_covar_module,
    candidate_breaks,
    candidate_periods,
    dense_covariance,
    exact_log_likelihood,
    fit_gp,
    hold_unseen_transitions,
    inherit_theta,
    natural_covar_module,
    term_factors,
    theta_to_natural,
)
from prolas.gp.predict import decompose, predict

__all__ = [
    "DTYPE",
    "NOISE_FLOOR",
    "FactorFit",
    "FitConfig",
    "FitResult",
    "GPScorer",
    "TermFit",
    "bic",
    "build_covar_module",
    "candidate_breaks",
    "candidate_periods",
    "dense_covariance",
    "exact_log_likelihood",
    "fit_gp",
    "hold_unseen_transitions",
    "inherit_theta",
    "natural_covar_module",
    "term_factors",
    "theta_to_natural",
    "decompose",
    "predict",
    "FLAT_TOLERANCE",
    "FitChange",
    "fit_changes",
    "flat_factors",
    "term_shares",
]
