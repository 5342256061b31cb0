"""Optimal-transport distance between kernel expressions (after OTMANN, Kandasamy et al. 2018).

**Expression graph.** The canonical sum-of-products of an expression is drawn as a
DAG, like a network in OTMANN: an input node ``ip`` feeds every base-kernel leaf
(one leaf per factor occurrence, ``C`` included); the leaves of a product term feed a
``*`` node (omitted for a one-factor term); the terms feed a ``+`` node (omitted for a
one-term expression), which feeds the output node ``op``. A change operator
``CP(A, B)`` (``CW(A, B)``) is one additive item: the graphs of its sides A and B (sums,
built the same way, recursively) feed one side node each, labelled ``CP_BEFORE`` and
``CP_AFTER`` (``CW_OUTSIDE``, ``CW_INSIDE``), and the two side nodes feed a ``CP``
(``CW``) node, which takes the item's place in the enclosing sum. Layer masses: a leaf
has mass ``leaf_mass``, an operator node (``*``, ``+``, a side, ``CP``/``CW``)
``op_mass`` x its fan-in, and ``ip``/``op`` each ``zeta`` x the total mass of the other
("processing") nodes (OTMANN's choice). Nodes are ordered by their longest path from
``ip`` (stable), which for an expression without change operators is the order of the
flat construction (leaves, products, sum): its graph and distances are unchanged.

**Distance.** With Z_ij the mass matched between node i of G1 and node j of G2,

.. math::

    d(G_1, G_2) = \\min_Z \\; \\langle Z, C_{lmm} \\rangle + \\phi_{nas}(Z)
                 + \\nu_{str} \\langle Z, C_{str} \\rangle,
    \\qquad \\sum_j Z_{ij} \\le m(i), \\; \\sum_i Z_{ij} \\le m(j),

* label mismatch C_lmm(i, j) = M(label_i, label_j): cheap for similar kernels
  (SE-RQ 0.2), dearer for others; between operators ``+``/``*`` 0.5, ``CP``/``CW`` 0.5,
  a change operator and ``+`` 0.5 (both add their sides), a change operator and ``*`` 1;
  between side nodes 0.5 for the two sides of one operator and for the corresponding
  sides of CP and CW (before ~ outside, after ~ inside), else 1; infinite between
  kernels, operators, side nodes and ip/op;
* non-assignment phi_nas = mass left unmatched in either graph (unit cost 1);
* structure C_str(i, j) = (1/6) sum_{s in {sp, lp, rw}, t in {ip, op}} |delta^s_t(i) - delta^s_t(j)|
  over shortest / longest / random-walk path lengths from ``ip`` and to ``op``.

It is a balanced OT program once a sink is added to each graph (mass = the other
graph's total mass; unit cost 1 between a node and the other graph's sink, 0 between
the two sinks). An optimal plan never matches nodes at the stand-in for an infinite
cost (>= 2: leaving both unmatched is cheaper), so ip and op, each at that cost from
every other label, match only their counterparts: their share of d is
``min(m1, m2) min(c, 2) + |m1 - m2|`` in closed form, and POT's exact network simplex
solves the program of the remaining nodes, in which nodes of equal label and path
lengths are merged (:class:`Transport`; equal to the one program over all nodes to
rounding). The normalised distance is d_bar = d / (tm(G1) + tm(G2)) <= 1.

**When is d a (pseudo-)metric?** The per-node cost c(i, j) = M(l_i, l_j) + nu C_str(i, j)
must itself be a pseudometric on the disjoint union of all nodes: C_str is an L1
distance between path-length vectors (always a pseudometric), so this holds iff M
satisfies M(a, a) = 0, symmetry and the triangle inequality. Then gluing an optimal
plan G1->G2 with one G2->G3 gives a feasible plan G1->G3 whose matched cost is at
most the sum (c's triangle inequality) and whose unmatched mass is at most the
unmatched mass of the two plans, so d(G1, G3) <= d(G1, G2) + d(G2, G3)
(OTMANN Theorem 1's "mild regularity conditions on M"). :class:`OTConfig` checks
this on construction and refuses an M that violates it. Infinite entries are
replaced by a finite ``infinity`` >= 2 (never used by an optimal plan, since
leaving both masses unmatched costs 2); this keeps the triangle inequality because
any path between two label classes crosses an infinite entry. d_bar is *not* a
metric (OTMANN notes this too). d is a *pseudo*metric: two different expressions
whose graphs have the same labelled nodes, masses and path lengths are at distance
0 (e.g. ``PER*PER*RQ + PER*RQ*RQ*SE`` and ``PER*PER*RQ*SE + PER*RQ*RQ``: the
node multisets do not say which leaves share a product; likewise ``CP(SE, LIN)`` and
``CP(LIN, SE)``: they do not say which side a leaf is on).

**Kernel.** kappa = alpha e^{-beta d} + alpha_bar e^{-beta_bar d_bar} with learnable
alpha, beta, alpha_bar, beta_bar in [1e-4, 1e3] (NASBOT §4; bounded so that the
optimiser cannot reach beta = inf, where e^{-beta * 0} is undefined). It is not
guaranteed PSD.
:class:`OTKernel` computes the smallest eigenvalue of the Gram matrix over the
distinct expressions of each call and, if it is negative, either adds
``c = -lambda_min + eps`` to k(G, G) (``indefinite="jitter"``, a white-noise term
c 1[G = G'], the default) or clips the negative eigenvalues (``"clip"``), with a
:class:`~prolas.errors.NumericsWarning`.

Inputs of :class:`OTKernel` are indices into an :class:`ExpressionRegistry`
(``... x n x 1`` float tensors holding integers); distances are cached.
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np
import ot

try:  # POT's C++ network simplex, without ot.emd's per-call checks (see _emd_cost)
    from ot.lp.emd_wrap import emd_c as _emd_c
except ImportError:  # pragma: no cover - depends on the POT version
    _emd_c = None
import torch
from gpytorch.constraints import Interval
from gpytorch.kernels import Kernel

from prolas.errors import NumericsWarning
from prolas.expr import BASE_KERNELS, CHANGE_OPERATORS, ChangeItem, Expression, parse
from prolas.kernels import kernel_costs

__all__ = [
    "OTConfig",
    "ExpressionGraph",
    "expression_graph",
    "otmann_distance",
    "ExpressionRegistry",
    "OTKernel",
    "DEFAULT_KERNEL_COSTS",
    "gram_min_eigenvalue",
]

#: Label mismatch costs between base kernels (symmetric; triangle inequality holds), as
#: each kernel's registry entry declares them (``ot_costs``): RQ is a scale mixture of SEs
#: (cheap); PER is a stationary smooth kernel like SE/RQ; LIN (non-stationary) is far from
#: all of them; C is the long-lengthscale limit of SE, RQ and PER. Missing pairs cost 1.
DEFAULT_KERNEL_COSTS: dict[tuple[str, str], float] = kernel_costs()
#: Side-node labels of the change operators, in ``CHANGE_OPERATORS`` order (A side, B side).
CHANGE_SIDES: tuple[str, ...] = tuple(
    side for _, sides in CHANGE_OPERATORS.values() for side in sides
)


@dataclass(frozen=True)
class OTConfig:
    """Parameters of the expression distance.

    Attributes:
        kernel_costs: M between base kernels (unordered pairs; missing pairs cost 1).
        operator_cost: M("+", "*").
        change_cost: M("CP", "CW"); also M(A side, B side) of one operator and between
            the corresponding sides of CP and CW (non-corresponding sides: min(1, 2x)).
        change_sum_cost: M(change operator, "+"); M(change operator, "*") is
            min(1, change_sum_cost + operator_cost).
        nu_str: weight of the structural penalty.
        leaf_mass, op_mass, zeta: layer masses (see module docstring).
        infinity: finite stand-in for the infinite label costs (>= 2).
    """

    kernel_costs: Mapping[tuple[str, str], float] = field(
        default_factory=lambda: dict(DEFAULT_KERNEL_COSTS)
    )
    operator_cost: float = 0.5
    change_cost: float = 0.5
    change_sum_cost: float = 0.5
    nu_str: float = 0.5
    leaf_mass: float = 1.0
    op_mass: float = 0.5
    zeta: float = 0.1
    infinity: float = 10.0

    def __post_init__(self) -> None:
        if self.infinity < 2.0:
            raise ValueError("infinity must be >= 2 (the cost of leaving both masses unmatched)")
        m = self.label_matrix()
        lab = self.labels
        if not np.allclose(m, m.T) or np.any(np.diag(m) != 0) or np.any(m < 0):
            raise ValueError("label cost matrix must be symmetric, >= 0, with zero diagonal")
        for a, b, c in itertools.product(range(len(lab)), repeat=3):
            if m[a, c] > m[a, b] + m[b, c] + 1e-12:
                raise ValueError(
                    f"label costs violate the triangle inequality: M({lab[a]},{lab[c]}) > "
                    f"M({lab[a]},{lab[b]}) + M({lab[b]},{lab[c]}); d would not be a metric"
                )

    @property
    def labels(self) -> tuple[str, ...]:
        return (*sorted(BASE_KERNELS), "+", "*", "ip", "op", *CHANGE_OPERATORS, *CHANGE_SIDES)

    def label_matrix(self) -> np.ndarray:
        """M over :attr:`labels` (``L x L``), infinite entries set to ``infinity``."""
        lab = self.labels
        n = len(lab)
        m = np.full((n, n), self.infinity)
        kernels = sorted(BASE_KERNELS)
        costs = {frozenset(k): float(v) for k, v in self.kernel_costs.items()}
        for i, a in enumerate(kernels):
            for j, b in enumerate(kernels):
                m[i, j] = 0.0 if a == b else costs.get(frozenset((a, b)), 1.0)
        p, t = lab.index("+"), lab.index("*")
        m[p, p] = m[t, t] = 0.0
        m[p, t] = m[t, p] = self.operator_cost
        for name in ("ip", "op"):
            q = lab.index(name)
            m[q, q] = 0.0
        ops = list(CHANGE_OPERATORS)
        for a in ops:
            i = lab.index(a)
            for b in ops:
                m[i, lab.index(b)] = 0.0 if a == b else self.change_cost
            m[i, p] = m[p, i] = self.change_sum_cost
            m[i, t] = m[t, i] = min(1.0, self.change_sum_cost + self.operator_cost)
        # sides: (operator index, side index 0 = A, 1 = B)
        where = {
            side: (o, s)
            for o, (_, sides) in enumerate(CHANGE_OPERATORS.values())
            for s, side in enumerate(sides)
        }
        for a, (oa, sa) in where.items():
            for b, (ob, sb) in where.items():
                near = (oa == ob) != (sa == sb)  # one operator's two sides, or CP/CW alike
                cost = (
                    0.0 if a == b else self.change_cost if near else min(1.0, 2 * self.change_cost)
                )
                m[lab.index(a), lab.index(b)] = cost
        return m


@dataclass(frozen=True)
class ExpressionGraph:
    """An expression as a layered DAG.

    Attributes:
        expression: canonical string.
        labels: label index per node (into :attr:`OTConfig.labels`), shape ``n``.
        masses: layer mass per node, shape ``n``.
        paths: path lengths per node, shape ``n x 6`` (sp, lp, rw from ip; sp, lp, rw to op).
        edges: ``(u, v)`` pairs.
    """

    expression: str
    labels: np.ndarray
    masses: np.ndarray
    paths: np.ndarray
    edges: tuple[tuple[int, int], ...]

    @cached_property
    def total_mass(self) -> float:
        return float(self.masses.sum())

    @cached_property
    def support(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(labels, masses, paths)`` of the nodes with positive mass: the only ones a
        transport plan can move mass from or to (zero-mass nodes change no cost)."""
        keep = self.masses > 0
        return self.labels[keep], self.masses[keep], np.ascontiguousarray(self.paths[keep])

    @cached_property
    def transport(self) -> Transport:
        """The graph as :func:`otmann_distance` solves it (:class:`Transport`)."""
        n = len(self.labels)
        masses = self.masses.tolist()
        merged, weight = _merged_nodes(self.labels.tolist(), masses, self.paths.tolist())
        return Transport(
            (masses[0], self.paths[0]),
            (masses[n - 1], self.paths[n - 1]),
            self.labels[merged],
            np.asarray(weight, dtype=np.float64),
            np.ascontiguousarray(self.paths[merged]),
        )


