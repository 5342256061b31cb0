"""Comparison harness: several search methods x seeds on one data set, same Evaluator.

Every run gets a fresh :class:`~prolas.search.evaluator.Evaluator` with the same budget
around one shared scorer. With real data the scorer is a
:class:`~prolas.search.cache.CachedScorer` over :class:`~prolas.gp.GPScorer` with a
*fixed* fit seed (``fit_seed``, not the search seed) and ``DIR/fits.jsonl`` as its
file, so every method and seed sees identical scores for identical expressions and the
grid costs only its distinct expressions. CKS is deterministic: it runs once (seed 0).

Outputs in ``DIR``:

* ``evaluations.csv``: every unique evaluation (method, seed, index, expression, status,
  bic, seconds = the original fit's seconds);
* ``convergence.png``: best BIC against the number of evaluations, mean +- standard error
  over seeds per method, CKS's final BIC as a horizontal line;
* ``summary.csv`` / ``summary.md``: per method, the mean and median best BIC after 10, 25
  and 50 evaluations (a run that stopped earlier keeps its final best), the evaluations
  needed to reach CKS's final BIC (median over seeds and how many seeds never reach it),
  the evaluations CKS needed, and the summed fit seconds per run.

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

from prolas.data import Dataset
from prolas.errors import ProlasError
from prolas.limits import DEFAULT_CHECKPOINT, DEFAULT_GRAMMAR
from prolas.pipeline import METHODS, SearchConfig
from prolas.records import SearchResult
from prolas.search.evaluator import Evaluator

__all__ = ["CompareResult", "run_compare", "summarise", "reach_index", "CHECKPOINTS_AT"]

#: evaluation counts at which the best BIC is tabulated (those <= budget)
CHECKPOINTS_AT = (10, 25, 50)
#: two BICs closer than this count as equal (cached scores are bit-identical anyway)
TOL = 1e-6


@dataclass
class CompareResult:
    """All runs of a comparison and their summary rows (one per method)."""

    runs: dict[str, list[SearchResult]]
    summary: dict[str, dict]
    cks_final: float | None
    cks_needed: int | None
    settings: dict = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)


def reach_index(result: SearchResult, target: float) -> int | None:
    """First unique-evaluation index whose BIC is >= target - TOL (None: never)."""
    for e in result.history:
        if e.ok and e.bic >= target - TOL:
            return e.index
    return None


def _trace(result: SearchResult, budget: int) -> np.ndarray:
    """Best BIC after 1..budget evaluations; NaN before the first success, carried
    forward after the run stopped."""
    t = np.array(result.best_trace(), dtype=float)
    t[~np.isfinite(t)] = np.nan
    out = np.full(budget, np.nan)
    out[: len(t)] = t[:budget]
    if 0 < len(t) < budget:
        out[len(t) :] = t[-1]
    return out


def summarise(
    runs: dict[str, list[SearchResult]], budget: int
) -> tuple[dict[str, dict], float | None, int | None]:
    """Summary rows per method, CKS's final BIC and the evaluations CKS needed."""
    cks_final = cks_needed = None
    if runs.get("cks"):
        cks = runs["cks"][0]
        if cks.best is not None:
            cks_final = cks.best.bic
            cks_needed = reach_index(cks, cks_final)
    summary = {}
    for method, results in runs.items():
        traces = np.stack([_trace(r, budget) for r in results])
        row: dict = {"method": method, "runs": len(results)}
        for n in CHECKPOINTS_AT:
            if n <= budget:
                col = traces[:, n - 1]
                row[f"mean_best_at_{n}"] = _nanmean(col)
                row[f"median_best_at_{n}"] = _nanmedian(col)
        final = traces[:, -1]
        row["mean_final_best"] = _nanmean(final)
        row["se_final_best"] = (
            float(np.nanstd(final, ddof=1) / math.sqrt(np.isfinite(final).sum()))
            if np.isfinite(final).sum() > 1
            else math.nan
        )
        row["mean_evaluations"] = float(np.mean([r.evaluations for r in results]))
        if cks_final is not None:
            reach = [reach_index(r, cks_final) for r in results]
            hits = sorted(v for v in reach if v is not None)
            never = len(reach) - len(hits)
            # median over all seeds, a seed that never reaches counting as +inf
            vals = sorted([float(v) for v in hits] + [math.inf] * never)
            med = float(np.median(vals)) if vals else math.inf
            row["median_evals_to_cks"] = med
            row["never_reach_cks"] = never
            row["cks_needed"] = cks_needed
            row["ratio_to_cks"] = (
                med / cks_needed if cks_needed and math.isfinite(med) else math.inf
            )
        row["mean_fit_seconds_per_run"] = float(
            np.mean([sum(e.seconds for e in r.history) for r in results])
        )
        row["mean_wall_seconds_per_run"] = float(np.mean([r.wall_seconds for r in results]))
        summary[method] = row
    return summary, cks_final, cks_needed


def _nanmean(a: np.ndarray) -> float:
    return float(np.nanmean(a)) if np.isfinite(a).any() else math.nan


