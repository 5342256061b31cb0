"""PROLAS's incumbent steps (``LatentBOConfig.incumbent_every``): a step that ranks only
the grammar edits of the best point, CKS's moves around the incumbent."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from prolas.data import Dataset
from prolas.grammar import sequence_expression
from prolas.records import Score
from prolas.search.config import SearchConfig
from prolas.search.evaluator import Evaluator
from prolas.search.latent import LatentBOConfig, search_prolas
from prolas.surrogates.acquisition import sequence_edits

PLANTED = "LIN*PER"


@pytest.fixture(scope="module")
def trained():
    from prolas.vae import load_checkpoint

    return load_checkpoint("default")


def _score(e) -> Score:
    """PER scores 3 and its move LIN*PER 5; everything else a pseudo-random BIC in
    [0, 1) fixed by its text, so PER is the incumbent until LIN*PER is found."""
    key = str(e)
    bic = {"PER": 3.0, PLANTED: 5.0}.get(key, zlib.crc32(key.encode()) / 2**32)
    return Score(key, "ok", bic, bic, e.n_params, 0.0)


def _run(trained, every: int, seed: int, budget: int = 40):
    x = np.linspace(0.0, 1.0, 60)
    data = Dataset.from_arrays(x, np.sin(6 * x), name="synthetic")
    options = LatentBOConfig(incumbent_every=every, pool_sobol=128, pool_local=128)
    return search_prolas(
        Evaluator(_score, budget),
        data,
        SearchConfig(budget=budget, seed=seed),
        trained=trained,
        options=options,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_incumbent_steps_evaluate_the_incumbents_moves_until_the_better_one(
    trained, seed: int
) -> None:
    res = _run(trained, every=1, seed=seed)
    names = [e.expression for e in res.history]
    moves = {str(sequence_expression(q)) for q in sequence_edits(("PER", "stop"), trained.grammar)}
    assert PLANTED in moves
    n_init = LatentBOConfig().n_init
    assert "PER" in names[:n_init]  # the base kernels open the search
    found = names.index(PLANTED)
    # every step after the initial design moves from PER, the incumbent, until the
    # planted move is found: at most one evaluation per move of PER
    assert all(name in moves for name in names[n_init:found])
    assert found < n_init + len(moves)
    assert res.extra["incumbent_steps"] >= found - n_init


def test_incumbent_steps_are_counted_and_can_be_turned_off(trained) -> None:
    assert LatentBOConfig().incumbent_every == 2
    res = _run(trained, every=0, seed=0, budget=20)
    assert res.extra["incumbent_steps"] == 0
    alternate = _run(trained, every=2, seed=0, budget=20)
    # every second BO step is an incumbent step while PER has moves left
    assert alternate.extra["incumbent_steps"] >= (alternate.extra["bo_steps"] - 1) // 2


def test_incumbent_every_must_not_be_negative() -> None:
    from prolas.errors import ProlasError

    with pytest.raises(ProlasError, match="incumbent_every"):
        LatentBOConfig(incumbent_every=-1)


def _noise_score(e) -> Score:
    """A pseudo-random BIC in [0, 1) per expression, fixed by its text: no size trend."""
    bic = zlib.crc32(str(e).encode()) / 2**32
    return Score(str(e), "ok", bic, bic, e.n_params, 0.0)


def test_cost_power_prefers_cheaper_fits(trained) -> None:
    """LogEI - p ln k: with the cost weight the BO steps fit smaller expressions (mean
    parameter count after the initial design, three seeds each)."""
    x = np.linspace(0.0, 1.0, 60)
    data = Dataset.from_arrays(x, np.sin(6 * x), name="synthetic")

    def mean_k(power: float) -> float:
        ks = []
        for seed in range(3):
            options = LatentBOConfig(cost_power=power, pool_sobol=128, pool_local=128)
            res = search_prolas(
                Evaluator(_noise_score, 30),
                data,
                SearchConfig(budget=30, seed=seed),
                trained=trained,
                options=options,
            )
            ks += [e.n_params for e in res.history[LatentBOConfig().n_init :]]
        return float(np.mean(ks))

    assert mean_k(2.0) < mean_k(0.0) - 1.0


def test_cost_power_must_not_be_negative() -> None:
    from prolas.errors import ProlasError

    with pytest.raises(ProlasError, match="cost_power"):
        LatentBOConfig(cost_power=-1.0)
