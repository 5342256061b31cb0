"""SGPR refit (prolas.gp.scalable): the bound against the exact likelihood, prediction, refit."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from prolas.data import Dataset
from prolas.expr import parse
from prolas.gp import (
    DTYPE,
    FactorFit,
    FitResult,
    TermFit,
    decompose,
    dense_covariance,
    exact_log_likelihood,
    natural_covar_module,
    predict,
    theta_to_natural,
)
from prolas.gp.gram import GramModel
from prolas.gp.scalable import (
    _problem,
    decompose_sgpr,
    inducing_inputs,
    predict_sgpr,
    refit_sgpr,
    sgpr_bound,
)


def F(kernel: str, **params: float) -> FactorFit:
    return FactorFit(kernel, params)


def make_fit(terms: list[tuple[float, list[FactorFit]]], noise: float) -> FitResult:
    """A FitResult with hand-set natural-unit hyperparameters (canonical term order)."""
    terms_ = tuple(TermFit(v, tuple(fs)) for v, fs in terms)
    expr = " + ".join("*".join(f.kernel for f in t.factors) for t in terms_)
    k = sum(1 + sum(len(f.params) for f in t.factors) for t in terms_) + 1
    return FitResult(expr, "ok", 0, k, terms=terms_, noise_variance=noise)


@pytest.fixture(scope="module")
def series() -> Dataset:
    """120 evenly spaced monthly points: trend + yearly cycle + noise (x in years)."""
    rng = np.random.default_rng(0)
    x = 1950.0 + np.arange(120) / 12.0
    y = 0.4 * (x - 1950) + np.sin(2 * np.pi * x) + 0.2 * rng.standard_normal(120)
    return Dataset.from_arrays(x, y)


#: Expressions with LIN and PER products; hyperparameters in x's units (years).
FITS = {
    "SE": make_fit([(1.0, [F("SE", lengthscale=1.5)])], 0.05),
    "LIN + PER": make_fit(
        [(0.05, [F("LIN", offset=1953.0)]), (0.5, [F("PER", lengthscale=1.0, period=1.0)])],
        0.02,
    ),
    "LIN*PER + SE": make_fit(
        [
            (0.02, [F("LIN", offset=1951.0), F("PER", lengthscale=1.5, period=1.0)]),
            (0.8, [F("SE", lengthscale=3.0)]),
        ],
        0.03,
    ),
    "LIN*SE + PER*RQ": make_fit(
        [
            (0.05, [F("LIN", offset=1949.0), F("SE", lengthscale=4.0)]),
            (0.3, [F("PER", lengthscale=0.8, period=1.0), F("RQ", lengthscale=5.0, alpha=2.0)]),
        ],
        0.02,
    ),
    "LIN*LIN + PER*SE": make_fit(
        [
            (0.002, [F("LIN", offset=1945.0), F("LIN", offset=1952.0)]),
            (0.4, [F("PER", lengthscale=1.2, period=1.0), F("SE", lengthscale=6.0)]),
        ],
        0.03,
    ),
}


def exact(fit: FitResult, ds: Dataset) -> float:
    module = natural_covar_module(fit)
    x = torch.tensor(ds.x, dtype=DTYPE).reshape(-1, 1)
    with torch.no_grad():
        K = dense_covariance(module, x, x) + fit.noise_variance * torch.eye(ds.n, dtype=DTYPE)
        ll, ok = exact_log_likelihood(K, torch.tensor(ds.y_standardised, dtype=DTYPE))
    assert bool(ok)
    return float(ll)


@pytest.mark.parametrize("name", list(FITS))
def test_bound_with_inducing_at_the_data_is_exact(series, name):
    fit = FITS[name]
    assert np.array_equal(inducing_inputs(series.x, series.n), series.x)
    ll = exact(fit, series)
    assert sgpr_bound(fit, series, inducing=series.n) == pytest.approx(ll, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("name", list(FITS))
def test_bound_below_exact_and_tightens_with_more_inducing_points(series, name):
    fit = FITS[name]
    ll = exact(fit, series)
    # 5, 9, 17, 33, 65 evenly spaced points: nested grids, so the bound cannot decrease
    bounds = [sgpr_bound(fit, series, inducing=m) for m in (5, 9, 17, 33, 65)]
    assert all(math.isfinite(b) for b in bounds)
    tol = 1e-7 * abs(ll)
    assert all(b <= ll + tol for b in bounds)
    assert all(b2 >= b1 - tol for b1, b2 in zip(bounds, bounds[1:]))
    assert ll - bounds[-1] < 0.5 * (ll - bounds[0]) + tol


def _assert_sgpr_matches_exact(fit, series, x_new) -> None:
    """With the inducing inputs at the data (M = N), SGPR's predictions and additive
    decomposition equal the exact GP's; the parts sum to the mean."""
    m1, v1 = predict(fit, series, x_new, include_noise=True)
    m2, v2 = predict_sgpr(fit, series, x_new, include_noise=True, inducing=series.n)
    scale = series.y_std
    np.testing.assert_allclose(m2, m1, rtol=0, atol=1e-5 * scale)
    np.testing.assert_allclose(v2, v1, rtol=1e-5, atol=1e-9 * scale**2)
    parts_exact = decompose(fit, series, x_new)
    parts = decompose_sgpr(fit, series, x_new, inducing=series.n)
    assert [p[0] for p in parts] == [p[0] for p in parts_exact]
    for (_, me, ve), (_, ms, vs) in zip(parts_exact, parts):
        np.testing.assert_allclose(ms, me, rtol=0, atol=1e-5 * scale)
        np.testing.assert_allclose(vs, ve, rtol=1e-5, atol=1e-9 * scale**2)
    np.testing.assert_allclose(sum(p[1] for p in parts) + series.y_mean, m2, atol=1e-9 * scale)


