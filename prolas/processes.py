"""How prolas starts worker processes: one fork server, with the heavy modules imported.

Worker processes (a search's pool of fits, :mod:`prolas.search.executors`; a fit's
minimisations on small data, :mod:`prolas.gp.split`) start by ``forkserver``: plain
``fork`` is unsafe once torch's thread pools exist, and ``spawn`` re-imports torch in
every worker. The server imports :data:`WARM_MODULES` once, and every worker forks from
it with them imported (a GP fit imports them lazily; in a fresh process that made the
first fit take ≈ 13 s instead of ≈ 0.4 s, measured under load,
``benchmarks/results/parallel/PARALLEL.md``). Where there is no fork server (Windows),
``spawn``.

As with every ``multiprocessing`` start method but ``fork``, a worker imports the main
module of the program that started it: a script that asks for worker processes
(``--workers``, ``workers=``) keeps its top-level work under
``if __name__ == "__main__":``. Worker processes nobody asked for (a fit's split on
small data) start only where that import runs no user code
(:func:`main_module_rerun_by_workers`).

A worker exits when the process that started it dies, even by ``SIGKILL``
(:func:`exit_with_parent`): a pool's idle workers would otherwise wait for work forever,
each holding its memory (and the fork server with them).
"""

from __future__ import annotations

import ast
import multiprocessing
import multiprocessing.context
import os
import sys
import threading
from pathlib import Path

__all__ = [
    "WARM_MODULES",
    "exit_with_parent",
    "main_module_is_guarded",
    "main_module_rerun_by_workers",
    "process_context",
    "start_forkserver",
    "unguarded_main_script",
]

#: Imported once in the fork server (and by Dask workers at start-up): what a GP fit
#: imports on its first call. ``torch.fx.experimental.symbolic_shapes`` (with sympy) is
#: imported by torch's ``broadcast_shapes`` the first time GPyTorch builds a kernel; a
#: name a later torch moves is skipped (the fork server ignores preloads it cannot
#: import). Not ``torch._dynamo``: nothing a worker runs by default uses torch.optim
#: (the surrogate's fit uses SciPy's L-BFGS-B), and importing it took the server 1.3-2.7 s.
WARM_MODULES = ("prolas.gp", "scipy.signal", "torch.fx.experimental.symbolic_shapes")


def process_context(extra: tuple[str, ...] = ()) -> multiprocessing.context.BaseContext:
    """``forkserver`` with :data:`WARM_MODULES` (and ``extra``) pre-imported: workers
    fork from one clean server that has imported torch, so a pool (and its replacement
    after a crash) starts without re-importing anything; ``spawn`` where there is no
    forkserver. The preload list only matters before the server first starts."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([*WARM_MODULES, *extra])
        return ctx
    return multiprocessing.get_context("spawn")  # pragma: no cover - Windows


def start_forkserver(extra: tuple[str, ...] = ()) -> str:
    """Start the shared fork server now (with our preloads); returns the start method."""
    ctx = process_context(extra)
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()
    return ctx.get_start_method()


#: Set by :func:`main_module_is_guarded`: this program's main module runs nothing on import.
_GUARDED_MAIN = False


def main_module_rerun_by_workers() -> str | None:
    """The main module a new worker process would run again, or None if it runs none.

    A ``spawn`` or ``forkserver`` worker re-imports the starting program's main module
    (``multiprocessing.spawn.get_preparation_data``) unless it is a package's
    ``__main__`` (``python -m pkg``), IPython, or has no file (``python -c``, a
    notebook's kernel, stdin). prolas's own entry points keep their work under
    ``if __name__ == "__main__":`` and say so (:func:`main_module_is_guarded`). Any
    other script may not: a worker would run its top level again (its fits, its
    files) before doing what it was started for."""
    if _GUARDED_MAIN:
        return None
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None:
        return None if name == "__main__" or name.endswith(".__main__") else name
    path = getattr(main, "__file__", None)
    if path is None or Path(path).stem == "ipython":
        return None
    return str(path)


def main_module_is_guarded() -> None:
    """Declare that this program's main module runs nothing on import (prolas's command
    line: the console script and ``python -m prolas``), so implicit worker processes
    may start (:func:`main_module_rerun_by_workers`)."""
    global _GUARDED_MAIN
    _GUARDED_MAIN = True


def exit_with_parent() -> None:
    """In a worker process: exit at once when the process that started it dies.

    A ``ProcessPoolExecutor`` worker blocks on its call queue, whose write end it holds
    itself, so it never sees its parent die by ``SIGKILL`` (or the OOM killer) and would
    wait forever. ``multiprocessing.parent_process()``'s sentinel is a pipe whose other
    end only the parent holds: it becomes readable when the parent is gone. A daemon
    thread waits on it and ends the worker with ``os._exit`` (no cleanup: the parent
    that would collect anything is gone)."""
    parent = multiprocessing.parent_process()
    if parent is None or getattr(parent, "sentinel", None) is None:
        return

    def watch() -> None:
        parent.join()  # waits on the sentinel: returns when the parent has exited
        os._exit(1)

    threading.Thread(target=watch, name="prolas-exit-with-parent", daemon=True).start()


def unguarded_main_script() -> str | None:
    """The main script's path if worker processes would run it again and it has no
    ``if __name__ == "__main__":`` block at all, else None.

    Asked-for workers (``workers=2``, ``--workers``) from such a script would each run the
    whole script, its search included, before serving the pool: the script's work and
    output doubled or tripled, silently. A script with the block is trusted to keep its
    work under it; one that cannot be read or parsed, or a module run by name
    (``python -m tool``), is not judged."""
    path = main_module_rerun_by_workers()
    if path is None or not path.endswith(".py"):
        return None
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            sides = [node.test.left, *node.test.comparators]
            names = {n.id for n in sides if isinstance(n, ast.Name)}
            values = {n.value for n in sides if isinstance(n, ast.Constant)}
            if "__name__" in names and "__main__" in values:
                return None
    return path
