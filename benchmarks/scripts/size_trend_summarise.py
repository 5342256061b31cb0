"""Tables of benchmarks/results/size_trend/README.md from the committed histories.

Tuning series (``results/size_trend/size_trend.csv``): mean best BIC after 10/25/50 fits per
seed, default vs ``size_trend=True``, for call-centre
(``results/prolas_design/tuning/call-centre_variants.csv`` rows ``d8_ot_exact_ws10`` and
``d8_ot_exact_ws10_trend``), gas-production and sulphuric (default: the committed
``results/search_other_series/cells``; trend: ``results/size_trend/tuning_evaluations.csv``).
Test series (printed as markdown): the ``results/size_trend/cells/`` of the trend runs paired
seed by seed with the committed default cells (``results/search_airline/cells``,
``results/search_other_series/cells``).

    .venv/bin/python benchmarks/scripts/size_trend_summarise.py
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

RESULTS = Path(__file__).resolve().parents[1] / "results"
STUDY = RESULTS / "size_trend"
#: CKS's final BIC on the test series (``results/search_airline/summary.md`` and
#: ``results/search_other_series/summary.md`` when this was written)
CKS_FINAL = {"airline": 118.815, "mauna": 460.64}
CELL_DIRS = {
    "airline": RESULTS / "search_airline" / "cells",
    "mauna": RESULTS / "search_other_series" / "cells",
}


def best_so_far(bics) -> np.ndarray:
    """Running maximum of a history's BICs (failed fits count as -inf)."""
    return np.maximum.accumulate([-np.inf if b is None or b != b else b for b in bics])


def cell(path: Path) -> tuple[np.ndarray, str]:
    c = json.loads(path.read_text())
    return best_so_far([h.get("bic") for h in c["history"]]), c["best"]["expression"]


def csv_histories(df: pd.DataFrame) -> Iterator[tuple[int, np.ndarray]]:
    for seed, g in df[df.method == "prolas"].groupby("seed"):
        yield int(seed), best_so_far(g.sort_values("index").bic.tolist())


def tuning_table() -> pd.DataFrame:
    variants = pd.read_csv(RESULTS / "prolas_design" / "tuning" / "call-centre_variants.csv")
    trend = pd.read_csv(STUDY / "tuning_evaluations.csv")
    sources = {
        ("call-centre", "size_trend=false"): csv_histories(
            variants[variants.variant == "d8_ot_exact_ws10"]
        ),
        ("call-centre", "size_trend=true"): csv_histories(
            variants[variants.variant == "d8_ot_exact_ws10_trend"]
        ),
    }
    for series in ("gas-production", "sulphuric"):
        files = (RESULTS / "search_other_series" / "cells").glob(f"{series}__prolas__seed*.json")
        sources[(series, "size_trend=false")] = (
            (int(f.stem.rsplit("seed", 1)[1]), cell(f)[0]) for f in files
        )
        sources[(series, "size_trend=true")] = csv_histories(trend[trend.series == series])
    rows = [
        {"series": s, "variant": v, "seed": seed}
        | {f"best_at_{n}": round(float(b[n - 1]), 2) for n in (10, 25, 50)}
        for (s, v), histories in sources.items()
        for seed, b in sorted(histories, key=lambda t: t[0])
    ]
    return pd.DataFrame(rows)


def reach(b: np.ndarray, target: float) -> int | None:
    hit = b >= target - 5e-3  # CKS_FINAL is rounded
    return int(np.argmax(hit)) + 1 if hit.any() else None


def paired_markdown(series: str) -> str:
    files = sorted((STUDY / "cells").glob(f"{series}__prolas__seed*.json"))
    seeds = sorted(int(f.stem.rsplit("seed", 1)[1]) for f in files)
    side = "@25 | @50 | reaches CKS at | best"
    head = f"| seed | default {side} | size_trend {side} |"
    out = [f"### {series}: seeds {seeds[0]}-{seeds[-1]}", "", head, "|---" * 9 + "|"]
    vals, hits = [], [0, 0]
    for s in seeds:
        name = f"{series}__prolas__seed{s}.json"
        row = []
        for i, (b, e) in enumerate((cell(CELL_DIRS[series] / name), cell(STUDY / "cells" / name))):
            r = reach(b, CKS_FINAL[series])
            hits[i] += r is not None
            row += [f"{b[24]:.2f}", f"{b[49]:.2f}", str(r or "never"), f"`{e}`"]
            vals.append((i, b[24], b[49]))
        out.append(f"| {s} | " + " | ".join(row) + " |")
    cells = []
    for i in (0, 1):
        v = np.array([(a, b) for j, a, b in vals if j == i])
        se = v[:, 1].std(ddof=1) / np.sqrt(len(v))
        cells += [
            f"{v[:, 0].mean():.2f}",
            f"**{v[:, 1].mean():.2f} ± {se:.2f}**",
            f"{hits[i]}/{len(v)} reach",
            "",
        ]
    out.append("| **mean** | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    table = tuning_table()
    table.to_csv(STUDY / "size_trend.csv", index=False)
    best = table.groupby(["series", "variant"])[["best_at_10", "best_at_25", "best_at_50"]]
    print("| series | variant | mean best @10 | @25 | @50 ± s.e. |\n|---|---|---|---|---|")
    for (series, variant), g in best:
        se = g.best_at_50.std(ddof=1) / np.sqrt(len(g))
        means = g.mean().round(2)
        print(
            f"| {series} | `{variant}` | {means.best_at_10:.2f} | {means.best_at_25:.2f} | "
            f"{means.best_at_50:.2f} ± {se:.2f} |"
        )
    print()
    for series in ("airline", "mauna"):
        print(paired_markdown(series))
        print()


if __name__ == "__main__":
    main()
