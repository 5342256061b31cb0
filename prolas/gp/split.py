"""A fit's independent minimisations split between this process and worker processes.

A fit (:func:`prolas.gp.fit_gp`) runs many independent L-BFGS-B minimisations
(:func:`prolas.gp.minimise.minimise`): the screened restarts, the polishes, the hop
moves; and likelihood values at many points (its presampled starts, its hop scans).
From :data:`prolas.gp.fit.THREADED_FIT_POINTS` points on they run on threads; below, a
large share of each evaluation is Python, the threads queue for the GIL, and two
threads were measured slower than one (``benchmarks/results/long_series/``,
"Threads"). So on small data a fit given ``workers = w > 1`` runs one item in w here
and the others in ``w - 1`` worker processes (:class:`ProcessSplit`): item ``k`` here
when ``k mod w = 0``, else in a batch for worker ``k mod w``, the batches sent before
this process starts on its own items.

Same answer for every ``w``: a worker rebuilds the fit's :class:`GramModel` from its
expression, inputs and floors (once per model, :func:`_model`), runs exactly the
minimisation this process would run, on one BLAS thread as the fit here does, and the
results are put back in the items' order. A worker that fails (killed, a broken pool,
any error) costs only time: its items are run here, and so is everything after it in
this process (:func:`disabled`; one warning says why): a pool that cannot start (a
program read from stdin, which a worker cannot import) would otherwise fail again on
every fit.

The pool is shared by every fit of the process, started on first use from prolas's
fork server (:func:`prolas.processes.process_context`: torch and the fit's modules
imported once) and closed at exit (:func:`close_pool`); until its workers have started,
fits run here rather than wait for them. A worker re-imports the program's main module,
so the split starts only where that runs no user code (prolas's command line, ``python
-m``, ``-c``, notebooks; :func:`prolas.processes.main_module_rerun_by_workers`): a
plain script's fits run in its own process unless it declares its top level guarded
(:func:`prolas.processes.main_module_is_guarded`). Workers exit with the process that
started them (:func:`prolas.processes.exit_with_parent`).
"""

from __future__ import annotations

import atexit
import itertools
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor

import numpy as np

from prolas.gp.gram import GramModel
from prolas.gp.minimise import log_likelihood_at, minimise
from prolas.gp.prior import PenalisedModel
from prolas.processes import exit_with_parent, process_context

__all__ = ["ProcessSplit", "close_pool", "disabled", "wait_ready"]

#: Models a worker keeps, most recent last (a fit uses its model and at most a subset's).
_CACHE_SIZE = 4
#: Worker side: token -> the GramModel rebuilt from its spec.
_MODELS: dict[int, GramModel] = {}
#: This process's pool and its number of workers.
_POOL: ProcessPoolExecutor | None = None
_POOL_SIZE = 0
#: One ``_ready`` call per worker of the pool: until all are done, fits run here.
_STARTING: list[Future] = []
#: The thread starting the pool, and what it raised.
_STARTER: threading.Thread | None = None
_STARTER_ERROR: Exception | None = None
_LOCK = threading.RLock()
_TOKENS = itertools.count(1)
#: Why the worker processes were given up in this process (None: they were not).
_FAILED: str | None = None

#: What a worker needs to rebuild a model: (token, expression, t, period floor,
#: lengthscale floor, prior width (0: the likelihood alone), y).
Spec = tuple


def _worker_init() -> None:
    """A worker runs on one BLAS thread and one torch thread, as a fit here does, and
    exits with the process that started it."""
    import torch
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")
    torch.set_num_threads(1)
    exit_with_parent()


def _model(spec: Spec) -> GramModel:
    """The spec's model, rebuilt on first use and kept for the fit's next batches."""
    token, expr, t, period_floor, lengthscale_floor, prior_width, _ = spec
    model = _MODELS.pop(token, None)
    if model is None:
        model = GramModel(expr, t, period_floor, lengthscale_floor)
        if prior_width > 0:  # a screen under the prior (prolas.gp.prior)
            model = PenalisedModel(model, prior_width)
    _MODELS[token] = model  # most recent last
    while len(_MODELS) > _CACHE_SIZE:
        _MODELS.pop(next(iter(_MODELS)))
    return model


