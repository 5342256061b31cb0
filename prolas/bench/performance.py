"""Performance: seconds against N, restart strategies, evaluations per second, and the
PROLAS paper's Figure 2 (the model a search proposes from a fraction of a series).

* :func:`run_performance` (``prolas bench --performance``): seconds per evaluation
  against N, the batched-restart speedup (``benchmarks/scripts/core.py``'s measurement),
  evaluations per second during a PROLAS run, the PROLAS strategy's own CPU time per BO
  step (:func:`step_time_summary`), peak memory; every measurement in a fresh process;
  written to ``PERFORMANCE.md`` with the growth exponents (:func:`growth_exponent`).
* :func:`fraction_study`, :func:`fraction_table`, :func:`plot_fraction_study`: search on
  the first 10-75 % of a series and compare the test MSE of the proposed model with each
  base kernel alone.
"""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.bench.cells import cpu_model, json_safe
from prolas.bench.grid import TimedScorer
from prolas.bench.long_series import daily_series, fitted_periods, recovered
from prolas.bench.stats import fmt
from prolas.data import Dataset, load_csv
from prolas.errors import ProlasError
from prolas.expr import parse
from prolas.gp import FitConfig, FitResult, GPScorer, fit_gp
from prolas.limits import EVENLY_SPACED_SHARE, SEARCH_POINTS
from prolas.pipeline import run_search
from prolas.records import write_json
from prolas.search.config import SearchConfig, search_data
from prolas.search.evaluator import Evaluator
from prolas.threads import fit_threads

__all__ = [
    "step_time_summary",
    "synthetic_series",
    "daily_series",
    "growth_exponent",
    "machine_description",
    "measure_pipeline",
    "run_performance",
    "FractionResult",
    "fraction_study",
    "fraction_table",
    "plot_fraction_study",
]


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


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KB on Linux


def _measure_fit(n: int, expression: str, restarts: int) -> dict:
    """Worker: one exact fit at size n (fresh process), with peak memory and the share of
    its time spent in the linear algebra (Cholesky, solves, inverse)."""
    from prolas.gp.gram import linalg_seconds

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


#: The periods :func:`daily_series` plants (decimal years): yearly and weekly.
DAILY_PLANTED = (1.0, 7.0 / 365.25)
#: Wall-clock goals of a default ``prolas fit`` on 2 cores, seconds by N (and 8 GB).
PIPELINE_GOALS = {1000: 240.0, 10_000: 600.0, 100_000: 1800.0}
PIPELINE_MEMORY_GOAL_MB = 8192.0


def _cpu_seconds() -> float:
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def measure_pipeline(n: int, budget: int) -> dict:
    """Worker: a default ``prolas fit`` (search on the view of the long series, refit on
    all n points) on a daily-like synthetic series of n points, in a fresh process: time
    (wall and CPU), memory, what the search saw, whether it recovered the planted
    yearly and weekly periods (within 1 %; :func:`prolas.bench.long_series.recovered`)
    and the search's history."""
    from prolas.report.periods import periods_block
    from prolas.search.config import search_view

    ds = daily_series(n)
    config = SearchConfig(budget=budget)
    view = search_view(ds, config)
    # as prolas fit's in-process evaluator (prolas.pipeline.make_evaluator)
    scorer = GPScorer(search_data(ds, config), config.fit_config, workers=fit_threads())
    timed = TimedScorer(scorer)
    cpu, t = _cpu_seconds(), time.perf_counter()
    result, best = run_search(ds, config, evaluator=Evaluator(timed, budget))
    wall = time.perf_counter() - t
    cpu = _cpu_seconds() - cpu
    block = periods_block(ds, best) if best is not None and best.ok else None
    return {
        "n": n,
        "budget": budget,
        "evaluations": result.evaluations,
        "searched_points": search_data(ds, config).n,
        "evenly_spaced": view.evenly_spaced if view is not None else n,
        "windows": [] if view is None else [w.to_json() for w in view.windows],
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "fit_seconds": timed.seconds,
        "refit": best.approximation or "exact" if best is not None else None,
        "best": best.expression if best is not None else None,
        "status": best.status if best is not None else "no model",
        "planted": list(DAILY_PLANTED),
        "periods": fitted_periods(best),
        "recovered": recovered(best, DAILY_PLANTED),
        "left_out": [] if block is None else block["unexplained"],
        "peak_rss_mb": _peak_rss_mb(),
        # every evaluation, so two runs can be compared fit by fit (the machine's speed
        # varies by 10-20 %: benchmarks/results/long_series/README.md)
        "history": [e.to_json() for e in result.history],
    }


