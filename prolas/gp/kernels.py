"""GPyTorch modules of the registry's kernels, with exactly the formulas of docs/conventions.md.

One module class per entry of :mod:`prolas.kernels` (base kernels, ``C`` and the change
factors): its ``forward`` is the entry's natural-unit formula
(:meth:`prolas.kernels.spec.Kernel.value`) and it holds one raw parameter per shape
parameter, log-parametrised where the entry optimises on the log scale
(:func:`log_positive`; a parameter with the Nyquist floor, PER's period, is bounded
below by ``period_floor``), unconstrained otherwise (LIN's offset, change locations).
A kernel added to the registry gets its module here without code:
:data:`KERNEL_MODULES` makes it on first use.

Inputs are 1-D; ``d = x - x'``. Each module supports a batch of independent
hyperparameter settings (``batch_shape``). Amplitude lives in one ``ScaleKernel`` per
product term (see :func:`prolas.gp.build_covar_module`); the change factors' values are
tied by the fit (they are simply set equal).

GPyTorch's own ``PeriodicKernel`` divides by ``l`` rather than ``l^2`` and its
``LinearKernel`` has no offset, hence these modules.

Shapes: ``x1`` is ``batch x n x 1``, ``x2`` is ``batch x m x 1``; hyperparameters
are ``batch x 1 x 1``; the output is ``batch x n x m`` (``batch x n`` with ``diag``).
"""

from __future__ import annotations

import torch
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import Kernel

from prolas.kernels import BASE_KERNELS, TRANSITIONS, factor
from prolas.kernels import Kernel as RegistryKernel
from prolas.kernels.spec import NYQUIST_FLOOR

__all__ = [
    "KernelModule",
    "SEKernel",
    "LINKernel",
    "PERKernel",
    "RQKernel",
    "ConstantFactor",
    "ChangeFactor",
    "KERNEL_MODULES",
    "log_positive",
    "module_class",
]


def log_positive(lower: float = 0.0) -> GreaterThan:
    """``value = lower + exp(raw)``: a log parametrisation of positive scale parameters.

    L-BFGS converges much faster in log space than through GPyTorch's default
    softplus, which is linear for large values (lengthscales, variances and periods
    all live on log scales).
    """
    return GreaterThan(lower, transform=torch.exp, inv_transform=torch.log)


class KernelModule(Kernel):
    """The GPyTorch module of one registry entry (:attr:`kernel`).

    Args:
        batch_shape: independent hyperparameter settings.
        period_floor: lower bound of parameters with the Nyquist floor (PER's period).
    """

    kernel: RegistryKernel
    shape_params: tuple[str, ...] = ()

    def __init__(self, batch_shape: torch.Size = torch.Size(), period_floor: float = 0.0) -> None:
        super().__init__(batch_shape=batch_shape)
        self.period_floor = float(period_floor)
        for spec in self.kernel.params:
            lower = self.period_floor if spec.floor == NYQUIST_FLOOR else 0.0
            self._param(spec.name, log_positive(lower) if spec.log else None)

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

    def forward(self, x1, x2, diag: bool = False, **params):
        values = {name: self._get(name) for name in self.shape_params}
        return self.kernel.value(x1, x2, values, diag)


class ChangeFactor(KernelModule):
    """The module of a change-operator factor ``s(x) s(x')`` (rank one)."""

    def weight(self, x: torch.Tensor) -> torch.Tensor:
        """``s(x)`` for inputs ``batch x n x 1``."""
        return self.kernel.weight(x, {name: self._get(name) for name in self.shape_params})


def module_class(kernel: RegistryKernel) -> type[KernelModule]:
    """A new module class for a registry entry: ``SEKernel`` for ``SE``, ``CP_AFTERFactor``
    for a change factor."""
    change = kernel.name in TRANSITIONS
    base = ChangeFactor if change else KernelModule
    return type(
        f"{kernel.name}{'Factor' if change else 'Kernel'}",
        (base,),
        {
            "kernel": kernel,
            "shape_params": kernel.shape_params,
            "__doc__": f"``{kernel.name}``: ``{kernel.formula}`` ({kernel.description}).",
            "__module__": __name__,
        },
    )


class _Modules(dict):
    """Registry name -> module class; a class is made on first use of a name."""

    def __missing__(self, name: str) -> type[KernelModule]:
        try:
            entry = factor(name)
        except KeyError:
            raise KeyError(name) from None
        cls = self[name] = module_class(entry)
        return cls


#: Registry name -> GPyTorch module class (base kernels, ``C`` and the change factors).
KERNEL_MODULES: dict[str, type[KernelModule]] = _Modules(
    {name: module_class(k) for name, k in (BASE_KERNELS | TRANSITIONS).items()}
)

SEKernel = KERNEL_MODULES["SE"]
LINKernel = KERNEL_MODULES["LIN"]
PERKernel = KERNEL_MODULES["PER"]
RQKernel = KERNEL_MODULES["RQ"]
ConstantFactor = KERNEL_MODULES["C"]
