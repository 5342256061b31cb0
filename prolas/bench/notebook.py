"""Helpers the notebooks use: committed bench results, a runnable default method, and
small figures.

* :func:`load_bench`: a grid's cells and ``summary.csv``;
* :func:`load_extrapolation_fit`: a committed extrapolation cell's final model, with
  its train and test data;
* :func:`default_method`: ``prolas`` if a shipped KG-VAE checkpoint is installed, else
  ``cks``;
* :func:`surrogate_regression_markdown`: the committed surrogate-regression table;
* :func:`small_png`: a figure shrunk for embedding.

The notebooks reach these, and the runners, plots and tables of the other modules, as
``from prolas import bench``; ``bench.thin``, ``bench.run_grid_in_memory``,
``bench.summarise``, ``bench.fraction_study`` ... are re-exported there.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from prolas.bench.cells import load_cells, load_series, read_cell
from prolas.data import Dataset
from prolas.errors import ProlasError
from prolas.gp import FitResult
from prolas.limits import DEFAULT_CHECKPOINT

__all__ = [
    "load_bench",
    "default_method",
    "load_extrapolation_fit",
    "surrogate_regression_markdown",
    "small_png",
]


def load_bench(out: str | Path) -> tuple[list[dict], pd.DataFrame | None]:
    """Cell records and summary.csv (if any) of a bench output directory."""
    out = Path(out)
    summary = pd.read_csv(out / "summary.csv") if (out / "summary.csv").exists() else None
    return load_cells(out), summary


def default_method(preferred: str = "prolas") -> str:
    """``preferred`` if it can run here, else ``"cks"``: PROLAS needs a shipped KG-VAE
    checkpoint (``prolas checkpoints``); notebooks use this to stay runnable."""
    if preferred != "prolas":
        return preferred
    from prolas.vae import list_checkpoints

    shipped = {c["name"] for c in list_checkpoints()}
    return "prolas" if DEFAULT_CHECKPOINT in shipped else "cks"


def load_extrapolation_fit(
    out: str | Path,
    dataset: str,
    method: str | Sequence[str],
    seed: int = 0,
    data_dir: str | Path = "data",
) -> tuple[str, FitResult, Dataset, Dataset]:
    """A committed extrapolation result: ``(method, final model, train, test)`` of the
    first of ``method`` (a name or a preference list) with a result for ``dataset``.
    Predict with ``prolas.gp.predict(fit, train, x)``."""
    names = [method] if isinstance(method, str) else list(method)
    for name in names:
        cell = read_cell(out, dataset, name, seed)
        if cell is None or not cell.get("test"):
            continue
        train = load_series(Path(data_dir) / f"{dataset}_train.csv")
        test = load_series(Path(data_dir) / f"{dataset}_test.csv")
        return name, FitResult.from_json(cell["test"]["final"], n=train.n), train, test
    raise ProlasError(
        f"no extrapolation result for {dataset} ({', '.join(names)}) in {out}; "
        "run prolas bench --extrapolation"
    )


def surrogate_regression_markdown(benchmarks: str | Path = "benchmarks") -> str:
    """The committed surrogate-regression table (``benchmarks/results/surrogate_regression/
    regression.md``, written by ``benchmarks/scripts/surrogate_regression.py``) as markdown;
    says so plainly if it has not been committed."""
    path = Path(benchmarks) / "results" / "surrogate_regression" / "regression.md"
    if not path.exists():
        return (
            f"*No surrogate-regression table at `{path}` yet (written by "
            "`benchmarks/scripts/surrogate_regression.py`).*"
        )
    return "From `benchmarks/results/surrogate_regression/regression.md`:\n\n" + path.read_text()


def small_png(path: str | Path, width: int = 700, colors: int = 256) -> bytes:
    """A PNG file shrunk for embedding in a notebook: at most ``width`` pixels wide and a
    ``colors``-colour palette (plots have few colours; typically 2-4x smaller)."""
    import io

    from PIL import Image

    im = Image.open(path).convert("RGB")
    if im.width > width:
        im = im.resize((width, round(im.height * width / im.width)), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    im.quantize(colors=colors).save(buf, format="PNG", optimize=True)
    return buf.getvalue()
