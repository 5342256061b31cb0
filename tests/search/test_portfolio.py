"""Warm-start portfolio: rank percentiles, greedy coverage, leave-one-series-out, and
the search's use of it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from prolas.data import Dataset
from prolas.errors import GrammarError, ProlasError
from prolas.expr import parse
from prolas.grammar import Grammar, sequence_expression
from prolas.limits import SHORT_SERIES_POINTS
from prolas.records import Score
from prolas.search.config import SearchConfig
from prolas.search.evaluator import Evaluator
from prolas.search.latent import LatentBOConfig, search_prolas
from prolas.search.portfolio import (
    PORTFOLIO_PATH,
    SHORT_PORTFOLIO_PATH,
    BenchmarkScores,
    _rank_percentiles,
    excluded_series,
    library_for,
    warm_start,
)


def _library(bic: list[list[float]], series=("a", "b", "c")) -> BenchmarkScores:
    names = ("SE", "LIN", "PER", "RQ", "SE*SE", "LIN*LIN")[: len(bic)]
    seqs = tuple((*" * ".join(n.split("*")).split(), "stop") for n in names)
    return BenchmarkScores(tuple(series), names, seqs, np.array(bic, dtype=float))


def test_rank_percentiles_are_scale_free_and_average_ties() -> None:
    B = np.array([[1.0, -500.0], [3.0, 7.0], [2.0, 7.0], [0.0, 9.0]])
    S = _rank_percentiles(B)
    assert S.min() >= 0 and S.max() <= 1
    np.testing.assert_allclose(S[:, 0], [1 / 3, 1, 2 / 3, 0])
    np.testing.assert_allclose(S[:, 1], [0, 0.5, 0.5, 1])  # the tied 7s share ranks 1, 2
    # a monotone transform of one series changes nothing
    B2 = B.copy()
    B2[:, 0] = np.exp(B2[:, 0]) * 1000
    np.testing.assert_allclose(_rank_percentiles(B2), S)


def test_greedy_portfolio_follows_its_rule() -> None:
    rng = np.random.default_rng(0)
    lib = _library(rng.normal(size=(6, 3)).tolist())
    picks = lib.select(4)
    S = _rank_percentiles(lib.bic)
    # independent re-computation: each pick maximises mean_d max over the portfolio
    chosen: list[int] = []
    for pick in picks:
        gains = {i: np.mean(np.max(S[chosen + [i]], axis=0)) for i in range(6) if i not in chosen}
        best = max(gains.values())
        assert math.isclose(gains[pick], best)
        chosen.append(pick)
    assert len(set(picks)) == 4


def test_series_weights_generalise_the_mean() -> None:
    rng = np.random.default_rng(1)
    lib = _library(rng.normal(size=(6, 3)).tolist())
    # equal weights (any scale) are the plain mean; no exact ties in random scores
    assert lib.select(4, weights={"a": 2.0, "b": 2.0, "c": 2.0}) == lib.select(4)
    # all weight on one series: the first pick is that series' best expression
    for j, name in enumerate(lib.series):
        only = {s: float(s == name) for s in lib.series}
        assert lib.select(1, weights=only) == [int(np.argmax(lib.bic[:, j]))]
    # weights of a left-out series are ignored; bad weights are a clear error
    assert lib.select(3, ("a",), weights={"a": 0.0, "b": 1.0, "c": 1.0}) == lib.select(3, ("a",))
    with pytest.raises(ProlasError, match="weights"):
        lib.select(2, weights={"a": -1.0, "b": 1.0, "c": 1.0})
    with pytest.raises(ProlasError, match="weights"):
        lib.select(2, ("a",), weights={"a": 1.0, "b": 0.0, "c": 0.0})


def test_second_pick_covers_the_series_the_first_serves_badly() -> None:
    # SE is the best all-rounder; LIN is best on c, where SE is worst
    lib = _library(
        [
            [9.0, 9.0, 0.0],  # SE
            [0.0, 0.0, 9.0],  # LIN
            [8.0, 8.0, 1.0],  # PER: second-best all-rounder, adds little to SE
            [1.0, 1.0, 2.0],  # RQ
        ]
    )
    assert lib.select(2) == [0, 1]


def test_left_out_series_does_not_inform_the_ranking() -> None:
    # on "a" alone SE would win; with "a" left out, LIN is the best on b and c
    lib = _library([[100.0, 3.0, 3.0], [0.0, 5.0, 5.0], [1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    assert lib.select(1) == [0]
    assert lib.select(1, exclude=("a",)) == [1]
    # a candidate missing only on the left-out series stays eligible, else it does not
    lib = _library([[math.nan, 9.0, 9.0], [0.0, 1.0, 1.0]])
    assert lib.select(2) == [1]
    assert lib.select(1, exclude=("a",)) == [0]


def test_a_dataset_never_warm_starts_itself() -> None:
    series = ("airline", "mauna", "call-centre")
    assert excluded_series("airline", series) == ("airline",)
    assert excluded_series("airline_train", series) == ("airline",)
    assert excluded_series("mauna (thinned to 200 of 545)", series) == ("mauna",)
    assert excluded_series("my_airline", series) == ()
    assert excluded_series("call", series) == ()
    assert excluded_series(None, series) == ()


def test_shipped_library_sequences_produce_their_expressions() -> None:
    lib = BenchmarkScores.load()
    g = Grammar.default()
    assert len(lib.series) == 9 and len(lib.expressions) > 100
    assert lib.bic.shape == (len(lib.expressions), 9)
    for expr, seq in zip(lib.expressions, lib.sequences):
        g.validate_sequence(seq)
        assert str(sequence_expression(seq)) == expr == str(parse(expr))
    # every series leaves a full candidate set behind
    for s in lib.series:
        assert len(lib.select(10, exclude=(s,))) == 10


def test_corrupt_library_is_a_clear_error(tmp_path) -> None:
    bad = tmp_path / "lib.json"
    bad.write_text(json.dumps({"series": ["a"], "expressions": [{"expression": "SE"}]}))
    with pytest.raises(ProlasError, match="cannot read portfolio library"):
        BenchmarkScores.load(bad)
    with pytest.raises(ProlasError, match="warm_start must be"):
        LatentBOConfig(warm_start=-1)


@pytest.fixture(scope="module")
def trained():
    from prolas.vae import load_checkpoint

    return load_checkpoint("default")


def _named(name: str, n: int = 20) -> Dataset:
    x = np.linspace(0.0, 1.0, n)
    return Dataset.from_arrays(x, np.sin(6 * x), name=name)


def _ranked_in(grammar: Grammar, lib: BenchmarkScores, left_out: tuple[str, ...]) -> list[str]:
    """The library's ranking without ``left_out``, kept to ``grammar``'s search space."""
    out = []
    for i in lib.select(len(lib.expressions), left_out):
        try:
            grammar.validate_sequence(lib.sequences[i])
        except GrammarError:
            continue
        if math.isfinite(grammar.log_prob(lib.sequences[i])):
            out.append(lib.expressions[i])
    return out


def test_a_short_series_ranks_on_the_short_library() -> None:
    assert library_for(SHORT_SERIES_POINTS - 1) == library_for(48) == SHORT_PORTFOLIO_PATH
    assert library_for(SHORT_SERIES_POINTS) == library_for(400) == PORTFOLIO_PATH
    assert library_for(None) == PORTFOLIO_PATH  # no data set: the nine series' library
    # the split is the shipped library's shortest series (airline's 144 points): each of
    # the nine benchmark series still ranks on the library it is a column of
    assert min(json.loads(PORTFOLIO_PATH.read_text())["n_points"]) == SHORT_SERIES_POINTS


def test_short_library_holds_only_the_m3_tuning_half() -> None:
    """The report half must never inform a search (it scores the choice), and every
    library series must be shorter than the split, or it would rank for the other class."""
    from pathlib import Path

    from prolas.bench.forecast_bench import suite_series

    data = Path(__file__).resolve().parents[2] / "data"
    halves = {s.name: h for s, h in suite_series("m3-monthly", data)}
    doc = json.loads(SHORT_PORTFOLIO_PATH.read_text())
    lib = BenchmarkScores.load(SHORT_PORTFOLIO_PATH)
    assert len(lib.series) == 75 and {halves[s] for s in lib.series} == {"tuning"}
    assert max(doc["n_points"]) < SHORT_SERIES_POINTS
    change = Grammar.from_file("change")
    for expr, seq in zip(lib.expressions, lib.sequences):
        change.validate_sequence(seq)
        assert str(sequence_expression(seq)) == expr == str(parse(expr))
    for s in lib.series:  # a tuning series leaves a full candidate set behind
        assert len(lib.select(10, exclude=excluded_series(s, lib.series))) == 10


def test_warm_start_of_a_short_series_leaves_it_out_of_the_short_library() -> None:
    change = Grammar.from_file("change")
    lib = BenchmarkScores.load(SHORT_PORTFOLIO_PATH)
    name = lib.series[0]
    messages: list[str] = []
    picked = warm_start(change, 5, lambda e: False, name, log=messages.append, n_points=60)
    assert [str(e) for _, e in picked] == _ranked_in(change, lib, (name,))[:5]
    assert messages == [
        f"warm start: 5 portfolio expressions ranked on 74 series of "
        f"{SHORT_PORTFOLIO_PATH.name} (left out: {name})"
    ]
    # the short library's portfolio is not the long one's
    long = warm_start(change, 5, lambda e: False, name, n_points=SHORT_SERIES_POINTS)
    assert [str(e) for _, e in long] == _ranked_in(change, BenchmarkScores.load(), ())[:5]
    assert [str(e) for _, e in long] != [str(e) for _, e in picked]


@pytest.mark.parametrize(
    ("name", "n", "short_library", "path"),
    [
        ("airline", 150, True, PORTFOLIO_PATH),
        ("my-series", 150, True, PORTFOLIO_PATH),
        ("my-series", 20, True, SHORT_PORTFOLIO_PATH),
        ("my-series", 20, False, PORTFOLIO_PATH),
    ],
)
def test_search_starts_with_the_base_kernels_then_the_left_out_portfolio(
    trained, name: str, n: int, short_library: bool, path
) -> None:
    lib = BenchmarkScores.load(path)
    base = list(trained.grammar.emitted_kernels)
    assert base == ["SE", "LIN", "PER", "RQ"]  # the default grammar: no C
    # the portfolio skips what the search has fitted: the base kernels
    ranked = _ranked_in(trained.grammar, lib, excluded_series(name, lib.series))
    expected = [e for e in ranked if e not in base][:4]
    ev = Evaluator(lambda e: Score(str(e), "ok", -e.n_params, -e.n_params, e.n_params, 0.0), 10)
    # a short series' default design is the base kernels and the greedy opening, with
    # no warm start: the 9-point design is asked for on every series here
    options = LatentBOConfig(
        warm_start=4,
        n_init=9,
        pool_sobol=128,
        pool_local=128,
        short_library=short_library,
        short_opening=0,
        short_n_init=0,
    )
    data = _named(name, n)
    res = search_prolas(ev, data, SearchConfig(budget=10), trained=trained, options=options)
    assert [e.expression for e in res.history[:4]] == base
    first = [e.expression for e in res.history[4:8]]
    assert first == expected
    assert res.evaluations == 10 and len({e.expression for e in res.history}) == 10
    # a budget below the number of base kernels is spent on the first of them
    ev = Evaluator(lambda e: Score(str(e), "ok", -e.n_params, -e.n_params, e.n_params, 0.0), 3)
    res = search_prolas(ev, data, SearchConfig(budget=3), trained=trained, options=options)
    assert [e.expression for e in res.history] == base[:3]
    if name == "airline":  # leaving airline out changes the shipped portfolio
        assert first != [lib.expressions[i] for i in lib.select(4)]


def test_warm_start_keeps_only_expressions_of_the_search_grammar(trained) -> None:
    import copy

    from prolas.search.latent import _LatentSearch

    # the same VAE, but the search's grammar allows at most 3 operations
    small = copy.copy(trained)
    small.grammar = Grammar.from_file("small")
    lib = BenchmarkScores.load()
    ranked = [lib.sequences[i] for i in lib.select(10, ("airline",))]
    n_ops = [sum(t in ("+", "*") for t in q) for q in ranked]
    assert max(n_ops) > small.grammar.max_operations == 3  # the plain portfolio has longer ones
    ev = Evaluator(lambda e: Score(str(e), "ok", 0.0, 0.0, e.n_params, 0.0), 10)
    state = _LatentSearch(ev, small, LatentBOConfig(), 0, 1, lambda s: None, "airline")
    points = state.warm_start_points(10)
    assert len(points) == 10
    for _, e in points:
        seq = state.sequence_of[str(e)]
        small.grammar.validate_sequence(seq)
        assert str(sequence_expression(seq)) == str(e)


def test_portfolio_reproduces_the_committed_benchmarks_warm_start() -> None:
    """The committed airline/mauna grids started from these portfolios: a change of the
    ranking code (e.g. the memory layout of the percentiles, which decides float ties in
    the coverage gain) must not silently change them."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    lib = BenchmarkScores.load()
    for cell, name in [
        (root / "search_airline" / "cells" / "airline__prolas__seed0.json", "airline"),
        (root / "search_other_series" / "cells" / "mauna__prolas__seed0.json", "mauna"),
    ]:
        history = json.loads(cell.read_text())["history"]
        started = [h["expression"] for h in history[:10]]
        assert started == [lib.expressions[i] for i in lib.select(10, (name,))]