@dataclass(frozen=True)
class Transport:
    """An expression graph split as the distance solves it.

    ip and op match only their counterparts (every other label is at the finite stand-in
    for infinity, >= 2, which an optimal plan never uses), so their part of d has a
    closed form (:func:`_atom_distance`); the other nodes form one transport program, in
    which nodes of equal label and path lengths are merged (their masses added: equal
    rows of the cost matrix, so the optimum is unchanged).

    Attributes:
        ip, op: ``(mass, path lengths)`` of the input and output nodes.
        labels, masses, paths: the other nodes with positive mass, merged, in order of
            first appearance.
    """

    ip: tuple[float, np.ndarray]
    op: tuple[float, np.ndarray]
    labels: np.ndarray
    masses: np.ndarray
    paths: np.ndarray

    @cached_property
    def total(self) -> float:
        """Mass of the nodes other than ip and op."""
        return float(self.masses.sum())


def _mean(values: list[float]) -> float:
    """``np.mean(values)`` to the bit: a left-to-right sum below 8 values (numpy's
    pairwise summation starts there), numpy itself above."""
    if len(values) < 8:
        total = 0.0
        for v in values:
            total += v
        return total / len(values)
    return float(np.mean(np.asarray(values, dtype=np.float64)))


def expression_graph(expr: Expression | str, config: OTConfig | None = None) -> ExpressionGraph:
    """The OTMANN-style graph of an expression's canonical form (change operators as
    side nodes and an operator node; see the module docstring)."""
    config = config or OTConfig()
    expr = parse(expr) if isinstance(expr, str) else expr
    parts = _graph_parts(expr, config)
    return ExpressionGraph(
        str(expr), np.array(parts.labels), parts.masses, np.array(parts.rows), tuple(parts.edges)
    )


