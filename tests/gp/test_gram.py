"""The analytic fit core: Gram matrices and gradients against independent implementations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from prolas.data import Dataset
from prolas.expr import parse
from prolas.gp import (
    FitConfig,
    FitResult,
    dense_covariance,
    fit_gp,
    inherit_theta,
    natural_covar_module,
    theta_to_natural,
)
from prolas.gp.gram import GramModel
from prolas.gp.starts import initial_thetas
from prolas.grammar import Grammar

EXPRESSIONS = ["SE", "LIN", "PER", "RQ", "LIN*PER*SE + LIN*SE", "PER*RQ + RQ + SE", "LIN*LIN + RQ"]


def _random_theta(model: GramModel, rng: np.random.Generator) -> np.ndarray:
    lo, hi = np.array(model.bounds).T
    return rng.uniform(np.maximum(lo, -2.0), np.minimum(hi, 1.0))


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_gradient_matches_finite_differences(expr: str) -> None:
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 1, 50))
    y = np.sin(12 * t) + 0.3 * rng.standard_normal(50)
    model = GramModel(parse(expr), t, period_floor=0.02)
    theta = _random_theta(model, rng)
    ll, g = model.log_likelihood(theta, y)
    h = 1e-6
    fd = np.array(
        [
            (
                model.log_likelihood(theta + h * e, y, grad=False)[0]
                - model.log_likelihood(theta - h * e, y, grad=False)[0]
            )
            / (2 * h)
            for e in np.eye(model.size)
        ]
    )
    assert math.isfinite(ll)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_gram_equals_gpytorch_modules_and_is_psd(seed: int) -> None:
    """Grammar samples: the analytic K equals the GPyTorch modules' K in natural units."""
    rng = np.random.default_rng(seed)
    expr = Grammar.default().sample(rng)
    x = np.sort(rng.uniform(1950.0, 1960.0, 40))
    t = (x - x[0]) / (x[-1] - x[0])
    model = GramModel(expr, t, period_floor=0.01)
    theta = _random_theta(model, rng)
    terms, noise = theta_to_natural(model, theta, float(x[0]), float(x[-1] - x[0]))
    fit = FitResult(str(expr), "ok", x.size, expr.n_params, terms=terms, noise_variance=noise)
    xt = torch.tensor(x, dtype=torch.float64).reshape(-1, 1)
    with torch.no_grad():
        K_torch = dense_covariance(natural_covar_module(fit), xt, xt).numpy()
    K = model.covariance(theta, noise=False)
    np.testing.assert_allclose(K, K_torch, rtol=1e-8, atol=1e-10 * np.abs(K).max())
    np.testing.assert_allclose(K, K.T, rtol=0, atol=1e-12 * np.abs(K).max())
    assert np.linalg.eigvalsh(K).min() >= -1e-8 * np.abs(K).max()


def test_natural_units_round_trip() -> None:
    """theta -> natural-unit FitResult -> theta is the identity (inside the bounds)."""
    x = np.linspace(1949.0, 1961.0, 60)
    t = (x - x[0]) / 12.0
    model = GramModel(parse("LIN*PER*SE + LIN*SE + RQ"), t, period_floor=0.02)
    theta = initial_thetas(model, np.sin(t * 20), 0.02, (1,), 1)[0]
    terms, noise = theta_to_natural(model, theta, float(x[0]), 12.0)
    fit = FitResult(
        str(model.expr), "ok", 60, model.expr.n_params, terms=terms, noise_variance=noise
    )
    back = inherit_theta(model, fit, np.zeros(model.size), float(x[0]), 12.0)
    np.testing.assert_allclose(back, theta, rtol=1e-10, atol=1e-10)


def test_failed_cholesky_is_reported_not_raised() -> None:
    t = np.zeros(5)  # five identical inputs: with a zero noise floor K is singular
    model = GramModel(parse("SE"), t, period_floor=0.1)
    theta = np.array([0.0, 0.0, -200.0])  # noise e^-200: K = ones, rank one
    ll, g = model.log_likelihood(theta, np.arange(5.0))
    assert math.isnan(ll) and g is None


