"""The PROLAS strategy's own CPU time per BO step, and the history it proposed.

Runs default PROLAS searches (``change`` grammar and checkpoint) and times, with
``time.process_time`` on one torch thread, every BO step of :class:`_LatentSearch` (a
``step`` or a ``diversify`` called by the loop) minus the CPU time spent inside
``_LatentSearch.evaluate`` (the scorer, i.e. the fits, and the Evaluator's bookkeeping).
The timing wraps the loop's methods from outside, so the same script times an older
checkout too (``PYTHONPATH=/path/to/old/checkout python strategy_speed.py ...``).

Scorers (``--scorer``):

* ``table:PATH`` — the BICs of a fit cache (``benchmarks/results/*/fits/*.jsonl``); an
  expression missing from it gets a deterministic pseudo-random log-likelihood from the
  hash of its canonical string, inside the cache's range (no fit, so the strategy's time
  dominates);
* ``similarity:EXPR`` — tests/search/test_latent.py's synthetic objective (structural
  similarity to EXPR);
* ``fit:DATA.csv`` — the real thing: ``prolas fit DATA.csv --budget B --seed S`` (GP fits
  in-process, the CLI's defaults).

Each search prints one JSON line: the history (expression, BIC), the per-step strategy
milliseconds, the initial design's milliseconds, the strategy and evaluation CPU seconds.

    python benchmarks/scripts/strategy_speed.py run \\
        --scorer table:benchmarks/results/search_airline_defaults/fits/airline.jsonl \\
        --seeds 0-4 --budget 50 --out /tmp/new.jsonl
    python benchmarks/scripts/strategy_speed.py compare /tmp/old.jsonl /tmp/new.jsonl
    python benchmarks/scripts/strategy_speed.py paired F.jsonl --base LABEL --variant LABEL
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from prolas.expr import Expression, parse
from prolas.records import Score
from prolas.search.config import SearchConfig
from prolas.search.evaluator import Evaluator

latent = importlib.import_module("prolas.search.latent")


class CacheTable:
    """A fit cache's scores as a table; a missing expression gets a log-likelihood drawn
    deterministically (from its string's hash) inside the cache's range."""

    def __init__(self, path: str) -> None:
        self.scores: dict[str, tuple[str, float, float, int]] = {}
        lls, half = [], []
        for line in Path(path).read_text().splitlines():
            rec = json.loads(line)
            fit = rec.get("fit") or {}
            best = fit.get("best")
            if fit.get("status") == "ok" and best:
                key = str(parse(rec["expression"]))
                self.scores[key] = ("ok", best["bic"], best["log_likelihood"], best["n_params"])
                lls.append(best["log_likelihood"])
                half.append((best["log_likelihood"] - best["bic"]) / best["n_params"])
        self.lo, self.hi = float(np.quantile(lls, 0.05)), float(np.max(lls))
        self.half_log_n = float(np.median(half))
        self.missing = 0

    def __call__(self, expr: Expression, init: tuple = ()) -> Score:
        key = str(expr)
        hit = self.scores.get(key)
        if hit is not None:
            _, bic, ll, k = hit
            return Score(key, "ok", bic, ll, k, 0.0)
        self.missing += 1
        h = int(hashlib.sha256(key.encode()).hexdigest()[:12], 16) / 16**12
        ll = self.lo + h * (self.hi - self.lo)
        k = expr.n_params
        return Score(key, "ok", ll - self.half_log_n * k, ll, k, 0.0)


class Similarity:
    """tests/search/test_latent.py's objective: 10 Jaccard(terms) + 5 Jaccard(kernels)."""

    def __init__(self, target: str) -> None:
        self.target = parse(target)

    def __call__(self, e: Expression, init: tuple = ()) -> Score:
        a, b = set(e.terms), set(self.target.terms)
        ca = Counter(f for t in e.terms for f in t)
        cb = Counter(f for t in self.target.terms for f in t)
        v = 10 * len(a & b) / len(a | b) + 5 * sum((ca & cb).values()) / sum((ca | cb).values())
        return Score(str(e), "ok", v, v, e.n_params, 0.0)


class Clock:
    """CPU time of the loop's steps, minus the time inside ``evaluate``."""

    def __init__(self) -> None:
        self.eval_s = 0.0
        self.steps: list[float] = []
        self.init_ms = 0.0
        self.depth = 0

    def install(self) -> None:
        cls = latent._LatentSearch
        orig_eval, orig_step, orig_div, orig_init = (
            cls.evaluate,
            cls.step,
            cls.diversify,
            cls.initial_design,
        )
        clock = self

        def evaluate(self, points):
            t = time.process_time()
            try:
                return orig_eval(self, points)
            finally:
                clock.eval_s += time.process_time() - t

        def timed(orig, record):
            def run(self, *a):
                clock.depth += 1
                e0, t0 = clock.eval_s, time.process_time()
                try:
                    return orig(self, *a)
                finally:
                    clock.depth -= 1
                    if clock.depth == 0:
                        record(1000 * ((time.process_time() - t0) - (clock.eval_s - e0)))

            return run

        cls.evaluate = evaluate
        cls.step = timed(orig_step, lambda ms: self.steps.append(ms))
        cls.diversify = timed(orig_div, lambda ms: self.steps.append(ms))
        cls.initial_design = timed(orig_init, lambda ms: setattr(self, "init_ms", ms))


#: the one clock, wrapped around the loop's methods once (``main``)
CLOCK = Clock()


def _seeds(text: str) -> list[int]:
    """``"0-4"`` (0 to 4 inclusive) or ``"0,3,7"``."""
    if "-" in text:
        a, b = text.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(s) for s in text.split(",")]


