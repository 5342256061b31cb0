"""Gram matrices of canonical expressions and the exact log-likelihood with analytic gradients.

This is the inner loop of every GP fit, written in NumPy/LAPACK without autograd: at
the sizes a structure search works at (N ~ 100-500) the cost of a fit used to be
dominated by per-operation overhead of torch modules and autograd (≈ 50× the linear
algebra), not by the linear algebra itself.

Model (docs/conventions.md), on scaled inputs ``t = (x - x0) / span`` and standardised ``y``:

    K = sum_t v_t prod_{f in t} k_f(t, t') + s_n^2 I

Parameters live in one flat vector ``theta`` (shape ``(P,)``, P = the expression's
k): per term ``log v_t``, then per factor its shape parameters (``log`` of
lengthscales, periods and alphas; LIN's offset ``c`` as it is), then ``log s_n^2``.
Every entry has box bounds (:attr:`GramModel.bounds`) so that no optimiser step can
reach an overflowing kernel: the fit is L-BFGS-B on this box.

Gradient. With ``alpha = K^{-1} y`` and ``W = alpha alpha^T - K^{-1}``,

    d log p(y) / d theta_j = 1/2 sum_{ab} W_ab (dK/d theta_j)_ab.

Each factor's Gram matrix and its gradient factors come from its entry in the kernel
registry (:meth:`prolas.kernels.spec.Kernel.gram`, one module per kernel). Where
``dk_f/d theta = k_f * M`` for an elementwise ``M`` (SE, RQ, PER, the change factors),
the term's gradient is ``1/2 <W * K_t, M>`` with ``K_t = v_t prod_f k_f``: no division
by ``k_f`` (which underflows to 0). LIN's derivative ``-(t + t' - 2c)`` is not
proportional to ``k_f`` and uses the product of the other factors instead.

The time spent in the Cholesky factorisation, the solves and the inverse (the linear
algebra floor) is accumulated in :data:`LINALG_SECONDS`, so benchmarks can report
which fraction of a fit it is.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, cholesky
from scipy.linalg.lapack import dpotri

from prolas.expr import CHANGE_FACTORS, Expression, factor_group, factor_kernel
from prolas.kernels import OPERATORS, factor
from prolas.kernels.spec import (
    DIMENSIONLESS,
    NYQUIST_FLOOR,
    GramGrid,
    MarginalDerivative,
    exp_or_inf,
    marginal_sums,
    natural_value,
    scaled_value,
)

__all__ = [
    "GramModel",
    "ParamInfo",
    "parameter_layout",
    "LINALG_SECONDS",
    "NOISE_FLOOR",
    "linalg_seconds",
]

#: Floor on the Gaussian noise variance of standardised y (docs/conventions.md).
NOISE_FLOOR = 1e-6
#: Seconds spent in Cholesky, solves and inverse since import ([total]); see module doc.
LINALG_SECONDS = [0.0]

_LOG2PI = math.log(2.0 * math.pi)


#: ``exp(v)``, ``inf`` instead of OverflowError (trial steps may leave the box where a
#: bound is open; the non-finite K is then a failed point, not an exception).
_exp = exp_or_inf


def linalg_seconds() -> float:
    """Total seconds spent in the linear algebra floor so far in this process."""
    return LINALG_SECONDS[0]


@dataclass(frozen=True)
class ParamInfo:
    """One entry of ``theta``: where it belongs and its box in the optimised space.

    Attributes:
        term: index of the product term (``-1`` for the noise and change parameters).
        factor: index of the factor inside the term (``-1`` for a variance or noise).
        kernel: ``"variance"``, ``"noise"``, the factor's kernel name, or ``"CP"``/``"CW"``.
        name: ``"variance"``, ``"noise"`` or the shape parameter (``"period"`` …).
        log: whether ``theta`` holds the logarithm of the value.
        lower, upper: bounds on ``theta`` (on the log where ``log``).
        group: the change operator's group index for its shared location/width
            parameters (:attr:`prolas.expr.Expression.change_groups`), else ``-1``.
        unit: how the value maps to x's units (:class:`prolas.kernels.ParamSpec`'s
            ``unit``); a variance's and the noise's are ``"dimensionless"``.
    """

    term: int
    factor: int
    kernel: str
    name: str
    log: bool
    lower: float
    upper: float
    group: int = -1
    unit: str = DIMENSIONLESS

    def value(self, theta_j: float) -> float:
        """The value (scaled units) of entry ``theta_j``."""
        return _exp(theta_j) if self.log else float(theta_j)

    def to_theta(self, value: float) -> float:
        """The entry of ``theta`` for a value in scaled units, clipped into the box."""
        v = math.log(max(value, 1e-300)) if self.log else float(value)
        return min(max(v, self.lower), self.upper)

    def natural(self, value: float, x0: float, s: float) -> float:
        """A shape parameter's value in scaled units in x's own units (the data start at
        ``x0`` and span ``s``): a position ``x0 + s v``, a length ``v s``, else ``v``."""
        return natural_value(self.unit, value, x0, s)

    def scaled(self, value: float, x0: float, s: float) -> float:
        """The inverse of :meth:`natural`."""
        return scaled_value(self.unit, value, x0, s)


# Bounds in scaled units (span = 1, y standardised) of the parameters every model has;
# the kernels' shape parameters declare theirs (prolas.kernels). A term at the lower
# variance drops out (the edge where a model reaches its nested sub-models).
_LOG_VARIANCE = (math.log(1e-12), math.log(1e6))
_LOG_NOISE = (math.log(NOISE_FLOOR), math.log(10.0))


def parameter_layout(
    terms: tuple[tuple[str, ...], ...],
    period_floor: float,
    lengthscale_floor: float = 0.0,
    fixed_period: float = 0.0,
) -> tuple[ParamInfo, ...]:
    """The entries of ``theta`` for a canonical sum of products (module docstring):
    each change operator's shape parameters once, then per term its log variance and each
    base factor's shape parameters; log noise last. Shared by the exact fit
    (:class:`GramModel`) and the SGPR refit (:mod:`prolas.gp.scalable`).

    Each shape parameter's log scale, unit and box come from its kernel's entry in
    :mod:`prolas.kernels`; ``period_floor`` (2Δ, Nyquist) and ``lengthscale_floor`` (scaled
    units, 0 = none; :class:`prolas.gp.FitConfig.lengthscale_floor`) raise the lower
    bounds of the parameters that declare those floors. ``fixed_period > 0`` (scaled
    units; :attr:`prolas.gp.FitConfig.season`) makes every period's box that one value,
    ``[log p, log p]``: L-BFGS-B keeps a variable with equal bounds where it is, and the
    starts are clipped into the box, so the period is not fitted.
    """
    params: list[ParamInfo] = []

    def add(term: int, j: int, kernel: str, spec, group: int = -1) -> None:
        lo, hi = spec.box(period_floor, lengthscale_floor)
        if fixed_period > 0 and spec.floor == NYQUIST_FLOOR:
            lo = hi = math.log(fixed_period)
        params.append(ParamInfo(term, j, kernel, spec.name, spec.log, lo, hi, group, spec.unit))

    # change operators first, once per group (shared by every term on their sides)
    groups: dict[int, str] = {}
    for term in terms:
        for name in term:
            if (g := factor_group(name)) is not None:
                groups.setdefault(g, CHANGE_FACTORS[factor_kernel(name)])
    for g in sorted(groups):
        for spec in OPERATORS[groups[g]].params:
            add(-1, -1, groups[g], spec, g)
    for i, term in enumerate(terms):
        params.append(ParamInfo(i, -1, "variance", "variance", True, *_LOG_VARIANCE))
        for j, name in enumerate(term):
            if factor_group(name) is not None:
                continue
            try:
                kernel = factor(name)
            except KeyError:
                raise ValueError(f"no analytic Gram matrix for kernel {name!r}") from None
            for spec in kernel.params:
                add(i, j, name, spec)
    params.append(ParamInfo(-1, -1, "noise", "noise", True, *_LOG_NOISE))
    return tuple(params)


class GramModel:
    """Covariance of one canonical expression on fixed inputs, with analytic gradients.

    Args:
        expr: the expression (its canonical terms are used).
        t: scaled inputs, shape ``(n,)``.
        period_floor: PER's lower bound on the period in units of ``t`` (Nyquist 2Δ).
        lengthscale_floor: SE and RQ lengthscales' lower bound in units of ``t`` (0: none
            beyond the numerical bound).
        fixed_period: every period held at this value in units of ``t`` (0: fitted;
            :func:`parameter_layout`).
    """

    def __init__(
        self,
        expr: Expression,
        t: np.ndarray,
        period_floor: float,
        lengthscale_floor: float = 0.0,
        fixed_period: float = 0.0,
    ) -> None:
        self.expr = expr
        self.period_floor, self.lengthscale_floor = float(period_floor), float(lengthscale_floor)
        self.fixed_period = float(fixed_period)
        self.terms: tuple[tuple[str, ...], ...] = tuple(tuple(term) for term in expr.terms)
        self.t = np.asarray(t, dtype=np.float64).reshape(-1)
        self.n = self.t.size
        self.params = parameter_layout(
            self.terms, period_floor, lengthscale_floor, self.fixed_period
        )
        params = self.params
        # where each term's variance and each factor's parameters sit in theta
        self._variance_index = [k for k, p in enumerate(params) if p.name == "variance"]
        group_index = {
            g: [k for k, p in enumerate(params) if p.group == g]
            for g in {p.group for p in params if p.group >= 0}
        }
        self._factor_index: list[list[list[int]]] = [
            [
                group_index[g]
                if (g := factor_group(name)) is not None
                else [k for k, p in enumerate(params) if (p.term, p.factor) == (i, j)]
                for j, name in enumerate(f)
            ]
            for i, f in enumerate(self.terms)
        ]
        self._grid = GramGrid.of(self.t)
        self._kernels = [[factor(factor_kernel(name)) for name in term] for term in self.terms]

    # --- parameter vector -------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.params)

    @property
    def bounds(self) -> list[tuple[float, float]]:
        return [(p.lower, p.upper) for p in self.params]

    @property
    def optimiser_bounds(self) -> list[tuple[float, float | None]]:
        """:attr:`bounds` with the noise's upper bound left open, for L-BFGS-B.

        When every variable has two bounds, L-BFGS-B takes its first step all the way
        to the generalised Cauchy point of an identity-Hessian model, which for a poor
        start (gradient ~1e4) is a corner of the box: variances at their floor, noise
        at its cap, a flat plateau it never leaves (seen on airline's LIN). With one
        open bound the first step is normalised to unit length. A noise variance large
        enough to overflow gives a non-finite K, which the fit treats as a failed point.
        """
        return [*self.bounds[:-1], (self.params[-1].lower, None)]

    def clip(self, theta: np.ndarray) -> np.ndarray:
        lo, hi = np.array(self.bounds).T
        return np.clip(theta, lo, hi)

    # --- factors ----------------------------------------------------------------------
    def _factor(
        self, i: int, j: int, theta: np.ndarray, grad: bool
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, bool]]]:
        """``(k_f, [(M, relative), ...])`` of factor ``j`` of term ``i``
        (:meth:`prolas.kernels.spec.Kernel.gram`): ``dk/dθ = k*M`` if relative else M."""
        th = [theta[k] for k in self._factor_index[i][j]]
        return self._kernels[i][j].gram(self._grid, th, grad)

    def _terms(self, theta: np.ndarray, grad: bool) -> tuple[np.ndarray, list[tuple]]:
        """``(sum_t K_t, [(K_t, [(k_f, derivs), ...]), ...])`` without the noise."""
        K = None
        terms = []
        for i, term in enumerate(self.terms):
            factors = [self._factor(i, j, theta, grad) for j in range(len(term))]
            variance = _exp(theta[self._variance_index[i]])
            if len(factors) == 1:
                kt = variance * factors[0][0]
            else:  # prod_f k_f, left to right, then the variance, in one new array
                kt = factors[0][0] * factors[1][0]
                for kf, _ in factors[2:]:
                    kt *= kf
                kt *= variance
            if K is None:
                K = kt.copy()
            else:
                K += kt
            terms.append((kt, factors))
        return (np.zeros((self.n, self.n)) if K is None else K), terms

    def covariance(self, theta: np.ndarray, noise: bool = True) -> np.ndarray:
        """``K`` (``n x n``), with the noise on the diagonal if ``noise``."""
        K, _ = self._terms(theta, grad=False)
        if noise:
            K[np.diag_indices(self.n)] += _exp(theta[-1])
        return K

    # --- likelihood -------------------------------------------------------------------
    def log_likelihood(
        self, theta: np.ndarray, y: np.ndarray, grad: bool = True
    ) -> tuple[float, np.ndarray | None]:
        """Exact ``log N(y | 0, K(theta))`` in nats and its gradient in ``theta``.

        Returns ``(nan, None)`` when ``K`` is not numerically positive definite (the
        caller decides what a failed point means: the optimiser backs off from it).
        """
        n = self.n
        K, term_grams = self._terms(theta, grad)
        noise = _exp(theta[-1])
        K[np.diag_indices(n)] += noise
        if not np.all(np.isfinite(K)):
            return math.nan, None
        start = time.perf_counter()
        try:
            L = cholesky(K, lower=True, check_finite=False)
        except LinAlgError:
            LINALG_SECONDS[0] += time.perf_counter() - start
            return math.nan, None
        alpha = cho_solve((L, True), y, check_finite=False)
        Kinv = None
        if grad:
            Kinv, info = dpotri(L, lower=1)
        LINALG_SECONDS[0] += time.perf_counter() - start
        diag = np.diagonal(L)
        ll = -0.5 * float(y @ alpha) - float(np.log(diag).sum()) - 0.5 * n * _LOG2PI
        if not math.isfinite(ll):
            return math.nan, None
        if not grad:
            return ll, None
        if info != 0:
            return math.nan, None
        # dpotri fills the lower triangle of K^-1 (the strict upper one holds L's zeros).
        # Every use of W below is a sum over all (a, b) of W_ab S_ab with S symmetric, so
        # K^-1 enters as its lower triangle doubled, the diagonal once: no symmetrising.
        diag_inv = np.diagonal(Kinv).copy()
        Kinv *= 2.0
        Kinv[np.diag_indices(n)] = diag_inv
        W = np.multiply.outer(alpha, alpha)
        W -= Kinv
        g = np.zeros(self.size)  # += : change parameters are shared by several terms
        for i, (kt, factors) in enumerate(term_grams):
            wk = W * kt
            g[self._variance_index[i]] = 0.5 * wk.sum()
            sums = None  # W_t 1 + W_t' 1, shared by the term's change factors' parameters
            for j, (_, derivs) in enumerate(factors):
                idx = self._factor_index[i][j]
                for (M, relative), pos in zip(derivs, idx):
                    if relative:
                        # a matrix, or a derivative that contracts itself (kernels.spec)
                        if isinstance(M, np.ndarray):
                            dot = float(np.vdot(wk, M))
                        elif isinstance(M, MarginalDerivative):
                            sums = marginal_sums(wk) if sums is None else sums
                            dot = M.dot_sums(sums)
                        else:
                            dot = M.dot(wk)
                        g[pos] += 0.5 * dot
                    else:  # LIN: W * (v prod_{other factors}) * dk/dc
                        others = _exp(theta[self._variance_index[i]])
                        for jj, (kg, _) in enumerate(factors):
                            if jj != j:
                                others = others * kg
                        g[pos] += 0.5 * float(np.vdot(W * others, M))
        g[-1] = 0.5 * noise * float(np.trace(W))
        if not np.all(np.isfinite(g)):
            return math.nan, None
        return ll, g
