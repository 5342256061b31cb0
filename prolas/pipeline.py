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
from prolas.threads import fit_threads, torch_threads

if TYPE_CHECKING:  # pragma: no cover
    from prolas.search.journal import Journal

__all__ = [
    "make_evaluator",
    "run_search",
    "run_strategy",
    "best_fit",
    "refit",
    "sharpened_periods",
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
    """An Evaluator that fits GPs on ``dataset`` with the config's restarts and seed.

    In-process (no ``executor``) each fit runs its restarts on the cores the process may
    use (:func:`prolas.threads.fit_threads`); with an executor the parallelism is over
    fits, one thread each."""
    workers = fit_threads() if executor is None else 1
    return Evaluator(
        GPScorer(dataset, config.fit_config, workers=workers),
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

    A series longer than ``config.search_points`` is searched on its view of that many
    points: an evenly spaced subsample plus a dense window for each significant period of
    the full series that the subsample cannot resolve
    (:func:`prolas.search.config.search_view`); the best model is then refitted on all
    points (:func:`refit`).

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
    if isinstance(scored, Dataset) and (
        scored.n != searched.n or scored.fit_identity() != searched.fit_identity()
    ):
        what = f"{scored.n} points" if scored.n != searched.n else "the points without their view"
        raise ProlasError(
            f"the evaluator scores {what} but the search runs on {searched.n} "
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

    The expression is the search's; only its hyperparameters move. A subsample sees a
    period only to within its resolution, so besides ``fit`` the refit also starts from
    ``fit`` with its periods sharpened on all points (:func:`sharpened_periods`).

    Exact (``fit_gp`` warm-started at both, so never worse than conditioning on ``fit``'s
    hyperparameters) up to :data:`EXACT_REFIT_LIMIT` points; beyond, the SGPR collapsed
    bound (:func:`prolas.gp.scalable.refit_sgpr`) from whichever of the two starts has
    the higher bound; its ``log_likelihood`` is a lower bound and is marked by
    ``approximation``. A failed refit returns the failure (with its reason), never the
    subsample's numbers as if they were the full data's.
    """
    sharp = sharpened_periods(fit, dataset)
    if dataset.n <= EXACT_REFIT_LIMIT:
        starts = [fit] if sharp is None else [fit, sharp]
        # the search's fit, its sharpened twin and one random restart polished (the
        # restart rescues a view fit that is poor on all points: 29 nats on internet);
        # hops from the best of them only: hopping from the restart's too cost 1.4x for
        # more than 0.1 nats on 1 of 20 refits (benchmarks/results/long_series/README.md)
        fitted = fit_gp(
            fit.expression,
            dataset,
            replace(config.fit_config, restarts=1),
            init=starts,
            hop_from_best_only=True,
            workers=fit_threads(),
        )
    else:
        from prolas.gp.scalable import refit_sgpr, sgpr_bound

        start = fit
        if sharp is not None and sgpr_bound(sharp, dataset) > sgpr_bound(fit, dataset):
            start = sharp
        floor = config.fit_config.lengthscale_floor
        fitted = refit_sgpr(start, dataset, lengthscale_floor=floor)
    return replace(fitted, dataset=dataset)


#: A fitted period within this relative distance of a significant period of the full
#: series is sharpened to it before the refit on all points (:func:`sharpened_periods`):
#: a window of 8 cycles resolves a period to about 1/8.
SHARPEN_TOLERANCE = 0.1


def sharpened_periods(fit: FitResult, dataset: Dataset) -> FitResult | None:
    """``fit`` with each periodic factor's period ``q`` replaced by the nearest significant
    period ``p`` of all of ``dataset`` (:func:`prolas.spectrum.scan_dataset`, harmonics
    included) with ``|q / p - 1| <=`` :data:`SHARPEN_TOLERANCE`; ``None`` when no period
    moves. The periods of the scan are sharpened on all N points (to a fraction of
    ``1 / span`` in frequency), those of a search on a few hundred points only to their
    own resolution; the refit keeps whichever start fits better."""
    from prolas.kernels import factor as kernel_of
    from prolas.kernels.spec import PERIODIC
    from prolas.spectrum import scan_dataset

    if not fit.ok or not fit.terms:
        return None
    peaks = [p.period for p in scan_dataset(dataset).peaks]
    if not peaks:
        return None
    moved = False
    terms = []
    for term in fit.terms:
        factors = []
        for f in term.factors:
            q = f.params.get("period")
            if q is not None and kernel_of(f.kernel).role == PERIODIC and q > 0:
                near = min(peaks, key=lambda p: abs(q / p - 1.0))
                if abs(q / near - 1.0) <= SHARPEN_TOLERANCE and near != q:
                    f = replace(f, params={**f.params, "period": float(near)})
                    moved = True
            factors.append(f)
        terms.append(replace(term, factors=tuple(factors)))
    return replace(fit, terms=tuple(terms)) if moved else None


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
