"""The change operators and their transition factors (docs/conventions.md).

A transition at location ``l`` with width ``w > 0`` is the sigmoid
``σ(x) = 1 / (1 + exp(-(x - l) / w))``.

* ``CP(A, B)``, a change-point (``location``, ``width``): A before ``l``, B after it. Its
  factors are ``CP_BEFORE`` = ``(1 - σ(x))(1 - σ(x'))`` on the terms of A and
  ``CP_AFTER`` = ``σ(x) σ(x')`` on those of B.
* ``CW(A, B)``, a change-window (``start``, ``end``, one shared ``width``): B inside
  ``[start, end]``, A outside. With ``u(x) = σ_start(x) (1 - σ_end(x))``, its factors are
  ``CW_OUTSIDE`` = ``(1 - u(x))(1 - u(x'))`` and ``CW_INSIDE`` = ``u(x) u(x')``.

Every factor is rank one, ``s(t) s(t')``. The exact fit and SGPR share one form of
``s`` and of its relative derivatives ``m = (ds/dθ) / s``, which stay bounded where
``s`` underflows (no division by a vanishing ``s``): ``1 - σ`` is ``σ(-z)`` and
``1 - u`` is ``(1 - σ_start) + σ_start σ_end``, without cancellation. The GPyTorch
modules compute ``1 - u`` by subtraction and the report's weights use the overflow-free
``σ(z) = (1 + tanh(z / 2)) / 2``: those are the forms the reported numbers have always
been computed with; all agree to rounding (tests/gp/test_registry.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from scipy.special import expit

from prolas.kernels.spec import (
    LENGTH,
    POSITION,
    TRANSITION,
    VECTOR,
    Kernel,
    MarginalDerivative,
    ParamSpec,
    Start,
    exp_or_inf,
)

__all__ = [
    "ChangeOperator",
    "ChangePointSide",
    "ChangeWindowSide",
    "OPERATORS",
    "TRANSITIONS",
    "Transition",
    "logistic",
]


def logistic(z: np.ndarray | float) -> np.ndarray:
    """``σ(z) = 1 / (1 + exp(-z))`` elementwise, without overflow: computed as
    ``(1 + tanh(z / 2)) / 2``. Returns a float64 array of ``z``'s shape."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=np.float64)))


# A transition may sit a little outside the data (a change just before the first or
# after the last point); widths run from sharp steps to a blend over the whole span.
def _place(name: str, rd: float, start: Start) -> ParamSpec:
    return ParamSpec(name, POSITION, False, -0.25, 1.25, start, rd)


WIDTH = ParamSpec(
    "width",
    LENGTH,
    log=True,
    lower=1e-4,
    upper=1.0,
    start=Start("log_uniform", 0.003, 0.05),
    rd=0.05,  # 12 % -> 88 % over a fifth of the span
)


