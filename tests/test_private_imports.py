"""No module of prolas uses another module's private names (issue 19).

A name with a leading underscore (``_pyplot``, ``_STRATEGIES``; dunders such as
``__version__`` excepted) belongs to its module: another module that needs it gets a
public name with a docstring, or the code moves to where it belongs. Checked on every
module under ``prolas/`` with :mod:`ast`, and on planted sources that break the law.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "prolas"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """``prolas/report/words.py`` -> ``prolas.report.words``; a package's ``__init__.py``
    is the package."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def prolas_modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name."""
    return {module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module a ``from ... import`` reads from, relative imports resolved."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attribute accesses on a name, else ``None``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def private_uses(
    source: str, module: str, modules: set[str], is_package: bool = False
) -> list[str]:
    """Where ``source`` (the code of ``module``) uses a private name of another prolas
    module, one line each (``"line 3: from prolas.report import _pyplot"``).

    Caught: ``from prolas.X import _name`` (also relative, ``from .X import _name``),
    and ``m._name`` / ``prolas.X._name`` where ``m`` or ``prolas.X`` is a prolas module
    bound by ``import prolas.X [as m]`` or ``from prolas[.P] import X``. A module's use
    of its own private names is its business; dunder names are not private.
    """
    tree = ast.parse(source)
    found: list[str] = []
    bound: dict[str, str] = {}  # local name -> the prolas module it is
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source_module = _absolute(node, module, is_package)
            if source_module.split(".")[0] != "prolas" or source_module == module:
                continue
            for alias in node.names:
                full = f"{source_module}.{alias.name}"
                if full in modules:
                    bound[alias.asname or alias.name] = full
                elif _private(alias.name):
                    found.append(f"line {node.lineno}: from {source_module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "prolas":
                    continue
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:  # `import prolas.x.y` binds `prolas`
                    bound["prolas"] = "prolas"
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        dotted = _dotted(node.value)
        if dotted is None:
            continue
        head, _, rest = dotted.partition(".")
        if head not in bound:
            continue
        target = bound[head] + (f".{rest}" if rest else "")
        if target in modules and target != module and f"{target}.{node.attr}" not in modules:
            found.append(f"line {node.lineno}: {dotted}.{node.attr}")
    return found


def test_no_prolas_module_uses_another_modules_private_names() -> None:
    modules = prolas_modules()
    assert "prolas.report" in modules and "prolas.gp.anatomy" in modules
    broken = {
        name: uses
        for name, path in modules.items()
        if (uses := private_uses(path.read_text(), name, set(modules), path.stem == "__init__"))
    }
    assert broken == {}, "\n".join(f"{m}: {u}" for m, uses in broken.items() for u in uses)


MODULES = {
    "prolas",
    "prolas._version",
    "prolas.data",
    "prolas.pipeline",
    "prolas.report",
    "prolas.report.words",
    "prolas.report.plots",
}


@pytest.mark.parametrize(
    "source",
    [
        "from prolas.report import _pyplot",
        "def f():\n    from prolas.pipeline import _STRATEGIES\n    return _STRATEGIES",
        "from prolas.report.words import describe_fit, _length as length",
        "from prolas import report\nreport._pyplot()",
        "from prolas import report as r\nx = r._pyplot",
        "import prolas.report.words as w\nw._length(1.0, True)",
        "import prolas.report\nprolas.report._pyplot()",
        "import prolas.report.words\nprolas.report.words._SETTLED",
        "from prolas.report import words\nwords._length(1.0, True)",
        "from . import _pyplot",  # relative: the package prolas.report
        "from .words import _length",
        "from ..data import _decimal_years",
    ],
)
def test_a_planted_private_use_is_caught(source: str) -> None:
    assert len(private_uses(source, "prolas.report.plots", MODULES)) == 1, source


@pytest.mark.parametrize(
    "source",
    [
        "from prolas._version import __version__",
        "from prolas.report import describe_fit, words",
        "import prolas.report\nprolas.report.__name__",
        "from prolas import report\nreport.write_report",
        "_EXTRA = 0.2\nx = _EXTRA",  # its own private name
        "class A:\n    def f(self):\n        return self._cache",
        "from prolas.data import Dataset\nDataset(x=1)._fields",  # an object, not a module
        "import numpy as np\nnp._NoValue",  # not prolas
        "import prolas\nprolas._version.__version__",  # a module reached by attribute
    ],
)
def test_public_uses_and_own_private_names_pass(source: str) -> None:
    assert private_uses(source, "prolas.report.plots", MODULES) == [], source


def test_relative_imports_resolve_from_a_package_init() -> None:
    # in prolas/report/__init__.py, `from .words import _x` reads prolas.report.words
    uses = private_uses("from .words import _x", "prolas.report", MODULES, is_package=True)
    assert uses == ["line 1: from prolas.report.words import _x"]
    assert private_uses("from . import _x", "prolas.report", MODULES, is_package=True) == []
