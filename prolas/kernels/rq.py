"""``RQ``, the rational quadratic: ``k(d) = (1 + d^2 / (2 alpha l^2))^(-alpha)``.

A scale mixture of SEs (alpha -> infinity is SE). Views (prolas.kernels.spec), with
``u = d^2 / (2 alpha l^2)``:

* exact fit: ``k = exp(-alpha log(1 + u))``; gradient factors in ``log l``:
  ``2 alpha u / (1 + u)``, in ``log alpha``: ``alpha (u / (1 + u) - log(1 + u))``;
* SGPR: the log-factor ``-alpha log1p(u)``; its gradient needs elementwise passes.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from prolas.kernels.se import LENGTHSCALE
from prolas.kernels.spec import (
    DIMENSIONLESS,
    MULTISCALE,
    ParamSpec,
    ScaledDerivative,
    Start,
    Stationary,
    exp_or_inf,
    pairwise,
)

__all__ = ["RationalQuadratic"]

#: At alpha = 1e8 RQ is SE within ~1e-7 on the data.
ALPHA = ParamSpec(
    "alpha",
    DIMENSIONLESS,
    log=True,
    lower=1e-3,
    upper=1e8,
    start=Start("log_uniform", 0.1, 10.0),
    rd=0.5,  # heavy multi-scale tails
)


class RationalQuadratic(Stationary):
    name = "RQ"
    params = (LENGTHSCALE, ALPHA)
    formula = "(1 + d^2 / (2 alpha l^2))^(-alpha)"
    description = "smooth function with multi-scale variation"
    role = MULTISCALE
    ot_costs = {"SE": 0.2, "PER": 0.7, "LIN": 0.9, "C": 0.8}

    def log_k(self, d2, v, xp):
        ls, a = v
        return -a * xp.log1p(d2 / (2.0 * a * ls**2))

    def dlog_k(self, d2, v, xp):
        ls, a = v
        u = d2 / (2.0 * a * ls**2)
        frac = u / (1.0 + u)
        return [2.0 * a * frac, a * (frac - xp.log1p(u))]

    def value(self, x1, x2, v, diag):
        d = pairwise(x1, x2, diag)
        ls, a = v["lengthscale"], v["alpha"]
        if diag:
            ls, a = ls[..., 0], a[..., 0]
        # exp(-alpha log1p(u)), not (1 + u)^(-alpha): near alpha's upper bound (where RQ
        # reproduces an SE) 1 + u rounds away most of u, and the power multiplies that
        # error by alpha (~1e-8 relative in k at alpha = 1e8: an indefinite K once a large
        # variance scales it)
        return torch.exp(-a * torch.log1p(0.5 * (d / ls) ** 2 / a))

    def gram(self, grid, th, grad):
        ls2, a = exp_or_inf(2.0 * th[0]), exp_or_inf(th[1])
        u = grid.d2 / (2.0 * a * ls2)
        log1pu = np.log1p(u)
        k = np.multiply(log1pu, -a)
        np.exp(k, out=k)
        if not grad:
            return k, []
        frac = u + 1.0
        np.divide(u, frac, out=frac)  # u / (1 + u)
        # d/d log alpha: alpha (frac - log(1 + u)), in log1pu's memory
        np.subtract(frac, log1pu, out=log1pu)
        log1pu *= a
        return k, [(ScaledDerivative(2.0 * a, frac), True), (log1pu, True)]

    def sgpr_log(self, d2, v):
        ls2, a = v[0] ** 2, v[1]
        e = torch.log1p(d2 * (0.5 / (a * ls2)))
        return e.mul_(-a) if not e.requires_grad else e * (-a)

    def sgpr_log_into(self, d2, th, scratch):
        inv = math.exp(-2.0 * th[0])
        a = math.exp(th[1])
        g = torch.mul(d2, 0.5 * inv / a, out=scratch("tmp1"))
        g.log1p_()
        return g, -a

    def sgpr_gradient(self, g, pos, th):
        a = math.exp(th[1])
        inv = math.exp(-2.0 * th[0])
        u = torch.mul(g.d2(), 0.5 * inv / a, out=g.scratch("tmp1"))
        frac = torch.add(u, 1.0, out=g.scratch("tmp2"))
        torch.div(u, frac, out=frac)
        u.log1p_()
        frac.sub_(u).mul_(g.Ws)  # Ws (u/(1+u) - log(1+u))
        u.mul_(g.Ws)  # Ws log(1+u)
        wl = u @ g.beta
        wd = frac @ g.beta
        g.grad[pos[0]] += 2.0 * a * float(g.alpha @ (wd + wl))
        g.grad[pos[1]] += a * float(g.alpha @ wd)
