"""Would a similarity-weighted warm start beat the uniform portfolio? (Offline, no GP fits.)

Feurer et al. (2015) warm-start BO with the best configurations of the *most similar*
datasets by meta-features; :mod:`prolas.search.portfolio` instead covers all library
series equally. This script measures, from the shipped library alone, how good each
series' first k warm-start expressions are when that series is left out:

* meta-features of each series (the thinning ``prolas bench`` searched, standardised y,
  inputs scaled to [0, 1]), fixed before looking at any result: trend (R^2 of a line),
  curvature (extra R^2 of a quadratic), seasonality (share of the detrended residual's
  periodogram power in its highest peak and its two neighbours, periods shorter than a
  third of the span), amplitude growth (log ratio of residual std, second half over first),
  roughness (var of residual differences / 2: ~1 for white noise, ~0 for smooth);
* series distance: Euclidean on features divided by their std over the 9 series;
* schemes: ``uniform`` (the shipped rule), ``tau T`` (coverage with series weights
  ``exp(-dist / T)``), ``knn K`` (coverage over the K nearest series only);
* score of a series: rank percentile, among the library's expressions on that series, of
  the best of the first k picks (1 = the library's best on it).

Schemes are compared on the 7 tuning series (airline and mauna are the test series);
their airline and mauna scores are printed for information only, with the best BIC each
scheme's first picks reach there and where the library expressions that reach CKS's final
BIC stand in the uniform order.

    .venv/bin/python benchmarks/scripts/portfolio_similarity.py \\
        > benchmarks/results/portfolio_similarity/portfolio_similarity.md
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from prolas.bench import thin
from prolas.data import load_csv
from prolas.search.portfolio import BenchmarkScores

DATA = Path(__file__).resolve().parents[2] / "data"
TEST_SERIES = ("airline", "mauna")
FEATURES = ("trend", "curvature", "seasonality", "amplitude growth", "roughness")
SCHEMES = ("uniform", "tau0.5", "tau1", "tau2", "tau4", "knn1", "knn2", "knn3")
KS = (5, 8, 10)
#: CKS's final BIC on the test series (results/search_airline/summary.md and
#: results/search_other_series/summary.md when this was written;
#: airline's 118.82 is 118.815 unrounded)
CKS_FINAL = {"airline": 118.815, "mauna": 460.64}


def meta_features(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The five meta-features of the module docstring for inputs ``x`` and targets ``y``
    (both shape ``(n,)``); returns shape ``(5,)``."""
    o = np.argsort(x)
    x, y = x[o], (y[o] - y.mean()) / y.std()
    u = (x - x[0]) / (x[-1] - x[0])
    r1 = y - np.polyval(np.polyfit(u, y, 1), u)
    r2 = y - np.polyval(np.polyfit(u, y, 2), u)
    trend = 1.0 - r1.var() / y.var()
    curvature = (r1.var() - r2.var()) / y.var()
    r = r2 / r2.std()
    power = np.abs(np.fft.rfft(r)[1:]) ** 2  # frequencies 1, 2, ... cycles per span
    power[:2] = 0.0  # periods longer than a third of the span are trend, not season
    peak = int(np.argmax(power))
    seasonality = power[max(peak - 1, 0) : peak + 2].sum() / power.sum()
    half = len(r2) // 2
    amplitude = np.log(r2[half:].std() / r2[:half].std())
    roughness = np.var(np.diff(r)) / 2.0
    return np.array([trend, curvature, seasonality, amplitude, roughness])


def main() -> None:
    lib = BenchmarkScores.load()
    series = list(lib.series)
    feats = {}
    for s in series:
        ds = thin(load_csv(DATA / f"{s}.csv"), 200)
        feats[s] = meta_features(np.asarray(ds.x, float), np.asarray(ds.y, float))
    scale = np.array(list(feats.values())).std(axis=0)

    def dist(a: str, b: str) -> float:
        return float(np.linalg.norm((feats[a] - feats[b]) / scale))

    print("# Similarity-weighted warm start (offline)\n")
    usage = __doc__.strip().split("\n\n")[-1].splitlines()  # the command (backslash-continued)
    command = " ".join(line.strip().rstrip("\\").strip() for line in usage)
    print(f"Command: `{command}`\n")
    print("## Meta-features\n")
    print("| series | " + " | ".join(FEATURES) + " | nearest |")
    print("|---|" + "---|" * (len(FEATURES) + 1))
    for s in series:
        near = min((t for t in series if t != s), key=lambda t: dist(s, t))
        print(f"| {s} | " + " | ".join(f"{v:.3f}" for v in feats[s]) + f" | {near} |")

    print("\n## Best of the first k warm-start expressions, left-out series\n")
    print(
        "Rank percentile among the library's expressions on the left-out series (1 = the "
        "library's best on it). Tuning: mean over the 7 tuning series; airline and mauna "
        "for information only.\n"
    )
    head = "k = " + " / ".join(map(str, KS))
    print(f"| scheme | tuning series, {head} | airline, {head} | mauna, {head} |")
    print("|---|" + "---|" * 3)
    test_best: dict[str, dict[str, list[float]]] = {}
    for scheme in SCHEMES:
        pct: dict[str, list[float]] = {}
        for t in series:
            others = [s for s in series if s != t]
            if scheme == "uniform":
                w = dict.fromkeys(others, 1.0)
            elif scheme.startswith("tau"):
                w = {s: float(np.exp(-dist(t, s) / float(scheme[3:]))) for s in others}
            else:
                near = sorted(others, key=lambda s: dist(t, s))[: int(scheme[3:])]
                w = {s: 1.0 if s in near else 1e-9 for s in others}
            picks = lib.select(max(KS), (t,), weights=w)
            col = lib.bic[:, series.index(t)]
            scored = col[np.isfinite(col)]
            pct[t] = [float((scored < np.nanmax(col[picks[:k]])).mean()) for k in KS]
            if t in TEST_SERIES:
                test_best.setdefault(scheme, {})[t] = [float(np.nanmax(col[picks[:k]])) for k in KS]
        tuning = np.mean([pct[t] for t in series if t not in TEST_SERIES], axis=0)

        def cells(v) -> str:
            return " / ".join(f"{x:.3f}" for x in v)

        print(f"| `{scheme}` | {cells(tuning)} | {cells(pct['airline'])} | {cells(pct['mauna'])} |")

    print("\n## Test series: best BIC of the first k picks, and CKS's final BIC\n")
    print(f"| scheme | airline, {head} | mauna, {head} |")
    print("|---|---|---|")
    for scheme, best in test_best.items():
        row = [" / ".join(f"{v:.2f}" for v in best[t]) for t in TEST_SERIES]
        print(f"| `{scheme}` | " + " | ".join(row) + " |")
    print()
    for t in TEST_SERIES:
        col = lib.bic[:, series.index(t)]
        order = lib.select(len(lib.expressions), (t,))
        at_least = [i for i in order if col[i] >= CKS_FINAL[t]]
        found = ", ".join(
            f"`{lib.expressions[i]}` ({col[i]:g}, position {order.index(i) + 1})" for i in at_least
        )
        print(
            f"- {t}: CKS's final BIC {CKS_FINAL[t]:g}; library expressions at or above it, "
            f"with their position in the uniform order of {len(order)}: {found or 'none'}."
        )


if __name__ == "__main__":
    main()
