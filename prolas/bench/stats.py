"""Statistics of bench cells: the one implementation behind ``prolas bench`` and
``prolas compare`` (a comparison is a grid on one data set).

Per data set x method, over its cells (seeds) s = 1..S, with ``b_s(n)`` the best BIC
among the first n unique evaluations of seed s (:func:`cell_trace`, from
:func:`prolas.records.best_so_far`; NaN before the first success, and a search that
stopped early keeps its final value):

* **best BIC at n** for n = 10, 25, 50 below the budget and at the budget: mean,
  standard error (sd with ddof 1 / sqrt(S'), over the S' seeds with a finite value; NaN
  when S' < 2, as one value has no spread) and median (:func:`mean_se`,
  :func:`median`);
* **CKS's final BIC** on the data set: the mean over the ``cks`` cells (or another
  ``reference`` column, e.g. ``cks:change``) of ``b_s(budget)`` (:func:`cks_final_bic`;
  CKS is deterministic, so all its seeds agree);
* **evaluations to reach CKS's final BIC**: ``min{n : b_s(n) >= BIC_CKS - TOL}``
  (:func:`reach`, :data:`TOL` = 1e-6: BICs closer than that count as equal, since
  scores from one fit cache are bit-identical and only the mean over CKS seeds can
  differ in the last bit); median over seeds, a seed that never reaches it counting as
  +inf, and how many seeds never do; the ``cks`` cells' own median (the evaluations CKS
  needed) and the ratio of the two;
* **seconds per seed**: fit seconds (the recorded fit times of the seed's history: the
  original fit's time, also for cache hits), strategy seconds (wall time of the search
  minus the time spent scoring: the proposal overhead) and wall seconds; new fits
  (summed over seeds).

:func:`summarise` computes all of them; the grid's ``summary.csv`` and compare's
``summary.csv`` are two selections of its columns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from prolas.records import best_so_far

__all__ = [
    "BUDGETS",
    "TOL",
    "marks",
    "cell_trace",
    "best_traces",
    "mean_se",
    "mean_se_curve",
    "median",
    "reach",
    "cks_final_bic",
    "summary_rows",
    "summarise",
    "fmt",
]

#: Evaluation counts at which the best BIC is reported (those below the budget, and the
#: budget itself).
BUDGETS = (10, 25, 50)

#: Two BICs closer than this count as equal ("reaches CKS's final BIC").
TOL = 1e-6


def marks(budget: int, budgets: Sequence[int] = BUDGETS) -> list[int]:
    """The evaluation counts of a summary: ``budgets`` below ``budget``, then ``budget``."""
    return [b for b in budgets if b < budget] + [budget]


def cell_trace(cell: dict, length: int) -> np.ndarray:
    """Best BIC after n = 1..length unique evaluations of one cell's history.

    :func:`prolas.records.best_so_far` of the history's BICs (a failed entry counts as
    no score), with NaN before the first success; a search that stopped before
    ``length`` keeps its final value.
    """
    history = cell["history"][:length]
    trace = best_so_far(h["bic"] if h["status"] == "ok" else None for h in history)
    trace += [trace[-1] if trace else -math.inf] * (length - len(trace))
    out = np.array(trace, dtype=np.float64)
    out[~np.isfinite(out)] = np.nan
    return out


def best_traces(cells: Sequence[dict], dataset: str, method: str, length: int) -> np.ndarray:
    """``seeds x length``: :func:`cell_trace` of every cell of (dataset, method)."""
    out = [
        cell_trace(c, length) for c in cells if c["dataset"] == dataset and c["method"] == method
    ]
    return np.array(out, dtype=np.float64).reshape(-1, length)


def mean_se(v: np.ndarray) -> tuple[float, float]:
    """Mean and standard error (sd with ddof 1 / sqrt(count)) of the finite values of
    ``v``; the mean is NaN without any, the standard error NaN with fewer than two."""
    v = np.asarray(v, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan, math.nan
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan
    return float(v.mean()), se


def mean_se_curve(traces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`mean_se` of every column of a ``seeds x n`` array of traces."""
    stats = np.array([mean_se(traces[:, j]) for j in range(traces.shape[1])], dtype=np.float64)
    stats = stats.reshape(traces.shape[1], 2)
    return stats[:, 0], stats[:, 1]


