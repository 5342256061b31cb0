"""The forecast band as the models give it against a calibrated band, on the same fits.

Reads the series folders of a ``prolas bench --forecast SUITE`` run (``RUN/prolas/<series>/``:
the search's journal with every fit, and ``test_predictive.json``), rebuilds the models the
test forecast mixed (their journal fits on the training points), and forecasts the test
inputs twice with :func:`prolas.report.forecast.forecast`: the models' own band
(``band="model"``) and ``--band`` (``calibrated`` or ``refitted``,
:func:`prolas.report.forecast.band_scale`). The one the run used (``--run-band``) must
reproduce the run's scores (checked, a mismatch is an error).
The means are the same; only the band and the density change, so the comparison is paired
and free of search and fit noise. In the CSV, the columns ``*_model`` are the models' own
band and ``*_calibrated`` the ``--band`` one, ``calibrated`` or ``refitted`` alike
(``band_refit.csv`` in the study holds the refitted band under that name).

Prints per series (band factor, coverage, interval score, CRPS for both) and the means,
the paired sign test and the bootstrap interval of the mean difference (distance of the
coverage from 0.95, interval score, CRPS; :mod:`prolas.bench.paired`), and writes a CSV.

    python benchmarks/scripts/band_calibration.py RUN --suite m3-monthly --half tuning \\
        --band refitted --out band_tuning.csv
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.bench.forecast_bench import suite_series
from prolas.bench.paired import bootstrap_interval, differences, sign_test, verdict
from prolas.gp import FitResult, hold_unseen_transitions
from prolas.report.forecast import forecast
from prolas.report.scoring import forecast_predictive, score_forecast, seasonal_naive_scale


def journal_fits(path: Path, n: int) -> dict[str, FitResult]:
    """Every successful fit of a search journal by expression, in the journal's order (a
    repair's line, later in the journal, replaces the fit it repaired)."""
    fits = {}
    for line in path.read_text().splitlines()[1:]:
        entry = json.loads(line)
        doc = entry.get("fit")
        if entry.get("status") == "ok" and doc:
            fits[entry["expression"]] = FitResult.from_json(doc, n)
    return fits


def series_rows(
    run: Path, series, season_length: int, band: str, run_band: str = "model"
) -> dict | None:
    folder = run / "prolas" / series.folder
    pred_path = folder / "test_predictive.json"
    if not pred_path.exists() or series.train is None:
        return None
    pred = json.loads(pred_path.read_text())
    train = series.train
    fits = journal_fits(folder / "journal.jsonl", train.n)
    models = [hold_unseen_transitions(fits[m], train) for m in pred["models"]]
    scale = seasonal_naive_scale(train.y, season_length)
    row = {"series": series.name}
    for which in ("model", band):
        fc = forecast(models, train, x_new=series.test_x, method=pred["method"], band=which)
        scores = score_forecast(series.test_y, forecast_predictive(fc), scale)
        tag = "calibrated" if which != "model" else "model"
        if which == run_band:  # the run's own forecast: its scores must come out again
            for k in ("mase", "coverage", "interval_score_scaled", "crps_scaled"):
                if not math.isclose(scores[k], pred["scores"][k], rel_tol=1e-6, abs_tol=1e-9):
                    raise SystemExit(
                        f"{series.name}: {k} {scores[k]} does not reproduce the run's "
                        f"{pred['scores'][k]}"
                    )
        if which != "model":
            row["band_scale"] = fc.band_scale
        for k in ("coverage", "interval_score_scaled", "crps_scaled"):
            row[f"{k}_{tag}"] = scores[k]
    row["mase"] = scores["mase"]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="the --out folder of a prolas bench --forecast run")
    ap.add_argument("--suite", default="m3-monthly")
    ap.add_argument("--half", default="all")
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--band", choices=("calibrated", "refitted"), default="calibrated")
    ap.add_argument(
        "--run-band",
        choices=("model", "calibrated", "refitted"),
        default="model",
        help="the band the run forecast with (its scores are checked against it)",
    )
    ap.add_argument("--out", type=Path, help="CSV of the per-series rows")
    args = ap.parse_args(argv)
    rows = []
    for series, _ in suite_series(args.suite, args.data_dir, args.half):
        row = series_rows(args.run, series, series.season_length or 12, args.band, args.run_band)
        if row is not None:
            rows.append(row)
            print(
                f"{row['series']:>8}  s={row['band_scale']:.2f}  coverage "
                f"{row['coverage_model']:.2f} -> {row['coverage_calibrated']:.2f}  IS "
                f"{row['interval_score_scaled_model']:.2f} -> "
                f"{row['interval_score_scaled_calibrated']:.2f}",
                file=sys.stderr,
            )
    table = pd.DataFrame(rows)
    if args.out:
        table.to_csv(args.out, index=False)
    print(f"{len(table)} series; band factor median {table['band_scale'].median():.2f}")
    for k in ("coverage", "interval_score_scaled", "crps_scaled"):
        a, b = table[f"{k}_model"].to_numpy(), table[f"{k}_calibrated"].to_numpy()
        line = f"{k:>22}: model {np.mean(a):.4f}  calibrated {np.mean(b):.4f}"
        d = differences(b, a, k)  # negative: the calibrated band is better
        better, worse, ties, p = sign_test(d)
        mean, low, high = bootstrap_interval(d)
        line += (
            f"  calibrated better on {better}, worse on {worse}, tied {ties} (sign test "
            f"p = {p:.2g}); mean difference {mean:+.4f} [{low:+.4f}, {high:+.4f}]: "
            f"{verdict(low, high, better, worse, p, 'calibrated', 'model band')}"
        )
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
