"""``PERC``, the centred periodic kernel (GPML's ``covPeriodicNoDC``).

With ``u = 1 / l^2`` and ``I0`` the modified Bessel function of order 0,

    PERC(d) = (exp(u cos(2 pi d / p)) - I0(u)) / (exp(u) - I0(u)).

It is PER with its constant part removed and rescaled to 1 at ``d = 0``: PER is
``exp(u (cos(w d) - 1))`` (``w = 2 pi / p``), its mean over a period is
``c(u) = exp(-u) I0(u)``, and ``PERC = (PER - c) / (1 - c)``, so a periodic term does not
also act as an offset. It takes negative values. Shape parameters: lengthscale ``l``
(dimensionless, as PER's) and period ``p >= 2Δ`` (Nyquist).

**Stable form.** With ``a = cos(w d) - 1 = -2 sin^2(w d / 2)`` and
``g(u) = 1 - exp(-u) I0(u)`` (:func:`one_minus_i0e`),

    PERC(d) = 1 + expm1(u a) / g(u).

For large ``u`` (a lengthscale at its lower bound: ``u = 1e6``) ``exp(-u) I0(u)`` is
``scipy.special.i0e``, never ``I0`` itself (which overflows); for small ``u`` ``g`` is
summed as ``-expm1(-u) - exp(-u) (I0(u) - 1)`` with ``I0 - 1`` by its power series, so
``g ~ u`` keeps its relative precision and ``PERC -> cos(w d)`` as ``u -> 0`` (not 1: a
PERC at its longest lengthscale is a sinusoid, so it is not dropped like PER,
:mod:`prolas.nesting`).

**Derivatives**, in ``theta = (log l, log p)``, with ``E = expm1(u a)`` and
``g'(u) = exp(-u) (I0(u) - I1(u))`` (``i0e - i1e``):

    dk/d log l = -2 u (a (1 + E) - E g' / g) / g,
    dk/d log p = u (1 + E) w d sin(w d) / g.

They are not relative to ``k`` (which vanishes): the exact fit multiplies them by the
term's other factors, as it does LIN's.

Views (prolas.kernels.spec): the exact fit forms ``sin(w d / 2)`` and ``cos(w d / 2)`` as
rank-2 outer products of n-vectors (exactly 0 and 1 where two inputs coincide); SGPR
multiplies the same matrix into a term's dense part (role ``"multiply"``: no log-factor,
since PERC takes negative values), and its gradient is an elementwise pass against the
term without the factor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.special
import torch

from prolas.kernels.per import PERIOD, SHAPE_LENGTHSCALE
from prolas.kernels.spec import (
    MULTIPLY,
    PERIODIC,
    Kernel,
    exp_or_inf,
    pairwise,
)

__all__ = ["CentredPeriodic", "centred_periodic", "one_minus_i0e"]

#: Below this ``u``, ``g(u)`` is summed from the power series of ``I0 - 1`` (at ``u = 2``
#: its 15 terms reach ~1e-25 of the sum); above, ``1 - i0e(u)`` loses nothing (``i0e(2)``
#: is 0.31).
_SERIES_BELOW = 2.0
_SERIES_TERMS = 15


def _i0_minus_one(u: Any) -> Any:
    """``I0(u) - 1 = sum_{k >= 1} (u^2 / 4)^k / (k!)^2`` (15 terms, ``u <= 2``)."""
    q = u * u / 4.0
    term = q
    total = q
    for k in range(2, _SERIES_TERMS + 1):
        term = term * q / (k * k)
        total = total + term
    return total


def one_minus_i0e(u: Any) -> Any:
    """``g(u) = 1 - exp(-u) I0(u)`` for ``u > 0`` (a float, NumPy array or torch tensor,
    differentiable in torch), without cancellation at small ``u`` (module docstring)."""
    if isinstance(u, torch.Tensor):
        small = -torch.expm1(-u) - torch.exp(-u) * _i0_minus_one(torch.clamp(u, max=_SERIES_BELOW))
        return torch.where(u < _SERIES_BELOW, small, 1.0 - torch.special.i0e(u))
    u = np.asarray(u, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        small = -np.expm1(-u) - np.exp(-u) * _i0_minus_one(np.minimum(u, _SERIES_BELOW))
    out = np.where(u < _SERIES_BELOW, small, 1.0 - scipy.special.i0e(u))
    return float(out) if out.ndim == 0 else out


def _dg(u: float) -> float:
    """``g'(u) = exp(-u) (I0(u) - I1(u))``."""
    return float(scipy.special.i0e(u) - scipy.special.i1e(u))


def centred_periodic(a: Any, u: Any, g: Any = None) -> Any:
    """``PERC = 1 + expm1(u a) / g(u)`` from ``a = cos(w d) - 1 <= 0`` (NumPy or torch)."""
    g = one_minus_i0e(u) if g is None else g
    if isinstance(a, torch.Tensor):
        return 1.0 + torch.expm1(u * a) / g
    return 1.0 + np.expm1(u * a) / g


