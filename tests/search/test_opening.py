"""PROLAS's greedy opening on short series (``LatentBOConfig.short_opening``): CKS's
second level, the expansion of the best base kernel, right after the base kernels."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from prolas.data import Dataset
from prolas.errors import ProlasError
from prolas.expr import parse
from prolas.grammar import sequence_expression
from prolas.limits import SHORT_SERIES_POINTS
from prolas.records import Score
from prolas.search.config import SearchConfig
from prolas.search.evaluator import Evaluator
from prolas.search.greedy import STANDARD_BASE_KERNELS, expand
from prolas.search.latent import LatentBOConfig, search_prolas
from prolas.surrogates.acquisition import two_kernel_sequences

#: The change window CKS finds at its second level and the latent search can pass over.
PLANTED = "CW(SE, C)"


@pytest.fixture(scope="module")
def trained():
    from prolas.vae import load_checkpoint

    return load_checkpoint("change")


def _score(e) -> Score:
    """SE is the best base kernel (3) and its change window 8; everything else a
    pseudo-random BIC in [0, 1) fixed by its text."""
    key = str(e)
    bic = {"SE": 3.0, PLANTED: 8.0}.get(key, zlib.crc32(key.encode()) / 2**32)
    return Score(key, "ok", bic, bic, e.n_params, 0.0)


def _run(trained, n: int | None, opening: int, budget: int = 24, log=None, **settings):
    """A search of ``n`` points of a sine (None: without data, a synthetic objective)."""
    data = None
    if n is not None:
        x = np.linspace(0.0, 10.0, n)
        data = Dataset.from_arrays(x, np.sin(x), name="synthetic")
    options = LatentBOConfig(short_opening=opening, pool_sobol=64, pool_local=64, **settings)
    return search_prolas(
        Evaluator(_score, budget),
        data,
        SearchConfig(budget=budget, seed=0),
        trained=trained,
        options=options,
        log=log,
    )


def _second_level(base: str) -> list[str]:
    """CKS's second level around ``base``, less the other base kernels (its
    replacements, which the first level evaluated), in CKS's order."""
    moves = expand(parse(base), STANDARD_BASE_KERNELS, change=True)
    return [str(e) for e in moves if str(e) not in STANDARD_BASE_KERNELS]


def test_every_two_kernel_expression_has_a_sequence_that_decodes_to_it(trained) -> None:
    grammar = trained.grammar
    table = two_kernel_sequences(grammar)
    for text, seq in table.items():
        assert str(sequence_expression(seq)) == text
        grammar.validate_sequence(seq)
        assert np.isfinite(grammar.log_prob(seq))
    # CKS's whole second level around every base kernel has a latent code
    for base in STANDARD_BASE_KERNELS:
        assert set(_second_level(base)) <= set(table)
    assert table[PLANTED] == ("SE", "CW", "C", "stop")
    assert table["CW(C, SE)"] == ("C", "CW", "SE", "stop")


def test_a_short_series_opens_with_cks_second_level_around_the_best_base_kernel(
    trained,
) -> None:
    res = _run(trained, 60, 11)
    names = [e.expression for e in res.history]
    n_base = len(trained.grammar.emitted_kernels)
    assert set(names[:n_base]) == set(trained.grammar.emitted_kernels)
    level = _second_level("SE")
    # SE*SE is SE: its sums and products, its four change rules, then CP(SE, LIN)
    assert level[9] == "CW(C, SE)" and level[10] == "CP(SE, LIN)"
    assert names[n_base : n_base + 11] == level[:11]
    assert res.best.expression == PLANTED
    # with the 10-point design (short_n_init 0) it goes on as without the opening
    # (the warm start)
    ten = [e.expression for e in _run(trained, 60, 11, short_n_init=0).history]
    without = [e.expression for e in _run(trained, 60, 0, short_n_init=0).history]
    assert ten[n_base : n_base + 11] == level[:11]
    assert ten[n_base + 11] == without[n_base]


def test_the_opening_takes_the_first_k_moves_and_only_on_short_series(trained) -> None:
    short = [e.expression for e in _run(trained, 60, 3).history]
    n_base = len(trained.grammar.emitted_kernels)
    assert short[n_base : n_base + 3] == _second_level("SE")[:3]
    long = [e.expression for e in _run(trained, SHORT_SERIES_POINTS, 11).history]
    off = [e.expression for e in _run(trained, SHORT_SERIES_POINTS, 0).history]
    assert long == off


