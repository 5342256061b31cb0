"""``prolas bench``: search methods x data sets x seeds, held-out extrapolation, performance.

Three measurements, all through the same code as ``prolas fit``
(:func:`prolas.pipeline.run_search` with an explicit shared Evaluator):

* **Search quality** (:func:`run_bench`). Every cell (data set, method, seed) runs one
  search with ``budget`` unique GP fits. All cells of a data set score expressions
  through *one* Evaluator configuration: a :class:`~prolas.search.cache.CachedScorer`
  around ``GPScorer(data, FitConfig(restarts, seed=fit_seed))`` stored at
  ``OUT/fits/<dataset>.jsonl``. The fit seed is the same for every search seed, so an
  expression gets the same score whichever method or seed proposes it (a fair
  comparison), and the grid costs only its distinct expressions. The search seed
  drives the strategy only. Each finished cell is written to ``OUT/cells/`` (one
  JSON each); ``--resume`` skips those. Outputs: ``evaluations.csv``,
  ``summary.csv``/``summary.md`` and ``convergence_<dataset>.png``.

  Per data set x method (over seeds s = 1..S), with ``b_s(n)`` the best BIC among the
  first n unique evaluations of seed s (a search that stopped early keeps its final
  value):

      mean ± s.e. of b_s(n) at n = 10, 25, 50 (and the budget), s.e. = sd / sqrt(S);
      evaluations to reach CKS's final BIC: min{n : b_s(n) >= BIC_CKS}, median over
      seeds (a seed that never reaches it counts as "never", i.e. +inf), and how many
      seeds never reach it;
      fit seconds per seed: sum of the recorded fit times of the seed's history
      (the original fit's time, also for cache hits);
      strategy seconds per seed: wall time of the search minus time spent scoring
      (the proposal overhead: surrogate fits, acquisition optimisation, decoding).

* **Extrapolation** (:func:`run_extrapolation`): search on ``<name>_train.csv``,
  predict ``<name>_test.csv``; RMSE in y's original units and mean log predictive
  density (noise included), next to the Automatic Statistician's published RMSE
  (:data:`ABCD_RMSE`), with single-SE and single-LIN baselines. Standardised RMSE per
  data set = RMSE / (the smallest RMSE of any method on that data set, ABCD included),
  as in Lloyd et al. (2014).

* **Performance** (:func:`run_performance`): seconds per evaluation against N, the
  batched-restart speedup (``benchmarks/scripts/core.py``'s measurement), evaluations per
  second during a PROLAS run, peak memory; written to ``PERFORMANCE.md``.

Long series. A search on more than ``max_points`` points runs on an evenly spaced
``max_points``-point thinning (:func:`thin`) that keeps the full series'
standardisation constants, so fitted hyperparameters apply unchanged to the full
series. Held-out predictions then condition on *all* training points with the
hyperparameters found on the thinning (``final_model = "conditioned"``), or, with
``refit_full``, on hyperparameters re-optimised on all training points
(``"refit"``).
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.data import Dataset, load_csv
from prolas.errors import DataError, OutputExistsError, ProlasError
from prolas.expr import parse
from prolas.gp import FitConfig, FitResult, GPScorer, fit_gp
from prolas.limits import DEFAULT_CHECKPOINT, DEFAULT_GRAMMAR
from prolas.pipeline import METHODS, SearchConfig, refit, run_search, search_data
from prolas.search.cache import CachedScorer
from prolas.search.evaluator import Evaluation, Evaluator, Score, SearchResult

__all__ = [
    "DATASETS",
    "ABCD_RMSE",
    "BUDGETS",
    "MethodSpec",
    "BenchConfig",
    "parse_methods",
    "parse_datasets",
    "thin",
    "run_bench",
    "run_extrapolation",
    "run_performance",
    "load_cells",
    "evaluations_frame",
    "summarise",
    "summary_markdown",
    "best_traces",
    "plot_bench_convergence",
    "extrapolation_table",
    "standardised_rmse",
    "plot_standardised_rmse",
    "fraction_study",
    "fraction_table",
    "plot_fraction_study",
    "run_grid_in_memory",
    "load_bench",
    "load_extrapolation_fit",
    "default_method",
    "synthetic_series",
    "surrogate_regression_markdown",
    "small_png",
]

#: The 9 Automatic Statistician series shipped in data/ (DESIGN.md order).
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

#: Published extrapolation RMSE of ABCD (accuracy variant) on the 90/10 splits
#: (Lloyd et al. 2014, as tabulated in DESIGN.md).
ABCD_RMSE = {
    "airline": 16.67,
    "solar": 0.383,
    "mauna": 1.925,
    "temperature": 2.763,
    "internet": 5160.0,
    "call-centre": 40.68,
    "gas-production": 3036.0,
    "sulphuric": 29.07,
    "wages": 14.90,
}

#: Evaluation counts at which the best BIC is reported.
BUDGETS = (10, 25, 50)

#: Single-kernel baselines of the extrapolation benchmark.
BASELINES = ("SE", "LIN")

EVALUATION_COLUMNS = (
    "dataset",
    "method",
    "seed",
    "index",
    "expression",
    "bic",
    "log_likelihood",
    "seconds",
    "status",
    "n_params",
    "error",
)


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

    def __post_init__(self) -> None:
        if self.seeds < 1:
            raise ProlasError("--seeds must be at least 1")
        if self.budget < 1:
            raise ProlasError("--budget must be at least 1")
        if self.restarts < 1:
            raise ProlasError("--restarts must be at least 1")
        if self.max_points < 10:
            raise ProlasError("--max-points must be at least 10")

    @property
    def fit_config(self) -> FitConfig:
        return FitConfig(restarts=self.restarts, seed=self.fit_seed)

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
        }

    def to_json(self) -> dict:
        d = asdict(self)
        d["methods"] = [m.label for m in self.methods]
        d["datasets"] = list(self.datasets)
        return d


# --- data ----------------------------------------------------------------------------------


def thin(dataset: Dataset, max_points: int) -> Dataset:
    """At most ``max_points`` evenly spaced points: :meth:`Dataset.thinned`."""
    return dataset.thinned(max_points)


def _load(path: Path) -> Dataset:
    import warnings

    with warnings.catch_warnings():  # internet has a few repeated x values (data README)
        warnings.simplefilter("ignore", UserWarning)
        return load_csv(path)


# --- scoring -------------------------------------------------------------------------------


class _TimedScorer:
    """Passes calls through and adds up the wall time spent inside the scorer."""

    def __init__(self, scorer: Callable) -> None:
        self.scorer = scorer
        self.seconds = 0.0

    def __call__(self, expr) -> Score:
        t = time.perf_counter()
        try:
            return self.scorer(expr)
        finally:
            self.seconds += time.perf_counter() - t


def _cached_scorer(dataset: Dataset, config: BenchConfig, out: Path, name: str) -> CachedScorer:
    return CachedScorer(GPScorer(dataset, config.fit_config), out / "fits" / f"{name}.jsonl")


def _cell_path(out: Path, dataset: str, label: str, seed: int) -> Path:
    safe = label.replace(":", "-")
    return out / "cells" / f"{dataset}__{safe}__seed{seed}.json"


def _json_safe(obj):
    from prolas.report import _clean

    try:
        return json.loads(json.dumps(_clean(obj), default=str, allow_nan=False))
    except (TypeError, ValueError):
        return str(obj)


def _write_json(path: Path, doc: dict) -> None:
    """Atomic write (a cell file either exists complete or not at all)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    os.replace(tmp, path)


