"""Wiring: dataset + search settings -> Evaluator -> strategy -> SearchResult -> best fit.

This is the one place where search strategies are chosen by name, so the CLI, the
Python API and the benchmarks run exactly the same code.

>>> from prolas.data import load_csv
>>> ds = load_csv("data/airline.csv")                      # doctest: +SKIP
>>> result, best = run_search(ds, SearchConfig(method="cks", budget=10))  # doctest: +SKIP
>>> best.expression, round(best.bic, 1)                    # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import replace
from typing import TYPE_CHECKING

from prolas.data import Dataset
from prolas.errors import ProlasError
from prolas.gp import FitResult, GPScorer, fit_gp, hold_unseen_transitions
from prolas.limits import EXACT_REFIT_LIMIT, SEARCH_POINTS
from prolas.records import Evaluation, SearchResult
from prolas.search.config import SearchConfig, search_data
from prolas.search.evaluator import Evaluator
from prolas.threads import torch_threads

if TYPE_CHECKING:  # pragma: no cover
    from prolas.search.journal import Journal

__all__ = [
    "make_evaluator",
    "run_search",
    "run_strategy",
    "best_fit",
    "refit",
    "SEARCH_POINTS",
    "EXACT_REFIT_LIMIT",
]


def make_evaluator(
    dataset: Dataset,
    config: SearchConfig,
    *,
    executor: Executor | None = None,
    on_result: Callable[[Evaluation], None] | None = None,
) -> Evaluator:
    """An Evaluator that fits GPs on ``dataset`` with the config's restarts and seed."""
    return Evaluator(
        GPScorer(dataset, config.fit_config),
        budget=config.budget,
        executor=executor,
        on_result=on_result,
        warm_fits=config.warm_fits,
        nested=config.nested,
    )


def run_search(
    dataset: Dataset,
    config: SearchConfig,
    *,
    evaluator: Evaluator | None = None,
    executor: Executor | None = None,
    on_result: Callable[[Evaluation], None] | None = None,
    log: Callable[[str], None] | None = None,
    journal: Journal | None = None,
) -> tuple[SearchResult, FitResult | None]:
    """Run the configured search and return ``(SearchResult, best FitResult)``; the
    best model carries ``dataset`` (:attr:`FitResult.dataset`).

    A series longer than ``config.search_points`` is searched on an evenly spaced
    subsample (:func:`prolas.search.config.search_data`) and the best model refitted on all points
    (:func:`refit`).

    Args:
        evaluator: use this Evaluator (else one is made from ``executor`` and
            ``on_result``; see :func:`make_evaluator`); it must score
            ``search_data(dataset, config)``.
        executor: where the fits run (:func:`prolas.search.executors.make_executor`);
            ``None`` fits in-process. Batches are fitted in parallel, with the same
            result as sequential fitting.
        journal: a :class:`prolas.search.journal.Journal`; every finished evaluation is
            appended to it before the search moves on, and the evaluations it
            already holds are replayed without refitting (resume).
    """
    searched = search_data(dataset, config)
    scored = getattr(getattr(evaluator, "scorer", None), "dataset", None)
    if isinstance(scored, Dataset) and scored.n != searched.n:
        raise ProlasError(
            f"the evaluator scores {scored.n} points but the search runs on {searched.n} "
            "(build it on search_data(dataset, config))"
        )
    ev = evaluator or make_evaluator(searched, config, executor=executor, on_result=on_result)
    if journal is not None:
        journal.attach(ev)
    result = run_strategy(ev, searched, config, log)
    best = best_fit(result, searched, config)
    if best is not None and searched is not dataset:
        if log:
            log(f"refitting {best.expression} on all {dataset.n} points")
        best = refit(best, dataset, config)
    if best is not None:  # a fit replayed from an older journal may predate the rule
        best = replace(hold_unseen_transitions(best, dataset), dataset=dataset)
    return result, best