def _graph_parts(expr: Expression, config: OTConfig) -> _GraphParts:
    """The nodes of :func:`expression_graph` as Python lists (:class:`_GraphParts`).

    Path lengths come from the construction: from ip, a leaf is 1 hop away and an
    operator node ``1 + min``, ``1 + max`` and ``1 + mean`` of its inputs' (a random walk
    from ip arrives from a uniformly chosen input; the mean summed left to right in input
    order below 8 values, as ``ndarray.mean``: the same to the bit as the edge-list
    computation). To op: every node but ip feeds exactly one node, so its three hops are
    its depth below op; ip's are the min, max and mean over the leaves. Plain Python on
    these ~10-node graphs (a PROLAS step builds dozens): numpy's per-call overhead was
    most of a graph's cost.
    """
    position = _label_positions(config.labels)
    leaf_mass, op_mass = config.leaf_mass, config.op_mass
    # per node in construction order: label, mass, inputs, (sp, lp, rw) from ip
    labels = [position["ip"]]
    masses = [0.0]
    inputs: list[list[int]] = [[]]
    fwd = [(0.0, 0.0, 0.0)]
    leaf = (1.0, 1.0, 1.0)

    def leaves(items) -> None:  # every leaf first (nodes 1..L), in term order
        for item in items:
            if isinstance(item, ChangeItem):
                leaves(item.a)
                leaves(item.b)
            else:
                for f in item:
                    labels.append(position[f])
                    masses.append(leaf_mass)
                    inputs.append([0])
                    fwd.append(leaf)

    def add(label: str, mass: float, children: list[int]) -> int:
        rows = [fwd[c] for c in children]
        labels.append(position[label])
        masses.append(mass)
        inputs.append(children)
        fwd.append(
            (
                1 + min(r[0] for r in rows),
                1 + max(r[1] for r in rows),
                1 + _mean([r[2] for r in rows]),
            )
        )
        return len(labels) - 1

    next_leaf = 1

    def build(items) -> int:
        nonlocal next_leaf
        outs = []
        for item in items:
            if isinstance(item, ChangeItem):
                side_a, side_b = CHANGE_OPERATORS[item.op][1]
                a = add(side_a, op_mass, [build(item.a)])
                b = add(side_b, op_mass, [build(item.b)])
                outs.append(add(item.op, op_mass * 2, [a, b]))
                continue
            k = len(item)
            first, next_leaf = next_leaf, next_leaf + k
            outs.append(first if k == 1 else add("*", op_mass * k, list(range(first, first + k))))
        if len(outs) == 1:
            return outs[0]
        return add("+", op_mass * len(outs), outs)

    leaves(expr.items)
    top = build(expr.items)
    n = len(labels)
    # hops to op: every node but ip feeds exactly one consumer, built after it
    consumer = [-1] * n
    for u in range(1, n):
        for c in inputs[u]:
            consumer[c] = u
    depth = [0.0] * n
    depth[top] = 1.0
    for u in range(n - 1, 0, -1):  # a consumer is built after the nodes it reads
        if u != top:
            depth[u] = 1.0 + depth[consumer[u]]
    # ip's hops to op: over the leaves (integers, so the mean is exact in any order)
    leaf_depths = [depth[u] for u in range(1, n) if inputs[u] == [0]]
    rows = [(*fwd[u], depth[u], depth[u], depth[u]) for u in range(n)]
    rows[0] = (0.0, 0.0, 0.0, 1 + min(leaf_depths), 1 + max(leaf_depths), 1 + _mean(leaf_depths))
    # topological order: by longest path from ip, stable (the flat order when unchanged)
    order = sorted(range(n), key=lambda i: fwd[i][1])
    new = {old: i for i, old in enumerate(order)}
    t = fwd[top]
    m = np.array([masses[i] for i in order] + [0.0])
    m[0] = m[-1] = config.zeta * m[1:-1].sum()
    return _GraphParts(
        [labels[i] for i in order] + [position["op"]],
        m,
        [rows[i] for i in order] + [(t[0] + 1, t[1] + 1, t[2] + 1, 0.0, 0.0, 0.0)],
        [(new[c], new[i]) for i in order for c in inputs[i]] + [(new[top], n)],
    )


