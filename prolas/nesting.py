"""Nested models: when is an expression S a limit of another expression E's hyperparameters?

E **contains** S when some setting of E's hyperparameters, at the edge of their box
(:mod:`prolas.gp.gram`), gives exactly S's covariance on any data. The limits used, each
exact to far below a nat at the box edges:

* an additive term's variance at its lower bound: the term drops out;
* a stationary factor (SE, RQ, PER) with its lengthscale at the upper bound: the factor
  is 1 on the data, so it drops out of its product (``PER*SE`` contains ``SE``; ``SE``
  contains ``C``, the empty product);
* RQ with its alpha at the upper bound is SE (``RQ`` contains ``SE``);
* a change operator whose transition lies at the edge of the box, beyond the data with
  the narrowest width: the data see only one of its sides (``CP(A, B)`` contains ``A``
  and ``B``; ``CW(A, B)`` contains ``A``, the window closed, and ``B``, the window
  open over all the data);
* any of these inside either side of a change operator, and any combination of them.

LIN is not dropped: its offset is bounded, so ``LIN*A`` only nears ``A``. Neither are
the white noise ``WN`` (it is not 1 off the diagonal at any setting: ``LIN*WN`` does not
contain ``LIN``) and the centred periodic ``PERC`` (at its longest lengthscale it is a
sinusoid ``cos(2 pi d / p)``, not 1, and no other setting makes it 1 or another kernel
exactly). They take part only as themselves: a ``WN`` or ``PERC`` factor of S is
reproduced by one of E, and an E term holding one reproduces an S term holding it too,
or drops out. One true containment is not claimed: E's observation noise can take the
white-noise model ``WN``'s term (``SE`` with its variance at the floor is ``WN``'s
covariance), but no term of E reproduces it; a missed containment only forgoes a start,
a false one would be wrong.

At the optima ``loglik(E) >= loglik(S)``: a fit of E below a fitted S has missed E's
optimum. :func:`embedding` says *how* S sits in E (which term of E reproduces which term
of S, which factors and change operators go to their limits), so a fit of E can start
exactly at S's optimum (:func:`prolas.gp.starts.embed_theta`).

>>> contains(parse("C + PER*SE"), parse("SE"))
True
>>> contains(parse("CP(LIN, PER)"), parse("PER"))
True
>>> contains(parse("LIN*SE"), parse("SE"))
False
>>> sorted(one_step_submodels(parse("C + PER*PER")))
['C', 'C + PER', 'PER*PER']
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

from prolas.expr import (
    CHANGE_FACTORS,
    CHANGE_OPERATORS,
    ChangeItem,
    Expression,
    factor_group,
    factor_kernel,
    from_items,
    parse,
)

__all__ = [
    "STATIONARY",
    "COLLAPSED_A",
    "COLLAPSED_B",
    "FROM_SE",
    "Embedding",
    "contains",
    "embedding",
    "one_step_submodels",
    "without_offset",
]

#: Factors that are 1 on the data at their upper lengthscale bound (not PERC: a sinusoid
#: there; not WN: 0 off the diagonal).
STATIONARY = frozenset({"SE", "RQ", "PER"})
#: A change group of E whose data see only its A side (before / outside).
COLLAPSED_A = "A"
#: A change group of E whose data see only its B side (after / inside).
COLLAPSED_B = "B"
#: An RQ factor of E reproducing an SE factor of S (alpha at its upper bound).
FROM_SE = "SE"


@dataclass(frozen=True)
class Embedding:
    """How S sits inside E, on the expanded terms of both (:attr:`Expression.terms`).

    Attributes:
        terms: for each term of E, the index of the term of S it reproduces, or ``None``
            (the term drops out: its variance at the lower bound, or a change factor of
            it is 0 on the data).
        factors: for each term of E, for each of its factors: for a base factor, the
            index of the S term's factor whose values it takes (an RQ may take an SE's,
            marked by :data:`FROM_SE` in :attr:`rq_from_se`), or ``None`` (at its limit,
            1 on the data); change factors are ``None`` here (see :attr:`groups`).
        rq_from_se: per term of E, the factor positions of RQs reproducing an SE.
        groups: for each change group of E, the S group whose location and width it
            takes, or :data:`COLLAPSED_A` / :data:`COLLAPSED_B`.
    """

    terms: tuple[int | None, ...]
    factors: tuple[tuple[int | None, ...], ...]
    rq_from_se: tuple[frozenset[int], ...]
    groups: tuple[int | str, ...]


def _side(name: str) -> tuple[int, str]:
    """``"CP_AFTER:1"`` -> ``(1, "B")``: a change factor's group and side."""
    kind = factor_kernel(name)
    sides = CHANGE_OPERATORS[CHANGE_FACTORS[kind]][1]
    return factor_group(name), (COLLAPSED_A if kind == sides[0] else COLLAPSED_B)


