"""Structural Bayesian optimisation: a GP surrogate directly on kernel expressions.

Loop (every score comes from the shared :class:`~prolas.search.evaluator.Evaluator`):

1. initial design: ``n_init`` grammar samples with distinct canonical expressions;
2. fit the surrogate GP (:class:`~prolas.surrogates.StructuralSurrogate`: arc,
   hierarchical, conditional, laplace or ot kernel) on (representation, BIC) of the
   evaluated expressions (L-BFGS, warm-started from the previous iteration's fit).
   A failed evaluation gets a pessimistic target, the worst
   BIC seen minus ``max(1, 0.1 * (best - worst))``;
3. maximise log expected improvement over grammar sequences with the chosen
   optimiser (``ea``, ``local`` or ``random``; :mod:`prolas.surrogates.acquisition`),
   excluding canonical expressions already evaluated; take the ``batch`` best;
4. evaluate them and repeat until the budget is spent.

Several sequences give one canonical expression; the sequence that first produced
an expression is kept as its representation. Deterministic for a given seed.

>>> from prolas.grammar import Grammar
>>> from prolas.search.evaluator import Evaluator, TableScorer
>>> ev = Evaluator(TableScorer({"SE": 1.0}, default=0.0), budget=6)
>>> res = search_structural(ev, Grammar.from_file("small"), n_init=4, seed=0)
>>> res.evaluations
6
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable

import numpy as np
import torch

from prolas.errors import NumericsWarning
from prolas.grammar import Grammar
from prolas.grammar import Sequence as GSeq
from prolas.records import Evaluation, SearchResult
from prolas.search.evaluator import BudgetExhausted, Evaluator
from prolas.surrogates.acquisition import ACQ_OPTIMISERS, optimise_acquisition
from prolas.surrogates.model import SURROGATES, StructuralSurrogate

__all__ = ["search_structural", "SURROGATES", "ACQ_OPTIMISERS"]


def _targets(history: list[Evaluation]) -> list[float]:
    """BIC per evaluation; failures get worst - max(1, 0.1 * range)."""
    ok = [e.bic for e in history if e.ok]
    if not ok:
        return [0.0] * len(history)
    lo, hi = min(ok), max(ok)
    bad = lo - max(1.0, 0.1 * (hi - lo))
    return [e.bic if e.ok else bad for e in history]


def _tick(progress, k: int) -> None:
    if progress is None or k <= 0:
        return
    if hasattr(progress, "update"):
        progress.update(k)
    else:
        progress(k)


def search_structural(
    evaluator: Evaluator,
    grammar: Grammar,
    *,
    surrogate: str = "hierarchical",
    acq_opt: str = "ea",
    seed: int = 0,
    n_init: int = 8,
    batch: int = 1,
    progress: Callable[[int], None] | object | None = None,
) -> SearchResult:
    """Structural BO over ``grammar``'s expressions until ``evaluator.exhausted``.

    Args:
        evaluator: scores expressions (cache + budget); the only source of scores.
        grammar: the expression space and the initial-design distribution.
        surrogate: ``arc``, ``hierarchical``, ``conditional``, ``laplace`` or ``ot``.
        acq_opt: ``ea``, ``local`` or ``random``.
        seed: seeds the grammar samples and the acquisition optimiser.
        n_init: size of the initial design.
        batch: expressions proposed per iteration (the ``batch`` best of the acquisition).
        progress: a tqdm-like object (``.update(k)``) or a callable ``k -> None``,
            told how many new evaluations each step made.

    Returns:
        ``evaluator.result("structural", seed, extra)`` with the surrogate, optimiser
        and surrogate-fit statistics in ``extra``.
    """
    if surrogate not in SURROGATES:
        raise ValueError(f"unknown surrogate {surrogate!r}; choose from {', '.join(SURROGATES)}")
    if acq_opt not in ACQ_OPTIMISERS:
        raise ValueError(f"unknown acquisition optimiser {acq_opt!r}; choose from {ACQ_OPTIMISERS}")
    if n_init < 1 or batch < 1:
        raise ValueError("n_init and batch must be >= 1")
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    model = StructuralSurrogate(surrogate, grammar)
    sequences: dict[str, GSeq] = {}
    stats = {
        "iterations": 0,
        "fit_seconds": 0.0,
        "acq_seconds": 0.0,
        "fallbacks": 0,
        "numerics_warnings": 0,
    }

    def evaluate(seqs: list[GSeq]) -> None:
        before = evaluator.n_unique
        try:
            evaluator.evaluate_many([grammar.to_expression(s) for s in seqs])
        except BudgetExhausted:
            pass
        _tick(progress, evaluator.n_unique - before)

    def fresh_samples(n: int, tries: int = 2000) -> list[GSeq]:
        out: list[GSeq] = []
        for _ in range(tries):
            if len(out) >= n:
                break
            s = grammar.sample_sequence(rng)
            key = str(grammar.to_expression(s))
            if evaluator.seen(key) or key in sequences:
                continue
            sequences[key] = s
            out.append(s)
        return out

    def propose(hist: list[Evaluation], want: int, previous):
        """Fit the surrogate and maximise the acquisition: ``(proposals, fit)``."""
        y = _targets(hist)
        t0 = time.perf_counter()
        try:
            fit = model.fit(
                [sequences[e.expression] for e in hist], y, max_iter=50, warm_start=previous
            )
        except Exception as exc:  # a surrogate failure must not end the search
            msg = f"surrogate fit failed ({exc}); proposing a random sample"
            warnings.warn(msg, NumericsWarning, stacklevel=2)
            return [], previous
        finally:
            stats["fit_seconds"] += time.perf_counter() - t0
        best = max(v for v, e in zip(y, hist) if e.ok)
        t0 = time.perf_counter()
        proposals = optimise_acquisition(
            acq_opt,
            lambda ss: fit.log_ei(model.encode(ss), best).numpy(),
            grammar,
            rng,
            pool=[sequences[e.expression] for e in hist],
            exclude={e.expression for e in evaluator.history},
            n=want,
        )
        stats["acq_seconds"] += time.perf_counter() - t0
        return proposals, fit

    evaluate(fresh_samples(min(n_init, evaluator.remaining)))
    previous = None  # the last fit: its hyperparameters warm-start the next one
    first_warning = ""
    while not evaluator.exhausted:
        stats["iterations"] += 1
        hist = [e for e in evaluator.history if e.expression in sequences]
        want = min(batch, evaluator.remaining)
        proposals: list[GSeq] = []
        if sum(e.ok for e in hist) >= 2:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                proposals, previous = propose(hist, want, previous)
            for w in caught:  # surrogate numerics are summarised once, at the end
                if issubclass(w.category, NumericsWarning):
                    stats["numerics_warnings"] += 1
                    first_warning = first_warning or str(w.message)
                else:
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if proposals:
            for s in proposals:
                sequences.setdefault(str(grammar.to_expression(s)), s)
        else:
            stats["fallbacks"] += 1
            proposals = fresh_samples(want)
            if not proposals:  # the grammar seems exhausted
                break
        before = evaluator.n_unique
        evaluate(proposals)
        if evaluator.n_unique == before:  # nothing new could be evaluated
            break
    if stats["numerics_warnings"]:
        warnings.warn(
            f"structural search: {stats['numerics_warnings']} numerical warning(s) from the "
            f"surrogate, e.g. {first_warning}",
            NumericsWarning,
            stacklevel=2,
        )
    extra = {
        "surrogate": surrogate,
        "acq_opt": acq_opt,
        "n_init": n_init,
        "batch": batch,
        **{
            k: (round(v, 3) if isinstance(v, float) and math.isfinite(v) else v)
            for k, v in stats.items()
        },
    }
    return evaluator.result("structural", seed, extra)