def median(v: np.ndarray) -> float:
    """Median of the finite values of ``v`` (NaN without any)."""
    v = np.asarray(v, dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(np.median(v)) if v.size else math.nan


def reach(trace: np.ndarray, target: float) -> float:
    """First 1-based n with ``trace[n-1] >= target - TOL`` (+inf if never)."""
    hit = np.flatnonzero(np.nan_to_num(trace, nan=-np.inf) >= target - TOL)
    return float(hit[0] + 1) if hit.size else math.inf


def _median_reach(traces: np.ndarray, target: float) -> float:
    """Median over seeds of :func:`reach` (a seed that never reaches counts as +inf)."""
    hits = np.array([reach(t, target) for t in traces])
    return float(np.median(hits)) if hits.size else math.nan


def cks_final_bic(
    cells: Sequence[dict], dataset: str, budget: int, reference: str = "cks"
) -> float | None:
    """Mean over CKS seeds of CKS's final best BIC (CKS is deterministic: all equal).

    ``reference`` is the CKS column that sets the target: ``cks`` (plain CKS, the grids'
    label) or ``cks:change`` (with the change rules: what ``prolas fit --search cks``
    runs).
    """
    tr = best_traces(cells, dataset, reference, budget)
    if tr.size == 0:
        return None
    v = tr[:, -1]
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else None


def summary_rows(
    cells: Sequence[dict], budget: int, budgets: Sequence[int] = BUDGETS, reference: str = "cks"
) -> list[dict]:
    """One row per (data set, method) in sorted order, with every statistic of the module
    docstring as plain Python numbers.

    Columns: ``dataset``, ``method``, ``seeds``, ``budget``; ``best_at_<n>_mean``,
    ``best_at_<n>_se`` and ``best_at_<n>_median`` for n in :func:`marks`;
    ``evaluations_mean``; ``cks_final_bic`` (None without CKS cells); then
    ``evals_to_cks_median`` (float, inf when more than half the seeds never reach it),
    ``evals_to_cks_never``, ``cks_evals`` (the CKS cells' own median) and
    ``evals_to_cks_ratio`` (inf when the median is), all NaN/None without a CKS target;
    ``fit_seconds_per_seed``, ``strategy_seconds_per_seed``, ``wall_seconds_per_seed``,
    ``new_fits``. "CKS" is the ``reference`` column (:func:`cks_final_bic`).
    """
    at = marks(budget, budgets)
    rows = []
    for dataset in sorted({c["dataset"] for c in cells}):
        target = cks_final_bic(cells, dataset, budget, reference)
        cks_evals = math.nan
        if target is not None:
            cks_evals = _median_reach(best_traces(cells, dataset, reference, budget), target)
        for method in sorted({c["method"] for c in cells if c["dataset"] == dataset}):
            mine = [c for c in cells if c["dataset"] == dataset and c["method"] == method]
            tr = best_traces(cells, dataset, method, budget)
            row: dict = {"dataset": dataset, "method": method, "seeds": len(mine), "budget": budget}
            for b in at:
                m, se = mean_se(tr[:, b - 1])
                row[f"best_at_{b}_mean"], row[f"best_at_{b}_se"] = m, se
                row[f"best_at_{b}_median"] = median(tr[:, b - 1])
            row["evaluations_mean"] = float(np.mean([c["evaluations"] for c in mine]))
            row["cks_final_bic"] = target
            if target is not None:
                med = _median_reach(tr, target)
                row["evals_to_cks_median"] = med
                row["evals_to_cks_never"] = int(sum(math.isinf(reach(t, target)) for t in tr))
                row["cks_evals"] = cks_evals
                row["evals_to_cks_ratio"] = (
                    med / cks_evals if cks_evals and math.isfinite(med) else math.inf
                )
            else:
                row["evals_to_cks_median"], row["evals_to_cks_never"] = math.nan, None
                row["cks_evals"], row["evals_to_cks_ratio"] = math.nan, math.nan
            row["fit_seconds_per_seed"] = float(np.mean([c["fit_seconds"] for c in mine]))
            row["strategy_seconds_per_seed"] = float(np.mean([c["strategy_seconds"] for c in mine]))
            row["wall_seconds_per_seed"] = float(np.mean([c["wall_seconds"] for c in mine]))
            row["new_fits"] = int(sum(c["new_fits"] for c in mine))
            rows.append(row)
    return rows


def summarise(
    cells: Sequence[dict], budget: int, budgets: Sequence[int] = BUDGETS, reference: str = "cks"
) -> pd.DataFrame:
    """:func:`summary_rows` as a DataFrame (one row per data set x method)."""
    return pd.DataFrame(summary_rows(cells, budget, budgets, reference))


def fmt(v, digits: int = 2) -> str:
    """A number for a markdown table: ``digits`` decimals, ``-`` for None and non-finite."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{digits}f}"
