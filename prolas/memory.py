"""Keep the C heap for the fit's temporaries instead of returning it to the system.

A fit evaluates its likelihood a few hundred times, and every evaluation builds a few
dozen ``N x N`` temporaries (Gram matrices, gradient factors, ``K^-1``): 1.3 MB each at
N = 400. glibc's malloc serves blocks this size with fresh ``mmap`` pages or gives the top
of its heap back after each evaluation (its trim threshold adapts to ~2 blocks), so every
evaluation pays page faults for memory it just freed. Measured at N = 400: 35-50 ms per
evaluation with the heap kept against 87-107 ms without (``docs/fit.md``, "Memory").

:func:`keep_heap` raises glibc's mmap threshold to 32 MB (blocks below it come from the
heap) and its trim threshold to 256 MB (the heap top is given back only past that), once
per process. It is a no-op on other C libraries, and off when the environment variable
``PROLAS_KEEP_HEAP`` is ``0``. The memory it keeps is at most the fit's own peak plus
256 MB; results do not change (only where memory comes from).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["keep_heap"]

#: glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20
TRIM_THRESHOLD = 256 * 2**20

_done = [False]


def keep_heap() -> bool:
    """Tune glibc's malloc for the fit's temporaries (module docstring), once per process.

    Returns whether the settings are in place (``False`` off glibc, or when disabled).
    """
    if _done[0]:
        return True
    if os.environ.get("PROLAS_KEEP_HEAP", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and ok
    _done[0] = ok
    return ok