class _GraphParts(NamedTuple):
    """An expression graph's nodes in topological order (ip first, op last) as
    :func:`_graph_parts` builds them: label indices, masses (an array: its sums are the
    graph's), path-length rows (6-tuples) and edges."""

    labels: list[int]
    masses: np.ndarray
    rows: list[tuple[float, ...]]
    edges: list[tuple[int, int]]


def _merged_nodes(
    labels: list[int], masses: list[float], rows: list[tuple[float, ...]]
) -> tuple[list[int], list[float]]:
    """The nodes of a transport program (:class:`Transport`): positions of the nodes
    other than ip (first) and op (last) with positive mass (zero-mass nodes change no
    cost), nodes of equal label and path lengths merged into the first of them, in order
    of first appearance; and the merged masses."""
    first: dict[tuple[int, tuple[float, ...]], int] = {}
    merged: list[int] = []
    weight: list[float] = []
    for k in range(1, len(labels) - 1):
        if not masses[k] > 0:
            continue
        at = first.setdefault((labels[k], tuple(rows[k])), len(merged))
        if at == len(merged):
            merged.append(k)
            weight.append(masses[k])
        else:
            weight[at] += masses[k]
    return merged, weight


@functools.lru_cache(maxsize=8)
def _label_positions(labels: tuple[str, ...]) -> dict[str, int]:
    return {name: i for i, name in enumerate(labels)}


def otmann_distance(
    g1: ExpressionGraph,
    g2: ExpressionGraph,
    config: OTConfig | None = None,
    label_matrix: np.ndarray | None = None,
) -> tuple[float, float]:
    """``(d, d_bar)`` between two expression graphs (exact OT; module docstring).

    Solved in parts (:class:`Transport`): ``d = d_rest + d_ip + d_op``, the transport
    program of the nodes other than ip and op (POT's network simplex, with the two
    sinks) plus the closed forms of ip and op; equal to the one program over all nodes
    to rounding (tests/surrogates: 1e-12).
    """
    config = config or OTConfig()
    lm = config.label_matrix() if label_matrix is None else label_matrix
    t1, t2 = g1.transport, g2.transport
    costs = _node_costs(t1.labels, t1.paths, t2.labels, t2.paths, config.nu_str, lm)
    d_rest = _rest_distances(
        costs[None], t1.masses[None], t2.masses[None], np.array([t1.total]), np.array([t2.total])
    )
    ip_label, op_label = config.labels.index("ip"), config.labels.index("op")
    d_ip = _atom_distances(
        np.array([t1.ip[0]]), t1.ip[1][None], np.array([t2.ip[0]]), t2.ip[1][None],
        ip_label, config.nu_str, lm,
    )  # fmt: skip
    d_op = _atom_distances(
        np.array([t1.op[0]]), t1.op[1][None], np.array([t2.op[0]]), t2.op[1][None],
        op_label, config.nu_str, lm,
    )  # fmt: skip
    d = float((d_rest + d_ip + d_op)[0])
    return d, d / (g1.total_mass + g2.total_mass)


def _node_costs(
    l1: np.ndarray, p1: np.ndarray, l2: np.ndarray, p2: np.ndarray, nu_str: float, lm: np.ndarray
) -> np.ndarray:
    """Per-node cost c(i, j) = M(l_i, l_j) + nu_str C_str(i, j), ``len(l1) x len(l2)``."""
    return lm[l1][:, l2] + nu_str * np.abs(p1[:, None, :] - p2[None, :, :]).mean(-1)


def _atom_distances(
    x1: np.ndarray,
    p1: np.ndarray,
    x2: np.ndarray,
    p2: np.ndarray,
    label: int,
    nu_str: float,
    lm: np.ndarray,
) -> np.ndarray:
    """The transport cost between single nodes of one label, of masses ``x1``, ``x2``
    and path lengths ``p1``, ``p2`` (``k`` pairs): ``min(x1, x2) min(c, 2) + |x1 - x2|``
    with ``c = M(l, l) + nu_str C_str``: match what both have (unless leaving both
    unmatched, at 1 + 1, is cheaper), leave the rest unmatched at 1."""
    c = lm[label, label] + nu_str * np.abs(p1 - p2).mean(-1)
    return np.minimum(x1, x2) * np.minimum(c, 2.0) + np.abs(x1 - x2)


