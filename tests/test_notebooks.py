"""The notebooks run headless (nbclient, this interpreter's kernel) with a small budget,
open with a markdown cell saying what they show, and import nothing but prolas (plus the
standard library and IPython's display helpers)."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT
from nbclient import NotebookClient

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
ALLOWED_IMPORTS = {"os", "tempfile", "warnings", "pathlib", "IPython.display", "prolas"}

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


def _imports(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module or "")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_opens_with_text_and_imports_only_prolas(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# ")
    assert len(first.source) > 200  # says what the notebook shows
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for module in _imports(cell.source):
            top = module.split(".")[0]
            assert module in ALLOWED_IMPORTS or top == "prolas", f"{path.name} imports {module}"


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
    # the setup cell reports the small budget it ran with
    text = "".join(out.get("text", "") for out in nb.cells[1].get("outputs", []) if "text" in out)
    assert "budget 4" in text, text
