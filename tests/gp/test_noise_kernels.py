"""The white noise ``WN`` and the centred periodic ``PERC`` (docs/conventions.md), against
transcriptions written here from the binding formulas, in every back end; predictions
that treat white-noise terms as noise; SGPR's refusal of ``WN`` and its ``PERC``.

The registry's law tests (tests/gp/test_registry.py) cover both kernels as well: symmetric
PSD Gram matrices, gradients against finite differences, agreeing views, in sums,
products and under change operators.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

from prolas.data import Dataset
from prolas.expr import parse
from prolas.gp import (
    DTYPE,
    FitResult,
    decompose,
    dense_covariance,
    fit_gp,
    natural_covar_module,
    predict,
    theta_to_natural,
)
from prolas.gp.gram import GramModel
from prolas.gp.scalable import refit_sgpr, sgpr_bound
from prolas.gp.sgpr_kernel import SGPRModel
from prolas.kernels import BASE_KERNELS, factor
from prolas.kernels.perc import one_minus_i0e
from prolas.kernels.spec import GramGrid

# repeated x values on purpose: WN correlates them (a delta on the input values)
pytestmark = pytest.mark.filterwarnings("ignore:.*duplicate x value")

_X = np.array([1950.0, 1951.5, 1951.5, 1953.0, 1954.25, 1957.0, 1957.0, 1959.5, 1960.0])


# --- independent NumPy transcriptions of docs/conventions.md ------------------------------


def np_wn(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    """WN(x, x') = 1 if x = x' else 0."""
    return (x1[:, None] == x2[None, :]).astype(float)


def np_lin(x1, x2, c):
    return (x1[:, None] - c) * (x2[None, :] - c)


def np_se(x1, x2, ls):
    return np.exp(-((x1[:, None] - x2[None, :]) ** 2) / (2 * ls**2))


def sigmoid(x, loc, w):
    return 1.0 / (1.0 + np.exp(-(x - loc) / w))


def np_perc_mp(d: float, ls: float, p: float) -> float:
    """PERC(d) = (exp(u cos(2 pi d / p)) - I0(u)) / (exp(u) - I0(u)), u = 1/l^2, in
    50-digit arithmetic (no cancellation, no overflow: the reference for any u)."""
    with mpmath.workdps(50):
        u = 1 / mpmath.mpf(ls) ** 2
        num = mpmath.exp(u * mpmath.cos(2 * mpmath.pi * mpmath.mpf(d) / p)) - mpmath.besseli(0, u)
        return float(num / (mpmath.exp(u) - mpmath.besseli(0, u)))


def _psd(K: np.ndarray) -> bool:
    eig = np.linalg.eigvalsh(0.5 * (K + K.T))
    return bool(np.allclose(K, K.T, atol=0) and eig.min() >= -1e-10 * max(eig.max(), 1.0))


def _fit_of(expr: str, dataset: Dataset, seed: int = 0) -> tuple[GramModel, np.ndarray, FitResult]:
    """``expr`` at random well-conditioned values: its GramModel, theta and FitResult."""
    t = (dataset.x - dataset.x[0]) / dataset.span
    model = GramModel(parse(expr), t, 2.0 * dataset.spacing / dataset.span)
    rng = np.random.default_rng(seed)
    theta = np.empty(model.size)
    for k, p in enumerate(model.params):
        if p.name == "variance":
            theta[k] = math.log(rng.uniform(0.3, 1.5))
        elif p.name == "noise":
            theta[k] = math.log(0.05)
        elif p.name in ("offset", "location"):
            theta[k] = rng.uniform(0.2, 0.8)
        elif p.name == "start":
            theta[k] = rng.uniform(0.1, 0.4)
        elif p.name == "end":
            theta[k] = rng.uniform(0.6, 0.9)
        elif p.name == "width":
            theta[k] = math.log(rng.uniform(0.03, 0.1))
        elif p.name == "period":
            theta[k] = math.log(rng.uniform(0.2, 0.5))
        else:  # lengthscales
            theta[k] = math.log(rng.uniform(0.3, 1.5))
    terms, noise = theta_to_natural(model, theta, float(dataset.x[0]), dataset.span)
    fit = FitResult(expr, "ok", dataset.n, parse(expr).n_params, 0.0, 0.0, terms, noise)
    return model, theta, fit


# --- WN --------------------------------------------------------------------------------


def _wn_reference(expr: str, fit: FitResult, x: np.ndarray) -> np.ndarray:
    """The covariance of the fitted ``expr`` (without the noise), from the formulas."""
    t = fit.terms
    p = [[f.params for f in term.factors] for term in t]
    if expr == "WN":
        return t[0].variance * np_wn(x, x)
    if expr == "LIN*WN":
        return t[0].variance * np_lin(x, x, p[0][0]["offset"]) * np_wn(x, x)
    if expr == "LIN*WN + SE":
        return t[0].variance * np_lin(x, x, p[0][0]["offset"]) * np_wn(x, x) + t[
            1
        ].variance * np_se(x, x, p[1][0]["lengthscale"])
    if expr == "CP(WN, C)":
        s = sigmoid(x, p[0][0]["location"], p[0][0]["width"])
        return t[0].variance * np.outer(1 - s, 1 - s) * np_wn(x, x) + t[1].variance * np.outer(s, s)
    if expr == "CW(SE, LIN*WN)":
        q = p[0][0]
        u = sigmoid(x, q["start"], q["width"]) * (1 - sigmoid(x, q["end"], q["width"]))
        outside = t[0].variance * np.outer(1 - u, 1 - u) * np_se(x, x, p[0][1]["lengthscale"])
        inside = np.outer(u, u) * np_lin(x, x, p[1][1]["offset"]) * np_wn(x, x)
        return outside + t[1].variance * inside
    raise KeyError(expr)


@pytest.mark.parametrize("expr", ["WN", "LIN*WN", "LIN*WN + SE", "CP(WN, C)", "CW(SE, LIN*WN)"])
def test_wn_gram_matrices_are_psd_and_equal_the_formula(expr) -> None:
    ds = Dataset.from_arrays(_X, np.sin(_X))
    model, theta, fit = _fit_of(expr, ds, seed=3)
    reference = _wn_reference(expr, fit, ds.x)
    assert _psd(reference)
    # the exact fit's Gram matrix (scaled units: same matrix, variances rescaled)
    K = model.covariance(theta, noise=False)
    np.testing.assert_allclose(K, reference, rtol=1e-12, atol=1e-12 * np.abs(reference).max())
    # the GPyTorch modules (x's own units): the reported likelihood, predictions
    x = torch.tensor(ds.x, dtype=DTYPE).reshape(-1, 1)
    with torch.no_grad():
        gpy = dense_covariance(natural_covar_module(fit), x, x).numpy()
    np.testing.assert_allclose(gpy, reference, rtol=1e-12, atol=1e-12 * np.abs(reference).max())
    assert _psd(K)


def test_wn_correlates_repeated_inputs_and_nothing_else() -> None:
    K = np_wn(_X, _X)
    k, derivs = factor("WN").gram(GramGrid.of((_X - _X[0]) / 10.0), [], grad=True)
    np.testing.assert_array_equal(k, K)
    assert derivs == [] and k[1, 2] == 1.0 and k[0, 1] == 0.0


def test_every_stationary_factor_times_wn_is_wn() -> None:
    """The canonical rule SE*WN = PER*WN = RQ*WN = C*WN = PERC*WN = WN is an identity of
    Gram matrices: each stationary factor is 1 at d = 0, the only place WN is not 0."""
    grid = GramGrid.of((_X - _X[0]) / 10.0)
    wn, _ = factor("WN").gram(grid, [], grad=False)
    rng = np.random.default_rng(0)
    stationary = [k for k in BASE_KERNELS.values() if k.stationary and k.name != "WN"]
    assert {k.name for k in stationary} >= {"SE", "PER", "RQ", "C", "PERC"}
    for kernel in stationary:
        th = [math.log(rng.uniform(0.2, 2.0)) if p.log else 0.3 for p in kernel.params]
        k, _ = kernel.gram(grid, th, grad=False)
        np.testing.assert_allclose(k * wn, wn, rtol=0, atol=1e-15)
        assert str(parse(f"{kernel.name}*WN")) == "WN"
    assert str(parse("LIN*WN")) == "LIN*WN"  # LIN is not 1 at d = 0


# --- PERC ------------------------------------------------------------------------------


@pytest.mark.parametrize("ls", [1e-3, 0.03, 0.5, 1.0, 3.0, 100.0, 1e4, 1e6])
def test_perc_equals_the_bessel_formula_for_small_and_large_u(ls) -> None:
    """Against the formula in 50-digit arithmetic: u = 1/l^2 from 1e6 (exp(u) overflows a
    float) to 1e-12 (exp(u) - I0(u) cancels to nothing in floats)."""
    p = 0.37
    t = np.array([0.0, 0.01, 0.05, 0.1, 0.185, 0.2, 0.3, 0.37, 0.5, 0.74, 0.9])
    grid = GramGrid.of(t)
    k, _ = factor("PERC").gram(grid, [math.log(ls), math.log(p)], grad=False)
    expected = np.array([[np_perc_mp(a - b, ls, p) for b in t] for a in t])
    np.testing.assert_allclose(k, expected, rtol=0, atol=1e-12)
    # the natural-unit formula (GPyTorch, r_d) and SGPR's agree with it
    v = {"lengthscale": torch.tensor(ls, dtype=DTYPE), "period": torch.tensor(p, dtype=DTYPE)}
    tt = torch.tensor(t, dtype=DTYPE)
    with torch.no_grad():
        natural = factor("PERC").value(tt[:, None], tt[:, None], v, diag=False).numpy()
        sgpr = factor("PERC").sgpr_value_theta(tt, tt, [math.log(ls), math.log(p)]).numpy()
    np.testing.assert_allclose(natural, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sgpr, expected, rtol=0, atol=1e-12)
    assert np.all(np.diag(k) == 1.0)


@pytest.mark.parametrize("ls", [0.3, 0.7, 1.0, 2.0, 5.0])
def test_perc_equals_the_direct_numpy_formula_where_it_is_well_conditioned(ls) -> None:
    """The formula as written, in floats, for moderate u (it overflows for large u and
    cancels for small u, where the 50-digit reference above takes over)."""
    from scipy.special import i0

    p, t = 0.29, np.sort(np.random.default_rng(2).uniform(0.0, 1.0, 30))
    u = 1.0 / ls**2
    d = t[:, None] - t[None, :]
    direct = (np.exp(u * np.cos(2 * np.pi * d / p)) - i0(u)) / (np.exp(u) - i0(u))
    k, _ = factor("PERC").gram(GramGrid.of(t), [math.log(ls), math.log(p)], grad=False)
    np.testing.assert_allclose(k, direct, rtol=0, atol=1e-12)
    assert _psd(k)


def test_perc_limits_and_its_zero_mean_over_a_period() -> None:
    p = 0.4
    d = np.linspace(0.0, p, 2001)
    grid = GramGrid.of(d)
    # u -> 0: a sinusoid, not 1 (so PERC is not dropped like PER: prolas.nesting)
    k, _ = factor("PERC").gram(grid, [math.log(1e6), math.log(p)], grad=False)
    np.testing.assert_allclose(k[0], np.cos(2 * np.pi * d / p), atol=1e-9)
    # PERC = (PER - c) / (1 - c) with c = exp(-u) I0(u), PER's mean over a period
    for ls in (0.3, 1.0, 3.0):
        kc, _ = factor("PERC").gram(grid, [math.log(ls), math.log(p)], grad=False)
        kp, _ = factor("PER").gram(grid, [math.log(ls), math.log(p)], grad=False)
        c = 1.0 - one_minus_i0e(1.0 / ls**2)
        np.testing.assert_allclose(kc[0], (kp[0] - c) / (1 - c), atol=1e-12)
        mean = np.trapezoid(kc[0], d) / p  # its mean over a period is 0
        assert abs(mean) < 1e-9


def test_one_minus_i0e_is_continuous_where_its_two_forms_meet() -> None:
    u = np.array([1e-14, 1e-8, 1e-3, 0.5, 1.999999, 2.0, 2.000001, 10.0, 1e6])
    with mpmath.workdps(50):
        expected = [float(1 - mpmath.exp(-mpmath.mpf(v)) * mpmath.besseli(0, v)) for v in u]
    np.testing.assert_allclose(one_minus_i0e(u), expected, rtol=1e-13)
    ut = torch.tensor(u, dtype=DTYPE)
    np.testing.assert_allclose(one_minus_i0e(ut).numpy(), expected, rtol=1e-13)


@pytest.mark.parametrize("ls", [1e-3, 0.2, 1.0, 30.0, 1e6])
def test_perc_gradient_factors_at_the_ends_of_the_lengthscale_box(ls) -> None:
    t = np.sort(np.random.default_rng(1).uniform(0, 1, 15))
    grid = GramGrid.of(t)
    kernel = factor("PERC")
    th = [math.log(ls), math.log(0.23)]
    k, derivs = kernel.gram(grid, th, grad=True)
    for q, (M, relative) in enumerate(derivs):
        assert not relative  # PERC vanishes: its derivatives are not relative to it
        h = 1e-6
        up, down = list(th), list(th)
        up[q] += h
        down[q] -= h
        fd = (kernel.gram(grid, up, False)[0] - kernel.gram(grid, down, False)[0]) / (2 * h)
        assert np.abs(M - fd).max() <= 1e-6 * max(np.abs(fd).max(), 1.0), (ls, q)


def test_perc_sgpr_bound_with_inducing_inputs_at_the_data_is_the_exact_likelihood() -> None:
    x = np.linspace(0.0, 6.0, 70)
    y = np.sin(2 * np.pi * x / 1.3) + 0.4 + 0.1 * np.random.default_rng(0).standard_normal(70)
    ds = Dataset.from_arrays(x, y)
    fit = fit_gp("C + PERC*SE", ds, restarts=2)
    assert fit.ok
    assert sgpr_bound(fit, ds, inducing=ds.n) == pytest.approx(fit.log_likelihood, abs=1e-5)
    refit = refit_sgpr(fit, ds, inducing=20, max_iter=5)
    assert refit.ok and refit.log_likelihood <= fit.log_likelihood + 1e-6


# --- WN as noise: predictions and SGPR ------------------------------------------------------


def test_predictions_treat_white_noise_terms_as_noise() -> None:
    """At a new x a LIN*WN term has no covariance with the data, but its prior variance
    v (x - c)^2 is noise there: the latent variance leaves it out, the predictive adds it."""
    rng = np.random.default_rng(0)
    x = np.linspace(0.0, 10.0, 60)
    y = 0.5 * x + 0.1 * x * rng.standard_normal(60)
    ds = Dataset.from_arrays(x, y)
    fit = fit_gp("LIN + LIN*WN", ds, restarts=2)
    assert fit.ok
    xs = np.array([2.5, 10.0, 15.0, 20.0])
    mean, latent = predict(fit, xs)
    mean2, total = predict(fit, xs, include_noise=True)
    np.testing.assert_array_equal(mean, mean2)
    noise_term = fit.terms[1]
    assert [f.kernel for f in noise_term.factors] == ["LIN", "WN"]
    c = noise_term.factors[0].params["offset"]
    extra = (noise_term.variance * (xs - c) ** 2 + fit.noise_variance) * ds.y_std**2
    np.testing.assert_allclose(total - latent, extra, rtol=1e-10)
    assert np.all(np.diff(total) > 0)  # the band widens as the noise grows
    # the latent function is the LIN term alone: the same as its decomposition
    parts = decompose(fit, xs)
    assert [p[0] for p in parts] == ["LIN", "LIN*WN"]
    np.testing.assert_allclose(parts[0][1] + ds.y_mean, mean, rtol=1e-12)
    np.testing.assert_allclose(parts[0][2], latent, rtol=1e-10)
    np.testing.assert_array_equal(parts[1][1], 0.0)  # noise has no mean
    np.testing.assert_allclose(parts[1][2], extra - fit.noise_variance * ds.y_std**2, rtol=1e-10)


def test_a_model_without_white_noise_predicts_as_before() -> None:
    """The signal/noise split does not touch models without WN (same numbers as summing
    every term)."""
    x = np.linspace(0.0, 5.0, 30)
    ds = Dataset.from_arrays(x, np.sin(x) + 0.1 * x)
    fit = fit_gp("LIN + PER*SE", ds, restarts=2)
    xs = np.linspace(-1.0, 7.0, 9)
    module = natural_covar_module(fit)
    X = torch.tensor(ds.x, dtype=DTYPE).reshape(-1, 1)
    Xs = torch.tensor(xs, dtype=DTYPE).reshape(-1, 1)
    with torch.no_grad():
        K = dense_covariance(module, X, X).numpy() + fit.noise_variance * np.eye(ds.n)
        Ksx = dense_covariance(module, Xs, X).numpy()
        Kss = dense_covariance(module, Xs, Xs).numpy()
    mean = Ksx @ np.linalg.solve(K, ds.y_standardised)
    var = np.diag(Kss) - np.einsum("ij,ji->i", Ksx, np.linalg.solve(K, Ksx.T))
    m, v = predict(fit, xs, include_noise=True)
    np.testing.assert_allclose(m, ds.unstandardise(mean), rtol=1e-10, atol=1e-10 * ds.y_std)
    np.testing.assert_allclose(v, (var + fit.noise_variance) * ds.y_std**2, rtol=1e-8)


def test_the_white_noise_model_predicts_its_mean_and_noise_only() -> None:
    x = np.linspace(0.0, 5.0, 40)
    y = 3.0 + np.random.default_rng(2).standard_normal(40)
    ds = Dataset.from_arrays(x, y)
    fit = fit_gp("WN", ds, restarts=2)
    assert fit.ok and fit.n_params == 2
    mean, latent = predict(fit, np.array([1.0, 9.0]))
    _, total = predict(fit, np.array([1.0, 9.0]), include_noise=True)
    np.testing.assert_allclose(mean, ds.y_mean)
    np.testing.assert_array_equal(latent, 0.0)
    expected = (fit.terms[0].variance + fit.noise_variance) * ds.y_std**2
    np.testing.assert_allclose(total, expected, rtol=1e-12)
    assert expected == pytest.approx(np.var(y), rel=0.1)


def test_sgpr_refuses_white_noise_with_a_clear_reason() -> None:
    x = np.linspace(0.0, 10.0, 50)
    ds = Dataset.from_arrays(x, 0.3 * x + 0.05 * x * np.random.default_rng(1).standard_normal(50))
    fit = fit_gp("LIN + LIN*WN", ds, restarts=2)
    refit = refit_sgpr(fit, ds, inducing=10)
    assert refit.status == "failed" and "white noise (WN)" in refit.error
    assert "\n" not in refit.error
    with pytest.raises(ValueError, match="white noise"):
        SGPRModel(fit, ds)
    assert math.isnan(sgpr_bound(fit, ds, inducing=10))


def test_a_fit_finds_the_planted_growth_of_the_noise() -> None:
    """y = 0.5 x + (x - 2) e: LIN*WN is preferred to LIN, with its offset near 2."""
    rng = np.random.default_rng(4)
    x = np.linspace(0.0, 10.0, 120)
    y = 0.5 * x + 0.3 * (x - 2.0) * rng.standard_normal(120)
    ds = Dataset.from_arrays(x, y)
    plain = fit_gp("LIN", ds, restarts=2)
    grown = fit_gp("LIN + LIN*WN", ds, restarts=4)
    assert grown.bic > plain.bic + 20
    c = grown.terms[1].factors[0].params["offset"]
    assert abs(c - 2.0) < 1.0
    sd = math.sqrt(grown.terms[1].variance) * ds.y_std  # per x unit
    assert sd == pytest.approx(0.3, rel=0.3)
