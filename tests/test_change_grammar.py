"""Tests of the change-operator grammar (issue 17): CP/CW tokens in sequences, their
encoding (r_g layout, r_d with C and transition factors), the OT distance and the
structural surrogates on expressions with change operators."""

from __future__ import annotations

import json
import math
import warnings
from collections import Counter

import numpy as np
import pytest
import torch
from conftest import assert_ot_pseudometric
from scipy.special import expit
from scipy.stats import chisquare

from prolas.encoding import (
    RD_CHANGE_HYPERPARAMETERS,
    GrammarEncoding,
    base_kernel_matrices,
    canonical_grid,
    distance_features,
    represent,
)
from prolas.errors import GrammarError, NumericsWarning
from prolas.expr import CP, CW, LIN, PER, RQ, SE, C, parse
from prolas.grammar import (
    ALL_OPERATIONS,
    GRAMMARS_DIR,
    OPERATIONS,
    STOP,
    Grammar,
    sequence_expression,
)
from prolas.search.evaluator import Evaluator, TableScorer
from prolas.search.structural import search_structural
from prolas.surrogates import SURROGATES, ExpressionRegistry, OTConfig, StructuralSurrogate
from prolas.surrogates.acquisition import (
    mutate,
    neighbours,
    optimise_acquisition,
    sequence_edits,
)
from prolas.surrogates.ot import expression_graph
from prolas.surrogates.space import ConditionalSpace
from prolas.vae import CHECKPOINTS_DIR

CHANGE = Grammar.from_file("change")


def tiny_change_grammar(n_max: int = 2) -> Grammar:
    """Non-uniform priors, small enough to enumerate."""
    return Grammar.from_dict(
        {
            "name": "tiny-change",
            "max_operations": n_max,
            "base_kernels": {"SE": 1.0, "LIN": 2.0, "C": 1.0},
            "operations": {"+": 1.0, "*": 2.0, "cp": 1.5, "CW": 0.5, "stop": 2.0},
        }
    )


# --- grammar ------------------------------------------------------------------------------
def test_change_grammar_file_lists_its_kernels_and_operations():
    g = CHANGE
    assert g.name == "change" and g.max_operations == 5
    assert set(g.base_kernels) == {"SE", "LIN", "PER", "RQ", "C"}
    assert g.operations == ("+", "*", "CP", "CW", STOP) == ALL_OPERATIONS
    p = dict(zip(g.operations, g.p_op))
    assert p["CP"] < p["+"] and p["CW"] < p["*"]  # changes are rarer than + and *
    assert g.has_change and g.stop_index == 4
    assert Grammar.from_file(GRAMMARS_DIR / "change.toml") == g


def test_grammars_without_change_operations_keep_their_encoding_and_hash():
    for name in ("default", "seasonal"):
        g = Grammar.from_file(name)
        assert g.operations == OPERATIONS and not g.has_change
        meta = json.loads((CHECKPOINTS_DIR / f"{name}.json").read_text())
        assert g.content_hash == meta["grammar"]["hash"]
        assert GrammarEncoding(g).layout() == meta["encoding"]["rg"]
    assert Grammar.default().content_hash == "a8202dc048e59348"
    # listing a change operation with probability 0 is the same grammar as omitting it
    table = {
        "name": "default",
        "max_operations": 5,
        "base_kernels": {"SE": 1, "LIN": 1, "PER": 1, "RQ": 1, "C": 0},
        "operations": {"+": 1, "*": 1, "stop": 1, "CP": 0},
    }
    zero = Grammar.from_dict(table)
    assert zero.operations == OPERATIONS
    assert zero.content_hash == Grammar.default().content_hash


def test_change_operation_frequencies_match_p_op():
    g = CHANGE
    seqs = g.sample_sequences(20_000, np.random.default_rng(2024))
    counts = Counter(o for s in seqs for o in s[1::2])
    observed = np.array([counts[o] for o in g.operations])
    expected = np.array(g.p_op) * observed.sum()
    assert chisquare(observed, expected).pvalue > 1e-3
    kcounts = Counter(k for s in seqs for k in s[0::2])
    observed = np.array([kcounts[k] for k in g.base_kernels])
    assert chisquare(observed, np.array(g.p_base) * observed.sum()).pvalue > 1e-3


