"""Settings of one structure search (:class:`SearchConfig`), shared by every strategy.

The CLI maps its flags onto :class:`SearchConfig`; :mod:`prolas.pipeline` runs the
strategy it names. It lives with the strategies (which read it) and imports none of
them: the values its validation needs are in :mod:`prolas.limits`. :func:`search_data` is
the part of the data set a configured search runs on (journal, pipeline and forecast
read it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prolas.errors import ProlasError
from prolas.gp import FitConfig
from prolas.limits import (
    DEFAULT_CHECKPOINT,
    DEFAULT_GRAMMAR,
    INITIAL_DESIGN,
    LATENT_SURROGATES,
    LENGTHSCALE_FLOOR,
    SEARCH_POINTS,
    SEARCH_WINDOWS,
    WARM_FITS,
    WARM_START,
)

if TYPE_CHECKING:  # pragma: no cover
    from prolas.data import Dataset
    from prolas.search.view import SearchView

__all__ = ["METHODS", "SearchConfig", "search_data", "search_view"]

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
        base_kernels: CKS's base kernel set B (``None``: SE, LIN, PER, RQ, as Duvenaud et
            al. 2013; ``("SE", "LIN", "PER", "C", "WN")`` is ABCD's, with the white
            noise ``WN``; any registry kernel, e.g. the centred periodic ``PERC``).
        change: CKS also expands by the Automatic Statistician's change rules
            (``CP(S, S)``, ``CW(S, S)``, ``CW(S, C)``, ``CW(C, S)``, ``CP(S, B)``,
            ``CP(B, S)``; :func:`prolas.search.greedy.expand`). On by default: it
            forecast better than plain CKS on every tuning series (benchmarks/RESULTS.md).
        grammar: grammar file or shipped grammar name (random, structural, prolas).
        checkpoint: KG-VAE checkpoint path or shipped name (prolas).
        train_vae: train a data-specific KG-VAE on the data's inputs first (prolas).
        batch: proposals per iteration (q).
        surrogate, acq_opt: structural search's surrogate kernel and acquisition optimiser.
        latent_surrogate: what PROLAS models BIC with: ``ot`` (a GP with the OT kernel on
            the decoded expressions, default) or ``latent`` (a GP on the latent point,
            Algorithm 2 as published); see :class:`prolas.search.latent.LatentBOConfig`.
        warm_start: PROLAS: how many of the initial design's 10 points, after the
            grammar's base kernels, are the meta-learned portfolio of expressions that
            ranked well on other benchmark series (:mod:`prolas.search.portfolio`); 0 for
            the base kernels and Sobol points only.
        search_points: longer series are searched on this many points (exact GPs), the
            view of :mod:`prolas.search.view`: evenly spaced points and the windows, and
            the best model is then refitted on all points (:func:`prolas.pipeline.refit`);
            0 searches on all points.
        search_windows: among them, the search of a longer series sees at most this
            many dense windows, one per significant period of the full series that the
            evenly spaced points cannot resolve (they make room for the windows, down to
            :data:`prolas.limits.EVENLY_SPACED_SHARE` of ``search_points``); 0: none.
        lengthscale_floor: SE and RQ lengthscales of every fit are at least this many
            median input spacings (:attr:`prolas.gp.FitConfig.lengthscale_floor`).
        warm_fits: each new expression's fit also starts from the fitted
            hyperparameters of the best and of the most similar expression evaluated
            so far (:func:`prolas.search.evaluator.related_fits`).
        nested: each new expression's fit also starts exactly at the optimum of the best
            sub-model it contains that the search has fitted, and a fit that a later
            sub-model beats is repaired (:class:`prolas.search.evaluator.Evaluator`), so
            no fitted model ends below one it contains. On by default; off only to
            measure what it brings.
    """

    method: str = "prolas"
    budget: int = 50
    restarts: int = 8
    seed: int = 0
    depth: int = 4
    base_kernels: tuple[str, ...] | None = None
    change: bool = True
    grammar: str = DEFAULT_GRAMMAR
    checkpoint: str = DEFAULT_CHECKPOINT
    train_vae: bool = False
    batch: int = 1
    surrogate: str = "hierarchical"
    acq_opt: str = "ea"
    latent_surrogate: str = "ot"
    warm_start: int = WARM_START
    search_points: int = SEARCH_POINTS
    search_windows: int = SEARCH_WINDOWS
    lengthscale_floor: float = LENGTHSCALE_FLOOR
    warm_fits: bool = WARM_FITS
    nested: bool = True

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ProlasError(f"unknown search method {self.method!r}; choose from {METHODS}")
        if self.budget < 1:
            raise ProlasError("budget (--budget) must be at least 1")
        if self.restarts < 1:
            raise ProlasError("restarts (--restarts) must be at least 1")
        if self.batch < 1:
            raise ProlasError("batch (--batch) must be at least 1")
        if self.depth < 1:
            raise ProlasError("depth (--depth) must be at least 1")
        if self.base_kernels is not None:
            object.__setattr__(self, "base_kernels", _base_kernel_set(self.base_kernels))
        if self.search_points != 0 and self.search_points < 20:
            raise ProlasError(
                "search_points (--search-points) must be 0 (all points) or at least 20"
            )
        if isinstance(self.search_windows, bool) or not isinstance(self.search_windows, int):
            raise ProlasError(
                f"search_windows (--search-windows) must be an integer, got {self.search_windows!r}"
            )
        if self.search_windows < 0:
            raise ProlasError("search_windows (--search-windows) must be 0 (no windows) or more")
        _ = self.fit_config  # FitConfig checks the lengthscale floor
        if self.latent_surrogate not in LATENT_SURROGATES:
            raise ProlasError(
                "latent_surrogate (--latent-surrogate) must be one of "
                + ", ".join(LATENT_SURROGATES)
            )
        if not 0 <= self.warm_start <= INITIAL_DESIGN:
            raise ProlasError(f"warm_start (--warm-start) must be between 0 and {INITIAL_DESIGN}")

    @property
    def fit_config(self) -> FitConfig:
        return FitConfig(
            restarts=self.restarts, seed=self.seed, lengthscale_floor=self.lengthscale_floor
        )

    def replace(self, **changes) -> SearchConfig:
        return dataclasses.replace(self, **changes)


