"""GPyTorch modules for the base kernels, with exactly the formulas of docs/conventions.md.

Inputs are 1-D; ``d = x - x'``. Each kernel supports a batch of independent
hyperparameter settings (``batch_shape``), which is how :mod:`prolas.gp` runs all
random restarts of a fit as one model.

================  ==========================================  ====================
name              formula                                     shape parameters
================  ==========================================  ====================
SE                exp(-d^2 / (2 l^2))                         lengthscale l
LIN               (x - c)(x' - c)                             offset c
PER               exp(-2 sin^2(pi |d| / p) / l^2)             lengthscale l, period p
RQ                (1 + d^2 / (2 alpha l^2))^(-alpha)          lengthscale l, alpha
C                 1                                           (none)
CP_BEFORE         (1 - σ(x))(1 - σ(x'))                        location l, width w
CP_AFTER          σ(x) σ(x')                                   location l, width w
CW_OUTSIDE        (1 - u(x))(1 - u(x'))                        start, end, width w
CW_INSIDE         u(x) u(x')                                   start, end, width w
================  ==========================================  ====================

``σ(x) = 1 / (1 + exp(-(x - l) / w))``; ``u(x) = σ_start(x) (1 - σ_end(x))`` with one
shared width. The change factors are what ``CP(A, B)`` and ``CW(A, B)`` contribute to
each term of their sides (docs/conventions.md); tied parameters are simply set equal.

GPyTorch's own ``PeriodicKernel`` divides by ``l`` rather than ``l^2`` and its
``LinearKernel`` has no offset, hence these small modules. Amplitude lives in one
``ScaleKernel`` per product term (see :func:`prolas.gp.build_covar_module`).

Shapes: ``x1`` is ``batch x n x 1``, ``x2`` is ``batch x m x 1``; hyperparameters
are ``batch x 1 x 1``; the output is ``batch x n x m`` (``batch x n`` with ``diag``).
"""

from __future__ import annotations

import math

import torch
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import Kernel

__all__ = [
    "SEKernel",
    "LINKernel",
    "PERKernel",
    "RQKernel",
    "ConstantFactor",
    "ChangeFactor",
    "KERNEL_MODULES",
    "log_positive",
]


def log_positive(lower: float = 0.0) -> GreaterThan:
    """``value = lower + exp(raw)``: a log parametrisation of positive scale parameters.

    L-BFGS converges much faster in log space than through GPyTorch's default
    softplus, which is linear for large values (lengthscales, variances and periods
    all live on log scales).
    """
    return GreaterThan(lower, transform=torch.exp, inv_transform=torch.log)


def _diff(x1: torch.Tensor, x2: torch.Tensor, diag: bool) -> torch.Tensor:
    """Pairwise differences of 1-D inputs: ``batch x n x m`` (``batch x n`` if diag)."""
    if diag:
        return (x1 - x2)[..., 0]
    return x1 - x2.transpose(-1, -2)


class _BaseKernel(Kernel):
    def __init__(self, batch_shape: torch.Size = torch.Size()) -> None:
        super().__init__(batch_shape=batch_shape)

    def _param(self, name: str, constraint=None) -> None:
        """Register ``raw_<name>`` (``batch x 1 x 1``); ``constraint=None`` = unconstrained."""
        self.register_parameter(
            f"raw_{name}", torch.nn.Parameter(torch.zeros(*self.batch_shape, 1, 1))
        )
        if constraint is not None:
            self.register_constraint(f"raw_{name}", constraint)

    def _get(self, name: str) -> torch.Tensor:
        raw = getattr(self, f"raw_{name}")
        constraint = getattr(self, f"raw_{name}_constraint", None)
        return raw if constraint is None else constraint.transform(raw)

    def get_param(self, name: str) -> torch.Tensor:
        """Hyperparameter value, shape ``batch x 1 x 1``."""
        return self._get(name)

    def set_param(self, name: str, value: torch.Tensor | float) -> None:
        """Set a hyperparameter from its value (broadcast to ``batch x 1 x 1``)."""
        raw = getattr(self, f"raw_{name}")
        value = torch.as_tensor(value, dtype=raw.dtype).reshape(-1, 1, 1)
        value = value.reshape(raw.shape) if value.numel() == raw.numel() else value.expand_as(raw)
        constraint = getattr(self, f"raw_{name}_constraint", None)
        with torch.no_grad():
            raw.copy_(value if constraint is None else constraint.inverse_transform(value))


class SEKernel(_BaseKernel):
    """Squared exponential, ``exp(-d^2 / (2 l^2))``."""

    shape_params = ("lengthscale",)

    def __init__(self, batch_shape: torch.Size = torch.Size()) -> None:
        super().__init__(batch_shape)
        self._param("lengthscale", log_positive())

    def forward(self, x1, x2, diag: bool = False, **params):
        d = _diff(x1, x2, diag)
        ls = self._get("lengthscale")
        ls = ls[..., 0] if diag else ls
        return torch.exp(-0.5 * (d / ls) ** 2)


