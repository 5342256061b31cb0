"""Where GP fits run: in-process, a local process pool, or a Dask distributed cluster.

The :class:`~prolas.search.evaluator.Evaluator` submits a whole batch of proposals to
a ``concurrent.futures.Executor`` and collects the results in proposal order, so any
executor gives the same search as sequential fitting (only faster). This module
builds the executor; there is no home-made scheduler:

* ``workers <= 1`` (and no Dask option): ``None``, i.e. fit in-process.
* ``workers = N > 1``: :class:`ProcessPool`, a ``ProcessPoolExecutor`` with N
  processes started by ``forkserver`` (``spawn`` where that is unavailable; plain
  ``fork`` is unsafe with torch's thread pools) that replaces itself when a worker
  dies, so a killed worker costs a retry, not the search.
* ``scheduler = "tcp://HOST:PORT"``: the executor of a Dask ``Client`` connected to a
  running scheduler; ``dask_local = N``: a ``LocalCluster`` of N single-threaded
  worker processes started for this search. Both use
  ``client.get_executor(pure=False)`` (otherwise Dask would treat repeated
  submissions as one cached task). Dask is an optional extra (``pip install
  prolas[dask]``) imported only here and only when asked for.

Threads. Each worker pins torch (and OpenMP/MKL) to its share of the cores,
``max(1, cores // workers)``, so N workers never oversubscribe the machine (measured:
at small N one thread is as fast as two, and two busy two-thread processes on two
cores slowed a Cholesky 300-fold). Workers ignore SIGINT: Ctrl-C reaches the main
process, which writes the partial result and shuts the workers down.

>>> with make_executor(workers=1) as ex:
...     ex is None
True
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import BrokenExecutor, Executor, Future, ProcessPoolExecutor

from prolas.errors import ProlasError
from prolas.processes import (
    WARM_MODULES,
    exit_with_parent,
    main_module_is_guarded,
    main_module_rerun_by_workers,
    process_context,
    start_forkserver,
    unguarded_main_script,
)
from prolas.threads import available_cores

__all__ = [
    "available_cores",
    "check_executor_options",
    "default_workers",
    "make_executor",
    "ProcessPool",
    "ExecutorError",
    "SMALL_JOB",
]

#: Searches with at most this many evaluations run in-process by default: starting a
#: pool (≈ 4 s with torch imported, measured in benchmarks/results/parallel/PARALLEL.md) costs more
#: than it saves on a few fits.
SMALL_JOB = 10

_THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class ExecutorError(ProlasError):
    """The requested executor cannot be built (bad options, Dask missing or unreachable)."""


def default_workers(method: str, batch: int, budget: int, cores: int | None = None) -> int:
    """Default ``--workers``: the cores for a search that proposes batches, else 1.

    CKS evaluates a whole level (≥ 4 candidates) at once; the other strategies
    propose ``batch`` points per iteration, so more than ``batch`` workers would idle.
    Small jobs (``budget <= SMALL_JOB``) stay in-process.
    """
    cores = available_cores() if cores is None else cores
    if budget <= SMALL_JOB:
        return 1
    width = cores if method == "cks" else min(batch, cores)
    return max(1, width)


def _pin_threads(threads: int) -> None:
    """Limit torch/OpenMP/MKL in this process to ``threads`` threads."""
    for var in _THREAD_ENV:
        os.environ[var] = str(threads)
    import torch

    torch.set_num_threads(threads)


def _init_worker(threads: int, guarded_main: bool = False) -> None:
    """Process-pool initializer: pin threads; leave Ctrl-C to the main process; exit
    with it (:func:`prolas.processes.exit_with_parent`). A worker of a program whose
    main module runs nothing on import is such a program too (its own fits may split:
    :func:`prolas.processes.main_module_rerun_by_workers`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _pin_threads(threads)
    exit_with_parent()
    if guarded_main:
        main_module_is_guarded()


class ProcessPool(Executor):
    """A ``ProcessPoolExecutor`` that replaces itself after a worker died.

    When a worker process dies (killed, out of memory, ``os._exit``) the standard
    pool is *broken*: every outstanding future fails with ``BrokenProcessPool`` and
    every later ``submit`` raises. Here the next ``submit`` shuts the broken pool
    down and starts a fresh one (counted in :attr:`replaced`), so the Evaluator can
    resubmit the lost fits.

    Args:
        workers: number of worker processes.
        threads: torch threads per worker (default ``max(1, cores // workers)``).

    Raises:
        ExecutorError: from a main script without an ``if __name__ == "__main__":`` block,
            which every worker would run again (:func:`prolas.processes.unguarded_main_script`).
    """

    def __init__(self, workers: int, threads: int | None = None) -> None:
        if workers < 1:
            raise ExecutorError("--workers must be at least 1")
        script = unguarded_main_script()
        if script is not None:
            raise ExecutorError(
                f"worker processes import the main script {script} again, and it has no "
                '`if __name__ == "__main__":` block, so each would run the whole script: '
                "put its work under one, or use one worker"
            )
        self.workers = int(workers)
        self.threads = int(threads) if threads else max(1, available_cores() // self.workers)
        self.replaced = 0
        self._lock = threading.Lock()
        self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            self.workers,
            mp_context=process_context(),
            initializer=_init_worker,
            initargs=(self.threads, main_module_rerun_by_workers() is None),
        )

    def submit(self, fn: Callable, /, *args, **kwargs) -> Future:
        with self._lock:
            try:
                return self._pool.submit(fn, *args, **kwargs)
            except BrokenExecutor:
                _kill_workers(self._pool)
                self._pool = self._new_pool()
                self.replaced += 1
                return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if getattr(self._pool, "_broken", False):  # see _kill_workers
                _kill_workers(self._pool)
            else:
                self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)

    def terminate(self) -> None:
        """Stop now: cancel queued fits and kill the workers (used on Ctrl-C)."""
        with self._lock:
            _kill_workers(self._pool)


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """Shut ``pool`` down without waiting and kill its worker processes.

    Used on Ctrl-C and on a broken pool. For the broken pool it is not optional: once
    in the test suite an idle worker survived the pool's breaking (most likely spawned
    by a ``submit`` racing it), and CPython 3.11's manager thread joined it forever
    (``terminate_broken -> join_executor_internals -> Process.join``), so the
    interpreter hung at exit. Killing what the pool still lists ends that join.
    """
    # ProcessPoolExecutor has no public terminate before Python 3.14
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with contextlib.suppress(Exception):
            p.terminate()
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(timeout=5)


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise ExecutorError(
            "--scheduler/--dask-local need Dask distributed: pip install 'prolas[dask]'"
        ) from None
    return distributed