def _half_angles(ta: Any, tb: Any, w: Any, outer) -> tuple[Any, Any]:
    """``(sin(w d / 2), cos(w d / 2))`` for ``d = ta_i - tb_j`` as rank-2 outer products
    (exactly ``(0, 1)`` where two inputs coincide)."""
    if isinstance(ta, torch.Tensor):
        sa, ca = torch.sin(0.5 * w * ta), torch.cos(0.5 * w * ta)
        sb, cb = torch.sin(0.5 * w * tb), torch.cos(0.5 * w * tb)
    else:
        sa, ca = np.sin(0.5 * w * ta), np.cos(0.5 * w * ta)
        sb, cb = np.sin(0.5 * w * tb), np.cos(0.5 * w * tb)
    return outer(sa, cb) - outer(ca, sb), outer(ca, cb) + outer(sa, sb)


class CentredPeriodic(Kernel):
    name = "PERC"
    params = (SHAPE_LENGTHSCALE, PERIOD)  # PER's: dimensionless shape, Nyquist period
    formula = "(exp(u cos(2 pi d / p)) - I0(u)) / (exp(u) - I0(u)), u = 1 / l^2"
    description = "periodic function without its own offset"
    stationary = True
    role = PERIODIC
    qualifier = "without its own offset (it averages to zero over a period)"
    # close to PER (the same shape less a constant); as far from SE, RQ as PER is or more
    ot_costs = {"PER": 0.3, "SE": 0.7, "RQ": 0.8}
    sgpr_role = MULTIPLY

    def slow_lengthscale(self, params: dict[str, float]) -> float:
        """For ``d << p``, ``PERC ~ 1 - u w^2 d^2 / (2 g(u))``: an SE of lengthscale
        ``p l sqrt(g(u)) / (2 pi)`` (PER's ``p l / (2 pi)`` as ``u`` grows, ``p / (2 pi)``,
        the sinusoid's, as ``u -> 0``)."""
        ls = params["lengthscale"]
        g = one_minus_i0e(1.0 / ls**2)
        return params["period"] * ls * math.sqrt(g) / (2 * math.pi)

    def value(self, x1, x2, v, diag):
        d = pairwise(x1, x2, diag)
        ls, p = v["lengthscale"], v["period"]
        if diag:
            ls, p = ls[..., 0], p[..., 0]
        u = 1.0 / ls**2
        a = -2.0 * torch.sin(math.pi * d / p) ** 2
        return centred_periodic(a, u)

    # --- exact fit -------------------------------------------------------------------
    def gram(self, grid, th, grad):
        u, p = exp_or_inf(-2.0 * th[0]), exp_or_inf(th[1])
        w = 2.0 * math.pi / p
        sh, ch = _half_angles(grid.t, grid.t, w, np.multiply.outer)
        a = -2.0 * sh * sh
        g = one_minus_i0e(u)
        E = np.expm1(u * a)
        k = 1.0 + E / g
        if not grad:
            return k, []
        d_ls = (-2.0 * u / g) * (a * (1.0 + E) - E * (_dg(u) / g))
        d_p = (u / g) * (1.0 + E) * (w * grid.d) * (2.0 * sh * ch)  # sin(wd) = 2 sin cos
        return k, [(d_ls, False), (d_p, False)]

    # --- SGPR: multiplied into the term's dense part ----------------------------------
    def sgpr_value(self, ta, tb, v):
        u = 1.0 / v[0] ** 2
        sh, _ = _half_angles(ta, tb, 2.0 * math.pi / v[1], torch.outer)
        return centred_periodic(-2.0 * sh * sh, u)

    def sgpr_value_theta(self, ta, tb, th):
        u = math.exp(-2.0 * th[0])
        sh, _ = _half_angles(ta, tb, 2.0 * math.pi * math.exp(-th[1]), torch.outer)
        return centred_periodic(-2.0 * sh * sh, u, one_minus_i0e(u))

    def sgpr_gradient(self, g, pos: Sequence[int], th: Sequence[float]) -> None:
        # sum_ij W_ij alpha_i rest_ij (dk/dθ)_ij beta_j, with rest the term without PERC
        u, w = math.exp(-2.0 * th[0]), 2.0 * math.pi * math.exp(-th[1])
        gu = one_minus_i0e(u)
        sh, ch = _half_angles(g.tu, g.tf, w, torch.outer)
        a = -2.0 * sh * sh
        E = torch.expm1(u * a)
        wr = g.W * g.rest(g.factor)
        d_ls = (-2.0 * u / gu) * (a * (1.0 + E) - E * (_dg(u) / gu))
        d = g.tu[:, None] - g.tf[None, :]
        d_p = (u / gu) * (1.0 + E) * (w * d) * (2.0 * sh * ch)
        for q, m in zip(pos, (d_ls, d_p)):
            g.grad[q] += float(g.alpha @ ((wr * m) @ g.beta))