def test_change_grammar_log_prob_sums_to_one_and_matches_sampling():
    for n_max in (1, 2):
        g = tiny_change_grammar(n_max)
        seqs = g.enumerate_sequences()
        assert len(set(seqs)) == len(seqs)
        assert sum(math.exp(g.log_prob(s)) for s in seqs) == pytest.approx(1.0, abs=1e-12)
    g = tiny_change_grammar(1)
    seqs = g.enumerate_sequences()
    counts = Counter(g.sample_sequences(20_000, np.random.default_rng(7)))
    observed = np.array([counts[s] for s in seqs])
    expected = np.array([math.exp(g.log_prob(s)) for s in seqs]) * 20_000
    assert chisquare(observed, expected).pvalue > 1e-3
    # p(LIN) p(cp) p(SE) p(stop) = 2/4 * 1.5/7 * 1/4 * 2/7
    assert tiny_change_grammar(2).log_prob(("LIN", "CP", "SE", STOP)) == pytest.approx(
        math.log(2 / 4 * 1.5 / 7 * 1 / 4 * 2 / 7)
    )


def test_change_sequences_apply_left_to_right():
    g = CHANGE
    assert g.to_expression(("SE", "CP", "LIN", STOP)) == CP(SE, LIN)
    assert g.to_expression(("SE", "CW", "C", STOP)) == CW(SE, C)
    # S <- CW(S, K) after S <- S + K; then a product distributes over the change
    seq = ("SE", "+", "PER", "CW", "LIN", "*", "RQ", STOP)
    assert g.to_expression(seq) == CW(SE + PER, LIN) * RQ
    assert str(g.to_expression(seq)) == "CW(PER*RQ + RQ*SE, LIN*RQ)"
    # nested changes, and a sum after a change is a new additive item
    seq = ("LIN", "CP", "PER", "CP", "SE", "+", "C", STOP)
    assert g.to_expression(seq) == parse("CP(CP(LIN, PER), SE) + C")
    assert sequence_expression(seq) is sequence_expression(seq)
    g.validate_sequence(seq)
    with pytest.raises(GrammarError, match="not in grammar default"):
        Grammar.default().validate_sequence(("SE", "CP", "LIN", STOP))
    with pytest.raises(GrammarError, match="C"):
        Grammar.default().validate_sequence(("SE", "+", "C", STOP))


def test_a_checkpoint_for_another_grammar_names_the_shipped_one():
    from prolas.errors import CheckpointError
    from prolas.vae import load_checkpoint

    with pytest.raises(CheckpointError, match="shipped checkpoint 'change' was trained for it"):
        load_checkpoint("default", grammar=CHANGE)


def _old_sequence_to_expression(seq):
    """The term-based construction the grammar used before change operations."""
    terms = [(seq[0],)]
    for op, k in zip(seq[1::2], seq[2::2], strict=False):
        if op == "+":
            terms.append((k,))
        elif op == "*":
            terms = [t + (k,) for t in terms]
    return " + ".join(sorted({"*".join(sorted(set_collapse(t))) for t in terms}))


def set_collapse(term):
    """SE*SE -> SE (the only idempotent kernel of the default grammar)."""
    out = sorted(term)
    return [f for i, f in enumerate(out) if not (f == "SE" and i and out[i - 1] == "SE")]


def test_one_sequence_to_expression_function_gives_the_old_canonical_strings():
    small = Grammar.from_file("small")
    for seq in small.enumerate_sequences():
        assert str(sequence_expression(seq)) == _old_sequence_to_expression(seq)
        assert small.to_expression(seq) is sequence_expression(seq)
    for seq in Grammar.default().sample_sequences(3000, np.random.default_rng(3)):
        assert str(sequence_expression(seq)) == _old_sequence_to_expression(seq)