@pytest.mark.parametrize("name", ["LIN + PER", "LIN*SE + PER*RQ", "LIN*LIN + PER*SE"])
def test_predict_and_decompose_at_the_data_match_exact(series, name):
    _assert_sgpr_matches_exact(FITS[name], series, np.linspace(1949.0, 1962.0, 41))


def test_predict_with_few_inducing_points_is_close(series):
    fit = FITS["LIN + PER"]
    m1, _ = predict(fit, series, series.x)
    m2, v2 = predict_sgpr(fit, series, series.x, inducing=40)
    assert np.all(np.isfinite(m2)) and np.all(v2 >= 0)
    assert np.sqrt(np.mean((m2 - m1) ** 2)) < 0.05 * series.y_std


def test_refit_recovers_the_period_from_a_perturbed_start():
    rng = np.random.default_rng(1)
    x = np.linspace(2000.0, 2030.0, 3000)
    y = 2.0 * np.sin(2 * np.pi * x / 1.0) + 0.3 * (x - 2000) + 0.5 * rng.standard_normal(x.size)
    ds = Dataset.from_arrays(x, y)
    start = make_fit(
        [(0.01, [F("LIN", offset=2010.0)]), (1.0, [F("PER", lengthscale=2.0, period=1.02)])],
        0.2,
    )
    fit = refit_sgpr(start, ds, inducing=128, max_iter=30)
    assert fit.status == "ok", fit.error
    assert fit.approximation == "sgpr-128" and fit.n == ds.n
    assert fit.period() == pytest.approx(1.0, rel=0.01)
    numbers = [fit.log_likelihood, fit.bic, fit.noise_variance]
    numbers += [t.variance for t in fit.terms]
    numbers += [v for t in fit.terms for f in t.factors for v in f.params.values()]
    assert all(math.isfinite(v) for v in numbers)
    assert fit.noise_variance == pytest.approx(0.25 / ds.y_std**2, rel=0.1)
    # the reported number is the bound at the reported (natural-unit) hyperparameters
    assert sgpr_bound(fit, ds, inducing=128) == pytest.approx(fit.log_likelihood, rel=1e-8)
    assert fit.log_likelihood > sgpr_bound(start, ds, inducing=128)
    assert fit.bic == pytest.approx(fit.log_likelihood - 0.5 * fit.n_params * math.log(ds.n))


