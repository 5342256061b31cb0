"""PROLAS against CKS on the series of a ``prolas bench --forecast SUITE --methods
prolas,cks,…`` run: best BIC, wall time, and PROLAS's best at CKS's wall time.

    python benchmarks/scripts/search_m3.py OUT [OUT ...] [--csv per_series.csv]

For every series both searches finished (``OUT/forecast_scores.csv``, ``OUT/prolas/*/
journal.jsonl``), per run (one fit seed each):

* **final**: PROLAS's best BIC ≥ CKS's − ``BIC_TIE`` (the share of series), strictly
  higher / lower by more than it, and the sign test of the difference;
* **wall time**: the median of PROLAS's search seconds / CKS's;
* **at CKS's wall time**: PROLAS's running best after the evaluations its journal
  records as finished within CKS's search seconds (``elapsed``), ≥ CKS's final BIC −
  ``BIC_TIE``; the goal "best BIC at CKS's own wall time" read literally;
* **where the time goes** (when ``OUT/METHOD/<series>/result.json`` exist): each
  search's fits (the sum of its history's fit seconds), its own time (wall seconds less
  the fits: the strategy, the VAE's loading, the imports) and its number of fits.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd
from scipy.stats import binomtest

from prolas.bench.forecast_bench import BIC_TIE, search_counts


def _running_best_at(journal: Path, seconds: float) -> float:
    """The best BIC among the journal's evaluations finished within ``seconds``."""
    best = -math.inf
    for line in journal.read_text().splitlines()[1:]:  # the first line is the header
        e = json.loads(line)
        if e.get("elapsed", math.inf) <= seconds and e.get("status") == "ok":
            best = max(best, e["bic"])
    return best


def _time_split(result: Path) -> dict[str, float]:
    """``fit_seconds`` (sum of the history's fit seconds), ``own_seconds`` (wall seconds
    less those) and ``fits`` of a search's ``result.json``; NaN when it is missing."""
    if not result.exists():
        return {"fit_seconds": math.nan, "own_seconds": math.nan, "fits": math.nan}
    r = json.loads(result.read_text())
    fits = sum(h.get("seconds") or 0.0 for h in r["history"])
    return {
        "fit_seconds": fits,
        "own_seconds": r["search"]["wall_seconds"] - fits,
        "fits": len(r["history"]),
    }


def per_series(out: Path) -> pd.DataFrame:
    scores = pd.read_csv(out / "forecast_scores.csv")
    ok = scores[(scores["status"] == "ok") & scores["method"].isin(["prolas", "cks"])]
    wide = ok.pivot_table(
        index=["series", "half"], columns="method", values=["bic", "search_seconds"]
    ).dropna()
    rows = []
    for (name, half), r in wide.iterrows():
        p_bic, c_bic = r[("bic", "prolas")], r[("bic", "cks")]
        p_s, c_s = r[("search_seconds", "prolas")], r[("search_seconds", "cks")]
        at_cks = _running_best_at(out / "prolas" / name / "journal.jsonl", c_s)
        rows.append(
            {
                "series": name,
                "half": half,
                "prolas_bic": p_bic,
                "cks_bic": c_bic,
                "difference": p_bic - c_bic,
                "prolas_seconds": p_s,
                "cks_seconds": c_s,
                "time_ratio": p_s / c_s,
                "prolas_bic_at_cks_time": at_cks,
                **{
                    f"{method}_{key}": value
                    for method in ("prolas", "cks")
                    for key, value in _time_split(out / method / name / "result.json").items()
                },
            }
        )
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame, label: str) -> str:
    """One markdown row: :func:`search_counts`, the sign test of higher against lower,
    the share not slower, and PROLAS's best at CKS's wall time."""
    c = search_counts(table["difference"], table["time_ratio"])
    n, higher, lower = c["n"], c["higher"], c["lower"]
    p = binomtest(higher, higher + lower, 0.5).pvalue if higher + lower else math.nan
    at_time = int((table["prolas_bic_at_cks_time"] >= table["cks_bic"] - BIC_TIE).sum())
    return (
        f"| {label} | {n} | {c['at_least']} ({c['at_least'] / n:.0%}) | {higher} / {lower} "
        f"(p = {p:.3g}) | {c['median_ratio']:.2f} | {(table['time_ratio'] <= 1).mean():.0%} "
        f"| {at_time} ({at_time / n:.0%}) |"
    )


def time_split(table: pd.DataFrame, label: str) -> str:
    """One markdown row: medians over series of each search's fit seconds, own seconds
    and number of fits (PROLAS, then CKS)."""
    cells = [
        f"{table[f'{m}_fit_seconds'].median():.1f} / {table[f'{m}_own_seconds'].median():.1f}"
        f" / {table[f'{m}_fits'].median():.0f}"
        for m in ("prolas", "cks")
    ]
    return f"| {label} | {cells[0]} | {cells[1]} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="output folders of bench --forecast")
    ap.add_argument("--csv", type=Path, help="write the per-series table here")
    args = ap.parse_args()
    print(
        "| run | series | PROLAS at least CKS | higher / lower (sign test) "
        "| median time ratio PROLAS / CKS | PROLAS not slower | PROLAS at CKS's wall time "
        "at least CKS |"
    )
    print("|---|---|---|---|---|---|---|")
    tables = []
    for out in args.runs:
        table = per_series(out).assign(run=out.name)
        tables.append(table)
        for half in ("tuning", "report"):
            part = table[table["half"] == half]
            if len(part):
                print(summary(part, f"{out.name}, {half} half"))
        print(summary(table, f"{out.name}, all"))
    print()
    print("| run (medians over series) | PROLAS fit s / own s / fits | CKS fit s / own s / fits |")
    print("|---|---|---|")
    for out, table in zip(args.runs, tables):
        print(time_split(table, out.name))
    if args.csv:
        pd.concat(tables).to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
