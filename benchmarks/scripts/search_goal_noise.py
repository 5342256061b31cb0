"""How much of the nine-series search goal's verdict is noise (search seeds, fit seeds,
machine type).

The goal: PROLAS's mean best BIC over the search seeds, among the evaluations finished by
CKS's own one-core search time, is at least CKS's final BIC (``search_goals.py``'s "at
CKS's time" column). A *grid* is one machine type and fit seed: one or more folders of
cells, comma-separated, read as ``search_goals.py --compare`` reads them. For every grid
and series:

- ``margin`` = mean over seeds of (best at CKS's time) − CKS's final BIC;
- its percentile bootstrap interval over the search seeds (CKS is deterministic: one
  number per grid) and a verdict — ``level`` (low end ≥ 0), ``below`` (high end < 0) or
  ``noise`` (the interval holds 0);
- ``p_meet``: the share of bootstrap means ≥ 0, the plug-in chance that ten fresh search
  seeds on this grid would put the series at CKS's level.

Per grid with every series, the goal's count and the Poisson-binomial chance of at least
``--need`` series at CKS's level; pooled over the grids, each series' mean ``p_meet`` and
the chance of ``--need`` at one fresh fit seed, and of that at ``--fit-seeds`` fit seeds::

    python benchmarks/scripts/search_goal_noise.py --grid "LABEL=DIR[,DIR...]" ... \\
        --out DIR    # writes DIR/grid_series.csv and DIR/search_goal_noise.md
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_goals import at_cks_time, merged_cells  # noqa: E402

from prolas.bench.paired import RESAMPLES  # noqa: E402
from prolas.bench.stats import TOL, cks_final_bic  # noqa: E402


def margin_interval(
    values: Sequence[float], target: float, level: float = 0.95, seed: int = 0
) -> dict:
    """The margin of the mean of ``values`` over ``target`` with its percentile bootstrap
    interval, verdict and ``p_meet`` (share of resampled means ≥ target − TOL).

    A seed that finished no evaluation by CKS's time scores −inf; it is kept as a very
    bad seed (the mean is −inf) rather than dropped, since it is a search that had nothing
    to show at that time — why this is not :func:`prolas.bench.paired.bootstrap_interval`,
    which drops non-finite values (and gives no ``p_meet``).
    """
    v = np.asarray(values, dtype=np.float64) - target
    if v.size == 0:
        raise ValueError("no search seeds")
    rng = np.random.default_rng(seed)
    with np.errstate(invalid="ignore"):
        means = v[rng.integers(0, v.size, size=(RESAMPLES, v.size))].mean(axis=1)
    tail = 100 * (1 - level) / 2
    low, high = (float(q) for q in np.percentile(means, [tail, 100 - tail], method="nearest"))
    margin = float(v.mean())
    verdict = "level" if low >= -TOL else "below" if high < -TOL else "noise"
    return {
        "margin": margin,
        "low": low,
        "high": high,
        "verdict": verdict,
        "p_meet": float(np.mean(means >= -TOL)),
        "seeds": int(v.size),
        "at_level": margin >= -TOL,
    }


def at_least(p: Sequence[float], k: int) -> float:
    """P(at least ``k`` successes) of independent Bernoulli(p_i) trials (Poisson-binomial,
    by the exact convolution of the counts' distribution)."""
    dist = np.array([1.0])
    for q in p:
        dist = np.convolve(dist, [1.0 - q, q])
    return float(dist[k:].sum()) if k < dist.size else 0.0


def grid_rows(label: str, cells: list[dict], budget: int, method: str, reference: str) -> list:
    """One row per series of a grid holding both ``method`` and ``reference`` cells."""
    rows = []
    for dataset in sorted({c["dataset"] for c in cells}):
        methods = {c["method"] for c in cells if c["dataset"] == dataset}
        if not {method, reference} <= methods:
            continue
        seconds, by_seed = at_cks_time(cells, dataset, budget, method, reference)
        target = cks_final_bic(cells, dataset, budget, reference)
        row = {"grid": label, "dataset": dataset, "cks_final": target, "cks_seconds": seconds}
        row.update(margin_interval([by_seed[s] for s in sorted(by_seed)], target))
        rows.append(row)
    return rows


def _f(x: float) -> str:
    return f"{x:+.2f}" if math.isfinite(x) else ("−inf" if x < 0 else "inf")


def report(rows: list[dict], need: int, fit_seeds: int) -> str:
    """The study's tables as markdown."""
    grids = list(dict.fromkeys(r["grid"] for r in rows))
    series = sorted({r["dataset"] for r in rows})
    by = {(r["grid"], r["dataset"]): r for r in rows}
    out = [
        "## Per grid and series: margin at CKS's time (95 % bootstrap interval), verdict",
        "",
        "| series | " + " | ".join(grids) + " |",
        "|---|" + "---|" * len(grids),
    ]
    for s in series:
        cells = []
        for g in grids:
            r = by.get((g, s))
            cells.append(
                "—"
                if r is None
                else f"{_f(r['margin'])} [{_f(r['low'])}, {_f(r['high'])}] "
                f"{r['verdict']}, p {r['p_meet']:.2f}"
            )
        out.append(f"| {s} | " + " | ".join(cells) + " |")
    out += [
        "",
        "## Per grid holding every series: the goal's count and its chance",
        "",
        f"| grid | at CKS's level | clear (level / below) | inside seed noise "
        f"| P(≥ {need} of {len(series)}) with fresh search seeds |",
        "|---|---|---|---|---|",
    ]
    for g in grids:
        rs = [by[(g, s)] for s in series if (g, s) in by]
        if len(rs) < len(series):
            continue
        n_level = sum(r["verdict"] == "level" for r in rs)
        n_below = sum(r["verdict"] == "below" for r in rs)
        out.append(
            f"| {g} | {sum(r['at_level'] for r in rs)} | {n_level} / {n_below} | "
            f"{len(rs) - n_level - n_below} | {at_least([r['p_meet'] for r in rs], need):.3f} |"
        )
    out += [
        "",
        "## Per series over the grids (fit seeds and machine types pooled)",
        "",
        "| series | grids | at level / below / noise | CKS final BIC range | mean p_meet |",
        "|---|---|---|---|---|",
    ]
    pooled = []
    for s in series:
        rs = [by[(g, s)] for g in grids if (g, s) in by]
        finals = [r["cks_final"] for r in rs]
        p = float(np.mean([r["p_meet"] for r in rs]))
        pooled.append(p)
        counts = " / ".join(
            str(sum(r["verdict"] == v for r in rs)) for v in ("level", "below", "noise")
        )
        out.append(
            f"| {s} | {len(rs)} | {counts} | {min(finals):.2f} … {max(finals):.2f} "
            f"({max(finals) - min(finals):.2f}) | {p:.2f} |"
        )
    one = at_least(pooled, need)
    out += [
        "",
        f"With each series' mean p_meet: P(≥ {need} of {len(series)} at one fresh fit seed) = "
        f"{one:.3f}; at all {fit_seeds} fit seeds (independent) = {one**fit_seeds:.4f}.",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grid", action="append", required=True, help="LABEL=DIR[,DIR...]")
    p.add_argument("--budget", type=int, default=50)
    p.add_argument("--method", default="prolas")
    p.add_argument("--reference", default="cks:change")
    p.add_argument("--need", type=int, default=7, help="series the goal needs (default 7)")
    p.add_argument("--fit-seeds", type=int, default=3, help="fit seeds the goal is judged at")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    rows = []
    for spec in args.grid:
        label, _, dirs = spec.partition("=")
        if not dirs:
            p.error(f"--grid {spec!r}: expected LABEL=DIR[,DIR...]")
        cells = merged_cells([Path(d) for d in dirs.split(",")])
        rows += grid_rows(label, cells, args.budget, args.method, args.reference)
    args.out.mkdir(parents=True, exist_ok=True)
    fields = ["grid", "dataset", "cks_final", "cks_seconds", "seeds", "margin", "low", "high"]
    fields += ["verdict", "p_meet", "at_level"]
    with (args.out / "grid_series.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    text = report(rows, args.need, args.fit_seeds)
    (args.out / "search_goal_noise.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
