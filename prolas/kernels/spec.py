"""What one kernel of the registry declares, and the views every back end reads.

A registry entry (:class:`Kernel`) is one factor kind of an expanded product term: a base
kernel (``SE``, ``LIN``, ``PER``, ``RQ``, ``C``, ``WN``, ``PERC``) or a change operator's
transition factor (``CP_BEFORE``, ``CP_AFTER``, ``CW_OUTSIDE``, ``CW_INSIDE``). It declares

* **facts**: its name, formula (docs/conventions.md), whether ``k*k`` is ``k``
  (idempotent), whether it is stationary, its plain-language description and the role
  its factors play in a sentence of the report (:data:`ROLES`), the power of x's units
  its factors give a term's variance (LIN: 2), and its label costs to other kernels in
  the optimal-transport distance between expressions;
* **parameters** (:class:`ParamSpec`): per shape parameter its unit (how a value on the
  scaled inputs ``t = (x - x0) / span`` maps to x's units), whether it is optimised on
  the log scale, its box in scaled units and the data floor that raises it, its
  starting heuristic (:class:`Start`) and its fixed r_d value (span units);
* **views of its formula**, one per back end, each in the arithmetic that back end has
  always used (so that the same seeds give the same numbers, bit for bit):

  ========================  =======================================================
  view                      back end
  ========================  =======================================================
  :meth:`Kernel.value`      GPyTorch modules (natural units; reported likelihood,
                            predictions) and the r_d Gram matrices of the encoding
  :meth:`Kernel.gram`       the exact NumPy fit: ``k`` on scaled inputs and its
                            gradient factors ``M`` (``dk/dθ = k M`` when relative)
  ``sgpr_*``, ``vector``    the SGPR bound and its closed-form gradient
  ========================  =======================================================

For SGPR a kernel plays one of six parts (:attr:`Kernel.sgpr_role`): ``"dense"``
(stationary, a log-factor on the squared distances: SE, RQ), ``"lowrank"`` (stationary,
a log-factor of low rank in the inputs: PER), ``"multiply"`` (a dense factor multiplied
in as it is, for a kernel with negative values and so no log-factor: PERC), ``"vector"``
(rank one, ``s(t) s(t')``: LIN and the transitions), ``"one"`` (``C``) or ``"noise"``
(white noise ``WN``, nonzero only where two inputs coincide: inducing points cannot carry
it, so SGPR refuses a model with it).

:class:`Stationary` derives every view of a dense stationary kernel from two
array-generic functions, ``log_k(d2, v, xp)`` and its gradient factors
``dlog_k(d2, v, xp)``: a new stationary kernel needs only those
(docs/adding-a-kernel.md). The shipped kernels override the views with the arithmetic
their back ends used before the registry existed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np
import torch

__all__ = [
    "CONSTANT",
    "DENSE",
    "DIMENSIONLESS",
    "LENGTH",
    "LENGTHSCALE_FLOOR",
    "MULTIPLY",
    "MULTISCALE",
    "NOISE",
    "NYQUIST_FLOOR",
    "LOWRANK",
    "ONE",
    "PERIODIC",
    "POSITION",
    "ROLES",
    "SGPR_NOISE",
    "SGPR_ROLES",
    "SMOOTH",
    "TRANSITION",
    "TREND",
    "VECTOR",
    "GramGrid",
    "Kernel",
    "LowRankSineDerivative",
    "ScaledDerivative",
    "ParamSpec",
    "Start",
    "StartSource",
    "Stationary",
    "TermGradient",
    "exp_or_inf",
    "natural_value",
    "pairwise",
    "scaled_value",
]

# --- units of a shape parameter -------------------------------------------------------
#: ``x0 + span * value``: a place on the x axis (LIN offset, change location/start/end).
POSITION = "position"
#: ``span * value``: a length on the x axis (lengthscales, periods, change widths).
LENGTH = "length"
#: the value as it is (PER's lengthscale, RQ's alpha).
DIMENSIONLESS = "dimensionless"

# --- data floors that raise a parameter's lower bound (docs/conventions.md) ------------
#: SE and RQ lengthscales >= K·Δ (``--lengthscale-floor``).
LENGTHSCALE_FLOOR = "lengthscale"
#: A period >= 2Δ (Nyquist); its upper bound is at least ten times the floor.
NYQUIST_FLOOR = "nyquist"

# --- roles of a factor in a sentence of the report (prolas.report.words) -----------------
# A role fixes the parameters the sentences read.
PERIODIC = "periodic"  #: repeats: ``period``, shape ``lengthscale``, ``slow_lengthscale``
MULTISCALE = "multiscale"  #: smooth at several scales: ``lengthscale``, ``alpha``
SMOOTH = "smooth"  #: smooth at one scale: ``lengthscale``
TREND = "trend"  #: a polynomial factor about an ``offset``, in x's units
CONSTANT = "constant"  #: 1 everywhere: not described
TRANSITION = "transition"  #: a change operator's factor: said by the change sentences
#: white noise: a term with such a factor is noise, not signal (its standard deviation
#: is said, it has no share of the fitted mean, forecasts add its variance to the band)
NOISE = "noise"
ROLES = (PERIODIC, MULTISCALE, SMOOTH, TREND, CONSTANT, TRANSITION, NOISE)

# --- the part a factor plays in the SGPR bound (prolas.gp.sgpr_kernel) -------------------
DENSE = "dense"  #: a log-factor on the squared distances (SE, RQ)
LOWRANK = "lowrank"  #: a log-factor of low rank in the inputs (PER)
MULTIPLY = "multiply"  #: a dense factor multiplied in as it is, no log-factor (PERC)
VECTOR = "vector"  #: rank one, ``s(t) s(t')`` (LIN, the change factors)
ONE = "one"  #: 1 (C)
#: nonzero only where inputs coincide (WN): SGPR refuses it (``NOISE`` is also its role)
SGPR_NOISE = "noise"
SGPR_ROLES = (DENSE, LOWRANK, MULTIPLY, VECTOR, ONE, SGPR_NOISE)


def exp_or_inf(v: float) -> float:
    """``exp(v)``, ``inf`` instead of OverflowError (trial steps of an optimiser may leave
    the box where a bound is open; a non-finite K is then a failed point, not an exception)."""
    return math.exp(v) if v < 709.0 else math.inf


def pairwise(x1: torch.Tensor, x2: torch.Tensor, diag: bool) -> torch.Tensor:
    """Differences ``x1 - x2'`` of 1-D inputs: ``... x n x m`` (``... x n`` if ``diag``),
    for inputs ``... x n x 1`` and ``... x m x 1``."""
    if diag:
        return (x1 - x2)[..., 0]
    return x1 - x2.transpose(-1, -2)


# --- parameters ---------------------------------------------------------------------------


def natural_value(unit: str, value: float, x0: float, span: float) -> float:
    """A parameter value on the scaled inputs ``t = (x - x0) / span`` in x's own units:
    a :data:`POSITION` ``x0 + span v``, a :data:`LENGTH` ``v span``, else ``v``."""
    if unit == POSITION:
        return x0 + span * value
    if unit == LENGTH:
        return value * span
    return value


def scaled_value(unit: str, value: float, x0: float, span: float) -> float:
    """The inverse of :func:`natural_value`."""
    if unit == POSITION:
        return (value - x0) / span
    if unit == LENGTH:
        return value / span
    return value


@dataclass(frozen=True)
class Start:
    """How a random restart of the exact fit draws a parameter, in ``theta``'s space (the
    log of the value where the parameter is optimised on the log scale).

    ``rule``:

    ==================  ================================================================
    ``uniform``         ``theta ~ U(low, high)``
    ``log_uniform``     ``theta ~ U(log low, log high)``: the value log-uniform
    ``log_of_uniform``  ``theta = log U(low, high)``: the value uniform
    ``lengthscale``     log-uniform over ``[shortest, high]`` spans, ``shortest`` two
                        sample spacings (at most 0.02, at least 1e-3 spans)
    ``periodogram``     the strongest periodogram peaks, cycled across restarts
    ``break``           half the restarts at the data's candidate break points, the
                        other half ``U(low, high)``
    ``window``          half the restarts at the starts of the data's candidate
                        windows, the other half ``U(low, high)``
    ``window_end``      the same half at those windows' ends, the other half the
                        window's start plus a log-uniform duration in ``[low, high]``
                        spans
    ==================  ================================================================

    Uniform draws are stratified over the restarts (:class:`StartSource`).
    """

    rule: str
    low: float = 0.0
    high: float = 1.0

    def draw(self, source: StartSource, param: Any) -> np.ndarray:
        """The ``R`` starting values of ``param`` (a ``prolas.gp.gram.ParamInfo``: its term,
        factor and group place it) from ``source``'s draws."""
        if self.rule == "uniform":
            return source.uniform(self.low, self.high)
        if self.rule == "log_uniform":
            return source.log_uniform(self.low, self.high)
        if self.rule == "log_of_uniform":
            return np.log(source.uniform(self.low, self.high))
        if self.rule == "lengthscale":
            return source.log_uniform(source.shortest_lengthscale, self.high)
        if self.rule == "periodogram":
            return source.periodogram(param)
        if self.rule == "break":
            return source.break_locations(param, source.uniform(self.low, self.high))
        if self.rule == "window":
            return source.window_starts(param, source.uniform(self.low, self.high))
        if self.rule == "window_end":
            return source.window_ends(param, np.exp(source.log_uniform(self.low, self.high)))
        raise ValueError(f"unknown start rule {self.rule!r}")


