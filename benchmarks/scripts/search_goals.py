"""Issue 18's four goals, per series, from a directory of bench cells.

The goals compare the default PROLAS search with the default CKS (``prolas fit --search
cks``: CKS with the change rules, the ``cks:change`` column) and with random search, every
method at the same budget of unique GP fits:

1. **fits**: the median seed of PROLAS reaches CKS's final BIC within CKS's own number of
   fits (the fits CKS needed to reach its final BIC);
2. **BIC**: PROLAS's mean best BIC at the budget is at least CKS's final BIC;
3. **time**: the median seed of PROLAS reaches CKS's final BIC before CKS finishes;
4. **random**: PROLAS's mean best BIC at the budget is above random search's (the table
   also gives the one-sided p-value of Welch's t-test over the seeds: whether PROLAS's
   mean is above random search's by more than the seeds' spread);
5. **at CKS's time** (the default search's goal on the nine series, target 7 of 9): PROLAS's
   mean over seeds of its best BIC among the evaluations finished by CKS's own (one-core)
   search time is at least CKS's final BIC.

Times are rebuilt from the cells, the same way for every method, so a grid run on a busy
machine or with a warm fit cache still compares like with like: a search's time is its
summed GP-fit seconds (the original fit's time, also for cache hits) plus its own strategy
seconds, and the time to reach a target after k of n fits is the fit seconds of those k
plus k/n of the strategy seconds. Every cell of ``prolas bench`` ran in one process on one
core; ``prolas fit --search cks`` fits each CKS level on two workers, so the table also
gives CKS's time halved, the bound of perfect two-core scaling.

    python benchmarks/scripts/search_goals.py benchmarks/results/extrapolation \\
        --out benchmarks/results/search_goals

Writes ``search_goals.md`` (the goals), ``summary.md``/``summary.csv`` (every statistic of
:func:`prolas.bench.stats.summarise` against the same reference) and one convergence plot
per series into ``--out``.

The same grid repeated with other fit seeds (``prolas bench --fit-seed K``) redraws every
GP fit, and with it the verdicts. ``--compare`` puts several grids side by side, one
column per grid and goal, with the count of series meeting each goal per grid. A grid may
be the cells of several directories (bench output directories or directories of cells),
comma-separated; a later directory's cell replaces an earlier one of the same data set,
method and seed::

    python benchmarks/scripts/search_goals.py --compare "fit seed 0=DIR0" \
        --compare "fit seed 1=DIR1" --out DIR
        # writes DIR/compare.md and each grid's DIR/search_goals_<label>.md
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import stats as sps

from prolas.bench.cells import load_cells
from prolas.bench.grid import (
    BASELINES,
    plot_bench_convergence,
    summary_columns,
    summary_markdown,
)
from prolas.bench.stats import (
    TOL,
    best_traces,
    cell_trace,
    fmt,
    reach,
    summarise,
    summary_rows,
)

#: The targets of issue 18 on nine series: how many series must meet each goal.
TARGETS = {"fits": 7, "bic": 8, "time": 6, "random": 9, "at_cks_time": 7}


def search_seconds(cell: dict) -> float:
    """A search's one-core time: its fit seconds plus its strategy seconds."""
    return float(cell["fit_seconds"] + cell["strategy_seconds"])


def finish_seconds(cell: dict, budget: int) -> np.ndarray:
    """The one-core clock at the end of each of the cell's first ``budget`` evaluations:
    the fit seconds of the first k evaluations (the original fit's, also for a cache hit)
    plus k/n of the strategy seconds (n: all its evaluations)."""
    history = cell["history"][:budget]
    share = cell["strategy_seconds"] / max(len(cell["history"]), 1)
    return np.cumsum([float(h.get("seconds") or 0.0) + share for h in history])


def seconds_to_reach(cell: dict, target: float, budget: int) -> float:
    """Seconds until the cell's best BIC first reaches ``target`` (inf: never), on the
    clock of :func:`finish_seconds`."""
    k = reach(cell_trace(cell, budget), target)
    if not math.isfinite(k):
        return math.inf
    return float(finish_seconds(cell, budget)[int(k) - 1])


