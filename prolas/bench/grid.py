"""The search-quality grid: search methods x data sets x seeds, one fit cache per data set.

Every cell (data set, method, seed) runs one search with ``budget`` unique GP fits
through the same code as ``prolas fit`` (:func:`prolas.pipeline.run_search` with an
explicit shared Evaluator). All cells of a data set score expressions through *one*
Evaluator configuration: a :class:`~prolas.search.cache.CachedScorer` around
``GPScorer(data, FitConfig(restarts, seed=fit_seed))`` stored at
``OUT/fits/<dataset>.jsonl``. The fit seed is the same for every search seed, so an
expression gets the same score whichever method or seed proposes it (a fair
comparison), and the grid costs only its distinct expressions. The search seed drives
the strategy only. Each finished cell is written to ``OUT/cells/`` (one JSON each,
:mod:`prolas.bench.cells`); ``--resume`` skips those. Outputs: ``evaluations.csv``,
``summary.csv``/``summary.md`` (the statistics of :mod:`prolas.bench.stats`) and
``convergence_<dataset>.png``.

Long series. A search on more than ``max_points`` points runs on an evenly spaced
``max_points``-point thinning (:func:`prolas.bench.cells.thin`) that keeps the full
series' standardisation constants, so fitted hyperparameters apply unchanged to the
full series.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.bench.cells import (
    cell_path,
    cell_record,
    evaluations_frame,
    load_cells,
    load_series,
    prepare_out,
    thin,
    write_cell,
)
from prolas.bench.stats import (
    best_traces,
    cks_final_bic,
    fmt,
    marks,
    mean_se_curve,
    summarise,
)
from prolas.data import Dataset
from prolas.errors import DataError, ProlasError
from prolas.gp import FitConfig, FitResult, GPScorer
from prolas.gp.fit import FIT_ALGORITHM
from prolas.limits import DEFAULT_CHECKPOINT, DEFAULT_GRAMMAR, LENGTHSCALE_FLOOR, WARM_FITS
from prolas.pipeline import run_search
from prolas.records import Evaluation, Score, SearchResult
from prolas.search.cache import CachedScorer, warm_key
from prolas.search.config import METHODS, SearchConfig
from prolas.search.evaluator import Evaluator

__all__ = [
    "DATASETS",
    "BASELINES",
    "MethodSpec",
    "BenchConfig",
    "BenchRun",
    "parse_methods",
    "parse_datasets",
    "TimedScorer",
    "cached_scorer",
    "Search",
    "search_and_fit",
    "run_cell",
    "GridProgress",
    "run_bench",
    "summary_columns",
    "summary_markdown",
    "plot_bench_convergence",
    "write_bench_outputs",
    "run_grid_in_memory",
]

#: The 9 Automatic Statistician series shipped in data/, in a fixed order.
DATASETS = (
    "airline",
    "solar",
    "mauna",
    "temperature",
    "internet",
    "call-centre",
    "gas-production",
    "sulphuric",
    "wages",
)

#: Single-kernel baselines of the extrapolation benchmark (grid summaries leave them out).
BASELINES = ("SE", "LIN")


# --- configuration -------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodSpec:
    """A grid column: a search method, for ``structural`` with its surrogate and optimiser.

    ``label`` is how it is written on the command line and in every output:
    ``prolas``, ``cks``, ``cks:change`` (CKS with the change rules), ``random``,
    ``structural`` (hierarchical surrogate, EA), ``structural:arc`` (EA) or
    ``structural:ot:local``.
    """

    label: str
    method: str
    surrogate: str = "hierarchical"
    acq_opt: str = "ea"
    change: bool = False

    @classmethod
    def parse(cls, text: str) -> MethodSpec:
        from prolas.search.structural import ACQ_OPTIMISERS, SURROGATES

        parts = text.strip().split(":")
        method = parts[0]
        if method not in METHODS:
            raise ProlasError(f"unknown method {text!r}; choose from {', '.join(METHODS)}")
        if method == "cks" and parts[1:] == ["change"]:
            return cls("cks:change", "cks", change=True)
        if method != "structural":
            if len(parts) > 1:
                raise ProlasError(f"method {method!r} takes no ':' options (got {text!r})")
            return cls(method, method)
        if len(parts) > 3:
            raise ProlasError(f"use structural[:SURROGATE[:OPTIMISER]], got {text!r}")
        surrogate = parts[1] if len(parts) > 1 else "hierarchical"
        acq_opt = parts[2] if len(parts) > 2 else "ea"
        if surrogate not in SURROGATES:
            raise ProlasError(
                f"unknown surrogate {surrogate!r} in {text!r}; choose from {', '.join(SURROGATES)}"
            )
        if acq_opt not in ACQ_OPTIMISERS:
            raise ProlasError(
                f"unknown acquisition optimiser {acq_opt!r} in {text!r}; "
                f"choose from {', '.join(ACQ_OPTIMISERS)}"
            )
        return cls(text.strip(), "structural", surrogate, acq_opt)

    def search_config(self, config: BenchConfig, seed: int) -> SearchConfig:
        """This column's search settings in ``config`` with search seed ``seed``."""
        return SearchConfig(
            method=self.method,
            budget=config.budget,
            restarts=config.restarts,
            seed=seed,
            grammar=config.grammar,
            checkpoint=config.checkpoint,
            surrogate=self.surrogate,
            acq_opt=self.acq_opt,
            change=self.change,
            search_points=0,  # benchmarks thin by max_points themselves (run_grid)
            lengthscale_floor=config.lengthscale_floor,
            warm_fits=config.warm_fits,
            nested=config.nested,
        )


