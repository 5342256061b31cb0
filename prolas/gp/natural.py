"""Scaled optimiser parameters ``theta`` <-> hyperparameters in x's own units.

The fit optimises on ``t = (x - x0) / s`` (s the span), where every expression is
equally well conditioned; :func:`theta_to_natural` maps a fitted ``theta`` back to x's
units (lengthscales and periods times s, LIN offsets ``x0 + s c``, a LIN term's variance
divided by ``s^2`` per LIN factor) and :func:`natural_to_theta` maps one natural value
into ``theta``'s space. Transitions of change operators that the data cannot see are held
far beyond them (:func:`hold_unseen`), so forecasts keep the regime the data end in.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Protocol

import numpy as np

from prolas.data import Dataset
from prolas.expr import CHANGE_FACTORS, factor_group, factor_kernel
from prolas.gp.gram import ParamInfo
from prolas.gp.results import FactorFit, FitResult, TermFit
from prolas.kernels import factor

__all__ = [
    "HELD_SPANS",
    "UNSEEN_WIDTHS",
    "ParameterSpace",
    "hold_unseen",
    "hold_unseen_transitions",
    "natural_to_theta",
    "theta_to_natural",
    "variance_power",
]


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

    Each parameter maps by its unit (:class:`prolas.kernels.ParamSpec`): lengths
    (lengthscales, periods, widths) scale by ``s``, positions (LIN offsets, change
    locations) map ``c = x0 + s c_t``, dimensionless ones (PER's lengthscale, RQ's
    alpha) stay. Since ``(x - c)(x' - c) = s^2 (t - c_t)(t' - c_t)``, a term's variance
    is divided by ``s^2`` for every LIN factor it holds (:func:`variance_power`). A change
    operator's values are repeated in every factor that carries them
    (docs/conventions.md). A transition the data cannot see is held off first
    (:func:`hold_unseen`).
    """
    changes: dict[int, dict[str, float]] = {}
    for p, v in zip(model.params, theta):
        if p.group >= 0:
            changes.setdefault(p.group, {})[p.name] = p.natural(p.value(v), x0, s)
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
                variance = value / s ** variance_power(names)
            else:
                factors[p.factor][p.name] = p.natural(value, x0, s)
        for j, name in enumerate(names):
            if (g := factor_group(name)) is not None:
                factors[j] = dict(changes[g])
        kinds = [factor_kernel(n) for n in names]
        terms.append(TermFit(variance, tuple(FactorFit(n, f) for n, f in zip(kinds, factors))))
    return tuple(terms), model.params[-1].value(theta[-1])


def variance_power(names: tuple[str, ...]) -> int:
    """The power of x's units in the variance of a term with factors ``names`` (expanded
    names such as ``"CP_BEFORE:0"`` allowed): the sum of its kernels' ``variance_power``,
    2 per LIN factor."""
    return sum(factor(factor_kernel(n)).variance_power for n in names)


def natural_to_theta(
    p: ParamInfo, value: float, x0: float, s: float, n_lin: int = 0
) -> float | None:
    """One hyperparameter in x's own units as an entry of ``theta`` (the inverse of
    :func:`theta_to_natural` for that entry, clipped into its box), or ``None`` when it
    cannot be one (a positive parameter that is not positive, or not finite).

    ``n_lin``: for a term variance, the number of LIN factors of its term (the variance
    in scaled units is ``v s^(2 n_lin)``).
    """
    v = float(value)
    if p.name == "variance":
        v = v * s ** (2 * n_lin)
    else:
        v = p.scaled(v, x0, s)
    if not math.isfinite(v) or (p.log and not v > 0):
        return None
    return p.to_theta(v)
