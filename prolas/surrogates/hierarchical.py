"""Hierarchical kernel (Hutter & Osborne, "A Kernel for Hierarchical Parameter Spaces").

Every dimension i gets a pseudometric d_i that is the Euclidean distance of an
embedding f_i (so kappa(d_i) is PSD, Props. 2-4), with weight

.. math::  \\omega_i = \\prod_{j \\in anc_i \\cup \\{i\\}} \\gamma_j, \\qquad \\gamma_j \\in [0, 1]

(differences deeper in the hierarchy count less than differences in ancestors).

* Real dimension (Prop. 3): f_i = 0 if inactive, else
  omega_i [sin(pi rho_i x~_i), cos(pi rho_i x~_i)]; the distance is 0 (both inactive),
  omega_i (one active), omega_i sqrt(2) sqrt(1 - cos(pi rho_i (x~_i - x~'_i))) (both active).
* Categorical dimension with m choices (Prop. 4): f_i = 0 if inactive, else
  omega_i (e_j + (1 - rho_i) sum_{l != j} e_l) for value j. The distance is 0 (both
  inactive), omega_i sqrt(1 + (m - 1)(1 - rho_i)^2) (one active) and
  omega_i rho_i sqrt(2) 1[x_i != x'_i] (both active). At rho_i = 1 these are the
  paper's closed forms omega_i, omega_i sqrt(2) 1[x_i != x'_i].

The kernel combines k_i = kappa(d_i / l) over dimensions by a product (default) or a
mean; both preserve PSD-ness. kappa is SE, Matérn-5/2 or RQ; l > 0 is learnable.

Inputs: ``... x n x 2D`` rows of :class:`~prolas.surrogates.space.ConditionalSpace`.
"""

from __future__ import annotations

import math

import torch
from gpytorch.constraints import Interval, Positive
from gpytorch.kernels import Kernel

from prolas.surrogates.arc import RADIAL_PROFILES, radial_profile
from prolas.surrogates.space import ConditionalSpace

__all__ = ["HierarchicalKernel"]


