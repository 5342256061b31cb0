"""Structural BO: valid proposals from every acquisition optimiser, and search behaviour.

* mutations and one-slot neighbours are valid grammar sequences;
* each acquisition optimiser returns valid sequences whose canonical forms are new;
* a small structural search on a synthetic score table (TableScorer) with a planted
  optimum does better than random search on average over seeds, and is
  deterministic for a seed;
* failed evaluations get a pessimistic target, and the search respects the budget.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from prolas.errors import NumericsWarning
from prolas.expr import parse
from prolas.grammar import STOP, Grammar
from prolas.search.evaluator import Evaluator, TableScorer
from prolas.search.random_search import search_random
from prolas.search.structural import _targets, search_structural
from prolas.surrogates.acquisition import (
    ACQ_OPTIMISERS,
    MUTATIONS,
    _apply,
    mutate,
    neighbours,
    optimise_acquisition,
)

SMALL = Grammar.from_file("small")
DEFAULT = Grammar.default()
NO_TIMES = Grammar.from_dict(
    {
        "name": "plus-only",
        "max_operations": 3,
        "base_kernels": {"SE": 1, "PER": 1, "LIN": 0},
        "operations": {"+": 1, "*": 0, "stop": 1},
    }
)


@pytest.mark.parametrize("grammar", [DEFAULT, SMALL, NO_TIMES], ids=lambda g: g.name)
def test_mutations_keep_sequences_valid(grammar):
    rng = np.random.default_rng(0)
    seqs = grammar.sample_sequences(200, rng)
    changed = 0
    for s in seqs:
        for kind in MUTATIONS:
            out = _apply(s, kind, grammar, rng)
            if out is not None:
                grammar.validate_sequence(out)
                changed += out != s
        m = mutate(s, grammar, rng)
        grammar.validate_sequence(m)
        assert all(k in grammar.base_kernels for k in m[0::2])
    assert changed > 300


def test_mutation_semantics():
    rng = np.random.default_rng(1)
    s = ("SE", "*", "PER", STOP)
    added = _apply(s, "add_term", SMALL, rng)
    assert SMALL.to_expression(added) == parse("SE*PER") + parse(added[-2])
    removed = _apply(s, "remove", SMALL, rng)
    assert removed in (("SE", STOP), ("PER", STOP))
    assert _apply(s, "swap_op", SMALL, rng) == ("SE", "+", "PER", STOP)
    full = ("SE", "+", "PER", "+", "LIN", "*", "RQ")  # N_max = 3 reached
    assert _apply(full, "add_term", SMALL, rng) is None
    assert _apply(full, "multiply_base", SMALL, rng) is None
    shorter = _apply(full, "remove", SMALL, rng)
    assert shorter[-1] == STOP and len(shorter) == 6


@pytest.mark.parametrize("grammar", [DEFAULT, NO_TIMES], ids=lambda g: g.name)
def test_neighbours_differ_in_one_slot_and_are_valid(grammar):
    rng = np.random.default_rng(2)
    for s in grammar.sample_sequences(50, rng):
        nb = neighbours(s, grammar)
        assert len(set(nb)) == len(nb) and s not in nb
        for t in nb:
            grammar.validate_sequence(t)
            if len(s) == len(t):  # one kernel or operation replaced
                assert sum(a != b for a, b in zip(s, t)) == 1
            elif len(t) < len(s):  # an operation slot set to stop: truncation
                assert t[-1] == STOP and t[:-1] == s[: len(t) - 1]
            else:  # the stop slot set to + or *, activating one more kernel slot
                assert s[-1] == STOP and t[: len(s) - 1] == s[:-1]
                assert t[len(s) - 1] in ("+", "*")


@pytest.mark.parametrize("method", ACQ_OPTIMISERS)
def test_acquisition_optimisers_return_valid_new_expressions(method):
    rng = np.random.default_rng(3)
    target = parse("LIN*PER + SE")

    def acq(seqs):  # prefers expressions sharing terms with the target, penalises size
        out = []
        for s in seqs:
            e = DEFAULT.to_expression(s)
            out.append(len(set(e.terms) & set(target.terms)) - 0.1 * len(s))
        return np.asarray(out)

    pool = DEFAULT.sample_sequences(10, rng)
    exclude = {str(DEFAULT.to_expression(s)) for s in pool} | {"LIN*PER + SE"}
    out = optimise_acquisition(
        method, acq, DEFAULT, rng, pool=pool, exclude=exclude, n=3, n_random=200
    )
    assert len(out) == 3
    keys = [str(DEFAULT.to_expression(s)) for s in out]
    assert len(set(keys)) == 3 and not set(keys) & exclude
    for s in out:
        DEFAULT.validate_sequence(s)
    vals = acq(out)
    assert np.all(np.diff(vals) <= 1e-12)  # best first
    if method != "random":  # the model-guided optimisers find a term of the target
        assert vals[0] >= 1.0 - 0.1 * 6


def planted_table(grammar: Grammar, target: str = "LIN*PER + SE") -> dict[str, float]:
    """Synthetic score of every expression, smooth in structure, with a planted optimum T.

    score = -sum_k (count_k(e) - count_k(T))^2 - (#terms(e) - #terms(T))^2 + 2 [e = T]
    """
    t = parse(target)
    exprs = {str(grammar.to_expression(s)) for s in grammar.enumerate_sequences()}
    table = {}
    for key in exprs:
        e = parse(key)
        counts = sum((e.base_counts[k] - t.base_counts[k]) ** 2 for k in e.base_counts)
        table[key] = float(-counts - (e.n_terms - t.n_terms) ** 2 + 2.0 * (e == t))
    assert max(table, key=table.get) == str(t) and sorted(table.values())[-2] < 2.0
    return table


def test_structural_search_beats_random_on_a_planted_optimum_and_is_deterministic():
    table = planted_table(SMALL)
    budget, seeds = 25, (0, 1, 2)
    structural, random, histories = [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        for seed in seeds:
            ev = Evaluator(TableScorer(table), budget=budget)
            res = search_structural(
                ev, SMALL, surrogate="hierarchical", acq_opt="ea", seed=seed, n_init=6
            )
            assert res.evaluations == budget and res.method == "structural"
            structural.append(res.best.bic)
            histories.append([e.expression for e in res.history])
            ev_r = Evaluator(TableScorer(table), budget=budget)
            random.append(search_random(ev_r, SMALL, seed=seed).best.bic)
        # the same seed replays the same search (a shorter budget replays its prefix)
        again = search_structural(
            Evaluator(TableScorer(table), budget=10),
            SMALL,
            surrogate="hierarchical",
            acq_opt="ea",
            seed=0,
            n_init=6,
        )
    assert [e.expression for e in again.history] == histories[0][:10]
    assert histories[0] != histories[1]  # and the seed matters
    assert np.mean(structural) > np.mean(random)
    assert max(structural) == max(table.values())  # the planted optimum is found


@pytest.mark.parametrize(
    "surrogate,acq_opt",
    [("ot", "local"), ("laplace", "random"), ("conditional", "ea"), ("arc", "local")],
)
def test_structural_search_runs_every_surrogate_and_handles_failures(surrogate, acq_opt):
    table = planted_table(SMALL)
    fail = frozenset(sorted(table)[::7])  # every 7th expression fails
    ev = Evaluator(TableScorer(table, fail=fail), budget=12)
    ticks = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        res = search_structural(
            ev,
            SMALL,
            surrogate=surrogate,
            acq_opt=acq_opt,
            seed=4,
            n_init=5,
            batch=2,
            progress=ticks.append,
        )
    assert res.evaluations == 12 and sum(ticks) == 12
    assert len({e.expression for e in res.history}) == 12
    assert res.extra["surrogate"] == surrogate and res.extra["acq_opt"] == acq_opt
    assert all(e.expression in table for e in res.history)  # all are grammar expressions
    assert sum(e.status == "failed" for e in res.history) == sum(
        e.expression in fail for e in res.history
    )


def test_failed_evaluations_get_a_pessimistic_target():
    table = {"SE": 1.0, "PER": 5.0, "LIN": 3.0}
    ev = Evaluator(TableScorer(table, fail=frozenset({"RQ"})), budget=4)
    ev.evaluate_many([parse(k) for k in ("SE", "PER", "LIN", "RQ")])
    y = _targets(ev.history)
    assert y[:3] == [1.0, 5.0, 3.0]
    assert y[3] == pytest.approx(1.0 - 1.0)  # worst - max(1, 0.1 * range)


def test_unknown_surrogate_or_optimiser_is_rejected():
    ev = Evaluator(TableScorer({}), budget=2)
    with pytest.raises(ValueError, match="surrogate"):
        search_structural(ev, SMALL, surrogate="nope")
    with pytest.raises(ValueError, match="optimiser"):
        search_structural(ev, SMALL, acq_opt="nope")


@pytest.mark.slow
def test_structural_search_end_to_end_on_airline_gives_a_valid_result_json(tmp_path):
    import json

    from prolas.data import load_csv
    from prolas.gp import FitConfig, GPScorer
    from prolas.report import result_to_json, validate_result_json

    dataset = load_csv("data/airline.csv")
    ev = Evaluator(GPScorer(dataset, FitConfig(restarts=2, seed=0)), budget=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        res = search_structural(ev, SMALL, surrogate="hierarchical", acq_opt="ea", seed=0, n_init=3)
    assert res.evaluations == 5 and res.extra["iterations"] == 2
    assert all(e.ok for e in res.history)
    best = res.best
    assert best.bic == max(e.bic for e in res.history)
    doc = result_to_json(dataset, res, best.fit, method="structural", seed=0, budget=5)
    validate_result_json(doc)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(doc, allow_nan=False))
    back = json.loads(path.read_text())
    assert back["best"]["expression"] == best.expression
    assert [h["expression"] for h in back["history"]] == [e.expression for e in res.history]
