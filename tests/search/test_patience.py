"""PROLAS's patience stop on short series (``LatentBOConfig.short_patience``)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from prolas.data import Dataset
from prolas.limits import BIC_TIE, SHORT_SERIES_POINTS
from prolas.records import Score
from prolas.search.config import SearchConfig
from prolas.search.evaluator import Evaluator
from prolas.search.latent import LatentBOConfig, search_prolas


@pytest.fixture(scope="module")
def trained():
    from prolas.vae import load_checkpoint

    return load_checkpoint("default")


def _score(e) -> Score:
    """A pseudo-random BIC per expression (fixed by its text), rising with size so the
    search keeps finding gains for a while."""
    u = zlib.crc32(str(e).encode()) / 2**32
    bic = 3.0 * u + 0.2 * e.n_params
    return Score(str(e), "ok", bic, bic, e.n_params, 0.0)


def _data(n: int) -> Dataset:
    x = np.linspace(0.0, 1.0, n)
    return Dataset.from_arrays(x, np.sin(6 * x), name="synthetic")


def _first_patient_stop(bics: list[float], k: int, n_init: int) -> int:
    """The rule written out: the first i (i - k >= n_init) whose best is within BIC_TIE
    of the best k evaluations earlier; else all."""
    best = np.maximum.accumulate(bics)
    for i in range(n_init + k, len(bics) + 1):
        if best[i - 1] <= best[i - 1 - k] + BIC_TIE:
            return i
    return len(bics)


def _run(trained, n: int, k: int, budget: int = 40):
    ev = Evaluator(_score, budget)
    options = LatentBOConfig(short_patience=k, pool_sobol=128, pool_local=128)
    return search_prolas(
        ev, _data(n), SearchConfig(budget=budget), trained=trained, options=options
    )


def test_a_short_search_stops_when_its_last_k_evaluations_gained_nothing(trained) -> None:
    full = _run(trained, 60, 0)
    assert full.evaluations == 40
    bics = [e.bic for e in full.history]
    expected = _first_patient_stop(bics, 4, 10)
    assert 14 <= expected < 40  # the rule stops this search, and not at once
    stopped = _run(trained, 60, 4)
    # the same search up to the stop: a stop changes nothing before it
    assert [e.expression for e in stopped.history] == [e.expression for e in full.history][
        :expected
    ]
    assert stopped.evaluations == expected
    assert stopped.extra["stopped"].startswith("patience")


def test_patience_leaves_longer_series_alone(trained) -> None:
    res = _run(trained, SHORT_SERIES_POINTS, 4)
    assert res.evaluations == 40 and "patience" not in str(res.extra.get("stopped"))


def test_patience_must_not_be_negative() -> None:
    from prolas.errors import ProlasError

    with pytest.raises(ProlasError, match="short_patience"):
        LatentBOConfig(short_patience=-1)