def _rest_distances(
    costs: np.ndarray, m1: np.ndarray, m2: np.ndarray, tm1: np.ndarray, tm2: np.ndarray
) -> np.ndarray:
    """Optimal transport costs of ``k`` programs of one shape: node costs ``costs``
    (``k x n1 x n2``), masses ``m1`` (``k x n1``) and ``m2`` (``k x n2``), their totals
    ``tm1``, ``tm2``. Each side gets a sink holding the other side's total (unit cost
    between a node and the other side's sink, 0 between the sinks: leaving mass
    unmatched costs 1), and the loop over programs only calls the solver."""
    k, n1, n2 = costs.shape
    c = np.ones((k, n1 + 1, n2 + 1))
    c[:, n1, n2] = 0.0
    c[:, :n1, :n2] = costs
    a = np.empty((k, n1 + 1))
    a[:, :n1], a[:, n1] = m1, tm2
    b = np.empty((k, n2 + 1))
    b[:, :n2], b[:, n2] = m2, tm1
    if _emd_c is None:  # pragma: no cover - depends on the POT version
        return np.fromiter(
            (max(_emd_cost(ar, br, cr), 0.0) for ar, br, cr in zip(a, b, c)), np.float64, k
        )
    # the solver called in the loop itself (a PROLAS step solves thousands of these
    # programs: a function call per program was a third of their cost); as _emd_cost
    out = np.empty(k)
    for r, (ar, br, cr) in enumerate(zip(a, b, c)):
        _, total, _, _, code = _emd_c(ar, br, cr, 100_000, 1)
        out[r] = total if code == 1 else _emd_cost(ar, br, cr)
    return np.maximum(out, 0.0)


def _emd_cost(a: np.ndarray, b: np.ndarray, cost: np.ndarray) -> float:
    """Exact optimal-transport cost ``min_P <P, cost>`` with marginals ``a`` and ``b``,
    both strictly positive (the graphs' supports and sinks always are), and a
    C-contiguous ``cost``.

    Calls POT's network-simplex solver directly: ``ot.emd`` spends ~85 % of its time on
    argument checks and backend dispatch for these tiny problems (~8 x 8), and a PROLAS
    step solves thousands (~8 us a call here against ~40 us; same cost to 1e-15). Falls
    back to ``ot.emd`` if POT's internal solver is not where this version expects it.
    """
    if _emd_c is None:  # pragma: no cover - depends on the POT version
        return float((ot.emd(a, b, cost) * cost).sum())
    _, total, _, _, code = _emd_c(a, b, cost, 100_000, 1)
    if code != 1:  # not optimal (iteration limit): let POT handle and report it
        return float((ot.emd(a, b, cost) * cost).sum())
    return float(total)


