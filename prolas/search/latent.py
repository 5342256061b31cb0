"""PROLAS: Bayesian optimisation in the KG-VAE latent space (Lu et al., Algorithm 2).

The objective is ``f(z) = BIC(decode(z))`` on the latent box ``Z = [lo, hi]^d`` of a
trained KG-VAE (:meth:`prolas.vae.TrainedVAE.latent_bounds`), where ``decode(z)`` is
the most likely expression under the decoder (always valid). Every z is decoded and
its expression scored by the shared :class:`~prolas.search.evaluator.Evaluator`. The
search works on ``u = (z - lo) / (hi - lo)`` in the unit cube ``[0, 1]^d``.

Loop (:meth:`_LatentSearch.run`):

1. **Initial design** (``n_init`` = 10 points): the grammar's base kernels (those of
   positive prior: SE, LIN, PER, RQ and C in the shipped grammars), CKS's first level,
   so a series whose best model is one kernel finds it at once; then the warm start,
   ``warm_start`` (5) portfolio expressions that ranked well on other benchmark series
   (:func:`prolas.search.portfolio.warm_start`); each point at the latent code of its
   token sequence; then ``long_draws`` (5) draws of the grammar's prior, each at the
   latent code of its sequence and extra to ``n_init`` (``benchmarks/results/long_draws/``);
   then a scrambled Sobol design of the cube to ``n_init``
   (``benchmarks/results/initial_design/``; the base kernels and the warm start fill it
   in the shipped settings). On a series of fewer than 144 points the
   design is instead the base kernels and the **greedy opening**, CKS's second level
   around the best of them (``short_opening`` 11 expressions, ``short_n_init``;
   ``benchmarks/results/greedy_opening/``).
2. **Surrogate** (``LatentBOConfig.surrogate``, ``prolas fit --latent-surrogate``):

   * ``ot`` (default, :class:`_ExpressionGP`): a GP with the optimal-transport kernel
     (:mod:`prolas.surrogates.ot`) on the *decoded expression* models its
     log-likelihood ``BIC + k/2 ln N``; a candidate's predicted BIC subtracts its exact,
     known penalty ``k/2 ln N``. The VAE is the proposal generator.
   * ``latent`` (:class:`_LatentGP`, Algorithm 2 as published): BoTorch
     ``SingleTaskGP`` on u with standardised outcomes, fitted by exact marginal
     likelihood (``fit_gpytorch_mll``, warm-started from the previous step);
     ``LogExpectedImprovement`` (q = 1) or ``qLogExpectedImprovement`` (q > 1,
     ``prolas fit --batch q``) is maximised with ``optimize_acqf`` over the cube. Its
     best batch is decoded first: an expression already evaluated costs no budget and
     its (u, BIC) pair still joins the data, so the surrogate learns that the region
     holds nothing new.

3. **Acquisition over the candidate pool**: the batch is filled with the *new*
   expressions of highest LogEI decoded from a latent pool: the acquisition
   optimiser's other starts (latent GP), Sobol points of the cube, Gaussian
   perturbations of the ``pool_top`` best points and the latent codes of grammar edits
   of their sequences (:func:`~prolas.surrogates.acquisition.sequence_edits`, CKS's
   moves). Decoding thousands of points costs ~0.1 s, so a step is never wasted on the
   large latent regions that decode to frequent short expressions.
   With the OT surrogate the rank is LogEI per unit of expected fit cost,
   ``LogEI - cost_power * ln k`` (k: parameter count).
   Every second step (``incumbent_every``) is an **incumbent step** instead: only the
   grammar edits of the best point are ranked (CKS's moves around the incumbent), so
   the incumbent's neighbourhood is searched as CKS would, in acquisition order
   (``benchmarks/results/incumbent_steps/``).
4. **Evaluate** the batch.
5. **Diversify** when the surrogate has nothing to model, finds no new candidate, or
   ``stall_limit`` steps in a row found no new expression: perturb the incumbent with
   growing Gaussian steps and, failing that, draw a grammar sample.
6. **Stop** when the budget is spent or, on a series of fewer than 144 points, once the
   last ``short_patience`` (25) evaluations raised the best BIC by at most 0.1 (CKS's
   counterpart is the end of its greedy path).

Failed fits get a pessimistic target: the worst successful BIC minus
``max(1, margin * (best - worst))``. The budget counts unique expensive evaluations (the
Evaluator's). Deterministic for a seed: the whole search runs under
``torch.random.fork_rng`` seeded with the seed (``optimize_acqf`` draws its raw samples
from the torch RNG) plus a numpy generator. Surrogates are fitted and acquisitions
evaluated under :func:`prolas.surrogates.model.dense_numerics` (float64, dense
Cholesky), whatever ``import botorch`` set globally, and on one torch thread
(:func:`prolas.pipeline.run_strategy`): candidates with exactly equal predictions (the
OT distance's twins, e.g. ``CW(SE, PER)`` and ``CW(PER, SE)``) are ordered by rounding.

The measurements behind these choices (OT vs latent surrogate, exact penalty, pool) and
the variants tried and left out (grammar-sampled initial design, trust region, outcome
warping, prior-weighted acquisition, size-aware mean, ...) are in
``benchmarks/results/prolas_design/README.md`` and in the git history of this module.

>>> from prolas.search.config import SearchConfig
>>> from prolas.search.evaluator import Evaluator, TableScorer
>>> ev = Evaluator(TableScorer({"LIN*PER": 5.0}, default=0.0), budget=12)
>>> res = search_prolas(ev, None, SearchConfig(budget=12))   # doctest: +SKIP
>>> res.evaluations                                          # doctest: +SKIP
12
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from prolas.errors import NumericsWarning, ProlasError
from prolas.expr import Expression, parse
from prolas.grammar import STOP, sequence_expression
from prolas.limits import (
    BIC_TIE,
    INITIAL_DESIGN,
    LATENT_SURROGATES,
    SHORT_SERIES_POINTS,
    WARM_START,
)
from prolas.records import SearchResult
from prolas.search.config import SearchConfig
from prolas.search.evaluator import BudgetExhausted, Evaluator
from prolas.search.greedy import STANDARD_BASE_KERNELS, change_rules, expand
from prolas.search.portfolio import warm_start
from prolas.surrogates.acquisition import sequence_drops, sequence_edits, two_kernel_sequences
from prolas.surrogates.model import dense_numerics
from prolas.vae import TrainedVAE, resolve_vae

if TYPE_CHECKING:  # pragma: no cover
    from prolas.data import Dataset

__all__ = ["LatentBOConfig", "search_prolas"]

DTYPE = torch.float64

#: (u, expression) pairs: a unit-cube point and its decoded expression.
Points = list[tuple[torch.Tensor, Expression]]


@dataclass(frozen=True)
class LatentBOConfig:
    """Settings of the latent-space BO loop (the defaults, measured in
    benchmarks/results/prolas_design/).

    Attributes:
        n_init: size of the initial design (capped at the budget).
        base_kernels: the initial design starts with the grammar's base kernels.
        warm_start: then up to ``warm_start`` points of the initial design are the
            portfolio (module docstring); the rest are Sobol points.
        short_library: a series of fewer than ``SHORT_SERIES_POINTS`` points ranks its
            portfolio on the short-series library
            (:func:`prolas.search.portfolio.library_for`); off (default): every series
            ranks on the nine benchmark series' library
            (``benchmarks/results/portfolio_short/`` measures both).
        short_patience: a search of a series of fewer than ``SHORT_SERIES_POINTS`` points
            stops after evaluation ``i`` once its last ``short_patience`` evaluations have
            not raised the best BIC by more than ``BIC_TIE`` (0.1), ``best(i) <=
            best(i - K) + BIC_TIE``, checked once that window lies after the initial
            design (``i - K >= n_init``); 0: no such stop (CKS stops when its greedy path
            ends, this is PROLAS's counterpart). Default 25, chosen on the M3 tuning
            half's journals (``benchmarks/results/incumbent_steps/``: 56 of 75 at CKS's
            optimum at a median of 1.00 times its wall time); off before, when every K
            that saved time lost series (``benchmarks/results/portfolio_short/``).
        patience_ratio, patience_min: a relative patience (``patience_ratio > 0``): the
            window is ``K = clamp(ceil(patience_ratio * i*), patience_min,
            short_patience)``, ``i*`` the first evaluation at which the best so far was
            reached (within ``BIC_TIE``), so a search whose best came early stops sooner
            and one still improving late keeps the full ``short_patience``. 0 (default):
            the fixed window ``short_patience``; on the M3 tuning half the relative
            window kept no more series than a fixed one of the same median stop
            (``benchmarks/results/adaptive_stop/``).
        surrogate_noise_floor: the least noise variance of the OT surrogate, in units of
            the standardised targets (1e-4, as GPyTorch's default constraint). A BIC is a
            deterministic function of its expression at a fit seed, so the fitted noise
            sits at the floor and the surrogate interpolates; 1e-3 was measured on the
            M3 tuning half and changed the searches little
            (``benchmarks/results/surrogate_noise/``).
        incumbent_every: every ``incumbent_every``-th BO step is an incumbent step: the
            acquisition ranks only the grammar edits of the best point so far (CKS's moves
            on its token sequence, each at its latent code), a trust region of one move
            around the incumbent; a step whose incumbent has no edit left to evaluate ranks
            the whole pool instead. Default 2 (``benchmarks/results/incumbent_steps/``: on
            the M3 tuning half, 55 of 75 series at CKS's optimum instead of 51, at 1.33
            times CKS's wall time instead of 1.46); 0: off, every step ranks the pool,
            where random draws can outrank the incumbent's moves for the whole search.
        cost_power: the OT surrogate ranks candidates by expected improvement per unit
            of expected fit cost, ``LogEI - cost_power * ln k`` (k: the candidate's
            parameter count; a fit's seconds grow about as k^1.6 on the M3 series,
            ``benchmarks/results/incumbent_steps/``); k, not measured seconds, so the
            search stays the same on every machine. Default 1
            (``benchmarks/results/incumbent_steps/``: on the M3 tuning half, 58 of 75
            series at CKS's optimum instead of 55, at 1.19 times CKS's wall time instead
            of 1.33); 0: plain LogEI.
        drop_edits: the grammar edits of the best points (the pool's and the incumbent
            steps') also drop any one kernel with the operation that joined it
            (:func:`~prolas.surrogates.acquisition.sequence_drops`), not only the last:
            the smaller models inside the incumbent, where the latent search can end on
            a larger expression of lower BIC (``LIN*RQ*SE`` above ``LIN*RQ``,
            ``benchmarks/results/adaptive_stop/``). Off by default
            (``benchmarks/results/drop_edits/`` measures it).
        drops_first: an incumbent step first ranks only the incumbent's new drops
            (:func:`~prolas.surrogates.acquisition.sequence_drops`) and evaluates the best
            of them; only when none is left, its grammar edits. An incumbent of k
            kernels costs at most k - 1 such steps, each a fit smaller than its own.
            Default on (``benchmarks/results/drop_edits/``: on the M3 tuning half at fit
            seed 1, 55 of 75 series at CKS's optimum instead of 51, at 0.98 times CKS's
            wall time instead of 1.10).
        short_opening: a search of a series of fewer than ``SHORT_SERIES_POINTS`` points
            that opens with the base kernels (``base_kernels``, which pick the best one)
            evaluates, right after them, the first ``short_opening`` new
            expressions of CKS's second level: :func:`prolas.search.greedy.expand` of the
            best base kernel (CKS's base set, with the change rules where the grammar has
            change operations), each at the latent code of its two-kernel sequence. These
            are extra to ``n_init``, and the patience stop's window starts after them.
            CKS evaluates them all before anything larger; the latent search reaches them
            only through the incumbent's moves, one per step in acquisition order, and on
            short series passed over change windows worth tens of nats (``CW(SE, C)``).
            Default 11 (with ``short_n_init`` 5; 0: off). Measured on the M3 tuning half
            (``benchmarks/results/greedy_opening/``): alone, on top of the 10-point
            design, 61 of 75 series at CKS's optimum against 62 at fit seed 0 and 63
            against 52 at fit seed 1, at 1.04-1.07 times CKS's wall time; with the design
            cut to the base kernels, 64 / 67 / 63 against 62 / 52 / 56 at fit seeds
            0 / 1 / 2, at 0.93-0.95 times CKS's wall time (0.92-0.95 before).
        short_n_init: the initial design's size on a series of fewer than
            ``SHORT_SERIES_POINTS`` points, base kernels included (the opening is extra to
            it), never fewer than the base kernels; 0: ``n_init`` on every series.
            Default 5, the base kernels of the shipped change grammar: the design is
            then the base kernels and the opening alone (no warm start, no Sobol
            points), so BO and the patience window begin five evaluations earlier and
            the opening stands in for the warm start.
        long_opening: the greedy opening and ``short_n_init``'s design on series of any
            length, not only on short ones (the patience stop and the short library stay
            with short series). Off by default: measured on the nine series in
            ``benchmarks/results/long_opening/``.
        long_n_init: with ``long_opening``, the initial design's size on a series of
            ``SHORT_SERIES_POINTS`` points or more (the opening is extra to it, as on a
            short series), never fewer than the base kernels; 0: ``short_n_init``'s, as
            on a short series. ``n_init`` (10) keeps the whole default design (the base
            kernels and the warm start) and adds the opening between them. Unused
            unless ``long_opening``; measured in ``benchmarks/results/long_design/``.
        long_draws: on a series of ``SHORT_SERIES_POINTS`` points or more (not on a
            search without data, a synthetic objective), up to
            ``long_draws`` new expressions drawn from the grammar's prior (the search's
            seeded generator), each at the latent code of its token sequence, right after
            the warm start and extra to ``n_init`` (as the opening). Random search's draws
            hold a change operator about a third of the time and spread over the whole
            space; the latent search started from the base kernels and the warm start can
            spend its budget around them (two of ten seeds on solar at fit seed 0 ended
            130 nats below CKS's change window). Default 5 (0: none;
            ``benchmarks/results/long_draws/``: on the tuning series call-centre and
            sulphuric at fit seeds 0-2, higher than the 10-point design alone at CKS's
            wall time on 35 of 60 paired searches and lower on 23, both series at CKS's
            level at fit seed 0 instead of neither, the same as before at 1 and 2; on the
            nine series at fit seed 0, 6 of 9 at CKS's level at its wall time instead of 4,
            wages lost).
        long_change_rules: on a series of ``SHORT_SERIES_POINTS`` points or more (not on
            a search without data), right after the base kernels and extra to ``n_init``,
            the Automatic Statistician's change rules of the best base kernel B that CKS
            evaluates at its second level (:func:`prolas.search.greedy.change_rules`:
            ``CP(B, B)``, ``CW(B, B)``, ``CW(B, C)``, ``CW(C, B)``), each at the latent
            code of a two-kernel sequence. On solar CKS's path runs through ``CW(RQ, C)``
            (its 14th fit, more than 100 nats above any stationary model), and the PROLAS
            seeds that never met a window with ``RQ`` outside it stayed among stationary
            models (``benchmarks/results/nine_series_goals/``). Off: not adopted
            (``benchmarks/results/long_change_rules/``: on call-centre and sulphuric at
            fit seeds 0-2, lower than the default at CKS's wall time on 36 of 60 paired
            searches and higher on 18, sulphuric below CKS's level at fit seed 0).
        surrogate: ``ot`` (GP on the decoded expression, default) or ``latent`` (GP on
            the latent point, Algorithm 2 as published).
        num_restarts, raw_samples: ``optimize_acqf`` multi-start settings (``latent``).
        mc_samples: quasi-MC samples of qLogEI (``latent``, q > 1).
        pool_sobol: Sobol points in the candidate pool (128; 1 024 before
            benchmarks/results/small_pool/, which measured both on the M3 tuning half).
        pool_local: Gaussian perturbations of the ``pool_top`` best points in the pool
            (split evenly over the points and ``perturb_scales``; 128, 1 024 before).
        pool_window: the pool is the draws of the last ``pool_window`` steps, each step
            drawing ``1 / pool_window`` of ``pool_sobol`` and ``pool_local`` (1: the
            whole pool every step; benchmarks/results/strategy_speed/ measures 16).
        pool_reuse: draw each part of the pool only when what it depends on changes
            (``pool_window`` is then unused): the Sobol design once per search, the
            perturbations and edits again only when the ``pool_top`` best points change.
            Each draw is a sample of the same distribution as a fresh one, so the pool is
            alike; its expressions' graphs and OT distances to the surrogate's data are
            already known, and a step computes only the new training expression's.
        stall_limit: consecutive steps without a new expression before diversifying.
        perturb_scales: standard deviations (unit-cube units) of the perturbations,
            in the pool and, each ``perturb_tries`` times, when diversifying; then up to
            ``grammar_tries`` grammar draws for an expression not evaluated yet.
        margin: pessimistic target of failed fits, ``worst - max(1, margin * range)``.
        max_steps_factor: hard cap of ``max_steps_factor * budget`` BO steps.
        box_quantile, box_expand: passed to :meth:`TrainedVAE.latent_bounds`.
    """

    n_init: int = INITIAL_DESIGN
    num_restarts: int = 8
    raw_samples: int = 256
    mc_samples: int = 128
    pool_sobol: int = 128
    pool_local: int = 128
    pool_top: int = 3
    pool_window: int = 1
    pool_reuse: bool = False
    stall_limit: int = 20
    perturb_scales: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4)
    perturb_tries: int = 25
    grammar_tries: int = 2000
    margin: float = 0.1
    max_steps_factor: int = 20
    box_quantile: float = 0.001
    box_expand: float = 0.1
    surrogate: str = "ot"
    base_kernels: bool = True
    warm_start: int = WARM_START
    short_library: bool = False
    short_patience: int = 25
    patience_ratio: float = 0.0
    patience_min: int = 0
    surrogate_noise_floor: float = 1e-4
    incumbent_every: int = 2
    cost_power: float = 1.0
    drop_edits: bool = False
    drops_first: bool = True
    short_opening: int = 11
    short_n_init: int = 5
    long_opening: bool = False
    long_n_init: int = 0
    long_draws: int = 5
    long_change_rules: bool = False

    @classmethod
    def from_overrides(cls, items: list[str]) -> LatentBOConfig:
        """Defaults with ``key=value`` overrides (values parsed as JSON, else kept as text),
        e.g. ``["n_init=5", "surrogate=latent"]`` (used by the tuning scripts)."""
        changes: dict = {}
        for item in items:
            key, value = item.split("=", 1)
            try:
                changes[key] = json.loads(value)
            except json.JSONDecodeError:
                changes[key] = value
        return cls(**changes)

    @classmethod
    def from_record(cls, options: dict) -> LatentBOConfig:
        """The settings a search recorded (``SearchResult.extra["options"]``), to replay it.
        Records from before the base kernels opened the initial design lack
        ``base_kernels``: those searches ran without them; records from before the
        rolling pool lack ``pool_window`` (and ``pool_reuse``): those drew the whole pool
        every step; records from before the short-series options lack ``short_library`` and
        ``short_patience``: those ranked every series on the nine series' library and had
        no patience stop; records from before incumbent steps lack ``incumbent_every``
        (and ``cost_power``), records from before drop edits lack ``drop_edits`` and
        ``drops_first``, records from before the greedy opening lack ``short_opening``
        (and ``short_n_init``), records from before ``long_opening`` (and
        ``long_n_init``) opened only short series, records from before
        ``long_draws`` drew nothing from the grammar in their design, and records from
        before ``long_change_rules`` had no change rules in it."""
        values = {
            "base_kernels": False,
            "pool_window": 1,
            "pool_reuse": False,
            "short_library": False,
            "short_patience": 0,
            "patience_ratio": 0.0,
            "patience_min": 0,
            "surrogate_noise_floor": 1e-4,
            "incumbent_every": 0,
            "cost_power": 0.0,
            "drop_edits": False,
            "drops_first": False,
            "short_opening": 0,
            "short_n_init": 0,
            "long_opening": False,
            "long_n_init": 0,
            "long_draws": 0,
            "long_change_rules": False,
            **options,
        }
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})

    def __post_init__(self) -> None:
        if self.surrogate not in LATENT_SURROGATES:
            raise ProlasError(
                f"unknown surrogate {self.surrogate!r}; choose from {LATENT_SURROGATES}"
            )
        if min(self.n_init, self.num_restarts, self.raw_samples) < 1:
            raise ProlasError("n_init, num_restarts and raw_samples must be at least 1")
        if min(self.pool_sobol, self.pool_local, self.pool_top, self.pool_window) < 1:
            raise ProlasError("pool_sobol, pool_local, pool_top and pool_window must be at least 1")
        if self.warm_start < 0:
            raise ProlasError("warm_start must be at least 0")
        if self.short_patience < 0:
            raise ProlasError("short_patience must be at least 0 (0: no patience stop)")
        if self.short_opening < 0:
            raise ProlasError("short_opening must be at least 0 (0: no opening)")
        if self.short_n_init < 0:
            raise ProlasError("short_n_init must be at least 0 (0: n_init on every series)")
        if self.long_n_init < 0:
            raise ProlasError("long_n_init must be at least 0 (0: short_n_init's design)")
        if self.long_draws < 0:
            raise ProlasError("long_draws must be at least 0 (0: no grammar draws)")
        if not self.surrogate_noise_floor > 0.0:
            raise ProlasError("surrogate_noise_floor must be positive")
        if not self.patience_ratio >= 0.0 or self.patience_min < 0:
            raise ProlasError(
                "patience_ratio and patience_min must be at least 0 (ratio 0: a fixed window)"
            )
        if not self.cost_power >= 0.0:
            raise ProlasError("cost_power must be at least 0 (0: plain LogEI)")
        if self.incumbent_every < 0:
            raise ProlasError("incumbent_every must be at least 0 (0: no incumbent steps)")


def failed_fit_target(ok: Sequence[float], margin: float) -> float:
    """The surrogate's target for a failed fit, given the successful BICs ``ok`` (at
    least one): ``worst - max(1, margin * (best - worst))`` (``LatentBOConfig.margin``)."""
    lo, hi = min(ok), max(ok)
    return lo - max(1.0, margin * (hi - lo))


def patience_spent(
    best_after: Sequence[float], k: int, n_init: int, ratio: float = 0.0, k_min: int = 0
) -> bool:
    """The patience stop (``LatentBOConfig.short_patience``) after ``i = len(best_after)``
    evaluations, ``best_after[j - 1]`` being the best BIC after evaluation ``j``: the last
    ``K`` evaluations, all after the ``n_init`` of the initial design, left the best
    within ``BIC_TIE``, ``best(i) <= best(i - K) + BIC_TIE`` with ``i - K >= n_init``.

    ``K = k`` (a fixed window) when ``ratio`` is 0; else the relative window
    ``K = clamp(ceil(ratio * i*), k_min, k)`` (:func:`patience_window`).
    ``benchmarks/scripts/patience_offline.py`` replays it on finished journals."""
    i = len(best_after)
    if ratio > 0.0 and i:
        k = patience_window(best_after, k, ratio, k_min)
    return i - k >= n_init and best_after[i - 1] <= best_after[i - 1 - k] + BIC_TIE


def patience_window(best_after: Sequence[float], k_max: int, ratio: float, k_min: int) -> int:
    """The relative patience's window after ``i = len(best_after) >= 1`` evaluations,
    ``clamp(ceil(ratio * i*), k_min, k_max)``: ``i*`` is the first evaluation whose best
    was within ``BIC_TIE`` of today's, so a best found early asks for a short wait."""
    today = best_after[-1]
    first = next(j for j, b in enumerate(best_after, 1) if b >= today - BIC_TIE)
    return max(1, min(k_max, max(k_min, math.ceil(ratio * first))))


class _LatentSearch:
    """State of one PROLAS run: the latent data, targets via the Evaluator, counters."""

    def __init__(
        self,
        evaluator: Evaluator,
        trained: TrainedVAE,
        options: LatentBOConfig,
        seed: int,
        batch: int,
        log: Callable[[str], None],
        dataset_name: str | None = None,
        n_points: int | None = None,
    ) -> None:
        self.ev = evaluator
        self.dataset_name = dataset_name
        self.n_points = n_points  # the searched data's length (picks the warm start's library)
        # a short series (the patience stop applies, and the greedy opening)
        self.short = n_points is not None and n_points < SHORT_SERIES_POINTS
        # a long series (its design draws from the grammar); a search without data
        # (a synthetic objective) is neither
        self.long = n_points is not None and n_points >= SHORT_SERIES_POINTS
        # the greedy opening and its design: on short series, with long_opening on all
        self.opens = self.short or options.long_opening
        # the initial design's size: short_n_init where the search opens (long_n_init on a
        # long series, if set), but never fewer than the base kernels (the opening expands
        # the best of them); the opening is extra
        self.n_init = options.n_init
        n_base = len(trained.grammar.emitted_kernels) if options.base_kernels else 0
        if self.opens and not self.short and options.long_n_init:
            self.n_init = max(options.long_n_init, n_base)
        elif self.opens and options.short_n_init:
            self.n_init = max(options.short_n_init, n_base)
        self.vae = trained
        self.opt = options
        self.seed = seed
        self.batch = batch
        self.log = log
        self.rng = np.random.default_rng(seed)
        bounds = trained.latent_bounds(options.box_quantile, options.box_expand).to(DTYPE)
        self.lo, self.width = bounds[0], (bounds[1] - bounds[0]).clamp_min(1e-9)
        self.d = trained.latent_dim
        self.U: list[torch.Tensor] = []  # unit-cube points, each (d,)
        self.E: list[str] = []  # canonical expression of each point
        # token sequences of points placed by encoding (warm start), for grammar edits
        self.sequence_of: dict[str, tuple[str, ...]] = {}
        # the candidate pool's draws of the last pool_window steps, newest first
        # (points, their decodes, the grammar edits among them, the number of points
        # before the edits) of each draw
        self._pools: deque[tuple[torch.Tensor, list[Expression], tuple, int]] = deque(
            maxlen=options.pool_window
        )
        # pool_reuse: the Sobol design and its decodes; the last draw around the best
        # points, keyed by those points' expressions
        self._sobol_draw: tuple[torch.Tensor, list[Expression]] | None = None
        self._local_draw: tuple[tuple[str, ...], torch.Tensor, list[Expression]] | None = None
        self._edit_codes: dict[tuple, torch.Tensor] = {}  # unit-cube codes of the last edits
        self._edits_of: dict[tuple[str, ...], list[tuple[str, ...]]] = {}  # see edits_of
        self._code_of: dict[tuple[str, ...], torch.Tensor] = {}
        self.surrogate = _ExpressionGP() if options.surrogate == "ot" else _LatentGP()
        self.stats = {
            "bo_steps": 0,
            "incumbent_steps": 0,
            "opening": 0,  # evaluations of the greedy opening (short_opening)
            "design_draws": 0,  # evaluations of the design's grammar draws (long_draws)
            # evaluations of the best base kernel's change rules (long_change_rules)
            "design_change_rules": 0,
            "free_points": 0,
            "known_proposals": 0,
            "alternates": 0,
            "diversifications": 0,
            "grammar_draws": 0,
            "surrogate_failures": 0,
            "stopped": "budget",
            # the strategy's own CPU milliseconds (own_time): initial design, each BO step
            "initial_design_ms": 0.0,
            "step_ms": [],
            # what each BO step did (step_ms's order): "incumbent" (a best point's grammar
            # edits, a few dozen candidates), "pool" (the whole candidate pool, hundreds)
            # or "diversify"; their times differ several-fold, so a median hides which
            "step_kinds": [],
        }
        self._step_kind = "pool"
        self.evaluation_cpu = 0.0  # CPU seconds inside evaluate

    # --- coordinates and data --------------------------------------------------------
    def to_unit(self, z: torch.Tensor) -> torch.Tensor:
        return ((z.to(DTYPE) - self.lo) / self.width).clamp(0.0, 1.0)

    def to_latent(self, u: torch.Tensor) -> torch.Tensor:
        return self.lo + u.to(DTYPE) * self.width

    def decode(self, u: torch.Tensor) -> list[Expression]:
        """Most likely expressions of unit-cube points ``b x d``."""
        return self.vae.decode(self.to_latent(u.reshape(-1, self.d)))

    def targets(self) -> torch.Tensor:
        """``n x 1`` BIC targets; failures get the pessimistic value."""
        evs = [self.ev.lookup(e) for e in self.E]
        ok = [e.bic for e in evs if e is not None and e.ok]
        if not ok:
            return torch.zeros(len(evs), 1, dtype=DTYPE)
        bad = failed_fit_target(ok, self.opt.margin)
        return torch.tensor([[e.bic if e is not None and e.ok else bad] for e in evs], dtype=DTYPE)

    def _half_log_n(self) -> float:
        """``1/2 ln N`` of the data, read off a successful evaluation as
        ``(log_likelihood - BIC) / k`` (0 for objectives that are not a BIC)."""
        for key in self.E:
            e = self.ev.lookup(key)
            if e is not None and e.ok and e.log_likelihood is not None and e.n_params > 0:
                return max(0.0, (e.log_likelihood - e.bic) / e.n_params)
        return 0.0

    def add(self, u: torch.Tensor, expr: Expression) -> None:
        self.U.append(u.reshape(self.d).to(DTYPE))
        self.E.append(str(expr))

    def evaluate(self, points: Points) -> int:
        """Evaluate decoded points; known ones are free. Returns the number of new
        expressions evaluated. Raises BudgetExhausted once the budget is spent (points
        whose expressions were evaluated are still recorded)."""
        new_before = self.ev.n_unique
        start = time.process_time()
        try:
            self.ev.evaluate_many([e for _, e in points])
        finally:
            self.evaluation_cpu += time.process_time() - start
            for u, e in points:
                if self.ev.seen(e):
                    self.add(u, e)
        return self.ev.n_unique - new_before

    @contextlib.contextmanager
    def own_time(self, record: Callable[[float], None]) -> Iterator[None]:
        """Passes ``record`` the CPU milliseconds of the block that the strategy spent
        itself: the process's CPU time (``time.process_time``) less that spent inside
        :meth:`evaluate` (the Evaluator and, in-process, the fits)."""
        start, evaluating = time.process_time(), self.evaluation_cpu
        try:
            yield
        finally:
            spent = (time.process_time() - start) - (self.evaluation_cpu - evaluating)
            record(round(1000.0 * spent, 2))

    # --- the loop --------------------------------------------------------------------
    def run(self) -> None:
        start = self.ev.n_unique
        try:
            self._run()
        finally:
            self.stats["free_points"] = len(self.U) - (self.ev.n_unique - start)

    def _run(self) -> None:
        with self.own_time(lambda ms: self.stats.__setitem__("initial_design_ms", ms)):
            self.initial_design()
        stall = 0
        max_steps = self.opt.max_steps_factor * self.ev.budget
        steps = 0
        patience = self.opt.short_patience if self.short else 0
        best_after: list[float] = []  # best BIC after each evaluation (1-based i at i - 1)
        while not self.ev.exhausted:
            if steps >= max_steps:
                self.stats["stopped"] = f"step cap ({max_steps} steps)"
                break
            if patience and self.patience_spent(best_after, patience):
                window = patience
                if self.opt.patience_ratio:
                    window = patience_window(
                        best_after, patience, self.opt.patience_ratio, self.opt.patience_min
                    )
                self.stats["stopped"] = (
                    f"patience: no gain above {BIC_TIE} in the last {window} evaluations"
                )
                break
            steps += 1
            with self.own_time(self.stats["step_ms"].append):
                try:
                    new = self.step() if stall < self.opt.stall_limit else self.diversify()
                finally:  # also for the step the budget ended in (as its step_ms)
                    self.stats["step_kinds"].append(self._step_kind)
            if new:
                stall = 0
            else:
                stall += 1
                if stall > self.opt.stall_limit + 1:
                    self.stats["stopped"] = "no new expressions found"
                    break

    def patience_spent(self, best_after: list[float], k: int) -> bool:
        """Extends ``best_after`` to the evaluations made so far (each new one gets the
        best BIC now, repairs included) and applies :func:`patience_spent`."""
        best = self.ev.best
        value = best.bic if best is not None else -math.inf
        best_after.extend([value] * (self.ev.n_unique - len(best_after)))
        return patience_spent(
            best_after,
            k,
            self.n_init + self.stats["opening"],
            self.opt.patience_ratio,
            self.opt.patience_min,
        )

    def initial_design(self) -> None:
        """The base kernels, on a short series (any, with ``long_opening``) the greedy
        opening (extra to the design's size ``self.n_init``: ``n_init``, or
        ``short_n_init`` where the search opens, ``long_n_init`` on a long series if set),
        the warm
        start, on a long series ``long_draws`` grammar draws (extra to the design's
        size, as the opening), then Sobol points until that many new expressions (at
        most ``50 n`` points; the repeats join the data for free)."""
        n = min(self.n_init, self.ev.remaining)
        if self.opt.base_kernels:
            picked = self.base_kernel_points(n)
            self.evaluate(picked)
            n -= len(picked)
            if self.opens and self.opt.short_opening:
                k = min(self.opt.short_opening, self.ev.remaining)
                # extra to n_init: the patience window starts after them too
                self.stats["opening"] = self.evaluate(self.opening_points(k))
                n = min(n, self.ev.remaining)
            if self.long and self.opt.long_change_rules:  # extra to n_init, as the opening
                rules = self.change_rule_points(self.ev.remaining)
                self.stats["design_change_rules"] = self.evaluate(rules)
                n = min(n, self.ev.remaining)
        if self.opt.warm_start and n > 0:
            picked = self.warm_start_points(min(self.opt.warm_start, n))
            self.evaluate(picked)
            n -= len(picked)
        if self.long and self.opt.long_draws:
            k = min(self.opt.long_draws, self.ev.remaining)
            self.stats["design_draws"] = self.evaluate(self.grammar_draw_points(k))
            n = min(n, self.ev.remaining)
        if n <= 0:
            return
        sobol = torch.quasirandom.SobolEngine(self.d, scramble=True, seed=self.seed)
        pts: Points = []
        fresh: set[str] = set()
        while len(fresh) < n and len(pts) < 50 * n:
            u = sobol.draw(1, dtype=DTYPE)[0]
            e = self.decode(u)[0]
            pts.append((u, e))
            if not self.ev.seen(e):
                fresh.add(str(e))
        self.evaluate(pts)

    def base_kernel_points(self, k: int) -> Points:
        """Up to ``k`` of the grammar's base kernels of positive prior not evaluated yet,
        in the grammar's order, each at the latent code of its sequence ``(K, stop)``."""
        seqs = [(name, STOP) for name in self.vae.grammar.emitted_kernels]
        picked = [(q, e) for q in seqs if not self.ev.seen(e := sequence_expression(q))]
        return self.encoded(picked[:k])

    def opening_points(self, k: int) -> Points:
        """Up to ``k`` new expressions of CKS's second level, in CKS's order: the
        expansion (:func:`prolas.search.greedy.expand`) of the best evaluated base kernel
        of CKS's set, each at the latent code of a two-kernel sequence that decodes to it
        (expansions without one, or that the grammar cannot emit, are skipped)."""
        grammar = self.vae.grammar
        bases = [b for b in STANDARD_BASE_KERNELS if b in grammar.emitted_kernels]
        best = self.best_base_kernel()
        if best is None or k <= 0:
            return []
        picked = self.two_kernel_points(expand(parse(best), bases, change=grammar.has_change), k)
        if picked:
            why = (
                f"a series of fewer than {SHORT_SERIES_POINTS} points"
                if self.short
                else "long_opening"
            )
            self.log(
                f"greedy opening: {len(picked)} of CKS's second-level moves around {best} ({why})"
            )
        return self.encoded(picked)

    def best_base_kernel(self) -> str | None:
        """The best evaluated base kernel of CKS's set the grammar emits (None if none
        was fitted)."""
        bases = [b for b in STANDARD_BASE_KERNELS if b in self.vae.grammar.emitted_kernels]
        scored = [(r.bic, b) for b in bases if (r := self.ev.lookup(b)) is not None and r.ok]
        return max(scored)[1] if scored else None

    def two_kernel_points(
        self, moves: list[Expression], k: int
    ) -> list[tuple[tuple[str, ...], Expression]]:
        """Up to ``k`` of ``moves`` not evaluated yet, in their order, each with a
        two-kernel sequence that decodes to it (moves without one are skipped)."""
        two_kernels = two_kernel_sequences(self.vae.grammar)
        picked: list[tuple[tuple[str, ...], Expression]] = []
        for e in moves:
            if len(picked) == k:
                break
            q = two_kernels.get(str(e))
            if q is not None and not self.ev.seen(e):
                picked.append((q, sequence_expression(q)))
        return picked

    def change_rule_points(self, k: int) -> Points:
        """Up to ``k`` new change rules of the best base kernel
        (:func:`prolas.search.greedy.change_rules`), in CKS's order, each at the latent
        code of its two-kernel sequence; none in a grammar without change operators."""
        best = self.best_base_kernel()
        if best is None or k <= 0 or not self.vae.grammar.has_change:
            return []
        picked = self.two_kernel_points(change_rules(parse(best)), k)
        if picked:
            self.log(f"design: {len(picked)} change rules of {best} (long_change_rules)")
        return self.encoded(picked)

    def warm_start_points(self, k: int) -> Points:
        """Up to ``k`` new portfolio expressions valid in the VAE's grammar
        (:func:`prolas.search.portfolio.warm_start`)."""
        n_points = self.n_points if self.opt.short_library else None
        picked = warm_start(
            self.vae.grammar, k, self.ev.seen, self.dataset_name, log=self.log, n_points=n_points
        )
        return self.encoded(picked)

    def grammar_draw_points(self, k: int) -> Points:
        """Up to ``k`` new expressions drawn from the grammar's prior with the search's
        generator (at most ``grammar_tries`` draws), each at the latent code of its token
        sequence."""
        picked: dict[str, tuple[tuple[str, ...], Expression]] = {}
        for _ in range(self.opt.grammar_tries):
            if len(picked) >= k:
                break
            seq = self.vae.grammar.sample_sequence(self.rng)
            e = sequence_expression(seq)
            if not self.ev.seen(e):
                picked.setdefault(str(e), (seq, e))
        if picked:
            self.log(f"design: {len(picked)} grammar draws (long_draws)")
        return self.encoded(list(picked.values()))

    def encoded(self, picked: list[tuple[tuple[str, ...], Expression]]) -> Points:
        """``(sequence, expression)`` pairs as points at their sequences' latent codes."""
        if not picked:
            return []
        U = self.to_unit(self.vae.encode_sequences([seq for seq, _ in picked]))
        self.sequence_of.update((str(e), seq) for seq, e in picked)
        return [(u, e) for u, (_, e) in zip(U, picked)]

    def step(self) -> int:
        """One BO iteration; returns the number of new expressions evaluated."""
        self.stats["bo_steps"] += 1
        self._step_kind = "pool"
        starts = self.surrogate.propose(self)  # r x q x d, best first
        if starts is None:  # nothing to model yet
            return self.diversify()
        every = self.opt.incumbent_every
        if every and self.stats["bo_steps"] % every == 0:
            new = self.incumbent_step()
            if new is not None:
                self._step_kind = "incumbent"
                return new
        # the acquisition optimiser's best batch (the latent GP; the OT GP has none):
        # new expressions are evaluated, known ones join the data for free
        fresh, known = self.split_known(starts[0]) if len(starts) else ([], [])
        self.stats["known_proposals"] += len(known)
        missing = self.batch - len(fresh)
        if missing:
            pool, exprs = self.candidate_pool(starts[1:])
            extra = self.best_new(pool, exprs, missing, {str(e) for _, e in fresh})
            if extra is None:  # the surrogate failed
                return self.diversify()
            if len(starts):
                self.stats["alternates"] += len(extra)
            fresh += extra
        if not fresh and not known:  # no new candidate
            return self.diversify()
        new_before = self.ev.n_unique
        try:
            self.evaluate(fresh)
        finally:
            # known decodes join the data at no cost (after the new ones: a batch
            # duplicate of a new expression needs its score)
            for u, e in known:
                if self.ev.seen(e):
                    self.add(u, e)
        return self.ev.n_unique - new_before

    def incumbent_step(self) -> int | None:
        """Evaluate the ``batch`` new grammar edits of the best point of highest
        acquisition (each edit's own expression at its latent code; with ``drops_first``
        its new drops before its other edits); None if it has none left (or the
        surrogate failed): the step then ranks the whole pool."""
        (seq,) = self.sequences_at(self.top_points()[:1])
        if self.opt.drops_first:
            new = self.evaluate_best_move(self.drops_of(seq))
            if new is not None:
                return new
        return self.evaluate_best_move(self.edits_of(seq))

    def evaluate_best_move(self, moves: list[tuple[str, ...]]) -> int | None:
        """Evaluate the ``batch`` new sequences of ``moves`` (encoded already) of highest
        acquisition; None if none is new or the surrogate failed."""
        picked: dict[str, tuple[tuple[str, ...], Expression]] = {}
        for q in moves:
            e = sequence_expression(q)
            if not self.ev.seen(e):
                picked.setdefault(str(e), (q, e))
        if not picked:
            return None
        seqs = list(picked.values())
        codes = torch.stack([self._code_of[q] for q, _ in seqs])
        chosen = self.surrogate.best(self, codes, [e for _, e in seqs], self.batch)
        if not chosen:
            return None
        self.stats["incumbent_steps"] += 1
        taken = {str(e) for _, e in chosen}
        self.sequence_of.update((key, q) for key, (q, _) in picked.items() if key in taken)
        return self.evaluate(chosen)

    def split_known(self, batch: torch.Tensor) -> tuple[Points, Points]:
        """``(new, known)`` decodes of a batch ``q x d``; a duplicate inside the batch
        counts as known (scored once)."""
        exprs = self.decode(batch)
        known = [(u, e) for u, e in zip(batch, exprs) if self.ev.seen(e)]
        fresh: Points = []
        for u, e in zip(batch, exprs):
            if not self.ev.seen(e) and all(str(e) != str(f) for _, f in fresh):
                fresh.append((u, e))
            elif not self.ev.seen(e):
                known.append((u, e))
        return fresh, known

    def candidate_pool(self, starts: torch.Tensor) -> tuple[torch.Tensor, list[Expression]]:
        """Candidates ``m x d`` for new expressions and their decoded expressions: the
        draws of the last ``pool_window`` steps, newest first. Each step draws the
        optimiser's other ``starts``, ``pool_sobol / pool_window`` points of a scrambled
        Sobol design of the cube, ``pool_local / pool_window`` Gaussian perturbations of
        the best points so far (several scales) and the latent codes of grammar edits of
        their sequences (each set of edits once: the same best points edit alike); with
        ``pool_window = 1`` every step draws the whole pool. With ``pool_reuse`` the
        parts are drawn again only when what they depend on changes
        (:meth:`reused_pool`)."""
        if self.opt.pool_reuse:
            return self.reused_pool(starts)
        w = self.opt.pool_window
        parts = [starts.reshape(-1, self.d)]
        sobol = torch.quasirandom.SobolEngine(
            self.d, scramble=True, seed=int(self.rng.integers(2**31))
        )
        parts.append(sobol.draw(max(1, self.opt.pool_sobol // w), dtype=DTYPE))
        if self.U:
            local, edits = self.around_best(self.top_points(), w)
            parts += local
        else:
            edits = ()
        drawn = torch.cat(parts).to(DTYPE)
        n_edits = len(parts[-1]) if edits else 0
        self._pools.appendleft((drawn, self.decode(drawn), edits, len(drawn) - n_edits))
        # the union, newest first; a set of edits the last steps drew again is kept once
        points, exprs, seen_edits = [], [], set()
        for u, es, key, n_random in self._pools:
            keep = len(u) if key not in seen_edits else n_random
            seen_edits.add(key)
            points.append(u[:keep])
            exprs += es[:keep]
        return torch.cat(points), exprs

    def top_points(self) -> list[int]:
        """Indices of the ``pool_top`` best points so far, best first."""
        tg = self.targets()[:, 0]
        return torch.argsort(tg, descending=True)[: self.opt.pool_top].tolist()

    def around_best(self, top: list[int], w: int = 1) -> tuple[list[torch.Tensor], tuple]:
        """The pool's draws around the best points ``top``: ``pool_local / w`` Gaussian
        perturbations (split over the points and ``perturb_scales``), then the codes of
        the grammar edits of their sequences (last, if any); and the edits."""
        parts = []
        per = max(1, self.opt.pool_local // (len(top) * len(self.opt.perturb_scales) * w))
        for i in top:
            for scale in self.opt.perturb_scales:
                noise = torch.from_numpy(self.rng.normal(0.0, scale, (per, self.d)))
                parts.append((self.U[i] + noise).clamp(0.0, 1.0))
        edits = tuple(sorted({n for q in self.sequences_at(top) for n in self.edits_of(q)}))
        if edits:
            if edits not in self._edit_codes:  # the same best points edit alike
                self._edit_codes.clear()
                self._edit_codes[edits] = torch.stack([self._code_of[q] for q in edits])
            parts.append(self._edit_codes[edits])
        return parts, edits

    def reused_pool(self, starts: torch.Tensor) -> tuple[torch.Tensor, list[Expression]]:
        """The pool of ``pool_reuse``: the optimiser's ``starts`` (decoded every step),
        one Sobol design of ``pool_sobol`` points for the whole search, and the draw
        around the best points (:meth:`around_best`), made again only when the
        ``pool_top`` best expressions change. Same order as :meth:`candidate_pool`."""
        if self._sobol_draw is None:
            sobol = torch.quasirandom.SobolEngine(
                self.d, scramble=True, seed=int(self.rng.integers(2**31))
            )
            u = sobol.draw(self.opt.pool_sobol, dtype=DTYPE)
            self._sobol_draw = (u, self.decode(u))
        starts = starts.reshape(-1, self.d).to(DTYPE)
        points, exprs = [starts, self._sobol_draw[0]], self.decode(starts) if len(starts) else []
        exprs += self._sobol_draw[1]
        if self.U:
            top = self.top_points()
            key = tuple(self.E[i] for i in top)
            if self._local_draw is None or self._local_draw[0] != key:
                u = torch.cat(self.around_best(top)[0]).to(DTYPE)
                self._local_draw = (key, u, self.decode(u))
            points.append(self._local_draw[1])
            exprs += self._local_draw[2]
        return torch.cat(points), exprs

    def sequences_at(self, points: list[int]) -> list[tuple[str, ...]]:
        """The token sequences of points (indices into the data) that grammar edits
        start from: a point placed by encoding (base kernels, warm start, an incumbent
        step's edit) edits its own sequence, any other its decode."""
        decoded = self.vae.decode_sequences(
            self.to_latent(torch.stack([self.U[i] for i in points]))
        )
        return [self.sequence_of.get(self.E[i], q) for i, q in zip(points, decoded)]

    def edits_of(self, seq: tuple[str, ...]) -> list[tuple[str, ...]]:
        """The grammar edits of a best point's sequence (:func:`sequence_edits`, and
        :func:`sequence_drops` with ``drop_edits``), their unit-cube codes kept by
        sequence: encoded once per best point, as one batch."""
        edits = self._edits_of.get(seq)
        if edits is None:
            edits = sequence_edits(seq, self.vae.grammar)
            if self.opt.drop_edits:
                edits += sequence_drops(seq, self.vae.grammar)
            edits = self._edits_of[seq] = sorted(set(edits))
            self.encode_moves(edits)
        return edits

    def drops_of(self, seq: tuple[str, ...]) -> list[tuple[str, ...]]:
        """:func:`sequence_drops` of a best point's sequence, encoded as :meth:`edits_of`'s."""
        drops = sequence_drops(seq, self.vae.grammar)
        self.encode_moves(drops)
        return drops

    def encode_moves(self, moves: list[tuple[str, ...]]) -> None:
        """Keep the unit-cube codes of the sequences not encoded yet (one batch)."""
        new = [q for q in moves if q not in self._code_of]
        if new:
            self._code_of.update(zip(new, self.to_unit(self.vae.encode_sequences(new))))

    def best_new(
        self, pool: torch.Tensor, exprs: list[Expression], k: int, exclude: set[str]
    ) -> Points | None:
        """Up to ``k`` pool points decoding to distinct new expressions (neither
        evaluated nor in ``exclude``), highest acquisition first; None if the surrogate
        failed."""
        new = {key: not self.ev.seen(key) and key not in exclude for key in map(str, exprs)}
        keep = [i for i, e in enumerate(exprs) if new[str(e)]]
        if not keep:
            return []
        return self.surrogate.best(self, pool[keep], [exprs[i] for i in keep], k)

    def diversify(self) -> int:
        """Evaluate something new: perturb the incumbent, else draw from the grammar."""
        self.stats["diversifications"] += 1
        self._step_kind = "diversify"
        if self.E:
            tg = self.targets()[:, 0]
            best_u = self.U[int(torch.argmax(tg))]
            for scale in self.opt.perturb_scales:
                for _ in range(self.opt.perturb_tries):
                    step = torch.from_numpy(self.rng.normal(0.0, scale, self.d))
                    u = (best_u + step).clamp(0.0, 1.0)
                    e = self.decode(u)[0]
                    if not self.ev.seen(e):
                        return self.evaluate([(u, e)])
        for _ in range(self.opt.grammar_tries):
            s = self.vae.grammar.sample_sequence(self.rng)
            self.stats["grammar_draws"] += 1
            if self.ev.seen(sequence_expression(s)):
                continue
            u = self.to_unit(self.vae.encode_sequences([s]))[0]
            e = self.decode(u)[0]
            if self.ev.seen(e):
                # the decoder cannot reach this expression (e.g. a poorly trained
                # VAE): evaluate the grammar sample itself at its latent code
                e = sequence_expression(s)
            return self.evaluate([(u, e)])
        return 0


# --- surrogates: propose(search) -> optimised starts, best(search, ...) -> ranked pool ----


class _LatentGP:
    """Algorithm 2's surrogate: a GP on the unit-cube point and its LogEI / qLogEI."""

    def __init__(self) -> None:
        self.hypers: dict | None = None  # of the last step, to warm-start the next fit
        self.log_ei = None

    def propose(self, search: _LatentSearch) -> torch.Tensor | None:
        """Fit the GP and maximise the acquisition: its candidates ``r x q x d``, best
        first; None if there is nothing to model (all targets equal)."""
        from botorch.acquisition import LogExpectedImprovement, qLogExpectedImprovement
        from botorch.fit import fit_gpytorch_mll
        from botorch.models import SingleTaskGP
        from botorch.models.transforms.outcome import Standardize
        from botorch.optim import optimize_acqf
        from botorch.sampling import SobolQMCNormalSampler
        from gpytorch.mlls import ExactMarginalLogLikelihood

        X = torch.stack(search.U)
        Y = search.targets()
        if float(Y.max() - Y.min()) <= 0.0:
            return None
        opt, q, rng = search.opt, search.batch, search.rng
        with dense_numerics(ignore_warnings=True):
            model = SingleTaskGP(X, Y, outcome_transform=Standardize(m=1))
            if self.hypers is not None:
                model.load_state_dict(self.hypers, strict=False)
            mll = ExactMarginalLogLikelihood(model.likelihood, model)
            try:
                fit_gpytorch_mll(mll)
                self.hypers = {
                    k: v.detach().clone()
                    for k, v in model.state_dict().items()
                    if not k.startswith("outcome_transform")
                }
            except Exception:  # ModelFittingError etc.: keep the prior hyperparameters
                search.stats["surrogate_failures"] += 1
                self.hypers = None
            model.eval()
            best_f = float(Y.max())
            self.log_ei = LogExpectedImprovement(model, best_f=best_f)
            if q == 1:
                acq = self.log_ei
            else:
                sampler = SobolQMCNormalSampler(
                    torch.Size([opt.mc_samples]), seed=int(rng.integers(2**31))
                )
                acq = qLogExpectedImprovement(model, best_f=best_f, sampler=sampler)
            cube = torch.stack([torch.zeros(search.d), torch.ones(search.d)]).to(DTYPE)
            cands, vals = optimize_acqf(
                acq,
                bounds=cube,
                q=q,
                num_restarts=opt.num_restarts,
                raw_samples=opt.raw_samples,
                return_best_only=False,
                options={"seed": int(rng.integers(2**31)), "maxiter": 200},
            )
        order = torch.argsort(vals.reshape(-1), descending=True)
        return cands.reshape(-1, q, search.d)[order].detach()

    def best(
        self, search: _LatentSearch, points: torch.Tensor, exprs: list[Expression], k: int
    ) -> Points:
        """Up to ``k`` points with distinct expressions, highest LogEI first."""
        with dense_numerics(ignore_warnings=True), torch.no_grad():
            vals = torch.cat(
                [self.log_ei(points[j : j + 512].unsqueeze(1)) for j in range(0, len(points), 512)]
            )
        out: Points = []
        taken: set[str] = set()
        for j in torch.argsort(vals, descending=True).tolist():
            if str(exprs[j]) in taken:
                continue
            taken.add(str(exprs[j]))
            out.append((points[j], exprs[j]))
            if len(out) == k:
                break
        return out


class _ExpressionGP:
    """The default surrogate: a GP with the OT kernel on the evaluated expressions
    (one row per distinct expression), modelling ``BIC + k/2 ln N``."""

    def __init__(self) -> None:
        from prolas.surrogates.ot import ExpressionRegistry

        self.registry = ExpressionRegistry()  # expression graphs and their distances
        self.hypers: torch.Tensor | None = None  # raw values of the last fit: a warm start
        self.data: tuple[list[str], list[float]] = ([], [])
        self._n_params: dict[str, int] = {}  # k of each expression met, by canonical string
        # the last step's candidates, LogEI order, predicted BIC, its variance and LogEI
        self._ranked: tuple[list, list[int], torch.Tensor, torch.Tensor, torch.Tensor] | None
        self._ranked = None

    @property
    def last_ranking(self) -> list[tuple[str, float, float, float]]:
        """The last step's candidates, highest LogEI first: (expression, predicted BIC,
        its standard deviation, LogEI); for diagnostics
        (benchmarks/scripts/acquisition_trace.py)."""
        if self._ranked is None:
            return []
        cands, order, bic, var, vals = self._ranked
        sd = var.sqrt()
        return [(str(cands[i][1]), float(bic[i]), float(sd[i]), float(vals[i])) for i in order]

    def n_params(self, expr: Expression | str) -> int:
        """k of an expression (cached: a step asks for ~1 000 candidates' k)."""
        key = str(expr)
        k = self._n_params.get(key)
        if k is None:
            k = self._n_params[key] = (parse(key) if isinstance(expr, str) else expr).n_params
        return k

    def propose(self, search: _LatentSearch) -> torch.Tensor | None:
        """Take the search's data (None if fewer than two distinct expressions or all
        targets equal). Nothing to optimise: no starts. The GP is fitted in :meth:`best`,
        once the step has candidates (a step without any diversifies at no fit)."""
        target = dict(zip(search.E, search.targets()[:, 0].tolist()))
        self.data = (list(target), list(target.values()))
        ys = self.data[1]
        if len(ys) < 2 or max(ys) - min(ys) <= 0.0:
            return None
        return torch.empty(0, search.batch, search.d, dtype=DTYPE)

    def best(
        self, search: _LatentSearch, points: torch.Tensor, exprs: list[Expression], k: int
    ) -> Points | None:
        """The ``k`` distinct expressions of highest LogEI (each at its first point),
        best first; None if the fit or the prediction failed."""
        from prolas.surrogates.model import log_ei
        from prolas.surrogates.ot_gp import OTGP

        first: dict[str, int] = {}
        for i, e in enumerate(exprs):
            first.setdefault(str(e), i)
        cands = [(i, exprs[i]) for i in first.values()]  # (position in points, expression)
        keys, ys = self.data
        # model the log-likelihood BIC + k/2 ln N; subtract each candidate's known penalty
        half_log_n = search._half_log_n()
        lls = [y + half_log_n * self.n_params(e) for e, y in zip(keys, ys)]
        registry = self.registry
        with warnings.catch_warnings():
            # indefinite-Gram repairs and jitter are routine for the OT kernel
            warnings.simplefilter("ignore", NumericsWarning)
            try:
                train = registry.indices(keys)
                # the distances of every candidate to the training expressions, kept densely
                registry.anchor(train)
                fit = OTGP.fit(
                    registry,
                    train,
                    lls,
                    init=self.hypers,
                    max_iter=50,
                    noise_floor=search.opt.surrogate_noise_floor,
                )
                self.hypers = fit.raw
                mean, var = fit.predict(registry.indices([e for _, e in cands]))
                size = torch.tensor([self.n_params(e) for _, e in cands], dtype=mean.dtype)
                bic = mean - half_log_n * size
                vals = log_ei(bic, var, max(ys))
                if search.opt.cost_power:  # improvement per unit of fit cost ~ k^p
                    vals = vals - search.opt.cost_power * size.log()
            except Exception:  # a surrogate failure must not end the search
                search.stats["surrogate_failures"] += 1
                self.hypers = None
                self._ranked = None
                return None
        order = torch.argsort(vals, descending=True).tolist()
        self._ranked = (cands, order, bic, var, vals)
        return [(points[cands[i][0]], cands[i][1]) for i in order[:k]]


@contextlib.contextmanager
def _older_objects_frozen() -> Iterator[None]:
    """Keep the objects alive when the search starts (mostly the imported libraries,
    ~0.5 million) out of Python's full garbage collections during the search
    (``gc.freeze``), and hand them back after it (``gc.unfreeze``). The search
    allocates enough to trigger several full collections, each of which scanned them
    all (~0.1 s). Nothing changes if the caller has frozen objects itself."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def search_prolas(
    evaluator: Evaluator,
    dataset: Dataset | None,
    config: SearchConfig,
    *,
    log: Callable[[str], None] | None = None,
    trained: TrainedVAE | None = None,
    options: LatentBOConfig | None = None,
) -> SearchResult:
    """Run PROLAS through ``evaluator`` until its budget is spent.

    Args:
        evaluator: the shared Evaluator (cache, budget, history); the only source of
            scores.
        dataset: the data (needed only for ``config.train_vae``; its name keeps the
            series out of its own warm start).
        config: search settings: ``seed``, ``batch`` (q), ``checkpoint``, ``train_vae``,
            ``grammar``.
        log: receives one-line progress messages.
        trained: a loaded/trained KG-VAE to use instead of ``config.checkpoint``.
        options: BO-loop settings (:class:`LatentBOConfig`).

    Returns:
        The common :class:`SearchResult`; ``extra`` records the checkpoint, the latent
        dimension and box, the options, the loop counters, and the strategy's own CPU
        time: ``initial_design_ms`` and ``step_ms`` (one entry per BO step), the
        process's CPU milliseconds (``time.process_time``) less those spent inside the
        Evaluator, i.e. the surrogate fit, the pool's draws and decoding, the OT
        distances and the acquisition, without the GP fits; ``step_kinds`` says what
        each step was (``"incumbent"``, ``"pool"`` or ``"diversify"``).
    """
    log = log or (lambda s: None)
    options = options or LatentBOConfig()
    if trained is None:
        if config.train_vae and dataset is None:
            raise ProlasError("--train-vae needs a data set (r_d is computed on its inputs)")
        trained = resolve_vae(
            config.checkpoint,
            config.grammar,
            train_x=dataset.x if config.train_vae else None,
            seed=config.seed,
            log=log,
        )
    with torch.random.fork_rng(devices=[]), _older_objects_frozen():
        torch.manual_seed(config.seed)
        state = _LatentSearch(
            evaluator,
            trained,
            options,
            config.seed,
            config.batch,
            log,
            dataset_name=dataset.name if dataset is not None else None,
            n_points=dataset.n if dataset is not None else None,
        )
        try:
            state.run()
        except BudgetExhausted:
            pass
    st = state.stats
    log(
        f"PROLAS ({options.surrogate} surrogate): {evaluator.n_unique} evaluations, "
        f"{st['bo_steps']} BO steps, "
        f"{st['free_points']} proposals decoded to known expressions, "
        f"{st['diversifications']} diversifications"
    )
    extra = {
        "checkpoint": "trained" if config.train_vae else str(config.checkpoint),
        "latent_dim": trained.latent_dim,
        "latent_box": torch.stack([state.lo, state.lo + state.width]).tolist(),
        "batch": config.batch,
        "n_points": len(state.U),
        "options": {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(options).items()
        },
        **st,
    }
    return evaluator.result("prolas", config.seed, extra)