def _history_rows(history: Iterable[Evaluation]) -> list[dict]:
    from prolas.report import _history_entry

    return [_history_entry(e) for e in history]


def _run_cell(
    dataset: Dataset,
    spec: MethodSpec,
    seed: int,
    config: BenchConfig,
    scorer: CachedScorer,
    on_result: Callable[[Evaluation], None] | None = None,
) -> tuple[dict, SearchResult, FitResult | None]:
    """One search; returns the cell record, the SearchResult and the best fit."""
    timed = _TimedScorer(scorer)
    ev = Evaluator(timed, budget=config.budget, on_result=on_result)
    misses = scorer.misses
    t0 = time.perf_counter()
    result, best = run_search(dataset, spec.search_config(config, seed), evaluator=ev)
    wall = time.perf_counter() - t0
    cell = {
        "method": spec.label,
        "seed": seed,
        "n": dataset.n,
        "budget": config.budget,
        "evaluations": result.evaluations,
        "wall_seconds": wall,
        "scoring_seconds": timed.seconds,
        "strategy_seconds": max(wall - timed.seconds, 0.0),
        "fit_seconds": float(sum(e.seconds for e in result.history)),
        "new_fits": scorer.misses - misses,
        "best": None if best is None or not best.ok else best.to_json(),
        "history": _history_rows(result.history),
        "extra": _json_safe(result.extra),
    }
    return cell, result, best


class _GridProgress:
    """One tqdm bar over all evaluations of the grid (cells x budget)."""

    def __init__(self, total: int, done: int, enabled: bool) -> None:
        self.bar = None
        self.cell_count = 0
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=done, unit="fit", desc="bench", dynamic_ncols=True)

    def start(self, label: str) -> None:
        self.cell_count = 0
        if self.bar is not None:
            self.bar.set_postfix_str(label)

    def on_result(self, ev: Evaluation) -> None:
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


#: libraries whose versions can change a search's trajectory (BO is chaotic: measured, the
#: same prolas commit gave identical airline histories within one environment, but
#: histories that parted after 14-32 fits in an environment with other library builds)
PROVENANCE_PACKAGES = ("torch", "gpytorch", "botorch", "linear_operator", "numpy", "scipy", "pot")


def _provenance() -> dict:
    """prolas version, library versions, git commit and uncommitted changes under prolas/
    (when in a checkout): a strategy under development, or another library build, can
    change results between runs."""
    import subprocess
    from importlib import metadata

    from prolas import __version__

    packages = {}
    for name in PROVENANCE_PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    out: dict = {"prolas_version": __version__, "packages": packages}
    root = Path(__file__).resolve().parents[1]
    try:
        git = ["git", "-C", str(root)]
        commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
        status = subprocess.run(
            [*git, "status", "--porcelain", "--", "prolas"], capture_output=True, text=True
        )
    except OSError:
        return out
    if commit.returncode == 0:
        out["git_commit"] = commit.stdout.strip()
        out["uncommitted"] = [line[3:] for line in status.stdout.splitlines()]
    return out


def _prepare_out(out: Path, config: BenchConfig, resume: bool, kind: str) -> None:
    """Create OUT; refuse to mix runs with different settings or to clobber without --resume."""
    out.mkdir(parents=True, exist_ok=True)
    meta = out / "bench.json"
    cells = out / "cells"
    if meta.exists():
        old = json.loads(meta.read_text())
        if old.get("kind") != kind:
            raise OutputExistsError(
                f"{out} holds a {old.get('kind')!r} bench; choose another --out for {kind!r}"
            )
        if not resume:
            raise OutputExistsError(
                f"{out} already holds bench results; use --resume to continue it or choose "
                "another --out"
            )
        if old.get("settings") != config.settings():
            diff = sorted(
                k for k, v in config.settings().items() if old.get("settings", {}).get(k) != v
            )
            raise ProlasError(
                f"--resume: settings differ from the run in {out} ({', '.join(diff)}); "
                "use the same settings or another --out"
            )
    elif cells.exists() and any(cells.iterdir()) and not resume:
        raise OutputExistsError(f"{out}/cells is not empty; use --resume or another --out")
    runs = []
    if meta.exists():
        old = json.loads(meta.read_text())
        runs = old.get("runs", [old["last_run"]] if "last_run" in old else [])
    run = {**config.to_json(), "started": time.strftime("%Y-%m-%d %H:%M:%S"), **_provenance()}
    _write_json(meta, {"kind": kind, "settings": config.settings(), "runs": runs + [run]})


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
    _prepare_out(out, config, resume, "search")
    run = BenchRun(out)
    grid = [(d, m, s) for d in config.datasets for m in config.methods for s in range(config.seeds)]
    todo = [g for g in grid if not _cell_path(out, g[0], g[1].label, g[2]).exists()]
    run.cells_skipped = len(grid) - len(todo)
    if run.cells_skipped:
        log(f"bench: {run.cells_skipped} of {len(grid)} cells already done, skipped")
    bar = _GridProgress(len(grid) * config.budget, run.cells_skipped * config.budget, progress)
    try:
        data: dict[str, tuple[Dataset, CachedScorer]] = {}
        for name, spec, seed in todo:
            if name not in data:
                full = _load(Path(config.data_dir) / f"{name}.csv")
                ds = thin(full, config.max_points)
                if ds is not full:
                    log(f"bench: {name}: searching on {ds.n} of {full.n} points (even thinning)")
                data[name] = (ds, _cached_scorer(ds, config, out, name))
            ds, scorer = data[name]
            bar.start(f"{name} {spec.label} seed {seed}")
            cell, _, _ = _run_cell(ds, spec, seed, config, scorer, bar.on_result)
            bar.finish(config.budget)
            cell["dataset"] = name
            _write_json(_cell_path(out, name, spec.label, seed), cell)
            run.cells_run += 1
            run.new_fits += cell["new_fits"]
    finally:
        bar.close()
    run.files = write_bench_outputs(out, config.budget)
    return run


def load_cells(out: str | Path) -> list[dict]:
    """Every finished cell record in ``OUT/cells`` (sorted by data set, method, seed)."""
    cells = []
    for p in sorted((Path(out) / "cells").glob("*.json")):
        cells.append(json.loads(p.read_text()))
    cells.sort(key=lambda c: (c["dataset"], c["method"], c["seed"]))
    return cells


def evaluations_frame(cells: Sequence[dict]) -> pd.DataFrame:
    """One row per unique evaluation of every cell (:data:`EVALUATION_COLUMNS`)."""
    rows = []
    for c in cells:
        for h in c["history"]:
            rows.append(
                {
                    "dataset": c["dataset"],
                    "method": c["method"],
                    "seed": c["seed"],
                    **{k: h[k] for k in EVALUATION_COLUMNS[3:]},
                }
            )
    return pd.DataFrame(rows, columns=list(EVALUATION_COLUMNS))


def best_traces(cells: Sequence[dict], dataset: str, method: str, length: int) -> np.ndarray:
    """``seeds x length`` best BIC after n = 1..length unique evaluations.

    NaN before the first successful fit; a search that stopped before ``length``
    keeps its final value.
    """
    out = []
    for c in cells:
        if c["dataset"] != dataset or c["method"] != method:
            continue
        best, trace = -math.inf, []
        for h in c["history"][:length]:
            if h["status"] == "ok" and h["bic"] is not None:
                best = max(best, h["bic"])
            trace.append(best)
        trace += [best] * (length - len(trace))
        out.append([v if math.isfinite(v) else math.nan for v in trace])
    return np.array(out, dtype=np.float64).reshape(-1, length)