def _say_days(v: float) -> str:
    return f"{365.25 * v:.4g} d"


def _pipeline_row(p: dict) -> str:
    """One row of PERFORMANCE.md's table of default ``prolas fit`` runs."""
    windows = p.get("windows", [])
    seen = f"{p['evenly_spaced']} evenly spaced"
    if windows:
        seen += " + " + ", ".join(
            f"{w['n']} in a window for {_say_days(w['period'])}" for w in windows
        )
    got = ", ".join(
        f"{_say_days(q)} {'yes' if ok else 'no'}" for q, ok in zip(p["planted"], p["recovered"])
    )
    goal = PIPELINE_GOALS.get(p["n"])
    met = "-"
    if goal is not None:
        ok = p["wall_seconds"] <= goal and p["peak_rss_mb"] <= PIPELINE_MEMORY_GOAL_MB
        met = f"{'met' if ok else 'missed'} (≤ {goal / 60:.0f} min, ≤ 8 GB)"
    left = ", ".join(_say_days(v) for v in p.get("left_out", [])) or "none"
    return (
        f"| {p['n']} | {seen} | {p['wall_seconds']:.0f} | {p['cpu_seconds']:.0f} | "
        f"{p['fit_seconds']:.0f} | {p['refit']} ({p['status']}) | `{p['best']}` | {got} | "
        f"{left} | {p['peak_rss_mb']:.0f} | {met} |"
    )


def growth_exponent(sizes: Sequence[float], seconds: Sequence[float]) -> float:
    """Least-squares slope of log(seconds) against log(N): cost grows as N^slope."""
    ok = [(n, s) for n, s in zip(sizes, seconds) if n > 0 and s > 0]
    if len(ok) < 2:
        return math.nan
    logn, logs = np.log([n for n, _ in ok]), np.log([s for _, s in ok])
    return float(np.polyfit(logn, logs, 1)[0])


def source_checkout() -> Path:
    """The repository this package runs from when it holds ``benchmarks/scripts/core.py``
    (a source checkout, installed editable or on ``PYTHONPATH``), so the restart table
    does not depend on the working directory; else the working directory."""
    here = Path(__file__).resolve().parents[2]
    if (here / "benchmarks" / "scripts" / "core.py").is_file():
        return here
    return Path.cwd().resolve()


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


def step_time_summary(step_ms: Sequence[float], kinds: Sequence[str] = ()) -> dict:
    """Median, 90th percentile (linear interpolation) and mean of a search's strategy
    milliseconds per BO step (``SearchResult.extra["step_ms"]``), and the step count;
    NaN without steps. With the steps' ``kinds`` (``extra["step_kinds"]``), also
    ``by_kind``: each kind's step count, median and mean. The default search alternates
    incumbent steps (a few dozen candidates) and whole-pool steps (hundreds) whose times
    differ several-fold, so the overall median falls between the two groups and moves
    with their proportions; the kinds say which is which."""
    x = np.asarray(step_ms, dtype=np.float64)
    if not len(x):
        return {"steps": 0, "median_ms": math.nan, "p90_ms": math.nan, "mean_ms": math.nan}
    out = {
        "steps": len(x),
        "median_ms": float(np.median(x)),
        "p90_ms": float(np.quantile(x, 0.9)),
        "mean_ms": float(x.mean()),
    }
    if len(kinds) == len(x):
        labels = np.asarray(kinds)
        out["by_kind"] = {
            kind: {
                "steps": int((labels == kind).sum()),
                "median_ms": float(np.median(x[labels == kind])),
                "mean_ms": float(x[labels == kind].mean()),
            }
            for kind in dict.fromkeys(kinds)
        }
    return out