def _bases(term: tuple[str, ...]) -> list[tuple[int, str]]:
    """(position, kernel) of a term's base factors, the constant ``C`` left out."""
    return [(j, f) for j, f in enumerate(term) if ":" not in f and f != "C"]


def _match_bases(
    e_term: tuple[str, ...], s_term: tuple[str, ...]
) -> tuple[tuple[int | None, ...], frozenset[int]] | None:
    """Map S's base factors onto E's: the same kernel, or an E RQ for an S SE; every E
    factor left over must be stationary. Returns (per E factor: S factor or None, RQ
    positions reproducing an SE), or None."""
    mapping: list[int | None] = [None] * len(e_term)
    free = dict(_bases(e_term))
    from_se: set[int] = set()
    for j, f in _bases(s_term):
        hit = next((i for i, g in free.items() if g == f), None)
        if hit is None and f == "SE":
            hit = next((i for i, g in free.items() if g == "RQ"), None)
            if hit is not None:
                from_se.add(hit)
        if hit is None:
            return None
        mapping[hit] = j
        del free[hit]
    if any(g not in STATIONARY for g in free.values()):
        return None
    return tuple(mapping), frozenset(from_se)


def _plausible(e: Expression, s: Expression) -> bool:
    """Cheap necessary conditions: counts of terms, change operators and kernels."""
    if len(s.terms) > len(e.terms):
        return False
    for op in CHANGE_OPERATORS:
        if sum(g.op == op for g in s.change_groups) > sum(g.op == op for g in e.change_groups):
            return False
    ce, cs = e.base_counts, s.base_counts
    # each factor of S is one of E's of the same kernel (an SE may be an RQ; C is none)
    if any(cs[k] > ce[k] for k in ce if k not in ("SE", "C")):
        return False
    return cs["SE"] <= ce["SE"] + ce["RQ"] - cs["RQ"]


def _assign(compatible: list[list[int]], n_e: int) -> list[int] | None:
    """A distinct E term for every S term (``compatible[s]``: the E terms S term s may
    take), by backtracking; None if there is none."""
    order = sorted(range(len(compatible)), key=lambda s: len(compatible[s]))
    taken = [False] * n_e
    out = [-1] * len(compatible)

    def place(k: int) -> bool:
        if k == len(order):
            return True
        s = order[k]
        for e in compatible[s]:
            if not taken[e]:
                taken[e], out[s] = True, e
                if place(k + 1):
                    return True
                taken[e] = False
        return False

    return out if place(0) else None


