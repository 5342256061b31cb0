"""Fits that end below a nested sub-model's fit, in committed fit caches (issue 16).

An expression E *nests* S when S is a limit of E's hyperparameters. Three one-step rules,
each exact up to the box bounds of :mod:`prolas.gp.gram`:

* drop one additive item (its term variance -> 1e-8, the lower bound);
* drop an SE, RQ or PER factor of a product (lengthscale -> 1e3 spans: the factor is 1
  on the data to within 1e-6);
* either of these inside one side of a change operator.

(LIN is not dropped: its offset is bounded at 10 spans, so ``LIN*A`` only nears ``A``.)
At their optima ``loglik(E) >= loglik(S)``, so a fit of E more than ``--tol`` nats below
the fit of S, on the same points with the same settings (the cache key), has missed E's
optimum: its random restarts did not find it. The table counts, per fit cache, the fits
whose cache also holds a one-step sub-model, those of them below it by more than the
tolerance, and the size of the shortfall.

    python benchmarks/scripts/nested_fits.py benchmarks/results/extrapolation/fits/*.jsonl \\
        --out benchmarks/results/nested_fits/nested_fits.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from prolas.expr import ChangeItem, Expression, from_items, parse

#: Factors that tend to the constant 1 at their upper lengthscale bound.
NEAR_CONSTANT = ("SE", "RQ", "PER")


def nested_items(items: tuple) -> list[tuple]:
    """One-step nested sub-models of a canonical sum (a tuple of items, see
    :class:`prolas.expr.ChangeItem`), as tuples of items (module docstring)."""
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
    """Canonical strings of the one-step nested sub-models of ``expr``.

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


def shortfalls(best: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    """For every fit whose cache holds a one-step sub-model: the largest amount (nats) by
    which a sub-model's log-likelihood exceeds its own (negative: none does)."""
    out: dict[tuple[str, str], float] = {}
    for (key, expr), ll in best.items():
        gaps = [best[(key, s)] - ll for s in nested_submodels(parse(expr)) if (key, s) in best]
        if gaps:
            out[(key, expr)] = max(gaps)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("caches", nargs="+", type=Path, help="fit caches (fits/<series>.jsonl)")
    p.add_argument("--tol", type=float, default=2.0, help="nats (default 2)")
    p.add_argument("--out", type=Path, help="write the Markdown table here too")
    args = p.parse_args()
    lines = [
        "| fit cache | fits | with a sub-model fitted | below it by > "
        f"{args.tol:g} nats | share | median shortfall | largest | example (fit < sub-model) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    totals = np.zeros(3, dtype=int)
    for path in args.caches:
        best = best_log_likelihoods(path)
        gaps = shortfalls(best)
        below = {k: g for k, g in gaps.items() if g > args.tol}
        totals += (len(best), len(gaps), len(below))
        worst = max(below, key=below.__getitem__, default=None)
        example = ""
        if worst is not None:
            subs = [s for s in nested_submodels(parse(worst[1])) if (worst[0], s) in best]
            sub = max(subs, key=lambda s: best[(worst[0], s)])
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