class _Minimise:
    """A worker's batch of :func:`minimise` runs (picklable: module level)."""

    def __init__(self, max_iter: int, tolerance: float) -> None:
        self.max_iter, self.tolerance = max_iter, tolerance

    def __call__(self, spec: Spec, thetas: list[np.ndarray]) -> list[tuple[np.ndarray, float]]:
        model, y = _model(spec), spec[-1]
        return [minimise(model, th, y, self.max_iter, self.tolerance) for th in thetas]


def _values(spec: Spec, thetas: list[np.ndarray]) -> list[float]:
    """A worker's batch of :func:`log_likelihood_at` values."""
    model, y = _model(spec), spec[-1]
    return [log_likelihood_at(model, th, y) for th in thetas]


def _ready() -> bool:
    """Sent to each new worker at once, so that its start overlaps the fit's own work."""
    return True


def _pool(workers: int) -> ProcessPoolExecutor | None:
    """The pool of ``workers`` processes once they have all started, else None.

    The first call starts it on a thread of its own: the fork server's first start
    imports torch, and starting a worker blocks until then, seconds that the fits spend
    running here instead of waiting."""
    global _POOL, _POOL_SIZE, _STARTING, _STARTER
    with _LOCK:
        if _POOL_SIZE != workers:
            close_pool()
            _POOL_SIZE = workers
            _STARTER = threading.Thread(target=_start, args=(workers,), daemon=True)
            _STARTER.start()
        if _STARTER is not None and _STARTER.is_alive():
            return None
        if _STARTER_ERROR is not None:
            raise _STARTER_ERROR
        if not all(f.done() for f in _STARTING):
            return None
        for f in _STARTING:
            f.result()  # raises if a worker could not start
        return _POOL


def wait_ready(workers: int, timeout: float = 60.0) -> bool:
    """Start the pool of ``workers`` processes if needed and wait until its workers have
    started (a benchmark or a test that wants every fit split); False if they could not
    start in ``timeout`` seconds or the worker processes were given up."""
    deadline = time.monotonic() + timeout
    while _FAILED is None and time.monotonic() < deadline:
        try:
            if _pool(workers) is not None:
                return True
        except Exception as error:  # noqa: BLE001 - a pool that cannot start
            _give_up(error)
            return False
        time.sleep(0.05)
    return False


def _start(workers: int) -> None:
    """Start the pool and one ``_ready`` call per worker (on the starter thread)."""
    global _POOL, _STARTING, _STARTER_ERROR
    try:
        pool = ProcessPoolExecutor(workers, mp_context=process_context(), initializer=_worker_init)
        _STARTING = [pool.submit(_ready) for _ in range(workers)]
        _POOL = pool
    except Exception as error:  # noqa: BLE001 - reported by the next _pool call
        _STARTER_ERROR = error


def close_pool() -> None:
    """Shut this process's worker pool down (at exit, or after a worker failed)."""
    global _POOL, _POOL_SIZE, _STARTING, _STARTER, _STARTER_ERROR
    with _LOCK:
        if _STARTER is not None:
            _STARTER.join()  # a pool being started is shut down once it exists
        if _POOL is not None:
            _POOL.shutdown(wait=False, cancel_futures=True)
        _POOL, _POOL_SIZE, _STARTING, _STARTER, _STARTER_ERROR = None, 0, [], None, None


atexit.register(close_pool)

#: How long the exit waits for a pool being started (under load the fork server's first
#: start, which imports torch, took tens of seconds).
_START_WAIT_AT_EXIT = 120.0


