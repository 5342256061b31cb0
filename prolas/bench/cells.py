"""Cells: one finished search each, stored as ``OUT/cells/<data>__<method>__seed<s>.json``.

A bench grid (and a comparison, a grid on one data set) runs one search per
(data set, method, seed). Its record, the *cell*, holds the settings it ran with, its
unique-evaluation history (:func:`prolas.records.history_entry` rows), the best model
and its timings (:func:`cell_record`). This module holds everything about cells as
files: their paths, writing (:func:`write_cell`, strict JSON through
:func:`prolas.records.write_json`) and reading (:func:`load_cells`, :func:`read_cell`),
the flat table of every evaluation (:func:`evaluations_frame`), and the output
directory's ``bench.json`` with the run's provenance (:func:`prepare_out`).

It also holds the two data helpers a cell's search needs: :func:`load_series` (a
shipped CSV) and :func:`thin` (the evenly spaced thinning of a long series).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from prolas.data import Dataset, load_csv
from prolas.errors import OutputExistsError, ProlasError
from prolas.records import Evaluation, SearchResult, history_entry, json_clean, write_json

if TYPE_CHECKING:  # pragma: no cover
    from prolas.gp import FitResult

__all__ = [
    "EVALUATION_COLUMNS",
    "PROVENANCE_PACKAGES",
    "thin",
    "load_series",
    "cell_path",
    "cell_record",
    "write_cell",
    "read_cell",
    "load_cells",
    "evaluations_frame",
    "history_rows",
    "json_safe",
    "provenance",
    "prepare_out",
]

#: Columns of ``evaluations.csv``: the cell's keys, then its history entry's fields.
EVALUATION_COLUMNS = (
    "dataset",
    "method",
    "seed",
    "index",
    "expression",
    "bic",
    "log_likelihood",
    "seconds",
    "status",
    "n_params",
    "error",
)

#: libraries whose versions can change a search's trajectory (BO is chaotic: measured, the
#: same prolas commit gave identical airline histories within one environment, but
#: histories that parted after 14-32 fits in an environment with other library builds)
PROVENANCE_PACKAGES = ("torch", "gpytorch", "botorch", "linear_operator", "numpy", "scipy", "pot")


# --- data ----------------------------------------------------------------------------------


def thin(dataset: Dataset, max_points: int) -> Dataset:
    """At most ``max_points`` evenly spaced points: :meth:`Dataset.thinned`."""
    return dataset.thinned(max_points)


def load_series(path: str | Path) -> Dataset:
    """A benchmark CSV, without the repeated-x warning (internet has a few repeated x
    values; data README)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return load_csv(path)


# --- one cell ------------------------------------------------------------------------------


def cell_path(out: str | Path, dataset: str, label: str, seed: int) -> Path:
    """``OUT/cells/<dataset>__<label>__seed<seed>.json`` (``:`` in a label becomes ``-``)."""
    safe = label.replace(":", "-")
    return Path(out) / "cells" / f"{dataset}__{safe}__seed{seed}.json"


def json_safe(obj: Any) -> Any:
    """A JSON-safe copy of ``obj`` (:func:`prolas.records.json_clean`, other types as
    strings), or ``str(obj)`` if that fails; for a strategy's free-form ``extra``."""
    try:
        return json.loads(json.dumps(json_clean(obj), default=str, allow_nan=False))
    except (TypeError, ValueError):
        return str(obj)


def history_rows(history: Iterable[Evaluation]) -> list[dict]:
    """A history as cell rows (:func:`prolas.records.history_entry` each)."""
    return [history_entry(e) for e in history]


def cell_record(
    result: SearchResult,
    *,
    dataset: str,
    method: str,
    seed: int,
    n: int | None,
    budget: int,
    wall_seconds: float,
    scoring_seconds: float,
    new_fits: int,
    best: FitResult | None = None,
) -> dict:
    """The record of one finished search.

    Keys: ``method``, ``seed``, ``n`` (points searched), ``budget``, ``evaluations``
    (unique evaluations made), ``wall_seconds`` (the search), ``scoring_seconds`` (of it,
    inside the scorer), ``strategy_seconds`` (the rest: the method's own proposal cost),
    ``fit_seconds`` (the recorded fit times of the history: the original fit's time, also
    for cache hits), ``new_fits`` (fits not served by the cache), ``best`` (the best
    model's :meth:`FitResult.to_json`, or None), ``history`` (:func:`history_rows`),
    ``extra`` (the strategy's diagnostics) and, last, ``dataset``.
    """
    return {
        "method": method,
        "seed": seed,
        "n": n,
        "budget": budget,
        "evaluations": result.evaluations,
        "wall_seconds": wall_seconds,
        "scoring_seconds": scoring_seconds,
        "strategy_seconds": max(wall_seconds - scoring_seconds, 0.0),
        "fit_seconds": float(sum(e.seconds for e in result.history)),
        "new_fits": new_fits,
        "best": None if best is None or not best.ok else best.to_json(),
        "history": history_rows(result.history),
        "extra": json_safe(result.extra),
        "dataset": dataset,
    }


