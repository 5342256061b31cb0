"""Laws of kernel expressions: canonical form, parsing, algebra, parameter counts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prolas.errors import ExpressionError
from prolas.expr import BASE_KERNELS, LIN, PER, RQ, SE, Base, Expression, Product, Sum, parse

names = st.sampled_from(sorted(BASE_KERNELS))
exprs = st.recursive(
    names.map(Base),
    lambda children: st.one_of(
        st.tuples(children, children).map(lambda p: p[0] + p[1]),
        st.tuples(children, children).map(lambda p: p[0] * p[1]),
    ),
    max_leaves=6,
)


def _random_spacing(text: str, draw_case: bool) -> str:
    return text.replace("*", " × ").replace("+", "  +  ").lower() if draw_case else text


@settings(max_examples=200, deadline=None)
@given(exprs)
def test_parse_str_round_trip(e: Expression) -> None:
    assert parse(str(e)) == e
    assert str(parse(str(e))) == str(e)


@settings(max_examples=200, deadline=None)
@given(exprs)
def test_tree_string_parses_to_same_model(e: Expression) -> None:
    # the non-canonical tree as written (with parentheses) means the same model
    assert parse(e.tree_str()) == e
    assert parse(_random_spacing(e.tree_str(), True)) == e


@settings(max_examples=200, deadline=None)
@given(exprs)
def test_canonicalisation_is_idempotent(e: Expression) -> None:
    c = e.canonical_form()
    assert c == e and c.canonical_form().tree_str() == c.tree_str() == str(e)


@settings(max_examples=200, deadline=None)
@given(exprs, exprs, exprs)
def test_algebra_laws(a: Expression, b: Expression, c: Expression) -> None:
    assert a + b == b + a
    assert a * b == b * a
    assert (a + b) + c == a + (b + c)
    assert (a + b) * c == a * c + b * c
    assert a + a == a  # identical terms merge
    assert hash(a + b) == hash(b + a)


@settings(max_examples=200, deadline=None)
@given(exprs)
def test_parameter_count(e: Expression) -> None:
    shape = {n: len(s.shape_params) for n, s in BASE_KERNELS.items()}
    expected = sum(1 + sum(shape[f] for f in t) for t in e.terms) + 1
    assert e.n_params == expected


def test_canonical_examples_from_design() -> None:
    assert str((SE + PER) * LIN) == "LIN*PER + LIN*SE"
    assert str(parse("(SE + PER) * LIN")) == "LIN*PER + LIN*SE"
    assert str(SE * SE) == "SE"  # SE is idempotent
    assert str(PER * PER) == "PER*PER"  # PER is not
    assert str(LIN * LIN + SE + SE) == "LIN*LIN + SE"
    assert str(parse("rq×se + Lin")) == "LIN + RQ*SE"


@pytest.mark.parametrize(
    ("expr", "k"),
    [
        ("SE", 3),
        ("LIN", 3),
        ("PER", 4),
        ("RQ", 4),
        ("LIN + PER*SE", 7),
        ("LIN*PER*SE + LIN*SE", 9),
        ("PER*RQ + RQ + SE", 11),
    ],
)
def test_k_matches_design_table(expr: str, k: int) -> None:
    assert parse(expr).n_params == k


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("SE +", "end of expression"),
        ("SE + FOO", "unknown kernel 'FOO'"),
        ("(SE + PER", "expected ')'"),
        ("SE PER", "unexpected 'PER'"),
        ("SE + 3", "unexpected character '3'"),
        ("", "empty"),
    ],
)
def test_parse_errors_point_at_position(text: str, fragment: str) -> None:
    with pytest.raises(ExpressionError) as info:
        parse(text)
    msg = str(info.value)
    assert fragment in msg and "\n" not in msg
    if text:
        assert "position" in msg


def test_expressions_are_immutable_and_flattened() -> None:
    e = SE + PER + RQ
    assert isinstance(e, Sum) and len(e.operands) == 3
    assert isinstance(SE * PER * RQ, Product) and len((SE * PER * RQ).operands) == 3
    with pytest.raises(AttributeError):
        e.operands = ()


# --- white noise WN and the centred periodic PERC (docs/conventions.md) ---------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("SE*WN", "WN"),  # every stationary factor is 1 at d = 0
        ("PER*WN + RQ*WN", "WN"),
        ("C*WN", "WN"),
        ("PERC*WN", "WN"),
        ("WN*WN", "WN"),  # idempotent
        ("LIN*WN", "LIN*WN"),  # LIN is kept: noise growing away from its offset
        ("LIN*LIN*SE*WN", "LIN*LIN*WN"),
        ("WN", "WN"),  # the white-noise model: an expression is never empty
        ("WN + WN", "WN"),
        ("SE + WN", "SE"),  # a top-level WN alone is the observation noise
        ("SE*WN + C", "C"),
        ("(LIN + C) * WN", "LIN*WN"),  # LIN*WN + WN: the WN-alone term is dropped
        ("(SE + WN) * LIN", "LIN*SE + LIN*WN"),  # as a part, SE + WN keeps its WN
        ("(SE + WN) * LIN + WN", "LIN*SE + LIN*WN"),
        ("CP(WN, C)", "CP(WN, C)"),  # weighted noise, not the global noise: it stays
        ("CP(WN, WN)", "CP(WN, WN)"),
        ("CP(SE + WN, LIN)", "CP(SE + WN, LIN)"),
        ("CP(WN, C) * SE", "CP(WN, SE)"),
        ("CW(SE, WN) * LIN + WN", "CW(LIN*SE, LIN*WN)"),
        ("CP(WN, LIN) + WN", "CP(WN, LIN)"),
        ("PERC + PER", "PER + PERC"),
        ("PERC*PERC", "PERC*PERC"),  # not idempotent
        ("perc * lin × se", "LIN*PERC*SE"),
    ],
)
def test_canonical_form_with_white_noise_and_centred_periodic(text: str, canonical: str) -> None:
    e = parse(text)
    assert str(e) == canonical
    assert parse(str(e)) == e and str(parse(str(e))) == canonical  # print/parse round trip
    assert e.canonical_form() == e


@pytest.mark.parametrize(
    ("expr", "k"),
    [
        ("WN", 2),  # one variance and the noise
        ("LIN*WN", 3),  # WN has no shape parameter
        ("LIN + LIN*WN", 5),
        ("CP(WN, C)", 2 + 1 + 1 + 1),
        ("CW(SE, LIN*WN)", 3 + (1 + 1) + (1 + 1) + 1),
        ("PERC", 4),  # lengthscale and period, as PER
        ("LIN*PERC + WN", 5),  # the WN term is the observation noise: not counted twice
    ],
)
def test_k_of_white_noise_and_centred_periodic(expr: str, k: int) -> None:
    assert parse(expr).n_params == k


def test_white_noise_laws_hold_inside_sums_and_products() -> None:
    wn = parse("WN")
    for text in ("SE", "LIN", "PER*LIN", "CP(LIN, SE)", "C + LIN*PER"):
        e = parse(text)
        assert e + wn == e  # the observation noise is already there
        assert (e + wn) * LIN == e * LIN + wn * LIN  # distributes before the rule
        assert str(e * wn) == str(parse(f"({text}) * WN"))
    assert (SE * parse("WN")).terms == (("WN",),)
    assert parse("CP(WN, LIN)").terms == (("CP_BEFORE:0", "WN"), ("CP_AFTER:0", "LIN"))
