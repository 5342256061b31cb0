"""One local optimisation of a GP's hyperparameters: L-BFGS-B from one start.

A fit (:func:`prolas.gp.fit_gp`) runs many of these from different starts (its screened
restarts, its polishes, its hop moves), here or in worker processes
(:mod:`prolas.gp.split`); both run these functions, so a minimisation gives the same
result wherever it runs.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize

from prolas.gp.gram import GramModel

__all__ = ["log_likelihood_at", "minimise"]


def minimise(
    model: GramModel, theta0: np.ndarray, y: np.ndarray, max_iter: int, tolerance: float
) -> tuple[np.ndarray, float]:
    """L-BFGS-B on ``-log p(y)`` inside the parameter box; returns ``(theta, ll)``.

    A point where ``K`` is not positive definite is answered with a large loss and a
    zero gradient, so the line search backs off; the best point seen is kept, so a
    run that ends in such a region still returns its best finite fit (``ll`` is NaN
    only if no point was finite).
    """
    best = [np.array(theta0), -math.inf]

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
            ll, g = model.log_likelihood(theta, y)
        if g is None or not math.isfinite(ll):
            return 1e10, np.zeros_like(theta)
        if ll > best[1]:
            best[0], best[1] = theta.copy(), ll
        return -ll, -g

    if max_iter > 0:
        minimize(
            objective,
            theta0,
            jac=True,
            method="L-BFGS-B",
            bounds=model.optimiser_bounds,
            options={"maxiter": max_iter, "ftol": tolerance, "gtol": 1e-6, "maxcor": 20},
        )
    else:
        objective(theta0)
    ll = best[1] if math.isfinite(best[1]) else math.nan
    return best[0], ll


def log_likelihood_at(model: GramModel, theta: np.ndarray, y: np.ndarray) -> float:
    """``log p(y | theta)`` without its gradient (NaN where ``K`` is not positive definite)."""
    with np.errstate(all="ignore"):  # thread-local: set in the thread that evaluates
        return model.log_likelihood(theta, y, grad=False)[0]
