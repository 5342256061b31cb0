"""Nested models (prolas.nesting): which expression is a limit of which, and how."""

from __future__ import annotations

import numpy as np
import pytest

from prolas.expr import parse
from prolas.grammar import Grammar
from prolas.nesting import (
    COLLAPSED_A,
    COLLAPSED_B,
    contains,
    embedding,
    one_step_submodels,
    without_offset,
)

CONTAINED = [
    ("C + PER", "PER"),
    ("C + PER", "C"),
    ("C + PER*PER", "PER*PER"),
    ("C + PER*PER", "PER"),  # two steps: drop C, then a PER factor
    ("C + LIN + PER", "LIN + PER"),
    ("PER*SE", "SE"),
    ("PER*SE", "PER"),
    ("SE", "C"),  # a stationary factor at its upper lengthscale is 1
    ("RQ", "SE"),  # alpha at its upper bound
    ("LIN*RQ + PER", "LIN*SE"),
    ("LIN*PER*SE + LIN*SE", "LIN*SE"),
    ("CP(LIN, PER)", "LIN"),
    ("CP(LIN, PER)", "PER"),
    ("CW(LIN, PER*SE)", "LIN"),
    ("CW(LIN, PER*SE)", "SE"),
    ("CW(RQ*SE, C)", "CW(SE, C)"),
    ("CW(LIN + LIN*LIN, RQ)", "CW(LIN*LIN, RQ)"),
    ("CP(CP(LIN, SE), PER)", "CP(LIN, PER)"),
    ("CP(CP(LIN, SE), PER)", "CP(SE, PER)"),
    ("CP(LIN*SE, PER*SE) + C", "CP(LIN, PER*SE)"),
    ("CP(LIN, PER) + SE", "LIN + SE"),
    # white noise and the centred periodic take part as themselves
    ("LIN + LIN*WN", "LIN"),  # the noise term's variance at its floor
    ("LIN + LIN*WN", "LIN*WN"),
    ("LIN*WN + SE", "SE"),
    ("CP(WN, LIN)", "WN"),  # the data before the change-point: the white-noise model
    ("CP(WN, LIN)", "LIN"),
    ("CP(WN, LIN) + SE", "SE"),  # WN alone on the seen side is the observation noise
    ("CW(SE, LIN*WN) + C", "CW(SE, LIN*WN)"),
    ("C + PERC", "PERC"),
    ("PERC*SE", "PERC"),  # SE at its longest lengthscale
    ("LIN*PERC + PER", "LIN*PERC"),
    ("RQ*PERC", "PERC*SE"),
]

NOT_CONTAINED = [
    ("LIN*SE", "SE"),  # LIN's offset is bounded: LIN*A only nears A
    ("LIN*LIN", "LIN"),
    ("SE", "RQ"),
    ("SE", "PER"),
    ("PER", "SE"),  # PER -> SE needs period -> infinity with lengthscale -> 0
    ("CP(LIN, SE)", "CP(SE, LIN)"),  # the sides do not swap
    ("CP(LIN, PER)", "LIN + PER"),  # one change-point cannot give both everywhere
    ("CP(LIN, PER)", "CW(LIN, PER)"),
    ("LIN + PER", "LIN + PER"),  # a model does not contain itself
    ("C", "SE"),
    # WN is 0 off the diagonal at any setting, PERC a sinusoid at its longest lengthscale
    ("LIN*WN", "LIN"),
    ("LIN*WN", "WN"),  # not claimed: E's noise could take WN's term (see below)
    ("LIN*WN + SE", "LIN + SE"),
    ("CP(WN, C)", "CP(C, C)"),
    ("PERC", "C"),
    ("PERC*SE", "SE"),
    ("PERC", "PER"),
    ("PER", "PERC"),
    ("LIN*PERC", "LIN"),
    ("CP(WN, LIN)", "CP(LIN, WN)"),
    ("SE", "WN"),  # true through E's noise, but no term of E reproduces it: not claimed
]


