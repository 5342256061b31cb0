"""Conditional kernel (Lévesque, Durand, Gagné, Sabourin, eq. 8) and its blockwise solve.

.. math::

    k_C(x, x') = \\begin{cases} k(x, x') & \\text{if } x, x' \\text{ are in the same branch} \\\\
                 0 & \\text{otherwise} \\end{cases}

A *branch* is fixed by the active conditions (:meth:`ConditionalSpace.group_ids`):
by default two sequences share a branch iff the same slots are active (same number
of operations: the conditions activate the same children); ``branches="values"``
reads eq. 8 literally (equal values of every active operation slot). The wrapped
kernel k is Matérn-5/2 with ARD on the one-hot/rescaled representation, inactive
dimensions imputed to 0 (irrelevant inside a branch, where the same dims are active).

k_C is PSD: after sorting by branch the Gram matrix is block diagonal with PSD
blocks (eq. 9). Hence (K + s2 I)^{-1} is block diagonal too (eq. 10) and
:func:`blockwise_solve` solves (K + s2 I) a = y with one Cholesky per branch,
O(sum_g m_g^3) instead of O(n^3).

Inputs: ``... x n x 2D`` rows of :class:`~prolas.surrogates.space.ConditionalSpace`.
"""

from __future__ import annotations

import torch
from gpytorch.constraints import Interval
from gpytorch.kernels import Kernel, MaternKernel

from prolas.surrogates.space import ConditionalSpace

__all__ = ["ConditionalKernel", "blockwise_solve", "dense_solve"]


class ConditionalKernel(Kernel):
    """k_C(x, x') = k(x, x') 1[branch(x) = branch(x')], k = Matérn-5/2 ARD by default.

    Args:
        space: the conditional space.
        base: the wrapped kernel on the ``... x n x E`` one-hot representation
            (default ``MaternKernel(nu=2.5, ard_num_dims=E)``, lengthscales in [0.01, 100]).
        branches: ``"activity"`` or ``"values"`` (see module docstring).
    """

    def __init__(
        self,
        space: ConditionalSpace,
        base: Kernel | None = None,
        branches: str = "activity",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if branches not in ("activity", "values"):
            raise ValueError(f"branches must be 'activity' or 'values', got {branches!r}")
        self.space = space
        self.branches = branches
        width = space.one_hot(torch.zeros(1, space.width, dtype=torch.float64)).shape[-1]
        if base is None:
            base = MaternKernel(
                nu=2.5, ard_num_dims=width, lengthscale_constraint=Interval(1e-2, 1e2)
            )
            base.lengthscale = 1.0
        self.base_kernel = base

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.space.one_hot(x, inactive=0.0)

    def groups(self, x: torch.Tensor) -> torch.Tensor:
        return self.space.group_ids(x, self.branches)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor, diag: bool = False, **params):
        k = self.base_kernel.forward(self.features(x1), self.features(x2), diag=diag)
        g1, g2 = self.groups(x1), self.groups(x2)
        same = (g1 == g2) if diag else (g1.unsqueeze(-1) == g2.unsqueeze(-2))
        return k * same.to(k.dtype)


def dense_solve(
    kernel: Kernel, x: torch.Tensor, y: torch.Tensor, noise: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(a, log|K + s2 I|)`` with a = (K + s2 I)^{-1} y from one dense Cholesky.

    ``x``: ``n x 2D``; ``y``: ``n`` or ``n x t``.
    """
    with torch.no_grad():
        k = kernel.forward(x, x) + noise * torch.eye(x.shape[0], dtype=x.dtype)
        chol = torch.linalg.cholesky(k)
        rhs = y.unsqueeze(-1) if y.dim() == 1 else y
        a = torch.cholesky_solve(rhs, chol)
        logdet = 2.0 * torch.log(torch.diagonal(chol)).sum()
    return (a.squeeze(-1) if y.dim() == 1 else a), logdet


def blockwise_solve(
    kernel: ConditionalKernel, x: torch.Tensor, y: torch.Tensor, noise: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same ``(a, log|K + s2 I|)`` with one Cholesky per branch (eq. 10).

    Only the diagonal blocks of K are ever formed: entries across branches are 0.
    """
    with torch.no_grad():
        feats = kernel.features(x)
        groups = kernel.groups(x)
        rhs = y.unsqueeze(-1) if y.dim() == 1 else y
        out = torch.empty_like(rhs)
        logdet = torch.zeros((), dtype=x.dtype)
        for g in torch.unique(groups):
            idx = torch.nonzero(groups == g).squeeze(-1)
            f = feats[idx]
            kg = kernel.base_kernel.forward(f, f) + noise * torch.eye(len(idx), dtype=x.dtype)
            chol = torch.linalg.cholesky(kg)
            out[idx] = torch.cholesky_solve(rhs[idx], chol)
            logdet = logdet + 2.0 * torch.log(torch.diagonal(chol)).sum()
    return (out.squeeze(-1) if y.dim() == 1 else out), logdet