def _mean_se(v: np.ndarray) -> tuple[float, float]:
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan, math.nan
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0
    return float(v.mean()), se


def _reach(trace: np.ndarray, target: float) -> float:
    """First 1-based n with trace[n-1] >= target (+inf if never)."""
    tol = 1e-9 * max(1.0, abs(target))
    hit = np.flatnonzero(np.nan_to_num(trace, nan=-np.inf) >= target - tol)
    return float(hit[0] + 1) if hit.size else math.inf


def cks_final_bic(cells: Sequence[dict], dataset: str, budget: int) -> float | None:
    """Mean over CKS seeds of CKS's final best BIC (CKS is deterministic: all equal)."""
    tr = best_traces(cells, dataset, "cks", budget)
    if tr.size == 0:
        return None
    v = tr[:, -1]
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else None


def summarise(cells: Sequence[dict], budget: int, budgets: Sequence[int] = BUDGETS) -> pd.DataFrame:
    """Per data set x method statistics (module docstring); one row each."""
    marks = [b for b in budgets if b < budget] + [budget]
    rows = []
    pairs = sorted({(c["dataset"], c["method"]) for c in cells})
    for dataset, method in pairs:
        mine = [c for c in cells if c["dataset"] == dataset and c["method"] == method]
        tr = best_traces(cells, dataset, method, budget)
        row: dict = {"dataset": dataset, "method": method, "seeds": len(mine), "budget": budget}
        for b in marks:
            m, se = _mean_se(tr[:, b - 1])
            row[f"best_at_{b}_mean"], row[f"best_at_{b}_se"] = m, se
        row["evaluations_mean"] = float(np.mean([c["evaluations"] for c in mine]))
        target = cks_final_bic(cells, dataset, budget)
        row["cks_final_bic"] = target
        if target is not None:
            reach = np.array([_reach(t, target) for t in tr])
            row["evals_to_cks_median"] = float(np.median(reach)) if reach.size else math.nan
            row["evals_to_cks_never"] = int(np.sum(~np.isfinite(reach)))
        else:
            row["evals_to_cks_median"], row["evals_to_cks_never"] = math.nan, None
        row["fit_seconds_per_seed"] = float(np.mean([c["fit_seconds"] for c in mine]))
        row["strategy_seconds_per_seed"] = float(np.mean([c["strategy_seconds"] for c in mine]))
        row["new_fits"] = int(sum(c["new_fits"] for c in mine))
        rows.append(row)
    return pd.DataFrame(rows)


def _fmt(v, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{digits}f}"


def summary_markdown(summary: pd.DataFrame, budget: int) -> str:
    """The summary table as markdown, one section per data set."""
    marks = [b for b in BUDGETS if b < budget] + [budget]
    lines = [
        "# Search quality",
        "",
        "Best BIC (higher is better) after n unique GP fits: mean ± standard error over "
        "seeds. 'to CKS': evaluations needed to reach CKS's final BIC at this budget, "
        "median over seeds (`>B` = more than half the seeds never reach it) and how many "
        "seeds never do. Fit s: summed GP-fit seconds per seed (time of the original fit, "
        "also for cached scores). Strategy s: the method's own proposal time per seed.",
        "",
    ]
    for dataset, df in summary.groupby("dataset", sort=False):
        seeds = sorted(set(df["seeds"]))
        lines += [f"## {dataset}", ""]
        head = ["method", "seeds"] + [f"n={b}" for b in marks]
        head += ["to CKS (never)", "fit s", "strategy s"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for _, r in df.iterrows():
            cells = [f"`{r['method']}`", str(r["seeds"])]
            for b in marks:
                m, se = r[f"best_at_{b}_mean"], r[f"best_at_{b}_se"]
                cells.append(f"{_fmt(m)} ± {_fmt(se)}" if math.isfinite(m) else "-")
            med = r["evals_to_cks_median"]
            if r["cks_final_bic"] is None or not isinstance(med, float) or math.isnan(med):
                cells.append("-")
            else:
                text = f">{budget}" if math.isinf(med) else f"{med:g}"
                cells.append(f"{text} ({r['evals_to_cks_never']}/{r['seeds']})")
            cells += [_fmt(r["fit_seconds_per_seed"], 1), _fmt(r["strategy_seconds_per_seed"], 1)]
            lines.append("| " + " | ".join(cells) + " |")
        cks = df["cks_final_bic"].dropna()
        if len(cks):
            lines += ["", f"CKS's final BIC at budget {budget}: {float(cks.iloc[0]):.2f}."]
        if len(seeds) > 1:
            lines += ["", f"Seeds per method differ: {seeds}."]
        lines.append("")
    return "\n".join(lines)


def plot_bench_convergence(
    cells: Sequence[dict], dataset: str, budget: int, path: str | Path | None = None, ax=None
):
    """Best BIC vs unique evaluations, mean ± s.e. per method; CKS's final BIC dashed.

    Draws on ``ax`` if given (returns it), else makes a figure and saves it to ``path``.
    """
    from prolas.report import _pyplot

    plt = _pyplot()
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(7, 4.2))
    methods = sorted({c["method"] for c in cells if c["dataset"] == dataset})
    n = np.arange(1, budget + 1)
    lows = []
    for i, method in enumerate(methods):
        tr = best_traces(cells, dataset, method, budget)
        stats = np.array([_mean_se(tr[:, j]) for j in range(budget)]).reshape(budget, 2)
        mean, se = stats[:, 0], stats[:, 1]
        color = f"C{i}"
        ax.plot(n, mean, color=color, lw=1.8, label=f"{method} ({tr.shape[0]} seeds)")
        ax.fill_between(n, mean - se, mean + se, color=color, alpha=0.2, lw=0)
        finite = mean[np.isfinite(mean)]
        if finite.size:
            lows.append(float(finite[min(4, finite.size - 1)]))
    target = cks_final_bic(cells, dataset, budget)
    if target is not None:
        ax.axhline(target, color="0.3", ls="--", lw=1, label=f"CKS final ({target:.1f})")
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
        plt.close(fig)
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
    summary = summarise(cells, budget)
    summary.to_csv(out / "summary.csv", index=False)
    (out / "summary.md").write_text(summary_markdown(summary, budget))
    files += [out / "summary.csv", out / "summary.md"]
    for dataset in sorted({c["dataset"] for c in cells}):
        path = out / f"convergence_{dataset}.png"
        plot_bench_convergence(cells, dataset, budget, path)
        files.append(path)
    return files


# --- extrapolation -------------------------------------------------------------------------


def _final_model(
    fit: FitResult, search: Dataset, train: Dataset, config: BenchConfig
) -> tuple[FitResult, str]:
    """The model that predicts the test set (see the module docstring)."""
    if search is train:
        return fit, "same"
    if config.refit_full:
        # the product's refit: warm-started at the thinning's fit (exact up to
        # EXACT_REFIT_LIMIT points, else SGPR), so never worse than conditioning on it
        full = refit(fit, train, SearchConfig(restarts=config.restarts, seed=config.fit_seed))
        if full.ok:
            return full, "refit"
    return fit, "conditioned"