def _scorer(kind: str, arg: str, args: argparse.Namespace):
    """The scorer of ``--scorer KIND:ARG`` and the data set (None for synthetic ones)."""
    if kind == "table":
        return CacheTable(arg), None
    if kind == "similarity":
        return Similarity(arg), None
    if kind == "gp":  # real fits, cheap settings, cached across variants and seeds
        from prolas.bench import thin
        from prolas.data import load_csv
        from prolas.gp import FitConfig, GPScorer
        from prolas.search.cache import CachedScorer

        data = load_csv(arg)
        if args.max_points and data.n > args.max_points:
            data = thin(data, args.max_points)
        floor = SearchConfig().lengthscale_floor
        fit = FitConfig(restarts=args.restarts, seed=0, lengthscale_floor=floor)
        cache = Path(args.cache_dir) / f"{Path(arg).stem}-{data.n}-r{args.restarts}.jsonl"
        cache.parent.mkdir(parents=True, exist_ok=True)
        return CachedScorer(GPScorer(data, fit), cache), data
    raise SystemExit(f"unknown scorer kind {kind!r}")


def run_one(spec: str, seed: int, args: argparse.Namespace) -> dict:
    """One search (PROLAS, or random search with ``--method random``) and its record."""
    kind, _, arg = spec.partition(":")
    budget, options = args.budget, list(args.option)
    clock = CLOCK
    clock.eval_s, clock.steps, clock.init_ms = 0.0, [], 0.0
    t0 = time.process_time()
    if kind == "fit":
        from prolas.cli import main

        if options or args.method != "prolas":
            raise SystemExit("a fit: scorer runs `prolas fit` as it is")
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out"
            argv = ["fit", arg, "--budget", str(budget), "--seed", str(seed)]
            code = main([*argv, "--out", str(out), "--quiet"])
            assert code == 0, code
            doc = json.loads((out / "result.json").read_text())
            history = [(h["expression"], h.get("bic")) for h in doc["history"]]
    else:
        from prolas.threads import torch_threads

        scorer, data = _scorer(kind, arg, args)
        ev = Evaluator(scorer, budget)
        config = SearchConfig(budget=budget, seed=seed)
        with torch_threads(1):  # as prolas.pipeline.run_strategy
            if args.method == "random":
                from prolas.grammar import Grammar
                from prolas.search.random_search import search_random

                res = search_random(ev, Grammar.from_file(config.grammar), seed=seed)
            else:
                opts = latent.LatentBOConfig.from_overrides(options)  # defaults if none
                res = latent.search_prolas(ev, data, config, options=opts)
        history = [(e.expression, e.bic) for e in res.history]
    total = time.process_time() - t0
    return {
        "prolas": str(Path(latent.__file__).resolve().parents[2]),
        "scorer": spec,
        "method": args.method,
        "options": options,
        "label": args.label,
        "seed": seed,
        "budget": budget,
        "history": history,
        "step_ms": clock.steps,
        "init_ms": clock.init_ms,
        "eval_s": clock.eval_s,
        "process_s": total,
    }


