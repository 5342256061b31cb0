"""Immutable kernel expressions and their canonical sum-of-products form.

An expression is a tree of base kernels (``SE``, ``LIN``, ``PER``, ``RQ``, the
constant ``C``, the white noise ``WN`` and the centred periodic ``PERC``) joined by
``+``, ``*`` and the change operators ``CP(A, B)`` (A before a change-point, B after)
and ``CW(A, B)`` (B inside a change-window, A outside).
The tree carries no hyperparameter values; the kernels themselves (formulas,
parameters, idempotence) are the entries of the registry :mod:`prolas.kernels`, and
the GP model is built from the tree only in :mod:`prolas.gp`.

Every expression has one **canonical form** (docs/conventions.md): products are distributed
over sums; inside a product ``SE*SE`` collapses to ``SE`` (idempotent kernels);
identical terms merge; factors are sorted alphabetically and joined by ``*``;
terms are sorted and joined by `` + ``. Equality and hashing use the canonical
form, so ``(SE + PER) * LIN == LIN*PER + LIN*SE``. ``C`` is dropped from a product
with other factors (the term variance scales it). Products distribute over a change
operator (``CP(A, B) * D = CP(A*D, B*D)``), whose sides are canonical recursively;
a change operator is one additive item, printed ``CP(A, B)``.

White noise ``WN`` absorbs every stationary factor of its product (each is 1 at
``d = 0``: ``SE*WN = PER*WN = C*WN = WN``) and keeps the others (``LIN*WN``: noise growing
away from LIN's offset). A term that is ``WN`` alone *at the top level* is the observation
noise every model already has, so it is dropped (``SE + WN`` is ``SE``), unless it is the
whole expression: ``WN`` alone (also ``WN + WN``, ``C*WN``) stays ``WN``, the white-noise
model. Under a change operator ``WN`` alone is weighted noise, not the global noise, and
stays (``CP(WN, C)``). The rule applies to the whole expression only: as a
sub-expression ``SE + WN`` keeps its ``WN`` (:attr:`Expression.sub_items`), so
``(SE + WN) * LIN`` is ``LIN*SE + LIN*WN``.

For fitting, :attr:`Expression.terms` expands the canonical form into a plain sum of
products in which every change operator contributes a factor to each term on its
sides (``CP_BEFORE`` = (1 - σ(x))(1 - σ(x')), ``CP_AFTER`` = σ(x)σ(x')); those
factors share the operator's location and width.

>>> from prolas.expr import parse, SE, PER, LIN
>>> str((SE + PER) * LIN)
'LIN*PER + LIN*SE'
>>> parse("(se + per) × lin") == (SE + PER) * LIN
True
>>> parse("LIN*PER*SE + LIN*SE").n_params
9
>>> str(parse("cp(lin, per) * se"))
'CP(LIN*SE, PER*SE)'
>>> parse("CP(LIN, PER*SE)").terms
(('CP_BEFORE:0', 'LIN'), ('CP_AFTER:0', 'PER', 'SE'))
>>> str(parse("(se + wn) * lin + wn")), str(parse("SE*WN + C")), str(parse("PER*WN"))
('LIN*SE + LIN*WN', 'C', 'WN')
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property

from prolas.errors import ExpressionError
from prolas.kernels import BASE_KERNELS, CHANGE_FACTORS, CHANGE_OPERATORS, factor
from prolas.kernels.spec import NOISE

__all__ = [
    "BASE_KERNELS",
    "Expression",
    "Base",
    "Sum",
    "Product",
    "Term",
    "Change",
    "ChangeItem",
    "ChangeGroup",
    "CHANGE_OPERATORS",
    "CHANGE_FACTORS",
    "factor_kernel",
    "factor_group",
    "factor_shape_params",
    "from_items",
    "parse",
    "C",
    "CP",
    "CW",
    "SE",
    "LIN",
    "PER",
    "PERC",
    "RQ",
    "WN",
]


#: A product term of base kernels in canonical form: factor names sorted alphabetically.
Term = tuple[str, ...]


@dataclass(frozen=True)
class ChangeItem:
    """``CP(A, B)`` or ``CW(A, B)`` in canonical form: ``A`` and ``B`` are canonical
    sums (tuples of items). One additive item of an expression's canonical form."""

    op: str
    a: tuple[Item, ...]
    b: tuple[Item, ...]

    def __str__(self) -> str:
        return f"{self.op}({_items_str(self.a)}, {_items_str(self.b)})"


