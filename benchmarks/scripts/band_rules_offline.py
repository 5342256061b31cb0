"""Band factors compared without fitting again, from ``fixed_kernel_restarts.py --dump``.

Each dumped row holds a forecast's components before any band factor (``K`` Gaussians
per test point, their mixture weights) and the refitted check's (origin, point) pairs at
the forecast's lead times (:func:`prolas.report.forecast.horizon_check`). A band rule
maps a row to a factor ``s`` on every component's standard deviation; the mean does not
change, so neither does MASE. Rules (``--rules``, comma-separated):

* ``refitted``: the product's factor, the maximiser of the check's mixture log density
  over 97 log-spaced values in [0.5, 4] (:func:`prolas.report.forecast._scale_on`);
  reproduces the dumped row's ``band_scale`` and scores exactly;
* ``const:C``: ``s = C`` on every series (``const:1`` is the models' own band);
* ``shrink:L:C``: ``log s = L log s_refitted + (1 - L) log C``, the refitted factor
  pulled towards ``C`` (``L = 1``: refitted, ``L = 0``: ``const:C``);
* ``interval``: the minimiser of the check's mean 95 % interval score over the same grid;
* ``cap:B``: ``min(s_refitted, B)``.

Writes one row per (series, seed, rule) with the factor and the scores
(:func:`prolas.report.scoring.score_forecast`) and prints the means per rule and seed.

    python benchmarks/scripts/band_rules_offline.py DUMP --rules refitted,const:1.4 \\
        --out rows.csv --markdown summary.md

With ``--bench``, DUMP is instead a ``prolas bench --forecast`` run folder, and the rows
are its prolas forecasts (``DUMP/prolas/<series>/test_predictive.json``: the components
at the test inputs, the band used and its factor, the test values and the scale); the
check's pairs are not there, so only the rules that need nothing but the ``refitted``
factor apply (``refitted``, ``const``, ``shrink``, ``cap``). A forecast whose band was
``shrunk`` recorded ``s^½``; its ``refitted`` factor is the square of that.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.report.forecast import (
    BAND_SCALE_BOUNDS,
    HorizonCheck,
    _interval_scale_on,
    _scale_on,
    mixture_quantiles,
)
from prolas.report.scoring import QUANTILE_LEVELS, Predictive, score_forecast

SCORES = ("mase", "coverage", "interval_score_scaled", "crps_scaled")


def load(path: Path) -> dict:
    with np.load(path) as z:
        row = {k: z[k] for k in z.files}
    series, seed, candidate = path.stem.rsplit("_", 2)
    return {**row, "series": series, "seed": int(seed), "candidate": candidate}


def load_bench(path: Path) -> dict:
    """One prolas forecast of a bench run as a dumped row: the components before any band
    factor, and the ``refitted`` factor as ``band_scale``."""
    doc = json.loads(path.read_text())
    applied = float(doc["band_scale"])
    band = doc.get("band", "refitted")  # runs before the band was recorded: refitted
    if band not in ("refitted", "shrunk"):
        raise SystemExit(f"{path}: band {band!r} holds no refitted factor")
    refitted = applied**2 if band == "shrunk" else applied
    return {
        "series": path.parent.name,
        "seed": -1,
        "candidate": "prolas",
        "means": np.asarray(doc["component_means"], dtype=np.float64),
        "sds": np.asarray(doc["component_sds"], dtype=np.float64) / applied,
        "weights": np.asarray(doc["weights"], dtype=np.float64),
        "test_y": np.asarray(doc["y"], dtype=np.float64),
        "scale": float(doc["scores"]["scale"]),
        "band_scale": refitted,
        "check_y": np.zeros(0),
    }


def check_of(row: dict) -> HorizonCheck | None:
    if row["check_y"].size == 0:
        return None
    origin = row["check_origin"]
    return HorizonCheck(
        y=row["check_y"],
        means=row["check_means"],
        sds=row["check_sds"],
        origin=origin,
        n_origins=int(np.unique(origin).size),
        refit=True,
    )


def refitted_factor(row: dict) -> float:
    if "check_means" not in row:  # a bench run's forecast: its recorded factor
        return float(row["band_scale"])
    return _scale_on(check_of(row), row["weights"], BAND_SCALE_BOUNDS)[0]


def interval_factor(row: dict) -> float:
    """The grid factor of least mean 95 % interval score on the check's pairs
    (:func:`prolas.report.forecast._interval_scale_on`, horizon-mix's ``interval`` score)."""
    check = check_of(row)
    if check is None:
        return 1.0
    return _interval_scale_on(check, row["weights"], BAND_SCALE_BOUNDS, 0.95)[0]


def factor(row: dict, rule: str) -> float:
    name, *args = rule.split(":")
    if name == "refitted":
        return refitted_factor(row)
    if name == "const":
        return float(args[0])
    if name == "shrink":
        lam, centre = float(args[0]), float(args[1])
        return math.exp(lam * math.log(refitted_factor(row)) + (1 - lam) * math.log(centre))
    if name == "interval":
        if "check_means" not in row:
            raise SystemExit("the interval rule needs the check's pairs (a --dump folder)")
        return interval_factor(row)
    if name == "cap":
        return min(refitted_factor(row), float(args[0]))
    raise SystemExit(f"unknown rule {rule!r}")


def scores(row: dict, s: float) -> dict:
    means, sds, w = row["means"], s * row["sds"], row["weights"]
    q = np.column_stack([mixture_quantiles(float(p), means, sds, w) for p in QUANTILE_LEVELS])
    pred = Predictive(
        (w[:, None] * means).sum(0),
        mixture_quantiles(0.025, means, sds, w),
        mixture_quantiles(0.975, means, sds, w),
        q,
    )
    out = score_forecast(row["test_y"], pred, float(row["scale"]))
    width = float(np.mean(pred.upper - pred.lower)) / float(row["scale"])
    return {**{k: out[k] for k in SCORES}, "width_scaled": width}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dump", type=Path, help="a folder of fixed_kernel_restarts.py --dump")
    ap.add_argument("--rules", default="refitted")
    ap.add_argument("--bench", action="store_true", help="DUMP is a prolas bench run folder")
    ap.add_argument("--seed", type=int, default=-1, help="--bench: the run's fit seed (a label)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args(argv)
    rules = [r.strip() for r in args.rules.split(",") if r.strip()]
    rows = []
    paths = (
        sorted(args.dump.glob("prolas/*/test_predictive.json"))
        if args.bench
        else sorted(args.dump.glob("*.npz"))
    )
    for path in paths:
        row = {**load_bench(path), "seed": args.seed} if args.bench else load(path)
        for rule in rules:
            s = factor(row, rule)
            rows.append(
                {
                    "series": row["series"],
                    "seed": row["seed"],
                    "candidate": row["candidate"],
                    "rule": rule,
                    "factor": s,
                    "dumped_factor": float(row["band_scale"]),
                    **scores(row, s),
                }
            )
    table = pd.DataFrame(rows)
    table.to_csv(args.out, index=False)
    lines = [
        "| rule | seed | series | MASE | 95 % coverage | interval score | width | CRPS "
        "| factor (median) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (rule, seed), t in table.groupby(["rule", "seed"], sort=False):
        lines.append(
            f"| {rule} | {seed} | {len(t)} | {t['mase'].mean():.4f} | {t['coverage'].mean():.3f} "
            f"| {t['interval_score_scaled'].mean():.3f} | {t['width_scaled'].mean():.2f} "
            f"| {t['crps_scaled'].mean():.4f} | {t['factor'].median():.2f} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.markdown is not None:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