def _measure_search(data: str, method: str, budget: int, restarts: int) -> dict:
    """Worker: one search without any cache; evaluations per second and peak memory; for
    PROLAS also its own CPU time per BO step (:func:`step_time_summary`)."""
    import torch

    torch.set_num_threads(1)
    ds = load_csv(data)
    fit_gp("LIN*PER*SE + LIN*SE", synthetic_series(50), FitConfig(restarts=2))  # warm-up
    timed = TimedScorer(GPScorer(search_data(ds, SearchConfig()), FitConfig(restarts=restarts)))
    ev = Evaluator(timed, budget=budget)
    t = time.perf_counter()
    try:
        result, best = run_search(ds, SearchConfig(method=method, budget=budget), evaluator=ev)
    except (ProlasError, ImportError) as exc:
        return {"method": method, "error": f"{type(exc).__name__}: {exc}"}
    wall = time.perf_counter() - t
    return {
        "method": method,
        "searched_points": search_data(ds, SearchConfig()).n,
        "step_time": step_time_summary(
            result.extra.get("step_ms", []), result.extra.get("step_kinds", ())
        ),
        "initial_design_ms": result.extra.get("initial_design_ms"),
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

    cpu = cpu_model()
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GB"
                break
    except OSError:
        pass
    loads = os.getloadavg() if hasattr(os, "getloadavg") else None
    load = "?" if loads is None else ", ".join(f"{v:.1f}" for v in loads)
    # the 1-minute load of a quiet machine is below one core's worth of work
    if loads is not None and loads[0] >= 0.5:
        load += " (other jobs were running, so absolute times are pessimistic)"
    import gpytorch

    return [
        f"- CPU: {cpu}, {os.cpu_count()} logical cores; memory {mem}; no GPU",
        f"- {platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"torch {torch.__version__} (CPU, 1 thread per process), gpytorch {gpytorch.__version__}",
        f"- load average when the run started (1/5/15 min): {load}",
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
    repo: str | Path | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Measure and write ``OUT/PERFORMANCE.md``; each measurement in a fresh process.

    1. a default ``prolas fit`` (``pipeline_budget`` fits) against N (``pipeline_sizes``):
       seconds, peak memory and the growth exponent;
    2. one exact fit against N (``sizes``): seconds, share of the linear algebra, exponent;
    3. restart strategies on airline (``benchmarks/scripts/core.py``);
    4. evaluations per second of PROLAS and CKS searches on ``data``, and the PROLAS
       strategy's own CPU milliseconds per BO step (median, p90).
    """
    log = log or (lambda s: None)
    if not Path(data).is_file():  # before an hour of measurements, not after
        raise ProlasError(f"{data}: file not found (the searches' data; see --data-dir)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    expression = str(parse(expression))
    machine = machine_description()
    from prolas.progress import progress_bar

    total = len(pipeline_sizes) + len(sizes) + 3
    bar = progress_bar(total, unit="step", desc="performance", shown=progress)
    pipelines = []
    for n in pipeline_sizes:
        bar.set_postfix_str(f"prolas fit N={n}")
        pipelines.append(_in_subprocess(measure_pipeline, int(n), pipeline_budget))
        log(f"N={n}: {pipelines[-1]['wall_seconds']:.0f} s, {pipelines[-1]['peak_rss_mb']:.0f} MB")
        bar.update(1)
    fits = []
    for n in sizes:
        bar.set_postfix_str(f"fit N={n}")
        fits.append(_in_subprocess(_measure_fit, int(n), expression, restarts))
        bar.update(1)
    bar.set_postfix_str("restarts")
    try:
        restart = _in_subprocess(_measure_restarts, str(Path(repo or source_checkout())), 8)
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
        f"noise). A series longer than {SEARCH_POINTS} points is searched on its view of "
        f"{SEARCH_POINTS} points: evenly spaced ones and a dense window for each significant "
        "period of the whole series they cannot resolve, the evenly spaced points making room "
        f"for the windows down to {math.ceil(EVENLY_SPACED_SHARE * SEARCH_POINTS)} "
        "(docs/long-series.md); the best model is then refitted on all N "
        "points (exact up to the refit limit, else SGPR). Planted periods: whether the best "
        "model has a periodic factor within 1 % of the planted yearly (365.25 d) and weekly "
        "(7 d) cycles. Left out: significant periods of the whole series the best model "
        "does not explain (report.md's words). Seconds: wall clock and CPU (user + system) "
        "of the process; peak RSS: its maximum resident memory; goal: the wall-clock and "
        "memory goal of that N on 2 cores.",
        "",
        "| N | searched on | wall s | CPU s | of which fitting | refit | best "
        "| planted periods recovered | left out | peak RSS (MB) | goal |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_pipeline_row(p) for p in pipelines]
    lines += [
        "",
        f"Growth exponent (slope of log seconds against log N): **{pipe_exp:.2f}**.",
        "",
        f"## One exact fit against N (`{expression}`, {restarts} restart(s))",
        "",
        "Synthetic series on a fixed span (`prolas.bench.synthetic_series`). The fit screens "
        "every restart on at most 200 evenly spaced points, then polishes the best 2 on all "
        "N. Linear algebra: the share of the fit's time inside the Cholesky factorisation, "
        "the solves and the inverse (`prolas.gp.gram`).",
        "",
        "| N | seconds | log-likelihood | linear algebra | peak RSS (MB) |",
        "|---|---|---|---|---|",
    ]
    for f in fits:
        lines.append(
            f"| {f['n']} | {f['seconds']:.2f} | {fmt(f['log_likelihood'])} | "
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
            f"{s['evals_per_second']:.3f} | `{s['best']}` ({fmt(s['best_bic'])}) | "
            f"{s['peak_rss_mb']:.0f} |"
        )
    lines += [
        "",
        "Strategy seconds = wall time minus time inside the GP scorer: the search's own "
        "cost (for PROLAS: loading the KG-VAE, surrogate fits, acquisition optimisation, "
        "decoding; for CKS: nearly nothing).",
        "",
        "## The PROLAS strategy's own time per BO step",
        "",
        "CPU milliseconds of each BO step of the PROLAS search above, less the time inside "
        "the Evaluator (`SearchResult.extra['step_ms']`: surrogate fit, candidate pool, "
        "decoding, OT distances, acquisition; not the GP fits). Process CPU time, one "
        "torch thread, so other jobs on the cores inflate it less than wall time.",
        "",
        "| N searched | BO steps | strategy ms per BO step, median | p90 | mean "
        "| by kind: steps, median / mean ms | initial design ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in searches:
        st = s.get("step_time")
        if s.get("method") != "prolas" or not st:
            continue
        kinds = "; ".join(
            f"{kind} {k['steps']}, {k['median_ms']:.0f} / {k['mean_ms']:.0f}"
            for kind, k in st.get("by_kind", {}).items()
        )
        lines.append(
            f"| {s['searched_points']} | {st['steps']} | {st['median_ms']:.0f} "
            f"| {st['p90_ms']:.0f} | {st['mean_ms']:.0f} | {kinds} "
            f"| {s['initial_design_ms']:.0f} |"
        )
    lines += [
        "",
        "Incumbent steps rank a best point's grammar edits (a few dozen candidates), pool "
        "steps the whole candidate pool (hundreds of new expressions, each with its OT "
        "distances): the overall median falls between the two groups.",
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
    write_json(out / "performance.json", json_safe(payload), indent=1)
    return path


# --- the fraction study (Figure 2) ------------------------------------------------------------


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
    from prolas.report.figure import subplots

    k = len(results)
    ncol = 3
    nrow = math.ceil((k + 1) / ncol)
    fig, grid = subplots(nrow, ncol, figsize=(12, 3.3 * nrow), squeeze=False)
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
    return Path(path) if path is not None else None


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
