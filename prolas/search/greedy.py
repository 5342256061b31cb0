"""Greedy Compositional Kernel Search (CKS; Duvenaud et al., 2013).

Level 1 evaluates every base kernel. Each further level expands the current best
expression S into

* ``S + B`` and ``S * B`` for every base kernel B,
* when the base set holds the constant ``C`` (as ABCD's does), ``S * (B + C)`` for every
  other base kernel B: ABCD's product that keeps S (``LIN * (WN + C)`` is
  ``LIN + LIN*WN``, a trend with noise growing along it, one step from ``LIN``),
* every single replacement ``B -> B'`` of one base-kernel occurrence in S's
  canonical form (inside change operators too), and
* with ``change=True``, the change rules of the Automatic Statistician (ABCD; Lloyd
  et al., 2014): ``CP(S, S)``, ``CW(S, S)``, ``CW(S, C)``, ``CW(C, S)``, and a change
  to or from a new base kernel, ``CP(S, B)`` and ``CP(B, S)``,

evaluates all new candidates of the level as one batch (so an executor can fit
them in parallel), and moves to the best expression found so far. The search stops
at the depth limit, when the budget is spent, or when a level does not improve
the best BIC.

>>> from prolas.search.evaluator import Evaluator, TableScorer
>>> ev = Evaluator(TableScorer({"SE": 1.0, "PER + SE": 3.0}), budget=50)
>>> search_cks(ev, depth=2).best.expression
'PER + SE'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prolas.expr import CP, CW, Base, ChangeItem, Expression, Item, from_items, parse
from prolas.records import SearchResult
from prolas.search.evaluator import BudgetExhausted, Evaluator

__all__ = ["change_rules", "expand", "search_cks", "ABCD_BASE_KERNELS", "STANDARD_BASE_KERNELS"]

#: CKS's base kernel set B (Duvenaud et al., 2013).
STANDARD_BASE_KERNELS: tuple[str, ...] = ("SE", "LIN", "PER", "RQ")
#: The Automatic Statistician's (ABCD; Lloyd et al., 2014): with the constant and white
#: noise (whose products with LIN are noise growing along x).
ABCD_BASE_KERNELS: tuple[str, ...] = ("SE", "LIN", "PER", "C", "WN")


def _replacements(items: tuple[Item, ...], base_kernels: Sequence[str]) -> list[tuple[Item, ...]]:
    """Every single replacement B -> B' of one base-kernel occurrence in ``items``."""
    out: list[tuple[Item, ...]] = []
    for i, item in enumerate(items):
        if isinstance(item, ChangeItem):
            for side in ("a", "b"):
                for new in _replacements(getattr(item, side), base_kernels):
                    parts = {"a": item.a, "b": item.b, side: new}
                    out.append((*items[:i], ChangeItem(item.op, **parts), *items[i + 1 :]))
            continue
        for j, name in enumerate(item):
            for b in base_kernels:
                if b != name:
                    out.append((*items[:i], (*item[:j], b, *item[j + 1 :]), *items[i + 1 :]))
    return out


def change_rules(expr: Expression) -> list[Expression]:
    """The Automatic Statistician's change rules that wrap ``expr`` alone, in CKS's order:
    ``CP(S, S)``, ``CW(S, S)``, ``CW(S, C)``, ``CW(C, S)`` (a change of S's
    hyperparameters at a point, within a window, and S switched off or on inside one)."""
    const = Base("C")
    return [CP(expr, expr), CW(expr, expr), CW(expr, const), CW(const, expr)]


def expand(expr: Expression, base_kernels: Sequence[str], change: bool = False) -> list[Expression]:
    """CKS neighbours of ``expr``: S+B, S*B, S*(B+C) when ``C`` is a base kernel, every
    single replacement B->B' and, with ``change``, the change rules (module docstring).

    Returned in a fixed order (deterministic), without duplicates and without
    ``expr`` itself. These moves act on the canonical expression (a replacement can
    change one factor of one expanded term; the change rules wrap S whole), unlike
    :func:`prolas.surrogates.acquisition.sequence_edits` and
    :func:`~prolas.surrogates.acquisition.neighbours`, which edit grammar token sequences
    (the representation the KG-VAE encodes and the structural BO searches), so each
    search keeps the moves it was measured with.
    """
    out: list[Expression] = []
    seen = {expr}

    def add(e: Expression) -> None:
        if e not in seen:
            seen.add(e)
            out.append(e)

    for b in base_kernels:
        add(expr + Base(b))
    for b in base_kernels:
        add(expr * Base(b))
    if "C" in base_kernels:
        for b in base_kernels:
            if b != "C":
                add(expr * (Base(b) + Base("C")))
    for items in _replacements(expr.items, base_kernels):
        add(from_items(items))
    if change:
        for e in change_rules(expr):
            add(e)
        for b in base_kernels:
            add(CP(expr, Base(b)))
            add(CP(Base(b), expr))
    return out


def search_cks(
    evaluator: Evaluator,
    *,
    base_kernels: Sequence[str] = STANDARD_BASE_KERNELS,
    change: bool = False,
    depth: int = 4,
    seed: int = 0,
    on_level: Callable[[int, Expression], None] | None = None,
) -> SearchResult:
    """Run greedy CKS through ``evaluator``; returns the common :class:`SearchResult`.

    Args:
        base_kernels: the base kernel set B.
        change: also expand by the change rules (``CP``/``CW``; module docstring).
        depth: number of levels (level 1 = the base kernels alone).
        seed: recorded for the result; CKS itself is deterministic.
        on_level: optional callback ``(level, best expression)`` after each level.
    """
    frontier: list[Expression] = [Base(b) for b in base_kernels]
    best_expr: Expression | None = None
    best_bic = -float("inf")
    levels = 0
    stopped = "depth"
    for level in range(1, depth + 1):
        try:
            evals = evaluator.evaluate_many(frontier)
        except BudgetExhausted:
            evals = [evaluator.lookup(e) for e in frontier if evaluator.seen(e)]
            stopped = "budget"
        levels = level
        improved = False
        for e in evals:
            if e is not None and e.ok and e.bic > best_bic:
                best_bic, best_expr, improved = e.bic, parse(e.expression), True
        if on_level is not None and best_expr is not None:
            on_level(level, best_expr)
        if stopped == "budget" or evaluator.exhausted:
            stopped = "budget"
            break
        if best_expr is None:
            stopped = "all evaluations failed"
            break
        if not improved and level > 1:
            stopped = "no improvement"
            break
        frontier = [e for e in expand(best_expr, base_kernels, change) if not evaluator.seen(e)]
        if not frontier:
            stopped = "no new candidates"
            break
    return evaluator.result("cks", seed, {"levels": levels, "stopped": stopped, "depth": depth})
