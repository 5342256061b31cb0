"""Wiring: dataset + search settings -> Evaluator -> strategy -> SearchResult -> best fit.

This is the one place where search strategies are chosen by name, so the CLI, the
Python API and the benchmarks run exactly the same code.

>>> from prolas.data import load_csv
>>> ds = load_csv("data/airline.csv")                      # doctest: +SKIP
>>> result, best = run_search(ds, SearchConfig(method="cks", budget=10))  # doctest: +SKIP
>>> best.expression, round(best.bic, 1)                    # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from prolas.data import Dataset
from prolas.errors import ProlasError
from prolas.gp import FitConfig, FitResult, GPScorer, fit_gp
from prolas.limits import DEFAULT_CHECKPOINT, DEFAULT_GRAMMAR, EXACT_REFIT_LIMIT, SEARCH_POINTS
from prolas.records import Evaluation, SearchResult
from prolas.search.evaluator import Evaluator

if TYPE_CHECKING:  # pragma: no cover
    from prolas.search.journal import Journal

__all__ = [
    "SearchConfig",
    "METHODS",
    "make_evaluator",
    "run_search",
    "run_strategy",
    "best_fit",
    "search_data",
    "refit",
    "SEARCH_POINTS",
    "EXACT_REFIT_LIMIT",
]

METHODS = ("prolas", "cks", "random", "structural")


@dataclass(frozen=True)
class SearchConfig:
    """Settings of one structure search (the CLI maps its flags onto this).

    Attributes:
        method: ``prolas`` (BO in the KG-VAE latent space), ``cks`` (greedy),
            ``random`` (grammar samples) or ``structural`` (BO over expressions).
        budget: unique expensive evaluations (distinct canonical expressions fitted).
        restarts: random restarts per GP fit (batched).
        seed: seeds the strategy and every fit.
        depth: CKS depth limit.
        change: CKS also expands by the Automatic Statistician's change rules
            (``CP(S, S)``, ``CW(S, S)``, ``CW(S, C)``, ``CW(C, S)``, ``CP(S, B)``,
            ``CP(B, S)``; :func:`prolas.search.greedy.expand`). On by default: it
            forecast better than plain CKS on every tuning series (README).
        grammar: grammar file or shipped grammar name (random, structural, prolas).
        checkpoint: KG-VAE checkpoint path or shipped name (prolas).
        train_vae: train a data-specific KG-VAE on the data's inputs first (prolas).
        batch: proposals per iteration (q).
        surrogate, acq_opt: structural search's surrogate kernel and acquisition optimiser.
        latent_surrogate: what PROLAS models BIC with: ``ot`` (a GP with the OT kernel on
            the decoded expressions, default) or ``latent`` (a GP on the latent point,
            Algorithm 2 as published); see :class:`prolas.search.latent.LatentBOConfig`.
        warm_start: PROLAS: how many of the initial design's 10 points are the
            meta-learned portfolio of expressions that ranked well on other benchmark
            series (:mod:`prolas.search.portfolio`); 0 for a Sobol design only.
        search_points: longer series are searched on this many evenly spaced points
            (exact GPs; :meth:`Dataset.thinned`) and the best model is then refitted on
            all points (:func:`refit`); 0 searches on all points.
    """

    method: str = "prolas"
    budget: int = 50
    restarts: int = 8
    seed: int = 0
    depth: int = 4
    change: bool = True
    grammar: str = DEFAULT_GRAMMAR
    checkpoint: str = DEFAULT_CHECKPOINT
    train_vae: bool = False
    batch: int = 1
    surrogate: str = "hierarchical"
    acq_opt: str = "ea"
    latent_surrogate: str = "ot"
    warm_start: int = 10
    search_points: int = SEARCH_POINTS

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ProlasError(f"unknown search method {self.method!r}; choose from {METHODS}")
        if self.budget < 1:
            raise ProlasError("--budget must be at least 1")
        if self.restarts < 1:
            raise ProlasError("--restarts must be at least 1")
        if self.batch < 1:
            raise ProlasError("--batch must be at least 1")
        if self.depth < 1:
            raise ProlasError("--depth must be at least 1")
        if self.search_points != 0 and self.search_points < 20:
            raise ProlasError("--search-points must be 0 (all points) or at least 20")
        from prolas.search.latent import SURROGATES, LatentBOConfig

        if self.latent_surrogate not in SURROGATES:
            raise ProlasError(f"--latent-surrogate must be one of {', '.join(SURROGATES)}")
        n_init = LatentBOConfig.n_init
        if not 0 <= self.warm_start <= n_init:
            raise ProlasError(f"--warm-start must be between 0 and {n_init}")

    @property
    def fit_config(self) -> FitConfig:
        return FitConfig(restarts=self.restarts, seed=self.seed)

    def replace(self, **changes) -> SearchConfig:
        return dataclasses.replace(self, **changes)


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
    """Run the configured search and return ``(SearchResult, best FitResult)``.

    A series longer than ``config.search_points`` is searched on an evenly spaced
    subsample (:func:`search_data`) and the best model refitted on all points
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
    return _STRATEGIES[config.method](ev, dataset, config, log or (lambda s: None))


def search_data(dataset: Dataset, config: SearchConfig) -> Dataset:
    """The points a search runs on: all of them, or an evenly spaced subsample of
    ``config.search_points`` (same standardisation, so its fits hold for all points)."""
    if config.search_points and dataset.n > config.search_points:
        return dataset.thinned(config.search_points)
    return dataset


def refit(fit: FitResult, dataset: Dataset, config: SearchConfig) -> FitResult:
    """Refit a model chosen on a subsample on all of ``dataset``, starting from its fit.

    Exact (``fit_gp`` warm-started at ``fit``, so never worse than conditioning on
    its hyperparameters) up to :data:`EXACT_REFIT_LIMIT` points; beyond, the SGPR
    collapsed bound (:func:`prolas.gp.scalable.refit_sgpr`), whose ``log_likelihood`` is a
    lower bound and is marked by ``approximation``. A failed refit returns the failure
    (with its reason), never the subsample's numbers as if they were the full data's.
    """
    if dataset.n <= EXACT_REFIT_LIMIT:
        return fit_gp(fit.expression, dataset, replace(config.fit_config, restarts=1), init=fit)
    from prolas.gp.scalable import refit_sgpr

    return refit_sgpr(fit, dataset)


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
    from prolas.search.greedy import search_cks

    return search_cks(ev, depth=config.depth, change=config.change, seed=config.seed)


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


_STRATEGIES = {
    "cks": _run_cks,
    "random": _run_random,
    "prolas": _run_prolas,
    "structural": _run_structural,
}