def test_sequences_sharing_a_prefix_build_the_expression_of_the_left_to_right_fold():
    """sequence_expression builds on cached prefixes; the result is the definition's
    fold S <- S op K (stopping at a stop, ignoring an op without its K) to the tree:
    same canonical form and same structure as written, including change operators."""
    from prolas.expr import Base
    from prolas.grammar import _apply

    def fold(seq):
        expr = Base(seq[0])
        for op, k in zip(seq[1::2], seq[2::2], strict=False):
            if op == STOP:
                break
            expr = _apply(op, expr, Base(k))
        return expr

    rng = np.random.default_rng(11)
    kernels, ops = ["SE", "LIN", "PER", "RQ", "C"], ["+", "*", "CP", "CW", STOP]
    for _ in range(3000):
        n = int(rng.integers(1, 14))  # even lengths end in an op without its K
        seq = tuple(str(rng.choice(kernels if i % 2 == 0 else ops)) for i in range(n))
        built, folded = sequence_expression(seq), fold(seq)
        assert built.items == folded.items and built.tree_str() == folded.tree_str(), seq
    # a shared prefix is one object, so its canonical items are computed once
    a = sequence_expression(("SE", "+", "PER", "*", "LIN", "+", "RQ"))
    b = sequence_expression(("SE", "+", "PER", "*", "LIN", "CP", "C"))
    assert a.operands[0] is b.a


# --- encoding -------------------------------------------------------------------------------
def test_change_layout_and_round_trip():
    enc = GrammarEncoding(CHANGE)
    assert enc.length == 55 == (5 + 1) * 5 + 5 * 5
    assert enc.layout()["op_tokens"] == ["+", "*", "CP", "CW", "stop"]
    v = enc.encode(("LIN", "CW", "C", STOP))
    lin, c = CHANGE.base_kernels.index("LIN"), CHANGE.base_kernels.index("C")
    expected = np.zeros(55)
    expected[[lin, 5 + 3, 10 + c, 15 + 4]] = 1.0
    np.testing.assert_array_equal(v, expected)
    seqs = CHANGE.sample_sequences(3000, np.random.default_rng(5))
    assert any("CP" in s for s in seqs) and any("CW" in s for s in seqs)
    r = enc.encode_many(seqs)
    assert enc.decode_scores(r) == seqs
    # one-hot inputs as logits: the mode of the chain decodes the same expressions
    logits = np.where(r > 0, 5.0, -5.0)
    assert enc.decode_scores(logits, method="mode") == seqs
    for method in ("greedy", "mode"):
        noise = np.random.default_rng(6).normal(size=(500, 55)) * 3
        for s in enc.decode_scores(noise, method=method):
            CHANGE.validate_sequence(s)


def test_decode_never_emits_change_operations_of_a_grammar_without_them():
    enc = GrammarEncoding(Grammar.default())
    scores = np.random.default_rng(0).normal(size=(300, enc.length))
    for s in enc.decode_scores(scores):
        assert not set(s) & {"CP", "CW", "C"}
    # a change grammar with CW at probability 0 has no CW slot at all
    g = Grammar.from_dict(
        {
            "name": "cp-only",
            "max_operations": 2,
            "base_kernels": {"SE": 1, "LIN": 1},
            "operations": {"+": 1, "*": 1, "CP": 1, "CW": 0, "stop": 1},
        }
    )
    assert g.operations == ("+", "*", "CP", STOP)
    assert GrammarEncoding(g).length == 3 * 2 + 2 * 4


def _direct_rd(expr, x, names):
    """r_d from the convention formulas, one expression at a time (no Gram-matrix tricks)."""
    u = (x - x.min()) / (x.max() - x.min())
    bases = base_kernel_matrices(x, names)
    cp, cw = RD_CHANGE_HYPERPARAMETERS["CP"], RD_CHANGE_HYPERPARAMETERS["CW"]
    s = expit((u - cp["location"]) / cp["width"])
    w = expit((u - cw["start"]) / cw["width"]) * (1 - expit((u - cw["end"]) / cw["width"]))

    def matrix(items):
        k = np.zeros((len(x), len(x)))
        for item in items:
            if hasattr(item, "op"):
                g = s if item.op == "CP" else w
                ka, kb = matrix(item.a), matrix(item.b)
                k += np.outer(1 - g, 1 - g) * ka + np.outer(g, g) * kb
            else:
                k += np.prod([bases[f] for f in item], axis=0)
        return k

    k = matrix(expr.items)
    k = k / np.mean(np.diag(k))
    return np.array([np.linalg.norm(k - bases[b]) / len(x) for b in names])


