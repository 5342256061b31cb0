"""The package's layers: every import points down (docs/architecture.md, "Layers").

Each module of ``prolas`` belongs to one layer; a module may import (at the top, inside
a function or for type checking only) modules of its own layer or of layers below it,
never above. Within a layer the imports form no cycle. The rule is checked on the
source with ``ast``, so a lazy import inside a function counts as much as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

PACKAGE = ROOT / "prolas"

#: Bottom to top. A name is a module or a package (then all of its modules).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "foundation",
        (
            "prolas._version",
            "prolas.errors",
            "prolas.limits",
            "prolas.memory",
            "prolas.output_lock",
            "prolas.processes",
            "prolas.progress",
            "prolas.threads",
        ),
    ),
    (
        "records, data, expressions",
        (
            "prolas.records",
            "prolas.csv_dialect",
            "prolas.calendar_steps",
            "prolas.data",
            "prolas.spectrum",
            "prolas.kernels",
            "prolas.expr",
            "prolas.nesting",
        ),
    ),
    (
        "grammar, encoding, KG-VAE",
        (
            "prolas.grammar",
            "prolas.encoding",
            "prolas.vae_model",
            "prolas.vae_checkpoints",
            "prolas.vae",
        ),
    ),
    ("gp", ("prolas.gp",)),
    ("surrogates", ("prolas.surrogates",)),
    ("search", ("prolas.search",)),
    ("pipeline", ("prolas.pipeline",)),
    ("report", ("prolas.report",)),
    (
        "jobs: one series' files, the KernelSearch object, many series",
        ("prolas.fitjob", "prolas.kernel_search", "prolas.many"),
    ),
    ("bench", ("prolas.bench",)),
    ("cli and API", ("prolas.cli", "prolas")),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    """Index of the most specific layer entry that ``module`` falls under."""
    best, best_len = None, -1
    for i, (_, names) in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_len:
                best, best_len = i, len(name)
    assert best is not None, f"{module} is in no layer: add it to LAYERS and docs/architecture.md"
    return best


def prolas_imports(path: Path) -> set[str]:
    """Every ``prolas`` module that ``path`` imports, anywhere in the file."""
    tree = ast.parse(path.read_text())
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "prolas"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "prolas":
                continue
            for alias in node.names:  # `from prolas import report` imports a module
                sub = f"{mod}.{alias.name}"
                is_module = (ROOT / Path(*sub.split("."))).with_suffix(".py").exists() or (
                    ROOT / Path(*sub.split(".")) / "__init__.py"
                ).exists()
                found.add(sub if is_module else mod)
    found.discard(here)
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_point_down(path: Path) -> None:
    here = module_name(path)
    mine = layer_of(here)
    upward = [
        f"{m} ({LAYERS[layer_of(m)][0]})"
        for m in sorted(prolas_imports(path))
        if layer_of(m) > mine
    ]
    assert not upward, f"{here} ({LAYERS[mine][0]}) imports layers above it: {upward}"


def test_no_cycles_within_a_layer() -> None:
    graph = {module_name(p): prolas_imports(p) for p in MODULES}
    # a package's __init__ re-exports its modules; importing the package is importing them
    graph = {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}
    for m, deps in graph.items():
        parent = m.rpartition(".")[0]
        if parent not in ("", "prolas") and parent in deps:
            pytest.fail(f"{m} imports its own package's __init__; import the sibling module")
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if layer_of(d) != layer_of(m) or d == "prolas":
                continue
            if state.get(d) == 1:
                cycle = stack[stack.index(d) :] + [d] if d in stack else [m, d]
                pytest.fail("import cycle within a layer: " + " -> ".join(cycle))
            if d not in state:
                visit(d, stack + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_the_rule_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    """The checker itself: an import inside a function and a type-only import count."""
    src = PACKAGE / "gp" / "fit.py"
    assert "prolas.records" in prolas_imports(src)
    assert layer_of("prolas.gp.fit") < layer_of("prolas.search.evaluator")
    assert layer_of("prolas.report") > layer_of("prolas.pipeline")


def test_the_api_function_search_survives_importing_the_search_package() -> None:
    """``prolas.search`` is both the API function and a subpackage (see prolas/__init__)."""
    import prolas
    import prolas.search.journal  # noqa: F401
    import prolas.search.latent  # noqa: F401

    assert callable(prolas.search) and prolas.search.__module__ == "prolas"