class LINKernel(_BaseKernel):
    """Linear with offset, ``(x - c)(x' - c)``. Not stationary; no variance here."""

    shape_params = ("offset",)

    def __init__(self, batch_shape: torch.Size = torch.Size()) -> None:
        super().__init__(batch_shape)
        self._param("offset")  # unconstrained real

    def forward(self, x1, x2, diag: bool = False, **params):
        c = self.raw_offset
        if diag:
            return ((x1 - c[..., 0:1, :]) * (x2 - c[..., 0:1, :]))[..., 0]
        return (x1 - c) @ (x2 - c).transpose(-1, -2)


class PERKernel(_BaseKernel):
    """Periodic, ``exp(-2 sin^2(pi |d| / p) / l^2)``; ``p >= period_floor`` (Nyquist 2Δ)."""

    shape_params = ("lengthscale", "period")

    def __init__(self, batch_shape: torch.Size = torch.Size(), period_floor: float = 0.0) -> None:
        super().__init__(batch_shape)
        self._param("lengthscale", log_positive())
        floor = float(period_floor)
        self._param("period", log_positive(floor))
        self.period_floor = floor

    def forward(self, x1, x2, diag: bool = False, **params):
        d = _diff(x1, x2, diag)
        ls, p = self._get("lengthscale"), self._get("period")
        if diag:
            ls, p = ls[..., 0], p[..., 0]
        return torch.exp(-2.0 * torch.sin(math.pi * d / p) ** 2 / ls**2)


class RQKernel(_BaseKernel):
    """Rational quadratic, ``(1 + d^2 / (2 alpha l^2))^(-alpha)``."""

    shape_params = ("lengthscale", "alpha")

    def __init__(self, batch_shape: torch.Size = torch.Size()) -> None:
        super().__init__(batch_shape)
        self._param("lengthscale", log_positive())
        self._param("alpha", log_positive())

    def forward(self, x1, x2, diag: bool = False, **params):
        d = _diff(x1, x2, diag)
        ls, a = self._get("lengthscale"), self._get("alpha")
        if diag:
            ls, a = ls[..., 0], a[..., 0]
        return torch.pow(1.0 + 0.5 * (d / ls) ** 2 / a, -a)


class ConstantFactor(_BaseKernel):
    """The constant kernel ``C``: 1 everywhere (its term variance is its only parameter)."""

    shape_params = ()

    def forward(self, x1, x2, diag: bool = False, **params):
        d = _diff(x1, x2, diag)
        return torch.ones_like(d)


class ChangeFactor(_BaseKernel):
    """A change-operator factor ``s(x) s(x')`` (rank one); ``side`` picks ``s``.

    ``CP_AFTER``: ``s = σ``; ``CP_BEFORE``: ``s = 1 - σ``, with
    ``σ(x) = 1 / (1 + exp(-(x - location) / width))``. ``CW_INSIDE``: ``s = u =
    σ_start (1 - σ_end)``; ``CW_OUTSIDE``: ``s = 1 - u``.
    """

    side = ""

    def __init__(self, batch_shape: torch.Size = torch.Size()) -> None:
        super().__init__(batch_shape)
        for name in self.shape_params:
            self._param(name, log_positive() if name == "width" else None)

    def weight(self, x: torch.Tensor) -> torch.Tensor:
        """``s(x)`` for inputs ``batch x n x 1``."""
        w = self._get("width")
        if self.side.startswith("CP"):
            z = (x - self._get("location")) / w
            return torch.sigmoid(z) if self.side == "CP_AFTER" else torch.sigmoid(-z)
        u = torch.sigmoid((x - self._get("start")) / w) * torch.sigmoid(-(x - self._get("end")) / w)
        return u if self.side == "CW_INSIDE" else 1.0 - u

    def forward(self, x1, x2, diag: bool = False, **params):
        s1, s2 = self.weight(x1), self.weight(x2)
        if diag:
            return (s1 * s2)[..., 0]
        return s1 @ s2.transpose(-1, -2)


def _change_factor(side: str, params: tuple[str, ...]) -> type[ChangeFactor]:
    return type(
        f"{side}Factor",
        (ChangeFactor,),
        {"side": side, "shape_params": params, "__doc__": f"``{side}`` change factor."},
    )


#: Base-kernel name -> GPyTorch module class (extend together with prolas.expr.BASE_KERNELS).
KERNEL_MODULES: dict[str, type[_BaseKernel]] = {
    "SE": SEKernel,
    "LIN": LINKernel,
    "PER": PERKernel,
    "RQ": RQKernel,
    "C": ConstantFactor,
    "CP_BEFORE": _change_factor("CP_BEFORE", ("location", "width")),
    "CP_AFTER": _change_factor("CP_AFTER", ("location", "width")),
    "CW_OUTSIDE": _change_factor("CW_OUTSIDE", ("start", "end", "width")),
    "CW_INSIDE": _change_factor("CW_INSIDE", ("start", "end", "width")),
}
