"""Fits that end below a nested sub-model's fit, in fit caches.

An expression E *nests* (contains) S when S is a limit of E's hyperparameters at the edges
of their box (:mod:`prolas.nesting`: an additive item dropped, a stationary factor dropped,
an RQ made SE, a change operator seen from one side only; inside change operators too;
and any chain of these). At their optima ``loglik(E) >= loglik(S)``, so a fit of E more
than ``--tol`` nats below the fit of S, on the same points with the same settings (the
cache key), has missed E's optimum. The table counts, per fit cache, the fits whose cache
also holds a contained sub-model, those of them below it by more than the tolerance, and
the size of the shortfall. ``--one-step`` restricts the sub-models to those one limit
away (the rules of the first version of this script: an item or a stationary factor
dropped).

    python benchmarks/scripts/nested_fits.py benchmarks/results/extrapolation/fits/*.jsonl \\
        --out benchmarks/results/nested_fits/nested_fits.md

A fit cache pools the fits of every cell of a grid, so E and S of a pair may come from
different searches, neither of which fitted both. ``--cells DIR`` checks the searches
themselves: in every finished cell's history (``DIR/*.json``), each fitted pair where E
contains S and ``loglik(E) < loglik(S) - 0.1`` (the evaluator's invariant,
:func:`prolas.search.evaluator.nested_violations`), and the repairs the search made.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from prolas.expr import ChangeItem, Expression, from_items, parse
from prolas.nesting import contains

#: Factors that tend to the constant 1 at their upper lengthscale bound.
NEAR_CONSTANT = ("SE", "RQ", "PER")


def nested_items(items: tuple) -> list[tuple]:
    """One-step nested sub-models of a canonical sum (a tuple of items, see
    :class:`prolas.expr.ChangeItem`), as tuples of items: an item dropped, or a stationary
    factor of a product dropped, recursively inside change operators (``--one-step``)."""
    out: list[tuple] = []
    if len(items) > 1:
        out += [items[:i] + items[i + 1 :] for i in range(len(items))]
    for i, item in enumerate(items):
        head, tail = items[:i], items[i + 1 :]
        if isinstance(item, ChangeItem):
            out += [head + (ChangeItem(item.op, a, item.b),) + tail for a in nested_items(item.a)]
            out += [head + (ChangeItem(item.op, item.a, b),) + tail for b in nested_items(item.b)]
        elif len(item) > 1:
            out += [
                head + (item[:j] + item[j + 1 :],) + tail
                for j, factor in enumerate(item)
                if factor in NEAR_CONSTANT
            ]
    return out


def nested_submodels(expr: Expression) -> set[str]:
    """Canonical strings of the one-step nested sub-models of ``expr`` (``--one-step``).

    >>> sorted(nested_submodels(parse("C + PER*PER")))
    ['C', 'C + PER', 'PER*PER']
    >>> sorted(nested_submodels(parse("CW(RQ*SE, C)")))
    ['CW(RQ, C)', 'CW(SE, C)']
    """
    subs = {str(from_items(items)) for items in nested_items(expr.items)}
    subs.discard(str(expr))
    return subs


def best_log_likelihoods(path: Path) -> dict[tuple[str, str], float]:
    """(cache key, canonical expression) -> best successful log-likelihood in a fit cache."""
    best: dict[tuple[str, str], float] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        fit = record["fit"]
        if fit["status"] != "ok":
            continue
        key = (record["key"], str(parse(record["expression"])))
        best[key] = max(best.get(key, -np.inf), fit["best"]["log_likelihood"])
    return best


def sub_models(best: dict[tuple[str, str], float], one_step: bool = False) -> dict:
    """``(key, E) -> [S, ...]``: the fitted expressions of the same cache key that E
    contains (:func:`prolas.nesting.contains`; only one-step ones with ``one_step``)."""
    by_key: dict[str, list[str]] = {}
    for key, expr in best:
        by_key.setdefault(key, []).append(expr)
    out: dict[tuple[str, str], list[str]] = {}
    for key, exprs in by_key.items():
        present = set(exprs)
        for e in exprs:
            if one_step:
                subs = [s for s in nested_submodels(parse(e)) if s in present]
            else:
                subs = [s for s in exprs if contains(e, s)]
            if subs:
                out[(key, e)] = subs
    return out


def shortfalls(
    best: dict[tuple[str, str], float], one_step: bool = False
) -> dict[tuple[str, str], float]:
    """For every fit whose cache holds a contained sub-model: the largest amount (nats) by
    which a sub-model's log-likelihood exceeds its own (negative: none does)."""
    return {
        (key, e): max(best[(key, s)] - best[(key, e)] for s in subs)
        for (key, e), subs in sub_models(best, one_step).items()
    }