def test_refit_never_worse_than_start_and_keeps_the_floors(series):
    fit = FITS["LIN*PER + SE"]
    start = sgpr_bound(fit, series, inducing=30)
    out = refit_sgpr(fit, series, inducing=30, max_iter=0)
    assert out.ok and out.log_likelihood == pytest.approx(start, rel=1e-10)
    out = refit_sgpr(fit, series, inducing=30, max_iter=15)
    assert out.ok and out.log_likelihood >= start
    assert out.noise_variance >= 1e-6
    assert out.period() >= 2 * series.spacing * (1 - 1e-9)


def test_failures_are_reported_not_raised(series):
    bad = make_fit([(float("nan"), [F("SE", lengthscale=1.0)])], 0.1)
    out = refit_sgpr(bad, series, inducing=20)
    assert out.status == "failed" and out.error and out.log_likelihood is None
    failed = FitResult("SE", "failed", series.n, 3, error="earlier failure")
    out = refit_sgpr(failed, series)
    assert out.status == "failed" and "not usable" in out.error
    assert math.isnan(sgpr_bound(bad, series, inducing=20))


# --- change-points, change-windows and the constant kernel ---------------------------

#: Expressions with change operators and C; expanded terms carry "CP_BEFORE:0" etc.
CHANGE_EXPRESSIONS = [
    "CP(LIN, PER*SE)",
    "CW(C, SE) + LIN",
    "C + PER",
    "CP(C, CW(LIN, SE)) + RQ",
]
#: Scaled-unit values (t = (x - x0) / span, y standardised) by parameter name.
_SCALED = {
    "location": 0.45,
    "start": 0.3,
    "end": 0.7,
    "width": 0.03,
    "offset": 0.2,
    "variance": 0.5,
    "period": 0.1,
    "alpha": 2.0,
    "noise": 0.05,
}


def _scaled_fit(expr: str, ds: Dataset, values: dict[str, float] | None = None):
    """``(fit in x's units, GramModel, theta)`` for ``expr`` at scaled-unit ``values``
    (lengthscales 0.6 for PER, 0.08 otherwise), through the exact fit's own conversion."""
    values = _SCALED | (values or {})
    t = (ds.x - ds.x[0]) / ds.span
    model = GramModel(parse(expr), t, 2.0 * ds.spacing / ds.span)
    theta = np.array(
        [p.to_theta(values.get(p.name, 0.6 if p.kernel == "PER" else 0.08)) for p in model.params]
    )
    terms, noise = theta_to_natural(model, theta, float(ds.x[0]), ds.span)
    fit = FitResult(expr, "ok", ds.n, parse(expr).n_params, 0.0, 0.0, terms, noise)
    return fit, model, theta


@pytest.fixture(scope="module")
def change_series() -> Dataset:
    """120 monthly points: a yearly cycle that turns into a rising line at 1955."""
    rng = np.random.default_rng(2)
    x = 1950.0 + np.arange(120) / 12.0
    y = np.where(x < 1955.0, np.sin(2 * np.pi * x), 0.5 * (x - 1955.0))
    return Dataset.from_arrays(x, y + 0.2 * rng.standard_normal(x.size))


@pytest.mark.parametrize("expr", CHANGE_EXPRESSIONS)
def test_change_bound_with_inducing_at_the_data_is_exact(change_series, expr):
    ds = change_series
    fit, model, theta = _scaled_fit(expr, ds)
    ll, _ = model.log_likelihood(theta, ds.y_standardised, grad=False)
    bound = sgpr_bound(fit, ds, inducing=ds.n)
    assert bound == pytest.approx(ll, rel=1e-6, abs=1e-6)
    assert bound == pytest.approx(exact(fit, ds), rel=1e-6, abs=1e-6)  # GPyTorch modules
    # the fit's natural units map back onto the same theta (tied values read per group)
    problem, theta_sgpr = _problem(fit, ds, ds.n)
    np.testing.assert_allclose(theta_sgpr, theta, rtol=0, atol=1e-12)
    # fewer inducing points: a lower bound
    assert sgpr_bound(fit, ds, inducing=30) <= ll + 1e-7 * abs(ll)