@pytest.mark.parametrize(("e", "s"), CONTAINED)
def test_contains(e: str, s: str) -> None:
    assert contains(parse(e), parse(s))


@pytest.mark.parametrize(("e", "s"), NOT_CONTAINED)
def test_does_not_contain(e: str, s: str) -> None:
    assert not contains(parse(e), parse(s))


def test_the_embedding_says_which_side_of_a_change_the_data_see() -> None:
    assert embedding("CP(LIN, PER)", "PER").groups == (COLLAPSED_B,)
    assert embedding("CP(LIN, PER)", "LIN").groups == (COLLAPSED_A,)
    # the outer change reproduces S's; the inner one shows its first side only
    emb = embedding("CP(CP(LIN, SE), PER)", "CP(LIN, PER)")
    assert emb.groups == (0, COLLAPSED_A)
    assert emb.terms == (0, None, 1)
    # an RQ reproducing an SE is marked, an extra stationary factor is at its limit
    emb = embedding("LIN*RQ + PER", "LIN*SE")
    assert emb.terms == (0, None)
    assert emb.rq_from_se[0] == frozenset({1})


def _samples(n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    grammar = Grammar.from_file("change")
    return [grammar.sample(rng) for _ in range(n)]


def test_every_one_step_submodel_is_contained_and_containment_is_transitive() -> None:
    for e in _samples(60, 1):
        subs = one_step_submodels(e)
        assert str(e) not in subs
        for s in subs:
            assert contains(e, s), (str(e), s)
            for s2 in one_step_submodels(parse(s)):
                assert contains(e, s2), (str(e), s, s2)  # transitive


def test_containment_is_a_strict_order_on_grammar_samples() -> None:
    exprs = {str(e) for e in _samples(80, 2)}
    for e in exprs:
        for s in exprs:
            if contains(e, s):
                assert not contains(s, e), (e, s)  # antisymmetric
                assert len(parse(s).terms) <= len(parse(e).terms)
                assert parse(s).n_params <= parse(e).n_params


def test_one_step_submodels_are_canonical() -> None:
    assert one_step_submodels(parse("C + PER*PER")) == {"C", "C + PER", "PER*PER"}
    assert one_step_submodels(parse("RQ")) == {"C", "SE"}
    assert one_step_submodels(parse("CP(LIN, PER)")) == {"LIN", "PER", "CP(LIN, C)"}


def test_one_step_submodels_with_white_noise_and_centred_periodic() -> None:
    assert one_step_submodels(parse("LIN + LIN*WN")) == {"LIN", "LIN*WN"}
    assert one_step_submodels(parse("PERC*SE")) == {"PERC"}  # PERC is not dropped
    assert one_step_submodels(parse("CP(WN, LIN)")) == {"WN", "LIN"}
    abcd = Grammar.from_file("abcd")
    rng = np.random.default_rng(5)
    for e in [abcd.sample(rng) for _ in range(60)]:
        for s in one_step_submodels(e):
            assert contains(e, s), (str(e), s)


def test_without_offset_drops_the_top_level_constants_only() -> None:
    assert str(without_offset(parse("C + PER*PER"))) == "PER*PER"
    assert str(without_offset(parse("C + LIN + PER"))) == "LIN + PER"
    # a constant inside a change operator is not an offset of the whole sum
    assert str(without_offset(parse("CP(C + SE, LIN) + C"))) == "CP(C + SE, LIN)"
    assert without_offset(parse("CP(C + SE, LIN)")) is None
    assert without_offset(parse("PER")) is None
    assert without_offset(parse("C")) is None  # nothing would be left
    rng = np.random.default_rng(11)
    grammar = Grammar.from_file("change")
    for e in [grammar.sample(rng) for _ in range(300)]:
        s = without_offset(e)
        if s is not None:  # always a model e contains, with the constants' items gone
            assert contains(e, s), (str(e), str(s))
            assert len(s.items) < len(e.items)