#: One additive item of a canonical form: a product of base kernels or a change operator.
Item = Term | ChangeItem


def _item_str(item: Item) -> str:
    return str(item) if isinstance(item, ChangeItem) else "*".join(item)


def _items_str(items: tuple[Item, ...]) -> str:
    return " + ".join(_item_str(i) for i in items)


def _is_noise(name: str) -> bool:
    return BASE_KERNELS[name].role == NOISE


def _canonical_term(factors: tuple[str, ...]) -> Term:
    """Sort factors and collapse repeated idempotent kernels (SE*SE -> SE); the constant
    ``C`` is dropped from a product with any other factor (C*K is K: the term variance
    already scales it); white noise (``WN``) absorbs every stationary factor, each 1 at
    ``d = 0`` (PER*WN -> WN), and keeps the others (LIN*WN)."""
    if any(_is_noise(f) for f in factors):
        factors = tuple(f for f in factors if _is_noise(f) or not BASE_KERNELS[f].stationary)
    out: list[str] = []
    for name in sorted(factors):
        if out and out[-1] == name and BASE_KERNELS[name].idempotent:
            continue
        out.append(name)
    if len(out) > 1 and "C" in out:
        out.remove("C")
    return tuple(out)


def _canonical_items(items: list[Item]) -> tuple[Item, ...]:
    """Merge identical items and sort them by their printed form."""
    return tuple(sorted(set(items), key=_item_str))


def _is_global_noise(item: Item) -> bool:
    """A top-level term that is white noise alone: the observation noise itself."""
    return not isinstance(item, ChangeItem) and len(item) == 1 and _is_noise(item[0])


def _without_global_noise(items: tuple[Item, ...]) -> tuple[Item, ...]:
    """The whole expression's items without its ``WN``-alone terms (the observation
    noise every model has); an expression of nothing else stays ``WN``."""
    kept = tuple(i for i in items if not _is_global_noise(i))
    return kept if kept else items


def _multiply(x: Item, y: Item) -> Item:
    """The product of two items in canonical form: products distribute over change
    operators (``CP(A, B) * D = CP(A*D, B*D)``); of two change operators, the one that
    prints later is distributed into the other (so the result does not depend on order).
    """
    if isinstance(x, ChangeItem) and isinstance(y, ChangeItem) and _item_str(y) < _item_str(x):
        x, y = y, x
    if isinstance(y, ChangeItem) and not isinstance(x, ChangeItem):
        x, y = y, x
    if isinstance(x, ChangeItem):
        return ChangeItem(x.op, _multiply_sums(x.a, (y,)), _multiply_sums(x.b, (y,)))
    return _canonical_term(x + y)


def _multiply_sums(xs: tuple[Item, ...], ys: tuple[Item, ...]) -> tuple[Item, ...]:
    return _canonical_items([_multiply(a, b) for a in xs for b in ys])


@dataclass(frozen=True)
class ChangeGroup:
    """One change operator in an expression's expansion: ``op`` and its index (the
    order in which the canonical form is read, depth first)."""

    op: str
    index: int

    @property
    def shape_params(self) -> tuple[str, ...]:
        return CHANGE_OPERATORS[self.op][0]


def _expand(
    items: tuple[Item, ...], groups: list[ChangeGroup], prefix: tuple[str, ...]
) -> list[tuple[str, ...]]:
    """Expanded product terms: change factors (``"CP_BEFORE:0"``, outermost first), then
    the term's base kernels. A term that is only ``C`` under a change keeps no base factor."""
    out: list[tuple[str, ...]] = []
    for item in items:
        if isinstance(item, ChangeItem):
            group = ChangeGroup(item.op, len(groups))
            groups.append(group)
            side_a, side_b = CHANGE_OPERATORS[item.op][1]
            out += _expand(item.a, groups, (*prefix, f"{side_a}:{group.index}"))
            out += _expand(item.b, groups, (*prefix, f"{side_b}:{group.index}"))
        else:
            bases = item if not (prefix and item == ("C",)) else ()
            out.append((*prefix, *bases))
    return out


def factor_kernel(name: str) -> str:
    """The kernel of an expanded factor name: ``"CP_BEFORE:0"`` -> ``"CP_BEFORE"``."""
    return name.split(":", 1)[0]


