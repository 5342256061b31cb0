"""Thread settings for a block of work: torch's intra-op threads and the BLAS pools.

Several parts of prolas run on one torch thread: small GP computations are fastest that
way (two threads on busy cores were measured up to 10x slower), and a search strategy's
rounding must not depend on the thread count (:func:`prolas.pipeline.run_strategy`).

A library call must not change the caller's session: after a block of prolas's work
:func:`restore_threads` puts back torch's thread count and the thread limits of every
BLAS and OpenMP library loaded (``threadpoolctl``), whatever the block set on the way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["restore_threads", "torch_threads"]


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
