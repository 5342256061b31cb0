"""Laplace kernel with imputation (Lévesque, Durand, Gagné, Sabourin, eq. 11, with ARD).

.. math::  k(x, x') = \\exp\\Big(-\\sum_i |x_i - x'_i| / \\ell_i\\Big)

on a representation where inactive values are imputed to a default: a categorical
slot's distance is 1[v_i != v'_i] with "inactive" imputed to its own sentinel value
(so an inactive slot differs from every active value and equals another inactive
slot); a real dimension's distance is |x~_i - x~'_i| on the [0, 1] rescaling with
inactive values imputed to ``default`` (0.5, the middle of the range, as in the paper).

PSD: each factor exp(-|x_i - x'_i| / l_i) is PSD on the reals (Laplace) and
exp(-a 1[u != v]) = e^{-a} + (1 - e^{-a}) 1[u = v] is PSD on a finite set; products of
PSD kernels are PSD.

Inputs: ``... x n x 2D`` rows of :class:`~prolas.surrogates.space.ConditionalSpace`.
"""

from __future__ import annotations

import torch
from gpytorch.constraints import Interval
from gpytorch.kernels import Kernel

from prolas.surrogates.space import ConditionalSpace

__all__ = ["LaplaceKernel"]


class LaplaceKernel(Kernel):
    """exp(-sum_i d_i / l_i) with ARD lengthscales l_i in [0.01, 100] (one per dimension)."""

    def __init__(self, space: ConditionalSpace, default: float = 0.5, **kwargs) -> None:
        super().__init__(**kwargs)
        # own ARD lengthscales (shape D): gpytorch's ard_num_dims check would compare D
        # with the 2D input columns
        self.register_parameter("raw_lengthscale", torch.nn.Parameter(torch.zeros(space.dim)))
        self.register_constraint("raw_lengthscale", Interval(1e-2, 1e2))
        self.space = space
        self.default = float(default)
        self.register_buffer(
            "is_cat",
            torch.tensor([s.kind == "categorical" for s in space.slots], dtype=torch.bool),
        )
        self.lengthscale = 2.0

    def imputed(self, x: torch.Tensor) -> torch.Tensor:
        """``... x n x D``: categorical index (-1 if inactive), reals rescaled (``default``)."""
        values, delta = self.space.split(x)
        scaled = self.space.rescaled(values)
        cat = torch.where(delta, values.round(), torch.full_like(values, -1.0))
        real = torch.where(delta, scaled, torch.full_like(values, self.default))
        return torch.where(self.is_cat, cat, real)

    def dim_distances(self, x1: torch.Tensor, x2: torch.Tensor, diag: bool = False):
        """d_i per dimension: ``... x n x m x D`` (``... x n x D`` with diag)."""
        a, b = self.imputed(x1), self.imputed(x2)
        diff = (a - b) if diag else (a.unsqueeze(-2) - b.unsqueeze(-3))
        return torch.where(self.is_cat, (diff != 0).to(diff.dtype), diff.abs())

    def forward(self, x1: torch.Tensor, x2: torch.Tensor, diag: bool = False, **params):
        d = self.dim_distances(x1, x2, diag=diag)
        return torch.exp(-(d / self.lengthscale).sum(-1))

    @property
    def lengthscale(self) -> torch.Tensor:
        return self.raw_lengthscale_constraint.transform(self.raw_lengthscale)

    @lengthscale.setter
    def lengthscale(self, value) -> None:
        v = torch.as_tensor(value, dtype=self.raw_lengthscale.dtype).expand_as(self.raw_lengthscale)
        self.initialize(raw_lengthscale=self.raw_lengthscale_constraint.inverse_transform(v))
