"""Random search baseline: grammar samples through the shared Evaluator.

Draws expressions from the grammar's prior (Algorithm 1) and evaluates the ones not
seen before, ``batch`` at a time, until the budget is spent. Repeated draws of an
already-evaluated expression cost nothing; after ``max_stale`` consecutive draws
without a new expression the grammar is taken to be exhausted and the search stops.
"""

from __future__ import annotations

import numpy as np

from prolas.grammar import Grammar
from prolas.records import SearchResult
from prolas.search.evaluator import BudgetExhausted, Evaluator

__all__ = ["search_random"]


def search_random(
    evaluator: Evaluator,
    grammar: Grammar,
    *,
    seed: int = 0,
    batch: int = 1,
    max_stale: int = 10_000,
) -> SearchResult:
    """Evaluate distinct grammar samples until the budget is spent."""
    rng = np.random.default_rng(seed)
    stale = 0
    while not evaluator.exhausted and stale < max_stale:
        proposals = []
        while len(proposals) < min(batch, evaluator.remaining) and stale < max_stale:
            e = grammar.sample(rng)
            if evaluator.seen(e) or e in proposals:
                stale += 1
                continue
            stale = 0
            proposals.append(e)
        if not proposals:
            break
        try:
            evaluator.evaluate_many(proposals)
        except BudgetExhausted:
            break
    return evaluator.result("random", seed, {"grammar": grammar.name, "batch": batch})