def test_rd_handles_c_and_change_operators_like_a_direct_computation():
    x = np.linspace(3.0, 9.0, 45)
    names = CHANGE.base_kernels
    texts = [
        "C",
        "CP(SE, LIN)",
        "CP(LIN, SE)",
        "CW(SE, LIN)",
        "CW(SE, C) + PER",
        "CP(CW(LIN, PER*SE), RQ) + C",
        "CP(SE, LIN) + CP(SE, PER)",  # two terms with the same factor kinds
        "CP(SE + LIN, SE) * PER",
    ]
    exprs = [parse(t) for t in texts]
    rd = distance_features(exprs, x, names)
    assert np.all(np.isfinite(rd)) and np.all(rd >= 0)
    for e, row in zip(exprs, rd, strict=True):
        np.testing.assert_allclose(row, _direct_rd(e, x, names), atol=1e-8)
    assert rd[0, names.index("C")] == pytest.approx(0.0, abs=1e-6)
    # CP(SE, LIN), CP(LIN, SE) and CW(SE, LIN) are told apart
    assert len({tuple(np.round(r, 6)) for r in rd[1:4]}) == 3
    # as with every r_d: independent of a shift and scaling of x
    np.testing.assert_allclose(distance_features(exprs, 5 * x - 2, names), rd, atol=1e-8)


def test_represent_change_sequences():
    seqs = [("SE", "CP", "LIN", STOP), ("C", "CW", "PER", "+", "SE", STOP)]
    r = represent(seqs, canonical_grid(40), CHANGE)
    assert r.shape == (2, 55 + 5)
    np.testing.assert_array_equal(r[:, :55], GrammarEncoding(CHANGE).encode_many(seqs))


# --- OT distance ----------------------------------------------------------------------------
def test_ot_graph_has_side_and_operator_nodes_for_a_change():
    cfg = OTConfig()
    g = expression_graph("CP(SE, LIN*PER) + C", cfg)
    labels = [cfg.labels[i] for i in g.labels]
    assert sorted(labels) == sorted(
        ["ip", "op", "SE", "LIN", "PER", "C", "*", "CP_BEFORE", "CP_AFTER", "CP", "+"]
    )
    # node order is topological
    assert all(u < v for u, v in g.edges)
    lab = {cfg.labels[g.labels[i]]: i for i in range(len(labels))}
    assert (lab["CP_BEFORE"], lab["CP"]) in g.edges and (lab["CP_AFTER"], lab["CP"]) in g.edges
    assert (lab["SE"], lab["CP_BEFORE"]) in g.edges and (lab["*"], lab["CP_AFTER"]) in g.edges
    assert g.masses[lab["CP"]] == 2 * cfg.op_mass and g.masses[lab["CP_AFTER"]] == cfg.op_mass


def test_ot_distance_laws_with_change_nodes():
    rng = np.random.default_rng(11)
    exprs = [CHANGE.sample(rng) for _ in range(40)]
    exprs += [parse("CP(SE, LIN)"), parse("CW(SE, LIN)"), parse("SE + LIN"), parse("C")]
    assert sum(e.has_change for e in exprs) >= 10
    assert_ot_pseudometric(exprs)
    reg = ExpressionRegistry()
    # a change-point is closer to a change-window than to a sum, and both beat a product
    i = reg.indices(["CP(SE, LIN)", "CW(SE, LIN)", "SE + LIN", "LIN*SE", "CP(SE, PER)"])
    dd, _ = reg.distances(i, i)
    assert 0 < dd[0, 1] < dd[0, 2] < dd[0, 3]
    assert 0 < dd[0, 4]
    # the graph view's known degeneracy: which side a leaf is on is not seen
    a, b = reg.indices(["CP(SE, LIN)", "CP(LIN, SE)"])
    assert reg.distances([a], [b])[0][0, 0] == pytest.approx(0.0, abs=1e-12)


