"""The shared Evaluator: every search strategy proposes expressions and gets scores here.

The Evaluator fits each distinct canonical expression once (cache), keeps the
history in proposal order with timings, counts *unique expensive evaluations* and
enforces the budget. Strategies are therefore comparable evaluation for evaluation.

The scoring function is pluggable: :class:`prolas.gp.GPScorer` fits a GP and
returns its BIC; tests use a cheap synthetic table of scores.

>>> from prolas.expr import parse
>>> ev = Evaluator(TableScorer({"SE": 1.0, "PER": 2.0}), budget=2)
>>> ev.evaluate(parse("PER")).bic
2.0
>>> ev.evaluate(parse("PER")).cached, ev.n_unique
(True, 1)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from prolas.expr import Expression, parse

__all__ = [
    "Score",
    "Scorer",
    "Evaluation",
    "Evaluator",
    "SearchResult",
    "TableScorer",
    "BudgetExhausted",
]


@dataclass(frozen=True)
class Score:
    """What a scorer returns for one expression.

    ``bic`` is ``None`` when ``status == "failed"`` (``error`` then says why).
    ``fit`` optionally carries the full :class:`prolas.gp.FitResult`.
    """

    expression: str
    status: str
    bic: float | None
    log_likelihood: float | None
    n_params: int
    seconds: float
    error: str | None = None
    fit: Any = None

    @classmethod
    def failed(cls, expr: Expression, error: str, seconds: float = 0.0) -> Score:
        return cls(str(expr), "failed", None, None, expr.n_params, seconds, error)


class Scorer(Protocol):
    """A callable that scores an expression (must be picklable for process pools)."""

    def __call__(self, expr: Expression) -> Score: ...


@dataclass(frozen=True)
class TableScorer:
    """Synthetic scorer: a fixed score per canonical expression (for tests and demos).

    Expressions missing from the table get ``default``; those listed in ``fail``
    are reported as failed evaluations.
    """

    table: dict[str, float]
    default: float = -100.0
    fail: frozenset[str] = frozenset()

    def __call__(self, expr: Expression) -> Score:
        key = str(expr)
        if key in self.fail:
            return Score.failed(expr, "synthetic failure")
        value = float(self.table.get(key, self.default))
        return Score(key, "ok", value, value, expr.n_params, 0.0)


@dataclass(frozen=True)
class Evaluation:
    """One entry of a search history.

    Attributes:
        index: 1-based position among unique evaluations (None for a cached repeat).
        cached: True if the expression had been evaluated before (no budget cost).
    """

    index: int | None
    expression: str
    status: str
    bic: float | None
    log_likelihood: float | None
    n_params: int
    seconds: float
    error: str | None
    cached: bool = False
    fit: Any = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.bic is not None and math.isfinite(self.bic)

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "expression": self.expression,
            "status": self.status,
            "bic": self.bic,
            "log_likelihood": self.log_likelihood,
            "n_params": self.n_params,
            "seconds": round(self.seconds, 4),
            "error": self.error,
        }


class BudgetExhausted(Exception):
    """Raised by :meth:`Evaluator.evaluate` when a new expression would exceed the budget."""


@dataclass
class SearchResult:
    """What every strategy returns: the unique-evaluation history and the best model."""

    method: str
    seed: int
    budget: int
    history: list[Evaluation]
    wall_seconds: float
    extra: dict = field(default_factory=dict)

    @property
    def best(self) -> Evaluation | None:
        ok = [e for e in self.history if e.ok]
        return max(ok, key=lambda e: (e.bic, -e.index)) if ok else None

    @property
    def evaluations(self) -> int:
        return len(self.history)

    def best_trace(self) -> list[float]:
        """Best BIC after each unique evaluation (-inf before the first success)."""
        out, best = [], -math.inf
        for e in self.history:
            if e.ok:
                best = max(best, e.bic)
            out.append(best)
        return out


class Evaluator:
    """Cache + budget + ordered history around a scorer, optionally on an executor.

    Args:
        scorer: callable ``Expression -> Score`` (e.g. :class:`prolas.gp.GPScorer`).
        budget: maximum number of unique expensive evaluations.
        executor: a ``concurrent.futures.Executor`` for :meth:`evaluate_many`;
            ``None`` runs in-process.
        on_result: called with each new (non-cached) Evaluation in index order,
            e.g. to update a progress bar or append to a journal.
        retries: how many times a scorer that *raised* (e.g. a dead worker) is
            resubmitted before the evaluation is recorded as failed.
    """

    def __init__(
        self,
        scorer: Callable[[Expression], Score],
        budget: int,
        executor: Executor | None = None,
        on_result: Callable[[Evaluation], None] | None = None,
        retries: int = 1,
    ) -> None:
        if budget < 1:
            raise ValueError("budget must be >= 1")
        self.scorer = scorer
        self.budget = int(budget)
        self.executor = executor
        self.on_result = on_result
        self.retries = retries
        self.history: list[Evaluation] = []
        self._cache: dict[str, Evaluation] = {}
        self.cache_hits = 0
        self.started = time.perf_counter()

    # --- state ------------------------------------------------------------------------
    @property
    def n_unique(self) -> int:
        return len(self.history)

    @property
    def remaining(self) -> int:
        return self.budget - self.n_unique

    @property
    def exhausted(self) -> bool:
        return self.remaining <= 0

    @property
    def best(self) -> Evaluation | None:
        ok = [e for e in self.history if e.ok]
        return max(ok, key=lambda e: e.bic) if ok else None

    def seen(self, expr: Expression | str) -> bool:
        return str(expr) in self._cache

    def lookup(self, expr: Expression | str) -> Evaluation | None:
        return self._cache.get(str(expr))

    def preload(self, evaluations: Iterable[Evaluation]) -> None:
        """Restore finished evaluations (e.g. from a journal) without re-fitting."""
        for e in evaluations:
            if e.expression in self._cache:
                continue
            e = replace(e, index=len(self.history) + 1, cached=False)
            self.history.append(e)
            self._cache[e.expression] = e

    # --- evaluation -------------------------------------------------------------------
    def evaluate(self, expr: Expression) -> Evaluation:
        """Score one expression; a cached repeat costs no budget.

        Raises:
            BudgetExhausted: if the expression is new and the budget is spent.
        """
        return self.evaluate_many([expr])[0]

    def evaluate_many(self, exprs: Sequence[Expression]) -> list[Evaluation]:
        """Score a batch. New distinct expressions are fitted (in parallel if an
        executor was given) and appended to the history in proposal order; repeats
        return cached results. New expressions beyond the budget raise
        :class:`BudgetExhausted` *after* those within budget have been recorded.
        """
        exprs = [e if isinstance(e, Expression) else parse(e) for e in exprs]
        new: list[Expression] = []
        for e in exprs:
            if str(e) not in self._cache and e not in new:
                new.append(e)
        new = new[: max(self.remaining, 0)]
        scores = self._run(new)
        for e, s in zip(new, scores):
            ev = Evaluation(
                index=len(self.history) + 1,
                expression=str(e),
                status=s.status,
                bic=s.bic,
                log_likelihood=s.log_likelihood,
                n_params=s.n_params,
                seconds=s.seconds,
                error=s.error,
                fit=s.fit,
            )
            self.history.append(ev)
            self._cache[ev.expression] = ev
            if self.on_result is not None:
                self.on_result(ev)
        out = []
        for e in exprs:
            hit = self._cache.get(str(e))
            if hit is None:
                raise BudgetExhausted(f"budget of {self.budget} evaluations is spent")
            out.append(hit)
        fresh = {str(n) for n in new}
        self.cache_hits += sum(str(e) not in fresh for e in exprs)
        return [replace(h, cached=str(e) not in fresh) for e, h in zip(exprs, out)]

    def _run(self, exprs: list[Expression]) -> list[Score]:
        if not exprs:
            return []
        if self.executor is None:
            return [self._call_safely(e) for e in exprs]
        # submit the whole batch first, then collect in proposal order (deterministic)
        futures = [self.executor.submit(self.scorer, e) for e in exprs]
        return [self._collect(e, fut) for e, fut in zip(exprs, futures)]

    def _collect(self, expr: Expression, future) -> Score:
        """Result of a future; a raising/dead worker is retried, then recorded as failed."""
        attempts = 0
        while True:
            try:
                return future.result()
            except Exception as exc:  # a worker died or the scorer raised: retry, then record
                attempts += 1
                if attempts > self.retries:
                    return Score.failed(expr, f"worker error: {type(exc).__name__}: {exc}")
                try:
                    future = self.executor.submit(self.scorer, expr)
                except Exception as exc2:  # executor itself is broken: score in-process
                    return self._call_safely(expr, note=f"executor failed ({exc2}); ")

    def _call_safely(self, expr: Expression, note: str = "") -> Score:
        t0 = time.perf_counter()
        try:
            return self.scorer(expr)
        except Exception as exc:  # the scorer must never crash the search: record the reason
            return Score.failed(
                expr, f"{note}{type(exc).__name__}: {exc}", time.perf_counter() - t0
            )

    def result(self, method: str, seed: int, extra: dict | None = None) -> SearchResult:
        return SearchResult(
            method=method,
            seed=seed,
            budget=self.budget,
            history=list(self.history),
            wall_seconds=time.perf_counter() - self.started,
            extra=dict(extra or {}),
        )