def write_cell(out: str | Path, cell: dict) -> Path:
    """Write a cell record to its :func:`cell_path` (strict JSON, atomically)."""
    path = cell_path(out, cell["dataset"], cell["method"], cell["seed"])
    write_json(path, cell, indent=1)
    return path


def read_cell(out: str | Path, dataset: str, label: str, seed: int) -> dict | None:
    """The cell record of (dataset, method label, seed) in ``OUT/cells``, or None."""
    path = cell_path(out, dataset, label, seed)
    return json.loads(path.read_text()) if path.exists() else None


def load_cells(out: str | Path) -> list[dict]:
    """Every finished cell record in ``OUT/cells`` (sorted by data set, method, seed)."""
    cells = []
    for p in sorted((Path(out) / "cells").glob("*.json")):
        cells.append(json.loads(p.read_text()))
    cells.sort(key=lambda c: (c["dataset"], c["method"], c["seed"]))
    return cells


def evaluations_frame(cells: Sequence[dict]) -> pd.DataFrame:
    """One row per unique evaluation of every cell (:data:`EVALUATION_COLUMNS`)."""
    rows = []
    for c in cells:
        for h in c["history"]:
            rows.append(
                {
                    "dataset": c["dataset"],
                    "method": c["method"],
                    "seed": c["seed"],
                    **{k: h[k] for k in EVALUATION_COLUMNS[3:]},
                }
            )
    return pd.DataFrame(rows, columns=list(EVALUATION_COLUMNS))


# --- the output directory ------------------------------------------------------------------


def machine() -> dict:
    """The CPU model and the BLAS libraries loaded (API, version, kernel architecture).

    Same code and package versions can still fit differently on another CPU: OpenBLAS
    picks its kernels by architecture (e.g. ``SkylakeX``, ``Haswell``), which changes the
    rounding, and an optimiser can end in another local optimum from there.
    """
    import scipy.linalg  # noqa: F401  (loads scipy's BLAS, which the fits use)
    from threadpoolctl import threadpool_info

    blas = [
        " ".join(str(info.get(k)) for k in ("internal_api", "version", "architecture"))
        for info in threadpool_info()
        if info.get("user_api") == "blas"
    ]
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "blas": blas}


def cpu_model() -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``), else what ``platform`` knows."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance() -> dict:
    """prolas version, library versions, git commit and uncommitted changes under prolas/
    (when in a checkout): a strategy under development, or another library build, can
    change results between runs."""
    import subprocess
    from importlib import metadata

    from prolas._version import __version__

    packages = {}
    for name in PROVENANCE_PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    out: dict = {"prolas_version": __version__, "packages": packages, "machine": machine()}
    root = Path(__file__).resolve().parents[2]  # the checkout holding prolas/
    try:
        git = ["git", "-C", str(root)]
        commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
        status = subprocess.run(
            [*git, "status", "--porcelain", "--", "prolas"], capture_output=True, text=True
        )
    except OSError:
        return out
    if commit.returncode == 0:
        out["git_commit"] = commit.stdout.strip()
        out["uncommitted"] = [line[3:] for line in status.stdout.splitlines()]
    return out


def prepare_out(out: Path, kind: str, settings: dict, run: dict, resume: bool) -> None:
    """Create OUT and record this run in ``OUT/bench.json``; refuse to mix runs with
    different ``settings`` (those a resumed run must share) or to clobber without
    ``resume``. ``run`` describes this invocation; the start time and the
    :func:`provenance` are added to it."""
    out.mkdir(parents=True, exist_ok=True)
    meta = out / "bench.json"
    cells = out / "cells"
    if meta.exists():
        old = json.loads(meta.read_text())
        if old.get("kind") != kind:
            raise OutputExistsError(
                f"{out} holds a {old.get('kind')!r} bench; choose another --out for {kind!r}"
            )
        if not resume:
            raise OutputExistsError(
                f"{out} already holds bench results; use --resume to continue it or choose "
                "another --out"
            )
        if old.get("settings") != settings:
            diff = sorted(k for k, v in settings.items() if old.get("settings", {}).get(k) != v)
            raise ProlasError(
                f"--resume: settings differ from the run in {out} ({', '.join(diff)}); "
                "use the same settings or another --out"
            )
    elif cells.exists() and any(cells.iterdir()) and not resume:
        raise OutputExistsError(f"{out}/cells is not empty; use --resume or another --out")
    runs = []
    if meta.exists():
        old = json.loads(meta.read_text())
        runs = old.get("runs", [old["last_run"]] if "last_run" in old else [])
    run = {**run, "started": time.strftime("%Y-%m-%d %H:%M:%S"), **provenance()}
    write_json(meta, {"kind": kind, "settings": settings, "runs": runs + [run]}, indent=1)