@pytest.mark.parametrize("expr", CHANGE_EXPRESSIONS)
def test_change_gradient_matches_finite_differences_and_the_exact_gradient(change_series, expr):
    ds = change_series
    fit, model, theta = _scaled_fit(expr, ds)
    # M = N: the bound is the exact log-likelihood, so is its gradient (shared change
    # parameters summed over every term of their group). rtol 1e-4: the jitter on the
    # nearly low-rank PER Gram moves the period's derivative by ~1e-5 (as for "PER" alone)
    problem, th = _problem(fit, ds, ds.n)
    value, grad = problem.value_and_grad(th)
    _, exact_grad = model.log_likelihood(theta, ds.y_standardised)
    np.testing.assert_allclose(grad, exact_grad, rtol=1e-4, atol=1e-4)
    # M < N, with and without the per-chunk caches: central differences
    for cache in (0.0, 3e9):
        problem, th = _problem(fit, ds, 40, cache_bytes=cache)
        value, grad = problem.value_and_grad(th)
        h = 1e-5
        fd = np.array(
            [
                problem.value_and_grad(th + e, grad=False)[0]
                - problem.value_and_grad(th - e, grad=False)[0]
                for e in h * np.eye(th.size)
            ]
        ) / (2 * h)
        np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("expr", ["CP(LIN, PER*SE)", "CW(C, SE) + LIN", "C + PER"])
def test_change_predict_and_decompose_at_the_data_match_exact(change_series, expr):
    fit, _, _ = _scaled_fit(expr, change_series)
    # inside and beyond the data
    _assert_sgpr_matches_exact(fit, change_series, np.linspace(1949.0, 1962.0, 41))


def test_change_tied_values_must_agree(change_series):
    ds = change_series
    fit, _, _ = _scaled_fit("CP(LIN, PER*SE)", ds)
    first, second = fit.terms
    moved = FactorFit("CP_AFTER", dict(second.factors[0].params, location=1957.0))
    bad = replace(fit, terms=(first, replace(second, factors=(moved, *second.factors[1:]))))
    assert math.isnan(sgpr_bound(bad, ds, inducing=20))
    out = refit_sgpr(bad, ds, inducing=20)
    assert out.status == "failed" and "differ" in out.error


def test_refit_finds_a_planted_change_point():
    rng = np.random.default_rng(3)
    x = np.linspace(2000.0, 2030.0, 3000)
    where = 2012.0  # sine before, a rising line after
    y = np.where(x < where, 2.0 * np.sin(2 * np.pi * x), 0.8 * (x - where))
    ds = Dataset.from_arrays(x, y + 0.3 * rng.standard_normal(x.size))
    # start 2.5 years (8 % of the span) away, with a blurred transition
    start, _, _ = _scaled_fit(
        "CP(PER, LIN)",
        ds,
        {"location": (2014.5 - 2000.0) / 30.0, "width": 0.02, "period": 1.0 / 30.0},
    )
    fit = refit_sgpr(start, ds, inducing=128, max_iter=40)
    assert fit.status == "ok", fit.error
    assert fit.approximation == "sgpr-128" and fit.n == ds.n
    factors = [f for t in fit.terms for f in t.factors if f.kernel.startswith("CP_")]
    assert [f.kernel for f in factors] == ["CP_BEFORE", "CP_AFTER"]
    assert factors[0].params == factors[1].params  # tied, repeated in both terms
    assert factors[0].params["location"] == pytest.approx(where, abs=0.02 * 30.0)
    assert fit.log_likelihood > sgpr_bound(start, ds, inducing=128)
    assert sgpr_bound(fit, ds, inducing=128) == pytest.approx(fit.log_likelihood, rel=1e-8)
