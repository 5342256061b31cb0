"""The anatomy of a fitted model: what each additive term contributes and where change
operators switch it on, as numbers (the report layer turns them into words and plots).

For a fitted sum of product terms ``f = Σ_t f_t`` on the data inputs ``x_1..x_n``:

* :func:`term_shares`: term t's posterior mean ``m_t`` on the inputs
  (:func:`prolas.gp.decompose`) and its share of the variance of the fitted mean,
  ``share_t = Var_i(m_t(x_i)) / Σ_s Var_i(m_s(x_i))``.
* :func:`flat_factors`: the factors of each term that are constant on the data (dropping
  one changes the term's prior covariance by less than :data:`FLAT_TOLERANCE` of the
  noise variance).
* :func:`fit_changes`: the change operators (CP, CW) of the fit as :class:`FitChange`
  (fitted location/start/end/width in x's units, the terms on each side), with the
  weight ``s(x)`` they put on a term: a term on side A or B of a change is
  ``s(x) f(x)``, its change factor ``s(x) s(x')``.
* :func:`term_conditions`, :func:`term_weight`, :func:`active_bounds`: per term, the
  change sides that hold it, the product of their weights on given inputs, and the
  range of x where they let it act.
* :func:`trend_slope`: the least-squares slope of a term's mean (of the trend itself
  where change weights scale it).
* :func:`noise_terms`, :func:`term_prior_variances`: which terms are white noise
  (``WN``: noise, not signal) and each term's prior variance ``k_t(x, x)`` at given
  inputs (for a noise term, the variance of the noise it adds there).

Shapes: ``n`` data inputs; one entry per additive term, in the fit's canonical term order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from prolas.data import Dataset
from prolas.expr import CHANGE_OPERATORS, parse
from prolas.gp.fit import DTYPE, FitResult, natural_covar_module, term_factors
from prolas.gp.natural import HELD_SPANS
from prolas.gp.predict import decompose
from prolas.kernels import OPERATORS, is_noise_term
from prolas.kernels import factor as kernel_of
from prolas.kernels.transitions import logistic

__all__ = [
    "ACTIVE_WEIGHT",
    "FLAT_TOLERANCE",
    "FitChange",
    "active_bounds",
    "fit_changes",
    "flat_factors",
    "noise_terms",
    "term_prior_variances",
    "sigmoid",
    "term_conditions",
    "term_shares",
    "term_weight",
    "trend_slope",
]


# --- what each term contributes -----------------------------------------------------------


def term_shares(fit: FitResult, dataset: Dataset) -> tuple[list[float], list[np.ndarray]]:
    """Each term's share of the variance of the fitted mean, and its mean on the data.

    With ``m_t`` term t's posterior mean on the data inputs (:func:`prolas.gp.decompose`,
    computed for the standardised y so that no variance overflows),

        share_t = Var_i(m_t(x_i)) / Σ_s Var_i(m_s(x_i))     (all 0 if the sum is 0).

    Returns ``(shares, means)``: one float per term (summing to 1), and per term its
    mean on ``dataset.x`` in y's units without the data mean, shape ``(n,)``.
    """
    parts = decompose(fit, dataset.standardised_view(), dataset.x)
    v = np.array([float(np.var(m)) for _, m, _ in parts])  # standardised: no overflow
    means = [m * dataset.y_std for _, m, _ in parts]
    total = float(v.sum())
    shares = (v / total).tolist() if total > 0 else [0.0] * len(v)
    return shares, means


#: a factor is "constant on the data" when replacing it by 1 changes its term's prior
#: covariance on the data by less than this fraction of the noise variance anywhere: it
#: then cannot change a prediction, so the words do not call it a change of shape (its
#: parameters stay in report.md's table). A correlation threshold alone would not do:
#: a PER with a long lengthscale is "constant + small sinusoid", and a large term
#: variance makes that sinusoid the seasonal signal (mauna's yearly cycle is fitted so).
FLAT_TOLERANCE = 0.01

#: at most this many evenly spaced inputs are used for the flatness check
_FLAT_POINTS = 200


def flat_factors(fit: FitResult, dataset: Dataset) -> list[set[int]]:
    """Per additive term, the indices of its factors that are constant on the data.

    For term ``t`` with variance ``v_t`` and factor correlation matrices ``K_f`` on the
    inputs, factor ``f`` is flat when

        max_ij | v_t * prod_{g != f} K_g[i, j] * (K_f[i, j] - 1) | < FLAT_TOLERANCE * noise,

    i.e. the term's prior covariance hardly changes if the factor is dropped (an SE with
    lengthscale 3e8 years on 40 years of data, an RQ with alpha 1e-5). Factors in x's
    units (a kernel's ``variance_power > 0``: LIN) are never flat: they carry the term's
    scale, so their values are not comparable to 1. Inputs: an evenly spaced subsample of at
    most 200 points (matrices ``(m, m)``, ``m <= 200``).
    """
    x = torch.tensor(dataset.x[dataset.spaced_indices(_FLAT_POINTS)], dtype=DTYPE).reshape(-1, 1)
    tol = FLAT_TOLERANCE * float(fit.noise_variance or 0.0)
    module = natural_covar_module(fit)
    out: list[set[int]] = []
    with torch.no_grad():
        for scale, term in zip(module.kernels, fit.terms):
            mats = [f.forward(x, x) for f in term_factors(scale)]
            flat = set()
            for i, factor in enumerate(term.factors):
                if kernel_of(factor.kernel).variance_power > 0:
                    continue
                rest = torch.ones_like(mats[i])
                for j, m in enumerate(mats):
                    if j != i:
                        rest = rest * m
                change = term.variance * rest * (mats[i] - 1.0)
                if float(change.abs().max()) < tol:
                    flat.add(i)
            out.append(flat)
    return out


# --- change operators -----------------------------------------------------------------------


#: ``σ(z) = 1 / (1 + exp(-z))`` elementwise, without overflow
#: (:func:`prolas.kernels.transitions.logistic`).
sigmoid = logistic


@dataclass(frozen=True)
class FitChange:
    """One change operator of a fitted model (a change group of its expansion).

    Attributes:
        op: ``"CP"`` or ``"CW"``.
        group: its index in :attr:`prolas.expr.Expression.change_groups`.
        params: its fitted shape parameters in x's units (``location``, ``width`` for
            CP; ``start``, ``end``, ``width`` for CW; docs/conventions.md).
        sides: the indices of the fitted terms on its A side (before the change-point,
            outside the window) and on its B side (after, inside).
    """

    op: str
    group: int
    params: dict[str, float]
    sides: tuple[tuple[int, ...], tuple[int, ...]]

    @property
    def terms(self) -> frozenset[int]:
        """The indices of all the terms it switches (both sides)."""
        return frozenset(self.sides[0] + self.sides[1])

    def weight(self, side: int, x: np.ndarray | float) -> np.ndarray:
        """``s(x)`` of side 0 (A) or 1 (B): a term on that side is ``s(x) f(x)``
        (its factor is ``s(x) s(x')``): ``1 - σ``/``σ`` for CP, ``1 - u``/``u`` for CW.

        With width ``w``: CP ``σ((x - location) / w)``; CW
        ``u(x) = σ((x - start) / w) σ(-(x - end) / w)`` (the operator's
        :meth:`prolas.kernels.ChangeOperator.weight`). Same shape as ``x``.
        """
        return OPERATORS[self.op].weight(side, x, self.params)


def fit_changes(fit: FitResult, dataset: Dataset | None = None) -> list[FitChange]:
    """The change operators of a fitted model, in group order, with their fitted
    parameters (read from the first factor that carries each group; the fit ties them)
    and the terms on each side. Empty for a model without change operators.

    With ``dataset`` (the data the model was fitted on), a transition held off because
    the data cannot see it (:func:`prolas.gp.fit.hold_unseen` puts it ``HELD_SPANS``
    spans beyond the data; anything past half that counts, a margin for rounding) is
    reported at ``+inf`` or ``-inf``: it never happens on the data or in forecasts.
    """
    if not fit.ok or not fit.terms:
        return []
    expr = parse(fit.expression)
    if not expr.has_change:
        return []
    out = []
    for group in expr.change_groups:
        side_names = tuple(f"{n}:{group.index}" for n in CHANGE_OPERATORS[group.op][1])
        sides: list[tuple[int, ...]] = []
        params: dict[str, float] = {}
        for name in side_names:
            on = []
            for i, (names, term) in enumerate(zip(expr.terms, fit.terms)):
                if name in names:
                    on.append(i)
                    params = params or dict(term.factors[names.index(name)].params)
            sides.append(tuple(on))
        if dataset is not None:
            params = {k: _held(k, v, dataset) for k, v in params.items()}
        out.append(FitChange(group.op, group.index, params, (sides[0], sides[1])))
    return out


def _held(name: str, value: float, dataset: Dataset) -> float:
    """``value`` of shape parameter ``name``, or ``±inf`` for a held transition."""
    if name == "width":
        return value
    far = 0.5 * HELD_SPANS * dataset.span
    if value - float(dataset.x[-1]) >= far:
        return math.inf
    if float(dataset.x[0]) - value >= far:
        return -math.inf
    return value


def term_conditions(changes: list[FitChange], n_terms: int) -> list[list[tuple[FitChange, int]]]:
    """Per term (``n_terms`` lists), the ``(change, side)`` pairs that switch it on and
    off; empty for a term that no change operator holds."""
    out: list[list[tuple[FitChange, int]]] = [[] for _ in range(n_terms)]
    for c in changes:
        for side, idx in enumerate(c.sides):
            for i in idx:
                out[i].append((c, side))
    return out


def term_weight(conds: list[tuple[FitChange, int]], x: np.ndarray) -> np.ndarray | None:
    """``a(x) = Π_(c, side) c.weight(side, x)``: the product of a term's change weights
    at the inputs ``x`` (its mean is ``a(x) f(x)``), shape of ``x``; ``None`` for a term
    without change factors (``a = 1``)."""
    return np.prod([c.weight(side, x) for c, side in conds], axis=0) if conds else None


def active_bounds(conds: list[tuple[FitChange, int]]):
    """A term's active range from its change factors: ``(lo, hi, outside)`` where
    ``lo``/``hi`` are ``(x, change)`` (the latest "after"/window start, the earliest
    "before"/window end; ``None`` if unbounded) and ``outside`` the windows it must lie
    outside of. A bound implied by a tighter one (after 1966 and after 1974) is dropped,
    and so is one at infinity on its own side (a held transition, :func:`fit_changes`):
    ``lo = +inf`` or ``hi = -inf`` says the term is never on."""
    lo = hi = None
    outside: list[FitChange] = []
    for c, side in conds:
        if c.op == "CP":
            loc = c.params["location"]
            if side == 1 and (lo is None or loc > lo[0]):
                lo = (loc, c)
            elif side == 0 and (hi is None or loc < hi[0]):
                hi = (loc, c)
        elif side == 0:
            outside.append(c)
        else:
            s, e = c.params["start"], c.params["end"]
            if lo is None or s > lo[0]:
                lo = (s, c)
            if hi is None or e < hi[0]:
                hi = (e, c)
    lo = None if lo is not None and lo[0] == -math.inf else lo
    hi = None if hi is not None and hi[0] == math.inf else hi
    return lo, hi, outside


# --- noise terms ------------------------------------------------------------------------------


def noise_terms(fit: FitResult) -> list[bool]:
    """Per term, whether it is white noise (a ``WN`` factor: noise, not signal;
    :func:`prolas.kernels.is_noise_term`)."""
    return [is_noise_term([f.kernel for f in t.factors]) for t in fit.terms]


def term_prior_variances(fit: FitResult, x: np.ndarray) -> list[np.ndarray]:
    """Per term, its prior variance ``v_t prod_f k_f(x, x)`` at the inputs ``x``
    (standardised y; ``(m,)`` each): for ``LIN*WN`` ``v (x - c)^2``, under a change
    operator times its weight squared."""
    module = natural_covar_module(fit)
    xt = torch.tensor(np.asarray(x, dtype=np.float64), dtype=DTYPE).reshape(-1, 1)
    out = []
    with torch.no_grad():
        for scale in module.kernels:
            k = scale.outputscale * torch.ones(xt.shape[0], dtype=DTYPE)
            for f in term_factors(scale):
                k = k * f.forward(xt, xt, diag=True)
            out.append(k.numpy())
    return out


# --- trends -----------------------------------------------------------------------------------

#: a term whose change weight is below this at an input is switched off there
ACTIVE_WEIGHT = 1e-3


def trend_slope(dataset: Dataset, mean_on_x: np.ndarray, weight: np.ndarray | None = None) -> float:
    """Least-squares slope of ``mean_on_x`` (y units, shape ``(n,)``) against x (x units).

    Fitted on ``t = (x - x0) / span`` and ``mean / y_std``, then scaled back, so that
    huge or tiny x and y (``1e300``, ``1e-300``) neither overflow nor lose the fit;
    the result may be ``inf`` when the slope itself is not representable.

    ``weight``: a term switched on and off by change operators is ``a(x) f(x)`` with
    ``a`` its product of change weights (:func:`term_weight`); the slope is then that of
    ``f = mean / a``, fitted where ``a > ACTIVE_WEIGHT`` with weights ``a`` (NaN if there
    are fewer than two such inputs: the trend does not act on the data).
    """
    if len(mean_on_x) < 2 or not dataset.span > 0:
        return 0.0
    t = (dataset.x - dataset.x[0]) / dataset.span
    m = np.asarray(mean_on_x) / dataset.y_std
    w = None
    if weight is not None:
        on = weight > ACTIVE_WEIGHT
        if np.count_nonzero(on) < 2:
            return math.nan
        t, m, w = t[on], m[on] / weight[on], weight[on]
    with np.errstate(over="ignore", invalid="ignore"):
        slope_t = float(np.polyfit(t, m, 1, w=w)[0])
        return slope_t * dataset.y_std / dataset.span
