"""The nested-model invariant of every finished search (prolas.search.evaluator).

When E contains S (prolas.nesting), E's fit starts at S's optimum if S was fitted first,
and E is repaired from S if S is fitted later and beats it; so no finished search holds
a fitted E more than NESTED_TOLERANCE below a fitted S it contains.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest

from prolas.data import Dataset
from prolas.expr import Expression, parse
from prolas.gp import FitConfig, GPScorer, fit_gp
from prolas.grammar import Grammar
from prolas.nesting import contains, one_step_submodels
from prolas.records import Score
from prolas.report import result_to_json, validate_result_json
from prolas.search.evaluator import Evaluator, nested_violations
from prolas.search.greedy import search_cks
from prolas.search.journal import Journal, read_journal
from prolas.search.random_search import search_random

WEAK = FitConfig(restarts=1, max_iter=15, screen_iter=3, attempts=1)


def _data(seed: int, n: int = 40) -> Dataset:
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0.0, 10.0, n))
    y = 0.3 * x + np.sin(2 * np.pi * x / rng.uniform(1.5, 4.0)) + rng.normal(0, 0.3, n)
    return Dataset.from_arrays(x, y)


def _family(seed: int, size: int = 7) -> list[Expression]:
    """Random grammar expressions with some of their sub-models, shuffled: a history
    in which nested pairs are fitted in either order."""
    rng = np.random.default_rng(seed)
    grammar = Grammar.from_file("change")
    out: list[Expression] = []
    while len(out) < size:
        e = grammar.sample(rng)
        if len(e.terms) > 3 or e in out:
            continue
        out.append(e)
        subs = sorted(one_step_submodels(e))
        if subs:
            sub = parse(subs[int(rng.integers(len(subs)))])
            if sub not in out:
                out.append(sub)
    return [out[i] for i in rng.permutation(len(out))]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_finished_search_holds_a_model_below_one_it_contains(seed: int) -> None:
    """Weak fits (one restart, few iterations) miss optima often; the Evaluator's
    nested starts and repairs still leave no violated pair, whatever the order."""
    ds = _data(seed)
    exprs = _family(seed)
    ev = Evaluator(GPScorer(ds, WEAK), budget=len(exprs))
    ev.evaluate_many(exprs[: len(exprs) // 2])  # a batch: its pairs are repaired after it
    for e in exprs[len(exprs) // 2 :]:
        ev.evaluate(e)
    assert nested_violations(ev.history) == []
    assert any(contains(a.expression, b.expression) for a in ev.history for b in ev.history), (
        "the family holds nested pairs"
    )


@dataclass(frozen=True)
class SpoilOnce(GPScorer):
    """A GP scorer whose first fit of ``spoilt`` stops at its starting point (a
    deliberately missed optimum), so that a later, contained fit must repair it."""

    spoilt: str = ""

    def __call__(self, expr: Expression, init=()) -> Score:
        if str(expr) == self.spoilt:
            bad = FitConfig(restarts=1, max_iter=0, screen_iter=0, keep=1, offset_start=False)
            return fit_gp(expr, self.dataset, bad).to_score()
        return super().__call__(expr, init)


def test_a_later_sub_model_repairs_an_earlier_fit_without_budget(tmp_path) -> None:
    ds = _data(5, n=60)
    scorer = SpoilOnce(ds, FitConfig(restarts=2, max_iter=60), spoilt="C + LIN + PER")
    journal = Journal.create(tmp_path / "journal.jsonl", {"test": 1})
    ev = Evaluator(scorer, budget=2)
    journal.attach(ev)
    first = ev.evaluate(parse("C + LIN + PER"))
    sub = ev.evaluate(parse("LIN + PER"))
    journal.close()
    assert ev.n_unique == 2 and ev.exhausted  # the repair used no budget
    fixed = ev.lookup("C + LIN + PER")
    assert fixed.index == first.index == 1
    assert fixed.repaired_from == "LIN + PER"
    assert fixed.log_likelihood >= sub.log_likelihood - 1e-6 > first.log_likelihood
    assert len(ev.repairs) == 1 and ev.repairs[0].before == first.log_likelihood
    result = ev.result("random", 0)
    assert result.extra["repairs"] == 1
    assert nested_violations(result.history) == []
    # result.json records the repair, and validates
    doc = result_to_json(ds, result, result.best.fit, method="random", seed=0, budget=2)
    assert doc["history"][0]["repaired_from"] == "LIN + PER"
    validate_result_json(doc)
    # the journal holds the two fits and the repair; a resume replays all three
    _, entries, _, _, repairs = read_journal(tmp_path / "journal.jsonl")
    assert [e.expression for e in entries] == ["C + LIN + PER", "LIN + PER"]
    assert [(r.expression, r.source) for r in repairs] == [("C + LIN + PER", "LIN + PER")]
    calls = []

    class Counting(SpoilOnce):
        def __call__(self, expr, init=()):
            calls.append(("fit", str(expr)))
            return super().__call__(expr, init)

        def refit(self, expr, init):
            calls.append(("refit", str(expr)))
            return super().refit(expr, init)

    resumed = Evaluator(Counting(ds, scorer.config, spoilt=scorer.spoilt), budget=2)
    Journal.resume(tmp_path / "journal.jsonl", {"test": 1}).attach(resumed)
    resumed.evaluate(parse("C + LIN + PER"))
    resumed.evaluate(parse("LIN + PER"))
    assert calls == []  # nothing refitted
    assert [replace(e, fit=None) for e in resumed.history] == [
        replace(e, fit=None) for e in ev.history
    ]


@pytest.mark.slow
@pytest.mark.parametrize("method", ["cks", "random"])
def test_cks_and_random_search_end_with_no_violated_pair(method: str) -> None:
    ds = _data(9, n=50)
    ev = Evaluator(GPScorer(ds, WEAK), budget=25)
    if method == "cks":
        res = search_cks(ev, change=True, depth=3)
    else:
        res = search_random(ev, Grammar.from_file("change"), seed=3)
    assert nested_violations(res.history) == []
