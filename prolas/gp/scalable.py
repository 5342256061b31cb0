"""Scalable refit on all N points: SGPR, the collapsed variational bound of Titsias (2009).

The structure search fits on an evenly spaced subsample; when the series is too long
for an exact GP, the chosen model is refitted on all N points here. Same model and
conventions as :mod:`prolas.gp` (docs/conventions.md): for the canonical form of an expression

    y' ~ GP(0, k(x, x') = sum_t v_t prod_{f in t} k_f(x, x')) + N(0, s^2),  s^2 >= 1e-6.

Bound. With M inducing inputs Z (fixed, evenly spaced over the x range), ``K_uu =
k(Z, Z)`` (M x M), ``K_uf = k(Z, X)`` (M x N) and ``Q_ff = K_fu K_uu^{-1} K_uf``,

    F = log N(y' | 0, Q_ff + s^2 I) - tr(K_ff - Q_ff) / (2 s^2)  <=  log p(y').

Only ``K_uu``, ``K_uf`` and ``diag K_ff`` are needed, so it works for every kernel,
LIN (non-stationary) included, and for the expanded terms of change operators
(docs/conventions.md): a change factor ``s(x) s(x')`` (``CP_BEFORE``/``CP_AFTER``/``CW_OUTSIDE``/
``CW_INSIDE``) is, like LIN, a rank-one diagonal scaling of its term, and ``C`` is 1.
``F`` is evaluated exactly (no stochastic log-det, no Lanczos; Cholesky of M x M
matrices and Woodbury). With ``L L^T = K_uu + jitter I`` and the whitened
``V = L^{-1} K_uf`` (M x N), the statistics

    H = V V^T  (M x M),   v = V y'  (M,),   y'^T y',   tr K_ff = sum_i k(x_i, x_i)

are accumulated over chunks of :data:`CHUNK` columns (``K_uf`` is never held whole),
and with ``B = I + H / s^2 = L_B L_B^T`` and ``c = L_B^{-1} v / s^2`` (Woodbury and
the matrix determinant lemma; ``tr Q_ff = tr H``):

    F = -N/2 log(2 pi s^2) - sum_i log (L_B)_ii - y'^T y' / (2 s^2) + c^T c / 2
        - (tr K_ff - tr H) / (2 s^2).

Whitening each chunk before accumulating matters: forming ``K_uf K_fu`` first and
whitening afterwards squares the conditioning of ``K_uu`` and made ``B`` indefinite on
smooth kernels. Jitter on ``K_uu`` (relative, :data:`JITTER_SCHEDULE`) keeps ``F`` a
valid lower bound: it is the bound for the noisy inducing variables ``u + e``,
``e ~ N(0, jitter I)``. With the inducing inputs at the data (M = N) ``F`` equals the
exact log marginal likelihood (to ~1e-7 relative with the smallest jitter).

Gradient, exact and deterministic, in two passes per evaluation: the value pass
accumulates ``H`` and ``v``; autograd on the small graph gives ``dF/dH``, ``dF/dv`` and
the ``K_uu`` (Cholesky) and ``s^2`` parts; the gradient pass forms, per chunk,
``W_c = dF/dK_c`` (M x C, one matrix product) and contracts it in closed form with
each hyperparameter's derivative of ``K_c`` (:meth:`_Problem._gradient`: SE's
``d^2``, PER's ``cos(w d)`` and ``d sin(w d)``, LIN and change factors are low-rank,
so most contractions are thin matrix products; a change operator's location and width
are shared by every term of its group, whose contributions add up). Cost per
evaluation: three M^2 N matrix products (triangular solve, ``V V^T``, ``W_c``) and a
few elementwise passes over the M x N grid, all in preallocated buffers. Memory:
O(M N) for the per-chunk caches (squared distances, ``V_c``, the terms' stationary
parts; each 0.4 GB at M = 512, N = 100 000; recomputed instead beyond 3 GB), never
O(N^2).

Implementation choice (measured, ``benchmarks/results/sgpr_refit/SCALABLE.md``): this direct torch
implementation of the bound, not ``gpytorch.kernels.InducingPointKernel`` in an
``ExactGP``. One value and gradient of ``LIN + PER*SE + SE`` at M = 512 (2 shared
cores, same bound to 2e-7 relative) took 5.6 s and 2.0 GB peak RSS here against
28.7 s and 8.0 GB for GPyTorch at N = 100 000 (1.8 s / 0.8 GB against 5.7 s / 2.0 GB
at N = 20 000): GPyTorch holds and differentiates through several N x M tensors.
With ``fast_computations(False, False, False)`` GPyTorch factorises the dense N x N
matrix instead (an ad-hoc check at N = 5 000: 14.5 s and 2.4 GB, against 1.0 s).

Optimisation: L-BFGS-B in a log parametrisation on scaled inputs ``t = (x - x0)/span``
(as :mod:`prolas.gp`), from the subsample fit's hyperparameters; the result is
converted back to x's units (lengthscales and periods times span, LIN offset
``c = x0 + span c_t``, a term's variance divided by ``span^2`` per LIN factor).
PER's period stays >= 2Δ and the noise variance >= :data:`prolas.gp.NOISE_FLOOR`.

>>> from prolas.data import Dataset
>>> from prolas.gp import fit_gp
>>> import numpy as np
>>> x = np.linspace(0, 100, 20_000); y = np.sin(2 * np.pi * x / 7) + 0.01 * x
>>> ds = Dataset.from_arrays(x, y)
>>> fit = fit_gp("LIN + PER", ds.subset(ds.spaced_indices(500)))  # doctest: +SKIP
>>> big = refit_sgpr(fit, ds, inducing=256)  # doctest: +SKIP
>>> big.approximation, round(big.period(), 1)  # doctest: +SKIP
('sgpr-256', 7.0)
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import torch
from scipy.optimize import minimize

from prolas.data import Dataset
from prolas.expr import factor_group, factor_kernel, parse
from prolas.gp.fit import (
    DTYPE,
    FitResult,
    TermFit,
    bic,
    inherit_theta,
    theta_to_natural,
)
from prolas.gp.gram import parameter_layout
from prolas.threads import torch_threads

__all__ = [
    "DEFAULT_INDUCING",
    "CHUNK",
    "SGPRModel",
    "inducing_inputs",
    "sgpr_bound",
    "refit_sgpr",
    "predict_sgpr",
    "decompose_sgpr",
]

#: Default number of inducing points (``benchmarks/results/sgpr_refit/SCALABLE.md``): the
#: largest M whose refit at N = 100 000 stays within ~5 minutes on 2 cores (172 s for three terms),
#: with room for structure down to a few x span / M (M = 128 already loses 0.1 nats on a
#: series with lengthscale span / 80; M = 1 024 cost 5x more and gained nothing there).
DEFAULT_INDUCING = 512
#: Columns of ``K_uf`` processed at once (M x CHUNK doubles: 33 MB at M = 512).
CHUNK = 8192
#: Jitter added to ``K_uu``, relative to its mean diagonal, tried in order.
JITTER_SCHEDULE = (1e-10, 1e-8, 1e-6, 1e-4)
#: Below this much work (M^2 N) torch runs on one thread (as :func:`prolas.gp.fit_gp`
#: does for small N): at N = 1 800, M = 256 a value and gradient took 0.05 s on one
#: thread and 0.18 s on two while other processes shared the 2 cores.
SMALL_WORK = 2e9

_LOG_2PI = math.log(2.0 * math.pi)


class SGPRError(RuntimeError):
    """A numerical failure of the bound (reported in a failed FitResult, never raised)."""


# --- parameters ---------------------------------------------------------------------


class SGPRModel:
    """The kernel of one fitted expression on scaled inputs, as plain torch functions.

    ``t = (x - x0) / span``; ``theta`` (shape ``(P,)``, float64) holds the parameters
    in :func:`prolas.gp.gram.parameter_layout` order. Formulas: docs/conventions.md (PER as
    ``exp(-(1 - cos(2 pi d / p)) / l^2)``, since ``2 sin^2(a) = 1 - cos(2a)``, with
    ``cos(w (t - t')) = cos(wt) cos(wt') + sin(wt) sin(wt')`` so that no
    transcendental function is evaluated on the M x N grid). ``terms`` are the expanded
    terms (:attr:`prolas.expr.Expression.terms`): change factors are named
    ``"CP_BEFORE:0"`` etc. and share their group's parameters (change parameters first
    in ``theta``, ``ParamInfo.group >= 0``; :attr:`groups`).
    """

    def __init__(self, fit: FitResult, dataset: Dataset, lengthscale_floor: float = 0.0) -> None:
        self.expression = fit.expression
        self.terms: tuple[tuple[str, ...], ...] = tuple(
            tuple(t) for t in parse(fit.expression).terms
        )
        self.x0 = float(dataset.x[0])
        self.span = float(dataset.span) if dataset.span > 0 else 1.0
        self.period_floor = 2.0 * dataset.spacing / self.span
        # SE/RQ lengthscales: at least lengthscale_floor median spacings, as in the exact fit
        ls_floor = float(lengthscale_floor) * dataset.spacing / self.span
        self.params = parameter_layout(self.terms, self.period_floor, ls_floor)
        self._index = {(p.term, p.factor, p.name): k for k, p in enumerate(self.params)}
        #: change group -> positions of its shared parameters in ``theta``, in
        #: :data:`prolas.expr.CHANGE_OPERATORS` order (location-like first, width last)
        self.groups: dict[int, list[int]] = {}
        for k, p in enumerate(self.params):
            if p.group >= 0:
                self.groups.setdefault(p.group, []).append(k)

    # -- conversion between natural units and theta ------------------------------------
    def scale(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, dtype=np.float64).reshape(-1) - self.x0) / self.span

    @property
    def lower(self) -> np.ndarray:
        return np.array([p.lower for p in self.params])

    @property
    def upper(self) -> np.ndarray:
        return np.array([p.upper for p in self.params])

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
                value = value / self.span if p.log else (value - self.x0) / self.span
                if p.log and not value > 0:
                    raise ValueError(f"change group {g}: non-positive {p.name!r}")
                theta[k] = p.to_theta(value)

    def to_natural(self, theta: np.ndarray) -> tuple[tuple[TermFit, ...], float]:
        """Inverse of :meth:`theta_from_fit`: ``(terms, noise variance)`` in x's units."""
        return theta_to_natural(self, np.asarray(theta, dtype=np.float64), self.x0, self.span)

    # -- kernel ------------------------------------------------------------------------
    def _get(self, theta: torch.Tensor, term: int, factor: int, name: str) -> torch.Tensor:
        k = self._index[(term, factor, name)]
        return torch.exp(theta[k]) if self.params[k].log else theta[k]

    def noise(self, theta: torch.Tensor) -> torch.Tensor:
        return torch.exp(theta[-1])

    def change_values(
        self, theta: torch.Tensor | np.ndarray, group: int
    ) -> tuple[list, torch.Tensor | float]:
        """``(locations, width)`` of change group ``group`` in units of ``t``: the location
        (CP) or start and end (CW), and the shared width. Tensors for a torch ``theta``
        (differentiable), floats for a numpy one."""
        values = []
        for k in self.groups[group]:
            if isinstance(theta, torch.Tensor):
                values.append(torch.exp(theta[k]) if self.params[k].log else theta[k])
            else:
                values.append(self.params[k].value(float(theta[k])))
        return values[:-1], values[-1]

    def term_parts(
        self,
        theta: torch.Tensor,
        ta: torch.Tensor,
        tb: torch.Tensor,
        d2: torch.Tensor | None = None,
    ) -> list[tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]]:
        """Per term ``(S, alpha, beta)`` with ``K_t(ta, tb) = alpha_i S_ij beta_j``.

        ``S = v_t exp(E_t)`` (a x b) is the stationary part, ``E_t`` the sum of the
        logs of its SE, RQ and PER factors; ``alpha`` (a,) and ``beta`` (b,) are the
        products of its rank-one factors (``None`` without any): a LIN factor
        ``(t - c)(t' - c)`` and a change factor ``s(t) s(t')`` (:func:`_change_vector`)
        are diagonal scalings, so alpha holds ``prod (ta - c_k) prod s(ta)`` and beta the
        same on ``tb``; ``C`` is 1. A term without stationary factor has ``S = None`` and
        ``K_t = v_t alpha beta^T`` (``v_t`` folded into alpha; ones for a lone ``C``).
        ``d2`` may hold the precomputed ``(ta_i - tb_j)^2``. Differentiable in
        ``theta`` (autograd); in-place on its own temporaries when no gradient is taken.

        Cost: PER's ``cos(w d) = cos(w ta) cos(w tb) + sin(w ta) sin(w tb)`` and the
        constants ``log v_t - sum 1/l_PER^2`` enter ``E_t`` as one low-rank product
        (``addmm``), so a term costs one pass per SE/RQ factor, one ``addmm`` and one
        ``exp`` over the a x b grid.
        """
        out: list[tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]] = []
        for i, names in enumerate(self.terms):
            dense = None  # SE and RQ log-factors, (a, b)
            left = [torch.ones_like(ta)]  # low-rank part of E_t: sum_r left_r right_r^T
            right = [theta[self._index[(i, -1, "variance")]] * torch.ones_like(tb)]
            alpha = beta = None
            for j, name in enumerate(names):
                if name == "LIN":
                    c = self._get(theta, i, j, "offset")
                    alpha = ta - c if alpha is None else alpha * (ta - c)
                    beta = tb - c if beta is None else beta * (tb - c)
                elif name == "C":
                    continue
                elif (g := factor_group(name)) is not None:
                    where, width = self.change_values(theta, g)
                    sa, _ = _change_vector(factor_kernel(name), ta, where, width)
                    sb, _ = _change_vector(factor_kernel(name), tb, where, width)
                    alpha = sa if alpha is None else alpha * sa
                    beta = sb if beta is None else beta * sb
                elif name == "PER":
                    inv = 1.0 / self._get(theta, i, j, "lengthscale") ** 2
                    w = 2.0 * math.pi / self._get(theta, i, j, "period")
                    wa, wb = w * ta, w * tb
                    left += [torch.cos(wa) * inv, torch.sin(wa) * inv]
                    right += [torch.cos(wb), torch.sin(wb)]
                    right[0] = right[0] - inv
                else:
                    if d2 is None:
                        d2 = (ta[:, None] - tb[None, :]) ** 2
                    ls2 = self._get(theta, i, j, "lengthscale") ** 2
                    if name == "SE":
                        e = d2 * (-0.5 / ls2)
                    else:  # RQ
                        a = self._get(theta, i, j, "alpha")
                        e = torch.log1p(d2 * (0.5 / (a * ls2)))
                        e = e.mul_(-a) if not e.requires_grad else e * (-a)
                    if dense is None:
                        dense = e
                    elif dense.requires_grad or e.requires_grad:
                        dense = dense + e
                    else:
                        dense += e
            if dense is None and len(left) == 1:  # rank-one factors (or C) only
                v = torch.exp(theta[self._index[(i, -1, "variance")]])
                if alpha is None:  # C
                    alpha, beta = torch.ones_like(ta), torch.ones_like(tb)
                out.append((None, v * alpha, beta))
                continue
            lo, ro = torch.stack(left, 1), torch.stack(right, 0)
            expo = lo @ ro if dense is None else torch.addmm(dense, lo, ro)
            S = torch.exp(expo) if expo.requires_grad else expo.exp_()
            out.append((S, alpha, beta))
        return out

    @staticmethod
    def assemble(
        S: torch.Tensor | None, alpha: torch.Tensor | None, beta: torch.Tensor | None
    ) -> torch.Tensor:
        """``K_t = alpha_i S_ij beta_j`` (``alpha beta^T`` when ``S`` is None).

        May return ``S`` itself (no LIN factor): do not modify the result in place.
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
        """``k(t_i, t_i)``: ``(n,)`` (or a list per term). SE, RQ, PER, C are 1 on the
        diagonal; LIN is ``(t - c)^2``, a change factor ``s(t)^2``."""
        parts = []
        for i, names in enumerate(self.terms):
            k = torch.ones_like(t)
            for j, name in enumerate(names):
                if name == "LIN":
                    k = k * (t - self._get(theta, i, j, "offset")) ** 2
                elif (g := factor_group(name)) is not None:
                    where, width = self.change_values(theta, g)
                    k = k * _change_vector(factor_kernel(name), t, where, width)[0] ** 2
            parts.append(self._get(theta, i, -1, "variance") * k)
        if per_term:
            return parts
        return torch.stack(parts).sum(0)


def inducing_inputs(x: np.ndarray, m: int) -> np.ndarray:
    """``m`` evenly spaced inducing inputs over ``[min x, max x]`` (deterministic).

    If ``m`` is at least the number of distinct inputs, the distinct inputs themselves
    (then ``Q_ff = K_ff`` and the bound is the exact log marginal likelihood).
    """
    u = np.unique(np.asarray(x, dtype=np.float64))
    if m >= u.size:
        return u
    return np.linspace(u[0], u[-1], max(int(m), 1))


# --- the bound ----------------------------------------------------------------------


@contextmanager
def _threads(m: int, n: int) -> Iterator[None]:
    """One torch thread for small problems (:data:`SMALL_WORK`); else leave the setting."""
    if float(m) * m * n > SMALL_WORK:
        yield
        return
    with torch_threads(1):
        yield


def _chunks(n: int, size: int = CHUNK):
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def _cholesky(K: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Cholesky ``L`` of ``K + jitter I`` (lower) with the first jitter of
    :data:`JITTER_SCHEDULE` (relative to the mean diagonal) that succeeds; raises
    :class:`SGPRError` if none does. Differentiable (autograd) when ``K`` is."""
    scale = float(torch.diagonal(K).mean().detach())
    if not math.isfinite(scale) or scale <= 0:
        raise SGPRError(f"K_uu has a non-positive or non-finite mean diagonal ({scale:g})")
    eye = torch.eye(K.shape[0], dtype=K.dtype)
    for rel in JITTER_SCHEDULE:
        L, info = torch.linalg.cholesky_ex(K + (rel * scale) * eye)
        if int(info) == 0 and bool(torch.isfinite(torch.diagonal(L)).all()):
            return L, rel * scale
    raise SGPRError(f"Cholesky of K_uu failed up to jitter {JITTER_SCHEDULE[-1]:g} x mean diag")


