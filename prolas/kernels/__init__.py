"""The kernel registry: one home per kernel (docs/adding-a-kernel.md).

Every kernel prolas knows is one entry here, declared in one module: its formula, its
shape parameters (units, log scale, box, data floor, starting heuristic, r_d value),
the views of its formula that the back ends compute with (the exact NumPy fit, the
GPyTorch modules, SGPR, the r_d encoding), its role in the report's sentences and its
label costs in the OT distance (:mod:`prolas.kernels.spec`). The back ends loop over
the registry; none of them names a kernel.

* :data:`BASE_KERNELS`: ``LIN`` (:mod:`.lin`), ``PER`` (:mod:`.per`), ``RQ``
  (:mod:`.rq`), ``SE`` (:mod:`.se`), ``C`` (:mod:`.const`), the white noise ``WN``
  (:mod:`.wn`) and the centred periodic ``PERC`` (:mod:`.perc`).
* :data:`OPERATORS` and :data:`TRANSITIONS`: the change operators ``CP`` and ``CW`` and
  their transition factors (:mod:`.transitions`).
* :func:`factor`: the entry of any factor kind of an expanded term;
  :func:`is_noise_term`: whether an expanded term is noise (has a ``WN`` factor).

The registry sits with the expressions, below the encoding and the GP layer, which
both read it; it imports nothing of prolas but itself.
"""

from __future__ import annotations

from prolas.kernels.const import Constant
from prolas.kernels.lin import Linear
from prolas.kernels.per import Periodic
from prolas.kernels.perc import CentredPeriodic
from prolas.kernels.rq import RationalQuadratic
from prolas.kernels.se import SquaredExponential
from prolas.kernels.spec import NOISE, Kernel, ParamSpec
from prolas.kernels.transitions import OPERATORS, TRANSITIONS, ChangeOperator, Transition
from prolas.kernels.wn import WhiteNoise

__all__ = [
    "BASE_KERNELS",
    "CHANGE_FACTORS",
    "CHANGE_OPERATORS",
    "OPERATORS",
    "TRANSITIONS",
    "ChangeOperator",
    "Kernel",
    "ParamSpec",
    "Transition",
    "factor",
    "is_noise_term",
    "kernel_costs",
]

#: The base kernels by name. Adding a kernel to prolas is one module and one entry here.
BASE_KERNELS: dict[str, Kernel] = {
    k.name: k
    for k in (
        Linear(),
        Periodic(),
        RationalQuadratic(),
        SquaredExponential(),
        Constant(),
        WhiteNoise(),
        CentredPeriodic(),
    )
}

#: A change operator's shape parameters (shared by every term it expands into) and the
#: factor names of its two sides, ``(A side, B side)`` (docs/conventions.md).
CHANGE_OPERATORS: dict[str, tuple[tuple[str, ...], tuple[str, str]]] = {
    name: (op.shape_params, op.sides) for name, op in OPERATORS.items()
}
#: Factor name (``"CP_BEFORE"`` ...) -> its change operator (``"CP"``).
CHANGE_FACTORS: dict[str, str] = {name: t.operator for name, t in TRANSITIONS.items()}


def factor(kind: str) -> Kernel:
    """The registry entry of a factor kind: a base kernel or a transition factor
    (``"CP_BEFORE"``; not ``"CP_BEFORE:0"``, see :func:`prolas.expr.factor_kernel`).

    Raises:
        KeyError: for a name the registry does not hold.
    """
    entry = BASE_KERNELS.get(kind) or TRANSITIONS.get(kind)
    if entry is None:
        raise KeyError(f"no kernel {kind!r} in the registry")
    return entry


def is_noise_term(names: tuple[str, ...] | list[str]) -> bool:
    """Whether an expanded term (its factor kinds or expanded names, ``"CP_BEFORE:0"``
    allowed) is noise: one of its factors has the role ``"noise"`` (``WN``). Such a term
    is noise, not signal (:func:`prolas.gp.predict`, the report's words)."""
    return any(factor(n.split(":", 1)[0]).role == NOISE for n in names)


def kernel_costs() -> dict[tuple[str, str], float]:
    """The label mismatch costs between base kernels that their entries declare
    (``ot_costs``), keyed by the sorted pair; a pair declared by both must agree."""
    out: dict[tuple[str, str], float] = {}
    for name, k in BASE_KERNELS.items():
        for other, cost in k.ot_costs.items():
            key = (min(name, other), max(name, other))
            if out.setdefault(key, float(cost)) != float(cost):
                raise ValueError(f"OT costs of {key} disagree: {out[key]} and {cost}")
    return out
