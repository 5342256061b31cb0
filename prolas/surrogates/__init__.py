"""GP surrogates directly on kernel expressions (structural Bayesian optimisation).

Every kernel here is a ``gpytorch.kernels.Kernel`` with learnable, constrained
hyperparameters, usable in an ``ExactGP`` (float64):

* :class:`ArcKernel` — cylindrical embedding (Swersky et al.);
* :class:`HierarchicalKernel` — real and categorical embeddings, omega = prod gamma
  (Hutter & Osborne);
* :class:`ConditionalKernel` — zero across branches, blockwise solve (Lévesque et al.);
* :class:`LaplaceKernel` — exp(-L1 / l) with imputation (Lévesque et al.);
* :class:`OTKernel` — alpha e^{-beta d} + alpha_bar e^{-beta_bar d_bar} on an
  OTMANN-style optimal-transport distance between expression graphs.

The first four read rows of a :class:`ConditionalSpace`; the OT kernel reads
indices into an :class:`ExpressionRegistry`.
"""

from prolas.surrogates.arc import ArcKernel
from prolas.surrogates.conditional import ConditionalKernel, blockwise_solve, dense_solve
from prolas.surrogates.hierarchical import HierarchicalKernel
from prolas.surrogates.laplace import LaplaceKernel
from prolas.surrogates.model import (
    SURROGATES,
    FittedSurrogate,
    StructuralSurrogate,
    dense_numerics,
    fit_surrogate,
    log_ei,
)
from prolas.surrogates.ot import (
    ExpressionRegistry,
    OTConfig,
    OTKernel,
    expression_graph,
    gram_min_eigenvalue,
    otmann_distance,
)
from prolas.surrogates.space import ConditionalSpace, Slot

__all__ = [
    "ArcKernel",
    "ConditionalKernel",
    "ConditionalSpace",
    "ExpressionRegistry",
    "FittedSurrogate",
    "HierarchicalKernel",
    "LaplaceKernel",
    "OTConfig",
    "OTKernel",
    "SURROGATES",
    "Slot",
    "StructuralSurrogate",
    "blockwise_solve",
    "dense_solve",
    "expression_graph",
    "dense_numerics",
    "fit_surrogate",
    "gram_min_eigenvalue",
    "log_ei",
    "otmann_distance",
]