def _whitened_bound(
    H: torch.Tensor, v: torch.Tensor, yy: float, tr_k: torch.Tensor, noise: torch.Tensor, n: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(F, L_B, c)`` from the whitened statistics (module docstring).

    Args:
        H: ``L^{-1} K_uf K_fu L^{-T}`` (M x M); v: ``L^{-1} K_uf y'`` (M,);
        yy: ``y'^T y'``; tr_k: ``tr K_ff``; noise: ``s^2``; n: N.
    """
    B = torch.eye(H.shape[0], dtype=H.dtype) + H / noise
    LB, info = torch.linalg.cholesky_ex(B)
    if int(info) != 0:
        raise SGPRError("Cholesky of B = I + H / s^2 failed")
    c = torch.linalg.solve_triangular(LB, v[:, None], upper=False)[:, 0] / noise
    trace = torch.clamp(tr_k - torch.diagonal(H).sum(), min=0.0)  # tr(K_ff - Q_ff) >= 0
    F = (
        -0.5 * n * (_LOG_2PI + torch.log(noise))
        - torch.log(torch.diagonal(LB)).sum()
        - 0.5 * yy / noise
        + 0.5 * (c * c).sum()
        - 0.5 * trace / noise
    )
    return F, LB, c


class _Problem:
    """The data side of the bound for one model: inputs, inducing inputs and targets.

    ``tf`` (N,) and ``tu`` (M,) are scaled inputs, ``y`` (N,) standardised targets.
    The M x N work runs chunk by chunk (:data:`CHUNK` columns) in preallocated
    buffers (``out=`` and in-place operations: allocating a fresh 33 MB tensor per
    operation costs more than the operation, in page faults). Per chunk, the squared
    distances ``(tu_i - tf_j)^2`` are kept (if the expression has an SE or RQ factor),
    and the whitened ``V_c = L^{-1} K_c`` and the stationary parts ``S_t`` of the terms
    are kept from the value pass for the gradient pass while all of it fits in
    ``cache_bytes`` (each is M x N doubles in all: 0.4 GB at M = 512, N = 100 000);
    otherwise they are recomputed in the gradient pass.
    """

    def __init__(
        self,
        model: SGPRModel,
        tu: torch.Tensor,
        tf: torch.Tensor,
        y: torch.Tensor,
        cache_bytes: float = 3e9,
    ) -> None:
        self.model, self.tu, self.tf, self.y = model, tu, tf, y
        self.n, self.m = int(tf.shape[0]), int(tu.shape[0])
        self.yy = float(y @ y)
        self.slices = list(_chunks(self.n))
        # terms with an SE, RQ or PER factor; the others are rank one (LIN, change, C)
        self.stationary = [any(f in ("SE", "RQ", "PER") for f in term) for term in model.terms]
        need_d2 = any(f in ("SE", "RQ") for term in model.terms for f in term)
        block = 8.0 * self.m * self.n
        self.need_d2 = need_d2
        self.cache_d2 = need_d2 and cache_bytes >= block
        budget = cache_bytes - (block if self.cache_d2 else 0.0)
        self.cache_v = budget >= block
        self.cache_s = budget >= block * (1 + sum(self.stationary))
        self._d2_cache: list[torch.Tensor | None] = [None] * len(self.slices)
        self._buffers: dict[tuple, torch.Tensor] = {}

    def d2(self, k: int) -> torch.Tensor | None:
        """``(tu_i - tf_j)^2`` for chunk ``k`` (M x C; cached if ``cache_d2``)."""
        if not self.need_d2:
            return None
        d2 = self._d2_cache[k]
        if d2 is None:
            sl = self.slices[k]
            key = ("d2", k if self.cache_d2 else -1)
            d2 = torch.sub(
                self.tu[:, None], self.tf[sl][None, :], out=self._buf(key, sl.stop - sl.start)
            )
            d2.square_()
            if self.cache_d2:
                self._d2_cache[k] = d2
        return d2

    def _buf(self, key: tuple, cols: int) -> torch.Tensor:
        """A persistent M x ``cols`` work tensor for ``key``."""
        t = self._buffers.get((key, cols))
        if t is None:
            t = self._buffers[(key, cols)] = torch.empty(self.m, cols, dtype=DTYPE)
        return t

    def _parts(self, th: np.ndarray, k: int) -> list:
        """:meth:`SGPRModel.term_parts` for chunk ``k`` at ``th`` (numpy), in buffers.

        Per term ``(S, alpha, beta)``; ``S`` is a buffer (cached per chunk when
        ``cache_s``, else shared by the chunks), rewritten by the next call.
        """
        model, idx, tu = self.model, self.model._index, self.tu
        tf, d2 = self.tf[self.slices[k]], self.d2(k)
        cols = tf.shape[0]
        out = []
        for i, names in enumerate(model.terms):
            alpha, beta = _rank_one(model, th, i, tu, tf, ones=not self.stationary[i])
            log_v = float(th[idx[(i, -1, "variance")]])
            if not self.stationary[i]:
                out.append((None, math.exp(log_v) * alpha, beta))
                continue
            S = self._buf(("S", i, k if self.cache_s else -1), cols)
            left, right, const, dense = [], [], log_v, False
            for j, name in enumerate(names):
                if name == "PER":
                    inv = math.exp(-2.0 * th[idx[(i, j, "lengthscale")]])
                    w = 2.0 * math.pi * math.exp(-th[idx[(i, j, "period")]])
                    left += [torch.cos(w * tu) * inv, torch.sin(w * tu) * inv]
                    right += [torch.cos(w * tf), torch.sin(w * tf)]
                    const -= inv
                elif name in ("SE", "RQ"):
                    inv = math.exp(-2.0 * th[idx[(i, j, "lengthscale")]])
                    if name == "SE":
                        term = None
                        coef = -0.5 * inv
                    else:
                        a = math.exp(th[idx[(i, j, "alpha")]])
                        term = torch.mul(d2, 0.5 * inv / a, out=self._buf(("tmp1",), cols))
                        term.log1p_()
                        coef = -a
                    if not dense:
                        if term is None:
                            torch.mul(d2, coef, out=S)
                        else:
                            torch.mul(term, coef, out=S)
                        dense = True
                    else:
                        S.add_(d2 if term is None else term, alpha=coef)
            left.append(torch.ones_like(tu))
            right.append(torch.full_like(tf, const))
            lo, ro = torch.stack(left, 1), torch.stack(right, 0)
            if dense:
                S.addmm_(lo, ro)
            else:
                torch.matmul(lo, ro, out=S)
            S.exp_()
            out.append((S, alpha, beta))
        return out

    def _kernel_into(self, parts: list, K: torch.Tensor) -> torch.Tensor:
        """``K = sum_t alpha_i S_ij beta_j`` written into the buffer ``K``."""
        first = True
        for S, alpha, beta in parts:
            if S is None:
                if first:
                    torch.outer(alpha, beta, out=K)
                else:
                    K.addr_(alpha, beta)
            elif alpha is None:
                if first:
                    K.copy_(S)
                else:
                    K.add_(S)
            else:
                tmp = torch.mul(S, beta, out=self._buf(("tmp2",), K.shape[1]))
                if first:
                    torch.mul(tmp, alpha[:, None], out=K)
                else:
                    K.addcmul_(tmp, alpha[:, None])
            first = False
        return K

    def _whitened_chunk(self, th: np.ndarray, L: torch.Tensor, k: int) -> tuple[list, torch.Tensor]:
        """``(parts, V_c = L^{-1} K_c)`` for chunk ``k`` (both in buffers)."""
        cols = self.slices[k].stop - self.slices[k].start
        parts = self._parts(th, k)
        K = self._kernel_into(parts, self._buf(("K",), cols))
        V = self._buf(("V", k if self.cache_v else -1), cols)
        torch.linalg.solve_triangular(L, K, upper=False, out=V)
        return parts, V

    def whitened(self, th: np.ndarray, L: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``H = V V^T`` (M x M) and ``v = V y`` (M,) with ``V = L^{-1} K_uf``, by chunks."""
        H = torch.zeros(self.m, self.m, dtype=DTYPE)
        v = torch.zeros(self.m, dtype=DTYPE)
        with torch.no_grad():
            for k, sl in enumerate(self.slices):
                _, V = self._whitened_chunk(th, L, k)
                H.addmm_(V, V.T)
                v.addmv_(V, self.y[sl])
        return 0.5 * (H + H.T), v

    def factors(
        self, theta: torch.Tensor
    ) -> tuple[float, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(F, L, L_B, c)`` at ``theta`` without gradients (for prediction)."""
        with torch.no_grad():
            L, _ = _cholesky(self.model.cross(theta, self.tu, self.tu))
            H, v = self.whitened(theta.numpy(), L)
            tr_k = self.model.diag(theta, self.tf).sum()
            F, LB, c = _whitened_bound(H, v, self.yy, tr_k, self.model.noise(theta), self.n)
        return float(F), L, LB, c

    def value_and_grad(
        self, theta_np: np.ndarray, grad: bool = True
    ) -> tuple[float, np.ndarray | None]:
        """``(F, dF/dtheta)`` (gradient ``None`` if not ``grad`` or not finite).

        Gradient. With ``G = sym(dF/dH)`` and ``g = dF/dv`` from autograd on the small
        graph, ``R_c = 2 G V_c + g y_c^T`` and, using ``sum_c V_c V_c^T = H``,
        ``sum_c V_c y_c = v``:

            dF = sum_c <W_c, dK_c> - <tril(L^{-T} (2 G H + g v^T)), dL>  (+ the direct
            terms in s^2 and tr K_ff),   W_c = L^{-T} R_c   (M x C).

        The ``dL`` part is back-propagated through the Cholesky of ``K_uu``; the
        ``dK_c`` part is summed chunk by chunk in closed form (:meth:`_gradient`).
        """
        model = self.model
        th = np.asarray(theta_np, dtype=np.float64)
        theta = torch.tensor(th, dtype=DTYPE, requires_grad=grad)
        with torch.set_grad_enabled(grad):
            L, _ = _cholesky(model.cross(theta, self.tu, self.tu))
        Ld = L.detach()
        H, v = self.whitened(th, Ld)
        with torch.set_grad_enabled(grad):
            H.requires_grad_(grad)
            v.requires_grad_(grad)
            tr_k = model.diag(theta, self.tf).sum()
            F, _, _ = _whitened_bound(H, v, self.yy, tr_k, model.noise(theta), self.n)
        value = float(F.detach())
        if not grad or not math.isfinite(value):
            return value, None
        F.backward()
        G = 0.5 * (H.grad + H.grad.T)
        g = v.grad
        P = 2.0 * (G @ H.detach()) + torch.outer(g, v.detach())
        coef = torch.tril(torch.linalg.solve_triangular(Ld.T, P, upper=True))
        (-(coef * L).sum()).backward()
        out = theta.grad.numpy().copy()
        out += self._gradient(th, Ld, 2.0 * G, g)
        return value, out if np.all(np.isfinite(out)) else None

    def _gradient(
        self, th: np.ndarray, L: torch.Tensor, G2: torch.Tensor, g: torch.Tensor
    ) -> np.ndarray:
        """``sum_c <W_c, dK_c/dtheta>`` with ``W_c = L^{-T} (G2 V_c + g y_c^T)`` (M x C).

        Per term ``K_t = alpha_i S_ij beta_j`` (:meth:`SGPRModel.term_parts`) and
        ``Ws = W * S``: every derivative is ``sum_ij Ws_ij a_i b_j`` for a few vector
        pairs (a, b) (the SE distance ``d^2 = tu^2 - 2 tu tf + tf^2`` has rank 3, PER's
        ``cos(w d)`` and ``d sin(w d)`` ranks 2 and 4, LIN factors are diagonal
        scalings), so it is one thin product ``Ws @ [b_1 ... b_r]`` per term and
        chunk; only RQ needs elementwise passes. Derivatives in the log of positive
        parameters, as ``theta`` stores them:

            log v:  K_t;   SE log l: K_t d^2 / l^2;   PER log l: -2 K_t (cos(w d) - 1) / l^2;
            PER log p: K_t (w / l^2) d sin(w d);   LIN c_k: -(alpha_-k S beta + alpha S beta_-k);
            RQ log l: K_t 2 a u / (1 + u);   RQ log a: K_t a (u / (1 + u) - log(1 + u));
            change (location, start, end, log width): (alpha m_u) S beta + alpha S (beta m_f),
            with u = d^2 / (2 a l^2), w = 2 pi / p, m = (ds / d theta) / s
            (:func:`_change_vector`; ``alpha_-k`` keeps the change factors).
        """
        model = self.model
        grad = np.zeros(th.size)
        idx = model._index
        tu = self.tu
        cached = self.cache_s and self.cache_v
        with torch.no_grad():
            # W_c = L^{-T} (G2 V_c + g y_c^T) = Gw V_c + gw y_c^T: one product per chunk
            Gw = torch.linalg.solve_triangular(L.T, G2, upper=True)
            gw = torch.linalg.solve_triangular(L.T, g[:, None], upper=True)[:, 0]
            for k, sl in enumerate(self.slices):
                tf = self.tf[sl]
                cols = tf.shape[0]
                if cached:
                    parts = self._parts_cached(th, k)
                    V = self._buf(("V", k), cols)
                else:
                    parts, V = self._whitened_chunk(th, L, k)
                W = torch.matmul(Gw, V, out=self._buf(("W",), cols))
                W.addr_(gw, self.y[sl])
                for i, names in enumerate(model.terms):
                    S, alpha, beta = parts[i]
                    log_v = th[idx[(i, -1, "variance")]]
                    # K_t = alpha S beta^T; a LIN-only term has S = None, v in alpha
                    Ws = W if S is None else torch.mul(W, S, out=self._buf(("Ws",), cols))
                    alpha = torch.ones_like(tu) if alpha is None else alpha
                    beta = torch.ones_like(tf) if beta is None else beta
                    cols_: dict[str, torch.Tensor] = {"b": beta}
                    rows: list[tuple[int, float, torch.Tensor, str]] = []  # (param, coef, a, col)
                    rows.append((idx[(i, -1, "variance")], 1.0, alpha, "b"))
                    lin = [j for j, f in enumerate(names) if f == "LIN"]
                    scale = math.exp(log_v) if S is None else 1.0
                    change = self._change_rows(th, i, alpha, beta, tf, cols_, rows)
                    for j, name in enumerate(names):
                        if name == "LIN":
                            a_k, b_k = torch.full_like(tu, scale), torch.ones_like(tf)
                            for j2 in lin:
                                if j2 != j:
                                    c2 = float(th[idx[(i, j2, "offset")]])
                                    a_k, b_k = a_k * (tu - c2), b_k * (tf - c2)
                            if change is not None:  # the term's change factors
                                a_k, b_k = a_k * change[0], b_k * change[1]
                            cols_[f"lin{j}"] = b_k
                            p = idx[(i, j, "offset")]
                            rows += [(p, -1.0, a_k, "b"), (p, -1.0, alpha, f"lin{j}")]
                        elif name == "SE":
                            inv = math.exp(-2.0 * th[idx[(i, j, "lengthscale")]])
                            cols_["b_t"], cols_["b_t2"] = beta * tf, beta * tf * tf
                            p = idx[(i, j, "lengthscale")]
                            rows += [
                                (p, inv, alpha * tu * tu, "b"),
                                (p, -2.0 * inv, alpha * tu, "b_t"),
                                (p, inv, alpha, "b_t2"),
                            ]
                        elif name == "PER":
                            inv = math.exp(-2.0 * th[idx[(i, j, "lengthscale")]])
                            w = 2.0 * math.pi * math.exp(-th[idx[(i, j, "period")]])
                            ca, sa = torch.cos(w * tu), torch.sin(w * tu)
                            cb, sb = torch.cos(w * tf), torch.sin(w * tf)
                            cols_[f"cb{j}"], cols_[f"sb{j}"] = beta * cb, beta * sb
                            cols_[f"tcb{j}"], cols_[f"tsb{j}"] = beta * tf * cb, beta * tf * sb
                            p = idx[(i, j, "lengthscale")]
                            rows += [
                                (p, -2.0 * inv, alpha * ca, f"cb{j}"),
                                (p, -2.0 * inv, alpha * sa, f"sb{j}"),
                                (p, 2.0 * inv, alpha, "b"),
                            ]
                            p, wl = idx[(i, j, "period")], w * inv
                            rows += [
                                (p, wl, alpha * tu * sa, f"cb{j}"),
                                (p, -wl, alpha * tu * ca, f"sb{j}"),
                                (p, -wl, alpha * sa, f"tcb{j}"),
                                (p, wl, alpha * ca, f"tsb{j}"),
                            ]
                        elif name == "RQ":  # elementwise
                            a = math.exp(th[idx[(i, j, "alpha")]])
                            inv = math.exp(-2.0 * th[idx[(i, j, "lengthscale")]])
                            u = torch.mul(self.d2(k), 0.5 * inv / a, out=self._buf(("tmp1",), cols))
                            frac = torch.add(u, 1.0, out=self._buf(("tmp2",), cols))
                            torch.div(u, frac, out=frac)
                            u.log1p_()
                            frac.sub_(u).mul_(Ws)  # Ws (u/(1+u) - log(1+u))
                            u.mul_(Ws)  # Ws log(1+u)
                            wl = u @ beta
                            wd = frac @ beta
                            grad[idx[(i, j, "lengthscale")]] += 2.0 * a * float(alpha @ (wd + wl))
                            grad[idx[(i, j, "alpha")]] += a * float(alpha @ wd)
                    names_ = list(cols_)
                    Y = Ws @ torch.stack([cols_[c] for c in names_], 1)  # (M, r)
                    col_of = {c: q for q, c in enumerate(names_)}
                    for p, coef, a_vec, col in rows:
                        grad[p] += coef * float(a_vec @ Y[:, col_of[col]])
        return grad

    def _change_rows(
        self,
        th: np.ndarray,
        i: int,
        alpha: torch.Tensor,
        beta: torch.Tensor,
        tf: torch.Tensor,
        cols: dict[str, torch.Tensor],
        rows: list,
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Add term ``i``'s change-factor derivatives to ``cols``/``rows`` of :meth:`_gradient`;
        return the product of its change factors ``(prod s(t_u), prod s(t))`` (``None``
        without change factors).

        A change factor ``s(t) s(t')`` is a diagonal scaling folded into ``alpha`` and
        ``beta``, so with ``m = (ds / d theta) / s`` (:func:`_change_vector`)
        ``dK_t = (alpha m_u)_i S_ij beta_j + alpha_i S_ij (beta m_f)_j``: two thin rows
        per group parameter, added (``+=``) to the parameter every term of the group shares.
        """
        model, tu = self.model, self.tu
        product = None
        for j, name in enumerate(model.terms[i]):
            if (g := factor_group(name)) is None:
                continue
            where, width = model.change_values(th, g)
            kind = factor_kernel(name)
            sa, ma = _change_vector(kind, tu, where, width, grad=True)
            sb, mb = _change_vector(kind, tf, where, width, grad=True)
            product = (sa, sb) if product is None else (product[0] * sa, product[1] * sb)
            for q, p in enumerate(model.groups[g]):
                cols[f"chg{j}.{q}"] = beta * mb[q]
                rows += [(p, 1.0, alpha * ma[q], "b"), (p, 1.0, alpha, f"chg{j}.{q}")]
        return product

    def _parts_cached(self, th: np.ndarray, k: int) -> list:
        """The parts of chunk ``k`` whose ``S`` buffers the value pass left in the cache."""
        idx, tu, tf = self.model._index, self.tu, self.tf[self.slices[k]]
        out = []
        for i in range(len(self.model.terms)):
            alpha, beta = _rank_one(self.model, th, i, tu, tf, ones=not self.stationary[i])
            if not self.stationary[i]:
                v = math.exp(float(th[idx[(i, -1, "variance")]]))
                out.append((None, v * alpha, beta))
            else:
                out.append((self._buf(("S", i, k), tf.shape[0]), alpha, beta))
        return out


def _problem(
    fit: FitResult,
    dataset: Dataset,
    inducing: int,
    cache_bytes: float = 3e9,
    lengthscale_floor: float = 0.0,
) -> tuple[_Problem, np.ndarray]:
    """The :class:`_Problem` of ``fit`` on ``dataset`` and ``fit``'s ``theta``."""
    model = SGPRModel(fit, dataset, lengthscale_floor)
    theta = model.theta_from_fit(fit)
    tf = torch.tensor(model.scale(dataset.x), dtype=DTYPE)
    tu = torch.tensor(model.scale(inducing_inputs(dataset.x, inducing)), dtype=DTYPE)
    y = torch.tensor(dataset.y_standardised, dtype=DTYPE)
    return _Problem(model, tu, tf, y, cache_bytes), theta


def sgpr_bound(fit: FitResult, dataset: Dataset, *, inducing: int = DEFAULT_INDUCING) -> float:
    """The collapsed bound ``F`` (nats, summed over points) at ``fit``'s hyperparameters
    with ``inducing`` evenly spaced inducing inputs; NaN on a numerical failure."""
    try:
        with _threads(inducing, dataset.n):
            problem, theta = _problem(fit, dataset, inducing, cache_bytes=0.0)
            value, _ = problem.value_and_grad(theta, grad=False)
    except (SGPRError, ValueError, KeyError, RuntimeError):
        return math.nan
    return value if math.isfinite(value) else math.nan


def _rank_one(
    model: SGPRModel, th: np.ndarray, i: int, tu: torch.Tensor, tf: torch.Tensor, ones: bool
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Term ``i``'s rank-one factors (LIN and change factors, in the term's order):
    ``prod (t_u - c) prod s(t_u)`` on the inducing inputs and the same on the chunk
    (``None`` without any, or ones if ``ones``: a lone ``C``)."""
    idx = model._index
    alpha = beta = None
    for j, name in enumerate(model.terms[i]):
        if name == "LIN":
            c = float(th[idx[(i, j, "offset")]])
            alpha = tu - c if alpha is None else alpha * (tu - c)
            beta = tf - c if beta is None else beta * (tf - c)
        elif (g := factor_group(name)) is not None:
            where, width = model.change_values(th, g)
            sa, _ = _change_vector(factor_kernel(name), tu, where, width)
            sb, _ = _change_vector(factor_kernel(name), tf, where, width)
            alpha = sa if alpha is None else alpha * sa
            beta = sb if beta is None else beta * sb
    if alpha is None and ones:
        alpha, beta = torch.ones_like(tu), torch.ones_like(tf)
    return alpha, beta


def _change_vector(
    kind: str, t: torch.Tensor, where: list, width, grad: bool = False
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A change factor's ``s(t)`` (its kernel is ``s(t) s(t')``) and, if ``grad``, the
    relative derivatives ``m = (ds / d theta) / s`` for the group's parameters (location,
    log width) or (start, end, log width); the same formulas as
    :meth:`prolas.gp.gram.GramModel._change_factor`.

    With ``z = (t - l) / w`` and ``σ = expit(z)``: CP_AFTER ``s = σ``, CP_BEFORE
    ``s = 1 - σ``, CW_INSIDE ``s = u = σ_start (1 - σ_end)``, CW_OUTSIDE ``s = 1 - u``
    (written ``(1 - σ_start) + σ_start σ_end``, without cancellation). ``m`` stays
    bounded where ``s`` underflows; ``alpha * m`` is then the derivative of alpha.
    ``where`` and ``width`` are floats or 0-d tensors (differentiable).
    """
    ms: list[torch.Tensor] = []
    if kind in ("CP_BEFORE", "CP_AFTER"):
        z = (t - where[0]) / width
        sig, one_minus = torch.sigmoid(z), torch.sigmoid(-z)
        if kind == "CP_AFTER":
            s = sig
            if grad:
                ms = [-one_minus / width, -one_minus * z]
        else:
            s = one_minus
            if grad:
                ms = [sig / width, sig * z]
        return s, ms
    z1, z2 = (t - where[0]) / width, (t - where[1]) / width
    s1, c1 = torch.sigmoid(z1), torch.sigmoid(-z1)
    s2, c2 = torch.sigmoid(z2), torch.sigmoid(-z2)
    u = s1 * c2
    inside = [-c1 / width, s2 / width, -c1 * z1 + s2 * z2] if grad else []
    if kind == "CW_INSIDE":
        return u, inside
    s = c1 + s1 * s2
    if grad:
        ratio = torch.where(s > 0, u / torch.where(s > 0, s, 1.0), 0.0)
        ms = [-ratio * m for m in inside]
    return s, ms


# --- refit --------------------------------------------------------------------------


def _failed(fit: FitResult, dataset: Dataset, t0: float, error: str, name: str) -> FitResult:
    return FitResult.failed(
        fit.expression, dataset.n, fit.n_params, error, time.perf_counter() - t0, approximation=name
    )


def refit_sgpr(
    fit: FitResult,
    dataset: Dataset,
    *,
    inducing: int = DEFAULT_INDUCING,
    max_iter: int = 50,
    lengthscale_floor: float = 0.0,
) -> FitResult:
    """Refit ``fit``'s hyperparameters on all points of ``dataset`` by the SGPR bound.

    Starts from ``fit`` (natural units, e.g. fitted on a subsample), maximises the
    collapsed bound ``F`` (module docstring) with L-BFGS-B for at most ``max_iter``
    iterations (``2 max_iter + 10`` evaluations), inducing inputs fixed at
    ``inducing`` evenly spaced locations (:func:`inducing_inputs`). If the optimiser
    ends below the starting bound, the start is kept.
    ``lengthscale_floor``: SE and RQ lengthscales at least this many median spacings
    (:attr:`prolas.gp.FitConfig.lengthscale_floor`); a start below it is clipped up.

    The optimiser sees ``-F / N`` and stops when an iteration gains less than about
    ``1e-3`` nats in all (``ftol = 1e-3 / N``), when the projected gradient of ``F / N``
    is below ``1e-5`` per log-parameter, or after ``max_iter`` iterations. Cost per
    evaluation: three M^2 N matrix products and a few passes over the M x N grid
    (module docstring); measured in ``benchmarks/results/sgpr_refit/SCALABLE.md``
    (N = 100 000, M = 512, three terms: 172 s, 2.0 GB peak RSS on 2 shared cores).

    Returns an ``"ok"`` FitResult in natural units with ``log_likelihood = F`` (a lower
    bound on the exact log marginal likelihood, nats summed over N points),
    ``bic = F - k/2 ln N`` and ``approximation = "sgpr-M"`` (M = the number of
    inducing inputs actually used, at most the number of distinct inputs); or, on a
    numerical failure (non-finite bound, Cholesky failing after the bounded jitter
    schedule, an input fit that is not ``"ok"``), a ``"failed"`` result with the
    reason. Never raises for numerical trouble; an ``"ok"`` result holds only finite
    numbers.
    """
    t0 = time.perf_counter()
    z = inducing_inputs(dataset.x, max(1, int(inducing)))
    with _threads(z.size, dataset.n):
        return _refit(fit, dataset, z, max_iter, t0, lengthscale_floor)


def _refit(
    fit: FitResult,
    dataset: Dataset,
    z: np.ndarray,
    max_iter: int,
    t0: float,
    lengthscale_floor: float = 0.0,
) -> FitResult:
    name = f"sgpr-{z.size}"
    if not fit.ok or not fit.terms or fit.noise_variance is None:
        return _failed(fit, dataset, t0, f"start fit is not usable ({fit.status})", name)
    try:
        problem, theta0 = _problem(fit, dataset, z.size, lengthscale_floor=lengthscale_floor)
    except (ValueError, KeyError) as e:
        return _failed(fit, dataset, t0, f"cannot read the start fit: {e}", name)
    model = problem.model
    if not (torch.isfinite(problem.tf).all() and torch.isfinite(problem.y).all()):
        return _failed(fit, dataset, t0, "inputs or targets not finite after scaling", name)
    best: list = [theta0, -math.inf]
    errors: list[str] = []
    scale = float(dataset.n)  # the optimiser sees F / N (gradients of order 1)

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        try:
            value, g = problem.value_and_grad(theta, grad=True)
        except (SGPRError, RuntimeError) as e:
            errors.append(str(e))
            return 1e10, np.zeros_like(theta)
        if g is None or not math.isfinite(value):
            errors.append("non-finite bound or gradient")
            return 1e10, np.zeros_like(theta)
        if value > best[1]:
            best[0], best[1] = theta.copy(), value
        return -value / scale, -g / scale

    objective(theta0)
    start_value = best[1]
    if not math.isfinite(start_value):
        reason = errors[-1] if errors else "non-finite bound"
        return _failed(fit, dataset, t0, f"bound at the start: {reason}", name)
    if max_iter > 0:
        options = {"maxiter": max_iter, "maxfun": 2 * max_iter + 10}
        options |= {"ftol": 1e-3 / dataset.n, "gtol": 1e-5}
        try:
            minimize(
                objective,
                theta0,
                jac=True,
                method="L-BFGS-B",
                bounds=list(zip(model.lower, model.upper)),
                options=options,
            )
        except (ValueError, ArithmeticError, RuntimeError) as e:  # keep the best point seen
            errors.append(f"optimiser: {e}")
    theta, value = best  # never below the start: the start is in ``best`` too
    terms, noise = model.to_natural(theta)
    out = replace(
        fit,
        status="ok",
        n=dataset.n,
        log_likelihood=float(value),
        bic=bic(value, fit.n_params, dataset.n),
        terms=terms,
        noise_variance=float(noise),
        seconds=time.perf_counter() - t0,
        error=None,
        restart_log_likelihoods=(),
        approximation=name,
    )
    numbers = [out.log_likelihood, out.bic, out.noise_variance]
    numbers += [t.variance for t in terms] + [
        v for t in terms for f in t.factors for v in f.params.values()
    ]
    if not all(math.isfinite(v) for v in numbers):
        return _failed(fit, dataset, t0, "non-finite hyperparameter after the refit", name)
    return out


# --- prediction ---------------------------------------------------------------------


def _sgpr_posterior(
    fit: FitResult, dataset: Dataset, x_new: np.ndarray, inducing: int, per_term: bool
) -> list[tuple[np.ndarray, np.ndarray]]:
    """SGPR (DTC / Titsias) predictive mean and latent variance, standardised units.

    With ``Σ = (K_uu + K_uf K_fu / s^2)^{-1}`` and ``K_*u`` the (per-term) cross
    covariance (m x M),

        mean = K_*u Σ K_uf y' / s^2 = (L_B^{-1} L^{-1} K_u*)^T c,
        var  = k_** - ||L^{-1} K_u*||^2 + ||L_B^{-1} L^{-1} K_u*||^2   (column-wise).

    For a term t, ``K_*u`` and ``k_**`` are the term's own (the prior covariance of
    f_t with f(Z) is ``K_t(x*, Z)``); the term means sum to the full mean.
    """
    with _threads(inducing, dataset.n):
        return _posterior_parts(fit, dataset, x_new, inducing, per_term)


def _posterior_parts(
    fit: FitResult, dataset: Dataset, x_new: np.ndarray, inducing: int, per_term: bool
) -> list[tuple[np.ndarray, np.ndarray]]:
    problem, theta_np = _problem(fit, dataset, inducing, cache_bytes=0.0)
    model, tu = problem.model, problem.tu
    theta = torch.tensor(theta_np, dtype=DTYPE)
    ts = torch.tensor(model.scale(np.asarray(x_new, dtype=np.float64)), dtype=DTYPE)
    _, L, LB, c = problem.factors(theta)
    with torch.no_grad():
        n_out = len(model.terms) if per_term else 1
        means = [np.empty(ts.shape[0]) for _ in range(n_out)]
        vars_ = [np.empty(ts.shape[0]) for _ in range(n_out)]
        for sl in _chunks(ts.shape[0]):
            Ksu = model.cross(theta, ts[sl], tu, per_term=per_term)
            kss = model.diag(theta, ts[sl], per_term=per_term)
            if not per_term:
                Ksu, kss = [Ksu], [kss]
            for k, (K, d) in enumerate(zip(Ksu, kss)):
                t1 = torch.linalg.solve_triangular(L, K.T, upper=False)
                t2 = torch.linalg.solve_triangular(LB, t1, upper=False)
                means[k][sl] = (t2.T @ c).numpy()
                v = d - (t1 * t1).sum(0) + (t2 * t2).sum(0)
                vars_[k][sl] = np.clip(v.numpy(), 0.0, None)
    return list(zip(means, vars_))


def predict_sgpr(
    fit: FitResult,
    dataset: Dataset,
    x_new: np.ndarray,
    include_noise: bool = False,
    *,
    inducing: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """SGPR predictive mean and variance at ``x_new`` in y's original units.

    Same contract as :func:`prolas.gp.predict`: ``(mean (m,), variance (m,))``, the
    variance of the latent function plus the noise if ``include_noise``. ``inducing``
    defaults to the M of ``fit.approximation`` (``"sgpr-M"``), else
    :data:`DEFAULT_INDUCING`. Raises :class:`SGPRError` if the Cholesky fails.
    """
    m = _inducing_of(fit) if inducing is None else inducing
    mean, var = _sgpr_posterior(fit, dataset, x_new, m, per_term=False)[0]
    if include_noise:
        var = var + fit.noise_variance
    return dataset.unstandardise(mean), var * dataset.y_std**2


def decompose_sgpr(
    fit: FitResult, dataset: Dataset, x_new: np.ndarray, *, inducing: int | None = None
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Per-term SGPR posterior ``(label, mean, variance)`` at ``x_new``, original units.

    Same contract as :func:`prolas.gp.decompose`: without the data mean; the means sum
    to :func:`predict_sgpr`'s mean minus ``dataset.y_mean``.
    """
    m = _inducing_of(fit) if inducing is None else inducing
    parts = _sgpr_posterior(fit, dataset, x_new, m, per_term=True)
    return [
        (term.label, mean * dataset.y_std, var * dataset.y_std**2)
        for term, (mean, var) in zip(fit.terms, parts)
    ]


def _inducing_of(fit: FitResult) -> int:
    a = fit.approximation or ""
    if a.startswith("sgpr-") and a[5:].isdigit():
        return int(a[5:])
    return DEFAULT_INDUCING
