"""How well PROLAS's OT surrogate predicted each next evaluation, at several noise floors.

Replays the data of finished PROLAS searches (``prolas bench --forecast ... --methods
prolas,...`` folders, ``prolas/<series>/journal.jsonl``) without fitting any GP: after
each evaluation ``i >= n_init`` the surrogate is fitted, as the search fits it, to the
``i`` expressions evaluated so far (targets ``BIC + k/2 ln N``, failures at the
search's pessimistic value, repairs applied from the line that records them, warm
started from the previous step's hyperparameters), and predicts the expression the
search evaluated next. The path is the recorded one for every floor, so the floors are
compared on the same predictions. Per prediction of a successful evaluation, in the
units of the targets (nats):

* ``lpd``: ``log N(y; mu, s^2 + sigma_n^2)``, the surrogate's own predictive of a new
  observation (``sigma_n^2`` the fitted noise in target units);
* ``z``: ``(y - mu) / sqrt(s^2 + sigma_n^2)``.

    python benchmarks/scripts/surrogate_noise_offline.py RUN --half tuning \\
        --floors 1e-4,1e-3,1e-2,0.05,0.2 --out per_series.csv
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from prolas.bench.forecast_bench import suite_series
from prolas.errors import NumericsWarning
from prolas.limits import INITIAL_DESIGN
from prolas.surrogates.ot import ExpressionRegistry
from prolas.surrogates.ot_gp import OTGP

# ``prolas.search`` the package is shadowed by the ``search`` function ``prolas`` exports
latent = importlib.import_module("prolas.search.latent")
failed_fit_target = latent.failed_fit_target


def journal_rows(path: Path) -> list[dict]:
    """The journal's evaluation lines in order (repairs included, marked by
    ``repaired_from``)."""
    rows = []
    for line in path.read_text().splitlines()[1:]:
        row = json.loads(line)
        if "index" in row:
            rows.append(row)
    return rows


def replay(rows: list[dict], floors: list[float], n_init: int = INITIAL_DESIGN) -> pd.DataFrame:
    """One row per (evaluation predicted, floor): ``step`` (evaluations before it),
    ``y``, ``mu``, ``sd`` (predictive, with noise), ``lpd``, ``z``, ``noise``."""
    current: dict[str, dict] = {}  # expression -> its latest (repaired) line
    order: list[str] = []
    half_log_n = 0.0
    registry = ExpressionRegistry()
    warm: dict[float, object] = {f: None for f in floors}
    out = []
    for row in rows:
        key = row["expression"]
        if row.get("repaired_from") is not None:
            current[key] = row  # a repair: the expression's value from here on
            continue
        ok = row.get("status") == "ok" and row.get("bic") is not None
        if len(order) >= n_init and ok and key not in current:
            targets = _targets([current[e] for e in order])
            lls = [t + half_log_n * current[e]["n_params"] for e, t in zip(order, targets)]
            y_true = row["bic"] + half_log_n * row["n_params"]
            train = registry.indices(order)
            registry.anchor(train)
            (cand,) = registry.indices([key])
            for floor in floors:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", NumericsWarning)
                    try:
                        fit = OTGP.fit(registry, train, lls, init=warm[floor], noise_floor=floor)
                    except Exception:  # as the search: a failed fit has no prediction
                        warm[floor] = None
                        continue
                warm[floor] = fit.raw
                mu, var = fit.predict([cand])
                noise = float(fit.noise) * fit.y_std**2
                sd = math.sqrt(float(var[0]) + noise)
                z = (y_true - float(mu[0])) / sd
                lpd = -0.5 * z * z - math.log(sd) - 0.5 * math.log(2 * math.pi)
                out.append(
                    {
                        "step": len(order),
                        "floor": floor,
                        "y": y_true,
                        "mu": float(mu[0]),
                        "sd": sd,
                        "lpd": lpd,
                        "z": z,
                        "noise": noise,
                    }
                )
        if key not in current:
            order.append(key)
        current[key] = row
        if ok and row.get("log_likelihood") is not None and row["n_params"] > 0 and not half_log_n:
            half_log_n = max(0.0, (row["log_likelihood"] - row["bic"]) / row["n_params"])
    return pd.DataFrame(out)


def _targets(rows: list[dict]) -> list[float]:
    """The search's targets (``_LatentSearch.targets``): BIC, failures at the search's
    pessimistic value (:func:`failed_fit_target` with the default margin)."""
    ok = [r["bic"] for r in rows if r.get("status") == "ok" and r.get("bic") is not None]
    if not ok:
        return [0.0] * len(rows)
    bad = failed_fit_target(ok, latent.LatentBOConfig().margin)
    return [r["bic"] if r.get("status") == "ok" and r.get("bic") is not None else bad for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--half", default="tuning", choices=["all", "tuning", "report"])
    ap.add_argument("--floors", default="1e-4,1e-3,1e-2,0.05,0.2")
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--out", type=Path, help="per-prediction CSV (all floors)")
    ap.add_argument("--shard", default="1/1", help="K/N: every N-th series from the K-th")
    ap.add_argument(
        "--tables", nargs="*", type=Path, default=[], help="summarise these per-prediction CSVs"
    )
    args = ap.parse_args()
    floors = [float(v) for v in args.floors.split(",")]
    if args.tables:
        summarise(pd.concat([pd.read_csv(t) for t in args.tables], ignore_index=True), floors)
        return
    k, n = (int(v) for v in args.shard.split("/"))
    names = [s.folder for s, h in suite_series("m3-monthly", args.data_dir, args.half)]
    parts = []
    for name in names[k - 1 :: n]:
        path = args.run / "prolas" / name / "journal.jsonl"
        if path.exists():
            t = replay(journal_rows(path), floors)
            t.insert(0, "series", name)
            parts.append(t)
    table = pd.concat(parts, ignore_index=True)
    if args.out:
        table.to_csv(args.out, index=False)
    summarise(table, floors)


def summarise(table: pd.DataFrame, floors: list[float]) -> None:
    """Per floor: the mean of the series' mean lpd, the median fitted noise, the share
    of predictions off by more than 3 predictive sd, and the series better / worse than
    the first floor's (mean lpd; two-sided sign test)."""
    per = table.groupby(["series", "floor"]).agg(lpd=("lpd", "mean")).reset_index()
    base = floors[0]
    wide = per.pivot(index="series", columns="floor", values="lpd")
    print(f"{len(wide)} series, {len(table) // len(floors)} predictions per floor\n")
    print(
        "| noise floor | mean lpd (of series means) | median lpd | median fitted noise "
        f"| share abs(z) > 3 | series better / worse than {base:g} (sign p) |"
    )
    print("|---|---|---|---|---|---|")
    for f in floors:
        mine = table[table.floor == f]
        better = int((wide[f] > wide[base]).sum())
        worse = int((wide[f] < wide[base]).sum())
        p = binomtest(better, better + worse).pvalue if better + worse else 1.0
        print(
            f"| {f:g} | {wide[f].mean():.3f} | {wide[f].median():.3f} | "
            f"{mine.noise.median():.3g} | "
            f"{(np.abs(mine.z) > 3).mean():.3f} | {better} / {worse} ({p:.2g}) |"
        )


if __name__ == "__main__":
    main()
