"""What a patience stop would have done to finished PROLAS searches, from their journals.

A patience stop ends a search after evaluation ``i`` when its last ``K`` evaluations have
not raised the best BIC by more than ``BIC_TIE`` (0.1), ``best(i) <= best(i - K) +
BIC_TIE``, checked once that window lies after the initial design (``i - K >=
n_init``). A stop changes nothing before it, so on a finished search its effect is
exact: the best BIC at the stop, and the wall time less the journal's time after the
stop. ``best(i)`` counts every ``ok`` journal line up to the ``i``-th evaluation and the
repairs that follow it (repairs, ``repaired_from``, cost no evaluation).

Reads a ``prolas bench --forecast ... --methods prolas,cks`` folder (``forecast_scores.csv``
for CKS's best BIC and both searches' seconds, ``prolas/<series>/journal.jsonl``) and
prints, per K, the series at least CKS's − 0.1 and the median wall-time ratio.

A candidate ``rC/M`` is the relative patience (``LatentBOConfig.patience_ratio = C``,
``patience_min = M``) with the window at most ``--k-max`` (``short_patience``).

    python benchmarks/scripts/patience_offline.py RUN --half tuning --k 5,10,15,20,25,30
    python benchmarks/scripts/patience_offline.py RUN --half tuning --k 25,r0.5/10 --k-max 25
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
from pathlib import Path

import pandas as pd

from prolas.bench.forecast_bench import search_counts
from prolas.limits import INITIAL_DESIGN

# the search's own rule (``prolas.search`` is also a function, hence import_module)
patience_spent = importlib.import_module("prolas.search.latent").patience_spent


def best_after_each_evaluation(journal: Path) -> tuple[list[float], list[float]]:
    """``(best, elapsed)``: after the i-th evaluation (1-based position i - 1) and the
    repairs following it, the best BIC so far and the journal's elapsed seconds."""
    best, elapsed = [], []
    current = -math.inf
    for line in journal.read_text().splitlines()[1:]:
        row = json.loads(line)
        if "index" not in row:
            continue
        if row.get("status") == "ok" and row.get("bic") is not None:
            current = max(current, row["bic"])
        if row.get("repaired_from") is None:
            best.append(current)
            elapsed.append(row["elapsed"])
        else:  # a repair belongs to the evaluation before it
            best[-1], elapsed[-1] = current, row["elapsed"]
    return best, elapsed


def stop_at(
    best: list[float],
    k: int | None,
    n_init: int = INITIAL_DESIGN,
    ratio: float = 0.0,
    k_min: int = 0,
) -> int:
    """The number of evaluations a patience-``k`` search makes (``None``: all): the
    first ``i`` at which the search's own rule (:func:`patience_spent`, relative when
    ``ratio > 0``, with ``k`` the largest window) stops it."""
    if k is not None:
        for i in range(1, len(best) + 1):
            if patience_spent(best[:i], k, n_init, ratio, k_min):
                return i
    return len(best)


def parse_candidate(text: str, k_max: int) -> tuple[str, int | None, float, int]:
    """``(label, k, ratio, k_min)`` of a candidate: ``none``, a fixed ``K`` or ``rC/M``."""
    if text == "none":
        return "none", None, 0.0, 0
    if text.startswith("r"):
        ratio, k_min = text[1:].split("/")
        return text, k_max, float(ratio), int(k_min)
    return text, int(text), 0.0, 0


def per_series(
    run: Path, ks: list[int | None | tuple[str, int | None, float, int]], half: str = "all"
) -> pd.DataFrame:
    """One row per (series, candidate): evaluations, best BIC and wall seconds at the
    stop, and CKS's best BIC and seconds. A candidate is a fixed K (``None``: no stop) or
    :func:`parse_candidate`'s tuple."""
    t = pd.read_csv(run / "forecast_scores.csv")
    t = t[t.status == "ok"]
    if half != "all":
        t = t[t.half == half]
    wide = t.pivot(index="series", columns="method", values=["bic", "search_seconds"])
    rows = []
    for name in wide.index:
        best, elapsed = best_after_each_evaluation(run / "prolas" / name / "journal.jsonl")
        total = wide.loc[name, ("search_seconds", "prolas")]
        for cand in ks:
            label, k, ratio, k_min = (
                cand
                if isinstance(cand, tuple)
                else ("none" if cand is None else cand, cand, 0.0, 0)
            )
            i = stop_at(best, k, ratio=ratio, k_min=k_min)
            rows.append(
                {
                    "series": name,
                    "k": label,
                    "evaluations": i,
                    "prolas_bic": best[i - 1],
                    "prolas_seconds": total - (elapsed[-1] - elapsed[i - 1]),
                    "cks_bic": wide.loc[name, ("bic", "cks")],
                    "cks_seconds": wide.loc[name, ("search_seconds", "cks")],
                }
            )
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per K: series, at least CKS's − BIC_TIE (:func:`search_counts`), median
    evaluations, wall-time ratio and seconds."""
    rows = {}
    for k, part in table.groupby("k", sort=False):
        counts = search_counts(
            part.prolas_bic - part.cks_bic, part.prolas_seconds / part.cks_seconds
        )
        rows[k] = {
            "series": counts["n"],
            "at_least_cks": counts["at_least"],
            "median_evaluations": part.evaluations.median(),
            "median_ratio": counts["median_ratio"],
            "median_prolas_seconds": part.prolas_seconds.median(),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--half", default="all", choices=["all", "tuning", "report"])
    ap.add_argument("--k", default="5,10,15,20,25,30", help="comma-separated patiences: K or rC/M")
    ap.add_argument("--k-max", type=int, default=25, help="largest window of rC/M (25)")
    args = ap.parse_args()
    ks = [parse_candidate(v, args.k_max) for v in ["none", *args.k.split(",")]]
    table = summary(per_series(args.run, ks, args.half))
    print("| K | series | at least CKS's - 0.1 | median evaluations | median ratio | median s |")
    print("|---|---|---|---|---|---|")
    for k, r in table.iterrows():
        print(
            f"| {k} | {r.series:g} | {r.at_least_cks:g} ({r.at_least_cks / r.series:.0%}) | "
            f"{r.median_evaluations:g} | {r.median_ratio:.2f} | {r.median_prolas_seconds:.1f} |"
        )


if __name__ == "__main__":
    main()
