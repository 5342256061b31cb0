"""Arc kernel (Swersky, Duvenaud, Snoek, Hutter, Osborne, "Raiders of the Lost Architecture").

Each dimension i is embedded on a (semi-)cylinder:

.. math::

    f_i(x) = \\begin{cases} [0, 0] & \\delta_i(x) = \\text{false} \\\\
             \\omega_i [\\sin(\\pi\\rho_i \\tilde x_i), \\cos(\\pi\\rho_i \\tilde x_i)]
             & \\text{else} \\end{cases},
    \\qquad \\tilde x_i = (x_i - l_i) / (u_i - l_i) \\in [0, 1],

which gives the per-dimension Euclidean distance (closed form, paper §2.2)

* both inactive: 0;
* exactly one active: omega_i;
* both active: omega_i sqrt(2) sqrt(1 - cos(pi rho_i (x~_i - x~'_i))).

The kernel is a radial profile kappa (SE, Matérn-5/2 or RQ) of the total embedded
distance r = ||f(x) - f(x')||: it is PSD for any inputs because it is a Euclidean
kernel evaluated on embedded points (Hutter & Osborne, Prop. 2). Categorical slots
are treated as the paper treats integer parameters: the category index is an
ordinal value in ``[0, m - 1]``. (:class:`~prolas.surrogates.hierarchical.HierarchicalKernel`
embeds categoricals properly.) omega_i in [1e-3, 100] carries the lengthscale, rho_i in (0, 1].

Inputs: ``... x n x 2D`` rows of :class:`~prolas.surrogates.space.ConditionalSpace`.

>>> from prolas.grammar import Grammar
>>> from prolas.surrogates.space import ConditionalSpace
>>> space = ConditionalSpace.from_grammar(Grammar.from_file("small"))
>>> k = ArcKernel(space).double()
>>> x = space.encode([("SE", "stop"), ("SE", "+", "PER", "stop")])
>>> k(x).to_dense().shape
torch.Size([2, 2])
"""

from __future__ import annotations

import math

import torch
from gpytorch.constraints import Interval, Positive
from gpytorch.kernels import Kernel

from prolas.surrogates.space import ConditionalSpace

__all__ = ["ArcKernel", "radial_profile", "pairwise_sq_dist", "RADIAL_PROFILES"]

RADIAL_PROFILES = ("se", "matern52", "rq")


def radial_profile(sq: torch.Tensor, base: str, alpha: torch.Tensor | float = 1.0) -> torch.Tensor:
    """kappa(r) from the squared distance r^2: SE exp(-r^2/2), Matérn-5/2, RQ(alpha)."""
    if base == "se":
        return torch.exp(-0.5 * sq)
    if base == "matern52":
        r = torch.sqrt(sq.clamp_min(1e-30))
        s5 = math.sqrt(5.0) * r
        return (1.0 + s5 + 5.0 / 3.0 * sq) * torch.exp(-s5)
    if base == "rq":
        return (1.0 + sq / (2.0 * alpha)).pow(-alpha)
    raise ValueError(f"base must be one of {RADIAL_PROFILES}, got {base!r}")


def pairwise_sq_dist(e1: torch.Tensor, e2: torch.Tensor, diag: bool = False) -> torch.Tensor:
    """Exact squared Euclidean distances ``... x n x m`` (``... x n`` with diag).

    Differences are formed explicitly (no ``|a|^2 + |b|^2 - 2ab`` cancellation), so
    identical embeddings give exactly 0.
    """
    if diag:
        return ((e1 - e2) ** 2).sum(-1)
    return ((e1.unsqueeze(-2) - e2.unsqueeze(-3)) ** 2).sum(-1)


class ArcKernel(Kernel):
    """Arc kernel on a conditional space; learnable omega_i (in [1e-3, 100]) and rho_i (in (0, 1]).

    Args:
        space: the conditional space (defines D, bounds and which dims are real).
        base: radial profile on the embedded distance: ``"se"``, ``"matern52"``, ``"rq"``.
    """

    has_lengthscale = False

    def __init__(self, space: ConditionalSpace, base: str = "se", **kwargs) -> None:
        super().__init__(**kwargs)
        if base not in RADIAL_PROFILES:
            raise ValueError(f"base must be one of {RADIAL_PROFILES}, got {base!r}")
        self.space = space
        self.base = base
        d = space.dim
        self.register_parameter("raw_omega", torch.nn.Parameter(torch.zeros(d)))
        self.register_constraint("raw_omega", Interval(1e-3, 1e2))
        self.register_parameter("raw_rho", torch.nn.Parameter(torch.zeros(d)))
        self.register_constraint("raw_rho", Interval(1e-3, 1.0))
        self.register_parameter("raw_alpha", torch.nn.Parameter(torch.zeros(1)))
        self.register_constraint("raw_alpha", Positive())
        self.omega = torch.full((d,), 1.0)
        self.rho = torch.full((d,), 0.5)

    # --- constrained parameters -----------------------------------------------------------
    @property
    def omega(self) -> torch.Tensor:
        return self.raw_omega_constraint.transform(self.raw_omega)

    @omega.setter
    def omega(self, value) -> None:
        v = torch.as_tensor(value, dtype=self.raw_omega.dtype).expand_as(self.raw_omega)
        self.initialize(raw_omega=self.raw_omega_constraint.inverse_transform(v))

    @property
    def rho(self) -> torch.Tensor:
        return self.raw_rho_constraint.transform(self.raw_rho)

    @rho.setter
    def rho(self, value) -> None:
        v = torch.as_tensor(value, dtype=self.raw_rho.dtype).expand_as(self.raw_rho)
        self.initialize(raw_rho=self.raw_rho_constraint.inverse_transform(v))

    @property
    def alpha(self) -> torch.Tensor:
        return self.raw_alpha_constraint.transform(self.raw_alpha)

    # --- maths ------------------------------------------------------------------------
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Cylindrical embedding ``... x n x 2D`` (columns: sin and cos of every dim)."""
        values, delta = self.space.split(x)
        t = math.pi * self.rho * self.space.rescaled(values)
        act = delta.to(values.dtype) * self.omega
        return torch.cat([act * torch.sin(t), act * torch.cos(t)], dim=-1)

    def dim_distances(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        """Per-dimension embedded distances d_i(x, x'), ``... x n x m x D``."""
        e1, e2 = self.embed(x1), self.embed(x2)
        d = self.space.dim
        diff2 = (e1.unsqueeze(-2) - e2.unsqueeze(-3)) ** 2
        return torch.sqrt(diff2[..., :d] + diff2[..., d:])

    def forward(self, x1: torch.Tensor, x2: torch.Tensor, diag: bool = False, **params):
        sq = pairwise_sq_dist(self.embed(x1), self.embed(x2), diag=diag)
        return radial_profile(sq, self.base, self.alpha)