def run_extrapolation(
    config: BenchConfig,
    out: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> BenchRun:
    """Search on ``<name>_train.csv``, predict ``<name>_test.csv`` for every cell, plus
    the single-SE and single-LIN baselines (fitted once, the same way).

    Writes evaluations.csv, extrapolation.csv, extrapolation.md, standardised_rmse.png
    and forecasts.png (each data set's forecasts against its test points).
    """
    import torch

    from prolas.report import test_metrics

    torch.set_num_threads(1)
    log = log or (lambda s: None)
    out = Path(out)
    _prepare_out(out, config, resume, "extrapolation")
    run = BenchRun(out)
    base_specs = [MethodSpec(b, "single") for b in BASELINES]  # fitted directly, no search
    grid = [(d, m, s) for d in config.datasets for m in config.methods for s in range(config.seeds)]
    grid += [(d, b, 0) for d in config.datasets for b in base_specs]
    todo = [g for g in grid if not _cell_path(out, g[0], g[1].label, g[2]).exists()]
    run.cells_skipped = len(grid) - len(todo)
    total = sum(config.budget if m.label not in BASELINES else 1 for _, m, _ in grid)
    done = sum(config.budget if m.label not in BASELINES else 1 for _, m, _ in grid) - sum(
        config.budget if m.label not in BASELINES else 1 for _, m, _ in todo
    )
    bar = _GridProgress(total, done, progress)
    try:
        data: dict[str, tuple[Dataset, Dataset, Dataset, CachedScorer]] = {}
        for name, spec, seed in todo:
            if name not in data:
                train = _load(Path(config.data_dir) / f"{name}_train.csv")
                test = _load(Path(config.data_dir) / f"{name}_test.csv")
                search = thin(train, config.max_points)
                if search is not train:
                    log(f"extrapolation: {name}: search on {search.n} of {train.n} training points")
                data[name] = (train, test, search, _cached_scorer(search, config, out, name))
            train, test, search, scorer = data[name]
            bar.start(f"{name} {spec.label} seed {seed}")
            if spec.label in BASELINES:
                misses = scorer.misses
                t0 = time.perf_counter()
                score = scorer(parse(spec.label))
                best = score.fit if isinstance(score.fit, FitResult) else None
                ev = Evaluation(
                    1,
                    score.expression,
                    score.status,
                    score.bic,
                    score.log_likelihood,
                    score.n_params,
                    score.seconds,
                    score.error,
                )
                wall = time.perf_counter() - t0
                cell = {
                    "method": spec.label,
                    "seed": seed,
                    "n": search.n,
                    "budget": 1,
                    "evaluations": 1,
                    "wall_seconds": wall,
                    "scoring_seconds": wall,
                    "strategy_seconds": 0.0,
                    "fit_seconds": score.seconds,
                    "new_fits": scorer.misses - misses,
                    "best": None if best is None or not best.ok else best.to_json(),
                    "history": _history_rows([ev]),
                    "extra": {},
                }
                bar.on_result(ev)
            else:
                cell, _, best = _run_cell(search, spec, seed, config, scorer, bar.on_result)
                bar.finish(config.budget)
            cell["dataset"] = name
            cell["n_train"], cell["n_search"], cell["n_test"] = train.n, search.n, test.n
            if best is not None and best.ok:
                final, how = _final_model(best, search, train, config)
                metrics = test_metrics(final, train, test)
                cell["test"] = {
                    "final_model": how,
                    "expression": final.expression,
                    "rmse": metrics["rmse"],
                    "mean_log_predictive_density": metrics["mean_log_predictive_density"],
                    "final": final.to_json(),
                }
            else:
                cell["test"] = None
            _write_json(_cell_path(out, name, spec.label, seed), cell)
            run.cells_run += 1
            run.new_fits += cell["new_fits"]
    finally:
        bar.close()
    run.files = write_extrapolation_outputs(out, config)
    return run


def extrapolation_table(cells: Sequence[dict]) -> pd.DataFrame:
    """One row per extrapolation cell: data set, method, seed, expression, RMSE, MLPD."""
    rows = []
    for c in cells:
        t = c.get("test")
        rows.append(
            {
                "dataset": c["dataset"],
                "method": c["method"],
                "seed": c["seed"],
                "expression": t["expression"] if t else None,
                "search_bic": c["best"]["bic"] if c.get("best") else None,
                "evaluations": c["evaluations"],
                "n_train": c.get("n_train"),
                "n_search": c.get("n_search"),
                "n_test": c.get("n_test"),
                "final_model": t["final_model"] if t else None,
                "rmse": t["rmse"] if t else math.nan,
                "mean_log_predictive_density": (
                    t["mean_log_predictive_density"] if t else math.nan
                ),
                "abcd_rmse": ABCD_RMSE.get(c["dataset"], math.nan),
                "fit_seconds": c["fit_seconds"],
            }
        )
    return pd.DataFrame(rows)


def standardised_rmse(table: pd.DataFrame, include_abcd: bool = True) -> pd.DataFrame:
    """Data set x method matrix of RMSE / best RMSE on that data set (mean over seeds).

    ABCD's published RMSE is a column when ``include_abcd`` (it then also counts for
    "best").
    """
    rmse = table.groupby(["dataset", "method"])["rmse"].mean().unstack("method")
    if include_abcd:
        rmse["ABCD"] = [ABCD_RMSE.get(d, math.nan) for d in rmse.index]
    return rmse.div(rmse.min(axis=1), axis=0)


def _method_order(methods: Iterable[str]) -> list[str]:
    pref = ["prolas", "cks", "random", "ABCD", "SE", "LIN"]
    methods = list(dict.fromkeys(methods))
    return [m for m in pref if m in methods] + sorted(m for m in methods if m not in pref)


def plot_standardised_rmse(std: pd.DataFrame, path: str | Path | None = None, ax=None):
    """Standardised RMSE per method across data sets: box plot plus one dot per data set
    (log scale; 1 = best method on that data set)."""
    from prolas.report import _pyplot

    plt = _pyplot()
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(7.5, 4.2))
    methods = _method_order(std.columns)
    values = [std[m].dropna().to_numpy() for m in methods]
    ax.boxplot(values, showfliers=False, widths=0.5)
    ax.set_xticks(range(1, len(methods) + 1), methods)
    rng = np.random.default_rng(0)
    markers = "os^vDP*Xhp"
    for j, dataset in enumerate(std.index):
        xs = [i + 1 + rng.uniform(-0.12, 0.12) for i in range(len(methods))]
        ys = [std.loc[dataset, m] for m in methods]
        ax.plot(xs, ys, markers[j % len(markers)], ms=5, mfc="none", label=dataset, alpha=0.8)
    ax.set_yscale("log")
    ax.axhline(1.0, color="0.6", lw=0.8)
    ax.set_ylabel("RMSE / best RMSE on the data set")
    ax.set_title("Extrapolation: standardised RMSE (lower is better)", fontsize=10)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if own:
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
        plt.close(fig)
    return ax


