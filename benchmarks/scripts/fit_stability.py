"""Does a cold fit find the same optimum at every fit seed? And what does a fit cost?

Three subcommands, run in this order:

    # 300 (series, expression) pairs drawn, seeded, from the nine series' fit caches
    python benchmarks/scripts/fit_stability.py draw \\
        benchmarks/results/extrapolation_base_kernels/fits/*.jsonl --n 300 --out EXPRS.json
    # every pair refitted cold at fit seeds 0-4 on the grid's points (the training split,
    # thinned to 400 points), default restarts, lengthscale floor 1; --shard i/k splits the work
    python benchmarks/scripts/fit_stability.py fit EXPRS.json --fit-seeds 0 1 2 3 4 \\
        --out FITS.jsonl [--shard 0/2]
    python benchmarks/scripts/fit_stability.py summarise FITS.jsonl [--tol 0.5]

``--root DIR`` (every subcommand) imports prolas from another checkout, so that today's
fitter and a new one are measured by the same script in the same session.

The summary gives, per series and overall, the share of expressions whose log-likelihoods
over the fit seeds span at most ``--tol`` nats (the fit finds the same optimum whatever
its random starts), the median and largest span, and the median seconds per fit at the
grid's sizes. A fit that failed at some seed counts as not stable.

``reference`` fits DESIGN's airline reference expressions (docs/conventions.md) at fit
seeds 0-4 with the default restarts and prints the log-likelihoods beside the reference.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

#: airline (full series) reference log-likelihoods of an independent fitter, 20 restarts
REFERENCE = {
    "SE": -27.55,
    "LIN": -69.83,
    "PER": -71.91,
    "RQ": -10.33,
    "LIN + PER*SE": 87.99,
    "LIN*PER*SE + LIN*SE": 132.45,
    "PER*RQ + RQ + SE": 130.60,
}


def _import_prolas(root: Path | None) -> None:
    sys.path.insert(0, str(root or ROOT))
    import torch

    torch.set_num_threads(1)


def _grid_points(series: str, data_dir: Path, max_points: int):
    from prolas.bench.cells import load_series, thin

    return thin(load_series(data_dir / f"{series}_train.csv"), max_points)


def cmd_draw(args: argparse.Namespace) -> None:
    """Seeded draw of ``--n`` (series, expression) pairs, as even as possible over series
    (all of a series that has fewer), among the expressions each cache fitted successfully
    (cold, unless ``--include-warm``; with ``--operator``, only those using it)."""
    from prolas.expr import parse
    from prolas.search.cache import cold_row

    per_series: dict[str, list[str]] = {}
    for path in sorted(args.caches):
        exprs = set()
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record["fit"]["status"] == "ok" and (args.include_warm or cold_row(record)):
                expr = str(parse(record["expression"]))
                if args.operator is None or f"{args.operator}(" in expr:
                    exprs.add(expr)
        per_series[path.stem] = sorted(exprs)
    if args.series:
        per_series = {k: v for k, v in per_series.items() if k in args.series}
    if args.exclude:
        taken = {(r["series"], r["expression"]) for r in json.loads(args.exclude.read_text())}
        per_series = {k: [e for e in v if (k, e) not in taken] for k, v in per_series.items()}
    rng = np.random.default_rng(args.seed)
    names = sorted(per_series)
    counts = {s: args.n // len(names) for s in names}
    for s in rng.permutation(names)[: args.n % len(names)]:
        counts[str(s)] += 1
    pairs = []
    for s in names:
        counts[s] = min(counts[s], len(per_series[s]))  # all of a series that has fewer
        chosen = rng.choice(len(per_series[s]), size=counts[s], replace=False)
        pairs += [{"series": s, "expression": per_series[s][int(i)]} for i in sorted(chosen)]
    args.out.write_text(json.dumps(pairs, indent=1) + "\n")
    print(
        f"wrote {len(pairs)} pairs to {args.out}: " + ", ".join(f"{s} {counts[s]}" for s in names)
    )


def _fit_config(seed: int, restarts: int, overrides: dict | None = None):
    from prolas.gp import FitConfig

    settings = {"restarts": restarts, **(overrides or {})}
    return FitConfig(seed=seed, lengthscale_floor=1.0, **settings)


def _variant(text: str) -> tuple[str, dict]:
    """``NAME=JSON`` (FitConfig overrides) or ``NAME`` (the defaults)."""
    name, _, settings = text.partition("=")
    return name, json.loads(settings) if settings else {}


def cmd_fit(args: argparse.Namespace) -> None:
    """Fit every pair of the shard at every fit seed; one JSON line per fit (appended;
    pairs and seeds already in ``--out`` are skipped, so a stopped run resumes)."""
    from prolas.gp import fit_gp

    pairs = json.loads(args.pairs.read_text())
    variants = [_variant(v) for v in args.variant] or [("default", {})]
    i, k = (int(v) for v in args.shard.split("/"))
    pairs = pairs[i::k]
    done = set()
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            r = json.loads(line)
            done.add((r.get("variant", "default"), r["series"], r["expression"], r["fit_seed"]))
    data = {}
    fit_gp("SE", _grid_points("airline", args.data_dir, args.max_points))  # warm-up
    with args.out.open("a") as out:
        for n, pair in enumerate(pairs):
            s, e = pair["series"], pair["expression"]
            if s not in data:
                data[s] = _grid_points(s, args.data_dir, args.max_points)
            for (name, overrides), seed in itertools.product(variants, args.fit_seeds):
                if (name, s, e, seed) in done:
                    continue
                t = time.process_time()
                fit = fit_gp(e, data[s], _fit_config(seed, args.restarts, overrides))
                seconds = time.process_time() - t
                out.write(
                    json.dumps(
                        {
                            "variant": name,
                            "series": s,
                            "expression": e,
                            "fit_seed": seed,
                            "n": data[s].n,
                            "status": fit.status,
                            "log_likelihood": fit.log_likelihood,
                            "seconds": seconds,
                        }
                    )
                    + "\n"
                )
                out.flush()
            print(f"{n + 1}/{len(pairs)} {s} {e}", flush=True)


def cmd_summarise(args: argparse.Namespace) -> None:
    """Per variant (and per series with ``--by-series``): *stable*, the share of pairs whose
    log-likelihoods over the fit seeds span at most ``--tol`` nats; *reach*, the share of
    fits within ``--tol`` of the pair's best-known optimum (the best log-likelihood any
    variant reached at any seed, in every file given plus ``--best-known`` files); the
    median and mean gap to it; CPU seconds per fit. A failed fit is neither stable nor
    within reach. Only pairs every variant fitted at every seed are compared."""
    rows = [json.loads(line) for p in args.fits for line in p.read_text().splitlines()]
    extra = [json.loads(line) for p in args.best_known for line in p.read_text().splitlines()]
    best: dict[tuple[str, str], float] = {}
    for r in rows + extra:
        if r["status"] == "ok":
            key = (r["series"], r["expression"])
            best[key] = max(best.get(key, -np.inf), r["log_likelihood"])
    table: dict[str, dict[tuple[str, str], dict[int, float | None]]] = {}
    seconds: dict[tuple[str, str], list[float]] = {}  # (variant, series or "all")
    for r in rows:
        v = r.get("variant", "default")
        ll = r["log_likelihood"] if r["status"] == "ok" else None
        table.setdefault(v, {}).setdefault((r["series"], r["expression"]), {})[r["fit_seed"]] = ll
        for group in (r["series"], "all"):
            seconds.setdefault((v, group), []).append(r["seconds"])
    seeds = sorted({r["fit_seed"] for r in rows})
    common = set.intersection(
        *({p for p, lls in t.items() if all(k in lls for k in seeds)} for t in table.values())
    )
    groups = sorted({s for s, _ in common}) if args.by_series else []
    lines = [
        f"{len(common)} pairs, fit seeds {seeds}; stable: span <= {args.tol:g} nats over the "
        f"seeds; reach: fits within {args.tol:g} nats of the pair's best-known optimum",
        "",
        "| variant | series | pairs | stable | reach | median gap | mean gap | median s/fit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in table:
        for series in [*groups, "all"]:
            pairs = sorted(p for p in common if series in ("all", p[0]))
            spans, gaps = [], []
            for p in pairs:
                values = [table[v][p][k] for k in seeds]
                ok = [x for x in values if x is not None]
                spans.append(max(ok) - min(ok) if len(ok) == len(values) else np.inf)
                gaps += [best[p] - x if x is not None else np.inf for x in values]
            spans, gaps = np.array(spans), np.array(gaps)
            finite = gaps[np.isfinite(gaps)]
            lines.append(
                f"| {v} | {series} | {len(pairs)} | {np.mean(spans <= args.tol):.1%} | "
                f"{np.mean(gaps <= args.tol):.1%} | {np.median(finite):.2f} | "
                f"{np.mean(finite):.2f} | {np.median(seconds[v, series]):.3f} |"
            )
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


def cmd_reference(args: argparse.Namespace) -> None:
    from prolas.data import load_csv
    from prolas.gp import FitConfig, fit_gp

    ds = load_csv(args.data_dir / "airline.csv")
    print("| expression | reference | " + " | ".join(f"seed {k}" for k in args.fit_seeds) + " |")
    print("|---|---|" + "---|" * len(args.fit_seeds))
    for expr, ref in REFERENCE.items():
        lls = [
            fit_gp(expr, ds, FitConfig(seed=k)).log_likelihood for k in args.fit_seeds
        ]  # the defaults, as `prolas fit` fits
        cells = " | ".join(f"{ll:.2f}" + ("" if ll >= ref - 0.5 else " **below**") for ll in lls)
        print(f"| `{expr}` | {ref:.2f} | {cells} |", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", type=Path, help="import prolas from this checkout")
    p.add_argument("--data-dir", type=Path, default=ROOT / "data")
    p.add_argument("--max-points", type=int, default=400)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("draw")
    d.add_argument("caches", nargs="+", type=Path)
    d.add_argument("--n", type=int, default=300)
    d.add_argument("--seed", type=int, default=40)
    d.add_argument("--series", nargs="*", help="draw from these series only")
    d.add_argument("--exclude", type=Path, help="a pairs file whose pairs are not drawn")
    d.add_argument("--operator", help="draw only expressions with this operator (CP, CW)")
    d.add_argument(
        "--include-warm",
        action="store_true",
        help="also expressions the cache fitted only from other fits (nested starts)",
    )
    d.add_argument("--out", type=Path, required=True)
    f = sub.add_parser("fit")
    f.add_argument("pairs", type=Path)
    f.add_argument("--fit-seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    f.add_argument("--restarts", type=int, default=8)
    f.add_argument(
        "--variant", action="append", default=[], help="NAME=JSON of FitConfig overrides"
    )
    f.add_argument("--shard", default="0/1")
    f.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("summarise")
    s.add_argument("fits", nargs="+", type=Path)
    s.add_argument("--tol", type=float, default=0.5)
    s.add_argument("--best-known", type=Path, nargs="*", default=[])
    s.add_argument("--by-series", action="store_true")
    s.add_argument("--out", type=Path)
    r = sub.add_parser("reference")
    r.add_argument("--fit-seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = p.parse_args()
    _import_prolas(args.root)
    {"draw": cmd_draw, "fit": cmd_fit, "summarise": cmd_summarise, "reference": cmd_reference}[
        args.cmd
    ](args)


if __name__ == "__main__":
    main()
