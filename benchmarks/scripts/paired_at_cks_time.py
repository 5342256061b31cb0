"""Two grids of the nine-series bench, seed by seed, at CKS's own wall time.

For each data set that both grids hold, each search seed's best BIC among the evaluations
finished by CKS's (median, one-core) search time — ``search_goals.py``'s "at CKS's time"
column, before the mean over seeds — in grid A and in grid B, the difference B − A, and
how many seeds B has higher / lower by more than ``--tol`` nats with a two-sided sign
test. CKS's time and final BIC are each grid's own (they are the same when both grids
share CKS's cells). A grid is one or more directories, comma-separated, as in
``search_goals.py --compare`` (a later directory's cell replaces an earlier one)::

    python benchmarks/scripts/paired_at_cks_time.py --a DIR_A[,DIR_A2] --b DIR_B[,DIR_B2] \\
        [--csv per_seed.csv]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_goals import at_cks_time, merged_cells  # noqa: E402

from prolas.bench.paired import sign_test  # noqa: E402
from prolas.bench.stats import TOL, cks_final_bic  # noqa: E402


def by_dataset(cells: list[dict], budget: int, method: str, reference: str) -> dict:
    """``{dataset: (CKS's final BIC, {seed: best BIC at CKS's time})}`` for every data set
    with both ``method`` and ``reference`` cells (:func:`search_goals.at_cks_time`)."""
    out = {}
    for dataset in sorted({c["dataset"] for c in cells}):
        methods = {c["method"] for c in cells if c["dataset"] == dataset}
        if {method, reference} <= methods:
            _, seeds = at_cks_time(cells, dataset, budget, method, reference)
            out[dataset] = (cks_final_bic(cells, dataset, budget, reference), seeds)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a", required=True, help="grid A: DIR[,DIR...]")
    p.add_argument("--b", required=True, help="grid B: DIR[,DIR...]")
    p.add_argument("--budget", type=int, default=50)
    p.add_argument("--method", default="prolas")
    p.add_argument("--reference", default="cks:change")
    p.add_argument("--tol", type=float, default=0.1)
    p.add_argument("--csv", type=Path, help="write one row per data set and seed")
    args = p.parse_args(argv)
    grids = [
        by_dataset(
            merged_cells([Path(d) for d in spec.split(",")]),
            args.budget,
            args.method,
            args.reference,
        )
        for spec in (args.a, args.b)
    ]
    rows = []
    print(
        "| data | CKS final | A mean at CKS's time | B mean | A ≥ CKS | B ≥ CKS "
        "| B higher / lower (sign p) |"
    )
    print("|---|---|---|---|---|---|---|")
    for dataset in sorted(set(grids[0]) & set(grids[1])):
        (fa, a), (fb, b) = grids[0][dataset], grids[1][dataset]
        seeds = sorted(set(a) & set(b))
        diff = np.array([b[s] - a[s] for s in seeds])
        diff[np.abs(diff) <= args.tol] = 0.0  # within --tol: a tie
        up, down, _, p_value = sign_test(-diff)  # "better" is d < 0: B higher
        ma = float(np.mean([a[s] for s in seeds]))
        mb = float(np.mean([b[s] for s in seeds]))
        print(
            f"| {dataset} ({len(seeds)} seeds) | {fa:.2f} | {ma:.2f} | {mb:.2f} | "
            f"{'yes' if ma >= fa - TOL else 'no'} | {'yes' if mb >= fb - TOL else 'no'} | "
            f"{up} / {down} ({p_value:.2f}) |"
        )
        rows += [
            {"dataset": dataset, "seed": s, "cks_final": fa, "a": a[s], "b": b[s]} for s in seeds
        ]
    if args.csv:
        with args.csv.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=["dataset", "seed", "cks_final", "a", "b"])
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
