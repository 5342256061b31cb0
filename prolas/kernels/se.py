"""``SE``, the squared exponential: ``k(d) = exp(-d^2 / (2 l^2))``, lengthscale ``l``.

Views (prolas.kernels.spec): on squared distances ``d2`` and with ``r = d2 / l^2``,

* exact fit: ``k = exp(-r / 2)``, gradient factor in ``log l``: ``M = r``;
* SGPR: the log-factor ``-d2 / (2 l^2)``; its derivative in ``log l`` is ``K_t d2 / l^2``
  and ``d2 = tu^2 - 2 tu tf + tf^2`` has rank 3, so the gradient is three thin rows.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from prolas.kernels.spec import (
    LENGTH,
    LENGTHSCALE_FLOOR,
    SMOOTH,
    ParamSpec,
    Start,
    Stationary,
    exp_or_inf,
    pairwise,
)

__all__ = ["SquaredExponential", "LENGTHSCALE"]

#: A lengthscale of SE and RQ: at least K·Δ (``--lengthscale-floor``) and 1e-4 spans; at
#: 1e6 spans the factor is 1 on the data within 1e-12 (it reaches the sub-model without it).
LENGTHSCALE = ParamSpec(
    "lengthscale",
    LENGTH,
    log=True,
    lower=1e-4,
    upper=1e6,
    start=Start("lengthscale", high=1.0),
    rd=0.1,  # a smooth function varying ~10 times over the span
    floor=LENGTHSCALE_FLOOR,
)


class SquaredExponential(Stationary):
    name = "SE"
    params = (LENGTHSCALE,)
    formula = "exp(-d^2 / (2 l^2))"
    description = "smooth function"
    idempotent = True  # SE*SE is an SE with a combined lengthscale
    role = SMOOTH
    ot_costs = {"RQ": 0.2, "PER": 0.6, "LIN": 0.9, "C": 0.8}

    def log_k(self, d2, v, xp):
        return -0.5 * d2 / v[0] ** 2

    def dlog_k(self, d2, v, xp):
        return [d2 / v[0] ** 2]

    def value(self, x1, x2, v, diag):
        d = pairwise(x1, x2, diag)
        ls = v["lengthscale"]
        ls = ls[..., 0] if diag else ls
        return torch.exp(-0.5 * (d / ls) ** 2)

    def gram(self, grid, th, grad):
        ls2 = exp_or_inf(2.0 * th[0])
        r = grid.d2 / ls2
        k = np.multiply(r, -0.5)
        np.exp(k, out=k)
        return k, ([(r, True)] if grad else [])

    def sgpr_log(self, d2, v):
        ls2 = v[0] ** 2
        return d2 * (-0.5 / ls2)

    def sgpr_log_into(self, d2, th, scratch):
        return None, -0.5 * math.exp(-2.0 * th[0])

    def sgpr_gradient(self, g, pos, th):
        inv = math.exp(-2.0 * th[0])
        # d2 = tu^2 - 2 tu tf + tf^2: three thin rows
        t1, t2 = f"se{g.factor}.t", f"se{g.factor}.t2"
        g.cols[t1], g.cols[t2] = g.beta * g.tf, g.beta * g.tf * g.tf
        g.rows += [
            (pos[0], inv, g.alpha * g.tu * g.tu, "b"),
            (pos[0], -2.0 * inv, g.alpha * g.tu, t1),
            (pos[0], inv, g.alpha, t2),
        ]
