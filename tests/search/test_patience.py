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
from prolas.search.latent import (
    LatentBOConfig,
    patience_spent,
    patience_window,
    search_prolas,
)


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


def _first_relative_stop(bics: list[float], ratio: float, k_min: int, k_max: int) -> int:
    """The relative rule written out: at evaluation i, i* is the first evaluation whose
    best was within BIC_TIE of best(i), the window K = clamp(ceil(ratio i*), k_min,
    k_max); the first i (i - K >= 10, the initial design) with best(i) <= best(i - K) +
    BIC_TIE; else all."""
    best = np.maximum.accumulate(bics)
    for i in range(1, len(bics) + 1):
        i_star = 1 + int(np.argmax(best >= best[i - 1] - BIC_TIE))
        k = min(k_max, max(k_min, int(np.ceil(ratio * i_star))))
        if i - k >= 10 and best[i - 1] <= best[i - 1 - k] + BIC_TIE:
            return i
    return len(bics)


def _run(trained, n: int, k: int, budget: int = 40, ratio: float = 0.0, k_min: int = 0):
    ev = Evaluator(_score, budget)
    # the 10-point design without the greedy opening, which the expected stops assume
    # (tests/search/test_opening.py: the window after the opening)
    options = LatentBOConfig(
        short_patience=k,
        patience_ratio=ratio,
        patience_min=k_min,
        pool_sobol=128,
        pool_local=128,
        short_opening=0,
        short_n_init=0,
    )
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


def test_a_relative_patience_waits_in_proportion_to_when_the_best_came(trained) -> None:
    full = _run(trained, 60, 0)
    bics = [e.bic for e in full.history]
    fixed = _first_patient_stop(bics, 25, 10)
    expected = _first_relative_stop(bics, 0.5, 4, 25)
    assert 14 <= expected < fixed  # this search stops, sooner than the fixed window's
    stopped = _run(trained, 60, 25, ratio=0.5, k_min=4)
    assert [e.expression for e in stopped.history] == [e.expression for e in full.history][
        :expected
    ]
    assert stopped.evaluations == expected
    assert stopped.extra["stopped"].startswith("patience")


def test_the_relative_window_is_clamped_between_its_bounds() -> None:
    # best after each evaluation: raised at 1, 3 (by more than BIC_TIE) and 6 (by less)
    best = [1.0, 1.0, 2.0, 2.0, 2.0, 2.05, 2.05, 2.05]
    assert patience_window(best, 25, 1.0, 1) == 3  # i* = 3: 2.05 - 2.0 is within BIC_TIE
    assert patience_window(best, 25, 0.5, 1) == 2  # ceil(1.5)
    assert patience_window(best, 25, 1.0, 5) == 5  # at least k_min
    assert patience_window(best, 2, 1.0, 1) == 2  # at most k_max
    # after 8 evaluations with window 3: best(8) = 2.05 <= best(5) + 0.1, 8 - 3 >= n_init 5
    assert patience_spent(best, 25, 5, ratio=1.0, k_min=1)
    assert not patience_spent(best, 25, 6, ratio=1.0, k_min=1)  # the window reaches the design
    assert not patience_spent(best, 25, 5)  # the fixed window of 25 is longer than the search


def test_patience_leaves_longer_series_alone(trained) -> None:
    res = _run(trained, SHORT_SERIES_POINTS, 4)
    assert res.evaluations == 40 and "patience" not in str(res.extra.get("stopped"))


def test_patience_must_not_be_negative() -> None:
    from prolas.errors import ProlasError

    with pytest.raises(ProlasError, match="short_patience"):
        LatentBOConfig(short_patience=-1)
    with pytest.raises(ProlasError, match="patience_ratio"):
        LatentBOConfig(patience_ratio=-0.5)
    with pytest.raises(ProlasError, match="patience_min"):
        LatentBOConfig(patience_min=-1)
