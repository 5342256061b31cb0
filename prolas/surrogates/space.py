"""The conditional (hierarchical) space of grammar sequences.

A grammar sequence ``K1 O1 K2 O2 ... K_{N+1}`` (N = ``max_operations``) is laid out
as ``S = 2N + 1`` slots, the same layout as :mod:`prolas.encoding`:

* kernel slot ``K_j`` (position ``2(j-1)``): categorical over ``grammar.base_kernels``;
* operation slot ``O_j`` (position ``2j - 1``): categorical over ``grammar.operations``
  (``("+", "*", "stop")``, with ``"CP"``/``"CW"`` before ``stop`` in a grammar with
  change operations).

Slot ``s`` is **active**, delta_s(x) = true, iff no ``stop`` occurs in an earlier
operation slot. The slots therefore form a chain DAG: the parent of ``K_{j+1}`` and
of ``O_{j+1}`` is ``O_j``; the *ancestors* anc_s of slot ``s`` are all earlier
operation slots (the "conditions" of Hutter & Osborne / Lévesque et al.). Optional
continuous features (e.g. r_d) are appended as always-active real dimensions
with bounds ``[l_i, u_i]``.

Tensor representation (float64): a configuration is a row
``x = [v_1 .. v_D | delta_1 .. delta_D]`` of width ``2D`` with ``D = S + F``:
``v_i`` is the category index of a categorical slot or the raw value of a real
dimension, ``delta_i`` is 1.0 if the dimension is active and 0.0 otherwise. The
values stored in inactive dimensions are arbitrary (``inactive_value``); every
surrogate kernel must ignore them. Shapes: ``n x 2D``.

>>> from prolas.grammar import Grammar
>>> space = ConditionalSpace.from_grammar(Grammar.from_file("small"))
>>> [s.name for s in space.slots]
['K1', 'O1', 'K2', 'O2', 'K3', 'O3', 'K4']
>>> x = space.encode([("SE", "+", "PER", "stop")])
>>> space.active(x)[0].tolist()
[True, True, True, True, False, False, False]
>>> space.decode(x[0])
('SE', '+', 'PER', 'stop')
"""

from __future__ import annotations

import math
from collections.abc import Sequence as Seq
from dataclasses import dataclass

import numpy as np
import torch

from prolas.errors import GrammarError
from prolas.grammar import STOP, Grammar, Sequence

__all__ = ["Slot", "ConditionalSpace", "sequence_kernels_ops", "build_sequence"]


@dataclass(frozen=True)
class Slot:
    """One dimension of the conditional space.

    Attributes:
        name: ``"K1"``, ``"O1"``, ... for grammar slots, ``"f0"``, ... for features.
        kind: ``"categorical"`` or ``"real"``.
        choices: category labels (categorical only), in index order.
        parents: indices of the slots whose values decide whether this one is active.
        bounds: ``(l_i, u_i)`` of a real dimension (categoricals: ``(0, m - 1)``).
    """

    name: str
    kind: str
    choices: tuple[str, ...] = ()
    parents: tuple[int, ...] = ()
    bounds: tuple[float, float] = (0.0, 1.0)

    @property
    def n_choices(self) -> int:
        return len(self.choices)


def sequence_kernels_ops(seq: Sequence) -> tuple[list[str], list[str]]:
    """Split a sequence into its kernels and its (non-stop) operations."""
    kernels = list(seq[0::2])
    ops = [o for o in seq[1::2] if o != STOP]
    return kernels, ops


def build_sequence(kernels: Seq[str], ops: Seq[str], max_operations: int) -> Sequence:
    """Tokens ``K1 op1 K2 ...`` plus the trailing ``stop`` unless N_max ops were used.

    ``len(kernels)`` must be ``len(ops) + 1``.
    """
    if len(kernels) != len(ops) + 1:
        raise GrammarError(f"{len(kernels)} kernels need {len(kernels) - 1} operations")
    tokens: list[str] = [kernels[0]]
    for op, k in zip(ops, kernels[1:]):
        tokens += [op, k]
    if len(ops) < max_operations:
        tokens.append(STOP)
    return tuple(tokens)


