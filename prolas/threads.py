"""Torch's thread count for a block of work.

Several parts of prolas run on one torch thread: small GP computations are fastest that
way (a busy two-core machine made two threads up to 10x slower), and a search strategy's
rounding must not depend on the thread count (:func:`prolas.pipeline.run_strategy`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["torch_threads"]


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
