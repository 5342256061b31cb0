"""The shared Evaluator: every search strategy proposes expressions and gets scores here.

The Evaluator fits each distinct canonical expression once (cache), keeps the
history in proposal order with timings, counts *unique expensive evaluations* and
enforces the budget. Strategies are therefore comparable evaluation for evaluation.

The scoring function is pluggable: :class:`prolas.gp.GPScorer` fits a GP and
returns its BIC; tests use a cheap synthetic table of scores.

Warm-started fits (``warm_fits=True``; ``prolas fit --warm-fits``, off by default, see
``benchmarks/results/warm_fits/``): besides its own random restarts, each new expression
is also started from the fitted hyperparameters of two expressions already evaluated
(:func:`related_fits`): the best so far and the one sharing most additive terms with it
(for CKS usually the parent it expands, for PROLAS the expression the decoder moved away
from). The scorer is then called as
``scorer(expr, init)``. A warm-started fit is never worse than the cold one
(:func:`prolas.gp.fit_gp`), but it depends on the history, not on the expression
alone; the sources are taken from the history before a batch starts, so a batch
fitted in parallel gives the same results as one fitted in sequence.

Nested models (``nested=True``, the default). When E contains an expression S the search
has already fitted (:func:`prolas.nesting.contains`: S is a limit of E's hyperparameters),
the fit of E also starts exactly at S's optimum (:func:`nested_source`: the contained fit
with the highest log-likelihood), so ``loglik(E) >= loglik(S)``; and when a new fit S
beats an E fitted earlier that contains it, E is refitted from S's optimum (a *repair*,
:class:`Repair`): its history entry keeps its index, takes the better fit and records
``repaired_from``, and the repair costs no budget. So every finished search satisfies
``loglik(E) >= loglik(S) - NESTED_TOLERANCE`` for every fitted pair where E contains S
(:func:`nested_violations` checks it). Repairs need a scorer with a ``refit`` method
(:class:`prolas.gp.GPScorer`); synthetic scorers have none.

Every score passes :func:`checked_score` before it enters the history: an ``"ok"``
score whose BIC or log-likelihood, or whose attached fit (its ``to_json()`` block:
terms, factors, noise variance), holds a number that is not finite becomes a failed
evaluation naming the first such number; a scorer that raises becomes a failed
evaluation with the exception's one-line reason. Nothing non-finite therefore
reaches the journal, result.json, the report or a plot through an ``"ok"`` entry.

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
from concurrent.futures import BrokenExecutor, Executor
from dataclasses import dataclass, replace
from typing import Any, Protocol

from prolas.expr import Expression, parse
from prolas.nesting import contains
from prolas.records import Evaluation, Score, SearchResult, first_non_finite, one_line

__all__ = [
    "NESTED_TOLERANCE",
    "REPAIR_MARGIN",
    "Repair",
    "checked_score",
    "nested_source",
    "nested_violations",
    "related_fits",
    "Scorer",
    "Evaluator",
    "TableScorer",
    "BudgetExhausted",
]


def _exception_reason(exc: BaseException, note: str = "") -> str:
    """``"<note>TypeName: message"`` on one line (the message may be empty)."""
    msg = one_line(exc)
    return one_line(f"{note}{type(exc).__name__}" + (f": {msg}" if msg else ""))


def _score_problem(score: Score) -> str | None:
    """Why an ``"ok"`` score cannot be trusted (see :func:`checked_score`), or ``None``."""
    for name in ("bic", "log_likelihood"):
        v = getattr(score, name)
        if v is None or isinstance(v, bool):
            return f"an ok score without {name}"
        try:
            value = float(v)
        except (TypeError, ValueError):
            return f"{name} is not a number ({v!r})"
        if not math.isfinite(value):
            return f"non-finite {name} = {value}"
    fit = score.fit
    if fit is None:
        return None
    status = getattr(fit, "status", "ok")
    if status != "ok":
        return f"the score is ok but its fit is {status!r}"
    to_json = getattr(fit, "to_json", None)
    if to_json is None:
        return None
    try:
        block = to_json()
    except Exception as exc:  # a fit that cannot be written cannot be journalled either
        return f"the fit cannot be serialised ({_exception_reason(exc)})"
    found = first_non_finite(block)
    if found is None:
        return None
    name = found.split(" = ", 1)[0]
    kind = (
        "score"
        if name in ("bic", "log_likelihood")
        else "noise variance"
        if name == "noise_variance"
        else "hyperparameter"
    )
    return f"non-finite {kind}: {found}"


def checked_score(score: Any, expr: Expression) -> Score:
    """The score as it may enter the history.

    Checked, for ``status == "ok"``: ``bic`` and ``log_likelihood`` are finite
    numbers; the attached ``fit`` (if any) has status ``"ok"`` and every number of
    its ``to_json()`` block (log-likelihood, BIC, each term's variance, each factor's
    shape parameters, the noise variance) is finite. A failing check turns the score
    into a failed one (``bic``/``log_likelihood``/``fit`` dropped) whose ``error``
    names the first offending number, e.g. ``"non-finite hyperparameter:
    terms[0].factors[1].period = inf"``. Anything that is not a :class:`Score`
    becomes a failed score; a status other than ``"ok"``/``"failed"`` is failed; an
    ok score's ``error`` is cleared; an error text is made one line (a failed score
    without one gets a placeholder); ``seconds`` that is not a finite non-negative
    number becomes ``nan`` (written as ``null``: the timing is unknown, the
    evaluation itself is not affected).
    """
    if not isinstance(score, Score):
        return Score.failed(expr, f"scorer returned {type(score).__name__}, not a Score")
    try:
        seconds = float(score.seconds)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        seconds = math.nan
    if score.status == "ok":
        problem = _score_problem(score)
        if problem is None:
            if seconds == score.seconds and score.error is None:
                return score
            return replace(score, seconds=seconds, error=None)  # an ok entry has no error
        return Score(str(expr), "failed", None, None, expr.n_params, seconds, one_line(problem))
    if score.status != "failed":
        reason = f"unknown status {score.status!r}" + (f": {score.error}" if score.error else "")
        return Score(str(expr), "failed", None, None, expr.n_params, seconds, one_line(reason))
    error = one_line(score.error) if score.error else "failed (no reason recorded)"
    if score.bic is None and score.log_likelihood is None and score.fit is None:
        if error == score.error and seconds == score.seconds:
            return score
    return Score(str(expr), "failed", None, None, expr.n_params, seconds, error)


class Scorer(Protocol):
    """A callable that scores an expression (must be picklable for process pools).

    With warm-started fits (:class:`Evaluator` ``warm_fits``) it is called as
    ``scorer(expr, init)``, ``init`` a tuple of related fitted models to start from.
    """

    def __call__(self, expr: Expression) -> Score: ...


def _term_overlap(a: Expression, b: Expression) -> float:
    """Jaccard similarity of the expanded additive terms of two expressions."""
    ta, tb = set(a.terms), set(b.terms)
    return len(ta & tb) / max(len(ta | tb), 1)


def related_fits(expr: Expression, history: Sequence[Evaluation]) -> tuple[Any, ...]:
    """The fitted models to warm-start ``expr`` from: that of the best evaluation so
    far and that of the evaluation sharing the largest fraction of additive terms with
    ``expr`` (Jaccard; ties to the higher BIC), the same one at most once. Only
    successful evaluations that carry a fitted model count; ``()`` if there are none."""
    fitted = [e for e in history if e.ok and e.fit is not None and e.expression != str(expr)]
    if not fitted:
        return ()
    best = max(fitted, key=lambda e: e.bic)
    near = max(fitted, key=lambda e: (_term_overlap(expr, parse(e.expression)), e.bic))
    return (best.fit,) if near is best else (best.fit, near.fit)


#: The invariant of a finished search: no fitted E below a fitted S it contains by more
#: than this many nats (:func:`nested_violations`).
NESTED_TOLERANCE = 0.1
#: A fitted E more than this many nats below a newly fitted S it contains is repaired.
REPAIR_MARGIN = 0.01


def nested_source(expr: Expression, history: Sequence[Evaluation]) -> Evaluation | None:
    """The evaluation to embed in ``expr``'s fit: of the successful, fitted evaluations
    whose expression ``expr`` contains (:func:`prolas.nesting.contains`), the one with
    the highest log-likelihood (ties to the earlier); ``None`` if there is none."""
    key = str(expr)
    best = None
    for e in history:
        if not (e.ok and e.fit is not None and e.expression != key):
            continue
        if best is not None and e.log_likelihood <= best.log_likelihood:
            continue
        if contains(key, e.expression):
            best = e
    return best


def nested_violations(
    history: Sequence[Evaluation], tolerance: float = NESTED_TOLERANCE
) -> list[tuple[str, str, float]]:
    """Every fitted pair (E, S) of ``history`` where E contains S and
    ``loglik(E) < loglik(S) - tolerance``, as ``(E, S, shortfall in nats)``."""
    ok = [e for e in history if e.ok]
    out = []
    for s in ok:
        for e in ok:
            short = s.log_likelihood - e.log_likelihood
            if short > tolerance and contains(e.expression, s.expression):
                out.append((e.expression, s.expression, short))
    return out


@dataclass(frozen=True)
class Repair:
    """A fit redone from a contained sub-model's optimum (module docstring).

    Attributes:
        index: the history index of the repaired evaluation (E).
        expression: E.
        source: S, the sub-model whose optimum E was refitted from.
        before: E's log-likelihood before the repair.
        evaluation: E's history entry after it (``repaired_from`` = S).
        seconds: what the refit took.
    """

    index: int
    expression: str
    source: str
    before: float
    evaluation: Evaluation
    seconds: float


@dataclass(frozen=True)
class TableScorer:
    """Synthetic scorer: a fixed score per canonical expression (for tests and demos).

    Expressions missing from the table get ``default``; those listed in ``fail``
    are reported as failed evaluations.
    """

    table: dict[str, float]
    default: float = -100.0
    fail: frozenset[str] = frozenset()

    def __call__(self, expr: Expression, init: tuple = ()) -> Score:
        key = str(expr)
        if key in self.fail:
            return Score.failed(expr, "synthetic failure")
        value = float(self.table.get(key, self.default))
        return Score(key, "ok", value, value, expr.n_params, 0.0)


class BudgetExhausted(Exception):
    """Raised by :meth:`Evaluator.evaluate` when a new expression would exceed the budget."""


class Evaluator:
    """Cache + budget + ordered history around a scorer, optionally on an executor.

    Args:
        scorer: callable ``Expression -> Score`` (e.g. :class:`prolas.gp.GPScorer`).
        budget: maximum number of unique expensive evaluations.
        executor: a ``concurrent.futures.Executor`` (process pool, Dask client
            executor; see :func:`prolas.search.executors.make_executor`) on which
            :meth:`evaluate_many` fits a whole batch at once; ``None`` runs in-process.
        on_result: called with each new (non-cached) Evaluation in index order, as
            soon as it and every earlier proposal of its batch have finished (e.g. to
            update a progress bar or append to a journal).
        retries: how many times a fit whose worker *raised* or died is resubmitted
            before the evaluation is recorded as failed.
        warm_fits: call the scorer as ``scorer(expr, related_fits(expr, history))``
            (module docstring).
        nested: start each fit also from the best contained sub-model fitted so far
            and repair fits a later sub-model beats (module docstring).
        on_repair: called with each :class:`Repair` (e.g. to journal it).

    Parallel batches are deterministic: results may arrive in any order, but the
    history, the indices and the ``on_result`` calls follow the proposal order.

    Worker faults (executor only). A scorer that raises in a worker is resubmitted
    (to whichever worker is free) up to ``retries`` times, then recorded as failed.
    A process pool whose worker died fails *every* outstanding fit with
    ``BrokenExecutor`` without saying which fit killed it, so such a failure is not
    charged to any expression: the outstanding fits are resubmitted as a batch
    (a pool from :func:`prolas.search.executors.make_executor` recreates itself); if the
    pool breaks again, the remaining fits run one at a time, where a death is
    attributable and counts as an attempt. A crashing expression therefore ends up
    ``failed`` and the others are fitted normally.
    """

    def __init__(
        self,
        scorer: Callable[[Expression], Score],
        budget: int,
        executor: Executor | None = None,
        on_result: Callable[[Evaluation], None] | None = None,
        retries: int = 1,
        warm_fits: bool = False,
        nested: bool = True,
        on_repair: Callable[[Repair], None] | None = None,
    ) -> None:
        if budget < 1:
            raise ValueError("budget must be >= 1")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.scorer = scorer
        self.budget = int(budget)
        self.executor = executor
        self.on_result = on_result
        self.retries = retries
        self.warm_fits = bool(warm_fits)
        self.nested = bool(nested)
        self.on_repair = on_repair
        self.repairs: list[Repair] = []
        self._replay_repairs: dict[tuple[str, str], Repair] = {}
        self.history: list[Evaluation] = []
        self._cache: dict[str, Evaluation] = {}
        self._replay: dict[str, Evaluation] = {}  # preloaded, not yet re-proposed
        self.cache_hits = 0
        self.replayed = 0
        self.started = time.perf_counter()

    # --- state ------------------------------------------------------------------------
    @property
    def n_unique(self) -> int:
        """Unique evaluations in the history so far (replayed ones included)."""
        return len(self.history)

    @property
    def remaining(self) -> int:
        return self.budget - self.n_unique

    @property
    def exhausted(self) -> bool:
        return self.remaining <= 0

    @property
    def pending_replay(self) -> int:
        """Preloaded evaluations the strategy has not proposed again (yet)."""
        return len(self._replay)

    @property
    def best(self) -> Evaluation | None:
        ok = [e for e in self.history if e.ok]
        return max(ok, key=lambda e: e.bic) if ok else None

    def seen(self, expr: Expression | str) -> bool:
        return str(expr) in self._cache

    def lookup(self, expr: Expression | str) -> Evaluation | None:
        return self._cache.get(str(expr))

    def preload(
        self,
        evaluations: Iterable[Evaluation],
        elapsed: float = 0.0,
        repairs: Iterable[Repair] = (),
    ) -> None:
        """Register finished evaluations (e.g. from a journal) for replay, without re-fitting.

        Resuming means re-running the (deterministic) strategy from the start: when it
        proposes a preloaded expression, the recorded result is returned at once and
        takes its place in the history exactly as if it had just been fitted (a new
        index, ``on_result`` is *not* called again). Until then the expression is not
        :meth:`seen`, so the strategy takes the same decisions as the interrupted run
        did, and the resumed history equals the uninterrupted one. Preloaded
        evaluations count against the budget (new fits are limited to
        ``budget - n_unique - pending_replay``); any the replay never proposes are
        appended to the history by :meth:`result`, so none is lost.

        Args:
            evaluations: in their original order; repeated expressions are ignored.
            elapsed: wall seconds already spent on them (added to ``wall_seconds``).
            repairs: journalled :class:`Repair` s; when the replay meets the same
                repair (the same E below the same S) the recorded refit is used.
        """
        for e in evaluations:
            if e.expression in self._cache or e.expression in self._replay:
                continue
            self._replay[e.expression] = replace(e, cached=False)
        for r in repairs:
            self._replay_repairs[(r.expression, r.source)] = r
        self.started -= float(elapsed)

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
        # distinct expressions not in the history yet, in proposal order
        fresh: list[Expression] = []
        for e in exprs:
            if str(e) not in self._cache and e not in fresh:
                fresh.append(e)
        # fits to run: the fresh ones without a replayable result, within the budget
        allowed = max(self.budget - self.n_unique - len(self._replay), 0)
        # keep the proposal order; a replayed result uses no new budget
        plan: list[Expression] = []
        fits: list[Expression] = []
        for e in fresh:
            if str(e) in self._replay:
                plan.append(e)
            elif len(fits) < allowed:
                plan.append(e)
                fits.append(e)
        fit_pos = {str(e): i for i, e in enumerate(fits)}
        emitted = 0

        def emit_upto(k: int, score: Score | None) -> None:
            """Append every planned entry before fit k (replays), then fit k itself."""
            nonlocal emitted
            while emitted < len(plan):
                e = plan[emitted]
                key = str(e)
                if key in self._replay:
                    self._append(replace(self._replay.pop(key), index=self.n_unique + 1))
                    self.replayed += 1
                    emitted += 1
                    continue
                if fit_pos[key] != k or score is None:
                    return
                self._record(e, score)
                emitted += 1
                return

        first_new = self.n_unique
        self._run(fits, lambda i, s: emit_upto(i, s))
        emit_upto(-1, None)  # trailing replays
        if self.nested:
            self._repair_below(self.history[first_new:])
        out = []
        for e in exprs:
            hit = self._cache.get(str(e))
            if hit is None:
                raise BudgetExhausted(f"budget of {self.budget} evaluations is spent")
            out.append(hit)
        fresh_keys = {str(n) for n in fresh}
        self.cache_hits += sum(str(e) not in fresh_keys for e in exprs)
        return [replace(h, cached=str(e) not in fresh_keys) for e, h in zip(exprs, out)]

    def _starts(self, expr: Expression) -> tuple:
        """The scorer's extra arguments for ``expr``: ``(init,)`` with the fits to start
        from (the best contained sub-model's, then the related fits of ``warm_fits``),
        or ``()`` when there are none (a scorer without fits is called as before)."""
        init: list = []
        if self.nested and (sub := nested_source(expr, self.history)) is not None:
            init.append(sub.fit)
        if self.warm_fits:
            init += [f for f in related_fits(expr, self.history) if f not in init]
        return (tuple(init),) if init or self.warm_fits else ()

    def _repair_below(self, new: Sequence[Evaluation]) -> None:
        """Repair every fitted E that contains one of ``new`` (or, in turn, a repaired
        entry) and lies more than :data:`REPAIR_MARGIN` below it (module docstring)."""
        refit = getattr(self.scorer, "refit", None)
        queue = [e for e in new if e.ok and e.fit is not None]
        while queue:
            sub = queue.pop(0)
            for i, e in enumerate(self.history):
                if not (e.ok and e.fit is not None):
                    continue
                if e.log_likelihood >= sub.log_likelihood - REPAIR_MARGIN:
                    continue
                if not contains(e.expression, sub.expression):
                    continue
                repair = self._replay_repairs.pop((e.expression, sub.expression), None)
                if repair is None:
                    if refit is None:
                        continue
                    repair = self._refit(e, sub, refit)
                    if repair is None:
                        continue
                    if self.on_repair is not None:
                        self.on_repair(repair)
                self.repairs.append(repair)
                fixed = replace(repair.evaluation, index=e.index, cached=False)
                self.history[i] = fixed
                self._cache[fixed.expression] = fixed
                queue.append(fixed)

    def _refit(self, e: Evaluation, sub: Evaluation, refit: Callable) -> Repair | None:
        """Refit E from S's optimum; the :class:`Repair`, or ``None`` if it gained nothing."""
        t0 = time.perf_counter()
        try:
            score = checked_score(refit(parse(e.expression), (sub.fit,)), parse(e.expression))
        except Exception:  # a failed repair leaves the evaluation as it was
            return None
        seconds = time.perf_counter() - t0
        if not (score.status == "ok" and score.log_likelihood > e.log_likelihood):
            return None
        fixed = replace(
            e,
            bic=score.bic,
            log_likelihood=score.log_likelihood,
            fit=score.fit,
            repaired_from=sub.expression,
        )
        return Repair(e.index, e.expression, sub.expression, e.log_likelihood, fixed, seconds)

    def _append(self, ev: Evaluation) -> None:
        self.history.append(ev)
        self._cache[ev.expression] = ev

    def _record(self, e: Expression, s: Score) -> None:
        s = checked_score(s, e)
        ev = Evaluation(
            index=self.n_unique + 1,
            expression=str(e),
            status=s.status,
            bic=s.bic,
            log_likelihood=s.log_likelihood,
            n_params=s.n_params,
            seconds=s.seconds,
            error=s.error,
            fit=s.fit,
        )
        self._append(ev)
        if self.on_result is not None:
            self.on_result(ev)

    def _run(self, exprs: list[Expression], emit: Callable[[int, Score], None]) -> None:
        """Score ``exprs``, calling ``emit(i, score)`` for i = 0, 1, ... in order.

        Every score is passed through :func:`checked_score` first, so ``emit`` always
        gets a :class:`Score` (a scorer returning ``None`` would otherwise stall the
        in-order emission).
        """
        if not exprs:
            return
        raw_emit = emit

        def emit(i: int, score: Any) -> None:
            raw_emit(i, checked_score(score, exprs[i]))

        # warm and nested starts come from the history before the batch (module docstring)
        args = [self._starts(e) for e in exprs]
        if self.executor is None:
            for i, e in enumerate(exprs):
                emit(i, self._call_safely(e, args[i]))
            return
        self._run_on_executor(exprs, args, emit)

    def _run_on_executor(
        self, exprs: list[Expression], args: list[tuple], emit: Callable[[int, Score], None]
    ) -> None:
        """Submit the whole batch, collect in proposal order, retry faults (class docstring)."""
        n = len(exprs)
        scores: dict[int, Score] = {}
        attempts = [0] * n
        shared_breaks = 0
        flushed = 0

        def flush() -> None:
            nonlocal flushed
            while flushed in scores:
                emit(flushed, scores[flushed])
                flushed += 1

        while len(scores) < n:
            pending = [i for i in range(n) if i not in scores]
            # after two pool deaths that hit several fits at once, isolate the culprit
            groups = [[i] for i in pending] if shared_breaks >= 2 else [pending]
            broke = False
            for group in groups:
                futures = {}
                for i in group:
                    try:
                        futures[i] = self.executor.submit(self.scorer, exprs[i], *args[i])
                    except Exception as exc:  # executor cannot take work: fit in-process
                        scores[i] = self._call_safely(
                            exprs[i],
                            args[i],
                            note=f"executor unavailable ({type(exc).__name__}); ",
                        )
                for i, fut in futures.items():
                    try:
                        scores[i] = fut.result()
                    except Exception as exc:
                        if isinstance(exc, BrokenExecutor) and len(futures) > 1:
                            broke = True  # which of the running fits killed the worker is unknown
                        else:
                            attempts[i] += 1
                            if attempts[i] > self.retries:
                                scores[i] = Score.failed(
                                    exprs[i], _exception_reason(exc, "worker error: ")
                                )
                    flush()
            shared_breaks += broke
        flush()

    def _call_safely(self, expr: Expression, args: tuple = (), note: str = "") -> Score:
        t0 = time.perf_counter()
        try:
            return self.scorer(expr, *args)
        except Exception as exc:  # the scorer must never crash the search: record the reason
            return Score.failed(expr, _exception_reason(exc, note), time.perf_counter() - t0)

    def result(self, method: str, seed: int, extra: dict | None = None) -> SearchResult:
        """The search so far; preloaded evaluations never replayed are appended last
        (with their journalled repairs applied). ``extra["repairs"]`` counts repairs."""
        history = list(self.history)
        pending: dict[str, Repair] = {}
        for r in self._replay_repairs.values():
            old = pending.get(r.expression)
            if old is None or r.evaluation.log_likelihood > old.evaluation.log_likelihood:
                pending[r.expression] = r
        for e in self._replay.values():
            e = pending[e.expression].evaluation if e.expression in pending else e
            history.append(replace(e, index=len(history) + 1))
        extra = dict(extra or {})
        if self.repairs:
            extra["repairs"] = len(self.repairs)
        return SearchResult(
            method=method,
            seed=seed,
            budget=self.budget,
            history=history,
            wall_seconds=time.perf_counter() - self.started,
            extra=extra,
        )
