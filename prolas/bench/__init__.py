"""``prolas bench`` and ``prolas compare``: search methods x data sets x seeds.

Four measurements, all through the same code as ``prolas fit``
(:func:`prolas.pipeline.run_search` with an explicit shared Evaluator): search quality
(a grid), held-out extrapolation, performance, and forecasts against the peers users
pick instead. ``prolas compare`` is a grid on one data set with its own tables.

Modules, each importing only those above it:

* :mod:`~prolas.bench.cells`: a cell (one search's record) as a file: paths, writing
  with :func:`prolas.records.write_json`, :func:`load_cells`, :func:`evaluations_frame`,
  ``bench.json`` with the run's provenance; :func:`thin` and the CSV loader.
* :mod:`~prolas.bench.stats`: the statistics of cells: best-BIC traces, mean ± s.e.,
  fits to reach CKS's final BIC, :func:`summarise` (grid and compare alike).
* :mod:`~prolas.bench.grid`: :class:`MethodSpec`, :func:`parse_methods`,
  :func:`parse_datasets`, :class:`BenchConfig`, :func:`run_bench` (the search-quality
  grid), its summary markdown and convergence plots, :func:`run_grid_in_memory`.
* :mod:`~prolas.bench.extrapolation`: :data:`ABCD_RMSE`, :func:`run_extrapolation`,
  its table, standardised RMSE, markdown and plots.
* :mod:`~prolas.bench.performance`: :func:`run_performance` (timings against N,
  growth exponents) and the fraction study (the PROLAS paper's Figure 2).
* :mod:`~prolas.bench.compare`: :func:`run_compare` (``prolas compare``).
* :mod:`~prolas.bench.peers`: statsforecast's AutoETS, AutoARIMA, AutoTheta and
  SeasonalNaive through one adapter (an optional extra, imported only when used).
* :mod:`~prolas.bench.paired`: paired comparisons of two forecasters over series (sign
  test, bootstrap interval of the mean difference, the verdict).
* :mod:`~prolas.bench.forecast_bench`: ``prolas bench --forecast``: the suites (tsdl,
  m3-monthly, m3-monthly-b) and their halves, prolas (through :mod:`prolas.many`) and
  the peers on the same test points, forecast_scores.csv and forecast.md.

The names below are re-exported so that ``from prolas import bench`` reaches them all
(``bench.run_bench``, ``bench.thin``, ``bench.summarise`` ...).
"""

from prolas.bench.cells import (
    EVALUATION_COLUMNS,
    PROVENANCE_PACKAGES,
    evaluations_frame,
    load_cells,
    thin,
)
from prolas.bench.compare import CompareResult, run_compare
from prolas.bench.extrapolation import (
    ABCD_RMSE,
    extrapolation_markdown,
    extrapolation_table,
    plot_standardised_rmse,
    run_extrapolation,
    standardised_rmse,
    write_extrapolation_outputs,
)
from prolas.bench.grid import (
    BASELINES,
    DATASETS,
    BenchConfig,
    BenchRun,
    MethodSpec,
    parse_datasets,
    parse_methods,
    plot_bench_convergence,
    run_bench,
    run_grid_in_memory,
    summary_markdown,
    write_bench_outputs,
)
from prolas.bench.performance import (
    FractionResult,
    daily_series,
    fraction_study,
    fraction_table,
    growth_exponent,
    plot_fraction_study,
    run_performance,
    synthetic_series,
)
from prolas.bench.stats import BUDGETS, best_traces, cks_final_bic, summarise

__all__ = [
    # cells
    "EVALUATION_COLUMNS",
    "PROVENANCE_PACKAGES",
    "evaluations_frame",
    "load_cells",
    "thin",
    # stats
    "BUDGETS",
    "best_traces",
    "cks_final_bic",
    "summarise",
    # grid
    "BASELINES",
    "DATASETS",
    "BenchConfig",
    "BenchRun",
    "MethodSpec",
    "parse_datasets",
    "parse_methods",
    "plot_bench_convergence",
    "run_bench",
    "run_grid_in_memory",
    "summary_markdown",
    "write_bench_outputs",
    # extrapolation
    "ABCD_RMSE",
    "extrapolation_markdown",
    "extrapolation_table",
    "plot_standardised_rmse",
    "run_extrapolation",
    "standardised_rmse",
    "write_extrapolation_outputs",
    # performance
    "FractionResult",
    "daily_series",
    "fraction_study",
    "fraction_table",
    "growth_exponent",
    "plot_fraction_study",
    "run_performance",
    "synthetic_series",
    # compare
    "CompareResult",
    "run_compare",
]
