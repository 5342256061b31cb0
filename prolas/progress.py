"""Progress display for long work: a tqdm bar in a terminal or notebook, plain lines in a log.

A tqdm bar redraws itself with carriage returns, which a terminal turns into one moving
line but a log file (a batch job's output, ``prolas fit ... 2> run.log``, CI) keeps as one
ever-longer line of redraws interleaved with the run's messages. :func:`progress_bar`
therefore returns tqdm's bar only where it can redraw — standard error is a terminal, or a
notebook widget is available — and otherwise a :class:`LineProgress` that writes one
self-contained line at every tenth of the work and at its end.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, Protocol, TextIO

LINES = 10  # a log gets about this many progress lines per bar


class Progress(Protocol):
    """What prolas calls on a progress display (tqdm's bar and :class:`LineProgress`)."""

    def update(self, n: int = 1) -> Any: ...

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> Any: ...

    def close(self) -> Any: ...


class LineProgress:
    """The subset of tqdm's interface prolas uses, written as whole lines to ``file``:

    ``desc: 20/50 fits (40 %), 12 s; best BIC 99.15: CP(RQ*SE, PER*SE)``

    one line each time the count passes a multiple of ``ceil(total / LINES)`` and one at
    :meth:`close` if the last count was not written yet.
    """

    def __init__(
        self,
        total: int,
        unit: str = "it",
        desc: str = "",
        initial: int = 0,
        file: TextIO | None = None,
    ) -> None:
        self.total, self.unit, self.desc = int(total), unit, desc
        self.n = self.written = int(initial)
        self.postfix = ""
        self.file = file
        self.step = max(1, math.ceil(self.total / LINES)) if self.total > 0 else 1
        self.start = time.monotonic()
        self.closed = False

    def _out(self) -> TextIO:
        return self.file if self.file is not None else sys.stderr

    def line(self) -> str:
        """The current progress as one line."""
        share = f" ({100 * self.n / self.total:.0f} %)" if self.total > 0 else ""
        plural = self.n != 1 and not self.unit.endswith("s")  # "1 fit", "2 fits", "2 series"
        units = f"{self.unit}s" if plural else self.unit
        head = f"{self.desc}: " if self.desc else ""
        text = f"{head}{self.n}/{self.total} {units}{share}, {time.monotonic() - self.start:.0f} s"
        return f"{text}; {self.postfix}" if self.postfix else text

    def update(self, n: int = 1) -> None:
        before, self.n = self.n, self.n + int(n)
        if self.n // self.step > before // self.step or (self.total and self.n >= self.total):
            self._emit()

    def _emit(self) -> None:
        if self.n != self.written:
            print(self.line(), file=self._out(), flush=True)
            self.written = self.n

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.postfix = text

    def set_description(self, desc: str, refresh: bool = True) -> None:
        self.desc = desc

    def write(self, text: str, file: TextIO | None = None) -> None:
        print(text, file=file if file is not None else self._out(), flush=True)

    def close(self) -> None:
        if not self.closed:
            self._emit()
            self.closed = True


def _redraws(tqdm_class: type) -> bool:
    """Whether ``tqdm_class``'s bar can redraw in place here: a notebook widget, or text on
    a standard error that is a terminal."""
    if tqdm_class.__module__.startswith("tqdm.notebook"):
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def progress_bar(
    total: int,
    unit: str,
    desc: str = "",
    initial: int = 0,
    shown: bool = True,
    **tqdm_kwargs: Any,
) -> Progress:
    """A progress display over ``total`` units: tqdm (``tqdm.auto``: a widget in a
    notebook, text in a terminal) where it can redraw, else a :class:`LineProgress`;
    with ``shown`` false, tqdm's disabled bar (every call a no-op)."""
    from tqdm.auto import tqdm

    if not shown:
        return tqdm(total=total, disable=True)
    if _redraws(tqdm):
        return tqdm(
            total=total,
            unit=unit,
            desc=desc or None,
            initial=initial,
            dynamic_ncols=True,
            **tqdm_kwargs,
        )
    return LineProgress(total, unit=unit, desc=desc, initial=initial)
