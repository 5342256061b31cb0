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

For SE, RQ and PER, ``dk_f/d theta = k_f * M`` for an elementwise factor ``M``, so
the term's gradient is ``1/2 <W * K_t, M>`` with ``K_t = v_t prod_f k_f``: no division
by ``k_f`` (which underflows to 0). LIN's derivative ``-(t + t' - 2c)`` is not
proportional to ``k_f`` and uses the product of the other factors instead.

Factor derivatives in the log parameters (``d = t - t'``):

==========  ==================================  =========================================
kernel      k                                   M = (dk / d log param) / k
==========  ==================================  =========================================
SE          exp(-d^2 / 2l^2)                    l: d^2 / l^2
RQ          (1 + u)^(-a), u = d^2 / (2 a l^2)   l: 2 a u / (1 + u)
                                                a: a (u / (1 + u) - log(1 + u))
PER         exp(-2 sin^2(pi d / p) / l^2)       l: 4 sin^2(pi d / p) / l^2
                                                p: 2 pi d sin(2 pi d / p) / (l^2 p)
LIN         (t - c)(t' - c)                     c (absolute): dk/dc = -(t + t' - 2c)
==========  ==================================  =========================================

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
from scipy.special import expit

from prolas.expr import CHANGE_FACTORS, CHANGE_OPERATORS, Expression, factor_group, factor_kernel

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


def _exp(v: float) -> float:
    """``exp(v)``, ``inf`` instead of OverflowError (trial steps may leave the box where a
    bound is open; the non-finite K is then a failed point, not an exception)."""
    return math.exp(v) if v < 709.0 else math.inf


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
    """

    term: int
    factor: int
    kernel: str
    name: str
    log: bool
    lower: float
    upper: float
    group: int = -1

    def value(self, theta_j: float) -> float:
        return _exp(theta_j) if self.log else float(theta_j)

    def to_theta(self, value: float) -> float:
        v = math.log(max(value, 1e-300)) if self.log else float(value)
        return min(max(v, self.lower), self.upper)


# Bounds in scaled units (span = 1, y standardised). Wide enough never to bind on a
# sensible model, narrow enough that no kernel value can overflow. The edges are where a
# model reaches its nested sub-models (prolas.nesting) to far below a nat: a stationary
# factor at the upper lengthscale is 1 on the data within 1e-12, RQ at the upper alpha is
# SE within ~1e-7, a term at the lower variance drops out.
_LOG_LENGTHSCALE = (math.log(1e-4), math.log(1e6))
_LOG_PER_LENGTHSCALE = (math.log(1e-3), math.log(1e6))
_LOG_ALPHA = (math.log(1e-3), math.log(1e8))
_OFFSET = (-10.0, 11.0)
_LOG_VARIANCE = (math.log(1e-12), math.log(1e6))
_LOG_NOISE = (math.log(NOISE_FLOOR), math.log(10.0))
_MAX_PERIOD = 100.0
# Change locations may sit a little outside the data (a change just before the first
# or after the last point); widths from sharp steps to a blend over the whole span.
_LOCATION = (-0.25, 1.25)
_LOG_WIDTH = (math.log(1e-4), math.log(1.0))


def parameter_layout(
    terms: tuple[tuple[str, ...], ...], period_floor: float, lengthscale_floor: float = 0.0
) -> tuple[ParamInfo, ...]:
    """The entries of ``theta`` for a canonical sum of products (module docstring):
    per term its log variance, then each factor's shape parameters; log noise last.
    Shared by the exact fit (:class:`GramModel`) and the SGPR refit (:mod:`prolas.gp.scalable`).

    ``lengthscale_floor`` (scaled units, 0 = none) raises the lower bound of SE and RQ
    lengthscales above the numerical one (:class:`prolas.gp.FitConfig.lengthscale_floor`).
    """
    floor = max(float(period_floor), 1e-12)
    log_ls = _LOG_LENGTHSCALE
    if lengthscale_floor > 0:
        log_ls = (max(log_ls[0], math.log(lengthscale_floor)), log_ls[1])
    params: list[ParamInfo] = []
    # change operators first, once per group (shared by every term on their sides)
    groups: dict[int, str] = {}
    for term in terms:
        for name in term:
            if (g := factor_group(name)) is not None:
                groups.setdefault(g, CHANGE_FACTORS[factor_kernel(name)])
    for g in sorted(groups):
        op = groups[g]
        for pname in CHANGE_OPERATORS[op][0]:
            if pname == "width":
                params.append(ParamInfo(-1, -1, op, pname, True, *_LOG_WIDTH, group=g))
            else:
                params.append(ParamInfo(-1, -1, op, pname, False, *_LOCATION, group=g))
    for i, term in enumerate(terms):
        params.append(ParamInfo(i, -1, "variance", "variance", True, *_LOG_VARIANCE))
        for j, name in enumerate(term):
            if factor_group(name) is not None:
                continue
            if name in ("SE", "RQ"):
                params.append(ParamInfo(i, j, name, "lengthscale", True, *log_ls))
            if name == "RQ":
                params.append(ParamInfo(i, j, name, "alpha", True, *_LOG_ALPHA))
            if name == "PER":
                params.append(ParamInfo(i, j, name, "lengthscale", True, *_LOG_PER_LENGTHSCALE))
                hi = math.log(max(_MAX_PERIOD, 10.0 * floor))
                params.append(ParamInfo(i, j, name, "period", True, math.log(floor), hi))
            if name == "LIN":
                params.append(ParamInfo(i, j, name, "offset", False, *_OFFSET))
            if name not in ("SE", "RQ", "PER", "LIN", "C"):
                raise ValueError(f"no analytic Gram matrix for kernel {name!r}")
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
    """

    def __init__(
        self, expr: Expression, t: np.ndarray, period_floor: float, lengthscale_floor: float = 0.0
    ) -> None:
        self.expr = expr
        self.terms: tuple[tuple[str, ...], ...] = tuple(tuple(term) for term in expr.terms)
        self.t = np.asarray(t, dtype=np.float64).reshape(-1)
        self.n = self.t.size
        self.params = parameter_layout(self.terms, period_floor, lengthscale_floor)
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
        self._d = self.t[:, None] - self.t[None, :]
        self._d2 = self._d**2
        self._sum = self.t[:, None] + self.t[None, :]

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
        self, name: str, theta: np.ndarray, idx: list[int], grad: bool
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, bool]]]:
        """``(k_f, [(M, relative), ...])`` for one factor: ``dk/dθ = k*M`` if relative else M."""
        if ":" in name:
            return self._change_factor(factor_kernel(name), theta, idx, grad)
        if name == "C":
            return np.ones((self.n, self.n)), []
        if name == "SE":
            ls2 = _exp(2.0 * theta[idx[0]])
            r = self._d2 / ls2
            k = np.exp(-0.5 * r)
            return k, ([(r, True)] if grad else [])
        if name == "RQ":
            ls2, a = _exp(2.0 * theta[idx[0]]), _exp(theta[idx[1]])
            u = self._d2 / (2.0 * a * ls2)
            log1pu = np.log1p(u)
            k = np.exp(-a * log1pu)
            if not grad:
                return k, []
            frac = u / (1.0 + u)
            return k, [(2.0 * a * frac, True), (a * (frac - log1pu), True)]
        if name == "PER":
            ls2, p = _exp(2.0 * theta[idx[0]]), _exp(theta[idx[1]])
            # cos(w d) and sin(w d) as rank-2 outer products of n-vectors (w = 2 pi / p):
            # no transcendental function on the n x n grid.
            w = 2.0 * math.pi / p
            c, s = np.cos(w * self.t), np.sin(w * self.t)
            one_minus_cos = 1.0 - np.multiply.outer(c, c) - np.multiply.outer(s, s)
            k = np.exp(-one_minus_cos / ls2)  # 2 sin^2(pi d / p) = 1 - cos(w d)
            if not grad:
                return k, []
            sin_wd = np.multiply.outer(s, c)
            sin_wd -= np.multiply.outer(c, s)
            dp = (w / ls2) * self._d * sin_wd
            return k, [(2.0 * one_minus_cos / ls2, True), (dp, True)]
        # LIN
        c = theta[idx[0]]
        tc = self.t - c
        k = np.multiply.outer(tc, tc)
        return k, ([(-(self._sum - 2.0 * c), False)] if grad else [])

    def _change_factor(
        self, side: str, theta: np.ndarray, idx: list[int], grad: bool
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, bool]]]:
        """A change factor ``s(t) s(t')`` (rank one) and its relative derivatives.

        With ``z = (t - l) / w`` and ``σ = expit(z)``: ``CP_AFTER`` has ``s = σ``,
        ``CP_BEFORE`` ``s = 1 - σ``; ``CW_INSIDE`` has ``s = u = σ₁(1 - σ₂)`` (σᵢ at
        start and end, one width), ``CW_OUTSIDE`` ``s = 1 - u``. The derivative of
        ``s(t)s(t')`` in a parameter is ``k * (m(t) + m(t'))`` with ``m = (ds/dθ) / s``,
        which stays bounded where ``s`` underflows (no division by a vanishing ``s``).
        """
        w = _exp(theta[idx[-1]])
        if side in ("CP_BEFORE", "CP_AFTER"):
            z = (self.t - theta[idx[0]]) / w
            sig, one_minus = expit(z), expit(-z)
            if side == "CP_AFTER":
                s, ms = sig, [-one_minus / w, -one_minus * z]
            else:
                s, ms = one_minus, [sig / w, sig * z]
        else:
            z1, z2 = (self.t - theta[idx[0]]) / w, (self.t - theta[idx[1]]) / w
            s1, c1 = expit(z1), expit(-z1)  # σ₁ and 1 - σ₁
            s2, c2 = expit(z2), expit(-z2)
            u = s1 * c2
            # d log u / d (start, end, log w)
            inside = [-c1 / w, s2 / w, -c1 * z1 + s2 * z2]
            if side == "CW_INSIDE":
                s, ms = u, inside
            else:
                s = c1 + s1 * s2  # 1 - u, without cancellation
                ratio = np.divide(u, s, out=np.zeros_like(u), where=s > 0)
                ms = [-ratio * m for m in inside]
        k = np.multiply.outer(s, s)
        if not grad:
            return k, []
        return k, [(m[:, None] + m[None, :], True) for m in ms]

    def _terms(self, theta: np.ndarray, grad: bool) -> tuple[np.ndarray, list[tuple]]:
        """``(sum_t K_t, [(K_t, [(k_f, derivs), ...]), ...])`` without the noise."""
        K = np.zeros((self.n, self.n))
        terms = []
        for i, term in enumerate(self.terms):
            factors = [
                self._factor(name, theta, self._factor_index[i][j], grad)
                for j, name in enumerate(term)
            ]
            kt = factors[0][0]
            if len(factors) > 1:  # prod_f k_f, left to right, then the variance
                kt = kt * factors[1][0]
                for kf, _ in factors[2:]:
                    kt *= kf
            kt = _exp(theta[self._variance_index[i]]) * kt
            K += kt
            terms.append((kt, factors))
        return K, terms

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
        # dpotri fills the lower triangle only
        Kinv = np.tril(Kinv) + np.tril(Kinv, -1).T
        W = np.multiply.outer(alpha, alpha)
        W -= Kinv
        g = np.zeros(self.size)  # += : change parameters are shared by several terms
        for i, (kt, factors) in enumerate(term_grams):
            wk = W * kt
            g[self._variance_index[i]] = 0.5 * wk.sum()
            for j, (_, derivs) in enumerate(factors):
                idx = self._factor_index[i][j]
                for (M, relative), pos in zip(derivs, idx):
                    if relative:
                        g[pos] += 0.5 * float(np.vdot(wk, M))
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