def factor_shape_params(kind: str) -> tuple[str, ...]:
    """Shape parameters of a factor kind: a base kernel's, or its change operator's."""
    return factor(kind).shape_params


def factor_group(name: str) -> int | None:
    """The change group of an expanded factor name (``None`` for a base kernel)."""
    return int(name.split(":", 1)[1]) if ":" in name else None


class Expression(ABC):
    """Base class of the immutable expression tree.

    Subclasses: :class:`Base` (a leaf), :class:`Sum`, :class:`Product`, :class:`Change`.
    The operators ``+`` and ``*`` build new nodes; n-ary nodes flatten nested nodes of
    the same kind (as GPyTorch's ``AdditiveKernel``/``ProductKernel`` do).
    """

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    # --- structure -----------------------------------------------------------------
    @abstractmethod
    def _items(self) -> tuple[Item, ...]:
        """This node's canonical form as a sub-expression: a sorted tuple of distinct
        additive items (``WN``-alone terms kept)."""

    @cached_property
    def sub_items(self) -> tuple[Item, ...]:
        """The canonical items of this node as a part of a larger expression: a term
        that is ``WN`` alone is kept, since a product can still scale it
        (``(SE + WN) * LIN``). Sums, products and change operators are built from these."""
        return self._items()

    @cached_property
    def items(self) -> tuple[Item, ...]:
        """Canonical additive items: base-kernel products (sorted factor tuples) and
        change operators (:class:`ChangeItem`, children canonical), sorted by print;
        a top-level term that is ``WN`` alone (the observation noise) is dropped unless
        it is all there is (module docstring)."""
        return _without_global_noise(self.sub_items)

    @cached_property
    def has_change(self) -> bool:
        """Whether the canonical form holds a change operator."""
        return any(isinstance(i, ChangeItem) for i in self.items)

    @cached_property
    def _expansion(self) -> tuple[tuple[tuple[str, ...], ...], tuple[ChangeGroup, ...]]:
        groups: list[ChangeGroup] = []
        terms = tuple(_expand(self.items, groups, ()))
        return terms, tuple(groups)

    @property
    def terms(self) -> tuple[tuple[str, ...], ...]:
        """The model's sum of products, one tuple of factor names per term.

        Without change operators these are the canonical terms (sorted tuples of base
        kernels). A change operator contributes factors named ``"<SIDE>:<group>"``
        (e.g. ``"CP_BEFORE:0"``) to every term on that side; terms with the same group
        share its location/width parameters (:attr:`change_groups`).
        """
        return self._expansion[0]

    @property
    def change_groups(self) -> tuple[ChangeGroup, ...]:
        """The change operators of the expansion, in the order of their group index."""
        return self._expansion[1]

    @cached_property
    def canonical(self) -> str:
        """The canonical string, e.g. ``'LIN*PER + LIN*SE'`` (the cache key)."""
        return _items_str(self.items)

    def canonical_form(self) -> Expression:
        """The canonical form as a tree."""
        return parse(self.canonical)

    @property
    def n_params(self) -> int:
        """k = shape params of each change operator (once) + per term (1 variance + its
        base factors' shape params) + 1 noise (docs/conventions.md)."""
        shapes = sum(len(g.shape_params) for g in self.change_groups)
        per_term = sum(
            1 + sum(len(BASE_KERNELS[f].shape_params) for f in t if ":" not in f)
            for t in self.terms
        )
        return shapes + per_term + 1

    @property
    def n_terms(self) -> int:
        return len(self.terms)

    @property
    def base_counts(self) -> dict[str, int]:
        """How many times each base kernel appears in the expanded terms."""
        counts = dict.fromkeys(BASE_KERNELS, 0)
        for t in self.terms:
            for f in t:
                if ":" not in f:
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
        return self.items == other.items

    def __hash__(self) -> int:
        return hash(self.items)

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

    def _items(self) -> tuple[Item, ...]:
        return ((self.name,),)

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

    def _items(self) -> tuple[Item, ...]:
        return _canonical_items([i for op in self.operands for i in op.sub_items])


class Product(_NAry):
    """n-ary product of expressions; distributes over sums and change operators."""

    symbol = "*"

    def _items(self) -> tuple[Item, ...]:
        out = self.operands[0].sub_items
        for op in self.operands[1:]:
            out = _multiply_sums(out, op.sub_items)
        return out