def plot_forecasts(
    cells: Sequence[dict], config: BenchConfig, path: str | Path, methods: Sequence[str]
) -> Path:
    """One panel per data set: the end of the training data, the test points and each
    method's predictive mean (and 95 % band for the first method)."""
    from prolas.gp import predict
    from prolas.report import _pyplot

    plt = _pyplot()
    datasets = list(dict.fromkeys(c["dataset"] for c in cells))
    ncol = 3
    nrow = math.ceil(len(datasets) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(13, 3.2 * nrow), squeeze=False)
    for ax, name in zip(axes.ravel(), datasets):
        train = _load(Path(config.data_dir) / f"{name}_train.csv")
        test = _load(Path(config.data_dir) / f"{name}_test.csv")
        lo = train.x[-1] - 2.0 * (test.x[-1] - train.x[-1])
        keep = train.x >= lo
        xs = np.linspace(lo, test.x[-1], 300)
        ax.plot(train.x[keep], train.y[keep], "k.", ms=2.5, label="train")
        ax.plot(test.x, test.y, "o", color="C3", ms=3, mfc="none", label="test")
        for i, method in enumerate(methods):
            mine = [c for c in cells if c["dataset"] == name and c["method"] == method]
            mine = [c for c in mine if c.get("test")]
            if not mine:
                continue
            c = min(mine, key=lambda c: c["seed"])
            fit = FitResult.from_json(c["test"]["final"], n=train.n)
            mean, var = predict(fit, train, xs, include_noise=True)
            ax.plot(xs, mean, color=f"C{i}", lw=1.3, label=f"{method}")
            if i == 0:
                sd = np.sqrt(var)
                ax.fill_between(xs, mean - 1.96 * sd, mean + 1.96 * sd, color="C0", alpha=0.15)
        ax.axvline(train.x[-1], color="0.6", ls="--", lw=0.8)
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.ticklabel_format(axis="x", useOffset=False)
    for ax in axes.ravel()[len(datasets) :]:
        ax.axis("off")
    axes[0, 0].legend(fontsize=7, frameon=False)
    fig.suptitle(f"Extrapolation forecasts (band: 95 % predictive, {methods[0]})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return Path(path)


def extrapolation_markdown(table: pd.DataFrame, std: pd.DataFrame, config: BenchConfig) -> str:
    """Tables: RMSE per data set and method next to ABCD, MLPD, standardised RMSE."""
    rmse = table.groupby(["dataset", "method"])["rmse"].mean().unstack("method")
    mlpd = table.groupby(["dataset", "method"])["mean_log_predictive_density"].mean()
    mlpd = mlpd.unstack("method")
    methods = _method_order(rmse.columns)
    datasets = [d for d in DATASETS if d in rmse.index] + [
        d for d in rmse.index if d not in DATASETS
    ]
    seeds = table[~table["method"].isin(BASELINES)].groupby("method")["seed"].nunique()
    lines = [
        "# Extrapolation (fit on `<name>_train.csv`, predict `<name>_test.csv`)",
        "",
        f"Searches: budget {config.budget} unique GP fits, {config.restarts} restarts per fit, "
        f"seeds per method: "
        + ", ".join(f"{m} {int(s)}" for m, s in seeds.items())
        + f"; series with more than {config.max_points} training points are searched on an "
        f"evenly spaced {config.max_points}-point thinning, and the final model "
        + (
            "is re-optimised on all training points."
            if config.refit_full
            else "keeps the thinning's hyperparameters and conditions on all training points."
        )
        + " RMSE in the data's own units on the full test file (mean over seeds).",
        "",
        "## RMSE",
        "",
        "| data | n train (searched) | " + " | ".join(methods) + " | ABCD (published) |",
        "|" + "---|" * (len(methods) + 3),
    ]
    sizes = table.groupby("dataset")[["n_train", "n_search"]].first()
    for d in datasets:
        best = std.loc[d].idxmin()
        cells = []
        for m in methods:
            v = rmse.loc[d, m]
            text = f"{v:.4g}" if math.isfinite(v) else "-"
            cells.append(f"**{text}**" if m == best else text)
        abcd = ABCD_RMSE.get(d, math.nan)
        abcd_text = f"{abcd:.4g}"
        n_tr, n_se = sizes.loc[d, "n_train"], sizes.loc[d, "n_search"]
        n_text = f"{n_tr}" + (f" ({n_se})" if n_se != n_tr else "")
        lines.append(
            f"| {d} | {n_text} | "
            + " | ".join(cells)
            + f" | {'**' + abcd_text + '**' if best == 'ABCD' else abcd_text} |"
        )
    lines += ["", "Bold: the best RMSE on the data set.", ""]
    lines += [
        "## Expressions found",
        "",
        "Every seed's best expression, with its test RMSE where a method ran several seeds.",
        "",
        "| data | " + " | ".join(m for m in methods if m not in BASELINES) + " |",
        "|" + "---|" * (1 + len([m for m in methods if m not in BASELINES])),
    ]
    for d in datasets:
        cells = []
        for m in methods:
            if m in BASELINES:
                continue
            sub = table[(table.dataset == d) & (table.method == m)].sort_values("seed")
            if len(sub) <= 1:
                cells.append(f"`{sub.iloc[0]['expression']}`" if len(sub) else "-")
            else:
                rows = (f"{int(r.seed)}: `{r.expression}` ({r.rmse:.4g})" for r in sub.itertuples())
                cells.append("<br>".join(rows))
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Mean test log predictive density (nats per point, higher is better)",
        "",
        "| data | " + " | ".join(methods) + " |",
        "|" + "---|" * (len(methods) + 1),
    ]
    for d in datasets:
        cells = [f"{mlpd.loc[d, m]:.3f}" if math.isfinite(mlpd.loc[d, m]) else "-" for m in methods]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    cols = _method_order(std.columns)
    lines += [
        "",
        "## Standardised RMSE (RMSE / best RMSE on the data set, ABCD included)",
        "",
        "| data | " + " | ".join(cols) + " |",
        "|" + "---|" * (len(cols) + 1),
    ]
    for d in datasets:
        lines.append(f"| {d} | " + " | ".join(_fmt(std.loc[d, m]) for m in cols) + " |")
    lines.append(
        "| **median** | " + " | ".join(f"**{_fmt(std[m].median())}**" for m in cols) + " |"
    )
    lines += ["", "## Against ABCD", ""]
    for m in methods:
        have = [d for d in datasets if d in ABCD_RMSE and math.isfinite(rmse.loc[d, m])]
        beats = sum(bool(rmse.loc[d, m] < ABCD_RMSE[d]) for d in have)
        lines.append(
            f"- `{m}` has a lower RMSE than ABCD on {beats} of {len(have)} series"
            + (
                f" (no result yet on {len(datasets) - len(have)})"
                if len(have) < len(datasets)
                else ""
            )
            + f"; median standardised RMSE {_fmt(std[m].median())}."
        )
    lines += ["", "![standardised RMSE](standardised_rmse.png)", "", "![forecasts](forecasts.png)"]
    return "\n".join(lines) + "\n"


def write_extrapolation_outputs(out: str | Path, config: BenchConfig) -> list[Path]:
    out = Path(out)
    cells = load_cells(out)
    files = []
    evaluations_frame(cells).to_csv(out / "evaluations.csv", index=False)
    files.append(out / "evaluations.csv")
    if not cells:
        return files
    table = extrapolation_table(cells)
    table.to_csv(out / "extrapolation.csv", index=False)
    std = standardised_rmse(table)
    (out / "extrapolation.md").write_text(extrapolation_markdown(table, std, config))
    plot_standardised_rmse(std, out / "standardised_rmse.png")
    methods = _method_order(m for m in table["method"].unique())
    searched = [m for m in methods if m not in BASELINES]
    plot_forecasts(cells, config, out / "forecasts.png", searched or methods)
    files += [
        out / "extrapolation.csv",
        out / "extrapolation.md",
        out / "standardised_rmse.png",
        out / "forecasts.png",
    ]
    return files