def parse_methods(text: str | Sequence[str]) -> tuple[MethodSpec, ...]:
    """``"prolas,cks,structural:arc"`` -> MethodSpecs (duplicates rejected)."""
    items = text.split(",") if isinstance(text, str) else list(text)
    specs = tuple(MethodSpec.parse(t) for t in items if t.strip())
    if not specs:
        raise ProlasError("--methods is empty")
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise ProlasError(f"--methods lists a method twice: {','.join(labels)}")
    return specs


def parse_datasets(text: str | Sequence[str], data_dir: str | Path = "data") -> tuple[str, ...]:
    """``"airline,mauna"`` or ``"all"`` (the 9 series) -> names; each must exist in data_dir."""
    items = text.split(",") if isinstance(text, str) else list(text)
    names: list[str] = []
    for item in (t.strip() for t in items):
        if not item:
            continue
        for name in DATASETS if item == "all" else (item,):
            if name not in names:
                names.append(name)
    if not names:
        raise ProlasError("--datasets is empty")
    for name in names:
        if not (Path(data_dir) / f"{name}.csv").exists():
            raise DataError(f"no data set {name!r}: {Path(data_dir) / f'{name}.csv'} not found")
    return tuple(names)


@dataclass(frozen=True)
class BenchConfig:
    """Settings of a bench grid (the CLI maps its flags onto this).

    Attributes:
        datasets: names of ``data_dir/<name>.csv`` series.
        methods: grid columns.
        seeds: search seeds 0..seeds-1 per (data set, method).
        budget: unique GP fits per search.
        restarts: random restarts per GP fit (one setting for the whole grid).
        fit_seed: the seed of every GP fit (fixed, so scores do not depend on who asks).
        max_points: searches on longer series use an evenly spaced thinning of this size.
        grammar, checkpoint: passed to the strategies.
        data_dir: where the CSVs live.
        refit_full: extrapolation only; re-optimise the best model on all training
            points when the search ran on a thinning.
        lengthscale_floor: :attr:`prolas.gp.FitConfig.lengthscale_floor` of every fit.
        warm_fits: :attr:`prolas.search.config.SearchConfig.warm_fits` of every search.
        nested: :attr:`prolas.search.config.SearchConfig.nested` of every search.
    """

    datasets: tuple[str, ...]
    methods: tuple[MethodSpec, ...]
    seeds: int = 5
    budget: int = 50
    restarts: int = 4
    fit_seed: int = 0
    max_points: int = 500
    grammar: str = DEFAULT_GRAMMAR
    checkpoint: str = DEFAULT_CHECKPOINT
    data_dir: str = "data"
    refit_full: bool = False
    lengthscale_floor: float = LENGTHSCALE_FLOOR
    warm_fits: bool = WARM_FITS
    nested: bool = True

    def __post_init__(self) -> None:
        if self.seeds < 1:
            raise ProlasError("--seeds must be at least 1")
        if self.budget < 1:
            raise ProlasError("--budget must be at least 1")
        if self.restarts < 1:
            raise ProlasError("--restarts must be at least 1")
        if self.max_points < 10:
            raise ProlasError("--max-points must be at least 10")
        _ = self.fit_config  # FitConfig checks the lengthscale floor

    @property
    def fit_config(self) -> FitConfig:
        """The one GP fit setting of every cell: ``restarts`` restarts, seed ``fit_seed``."""
        return FitConfig(
            restarts=self.restarts, seed=self.fit_seed, lengthscale_floor=self.lengthscale_floor
        )

    def settings(self) -> dict:
        """The settings that must match for ``--resume`` to reuse finished cells."""
        return {
            "budget": self.budget,
            "restarts": self.restarts,
            "fit_seed": self.fit_seed,
            "max_points": self.max_points,
            "grammar": self.grammar,
            "checkpoint": self.checkpoint,
            "refit_full": self.refit_full,
            # only when set, so that runs from before the option resume
            **({"lengthscale_floor": self.lengthscale_floor} if self.lengthscale_floor else {}),
            **({"warm_fits": True} if self.warm_fits else {}),
            **({"nested": False} if not self.nested else {}),
            # cells of another fitter are not mixed with this one's
            "fit_algorithm": FIT_ALGORITHM,
        }

    def to_json(self) -> dict:
        """Every field, methods as their labels (for ``bench.json``)."""
        d = asdict(self)
        d["methods"] = [m.label for m in self.methods]
        d["datasets"] = list(self.datasets)
        return d