class Change(Expression):
    """A change operator: ``Change("CP", A, B)`` is A before a change-point and B after
    it; ``Change("CW", A, B)`` is B inside a window and A outside (docs/conventions.md)."""

    def __init__(self, op: str, a: Expression, b: Expression) -> None:
        key = op.upper()
        if key not in CHANGE_OPERATORS:
            raise ExpressionError(f"unknown change operator {op!r}; known: CP, CW")
        if not (isinstance(a, Expression) and isinstance(b, Expression)):
            raise ExpressionError(f"{key} needs two expressions")
        object.__setattr__(self, "op", key)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)

    def _items(self) -> tuple[Item, ...]:
        return (ChangeItem(self.op, self.a.sub_items, self.b.sub_items),)

    def tree_str(self) -> str:
        return f"{self.op}({self.a.tree_str()}, {self.b.tree_str()})"


def CP(a: Expression, b: Expression) -> Expression:  # noqa: N802 (the operator's name)
    """``CP(A, B)``: A before a change-point, B after it."""
    return Change("CP", a, b)


def CW(a: Expression, b: Expression) -> Expression:  # noqa: N802
    """``CW(A, B)``: B inside a change-window, A outside it."""
    return Change("CW", a, b)


def from_items(items: tuple[Item, ...] | list[Item]) -> Expression:
    """Build an expression from additive items (base-kernel products and
    :class:`ChangeItem` s), the inverse of :attr:`Expression.items`."""
    if not items:
        raise ExpressionError("an expression needs at least one term")
    nodes: list[Expression] = []
    for item in _canonical_items(list(items)):
        if isinstance(item, ChangeItem):
            nodes.append(Change(item.op, from_items(item.a), from_items(item.b)))
        elif not item:
            raise ExpressionError("an expression needs at least one non-empty term")
        else:
            factors = [Base(f) for f in item]
            nodes.append(factors[0] if len(factors) == 1 else Product(tuple(factors)))
    return nodes[0] if len(nodes) == 1 else Sum(tuple(nodes))


SE = Base("SE")
LIN = Base("LIN")
PER = Base("PER")
RQ = Base("RQ")
C = Base("C")
WN = Base("WN")
PERC = Base("PERC")


# --- parsing ------------------------------------------------------------------------
# Grammar:  sum := product ('+' product)* ;  product := atom (('*'|'×') atom)* ;
#           atom := NAME | ('CP'|'CW') '(' sum ',' sum ')' | '(' sum ')'.
# Names are case-insensitive.


def _tokenize(text: str) -> list[tuple[str, int]]:
    tokens: list[tuple[str, int]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "+*×(),":
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

    Accepts ``+``, ``*`` or ``×``, ``CP(A, B)`` and ``CW(A, B)``, parentheses, any
    whitespace and any case.

    Raises:
        ExpressionError: with the position of the first offending token.
    """
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("cannot parse an empty expression")
    tokens = _tokenize(text)
    pos = 0

    def peek() -> tuple[str, int] | None:
        return tokens[pos] if pos < len(tokens) else None

    def expect(symbol: str, message: str) -> None:
        nonlocal pos
        tok = peek()
        if tok is None or tok[0] != symbol:
            raise ExpressionError(_pointer(text, tok[1] if tok else len(text), message))
        pos += 1

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
        if value in CHANGE_OPERATORS:
            pos += 1
            expect("(", f"expected '(' after {value}")
            a = parse_sum()
            expect(",", f"expected ',' between the two sides of {value}")
            b = parse_sum()
            expect(")", "expected ')'")
            return Change(value, a, b)
        if value in BASE_KERNELS:
            pos += 1
            return Base(value)
        if value[0].isalpha():
            raise ExpressionError(
                _pointer(
                    text,
                    at,
                    f"unknown kernel {value!r} (known: "
                    f"{', '.join([*sorted(BASE_KERNELS), *CHANGE_OPERATORS])})",
                )
            )
        raise ExpressionError(_pointer(text, at, f"unexpected {value!r}"))

    node = parse_sum()
    if pos != len(tokens):
        raise ExpressionError(_pointer(text, tokens[pos][1], f"unexpected {tokens[pos][0]!r}"))
    return node
