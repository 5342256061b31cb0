"""The SGPR bound of Titsias (2009) and its exact gradient, in chunks of the data.

Same model and conventions as :mod:`prolas.gp` (docs/conventions.md): for the canonical
form of an expression

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
each hyperparameter's derivative of ``K_c`` (:meth:`SGPRProblem.gradient`; each
kernel's part comes from its registry entry, :mod:`prolas.kernels`: SE's ``d^2``,
PER's ``cos(w d)`` and ``d sin(w d)``, LIN and change factors are low-rank, so most
contractions are thin matrix products; PERC, multiplied in as it is, takes an elementwise
pass against the term without it; a change operator's location and width are
shared by every term of its group, whose contributions add up). Cost per
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
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from prolas.gp.fit import DTYPE
from prolas.gp.sgpr_kernel import STATIONARY_ROLES, SGPRModel
from prolas.kernels.spec import DENSE, LOWRANK, MULTIPLY, VECTOR, TermGradient
from prolas.threads import torch_threads

__all__ = [
    "CHUNK",
    "JITTER_SCHEDULE",
    "SMALL_WORK",
    "SGPRError",
    "SGPRProblem",
    "chunks",
    "jittered_cholesky",
    "sgpr_threads",
    "whitened_bound",
]

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


@contextmanager
def sgpr_threads(m: int, n: int) -> Iterator[None]:
    """One torch thread for small problems (:data:`SMALL_WORK`); else leave the setting."""
    if float(m) * m * n > SMALL_WORK:
        yield
        return
    with torch_threads(1):
        yield


def chunks(n: int, size: int = CHUNK):
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def jittered_cholesky(K: torch.Tensor) -> tuple[torch.Tensor, float]:
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


def whitened_bound(
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


class SGPRProblem:
    """The data side of the bound for one model: inputs, inducing inputs and targets.

    ``tf`` (N,) and ``tu`` (M,) are scaled inputs, ``y`` (N,) standardised targets.
    The M x N work runs chunk by chunk (:data:`CHUNK` columns) in preallocated
    buffers (``out=`` and in-place operations: allocating a fresh 33 MB tensor per
    operation costs more than the operation, in page faults). Per chunk, the squared
    distances ``(tu_i - tf_j)^2`` are kept (if the expression has a dense stationary
    factor: SE, RQ),
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
        self.slices = list(chunks(self.n))
        # terms with a stationary factor; the others are rank one (LIN, change, C)
        self.stationary = [model.stationary(i) for i in range(len(model.terms))]
        need_d2 = any(k.sgpr_role == DENSE for term in model.factors for k, _ in term)
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
        """:meth:`~prolas.gp.sgpr_kernel.SGPRModel.term_parts` for chunk ``k`` at ``th``
        (numpy), in buffers.

        Per term ``(S, alpha, beta)``; ``S`` is a buffer (cached per chunk when
        ``cache_s``, else shared by the chunks), rewritten by the next call.
        """
        model, tu = self.model, self.tu
        tf, d2 = self.tf[self.slices[k]], self.d2(k)
        cols = tf.shape[0]

        def scratch(name: str) -> torch.Tensor:
            return self._buf((name,), cols)

        out = []
        for i in range(len(model.factors)):
            alpha, beta = model.rank_one(th, i, tu, tf, ones=not self.stationary[i])
            log_v = float(th[model.variance_index[i]])
            if not self.stationary[i]:
                out.append((None, math.exp(log_v) * alpha, beta))
                continue
            S = self._buf(("S", i, k if self.cache_s else -1), cols)
            out.append((self._dense_part(th, i, tf, d2, S, scratch), alpha, beta))
        return out

    def _dense_part(
        self,
        th: np.ndarray,
        i: int,
        tf: torch.Tensor,
        d2: torch.Tensor | None,
        S: torch.Tensor,
        scratch,
        skip: int | None = None,
    ) -> torch.Tensor:
        """Term ``i``'s stationary part ``S = v_t exp(E_t) prod_m k_m`` (M x C) between the
        inducing inputs and the chunk inputs ``tf`` (squared distances ``d2``), written
        into ``S``; without its factor ``skip`` (for the derivative of a factor
        multiplied in, :meth:`_rest`)."""
        tu = self.tu
        left, right, const, dense = [], [], float(th[self.model.variance_index[i]]), False
        mult = []
        for j, (kernel, pos) in enumerate(self.model.factors[i]):
            if j == skip:
                continue
            if kernel.sgpr_role == LOWRANK:
                lefts, rights, c = kernel.sgpr_lowrank_theta(tu, tf, [th[p] for p in pos])
                left += lefts
                right += rights
                const -= c
            elif kernel.sgpr_role == DENSE:  # log k = coef * g (g = d2 if None)
                g, coef = kernel.sgpr_log_into(d2, [th[p] for p in pos], scratch)
                if not dense:
                    torch.mul(d2 if g is None else g, coef, out=S)
                    dense = True
                else:
                    S.add_(d2 if g is None else g, alpha=coef)
            elif kernel.sgpr_role == MULTIPLY:
                mult.append((kernel, pos))
        left.append(torch.ones_like(tu))
        right.append(torch.full_like(tf, const))
        lo, ro = torch.stack(left, 1), torch.stack(right, 0)
        if dense:
            S.addmm_(lo, ro)
        else:
            torch.matmul(lo, ro, out=S)
        S.exp_()
        for kernel, pos in mult:
            S.mul_(kernel.sgpr_value_theta(tu, tf, [th[p] for p in pos]))
        return S

    def _rest(self, th: np.ndarray, i: int, k: int, j: int) -> torch.Tensor:
        """Term ``i``'s stationary part on chunk ``k`` without its factor ``j`` (a buffer,
        rewritten by the next call)."""
        tf = self.tf[self.slices[k]]
        cols = tf.shape[0]
        return self._dense_part(
            th,
            i,
            tf,
            self.d2(k),
            self._buf(("rest",), cols),
            lambda name: self._buf((name,), cols),
            skip=j,
        )

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
            L, _ = jittered_cholesky(self.model.cross(theta, self.tu, self.tu))
            H, v = self.whitened(theta.numpy(), L)
            tr_k = self.model.diag(theta, self.tf).sum()
            F, LB, c = whitened_bound(H, v, self.yy, tr_k, self.model.noise(theta), self.n)
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
        ``dK_c`` part is summed chunk by chunk in closed form (:meth:`gradient`).
        """
        model = self.model
        th = np.asarray(theta_np, dtype=np.float64)
        theta = torch.tensor(th, dtype=DTYPE, requires_grad=grad)
        with torch.set_grad_enabled(grad):
            L, _ = jittered_cholesky(model.cross(theta, self.tu, self.tu))
        Ld = L.detach()
        H, v = self.whitened(th, Ld)
        with torch.set_grad_enabled(grad):
            H.requires_grad_(grad)
            v.requires_grad_(grad)
            tr_k = model.diag(theta, self.tf).sum()
            F, _, _ = whitened_bound(H, v, self.yy, tr_k, model.noise(theta), self.n)
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
        out += self.gradient(th, Ld, 2.0 * G, g)
        return value, out if np.all(np.isfinite(out)) else None

    def gradient(
        self, th: np.ndarray, L: torch.Tensor, G2: torch.Tensor, g: torch.Tensor
    ) -> np.ndarray:
        """``sum_c <W_c, dK_c/dtheta>`` with ``W_c = L^{-T} (G2 V_c + g y_c^T)`` (M x C).

        Per term ``K_t = alpha_i S_ij beta_j``
        (:meth:`~prolas.gp.sgpr_kernel.SGPRModel.term_parts`) and ``Ws = W * S``: the
        derivative in ``log v_t`` is ``sum_ij Ws_ij alpha_i beta_j``; each factor adds its
        own (:class:`~prolas.kernels.spec.TermGradient`), mostly as thin rows ``a`` against
        columns ``b`` with ``sum_ij Ws_ij a_i b_j``, so that a term and chunk cost one
        product ``Ws @ [b_1 ... b_r]``: SE's ``d^2 = tu^2 - 2 tu tf + tf^2`` has rank 3,
        PER's ``cos(w d)`` and ``d sin(w d)`` ranks 2 and 4, rank-one factors are
        diagonal scalings (:meth:`_slope_rows`, :meth:`_change_rows`); RQ needs
        elementwise passes, and so does PERC (against the term without it,
        :meth:`_rest`). Derivatives are in the log of positive parameters, as ``theta``
        stores them (the formulas are in each kernel's module).
        """
        model = self.model
        grad = np.zeros(th.size)
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
                for i, factors in enumerate(model.factors):
                    S, alpha, beta = parts[i]
                    log_v = th[model.variance_index[i]]
                    # K_t = alpha S beta^T; a rank-one term has S = None, v in alpha
                    Ws = W if S is None else torch.mul(W, S, out=self._buf(("Ws",), cols))
                    term = TermGradient(
                        tu,
                        tf,
                        torch.ones_like(tu) if alpha is None else alpha,
                        torch.ones_like(tf) if beta is None else beta,
                        Ws,
                        grad,
                        d2=lambda k=k: self.d2(k),
                        scratch=lambda name, cols=cols: self._buf((name,), cols),
                        W=W,
                        rest=lambda j, i=i, k=k: self._rest(th, i, k, j),
                    )
                    term.cols["b"] = term.beta
                    term.rows.append((model.variance_index[i], 1.0, term.alpha, "b"))
                    scale = math.exp(log_v) if S is None else 1.0
                    change = self._change_rows(th, i, term)
                    for j, (kernel, pos) in enumerate(factors):
                        term.factor = j
                        if kernel.sgpr_role == VECTOR and not kernel.vector_relative:
                            self._slope_rows(th, i, j, scale, change, term)
                        elif kernel.sgpr_role in STATIONARY_ROLES:
                            kernel.sgpr_gradient(term, pos, [th[p] for p in pos])
                    names = list(term.cols)
                    Y = Ws @ torch.stack([term.cols[c] for c in names], 1)  # (M, r)
                    col_of = {c: q for q, c in enumerate(names)}
                    for p, coef, a_vec, col in term.rows:
                        grad[p] += coef * float(a_vec @ Y[:, col_of[col]])
        return grad

    def _slope_rows(
        self,
        th: np.ndarray,
        i: int,
        j: int,
        scale: float,
        change: tuple[torch.Tensor, torch.Tensor] | None,
        term: TermGradient,
    ) -> None:
        """Add the rows of factor ``j`` of term ``i``, a rank-one factor whose ``s`` has
        constant slopes in its parameters (LIN: ``s = t - c``, ``ds/dc = -1``).

        ``dK_t = slope (a_k S beta + alpha S b_k)`` with ``a_k``, ``b_k`` the product of
        the term's other rank-one factors (``scale`` = ``v_t`` when the term has no
        stationary part, its change factors ``change`` last): no division by ``s``,
        which vanishes at ``t = c``.
        """
        model, tu, tf = self.model, term.tu, term.tf
        factors = model.factors[i]
        a_k, b_k = torch.full_like(tu, scale), torch.ones_like(tf)
        for j2, (other, pos2) in enumerate(factors):
            if j2 != j and other.sgpr_role == VECTOR and not other.vector_relative:
                v2 = model.values_np(th, pos2)
                a_k, b_k = a_k * other.vector(tu, v2), b_k * other.vector(tf, v2)
        if change is not None:  # the term's change factors
            a_k, b_k = a_k * change[0], b_k * change[1]
        key = f"slope{j}"
        term.cols[key] = b_k
        kernel, pos = factors[j]
        for p, slope in zip(pos, kernel.vector_slopes):
            term.rows += [(p, slope, a_k, "b"), (p, slope, term.alpha, key)]

    def _change_rows(
        self, th: np.ndarray, i: int, term: TermGradient
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Add term ``i``'s change-factor derivatives to ``term``'s rows; return the product
        of its change factors ``(prod s(t_u), prod s(t))`` (``None`` without any).

        A change factor ``s(t) s(t')`` is a diagonal scaling folded into ``alpha`` and
        ``beta``, so with ``m = (ds / d theta) / s`` (its entry's
        :meth:`~prolas.kernels.spec.Kernel.vector_and_m`)
        ``dK_t = (alpha m_u)_i S_ij beta_j + alpha_i S_ij (beta m_f)_j``: two thin rows
        per group parameter, added (``+=``) to the parameter every term of the group shares.
        """
        product = None
        for j, (kernel, pos) in enumerate(self.model.factors[i]):
            if not (kernel.sgpr_role == VECTOR and kernel.vector_relative):
                continue
            v = self.model.values_np(th, pos)
            sa, ma = kernel.vector_and_m(term.tu, v)
            sb, mb = kernel.vector_and_m(term.tf, v)
            product = (sa, sb) if product is None else (product[0] * sa, product[1] * sb)
            for q, p in enumerate(pos):
                key = f"chg{j}.{q}"
                term.cols[key] = term.beta * mb[q]
                term.rows += [(p, 1.0, term.alpha * ma[q], "b"), (p, 1.0, term.alpha, key)]
        return product

    def _parts_cached(self, th: np.ndarray, k: int) -> list:
        """The parts of chunk ``k`` whose ``S`` buffers the value pass left in the cache."""
        model, tu, tf = self.model, self.tu, self.tf[self.slices[k]]
        out = []
        for i in range(len(model.terms)):
            alpha, beta = model.rank_one(th, i, tu, tf, ones=not self.stationary[i])
            if not self.stationary[i]:
                v = math.exp(float(th[model.variance_index[i]]))
                out.append((None, v * alpha, beta))
            else:
                out.append((self._buf(("S", i, k), tf.shape[0]), alpha, beta))
        return out
