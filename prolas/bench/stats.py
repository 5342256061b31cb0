"""Statistics of bench cells: best-BIC traces, mean ± s.e., fits to reach CKS, summaries.

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
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["BUDGETS", "best_traces", "mean_se", "reach", "cks_final_bic", "summarise", "fmt"]

#: Evaluation counts at which the best BIC is reported.
BUDGETS = (10, 25, 50)


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


def mean_se(v: np.ndarray) -> tuple[float, float]:
    """Mean and standard error (sd / sqrt(count), ddof 1) of the finite values of ``v``."""
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan, math.nan
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0
    return float(v.mean()), se


def reach(trace: np.ndarray, target: float) -> float:
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
            m, se = mean_se(tr[:, b - 1])
            row[f"best_at_{b}_mean"], row[f"best_at_{b}_se"] = m, se
        row["evaluations_mean"] = float(np.mean([c["evaluations"] for c in mine]))
        target = cks_final_bic(cells, dataset, budget)
        row["cks_final_bic"] = target
        if target is not None:
            hits = np.array([reach(t, target) for t in tr])
            row["evals_to_cks_median"] = float(np.median(hits)) if hits.size else math.nan
            row["evals_to_cks_never"] = int(np.sum(~np.isfinite(hits)))
        else:
            row["evals_to_cks_median"], row["evals_to_cks_never"] = math.nan, None
        row["fit_seconds_per_seed"] = float(np.mean([c["fit_seconds"] for c in mine]))
        row["strategy_seconds_per_seed"] = float(np.mean([c["strategy_seconds"] for c in mine]))
        row["new_fits"] = int(sum(c["new_fits"] for c in mine))
        rows.append(row)
    return pd.DataFrame(rows)


def fmt(v, digits: int = 2) -> str:
    """A number for a markdown table: ``digits`` decimals, ``-`` for None and non-finite."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{digits}f}"
