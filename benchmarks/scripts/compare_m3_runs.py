"""Two runs of the same series, series by series: the per-series CSVs of
``search_m3.py --csv`` (one fit seed each), e.g. the same search on two machines, or a
search before and after a change.

    python benchmarks/scripts/compare_m3_runs.py --a A.csv [A2.csv ...] --b B.csv [B2.csv ...]

Several files on a side are concatenated (a tuning-half and a report-half CSV). Joined on
``series``, per half and for all:

* for PROLAS and for CKS, the best BIC of B against A: the same within ``BIC_TIE``,
  higher or lower by more than it;
* PROLAS at CKS's level (best ≥ CKS's − ``BIC_TIE``, each run against its own CKS) in A
  and in B: the counts, gained (B only) and lost (A only);
* the median time ratio PROLAS / CKS of each run (each ratio is read within its run);
* PROLAS's best, B against A: higher / lower by more than ``BIC_TIE`` and the sign test.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.bench.forecast_bench import BIC_TIE
from prolas.bench.paired import sign_test


def _read(paths: list[Path]) -> pd.DataFrame:
    return pd.concat([pd.read_csv(p) for p in paths]).set_index("series")


def _moves(d: pd.Series) -> tuple[int, int, int]:
    """Same within ``BIC_TIE``, higher and lower by more than it."""
    return int((d.abs() <= BIC_TIE).sum()), int((d > BIC_TIE).sum()), int((d < -BIC_TIE).sum())


def compare(a: pd.DataFrame, b: pd.DataFrame) -> str:
    """A markdown table, one row per half and one for all series both runs have."""
    j = a.join(b, lsuffix="_a", rsuffix="_b", how="inner")
    rows = [
        "| half | series | PROLAS's best, B vs A: same / higher / lower (sign p) "
        "| CKS's best: same / higher / lower | at CKS's level: A → B (gained / lost) "
        "| median ratio: A → B |",
        "|---|---|---|---|---|---|",
    ]
    for half in [*sorted(j["half_a"].unique()), None]:
        x = j if half is None else j[j["half_a"] == half]
        p_same, p_up, p_down = _moves(x["prolas_bic_b"] - x["prolas_bic_a"])
        c_same, c_up, c_down = _moves(x["cks_bic_b"] - x["cks_bic_a"])
        level_a = x["prolas_bic_a"] >= x["cks_bic_a"] - BIC_TIE
        level_b = x["prolas_bic_b"] >= x["cks_bic_b"] - BIC_TIE
        d = (x["prolas_bic_b"] - x["prolas_bic_a"]).to_numpy()
        _, _, _, p = sign_test(-np.where(np.abs(d) <= BIC_TIE, 0.0, d))  # "better": B higher
        rows.append(
            f"| {half or 'all'} | {len(x)} | {p_same} / {p_up} / {p_down} (p = {p:.3g}) "
            f"| {c_same} / {c_up} / {c_down} "
            f"| {int(level_a.sum())} → {int(level_b.sum())} "
            f"({int((level_b & ~level_a).sum())} / {int((level_a & ~level_b).sum())}) "
            f"| {x['time_ratio_a'].median():.2f} → {x['time_ratio_b'].median():.2f} |"
        )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", nargs="+", type=Path, required=True, help="run A's CSVs")
    ap.add_argument("--b", nargs="+", type=Path, required=True, help="run B's CSVs")
    args = ap.parse_args()
    print(compare(_read(args.a), _read(args.b)))


if __name__ == "__main__":
    main()
