"""``WN``, white noise: ``k(x, x') = 1 if x = x' else 0``. Its term variance is its only
parameter.

A Kronecker delta on the input *values* (docs/conventions.md): two observations at the
same x are fully correlated by it, like the observation noise. Every stationary factor is
1 at ``d = 0``, so a product of ``WN`` with stationary factors is ``WN``
(``SE*WN = PER*WN = C*WN = WN``); ``LIN*WN`` keeps its LIN factor, noise of variance
``v (x - c)^2``; under a change operator ``WN`` is weighted like any kernel
(``CP(WN, C)``: noise before the change-point). A term that is ``WN`` alone is the
observation noise every model has, so the canonical form (:mod:`prolas.expr`) drops it.

A term with a ``WN`` factor is noise, not signal (role ``"noise"``): predictions of the
latent function leave it out and add its variance to the noise
(:func:`prolas.gp.predict`).

Views (prolas.kernels.spec): the equality indicator of the inputs, in every back end. No
SGPR view: inducing points cannot carry a covariance that is nonzero only where two
inputs coincide, so the SGPR refit refuses a model with ``WN`` (``sgpr_role`` ``"noise"``).
"""

from __future__ import annotations

import numpy as np

from prolas.kernels.spec import NOISE, SGPR_NOISE, Kernel, pairwise

__all__ = ["WhiteNoise"]


class WhiteNoise(Kernel):
    name = "WN"
    params = ()
    formula = "1 if x = x' else 0"
    description = "white noise"
    idempotent = True  # WN*WN is WN
    stationary = True  # a function of d = x - x' alone (the delta at d = 0)
    role = NOISE
    sgpr_role = SGPR_NOISE

    def value(self, x1, x2, v, diag):
        d = pairwise(x1, x2, diag)
        return (d == 0).to(d.dtype)

    def gram(self, grid, th, grad):
        return (grid.d == 0).astype(np.float64), []