# --- performance ---------------------------------------------------------------------------


def synthetic_series(n: int, seed: int = 0) -> Dataset:
    """``n`` points on a fixed 12-year monthly-like span: a linear trend times a yearly
    cycle, plus a smooth wiggle and noise (same generating process for every n)."""
    rng = np.random.default_rng(seed)
    x = np.linspace(1949.0, 1961.0, n)
    t = x - 1949.0
    y = (
        2.0 * t
        + (1.0 + 0.15 * t) * np.sin(2 * np.pi * t)
        + 0.8 * np.sin(2 * np.pi * t / 5.3)
        + 0.2 * rng.standard_normal(n)
    )
    return Dataset.from_arrays(x, y, name=f"synthetic-{n}")


def daily_series(n: int, seed: int = 0) -> Dataset:
    """``n`` daily observations from 2000-01-01 (x in decimal years): a linear trend, a
    yearly cycle, a weekly cycle and noise. The span grows with n, like a user's data."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 365.25
    y = (
        5.0
        + 0.8 * t
        + 2.0 * np.sin(2 * np.pi * t)
        + 0.5 * np.sin(2 * np.pi * t * 365.25 / 7.0)
        + 0.4 * rng.standard_normal(n)
    )
    return Dataset.from_arrays(2000.0 + t, y, name=f"daily-{n}")


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KB on Linux


def _measure_fit(n: int, expression: str, restarts: int) -> dict:
    """Worker: one exact fit at size n (fresh process), with peak memory and the share of
    its time spent in the linear algebra (Cholesky, solves, inverse)."""
    from prolas.gram import linalg_seconds

    ds = synthetic_series(n)
    fit_gp(expression, synthetic_series(50), FitConfig(restarts=2))  # warm-up (imports, kernels)
    floor = linalg_seconds()
    t = time.perf_counter()
    fit = fit_gp(expression, ds, FitConfig(restarts=restarts))
    seconds = time.perf_counter() - t
    return {
        "n": n,
        "seconds": seconds,
        "log_likelihood": fit.log_likelihood,
        "status": fit.status,
        "linalg_fraction": (linalg_seconds() - floor) / seconds,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _measure_pipeline(n: int, budget: int) -> dict:
    """Worker: a default ``prolas fit`` (search on the subsample, refit on all n points)
    on a daily-like synthetic series of n points, in a fresh process."""
    ds = daily_series(n)
    timed = _TimedScorer(GPScorer(search_data(ds, SearchConfig()), SearchConfig().fit_config))
    t = time.perf_counter()
    result, best = run_search(ds, SearchConfig(budget=budget), evaluator=Evaluator(timed, budget))
    wall = time.perf_counter() - t
    return {
        "n": n,
        "budget": budget,
        "evaluations": result.evaluations,
        "searched_points": search_data(ds, SearchConfig()).n,
        "wall_seconds": wall,
        "fit_seconds": timed.seconds,
        "refit": best.approximation or "exact" if best is not None else None,
        "best": best.expression if best is not None else None,
        "status": best.status if best is not None else "no model",
        "peak_rss_mb": _peak_rss_mb(),
    }


def growth_exponent(sizes: Sequence[float], seconds: Sequence[float]) -> float:
    """Least-squares slope of log(seconds) against log(N): cost grows as N^slope."""
    ok = [(n, s) for n, s in zip(sizes, seconds) if n > 0 and s > 0]
    if len(ok) < 2:
        return math.nan
    logn, logs = np.log([n for n, _ in ok]), np.log([s for _, s in ok])
    return float(np.polyfit(logn, logs, 1)[0])


def _measure_restarts(repo: str, restarts: int) -> dict:
    """Worker: benchmarks/scripts/core.py's restart-strategy measurement on airline."""
    import importlib.util

    path = Path(repo) / "benchmarks" / "scripts" / "core.py"
    spec = importlib.util.spec_from_file_location("prolas_core_benchmark", path)
    if spec is None or spec.loader is None:
        raise ProlasError(f"cannot import {path}")
    core = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(core)
    ds = load_csv(Path(repo) / "data" / "airline.csv")
    fit_gp("LIN*PER*SE + LIN*SE", synthetic_series(50), FitConfig(restarts=2))  # warm-up
    res = core.restart_strategies(ds, "LIN*PER*SE + LIN*SE", restarts)
    res["peak_rss_mb"] = _peak_rss_mb()
    return res