def _nanmedian(a: np.ndarray) -> float:
    return float(np.nanmedian(a)) if np.isfinite(a).any() else math.nan


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
        methods: names from :data:`prolas.pipeline.METHODS`.
        seeds: a count (seeds 0..n-1) or explicit seeds; CKS runs once (first seed).
        budget: unique evaluations per run.
        out: output directory (created); ``fits.jsonl`` there is the shared fit cache.
        restarts, fit_seed: GP fit settings shared by every run.
        scorer: replaces the cached GP scorer (e.g. a TableScorer in tests).
        cache_path: the fit cache (default ``out/fits.jsonl``); share one file between
            comparisons of the same data and fit settings.
        prolas_options: :class:`prolas.search.latent.LatentBOConfig` for PROLAS runs.
    """
    # the strategy registry that run_search uses, without its final refit of the best
    # model (not needed here, and impossible for a synthetic scorer without data)
    from prolas.pipeline import _STRATEGIES

    log = log or (lambda s: None)
    methods = list(dict.fromkeys(methods))
    for m in methods:
        if m not in METHODS:
            raise ProlasError(f"unknown method {m!r} in --methods; choose from {METHODS}")
    if not methods:
        raise ProlasError("--methods is empty")
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise ProlasError("--seeds must be at least 1")
    if scorer is None and dataset is None:
        raise ProlasError("run_compare needs a data set or a scorer")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cache = None
    if scorer is None:
        from prolas.gp import FitConfig, GPScorer
        from prolas.search.cache import CachedScorer

        cache_path = Path(cache_path) if cache_path is not None else out / "fits.jsonl"
        cache = CachedScorer(
            GPScorer(dataset, FitConfig(restarts=restarts, seed=fit_seed)), cache_path
        )
        scorer = cache
        log(f"fit cache {cache_path}: {len(cache)} expressions already fitted")
    grid = [(m, s) for s in seed_list for m in methods if not (m == "cks" and s != seed_list[0])]
    # CKS first: its final BIC is the reference line
    grid.sort(key=lambda ms: ms[0] != "cks")
    runs: dict[str, list[SearchResult]] = {m: [] for m in methods}
    # rows of finished runs, for a look at a long comparison before it ends
    partial = out / "evaluations.partial.csv"
    partial.unlink(missing_ok=True)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(grid), unit="run", desc="compare", dynamic_ncols=True)
    t0 = time.perf_counter()
    import torch

    threads = torch.get_num_threads()
    # one thread: the fits are small and the CPU is shared (DESIGN.md, measured)
    torch.set_num_threads(1)
    try:
        for method, seed in grid:
            config = SearchConfig(
                method=method,
                budget=budget,
                restarts=restarts,
                seed=seed,
                depth=depth,
                change=False,  # "cks" is plain CKS here, as in the bench grids
                grammar=grammar,
                checkpoint=checkpoint,
                batch=batch,
            )
            ev = Evaluator(scorer, budget=budget)
            if method == "prolas" and prolas_options is not None:
                from prolas.search.latent import search_prolas

                result = search_prolas(ev, dataset, config, options=prolas_options)
            else:
                result = _STRATEGIES[method](ev, dataset, config, log)
            runs[method].append(result)
            _append_rows(partial, method, result)
            if bar is not None:
                best = result.best
                bar.set_postfix_str(
                    f"{method} seed {seed}: best {best.bic:.2f}"
                    if best
                    else f"{method} seed {seed}"
                )
                bar.update(1)
    finally:
        torch.set_num_threads(threads)
        if bar is not None:
            bar.close()
    runs = {m: r for m, r in runs.items() if r}
    summary, cks_final, cks_needed = summarise(runs, budget)
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
    res = CompareResult(runs, summary, cks_final, cks_needed, settings)
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
    ats = [n for n in CHECKPOINTS_AT if n <= budget]
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
    """Mean +- standard error of the best-so-far BIC per method; CKS final as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budget = res.settings["budget"]
    xs = np.arange(1, budget + 1)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, (method, results) in enumerate(res.runs.items()):
        traces = np.stack([_trace(r, budget) for r in results])
        color = f"C{i}"
        if len(results) == 1:
            ax.step(xs, traces[0], where="post", color=color, lw=1.6, label=f"{method}")
            continue
        n_ok = np.isfinite(traces).sum(0)
        safe = np.where(n_ok > 0, np.nansum(traces, 0) / np.maximum(n_ok, 1), np.nan)
        mean = np.asarray(safe, dtype=float)
        dev = np.where(np.isfinite(traces), traces - mean, 0.0)
        sd = np.sqrt((dev**2).sum(0) / np.maximum(n_ok - 1, 1))
        se = np.where(n_ok > 1, sd / np.sqrt(np.maximum(n_ok, 1)), 0.0)
        ax.plot(
            xs, mean, color=color, lw=1.8, label=f"{method} (mean ± s.e., {len(results)} seeds)"
        )
        ax.fill_between(xs, mean - se, mean + se, color=color, alpha=0.2, lw=0)
    if res.cks_final is not None:
        ax.axhline(
            res.cks_final, color="k", ls="--", lw=1, label=f"CKS final BIC {res.cks_final:.1f}"
        )
    finite = [
        v
        for results in res.runs.values()
        for r in results
        for v in _trace(r, budget)
        if np.isfinite(v)
    ]
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
    plt.close(fig)
    return path
