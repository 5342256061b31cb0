"""Build prolas/search/portfolio_bic.json, the warm-start library, from fit caches.

Reads GP fit caches (one JSONL per series, named after it) and keeps the expressions with
a successful fit on all series but at most one, so that after leaving any one series out
(:mod:`prolas.search.portfolio`) the candidates are scored on every remaining series. Each
expression is stored with its shortest token sequence in the default grammar or, for the
change operators and C, in the ``change`` grammar.

The shipped library was built from the grid caches:

    .venv/bin/python benchmarks/scripts/build_portfolio.py \\
        benchmarks/results/search_airline/fits/airline.jsonl \\
        benchmarks/results/search_other_series/fits/*.jsonl

``scripts/portfolio_library.py`` fits a candidate set with change operators on every series
for a rebuilt library (measured and not adopted: ``results/portfolio_library/``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from prolas.grammar import Grammar, sequence_expression
from prolas.search.cache import cold_row
from prolas.search.portfolio import PORTFOLIO_PATH


def shortest_sequences(
    grammar: Grammar, max_operations: int | None = None
) -> dict[str, tuple[str, ...]]:
    """Canonical expression -> its shortest token sequence in ``grammar`` (sequences of at
    most ``max_operations`` operations; default: the grammar's own limit)."""
    out: dict[str, tuple[str, ...]] = {}
    for seq in sorted(grammar.enumerate_sequences(max_operations), key=lambda q: (len(q), q)):
        out.setdefault(str(sequence_expression(seq)), seq)
    return out


#: Operations of the ``change`` grammar searched for sequences the default grammar lacks
#: (its full enumeration has millions of sequences; the library's change candidates have
#: one operation).
CHANGE_OPERATIONS = 2


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("caches", nargs="+", help="fit-cache JSONL files, one per series (NAME.jsonl)")
    p.add_argument("--out", default=str(PORTFOLIO_PATH))
    p.add_argument(
        "--about",
        default="BIC of kernel expressions on the benchmark series (GP fits of "
        "`prolas bench`, 4 restarts; series longer than 200 points thinned to 200). "
        "Built by benchmarks/scripts/build_portfolio.py; used by prolas.search.portfolio.",
        help="the library's 'about' text (default: the shipped library's)",
    )
    args = p.parse_args()
    series = [Path(c).stem for c in args.caches]
    bic: dict[str, dict[str, float]] = {}
    n_points: dict[str, int] = {}
    for name, path in zip(series, args.caches):
        for line in Path(path).read_text().splitlines():
            row = json.loads(line)
            fit = row["fit"]
            if fit["status"] != "ok" or not cold_row(row):
                continue  # a warm-started fit's BIC depends on its search's history
            n_points[name] = fit["n"]
            scores = bic.setdefault(row["expression"], {})
            scores[name] = max(fit["best"]["bic"], scores.get(name, -float("inf")))
    seqs = shortest_sequences(Grammar.default())
    change = Grammar.from_file(Path(__file__).resolve().parents[2] / "grammars" / "change.toml")
    for expr, seq in shortest_sequences(change, CHANGE_OPERATIONS).items():
        seqs.setdefault(expr, seq)
    rows = []
    for expr in sorted(bic):
        if len(bic[expr]) < len(series) - 1 or expr not in seqs:
            continue
        rows.append(
            {
                "expression": expr,
                "sequence": list(seqs[expr]),
                "bic": [None if s not in bic[expr] else round(bic[expr][s], 4) for s in series],
            }
        )
    out = {
        "about": args.about,
        "series": series,
        "n_points": [n_points[s] for s in series],
        "expressions": rows,
    }
    Path(args.out).write_text(json.dumps(out, indent=0) + "\n")
    print(f"{len(rows)} expressions x {len(series)} series -> {args.out}")


if __name__ == "__main__":
    main()
