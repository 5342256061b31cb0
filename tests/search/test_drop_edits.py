"""Drop edits (``LatentBOConfig.drop_edits``): the best points' grammar edits also drop
any one kernel with the operation that joined it, so the smaller models inside the
incumbent are ranked, not only the one without its last ``op K`` pair."""

from __future__ import annotations

import zlib
from collections import Counter

import numpy as np
import pytest

from prolas.data import Dataset
from prolas.grammar import Grammar, sequence_expression
from prolas.records import Score
from prolas.search.config import SearchConfig
from prolas.search.evaluator import Evaluator
from prolas.search.latent import LatentBOConfig, search_prolas
from prolas.surrogates.acquisition import sequence_drops, sequence_edits
from prolas.surrogates.space import build_sequence, sequence_kernels_ops


@pytest.mark.parametrize("name", ["default", "change"])
def test_drops_remove_exactly_one_kernel_and_stay_in_the_grammar(name: str) -> None:
    grammar = Grammar.from_file(name)
    rng = np.random.default_rng(3)
    for seq in grammar.sample_sequences(300, rng):
        kernels, ops = sequence_kernels_ops(seq)
        drops = sequence_drops(seq, grammar)
        assert len(drops) == len(set(drops)) <= len(kernels)
        if len(kernels) == 1:
            assert drops == []
        for q in drops:
            grammar.validate_sequence(q)
            k2, o2 = sequence_kernels_ops(q)
            assert len(k2) == len(kernels) - 1 and len(o2) == len(ops) - 1
            # one kernel (and one operation) fewer, the rest in order
            assert not Counter(k2) - Counter(kernels)
            assert not Counter(o2) - Counter(ops)
        if len(kernels) > 1:
            # the last one is the truncation sequence_edits already has
            last = build_sequence(kernels[:-1], ops[:-1], grammar.max_operations)
            assert last in drops and last in sequence_edits(seq, grammar)


def test_drops_are_the_terms_and_factors_of_a_sum_of_products() -> None:
    grammar = Grammar.default()
    seq = ("LIN", "*", "SE", "*", "RQ", "+", "PER", "stop")  # LIN*RQ*SE + PER
    got = {str(sequence_expression(q)) for q in sequence_drops(seq, grammar)}
    assert got == {"PER + RQ*SE", "LIN*RQ + PER", "LIN*SE + PER", "LIN*RQ*SE"}
    assert sequence_drops(("SE", "stop"), grammar) == []


#: SE leads the base kernels, its move SE*LIN beats it, that one's move LIN*SE + PER
#: beats both; the best, LIN + PER, is that expression without its first kernel: no
#: grammar edit of any of the three, and an edit only of the base kernels LIN and PER,
#: which score below everything else.
PLANTED = {
    "SE": 3.0,
    "LIN*SE": 4.0,
    "LIN*SE + PER": 5.0,
    "LIN + PER": 6.0,
    "LIN": -1.0,
    "PER": -1.0,
}


def _score(e) -> Score:
    key = str(e)
    bic = PLANTED.get(key, zlib.crc32(key.encode()) / 2**32)
    return Score(key, "ok", bic, bic, e.n_params, 0.0)


@pytest.fixture(scope="module")
def trained():
    from prolas.vae import load_checkpoint

    return load_checkpoint("default")


def _names(trained, drops: bool, seed: int, budget: int = 70, first: bool = False) -> list[str]:
    x = np.linspace(0.0, 1.0, 60)
    data = Dataset.from_arrays(x, np.sin(6 * x), name="synthetic")
    # no greedy opening: the incumbent LIN*SE + PER is reached through the steps
    options = LatentBOConfig(
        incumbent_every=1,
        drop_edits=drops,
        drops_first=first,
        short_opening=0,
        short_n_init=0,
    )
    res = search_prolas(
        Evaluator(_score, budget),
        data,
        SearchConfig(budget=budget, seed=seed),
        trained=trained,
        options=options,
    )
    return [e.expression for e in res.history]


@pytest.mark.parametrize("seed", [0, 1])
def test_drop_edits_find_the_better_model_inside_the_incumbent(trained, seed: int) -> None:
    incumbent = ("SE", "*", "LIN", "+", "PER", "stop")
    assert str(sequence_expression(incumbent)) == "LIN*SE + PER"
    edits = sequence_edits(incumbent, trained.grammar)
    assert "LIN + PER" not in {str(sequence_expression(q)) for q in edits}
    moves = {
        str(sequence_expression(q)) for q in edits + sequence_drops(incumbent, trained.grammar)
    }
    assert "LIN + PER" in moves

    with_drops = _names(trained, True, seed)
    found = with_drops.index("LIN*SE + PER")
    # from the incumbent, every step ranks only its moves, the drops among them
    assert "LIN + PER" in with_drops[found : found + len(moves) + 1]
    without = _names(trained, False, seed)
    late = without.index("LIN + PER") if "LIN + PER" in without else len(without)
    assert with_drops.index("LIN + PER") < late


def test_drop_edits_are_off_by_default_and_recorded() -> None:
    assert LatentBOConfig().drop_edits is False
    assert LatentBOConfig.from_record({}).drop_edits is False
    assert LatentBOConfig.from_overrides(["drop_edits=true"]).drop_edits is True


def test_drops_first_evaluates_the_incumbents_drops_before_its_edits(trained) -> None:
    names = _names(trained, False, 0, first=True)
    found = names.index("LIN*SE + PER")
    # its drops not evaluated yet (LIN*SE is its parent): LIN + PER, the best, and PER + SE
    assert set(names[found + 1 : found + 3]) == {"LIN + PER", "PER + SE"}
    assert LatentBOConfig().drops_first is True  # the default (benchmarks/results/drop_edits/)
    assert LatentBOConfig.from_record({}).drops_first is False  # records from before it
