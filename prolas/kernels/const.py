"""``C``, the constant kernel: ``k(x, x') = 1``. Its term variance is its only parameter.

In a product with other factors it drops out (the term variance already scales it); on
its own it is a term, a constant offset of the series.
"""

from __future__ import annotations

import numpy as np
import torch

from prolas.kernels.spec import CONSTANT, ONE, Kernel, pairwise

__all__ = ["Constant"]


class Constant(Kernel):
    name = "C"
    params = ()
    formula = "1"
    description = "constant"
    idempotent = True
    stationary = True
    role = CONSTANT
    ot_costs = {"SE": 0.8, "RQ": 0.8, "PER": 0.9}  # the long-lengthscale limit of each
    sgpr_role = ONE

    def value(self, x1, x2, v, diag):
        return torch.ones_like(pairwise(x1, x2, diag))

    def gram(self, grid, th, grad):
        return np.ones((grid.n, grid.n)), []