class ExpressionRegistry:
    """Expression graphs by index, with a cache of pairwise (d, d_bar).

    A pair's value never changes, so each is computed once, as :func:`otmann_distance`
    computes it with G1 the graph of the smaller index, and in batches (the missing
    pairs of a request at once). Pairs are kept in a dictionary, except pairs with an
    *anchor*: :meth:`anchor` declares indices (a surrogate's training expressions)
    whose distances to every registered expression are kept in dense arrays, so that the
    ``m x n`` block between candidates and anchors is gathered in one indexing operation.
    Every value is :func:`otmann_distance`'s to the bit, whichever store holds it.

    >>> reg = ExpressionRegistry()
    >>> i, j = reg.index("SE"), reg.index("SE + PER")
    >>> reg.distances([i], [i])[0].item()
    0.0
    """

    def __init__(self, config: OTConfig | None = None) -> None:
        self.config = config or OTConfig()
        self._lm = self.config.label_matrix()
        self._exprs: list[Expression] = []  # by index
        self._graphs: list[ExpressionGraph] = []  # by index, built when first asked for
        self._index: dict[str, int] = {}
        self._cache: dict[tuple[int, int], tuple[float, float]] = {}
        self._anchor_pos: dict[int, int] = {}
        self._anchors: list[int] = []
        self._anchor_at = np.zeros(0, dtype=np.int64)  # by index: anchor position or -1
        # (d, d_bar) x registered index x anchor position; NaN = not computed yet
        self._dense = np.full((2, 0, 0), np.nan)
        # node types (label, path lengths) of the graphs' nodes
        self._type_of: dict[tuple[int, tuple[float, ...]], int] = {}
        self._type_labels = np.zeros(0, dtype=np.int64)  # by capacity, as the one below
        self._type_paths = np.zeros((0, 6))
        # node costs between every two types (_node_costs), the first _costed types'
        self._type_costs = np.zeros((0, 0))
        self._costed = 0
        # per graph (rows by capacity) its Transport: the merged nodes' count, types and
        # masses (columns up to the largest count; padding unused), their total, ip's and
        # op's masses and path lengths; and the graph's total mass
        self._sizes = np.zeros(0, dtype=np.int64)
        self._node_type = np.zeros((0, 1), dtype=np.int64)
        self._node_mass = np.zeros((0, 1))
        self._rest_totals = np.zeros(0)
        self._atoms = np.zeros((0, 2, 7))  # (ip, op) x (mass, 6 path lengths)
        self._totals = np.zeros(0)

    def __len__(self) -> int:
        return len(self._exprs)

    @property
    def graphs(self) -> list[ExpressionGraph]:
        """The registered expressions' graphs by index (:func:`expression_graph`), built
        on first access: the distances need only their transport programs."""
        while len(self._graphs) < len(self._exprs):
            self._graphs.append(expression_graph(self._exprs[len(self._graphs)], self.config))
        return self._graphs

    def index(self, expr: Expression | str) -> int:
        """Index of an expression (registered on first use), by canonical string."""
        idx = self._index.get(str(expr))  # a registered key is a canonical string
        if idx is not None:
            return idx
        if isinstance(expr, str):
            expr = parse(expr)
        key = str(expr)
        idx = self._index.get(key)
        if idx is None:
            idx = len(self._exprs)
            # the transport program straight from the nodes (as ExpressionGraph.transport
            # computes it, to the bit); the graph itself is built only if asked for
            parts = _graph_parts(expr, self.config)
            m = parts.masses
            masses = m.tolist()
            merged, weight = _merged_nodes(parts.labels, masses, parts.rows)
            labels, rows = parts.labels, parts.rows
            types = self._node_types([labels[k] for k in merged], [rows[k] for k in merged])
            weight_array = np.asarray(weight, dtype=np.float64)
            width = max(self._node_type.shape[1], len(types))
            if idx == len(self._sizes) or width > self._node_type.shape[1]:  # capacities grow
                size = max(2 * idx, 64) if idx == len(self._sizes) else len(self._sizes)
                self._sizes = np.resize(self._sizes, size)
                self._rest_totals = np.resize(self._rest_totals, size)
                self._totals = np.resize(self._totals, size)
                self._atoms = np.resize(self._atoms, (size, 2, 7))
                node_type = np.zeros((size, width), dtype=np.int64)
                node_mass = np.zeros((size, width))
                r, w = self._node_type.shape
                node_type[:r, :w], node_mass[:r, :w] = self._node_type, self._node_mass
                self._node_type, self._node_mass = node_type, node_mass
            self._sizes[idx] = len(types)
            self._node_type[idx, : len(types)] = types
            self._node_mass[idx, : len(types)] = weight_array
            self._rest_totals[idx], self._totals[idx] = weight_array.sum(), m.sum()
            self._atoms[idx, 0, 0], self._atoms[idx, 0, 1:] = masses[0], rows[0]
            self._atoms[idx, 1, 0], self._atoms[idx, 1, 1:] = masses[-1], rows[-1]
            self._exprs.append(expr)
            self._index[key] = idx
        return idx

    def _node_types(self, labels: list[int], rows: list[tuple[float, ...]]) -> np.ndarray:
        """The type (label and path lengths) of each of these nodes."""
        out = []
        n = len(self._type_of)
        for lab, row in zip(labels, rows):
            key = (lab, row)
            t = self._type_of.get(key)
            if t is None:
                t = self._type_of[key] = n
                if n == len(self._type_labels):  # capacities double
                    self._type_labels = np.resize(self._type_labels, max(2 * n, 64))
                    self._type_paths = np.resize(self._type_paths, (max(2 * n, 64), 6))
                self._type_labels[n], self._type_paths[n] = lab, row
                n += 1
            out.append(t)
        return np.asarray(out, dtype=np.int64)

    def indices(self, exprs: Iterable[Expression | str]) -> list[int]:
        return [self.index(e) for e in exprs]

    # --- anchors -----------------------------------------------------------------------
    def anchor(self, idx: Iterable[int]) -> None:
        """Keep the distances of these indices to every registered expression in dense
        arrays (module docstring of the class); anchors stay anchors."""
        for j in dict.fromkeys(int(i) for i in idx):
            if j in self._anchor_pos:
                continue
            if not 0 <= j < len(self):
                raise IndexError(f"no expression {j} in the registry")
            self._grow(len(self), len(self._anchors) + 1)
            pos = len(self._anchors)
            self._anchors.append(j)
            self._anchor_pos[j] = pos
            self._anchor_at[j] = pos
            self._dense[:, j, pos] = 0.0
            old = np.asarray(self._anchors[:-1], dtype=np.int64)
            if len(old):  # a pair with an older anchor is known from its column
                known = self._dense[:, j, :pos]
                self._dense[:, old, pos] = known
            if self._cache:  # pairs computed before j became an anchor
                for (a, b), v in self._cache.items():
                    if j in (a, b):
                        self._dense[:, b if a == j else a, pos] = v

    @property
    def anchors(self) -> tuple[int, ...]:
        return tuple(self._anchors)

    def _grow(self, rows: int, cols: int) -> None:
        """Make the dense store at least ``rows x cols`` (doubling rows, 64 more anchors)."""
        _, r0, c0 = self._dense.shape
        if rows <= r0 and cols <= c0:
            return
        r1 = max(r0, 64) if rows <= r0 else max(2 * r0, rows, 64)
        c1 = c0 if cols <= c0 else max(c0 + 64, cols)
        dense = np.full((2, r1, c1), np.nan)
        dense[:, :r0, :c0] = self._dense
        self._dense = dense
        self._anchor_at = np.concatenate([self._anchor_at, np.full(r1 - r0, -1, dtype=np.int64)])

    def _anchored(self, rows: np.ndarray, anchors: np.ndarray) -> np.ndarray:
        """``2 x len(rows) x len(anchors)`` (d, d_bar), filling what is missing."""
        self._grow(len(self), len(self._anchors))
        pos = np.asarray([self._anchor_pos[j] for j in anchors.tolist()], dtype=np.int64)
        block = self._dense[:, rows[:, None], pos[None, :]]
        missing = np.isnan(block[0])
        if missing.any():
            r, c = np.nonzero(missing)
            i, j = rows[r], anchors[c]
            g1, g2 = np.minimum(i, j), np.maximum(i, j)  # G1 = the smaller index
            key = np.unique(g1 * len(self) + g2)
            g1, g2 = key // len(self), key % len(self)
            vals = self._solve_pairs(g1, g2)
            for a, b in ((g1, g2), (g2, g1)):  # the entries in anchor columns, both ways
                at = self._anchor_at[b]
                self._dense[:, a[at >= 0], at[at >= 0]] = vals[:, at >= 0]
            block = self._dense[:, rows[:, None], pos[None, :]]
        return block

    def _solve_pairs(self, g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
        """``(d, d_bar)`` of the pairs ``(g1[k], g2[k])`` (G1 = graph ``g1[k]``), a
        ``2 x k`` array, as :func:`otmann_distance` computes them. The closed forms of ip
        and op are one vectorised expression; the other nodes' programs of equal shape
        are built as one padded array (node costs by :func:`_node_costs` between the node
        types the pairs use) and the loop over pairs only calls the transport solver.
        Each pair's inputs, and so its value, are :func:`otmann_distance`'s to the bit."""
        out = np.empty((2, len(g1)))
        if not len(g1):
            return out
        nu, lm, labels = self.config.nu_str, self._lm, self.config.labels
        a1, a2 = self._atoms[g1], self._atoms[g2]
        d = np.empty(len(g1))
        s1, s2 = self._sizes[g1], self._sizes[g2]
        # each pair's node costs, from the costs between every two node types
        t1, t2 = self._node_type[g1], self._node_type[g2]  # padding: type 0, unused
        costs = self._costs_between_types()
        group = s1 * (int(max(s1.max(), s2.max())) + 1) + s2
        order = np.argsort(group, kind="stable")
        for ks in np.split(order, np.flatnonzero(np.diff(group[order])) + 1):
            n1, n2 = int(s1[ks[0]]), int(s2[ks[0]])
            i1, i2 = g1[ks], g2[ks]
            d[ks] = _rest_distances(
                costs[t1[ks, :n1][:, :, None], t2[ks, :n2][:, None, :]],
                self._node_mass[i1, :n1],
                self._node_mass[i2, :n2],
                self._rest_totals[i1],
                self._rest_totals[i2],
            )
        for atom, name in enumerate(("ip", "op")):
            x1, p1 = a1[:, atom, 0], a1[:, atom, 1:]
            x2, p2 = a2[:, atom, 0], a2[:, atom, 1:]
            d += _atom_distances(x1, p1, x2, p2, labels.index(name), nu, lm)
        out[0], out[1] = d, d / (self._totals[g1] + self._totals[g2])
        return out

    def _costs_between_types(self) -> np.ndarray:
        """``T x T`` node costs (:func:`_node_costs`) between the ``T`` node types seen so
        far. The types of new expressions add rows and columns; the rest is kept (a step
        used to recompute the block of every type its pairs use, ~3 ms at ~600 types).
        Each entry depends on its two types alone, so it is the block's to the bit."""
        n, done = len(self._type_of), self._costed
        if n == done:
            return self._type_costs
        if n > self._type_costs.shape[0]:
            # memory is quadratic in the types (~640 in a 50-fit search: 4 MB), so the
            # capacity grows by a quarter, not by doubling (which would hold 4x the need)
            cap = max(n + 64, n + n // 4)
            grown = np.zeros((cap, cap))
            grown[:done, :done] = self._type_costs[:done, :done]
            self._type_costs = grown
        lab, paths = self._type_labels[:n], self._type_paths[:n]
        nu, lm = self.config.nu_str, self._lm
        self._type_costs[done:n, :n] = _node_costs(lab[done:], paths[done:], lab, paths, nu, lm)
        self._type_costs[:done, done:n] = _node_costs(
            lab[:done], paths[:done], lab[done:], paths[done:], nu, lm
        )
        self._costed = n
        return self._type_costs

    # --- pairs -------------------------------------------------------------------------
    def pair(self, i: int, j: int) -> tuple[float, float]:
        if i == j:
            return 0.0, 0.0
        if j in self._anchor_pos or i in self._anchor_pos:
            row, anchor = (i, j) if j in self._anchor_pos else (j, i)
            d, db = self._anchored(np.asarray([row]), np.asarray([anchor]))[:, 0, 0]
            return float(d), float(db)
        key = (i, j) if i < j else (j, i)
        if key not in self._cache:
            self._fill_row(key[0], [key[1]])
        return self._cache[key]

    def distances(self, idx1, idx2) -> tuple[np.ndarray, np.ndarray]:
        """``(D, D_bar)`` matrices ``len(idx1) x len(idx2)``."""
        idx1 = np.asarray(idx1, dtype=np.int64).reshape(-1)
        idx2 = np.asarray(idx2, dtype=np.int64).reshape(-1)
        u1, inv1 = np.unique(idx1, return_inverse=True)
        u2, inv2 = np.unique(idx2, return_inverse=True)
        anchored = self._anchor_pos
        if len(u2) and all(j in anchored for j in u2.tolist()):
            block = self._anchored(u1, u2)
        elif len(u1) and all(i in anchored for i in u1.tolist()):
            block = self._anchored(u2, u1).transpose(0, 2, 1)
        else:
            block = self._from_pairs(u1, u2)
        return block[0][np.ix_(inv1, inv2)], block[1][np.ix_(inv1, inv2)]

    def _from_pairs(self, u1: np.ndarray, u2: np.ndarray) -> np.ndarray:
        """``2 x len(u1) x len(u2)`` from the pair dictionary (no anchors involved)."""
        for i in u1.tolist():
            self._fill_row(i, u2.tolist())
        out = np.zeros((2, len(u1), len(u2)))
        for a, i in enumerate(u1.tolist()):
            for b, j in enumerate(u2.tolist()):
                out[:, a, b] = self.pair(i, j)
        return out

    def _fill_row(self, i: int, js: list[int]) -> None:
        """Cache the pairs ``(i, j)`` not cached yet (G1 = the smaller index, as
        :meth:`pair` orders them). Pairs with an anchor are left to :meth:`pair` (the
        dense store holds them)."""
        cache, anchored = self._cache, self._anchor_pos
        if i in anchored:
            return
        keys = [
            (min(i, j), max(i, j))
            for j in js
            if j != i and j not in anchored and (min(i, j), max(i, j)) not in cache
        ]
        if keys:
            g1, g2 = (np.asarray(side, dtype=np.int64) for side in zip(*keys))
            vals = self._solve_pairs(g1, g2)
            cache.update(zip(keys, map(tuple, vals.T.tolist())))


class OTKernel(Kernel):
    """kappa(G, G') = alpha e^{-beta d} + alpha_bar e^{-beta_bar d_bar} on registry indices.

    Args:
        registry: where the inputs' indices point.
        indefinite: ``"jitter"`` (default) or ``"clip"``: how a negative smallest
            eigenvalue of the Gram matrix is repaired (with a NumericsWarning).
        tol: eigenvalues above ``-tol * max|lambda|`` count as non-negative.
    """

    def __init__(
        self,
        registry: ExpressionRegistry,
        indefinite: str = "jitter",
        tol: float = 1e-10,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if indefinite not in ("jitter", "clip"):
            raise ValueError(f"indefinite must be 'jitter' or 'clip', got {indefinite!r}")
        self.registry = registry
        self.indefinite = indefinite
        self.tol = tol
        self.last_min_eigenvalue: float | None = None
        self.n_repairs = 0
        self._warned = False
        inits = (("alpha", 0.5), ("beta", 0.5), ("alpha_bar", 0.5), ("beta_bar", 5.0))
        for name, init in inits:
            self.register_parameter(f"raw_{name}", torch.nn.Parameter(torch.zeros(1)))
            self.register_constraint(f"raw_{name}", Interval(1e-4, 1e3))
            self._set(name, init)

    def _set(self, name: str, value: float) -> None:
        raw = getattr(self, f"raw_{name}")
        c = getattr(self, f"raw_{name}_constraint")
        v = torch.as_tensor(value, dtype=raw.dtype).expand_as(raw)
        self.initialize(**{f"raw_{name}": c.inverse_transform(v)})

    def _get(self, name: str) -> torch.Tensor:
        return getattr(self, f"raw_{name}_constraint").transform(getattr(self, f"raw_{name}"))

    @property
    def alpha(self) -> torch.Tensor:
        return self._get("alpha")

    @property
    def beta(self) -> torch.Tensor:
        return self._get("beta")

    @property
    def alpha_bar(self) -> torch.Tensor:
        return self._get("alpha_bar")

    @property
    def beta_bar(self) -> torch.Tensor:
        return self._get("beta_bar")

    def gram(self, i1: np.ndarray, i2: np.ndarray, dtype=torch.float64) -> torch.Tensor:
        """The raw (possibly indefinite) kappa matrix between two index arrays."""
        d, db = self.registry.distances(i1, i2)
        d = torch.as_tensor(d, dtype=dtype)
        db = torch.as_tensor(db, dtype=dtype)
        return self.alpha * torch.exp(-self.beta * d) + self.alpha_bar * torch.exp(
            -self.beta_bar * db
        )

    def forward(self, x1: torch.Tensor, x2: torch.Tensor, diag: bool = False, **params):
        if x1.dim() > 2 or x2.dim() > 2:
            raise ValueError("OTKernel supports non-batched inputs (n x 1) only")
        i1 = x1[..., 0].round().long().cpu().numpy()
        i2 = x2[..., 0].round().long().cpu().numpy()
        uni, inv = np.unique(np.concatenate([i1, i2]), return_inverse=True)
        k = self.gram(uni, uni, dtype=x1.dtype)
        k = self._repair(k)
        a, b = torch.as_tensor(inv[: len(i1)]), torch.as_tensor(inv[len(i1) :])
        if diag:
            return k[a, b]
        return k[a][:, b]

    def _repair(self, k: torch.Tensor) -> torch.Tensor:
        """Make the Gram matrix over the distinct inputs PSD (jitter or clip), warning."""
        with torch.no_grad():
            evals = torch.linalg.eigvalsh(k)
        lam = float(evals[0])
        self.last_min_eigenvalue = lam
        scale = float(evals.abs().max()) if len(evals) else 0.0
        if lam >= -self.tol * max(scale, 1e-300):
            return k
        self.n_repairs += 1
        if not self._warned:
            self._warned = True
            fix = "adding jitter to the diagonal" if self.indefinite == "jitter" else "clipping"
            warnings.warn(
                f"OT kernel Gram matrix is indefinite (smallest eigenvalue {lam:.3g}); {fix}",
                NumericsWarning,
                stacklevel=3,
            )
        if self.indefinite == "jitter":
            c = -lam * (1.0 + 1e-8) + 1e-12
            return k + c * torch.eye(k.shape[0], dtype=k.dtype)
        evals_g, evecs = torch.linalg.eigh(k)
        return (evecs * evals_g.clamp_min(0.0)) @ evecs.transpose(-1, -2)


def gram_min_eigenvalue(
    exprs: Iterable[Expression | str],
    registry: ExpressionRegistry | None = None,
    alpha: float = 1.0,
    beta: float = 1.0,
    alpha_bar: float = 1.0,
    beta_bar: float = 1.0,
) -> float:
    """Smallest eigenvalue of the raw kappa Gram matrix on distinct expressions."""
    registry = registry or ExpressionRegistry()
    idx = np.unique(registry.indices(exprs))
    d, db = registry.distances(idx, idx)
    k = alpha * np.exp(-beta * d) + alpha_bar * np.exp(-beta_bar * db)
    return float(np.linalg.eigvalsh(k)[0]) if len(idx) else math.nan