def run_strategy(
    ev: Evaluator,
    dataset: Dataset | None,
    config: SearchConfig,
    log: Callable[[str], None] | None = None,
) -> SearchResult:
    """The configured strategy alone: ``config.method`` proposes expressions to ``ev``
    until its budget is spent or it stops, with no subsample and no final fit (as
    :func:`run_search` adds). ``dataset`` may be None for a scorer without data (a
    synthetic test scorer) unless the strategy needs the data (PROLAS's VAE training)."""
    # One torch thread: a strategy's own numerics (surrogate fits, acquisition values,
    # VAE decoding) round differently with other thread counts, and exactly tied
    # candidates (the OT distance's twins CW(SE, PER) and CW(PER, SE)) were then ordered
    # differently, so the same seed took another path with fits in worker processes,
    # from a cache or after a resume than in-process (where GPScorer sets one thread).
    # The strategies' tensors are small (~50 x 50 surrogates, ~2 000 x d decodes).
    with torch_threads(1):
        return STRATEGIES[config.method](ev, dataset, config, log or (lambda s: None))


def refit(fit: FitResult, dataset: Dataset, config: SearchConfig) -> FitResult:
    """Refit a model chosen on a subsample on all of ``dataset``, starting from its fit.

    Exact (``fit_gp`` warm-started at ``fit``, so never worse than conditioning on
    its hyperparameters) up to :data:`EXACT_REFIT_LIMIT` points; beyond, the SGPR
    collapsed bound (:func:`prolas.gp.scalable.refit_sgpr`), whose ``log_likelihood`` is a
    lower bound and is marked by ``approximation``. A failed refit returns the failure
    (with its reason), never the subsample's numbers as if they were the full data's.
    """
    if dataset.n <= EXACT_REFIT_LIMIT:
        fitted = fit_gp(fit.expression, dataset, replace(config.fit_config, restarts=1), init=fit)
    else:
        from prolas.gp.scalable import refit_sgpr

        floor = config.fit_config.lengthscale_floor
        fitted = refit_sgpr(fit, dataset, lengthscale_floor=floor)
    return replace(fitted, dataset=dataset)


def best_fit(result: SearchResult, dataset: Dataset, config: SearchConfig) -> FitResult | None:
    """The best evaluation's FitResult (refitted deterministically if not carried along)."""
    best = result.best
    if best is None:
        return None
    if isinstance(best.fit, FitResult):
        return best.fit
    return fit_gp(best.expression, dataset, config.fit_config)


# --- strategies ------------------------------------------------------------------------


def _run_cks(ev: Evaluator, dataset: Dataset, config: SearchConfig, log) -> SearchResult:
    from prolas.search.greedy import STANDARD_BASE_KERNELS, search_cks

    return search_cks(
        ev,
        base_kernels=config.base_kernels or STANDARD_BASE_KERNELS,
        depth=config.depth,
        change=config.change,
        seed=config.seed,
    )


def _run_random(ev: Evaluator, dataset: Dataset, config: SearchConfig, log) -> SearchResult:
    from prolas.grammar import Grammar
    from prolas.search.random_search import search_random

    grammar = Grammar.from_file(config.grammar)
    return search_random(ev, grammar, seed=config.seed, batch=config.batch)


def _run_prolas(ev: Evaluator, dataset: Dataset, config: SearchConfig, log) -> SearchResult:
    from prolas.search.latent import LatentBOConfig, search_prolas

    options = LatentBOConfig(surrogate=config.latent_surrogate, warm_start=config.warm_start)
    return search_prolas(ev, dataset, config, log=log, options=options)


def _run_structural(ev: Evaluator, dataset: Dataset, config: SearchConfig, log) -> SearchResult:
    from prolas.grammar import Grammar
    from prolas.search.structural import search_structural

    grammar = Grammar.from_file(config.grammar)
    return search_structural(
        ev,
        grammar,
        surrogate=config.surrogate,
        acq_opt=config.acq_opt,
        seed=config.seed,
        batch=config.batch,
    )


#: The search strategies by method name: ``STRATEGIES[method](evaluator, dataset, config,
#: log)`` runs one search and returns its SearchResult (no refit of the best model).
STRATEGIES = {
    "cks": _run_cks,
    "random": _run_random,
    "prolas": _run_prolas,
    "structural": _run_structural,
}
