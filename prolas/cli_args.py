"""Value types of the command line's flags, shared by ``prolas.cli`` and ``prolas.cli_bench``.

A bad value is an ``argparse`` usage error (one line, exit code 2) before anything runs.
"""

from __future__ import annotations

import argparse

__all__ = ["int_at_least", "non_negative_int", "positive_int"]


def int_at_least(text: str, lowest: int) -> int:
    """``text`` as an integer of at least ``lowest``, else an ArgumentTypeError."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < lowest:
        kind = "a positive integer" if lowest == 1 else f"an integer >= {lowest}"
        raise argparse.ArgumentTypeError(f"expected {kind}, got {v}")
    return v


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    return int_at_least(text, 0)
