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
module of the program that started it: a script that uses worker processes keeps its
top-level work under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context

__all__ = ["WARM_MODULES", "process_context", "start_forkserver"]

#: Imported once in the fork server (and by Dask workers at start-up).
WARM_MODULES = ("prolas.gp", "scipy.signal", "torch._dynamo", "torch.optim")


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