# --- scoring -------------------------------------------------------------------------------


class TimedScorer:
    """Passes calls through and adds up the wall time spent inside the scorer."""

    def __init__(self, scorer: Callable) -> None:
        self.scorer = scorer
        self.seconds = 0.0

    def __call__(self, expr, *init) -> Score:
        t = time.perf_counter()
        try:
            return self.scorer(expr, *init)
        finally:
            self.seconds += time.perf_counter() - t

    def refit(self, expr, init) -> Score:
        """The wrapped scorer's repair (:meth:`prolas.gp.GPScorer.refit`), timed too."""
        t = time.perf_counter()
        try:
            return self.scorer.refit(expr, init)
        finally:
            self.seconds += time.perf_counter() - t


def cached_scorer(dataset: Dataset, config: BenchConfig, out: Path, name: str) -> CachedScorer:
    """The grid's scorer for one data set: GP fits at the grid's fit settings, cached in
    ``OUT/fits/<name>.jsonl`` (shared by every method and seed)."""
    return CachedScorer(GPScorer(dataset, config.fit_config), out / "fits" / f"{name}.jsonl")


#: How a cell searches: ``(evaluator, data, settings) -> (SearchResult, best fit or None)``.
Search = Callable[[Evaluator, Dataset | None, SearchConfig], tuple[SearchResult, FitResult | None]]


def search_and_fit(
    ev: Evaluator, dataset: Dataset | None, config: SearchConfig
) -> tuple[SearchResult, FitResult | None]:
    """The grid's :data:`Search`: :func:`prolas.pipeline.run_search` (the search, then
    the best model's fit), as ``prolas fit`` runs it."""
    return run_search(dataset, config, evaluator=ev)