class HierarchicalKernel(Kernel):
    """Hierarchical kernel; learnable gamma_j in [0, 1], rho_i in (0, 1], lengthscale l.

    Args:
        space: the conditional space.
        combine: ``"product"`` (eq. 3) or ``"sum"`` (eq. 2, divided by D).
        base: radial profile kappa: ``"se"``, ``"matern52"`` or ``"rq"``.
    """

    has_lengthscale = True

    def __init__(
        self, space: ConditionalSpace, combine: str = "product", base: str = "se", **kwargs
    ) -> None:
        kwargs.setdefault("lengthscale_constraint", Interval(1e-2, 1e2))
        super().__init__(**kwargs)
        if combine not in ("product", "sum"):
            raise ValueError(f"combine must be 'product' or 'sum', got {combine!r}")
        if base not in RADIAL_PROFILES:
            raise ValueError(f"base must be one of {RADIAL_PROFILES}, got {base!r}")
        self.space = space
        self.combine = combine
        self.base = base
        d = space.dim
        self.register_buffer("ancestors", space.ancestor_matrix())
        self.register_parameter("raw_gamma", torch.nn.Parameter(torch.zeros(d)))
        self.register_constraint("raw_gamma", Interval(1e-4, 1.0))
        self.register_parameter("raw_rho", torch.nn.Parameter(torch.zeros(d)))
        self.register_constraint("raw_rho", Interval(1e-3, 1.0))
        self.register_parameter("raw_alpha", torch.nn.Parameter(torch.zeros(1)))
        self.register_constraint("raw_alpha", Positive())
        self.gamma = torch.full((d,), 0.9)
        self.rho = torch.full((d,), 0.5)
        self.lengthscale = 0.5
        # column layout of the concatenated embedding: (start, width) per dimension
        spans, start = [], 0
        for s in space.slots:
            w = s.n_choices if s.kind == "categorical" else 2
            spans.append((start, w))
            start += w
        self.spans = spans
        self.embed_width = start
        seg = torch.zeros(start, d, dtype=torch.float64)
        for i, (a, w) in enumerate(spans):
            seg[a : a + w, i] = 1.0
        self.register_buffer("segments", seg)
        # per embedding column: its dimension, kind (0 categorical, 1 sin, 2 cos), and
        # for categorical columns the category it stands for
        col_dim, col_kind, col_value = [], [], []
        for i, (s, (_, w)) in enumerate(zip(space.slots, spans)):
            col_dim += [i] * w
            if s.kind == "categorical":
                col_kind += [0] * w
                col_value += list(range(w))
            else:
                col_kind += [1, 2]
                col_value += [-1, -1]
        self.register_buffer("col_dim", torch.tensor(col_dim, dtype=torch.long))
        self.register_buffer("col_kind", torch.tensor(col_kind, dtype=torch.long))
        self.register_buffer("col_value", torch.tensor(col_value, dtype=torch.float64))

    # --- constrained parameters -----------------------------------------------------------
    def _set(self, name: str, value) -> None:
        raw = getattr(self, f"raw_{name}")
        c = getattr(self, f"raw_{name}_constraint")
        v = torch.as_tensor(value, dtype=raw.dtype).expand_as(raw)
        self.initialize(**{f"raw_{name}": c.inverse_transform(v)})

    @property
    def gamma(self) -> torch.Tensor:
        return self.raw_gamma_constraint.transform(self.raw_gamma)

    @gamma.setter
    def gamma(self, value) -> None:
        self._set("gamma", value)

    @property
    def rho(self) -> torch.Tensor:
        return self.raw_rho_constraint.transform(self.raw_rho)

    @rho.setter
    def rho(self, value) -> None:
        self._set("rho", value)

    @property
    def alpha(self) -> torch.Tensor:
        return self.raw_alpha_constraint.transform(self.raw_alpha)

    @property
    def omega(self) -> torch.Tensor:
        """omega_i = prod_{j in anc_i + {i}} gamma_j, shape ``D``."""
        return torch.exp(self.ancestors.to(self.raw_gamma.dtype) @ torch.log(self.gamma))

    # --- maths ------------------------------------------------------------------------
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Concatenated embeddings f_i(x), ``... x n x E`` (E = sum of widths)."""
        values, delta = self.space.split(x)
        scaled = self.space.rescaled(values)
        cd = self.col_dim
        rho = self.rho[cd]  # E
        act = (delta.to(values.dtype) * self.omega)[..., cd]  # ... x n x E
        oh = (values.round()[..., cd] == self.col_value.to(values.dtype)).to(values.dtype)
        t = math.pi * rho * scaled[..., cd]
        emb = torch.where(
            self.col_kind == 0,
            oh + (1.0 - rho) * (1.0 - oh),
            torch.where(self.col_kind == 1, torch.sin(t), torch.cos(t)),
        )
        return act * emb

    def dim_sq_distances(
        self, x1: torch.Tensor, x2: torch.Tensor, diag: bool = False
    ) -> torch.Tensor:
        """d_i(x, x')^2 per dimension: ``... x n x m x D`` (``... x n x D`` with diag)."""
        e1, e2 = self.embed(x1), self.embed(x2)
        if diag:
            diff2 = (e1 - e2) ** 2
        else:
            diff2 = (e1.unsqueeze(-2) - e2.unsqueeze(-3)) ** 2
        return diff2 @ self.segments.to(diff2.dtype)

    def dim_distances(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(self.dim_sq_distances(x1, x2))

    def forward(self, x1: torch.Tensor, x2: torch.Tensor, diag: bool = False, **params):
        sq = self.dim_sq_distances(x1, x2, diag=diag) / self.lengthscale.squeeze() ** 2
        if self.combine == "product" and self.base == "se":
            return torch.exp(-0.5 * sq.sum(-1))  # = prod_i exp(-d_i^2 / 2l^2)
        k = radial_profile(sq, self.base, self.alpha)
        return k.prod(-1) if self.combine == "product" else k.mean(-1)