def _summary(rows: list[dict]) -> str:
    steps = np.concatenate([r["step_ms"] for r in rows]) if rows else np.array([])
    if not len(steps):
        return "no steps"
    return (
        f"{len(rows)} searches, {len(steps)} steps: median {np.median(steps):.1f} ms, "
        f"p90 {np.quantile(steps, 0.9):.1f} ms, mean {steps.mean():.1f} ms; "
        f"initial design {np.mean([r['init_ms'] for r in rows]):.0f} ms"
    )


def compare(old: str, new: str) -> None:
    """Histories equal per (scorer, seed)? And the two timing summaries."""

    def load(p: str) -> dict:
        return {
            (r["scorer"], r["seed"], r["budget"]): r
            for r in map(json.loads, Path(p).read_text().splitlines())
        }

    a, b = load(old), load(new)
    same = diff = 0
    for key in sorted(set(a) & set(b)):
        ha = [e for e, _ in a[key]["history"]]
        hb = [e for e, _ in b[key]["history"]]
        if ha == hb:
            same += 1
        else:
            diff += 1
            first = next(
                (i for i, (x, y) in enumerate(zip(ha, hb)) if x != y), min(len(ha), len(hb))
            )
            print(f"differs: {key} from evaluation {first + 1}")
    print(f"identical histories: {same} of {same + diff}")
    for label, rows in (("old", a), ("new", b)):
        for scorer in sorted({k[0] for k in rows}):
            sel = [r for k, r in rows.items() if k[0] == scorer]
            print(f"{label} {scorer}: {_summary(sel)}")