class StartSource(Protocol):
    """The random draws a :class:`Start` rule combines (one array of ``R`` values each);
    the exact fit's initialisation provides them (``prolas.gp.starts``)."""

    shortest_lengthscale: float

    def uniform(self, low: float, high: float) -> np.ndarray: ...

    def log_uniform(self, low: float, high: float) -> np.ndarray: ...

    def periodogram(self, param: Any) -> np.ndarray: ...

    def break_locations(self, param: Any, spread: np.ndarray) -> np.ndarray: ...

    def window_starts(self, param: Any, spread: np.ndarray) -> np.ndarray: ...

    def window_ends(self, param: Any, durations: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class ParamSpec:
    """One shape parameter of a kernel or change operator.

    Attributes:
        name: ``"lengthscale"``, ``"period"``, ``"offset"``, ...: the key in result.json.
        unit: :data:`POSITION`, :data:`LENGTH` or :data:`DIMENSIONLESS`: how a value on
            the scaled inputs ``t = (x - x0) / span`` maps to x's units.
        log: optimised on the log scale (a positive parameter); else as it is.
        lower, upper: the box in scaled units (of the value, not its log): wide enough
            never to bind on a sensible model, narrow enough that no kernel value
            overflows; the edges are where a model reaches its nested sub-models
            (``prolas.nesting``) to far below a nat.
        floor: the data floor that raises the lower bound (:data:`LENGTHSCALE_FLOOR`,
            :data:`NYQUIST_FLOOR`) or ``None``.
        start: the starting heuristic of random restarts.
        rd: the fixed value r_d uses, in span units (``prolas.encoding``).
    """

    name: str
    unit: str
    log: bool
    lower: float
    upper: float
    start: Start
    rd: float
    floor: str | None = None

    def box(self, period_floor: float = 0.0, lengthscale_floor: float = 0.0) -> tuple[float, float]:
        """Bounds on ``theta`` (the log of the value where :attr:`log`) given the data's
        floors in scaled units: ``period_floor`` = 2Δ / span (Nyquist) and
        ``lengthscale_floor`` = K·Δ / span (0: none beyond :attr:`lower`)."""
        if self.floor == NYQUIST_FLOOR:
            floor = max(float(period_floor), self.lower)
            return math.log(floor), math.log(max(self.upper, 10.0 * floor))
        if not self.log:
            return self.lower, self.upper
        lo = math.log(self.lower)
        if self.floor == LENGTHSCALE_FLOOR and lengthscale_floor > 0:
            lo = max(lo, math.log(lengthscale_floor))
        return lo, math.log(self.upper)

    def to_natural(self, value: float, x0: float, span: float) -> float:
        """A value on the scaled inputs in x's own units (:func:`natural_value`)."""
        return natural_value(self.unit, value, x0, span)

    def from_natural(self, value: float, x0: float, span: float) -> float:
        """The inverse of :meth:`to_natural` (:func:`scaled_value`)."""
        return scaled_value(self.unit, value, x0, span)


# --- the geometry and gradient contexts the views work on ---------------------------------


@dataclass(frozen=True)
class GramGrid:
    """Scaled inputs of the exact fit and their pairwise geometry (all ``float64``).

    Attributes:
        t: inputs ``(n,)``.  d: ``t_i - t_j`` ``(n, n)``.  d2: ``d**2``.
        sum: ``t_i + t_j`` ``(n, n)``.
    """

    t: np.ndarray
    d: np.ndarray
    d2: np.ndarray
    sum: np.ndarray

    @classmethod
    def of(cls, t: np.ndarray) -> GramGrid:
        d = t[:, None] - t[None, :]
        return cls(t, d, d**2, t[:, None] + t[None, :])

    @property
    def n(self) -> int:
        return self.t.size


@dataclass(frozen=True)
class ScaledDerivative:
    """A derivative matrix ``factor * matrix`` that is never formed: the likelihood's
    gradient needs only ``<W, factor * matrix> = factor <W, matrix>``
    (:meth:`prolas.gp.gram.GramModel.log_likelihood`), and ``matrix`` is a Gram
    temporary the kernel made anyway. Saves two ``n x n`` passes per use."""

    factor: float
    matrix: np.ndarray

    def dot(self, w: np.ndarray) -> float:
        """``sum_ab w_ab factor matrix_ab``."""
        return self.factor * float(np.vdot(w, self.matrix))

    def dense(self) -> np.ndarray:
        """The derivative matrix itself (for checks; the fit never forms it)."""
        return self.factor * self.matrix


@dataclass(frozen=True)
class LowRankSineDerivative:
    """``factor * d_ab * sin(omega (t_a - t_b))`` (``d = t_a - t_b``), never formed:
    with ``sin(omega (t_a - t_b)) = s_a c_b - c_a s_b`` (``c = cos(omega t)``,
    ``s = sin(omega t)``),

        <W, M> = factor (s' (W o d) c - c' (W o d) s),

    one ``n x n`` product and two matrix-vector products instead of the five passes that
    build ``M``. Exact for any ``W`` (``M`` is symmetric, ``W`` need not be)."""

    factor: float
    d: np.ndarray
    cos: np.ndarray
    sin: np.ndarray

    def dot(self, w: np.ndarray) -> float:
        """``sum_ab w_ab M_ab``."""
        wd = w * self.d
        return self.factor * (float(self.sin @ (wd @ self.cos)) - float(self.cos @ (wd @ self.sin)))

    def dense(self) -> np.ndarray:
        """The derivative matrix itself (for checks; the fit never forms it)."""
        sin_wd = np.multiply.outer(self.sin, self.cos) - np.multiply.outer(self.cos, self.sin)
        return self.factor * self.d * sin_wd


@dataclass(frozen=True)
class MarginalDerivative:
    """``M_ab = m_a + m_b``, never formed: a change factor's ``d log(s s') / dθ``
    (:mod:`prolas.kernels.transitions`). With the row and column sums of ``W``,

        <W, M> = m' (W 1) + m' (W' 1),

    two reading passes over ``W`` for all of a factor's parameters together
    (:meth:`dot_sums`, the sums shared) instead of one written and one read ``n x n``
    array per parameter. Exact for any ``W``."""

    m: np.ndarray

    def dot(self, w: np.ndarray) -> float:
        """``sum_ab w_ab M_ab``."""
        return self.dot_sums(marginal_sums(w))

    def dot_sums(self, sums: np.ndarray) -> float:
        """``<W, M>`` from ``sums = W 1 + W' 1`` (:func:`marginal_sums`)."""
        return float(self.m @ sums)

    def dense(self) -> np.ndarray:
        """The derivative matrix itself (for checks; the fit never forms it)."""
        return self.m[:, None] + self.m[None, :]


def marginal_sums(w: np.ndarray) -> np.ndarray:
    """``W 1 + W' 1``, shape ``(n,)``: what every :class:`MarginalDerivative` contracts."""
    return w.sum(axis=1) + w.sum(axis=0)


@dataclass
class TermGradient:
    """One product term's share of the SGPR gradient on one chunk of the data
    (``prolas.gp.sgpr_bound``), which a kernel's :meth:`Kernel.sgpr_gradient` adds to.

    The term is ``K_t = alpha_i S_ij beta_j`` (``alpha`` on the M inducing inputs ``tu``,
    ``beta`` on the chunk's C inputs ``tf``) and the gradient of the bound in ``theta_p``
    is ``sum_ij W_ij dK_t/dtheta_p`` with ``Ws = W * S`` (M x C). A kernel either adds
    thin rows ``(p, coef, a, col)``, each meaning ``grad[p] += coef * a @ (Ws @ cols[col])``
    (computed for all rows at once, one product ``Ws @ [cols]``), or adds to ``grad``
    directly (elementwise passes over ``Ws``).

    Attributes:
        tu, tf: inducing inputs ``(M,)`` and chunk inputs ``(C,)``.
        alpha, beta: the rank-one parts ``(M,)``, ``(C,)`` (ones without any).
        Ws: ``W * S`` (M x C).
        cols: named ``(C,)`` vectors, in insertion order.
        rows: ``(parameter index, coefficient, (M,) vector, column name)``.
        grad: the gradient being accumulated, ``(P,)``.
        d2: the chunk's squared distances ``(tu_i - tf_j)^2`` (M x C), on demand.
        scratch: a persistent M x C work buffer by name.
        factor: the index of the factor being added in its term (for unique column names).
        W: the chunk's ``dF/dK`` (M x C) itself, for factors multiplied in as they are
            (role ``"multiply"``), whose derivative is not relative to ``k``.
        rest: ``rest(j)``, the term's ``S`` without its factor ``j`` (M x C; role
            ``"multiply"``: ``dK_t/dθ = alpha_i rest_ij (dk_j/dθ)_ij beta_j``, no division
            by a factor that may vanish).
    """

    tu: torch.Tensor
    tf: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor
    Ws: torch.Tensor
    grad: np.ndarray
    d2: Callable[[], torch.Tensor]
    scratch: Callable[[str], torch.Tensor]
    cols: dict[str, torch.Tensor] = field(default_factory=dict)
    rows: list[tuple[int, float, torch.Tensor, str]] = field(default_factory=list)
    factor: int = 0
    W: torch.Tensor | None = None
    rest: Callable[[int], torch.Tensor] | None = None


# --- the entry --------------------------------------------------------------------------


class Kernel:
    """One entry of the registry: a base kernel or a transition factor (module docstring).

    Subclasses set the class attributes and implement the views of their back ends; an
    entry is one instance (``prolas.kernels.BASE_KERNELS["SE"]``).
    """

    name: ClassVar[str] = ""
    params: ClassVar[tuple[ParamSpec, ...]] = ()
    formula: ClassVar[str] = ""
    description: ClassVar[str] = ""
    idempotent: ClassVar[bool] = False
    stationary: ClassVar[bool] = False
    role: ClassVar[str] = ""
    #: a term's variance is in (standardised y)^2 per (x unit)^variance_power per factor
    #: of this kernel: ``(x - c)(x' - c) = span^2 (t - c_t)(t' - c_t)`` gives LIN 2
    variance_power: ClassVar[int] = 0
    #: label mismatch costs to other kernels in the OT distance (unordered; a pair may
    #: be declared by either kernel; missing pairs cost 1)
    ot_costs: ClassVar[Mapping[str, float]] = {}
    #: the part it plays in the SGPR bound (:data:`SGPR_ROLES`)
    sgpr_role: ClassVar[str] = ""
    #: how the report's sentences set a component of this kernel apart from the others
    #: of its role (PERC: "without its own offset"); empty for none
    qualifier: ClassVar[str] = ""

    @property
    def shape_params(self) -> tuple[str, ...]:
        """Names of the shape parameters, in ``theta``'s order."""
        return tuple(p.name for p in self.params)

    @property
    def rd_values(self) -> dict[str, float]:
        """The fixed r_d hyperparameters (span units), ``{name: value}``."""
        return {p.name: p.rd for p in self.params}

    def param(self, name: str) -> ParamSpec:
        """The shape parameter called ``name``."""
        return next(p for p in self.params if p.name == name)

    def slow_lengthscale(self, params: Mapping[str, float]) -> float:
        """Role ``"periodic"``: the lengthscale (x's units) of the smooth kernel the factor
        is on data shorter than its period (``params`` in x's units)."""
        raise NotImplementedError(f"{self.name} is not periodic")

    def __repr__(self) -> str:
        return f"<kernel {self.name}: {self.formula}>"

    # --- natural formula: GPyTorch modules, r_d -----------------------------------------
    def value(
        self, x1: torch.Tensor, x2: torch.Tensor, v: Mapping[str, torch.Tensor], diag: bool
    ) -> torch.Tensor:
        """``k(x1, x2')`` in x's own units: inputs ``... x n x 1`` and ``... x m x 1``,
        parameters ``v[name]`` of shape ``... x 1 x 1`` (or 0-d); output ``... x n x m``
        (``... x n`` with ``diag``)."""
        raise NotImplementedError(f"{self.name}: no natural-unit formula")

    # --- exact NumPy fit ---------------------------------------------------------------
    def gram(
        self, grid: GramGrid, th: Sequence[float], grad: bool
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, bool]]]:
        """``(k, [(M, relative), ...])`` on the scaled inputs of ``grid``, with ``th`` the
        factor's entries of ``theta`` (logs where :attr:`ParamSpec.log`). With ``grad``,
        one ``M`` per parameter: ``dk/dθ = k * M`` if ``relative`` else ``M``. A relative
        ``M`` may be a :class:`ScaledDerivative` or :class:`LowRankSineDerivative` (an
        object with ``dot(W) = <W, M>``) instead of the matrix."""
        raise NotImplementedError(f"{self.name}: no analytic Gram matrix")

    # --- SGPR (prolas.gp.sgpr_kernel, prolas.gp.sgpr_bound) ------------------------------
    def sgpr_log(self, d2: torch.Tensor, v: Sequence[torch.Tensor]) -> torch.Tensor:
        """Role ``"dense"``: ``log k`` on squared distances ``d2`` (a x b), differentiable
        in the values ``v`` (0-d tensors)."""
        raise NotImplementedError

    def sgpr_log_into(
        self, d2: torch.Tensor, th: Sequence[float], scratch: Callable[[str], torch.Tensor]
    ) -> tuple[torch.Tensor | None, float]:
        """Role ``"dense"``, no gradient: ``(g, c)`` with ``log k = c * g`` (``g = d2`` when
        ``None``); ``th`` the factor's entries of ``theta``; ``g`` may live in a scratch
        buffer."""
        raise NotImplementedError

    def sgpr_lowrank(
        self, ta: torch.Tensor, tb: torch.Tensor, v: Sequence[torch.Tensor]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor | float]:
        """Role ``"lowrank"``: ``(lefts, rights, c)`` with
        ``log k(ta_i, tb_j) = sum_r lefts[r]_i rights[r]_j - c``; differentiable in ``v``."""
        raise NotImplementedError

    def sgpr_lowrank_theta(
        self, ta: torch.Tensor, tb: torch.Tensor, th: Sequence[float]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], float]:
        """:meth:`sgpr_lowrank` from the factor's entries of ``theta`` (no gradient)."""
        raise NotImplementedError

    def sgpr_value(
        self, ta: torch.Tensor, tb: torch.Tensor, v: Sequence[torch.Tensor]
    ) -> torch.Tensor:
        """Role ``"multiply"``: ``k(ta_i, tb_j)`` (a x b), differentiable in ``v``."""
        raise NotImplementedError

    def sgpr_value_theta(
        self, ta: torch.Tensor, tb: torch.Tensor, th: Sequence[float]
    ) -> torch.Tensor:
        """:meth:`sgpr_value` from the factor's entries of ``theta`` (no gradient)."""
        raise NotImplementedError

    def sgpr_gradient(self, g: TermGradient, pos: Sequence[int], th: Sequence[float]) -> None:
        """Roles ``"dense"``, ``"lowrank"`` and ``"multiply"``: add this factor's
        derivatives (at the ``theta`` indices ``pos``, entries ``th``) to ``g``
        (:class:`TermGradient`)."""
        raise NotImplementedError

    #: role ``"vector"``: whether the derivative of ``s`` is given relative to ``s``
    #: (:meth:`vector_and_m`) or as constant slopes (:attr:`vector_slopes`)
    vector_relative: ClassVar[bool] = False
    #: role ``"vector"``, not relative: ``ds/dθ_q``, constant in ``t``
    vector_slopes: ClassVar[tuple[float, ...]] = ()

    def vector(self, t: torch.Tensor, v: Sequence[Any]) -> torch.Tensor:
        """Role ``"vector"``: ``s(t)`` with ``k(t, t') = s(t) s(t')``; ``v`` the parameter
        values (floats or 0-d tensors, differentiable)."""
        raise NotImplementedError

    def vector_and_m(
        self, t: torch.Tensor, v: Sequence[float]
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Role ``"vector"``, relative: ``(s, [m_q])`` with ``m_q = (ds/dθ_q) / s``."""
        raise NotImplementedError


class Stationary(Kernel):
    """A dense stationary kernel, ``k = exp(log_k(d^2))`` with ``k(0) = 1``, whose views
    all follow from :meth:`log_k` and :meth:`dlog_k`.

    ``v`` holds the parameter values in ``params`` order (arrays or tensors of any
    broadcastable shape) and ``xp`` is ``numpy`` or ``torch``; the same two functions
    serve the natural units (GPyTorch: ``d`` in x's units, values in x's units) and the
    scaled ones (the fit and SGPR), since a stationary kernel of ``d`` with lengths ``l``
    is the same kernel of ``d / span`` with lengths ``l / span``.
    """

    stationary = True
    sgpr_role = DENSE

    def log_k(self, d2: Any, v: Sequence[Any], xp: Any) -> Any:
        """``log k`` at squared distances ``d2``."""
        raise NotImplementedError

    def dlog_k(self, d2: Any, v: Sequence[Any], xp: Any) -> list[Any]:
        """The gradient factors ``M_q = d log k / d theta_q`` (``theta_q`` the log of the
        value where :attr:`ParamSpec.log`), one per parameter."""
        raise NotImplementedError

    def _values(self, th: Sequence[float]) -> list[float]:
        """Parameter values from their entries of ``theta``."""
        return [exp_or_inf(float(x)) if p.log else float(x) for p, x in zip(self.params, th)]

    def value(self, x1, x2, v, diag):
        d = pairwise(x1, x2, diag)
        vals = [v[p.name][..., 0] if diag else v[p.name] for p in self.params]
        return torch.exp(self.log_k(d**2, vals, torch))

    def gram(self, grid, th, grad):
        v = self._values(th)
        k = np.exp(self.log_k(grid.d2, v, np))
        return k, ([(m, True) for m in self.dlog_k(grid.d2, v, np)] if grad else [])

    def sgpr_log(self, d2, v):
        return self.log_k(d2, v, torch)

    def sgpr_log_into(self, d2, th, scratch):
        return self.log_k(d2, self._values(th), torch), 1.0

    def sgpr_gradient(self, g, pos, th):
        d2 = g.d2()
        for p, m in zip(pos, self.dlog_k(d2, self._values(th), torch)):
            g.grad[p] += float(g.alpha @ ((g.Ws * m) @ g.beta))
