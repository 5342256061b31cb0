"""``PER``, the periodic kernel: ``k(d) = exp(-2 sin^2(pi |d| / p) / l^2)``.

Lengthscale ``l`` (dimensionless: it sets the shape within a period) and period ``p >=
2Δ`` (Nyquist). PER divides by ``l^2``, not by ``l`` as GPyTorch's ``PeriodicKernel``
does. Views (prolas.kernels.spec), with ``w = 2 pi / p`` and ``2 sin^2(pi d / p) =
1 - cos(w d)``:

* exact fit: ``cos(w d) = cos(wt) cos(wt') + sin(wt) sin(wt')`` is a rank-2 outer
  product of n-vectors (no transcendental function on the n x n grid); gradient factors
  in ``log l``: ``2 (1 - cos(w d)) / l^2``, in ``log p``: ``(w / l^2) d sin(w d)``;
* SGPR: the log-factor ``(cos(w d) - 1) / l^2`` is low rank in the inputs (rank 2 plus
  a constant), and so are its derivatives (``d sin(w d)`` has rank 4).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from prolas.kernels.spec import (
    DIMENSIONLESS,
    LENGTH,
    LOWRANK,
    NYQUIST_FLOOR,
    PERIODIC,
    Kernel,
    LowRankSineDerivative,
    ParamSpec,
    ScaledDerivative,
    Start,
    exp_or_inf,
    pairwise,
)

__all__ = ["Periodic"]

#: Not floored: it is dimensionless. At 1e6 the factor is 1 on the data within 1e-12.
SHAPE_LENGTHSCALE = ParamSpec(
    "lengthscale",
    DIMENSIONLESS,
    log=True,
    lower=1e-3,
    upper=1e6,
    start=Start("log_of_uniform", 0.5, 2.0),
    rd=1.0,
)
#: At least 2Δ (Nyquist; ``lower`` is only the numerical floor of that floor), at most
#: 100 spans (or ten floors): a longer period is a smooth kernel on the data.
PERIOD = ParamSpec(
    "period",
    LENGTH,
    log=True,
    lower=1e-12,
    upper=100.0,
    start=Start("periodogram"),
    rd=0.25,  # four cycles over the span
    floor=NYQUIST_FLOOR,
)


class Periodic(Kernel):
    name = "PER"
    params = (SHAPE_LENGTHSCALE, PERIOD)
    formula = "exp(-2 sin^2(pi |d| / p) / l^2)"
    description = "periodic function"
    stationary = True
    role = PERIODIC
    ot_costs = {"SE": 0.6, "RQ": 0.7, "LIN": 0.9, "C": 0.9}
    sgpr_role = LOWRANK

    def slow_lengthscale(self, params: dict[str, float]) -> float:
        """The lengthscale of the smooth kernel PER is when its period exceeds the data:
        for ``d << p``, ``sin(pi d / p) ~ pi d / p``, so ``k ~ exp(-d^2 / (2 (p l / 2 pi)^2))``."""
        return params["period"] * params["lengthscale"] / (2 * math.pi)

    def value(self, x1, x2, v, diag):
        d = pairwise(x1, x2, diag)
        ls, p = v["lengthscale"], v["period"]
        if diag:
            ls, p = ls[..., 0], p[..., 0]
        return torch.exp(-2.0 * torch.sin(math.pi * d / p) ** 2 / ls**2)

    def gram(self, grid, th, grad):
        ls2, p = exp_or_inf(2.0 * th[0]), exp_or_inf(th[1])
        # cos(w d) and sin(w d) as rank-2 outer products of n-vectors (w = 2 pi / p):
        # no transcendental function on the n x n grid.
        w = 2.0 * math.pi / p
        c, s = np.cos(w * grid.t), np.sin(w * grid.t)
        # 1 - c c' - s s' and exp(-(1 - cos(w d)) / l^2), in place (each n x n pass costs
        # as much as the Cholesky's share per entry; the values are those of the
        # expression written out: x / -l^2 = -x / l^2 exactly)
        one_minus_cos = np.multiply.outer(c, c)
        np.subtract(1.0, one_minus_cos, out=one_minus_cos)
        one_minus_cos -= np.multiply.outer(s, s)
        k = np.divide(one_minus_cos, -ls2)  # 2 sin^2(pi d / p) = 1 - cos(w d)
        np.exp(k, out=k)
        if not grad:
            return k, []
        # d log k / d log l = 2 (1 - cos(w d)) / l^2; d log k / d log p = (w / l^2) d sin(w d),
        # both contracted with the likelihood's weights without forming them
        dl = ScaledDerivative(2.0 / ls2, one_minus_cos)
        dp = LowRankSineDerivative(w / ls2, grid.d, c, s)
        return k, [(dl, True), (dp, True)]

    def sgpr_lowrank(self, ta, tb, v):
        inv = 1.0 / v[0] ** 2
        w = 2.0 * math.pi / v[1]
        wa, wb = w * ta, w * tb
        return [torch.cos(wa) * inv, torch.sin(wa) * inv], [torch.cos(wb), torch.sin(wb)], inv

    def sgpr_lowrank_theta(self, ta, tb, th):
        inv = math.exp(-2.0 * th[0])
        w = 2.0 * math.pi * math.exp(-th[1])
        lefts = [torch.cos(w * ta) * inv, torch.sin(w * ta) * inv]
        return lefts, [torch.cos(w * tb), torch.sin(w * tb)], inv

    def sgpr_gradient(self, g, pos, th):
        # log l: -2 K_t (cos(w d) - 1) / l^2;  log p: K_t (w / l^2) d sin(w d), with
        # cos(w d) = ca cb + sa sb and d sin(w d) = tu (sa cb - ca sb) - (sa tcb - ca tsb)
        inv = math.exp(-2.0 * th[0])
        w = 2.0 * math.pi * math.exp(-th[1])
        ca, sa = torch.cos(w * g.tu), torch.sin(w * g.tu)
        cb, sb = torch.cos(w * g.tf), torch.sin(w * g.tf)
        cols = [f"per{g.factor}.{k}" for k in ("cb", "sb", "tcb", "tsb")]
        g.cols[cols[0]], g.cols[cols[1]] = g.beta * cb, g.beta * sb
        g.cols[cols[2]], g.cols[cols[3]] = g.beta * g.tf * cb, g.beta * g.tf * sb
        a = g.alpha
        g.rows += [
            (pos[0], -2.0 * inv, a * ca, cols[0]),
            (pos[0], -2.0 * inv, a * sa, cols[1]),
            (pos[0], 2.0 * inv, a, "b"),
        ]
        wl = w * inv
        g.rows += [
            (pos[1], wl, a * g.tu * sa, cols[0]),
            (pos[1], -wl, a * g.tu * ca, cols[1]),
            (pos[1], -wl, a * sa, cols[2]),
            (pos[1], wl, a * ca, cols[3]),
        ]
