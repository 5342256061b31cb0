"""The notebooks run headless (nbclient, this interpreter's kernel) with a small budget,
open with a markdown cell saying what they show, and use prolas only through its public
API (``import prolas`` and the names of ``prolas.__all__``: KernelSearch, forecast,
predict, ...; no benchmark helpers), besides the standard library, pandas, pyplot and
IPython's display helpers. One of them forecasts a dated series with its band and
components."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT
from nbclient import NotebookClient

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
ALLOWED_IMPORTS = {
    "json",
    "os",
    "tempfile",
    "warnings",
    "pathlib",
    "IPython.display",
    "matplotlib.pyplot",
    "pandas",
    "prolas",
}

#: small settings for the test run (each notebook reads these environment variables)
SMALL = {
    "PROLAS_NOTEBOOK_BUDGET": "4",
    "PROLAS_NOTEBOOK_RESTARTS": "1",
    "PROLAS_NOTEBOOK_SEEDS": "1",
    "PROLAS_NOTEBOOK_POINTS": "80",
}


def test_the_four_notebooks_exist() -> None:
    names = [p.name for p in NOTEBOOKS]
    assert names == [
        "01_airline.ipynb",
        "02_mauna_loa.ipynb",
        "03_search_strategies.ipynb",
        "04_your_data.ipynb",
    ]


def _imports(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module or "")
    return found


def _prolas_names(tree: ast.AST) -> set[str]:
    """The names a cell takes from prolas: ``prolas.NAME`` and ``from prolas import NAME``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "prolas":
                found.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module == "prolas":
            found |= {a.name for a in node.names}
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_opens_with_text_and_uses_only_the_public_api(path: Path) -> None:
    import prolas

    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# ")
    assert len(first.source) > 200  # says what the notebook shows
    public = set(prolas.__all__)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        for module in _imports(tree):
            assert module in ALLOWED_IMPORTS, f"{path.name} imports {module}"
        private = _prolas_names(tree) - public
        assert not private, f"{path.name} uses prolas.{sorted(private)}, not in prolas.__all__"


def test_a_notebook_forecasts_a_dated_series_with_band_and_components() -> None:
    sources = {
        p.name: "".join(c.source for c in nbformat.read(p, as_version=4).cells) for p in NOTEBOOKS
    }
    forecasting = [
        name
        for name, text in sources.items()
        if ".forecast(horizon=" in text and "components" in text and "level=" in text
    ]
    assert forecasting, "no notebook forecasts with a band and components"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_headless_with_a_small_budget(path: Path, monkeypatch) -> None:
    for key, value in SMALL.items():
        monkeypatch.setenv(key, value)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=240,
        kernel_name="python3",  # resolves to this interpreter (ipykernel's native spec)
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
    shown = "".join(
        str(out.get("data", {}).get("text/html", "")) + str(out.get("text", ""))
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    )
    if path.name == "04_your_data.ipynb":  # the forecast frame, dates and components shown
        assert "data_mean" in shown and "lower" in shown and "1959-11-01" in shown
    # the setup cell reports the small budget it ran with
    text = "".join(out.get("text", "") for out in nb.cells[1].get("outputs", []) if "text" in out)
    assert "budget 4" in text, text