def best_by_seconds(cell: dict, seconds: float, budget: int) -> float:
    """The cell's best BIC among its first ``budget`` evaluations finished within
    ``seconds`` on the clock of :func:`finish_seconds`; -inf if none finished or none of
    those succeeded."""
    done = int(np.searchsorted(finish_seconds(cell, budget), seconds, side="right"))
    best = cell_trace(cell, budget)[done - 1] if done else math.nan
    return float(best) if math.isfinite(best) else -math.inf


def at_cks_time(
    cells: Sequence[dict], dataset: str, budget: int, method: str, reference: str
) -> tuple[float, dict[int, float]]:
    """CKS's (median, one-core) search time on ``dataset`` and each ``method`` seed's best
    BIC among the evaluations finished by then (:func:`best_by_seconds`)."""
    of = [c for c in cells if c["dataset"] == dataset]
    cks_seconds = _median([search_seconds(c) for c in of if c["method"] == reference])
    return cks_seconds, {
        c["seed"]: best_by_seconds(c, cks_seconds, budget) for c in of if c["method"] == method
    }


def _median(values: Sequence[float]) -> float:
    """Median with inf allowed (more than half inf gives inf); NaN when empty."""
    return float(np.median(np.asarray(values, dtype=np.float64))) if len(values) else math.nan


def goal_rows(
    cells: Sequence[dict],
    budget: int,
    method: str = "prolas",
    reference: str = "cks:change",
    random: str = "random",
) -> list[dict]:
    """One row per data set holding ``method`` and ``reference`` cells: the figures of the
    four goals and whether each is met (None where ``random`` has no cells). BICs and fits
    are :func:`prolas.bench.stats.summary_rows`'; the seconds are rebuilt here."""
    stats = {
        (r["dataset"], r["method"]): r for r in summary_rows(cells, budget, reference=reference)
    }
    rows = []
    for dataset in sorted({c["dataset"] for c in cells}):
        mine, cks = stats.get((dataset, method)), stats.get((dataset, reference))
        if mine is None or cks is None:
            continue
        target = mine["cks_final_bic"]
        rnd = stats.get((dataset, random))
        of = [c for c in cells if c["dataset"] == dataset]
        seconds = [seconds_to_reach(c, target, budget) for c in of if c["method"] == method]
        cks_seconds, by_seed = at_cks_time(cells, dataset, budget, method, reference)
        at_cks = list(by_seed.values())
        row = {
            "dataset": dataset,
            "seeds": mine["seeds"],
            "cks_final_bic": target,
            "cks_fits": mine["cks_evals"],
            "cks_seconds": cks_seconds,
            "best_mean": mine[f"best_at_{budget}_mean"],
            "best_se": mine[f"best_at_{budget}_se"],
            "fits_to_cks": mine["evals_to_cks_median"],
            "never": mine["evals_to_cks_never"],
            "seconds_to_cks": _median(seconds),
            "random_seeds": rnd["seeds"] if rnd else 0,
            "random_best_mean": rnd[f"best_at_{budget}_mean"] if rnd else None,
            "at_cks_time_mean": float(np.mean(at_cks)) if at_cks else math.nan,
        }
        row["fits"] = row["fits_to_cks"] <= row["cks_fits"]
        row["bic"] = row["best_mean"] >= target - TOL
        row["time"] = row["seconds_to_cks"] < cks_seconds
        row["time_two_cores"] = row["seconds_to_cks"] < cks_seconds / 2
        row["random"] = None if rnd is None else row["best_mean"] > row["random_best_mean"]
        row["random_p"] = above_p(cells, dataset, method, random, budget) if rnd else None
        row["at_cks_time"] = row["at_cks_time_mean"] >= target - TOL
        rows.append(row)
    return rows


def above_p(cells: Sequence[dict], dataset: str, method: str, other: str, budget: int) -> float:
    """One-sided p-value of Welch's t-test that ``method``'s mean best BIC at the budget
    is above ``other``'s, over their seeds (NaN with fewer than two finite seeds a side,
    or where neither side's seeds spread by more than ``TOL``)."""
    a, b = (best_traces(cells, dataset, m, budget)[:, -1] for m in (method, other))
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if min(a.size, b.size) < 2 or max(np.ptp(a), np.ptp(b)) <= TOL:
        return math.nan  # no spread on either side (every seed at one optimum): no test
    return float(sps.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue)