def _planted_trend_and_season(n: int = 150) -> Dataset:
    rng = np.random.default_rng(7)
    x = np.linspace(0.0, 12.0, n)
    y = 0.5 * x + np.sin(2 * np.pi * x) * (1 + 0.1 * x) + 0.1 * rng.standard_normal(n)
    return Dataset.from_arrays(x, y, name="planted")


def test_warm_started_fit_never_worse_than_cold() -> None:
    """S -> S + B as CKS expands: starting from S's fit can only help the child's fit."""
    ds = _planted_trend_and_season()
    config = FitConfig(restarts=2, seed=3)
    parent = fit_gp("LIN + PER", ds, config)
    for child in ("LIN + PER + SE", "LIN*PER + LIN", "LIN + PER*SE"):
        cold = fit_gp(child, ds, config)
        warm = fit_gp(child, ds, config, init=parent)
        assert warm.ok and warm.log_likelihood >= cold.log_likelihood - 1e-6
    # and for the parent itself, a warm start at its own optimum returns that optimum
    again = fit_gp("LIN + PER", ds, FitConfig(restarts=1, seed=9), init=parent)
    assert again.log_likelihood >= parent.log_likelihood - 1e-6


def test_contracted_derivatives_equal_the_contraction_of_their_matrices() -> None:
    """PER's, RQ's and the change factors' derivatives are never formed: ``dot(W)`` equals
    ``<W, M>`` for any W (the likelihood's W holds K^-1's lower triangle doubled, so it is
    not symmetric)."""
    from prolas.kernels.spec import (
        GramGrid,
        LowRankSineDerivative,
        MarginalDerivative,
        ScaledDerivative,
        marginal_sums,
    )

    rng = np.random.default_rng(3)
    grid = GramGrid.of(np.sort(rng.uniform(0.0, 1.0, 40)))
    W = rng.standard_normal((40, 40))
    w = 2.0 * np.pi / 0.13
    c, s = np.cos(w * grid.t), np.sin(w * grid.t)
    M = 0.7 * grid.d * np.sin(w * grid.d)
    assert LowRankSineDerivative(0.7, grid.d, c, s).dot(W) == pytest.approx(
        np.vdot(W, M), rel=1e-12
    )
    assert ScaledDerivative(2.5, grid.d2).dot(W) == pytest.approx(
        2.5 * np.vdot(W, grid.d2), rel=1e-12
    )
    m = rng.standard_normal(40)  # a change factor's d log s / d theta
    marginal = MarginalDerivative(m)
    assert marginal.dot(W) == pytest.approx(np.vdot(W, m[:, None] + m[None, :]), rel=1e-12)
    assert marginal.dot_sums(marginal_sums(W)) == marginal.dot(W)


def test_the_gradient_of_a_change_expression_matches_finite_differences() -> None:
    """The log-likelihood's gradient through the contracted derivatives (a change
    window's shared parameters in several terms, PER, RQ and LIN beside them)."""
    rng = np.random.default_rng(4)
    t = np.sort(rng.uniform(0.0, 1.0, 60))
    y = np.sin(9.0 * t) + 0.3 * rng.standard_normal(60)
    model = GramModel(parse("CW(C + LIN, PER) + PER*RQ"), t, period_floor=0.01)
    lo, hi = np.array(model.bounds).T
    theta = np.clip(rng.uniform(-1.0, 1.0, model.size), lo, hi)
    _, g = model.log_likelihood(theta, y)
    h = 1e-6
    for q in range(model.size):
        up, down = theta.copy(), theta.copy()
        up[q] += h
        down[q] -= h
        fd = (model.log_likelihood(up, y, False)[0] - model.log_likelihood(down, y, False)[0]) / (
            2 * h
        )
        assert g[q] == pytest.approx(fd, rel=1e-5, abs=1e-6), model.params[q]
