"""Core performance figures of Step 1 (issue 2). Not a test: run it and read the table.

    .venv/bin/python benchmarks/scripts/core.py [--quick] \\
        [--out benchmarks/results/fit_core/CORE.md]

Prints (and writes as markdown):
1. seconds per evaluation on data/airline.csv for SE, LIN, PER, RQ and LIN*PER*SE + LIN*SE;
2. restarts: prolas's fit (R restarts screened for 20 iterations, the best 2 polished) vs
   the same R initialisations each optimised to convergence (ratio from the same run, R = 8);
3. the fraction of fit time spent in the linear-algebra floor (Cholesky, solves, inverse);
4. full default CKS on airline and on mauna: best expression, BIC, evaluations, wall time.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from prolas.data import load_csv  # noqa: E402
from prolas.expr import parse  # noqa: E402
from prolas.gp import FitConfig, fit_gp  # noqa: E402
from prolas.gp.gram import GramModel, linalg_seconds  # noqa: E402
from prolas.gp.minimise import minimise  # noqa: E402
from prolas.gp.starts import initial_thetas  # noqa: E402
from prolas.pipeline import run_search  # noqa: E402
from prolas.search.config import SearchConfig  # noqa: E402

torch.set_num_threads(1)


def per_expression(ds, exprs, repeats: int) -> list[tuple[str, float, float]]:
    rows = []
    fit_gp("SE", ds, FitConfig(restarts=2))  # warm-up: first-call imports and allocations
    for e in exprs:
        times, ll = [], None
        for _ in range(repeats):
            t = time.perf_counter()
            fit = fit_gp(e, ds, FitConfig())
            times.append(time.perf_counter() - t)
            ll = fit.log_likelihood
        rows.append((e, float(np.median(times)), ll))
    return rows


def restart_strategies(ds, expr_text: str, R: int) -> dict:
    """Same R initialisations: prolas's fit (screen, polish the best 2) vs every restart
    optimised to convergence."""
    expr = parse(expr_text)
    x0, s = float(ds.x[0]), float(ds.span)
    t = (ds.x - x0) / s
    floor_t = 2.0 * ds.spacing / s
    y = ds.y_standardised.copy()
    cfg = FitConfig(restarts=R, presample=0)  # the R draws themselves are screened
    start = time.perf_counter()
    fit = fit_gp(expr, ds, cfg)
    prolas_s = time.perf_counter() - start
    model = GramModel(expr, t, floor_t)
    thetas = initial_thetas(model, y, floor_t, (cfg.seed, 0), R)  # the fit's first attempt
    start = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):
        lls = [minimise(model, th, y, 1000, cfg.tolerance)[1] for th in thetas]
    return {
        "prolas_s": prolas_s,
        "prolas_ll": fit.log_likelihood,
        "all_s": time.perf_counter() - start,
        "all_best_ll": max(lls),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the CKS runs")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "fit_core" / "CORE.md"))
    args = ap.parse_args()

    airline = load_csv(ROOT / "data" / "airline.csv")
    lines = [
        "# Core performance (issues 2, 16)",
        "",
        f"Machine: {platform.machine()}, {torch.get_num_threads()} torch thread, "
        f"torch {torch.__version__}, Python {platform.python_version()}; float64.",
        "Command: `.venv/bin/python benchmarks/scripts/core.py`",
        "",
        "## Seconds per evaluation, data/airline.csv (N = 144, default 8 restarts)",
        "",
        "| expression | seconds | log-likelihood |",
        "|---|---|---|",
    ]
    exprs = ["SE", "LIN", "PER", "RQ", "LIN*PER*SE + LIN*SE"]
    floor_before = linalg_seconds()
    rows = per_expression(airline, exprs, args.repeats)
    floor_seconds = linalg_seconds() - floor_before
    fit_seconds = sum(r[1] for r in rows) * args.repeats
    for e, sec, ll in rows:
        lines.append(f"| `{e}` | {sec:.2f} | {ll:.2f} |")
    print("\n".join(lines), flush=True)

    res = restart_strategies(airline, "LIN*PER*SE + LIN*SE", 8)
    block = [
        "",
        "## Restarts, R = 8, `LIN*PER*SE + LIN*SE` on airline (same initialisations)",
        "",
        "| strategy | seconds | best log-likelihood | time ratio vs prolas |",
        "|---|---|---|---|",
        f"| prolas: screening (20 it. each) + polish best 2 | {res['prolas_s']:.2f} | "
        f"{res['prolas_ll']:.2f} | 1.0 |",
        f"| each restart to convergence | {res['all_s']:.2f} | "
        f"{res['all_best_ll']:.2f} | {res['all_s'] / res['prolas_s']:.1f}x |",
    ]
    print("\n".join(block), flush=True)
    lines += block

    block = [
        "",
        "## Against the linear-algebra floor (N = 144)",
        "",
        "The floor is the time inside the Cholesky factorisation, the solves and the inverse",
        "K^{-1} (the latter is the backward pass: the gradient is 1/2 tr((aa^T - K^{-1}) dK)),",
        "accumulated by `prolas.gp.gram` during the fits of the table above.",
        "",
        f"Fits: {fit_seconds:.2f} s in all, {floor_seconds:.2f} s of it in the linear algebra: "
        f"a fit costs **{fit_seconds / floor_seconds:.1f}x the floor** "
        f"({100 * floor_seconds / fit_seconds:.0f} % of the time).",
    ]
    print("\n".join(block), flush=True)
    lines += block

    if not args.quick:
        block = [
            "",
            "## Full default CKS (depth 4, budget 50, 8 restarts, 1 process)",
            "",
            "| data | best expression | BIC | evaluations | wall seconds |",
            "|---|---|---|---|---|",
        ]
        for name in ("airline", "mauna"):
            ds = load_csv(ROOT / "data" / f"{name}.csv")
            t = time.perf_counter()
            result, best = run_search(ds, SearchConfig(method="cks"))
            wall = time.perf_counter() - t
            block.append(
                f"| {name} | `{best.expression}` | {best.bic:.2f} | {result.evaluations} | "
                f"{wall:.0f} |"
            )
            print(block[-1], flush=True)
        lines += block
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