def test_long_opening_opens_a_long_series_too_without_its_patience_stop(trained) -> None:
    n_base = len(trained.grammar.emitted_kernels)
    settings = {"short_n_init": n_base, "short_patience": 4, "long_opening": True}
    lines: list[str] = []
    long = _run(trained, SHORT_SERIES_POINTS, 11, budget=30, log=lines.append, **settings)
    assert "greedy opening: 11 of CKS's second-level moves around SE (long_opening)" in lines
    names = [e.expression for e in long.history]
    assert set(names[:n_base]) == set(trained.grammar.emitted_kernels)
    assert names[n_base : n_base + 11] == _second_level("SE")[:11]
    # the design is the base kernels and the opening, as on a short series, but the
    # patience stop stays with short series: the budget is spent
    assert long.extra["opening"] == 11 and long.evaluations == 30
    assert long.extra["stopped"] == "budget"
    short = _run(trained, 60, 11, budget=30, **settings)
    assert [e.expression for e in short.history][: n_base + 11] == names[: n_base + 11]
    assert LatentBOConfig.from_record({}).long_opening is False


def test_long_n_init_keeps_the_default_design_around_the_opening_on_long_series(
    trained,
) -> None:
    n_base = len(trained.grammar.emitted_kernels)
    n_init = LatentBOConfig().n_init
    settings = {"short_n_init": n_base, "long_opening": True, "long_n_init": n_init}
    lines: list[str] = []
    long = _run(trained, SHORT_SERIES_POINTS, 11, budget=30, log=lines.append, **settings)
    names = [e.expression for e in long.history]
    # base kernels, the opening, then the rest of the 10-point design: the warm start
    # the default search would evaluate right after the base kernels
    assert set(names[:n_base]) == set(trained.grammar.emitted_kernels)
    assert names[n_base : n_base + 11] == _second_level("SE")[:11]
    assert any(line.startswith("warm start") for line in lines)
    default = [e.expression for e in _run(trained, SHORT_SERIES_POINTS, 11, budget=30).history]
    assert names[n_base + 11 : n_init + 11] == default[n_base:n_init]
    assert long.extra["opening"] == 11 and long.evaluations == 30
    # on a short series long_n_init changes nothing: short_n_init's design
    short = _run(trained, 60, 11, budget=30, **settings)
    plain = _run(trained, 60, 11, budget=30, short_n_init=n_base)
    assert [e.expression for e in short.history] == [e.expression for e in plain.history]
    with pytest.raises(ProlasError, match="long_n_init"):
        LatentBOConfig(long_n_init=-1)
    assert LatentBOConfig.from_record({}).long_n_init == 0


def test_the_opening_stops_at_the_budget(trained) -> None:
    res = _run(trained, 60, 11, budget=8)
    assert res.evaluations == 8
    n_base = len(trained.grammar.emitted_kernels)
    assert [e.expression for e in res.history][n_base:] == _second_level("SE")[: 8 - n_base]


def test_short_opening_is_validated_and_old_records_replay_without_it() -> None:
    with pytest.raises(ProlasError, match="short_opening"):
        LatentBOConfig(short_opening=-1)
    with pytest.raises(ProlasError, match="short_n_init"):
        LatentBOConfig(short_n_init=-1)
    assert LatentBOConfig.from_record({}).short_opening == 0
    assert LatentBOConfig.from_record({}).short_n_init == 0


def test_the_patience_window_starts_after_the_opening(trained) -> None:
    x = np.linspace(0.0, 10.0, 60)
    data = Dataset.from_arrays(x, np.sin(x), name="synthetic")
    options = LatentBOConfig(
        short_opening=11, short_n_init=0, short_patience=4, pool_sobol=64, pool_local=64
    )
    res = search_prolas(
        Evaluator(_score, 30),
        data,
        SearchConfig(budget=30, seed=0),
        trained=trained,
        options=options,
    )
    names = [e.expression for e in res.history]
    n_base = len(trained.grammar.emitted_kernels)
    assert names.index(PLANTED) < n_base + 11  # the best comes from the opening
    # the initial design is n_init + 11 evaluations; 4 more without a gain stop it
    # (a window counted from n_init would have stopped 4 evaluations after the best)
    assert res.evaluations == LatentBOConfig().n_init + 11 + 4
    assert res.extra["opening"] == 11
    assert res.extra["stopped"].startswith("patience")


