"""Rules that turn a search's top models into one forecast, scored from per-model records.

``forecast_choice.py`` forecasts each cell a fixed few ways. This script separates the
expensive part (the refits) from the rules: ``record`` stores, per cell and per top model,
everything a rule may use, and ``table`` applies every rule to the stored records, so a
new rule costs no refit.

``record``: for every cell, the search's ``K`` best distinct models fitted on all training
points (:func:`forecast_choice.cell_fits`; transitions beyond the data held). Per model:
its BIC; its forecast of the test file (mean and sd); and the rolling-origin check of
:func:`prolas.report.forecast.rolling_origin_check` (5 origins in the last 10 % of the
training data, each predicting to its end) kept per origin as the sum of squared errors,
the summed log predictive density (y's units) and the count. The check is made with the
hyperparameters fitted on all training points (``fixed``, as the product's check is) and,
with ``--refit-check``, also with each model refitted on each prefix, warm-started from
its full fit (``refit``; a leave-future-out check whose hyperparameters never saw the
points they predict).

``table``: per (series, fit seed) the mean test RMSE of every rule; each rule against
``bma`` seed by seed (mean log(RMSE / RMSE of bma) ± s.e. and the seeds better / worse);
and at fit seed 0 each rule's RMSE / ABCD's published RMSE. The rules, for ``C`` =
``fixed`` or ``refit``:

* ``best``: the highest-BIC refit; ``bma``: the BIC-weighted mixture;
* ``C_rmse``, ``C_mlpd``: the model of lowest pooled check RMSE (``--forecast rolling``
  for ``fixed``) or highest mean log predictive density;
* ``C_logrmse``: lowest mean over origins of log RMSE (no origin dominates);
* ``C_rank``: lowest mean rank over origins (by squared error);
* ``C_mix``: the mixture weighted by exp(summed check log density)
  (``--forecast rolling-mix`` for ``fixed``);
* ``C_bicmix``: weights ∝ exp(BIC + summed check log density);
* ``C_stack``: stacking (:func:`stacking_weights`), the weights that maximise the
  mixture's log score on the check's (origin, point) pairs (records with ``lpd`` only).

``complement`` adds to each record the search's best model of the family its top models
lack (with a change operator or without; :func:`complement_expression`), fitted and
checked as the others. The rules ``fam_change`` (the complement only when it is a change
model) and ``fam_both`` are then ``fixed_mix`` over the top models and the complement.

Usage::

    python benchmarks/scripts/forecast_rules.py record CELL.json ... --fit-seed K \\
        --lengthscale-floor 1 --out records.jsonl [--refit-check]
    python benchmarks/scripts/forecast_rules.py complement records.jsonl --cells CELLS_DIR \
        --lengthscale-floor 1 --out records_complement.jsonl
    python benchmarks/scripts/forecast_rules.py table records*.jsonl --out DIR
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from forecast_choice import TUNING, cell_fits, ranked_history  # noqa: E402

from prolas.bench import ABCD_RMSE  # noqa: E402
from prolas.data import Dataset, load_csv  # noqa: E402
from prolas.expr import parse  # noqa: E402
from prolas.gp import FitConfig, FitResult, fit_gp, hold_unseen_transitions  # noqa: E402
from prolas.report.forecast import (  # noqa: E402
    _components,
    _log_normal,
    forecast,
    origin_split,
    rolling_origins,
)


def check(fits: list[FitResult], dataset: Dataset, config: FitConfig | None) -> list[list[dict]]:
    """Per model, per origin: ``sse``, ``slpd`` (y's units) and ``count`` of the check, and
    ``lpd``, the log predictive density of each point predicted (y's units; for stacking).

    ``config`` None: the hyperparameters fitted on all of ``dataset``; else each model is
    refitted on each prefix with ``config`` (one random restart), warm-started from its fit.
    """
    n = dataset.n
    out: list[list[dict]] = [[] for _ in fits]
    log_std = math.log(dataset.y_std)
    for o in rolling_origins(n):  # the product's check: its default origins, to the end
        prefix, x, y = origin_split(dataset, o, n)
        models = fits
        if config is not None:
            models = []
            for f in fits:
                g = fit_gp(f.expression, prefix, replace(config, restarts=1), init=[f])
                models.append(hold_unseen_transitions(g, prefix) if g.ok else f)
        means, sds = _components(models, prefix, x)
        lpd = _log_normal(y, means, sds)
        for i in range(len(fits)):
            out[i].append(
                {
                    "origin": int(o),
                    "sse": float(np.sum((y - means[i]) ** 2)) * dataset.y_std**2,
                    "slpd": float(np.sum(lpd[i])) - y.size * log_std,
                    "count": int(y.size),
                    "lpd": [float(v) - log_std for v in lpd[i]],
                }
            )
    return out


def record_cell(
    cell: dict, data_dir: Path, fit_seed: int, floor: float, refit_check: bool, k: int = 5
) -> dict:
    """The per-model record of one cell (see the module docstring)."""
    train, test, _, fits = cell_fits(cell, data_dir, k, 8, floor, fit_seed)
    fits = [hold_unseen_transitions(f, train) for f in fits]
    fixed = check(fits, train, None)
    config = FitConfig(restarts=8, seed=fit_seed, lengthscale_floor=floor)
    refit = check(fits, train, config) if refit_check else [None] * len(fits)
    models = []
    for f, fx, rf in zip(fits, fixed, refit):
        fc = forecast(f, train, x_new=test.x)
        models.append(
            {
                "expression": f.expression,
                "bic": f.bic,
                "test_rmse": float(np.sqrt(np.mean((fc.mean - test.y) ** 2))),
                "test_mean": [float(v) for v in fc.mean],
                "test_sd": [float(v) for v in fc.component_sds[0]],
                "fixed": fx,
                "refit": rf,
            }
        )
    return {
        "dataset": cell["dataset"],
        "seed": cell["seed"],
        "fit_seed": fit_seed,
        "test_y": [float(v) for v in test.y],
        "models": models,
    }


def complement_expression(cell: dict, top: list[str]) -> str | None:
    """The search's best expression of the family ``top`` lacks, or None.

    The family is whether an expression holds a change operator (CP/CW). If none of the
    top models has one, the best change model the search fitted; if all have one, its best
    model without; if both families are in ``top``, None.
    """
    changes = {parse(e).has_change for e in top}
    if len(changes) != 1:
        return None
    wanted = not changes.pop()
    for h in ranked_history(cell):
        if h["expression"] not in top and parse(h["expression"]).has_change == wanted:
            return h["expression"]
    return None


def complement_record(rec: dict, cell: dict, data_dir: Path, floor: float) -> dict:
    """``rec`` with ``complement``: the model record of :func:`complement_expression`
    fitted on all training points (None if there is none or its fit fails)."""
    name = cell["dataset"]
    train = load_csv(data_dir / f"{name}_train.csv")
    test = load_csv(data_dir / f"{name}_test.csv")
    expr = complement_expression(cell, [m["expression"] for m in rec["models"]])
    entry = None
    if expr is not None:
        config = FitConfig(restarts=8, seed=rec["fit_seed"], lengthscale_floor=floor)
        fit = fit_gp(expr, train, config)
        if fit.ok:
            fit = hold_unseen_transitions(fit, train)
            fc = forecast(fit, train, x_new=test.x)
            entry = {
                "expression": fit.expression,
                "has_change": parse(fit.expression).has_change,
                "bic": fit.bic,
                "test_rmse": float(np.sqrt(np.mean((fc.mean - test.y) ** 2))),
                "test_mean": [float(v) for v in fc.mean],
                "test_sd": [float(v) for v in fc.component_sds[0]],
                "fixed": check([fit], train, None)[0],
                "refit": None,
            }
    return {**rec, "complement": entry}


# --- the rules ---------------------------------------------------------------------------


def _normalised(log_w: np.ndarray) -> np.ndarray:
    w = np.exp(log_w - log_w.max())
    return w / w.sum()


def stacking_weights(lpd: np.ndarray, *, iterations: int = 5000, tol: float = 1e-12) -> np.ndarray:
    """Stacking weights of K predictive distributions from their log densities at P points.

    ``lpd`` has shape ``(K, P)``: ``lpd[i, p] = log p_i(y_p)``. The weights maximise the
    mixture's log score over the simplex (Yao, Vehtari, Simpson & Gelman 2018),

        w = argmax_{w ≥ 0, Σ w = 1} Σ_p log Σ_i w_i p_i(y_p),

    a concave problem, solved by the EM fixed point ``w_i ← mean_p r_ip`` with
    responsibilities ``r_ip = w_i p_i(y_p) / Σ_j w_j p_j(y_p)``, which increases the
    score at every step (the components are fixed, only their weights move). Unlike
    pseudo-BMA (weights ∝ exp of each model's own summed log density), a model that is
    best on most points does not take all the weight when another predicts the rest
    better. A model with a non-finite density at any point is left out (weight 0); if
    every model is, the weights are uniform.
    """
    lpd = np.asarray(lpd, dtype=np.float64)
    ok = np.isfinite(lpd).all(axis=1)
    w = np.zeros(lpd.shape[0])
    if not ok.any():
        return np.full(lpd.shape[0], 1.0 / lpd.shape[0])
    a = lpd[ok]
    v = np.full(a.shape[0], 1.0 / a.shape[0])
    for _ in range(iterations):
        log_r = a + np.log(np.maximum(v, 1e-300))[:, None]
        log_r -= log_r.max(axis=0)
        r = np.exp(log_r)
        new = (r / r.sum(axis=0)).mean(axis=1)
        done = np.abs(new - v).max() < tol
        v = new
        if done:
            break
    w[ok] = v / v.sum()
    return w


def rule_rmses(rec: dict) -> dict[str, float]:
    """Test RMSE of every rule on one cell's record."""
    ms = rec["models"]
    y = np.asarray(rec["test_y"])
    means = np.array([m["test_mean"] for m in ms])
    bic = np.array([m["bic"] for m in ms])

    def mix(w: np.ndarray) -> float:
        return float(np.sqrt(np.mean((w @ means - y) ** 2)))

    def pick(score: np.ndarray) -> float:  # the lowest score; ties go to the higher BIC
        return ms[min(range(len(ms)), key=lambda i: (score[i], i))]["test_rmse"]

    out = {"best": ms[0]["test_rmse"], "bma": mix(_normalised(bic))}
    for kind in ("fixed", "refit"):
        if ms[0][kind] is None:
            continue
        per = [m[kind] for m in ms]  # per model, per origin
        sse = np.array([sum(o["sse"] for o in p) for p in per])
        slpd = np.array([sum(o["slpd"] for o in p) for p in per])
        count = np.array([sum(o["count"] for o in p) for p in per])
        log_rmse = np.array([np.mean([math.log(o["sse"] / o["count"]) for o in p]) for p in per])
        ranks = sum(
            np.array([p[j]["sse"] for p in per]).argsort().argsort() for j in range(len(per[0]))
        )
        out[f"{kind}_rmse"] = pick(sse / count)
        out[f"{kind}_mlpd"] = pick(-slpd / count)
        out[f"{kind}_logrmse"] = pick(log_rmse)
        out[f"{kind}_rank"] = pick(ranks)
        out[f"{kind}_mix"] = mix(_normalised(slpd))
        out[f"{kind}_bicmix"] = mix(_normalised(bic + slpd))
        if "lpd" in per[0][0]:  # records from before the pointwise densities lack it
            points = np.array([[v for o in p for v in o["lpd"]] for p in per])
            out[f"{kind}_stack"] = mix(stacking_weights(points))
    if "complement" in rec:  # the rolling-origin mixture over the top models + complement
        extra = rec["complement"]
        slpd = [sum(o["slpd"] for o in m["fixed"]) for m in ms]
        for rule, use in (
            ("fam_change", extra is not None and extra["has_change"]),
            ("fam_both", extra is not None),
        ):
            if use:
                w = _normalised(np.array([*slpd, sum(o["slpd"] for o in extra["fixed"])]))
                m = np.vstack([means, extra["test_mean"]])
                out[rule] = float(np.sqrt(np.mean((w @ m - y) ** 2)))
            else:
                out[rule] = out["fixed_mix"]
    return out


def tables(records: list[dict]) -> str:
    """The two markdown tables (mean RMSE; seed by seed against bma)."""
    rows = [
        {
            "dataset": r["dataset"],
            "fit_seed": r["fit_seed"],
            "seed": r["seed"],
            "rule": k,
            "rmse": v,
        }
        for r in records
        for k, v in rule_rmses(r).items()
    ]
    t = pd.DataFrame(rows)
    mean = (
        t.groupby(["rule", "dataset", "fit_seed"])["rmse"].mean().unstack(["dataset", "fit_seed"])
    )
    rules = list(dict.fromkeys(t["rule"]))
    mean = mean.loc[rules]
    head = [f"{d} ({s})" for d, s in mean.columns]
    lines = [
        "Mean test RMSE over seeds; columns: series (fit seed).",
        "",
        "| rule | " + " | ".join(head) + " |",
        "|---|" + "---|" * len(head),
    ]
    for rule, row in mean.iterrows():
        lines.append(f"| {rule} | " + " | ".join(f"{v:.4g}" for v in row) + " |")
    wide = t.pivot_table(index=["dataset", "fit_seed", "seed"], columns="rule", values="rmse")
    logs = np.log(wide[rules].div(wide["bma"], axis=0))

    def cell(v: pd.Series) -> str:
        v = v.dropna()
        se = v.std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else math.nan
        return f"{v.mean():+.3f} ± {se:.3f} ({int((v < 0).sum())}/{int((v > 0).sum())})"

    groups = [(d, logs.index.get_level_values(0) == d) for d in dict.fromkeys(t["dataset"])]
    tuning = logs.index.get_level_values(0).isin(TUNING)
    groups += [("tuning series, pooled", tuning), ("other series, pooled", ~tuning)]
    groups = [(g, sel) for g, sel in groups if sel.any()]
    lines += [
        "",
        "Seed by seed against `bma`, all fit seeds pooled: mean log(RMSE / RMSE of bma) ± s.e. "
        "(negative = better), then the seeds better / worse.",
        "",
        "| rule | " + " | ".join(g for g, _ in groups) + " |",
        "|---|" + "---|" * len(groups),
    ]
    for rule in rules:
        if rule != "bma":
            lines.append(
                f"| {rule} | " + " | ".join(cell(logs[rule][sel]) for _, sel in groups) + " |"
            )
    zero = t[t["fit_seed"] == 0]
    if not zero.empty:
        ratio = zero.groupby(["rule", "dataset"])["rmse"].mean().unstack("dataset")
        ratio = ratio.loc[rules] / pd.Series({d: ABCD_RMSE.get(d, math.nan) for d in ratio})
        lines += [
            "",
            "Against ABCD's published RMSE, fit seed 0: the mean RMSE over seeds / ABCD's, "
            "its median over the series recorded, and the series where it is below 1.",
            "",
            "| rule | median RMSE / ABCD | series below ABCD |",
            "|---|---|---|",
        ]
        for rule, row in ratio.iterrows():
            wins = ", ".join(d for d, v in row.items() if v < 1)
            below = f"{int((row < 1).sum())} of {int(row.notna().sum())}"
            lines.append(f"| {rule} | {row.median():.3f} | {below} ({wins}) |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record", help="refit the top models of cells and record them")
    r.add_argument("cells", type=Path, nargs="+", help="cell JSON files of one grid")
    r.add_argument("--fit-seed", type=int, default=0, help="the grid's fit seed")
    r.add_argument("--lengthscale-floor", type=float, default=1.0, help="the grid's floor")
    r.add_argument("--refit-check", action="store_true", help="also the refitted check")
    r.add_argument("--data-dir", type=Path, default=Path("data"))
    r.add_argument("--out", type=Path, required=True, help="JSON lines file (appended)")
    c = sub.add_parser("complement", help="add each record's complement model")
    c.add_argument("records", type=Path, help="records of one grid (JSON lines)")
    c.add_argument("--cells", type=Path, required=True, help="that grid's cells directory")
    c.add_argument("--lengthscale-floor", type=float, default=1.0, help="the grid's floor")
    c.add_argument("--data-dir", type=Path, default=Path("data"))
    c.add_argument("--datasets", nargs="*", help="only these series")
    c.add_argument("--out", type=Path, required=True, help="JSON lines file (appended)")
    t = sub.add_parser("table", help="apply the rules to records")
    t.add_argument("records", type=Path, nargs="+")
    t.add_argument("--out", type=Path, required=True, help="directory for forecast_rules.md")
    args = p.parse_args()
    if args.command == "record":
        with args.out.open("a") as fh:
            for path in args.cells:
                cell = json.loads(path.read_text())
                rec = record_cell(
                    cell, args.data_dir, args.fit_seed, args.lengthscale_floor, args.refit_check
                )
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                print(f"{cell['dataset']} seed {cell['seed']}", flush=True)
        return
    if args.command == "complement":
        with args.out.open("a") as fh:
            for line in args.records.read_text().splitlines():
                rec = json.loads(line)
                if args.datasets and rec["dataset"] not in args.datasets:
                    continue
                path = args.cells / f"{rec['dataset']}__prolas__seed{rec['seed']}.json"
                cell = json.loads(path.read_text())
                rec = complement_record(rec, cell, args.data_dir, args.lengthscale_floor)
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                extra = rec["complement"]
                print(
                    f"{rec['dataset']} seed {rec['seed']}: "
                    f"{extra['expression'] if extra else None}",
                    flush=True,
                )
        return
    records = [json.loads(line) for f in args.records for line in f.read_text().splitlines()]
    text = tables(records)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "forecast_rules.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