def quality(files: list[str], optimum: float | None) -> None:
    """Per scorer and variant (label, or method and options): best score after 10, 25
    and the whole budget (mean +- standard error over seeds), the first evaluation
    reaching ``optimum`` (budget + 1 if never), and the strategy's step time."""
    rows = [json.loads(line) for f in files for line in Path(f).read_text().splitlines()]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        variant = r.get("label") or " ".join([r.get("method", "prolas"), *r.get("options", [])])
        groups.setdefault((r["scorer"], variant), []).append(r)

    def best_at(r: dict, n: int) -> float:
        scores = [b for _, b in r["history"][:n] if b is not None]
        return max(scores) if scores else math.nan

    def ms(x: list[float]) -> str:
        x = np.asarray(x, dtype=float)
        se = x.std(ddof=1) / math.sqrt(len(x)) if len(x) > 1 else math.nan
        return f"{x.mean():.2f} ± {se:.2f}"

    print(
        "| scorer | variant | seeds | best @10 | @25 | @budget | first hit | step ms median / p90 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (scorer, variant), rs in sorted(groups.items()):
        budget = rs[0]["budget"]
        hit = "-"
        if optimum is not None:
            hits = []
            for r in rs:
                idx = [
                    i
                    for i, (_, b) in enumerate(r["history"])
                    if b is not None and b >= optimum - 1e-9
                ]
                hits.append(idx[0] + 1 if idx else budget + 1)
            hit = ms(hits)
        steps = np.concatenate([r["step_ms"] for r in rs]) if rs[0]["step_ms"] else np.array([])
        t = f"{np.median(steps):.0f} / {np.quantile(steps, 0.9):.0f}" if len(steps) else "-"
        print(
            f"| {Path(scorer).name} | {variant} | {len(rs)} | {ms([best_at(r, 10) for r in rs])} "
            f"| {ms([best_at(r, 25) for r in rs])} | {ms([best_at(r, budget) for r in rs])} "
            f"| {hit} | {t} |"
        )


def paired(files: list[str], base: str, variant: str) -> None:
    """Per scorer, ``variant`` against ``base`` (labels) seed by seed: the mean
    difference of best score (variant - base) with its standard error, how many seeds
    are higher / the same / lower, and each label's step times (median, p90, mean ms)."""
    rows = [json.loads(line) for f in files for line in Path(f).read_text().splitlines()]
    best: dict[tuple[str, str], dict[int, float]] = {}
    steps: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        key = (r["scorer"], r["label"])
        scores = [b for _, b in r["history"] if b is not None]
        best.setdefault(key, {})[r["seed"]] = max(scores, default=math.nan)
        steps.setdefault(key, []).extend(r["step_ms"])

    def times(key: tuple[str, str]) -> str:
        x = np.asarray(steps[key])
        return f"{np.median(x):.0f} / {np.quantile(x, 0.9):.0f} / {x.mean():.0f}"

    print(
        f"| scorer | seeds | mean best {base} | {variant} | difference ± se "
        f"| higher / same / lower | step ms {base} (median / p90 / mean) | {variant} |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for scorer in dict.fromkeys(r["scorer"] for r in rows):
        a, b = best.get((scorer, base), {}), best.get((scorer, variant), {})
        seeds = sorted(set(a) & set(b))
        if not seeds:
            continue
        d = np.array([b[s] - a[s] for s in seeds])
        se = d.std(ddof=1) / math.sqrt(len(d)) if len(d) > 1 else math.nan
        print(
            f"| {Path(scorer).name} | {len(seeds)} | {np.mean([a[s] for s in seeds]):.2f} "
            f"| {np.mean([b[s] for s in seeds]):.2f} | {d.mean():+.2f} ± {se:.2f} "
            f"| {(d > 1e-9).sum()} / {(abs(d) <= 1e-9).sum()} / {(d < -1e-9).sum()} "
            f"| {times((scorer, base))} | {times((scorer, variant))} |"
        )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--scorer", action="append", required=True)
    r.add_argument("--seeds", default="0")
    r.add_argument("--budget", type=int, default=50)
    r.add_argument("--out", required=True)
    r.add_argument(
        "--option", action="append", default=[], help="LatentBOConfig override key=value"
    )
    r.add_argument("--label", default="", help="names the variant in the summary")
    r.add_argument("--method", choices=("prolas", "random"), default="prolas")
    r.add_argument("--restarts", type=int, default=2, help="gp: restarts per fit")
    r.add_argument("--max-points", type=int, default=150, help="gp: thin longer series")
    r.add_argument("--cache-dir", default="/tmp/strategy_speed_fits", help="gp: fit caches")
    q = sub.add_parser("quality")
    q.add_argument("files", nargs="+")
    q.add_argument("--optimum", type=float, help="first evaluation reaching this score")
    c = sub.add_parser("compare")
    c.add_argument("old")
    c.add_argument("new")
    d = sub.add_parser("paired", help="a variant against a base, seed by seed")
    d.add_argument("files", nargs="+")
    d.add_argument("--base", required=True, help="label of the base runs")
    d.add_argument("--variant", required=True, help="label of the variant's runs")
    args = p.parse_args(argv)
    if args.cmd == "paired":
        paired(args.files, args.base, args.variant)
        return
    if args.cmd == "compare":
        compare(args.old, args.new)
        return
    if args.cmd == "quality":
        quality(args.files, args.optimum)
        return
    torch.set_num_threads(1)
    CLOCK.install()
    with open(args.out, "a") as fh:
        for spec in args.scorer:
            for seed in _seeds(args.seeds):
                row = run_one(spec, seed, args)
                fh.write(json.dumps(row) + "\n")
                fh.flush()
                steps = row["step_ms"]
                print(
                    f"{spec} seed {seed}: {len(steps)} steps, median "
                    f"{np.median(steps) if steps else math.nan:.1f} ms, strategy "
                    f"{row['process_s'] - row['eval_s']:.2f} s, best "
                    f"{max((b for _, b in row['history'] if b is not None), default=math.nan):.2f}",
                    file=sys.stderr,
                )


if __name__ == "__main__":
    main()
