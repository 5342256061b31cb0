"""The lengthscale floor (FitConfig.lengthscale_floor): a bound that binds, and keys that
stay valid for the fits written before it existed."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import DATA

from prolas.bench import BenchConfig
from prolas.data import Dataset, load_csv
from prolas.errors import ProlasError
from prolas.expr import parse
from prolas.gp import FitConfig, GPScorer, fit_gp
from prolas.gp.fit import FIT_ALGORITHM
from prolas.gp.gram import parameter_layout
from prolas.gp.scalable import refit_sgpr
from prolas.limits import LENGTHSCALE_FLOOR
from prolas.search.cache import scorer_fingerprint
from prolas.search.config import SearchConfig


def test_layout_raises_only_se_and_rq_lengthscale_bounds() -> None:
    terms = tuple(tuple(t) for t in parse("SE*PER + RQ*LIN").terms)
    free = parameter_layout(terms, period_floor=0.01)
    floored = parameter_layout(terms, period_floor=0.01, lengthscale_floor=0.05)
    for a, b in zip(free, floored, strict=True):
        if a.kernel in ("SE", "RQ") and a.name == "lengthscale":
            assert a.lower < math.log(0.05) and b.lower == pytest.approx(math.log(0.05))
            assert b.upper == a.upper
        else:
            assert (a.lower, a.upper) == (b.lower, b.upper), a


def test_fit_keys_name_the_fitter_so_caches_of_an_earlier_one_are_never_reused() -> None:
    # the committed airline fit cache was written by an earlier fitter (before the floor
    # existed, and before the box edges moved to the nested models' limits): its fits are
    # not this fitter's, so its key must not match any key of today's settings
    cache = DATA.parent / "benchmarks/results/search_airline/fits/airline.jsonl"
    committed_key = json.loads(cache.open().readline())["key"]
    ds = load_csv(DATA / "airline.csv")
    for floor in (0.0, 1.0):
        config = FitConfig(restarts=4, seed=0, lengthscale_floor=floor)
        assert scorer_fingerprint(GPScorer(ds, config)) != committed_key
        assert config.key()["algorithm"] == FIT_ALGORITHM
    assert "lengthscale_floor" not in FitConfig(lengthscale_floor=0.0).key()
    assert FitConfig(lengthscale_floor=1.0).key()["lengthscale_floor"] == 1.0
    assert FitConfig().lengthscale_floor == LENGTHSCALE_FLOOR > 0  # on by default


def test_fitted_lengthscales_respect_the_floor_where_the_free_fit_goes_below() -> None:
    # white noise on a grid: the free fit of SE + RQ explains part of it with a
    # lengthscale far below the sampling interval (extra noise); the floor forbids that
    rng = np.random.default_rng(0)
    x = np.arange(80.0)
    y = np.sin(x / 6.0) + rng.normal(0.0, 0.5, x.size) * (1.0 + x / 40.0)
    ds = Dataset.from_arrays(x, y, name="noisy")
    delta = ds.spacing

    def lengthscales(fit) -> list[float]:
        return [
            f.params["lengthscale"]
            for t in fit.terms
            for f in t.factors
            if f.kernel in ("SE", "RQ")
        ]

    free = fit_gp("LIN*RQ + SE", ds, FitConfig(restarts=6, lengthscale_floor=0.0))
    floored = fit_gp("LIN*RQ + SE", ds, FitConfig(restarts=6, lengthscale_floor=1.0))
    assert free.ok and floored.ok
    assert min(lengthscales(free)) < 0.5 * delta
    assert min(lengthscales(floored)) >= delta * (1 - 1e-9)
    # a bound can only lower the best likelihood the optimiser can reach
    assert floored.log_likelihood <= free.log_likelihood + 1e-6
    # the SGPR refit of long series keeps the same floor, starting from the free fit
    refit = refit_sgpr(free, ds, inducing=40, lengthscale_floor=1.0)
    assert refit.ok and min(lengthscales(refit)) >= delta * (1 - 1e-9)


def test_search_config_checks_and_passes_the_floor() -> None:
    assert SearchConfig(lengthscale_floor=2.0).fit_config.lengthscale_floor == 2.0
    with pytest.raises(ProlasError, match="lengthscale-floor"):
        SearchConfig(lengthscale_floor=-1.0)
    with pytest.raises(ProlasError, match="lengthscale-floor"):
        BenchConfig(datasets=("airline",), methods=(), lengthscale_floor=float("nan"))
    with pytest.raises(ProlasError, match="lengthscale-floor"):
        FitConfig(lengthscale_floor=float("inf"))