def _finish_start() -> None:
    """At interpreter exit, before ``concurrent.futures`` shuts its pools down: let a
    pool being started finish starting. The executor's own exit hook counts the live
    workers and sends each a stop sentinel; a worker the starter thread was still
    spawning then got none, and the exit waited for it forever (seen with a short script
    on a loaded machine). Started, it runs its ``_ready`` call and is stopped as usual."""
    starter = _STARTER
    if starter is not None and starter.is_alive():
        starter.join(_START_WAIT_AT_EXIT)


# threading's exit hooks run in reverse order of registration, before the non-daemon
# threads are joined and before atexit: registered after concurrent.futures.process's
# own (imported above through ProcessPoolExecutor), this one runs first.
if hasattr(threading, "_register_atexit"):
    try:
        threading._register_atexit(_finish_start)
    except RuntimeError:  # first imported while the interpreter shuts down: no pool then
        pass


def disabled() -> str | None:
    """Why this process's fits no longer use worker processes, or None."""
    return _FAILED


def _give_up(error: BaseException) -> None:
    """Stop using worker processes in this process, saying why once."""
    global _FAILED
    close_pool()
    if _FAILED is None:
        _FAILED = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        warnings.warn(
            f"a fit's worker process failed ({_FAILED}); fits run in this process only",
            RuntimeWarning,
            stacklevel=3,
        )


class ProcessSplit:
    """Runs a fit's minimisations one in ``workers`` here, the rest in worker processes.

    Args:
        workers: the processes working, this one included (at least 2).
    """

    def __init__(self, workers: int) -> None:
        if workers < 2:
            raise ValueError(f"a process split needs at least 2 workers, got {workers}")
        self.workers = int(workers)
        self._tokens: dict[int, int] = {}  # id(model) -> token, for this fit's models

    def _spec(self, model: GramModel, y: np.ndarray) -> Spec:
        token = self._tokens.setdefault(id(model), next(_TOKENS))
        width = getattr(model, "width", 0.0)  # a PenalisedModel's prior width
        return (token, model.expr, model.t, model.period_floor, model.lengthscale_floor, width, y)

    def _run(
        self,
        model: GramModel,
        y: np.ndarray,
        items: list,
        remote: Callable[[Spec, list], list],
        local: Callable,
    ) -> list:
        """``local(item)`` for every item, in order, items ``k mod w != 0`` computed by
        ``remote`` in worker ``k mod w`` (or here, when the worker fails)."""
        w = self.workers
        if len(items) < 2 or _FAILED is not None:
            return [local(item) for item in items]
        batches = {j: list(range(j, len(items), w)) for j in range(1, min(w, len(items)))}
        futures: dict[int, Future] = {}
        try:
            pool, spec = _pool(w - 1), self._spec(model, y)
            for j, ks in batches.items() if pool is not None else ():
                futures[j] = pool.submit(remote, spec, [items[k] for k in ks])
        except Exception as error:  # no pool (a broken one, no processes allowed): all here
            _give_up(error)
            futures = {}
        out: list = [None] * len(items)
        for k in range(0, len(items), w):
            out[k] = local(items[k])
        for j, ks in batches.items():
            results = None
            if j in futures:
                try:
                    results = futures[j].result()
                except Exception as error:  # the worker died or failed: its items run here
                    _give_up(error)
            if results is None or len(results) != len(ks):
                results = [local(items[k]) for k in ks]
            for k, r in zip(ks, results):
                out[k] = r
        return out

    def minimise(
        self,
        model: GramModel,
        thetas: Sequence[np.ndarray],
        y: np.ndarray,
        max_iter: int,
        tolerance: float,
    ) -> list[tuple[np.ndarray, float]]:
        """:func:`minimise` from each of ``thetas``, in order."""
        return self._run(
            model,
            y,
            list(thetas),
            _Minimise(max_iter, tolerance),
            lambda th: minimise(model, th, y, max_iter, tolerance),
        )

    def value(self, model: GramModel, thetas: Sequence[np.ndarray], y: np.ndarray) -> list[float]:
        """:func:`log_likelihood_at` each of ``thetas``, in order."""
        return self._run(
            model, y, list(thetas), _values, lambda th: log_likelihood_at(model, th, y)
        )