def _base_kernel_set(names) -> tuple[str, ...]:
    """CKS's base kernel set from names (a comma-separated string or a sequence), upper
    case, in order, without repeats; a clear error for an unknown or empty one."""
    from prolas.expr import BASE_KERNELS

    if isinstance(names, str):
        names = names.split(",")
    try:
        out = tuple(dict.fromkeys(str(n).strip().upper() for n in names))
    except TypeError:
        raise ProlasError(
            f"base_kernels (--base-kernels) must be kernel names, got {names!r}"
        ) from None
    known = ", ".join(BASE_KERNELS)
    if not out or "" in out:
        raise ProlasError(
            f"base_kernels (--base-kernels): no kernel named (an empty name); known: {known}"
        )
    unknown = [n for n in out if n not in BASE_KERNELS]
    if unknown:
        raise ProlasError(
            f"base_kernels (--base-kernels): unknown kernel {unknown[0]!r}; known: {known}"
        )
    return out


def search_view(dataset: Dataset, config: SearchConfig) -> SearchView | None:
    """What the search of a series longer than ``config.search_points`` sees: the evenly
    spaced points and the dense windows (:class:`prolas.search.view.SearchView`, made
    once per Dataset object and settings); ``None`` when it runs on all points."""
    if not (config.search_points and dataset.n > config.search_points):
        return None
    from prolas.search.view import cached_view

    return cached_view(dataset, config.search_points, config.search_windows)


def search_data(dataset: Dataset, config: SearchConfig) -> Dataset:
    """The points a search runs on: all of them, or the view of a longer series
    (:func:`search_view`: ``config.search_points`` points, evenly spaced ones and dense
    windows for short periods, with the full series' standardisation, so its fits hold for all
    points)."""
    view = search_view(dataset, config)
    return dataset if view is None else view.dataset