class ConditionalSpace:
    """Slots, parents, ancestors and activity of grammar sequences (plus features).

    Args:
        slots: the dimensions; grammar slots first, then always-active features.
        max_operations: N_max of the grammar the slots came from.
        inactive_value: value written into inactive dimensions by :meth:`encode`.
    """

    def __init__(self, slots: Seq[Slot], max_operations: int, inactive_value: float = 0.0) -> None:
        self.slots = tuple(slots)
        self.max_operations = int(max_operations)
        self.inactive_value = float(inactive_value)
        self.n_slots = 2 * self.max_operations + 1
        self.dim = len(self.slots)
        anc: list[tuple[int, ...]] = []
        for s in self.slots:
            a: set[int] = set()
            for p in s.parents:
                a.add(p)
                a.update(anc[p])
            anc.append(tuple(sorted(a)))
        self.ancestors: tuple[tuple[int, ...], ...] = tuple(anc)

    # --- construction -----------------------------------------------------------------
    @classmethod
    def from_grammar(
        cls,
        grammar: Grammar,
        n_features: int = 0,
        feature_bounds: Seq[tuple[float, float]] | None = None,
        inactive_value: float = 0.0,
    ) -> ConditionalSpace:
        """The space of ``grammar``'s sequences, plus ``n_features`` real dimensions."""
        n = grammar.max_operations
        slots: list[Slot] = []
        for s in range(2 * n + 1):
            parents = (s - 1,) if s % 2 == 0 and s > 0 else ((s - 2,) if s >= 3 else ())
            if s % 2 == 0:
                choices = tuple(grammar.base_kernels)
                slots.append(Slot(f"K{s // 2 + 1}", "categorical", choices, parents))
            else:
                ops = tuple(grammar.operations)
                slots.append(Slot(f"O{(s + 1) // 2}", "categorical", ops, parents))
        slots = [
            Slot(s.name, s.kind, s.choices, s.parents, (0.0, float(max(s.n_choices - 1, 1))))
            for s in slots
        ]
        bounds = list(feature_bounds) if feature_bounds is not None else [(0.0, 1.0)] * n_features
        if len(bounds) != n_features:
            raise ValueError(f"feature_bounds has {len(bounds)} entries, expected {n_features}")
        for f, (lo, hi) in enumerate(bounds):
            if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
                raise ValueError(f"feature {f}: bounds must be finite with hi > lo, got {lo, hi}")
            slots.append(Slot(f"f{f}", "real", (), (), (float(lo), float(hi))))
        return cls(slots, n, inactive_value)

    # --- layout -------------------------------------------------------------------------
    @property
    def width(self) -> int:
        """Columns of the tensor representation: ``2D``."""
        return 2 * self.dim

    @property
    def n_features(self) -> int:
        return self.dim - self.n_slots

    @property
    def categorical(self) -> list[int]:
        return [i for i, s in enumerate(self.slots) if s.kind == "categorical"]

    @property
    def real(self) -> list[int]:
        return [i for i, s in enumerate(self.slots) if s.kind == "real"]

    @property
    def conditions(self) -> list[int]:
        """Slots that are parents of other slots (the operation slots)."""
        return sorted({p for s in self.slots for p in s.parents})

    def ancestor_matrix(self) -> torch.Tensor:
        """``D x D`` 0/1 matrix A with ``A[i, j] = 1`` iff ``j in anc_i or j == i``."""
        a = torch.zeros(self.dim, self.dim, dtype=torch.float64)
        for i, anc in enumerate(self.ancestors):
            a[i, i] = 1.0
            for j in anc:
                a[i, j] = 1.0
        return a

    def split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(values, delta)``, each ``... x n x D``; delta is a bool tensor."""
        if x.shape[-1] != self.width:
            raise ValueError(f"expected {self.width} columns, got {x.shape[-1]}")
        return x[..., : self.dim], x[..., self.dim :] > 0.5

    def active(self, x: torch.Tensor) -> torch.Tensor:
        return self.split(x)[1]

    def rescaled(self, values: torch.Tensor) -> torch.Tensor:
        """x~_i = (v_i - l_i) / (u_i - l_i) for every dimension, ``... x n x D``."""
        lo = torch.tensor([s.bounds[0] for s in self.slots], dtype=values.dtype)
        hi = torch.tensor([s.bounds[1] for s in self.slots], dtype=values.dtype)
        return (values - lo) / (hi - lo)

    def one_hot(self, x: torch.Tensor, inactive: float = 0.0) -> torch.Tensor:
        """Categorical slots one-hot, reals rescaled to [0, 1]; inactive dims set to ``inactive``.

        Returns ``... x n x E`` with ``E = sum_i m_i (categorical) + #real``.
        """
        values, delta = self.split(x)
        cols = []
        scaled = self.rescaled(values)
        for i, s in enumerate(self.slots):
            act = delta[..., i : i + 1]
            if s.kind == "categorical":
                idx = values[..., i].round().long().clamp(0, s.n_choices - 1)
                oh = torch.nn.functional.one_hot(idx, s.n_choices).to(values.dtype)
            else:
                oh = scaled[..., i : i + 1]
            cols.append(torch.where(act, oh, torch.full_like(oh, inactive)))
        return torch.cat(cols, dim=-1)

    def group_ids(self, x: torch.Tensor, branches: str = "activity") -> torch.Tensor:
        """Integer branch id per row (``... x n``), for the conditional kernel.

        ``"activity"``: rows share a branch iff the same slots are active (the same
        structure size). ``"values"``: iff every active condition slot has the same
        value (Lévesque et al. eq. 8 read literally: the same operation sequence).
        """
        values, delta = self.split(x)
        cond = self.conditions
        if branches == "activity":
            key = delta[..., : self.n_slots].sum(-1).to(torch.long)
        elif branches == "values":
            key = torch.zeros(values.shape[:-1], dtype=torch.long)
            for c in cond:
                m = self.slots[c].n_choices + 1
                v = torch.where(delta[..., c], values[..., c].round().long() + 1, 0)
                key = key * m + v
        else:
            raise ValueError(f"branches must be 'activity' or 'values', got {branches!r}")
        return key

    # --- sequences <-> tensors ----------------------------------------------------------
    def slot_values(self, seq: Sequence) -> tuple[list[int], list[bool]]:
        """Category index and activity of every grammar slot of one sequence."""
        if len(seq) > self.n_slots:
            raise GrammarError(f"sequence {seq} is longer than {self.n_slots} slots")
        values, active = [], []
        stopped = False
        for s in range(self.n_slots):
            if stopped or s >= len(seq):
                values.append(-1)
                active.append(False)
                continue
            tok = seq[s]
            choices = self.slots[s].choices
            if tok not in choices:
                raise GrammarError(f"sequence {seq}: {tok!r} is not a choice of slot {s}")
            values.append(choices.index(tok))
            active.append(True)
            if s % 2 == 1 and tok == STOP:
                stopped = True
        return values, active

    def encode(
        self, seqs: Seq[Sequence], features: np.ndarray | torch.Tensor | None = None
    ) -> torch.Tensor:
        """Sequences (and optional ``n x F`` features) -> ``n x 2D`` float64 tensor."""
        n = len(seqs)
        out = torch.full((n, self.width), self.inactive_value, dtype=torch.float64)
        out[:, self.dim :] = 0.0
        for r, seq in enumerate(seqs):
            values, active = self.slot_values(seq)
            for s, (v, a) in enumerate(zip(values, active)):
                if a:
                    out[r, s] = float(v)
                    out[r, self.dim + s] = 1.0
        f = self.n_features
        if f:
            if features is None:
                raise ValueError(f"this space has {f} features; pass an n x {f} array")
            feats = torch.as_tensor(np.asarray(features, dtype=np.float64))
            if feats.shape != (n, f):
                raise ValueError(f"features must be {n} x {f}, got {tuple(feats.shape)}")
            out[:, self.n_slots : self.dim] = feats
            out[:, self.dim + self.n_slots :] = 1.0
        elif features is not None and np.asarray(features).size:
            raise ValueError("this space has no feature dimensions")
        return out

    def decode(self, row: torch.Tensor) -> Sequence:
        """The grammar sequence of one ``2D`` row (features are dropped)."""
        values, delta = self.split(row)
        tokens: list[str] = []
        for s in range(self.n_slots):
            if not bool(delta[s]):
                break
            tokens.append(self.slots[s].choices[int(round(float(values[s])))])
        return tuple(tokens)