@lru_cache(maxsize=65536)
def _embedding(e_text: str, s_text: str) -> Embedding | None:
    e, s = parse(e_text), parse(s_text)
    if e_text == s_text or not _plausible(e, s):
        return None
    e_terms, s_terms = e.terms, s.terms
    s_sides = [frozenset(_side(f) for f in t if ":" in f) for t in s_terms]
    options = [
        [COLLAPSED_A, COLLAPSED_B] + [h.index for h in s.change_groups if h.op == g.op]
        for g in e.change_groups
    ]
    for states in itertools.product(*options):
        mapped = [v for v in states if not isinstance(v, str)]
        if len(mapped) != len(set(mapped)):
            continue  # two groups of E cannot both reproduce one group of S
        compatible: list[list[int]] = [[] for _ in s_terms]
        plans: dict[tuple[int, int], tuple[tuple[int | None, ...], frozenset[int]]] = {}
        for i, et in enumerate(e_terms):
            needs: set[tuple[int, str]] = set()
            dead = False
            for f in et:
                if ":" not in f:
                    continue
                g, side = _side(f)
                state = states[g]
                if isinstance(state, str):
                    dead |= state != side  # 0 on the data: the term drops out
                else:
                    needs.add((state, side))
            if dead:
                continue
            for k, st in enumerate(s_terms):
                if s_sides[k] != needs:
                    continue
                plan = _match_bases(et, st)
                if plan is not None:
                    compatible[k].append(i)
                    plans[(k, i)] = plan
        if any(not c for c in compatible):
            continue
        assignment = _assign(compatible, len(e_terms))
        if assignment is None:
            continue
        terms: list[int | None] = [None] * len(e_terms)
        factors: list[tuple[int | None, ...]] = [(None,) * len(t) for t in e_terms]
        rq: list[frozenset[int]] = [frozenset()] * len(e_terms)
        for k, i in enumerate(assignment):
            terms[i] = k
            factors[i], rq[i] = plans[(k, i)]
        return Embedding(tuple(terms), tuple(factors), tuple(rq), tuple(states))
    return None


def embedding(e: Expression | str, s: Expression | str) -> Embedding | None:
    """How S sits inside E (:class:`Embedding`), or ``None`` when E does not contain S
    (or E and S are the same model). Cached on the canonical strings."""
    return _embedding(str(e), str(s))


def contains(e: Expression | str, s: Expression | str) -> bool:
    """Whether S is a limit of E's hyperparameters (module docstring); ``False`` for E == S."""
    return _embedding(str(e), str(s)) is not None


def _one_step_items(items: tuple) -> list[tuple]:
    """Canonical sums one limit away: an item dropped, a stationary factor dropped, an
    RQ made SE, or a change operator reduced to one side; recursively inside changes."""
    out: list[tuple] = []
    if len(items) > 1:
        out += [items[:i] + items[i + 1 :] for i in range(len(items))]
    for i, item in enumerate(items):
        head, tail = items[:i], items[i + 1 :]
        if isinstance(item, ChangeItem):
            out += [head + item.a + tail, head + item.b + tail]
            for a in _one_step_items(item.a):
                out.append(head + (ChangeItem(item.op, a, item.b),) + tail)
            for b in _one_step_items(item.b):
                out.append(head + (ChangeItem(item.op, item.a, b),) + tail)
            continue
        for j, factor in enumerate(item):
            if factor in STATIONARY:
                rest = item[:j] + item[j + 1 :]
                out.append(head + (rest or ("C",),) + tail)
            if factor == "RQ":
                out.append(head + (item[:j] + ("SE",) + item[j + 1 :],) + tail)
    return out


def without_offset(e: Expression) -> Expression | None:
    """``e`` without its top-level additive constant terms (``C + X`` -> ``X``), the model
    ``e`` contains with the constant's variance at its lower limit; ``None`` if ``e`` has
    no such term or is nothing but constants."""
    kept = tuple(i for i in e.items if isinstance(i, ChangeItem) or tuple(i) != ("C",))
    if len(kept) == len(e.items) or not kept:
        return None
    return from_items(kept)


def one_step_submodels(e: Expression) -> set[str]:
    """Canonical strings of the models one limit below ``e`` (module docstring)."""
    out = set()
    for items in _one_step_items(e.items):
        sub = str(from_items(items))
        if sub != str(e):
            out.add(sub)
    return out
