"""``LIN``, the linear kernel with an offset: ``k(x, x') = (x - c)(x' - c)``.

Not stationary, and in x's units: ``(x - c)(x' - c) = span^2 (t - c_t)(t' - c_t)``, so a
term's variance is divided by ``span^2`` for each LIN factor (:attr:`variance_power`).
GPyTorch's ``LinearKernel`` has no offset, hence a module of prolas's own.

Views (prolas.kernels.spec): a rank-one factor ``s(t) s(t')`` with ``s = t - c``. Its
derivative ``-(t + t' - 2c)`` is not proportional to ``k`` (which vanishes at ``t = c``),
so the exact fit multiplies it by the term's other factors instead of dividing; SGPR
folds ``s`` into the term's diagonal scalings (``ds/dc = -1``).
"""

from __future__ import annotations

import numpy as np

from prolas.kernels.spec import POSITION, TREND, VECTOR, Kernel, ParamSpec, Start

__all__ = ["Linear"]

#: Inside the data's range or near it; (-10, 11) spans keeps every kernel value finite.
OFFSET = ParamSpec(
    "offset",
    POSITION,
    log=False,
    lower=-10.0,
    upper=11.0,
    start=Start("uniform", 0.0, 1.0),
    rd=0.0,  # a trend through the first point
)


class Linear(Kernel):
    name = "LIN"
    params = (OFFSET,)
    formula = "(x - c)(x' - c)"
    description = "linear function"
    role = TREND
    variance_power = 2
    ot_costs = {"SE": 0.9, "RQ": 0.9, "PER": 0.9}
    sgpr_role = VECTOR
    vector_slopes = (-1.0,)

    def value(self, x1, x2, v, diag):
        c = v["offset"]
        if diag:
            return ((x1 - c[..., 0:1, :]) * (x2 - c[..., 0:1, :]))[..., 0]
        return (x1 - c) @ (x2 - c).transpose(-1, -2)

    def gram(self, grid, th, grad):
        c = th[0]
        tc = grid.t - c
        k = np.multiply.outer(tc, tc)
        # -(t + t' - 2c), as 2c - (t + t') (the same numbers, one pass fewer)
        return k, ([(np.subtract(2.0 * c, grid.sum), False)] if grad else [])

    def vector(self, t, v):
        return t - v[0]