def test_a_short_initial_design_of_the_base_kernels_is_them_and_the_opening(trained) -> None:
    n_base = len(trained.grammar.emitted_kernels)
    # the defaults: the opening's 11 moves after a design of the base kernels alone
    assert (LatentBOConfig().short_opening, LatentBOConfig().short_n_init) == (11, n_base)
    settings = {"short_n_init": n_base, "short_patience": 4}
    lines: list[str] = []
    res = _run(trained, 60, 11, budget=30, log=lines.append, **settings)
    # the user is told, as of the warm start on longer series
    assert "greedy opening: 11 of CKS's second-level moves around SE" in "\n".join(lines)
    assert not any(line.startswith("warm start") for line in lines)
    names = [e.expression for e in res.history]
    assert set(names[:n_base]) == set(trained.grammar.emitted_kernels)
    assert names[n_base : n_base + 11] == _second_level("SE")[:11]
    # no warm start or Sobol points: BO and the patience window start right after the
    # opening, so 4 evaluations without a gain stop it (n_init's design: 10 + 11 + 4)
    assert res.evaluations == n_base + 11 + 4
    assert res.extra["bo_steps"] >= 1
    assert res.extra["stopped"].startswith("patience")
    # on a long series the design is n_init's, as without the setting
    long = [e.expression for e in _run(trained, SHORT_SERIES_POINTS, 11, **settings).history]
    off = [e.expression for e in _run(trained, SHORT_SERIES_POINTS, 11).history]
    assert long == off


def test_a_short_initial_design_is_never_fewer_than_the_base_kernels(trained) -> None:
    n_base = len(trained.grammar.emitted_kernels)
    fewer = _run(trained, 60, 11, budget=30, short_n_init=2, short_patience=4)
    names = [e.expression for e in fewer.history]
    assert set(names[:n_base]) == set(trained.grammar.emitted_kernels)
    assert fewer.evaluations == n_base + 11 + 4


def test_long_draws_add_grammar_draws_to_a_long_series_design(trained) -> None:
    n_init = LatentBOConfig().n_init
    lines: list[str] = []
    drawn = _run(trained, SHORT_SERIES_POINTS, 11, budget=30, log=lines.append, long_draws=4)
    plain = _run(trained, SHORT_SERIES_POINTS, 11, budget=30, long_draws=0)
    names = [e.expression for e in drawn.history]
    # the 10-point design (base kernels, warm start), then the draws, extra to it
    assert names[:n_init] == [e.expression for e in plain.history][:n_init]
    assert plain.extra["design_draws"] == 0
    assert drawn.extra["design_draws"] == 4 and drawn.evaluations == 30
    assert "design: 4 grammar draws (long_draws)" in lines
    # the draws are the grammar's prior samples from the search's seeded generator,
    # the first four new ones in order
    rng = np.random.default_rng(0)
    expected: list[str] = []
    while len(expected) < 4:
        e = str(sequence_expression(trained.grammar.sample_sequence(rng)))
        if e not in names[:n_init] and e not in expected:
            expected.append(e)
    assert names[n_init : n_init + 4] == expected
    # a short series's search is unchanged
    short = _run(trained, 60, 11, budget=30, long_draws=4)
    plain = _run(trained, 60, 11, budget=30, long_draws=0)
    assert [e.expression for e in short.history] == [e.expression for e in plain.history]
    assert short.extra["design_draws"] == 0
    # nor is a search without data (a synthetic objective)
    assert _run(trained, None, 11, budget=30, long_draws=4).extra["design_draws"] == 0
    with pytest.raises(ProlasError, match="long_draws"):
        LatentBOConfig(long_draws=-1)
    assert LatentBOConfig.from_record({}).long_draws == 0


def test_long_change_rules_put_the_best_base_kernels_change_rules_after_it(trained) -> None:
    n_base = len(trained.grammar.emitted_kernels)
    lines: list[str] = []
    ruled = _run(
        trained, SHORT_SERIES_POINTS, 11, budget=30, log=lines.append, long_change_rules=True
    )
    plain = _run(trained, SHORT_SERIES_POINTS, 11, budget=30)
    names = [e.expression for e in ruled.history]
    plain_names = [e.expression for e in plain.history]
    # the base kernels, then CKS's four change rules of the best of them (SE), in CKS's
    # order, each decoded from its two-kernel sequence; the planted window among them
    assert names[:n_base] == plain_names[:n_base]
    assert names[n_base : n_base + 4] == ["CP(SE, SE)", "CW(SE, SE)", PLANTED, "CW(C, SE)"]
    assert ruled.extra["design_change_rules"] == 4 and plain.extra["design_change_rules"] == 0
    assert "design: 4 change rules of SE (long_change_rules)" in lines
    # extra to the design: the warm start that follows is the default's
    warm = LatentBOConfig().warm_start
    assert names[n_base + 4 : n_base + 4 + warm] == plain_names[n_base : n_base + warm]
    assert ruled.evaluations == 30
    # a short series's search and a search without data are unchanged
    for n in (60, None):
        on = _run(trained, n, 11, budget=30, long_change_rules=True)
        off = _run(trained, n, 11, budget=30)
        assert [e.expression for e in on.history] == [e.expression for e in off.history]
        assert on.extra["design_change_rules"] == 0
    assert LatentBOConfig.from_record({}).long_change_rules is False
    assert LatentBOConfig().long_change_rules is False  # a candidate, not the default
