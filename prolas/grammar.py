"""Probabilistic kernel grammar (PROLAS Algorithm 1).

A grammar draws a sequence ``K1 op1 K2 op2 ... `` alternately from the base-kernel
prior p_B and the operation prior p_O over {"+", "*", "CP", "CW", "stop"} until
``stop`` or until ``N_max`` operations have been applied. The sequence is applied left
to right, ``S <- S op K`` (as CKS's S -> S+B, S -> S*B), and the result is put in
canonical form (:mod:`prolas.expr`). The change operations are applied the same way:
``CP`` is ``S <- CP(S, K)`` (S before a change-point, K after it) and ``CW`` is
``S <- CW(S, K)`` (K inside a change-window, S outside it); :func:`sequence_expression`
is the one place where a sequence becomes an expression.

A grammar file lists the operations it uses; an operation (or base kernel) it omits has
probability 0. Every grammar's operations are, in encoding order, ``+``, ``*``, then
``CP`` and ``CW`` if the file gives them a positive probability, then ``stop``
(:attr:`Grammar.operations`): a file without change operations has the encoding, the
content hash and the checkpoints it had before they existed.

A sequence is a tuple of tokens: kernel names at even positions, operation symbols
at odd positions, with ``"stop"`` as the last token unless ``N_max`` operations were
applied (then the stop is implicit). Examples for N_max = 2::

    ("SE", "stop")                    -> SE
    ("LIN", "*", "PER", "stop")       -> LIN*PER
    ("SE", "+", "PER", "*", "LIN")    -> LIN*PER + LIN*SE   (N_max reached)
    ("SE", "CP", "LIN", "stop")       -> CP(SE, LIN)        (a grammar with CP)

Its probability is  p(seq) = prod_i p_B(K_i) * prod_j p_O(op_j), where the final
``stop`` counts only if it was drawn (i.e. fewer than N_max operations).

>>> g = Grammar.default()
>>> seq = g.sample_sequence(np.random.default_rng(0))
>>> g.to_expression(seq).n_terms >= 1
True
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prolas.errors import GrammarError
from prolas.expr import BASE_KERNELS, Base, Change, Expression

__all__ = [
    "Grammar",
    "OPERATIONS",
    "ALL_OPERATIONS",
    "CHANGE_OPERATIONS",
    "STOP",
    "GRAMMARS_DIR",
    "Sequence",
    "sequence_expression",
]

STOP = "stop"
#: The operation tokens every grammar encodes, in encoding order (a grammar without
#: change operations has exactly these; :attr:`Grammar.operations` is the general case).
OPERATIONS: tuple[str, ...] = ("+", "*", STOP)
#: Change operations: ``CP`` is S <- CP(S, K), ``CW`` is S <- CW(S, K).
CHANGE_OPERATIONS: tuple[str, ...] = ("CP", "CW")
#: Every operation token a grammar file may list, in encoding order (stop last).
ALL_OPERATIONS: tuple[str, ...] = ("+", "*", *CHANGE_OPERATIONS, STOP)
Sequence = tuple[str, ...]


def _apply(op: str, s: Expression, k: Expression) -> Expression:
    """One grammar step ``S <- S op K``."""
    if op == "+":
        return s + k
    if op == "*":
        return s * k
    if op in CHANGE_OPERATIONS:
        return Change(op, s, k)
    raise GrammarError(f"unknown operation {op!r}")


@functools.lru_cache(maxsize=200_000)
def sequence_expression(seq: Sequence) -> Expression:
    """The expression of a token sequence: ``S <- K1``, then ``S <- S op K`` left to right
    (``+``, ``*``, ``CP``: CP(S, K), ``CW``: CW(S, K)); a trailing ``stop`` ends it.

    Built with the expression operators, so equality, hashing and printing use the
    canonical form. Cached (decoding calls this a lot); the sequence is not validated
    against a grammar (see :meth:`Grammar.validate_sequence`).

    >>> str(sequence_expression(("SE", "+", "PER", "*", "LIN", "stop")))
    'LIN*PER + LIN*SE'
    >>> str(sequence_expression(("SE", "CP", "LIN", "*", "PER")))
    'CP(PER*SE, LIN*PER)'
    """
    seq = tuple(seq)
    if not seq:
        raise GrammarError("empty sequence")
    steps = 0  # the (op, K) steps before a stop (an op without its K is ignored)
    for op in seq[1 : len(seq) - (len(seq) + 1) % 2 : 2]:
        if op == STOP:
            break
        steps += 1
    return _prefix_expression(seq[: 1 + 2 * steps])


@functools.lru_cache(maxsize=200_000)
def _prefix_expression(seq: Sequence) -> Expression:
    """:func:`sequence_expression` of a stop-free sequence ``K1 op K2 ... op Kn``, built on
    its cached prefix: sequences that share a prefix share its (immutable) expression and
    so its canonical items, computed once; a decoded pool shares many prefixes."""
    if len(seq) == 1:
        return Base(seq[0])
    return _apply(seq[-2], _prefix_expression(seq[:-2]), Base(seq[-1]))


def _encoding_operations(probs: dict[str, float]) -> tuple[str, ...]:
    """Operation tokens of a grammar in encoding order: ``+``, ``*`` and ``stop`` always,
    a change operation only if it has positive probability."""
    return tuple(o for o in ALL_OPERATIONS if o in OPERATIONS or probs.get(o, 0.0) > 0)


def _grammars_dir() -> Path:
    """``grammars/`` of the source tree, or its copy inside an installed wheel."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "grammars", here / "grammars"):
        if (candidate / "default.toml").is_file():
            return candidate
    return here.parent / "grammars"


