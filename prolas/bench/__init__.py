"""``prolas bench`` and ``prolas compare``: search-quality grids, extrapolation,
performance, and method comparisons on one data set (being split into modules)."""

from prolas.bench.compare import CompareResult, run_compare
from prolas.bench.grid import *  # noqa: F403
from prolas.bench.grid import (  # noqa: F401  (used by the tests)
    PROVENANCE_PACKAGES,
    extrapolation_markdown,
    write_bench_outputs,
    write_extrapolation_outputs,
)
from prolas.bench.grid import __all__ as _grid_all

__all__ = [*_grid_all, "CompareResult", "run_compare"]