def run_cell(
    dataset: Dataset | None,
    spec: MethodSpec,
    seed: int,
    config: BenchConfig,
    scorer: Callable,
    on_result: Callable[[Evaluation], None] | None = None,
    *,
    name: str | None = None,
    search: Search = search_and_fit,
    search_config: SearchConfig | None = None,
) -> tuple[dict, SearchResult, FitResult | None]:
    """One search through a fresh Evaluator around ``scorer``.

    ``search`` runs it with ``search_config`` (default: ``spec``'s settings in
    ``config`` with search seed ``seed``). The scorer's time is measured, and its
    ``misses``, if it has them, count the new fits. Returns the cell record
    (:func:`prolas.bench.cells.cell_record`; data set ``name``, default
    ``dataset.name``), the SearchResult and the best fit.
    """
    settings = search_config or spec.search_config(config, seed)
    timed = TimedScorer(scorer)
    ev = Evaluator(
        timed,
        budget=settings.budget,
        on_result=on_result,
        warm_fits=settings.warm_fits,
        nested=settings.nested,
    )
    misses = getattr(scorer, "misses", 0)
    t0 = time.perf_counter()
    result, best = search(ev, dataset, settings)
    wall = time.perf_counter() - t0
    cell = cell_record(
        result,
        dataset=name or getattr(dataset, "name", ""),
        method=spec.label,
        seed=seed,
        n=getattr(dataset, "n", None),
        budget=settings.budget,
        wall_seconds=wall,
        scoring_seconds=timed.seconds,
        new_fits=getattr(scorer, "misses", 0) - misses,
        best=best,
    )
    return cell, result, best


class GridProgress:
    """One progress bar over all evaluations of the grid (cells x budget)."""

    def __init__(self, total: int, done: int, enabled: bool) -> None:
        self.bar = None
        self.cell_count = 0
        if enabled:
            from prolas.progress import progress_bar

            self.bar = progress_bar(total, unit="fit", desc="bench", initial=done)

    def start(self, label: str) -> None:
        """A new cell begins (shown next to the bar)."""
        self.cell_count = 0
        if self.bar is not None:
            self.bar.set_postfix_str(label)

    def on_result(self, ev: Evaluation) -> None:
        """The Evaluator's callback: one more evaluation done."""
        self.cell_count += 1
        if self.bar is not None:
            self.bar.update(1)

    def finish(self, budget: int) -> None:
        """A cell that stopped early (e.g. CKS at its depth) still uses its budget slot."""
        if self.bar is not None and self.cell_count < budget:
            self.bar.update(budget - self.cell_count)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# --- search-quality grid -------------------------------------------------------------------


@dataclass
class BenchRun:
    """What a bench invocation did and wrote."""

    out: Path
    cells_run: int = 0
    cells_skipped: int = 0
    new_fits: int = 0
    files: list[Path] = field(default_factory=list)


