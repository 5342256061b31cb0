"""Tests of the kernel grammar (PROLAS Algorithm 1): sampling law, probabilities, files."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy.stats import chisquare

from prolas.errors import GrammarError
from prolas.expr import parse
from prolas.grammar import GRAMMARS_DIR, OPERATIONS, STOP, Grammar, sequence_expression

N_DRAWS = 20_000


def small_grammar(n_max: int = 2) -> Grammar:
    """Non-uniform priors so that the laws below would catch a sampler ignoring them."""
    return Grammar.from_dict(
        {
            "name": "small-test",
            "max_operations": n_max,
            "base_kernels": {"SE": 1.0, "LIN": 2.0, "PER": 3.0},
            "operations": {"+": 1.0, "*": 3.0, "stop": 2.0},
        }
    )


@pytest.fixture(scope="module")
def seasonal_draws():
    g = Grammar.from_file(GRAMMARS_DIR / "seasonal.toml")
    return g, g.sample_sequences(N_DRAWS, np.random.default_rng(12345))


def test_default_grammar_is_the_papers():
    g = Grammar.default()
    assert g.base_kernels == ("SE", "LIN", "PER", "RQ")
    assert g.p_base == pytest.approx((0.25,) * 4)
    assert g.p_op == pytest.approx((1 / 3,) * 3)
    assert g.max_operations == 5


def test_shipped_grammars_load_and_bare_names_resolve():
    for path in sorted(GRAMMARS_DIR.glob("*.toml")):
        g = Grammar.from_file(path)
        assert Grammar.from_file(path.stem) == g
        assert sum(g.p_base) == pytest.approx(1.0)
        assert sum(g.p_op) == pytest.approx(1.0)


def test_kernel_frequencies_match_p_base(seasonal_draws):
    g, seqs = seasonal_draws
    counts = Counter(k for s in seqs for k in s[0::2])
    observed = np.array([counts[k] for k in g.base_kernels])
    expected = np.array(g.p_base) * observed.sum()
    assert chisquare(observed, expected).pvalue > 1e-3


def test_operation_frequencies_match_p_op(seasonal_draws):
    g, seqs = seasonal_draws
    counts = Counter(o for s in seqs for o in s[1::2])
    observed = np.array([counts[o] for o in OPERATIONS])
    expected = np.array(g.p_op) * observed.sum()
    assert chisquare(observed, expected).pvalue > 1e-3


def test_sequence_lengths_follow_the_stop_probability(seasonal_draws):
    g, seqs = seasonal_draws
    p_stop = g.p_op[OPERATIONS.index(STOP)]
    n_max = g.max_operations
    n_ops = Counter(sum(o != STOP for o in s[1::2]) for s in seqs)
    # P(k operations) = (1 - p_stop)^k p_stop for k < N_max, (1 - p_stop)^N_max at N_max
    law = np.array([(1 - p_stop) ** k * p_stop for k in range(n_max)] + [(1 - p_stop) ** n_max])
    assert law.sum() == pytest.approx(1.0)
    observed = np.array([n_ops[k] for k in range(n_max + 1)])
    assert observed.sum() == len(seqs)
    assert chisquare(observed, law * len(seqs)).pvalue > 1e-3


@pytest.mark.parametrize("n_max", [1, 2, 5])
def test_n_max_is_never_exceeded_and_draws_are_valid(n_max):
    g = small_grammar(n_max)
    rng = np.random.default_rng(n_max)
    for seq in g.sample_sequences(3000, rng):
        ops = [o for o in seq[1::2] if o != STOP]
        assert len(ops) <= n_max
        assert (seq[-1] == STOP) == (len(ops) < n_max)
        g.validate_sequence(seq)
        assert math.isfinite(g.log_prob(seq))


def test_log_prob_sums_to_one_over_all_sequences():
    for n_max in (1, 2, 3):
        g = small_grammar(n_max)
        seqs = g.enumerate_sequences()
        assert len(set(seqs)) == len(seqs)
        assert sum(math.exp(g.log_prob(s)) for s in seqs) == pytest.approx(1.0, abs=1e-12)


def test_log_prob_matches_the_product_of_priors():
    g = small_grammar(2)
    # p(LIN) p(*) p(PER) p(stop) = 2/6 * 3/6 * 3/6 * 2/6
    assert g.log_prob(("LIN", "*", "PER", "stop")) == pytest.approx(
        math.log(2 / 6 * 3 / 6 * 3 / 6 * 2 / 6)
    )
    # N_max reached: no stop factor
    assert g.log_prob(("SE", "+", "SE", "*", "PER")) == pytest.approx(
        math.log(1 / 6 * 1 / 6 * 1 / 6 * 3 / 6 * 3 / 6)
    )


def test_sampling_frequencies_of_whole_sequences_match_log_prob():
    g = small_grammar(1)
    seqs = g.enumerate_sequences()
    counts = Counter(g.sample_sequences(N_DRAWS, np.random.default_rng(7)))
    assert set(counts) <= set(seqs)
    observed = np.array([counts[s] for s in seqs])
    expected = np.array([math.exp(g.log_prob(s)) for s in seqs]) * N_DRAWS
    assert chisquare(observed, expected).pvalue > 1e-3


def test_sequences_apply_left_to_right():
    g = Grammar.default()
    assert g.to_expression(("SE", "+", "PER", "*", "LIN", "stop")) == parse("(SE + PER) * LIN")
    assert str(g.to_expression(("SE", "+", "PER", "*", "LIN", "stop"))) == "LIN*PER + LIN*SE"
    assert g.to_expression(("SE", "*", "SE", "stop")) == parse("SE")


@pytest.mark.parametrize(
    "seq",
    [
        (),
        ("SE", "+"),  # ends with an operation
        ("SE", "+", "LIN", "stop"),  # stop after N_max = 1 operations is implicit
        ("SE", "stop", "LIN"),
        ("SE", "stop", "LIN", "stop"),
        ("FOO", "stop"),
        ("SE", "-", "LIN"),
        ("SE", "SE"),
        ("SE",),  # must stop or reach N_max
    ],
)
def test_validate_sequence_rejects_invalid(seq):
    g = Grammar.from_dict(
        {
            "max_operations": 1,
            "base_kernels": {"SE": 1, "LIN": 1},
            "operations": {"stop": 1, "+": 1},
        }
    )
    with pytest.raises(GrammarError):
        g.validate_sequence(seq)


def test_zero_probability_tokens_are_never_sampled():
    g = Grammar.from_dict(
        {
            "max_operations": 3,
            "base_kernels": {"SE": 1.0, "LIN": 0.0, "PER": 1.0},
            "operations": {"+": 0.0, "*": 1.0, "stop": 1.0},
        }
    )
    assert g.base_kernels == ("SE", "PER")
    tokens = {t for s in g.sample_sequences(2000, np.random.default_rng(0)) for t in s}
    assert tokens == {"SE", "PER", "*", STOP}
    assert g.log_prob(("SE", "+", "PER", "stop")) == -math.inf
    assert all(s[1::2].count("+") == 0 for s in g.enumerate_sequences())


GOOD = """name = "t"
max_operations = 3
[base_kernels]
SE = 1.0
LIN = 1.0
[operations]
"+" = 1.0
"*" = 1.0
stop = 1.0
"""


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("LIN = 1.0", "FOO = 1.0", "base_kernels.FOO"),
        ("LIN = 1.0", "LIN = -0.5", "base_kernels.LIN"),
        ("SE = 1.0\nLIN = 1.0", "SE = 0.0\nLIN = 0.0", "base_kernels"),
        ('"+" = 1.0', '"+" = -1.0', "operations.+"),
        ('"+" = 1.0', '"-" = 1.0', "operations.-"),
        ("max_operations = 3", "max_operations = 0", "max_operations"),
        ("max_operations = 3", "max_operations = 11", "max_operations"),
        ("max_operations = 3", 'max_operations = "5"', "max_operations"),
        ("max_operations = 3\n", "", "max_operations"),
        ("stop = 1.0\n", "", "operations.stop"),
        ("stop = 1.0", "stop = 0.0", "operations.stop"),
        ("SE = 1.0", "SE = true", "base_kernels.SE"),
    ],
)
def test_grammar_file_errors_name_the_file_and_key(tmp_path, old, new, key):
    assert old in GOOD
    path = tmp_path / "bad.toml"
    path.write_text(GOOD.replace(old, new, 1))
    with pytest.raises(GrammarError) as info:
        Grammar.from_file(path)
    message = str(info.value)
    assert str(path) in message
    assert f"[{key}]" in message
    assert "\n" not in message


def test_good_file_loads_and_normalises(tmp_path):
    path = tmp_path / "good.toml"
    path.write_text(GOOD.replace("SE = 1.0", "SE = 3.0"))
    g = Grammar.from_file(path)
    assert g.p_base == pytest.approx((0.75, 0.25))
    assert g.max_operations == 3


def test_bad_toml_and_missing_file_name_the_file(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("name = 'x'\n[base_kernels\nSE = 1\n")
    with pytest.raises(GrammarError, match="broken.toml.*not valid TOML"):
        Grammar.from_file(path)
    with pytest.raises(GrammarError, match="not found"):
        Grammar.from_file(tmp_path / "absent.toml")


def test_content_hash_identifies_the_grammar():
    a, b = small_grammar(2), small_grammar(3)
    assert a.content_hash == small_grammar(2).content_hash
    assert a.content_hash != b.content_hash
    assert Grammar.default().content_hash != Grammar.from_file("seasonal").content_hash


def test_emitted_kernels_are_those_of_positive_prior_in_encoding_order():
    assert Grammar.default().emitted_kernels == ("SE", "LIN", "PER", "RQ")
    assert Grammar.from_file("change").emitted_kernels == ("SE", "LIN", "PER", "RQ", "C")
    # a grammar built in memory (as a VAE's with a masked kernel) may keep a zero prior
    g = Grammar("t", ("SE", "LIN", "PER"), (0.5, 0.0, 0.5), (0.4, 0.3, 0.3), 2)
    assert g.emitted_kernels == ("SE", "PER")


def test_abcd_grammar_adds_white_noise_and_the_centred_periodic_to_the_change_grammar():
    abcd, change = Grammar.from_file("abcd"), Grammar.from_file("change")
    assert abcd.base_kernels == (*change.base_kernels, "WN", "PERC")
    assert abcd.operations == change.operations and abcd.max_operations == change.max_operations
    # every draw is a valid, non-empty expression; WN alone is the white-noise model
    assert str(sequence_expression(("WN", "stop"))) == "WN"
    assert str(sequence_expression(("SE", "+", "WN", "stop"))) == "SE"
    assert str(sequence_expression(("SE", "+", "WN", "*", "LIN", "stop"))) == "LIN*SE + LIN*WN"
    assert str(sequence_expression(("WN", "CP", "C", "stop"))) == "CP(WN, C)"
    rng = np.random.default_rng(0)
    for seq in abcd.sample_sequences(500, rng):
        abcd.validate_sequence(seq)
        e = abcd.to_expression(seq)
        assert e.terms and str(parse(str(e))) == str(e)
