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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Protocol

import numpy as np
import torch
from gpytorch.kernels import AdditiveKernel, ProductKernel, ScaleKernel
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from prolas.data import Dataset
from prolas.errors import NumericsWarning, ProlasError
from prolas.expr import CHANGE_FACTORS, Expression, factor_group, factor_kernel, parse
from prolas.gp.gram import NOISE_FLOOR, GramModel, ParamInfo
from prolas.gp.kernels import KERNEL_MODULES, log_positive
from prolas.limits import LENGTHSCALE_FLOOR
from prolas.records import Score, first_non_finite

__all__ = [
    "FitConfig",
    "FactorFit",
    "TermFit",
    "FitResult",
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
#: Extra diagonal jitter tried, in order, when a Cholesky fails (bounded retries).
JITTER_SCHEDULE = (0.0, 1e-8, 1e-6, 1e-4)


def bic(log_likelihood: float, n_params: int, n: int) -> float:
    """``BIC = log_likelihood - k/2 ln N`` (docs/conventions.md; higher is better)."""
    return float(log_likelihood - 0.5 * n_params * math.log(n))


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

    def __post_init__(self) -> None:
        # checked here, where every fit setting is built (fit_gp, SearchConfig, BenchConfig)
        if not (math.isfinite(self.lengthscale_floor) and self.lengthscale_floor >= 0):
            raise ProlasError("--lengthscale-floor must be a finite number >= 0")
        # numpy's generators take no negative seed: every fit would fail, not the call
        if not (isinstance(self.seed, int | np.integer) and self.seed >= 0):
            raise ProlasError(f"the seed must be an integer >= 0, got {self.seed!r}")
        object.__setattr__(self, "seed", int(self.seed))  # a plain int in fit-cache keys

    def key(self) -> dict:
        """The settings that identify a fit (fit caches, journal fingerprints): every
        field, except ``lengthscale_floor`` at 0, so that keys written before the field
        existed still hold for the fits they describe."""
        d = asdict(self)
        if d["lengthscale_floor"] == 0.0:
            del d["lengthscale_floor"]
        return d


@dataclass(frozen=True)
class FactorFit:
    """A fitted factor: kernel name and its shape parameters in x's own units."""

    kernel: str
    params: dict[str, float]

    def to_json(self) -> dict:
        return {"kernel": self.kernel, **{k: float(v) for k, v in self.params.items()}}


@dataclass(frozen=True)
class TermFit:
    """A fitted product term: its variance (for standardised y) and its factors."""

    variance: float
    factors: tuple[FactorFit, ...]

    @property
    def label(self) -> str:
        return "*".join(f.kernel for f in self.factors)

    def to_json(self) -> dict:
        return {"variance": float(self.variance), "factors": [f.to_json() for f in self.factors]}


@dataclass(frozen=True)
class FitResult:
    """Outcome of fitting one expression (``status`` is ``"ok"`` or ``"failed"``)."""

    expression: str
    status: str
    n: int
    n_params: int
    log_likelihood: float | None = None
    bic: float | None = None
    terms: tuple[TermFit, ...] = ()
    noise_variance: float | None = None
    seconds: float = 0.0
    error: str | None = None
    restarts: int = 0
    restart_log_likelihoods: tuple[float, ...] = field(default=(), repr=False)
    #: ``None`` when ``log_likelihood`` is the exact log marginal likelihood; otherwise
    #: the name of the approximation it comes from (e.g. ``"sgpr-512"``: the collapsed
    #: variational lower bound with 512 inducing points, :mod:`prolas.gp.scalable`).
    approximation: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def failed(
        cls, expression: str, n: int, n_params: int, error: str, seconds: float, **extra
    ) -> FitResult:
        """A failed fit: no numbers, the reason in ``error``."""
        return cls(expression, "failed", n, n_params, seconds=seconds, error=error, **extra)

    @property
    def expr(self) -> Expression:
        return parse(self.expression)

    def to_json(self) -> dict:
        """The ``best`` block of result.json (docs/result-json.md)."""
        return {
            "expression": self.expression,
            "log_likelihood": self.log_likelihood,
            "n_params": self.n_params,
            "bic": self.bic,
            "terms": [t.to_json() for t in self.terms],
            "noise_variance": self.noise_variance,
        }

    @classmethod
    def from_json(cls, d: dict, n: int) -> FitResult:
        terms = tuple(
            TermFit(
                t["variance"],
                tuple(
                    FactorFit(f["kernel"], {k: v for k, v in f.items() if k != "kernel"})
                    for f in t["factors"]
                ),
            )
            for t in d["terms"]
        )
        return cls(
            expression=d["expression"],
            status="ok",
            n=n,
            n_params=d["n_params"],
            log_likelihood=d["log_likelihood"],
            bic=d["bic"],
            terms=terms,
            noise_variance=d["noise_variance"],
        )

    def period(self, kernel: str = "PER") -> float:
        """Period of the first PER factor (convenience for reports and tests)."""
        for t in self.terms:
            for f in t.factors:
                if f.kernel == kernel:
                    return f.params["period"]
        raise KeyError(f"no {kernel} factor in {self.expression}")

    def to_score(self) -> Score:
        return Score(
            self.expression,
            self.status,
            self.bic,
            self.log_likelihood,
            self.n_params,
            self.seconds,
            self.error,
            self,
        )


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


def candidate_periods(t: np.ndarray, y: np.ndarray, floor: float, k: int = 6) -> np.ndarray:
    """Periods (in the units of ``t``) of the strongest periodogram peaks, plus a grid.

    Lomb-Scargle periodogram of the linearly detrended series on frequencies from
    ``1/span`` to the Nyquist limit ``1/floor``; irregular inputs are fine.
    """
    from scipy.signal import lombscargle

    span = float(t.max() - t.min())
    resid = y - np.polyval(np.polyfit(t, y, 1), t)
    f_lo, f_hi = 1.0 / span, 1.0 / max(floor, 1e-12)
    freqs = np.geomspace(f_lo, f_hi, 2000)
    power = lombscargle(t, resid - resid.mean(), 2 * np.pi * freqs)
    peaks = [
        i for i in range(1, len(power) - 1) if power[i] >= power[i - 1] and power[i] >= power[i + 1]
    ]
    peaks.sort(key=lambda i: -power[i])
    periods = [1.0 / freqs[i] for i in peaks[:k]]
    # a coarse grid, plus periods beyond the span (PER then acts as a smooth kernel)
    grid = np.geomspace(max(floor * 1.5, span / 50), span / 2, 4)
    return np.array(periods + list(grid) + [2.0 * span, 5.0 * span])


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


def _initial_thetas(
    model: GramModel, y: np.ndarray, floor: float, rng: np.random.Generator, R: int
) -> np.ndarray:
    """``R x P`` random, data-informed initialisations in the scaled units of ``model.t``.

    Lengthscales log-uniform over [min(0.02, 2Δ), 1] spans; periods cycle through the
    periodogram peaks (with 3 % jitter) so restarts cover different periodicities;
    LIN offsets inside the data range; term variances ~ 1/#terms; noise in [1e-3, 0.2].
    Uniform draws are stratified, so that R restarts cover each range evenly.
    """
    periods = candidate_periods(model.t, y, floor)
    breaks = candidate_breaks(model.t, y) if any(p.group >= 0 for p in model.params) else None
    n_terms = len(model.terms)
    theta = np.empty((R, model.size))

    def uniform(lo: float, hi: float) -> np.ndarray:
        # stratified (Latin hypercube) draws: each 1/R of the range holds one restart
        u = (rng.permutation(R) + rng.uniform(0.0, 1.0, R)) / R
        return lo + (hi - lo) * u

    def logu(lo: float, hi: float) -> np.ndarray:
        return uniform(math.log(lo), math.log(hi))

    # shortest lengthscale worth starting from: two sample spacings (Nyquist, as PER)
    shortest = min(0.02, max(floor, 1e-3))
    per_index: dict[tuple[int, int], int] = {}
    starts: dict[int, np.ndarray] = {}
    for k, p in enumerate(model.params):
        if p.name == "location":
            theta[:, k] = _change_locations(breaks, p.group, rng, uniform(0.05, 0.95))
        elif p.name == "start":
            starts[p.group] = _change_locations(breaks, p.group, rng, uniform(0.05, 0.8))
            theta[:, k] = starts[p.group]
        elif p.name == "end":
            theta[:, k] = starts[p.group] + np.exp(logu(0.05, 0.5))  # duration in spans
        elif p.name == "width":
            theta[:, k] = logu(0.003, 0.05)
        elif p.name == "variance":
            theta[:, k] = logu(0.3, 1.5) - math.log(n_terms)
        elif p.name == "noise":
            theta[:, k] = logu(1e-3, 0.2)
        elif p.name == "offset":
            theta[:, k] = uniform(0.0, 1.0)
        elif p.name == "alpha":
            theta[:, k] = logu(0.1, 10.0)
        elif p.name == "lengthscale" and p.kernel == "PER":
            theta[:, k] = np.log(uniform(0.5, 2.0))
        elif p.name == "lengthscale":
            theta[:, k] = logu(shortest, 1.0)
        elif p.name == "period":
            # Half the restarts of the first PER factor start at the strongest
            # periodogram peak; the others (and later PER factors) cycle through the
            # remaining candidates, so restarts cover several periods.
            which = per_index.setdefault((p.term, p.factor), len(per_index))
            idx = (np.arange(R) // 2 + which) % len(periods)
            if which == 0:
                idx[0::2] = 0
            per = periods[idx] * np.exp(rng.normal(0, 0.03, R))
            theta[:, k] = np.log(np.maximum(per, floor * 1.01))
    return np.vstack([model.clip(row) for row in theta])


def candidate_breaks(t: np.ndarray, y: np.ndarray, k: int = 4) -> np.ndarray:
    """Locations (units of ``t``) where the series most likely changes regime.

    For each split point on a grid over the inner 90 % of the range, a straight line
    is fitted on either side; the split's score is the Gaussian log-likelihood of the
    two pieces with their own residual variances, so changes of level, slope and noise
    all show. Returns the ``k`` best local maxima, best first.
    """
    grid = np.linspace(0.05, 0.95, 61) * (t.max() - t.min()) + t.min()

    def piece(mask: np.ndarray) -> float:
        tt, yy = t[mask], y[mask]
        if tt.size < 4:
            return -math.inf
        resid = yy - np.polyval(np.polyfit(tt, yy, 1), tt)
        return -0.5 * tt.size * math.log(max(float(np.mean(resid**2)), 1e-12))

    score = np.array([piece(t < b) + piece(t >= b) for b in grid])
    peaks = [
        i
        for i in range(len(grid))
        if math.isfinite(score[i])
        and (i == 0 or score[i] >= score[i - 1])
        and (i == len(grid) - 1 or score[i] >= score[i + 1])
    ]
    peaks.sort(key=lambda i: -score[i])
    return grid[peaks[:k]] if peaks else grid[[len(grid) // 2]]


def _change_locations(
    breaks: np.ndarray | None, group: int, rng: np.random.Generator, spread: np.ndarray
) -> np.ndarray:
    """Initial change locations for ``R`` restarts: half at the data's candidate break
    points (cycling, with a little jitter; later groups start at later candidates), the
    other half ``spread`` evenly over the range."""
    out = np.array(spread, dtype=np.float64)
    if breaks is None or breaks.size == 0:
        return out
    R = out.size
    idx = (np.arange(R) // 2 + group) % breaks.size
    out[0::2] = breaks[idx[0::2]] + rng.normal(0.0, 0.01, out[0::2].size)
    return out


class ParameterSpace(Protocol):
    """What the conversions need of a model: its canonical terms and ``theta``'s layout
    (:func:`prolas.gp.gram.parameter_layout`); :class:`GramModel` and the SGPR model are both."""

    terms: tuple[tuple[str, ...], ...]
    params: tuple[ParamInfo, ...]


#: A change operator's transition (its location, start or end) at least this many widths
#: beyond the data puts a weight within 2e-9 of its limit on every input: the data cannot
#: tell it from a transition at infinity, and the optimiser leaves it wherever it drifted.
UNSEEN_WIDTHS = 20.0
#: Such a transition is moved this many spans beyond the data (to the side it lies on),
#: so that forecasts keep the regime the data end in instead of switching, at an
#: arbitrary place, to one the data never saw.
HELD_SPANS = 1e3


def hold_unseen(shape: dict[str, float]) -> dict[str, float]:
    """One change operator's shape parameters in scaled units (the data on ``t`` in
    [0, 1]) with every transition the data cannot see moved ``HELD_SPANS`` beyond them.

    A transition at ``l`` with width ``w`` is unseen when ``l - 1 >= UNSEEN_WIDTHS w``
    (after the data) or ``-l >= UNSEEN_WIDTHS w`` (before them); it is moved to at least
    ``1 + HELD_SPANS`` (at most ``-HELD_SPANS``). The likelihood does not change (the
    weights on the data move by less than 2e-9); predictions beyond the data do: a
    change-window whose end the data never reach stays open, a change-point after the
    data never happens. Idempotent.
    """
    w = shape["width"]
    held = dict(shape)
    for name in ("location", "start", "end"):
        if name not in held:
            continue
        v = held[name]
        if v - 1.0 >= UNSEEN_WIDTHS * w:
            held[name] = max(v, 1.0 + HELD_SPANS)
        elif -v >= UNSEEN_WIDTHS * w:
            held[name] = min(v, -HELD_SPANS)
    return held


def hold_unseen_transitions(fit: FitResult, dataset: Dataset) -> FitResult:
    """``fit`` with the transitions its data cannot see held off (:func:`hold_unseen`,
    the data on ``dataset``'s inputs); the same object when there are none.

    New fits are held already (:func:`theta_to_natural`); this applies the rule to a fit
    made before it, e.g. one read from a fit cache. Its log-likelihood and BIC are kept:
    the weights on the data move by less than 2e-9.
    """
    if not fit.ok or dataset.span <= 0:
        return fit
    x0, s = float(dataset.x[0]), float(dataset.span)
    terms, changed = [], False
    for term in fit.terms:
        factors = []
        for f in term.factors:
            if f.kernel in CHANGE_FACTORS:
                held = _hold_natural(f.params, x0, s)
                if held != f.params:
                    changed = True
                    f = FactorFit(f.kernel, held)
            factors.append(f)
        terms.append(TermFit(term.variance, tuple(factors)))
    return replace(fit, terms=tuple(terms)) if changed else fit


def _hold_natural(shape: dict[str, float], x0: float, s: float) -> dict[str, float]:
    """:func:`hold_unseen` on a change operator's shape parameters in x's units (the
    data start at ``x0`` and span ``s``). Values it does not move are returned as given
    (bit for bit), and so is a held place beyond float range (a span near 1e305)."""
    scaled = {k: v / s if k == "width" else (v - x0) / s for k, v in shape.items()}
    held = hold_unseen(scaled)
    out = dict(shape)
    for k, v in held.items():
        if v != scaled[k] and math.isfinite(x0 + s * v):
            out[k] = x0 + s * v
    return out


def theta_to_natural(
    model: ParameterSpace, theta: np.ndarray, x0: float, s: float
) -> tuple[tuple[TermFit, ...], float]:
    """Hyperparameters ``theta`` (scaled units t = (x - x0)/s) in x's own units.

    Lengthscales and periods scale by ``s``; LIN offsets map ``c = x0 + s c_t``; since
    ``(x - c)(x' - c) = s^2 (t - c_t)(t' - c_t)``, a term's variance is divided by
    ``s^2`` for every LIN factor it holds. PER's lengthscale is dimensionless. A change
    operator's location/start/end map like an offset, its width like a lengthscale;
    its values are repeated in every factor that carries them (docs/conventions.md). A transition
    the data cannot see is held off first (:func:`hold_unseen`).
    """
    changes: dict[int, dict[str, float]] = {}
    for p, v in zip(model.params, theta):
        if p.group >= 0:
            value = p.value(v)
            changes.setdefault(p.group, {})[p.name] = value * s if p.log else x0 + s * value
    changes = {g: _hold_natural(shape, x0, s) for g, shape in changes.items()}
    terms = []
    for i, names in enumerate(model.terms):
        variance = 0.0
        factors: list[dict[str, float]] = [{} for _ in names]
        for p, v in zip(model.params, theta):
            if p.term != i:
                continue
            value = p.value(v)
            if p.name == "variance":
                variance = value / s ** (2 * names.count("LIN"))
            elif p.name == "offset":
                factors[p.factor][p.name] = x0 + s * value
            elif p.name == "period" or (p.name == "lengthscale" and p.kernel != "PER"):
                factors[p.factor][p.name] = value * s
            else:
                factors[p.factor][p.name] = value
        for j, name in enumerate(names):
            if (g := factor_group(name)) is not None:
                factors[j] = dict(changes[g])
        kinds = [factor_kernel(n) for n in names]
        terms.append(TermFit(variance, tuple(FactorFit(n, f) for n, f in zip(kinds, factors))))
    return tuple(terms), model.params[-1].value(theta[-1])


def _term_affinity(names: tuple[str, ...], term: TermFit, used: bool) -> tuple[int, bool, int]:
    names = tuple(factor_kernel(n) for n in names)
    kinds = [f.kernel for f in term.factors]
    shared = sum(min(names.count(k), kinds.count(k)) for k in set(names))
    return shared, not used, -abs(len(kinds) - len(names))


def inherit_theta(
    model: ParameterSpace, parent: FitResult, default: np.ndarray, x0: float, s: float
) -> np.ndarray:
    """Start ``model`` from a fitted related expression (``parent``, natural units).

    A term the parent has too (the same factors) takes that term's variance and
    factor parameters. Every other term takes the factor parameters of the parent term
    it shares most factors with (a factor with no counterpart there takes the values
    of the same kernel elsewhere in the parent, else its ``default``), and that term's
    variance if no other child term has claimed it (``S -> S * B`` turns a term into
    another); a term that only adds to the parent (``S -> S + B``) starts with a tenth
    of the default variance. So when the child contains the parent's terms, the
    parent's fit is (almost) where the child starts. This is how CKS's expansions or a
    PROLAS edit reuse the work already done on ``S``.
    """
    theta = np.array(default, dtype=np.float64)
    if not parent.terms:
        return theta
    anywhere: dict[str, dict[str, float]] = {}
    for term in parent.terms:
        for f in term.factors:
            anywhere.setdefault(f.kernel, f.params)
    # first, the terms the parent has too claim their counterparts
    parent_kinds = [sorted(f.kernel for f in pt.factors) for pt in parent.terms]
    exact: dict[int, int] = {}
    for i, names in enumerate(model.terms):
        kinds = sorted(map(factor_kernel, names))
        b = next(
            (b for b, pk in enumerate(parent_kinds) if pk == kinds and b not in exact.values()),
            None,
        )
        if b is not None:
            exact[i] = b
    used: set[int] = set(exact.values())
    for i, names in enumerate(model.terms):
        # the parent term sharing most factors; ties go to an unused term, then to
        # the one closest in size (so LIN*PER*SE + LIN*SE maps onto itself)
        affinity = [_term_affinity(names, pt, b in used) for b, pt in enumerate(parent.terms)]
        best = exact.get(i, max(range(len(parent.terms)), key=affinity.__getitem__))
        source = parent.terms[best] if affinity[best][0] > 0 else None
        # a claimed term lends its shape but not its variance: the child adds a term
        adds = source is not None and i not in exact and best in used
        if source is not None:
            used.add(best)
        pool = list(source.factors) if source else []
        picked: list[dict[str, float] | None] = []
        for name in map(factor_kernel, names):
            match = next((f for f in pool if f.kernel == name), None)
            if match is not None:
                pool.remove(match)
                picked.append(match.params)
            else:
                picked.append(anywhere.get(name))
        for k, p in enumerate(model.params):
            if p.term != i:
                continue
            if p.name == "variance":
                if source is None or adds:
                    theta[k] = default[k] + math.log(0.1)
                else:
                    v = source.variance * s ** (2 * names.count("LIN"))
                    theta[k] = p.to_theta(max(v, 1e-12))
                continue
            params = picked[p.factor]
            if params is None or p.name not in params:
                continue
            value = float(params[p.name])
            if p.name == "offset":
                value = (value - x0) / s
            elif p.name == "period" or (p.name == "lengthscale" and p.kernel != "PER"):
                value = value / s
            if p.log and not value > 0:
                continue
            theta[k] = p.to_theta(value)
    # change operators: the k-th CP (CW) of the child starts where the parent's k-th was
    by_group: dict[int, tuple[str, dict[str, float]]] = {}
    for names, term in zip(parse(parent.expression).terms, parent.terms):
        for name, f in zip(names, term.factors):
            if (g := factor_group(name)) is not None:
                by_group.setdefault(g, (CHANGE_FACTORS[f.kernel], f.params))
    parent_changes: dict[str, list[dict[str, float]]] = {}
    for g in sorted(by_group):
        op, values = by_group[g]
        parent_changes.setdefault(op, []).append(values)
    rank: dict[int, int] = {}  # group -> its rank among the child's groups of that op
    for k, p in enumerate(model.params):
        if p.group < 0:
            continue
        if p.group not in rank:
            rank[p.group] = len({q.group for q in model.params if q.kernel == p.kernel} & set(rank))
        nth = rank[p.group]
        found = parent_changes.get(p.kernel, [])
        if nth < len(found) and p.name in found[nth]:
            value = float(found[nth][p.name])
            value = value / s if p.log else (value - x0) / s
            if not p.log or value > 0:
                theta[k] = p.to_theta(value)
    if parent.noise_variance is not None and parent.noise_variance > 0:
        theta[-1] = model.params[-1].to_theta(parent.noise_variance)
    lo, hi = np.array([(p.lower, p.upper) for p in model.params]).T
    return np.clip(theta, lo, hi)


def _minimise(
    model: GramModel, theta0: np.ndarray, y: np.ndarray, max_iter: int, tolerance: float
) -> tuple[np.ndarray, float]:
    """L-BFGS-B on ``-log p(y)`` inside the parameter box; returns ``(theta, ll)``.

    A point where ``K`` is not positive definite is answered with a large loss and a
    zero gradient, so the line search backs off; the best point seen is kept, so a
    run that ends in such a region still returns its best finite fit (``ll`` is NaN
    only if no point was finite).
    """
    best = [np.array(theta0), -math.inf]

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
            ll, g = model.log_likelihood(theta, y)
        if g is None or not math.isfinite(ll):
            return 1e10, np.zeros_like(theta)
        if ll > best[1]:
            best[0], best[1] = theta.copy(), ll
        return -ll, -g

    if max_iter > 0:
        minimize(
            objective,
            theta0,
            jac=True,
            method="L-BFGS-B",
            bounds=model.optimiser_bounds,
            options={"maxiter": max_iter, "ftol": tolerance, "gtol": 1e-6, "maxcor": 20},
        )
    else:
        objective(theta0)
    ll = best[1] if math.isfinite(best[1]) else math.nan
    return best[0], ll


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
) -> FitResult:
    """Fit an expression by exact marginal likelihood with random restarts.

    Each restart runs ``screen_iter`` L-BFGS-B iterations (on at most
    ``screen_points`` evenly spaced points); the ``keep`` best are then polished to
    convergence on all the data (:func:`_minimise`; analytic gradients from
    :class:`prolas.gp.gram.GramModel`).

    Args:
        init: fitted related expressions (natural units) whose hyperparameters start
            extra restarts (:func:`inherit_theta`). Every warm-started restart is
            polished on top of the ``keep`` best cold ones, which are chosen as without
            ``init``: the fit is never worse than its best warm start, nor than the
            cold fit.

    Never raises for numerical trouble: if every restart fails after
    ``config.attempts`` fresh initialisations, the result has ``status="failed"`` and
    the reason in ``error``. An ``"ok"`` result holds only finite numbers.
    """
    # Small-N linear algebra is fastest on one BLAS thread; OpenBLAS's threads spin
    # against each other (and against other processes), measured 100x slower on a
    # 144 x 144 dot product. Large N keeps the threads.
    threads = 1 if dataset.n <= 2000 else None
    with threadpool_limits(limits=threads, user_api="blas"):
        return _fit_gp(expr, dataset, _fit_config(config, restarts, seed), init)


def _fit_gp(
    expr: Expression | str,
    dataset: Dataset,
    config: FitConfig,
    init: FitResult | Sequence[FitResult] | None,
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
    if not (math.isfinite(s) and s > 0 and np.all(np.isfinite(t)) and np.all(np.isfinite(y))):
        return _failed(expr, dataset, t_start, "inputs or targets not finite after scaling", R)
    model = GramModel(expr, t, floor_t, ls_floor_t)
    screen_idx = dataset.spaced_indices(config.screen_points)
    screen = (
        model
        if screen_idx.size == dataset.n
        else GramModel(expr, t[screen_idx], floor_t, ls_floor_t)
    )
    # seed from (config.seed, expression) so that a fit does not depend on the order
    # in which a search happens to evaluate expressions
    key = int.from_bytes(str(expr).encode(), "little") % (2**32)
    rng = np.random.default_rng([config.seed, key])
    errors = []
    for attempt in range(config.attempts):
        starts = _initial_thetas(model, y, floor_t, rng, R)
        warm = []
        for f in inits if attempt == 0 else ():
            try:
                warm.append(inherit_theta(model, f, starts[0], x0, s))
            except (OverflowError, ZeroDivisionError, ValueError) as exc:
                errors.append(f"warm start from {f.expression} skipped ({exc})")
        # Phase 1: every start, a few iterations, on the subsample.
        screened = [
            _minimise(screen, th, y[screen_idx], config.screen_iter, config.tolerance)
            for th in [*warm, *starts]
        ]
        score = np.array([ll if math.isfinite(ll) else -math.inf for _, ll in screened])
        order = [int(r) for r in np.argsort(-score, kind="stable") if math.isfinite(score[r])]
        # Phase 2: polish to convergence on all the data the ``keep`` most promising
        # random starts, chosen as if there were no warm starts, and every warm start
        # besides: a warm fit is never worse than the cold one.
        chosen = [r for r in order if r >= len(warm)][: config.keep]
        chosen += [r for r in range(len(warm)) if math.isfinite(score[r])]
        polished = [
            _minimise(model, screened[r][0], y, config.max_iter, config.tolerance) for r in chosen
        ]
        polished = [(th, ll) for th, ll in polished if math.isfinite(ll)]
        if not polished:
            errors.append(f"attempt {attempt + 1}: all {len(screened)} restarts failed (Cholesky)")
            continue
        polished.sort(key=lambda p: -p[1])
        restart_lls = tuple(float(ll) for _, ll in polished)
        for theta, ll in polished:
            try:
                terms, noise = theta_to_natural(model, theta, x0, s)
            except (OverflowError, ZeroDivisionError) as exc:
                # e.g. a LIN variance in x's units is v / span^2: beyond float range when
                # the span is ~1e155 or ~1e-155
                errors.append(f"hyperparameters not representable in x's units ({exc})")
                continue
            fit = FitResult(
                expression=str(expr),
                status="ok",
                n=dataset.n,
                n_params=expr.n_params,
                terms=terms,
                noise_variance=noise,
                restarts=R,
                restart_log_likelihoods=restart_lls,
            )
            ll_nat = _natural_log_likelihood(fit, dataset)
            if not math.isfinite(ll_nat):
                errors.append("natural-unit covariance not positive definite")
                continue
            if abs(ll_nat - ll) > 1e-3 * max(1.0, abs(ll_nat)):
                warnings.warn(
                    f"{expr}: log-likelihood changed from {ll:.4f} to {ll_nat:.4f} "
                    "when converting to natural units",
                    NumericsWarning,
                    stacklevel=2,
                )
            fit = replace(
                fit,
                log_likelihood=ll_nat,
                bic=bic(ll_nat, expr.n_params, dataset.n),
                seconds=time.perf_counter() - t_start,
            )
            problem = first_non_finite(fit.to_json())
            if problem is None:
                return fit
            errors.append(f"non-finite {problem}")
    return _failed(expr, dataset, t_start, "; ".join(errors) or "fit failed", R)


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

    def __call__(self, expr: Expression, init: Sequence[FitResult] = ()) -> Score:
        """Fit ``expr``; ``init``: related fits to warm-start from (:func:`fit_gp`)."""
        if self.threads is not None and torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)  # small-N fits are fastest single-threaded
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NumericsWarning)
            return fit_gp(expr, self.dataset, self.config, init=init or None).to_score()
