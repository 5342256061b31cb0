"""Paired comparisons of two forecasters over the same series: is a difference more than
noise?

For a metric and two methods A (prolas) and B (a peer) scored on the same series
i = 1..n, the per-series difference ``d_i`` is defined so that **negative favours A**
(:func:`differences`):

* lower-is-better scores (sMAPE, MASE, scaled interval score, scaled CRPS):
  ``d_i = A_i - B_i``;
* RMSE and seconds, whose scale differs between series: ``d_i = log(A_i / B_i)``;
* the best BIC of a search, where higher is better: ``d_i = B_i - A_i``;
* coverage of the 95 % interval, where nearer 0.95 is better:
  ``d_i = |A_i - 0.95| - |B_i - 0.95|``.

Two summaries of the d_i (:func:`compare`):

* the **sign test**: W series where A is better (d < 0), L where it is worse, ties
  dropped; the two-sided exact binomial p-value of W among W + L under p = ½
  (:func:`sign_test`);
* the **bootstrap interval** of the mean difference: the 2.5 % and 97.5 % percentiles
  of the means of :data:`RESAMPLES` resamples of the series with replacement, with a
  fixed seed (:func:`bootstrap_interval`).

The verdict (:func:`verdict`) needs both to agree: "prolas better" when the whole interval
is below 0 *and* the sign test rejects a tie at :data:`SIGN_LEVEL` with more series better
than worse; "peer better" the other way round; else "no clear difference". With fewer
than six series the sign test cannot reach p < 0.05 (one-sided counts 5 of 5 give
p = 0.0625), so no verdict is drawn from so few, however large the mean.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import binomtest

__all__ = [
    "COVERAGE_TARGET",
    "HIGHER_IS_BETTER_METRICS",
    "LOG_RATIO_METRICS",
    "RESAMPLES",
    "SIGN_LEVEL",
    "bootstrap_interval",
    "compare",
    "differences",
    "sign_test",
    "verdict",
]

#: The sign test's level for a verdict.
SIGN_LEVEL = 0.05

#: Bootstrap resamples of the series.
RESAMPLES = 10_000

#: The nominal coverage of the scored interval.
COVERAGE_TARGET = 0.95

#: Metrics compared by log ratio (their scale differs between series).
LOG_RATIO_METRICS = ("rmse", "seconds", "search_seconds")

#: Metrics where higher is better (compared as B - A, so that negative still favours A).
HIGHER_IS_BETTER_METRICS = ("bic",)


def differences(a: np.ndarray, b: np.ndarray, metric: str) -> np.ndarray:
    """Per-series ``d_i`` of the module docstring (negative favours ``a``)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if metric in LOG_RATIO_METRICS:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(a / b)
    if metric == "coverage":
        return np.abs(a - COVERAGE_TARGET) - np.abs(b - COVERAGE_TARGET)
    if metric in HIGHER_IS_BETTER_METRICS:
        return b - a
    return a - b


def sign_test(d: np.ndarray) -> tuple[int, int, int, float]:
    """``(better, worse, ties, p)``: counts of d < 0, d > 0 and d = 0 over the finite d,
    and the two-sided exact binomial p-value of ``better`` in ``better + worse`` trials
    at ½ (NaN without a non-tied pair)."""
    d = np.asarray(d, dtype=np.float64)
    d = d[np.isfinite(d)]
    better, worse = int((d < 0).sum()), int((d > 0).sum())
    ties = int(d.size - better - worse)
    if better + worse == 0:
        return better, worse, ties, math.nan
    return better, worse, ties, float(binomtest(better, better + worse, 0.5).pvalue)


def bootstrap_interval(
    d: np.ndarray, level: float = 0.95, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of the finite d and the percentile bootstrap
    interval of it (NaNs without values; the interval is the point for one value)."""
    d = np.asarray(d, dtype=np.float64)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(resamples, d.size))].mean(axis=1)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(d.mean()), float(low), float(high)


def verdict(
    low: float,
    high: float,
    better: int,
    worse: int,
    p: float,
    name: str = "prolas",
    other: str = "peer",
) -> str:
    """The verdict of the module docstring from the bootstrap interval ``[low, high]``
    and the sign test (``better``, ``worse``, ``p``)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "no pairs"
    significant = math.isfinite(p) and p < SIGN_LEVEL
    if high < 0 and significant and better > worse:
        return f"{name} better"
    if low > 0 and significant and worse > better:
        return f"{other} better"
    return "no clear difference"


def compare(table: pd.DataFrame, base: str, others: list[str], metrics: list[str]) -> pd.DataFrame:
    """One row per (other method, metric): ``base`` against each of ``others``.

    ``table`` has one row per (series, method) with the metrics as columns (NaN for a
    failed forecast); a pair counts when both methods scored the series. Columns:
    ``peer``, ``metric``, ``difference`` (how d is formed), ``series``, ``better``,
    ``worse``, ``ties``, ``sign_p``, ``mean``, ``low``, ``high``, ``verdict``.
    """
    wide = table.set_index(["series", "method"])[metrics].unstack("method")
    rows = []
    for other in others:
        for metric in metrics:
            if (metric, base) not in wide or (metric, other) not in wide:
                continue
            d = differences(wide[(metric, base)], wide[(metric, other)], metric)
            d = d[np.isfinite(d)]
            better, worse, ties, p = sign_test(d)
            mean, low, high = bootstrap_interval(d)
            how = (
                "log ratio"
                if metric in LOG_RATIO_METRICS
                else "|coverage - 0.95| difference"
                if metric == "coverage"
                else "difference, other minus base"
                if metric in HIGHER_IS_BETTER_METRICS
                else "difference"
            )
            rows.append(
                {
                    "peer": other,
                    "metric": metric,
                    "difference": how,
                    "series": int(d.size),
                    "better": better,
                    "worse": worse,
                    "ties": ties,
                    "sign_p": p,
                    "mean": mean,
                    "low": low,
                    "high": high,
                    "verdict": verdict(low, high, better, worse, p, base, other),
                }
            )
    return pd.DataFrame(rows)