def _pin_share(threads_on_host: int) -> int:
    """Worker side: pin to this host's cores divided by the worker threads on it."""
    threads = max(1, available_cores() // max(threads_on_host, 1))
    _pin_threads(threads)
    return threads


def _pin_dask_workers(client) -> None:
    """Pin every Dask worker to its share of its host's cores (no oversubscription)."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    by_host: dict[str, list[tuple[str, int]]] = {}
    for addr, info in workers.items():
        by_host.setdefault(info.get("host", addr), []).append((addr, int(info.get("nthreads", 1))))
    for entries in by_host.values():
        used = sum(n for _, n in entries)
        client.run(_pin_share, used, workers=[a for a, _ in entries])


@contextlib.contextmanager
def _dask_executor(scheduler: str | None, dask_local: int | None) -> Iterator[Executor]:
    distributed = _import_distributed()
    import dask

    with contextlib.ExitStack() as stack:
        if dask_local is not None:
            # Dask's nanny starts workers with multiprocessing (``spawn`` by default, each
            # worker then imports torch, Dask, scipy: ~10 s each on a busy machine); fork
            # them from our pre-loaded fork server instead.
            method = start_forkserver(extra=("distributed",))
            stack.enter_context(
                dask.config.set({"distributed.worker.multiprocessing-method": method})
            )
            cluster = stack.enter_context(
                distributed.LocalCluster(
                    n_workers=dask_local,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                    preload=list(WARM_MODULES),  # no-ops when forked from the server
                )
            )
            client = stack.enter_context(distributed.Client(cluster))
        else:
            try:
                client = distributed.Client(scheduler, timeout="10s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise ExecutorError(
                    f"cannot reach the Dask scheduler at {scheduler}: {exc}"
                ) from None
            stack.enter_context(client)
            try:
                client.wait_for_workers(1, timeout=60)
            except TimeoutError:
                raise ExecutorError(
                    f"the Dask scheduler at {scheduler} has no workers (waited 60 s)"
                ) from None
        _pin_dask_workers(client)
        yield client.get_executor(pure=False)


def check_executor_options(
    workers: int | None, scheduler: str | None, dask_local: int | None
) -> None:
    """Refuse conflicting or out-of-range execution options before anything runs; each
    message names the option's Python and command-line forms.

    Raises:
        ExecutorError: ``scheduler`` with ``dask_local``; ``workers`` with Dask; a count
            below 1; a scheduler address without a scheme.
    """
    if scheduler is not None and dask_local is not None:
        raise ExecutorError(
            "use either scheduler (--scheduler) or dask_local (--dask-local), not both"
        )
    if (scheduler is not None or dask_local is not None) and workers not in (None, 1):
        raise ExecutorError(
            "workers (--workers) is for a local process pool; Dask sets its own workers"
        )
    if dask_local is not None and dask_local < 1:
        raise ExecutorError("dask_local (--dask-local) must be at least 1")
    if scheduler is not None and "://" not in scheduler:
        raise ExecutorError(
            f"scheduler (--scheduler) expects an address like tcp://HOST:PORT, got {scheduler!r}"
        )
    if workers is not None and workers < 1:
        raise ExecutorError("workers (--workers) must be at least 1")


@contextlib.contextmanager
def make_executor(
    workers: int | None = None,
    scheduler: str | None = None,
    dask_local: int | None = None,
) -> Iterator[Executor | None]:
    """Context manager yielding the executor for a search (``None`` = in-process).

    Args:
        workers: local worker processes; ``None`` or 1 fits in-process.
        scheduler: address of a running Dask scheduler, e.g. ``tcp://10.0.0.5:8786``.
        dask_local: start a Dask ``LocalCluster`` with this many single-threaded
            worker processes.
    Raises:
        ExecutorError: conflicting options, Dask not installed, scheduler unreachable.

    On leaving the block the workers are shut down; if the block raised (Ctrl-C,
    an error), queued fits are cancelled and pool workers are killed at once.
    """
    check_executor_options(workers, scheduler, dask_local)
    if scheduler is not None or dask_local is not None:
        with _dask_executor(scheduler, dask_local) as ex:
            yield ex
        return
    if workers is None or workers == 1:
        yield None
        return
    pool = ProcessPool(workers)
    try:
        yield pool
    except BaseException:
        pool.terminate()
        raise
    else:
        pool.shutdown(wait=True)
