"""``prolas compare``: several search methods x seeds on one data set, same Evaluator.

A comparison is a grid on one data set: every run is a cell of
:func:`prolas.bench.grid.run_cell` (a fresh :class:`~prolas.search.evaluator.Evaluator`
with the same budget around one shared scorer; methods are
:class:`~prolas.bench.grid.MethodSpec` labels), and its statistics are those of
:func:`prolas.bench.stats.summarise`. Unlike a bench cell, a run is the strategy alone
(:func:`prolas.pipeline.run_strategy`: no final fit of the best model, so a synthetic
scorer without data works too). With real data the scorer is a
:class:`~prolas.search.cache.CachedScorer` over :class:`~prolas.gp.GPScorer` with a
*fixed* fit seed (``fit_seed``, not the search seed) and ``DIR/fits.jsonl`` as its
file, so every method and seed sees identical scores for identical expressions and the
grid costs only its distinct expressions. CKS is deterministic: it runs once (the first seed).

Outputs in ``DIR``:

* ``evaluations.csv``: every unique evaluation (method, seed, index, expression, status,
  bic, seconds = the original fit's seconds);
* ``convergence.png``: best BIC against the number of evaluations, mean ± standard error
  over seeds per method, CKS's final BIC as a horizontal line;
* ``summary.csv`` / ``summary.md``: per method, the mean and median best BIC after 10, 25
  and 50 evaluations (a run that stopped earlier keeps its final best), the evaluations
  needed to reach CKS's final BIC (median over seeds and how many seeds never reach it),
  the evaluations CKS needed, and the summed fit seconds per run: the columns of
  :func:`prolas.bench.stats.summary_rows` under compare's names
  (:func:`compare_summary`).

>>> from prolas.search.evaluator import TableScorer
>>> res = run_compare(None, ["cks", "random"], seeds=2, budget=8, out="/tmp/cmp",
...                   scorer=TableScorer({"LIN + PER": 3.0}))      # doctest: +SKIP
>>> sorted(res.summary)                                           # doctest: +SKIP
['cks', 'random']
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from prolas.bench.grid import BenchConfig, parse_methods, run_cell
from prolas.bench.stats import BUDGETS, best_traces, mean_se_curve, summary_rows
from prolas.data import Dataset
from prolas.errors import ProlasError
from prolas.limits import DEFAULT_CHECKPOINT, DEFAULT_GRAMMAR
from prolas.pipeline import run_strategy
from prolas.records import SearchResult
from prolas.search.config import SearchConfig
from prolas.search.evaluator import Evaluator

__all__ = [
    "CompareResult",
    "run_compare",
    "compare_summary",
    "write_outputs",
    "summary_markdown",
    "plot_comparison",
]


@dataclass
class CompareResult:
    """All runs of a comparison, their cell records (:func:`prolas.bench.cells.cell_record`)
    and their summary rows (one per method, :func:`compare_summary`)."""

    runs: dict[str, list[SearchResult]]
    summary: dict[str, dict]
    cks_final: float | None
    cks_needed: int | None
    settings: dict = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    cells: list[dict] = field(default_factory=list)


def compare_summary(
    cells: Sequence[dict], budget: int, methods: Sequence[str] | None = None
) -> tuple[dict[str, dict], float | None, int | None]:
    """Compare's summary rows per method (in ``methods`` order), CKS's final BIC and the
    evaluations CKS needed: :func:`prolas.bench.stats.summary_rows` of the cells (one data
    set) under compare's column names.

    ``runs`` = seeds; ``mean_best_at_<n>`` / ``median_best_at_<n>`` for n in
    :data:`~prolas.bench.stats.BUDGETS` up to the budget; ``mean_final_best`` ±
    ``se_final_best`` at the budget; ``mean_evaluations``; with a CKS run,
    ``median_evals_to_cks``, ``never_reach_cks``, ``cks_needed`` and ``ratio_to_cks``;
    ``mean_fit_seconds_per_run`` and ``mean_wall_seconds_per_run``.
    """
    rows = {r["method"]: r for r in summary_rows(cells, budget)}
    if len({r["dataset"] for r in rows.values()}) > 1:
        raise ProlasError("compare_summary: the cells hold more than one data set")
    cks_final = next(iter(rows.values()))["cks_final_bic"] if rows else None
    cks_needed = int(rows["cks"]["cks_evals"]) if cks_final is not None else None
    summary = {}
    for method in methods if methods is not None else sorted(rows):
        if method not in rows:
            continue
        r = rows[method]
        row: dict = {"method": method, "runs": r["seeds"]}
        for n in BUDGETS:
            if n <= budget:
                row[f"mean_best_at_{n}"] = r[f"best_at_{n}_mean"]
                row[f"median_best_at_{n}"] = r[f"best_at_{n}_median"]
        row["mean_final_best"] = r[f"best_at_{budget}_mean"]
        row["se_final_best"] = r[f"best_at_{budget}_se"]
        row["mean_evaluations"] = r["evaluations_mean"]
        if cks_final is not None:
            row["median_evals_to_cks"] = r["evals_to_cks_median"]
            row["never_reach_cks"] = r["evals_to_cks_never"]
            row["cks_needed"] = cks_needed
            row["ratio_to_cks"] = r["evals_to_cks_ratio"]
        row["mean_fit_seconds_per_run"] = r["fit_seconds_per_seed"]
        row["mean_wall_seconds_per_run"] = r["wall_seconds_per_seed"]
        summary[method] = row
    return summary, cks_final, cks_needed


def run_compare(
    dataset: Dataset | None,
    methods: Sequence[str],
    seeds: int | Sequence[int],
    budget: int,
    out: str | Path,
    *,
    restarts: int = 4,
    fit_seed: int = 0,
    checkpoint: str = DEFAULT_CHECKPOINT,
    grammar: str = DEFAULT_GRAMMAR,
    batch: int = 1,
    depth: int = 4,
    scorer: Callable | None = None,
    cache_path: str | Path | None = None,
    prolas_options=None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> CompareResult:
    """Run ``methods`` x ``seeds`` through identical Evaluators and write the outputs.

    Args:
        dataset: the data (may be None when ``scorer`` is given).
        methods: :class:`~prolas.bench.grid.MethodSpec` labels (``prolas``, ``cks``,
            ``random``, ``structural[:SURROGATE[:OPTIMISER]]``, ``cks:change``);
            repeats are dropped. ``cks`` is plain CKS, as in the bench grids.
        seeds: a count (seeds 0..n-1) or explicit seeds; CKS runs once (first seed).
        budget: unique evaluations per run.
        out: output directory (created); ``fits.jsonl`` there is the shared fit cache.
        restarts, fit_seed: GP fit settings shared by every run.
        scorer: replaces the cached GP scorer (e.g. a TableScorer in tests).
        cache_path: the fit cache (default ``out/fits.jsonl``); share one file between
            comparisons of the same data and fit settings.
        prolas_options: :class:`prolas.search.latent.LatentBOConfig` for PROLAS runs.
    """
    log = log or (lambda s: None)
    specs = parse_methods(list(dict.fromkeys(methods)))
    methods = [s.label for s in specs]
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise ProlasError("--seeds must be at least 1")
    if scorer is None and dataset is None:
        raise ProlasError("run_compare needs a data set or a scorer")
    config = BenchConfig(
        datasets=(getattr(dataset, "name", "") or "",),
        methods=specs,
        seeds=len(seed_list),
        budget=budget,
        restarts=restarts,
        fit_seed=fit_seed,
        grammar=grammar,
        checkpoint=checkpoint,
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cache = None
    if scorer is None:
        from prolas.gp import GPScorer
        from prolas.search.cache import CachedScorer

        cache_path = Path(cache_path) if cache_path is not None else out / "fits.jsonl"
        cache = CachedScorer(GPScorer(dataset, config.fit_config), cache_path)
        scorer = cache
        log(f"fit cache {cache_path}: {len(cache)} expressions already fitted")
    # CKS is deterministic: it runs once, with the first seed
    grid = [
        (m, s) for s in seed_list for m in specs if not (m.method == "cks" and s != seed_list[0])
    ]
    # CKS first: its final BIC is the reference line
    grid.sort(key=lambda ms: ms[0].label != "cks")

    def strategy(ev: Evaluator, data: Dataset | None, settings: SearchConfig):
        """The search alone (:func:`prolas.pipeline.run_strategy`), no final fit."""
        if settings.method == "prolas" and prolas_options is not None:
            from prolas.search.latent import search_prolas

            return search_prolas(ev, data, settings, options=prolas_options), None
        return run_strategy(ev, data, settings, log), None

    runs: dict[str, list[SearchResult]] = {m: [] for m in methods}
    cells: list[dict] = []
    # rows of finished runs, for a look at a long comparison before it ends
    partial = out / "evaluations.partial.csv"
    partial.unlink(missing_ok=True)
    bar = None
    if progress:
        from prolas.progress import progress_bar

        bar = progress_bar(len(grid), unit="run", desc="compare")
    t0 = time.perf_counter()
    import torch

    threads = torch.get_num_threads()
    # one thread: the fits are small and the CPU is shared (measured; docs/fit.md, Threads)
    torch.set_num_threads(1)
    try:
        for spec, seed in grid:
            settings = spec.search_config(config, seed).replace(depth=depth, batch=batch)
            cell, result, _ = run_cell(
                dataset,
                spec,
                seed,
                config,
                scorer,
                search=strategy,
                search_config=settings,
            )
            runs[spec.label].append(result)
            cells.append(cell)
            _append_rows(partial, spec.label, result)
            if bar is not None:
                best = result.best
                bar.set_postfix_str(
                    f"{spec.label} seed {seed}: best {best.bic:.2f}"
                    if best
                    else f"{spec.label} seed {seed}"
                )
                bar.update(1)
    finally:
        torch.set_num_threads(threads)
        if bar is not None:
            bar.close()
    runs = {m: r for m, r in runs.items() if r}
    summary, cks_final, cks_needed = compare_summary(cells, budget, methods)
    settings = {
        "data": getattr(dataset, "path", None),
        "n": getattr(dataset, "n", None),
        "methods": methods,
        "seeds": seed_list,
        "budget": budget,
        "restarts": restarts,
        "fit_seed": fit_seed,
        "checkpoint": checkpoint,
        "grammar": grammar,
        "prolas_options": _options_dict(prolas_options) if "prolas" in methods else None,
        "batch": batch,
        "depth": depth,
        "wall_seconds": time.perf_counter() - t0,
        "cached_fits": len(cache) if cache is not None else None,
        "cache_misses": cache.misses if cache is not None else None,
    }
    res = CompareResult(runs, summary, cks_final, cks_needed, settings, cells=cells)
    res.files = write_outputs(res, out)
    partial.unlink(missing_ok=True)
    return res


_HEADER = ["method", "seed", "index", "expression", "status", "bic", "seconds"]


def _rows(method: str, r: SearchResult) -> list[list]:
    return [
        [
            method,
            r.seed,
            e.index,
            e.expression,
            e.status,
            "" if e.bic is None else repr(float(e.bic)),
            f"{e.seconds:.4f}",
        ]
        for e in r.history
    ]


def _append_rows(path: Path, method: str, r: SearchResult) -> None:
    new = not path.exists()
    with open(path, "a", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        if new:
            w.writerow(_HEADER)
        w.writerows(_rows(method, r))


def _options_dict(options) -> dict:
    from dataclasses import asdict

    from prolas.search.latent import LatentBOConfig

    return asdict(options if options is not None else LatentBOConfig())


def write_outputs(res: CompareResult, out: Path) -> list[Path]:
    """evaluations.csv, summary.csv, summary.md, convergence.png."""
    files = [out / "evaluations.csv", out / "summary.csv", out / "summary.md"]
    with open(files[0], "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(_HEADER)
        for method, results in res.runs.items():
            for r in results:
                w.writerows(_rows(method, r))
    keys: list[str] = []
    for row in res.summary.values():
        keys += [k for k in row if k not in keys]
    with open(files[1], "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for row in res.summary.values():
            w.writerow(row)
    files[2].write_text(summary_markdown(res), encoding="utf-8")
    files.append(plot_comparison(out / "convergence.png", res))
    return files


def _fmt(v, digits: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        if math.isinf(v):
            return "never"
        return f"{v:.{digits}f}"
    return str(v)


def summary_markdown(res: CompareResult) -> str:
    """The comparison table and the settings, as Markdown."""
    s = res.settings
    budget = s["budget"]
    ats = [n for n in BUDGETS if n <= budget]
    lines = [
        f"# Search comparison: {s.get('data') or 'synthetic scorer'}",
        "",
        f"N = {s.get('n')}, budget {budget} unique evaluations, seeds {len(s['seeds'])} "
        f"({s['seeds'][0]}..{s['seeds'][-1]}; CKS is deterministic and runs once), "
        f"GP fits with {s['restarts']} restarts and fit seed {s['fit_seed']} shared by every "
        f"run (fit cache), checkpoint {s['checkpoint']}, q = {s['batch']}.",
        "",
    ]
    if res.cks_final is not None:
        lines.append(
            f"CKS final BIC **{res.cks_final:.2f}** "
            f"({res.runs['cks'][0].best.expression}), reached after **{res.cks_needed}** "
            f"evaluations ({res.runs['cks'][0].evaluations} in total, stopped: "
            f"{res.runs['cks'][0].extra.get('stopped', '?')})."
        )
        lines.append("")
    head = ["method", "runs"]
    for n in ats:
        head += [f"mean best @{n}", f"median best @{n}"]
    head += ["mean final ± s.e."]
    if res.cks_final is not None:
        head += ["evals to CKS final (median)", "never reach", "ratio to CKS"]
    head += ["fit s / run"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for m, row in res.summary.items():
        cells = [m, str(row["runs"])]
        for n in ats:
            cells += [_fmt(row.get(f"mean_best_at_{n}")), _fmt(row.get(f"median_best_at_{n}"))]
        cells.append(f"{_fmt(row['mean_final_best'])} ± {_fmt(row['se_final_best'])}")
        if res.cks_final is not None:
            cells += [
                _fmt(row["median_evals_to_cks"], 1),
                f"{row['never_reach_cks']}/{row['runs']}",
                _fmt(row["ratio_to_cks"]),
            ]
        cells.append(_fmt(row["mean_fit_seconds_per_run"], 1))
        lines.append("| " + " | ".join(cells) + " |")
    if s.get("prolas_options"):
        opts = ", ".join(f"{k}={v}" for k, v in s["prolas_options"].items())
        lines += ["", f"PROLAS settings: {opts}."]
    lines += [
        "",
        "best @n: best BIC after n unique evaluations (a run that stopped earlier keeps its "
        "final best). evals to CKS final: first evaluation whose BIC >= CKS's final BIC; "
        "median over seeds with a seed that never reaches it counted as infinite. ratio to "
        "CKS: that median / the evaluations CKS needed. fit s / run: summed seconds of the "
        "original GP fits of a run's evaluations (cached fits keep their original cost).",
        "",
        f"Wall time of the comparison: {s['wall_seconds']:.0f} s"
        + (
            f" ({s['cache_misses']} new fits; {s['cached_fits']} expressions in the cache)."
            if s.get("cache_misses") is not None
            else "."
        ),
        "",
    ]
    return "\n".join(lines)


def plot_comparison(path: Path, res: CompareResult) -> Path:
    """Mean ± standard error of the best-so-far BIC per method
    (:func:`prolas.bench.stats.mean_se_curve` of the cells' traces), a single run as a
    step line; CKS's final BIC as a dashed line."""
    from prolas.report.figure import subplots

    budget = res.settings["budget"]
    xs = np.arange(1, budget + 1)
    fig, ax = subplots(figsize=(7.5, 4.5))
    every = []
    for i, method in enumerate(res.runs):
        mine = [c for c in res.cells if c["method"] == method]
        traces = best_traces(mine, mine[0]["dataset"], method, budget)
        every.append(traces)
        color = f"C{i}"
        if len(mine) == 1:
            ax.step(xs, traces[0], where="post", color=color, lw=1.6, label=f"{method}")
            continue
        mean, se = mean_se_curve(traces)
        se = np.nan_to_num(se, nan=0.0)  # no band where fewer than two seeds have a value
        ax.plot(xs, mean, color=color, lw=1.8, label=f"{method} (mean ± s.e., {len(mine)} seeds)")
        ax.fill_between(xs, mean - se, mean + se, color=color, alpha=0.2, lw=0)
    if res.cks_final is not None:
        ax.axhline(
            res.cks_final, color="k", ls="--", lw=1, label=f"CKS final BIC {res.cks_final:.1f}"
        )
    finite = [float(v) for traces in every for v in traces.ravel() if np.isfinite(v)]
    if finite:
        lo, hi = np.percentile(finite, 5), max(finite)
        pad = 0.05 * (hi - lo) if hi > lo else 1.0
        ax.set_ylim(lo - pad, hi + 2 * pad)
    ax.set_xlabel("unique evaluations (GP fits)")
    ax.set_ylabel("best BIC so far (higher is better)")
    ax.set_title(f"{res.settings.get('data') or 'synthetic scorer'}", fontsize=10)
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path
