"""Parallel evaluation: wall time of CKS with 1 vs 2 workers, and PROLAS q=1 vs q=4.

Writes benchmarks/results/parallel/PARALLEL.md. Run from the repository root:

    .venv/bin/python benchmarks/scripts/parallel.py              # both parts
    .venv/bin/python benchmarks/scripts/parallel.py --parts cks --depth 2

Part 1 (CKS, data/mauna.csv): the same greedy search three times in one run:
in-process (1 worker), a 2-process pool (:class:`prolas.search.executors.ProcessPool`) and a
Dask LocalCluster of 2 single-threaded workers. All fits use one torch thread, so
the ratio measures parallel fitting, not thread oversubscription. Each executor is
started and warmed up (one tiny fit per worker; the in-process run warms up the same
way) before the search is timed; start-up is reported separately. The histories
must be identical (checked), so the runs do the same work.

Part 2 (PROLAS, data/airline.csv): q = 1 vs q = 4 proposals per BO iteration at the
same evaluation budget, over a few seeds: best BIC and wall time, q = 4 both
in-process and on a 2-process pool (batching without and with parallel fitting).

Other processes on the machine distort wall times; the load average is recorded
next to every timing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from prolas.data import Dataset, load_csv  # noqa: E402
from prolas.expr import parse  # noqa: E402
from prolas.gp import FitConfig, GPScorer  # noqa: E402
from prolas.search.evaluator import Evaluator  # noqa: E402
from prolas.search.executors import ProcessPool, available_cores, make_executor  # noqa: E402
from prolas.search.greedy import search_cks  # noqa: E402

torch.set_num_threads(1)


def load() -> float:
    return round(os.getloadavg()[0], 2)


@dataclass(frozen=True)
class CPUTimed:
    """Wraps a scorer; appends each fit's CPU seconds (of the process running it) to ``log``.

    CPU seconds do not grow when other processes compete for the cores, wall seconds
    do: ``sum of fit CPU s / search wall s`` is the number of cores the search got.
    """

    inner: GPScorer
    log: str

    def __call__(self, expr):
        c0 = time.process_time()
        score = self.inner(expr)
        with open(self.log, "a") as fh:
            fh.write(f"{expr}\t{time.process_time() - c0}\n")
        return score

    def cpu_seconds(self) -> float:
        if not os.path.exists(self.log):
            return 0.0
        with open(self.log) as fh:
            return sum(float(line.split("\t")[1]) for line in fh if line.strip())

    def reset(self) -> None:
        if os.path.exists(self.log):
            os.remove(self.log)


def _tiny_scorer() -> GPScorer:
    x = np.linspace(0.0, 5.0, 30)
    return GPScorer(Dataset.from_arrays(x, np.sin(x), name="warm"), FitConfig(restarts=1))


@contextmanager
def executor(kind: str):
    """Yield (executor, seconds to start and warm it up)."""
    t0 = time.perf_counter()
    warm = _tiny_scorer()
    if kind == "in-process":
        warm(parse("PER + SE"))  # lazy imports of the first fit, as a worker has them preloaded
        yield None, time.perf_counter() - t0
        return
    cm = make_executor(workers=2) if kind == "process pool (2)" else make_executor(dask_local=2)
    with cm as ex:
        futures = [ex.submit(warm, parse(e)) for e in ("PER + SE", "LIN*SE")]
        for f in futures:
            f.result()
        yield ex, time.perf_counter() - t0


def run_cks(args) -> dict:
    ds = load_csv(ROOT / "data" / "mauna.csv")
    log = os.path.join(tempfile.mkdtemp(), "cpu.tsv")
    scorer = CPUTimed(GPScorer(ds, FitConfig(restarts=args.restarts, seed=0)), log)
    rows, histories = [], {}
    for kind in ("in-process", "process pool (2)", "dask LocalCluster (2)"):
        scorer.reset()
        load_before = load()
        with executor(kind) as (ex, startup):
            ev = Evaluator(scorer, budget=200, executor=ex)
            t0 = time.perf_counter()
            res = search_cks(ev, depth=args.depth)
            wall = time.perf_counter() - t0
        histories[kind] = [(e.expression, e.status, e.bic) for e in res.history]
        fit_seconds = sum(e.seconds for e in res.history)
        rows.append(
            {
                "executor": kind,
                "evaluations": res.evaluations,
                "startup_s": round(startup, 2),
                "search_s": round(wall, 2),
                "sum_fit_s": round(fit_seconds, 2),
                "sum_fit_cpu_s": round(scorer.cpu_seconds(), 2),
                "cores_used": round(scorer.cpu_seconds() / wall, 2),
                "best": res.best.expression,
                "best_bic": round(res.best.bic, 3),
                "load_before": load_before,
                "load_after": load(),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    base = histories["in-process"]
    same = {k: _same_history(h, base) for k, h in histories.items()}
    seq = rows[0]["search_s"]
    for r in rows:
        r["speedup"] = round(seq / r["search_s"], 2)
        r["same_history"] = same[r["executor"]]
    return {"rows": rows, "depth": args.depth, "restarts": args.restarts, "n": ds.n}


def _same_history(a, b) -> bool:
    if [x[:2] for x in a] != [x[:2] for x in b]:
        return False
    return all(
        (x[2] is None and y[2] is None) or abs(x[2] - y[2]) <= 1e-6 * max(1.0, abs(y[2]))
        for x, y in zip(a, b)
    )


def run_prolas(args) -> dict:
    from prolas.errors import CheckpointError
    from prolas.search.config import SearchConfig
    from prolas.search.latent import search_prolas
    from prolas.vae import load_checkpoint

    try:
        trained = load_checkpoint(args.checkpoint)
    except CheckpointError as exc:
        return {"error": str(exc)}
    ds = load_csv(ROOT / "data" / "airline.csv")
    log = os.path.join(tempfile.mkdtemp(), "cpu.tsv")
    scorer = CPUTimed(GPScorer(ds, FitConfig(restarts=args.restarts, seed=0)), log)
    _tiny_scorer()(parse("PER + SE"))  # warm up in-process
    rows = []
    pool = ProcessPool(2)
    try:
        for f in [pool.submit(_tiny_scorer(), parse(e)) for e in ("PER + SE", "LIN*SE")]:
            f.result()  # warm the workers before timing
        for q, where in ((1, "in-process"), (4, "in-process"), (4, "process pool (2)")):
            for seed in range(args.seeds):
                ex = pool if where != "in-process" else None
                ev = Evaluator(scorer, budget=args.budget, executor=ex)
                cfg = SearchConfig(budget=args.budget, seed=seed, batch=q, restarts=args.restarts)
                scorer.reset()
                load_before = load()
                t0 = time.perf_counter()
                res = search_prolas(ev, ds, cfg, trained=trained)
                wall = time.perf_counter() - t0
                rows.append(
                    {
                        "q": q,
                        "executor": where,
                        "seed": seed,
                        "evaluations": res.evaluations,
                        "best": res.best.expression if res.best else None,
                        "best_bic": round(res.best.bic, 3) if res.best else None,
                        "wall_s": round(wall, 2),
                        "sum_fit_s": round(sum(e.seconds for e in res.history), 2),
                        "sum_fit_cpu_s": round(scorer.cpu_seconds(), 2),
                        "load_before": load_before,
                        "load_after": load(),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    finally:
        pool.shutdown()
    return {"rows": rows, "budget": args.budget, "restarts": args.restarts}


def _md_cks(c: dict) -> list[str]:
    out = [
        f"CKS on data/mauna.csv (N = {c['n']}), depth {c['depth']}, {c['restarts']} restarts "
        "per fit, one torch thread per fit. `search s` is the timed search after the "
        "executor was started and warmed up (`startup s`). `fit CPU s` is the CPU time "
        "of the fits summed (measured inside the process that ran each fit), and `cores "
        "used` = fit CPU s / search s, the CPU the search actually got.",
        "",
        "| executor | evaluations | startup s | search s | speed-up | sum of fit wall s | "
        "fit CPU s | cores used | best | BIC | same history | load before/after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in c["rows"]:
        out.append(
            f"| {r['executor']} | {r['evaluations']} | {r['startup_s']} | {r['search_s']} | "
            f"{r['speedup']}x | {r['sum_fit_s']} | {r.get('sum_fit_cpu_s', '-')} | "
            f"{r.get('cores_used', '-')} | `{r['best']}` | {r['best_bic']} | "
            f"{'yes' if r['same_history'] else 'NO'} | {r['load_before']} / {r['load_after']} |"
        )
    return out


def _md_prolas(p: dict) -> list[str]:
    if "error" in p:
        return [f"Not measured: {p['error']}"]
    out = [
        f"PROLAS on data/airline.csv, budget {p['budget']} unique evaluations, "
        f"{p['restarts']} restarts per fit, default BO settings, shipped checkpoint.",
        "",
        "| q | fits run on | seeds | best BIC per seed | mean best BIC | mean wall s | "
        "mean sum of fit wall s | mean fit CPU s | load (range) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple, list[dict]] = {}
    for r in p["rows"]:
        groups.setdefault((r["q"], r["executor"]), []).append(r)
    for (q, where), rs in groups.items():
        bics = [r["best_bic"] for r in rs if r["best_bic"] is not None]
        loads = [r["load_before"] for r in rs] + [r["load_after"] for r in rs]
        out.append(
            f"| {q} | {where} | {len(rs)} | {', '.join(f'{b:.2f}' for b in bics)} | "
            f"{statistics.mean(bics):.2f} | {statistics.mean(r['wall_s'] for r in rs):.1f} | "
            f"{statistics.mean(r['sum_fit_s'] for r in rs):.1f} | {_mean_cpu(rs)} | "
            f"{min(loads)}-{max(loads)} |"
        )
    out += ["", "Best expression per run:", ""]
    out += [
        f"- q={r['q']} {r['executor']} seed {r['seed']}: `{r['best']}` ({r['best_bic']})"
        for r in p["rows"]
    ]
    return out


def _mean_cpu(rows: list[dict]) -> str:
    cpu = [r["sum_fit_cpu_s"] for r in rows if "sum_fit_cpu_s" in r]
    return f"{statistics.mean(cpu):.1f}" if cpu else "-"


RAW_MARK = "<!-- raw results (read back by benchmarks/scripts/parallel.py) -->"


def read_raw(path: Path) -> dict:
    """Results of an earlier run stored in PARALLEL.md (to re-run one part only)."""
    if not path.exists() or RAW_MARK not in path.read_text():
        return {}
    block = path.read_text().split(RAW_MARK, 1)[1]
    return json.loads(block.split("```json", 1)[1].split("```", 1)[0])


def write_md(path: Path, cks: dict | None, prolas: dict | None, commands: dict) -> None:
    autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled")
    grouped = autogroup.exists() and autogroup.read_text().strip() == "1"
    lines = [
        "# Parallel evaluation",
        "",
        *(f"- {part}: `{cmd}`" for part, cmd in commands.items()),
        "",
        f"Machine: {available_cores()} cores, {platform.python_version()}, torch "
        f"{torch.__version__}, float64. Other processes (other sessions' tests and "
        "benchmarks) shared the CPU: the 1-minute load average is given next to each "
        "timing; with a load above the core count every timing is inflated and the "
        "speed-up understated or overstated depending on what ran alongside."
        + (
            " The kernel's scheduler autogroups are on here: CPU time is shared between "
            "sessions first, so while other sessions keep the cores busy, a second worker "
            "process of this session splits the session's share instead of adding to it."
            if grouped
            else ""
        ),
        "",
    ]
    if cks is not None:
        lines += ["## CKS: 1 vs 2 workers", "", *_md_cks(cks), ""]
    if prolas is not None:
        lines += ["## PROLAS: q = 1 vs q = 4 at equal budget", "", *_md_prolas(prolas), ""]
    raw = {"cks": cks, "prolas": prolas, "commands": commands}
    lines += [RAW_MARK, "", "```json", json.dumps(raw, indent=1), "```", ""]
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", default="cks,prolas")
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--restarts", type=int, default=4)
    p.add_argument("--budget", type=int, default=30, help="PROLAS budget")
    p.add_argument("--seeds", type=int, default=3, help="PROLAS seeds")
    p.add_argument("--checkpoint", default="default")
    p.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "parallel" / "PARALLEL.md")
    )
    args = p.parse_args(argv)
    parts = set(args.parts.split(","))
    old = read_raw(Path(args.out))  # keep the part(s) not re-run
    commands = dict(old.get("commands", {}))
    cmd = " ".join([".venv/bin/python benchmarks/scripts/parallel.py", *argv])
    commands.update({part: cmd for part in parts})
    cks = run_cks(args) if "cks" in parts else old.get("cks")
    prolas = run_prolas(args) if "prolas" in parts else old.get("prolas")
    write_md(Path(args.out), cks, prolas, {k: commands[k] for k in sorted(commands)})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
