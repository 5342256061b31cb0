"""``FitConfig.prior``: weak log-normal priors steer the screen; the fit's reported
log-likelihood stays the likelihood's, and a split fit is the fit of one process."""

from __future__ import annotations

import math

import numpy as np
import pytest

import prolas.gp.split as split
from prolas.errors import ProlasError
from prolas.expr import parse
from prolas.gp import FitConfig, fit_gp
from prolas.gp.gram import GramModel
from prolas.gp.minimise import log_likelihood_at, minimise
from prolas.gp.prior import PRIOR, LogNormalPrior, PenalisedModel
from prolas.gp.starts import initial_thetas


def _model(expr: str = "LIN + PER*SE + RQ", n: int = 50):
    t = np.linspace(0.0, 1.0, n)
    rng = np.random.default_rng(3)
    y = np.sin(2 * np.pi * 5 * t) + 2 * t + 0.1 * rng.standard_normal(n)
    y = (y - y.mean()) / y.std()
    return GramModel(parse(expr), t, 0.04, 0.02), y


def test_the_prior_is_a_gaussian_on_the_listed_log_parameters() -> None:
    """log p = -1/2 sum ((theta - mu) / (w sigma))^2 over the parameters PRIOR lists, by
    hand; flat in the others (the period, LIN's offset); gradient by finite differences."""
    model, _ = _model()
    prior = LogNormalPrior(model.params, 2.0)
    rng = np.random.default_rng(0)
    theta = np.array([rng.uniform(p.lower, min(p.upper, p.lower + 6)) for p in model.params])
    expected = 0.0
    listed = []
    for k, p in enumerate(model.params):
        if (p.kernel, p.name) in PRIOR:
            mu, sigma = PRIOR[(p.kernel, p.name)]
            expected -= 0.5 * ((theta[k] - mu) / (2.0 * sigma)) ** 2
            listed.append(p.name)
    lp, grad = prior(theta)
    assert lp == pytest.approx(expected, rel=1e-12)
    assert sorted(set(listed)) == ["alpha", "lengthscale", "noise", "variance"]
    for k, p in enumerate(model.params):
        step = np.zeros_like(theta)
        step[k] = 1e-6
        fd = (prior(theta + step)[0] - prior(theta - step)[0]) / 2e-6
        assert grad[k] == pytest.approx(fd, abs=1e-7)
        if p.name in ("period", "offset"):
            assert grad[k] == 0.0
    with pytest.raises(ValueError, match="width"):
        LogNormalPrior(model.params, 0.0)


def test_a_penalised_model_adds_the_prior_to_the_likelihood_and_its_gradient() -> None:
    model, y = _model()
    pen = PenalisedModel(model, 1.0)
    theta = initial_thetas(model, y, 0.04, (0, 0), 1)[0]
    ll, g = model.log_likelihood(theta, y)
    lq, gq = pen.log_likelihood(theta, y)
    lp, gp = pen.prior(theta)
    assert lq == pytest.approx(ll + lp, rel=1e-14) and lp < 0
    np.testing.assert_allclose(gq, g + gp, rtol=1e-14)
    assert pen.size == model.size and pen.n == model.n and pen.bounds == model.bounds
    # a minimisation under the prior ends where the posterior, not the likelihood, is high
    th_map, v_map = minimise(pen, theta, y, 200, 1e-10)
    th_ml, v_ml = minimise(model, theta, y, 200, 1e-10)
    assert v_map == pytest.approx(pen.log_likelihood(th_map, y, grad=False)[0])
    assert log_likelihood_at(model, th_ml, y) >= log_likelihood_at(model, th_map, y) - 1e-6


def test_a_fit_under_the_prior_reports_the_likelihood_and_is_valid(airline) -> None:
    """The prior changes where the screen looks, not what a fit reports: the fit ends at
    an optimum of the likelihood (a likelihood polish from its own parameters gains
    nothing), the fit key names the prior only when it is on (old caches match), and a bad
    width is refused with a clear error."""
    fit = fit_gp("LIN + PER*SE", airline, FitConfig(prior=1.0, restarts=4))
    assert fit.status == "ok" and math.isfinite(fit.log_likelihood)
    again = fit_gp("LIN + PER*SE", airline, FitConfig(restarts=4), init=fit, cold=False)
    assert again.log_likelihood - fit.log_likelihood < 1e-3
    cold = fit_gp("LIN + PER*SE", airline, FitConfig(restarts=4))
    assert abs(fit.log_likelihood - cold.log_likelihood) < 5.0  # the same model's optimum
    assert "prior" not in FitConfig().key() and FitConfig(prior=0.5).key()["prior"] == 0.5
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ProlasError, match="prior"):
            FitConfig(prior=bad)


@pytest.fixture(scope="module")
def ready() -> None:
    if not split.wait_ready(1, timeout=120):
        pytest.fail(f"the fit's worker process did not start: {split.disabled()}")


def test_a_split_fit_under_the_prior_is_the_fit_of_one_process(airline, ready) -> None:
    """The worker rebuilds the penalised screening model from the spec (its prior width
    included): the same restarts and hyperparameters as in one process."""
    config = FitConfig(prior=1.0, restarts=4)
    alone = fit_gp("CP(PER*SE, PER*SE)", airline, config)
    both = fit_gp("CP(PER*SE, PER*SE)", airline, config, workers=2)
    assert split.disabled() is None
    assert both.restart_log_likelihoods == alone.restart_log_likelihoods
    assert both.to_json() == alone.to_json()