@dataclass(frozen=True)
class ChangeOperator:
    """A change operator: its shape parameters (shared by every term it expands into),
    the factor names of its two sides ``(A side, B side)`` and its plain-language name."""

    name: str
    params: tuple[ParamSpec, ...]
    sides: tuple[str, str]
    description: str

    @property
    def shape_params(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def rd_values(self) -> dict[str, float]:
        """The fixed r_d values of its parameters (span units)."""
        return {p.name: p.rd for p in self.params}

    def param(self, name: str) -> ParamSpec:
        """The shape parameter called ``name``."""
        return next(p for p in self.params if p.name == name)

    def weight(self, side: int, x: np.ndarray | float, params: dict[str, float]) -> np.ndarray:
        """``s(x)`` of side 0 (A) or 1 (B), in x's units, for the report: a term on that
        side is ``s(x) f(x)``. CP: ``σ((x - location) / w)`` on side B, ``1 -`` that on A;
        CW: ``u(x) = σ((x - start) / w) σ(-(x - end) / w)`` on B, ``1 - u`` on A."""
        x = np.asarray(x, dtype=np.float64)
        w = params["width"]
        if self.name == "CP":
            b = logistic((x - params["location"]) / w)
        else:
            b = logistic((x - params["start"]) / w) * logistic(-(x - params["end"]) / w)
        return b if side == 1 else 1.0 - b


#: The change operators by name, in the order of the grammar's operations.
OPERATORS: dict[str, ChangeOperator] = {
    op.name: op
    for op in (
        ChangeOperator(
            "CP",
            (_place("location", 0.5, Start("break", 0.05, 0.95)), WIDTH),
            ("CP_BEFORE", "CP_AFTER"),
            "change-point",
        ),
        ChangeOperator(
            "CW",
            (
                _place("start", 0.25, Start("window", 0.05, 0.8)),
                _place("end", 0.75, Start("window_end", 0.05, 0.5)),
                WIDTH,
            ),
            ("CW_OUTSIDE", "CW_INSIDE"),
            "change-window",
        ),
    )
}

_Sigmoid = Callable[[Any], Any]


def _numpy_ratio(u: np.ndarray, s: np.ndarray) -> np.ndarray:
    return np.divide(u, s, out=np.zeros_like(u), where=s > 0)


def _torch_ratio(u: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return torch.where(s > 0, u / torch.where(s > 0, s, 1.0), 0.0)


class Transition(Kernel):
    """A change operator's factor ``s(t) s(t')`` (module docstring); its parameters are
    the operator's, in the operator's order (location-like first, width last)."""

    operator: ClassVar[str] = ""
    side: ClassVar[int] = 0
    role = TRANSITION
    sgpr_role = VECTOR
    vector_relative = True

    def stable(
        self, t: Any, where: Sequence[Any], width: Any, sigmoid: _Sigmoid, ratio: Any, grad: bool
    ) -> tuple[Any, list[Any]]:
        """``(s(t), [m_q])`` in the stable form (module docstring), with ``where`` the
        location (or start and end) and ``width`` the width; ``sigmoid`` and ``ratio``
        (``u / s`` where ``s > 0``, else 0) are NumPy's or torch's."""
        raise NotImplementedError

    def weight(self, x: torch.Tensor, v: dict[str, torch.Tensor]) -> torch.Tensor:
        """``s(x)`` for the GPyTorch modules: inputs ``... x n x 1``."""
        raise NotImplementedError

    def value(self, x1, x2, v, diag):
        s1, s2 = self.weight(x1, v), self.weight(x2, v)
        if diag:
            return (s1 * s2)[..., 0]
        return s1 @ s2.transpose(-1, -2)

    def gram(self, grid, th, grad):
        s, ms = self.stable(grid.t, th[:-1], exp_or_inf(th[-1]), expit, _numpy_ratio, grad)
        k = np.multiply.outer(s, s)
        if not grad:
            return k, []
        return k, [(MarginalDerivative(m), True) for m in ms]

    def vector(self, t, v):
        return self.stable(t, v[:-1], v[-1], torch.sigmoid, _torch_ratio, False)[0]

    def vector_and_m(self, t, v):
        return self.stable(t, v[:-1], v[-1], torch.sigmoid, _torch_ratio, True)


class ChangePointSide(Transition):
    """``CP_BEFORE`` (``s = 1 - σ``) or ``CP_AFTER`` (``s = σ``), ``z = (t - l) / w``;
    relative derivatives in (location, log width): after ``-(1 - σ) (1 / w, z)``,
    before ``σ (1 / w, z)``."""

    operator = "CP"
    params = OPERATORS["CP"].params

    def stable(self, t, where, width, sigmoid, ratio, grad):
        z = (t - where[0]) / width
        sig, one_minus = sigmoid(z), sigmoid(-z)
        if self.side == 1:
            return sig, ([-one_minus / width, -one_minus * z] if grad else [])
        return one_minus, ([sig / width, sig * z] if grad else [])

    def weight(self, x, v):
        z = (x - v["location"]) / v["width"]
        return torch.sigmoid(z) if self.side == 1 else torch.sigmoid(-z)


class ChangeWindowSide(Transition):
    """``CW_INSIDE`` (``s = u = σ₁ (1 - σ₂)``) or ``CW_OUTSIDE`` (``s = 1 - u``), with
    ``σ₁``, ``σ₂`` at start and end; ``d log u / d(start, end, log w) = (-(1 - σ₁) / w,
    σ₂ / w, -(1 - σ₁) z₁ + σ₂ z₂)`` and outside ``m = -(u / (1 - u)) d log u``."""

    operator = "CW"
    params = OPERATORS["CW"].params

    def stable(self, t, where, width, sigmoid, ratio, grad):
        z1, z2 = (t - where[0]) / width, (t - where[1]) / width
        s1, c1 = sigmoid(z1), sigmoid(-z1)  # σ₁ and 1 - σ₁
        s2, c2 = sigmoid(z2), sigmoid(-z2)
        u = s1 * c2
        inside = [-c1 / width, s2 / width, -c1 * z1 + s2 * z2] if grad else []
        if self.side == 1:
            return u, inside
        s = c1 + s1 * s2  # 1 - u, without cancellation
        if not grad:
            return s, []
        r = ratio(u, s)
        return s, [-r * m for m in inside]

    def weight(self, x, v):
        w = v["width"]
        u = torch.sigmoid((x - v["start"]) / w) * torch.sigmoid(-(x - v["end"]) / w)
        return u if self.side == 1 else 1.0 - u


class CPBefore(ChangePointSide):
    name, side = "CP_BEFORE", 0
    formula = "(1 - σ(x))(1 - σ(x'))"
    description = "the weight before a change-point"


class CPAfter(ChangePointSide):
    name, side = "CP_AFTER", 1
    formula = "σ(x) σ(x')"
    description = "the weight after a change-point"


class CWOutside(ChangeWindowSide):
    name, side = "CW_OUTSIDE", 0
    formula = "(1 - u(x))(1 - u(x'))"
    description = "the weight outside a change-window"


class CWInside(ChangeWindowSide):
    name, side = "CW_INSIDE", 1
    formula = "u(x) u(x')"
    description = "the weight inside a change-window"


#: The transition factors by name, in the operators' order (A side, B side).
TRANSITIONS: dict[str, Transition] = {
    t.name: t for t in (CPBefore(), CPAfter(), CWOutside(), CWInside())
}
