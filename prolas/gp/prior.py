"""Weak log-normal priors on a fit's hyperparameters in scaled units, to steer its screen.

A cold fit (:func:`prolas.gp.fit_gp`) ends in one of several optima of similar height,
and which one depends on its random starts (``benchmarks/results/cold_fit/``). AutoGP.jl
and Corani et al. (2021, "Time series forecasting with Gaussian processes needs priors")
put weak log-normal priors on hyperparameters of rescaled data, and report that the fit
then lands in the same basin far more often. prolas's fit works on exactly such data
(inputs ``t = (x - x0) / span`` in ``[0, 1]``, ``y`` standardised), so a prior there is
the same for every series.

The prior only chooses *where the fit looks*: with ``FitConfig.prior > 0`` the presampled
starts are ranked, and the screen's iterations run and rank, by the log posterior

    log p(y | theta) + sum_j log N(theta_j | mu_j, (w sigma_j)^2)

over the log-scale parameters of :data:`PRIOR` (``w`` = ``FitConfig.prior``); the polish
and the hops maximise the likelihood alone, so a fit's log-likelihood, its BIC and
its parameters mean what docs/conventions.md says. Parameters without an entry
(periods, which the periodogram's candidates already place; positions, offsets and
widths, which the data's break points place) have a flat prior.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from prolas.gp.gram import GramModel, ParamInfo

__all__ = ["PRIOR", "LogNormalPrior", "PenalisedModel"]

#: ``(kernel, parameter) -> (mu, sigma)`` of the parameter's log in scaled units, before
#: the width ``w``. Chosen before any measurement, from what the scaled units mean:
#: a term's variance around the data's (1), ``e^{+-5}`` within two sigma (a LIN*LIN
#: term needs ~10 on [0, 1]); the noise around 5 % of the variance; an SE or RQ
#: lengthscale around a fifth of the span, 0.004-11 within two sigma; a periodic shape
#: lengthscale around 1 (a smooth cycle; a small one is a spiky cycle); RQ's alpha around 1.
PRIOR: dict[tuple[str, str], tuple[float, float]] = {
    ("variance", "variance"): (0.0, 2.5),
    ("noise", "noise"): (math.log(0.05), 2.5),
    ("SE", "lengthscale"): (math.log(0.2), 2.0),
    ("RQ", "lengthscale"): (math.log(0.2), 2.0),
    ("RQ", "alpha"): (0.0, 2.0),
    ("PER", "lengthscale"): (0.0, 1.5),
    ("PERC", "lengthscale"): (0.0, 1.5),
}


class LogNormalPrior:
    """The prior of one parameter layout: ``log p(theta)`` (up to a constant) and its
    gradient, a vector of the layout's length ``P``.

    Args:
        params: the layout (:func:`prolas.gp.gram.parameter_layout`).
        width: ``w``, multiplies every ``sigma`` (larger is weaker); must be > 0.
    """

    def __init__(self, params: Sequence[ParamInfo], width: float) -> None:
        if not (math.isfinite(width) and width > 0):
            raise ValueError(f"a prior's width must be a finite number > 0, got {width!r}")
        entries = [
            (k, *PRIOR[(p.kernel, p.name)])
            for k, p in enumerate(params)
            if p.log and (p.kernel, p.name) in PRIOR
        ]
        self.index = np.array([k for k, _, _ in entries], dtype=np.int64)
        self.mu = np.array([m for _, m, _ in entries], dtype=np.float64)
        self.sigma = width * np.array([s for _, _, s in entries], dtype=np.float64)
        self.size = len(params)

    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """``(log p(theta), d log p / d theta)`` without the normalising constant."""
        z = (theta[self.index] - self.mu) / self.sigma
        grad = np.zeros(self.size)
        grad[self.index] = -z / self.sigma
        return -0.5 * float(z @ z), grad


class PenalisedModel:
    """A :class:`prolas.gp.gram.GramModel` whose ``log_likelihood`` is the log posterior
    under a :class:`LogNormalPrior` (what the screen ranks; module docstring). Everything
    else is the model's, so :func:`prolas.gp.minimise.minimise` runs on it unchanged."""

    def __init__(self, model: GramModel, width: float) -> None:
        self.model = model
        self.width = float(width)
        self.prior = LogNormalPrior(model.params, self.width)

    def __getattr__(self, name: str):  # n, t, params, bounds, optimiser_bounds, expr ...
        if name == "model":  # not set yet (a copy): no recursion
            raise AttributeError(name)
        return getattr(self.model, name)

    def log_likelihood(
        self, theta: np.ndarray, y: np.ndarray, grad: bool = True
    ) -> tuple[float, np.ndarray | None]:
        ll, g = self.model.log_likelihood(theta, y, grad)
        if not math.isfinite(ll):
            return ll, g
        lp, gp = self.prior(np.asarray(theta, dtype=np.float64))
        return ll + lp, (None if g is None else g + gp)