def run_bench(
    config: BenchConfig,
    out: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> BenchRun:
    """Run the search-quality grid and write evaluations.csv, summary.csv/.md, plots.

    Search data: ``data_dir/<name>.csv`` (thinned to ``max_points`` if longer). The
    summaries cover every cell in ``OUT/cells`` (a grid can be grown with
    ``--resume``: more seeds, methods or data sets at the same settings).
    """
    import torch

    torch.set_num_threads(1)
    log = log or (lambda s: None)
    out = Path(out)
    prepare_out(out, "search", config.settings(), config.to_json(), resume)
    run = BenchRun(out)
    grid = [(d, m, s) for d in config.datasets for m in config.methods for s in range(config.seeds)]
    todo = [g for g in grid if not cell_path(out, g[0], g[1].label, g[2]).exists()]
    run.cells_skipped = len(grid) - len(todo)
    if run.cells_skipped:
        log(f"bench: {run.cells_skipped} of {len(grid)} cells already done, skipped")
    bar = GridProgress(len(grid) * config.budget, run.cells_skipped * config.budget, progress)
    try:
        data: dict[str, tuple[Dataset, CachedScorer]] = {}
        for name, spec, seed in todo:
            if name not in data:
                full = load_series(Path(config.data_dir) / f"{name}.csv")
                ds = thin(full, config.max_points)
                if ds is not full:
                    log(f"bench: {name}: searching on {ds.n} of {full.n} points (even thinning)")
                data[name] = (ds, cached_scorer(ds, config, out, name))
            ds, scorer = data[name]
            bar.start(f"{name} {spec.label} seed {seed}")
            cell, _, _ = run_cell(ds, spec, seed, config, scorer, bar.on_result, name=name)
            bar.finish(config.budget)
            write_cell(out, cell)
            run.cells_run += 1
            run.new_fits += cell["new_fits"]
    finally:
        bar.close()
    run.files = write_bench_outputs(out, config.budget)
    return run


# --- outputs -------------------------------------------------------------------------------


def summary_columns(budget: int) -> list[str]:
    """The columns of the grid's ``summary.csv``: a selection of
    :func:`prolas.bench.stats.summary_rows` (mean and s.e. at each mark)."""
    columns = ["dataset", "method", "seeds", "budget"]
    for b in marks(budget):
        columns += [f"best_at_{b}_mean", f"best_at_{b}_se"]
    return columns + [
        "evaluations_mean",
        "cks_final_bic",
        "evals_to_cks_median",
        "evals_to_cks_never",
        "fit_seconds_per_seed",
        "strategy_seconds_per_seed",
        "new_fits",
    ]


def reference_column(cells: Sequence[dict]) -> str:
    """The CKS column a grid's 'to CKS' figures use: plain ``cks`` when the grid ran it,
    else ``cks:change`` (what ``prolas fit --search cks`` runs) when it ran that."""
    methods = {c["method"] for c in cells}
    return "cks:change" if "cks" not in methods and "cks:change" in methods else "cks"


def summary_markdown(summary: pd.DataFrame, budget: int, reference: str = "cks") -> str:
    """The summary table (:func:`prolas.bench.stats.summarise`) as markdown, one section
    per data set; ``reference`` names the CKS column of the 'to CKS' figures."""
    at = marks(budget)
    lines = [
        "# Search quality",
        "",
        "Best BIC (higher is better) after n unique GP fits: mean ± standard error over "
        f"seeds. 'to CKS': evaluations needed to reach `{reference}`'s final BIC at this budget, "
        "median over seeds (`>B` = more than half the seeds never reach it) and how many "
        "seeds never do. Fit s: summed GP-fit seconds per seed (time of the original fit, "
        "also for cached scores). Strategy s: the method's own proposal time per seed.",
        "",
    ]
    for dataset, df in summary.groupby("dataset", sort=False):
        seeds = sorted(set(df["seeds"]))
        lines += [f"## {dataset}", ""]
        head = ["method", "seeds"] + [f"n={b}" for b in at]
        head += ["to CKS (never)", "fit s", "strategy s"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for _, r in df.iterrows():
            cells = [f"`{r['method']}`", str(r["seeds"])]
            for b in at:
                m, se = r[f"best_at_{b}_mean"], r[f"best_at_{b}_se"]
                cells.append(f"{fmt(m)} ± {fmt(se)}" if math.isfinite(m) else "-")
            med = r["evals_to_cks_median"]
            if r["cks_final_bic"] is None or not isinstance(med, float) or math.isnan(med):
                cells.append("-")
            else:
                text = f">{budget}" if math.isinf(med) else f"{med:g}"
                cells.append(f"{text} ({r['evals_to_cks_never']}/{r['seeds']})")
            cells += [fmt(r["fit_seconds_per_seed"], 1), fmt(r["strategy_seconds_per_seed"], 1)]
            lines.append("| " + " | ".join(cells) + " |")
        cks = df["cks_final_bic"].dropna()
        if len(cks):
            lines += ["", f"CKS's final BIC at budget {budget}: {float(cks.iloc[0]):.2f}."]
        if len(seeds) > 1:
            lines += ["", f"Seeds per method differ: {seeds}."]
        lines.append("")
    return "\n".join(lines)


def plot_bench_convergence(
    cells: Sequence[dict],
    dataset: str,
    budget: int,
    path: str | Path | None = None,
    ax=None,
    reference: str = "cks",
):
    """Best BIC vs unique evaluations, mean ± s.e. per method; the final BIC of the CKS
    column ``reference`` dashed.

    Draws on ``ax`` if given (returns it), else makes a figure and saves it to ``path``.
    """
    from prolas.report.figure import subplots

    own = ax is None
    if own:
        fig, ax = subplots(figsize=(7, 4.2))
    methods = sorted({c["method"] for c in cells if c["dataset"] == dataset})
    n = np.arange(1, budget + 1)
    lows = []
    for i, method in enumerate(methods):
        tr = best_traces(cells, dataset, method, budget)
        mean, se = mean_se_curve(tr)
        color = f"C{i}"
        ax.plot(n, mean, color=color, lw=1.8, label=f"{method} ({tr.shape[0]} seeds)")
        ax.fill_between(n, mean - se, mean + se, color=color, alpha=0.2, lw=0)
        finite = mean[np.isfinite(mean)]
        if finite.size:
            lows.append(float(finite[min(4, finite.size - 1)]))
    target = cks_final_bic(cells, dataset, budget, reference)
    if target is not None:
        ax.axhline(target, color="0.3", ls="--", lw=1, label=f"{reference} final ({target:.1f})")
    if lows:
        top = ax.get_ylim()[1]
        ax.set_ylim(min(lows) - 0.05 * (top - min(lows)), top)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("unique GP fits")
    ax.set_ylabel("best BIC so far (higher is better)")
    ax.set_title(f"{dataset}: best BIC vs evaluations (mean ± s.e.)", fontsize=10)
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    if own:
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
    return ax


def write_bench_outputs(out: str | Path, budget: int) -> list[Path]:
    """(Re)write evaluations.csv, summary.csv, summary.md and the convergence plots."""
    out = Path(out)
    cells = [c for c in load_cells(out) if c["method"] not in BASELINES]
    files = []
    evaluations_frame(cells).to_csv(out / "evaluations.csv", index=False)
    files.append(out / "evaluations.csv")
    if not cells:
        return files
    reference = reference_column(cells)
    summary = summarise(cells, budget, reference=reference)[summary_columns(budget)]
    summary.to_csv(out / "summary.csv", index=False)
    (out / "summary.md").write_text(summary_markdown(summary, budget, reference))
    files += [out / "summary.csv", out / "summary.md"]
    for dataset in sorted({c["dataset"] for c in cells}):
        path = out / f"convergence_{dataset}.png"
        plot_bench_convergence(cells, dataset, budget, path, reference=reference)
        files.append(path)
    return files


# --- in memory -----------------------------------------------------------------------------


def run_grid_in_memory(
    dataset: Dataset,
    methods: Sequence[str],
    *,
    seeds: int,
    budget: int,
    restarts: int = 4,
    fit_seed: int = 0,
) -> list[dict]:
    """A small search-quality grid on one in-memory data set (for notebooks and demos):
    cell records as in ``OUT/cells``, scored through one in-memory fit cache."""
    import torch

    torch.set_num_threads(1)
    config = BenchConfig(
        datasets=(dataset.name,),
        methods=parse_methods(",".join(methods)),
        seeds=seeds,
        budget=budget,
        restarts=restarts,
        fit_seed=fit_seed,
    )
    scorer = _MemoryCache(GPScorer(dataset, config.fit_config))
    cells = []
    for spec in config.methods:
        for seed in range(seeds):
            cell, _, _ = run_cell(dataset, spec, seed, config, scorer)
            cells.append(cell)
    return cells


class _MemoryCache:
    """The CachedScorer interface (``misses``) without a file."""

    def __init__(self, scorer: GPScorer) -> None:
        self.scorer = scorer
        self.table: dict[str, Score] = {}
        self.misses = 0

    def __call__(self, expr, init: tuple = ()) -> Score:
        key = warm_key(expr, init)
        if key not in self.table:
            self.misses += 1
            self.table[key] = self.scorer(expr, init)
        return self.table[key]
