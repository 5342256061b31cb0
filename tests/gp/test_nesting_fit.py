"""Fits that start at a contained sub-model's optimum (prolas.gp.starts.embed_theta)."""

from __future__ import annotations

import numpy as np
import pytest
from test_nesting import CONTAINED

from prolas.data import Dataset
from prolas.expr import parse
from prolas.gp import FitConfig, fit_gp
from prolas.gp.gram import GramModel
from prolas.gp.starts import embed_theta
from prolas.nesting import embedding

FAST = FitConfig(restarts=3, max_iter=60)


@pytest.fixture(scope="module")
def data() -> Dataset:
    """A trend, a yearly cycle growing with it, a smooth bump and noise (x in years)."""
    rng = np.random.default_rng(11)
    x = np.sort(1990.0 + 12.0 * rng.uniform(size=90))
    y = (
        0.4 * (x - 1990)
        + (1 + 0.1 * (x - 1990)) * np.sin(2 * np.pi * x)
        + 2.0 * np.exp(-0.5 * ((x - 1997) / 1.5) ** 2)
        + rng.normal(0, 0.2, x.size)
    )
    return Dataset.from_arrays(x, y)


def _scaled_log_likelihood(expr: str, theta: np.ndarray, ds: Dataset) -> float:
    x0, s = float(ds.x[0]), float(ds.span)
    model = GramModel(parse(expr), (ds.x - x0) / s, 2 * ds.spacing / s, ds.spacing / s)
    ll, _ = model.log_likelihood(theta, ds.y_standardised, grad=False)
    return ll


@pytest.mark.parametrize(("e", "s"), CONTAINED)
def test_embedding_reproduces_the_sub_models_log_likelihood(data, e: str, s: str) -> None:
    sub = fit_gp(s, data, FAST)
    assert sub.ok
    x0, span = float(data.x[0]), float(data.span)
    model = GramModel(parse(e), (data.x - x0) / span, 2 * data.spacing / span, data.spacing / span)
    theta = embed_theta(model, sub, embedding(e, s), np.zeros(model.size), x0, span)
    assert np.all(theta >= np.array(model.bounds)[:, 0]) and np.all(
        theta <= np.array(model.bounds)[:, 1]
    )
    assert abs(_scaled_log_likelihood(e, theta, data) - sub.log_likelihood) < 1e-6


@pytest.mark.parametrize(("e", "s"), CONTAINED[::3])
def test_a_fit_started_at_a_contained_fit_ends_at_or_above_it(data, e: str, s: str) -> None:
    sub = fit_gp(s, data, FAST)
    for cold in (True, False):
        fit = fit_gp(e, data, FAST, init=sub, cold=cold)
        assert fit.ok
        assert fit.log_likelihood >= sub.log_likelihood - 1e-6, (e, s, cold)


def test_a_refit_without_a_start_is_a_failed_fit_not_an_exception(data) -> None:
    fit = fit_gp("LIN + PER", data, FAST, cold=False)
    assert fit.status == "failed" and "no fit to start from" in fit.error


def test_a_refit_hops_from_the_best_optimum_only_and_ends_at_or_above_its_start(
    data, monkeypatch
) -> None:
    """``hop_from_best_only`` (the refit on all points, prolas.pipeline.refit): when the
    start beats the random restart, the hop rounds run from the start's optimum alone, and
    the fit ends at or above it; by default they also run from the restart's."""
    import prolas.gp.fit as fit_module

    start = fit_gp("LIN + PER*SE", data, FitConfig(restarts=8))
    sources = []
    hop = fit_module._hop

    def counting_hop(model, theta, ll, *args):
        sources.append(ll)
        return hop(model, theta, ll, *args)

    monkeypatch.setattr(fit_module, "_hop", counting_hop)
    # one random restart stopped early: far below the start, whatever the BLAS
    one = FitConfig(restarts=1, seed=5, presample=0, screen_iter=1, max_iter=2)
    default = fit_gp("LIN + PER*SE", data, one, init=start)
    assert len(sources) == 2 and sources[1] > sources[0]  # the restart's, then the best
    sources.clear()
    refit = fit_gp("LIN + PER*SE", data, one, init=start, hop_from_best_only=True)
    assert len(sources) == 1 and sources[0] >= start.log_likelihood - 1e-6
    assert refit.log_likelihood >= start.log_likelihood - 1e-6
    assert default.log_likelihood >= start.log_likelihood - 1e-6
