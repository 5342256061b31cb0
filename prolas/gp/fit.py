"""Expression -> GPyTorch model; batched multi-restart fit; BIC (predict: :mod:`prolas.gp.predict`).

Model (docs/conventions.md). For the canonical form ``sum_t prod_{f in t} k_f`` of an expression

    y' ~ GP(0, sum_t s_t^2 prod_{f in t} k_f(x, x')) + N(0, s_n^2),   s_n^2 >= 1e-6,

where ``y' = (y - mean) / std``. Each term has one variance ``s_t^2`` (one GPyTorch
``ScaleKernel``); each factor has its own shape parameters; PER's period is bounded
below by the Nyquist limit ``2Δ`` (Δ = median spacing of the distinct inputs).

Score. ``log_likelihood`` is the exact log marginal likelihood of y' in nats, summed
over the N points (GPyTorch's ``ExactMarginalLogLikelihood`` divides it by N),

    log p(y') = -1/2 y'^T K^{-1} y' - 1/2 log|K| - N/2 log(2 pi),

``k = sum_t (1 + #shape params of t) + 1`` and ``BIC = log_likelihood - k/2 ln N``
(higher is better).

Speed. The log-likelihood and its analytic gradient come from :mod:`prolas.gp.gram`
(NumPy/LAPACK, no autograd); L-BFGS-B optimises them inside a box of log-parameters.
Every restart is screened for a few iterations, the best are polished. The
optimisation runs on inputs rescaled to ``t = (x - x_min) / span`` (better
conditioned); hyperparameters are converted back to x's own units afterwards and
the reported log-likelihood is recomputed in those units with the GPyTorch kernel
modules, so the numbers in a FitResult are exactly consistent with the docs/conventions.md
formulas. ``fit_gp(..., init=fit)`` warm-starts from a related fitted expression.

>>> from prolas.data import Dataset
>>> import numpy as np
>>> x = np.linspace(0, 10, 60); y = np.sin(2 * np.pi * x / 2.5) + 0.1 * x
>>> fit = fit_gp(parse("LIN + PER"), Dataset.from_arrays(x, y), restarts=4)
>>> fit.status, round(fit.period("PER"), 1)  # doctest: +SKIP
('ok', 2.5)
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from functools import partial

import numpy as np
import torch
from gpytorch.kernels import AdditiveKernel, ProductKernel, ScaleKernel
from threadpoolctl import threadpool_limits

from prolas.data import Dataset
from prolas.errors import NumericsWarning, ProlasError
from prolas.expr import Expression, factor_kernel, parse
from prolas.gp.gram import NOISE_FLOOR, GramModel
from prolas.gp.kernels import KERNEL_MODULES, log_positive
from prolas.gp.minimise import log_likelihood_at, minimise
from prolas.gp.natural import (
    ParameterSpace,
    hold_unseen,
    hold_unseen_transitions,
    theta_to_natural,
)
from prolas.gp.prior import PenalisedModel
from prolas.gp.results import FactorFit, FitResult, TermFit, bic
from prolas.gp.split import ProcessSplit
from prolas.gp.starts import (
    candidate_breaks,
    candidate_periods,
    candidate_windows,
    embed_theta,
    inherit_theta,
    initial_thetas,
)
from prolas.limits import LENGTHSCALE_FLOOR
from prolas.memory import keep_heap
from prolas.nesting import embedding, without_offset
from prolas.processes import main_module_rerun_by_workers
from prolas.records import Score, first_non_finite

__all__ = [
    "FitConfig",
    "FactorFit",
    "TermFit",
    "FitResult",
    "ParameterSpace",
    "build_covar_module",
    "dense_covariance",
    "exact_log_likelihood",
    "fit_gp",
    "natural_covar_module",
    "term_factors",
    "theta_to_natural",
    "hold_unseen",
    "hold_unseen_transitions",
    "inherit_theta",
    "candidate_periods",
    "candidate_breaks",
    "GPScorer",
    "NOISE_FLOOR",
    "bic",
]

DTYPE = torch.float64
#: The fit's algorithm, part of every fit key (:meth:`FitConfig.key`): fit caches and
#: journals made by another version of the fitter are not mixed with this one's.
#: 2: box edges at the nested models' limits, starts at contained sub-models' optima.
#: 3: period candidates by harmonic score and power, presampled starts, scanned hops.
#: (The start of a cold ``C + X`` at ``X``'s cold fit, :attr:`FitConfig.offset_start`,
#: came later without a new number: it changes only cold fits of such expressions, and
#: fit caches key those apart (:mod:`prolas.search.cache`); every other fit of fitter 3
#: is unchanged.)
#: 4: change-window restarts and hops at the data's candidate windows
#: (:func:`prolas.gp.starts.candidate_windows`; benchmarks/results/window_starts/).
FIT_ALGORITHM = 4
#: A fit's ``workers`` threads are used from this many points on. Below, the Python
#: side of each evaluation is a large share of it and the threads queue for the GIL:
#: two threads took 1.16-1.19 times as long as one on airline (144 points), and
#: 0.74-0.85 times as long at 434 points (benchmarks/results/long_series/README.md,
#: "Threads").
THREADED_FIT_POINTS = 256
#: Where a fit's independent minimisations run besides here: threads (from
#: :data:`THREADED_FIT_POINTS` points), worker processes (below), or nowhere (None).
Pool = ThreadPoolExecutor | ProcessSplit | None
#: The settings the first fitter (algorithm 1) had: its keys hold exactly these.
FIRST_FITTER_FIELDS = (
    "restarts",
    "max_iter",
    "seed",
    "attempts",
    "tolerance",
    "screen_iter",
    "keep",
    "screen_points",
    "lengthscale_floor",
)


@dataclass(frozen=True)
class FitConfig:
    """Settings of one GP fit.

    Attributes:
        restarts: random (stratified, data-informed) initialisations.
        max_iter: L-BFGS-B iterations of a polish (each may take several evaluations).
        screen_iter, keep: every restart runs ``screen_iter`` L-BFGS-B iterations,
            then the ``keep`` best are polished to convergence (most of the cost of a
            fit would otherwise go to restarts that are already clearly worse).
        screen_points: screening uses at most this many evenly spaced points; the
            polish always uses all the data.
        tolerance: L-BFGS-B's relative tolerance on the change of the objective.
        seed: seed for the initialisations (the fit is deterministic given it).
        attempts: bounded retries with fresh initialisations if every restart fails.
        lengthscale_floor: SE and RQ lengthscales are bounded below by this many median
            input spacings Δ (:attr:`prolas.data.Dataset.spacing` of the points fitted;
            default :data:`prolas.limits.LENGTHSCALE_FLOOR`, measured there); 0 keeps
            only the numerical bound (1e-4 of the span). A lengthscale below Δ
            lets a stationary factor act as extra, input-dependent noise (``LIN*LIN*RQ``
            with an RQ shorter than the sampling interval is a noise level growing
            quadratically), which BIC can reward and which extrapolates as nothing.
        stages: successive screening instead of the one-shot screen, each stage
            ``(candidates, iterations, points)`` (:meth:`schedule`); ``None``: one stage
            ``(restarts, screen_iter, screen_points)``.
        presample: random initialisations drawn before the screen; the ``restarts`` of
            highest log-likelihood on the screening points are screened (0 or at most
            ``restarts``: every draw is screened). A draw costs one evaluation without
            gradient; most draws start far from every good basin, and many more of them
            can be looked at than screened.
        hops, hop_moves, hop_iter: rounds of basin hopping from the best polished fit.
            A round scans every parameter over its plausible range with the others fixed
            (:func:`_hop_moves`: a period over the candidate periods, a lengthscale,
            alpha, variance or the noise ×/÷ 3 and 10, a change location over the break
            points and a grid, a LIN offset over a grid from half a span before the data
            to half a span after), keeps each parameter's best value, runs ``hop_iter``
            iterations from the ``hop_moves`` best of those, and polishes the best
            result if it beats the fit. Adopted by measurement:
            ``benchmarks/results/cold_fit/``.
        polish_points: converge on this many evenly spaced points before the polish on
            all the data (0: off).
        term_twins: for a model of two or more additive terms, per term the
            ``term_twins`` presampled draws of highest likelihood with that term's
            variance at its lower bound are screened too: the starts of the sub-model
            without the term (:func:`_term_twins`). 0: off (measured in
            ``benchmarks/results/cold_fit/``, "Sub-model twins").
        twins_replace: the twins take the places of the lowest-ranked random draws
            (the screen keeps ``restarts`` starts) instead of adding to them.
        prior: the width ``w`` of weak log-normal priors on the hyperparameters in scaled
            units (:mod:`prolas.gp.prior`; larger is weaker) under which the presampled
            starts are ranked and the screen runs; the polish and the hops maximise the
            likelihood alone. 0: off, the screen ranks by likelihood.
        offset_start: a cold fit (no ``init``) of an expression with top-level constant
            terms, ``C + X`` (:func:`prolas.nesting.without_offset`), first fits ``X``
            cold with these settings and starts from its optimum, so it ends at or above
            ``X``'s cold fit at the same seed on any machine (one more fit of ``X``).
            ``False``: no such start, as the fitter before it (fit caches key these
            fits apart, :mod:`prolas.search.cache`). A fit with ``init`` never has it.
        season: every period (``PER``'s) held at this value in x's units instead of
            fitted, e.g. 1 for a yearly season on x in years; the fit then has one free
            parameter fewer per periodic factor (``n_params`` and BIC count the free
            ones). 0 (default): periods are fitted. The fixed forecast kernel uses it
            (:func:`prolas.report.forecast.season_period`,
            ``benchmarks/results/fixed_season/``).
    """

    restarts: int = 8
    max_iter: int = 100
    seed: int = 0
    attempts: int = 2
    tolerance: float = 1e-7
    screen_iter: int = 20
    keep: int = 2
    screen_points: int = 200
    lengthscale_floor: float = LENGTHSCALE_FLOOR
    stages: tuple[tuple[int, int, int], ...] | None = None
    presample: int = 32
    hops: int = 2
    hop_moves: int = 4
    hop_iter: int = 10
    polish_points: int = 0
    term_twins: int = 0
    twins_replace: bool = False
    prior: float = 0.0
    season: float = 0.0
    offset_start: bool = True

    def schedule(self) -> tuple[tuple[int, int, int], ...]:
        """The screening stages before the polish, each ``(candidates, iterations,
        points)``: the best ``candidates`` of the previous stage (every restart in the
        first) run ``iterations`` L-BFGS-B iterations on at most ``points`` evenly spaced
        points; then the ``keep`` best are polished on all the data."""
        if self.stages:
            return tuple((int(c), int(i), int(p)) for c, i, p in self.stages)
        return ((self.restarts, self.screen_iter, self.screen_points),)

    def __post_init__(self) -> None:
        if self.stages is not None:
            object.__setattr__(self, "stages", tuple(tuple(st) for st in self.stages))
        # checked here, where every fit setting is built (fit_gp, SearchConfig, BenchConfig)
        if not (math.isfinite(self.lengthscale_floor) and self.lengthscale_floor >= 0):
            raise ProlasError("--lengthscale-floor must be a finite number >= 0")
        # numpy's generators take no negative seed: every fit would fail, not the call
        if not (isinstance(self.seed, int | np.integer) and self.seed >= 0):
            raise ProlasError(f"the seed must be an integer >= 0, got {self.seed!r}")
        if not (math.isfinite(self.prior) and self.prior >= 0):
            raise ProlasError(f"the prior's width must be a finite number >= 0, got {self.prior!r}")
        if not (math.isfinite(self.season) and self.season >= 0):
            raise ProlasError(f"the season must be a finite number >= 0, got {self.season!r}")
        object.__setattr__(self, "seed", int(self.seed))  # a plain int in fit-cache keys

    def key(self) -> dict:
        """The settings that identify a fit (fit caches, journal fingerprints): every
        field, except ``lengthscale_floor`` at 0 (keys written before the field existed
        lacked it), and the fitter's version :data:`FIT_ALGORITHM`."""
        d = asdict(self)
        if d["lengthscale_floor"] == 0.0:
            del d["lengthscale_floor"]
        defaults = (("term_twins", 0), ("twins_replace", False), ("prior", 0.0), ("season", 0.0))
        for name, default in defaults:
            if d[name] == default:  # keys written before the field existed lack it
                del d[name]
        # on (the default), its cold C + X fits are keyed apart (prolas.search.cache), and
        # every other fit is the one of the keys written before the field existed
        if d["offset_start"]:
            del d["offset_start"]
        d["algorithm"] = FIT_ALGORITHM
        return d


# --- model construction -------------------------------------------------------------


def build_covar_module(
    expr: Expression, batch_shape: torch.Size = torch.Size(), period_floor: float = 0.0
) -> AdditiveKernel:
    """GPyTorch covariance for the canonical form: ``Additive(Scale(Product(factors)))``.

    One ``ScaleKernel`` per term holds its variance; factors are the modules of
    :data:`prolas.gp.kernels.KERNEL_MODULES` (one set of shape parameters each).
    """
    terms = []
    for term in expr.terms:
        factors = []
        for name in term:
            name = factor_kernel(name)  # "CP_BEFORE:0" -> "CP_BEFORE" (values tied by the fit)
            cls = KERNEL_MODULES[name]
            kwargs = {"period_floor": period_floor} if name == "PER" else {}
            factors.append(cls(batch_shape=batch_shape, **kwargs))
        base = factors[0] if len(factors) == 1 else ProductKernel(*factors)
        terms.append(
            ScaleKernel(base, batch_shape=batch_shape, outputscale_constraint=log_positive())
        )
    return AdditiveKernel(*terms)


def term_factors(scale: ScaleKernel) -> list:
    base = scale.base_kernel
    return list(base.kernels) if isinstance(base, ProductKernel) else [base]


def dense_covariance(
    module: AdditiveKernel, x1: torch.Tensor, x2: torch.Tensor, per_term: bool = False
) -> torch.Tensor | list[torch.Tensor]:
    """Dense ``batch x n x m`` covariance, evaluated by calling each module's ``forward``.

    This skips GPyTorch's lazy-tensor machinery (a large share of the cost at small
    N); the value is identical to ``module(x1, x2).to_dense()``.
    """
    parts = []
    for scale in module.kernels:
        k = None
        for f in term_factors(scale):
            kf = f.forward(x1, x2)
            k = kf if k is None else k * kf
        parts.append(scale.outputscale[..., None, None] * k)
    if per_term:
        return parts
    return torch.stack(parts, 0).sum(0) if len(parts) > 1 else parts[0]


def exact_log_likelihood(
    K: torch.Tensor, y: torch.Tensor, jitter: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact Gaussian log-likelihood ``log N(y | 0, K)`` in nats, batched.

    Args:
        K: ``batch x n x n`` covariance including noise.
        y: ``n`` targets.
    Returns:
        ``(ll, ok)``: ``batch`` log-likelihoods (NaN where the Cholesky failed) and a
        ``batch`` boolean mask of successful factorisations.
    """
    n = y.shape[-1]
    if jitter:
        K = K + jitter * torch.eye(n, dtype=K.dtype)
    L, info = torch.linalg.cholesky_ex(K)
    ok = info == 0
    alpha = torch.cholesky_solve(y.expand(*K.shape[:-2], n).unsqueeze(-1), L)[..., 0]
    quad = (y * alpha).sum(-1)
    logdet = 2.0 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    ll = -0.5 * quad - 0.5 * logdet - 0.5 * n * math.log(2 * math.pi)
    ll = torch.where(ok & torch.isfinite(ll), ll, torch.full_like(ll, float("nan")))
    return ll, ok & torch.isfinite(ll)


# --- data-informed initialisation ---------------------------------------------------


# --- fitting -------------------------------------------------------------------------


def natural_covar_module(fit: FitResult) -> AdditiveKernel:
    """A non-batched GPyTorch covariance holding the fitted natural-unit hyperparameters."""
    expr = parse(fit.expression)
    module = build_covar_module(expr).to(DTYPE)
    for scale, term in zip(module.kernels, fit.terms):
        scale.outputscale = torch.tensor(term.variance, dtype=DTYPE)
        for f, ff in zip(term_factors(scale), term.factors):
            for pname, v in ff.params.items():
                f.set_param(pname, v)
    return module


def _natural_log_likelihood(fit: FitResult, dataset: Dataset) -> float:
    module = natural_covar_module(fit)
    x = torch.tensor(dataset.x, dtype=DTYPE).reshape(-1, 1)
    y = torch.tensor(dataset.y_standardised, dtype=DTYPE)
    with torch.no_grad():
        K = dense_covariance(module, x, x) + fit.noise_variance * torch.eye(dataset.n, dtype=DTYPE)
        ll, ok = exact_log_likelihood(K, y)
    return float(ll) if bool(ok) else float("nan")


def _each(pool: ThreadPoolExecutor | None, fn: Callable, items: Sequence) -> list:
    """``[fn(item) for item in items]``, in order, on the pool's threads when there is one.

    A fit's restarts, polishes and hop moves are independent minimisations; most of each
    evaluation is numpy and LAPACK work on ``n x n`` arrays, which release the GIL, so
    two threads on two cores run two of them side by side (a fit took 0.74-0.85 times as
    long on two threads as on one at 434 points: the arrays share the memory bandwidth
    and the Python between them queues for the GIL). Each runs exactly the operations it
    would run alone: the fit's result does not depend on ``workers``. On a model of fewer
    than :data:`THREADED_FIT_POINTS` points (a screen on a subsample) it runs in order.
    """
    if pool is None or len(items) < 2:
        return [fn(item) for item in items]
    return list(pool.map(fn, items))


def _minimise_each(
    pool: Pool,
    model: GramModel,
    thetas: Sequence[np.ndarray],
    y: np.ndarray,
    max_iter: int,
    tolerance: float,
) -> list[tuple[np.ndarray, float]]:
    """:func:`minimise` from each of ``thetas`` (:func:`_each`, or split between
    processes, :class:`prolas.gp.split.ProcessSplit`)."""
    if isinstance(pool, ProcessSplit):
        return pool.minimise(model, thetas, y, max_iter, tolerance)
    pool = pool if model.n >= THREADED_FIT_POINTS else None
    return _each(
        pool, partial(minimise, model, y=y, max_iter=max_iter, tolerance=tolerance), thetas
    )


def _value_each(
    pool: Pool, model: GramModel, thetas: Sequence[np.ndarray], y: np.ndarray
) -> list[float]:
    """:func:`log_likelihood_at` each of ``thetas`` (:func:`_each`, or split between
    processes)."""
    if isinstance(pool, ProcessSplit):
        return pool.value(model, thetas, y)
    pool = pool if model.n >= THREADED_FIT_POINTS else None
    return _each(pool, partial(log_likelihood_at, model, y=y), thetas)


def _term_twins(
    model: GramModel, draws: np.ndarray, pm: GramModel, py: np.ndarray, k: int, pool: Pool
) -> np.ndarray:
    """For each additive term of a model of two or more terms, the ``k`` draws of highest
    likelihood once that term's variance is at its lower bound: the starts of the
    sub-model without the term, in this model's parameters (the draws of shared
    parameters are alike: :func:`prolas.gp.starts.initial_thetas`). ``0 x P`` if none."""
    if k <= 0:  # the default: nothing to compute on every fit's path
        return np.zeros((0, model.size))
    var_idx = [kk for kk, p in enumerate(model.params) if p.name == "variance"]
    if len(var_idx) < 2:
        return np.zeros((0, model.size))
    out = []
    for v in var_idx:
        tw = np.array(draws, dtype=np.float64)
        tw[:, v] = model.params[v].lower
        lls = _value_each(pool, pm, list(tw), py)
        lls = np.array([x if math.isfinite(x) else -math.inf for x in lls])
        out += [tw[j] for j in np.argsort(-lls, kind="stable")[:k] if math.isfinite(lls[j])]
    return np.array(out).reshape(-1, model.size)


def _screen(
    starts: np.ndarray,
    stages: tuple[tuple[int, int, int], ...],
    on_points,
    config: FitConfig,
    pool: Pool = None,
) -> list[np.ndarray]:
    """Successive screening (:meth:`FitConfig.schedule`): the candidates after the last
    stage, best first (failed ones dropped)."""
    cands = [(np.asarray(th), 0.0) for th in starts]
    for k, (count, iters, points) in enumerate(stages):
        if k:
            cands = cands[: max(int(count), 1)]
        m, yy = on_points(points)
        cands = _minimise_each(pool, m, [th for th, _ in cands], yy, iters, config.tolerance)
        cands = [(th, ll) for th, ll in cands if math.isfinite(ll)]
        cands.sort(key=lambda c: -c[1])
    return [th for th, _ in cands]


def _hop_moves(
    model: GramModel, theta: np.ndarray, y: np.ndarray, hints: tuple[float, ...] = ()
) -> list[tuple[int, np.ndarray]]:
    """``(k, theta')`` pairs: ``theta`` with parameter ``k`` moved over its plausible range.

    A PER period to every candidate period (:func:`candidate_periods`: on a search view of
    a long series the full series' periods ``hints``, scaled units, first; periodogram
    peaks, a grid, beyond the span); a lengthscale, alpha, variance or the noise three and
    ten times larger or smaller; a change location or window start to the data's break
    points and to a grid over the data, and a window (start and end) to each of the data's
    candidate windows (:func:`candidate_windows`); a LIN offset to a grid from half a span
    before the data to half a span after, its term's variance rescaled so that
    ``v_t mean_n (t_n - c)^2`` stays as it was (otherwise every move of ``c`` would also
    change the term's size, and look bad).
    """
    moves = []
    breaks = periods = windows = None
    scale = [math.log(v) for v in (1 / 10, 1 / 3, 3.0, 10.0)]
    variance_of = {p.term: k for k, p in enumerate(model.params) if p.name == "variance"}
    end_of = {p.group: k for k, p in enumerate(model.params) if p.name == "end"}

    def spread(c: float) -> float:
        return float(np.mean((model.t - c) ** 2))

    for k, p in enumerate(model.params):
        if p.name == "period":
            if periods is None:
                periods = candidate_periods(model.t, y, math.exp(p.lower), hints=hints)
            values = [math.log(v) for v in periods]
        elif p.name in ("lengthscale", "alpha", "variance", "noise"):
            values = [theta[k] + d for d in scale]
        elif p.name in ("location", "start"):
            if breaks is None:
                breaks = candidate_breaks(model.t, y)
            values = [*breaks, *np.linspace(0.05, 0.95, 7)]
        elif p.name == "offset":
            values = list(np.linspace(-0.5, 1.5, 9))
        else:
            continue
        if p.name == "start":  # the whole window to each candidate window
            if windows is None:
                windows = candidate_windows(model.t, y)
            e = end_of[p.group]
            for a, b in windows:
                th = theta.copy()
                th[k] = min(max(a, p.lower), p.upper)
                th[e] = min(max(b, model.params[e].lower), model.params[e].upper)
                if max(abs(th[k] - theta[k]), abs(th[e] - theta[e])) > 0.05:
                    moves.append((k, th))
        for v in values:
            th = theta.copy()
            th[k] = min(max(v, p.lower), p.upper)
            if abs(th[k] - theta[k]) <= 0.05:
                continue
            if p.name == "offset":
                i = variance_of[p.term]
                th[i] += math.log(spread(theta[k]) / spread(th[k]))
                th[i] = min(max(th[i], model.params[i].lower), model.params[i].upper)
            moves.append((k, th))
    return moves


def _hop(
    model: GramModel,
    theta: np.ndarray,
    ll: float,
    y: np.ndarray,
    config: FitConfig,
    hints: tuple[float, ...] = (),
    pool: Pool = None,
) -> tuple[np.ndarray, float]:
    """Basin hopping from a polished fit (:class:`FitConfig`): per round, the ``hop_moves``
    best single-parameter moves of :func:`_hop_moves` run ``hop_iter`` iterations each;
    the best that beats the fit by 0.01 nats is polished and replaces it."""
    for _ in range(config.hops):
        # each parameter's best value along its scan (the others fixed), then the
        # ``hop_moves`` best parameters
        best: dict[int, tuple[float, np.ndarray]] = {}
        with np.errstate(all="ignore"):
            scan = _hop_moves(model, theta, y, hints)
        values = _value_each(pool, model, [th for _, th in scan], y)
        for (k, th), v in zip(scan, values):
            if math.isfinite(v) and (k not in best or v > best[k][0]):
                best[k] = (v, th)
        ranked = sorted(best.values(), key=lambda c: -c[0])
        moves = [th for _, th in ranked[: config.hop_moves]]
        tried = _minimise_each(pool, model, moves, y, config.hop_iter, config.tolerance)
        tried = [(th, v) for th, v in tried if math.isfinite(v) and v > ll + 0.01]
        if not tried:
            break
        th, _ = max(tried, key=lambda c: c[1])
        th, v = minimise(model, th, y, config.max_iter, config.tolerance)
        if not v > ll:
            break
        theta, ll = th, v
    return theta, ll


def _fit_config(config: FitConfig | None, restarts: int | None, seed: int | None) -> FitConfig:
    config = config or FitConfig()
    changes = {k: v for k, v in (("restarts", restarts), ("seed", seed)) if v is not None}
    return replace(config, **changes) if changes else config


def fit_gp(
    expr: Expression | str,
    dataset: Dataset,
    config: FitConfig | None = None,
    *,
    restarts: int | None = None,
    seed: int | None = None,
    init: FitResult | Sequence[FitResult] | None = None,
    cold: bool = True,
    hop_from_best_only: bool = False,
    workers: int = 1,
) -> FitResult:
    """Fit an expression by exact marginal likelihood with random restarts.

    Each restart runs ``screen_iter`` L-BFGS-B iterations (on at most
    ``screen_points`` evenly spaced points); the ``keep`` best are then polished to
    convergence on all the data (:func:`prolas.gp.minimise.minimise`; analytic gradients from
    :class:`prolas.gp.gram.GramModel`).

    Args:
        init: fitted related expressions (natural units) to start from, besides the
            random restarts. One that ``expr`` contains (:mod:`prolas.nesting`) starts a
            polish exactly at its optimum (:func:`prolas.gp.starts.embed_theta`), so the
            fit ends at or above its log-likelihood; every one also starts a restart from
            the hyperparameters it shares (:func:`inherit_theta`), screened and polished
            on top of the ``keep`` best cold ones, which are chosen as without ``init``:
            the fit is never worse than the cold fit.
            (Without ``init``, a ``C + X`` first fits ``X`` cold and starts from its
            optimum, :attr:`FitConfig.offset_start`; with ``init`` it starts from the
            fits given instead, and is never worse than the cold fit without that
            start.)
        cold: ``False`` skips the random restarts and fits from ``init`` alone (a
            repair of a fit that a contained sub-model beat).
        hop_from_best_only: run the basin-hopping rounds (``config.hops``) from the
            best optimum only, not also from the best random restart's when that is
            another one (which makes a fit with ``init`` never worse than without). The
            refit of a chosen model on more data uses it (:func:`prolas.pipeline.refit`):
            its random restart is there for when the model's own fit is poor on all the
            data, and then it is the best.
        workers: how many run the fit's independent minimisations (restarts, polishes,
            hop moves) side by side: threads from :data:`THREADED_FIT_POINTS` to 2 000
            points (:func:`_each`), this process and ``workers - 1`` worker processes
            below (:class:`prolas.gp.split.ProcessSplit`, where threads queue for the
            GIL); above 2 000 points the BLAS threads parallelise each evaluation
            instead. The result is the same for every value. Give it the cores nothing
            else uses: a fit inside a pool of worker processes keeps 1. Worker
            processes start only where they would not run the main module's code
            again (:func:`prolas.processes.main_module_rerun_by_workers`): from a
            script, the minimisations run here unless it calls
            :func:`prolas.processes.main_module_is_guarded`.

    Never raises for numerical trouble: if every restart fails after
    ``config.attempts`` fresh initialisations, the result has ``status="failed"`` and
    the reason in ``error``. An ``"ok"`` result holds only finite numbers.
    """
    # Small-N linear algebra is fastest on one BLAS thread; OpenBLAS's threads spin
    # against each other (and against other processes), measured 100x slower on a
    # 144 x 144 dot product. Large N keeps the threads.
    threads = 1 if dataset.n <= 2000 else None
    keep_heap()  # the evaluations' N x N temporaries reuse freed memory (prolas.memory)
    workers = max(1, int(workers)) if threads == 1 else 1
    pool: Pool = None
    if workers > 1 and dataset.n >= THREADED_FIT_POINTS:
        pool = ThreadPoolExecutor(workers, thread_name_prefix="prolas-fit")
    elif workers > 1 and main_module_rerun_by_workers() is None:
        # small data: threads queue for the GIL, processes do not; but a worker would
        # run an unguarded script's top level again (its fits, its files): not there
        pool = ProcessSplit(workers)
    try:
        with threadpool_limits(limits=threads, user_api="blas"):
            config = _fit_config(config, restarts, seed)
            return _fit_gp(expr, dataset, config, init, cold, pool, hop_from_best_only)
    finally:
        if isinstance(pool, ThreadPoolExecutor):
            pool.shutdown()


def _fit_gp(
    expr: Expression | str,
    dataset: Dataset,
    config: FitConfig,
    init: FitResult | Sequence[FitResult] | None,
    cold: bool = True,
    pool: Pool = None,
    hop_from_best_only: bool = False,
) -> FitResult:
    t_start = time.perf_counter()
    expr = parse(expr) if isinstance(expr, str) else expr
    R = max(1, int(config.restarts))
    inits = [init] if isinstance(init, FitResult) else list(init or ())
    inits = [f for f in inits if f.ok and f.terms]
    x0, s = float(dataset.x[0]), float(dataset.span)
    t = (dataset.x - x0) / s
    y = np.ascontiguousarray(dataset.y_standardised, dtype=np.float64)
    floor_t = 2.0 * dataset.spacing / s
    ls_floor_t = float(config.lengthscale_floor) * dataset.spacing / s
    hints = tuple(p / s for p in dataset.period_hints)  # a search view's full-series periods
    season_t = float(config.season) / s if config.season > 0 else 0.0
    if not (math.isfinite(s) and s > 0 and np.all(np.isfinite(t)) and np.all(np.isfinite(y))):
        return _failed(expr, dataset, t_start, "inputs or targets not finite after scaling", R)
    if not cold and not inits:
        return _failed(expr, dataset, t_start, "no fit to start from (cold=False)", R)
    if 0 < season_t < floor_t:
        return _failed(
            expr, dataset, t_start, f"season {config.season:g} below two steps of the data", R
        )
    offset_free = without_offset(expr) if cold and config.offset_start and not inits else None
    if offset_free is not None:
        # ``C + X`` fitted cold: fit X first and start from its optimum (the constant's
        # variance at its lower limit: an exact start below), so the fit ends at or above
        # X's cold fit at the same seed, on any machine. Without it, C + PER*PER (mauna)
        # and C + LIN + PER (sulphuric) ended 3.7 and 18 nats below PER*PER and LIN + PER
        # in another basin (tests/gp/test_cold_fit.py). Costs one fit of X. Inside a
        # search ``init`` holds the contained models it has fitted instead.
        offset_fit = _fit_gp(offset_free, dataset, config, None, True, pool, hop_from_best_only)
        if offset_fit.ok and offset_fit.terms:
            inits = [offset_fit]
    model = GramModel(expr, t, floor_t, ls_floor_t, season_t)
    subsets: dict[int, tuple[GramModel, np.ndarray]] = {}

    def on_points(points: int) -> tuple[GramModel, np.ndarray]:
        """The model and targets on at most ``points`` evenly spaced points."""
        idx = dataset.spaced_indices(points)
        if idx.size == dataset.n:
            return model, y
        if idx.size not in subsets:
            subsets[idx.size] = (GramModel(expr, t[idx], floor_t, ls_floor_t, season_t), y[idx])
        return subsets[idx.size]

    def screened_on(points: int) -> tuple[GramModel, np.ndarray]:
        """:func:`on_points`, under the prior where there is one (:mod:`prolas.gp.prior`)."""
        m, yy = on_points(points)
        if config.prior <= 0:
            return m, yy
        if id(m) not in penalised:
            penalised[id(m)] = PenalisedModel(m, config.prior)
        return penalised[id(m)], yy

    penalised: dict[int, PenalisedModel] = {}
    errors = []
    stages = config.schedule()
    for attempt in range(config.attempts):
        # each parameter's draws are seeded by (fit seed, attempt, its name): a fit does
        # not depend on the order a search evaluates expressions in, and nested models
        # start their shared parameters alike (prolas.gp.starts.parameter_streams)
        draws = max(R, config.presample)
        starts = initial_thetas(model, y, floor_t, (config.seed, attempt), draws, hints)
        if config.presample > R:
            # keep the R draws of highest likelihood on the first stage's points
            pm, py = screened_on(stages[0][2])
            lls = _value_each(pool, pm, list(starts), py)
            lls = [v if math.isfinite(v) else -math.inf for v in lls]
            twins = _term_twins(model, starts, pm, py, config.term_twins, pool)
            keep_cold = max(R - len(twins), 1) if config.twins_replace else R
            starts = starts[np.argsort(-np.array(lls), kind="stable")[:keep_cold]]
            if len(twins):
                starts = np.concatenate([starts, twins])
        exact, warm = [], []
        for f in inits if attempt == 0 else ():
            try:
                if (emb := embedding(expr, f.expression)) is not None:
                    exact.append(embed_theta(model, f, emb, starts[0], x0, s))
                warm.append(inherit_theta(model, f, starts[0], x0, s))
            except (OverflowError, ZeroDivisionError, ValueError) as exc:
                errors.append(f"warm start from {f.expression} skipped ({exc})")
        # Screening: every random start runs the stages, the best going on to the next;
        # the ``keep`` best are then polished to convergence on all the data.
        chosen = _screen(starts, stages, screened_on, config, pool)[: config.keep] if cold else []
        n_cold = len(chosen)
        # A warm start is screened in the first stage and polished besides (a warm fit is
        # never worse than the cold one); an exact start is polished from where it is: at
        # a contained sub-model's optimum on all the data.
        if warm:
            first = stages[0]
            sm, sy = screened_on(first[2])
            screened = _minimise_each(pool, sm, warm, sy, first[1], config.tolerance)
            chosen += [th for th, ll in screened if math.isfinite(ll)]
        if config.polish_points and cold:
            # converge on a subsample first: the full-data polish then starts near its end
            pm, py = on_points(config.polish_points)
            chosen = _minimise_each(pool, pm, chosen, py, config.max_iter, config.tolerance)
            chosen = [th for th, _ in chosen]
        polished = _minimise_each(
            pool, model, [*chosen, *exact], y, config.max_iter, config.tolerance
        )
        polished = [(p, k < n_cold) for k, p in enumerate(polished)]
        polished = [(p, from_cold) for p, from_cold in polished if math.isfinite(p[1])]
        if not polished:
            tried = (R if cold else 0) + len(warm) + len(exact)
            errors.append(f"attempt {attempt + 1}: all {tried} restarts failed (Cholesky)")
            continue
        polished.sort(key=lambda p: -p[0][1])
        if config.hops and cold:
            # hop from the best random start's optimum, as a fit without ``init`` does (so
            # a fit with starts from related models is never worse than without), and
            # from the best optimum overall when that is another one
            best_cold = next((p for p, from_cold in polished if from_cold), None)
            if hop_from_best_only:
                best_cold = None
            sources = [p for p in (best_cold, polished[0][0]) if p is not None]
            if len(sources) == 2 and sources[0] is sources[1]:
                sources = sources[:1]
            hopped = [_hop(model, *p, y, config, hints, pool) for p in sources]
            polished = [(p, False) for p in hopped] + polished
            polished.sort(key=lambda p: -p[0][1])
        polished = [p for p, _ in polished]
        restart_lls = tuple(float(ll) for _, ll in polished)
        for theta, ll in polished:
            fit = _natural_fit(
                expr, model, theta, ll, dataset, R, restart_lls, errors, config.season
            )
            if fit is not None:
                return replace(fit, seconds=time.perf_counter() - t_start, dataset=dataset)
    return _failed(expr, dataset, t_start, "; ".join(errors) or "fit failed", R)


def _natural_fit(
    expr: Expression,
    model: GramModel,
    theta: np.ndarray,
    ll: float,
    dataset: Dataset,
    R: int,
    restart_lls: tuple[float, ...],
    errors: list[str],
    season: float = 0.0,
) -> FitResult | None:
    """The fit at ``theta`` in x's own units, its log-likelihood recomputed there; ``None``
    (the reason appended to ``errors``) when it cannot be represented or is not finite.
    With a ``season`` (:attr:`FitConfig.season`) the fixed periods are not counted in
    ``n_params`` and BIC."""
    x0, s = float(dataset.x[0]), float(dataset.span)
    fixed = sum(p.lower == p.upper for p in model.params)  # held: a box of one value
    k = expr.n_params - fixed
    try:
        terms, noise = theta_to_natural(model, theta, x0, s)
    except (OverflowError, ZeroDivisionError) as exc:
        # e.g. a LIN variance in x's units is v / span^2: beyond float range when
        # the span is ~1e155 or ~1e-155
        errors.append(f"hyperparameters not representable in x's units ({exc})")
        return None
    fit = FitResult(
        expression=str(expr),
        status="ok",
        n=dataset.n,
        n_params=k,
        terms=terms,
        noise_variance=noise,
        restarts=R,
        restart_log_likelihoods=restart_lls,
        season=float(season) if fixed else 0.0,
    )
    ll_nat = _natural_log_likelihood(fit, dataset)
    if not math.isfinite(ll_nat):
        errors.append("natural-unit covariance not positive definite")
        return None
    if abs(ll_nat - ll) > 1e-3 * max(1.0, abs(ll_nat)):
        warnings.warn(
            f"{expr}: log-likelihood changed from {ll:.4f} to {ll_nat:.4f} "
            "when converting to natural units",
            NumericsWarning,
            stacklevel=3,
        )
    fit = replace(fit, log_likelihood=ll_nat, bic=bic(ll_nat, k, dataset.n))
    problem = first_non_finite(fit.to_json())
    if problem is not None:
        errors.append(f"non-finite {problem}")
        return None
    return fit


def _failed(expr: Expression, dataset: Dataset, t_start: float, error: str, R: int) -> FitResult:
    seconds = time.perf_counter() - t_start
    return FitResult.failed(str(expr), dataset.n, expr.n_params, error, seconds, restarts=R)


# --- scorer for the search Evaluator ---------------------------------------------------


@dataclass(frozen=True)
class GPScorer:
    """Evaluator scorer: fit the expression on ``dataset`` and return its BIC.

    Picklable (for process pools and Dask): holds only the data and the config.
    """

    dataset: Dataset
    config: FitConfig = FitConfig()
    threads: int | None = 1
    #: threads of each fit's independent minimisations (:func:`fit_gp`'s ``workers``;
    #: the fits are the same for every value)
    workers: int = 1

    def __call__(self, expr: Expression, init: Sequence[FitResult] = ()) -> Score:
        """Fit ``expr``; ``init``: related fits to warm-start from (:func:`fit_gp`)."""
        if self.threads is not None and torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)  # small-N fits are fastest single-threaded
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NumericsWarning)
            fit = fit_gp(expr, self.dataset, self.config, init=init or None, workers=self.workers)
            return fit.to_score()

    def refit(self, expr: Expression, init: Sequence[FitResult]) -> Score:
        """Refit ``expr`` from ``init`` alone (no random restarts): the repair of a fit
        that a contained sub-model's fit beat (:class:`prolas.search.evaluator.Evaluator`)."""
        if self.threads is not None and torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NumericsWarning)
            fit = fit_gp(
                expr, self.dataset, self.config, init=init, cold=False, workers=self.workers
            )
            return fit.to_score()
