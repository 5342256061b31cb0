"""Immutable kernel expressions and their canonical sum-of-products form.

An expression is a tree of base kernels (``SE``, ``LIN``, ``PER``, ``RQ``) joined by
``+`` and ``*``. The tree carries no hyperparameter values and no torch; the GP
model is built from it only in :mod:`prolas.gp`.

Every expression has one **canonical form** (DESIGN.md): products are distributed
over sums; inside a product ``SE*SE`` collapses to ``SE`` (idempotent kernels);
identical terms merge; factors are sorted alphabetically and joined by ``*``;
terms are sorted and joined by `` + ``. Equality and hashing use the canonical
form, so ``(SE + PER) * LIN == LIN*PER + LIN*SE``.

>>> from prolas.expr import parse, SE, PER, LIN
>>> str((SE + PER) * LIN)
'LIN*PER + LIN*SE'
>>> parse("(se + per) × lin") == (SE + PER) * LIN
True
>>> parse("LIN*PER*SE + LIN*SE").n_params
9
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property

from prolas.errors import ExpressionError

__all__ = [
    "BaseKernelSpec",
    "BASE_KERNELS",
    "Expression",
    "Base",
    "Sum",
    "Product",
    "Term",
    "parse",
    "SE",
    "LIN",
    "PER",
    "RQ",
]


@dataclass(frozen=True)
class BaseKernelSpec:
    """Registry entry of a base kernel.

    Attributes:
        name: upper-case token used in expressions (``"SE"``).
        shape_params: names of the shape hyperparameters (no variance: each
            product term carries exactly one variance).
        formula: the kernel in DESIGN.md notation, for docs and ``describe``.
        idempotent: ``k*k`` is the same model as ``k`` (true for SE: the product of
            two SEs is an SE with a combined lengthscale).
        description: plain-language name used in reports.
    """

    name: str
    shape_params: tuple[str, ...]
    formula: str
    idempotent: bool
    description: str


#: Registry of base kernels; adding a kernel to prolas starts with one entry here
#: (plus its GPyTorch module in :mod:`prolas.gp` and defaults in :mod:`prolas.encoding`).
BASE_KERNELS: dict[str, BaseKernelSpec] = {
    spec.name: spec
    for spec in (
        BaseKernelSpec("LIN", ("offset",), "(x - c)(x' - c)", False, "linear function"),
        BaseKernelSpec(
            "PER",
            ("lengthscale", "period"),
            "exp(-2 sin^2(pi |d| / p) / l^2)",
            False,
            "periodic function",
        ),
        BaseKernelSpec(
            "RQ",
            ("lengthscale", "alpha"),
            "(1 + d^2 / (2 alpha l^2))^(-alpha)",
            False,
            "smooth function with multi-scale variation",
        ),
        BaseKernelSpec("SE", ("lengthscale",), "exp(-d^2 / (2 l^2))", True, "smooth function"),
    )
}

#: A product term in canonical form: factor names sorted alphabetically.
Term = tuple[str, ...]


def _canonical_term(factors: tuple[str, ...]) -> Term:
    """Sort factors and collapse repeated idempotent kernels (SE*SE -> SE)."""
    out: list[str] = []
    for name in sorted(factors):
        if out and out[-1] == name and BASE_KERNELS[name].idempotent:
            continue
        out.append(name)
    return tuple(out)


def _canonical_terms(terms: list[tuple[str, ...]]) -> tuple[Term, ...]:
    """Canonicalise every term, merge identical terms, sort the terms."""
    return tuple(sorted({_canonical_term(t) for t in terms}))


class Expression(ABC):
    """Base class of the immutable expression tree.

    Subclasses: :class:`Base` (a leaf), :class:`Sum`, :class:`Product`. The
    operators ``+`` and ``*`` build new nodes; n-ary nodes flatten nested nodes of
    the same kind (as GPyTorch's ``AdditiveKernel``/``ProductKernel`` do).
    """

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    # --- structure -----------------------------------------------------------------
    @abstractmethod
    def _raw_terms(self) -> list[tuple[str, ...]]:
        """Un-canonicalised product terms (factor-name tuples) of this node."""

    @cached_property
    def terms(self) -> tuple[Term, ...]:
        """Canonical sum-of-products: a sorted tuple of sorted factor tuples."""
        return _canonical_terms(self._raw_terms())

    @cached_property
    def canonical(self) -> str:
        """The canonical string, e.g. ``'LIN*PER + LIN*SE'`` (the cache key)."""
        return " + ".join("*".join(t) for t in self.terms)

    def canonical_form(self) -> Expression:
        """The canonical sum-of-products as a tree (a Sum of Products of Bases)."""
        return from_terms(self.terms)

    @property
    def n_params(self) -> int:
        """k = sum over terms of (1 variance + shape params of its factors) + 1 noise."""
        return sum(1 + sum(len(BASE_KERNELS[f].shape_params) for f in t) for t in self.terms) + 1

    @property
    def n_terms(self) -> int:
        return len(self.terms)

    @property
    def base_counts(self) -> dict[str, int]:
        """How many times each base kernel appears in the canonical form."""
        counts = dict.fromkeys(BASE_KERNELS, 0)
        for t in self.terms:
            for f in t:
                counts[f] += 1
        return counts

    # --- operators -----------------------------------------------------------------
    def __add__(self, other: Expression) -> Expression:
        if not isinstance(other, Expression):
            return NotImplemented
        return Sum((self, other))

    def __mul__(self, other: Expression) -> Expression:
        if not isinstance(other, Expression):
            return NotImplemented
        return Product((self, other))

    # --- identity: canonical form ---------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Expression):
            return NotImplemented
        return self.terms == other.terms

    def __hash__(self) -> int:
        return hash(self.terms)

    def __lt__(self, other: Expression) -> bool:
        return self.canonical < other.canonical

    def __str__(self) -> str:
        return self.canonical

    def __repr__(self) -> str:
        return f"parse({self.canonical!r})"

    def __reduce__(self):  # picklable for process pools: rebuild from the string
        return (parse, (self.canonical,))


class Base(Expression):
    """A base kernel leaf, e.g. ``Base("SE")``."""

    def __init__(self, name: str) -> None:
        key = name.upper()
        if key not in BASE_KERNELS:
            raise ExpressionError(
                f"unknown base kernel {name!r}; known: {', '.join(sorted(BASE_KERNELS))}"
            )
        object.__setattr__(self, "name", key)

    def _raw_terms(self) -> list[tuple[str, ...]]:
        return [(self.name,)]

    def tree_str(self) -> str:
        return self.name


class _NAry(Expression):
    symbol = "?"

    def __init__(self, operands: tuple[Expression, ...]) -> None:
        flat: list[Expression] = []
        for op in operands:
            if not isinstance(op, Expression):
                raise ExpressionError(f"not an expression: {op!r}")
            flat.extend(op.operands if type(op) is type(self) else (op,))
        if len(flat) < 2:
            raise ExpressionError(f"{type(self).__name__} needs at least two operands")
        object.__setattr__(self, "operands", tuple(flat))

    def tree_str(self) -> str:
        """The tree as written (not canonical), with parentheses where needed."""
        parts = []
        for op in self.operands:
            s = op.tree_str()
            parts.append(f"({s})" if isinstance(op, Sum) and isinstance(self, Product) else s)
        return f" {self.symbol} ".join(parts) if self.symbol == "+" else "*".join(parts)


class Sum(_NAry):
    """n-ary sum of expressions."""

    symbol = "+"

    def _raw_terms(self) -> list[tuple[str, ...]]:
        return [t for op in self.operands for t in op._raw_terms()]


class Product(_NAry):
    """n-ary product of expressions; distributes over sums in :attr:`terms`."""

    symbol = "*"

    def _raw_terms(self) -> list[tuple[str, ...]]:
        out: list[tuple[str, ...]] = [()]
        for op in self.operands:
            out = [a + b for a, b in itertools.product(out, op._raw_terms())]
        return out


def from_terms(terms: tuple[Term, ...] | list[tuple[str, ...]]) -> Expression:
    """Build an expression from a list of product terms (factor-name tuples)."""
    if not terms or any(len(t) == 0 for t in terms):
        raise ExpressionError("an expression needs at least one non-empty term")
    nodes: list[Expression] = []
    for t in _canonical_terms(list(terms)):
        factors = [Base(f) for f in t]
        nodes.append(factors[0] if len(factors) == 1 else Product(tuple(factors)))
    return nodes[0] if len(nodes) == 1 else Sum(tuple(nodes))


SE = Base("SE")
LIN = Base("LIN")
PER = Base("PER")
RQ = Base("RQ")


# --- parsing ------------------------------------------------------------------------
# Grammar:  sum := product ('+' product)* ;  product := atom (('*'|'×') atom)* ;
#           atom := NAME | '(' sum ')'.  Names are case-insensitive.


def _tokenize(text: str) -> list[tuple[str, int]]:
    tokens: list[tuple[str, int]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "+*×()":
            tokens.append(("*" if ch == "×" else ch, i))
            i += 1
        elif ch.isalpha():
            j = i
            while j < len(text) and (text[j].isalnum() or text[j] == "_"):
                j += 1
            tokens.append((text[i:j].upper(), i))
            i = j
        else:
            raise ExpressionError(_pointer(text, i, f"unexpected character {ch!r}"))
    return tokens


def _pointer(text: str, pos: int, message: str) -> str:
    """One-line error that points at the position in the input."""
    return f"cannot parse {text!r}: {message} at position {pos + 1}"


def parse(text: str) -> Expression:
    """Parse a kernel expression such as ``"(SE + PER) × lin"``.

    Accepts ``+``, ``*`` or ``×``, parentheses, any whitespace and any case.

    Raises:
        ExpressionError: with the position of the first offending token.
    """
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("cannot parse an empty expression")
    tokens = _tokenize(text)
    pos = 0

    def peek() -> tuple[str, int] | None:
        return tokens[pos] if pos < len(tokens) else None

    def parse_sum() -> Expression:
        nonlocal pos
        node = parse_product()
        while (tok := peek()) is not None and tok[0] == "+":
            pos += 1
            node = node + parse_product()
        return node

    def parse_product() -> Expression:
        nonlocal pos
        node = parse_atom()
        while (tok := peek()) is not None and tok[0] == "*":
            pos += 1
            node = node * parse_atom()
        return node

    def parse_atom() -> Expression:
        nonlocal pos
        tok = peek()
        if tok is None:
            raise ExpressionError(_pointer(text, len(text), "unexpected end of expression"))
        value, at = tok
        if value == "(":
            pos += 1
            node = parse_sum()
            close = peek()
            if close is None or close[0] != ")":
                where = close[1] if close else len(text)
                raise ExpressionError(_pointer(text, where, "expected ')'"))
            pos += 1
            return node
        if value in BASE_KERNELS:
            pos += 1
            return Base(value)
        if value[0].isalpha():
            raise ExpressionError(
                _pointer(
                    text,
                    at,
                    f"unknown kernel {value!r} (known: {', '.join(sorted(BASE_KERNELS))})",
                )
            )
        raise ExpressionError(_pointer(text, at, f"unexpected {value!r}"))

    node = parse_sum()
    if pos != len(tokens):
        raise ExpressionError(_pointer(text, tokens[pos][1], f"unexpected {tokens[pos][0]!r}"))
    return node
