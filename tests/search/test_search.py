"""Evaluator semantics, greedy CKS and random search (synthetic and real scores)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from prolas.data import Dataset
from prolas.expr import parse
from prolas.gp import FitConfig, GPScorer
from prolas.grammar import Grammar
from prolas.records import Score
from prolas.search.evaluator import BudgetExhausted, Evaluator, TableScorer
from prolas.search.greedy import expand, search_cks
from prolas.search.random_search import search_random


def test_evaluator_caches_counts_and_enforces_budget() -> None:
    ev = Evaluator(TableScorer({"SE": 1.0, "PER": 2.0}), budget=2)
    a = ev.evaluate(parse("SE"))
    assert (a.index, a.cached, ev.n_unique) == (1, False, 1)
    again = ev.evaluate(parse("se*se"))  # same canonical model
    assert again.cached and ev.n_unique == 1 and ev.cache_hits == 1
    ev.evaluate(parse("PER"))
    assert ev.exhausted
    with pytest.raises(BudgetExhausted):
        ev.evaluate(parse("RQ"))
    assert ev.evaluate(parse("PER")).bic == 2.0  # cached repeats still answer
    assert [e.index for e in ev.history] == [1, 2]


def test_evaluate_many_records_within_budget_then_raises() -> None:
    ev = Evaluator(TableScorer({}), budget=3)
    with pytest.raises(BudgetExhausted):
        ev.evaluate_many([parse(e) for e in ("SE", "LIN", "SE", "PER", "RQ")])
    assert [e.expression for e in ev.history] == ["SE", "LIN", "PER"]


def test_failed_and_raising_scorers_are_recorded_not_fatal() -> None:
    def boom(expr):
        if str(expr) == "RQ":
            raise RuntimeError("worker died")
        return TableScorer({}, fail=frozenset({"PER"}))(expr)

    ev = Evaluator(boom, budget=4)
    out = ev.evaluate_many([parse(e) for e in ("SE", "PER", "RQ", "LIN")])
    assert [e.status for e in out] == ["ok", "failed", "failed", "ok"]
    assert out[1].bic is None and out[1].error
    assert "worker died" in out[2].error
    assert ev.best.expression in ("SE", "LIN")


def test_executor_results_keep_proposal_order() -> None:
    import time

    def slow_first(expr):
        if str(expr) == "SE":
            time.sleep(0.2)
        return Score(str(expr), "ok", 1.0, 1.0, expr.n_params, 0.0)

    with ThreadPoolExecutor(2) as pool:
        ev = Evaluator(slow_first, budget=3, executor=pool)
        ev.evaluate_many([parse("SE"), parse("PER"), parse("LIN")])
    assert [e.expression for e in ev.history] == ["SE", "PER", "LIN"]
    assert [e.index for e in ev.history] == [1, 2, 3]


def test_cks_expansion_operators() -> None:
    out = {str(e) for e in expand(parse("LIN*PER"), ["SE", "LIN", "PER", "RQ"])}
    assert {"LIN*PER + SE", "LIN*PER*SE", "LIN*LIN*PER", "LIN*PER*PER", "LIN*RQ"} <= out
    assert "PER*SE" in out and "LIN*PER" not in out  # replacement; never itself


def test_cks_greedy_path_on_synthetic_scores() -> None:
    # PER -> LIN + PER (S + B) -> LIN*SE + PER*SE ((S) * B); LIN + PER*SE is not a
    # neighbour of LIN + PER (operations act on the whole expression S), so its high
    # score is never seen.
    table = {"SE": 1.0, "PER": 2.0, "LIN + PER": 5.0, "LIN*SE + PER*SE": 9.0, "LIN + PER*SE": 99}
    ev = Evaluator(TableScorer(table), budget=200)
    result = search_cks(ev, depth=5)
    assert result.best.expression == "LIN*SE + PER*SE"
    assert "LIN + PER*SE" not in {e.expression for e in result.history}
    assert result.extra["stopped"] == "no improvement"
    # every level's candidates were evaluated once (no repeats in history)
    assert len({e.expression for e in result.history}) == result.evaluations


def test_cks_respects_budget() -> None:
    ev = Evaluator(TableScorer({}), budget=6)
    result = search_cks(ev, depth=4)
    assert result.evaluations == 6 and result.extra["stopped"] == "budget"


def test_cks_finds_planted_lin_plus_per() -> None:
    rng = np.random.default_rng(1)
    x = np.linspace(0, 10, 100)
    y = 1.0 * x + 0.5 * np.sin(2 * np.pi * x / 1.0) + 0.3 * rng.standard_normal(100)
    ds = Dataset.from_arrays(x, y)
    ev = Evaluator(GPScorer(ds, FitConfig(restarts=4)), budget=20)
    best = search_cks(ev, depth=3).best
    factors = {f for t in parse(best.expression).terms for f in t}
    assert {"LIN", "PER"} <= factors, best.expression


def test_cks_with_c_in_its_base_set_also_expands_s_times_b_plus_c() -> None:
    """ABCD's operator S -> S * (B + C): a product that keeps S; only when C is a base
    kernel (the standard set has none, so plain CKS is unchanged)."""
    abcd = ["SE", "LIN", "PER", "C", "WN"]
    out = {str(e) for e in expand(parse("LIN"), abcd)}
    assert {"LIN + LIN*WN", "LIN + LIN*PER", "LIN + LIN*SE"} <= out
    standard = {str(e) for e in expand(parse("LIN"), ["SE", "LIN", "PER", "RQ"])}
    assert "LIN + LIN*PER" not in standard
    assert "LIN" not in out  # LIN + WN and LIN * C are LIN itself: never proposed


def test_cks_finds_planted_noise_growing_linearly_with_wn_in_its_base_set() -> None:
    """y = trend + (x - c) e: CKS with WN among its base kernels ends with a LIN*WN term
    (noise whose standard deviation grows linearly) next to the trend."""
    rng = np.random.default_rng(1)
    x = np.linspace(0.0, 10.0, 80)
    y = 2.0 + 0.8 * x + (0.05 + 0.25 * x) * rng.standard_normal(x.size)
    ds = Dataset.from_arrays(x, y)
    ev = Evaluator(GPScorer(ds, FitConfig(restarts=2)), budget=30)
    result = search_cks(ev, base_kernels=("SE", "LIN", "PER", "C", "WN"), depth=2)
    best = parse(result.best.expression)
    assert ("LIN", "WN") in best.terms, best
    assert any("WN" not in t for t in best.terms), best  # and a signal term: the trend
    # without WN, no model of the search can say the noise grows
    plain = search_cks(Evaluator(GPScorer(ds, FitConfig(restarts=2)), budget=30), depth=2)
    assert result.best.bic > plain.best.bic + 10


def test_search_config_checks_the_cks_base_kernels() -> None:
    from prolas.errors import ProlasError
    from prolas.search.config import SearchConfig

    assert SearchConfig(base_kernels="se, lin,wn,LIN").base_kernels == ("SE", "LIN", "WN")
    assert SearchConfig().base_kernels is None
    with pytest.raises(ProlasError, match="unknown kernel 'FOO'"):
        SearchConfig(base_kernels=("SE", "FOO"))
    with pytest.raises(ProlasError, match="no kernel"):
        SearchConfig(base_kernels="")


def test_random_search_is_deterministic_and_unique() -> None:
    g = Grammar.default()
    runs = []
    for _ in range(2):
        ev = Evaluator(TableScorer({}), budget=15)
        runs.append([e.expression for e in search_random(ev, g, seed=7).history])
    assert runs[0] == runs[1] and len(set(runs[0])) == 15
    ev = Evaluator(TableScorer({}), budget=15)
    assert [e.expression for e in search_random(ev, g, seed=8).history] != runs[0]


def test_random_search_stops_when_grammar_is_exhausted() -> None:
    tiny = Grammar.from_dict(
        {"max_operations": 1, "base_kernels": {"SE": 1}, "operations": {"+": 1, "stop": 1}}
    )
    ev = Evaluator(TableScorer({}), budget=10)
    result = search_random(ev, tiny, max_stale=200)
    assert {e.expression for e in result.history} == {"SE"}  # SE + SE == SE