@pytest.mark.slow
def test_build_portfolio_keeps_expressions_fitted_on_all_series_but_one(tmp_path) -> None:
    import runpy
    import sys
    from pathlib import Path

    def row(expr: str, bic: float, ok: bool = True) -> str:
        fit = {"status": "ok" if ok else "failed", "n": 50, "best": {"bic": bic}}
        return json.dumps({"key": "k", "expression": expr, "fit": fit})

    caches = {
        "a": [row("SE", 1.0), row("LIN", 2.0), row("PER", 3.0), row("LIN*SE", 4.0)],
        "b": [row("SE", 5.0), row("LIN", 6.0), row("LIN*SE", 1.0, ok=False)],
        "c": [row("SE", 7.0), row("RQ", 8.0), row("SE", 9.0)],  # a refit: the best counts
    }
    # a change-point (its sequence from the change grammar) on all three series
    for name, bic in zip(caches, (0.5, 0.5, 0.5)):
        caches[name].append(row("CP(SE, LIN)", bic))
    paths = []
    for name, rows in caches.items():
        paths.append(tmp_path / f"{name}.jsonl")
        paths[-1].write_text("\n".join(rows) + "\n")
    out = tmp_path / "lib.json"
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "scripts" / "build_portfolio.py"
    argv = sys.argv
    sys.argv = [str(script), *map(str, paths), "--out", str(out)]
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = argv
    lib = BenchmarkScores.load(out)
    assert lib.series == ("a", "b", "c")
    # CP(SE, LIN) and SE on all three, LIN on two; PER, RQ and LIN*SE (its fit on b
    # failed) on one
    assert lib.expressions == ("CP(SE, LIN)", "LIN", "SE")
    assert lib.sequences[0] == ("SE", "CP", "LIN", "stop")
    lib = BenchmarkScores(lib.series, lib.expressions[1:], lib.sequences[1:], lib.bic[1:])
    np.testing.assert_array_equal(lib.bic[1], [1.0, 5.0, 9.0])
    assert np.isnan(lib.bic[0, 2]) and lib.sequences[0] == ("LIN", "stop")
    assert lib.select(2, ("c",)) == [0, 1]  # LIN beats SE on a and b
    assert lib.select(2) == [1]  # LIN has no score on c