def test_ot_distances_without_change_operators_are_unchanged():
    """Values computed with the flat graph construction of before change operators."""
    reg = ExpressionRegistry()
    exprs = ["SE", "RQ", "PER", "SE + PER", "LIN*PER", "LIN*PER*SE + LIN*SE", "PER*RQ + RQ + SE"]
    i = reg.indices(exprs)
    d, db = reg.distances(i, i)
    expected = np.array(
        [
            [0.0, 0.2, 0.6, 2.7, 3.3, 9.6],
            [0.2, 0.0, 0.7, 2.9, 3.4, 9.8],
            [0.6, 0.7, 0.0, 2.7, 2.7, 9.6],
            [2.7, 2.9, 2.7, 0.0, 1.4, 7.5],
            [3.3, 3.4, 2.7, 1.4, 0.0, 7.5],
            [9.6, 9.8, 9.6, 7.5, 7.5, 0.0],
        ]
    )
    np.testing.assert_allclose(d[:6, :6], expected, atol=1e-9)
    last = [6.92361111111, 6.92361111111, 7.17361111111, 4.63194444444, 5.67083333333]
    np.testing.assert_allclose(d[6, :5], last, atol=1e-9)
    np.testing.assert_allclose(d[6, 5], 4.74097222222, atol=1e-9)
    np.testing.assert_allclose(
        db[6],
        [
            0.769290123457,
            0.769290123457,
            0.797067901235,
            0.406310916179,
            0.497441520468,
            0.263387345679,
            0.0,
        ],
        atol=1e-9,
    )


# --- structural surrogates and acquisition ----------------------------------------------------
def test_space_mutations_neighbours_and_edits_cover_change_operations():
    space = ConditionalSpace.from_grammar(CHANGE)
    assert space.slots[1].choices == CHANGE.operations
    seq = ("SE", "CW", "LIN", STOP)
    assert space.decode(space.encode([seq])[0]) == seq
    rng = np.random.default_rng(0)
    mutants = [mutate(seq, CHANGE, rng) for _ in range(300)]
    for m in mutants:
        CHANGE.validate_sequence(m)
    ops_seen = {o for m in mutants for o in m[1::2]}
    assert {"CP", "CW", "+", "*"} <= ops_seen
    nb = neighbours(seq, CHANGE)
    assert ("SE", "CP", "LIN", STOP) in nb and ("SE", "CW", "LIN", "CP", "PER", STOP) in nb
    edits = sequence_edits(seq, CHANGE)
    assert ("SE", "CW", "LIN", "CP", "RQ", STOP) in edits and ("SE", "*", "LIN", STOP) in edits
    # the default grammar never gets change operations from these moves
    d = Grammar.default()
    for s in [mutate(("SE", "+", "LIN", STOP), d, rng) for _ in range(100)]:
        assert not set(s[1::2]) & {"CP", "CW"}
    out = optimise_acquisition(
        "ea",
        lambda ss: np.array([float(sum(o in ("CP", "CW") for o in s)) for s in ss]),
        CHANGE,
        rng,
        n=3,
    )
    assert all(any(o in ("CP", "CW") for o in s) for s in out)


@pytest.mark.parametrize("name", SURROGATES)
def test_every_surrogate_fits_change_grammar_sequences(name):
    rng = np.random.default_rng(12)
    seqs = list(dict.fromkeys(CHANGE.sample_sequences(60, rng)))[:36]
    y = [1.5 * sum(o in ("CP", "CW") for o in s) - 0.3 * len(s) for s in seqs]
    s = StructuralSurrogate(name, CHANGE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        fit = s.fit(seqs[:28], y[:28])
        mu, var = fit.predict(s.encode(seqs[28:]))
        lei = fit.log_ei(s.encode(seqs[28:]), max(y[:28]))
    assert torch.all(torch.isfinite(mu)) and torch.all(var > 0) and torch.all(torch.isfinite(lei))


@pytest.mark.parametrize("surrogate", ["ot", "hierarchical"])
def test_structural_search_runs_on_the_change_grammar(surrogate):
    table = {"CP(LIN, PER)": 10.0, "CW(SE, C)": 5.0, "SE": 1.0}
    ev = Evaluator(TableScorer(table, default=0.0), budget=12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        res = search_structural(ev, CHANGE, surrogate=surrogate, n_init=6, seed=0)
    assert res.evaluations == 12
    assert any(parse(e.expression).has_change for e in ev.history)
