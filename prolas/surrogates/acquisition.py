"""Acquisition optimisers over grammar sequences (no latent space).

All three maximise an acquisition ``acq(list of sequences) -> array`` over valid
sequences of a :class:`~prolas.grammar.Grammar` and return the best sequences whose
canonical expressions are not excluded (already evaluated), best first:

* ``"ea"`` — evolutionary, as in NASBOT §4: start from a pool (the evaluated
  sequences plus grammar samples), repeatedly pick ``n_mutations`` parents with
  probability increasing in their acquisition value (softmax of the standardised
  value), mutate each (:func:`mutate`: add a term, multiply by a base, replace a
  base, remove a term/factor, swap an operator and, in a grammar with change
  operations, put the expression before a change to a base, S -> CP(S, B) / CW(S, B)),
  score the mutants, add them to the pool.
* ``"local"`` — SMAC-style local search (Lévesque et al. eq. 6-7): from the
  ``n_starts`` best pool members and as many grammar samples, move to the best
  one-slot neighbour (:func:`neighbours`) while that improves the acquisition.
* ``"random"`` — score ``n_random`` grammar samples.

:func:`sequence_edits`, a subset of :func:`neighbours`, are the moves of PROLAS's latent
candidate pool.

Every candidate is a valid grammar sequence (mutations and neighbours are checked
with :meth:`Grammar.validate_sequence`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from prolas.errors import GrammarError
from prolas.grammar import CHANGE_OPERATIONS, STOP, Grammar, sequence_expression
from prolas.grammar import Sequence as GSeq
from prolas.surrogates.space import build_sequence, sequence_kernels_ops

__all__ = [
    "ACQ_OPTIMISERS",
    "MUTATIONS",
    "mutate",
    "neighbours",
    "optimise_acquisition",
    "sequence_drops",
    "sequence_edits",
]

ACQ_OPTIMISERS: tuple[str, ...] = ("ea", "local", "random")
MUTATIONS: tuple[str, ...] = ("add_term", "multiply_base", "replace_base", "remove", "swap_op")
#: The extra mutation of a grammar with change operations: S -> CP(S, B) or CW(S, B).
CHANGE_MUTATIONS: tuple[str, ...] = ("add_change",)

Acquisition = Callable[[list[GSeq]], np.ndarray]


def _ops(grammar: Grammar) -> list[str]:
    """Binary operations the grammar can emit."""
    return [o for o, p in zip(grammar.operations, grammar.p_op) if o != STOP and p > 0]


def mutations(grammar: Grammar) -> tuple[str, ...]:
    """The mutation kinds that apply to ``grammar`` (``add_change`` only with change ops)."""
    return MUTATIONS + CHANGE_MUTATIONS if grammar.has_change else MUTATIONS


def _apply(seq: GSeq, kind: str, grammar: Grammar, rng: np.random.Generator) -> GSeq | None:
    """One mutation of ``kind``, or None if it does not apply to ``seq``."""
    kernels, ops = sequence_kernels_ops(seq)
    bases = list(grammar.base_kernels)
    allowed = _ops(grammar)
    n_max = grammar.max_operations
    if kind == "add_term":  # S -> S + B
        if len(ops) >= n_max or "+" not in allowed:
            return None
        kernels, ops = kernels + [bases[rng.integers(len(bases))]], ops + ["+"]
    elif kind == "add_change":  # S -> CP(S, B) or CW(S, B)
        changes = [o for o in allowed if o in CHANGE_OPERATIONS]
        if len(ops) >= n_max or not changes:
            return None
        op = changes[rng.integers(len(changes))]
        kernels, ops = kernels + [bases[rng.integers(len(bases))]], ops + [op]
    elif kind == "multiply_base":  # a prefix S_j -> S_j * B (j = whole expression included)
        if len(ops) >= n_max or "*" not in allowed:
            return None
        j = int(rng.integers(len(kernels))) + 1
        b = bases[rng.integers(len(bases))]
        kernels, ops = kernels[:j] + [b] + kernels[j:], ops[: j - 1] + ["*"] + ops[j - 1 :]
    elif kind == "replace_base":
        if len(bases) < 2:
            return None
        j = int(rng.integers(len(kernels)))
        others = [b for b in bases if b != kernels[j]]
        kernels = kernels.copy()
        kernels[j] = others[rng.integers(len(others))]
    elif kind == "remove":  # drop one kernel with its operator (a term or a factor)
        if len(kernels) < 2:
            return None
        kernels, ops = _drop(kernels, ops, int(rng.integers(len(kernels))))
    elif kind == "swap_op":
        if not ops or len(allowed) < 2:
            return None
        j = int(rng.integers(len(ops)))
        others = [o for o in allowed if o != ops[j]]
        ops = ops.copy()
        # + <-> * (no draw when only one other operation is allowed, as before change ops)
        ops[j] = others[0] if len(others) == 1 else others[rng.integers(len(others))]
    else:
        raise ValueError(f"unknown mutation {kind!r}; choose from {MUTATIONS + CHANGE_MUTATIONS}")
    out = build_sequence(kernels, ops, n_max)
    grammar.validate_sequence(out)
    return out


def _drop(kernels: list[str], ops: list[str], j: int) -> tuple[list[str], list[str]]:
    """Kernel j dropped with the operation that joined it (the first kernel: the second
    takes its place and the second's operation goes)."""
    return kernels[:j] + kernels[j + 1 :], ops[1:] if j == 0 else ops[: j - 1] + ops[j:]


def mutate(
    seq: GSeq, grammar: Grammar, rng: np.random.Generator, kinds: Sequence[str] | None = None
) -> GSeq:
    """A random applicable mutation of ``seq`` (a valid sequence of ``grammar``); ``kinds``
    defaults to :func:`mutations` (grammar)."""
    kinds = mutations(grammar) if kinds is None else tuple(kinds)
    order = rng.permutation(len(kinds))
    for i in order:
        out = _apply(seq, kinds[int(i)], grammar, rng)
        if out is not None:
            return out
    raise GrammarError(f"no mutation applies to {seq}")


def neighbours(seq: GSeq, grammar: Grammar) -> list[GSeq]:
    """All sequences that differ from ``seq`` in one slot (SMAC's one-exchange).

    Kernel slots take every other base kernel; an active operation slot takes every
    other operation of the grammar or ``stop`` (truncation); the ``stop`` slot (if N_max
    is not reached) takes each operation (``+``, ``*``, and ``CP``/``CW`` where the
    grammar has them), which activates the next kernel slot with each base kernel in turn.

    PROLAS's candidate pool takes the subset :func:`sequence_edits`; CKS's
    :func:`prolas.search.greedy.expand` works on the canonical expression instead.
    """
    kernels, ops = sequence_kernels_ops(seq)
    n_max = grammar.max_operations
    bases = list(grammar.base_kernels)
    allowed = _ops(grammar)
    out: list[GSeq] = []
    for j, k in enumerate(kernels):
        for b in bases:
            if b != k:
                out.append(build_sequence(kernels[:j] + [b] + kernels[j + 1 :], ops, n_max))
    for j, o in enumerate(ops):
        for o2 in allowed:
            if o2 != o:
                out.append(build_sequence(kernels, ops[:j] + [o2] + ops[j + 1 :], n_max))
        out.append(build_sequence(kernels[: j + 1], ops[:j], n_max))  # O_j -> stop
    if len(ops) < n_max:
        for o2 in allowed:
            for b in bases:
                out.append(build_sequence(kernels + [b], ops + [o2], n_max))
    for s in out:
        grammar.validate_sequence(s)
    return out


def sequence_edits(seq: GSeq, grammar: Grammar) -> list[GSeq]:
    """The moves of PROLAS's latent candidate pool (:mod:`prolas.search.latent`), CKS's
    moves on a token sequence: the :func:`neighbours` of ``seq`` that drop at most its
    last ``op K`` pair and have non-zero probability (the pool encodes each of them):

    * append ``op B`` (S -> S + B, S -> S * B; S -> CP(S, B) and CW(S, B) in a grammar
      with change operations),
    * replace one kernel token by another base kernel (B -> B'),
    * swap one operation (+ <-> *, or any other operation of the grammar),
    * drop the last ``op K`` pair.

    >>> len(sequence_edits(("LIN", "stop"), Grammar.default()))
    11
    """
    n_kernels = len(sequence_kernels_ops(seq)[0])
    return [
        q
        for q in neighbours(seq, grammar)
        if len(sequence_kernels_ops(q)[0]) >= n_kernels - 1 and _emitted(q, grammar)
    ]


def _emitted(seq: GSeq, grammar: Grammar) -> bool:
    """Whether the grammar can emit ``seq``: only kernels it emits, non-zero probability."""
    never = set(grammar.base_kernels) - set(grammar.emitted_kernels)
    return not never & set(seq[0::2]) and math.isfinite(grammar.log_prob(seq))


def two_kernel_sequences(grammar: Grammar) -> dict[str, GSeq]:
    """Every expression of two base kernels and one operation the grammar can emit,
    ``str(canonical expression) -> K1 op K2 token sequence`` (the first such sequence in
    the grammar's order of operations and kernels): how an expression built on the
    expression tree (CKS's :func:`prolas.search.greedy.expand`) gets a latent code.

    >>> from prolas.grammar import Grammar
    >>> two_kernel_sequences(Grammar.default())["PER + SE"]
    ('SE', '+', 'PER', 'stop')
    """
    out: dict[str, GSeq] = {}
    for op in _ops(grammar):
        for a in grammar.emitted_kernels:
            for b in grammar.emitted_kernels:
                q = build_sequence([a, b], [op], grammar.max_operations)
                if _emitted(q, grammar):
                    out.setdefault(str(sequence_expression(q)), q)
    return out


def sequence_drops(seq: GSeq, grammar: Grammar) -> list[GSeq]:
    """Every sequence that drops one kernel of ``seq`` with the operation that joined it
    (the EA's ``remove`` mutation, all of them), where the grammar gives it non-zero
    probability: a term of a sum, a factor of a product, or the kernel a change operator
    brought in. :func:`sequence_edits` drops only the last ``op K`` pair; these are the
    smaller models inside the expression wherever the kernel sits, which CKS reaches by
    growing and the latent search can pass over (``LIN*RQ`` inside ``LIN*SE*RQ``).

    >>> from prolas.grammar import sequence_expression
    >>> drops = sequence_drops(("SE", "+", "PER", "*", "LIN", "stop"), Grammar.default())
    >>> [str(sequence_expression(q)) for q in drops]
    ['LIN*PER', 'LIN*SE', 'PER + SE']
    """
    kernels, ops = sequence_kernels_ops(seq)
    if len(kernels) < 2:
        return []
    out: list[GSeq] = []
    for j in range(len(kernels)):
        q = build_sequence(*_drop(kernels, ops, j), grammar.max_operations)
        if q not in out and _emitted(q, grammar):
            out.append(q)
    return out


class _Scored:
    """Sequences scored so far: best sequence and value per canonical expression."""

    def __init__(self, acq: Acquisition, grammar: Grammar) -> None:
        self.acq = acq
        self.grammar = grammar
        self.value: dict[GSeq, float] = {}
        self.best: dict[str, tuple[float, GSeq]] = {}

    def score(self, seqs: Sequence[GSeq]) -> np.ndarray:
        new = list(dict.fromkeys(s for s in seqs if s not in self.value))
        if new:
            vals = np.asarray(self.acq(new), dtype=np.float64).reshape(-1)
            for s, v in zip(new, vals):
                v = float(v) if np.isfinite(v) else -np.inf
                self.value[s] = v
                key = str(self.grammar.to_expression(s))
                if key not in self.best or v > self.best[key][0]:
                    self.best[key] = (v, s)
        return np.array([self.value[s] for s in seqs])

    def top(self, n: int, exclude: set[str]) -> list[GSeq]:
        items = [(v, s) for k, (v, s) in self.best.items() if k not in exclude]
        items.sort(key=lambda t: (-t[0], t[1]))
        return [s for _, s in items[:n]]


def optimise_acquisition(
    method: str,
    acq: Acquisition,
    grammar: Grammar,
    rng: np.random.Generator,
    *,
    pool: Sequence[GSeq] = (),
    exclude: set[str] | frozenset[str] = frozenset(),
    n: int = 1,
    n_random: int = 500,
    n_generations: int = 10,
    n_mutations: int = 50,
    n_starts: int = 5,
    max_steps: int = 30,
) -> list[GSeq]:
    """Up to ``n`` sequences with the highest acquisition whose canonical form is new.

    Args:
        method: ``"ea"``, ``"local"`` or ``"random"``.
        acq: acquisition values of a list of sequences (higher is better).
        pool: starting sequences (e.g. the evaluated ones).
        exclude: canonical strings that must not be returned.
    """
    if method not in ACQ_OPTIMISERS:
        raise ValueError(f"unknown acquisition optimiser {method!r}; choose from {ACQ_OPTIMISERS}")
    exclude = set(exclude)
    scored = _Scored(acq, grammar)
    pool = list(dict.fromkeys(pool))
    if method == "random":
        scored.score(grammar.sample_sequences(n_random, rng))
    elif method == "ea":
        members = list(dict.fromkeys(pool + grammar.sample_sequences(n_mutations, rng)))
        values = scored.score(members)
        for _ in range(n_generations):
            finite = np.isfinite(values)
            v = np.where(finite, values, np.min(values[finite]) if finite.any() else 0.0)
            z = (v - v.max()) / (v.std() + 1e-12)
            p = np.exp(z)
            p /= p.sum()
            parents = rng.choice(len(members), size=n_mutations, p=p)
            mutants = []
            for i in parents:
                try:
                    mutants.append(mutate(members[i], grammar, rng))
                except GrammarError:  # no mutation applies (a one-expression grammar)
                    continue
            mutants = [m for m in dict.fromkeys(mutants) if m not in scored.value]
            if not mutants:
                continue
            mv = scored.score(mutants)
            members += mutants
            values = np.concatenate([values, mv])
    else:  # local search
        starts = []
        if pool:
            pv = scored.score(pool)
            starts = [pool[i] for i in np.argsort(-pv, kind="stable")[:n_starts]]
        starts += grammar.sample_sequences(n_starts, rng)
        for s in starts:
            current = s
            cur_v = float(scored.score([current])[0])
            for _ in range(max_steps):
                nb = neighbours(current, grammar)
                nv = scored.score(nb)
                i = int(np.argmax(nv))
                if not nv[i] > cur_v:
                    break
                current, cur_v = nb[i], float(nv[i])
    out = scored.top(n, exclude)
    if len(out) < n:  # everything scored is excluded: widen with fresh grammar samples
        scored.score(grammar.sample_sequences(n_random, rng))
        out = scored.top(n, exclude)
    return out
