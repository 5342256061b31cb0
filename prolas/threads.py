"""Thread settings for a block of work: torch's intra-op threads and the BLAS pools.

Several parts of prolas run on one torch thread: small GP computations are fastest that
way (two threads on busy cores were measured up to 10x slower), and a search strategy's
rounding must not depend on the thread count (:func:`prolas.pipeline.run_strategy`).

A library call must not change the caller's session: after a block of prolas's work
:func:`restore_threads` puts back torch's thread count and the thread limits of every
BLAS and OpenMP library loaded (``threadpoolctl``), whatever the block set on the way.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["available_cores", "fit_threads", "restore_threads", "torch_threads"]


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS reports it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS/Windows
        return max(1, os.cpu_count() or 1)


def fit_threads() -> int:
    """Threads for an in-process GP fit's independent minimisations
    (:func:`prolas.gp.fit_gp`'s ``workers``): the cores this process may run on, or
    fewer when ``OMP_NUM_THREADS`` says so. A worker of a process pool is given
    ``cores // workers`` there (:class:`prolas.search.executors.ProcessPool`), so the
    fits of ``--workers 2`` on two cores run on one thread each."""
    cores = available_cores()
    try:
        limit = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return cores
    return max(1, min(cores, limit))


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads; the previous count is restored.

    >>> import torch
    >>> before = torch.get_num_threads()
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


@contextmanager
def restore_threads() -> Iterator[None]:
    """Run a block of prolas's work (a search, a report, a forecast) and leave the
    caller's thread settings as they were.

    Inside the block prolas sets threads where it needs them (an in-process GP fit runs
    on one torch thread and one BLAS thread; a search strategy on one torch thread); the
    rest runs with the caller's settings, as the command line runs with the process's.
    On leaving the block, however it is left, torch's intra-op thread count and the
    thread limits of the BLAS and OpenMP libraries (``threadpoolctl``) are what they
    were before it.

    >>> import torch
    >>> before = torch.get_num_threads()
    >>> with restore_threads():
    ...     torch.set_num_threads(1)
    >>> torch.get_num_threads() == before
    True
    """
    import torch
    from threadpoolctl import threadpool_limits

    # limits=None changes nothing on entry and restores every pool's limit on exit
    with threadpool_limits(limits=None):
        old = torch.get_num_threads()
        try:
            yield
        finally:
            torch.set_num_threads(old)
