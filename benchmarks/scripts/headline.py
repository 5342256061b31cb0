"""One-line-per-data-set headline of a `prolas bench` search grid (for the READMEs).

.venv/bin/python benchmarks/scripts/headline.py benchmarks/results/search_other_series
"""

from __future__ import annotations

import math
import sys

from prolas.bench import load_cells, summarise


def headline(out: str, budget: int = 50) -> str:
    s = summarise(load_cells(out), budget)
    methods = [m for m in ("prolas", "random", "structural:arc") if m in set(s.method)]
    head = ["data", "CKS final BIC (fits)"] + [f"{m} @{budget} (seeds)" for m in methods]
    head += [f"{m} to CKS (never)" for m in methods]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, g in s.groupby("dataset"):
        rows = {r.method: r for r in g.itertuples()}
        cks = rows.get("cks")
        cells = [name, f"{cks.cks_final_bic:.2f} ({cks.evals_to_cks_median:.0f})" if cks else "–"]
        for m in methods:
            r = rows.get(m)
            mean = getattr(r, f"best_at_{budget}_mean", None) if r else None
            se = getattr(r, f"best_at_{budget}_se", None) if r else None
            cells.append(f"{mean:.2f} ± {se:.2f} ({r.seeds})" if r else "not run")
        for m in methods:
            r = rows.get(m)
            if r is None:
                cells.append("–")
                continue
            med = r.evals_to_cks_median
            cells.append(
                f"{'>' + str(budget) if math.isinf(med) else f'{med:.0f}'} "
                f"({r.evals_to_cks_never}/{r.seeds})"
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(headline(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 50))