def cell_violations(cells: Path, tol: float = 0.1) -> str:
    """Markdown table: per series, the cells, their fitted pairs (E contains S), the pairs
    with ``loglik(E) < loglik(S) - tol``, and the evaluations a repair changed."""
    rows: dict[str, np.ndarray] = {}
    worst: dict[str, tuple[float, str]] = {}
    for path in sorted(cells.glob("*.json")):
        cell = json.loads(path.read_text())
        ok = [h for h in cell["history"] if h["status"] == "ok"]
        pairs = bad = 0
        for e in ok:
            for s in ok:
                if e is s or not contains(e["expression"], s["expression"]):
                    continue
                pairs += 1
                short = s["log_likelihood"] - e["log_likelihood"]
                if short > tol:
                    bad += 1
                    if short > worst.get(cell["dataset"], (0.0, ""))[0]:
                        worst[cell["dataset"]] = (
                            short,
                            f"`{e['expression']}` < `{s['expression']}`",
                        )
        repaired = sum(1 for h in cell["history"] if h.get("repaired_from"))
        row = rows.setdefault(cell["dataset"], np.zeros(4, dtype=int))
        row += (1, pairs, bad, repaired)
    lines = [
        f"| series | cells | fitted pairs (E contains S) | below S by > {tol:g} nats | repaired "
        "| worst |",
        "|---|---|---|---|---|---|",
    ]
    for name, (n, pairs, bad, repaired) in rows.items():
        lines.append(
            f"| {name} | {n} | {pairs} | {bad} | {repaired} | {worst.get(name, (0, ''))[1]} |"
        )
    total = sum(rows.values(), np.zeros(4, dtype=int))
    lines.append(f"| all | {total[0]} | {total[1]} | {total[2]} | {total[3]} | |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("caches", nargs="*", type=Path, help="fit caches (fits/<series>.jsonl)")
    p.add_argument("--cells", type=Path, help="check every finished search in this folder")
    p.add_argument("--tol", type=float, default=2.0, help="nats (default 2)")
    p.add_argument("--out", type=Path, help="write the Markdown table here too")
    p.add_argument(
        "--one-step", action="store_true", help="only sub-models one limit away (older rules)"
    )
    args = p.parse_args()
    if args.cells is not None:
        print(cell_violations(args.cells))
        if not args.caches:
            return
    lines = [
        "| fit cache | fits | with a sub-model fitted | below it by > "
        f"{args.tol:g} nats | share | median shortfall | largest | example (fit < sub-model) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    totals = np.zeros(3, dtype=int)
    for path in args.caches:
        best = best_log_likelihoods(path)
        subs_of = sub_models(best, args.one_step)
        gaps = {k: max(best[(k[0], s)] - best[k] for s in subs) for k, subs in subs_of.items()}
        below = {k: g for k, g in gaps.items() if g > args.tol}
        totals += (len(best), len(gaps), len(below))
        worst = max(below, key=below.__getitem__, default=None)
        example = ""
        if worst is not None:
            sub = max(subs_of[worst], key=lambda s: best[(worst[0], s)])
            example = f"`{worst[1]}` < `{sub}`"
        values = np.array(list(below.values()))
        lines.append(
            f"| {path.stem} | {len(best)} | {len(gaps)} | {len(below)} | "
            f"{len(below) / max(len(gaps), 1):.0%} | "
            f"{np.median(values) if values.size else 0:.1f} | "
            f"{values.max() if values.size else 0:.1f} | {example} |"
        )
    lines.append(
        f"| all | {totals[0]} | {totals[1]} | {totals[2]} | {totals[2] / max(totals[1], 1):.0%} "
        "| | | |"
    )
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
