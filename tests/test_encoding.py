"""Tests of the expression encodings r_g (one-hot slots) and r_d (Frobenius distances)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from prolas.encoding import (
    MAX_RD_INPUTS,
    GrammarEncoding,
    base_kernel_matrices,
    canonical_grid,
    distance_features,
    rd_inputs,
    represent,
)
from prolas.errors import GrammarError
from prolas.expr import parse
from prolas.grammar import OPERATIONS, STOP, Grammar, sequence_expression


def small_grammar(n_max: int = 2, ops: dict | None = None) -> Grammar:
    return Grammar.from_dict(
        {
            "name": "enc-test",
            "max_operations": n_max,
            "base_kernels": {"SE": 1.0, "LIN": 1.0, "PER": 2.0, "RQ": 1.0},
            "operations": ops or {"+": 1.0, "*": 1.0, "stop": 1.0},
        }
    )


def test_default_layout_and_length():
    enc = GrammarEncoding(Grammar.default())
    assert enc.length == 39 == (5 + 1) * 4 + 5 * 3
    kinds = [k for k, _, _ in enc.slots]
    assert kinds == ["kernel", "op"] * 5 + ["kernel"]
    offsets = [o for _, o, _ in enc.slots]
    sizes = [s for _, _, s in enc.slots]
    assert offsets == list(np.cumsum([0] + sizes[:-1]))
    assert sum(sizes) == enc.length


def test_encode_is_one_hot_per_active_slot_and_zero_after_stop():
    g = Grammar.default()
    enc = GrammarEncoding(g)
    v = enc.encode(("LIN", "*", "PER", "stop"))
    expected = np.zeros(39)
    expected[[1, 4 + 1, 7 + 2, 11 + 2]] = 1.0
    np.testing.assert_array_equal(v, expected)
    for seq in g.sample_sequences(500, np.random.default_rng(0)):
        v = enc.encode(seq)
        for pos, (_, offset, size) in enumerate(enc.slots):
            assert v[offset : offset + size].sum() == (1.0 if pos < len(seq) else 0.0)


def test_encode_rejects_invalid_sequences():
    enc = GrammarEncoding(small_grammar(1))
    with pytest.raises(GrammarError):
        enc.encode(("SE", "+", "LIN", "stop"))
    with pytest.raises(GrammarError):
        enc.encode(("SE", "+"))


@pytest.mark.parametrize("n_max", [1, 2, 3])
def test_round_trip_over_all_sequences(n_max):
    g = small_grammar(n_max)
    enc = GrammarEncoding(g)
    seqs = g.enumerate_sequences()
    rg = enc.encode_many(seqs)
    assert rg.shape == (len(seqs), enc.length)
    assert len({r.tobytes() for r in rg}) == len(seqs)  # injective
    assert enc.decode_scores(rg) == seqs
    assert enc.decode_scores(torch.from_numpy(rg)) == seqs
    # confident logits: the exact chain mode recovers the sequence too
    assert enc.decode_scores(20.0 * rg, method="mode") == seqs


def _assert_valid(g: Grammar, seqs):
    for s in seqs:
        g.validate_sequence(s)


@pytest.mark.parametrize("method", ["greedy", "mode"])
def test_decode_of_arbitrary_scores_is_always_valid(method):
    g = Grammar.default()
    enc = GrammarEncoding(g)
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(2000, enc.length)) * rng.choice(
        [0.01, 1.0, 1e3, 1e300], size=(2000, 1)
    )
    scores[rng.random(scores.shape) < 0.1] = np.nan
    scores[rng.random(scores.shape) < 0.05] = np.inf
    scores[rng.random(scores.shape) < 0.05] = -np.inf
    scores[:10] = np.nan
    scores[10:20] = -np.inf
    scores[20:30] = np.inf
    seqs = enc.decode_scores(scores, method=method)
    assert len(seqs) == len(scores)
    _assert_valid(g, seqs)


def test_decode_all_nan_falls_back_to_the_prior():
    g = Grammar.from_dict(
        {
            "max_operations": 3,
            "base_kernels": {"SE": 1.0, "PER": 5.0},
            "operations": {"+": 1.0, "*": 2.0, "stop": 4.0},
        }
    )
    enc = GrammarEncoding(g)
    nan = np.full((1, enc.length), np.nan)
    # most probable token per slot under the prior: PER, then stop
    assert enc.decode_scores(nan) == [("PER", STOP)]
    assert enc.decode_scores(nan, method="mode") == [("PER", STOP)]


def test_decode_never_emits_zero_probability_operations():
    g = small_grammar(3, ops={"+": 0.0, "*": 1.0, "stop": 1.0})
    enc = GrammarEncoding(g)
    scores = np.zeros((3, enc.length))
    plus = [o for k, o, _ in enc.slots if k == "op"]
    scores[:, plus] = 100.0  # "+" has the largest score in every op slot
    scores[1, plus] = np.inf
    scores[2] = np.nan
    for method in ("greedy", "mode"):
        seqs = enc.decode_scores(scores, method=method)
        _assert_valid(g, seqs)
        assert all("+" not in s for s in seqs)


def test_greedy_stops_at_the_first_stop_and_mode_maximises_the_chain():
    g = Grammar.default()
    enc = GrammarEncoding(g)
    s = np.full(enc.length, -5.0)
    k = [o for kind, o, _ in enc.slots if kind == "kernel"]
    o = [o for kind, o, _ in enc.slots if kind == "op"]
    for off in k:
        s[off + 1] = 5.0  # LIN in every kernel slot
    s[o[0] + OPERATIONS.index("*")] = 5.0
    s[o[1] + OPERATIONS.index(STOP)] = 5.0
    assert enc.decode_scores(s[None]) == [("LIN", "*", "LIN", STOP)]
    # mode: log-probabilities of the chain; compare with brute force over all sequences
    g = small_grammar(3)
    enc = GrammarEncoding(g)
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(200, enc.length)) * 2.0
    seqs = g.enumerate_sequences()
    onehots = enc.encode_many(seqs)  # (S, L)
    for row, seq in zip(logits, enc.decode_scores(logits, method="mode"), strict=True):
        lp = row.copy()
        for _, off, size in enc.slots:
            block = lp[off : off + size]
            lp[off : off + size] = block - np.log(np.exp(block - block.max()).sum()) - block.max()
        chain = onehots @ lp  # log p of every sequence under the chain
        assert chain[seqs.index(seq)] == pytest.approx(chain.max(), abs=1e-9)


def test_rd_is_zero_against_its_own_base_kernel():
    x = np.linspace(1949.0, 1961.0, 144)
    names = ("SE", "LIN", "PER", "RQ")
    rd = distance_features([parse(n) for n in names], x, names)
    assert rd.shape == (4, 4)
    np.testing.assert_allclose(np.diag(rd), 0.0, atol=1e-6)
    off = rd[~np.eye(4, dtype=bool)]
    assert np.all(off > 0.01)
    np.testing.assert_allclose(rd, rd.T, atol=1e-6)  # a distance between base kernels


def test_rd_finite_nonnegative_and_scale_free():
    g = Grammar.default()
    seqs = g.sample_sequences(1000, np.random.default_rng(0))
    x = np.sort(np.random.default_rng(1).uniform(0, 10, size=100))
    rd = distance_features(seqs, x, g.base_kernels)
    assert rd.shape == (1000, 4)
    assert np.all(np.isfinite(rd)) and np.all(rd >= 0)
    # invariant under shifting and scaling x, and under the order of x
    moved = distance_features(seqs, 1000 + 37.5 * x[::-1], g.base_kernels)
    np.testing.assert_allclose(moved, rd, rtol=1e-6, atol=1e-6)


def test_rd_matches_a_direct_computation():
    x = np.linspace(0, 3, 40)
    names = ("SE", "LIN", "PER", "RQ")
    bases = base_kernel_matrices(x, names)
    for text in ["LIN*PER + SE", "LIN*LIN*RQ + PER*PER", "(SE + PER) * LIN * RQ"]:
        e = parse(text)
        k = sum(np.prod([bases[f] for f in t], axis=0) for t in e.terms)
        k = k / np.mean(np.diag(k))
        direct = [np.linalg.norm(k - bases[b]) / len(x) for b in names]
        np.testing.assert_allclose(distance_features([e], x, names)[0], direct, atol=1e-8)


def test_rd_of_sequences_equals_rd_of_their_expressions_and_dedupes():
    seqs = [("SE", "+", "PER", "*", "LIN", STOP), ("PER", "+", "SE", "*", "LIN", STOP)]
    assert sequence_expression(seqs[0]) == sequence_expression(seqs[1])
    x = canonical_grid(64)
    rd = distance_features(seqs + [sequence_expression(seqs[0])], x)
    np.testing.assert_array_equal(rd[0], rd[1])
    np.testing.assert_array_equal(rd[0], rd[2])


def test_rd_inputs_subsample_deterministically():
    x = np.random.default_rng(0).uniform(size=1000)
    a, b = rd_inputs(x), rd_inputs(x[::-1])
    assert a.size == MAX_RD_INPUTS
    np.testing.assert_array_equal(a, b)
    assert a[0] == x.min() and a[-1] == x.max()
    np.testing.assert_array_equal(rd_inputs(np.arange(10.0)), np.arange(10.0))
    with pytest.raises(ValueError):
        rd_inputs([0.0, np.nan])


def test_represent_concatenates_rg_and_rd():
    g = Grammar.default()
    seqs = [("SE", STOP), ("LIN", "+", "PER", STOP)]
    r = represent(seqs, canonical_grid(50), g)
    assert r.shape == (2, 39 + 4)
    np.testing.assert_array_equal(r[:, :39], GrammarEncoding(g).encode_many(seqs))
    np.testing.assert_allclose(r[:, 39:], distance_features(seqs, canonical_grid(50)))


def test_rd_of_white_noise_and_the_centred_periodic():
    """WN's matrix is the identity (distinct inputs), PERC's has (almost) no constant part
    on the canonical grid; every expression is 0 away from itself in its own column."""
    x = canonical_grid()
    mats = base_kernel_matrices(x, ["WN", "PERC", "PER"])
    np.testing.assert_array_equal(mats["WN"], np.eye(x.size))
    assert abs(mats["PERC"].mean()) < 0.02 < mats["PER"].mean()
    names = ("SE", "LIN", "PER", "RQ", "C", "WN", "PERC")
    rd = distance_features([parse(n) for n in names], x, names)
    np.testing.assert_allclose(np.diag(rd), 0.0, atol=1e-7)
    assert np.all(rd[~np.eye(len(names), dtype=bool)] > 0)
    # SE + WN is SE (the observation noise), so it has SE's features
    same = distance_features([parse("SE + WN"), parse("SE")], x, names)
    np.testing.assert_array_equal(same[0], same[1])
