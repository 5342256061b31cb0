"""The kernel of one fitted expression on scaled inputs, for the SGPR bound (torch).

:class:`SGPRModel` holds an expression's parameters in ``theta`` (the layout of the exact
fit, :func:`prolas.gp.gram.parameter_layout`), converts them to and from a
:class:`~prolas.gp.results.FitResult` in x's units, and evaluates the covariance between
two sets of scaled inputs ``t = (x - x0) / span`` as a sum of terms

    K_t(ta, tb) = alpha_i S_ij beta_j,   S = v_t exp(E_t),

where ``E_t`` sums the log-factors of the term's stationary factors and ``alpha``,
``beta`` are the products of its rank-one factors ``s(t) s(t')``. Each factor's part
comes from its entry in the kernel registry (:mod:`prolas.kernels`, by its
``sgpr_role``): a ``"dense"`` log-factor on the squared distances (SE, RQ), a
``"lowrank"`` one (PER, whose ``cos(w (t - t')) = cos(wt) cos(wt') + sin(wt) sin(wt')``
needs no transcendental function on the M x N grid), a ``"multiply"`` factor multiplied
into ``S`` as it is (PERC, whose negative values have no log), a ``"vector"`` ``s(t)``
(LIN's ``t - c``, the change factors' transitions) or ``"one"`` (``C``). The bound and its
gradient are in :mod:`prolas.gp.sgpr_bound`.

White noise (``WN``, role ``"noise"``) has no place here: its covariance is nonzero only
where two inputs coincide, so the inducing inputs carry none of it and the bound would
hold it as unexplained variance. :class:`SGPRModel` refuses such a model
(:data:`NO_WHITE_NOISE`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from prolas.data import Dataset
from prolas.expr import factor_group, factor_kernel, parse
from prolas.gp.gram import parameter_layout
from prolas.gp.natural import theta_to_natural
from prolas.gp.results import FitResult, TermFit
from prolas.gp.starts import inherit_theta
from prolas.kernels import Kernel, factor
from prolas.kernels.spec import DENSE, LOWRANK, MULTIPLY, ONE, SGPR_NOISE, VECTOR

__all__ = ["NO_WHITE_NOISE", "SGPRModel"]

#: Roles of the stationary factors (they make the term's dense part ``S``: a log-factor
#: in ``E_t``, or multiplied in); the others are rank one or 1.
STATIONARY_ROLES = (DENSE, LOWRANK, MULTIPLY)

#: Why SGPR refuses a model with white noise (module docstring).
NO_WHITE_NOISE = (
    "SGPR cannot fit white noise (WN): its covariance is nonzero only where inputs "
    "coincide, which inducing points cannot carry; fit it exactly (--search-points 0 "
    "searches and refits on all points)"
)


class SGPRModel:
    """The kernel of one fitted expression on scaled inputs, as plain torch functions.

    ``t = (x - x0) / span``; ``theta`` (shape ``(P,)``, float64) holds the parameters
    in :func:`prolas.gp.gram.parameter_layout` order. ``terms`` are the expanded terms
    (:attr:`prolas.expr.Expression.terms`): change factors are named ``"CP_BEFORE:0"``
    etc. and share their group's parameters (change parameters first in ``theta``,
    ``ParamInfo.group >= 0``; :attr:`groups`).

    Attributes:
        factors: per term, per factor, its registry entry and the positions of its
            parameters in ``theta`` (a change factor's are its group's).
        variance_index: per term, the position of its log variance in ``theta``.
    """

    def __init__(self, fit: FitResult, dataset: Dataset, lengthscale_floor: float = 0.0) -> None:
        """Raises:
        ValueError: for a model with white noise (:data:`NO_WHITE_NOISE`)."""
        self.expression = fit.expression
        self.terms: tuple[tuple[str, ...], ...] = tuple(
            tuple(t) for t in parse(fit.expression).terms
        )
        if any(factor(factor_kernel(n)).sgpr_role == SGPR_NOISE for t in self.terms for n in t):
            raise ValueError(NO_WHITE_NOISE)
        self.x0 = float(dataset.x[0])
        self.span = float(dataset.span) if dataset.span > 0 else 1.0
        self.period_floor = 2.0 * dataset.spacing / self.span
        # SE/RQ lengthscales: at least lengthscale_floor median spacings, as in the exact fit
        ls_floor = float(lengthscale_floor) * dataset.spacing / self.span
        self.params = parameter_layout(self.terms, self.period_floor, ls_floor)
        #: change group -> positions of its shared parameters in ``theta``, in
        #: :data:`prolas.expr.CHANGE_OPERATORS` order (location-like first, width last)
        self.groups: dict[int, list[int]] = {}
        for k, p in enumerate(self.params):
            if p.group >= 0:
                self.groups.setdefault(p.group, []).append(k)
        self.variance_index = [k for k, p in enumerate(self.params) if p.name == "variance"]
        self.factors: list[list[tuple[Kernel, list[int]]]] = [
            [
                (
                    factor(factor_kernel(name)),
                    self.groups[g]
                    if (g := factor_group(name)) is not None
                    else [k for k, p in enumerate(self.params) if (p.term, p.factor) == (i, j)],
                )
                for j, name in enumerate(term)
            ]
            for i, term in enumerate(self.terms)
        ]

    # -- conversion between natural units and theta ------------------------------------
    def scale(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, dtype=np.float64).reshape(-1) - self.x0) / self.span

    @property
    def lower(self) -> np.ndarray:
        return np.array([p.lower for p in self.params])

    @property
    def upper(self) -> np.ndarray:
        return np.array([p.upper for p in self.params])

    def stationary(self, i: int) -> bool:
        """Whether term ``i`` has a stationary factor (else it is rank one: ``S = None``)."""
        return any(k.sgpr_role in STATIONARY_ROLES for k, _ in self.factors[i])

    def theta_from_fit(self, fit: FitResult) -> np.ndarray:
        """``theta`` for ``fit``'s natural-unit hyperparameters (clipped into the box).

        ``fit.terms`` are the expanded terms (:attr:`prolas.expr.Expression.terms`) with
        plain kernel names (``"CP_BEFORE"`` for ``"CP_BEFORE:0"``); a change operator's
        tied values repeat in every factor of its group (docs/conventions.md) and must agree.
        """
        kinds = [tuple(factor_kernel(n) for n in t) for t in self.terms]
        if [tuple(f.kernel for f in t.factors) for t in fit.terms] != kinds:
            raise ValueError(f"{fit.expression}: terms do not match the canonical form")
        values = [fit.noise_variance] + [t.variance for t in fit.terms]
        values += [v for t in fit.terms for f in t.factors for v in f.params.values()]
        if not all(v is not None and math.isfinite(v) for v in values):
            raise ValueError("non-finite hyperparameter")
        start = np.array([p.to_theta(1.0) for p in self.params])
        theta = inherit_theta(self, fit, start, self.x0, self.span)
        if self.groups:
            self._change_theta_from_fit(fit, theta)
        return theta

    def _change_theta_from_fit(self, fit: FitResult, theta: np.ndarray) -> None:
        """Write each change group's parameters into ``theta`` from the factors that
        carry the group (term and factor positions are the model's own, so the k-th
        group is read exactly, not matched by kind); raises if the tied copies differ."""
        carriers: dict[int, list[dict[str, float]]] = {}
        for i, names in enumerate(self.terms):
            for j, name in enumerate(names):
                if (g := factor_group(name)) is not None:
                    carriers.setdefault(g, []).append(fit.terms[i].factors[j].params)
        for g, positions in self.groups.items():
            first, *others = carriers[g]
            for k in positions:
                p = self.params[k]
                value = float(first[p.name])
                if any(not math.isclose(float(o[p.name]), value, rel_tol=1e-9) for o in others):
                    raise ValueError(f"change group {g}: tied {p.name!r} values differ")
                value = p.scaled(value, self.x0, self.span)
                if p.log and not value > 0:
                    raise ValueError(f"change group {g}: non-positive {p.name!r}")
                theta[k] = p.to_theta(value)

    def to_natural(self, theta: np.ndarray) -> tuple[tuple[TermFit, ...], float]:
        """Inverse of :meth:`theta_from_fit`: ``(terms, noise variance)`` in x's units."""
        return theta_to_natural(self, np.asarray(theta, dtype=np.float64), self.x0, self.span)

    # -- parameter values ---------------------------------------------------------------
    def values(self, theta: torch.Tensor, positions: Sequence[int]) -> list[torch.Tensor]:
        """The values (scaled units) at ``positions`` of a torch ``theta``: 0-d tensors,
        differentiable (``exp`` of the log-scale entries)."""
        return [torch.exp(theta[k]) if self.params[k].log else theta[k] for k in positions]

    def values_np(self, th: np.ndarray, positions: Sequence[int]) -> list[float]:
        """The values (scaled units) at ``positions`` of a numpy ``theta``, as floats."""
        return [self.params[k].value(float(th[k])) for k in positions]

    def noise(self, theta: torch.Tensor) -> torch.Tensor:
        return torch.exp(theta[-1])

    # -- kernel ------------------------------------------------------------------------
    def term_parts(
        self,
        theta: torch.Tensor,
        ta: torch.Tensor,
        tb: torch.Tensor,
        d2: torch.Tensor | None = None,
    ) -> list[tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]]:
        """Per term ``(S, alpha, beta)`` with ``K_t(ta, tb) = alpha_i S_ij beta_j``.

        ``S = v_t exp(E_t) prod_m k_m`` (a x b) is the stationary part, ``E_t`` the sum of
        the log-factors of its stationary factors and ``k_m`` its factors multiplied in as
        they are (role ``"multiply"``: PERC); ``alpha`` (a,) and ``beta`` (b,) are the
        products of its rank-one factors ``s(ta)``, ``s(tb)`` (``None`` without any);
        ``C`` is 1. A term without stationary factor has ``S = None`` and
        ``K_t = v_t alpha beta^T`` (``v_t`` folded into alpha; ones for a lone ``C``).
        ``d2`` may hold the precomputed ``(ta_i - tb_j)^2``. Differentiable in
        ``theta`` (autograd); in-place on its own temporaries when no gradient is taken.

        Cost: the low-rank log-factors and the constants ``log v_t - sum c`` enter ``E_t``
        as one product (``addmm``), so a term costs one pass per dense factor, one
        ``addmm`` and one ``exp`` over the a x b grid.
        """
        out: list[tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]] = []
        for i, factors in enumerate(self.factors):
            dense = None  # dense log-factors, (a, b)
            left = [torch.ones_like(ta)]  # low-rank part of E_t: sum_r left_r right_r^T
            right = [theta[self.variance_index[i]] * torch.ones_like(tb)]
            alpha = beta = None
            mult: list[torch.Tensor] = []
            for kernel, pos in factors:
                role = kernel.sgpr_role
                if role == ONE:
                    continue
                v = self.values(theta, pos)
                if role == MULTIPLY:
                    mult.append(kernel.sgpr_value(ta, tb, v))
                elif role == VECTOR:
                    sa, sb = kernel.vector(ta, v), kernel.vector(tb, v)
                    alpha = sa if alpha is None else alpha * sa
                    beta = sb if beta is None else beta * sb
                elif role == LOWRANK:
                    lefts, rights, const = kernel.sgpr_lowrank(ta, tb, v)
                    left += lefts
                    right += rights
                    right[0] = right[0] - const
                else:
                    if d2 is None:
                        d2 = (ta[:, None] - tb[None, :]) ** 2
                    e = kernel.sgpr_log(d2, v)
                    if dense is None:
                        dense = e
                    elif dense.requires_grad or e.requires_grad:
                        dense = dense + e
                    else:
                        dense += e
            if dense is None and len(left) == 1 and not mult:  # rank-one factors (or C) only
                v = torch.exp(theta[self.variance_index[i]])
                if alpha is None:  # C
                    alpha, beta = torch.ones_like(ta), torch.ones_like(tb)
                out.append((None, v * alpha, beta))
                continue
            lo, ro = torch.stack(left, 1), torch.stack(right, 0)
            expo = lo @ ro if dense is None else torch.addmm(dense, lo, ro)
            S = torch.exp(expo) if expo.requires_grad else expo.exp_()
            for m in mult:
                S = S * m if (S.requires_grad or m.requires_grad) else S.mul_(m)
            out.append((S, alpha, beta))
        return out

    def rank_one(
        self, th: np.ndarray, i: int, ta: torch.Tensor, tb: torch.Tensor, ones: bool
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Term ``i``'s rank-one factors at a numpy ``theta``, in the term's order:
        ``(prod s(ta), prod s(tb))`` (``None`` without any, or ones if ``ones``: a lone
        ``C``)."""
        alpha = beta = None
        for kernel, pos in self.factors[i]:
            if kernel.sgpr_role != VECTOR:
                continue
            v = self.values_np(th, pos)
            sa, sb = kernel.vector(ta, v), kernel.vector(tb, v)
            alpha = sa if alpha is None else alpha * sa
            beta = sb if beta is None else beta * sb
        if alpha is None and ones:
            alpha, beta = torch.ones_like(ta), torch.ones_like(tb)
        return alpha, beta

    @staticmethod
    def assemble(
        S: torch.Tensor | None, alpha: torch.Tensor | None, beta: torch.Tensor | None
    ) -> torch.Tensor:
        """``K_t = alpha_i S_ij beta_j`` (``alpha beta^T`` when ``S`` is None).

        May return ``S`` itself (no rank-one factor): do not modify the result in place.
        """
        if S is None:
            return torch.outer(alpha, beta)
        if alpha is None:
            return S
        return S * torch.outer(alpha, beta)

    def cross(
        self,
        theta: torch.Tensor,
        ta: torch.Tensor,
        tb: torch.Tensor,
        per_term: bool = False,
        d2: torch.Tensor | None = None,
    ) -> torch.Tensor | list[torch.Tensor]:
        """``k(ta, tb)`` without noise: ``(a, b)``, or a list of per-term ``(a, b)``."""
        parts = self.term_parts(theta, ta, tb, d2)
        if per_term:
            return [self.assemble(*p) for p in parts]
        return self.sum_terms(parts)

    def sum_terms(self, parts: list) -> torch.Tensor:
        """``sum_t K_t`` from :meth:`term_parts` (a new tensor; the parts are not modified)."""
        total = None
        for S, alpha, beta in parts:
            if total is None:
                total = self.assemble(S, alpha, beta)
                if total is S:
                    total = S.clone()
            elif S is None:
                total = torch.addr(total, alpha, beta)
            elif alpha is None:
                total = total + S
            else:
                total = torch.addcmul(total, S, torch.outer(alpha, beta))
        return total

    def diag(self, theta: torch.Tensor, t: torch.Tensor, per_term: bool = False):
        """``k(t_i, t_i)``: ``(n,)`` (or a list per term). Stationary factors (PERC too) and
        ``C`` are 1 on the diagonal; a rank-one factor is ``s(t)^2`` (LIN ``(t - c)^2``)."""
        parts = []
        for i, factors in enumerate(self.factors):
            k = torch.ones_like(t)
            for kernel, pos in factors:
                if kernel.sgpr_role == VECTOR:
                    k = k * kernel.vector(t, self.values(theta, pos)) ** 2
            parts.append(torch.exp(theta[self.variance_index[i]]) * k)
        if per_term:
            return parts
        return torch.stack(parts).sum(0)