#: Directory holding the shipped grammar files.
GRAMMARS_DIR = _grammars_dir()


@dataclass(frozen=True)
class Grammar:
    """A kernel grammar: base-kernel and operation priors plus N_max.

    Attributes:
        name: grammar name (from the file).
        base_kernels: kernel names in encoding order (as listed in the file).
        p_base: normalised prior over ``base_kernels``, shape ``(|B|,)``.
        p_op: normalised prior over ``operations``, shape ``(|O|,)``.
        max_operations: N_max, the largest number of operations (``+``, ``*``, ``CP``,
            ``CW``) in a sequence.
        operations: operation tokens in encoding order: ``("+", "*", "stop")``, with
            ``"CP"``/``"CW"`` before ``stop`` when the grammar uses them.
    """

    name: str
    base_kernels: tuple[str, ...]
    p_base: tuple[float, ...]
    p_op: tuple[float, ...]
    max_operations: int
    source: str = "<memory>"
    operations: tuple[str, ...] = OPERATIONS

    def __post_init__(self) -> None:
        ops = tuple(self.operations)
        if ops != _encoding_operations(dict.fromkeys(ops, 1.0)) or len(ops) != len(self.p_op):
            raise GrammarError(
                f"grammar {self.source}: operations {ops} must be {OPERATIONS} plus any of "
                f"{CHANGE_OPERATIONS} before stop, one probability each"
            )

    # --- construction --------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict, source: str = "<memory>") -> Grammar:
        """Validate a parsed TOML table; errors name the file and the key."""

        def fail(key: str, message: str) -> GrammarError:
            return GrammarError(f"grammar {source}: [{key}] {message}")

        if not isinstance(data, dict):
            raise fail("", "expected a TOML table")
        unknown = set(data) - {
            "name",
            "max_operations",
            "base_kernels",
            "operations",
            "description",
        }
        if unknown:
            raise fail(sorted(unknown)[0], "unknown key")
        name = data.get("name", Path(source).stem)
        if not isinstance(name, str) or not name:
            raise fail("name", "must be a non-empty string")
        n_max = data.get("max_operations")
        if isinstance(n_max, bool) or not isinstance(n_max, int) or not 1 <= n_max <= 10:
            raise fail("max_operations", f"must be an integer in 1..10, got {n_max!r}")

        def probs(key: str, allowed: tuple[str, ...], required: tuple[str, ...]) -> dict:
            table = data.get(key)
            if not isinstance(table, dict) or not table:
                raise fail(key, "missing or empty table")
            out = {}
            for k, v in table.items():
                kk = k.upper() if key != "operations" or k.upper() in CHANGE_OPERATIONS else k
                if kk not in allowed:
                    raise fail(f"{key}.{k}", f"unknown name; allowed: {', '.join(allowed)}")
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise fail(f"{key}.{k}", f"probability must be a finite number, got {v!r}")
                if v < 0:
                    raise fail(f"{key}.{k}", f"probability must be >= 0, got {v}")
                out[kk] = float(v)
            for r in required:
                if r not in out:
                    raise fail(f"{key}.{r}", "missing (required)")
            if sum(out.values()) <= 0:
                raise fail(key, "probabilities are all zero")
            return out

        base = probs("base_kernels", tuple(BASE_KERNELS), ())
        ops = probs("operations", ALL_OPERATIONS, (STOP,))
        if ops[STOP] <= 0:
            raise fail("operations.stop", "must be > 0 (or every sequence runs to N_max)")
        names = tuple(k for k, v in base.items() if v > 0)
        if not names:
            raise fail("base_kernels", "no kernel has positive probability")
        zb = sum(base[k] for k in names)
        zo = sum(ops.values())
        operations = _encoding_operations(ops)
        return cls(
            name=name,
            base_kernels=names,
            p_base=tuple(base[k] / zb for k in names),
            p_op=tuple(ops.get(o, 0.0) / zo for o in operations),
            max_operations=n_max,
            source=str(source),
            operations=operations,
        )

    @classmethod
    def from_file(cls, path: str | Path) -> Grammar:
        """Load a grammar TOML file (see ``grammars/default.toml``)."""
        path = Path(path)
        if not path.is_file():
            # allow a bare name of a shipped grammar, e.g. "default" or "seasonal"
            shipped = GRAMMARS_DIR / f"{path.name.removesuffix('.toml')}.toml"
            if path.parent == Path(".") and shipped.is_file():
                path = shipped
            else:
                raise GrammarError(f"grammar file not found: {path}")
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise GrammarError(f"grammar {path}: not valid TOML ({exc})") from None
        return cls.from_dict(data, source=str(path))

    @classmethod
    def default(cls) -> Grammar:
        """The paper's grammar: SE, LIN, PER, RQ; +, *, stop; uniform; N_max = 5."""
        return cls.from_file(GRAMMARS_DIR / "default.toml")

    @property
    def emitted_kernels(self) -> tuple[str, ...]:
        """The base kernels of positive prior (those a sequence may hold), in encoding order.

        >>> Grammar.default().emitted_kernels
        ('SE', 'LIN', 'PER', 'RQ')
        """
        return tuple(k for k, p in zip(self.base_kernels, self.p_base) if p > 0)

    @property
    def has_change(self) -> bool:
        """Whether the grammar can emit a change operation."""
        return any(o in CHANGE_OPERATIONS for o in self.operations)

    @property
    def stop_index(self) -> int:
        """Index of ``stop`` in :attr:`operations` (the last one)."""
        return self.operations.index(STOP)

    # --- identity ----------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The normalised grammar (what :attr:`content_hash` hashes). Operations are listed
        in :attr:`operations` (so a grammar without change operations hashes as before)."""
        return {
            "name": self.name,
            "max_operations": self.max_operations,
            "base_kernels": dict(zip(self.base_kernels, self.p_base)),
            "operations": dict(zip(self.operations, self.p_op)),
        }

    @property
    def content_hash(self) -> str:
        """SHA-256 (first 16 hex) of the normalised grammar; stored in checkpoints."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    # --- sampling (Algorithm 1) -------------------------------------------------------
    def sample_sequence(self, rng: np.random.Generator) -> Sequence:
        """Draw one token sequence: K (op K)* [stop]."""
        seq: list[str] = []
        n_ops = 0
        while True:
            seq.append(self.base_kernels[rng.choice(len(self.base_kernels), p=self.p_base)])
            if n_ops == self.max_operations:
                return tuple(seq)
            op = self.operations[rng.choice(len(self.operations), p=self.p_op)]
            seq.append(op)
            if op == STOP:
                return tuple(seq)
            n_ops += 1

    def sample_sequences(self, n: int, rng: np.random.Generator) -> list[Sequence]:
        return [self.sample_sequence(rng) for _ in range(n)]

    def sample(self, rng: np.random.Generator) -> Expression:
        """Draw one expression (canonical form of a sampled sequence)."""
        return self.to_expression(self.sample_sequence(rng))

    # --- sequences --------------------------------------------------------------------
    def validate_sequence(self, seq: Sequence) -> None:
        """Raise GrammarError unless ``seq`` is a sequence this grammar can emit."""
        if not seq:
            raise GrammarError("empty sequence")
        kernels = seq[0::2]
        ops = seq[1::2]
        for k in kernels:
            if k not in self.base_kernels:
                raise GrammarError(f"sequence {seq}: kernel {k!r} not in grammar {self.name}")
        for i, op in enumerate(ops):
            if op not in self.operations:
                raise GrammarError(
                    f"sequence {seq}: operation {op!r} not in grammar {self.name} "
                    f"({', '.join(self.operations)})"
                )
            if op == STOP and i != len(ops) - 1:
                raise GrammarError(f"sequence {seq}: tokens after stop")
        n_ops = sum(op != STOP for op in ops)
        ends_in_stop = bool(ops) and ops[-1] == STOP
        if n_ops > self.max_operations:
            raise GrammarError(f"sequence {seq}: more than N_max={self.max_operations} operations")
        if not ends_in_stop and n_ops != self.max_operations:
            raise GrammarError(f"sequence {seq}: must end in stop or reach N_max operations")
        if ends_in_stop and len(seq) % 2 != 0:
            raise GrammarError(f"sequence {seq}: stop must follow a kernel")
        if not ends_in_stop and len(seq) % 2 != 1:
            raise GrammarError(f"sequence {seq}: must end with a kernel")
        if ends_in_stop and n_ops == self.max_operations:
            raise GrammarError(
                f"sequence {seq}: no stop after N_max={self.max_operations} operations (implicit)"
            )

    def to_expression(self, seq: Sequence) -> Expression:
        """Apply the sequence left to right, S <- S op K (:func:`sequence_expression`)."""
        return sequence_expression(tuple(seq))

    def log_prob(self, seq: Sequence) -> float:
        """Exact log-probability of a token sequence under the grammar."""
        self.validate_sequence(seq)
        pb = dict(zip(self.base_kernels, self.p_base))
        po = dict(zip(self.operations, self.p_op))
        lp = sum(math.log(pb[k]) for k in seq[0::2])
        for op in seq[1::2]:
            if po[op] == 0:
                return -math.inf
            lp += math.log(po[op])
        return lp

    def enumerate_sequences(self, max_operations: int | None = None) -> list[Sequence]:
        """Every sequence with at most ``max_operations`` operations (small grammars only)."""
        n_max = self.max_operations if max_operations is None else max_operations
        ops = tuple(o for o, p in zip(self.operations, self.p_op) if p > 0 and o != STOP)
        out: list[Sequence] = []

        def rec(prefix: tuple[str, ...], n_ops: int) -> None:
            for k in self.base_kernels:
                seq = prefix + (k,)
                if n_ops == self.max_operations:
                    out.append(seq)
                    continue
                out.append(seq + (STOP,))
                if n_ops < n_max:
                    for op in ops:
                        rec(seq + (op,), n_ops + 1)

        rec((), 0)
        return out
