"""Expression encodings for the KG-VAE: r = [r_g, r_d] (PROLAS §2.2).

**Grammar representation r_g.** A fixed-length vector of one-hot slots laid out as

    K1, O1, K2, O2, ..., K_Nmax, O_Nmax, K_{Nmax+1}

Kernel slots ``K_j`` are one-hot over ``grammar.base_kernels`` (size |B|); operation
slots ``O_j`` are one-hot over ``grammar.operations`` (size |O|: ``("+", "*", "stop")``,
or ``("+", "*", "CP", "CW", "stop")`` for a grammar with change operations). After a
``stop`` all later slots are zero; after ``K_{Nmax+1}`` the stop is implicit (N_max
operations reached). Length

    L = (N_max + 1) |B| + |O| N_max      (39 for the default grammar: 6*4 + 5*3;
                                          55 for grammars/change.toml: 6*5 + 5*5)

The paper writes (N_max + 1)|B| + (N_max - 1)|O| for r (and counts the r_d part
separately); we keep one operation slot after every kernel but the last, so an
expression with N_max operations and an expression that stops after its first kernel
are both representable and the stop is explicit wherever it can occur.

Example (default grammar, B = (SE, LIN, PER, RQ)): ``("LIN", "*", "PER", "stop")`` is
``0100 | 010 | 0010 | 001 | 0...0``.

Decoding per-slot scores (:meth:`GrammarEncoding.decode_scores`) always returns a valid
sequence: tokens with zero prior probability are masked, NaN scores count as -inf, and a
slot whose allowed scores are all -inf falls back to the grammar prior of that slot.

**Data representation r_d.** For each base kernel b, the scaled Frobenius distance

    r_d[b] = || K_e / m(K_e) - K_b / m(K_b) ||_F / n

between the expression's kernel matrix ``K_e`` and b's matrix ``K_b`` on the inputs x
(n points), each normalised by its mean diagonal ``m(.)`` so that r_d is scale-free, and
divided by n so that it is a root-mean-square entry difference (comparable across n).
The hyperparameters are fixed relative to the x span, on u = (x - min x) / span in [0, 1]
(each kernel's ``rd`` values in the registry, :mod:`prolas.kernels`; collected in
:data:`RD_HYPERPARAMETERS`):

    SE   lengthscale 0.1                 (a smooth function varying ~10 times over the span)
    LIN  offset 0 (the left end of x)    (a trend through the first point)
    PER  period 0.25, lengthscale 1      (four cycles over the span)
    RQ   lengthscale 0.1, alpha 0.5      (same scale as SE, heavy multi-scale tails)
    C    (none)                          (the all-ones matrix)
    WN   (none)                          (the identity on distinct inputs)
    PERC period 0.25, lengthscale 1      (PER's, without its constant part)

The matrices are the kernels' natural-unit formulas
(:meth:`prolas.kernels.spec.Kernel.value`, the GPyTorch modules' own) evaluated on u.
Each base matrix is normalised by its mean diagonal first, a product term is the
element-wise product of its normalised factors, an expression is the sum of its terms
(all term variances 1), normalised again.

A change operator contributes its transition factors (:attr:`Expression.terms`:
``CP_BEFORE`` = (1 - σ(u))(1 - σ(u')), ``CP_AFTER`` = σ(u)σ(u'), ``CW_OUTSIDE``,
``CW_INSIDE`` with u(x) = σ₁(1 - σ₂), docs/conventions.md) to the terms on its sides, at fixed
span-relative defaults (the operators' ``rd`` values, :data:`RD_CHANGE_HYPERPARAMETERS`):

    CP   location 0.5, width 0.05        (mid-range; 12 % -> 88 % over a fifth of the span)
    CW   start 0.25, end 0.75, width 0.05 (the middle half of the span)

The location is where a change is a priori most identifiable (both sides hold half the
data); the width is moderate: sharp enough that A and B dominate their halves, smooth
enough that the transition covers several inputs of a 128-point grid. The CW window is
centred too, so CP(A, B) and CW(A, B) differ (B on the right half against B in the
middle). The factors are not normalised (they are weights in [0, 1], as in the model);
nested change operators all use the same defaults. With fixed hyperparameters everything reduces to
inner products between the distinct product terms, so the features of thousands of
expressions cost one Gram matrix of the distinct terms (10 000 expressions on 144 inputs
take well under a second; see ``benchmarks/results/kgvae/VAE.md``). More than
``MAX_RD_INPUTS`` = 256 inputs are subsampled deterministically (evenly spaced ranks of sorted x).

>>> from prolas.grammar import Grammar
>>> enc = GrammarEncoding(Grammar.default())
>>> enc.length
39
>>> enc.decode_scores(enc.encode_many([("LIN", "*", "PER", "stop")]))
[('LIN', '*', 'PER', 'stop')]
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Sequence as SequenceABC

import numpy as np
import torch

from prolas.errors import GrammarError
from prolas.expr import CHANGE_FACTORS, Expression, factor_kernel
from prolas.grammar import Grammar, Sequence, sequence_expression
from prolas.kernels import BASE_KERNELS, OPERATORS, TRANSITIONS, Kernel

__all__ = [
    "GrammarEncoding",
    "RD_HYPERPARAMETERS",
    "RD_CHANGE_HYPERPARAMETERS",
    "MAX_RD_INPUTS",
    "rd_inputs",
    "base_kernel_matrices",
    "change_factor_matrices",
    "distance_features",
    "represent",
    "canonical_grid",
]

#: Fixed r_d hyperparameters in units of the input span (u = (x - min) / span): each
#: registry parameter's ``rd`` (as checkpoints record them).
RD_HYPERPARAMETERS: dict[str, dict[str, float]] = {
    name: k.rd_values for name, k in BASE_KERNELS.items()
}
#: Fixed r_d parameters of the change operators' transition factors, in span units.
RD_CHANGE_HYPERPARAMETERS: dict[str, dict[str, float]] = {
    name: op.rd_values for name, op in OPERATORS.items()
}
#: r_d is computed on at most this many inputs.
MAX_RD_INPUTS = 256


class GrammarEncoding:
    """The fixed-length one-hot layout r_g of a grammar's token sequences.

    Attributes:
        grammar: the grammar.
        n_kernels: |B|.  n_max: N_max.  n_ops: |O| (``grammar.operations``).
        length: L = (N_max + 1)|B| + |O| N_max.
        slots: ``[(kind, offset, size)]`` in layout order, kind "kernel" or "op".
        stop_index: index of ``stop`` among the operation tokens.
    """

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        self.n_kernels = len(grammar.base_kernels)
        self.n_max = grammar.max_operations
        self.operations = tuple(grammar.operations)
        self.n_ops = len(self.operations)
        self.stop_index = grammar.stop_index
        slots: list[tuple[str, int, int]] = []
        offset = 0
        for j in range(self.n_max + 1):
            slots.append(("kernel", offset, self.n_kernels))
            offset += self.n_kernels
            if j < self.n_max:
                slots.append(("op", offset, self.n_ops))
                offset += self.n_ops
        self.slots = slots
        self.length = offset
        self._kernel_index = {k: i for i, k in enumerate(grammar.base_kernels)}
        self._op_index = {o: i for i, o in enumerate(self.operations)}
        # Column indices of every kernel slot (N_max+1, |B|) and op slot (N_max, |O|).
        self.kernel_columns = np.array(
            [[o + i for i in range(s)] for k, o, s in slots if k == "kernel"]
        )
        self.op_columns = np.array([[o + i for i in range(s)] for k, o, s in slots if k == "op"])
        # log prior per token; -inf marks tokens that can never be emitted.
        with np.errstate(divide="ignore"):
            self.log_p_base = np.log(np.asarray(grammar.p_base, dtype=np.float64))
            self.log_p_op = np.log(np.asarray(grammar.p_op, dtype=np.float64))

    # --- layout metadata -----------------------------------------------------------
    def layout(self) -> dict:
        """JSON-serialisable description of the layout (stored in checkpoints)."""
        return {
            "slots": [[k, o, s] for k, o, s in self.slots],
            "length": self.length,
            "kernel_tokens": list(self.grammar.base_kernels),
            "op_tokens": list(self.operations),
            "max_operations": self.n_max,
        }

    def slot_mask(self, seq: Sequence) -> np.ndarray:
        """Boolean ``(n_slots,)``: which slots are active (scored) for ``seq``."""
        n_tokens = len(seq)
        return np.arange(len(self.slots)) < n_tokens

    # --- encode --------------------------------------------------------------------
    def encode(self, seq: Sequence) -> np.ndarray:
        """One sequence -> r_g, shape ``(L,)`` float64."""
        return self.encode_many([seq])[0]

    def encode_many(self, seqs: Iterable[Sequence]) -> np.ndarray:
        """Sequences -> r_g, shape ``(n, L)`` float64 (validated against the grammar)."""
        seqs = list(seqs)
        out = np.zeros((len(seqs), self.length), dtype=np.float64)
        for row, seq in enumerate(seqs):
            seq = tuple(seq)
            self.grammar.validate_sequence(seq)
            for pos, token in enumerate(seq):
                kind, offset, _ = self.slots[pos]
                index = self._kernel_index[token] if kind == "kernel" else self._op_index[token]
                out[row, offset + index] = 1.0
        return out

    def token_indices(self, seqs: Iterable[Sequence]) -> tuple[np.ndarray, np.ndarray]:
        """Targets for training: ``(n, n_slots)`` int64 token index per slot (-1 = inactive)
        and the matching boolean activity mask."""
        seqs = list(seqs)
        idx = np.full((len(seqs), len(self.slots)), -1, dtype=np.int64)
        for row, seq in enumerate(seqs):
            for pos, token in enumerate(seq):
                kind = self.slots[pos][0]
                idx[row, pos] = (
                    self._kernel_index[token] if kind == "kernel" else self._op_index[token]
                )
        return idx, idx >= 0

    # --- decode --------------------------------------------------------------------
    def _sanitise(self, scores: torch.Tensor | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Split ``(b, L)`` scores into kernel ``(b, N+1, |B|)`` and op ``(b, N, |O|)`` arrays
        with NaN -> -inf, +inf -> 1e300, zero-prior tokens masked (-inf), and slots whose
        allowed scores are all -inf replaced by the log prior of that slot."""
        if isinstance(scores, torch.Tensor):
            scores = scores.detach().to("cpu", torch.float64).numpy()
        s = np.array(scores, dtype=np.float64, copy=True)
        if s.ndim == 1:
            s = s[None, :]
        if s.ndim != 2 or s.shape[1] != self.length:
            raise ValueError(f"scores must have shape (b, {self.length}), got {s.shape}")
        s[np.isnan(s)] = -np.inf
        s[np.isposinf(s)] = 1e300
        parts = []
        for columns, log_prior in (
            (self.kernel_columns, self.log_p_base),
            (self.op_columns, self.log_p_op),
        ):
            block = s[:, columns]  # (b, slots, tokens)
            block[:, :, np.isneginf(log_prior)] = -np.inf
            dead = np.all(np.isneginf(block), axis=2)  # (b, slots)
            if dead.any():
                block[dead] = log_prior
            parts.append(block)
        return parts[0], parts[1]

    def decode_indices(
        self, scores: torch.Tensor | np.ndarray, method: str = "greedy"
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Vectorised decoding of ``(b, L)`` scores.

        Args:
            scores: per-slot scores (logits, log-probabilities or a one-hot r_g).
            method: ``"greedy"``: argmax per slot in layout order, stopping at the first
                stop. ``"mode"``: the exact mode of the chain of per-slot categoricals
                (softmax of the scores within each slot), where slot j is only scored
                when no stop precedes it: for each stopping point the best kernels and
                the best non-stop operations before it are summed, and the best
                stopping point (or no stop) wins.

        Returns:
            ``kernels (b, N+1)`` kernel indices, ``ops (b, N)`` op indices, and
            ``n_kernels (b,)`` the number of kernels in each sequence (1..N+1).
        """
        kern, ops = self._sanitise(scores)
        b = kern.shape[0]
        k_idx = np.argmax(kern, axis=2)  # (b, N+1)
        if method == "greedy":
            o_idx = np.argmax(ops, axis=2)  # (b, N)
            is_stop = o_idx == self.stop_index
            has_stop = is_stop.any(axis=1)
            first = np.where(has_stop, np.argmax(is_stop, axis=1), self.n_max)
        elif method == "mode":
            lk = _log_softmax(kern)
            lo = _log_softmax(ops)
            k_best = lk.max(axis=2)  # (b, N+1)
            cont = lo.copy()
            cont[:, :, self.stop_index] = -np.inf
            o_cont_idx = np.argmax(cont, axis=2)
            c_best = cont.max(axis=2)  # (b, N)
            stop = lo[:, :, self.stop_index]  # (b, N)
            k_cum = np.cumsum(k_best, axis=1)  # sum of kernels 1..j
            c_cum = np.concatenate([np.zeros((b, 1)), np.cumsum(c_best, axis=1)], axis=1)
            # option j (0-based, j < N): kernels 0..j, non-stop ops 0..j-1, stop at op j.
            with np.errstate(invalid="ignore"):
                opt = k_cum[:, : self.n_max] + c_cum[:, : self.n_max] + stop
                opt_full = k_cum[:, self.n_max] + c_cum[:, self.n_max]
                total = np.concatenate([opt, opt_full[:, None]], axis=1)  # (b, N+1)
            total = np.where(np.isnan(total), -np.inf, total)
            first = np.argmax(total, axis=1)  # ties -> the shortest sequence
            o_idx = o_cont_idx.copy()
            rows = np.nonzero(first < self.n_max)[0]
            o_idx[rows, first[rows]] = self.stop_index
        else:
            raise ValueError(f"unknown decode method {method!r}; use 'greedy' or 'mode'")
        return k_idx, o_idx, first + 1

    def decode_scores(
        self, scores: torch.Tensor | np.ndarray, method: str = "greedy"
    ) -> list[Sequence]:
        """Per-slot scores ``(b, L)`` -> ``b`` valid sequences (see :meth:`decode_indices`)."""
        k_idx, o_idx, n_k = self.decode_indices(scores, method=method)
        kernels = self.grammar.base_kernels
        out: list[Sequence] = []
        for row in range(k_idx.shape[0]):
            n = int(n_k[row])
            seq: list[str] = []
            for j in range(n):
                seq.append(kernels[k_idx[row, j]])
                if j < self.n_max:
                    seq.append(self.operations[o_idx[row, j]])
            out.append(tuple(seq))
        return out


def _log_softmax(a: np.ndarray) -> np.ndarray:
    """Log-softmax over the last axis; rows contain at least one finite value."""
    m = a.max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        z = a - m
        z = np.where(np.isnan(z), -np.inf, z)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


# --- r_d ------------------------------------------------------------------------------
def canonical_grid(n: int = 128) -> np.ndarray:
    """``n`` evenly spaced inputs on [0, 1] (the grid shipped checkpoints use for r_d)."""
    return np.linspace(0.0, 1.0, n)


def rd_inputs(x: np.ndarray | SequenceABC[float]) -> np.ndarray:
    """The inputs r_d is computed on: sorted x, subsampled to <= 256 evenly spaced ranks."""
    x = np.sort(np.asarray(x, dtype=np.float64).ravel())
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("r_d needs a non-empty array of finite inputs")
    if x.size > MAX_RD_INPUTS:
        x = x[np.round(np.linspace(0, x.size - 1, MAX_RD_INPUTS)).astype(int)]
    return x


def _unit_inputs(x: np.ndarray) -> torch.Tensor:
    """u = (x - min) / span as a float64 ``(n, 1)`` tensor."""
    x = np.asarray(x, dtype=np.float64)
    span = float(x.max() - x.min())
    u = (x - x.min()) / (span if span > 0 else 1.0)
    return torch.from_numpy(u).reshape(-1, 1)


def _rd_matrix(kernel: Kernel, u: torch.Tensor, values: dict[str, float]) -> np.ndarray:
    """``kernel`` at its r_d values on the inputs ``u`` ``(n, 1)``: ``(n, n)`` float64."""
    v = {name: torch.tensor(value, dtype=torch.float64) for name, value in values.items()}
    with torch.no_grad():
        return kernel.value(u, u, v, diag=False).numpy()


def base_kernel_matrices(x: np.ndarray, names: SequenceABC[str]) -> dict[str, np.ndarray]:
    """Each base kernel at its r_d hyperparameters on u = (x - min)/span, normalised by its
    mean diagonal: ``{name: (n, n)}`` float64."""
    u = _unit_inputs(x)
    out = {}
    for name in names:
        if name not in BASE_KERNELS:
            raise GrammarError(f"no r_d hyperparameters for base kernel {name!r}")
        kernel = BASE_KERNELS[name]
        k = _rd_matrix(kernel, u, kernel.rd_values)
        mean_diag = float(np.mean(np.diag(k)))
        out[name] = k / (mean_diag if mean_diag > 0 else 1.0)
    return out


def change_factor_matrices(x: np.ndarray) -> dict[str, np.ndarray]:
    """The change operators' transition factors at :data:`RD_CHANGE_HYPERPARAMETERS` on
    u = (x - min)/span, not normalised: ``{"CP_BEFORE": (n, n), "CP_AFTER", "CW_OUTSIDE",
    "CW_INSIDE"}`` float64 (docs/conventions.md: (1 - σ(x))(1 - σ(x')), σ(x)σ(x'), (1 - u)(1 - u'),
    u u' with u = σ₁(1 - σ₂))."""
    u = _unit_inputs(x)
    return {
        name: _rd_matrix(t, u, RD_CHANGE_HYPERPARAMETERS[t.operator])
        for name, t in TRANSITIONS.items()
    }


def _as_expression(item: Expression | Sequence) -> Expression:
    if isinstance(item, Expression):
        return item
    return sequence_expression(tuple(item))


def distance_features(
    items: Iterable[Expression | Sequence],
    x: np.ndarray | SequenceABC[float],
    base_kernels: SequenceABC[str] | None = None,
) -> np.ndarray:
    """r_d of expressions (or token sequences): ``(n_items, |B|)`` float64.

    Columns follow ``base_kernels`` (default: SE, LIN, PER, RQ, the default grammar's
    order; pass ``grammar.base_kernels`` for another grammar). Computed on
    :func:`rd_inputs` (x) at the fixed :data:`RD_HYPERPARAMETERS`; a change operator's
    factors (in the expanded :attr:`Expression.terms`) at :data:`RD_CHANGE_HYPERPARAMETERS`.

    With normalised base matrices B_b, term matrices T_t (element-wise products of their
    factors' B) and expression E = sum_t T_t, s = mean diag(E) = sum_t m_t:

        ||E/s - B_b||^2 = (1/s^2) sum_{t,t'} <T_t, T_t'> - (2/s) sum_t <T_t, B_b> + ||B_b||^2

    so one Gram matrix of the distinct terms serves every expression.
    """
    exprs = [_as_expression(it) for it in items]
    base_kernels = ("SE", "LIN", "PER", "RQ") if base_kernels is None else tuple(base_kernels)
    xr = rd_inputs(x)
    n = xr.size
    if not exprs:
        return np.zeros((0, len(base_kernels)))
    # de-duplicate by canonical expression
    uniq: dict[tuple[tuple[str, ...], ...], int] = {}
    inverse = np.array([uniq.setdefault(e.terms, len(uniq)) for e in exprs])
    # an expanded term's matrix depends on its factor kinds only ("CP_AFTER:0" -> "CP_AFTER")
    all_terms: dict[tuple[str, ...], int] = {}
    term_kinds: dict[tuple[str, ...], tuple[str, ...]] = {}
    for terms in uniq:
        for t in terms:
            if t not in term_kinds:
                term_kinds[t] = tuple(sorted(factor_kernel(f) for f in t))
            all_terms.setdefault(term_kinds[t], len(all_terms))
    kinds = {f for t in all_terms for f in t}
    bases = base_kernel_matrices(xr, sorted((kinds - set(CHANGE_FACTORS)) | set(base_kernels)))
    if kinds & set(CHANGE_FACTORS):
        bases.update(change_factor_matrices(xr))
    term_mats = np.empty((len(all_terms), n * n))
    for t, i in all_terms.items():
        m = bases[t[0]].copy()
        for f in t[1:]:
            m *= bases[f]
        term_mats[i] = m.ravel()
    base_mats = np.stack([bases[b].ravel() for b in base_kernels])  # (|B|, n^2)
    tt = torch.from_numpy(term_mats)
    gram = (tt @ tt.T).numpy()  # (T, T)
    cross = (tt @ torch.from_numpy(base_mats).T).numpy()  # (T, |B|)
    base_sq = np.einsum("bi,bi->b", base_mats, base_mats)  # (|B|,)
    diag_idx = np.arange(n) * (n + 1)
    term_mean_diag = term_mats[:, diag_idx].mean(axis=1)  # (T,)
    incidence = np.zeros((len(uniq), len(all_terms)))
    for terms, row in uniq.items():
        for t in terms:  # += : two expanded terms may share their factor kinds
            incidence[row, all_terms[term_kinds[t]]] += 1.0
    s = incidence @ term_mean_diag  # (U,)
    quad = np.einsum("ut,ut->u", incidence @ gram, incidence)
    lin = incidence @ cross  # (U, |B|)
    sq = quad[:, None] / s[:, None] ** 2 - 2 * lin / s[:, None] + base_sq[None, :]
    rd = np.sqrt(np.maximum(sq, 0.0)) / n
    return rd[inverse]


def represent(
    sequences: Iterable[Sequence],
    x: np.ndarray | SequenceABC[float],
    grammar: Grammar | None = None,
) -> np.ndarray:
    """r = [r_g, r_d] for token sequences: ``(n, L + |B|)`` float64 (default grammar if
    ``grammar`` is None; r_d columns in ``grammar.base_kernels`` order)."""
    grammar = Grammar.default() if grammar is None else grammar
    seqs = [tuple(s) for s in sequences]
    rg = GrammarEncoding(grammar).encode_many(seqs)
    rd = distance_features(seqs, x, grammar.base_kernels)
    return np.concatenate([rg, rd], axis=1)