def _measure_search(data: str, method: str, budget: int, restarts: int) -> dict:
    """Worker: one search without any cache; evaluations per second and peak memory."""
    import torch

    torch.set_num_threads(1)
    ds = load_csv(data)
    fit_gp("LIN*PER*SE + LIN*SE", synthetic_series(50), FitConfig(restarts=2))  # warm-up
    timed = _TimedScorer(GPScorer(search_data(ds, SearchConfig()), FitConfig(restarts=restarts)))
    ev = Evaluator(timed, budget=budget)
    t = time.perf_counter()
    try:
        result, best = run_search(ds, SearchConfig(method=method, budget=budget), evaluator=ev)
    except (ProlasError, ImportError) as exc:
        return {"method": method, "error": f"{type(exc).__name__}: {exc}"}
    wall = time.perf_counter() - t
    return {
        "method": method,
        "evaluations": result.evaluations,
        "wall_seconds": wall,
        "fit_seconds": timed.seconds,
        "strategy_seconds": wall - timed.seconds,
        "evals_per_second": result.evaluations / wall,
        "best": best.expression if best is not None else None,
        "best_bic": best.bic if best is not None else None,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _in_subprocess(fn: Callable, *args):
    """Run ``fn(*args)`` in a fresh spawned process (own peak-memory figure)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def machine_description() -> list[str]:
    """CPU model, cores, memory, load, library versions (for PERFORMANCE.md)."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GB"
                break
    except OSError:
        pass
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    import gpytorch

    return [
        f"- CPU: {cpu}, {os.cpu_count()} logical cores; memory {mem}; no GPU",
        f"- {platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"torch {torch.__version__} (CPU, 1 thread per process), gpytorch {gpytorch.__version__}",
        f"- load average when the run started (1/5/15 min): {load} (the cores were shared "
        "with other jobs, so absolute times are pessimistic)",
    ]


def run_performance(
    out: str | Path,
    *,
    sizes: Sequence[int] = (100, 300, 1000, 2000),
    pipeline_sizes: Sequence[int] = (1000, 10_000, 100_000),
    expression: str = "LIN*PER*SE + SE",
    restarts: int = 4,
    search_budget: int = 20,
    pipeline_budget: int = 50,
    data: str | Path = "data/airline.csv",
    repo: str | Path = ".",
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Measure and write ``OUT/PERFORMANCE.md``; each measurement in a fresh process.

    1. a default ``prolas fit`` (``pipeline_budget`` fits) against N (``pipeline_sizes``):
       seconds, peak memory and the growth exponent;
    2. one exact fit against N (``sizes``): seconds, share of the linear algebra, exponent;
    3. restart strategies on airline (``benchmarks/scripts/core.py``);
    4. evaluations per second of PROLAS and CKS searches on ``data``.
    """
    log = log or (lambda s: None)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    expression = str(parse(expression))
    machine = machine_description()
    from tqdm.auto import tqdm

    bar = tqdm(total=len(pipeline_sizes) + len(sizes) + 3, desc="performance", disable=not progress)
    pipelines = []
    for n in pipeline_sizes:
        bar.set_postfix_str(f"prolas fit N={n}")
        pipelines.append(_in_subprocess(_measure_pipeline, int(n), pipeline_budget))
        log(f"N={n}: {pipelines[-1]['wall_seconds']:.0f} s, {pipelines[-1]['peak_rss_mb']:.0f} MB")
        bar.update(1)
    fits = []
    for n in sizes:
        bar.set_postfix_str(f"fit N={n}")
        fits.append(_in_subprocess(_measure_fit, int(n), expression, restarts))
        bar.update(1)
    bar.set_postfix_str("restarts")
    try:
        restart = _in_subprocess(_measure_restarts, str(Path(repo).resolve()), 8)
    except (OSError, ProlasError) as exc:
        restart = {"error": str(exc)}
    bar.update(1)
    searches = []
    for method in ("prolas", "cks"):
        bar.set_postfix_str(f"{method} search")
        searches.append(_in_subprocess(_measure_search, str(data), method, search_budget, restarts))
        bar.update(1)
    bar.close()

    pipe_exp = growth_exponent([p["n"] for p in pipelines], [p["wall_seconds"] for p in pipelines])
    fit_exp = growth_exponent([f["n"] for f in fits], [f["seconds"] for f in fits])
    lines = [
        "# Performance",
        "",
        f"Command: `prolas bench --performance --pipeline-sizes "
        f"{','.join(map(str, pipeline_sizes))} --pipeline-budget {pipeline_budget} "
        f"--sizes {','.join(map(str, sizes))} "
        f"--restarts {restarts} --budget {search_budget} --out {out}`. Every measurement runs "
        "in a fresh process.",
        "",
        "## Machine",
        "",
        *machine,
        "",
        f"## A default `prolas fit` against N ({pipeline_budget} fits)",
        "",
        "Daily synthetic series (`prolas.bench.daily_series`: trend + yearly + weekly cycle + "
        "noise). The search runs on an evenly spaced subsample of at most "
        f"{pipelines[0]['searched_points'] if pipelines else '-'} points; the best model is "
        "then refitted on all N points (exact up to the refit limit, else SGPR). Peak RSS: "
        "the process's maximum resident memory.",
        "",
        "| N | searched on | seconds | of which fitting | refit | best | peak RSS (MB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in pipelines:
        lines.append(
            f"| {p['n']} | {p['searched_points']} | {p['wall_seconds']:.0f} | "
            f"{p['fit_seconds']:.0f} | {p['refit']} ({p['status']}) | `{p['best']}` | "
            f"{p['peak_rss_mb']:.0f} |"
        )
    lines += [
        "",
        f"Growth exponent (slope of log seconds against log N): **{pipe_exp:.2f}**.",
        "",
        f"## One exact fit against N (`{expression}`, {restarts} restart(s))",
        "",
        "Synthetic series on a fixed span (`prolas.bench.synthetic_series`). The fit screens "
        "every restart on at most 200 evenly spaced points, then polishes the best 2 on all "
        "N. Linear algebra: the share of the fit's time inside the Cholesky factorisation, "
        "the solves and the inverse (`prolas.gram`).",
        "",
        "| N | seconds | log-likelihood | linear algebra | peak RSS (MB) |",
        "|---|---|---|---|---|",
    ]
    for f in fits:
        lines.append(
            f"| {f['n']} | {f['seconds']:.2f} | {_fmt(f['log_likelihood'])} | "
            f"{100 * f['linalg_fraction']:.0f} % | {f['peak_rss_mb']:.0f} |"
        )
    lines += [
        "",
        f"Growth exponent: **{fit_exp:.2f}**.",
        "",
        "## Restarts (`benchmarks/scripts/core.py: restart_strategies`, airline, "
        "`LIN*PER*SE + LIN*SE`, R = 8, same initialisations)",
        "",
    ]
    if "error" in restart:
        lines.append(f"Not measured: {restart['error']}")
    else:
        lines += [
            "| strategy | seconds | best log-likelihood | time vs prolas |",
            "|---|---|---|---|",
            f"| prolas fit: screen every restart, polish the best 2 | {restart['prolas_s']:.2f} "
            f"| {restart['prolas_ll']:.2f} | 1.0 |",
            f"| every restart to convergence | {restart['all_s']:.2f} | "
            f"{restart['all_best_ll']:.2f} | {restart['all_s'] / restart['prolas_s']:.1f}x |",
        ]
    lines += [
        "",
        f"## Evaluations per second during a search (`{data}`, budget {search_budget}, "
        f"{restarts} restart(s) per fit, no fit cache, one process)",
        "",
        "| method | evaluations | wall s | fitting s | strategy s | evaluations / s "
        "| best | peak RSS (MB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in searches:
        if "error" in s:
            lines.append(f"| {s['method']} | not run: {s['error']} | | | | | | |")
            continue
        lines.append(
            f"| {s['method']} | {s['evaluations']} | {s['wall_seconds']:.1f} | "
            f"{s['fit_seconds']:.1f} | {s['strategy_seconds']:.1f} | "
            f"{s['evals_per_second']:.3f} | `{s['best']}` ({_fmt(s['best_bic'])}) | "
            f"{s['peak_rss_mb']:.0f} |"
        )
    lines += [
        "",
        "Strategy seconds = wall time minus time inside the GP scorer: the search's own "
        "cost (for PROLAS: loading the KG-VAE, surrogate fits, acquisition optimisation, "
        "decoding; for CKS: nearly nothing).",
    ]
    path = out / "PERFORMANCE.md"
    path.write_text("\n".join(lines) + "\n")
    payload = {
        "pipelines": pipelines,
        "pipeline_growth_exponent": pipe_exp,
        "fits": fits,
        "fit_growth_exponent": fit_exp,
        "restarts": restart,
        "searches": searches,
    }
    (out / "performance.json").write_text(json.dumps(_json_safe(payload), indent=1) + "\n")
    return path


# --- notebook helpers ----------------------------------------------------------------------


@dataclass
class FractionResult:
    """The model a search proposes from the first ``fraction`` of a series."""

    fraction: float
    train: Dataset
    test: Dataset
    fit: FitResult
    test_mse: float
    base_mse: dict[str, float]
    evaluations: int


def fraction_study(
    dataset: Dataset,
    fractions: Sequence[float] = (0.10, 0.25, 0.50, 0.75),
    *,
    method: str = "prolas",
    budget: int = 20,
    restarts: int = 4,
    seed: int = 0,
    base_kernels: Sequence[str] = ("SE", "LIN", "PER", "RQ"),
) -> list[FractionResult]:
    """The PROLAS paper's Figure 2 experiment: search on the first ``f`` of the series
    (cut on the time range, as :func:`prolas.data.extrapolation_split`), predict the rest;
    test MSE of the proposed model and of each base kernel alone (fitted the same way).
    """
    from prolas.data import extrapolation_split
    from prolas.report import test_metrics

    out = []
    fit_config = FitConfig(restarts=restarts, seed=0)
    for f in fractions:
        train, test = extrapolation_split(dataset, f)
        cfg = SearchConfig(method=method, budget=budget, restarts=restarts, seed=seed)
        scorer = GPScorer(search_data(train, cfg), fit_config)  # what run_search searches
        ev = Evaluator(scorer, budget=budget)
        result, best = run_search(train, cfg, evaluator=ev)
        if best is None:
            raise ProlasError(f"every evaluation failed on the first {f:.0%} of the series")
        mse = test_metrics(best, train, test)["rmse"] ** 2
        base = {}
        for b in base_kernels:
            hit = ev.lookup(b)
            bf = hit.fit if hit is not None and isinstance(hit.fit, FitResult) else None
            bf = bf or fit_gp(b, train, fit_config)
            base[b] = test_metrics(bf, train, test)["rmse"] ** 2 if bf.ok else math.nan
        out.append(FractionResult(f, train, test, best, mse, base, result.evaluations))
    return out


def plot_fraction_study(
    results: Sequence[FractionResult], path: str | Path | None = None
) -> Path | None:
    """Figure 2 of the PROLAS paper: one fit panel per fraction, then the test MSE of
    the proposed model against each base kernel (log scale)."""
    from prolas.gp import predict
    from prolas.report import _pyplot

    plt = _pyplot()
    k = len(results)
    ncol = 3
    nrow = math.ceil((k + 1) / ncol)
    fig, grid = plt.subplots(nrow, ncol, figsize=(12, 3.3 * nrow), squeeze=False)
    axes = list(grid.ravel())
    for ax in axes[k + 1 :]:
        ax.axis("off")
    for ax, r in zip(axes, results):
        full_x = np.concatenate([r.train.x, r.test.x])
        xs = np.linspace(full_x[0], full_x[-1], 300)
        mean, var = predict(r.fit, r.train, xs, include_noise=True)
        sd = np.sqrt(var)
        ax.fill_between(xs, mean - 1.96 * sd, mean + 1.96 * sd, color="C0", alpha=0.2)
        ax.plot(xs, mean, color="C0", lw=1.2)
        ax.plot(r.train.x, r.train.y, "k.", ms=2)
        ax.plot(r.test.x, r.test.y, ".", color="C3", ms=2)
        ax.axvline(r.train.x[-1], color="0.6", ls="--", lw=0.8)
        ax.set_title(f"{r.fraction:.0%}: {r.fit.expression}", fontsize=8)
        ax.tick_params(labelsize=7)
        lo, hi = float(np.min(full_x.min())), float(full_x.max())
        ax.set_xlim(lo, hi)
        yl = np.concatenate([r.train.y, r.test.y])
        pad = 0.3 * float(np.ptp(yl))
        ax.set_ylim(float(yl.min()) - pad, float(yl.max()) + pad)
    ax = axes[k]
    fr = [r.fraction for r in results]
    ax.plot(fr, [r.test_mse for r in results], "o-", color="k", lw=2, label="proposed")
    for i, b in enumerate(results[0].base_mse):
        ax.plot(fr, [r.base_mse[b] for r in results], "s--", color=f"C{i + 1}", lw=1, label=b)
    ax.set_yscale("log")
    ax.set_xlabel("fraction of the series used for training")
    ax.set_ylabel("test MSE")
    ax.legend(fontsize=7, frameon=False)
    ax.set_title("test MSE", fontsize=9)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=90)
    plt.close(fig)
    return Path(path) if path is not None else None


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
            cell, _, _ = _run_cell(dataset, spec, seed, config, scorer)  # type: ignore[arg-type]
            cell["dataset"] = dataset.name
            cells.append(cell)
    return cells


class _MemoryCache:
    """The CachedScorer interface (``misses``) without a file."""

    def __init__(self, scorer: GPScorer) -> None:
        self.scorer = scorer
        self.table: dict[str, Score] = {}
        self.misses = 0

    def __call__(self, expr) -> Score:
        key = str(expr)
        if key not in self.table:
            self.misses += 1
            self.table[key] = self.scorer(expr)
        return self.table[key]


def load_bench(out: str | Path) -> tuple[list[dict], pd.DataFrame | None]:
    """Cell records and summary.csv (if any) of a bench output directory."""
    out = Path(out)
    summary = pd.read_csv(out / "summary.csv") if (out / "summary.csv").exists() else None
    return load_cells(out), summary


def default_method(preferred: str = "prolas") -> str:
    """``preferred`` if it can run here, else ``"cks"``: PROLAS needs a shipped KG-VAE
    checkpoint (``prolas checkpoints``); notebooks use this to stay runnable."""
    if preferred != "prolas":
        return preferred
    from prolas.vae import list_checkpoints

    shipped = {c["name"] for c in list_checkpoints()}
    return "prolas" if DEFAULT_CHECKPOINT in shipped else "cks"


def fraction_table(results: Sequence[FractionResult]) -> pd.DataFrame:
    """One row per training fraction: model found, evaluations, test MSE of the model and
    of each base kernel alone."""
    rows = []
    for r in results:
        row = {
            "train %": round(100 * r.fraction),
            "n_train": r.train.n,
            "n_test": r.test.n,
            "expression": r.fit.expression,
            "evaluations": r.evaluations,
            "test_mse": r.test_mse,
        }
        row.update({f"test_mse_{b}": v for b, v in r.base_mse.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def load_extrapolation_fit(
    out: str | Path,
    dataset: str,
    method: str | Sequence[str],
    seed: int = 0,
    data_dir: str | Path = "data",
) -> tuple[str, FitResult, Dataset, Dataset]:
    """A committed extrapolation result: ``(method, final model, train, test)`` of the
    first of ``method`` (a name or a preference list) with a result for ``dataset``.
    Predict with ``prolas.gp.predict(fit, train, x)``."""
    names = [method] if isinstance(method, str) else list(method)
    for name in names:
        path = _cell_path(Path(out), dataset, name, seed)
        if not path.exists():
            continue
        cell = json.loads(path.read_text())
        if not cell.get("test"):
            continue
        train = _load(Path(data_dir) / f"{dataset}_train.csv")
        test = _load(Path(data_dir) / f"{dataset}_test.csv")
        return name, FitResult.from_json(cell["test"]["final"], n=train.n), train, test
    raise ProlasError(
        f"no extrapolation result for {dataset} ({', '.join(names)}) in {out}; "
        "run prolas bench --extrapolation"
    )


def surrogate_regression_markdown(benchmarks: str | Path = "benchmarks") -> str:
    """The committed surrogate-regression table (``benchmarks/results/surrogate_regression/
    regression.md``, written by ``benchmarks/scripts/surrogate_regression.py``) as markdown;
    says so plainly if it has not been committed."""
    path = Path(benchmarks) / "results" / "surrogate_regression" / "regression.md"
    if not path.exists():
        return (
            f"*No surrogate-regression table at `{path}` yet (written by "
            "`benchmarks/scripts/surrogate_regression.py`).*"
        )
    return "From `benchmarks/results/surrogate_regression/regression.md`:\n\n" + path.read_text()


def small_png(path: str | Path, width: int = 700, colors: int = 256) -> bytes:
    """A PNG file shrunk for embedding in a notebook: at most ``width`` pixels wide and a
    ``colors``-colour palette (plots have few colours; typically 2-4x smaller)."""
    import io

    from PIL import Image

    im = Image.open(path).convert("RGB")
    if im.width > width:
        im = im.resize((width, round(im.height * width / im.width)), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    im.quantize(colors=colors).save(buf, format="PNG", optimize=True)
    return buf.getvalue()