def goals_markdown(rows: Sequence[dict], budget: int, method: str, reference: str) -> str:
    """The goal table and the count of series meeting each goal."""

    def mark(ok: bool | None) -> str:
        return "–" if ok is None else ("yes" if ok else "no")

    def count(value: float) -> str:
        return f">{budget}" if math.isinf(value) else f"{value:g}"

    def secs(value: float) -> str:
        return "never" if math.isinf(value) else f"{value:.1f}"

    lines = [
        f"# Issue 18's goals: `{method}` against `{reference}` and `random`",
        "",
        f"Budget {budget} unique GP fits. CKS: `{reference}`'s final BIC, the fits it needed "
        "to reach it and its search time. PROLAS: mean ± s.e. of the best BIC at the budget, "
        "median over seeds of the fits and seconds to reach CKS's final BIC (never: more than "
        "half the seeds never do; in brackets how many never do). Seconds are one-core times "
        "rebuilt from the cells (fit seconds plus strategy seconds); 'time, 2 cores' compares "
        "with CKS's time halved. 'at CKS's s': the mean over seeds of PROLAS's best BIC among "
        "the evaluations finished by CKS's search time (-: a seed had none). 'random best "
        "BIC': its mean at the budget (p: one-sided Welch's t-test that PROLAS's is higher; "
        "in brackets the seeds).",
        "",
        "| data | seeds | CKS final BIC (fits, s) | PROLAS best BIC | fits to CKS | s to CKS | "
        "random best BIC | PROLAS at CKS's s | fits | BIC | time | time, 2 cores | random | "
        "at CKS's time |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        rnd = "–" if r["random_best_mean"] is None else fmt(r["random_best_mean"])
        if r.get("random_p") is not None and math.isfinite(r["random_p"]):
            rnd += f" (p {r['random_p']:.2g})"
        lines.append(
            f"| {r['dataset']} | {r['seeds']} | {fmt(r['cks_final_bic'])} "
            f"({count(r['cks_fits'])}, {r['cks_seconds']:.1f}) | "
            f"{fmt(r['best_mean'])} ± {fmt(r['best_se'])} | "
            f"{count(r['fits_to_cks'])} ({r['never']}/{r['seeds']}) | "
            f"{secs(r['seconds_to_cks'])} | {rnd} ({r['random_seeds']}) | "
            f"{fmt(r['at_cks_time_mean'])} | {mark(r['fits'])} | "
            f"{mark(r['bic'])} | {mark(r['time'])} | {mark(r['time_two_cores'])} | "
            f"{mark(r['random'])} | {mark(r['at_cks_time'])} |"
        )
    lines += ["", "| goal | series meeting it | target (of 9) |", "|---|---|---|"]
    for goal, label in [
        ("fits", "fits to CKS's final BIC ≤ CKS's fits"),
        ("bic", "mean best BIC ≥ CKS's final"),
        ("time", "reaches CKS's final BIC before CKS finishes (one core each)"),
        ("time_two_cores", "the same against CKS's time halved"),
        ("random", "mean best BIC above random search's"),
        ("at_cks_time", "mean best BIC at CKS's time ≥ CKS's final (one core each)"),
    ]:
        met = sum(bool(r[goal]) for r in rows)
        target = TARGETS.get("time" if goal == "time_two_cores" else goal)
        lines.append(f"| {label} | {met} of {len(rows)} | {target} |")
    return "\n".join(lines) + "\n"


#: The goals of :func:`goal_rows` in the order the tables give them, with short labels.
GOALS = {
    "fits": "fits",
    "bic": "BIC",
    "time": "time",
    "time_two_cores": "time, 2 cores",
    "random": "random",
    "at_cks_time": "at CKS's time",
}


def compare_markdown(rows_by_grid: dict[str, Sequence[dict]]) -> str:
    """Several grids of the same methods side by side (e.g. one per fit seed): per series
    and goal the verdict in each grid (y / n; – where the grid lacks the series or random
    cells), then per goal how many series meet it in each grid (of those the grid has)."""
    grids = list(rows_by_grid)
    by_grid = {g: {r["dataset"]: r for r in rows} for g, rows in rows_by_grid.items()}
    datasets = sorted({d for rows in by_grid.values() for d in rows})

    def mark(row: dict | None, goal: str) -> str:
        if row is None or row[goal] is None:
            return "–"
        return "y" if row[goal] else "n"

    head = " | ".join(GOALS.values())
    lines = [
        "# Issue 18's goals in several grids",
        "",
        f"Grids: {', '.join(f'`{g}`' for g in grids)}. Per series and goal the verdict in "
        "each grid, in that order (y: met, n: not met, –: not measured).",
        "",
        f"| data | {head} |",
        "|---|" + "---|" * len(GOALS),
    ]
    for d in datasets:
        cols = [" / ".join(mark(by_grid[g].get(d), goal) for g in grids) for goal in GOALS]
        lines.append(f"| {d} | {' | '.join(cols)} |")
    lines += ["", "| goal | " + " | ".join(grids) + " | target (of 9) |"]
    lines.append("|---|" + "---|" * (len(grids) + 1))
    for goal, label in GOALS.items():
        counts = []
        for g in grids:
            judged = [r for r in by_grid[g].values() if r[goal] is not None]
            counts.append(f"{sum(bool(r[goal]) for r in judged)} of {len(judged)}")
        target = TARGETS["time" if goal == "time_two_cores" else goal]
        lines.append(f"| {label} | {' | '.join(counts)} | {target} |")
    return "\n".join(lines) + "\n"


def _search_cells(directory: Path) -> list[dict]:
    """The search cells of a bench output directory (``DIR/cells``) or of a directory of
    cells."""
    if (directory / "cells").is_dir():
        cells = load_cells(directory)
    else:
        cells = [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]
    cells = [c for c in cells if c["method"] not in BASELINES]
    if not cells:
        raise SystemExit(f"search_goals: no search cells in {directory}")
    return cells


def merged_cells(directories: Sequence[Path]) -> list[dict]:
    """The search cells of several directories; a later directory's cell replaces an
    earlier one of the same data set, method and seed (e.g. a variant's cells over a
    reference grid that also holds the method)."""
    merged = {}
    for directory in directories:
        for c in _search_cells(directory):
            merged[(c["dataset"], c["method"], c["seed"])] = c
    return [merged[key] for key in sorted(merged)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cells", type=Path, nargs="?", help="a bench output directory (with cells/)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget", type=int, default=50)
    ap.add_argument("--method", default="prolas")
    ap.add_argument("--reference", default="cks:change")
    ap.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="LABEL=DIR[,DIR...]",
        help="instead of one grid: several, side by side in compare.md (repeat the flag); "
        "a grid may be the cells of several directories",
    )
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.compare:
        if args.cells is not None:
            ap.error("give either one grid directory or --compare, not both")
        if any("=" not in item for item in args.compare):
            ap.error("--compare takes LABEL=DIR[,DIR...]")
        grids = dict(item.split("=", 1) for item in args.compare)
        rows = {
            label: goal_rows(
                merged_cells([Path(d) for d in dirs.split(",")]),
                args.budget,
                args.method,
                args.reference,
            )
            for label, dirs in grids.items()
        }
        text = compare_markdown(rows)
        (args.out / "compare.md").write_text(text)
        for label, grid_rows in rows.items():  # each grid's figures, as for one grid
            name = "search_goals_" + "_".join(label.split()) + ".md"
            detail = goals_markdown(grid_rows, args.budget, args.method, args.reference)
            (args.out / name).write_text(detail)
        print(text)
        return
    if args.cells is None:
        ap.error("a grid directory (or --compare) is required")
    cells = _search_cells(args.cells)
    rows = goal_rows(cells, args.budget, args.method, args.reference)
    text = goals_markdown(rows, args.budget, args.method, args.reference)
    (args.out / "search_goals.md").write_text(text)
    summary = summarise(cells, args.budget, reference=args.reference)
    summary = summary[summary_columns(args.budget)]
    summary.to_csv(args.out / "summary.csv", index=False)
    (args.out / "summary.md").write_text(summary_markdown(summary, args.budget, args.reference))
    for dataset in sorted({c["dataset"] for c in cells}):
        path = args.out / f"convergence_{dataset}.png"
        plot_bench_convergence(cells, dataset, args.budget, path, reference=args.reference)
    print(text)


if __name__ == "__main__":
    main()
