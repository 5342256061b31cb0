"""One writer per output directory: an advisory lock held for a whole run.

``prolas fit``, ``prolas compare`` and ``prolas bench`` journal into their output
directory (``journal.jsonl``, the fit caches, the bench cells) and a later ``--resume``
reads it back as one run. Two runs writing the same directory at once would interleave
their lines into what looks like one search, so a run holds an exclusive lock on
``OUT/.prolas.lock`` (:data:`LOCK_NAME`) from before it reads or writes anything in
``OUT`` until it has written its last file, and a second run on the same ``OUT`` is
refused with a one-line :class:`OutputBusyError`.

The lock is re-entrant within one thread: a block that already holds ``OUT`` (``prolas
fit``, from its journal to its last file) may hold it again inside
(:meth:`prolas.KernelSearch.save`, which takes the lock when called alone).

The lock is the operating system's advisory lock on the open file (``flock`` on POSIX,
``msvcrt.locking`` on Windows), not the file's existence: the kernel drops it when the
holding process ends, however it ends (``kill -9`` or a power cut included), so a crash
never leaves a directory blocked. The file itself holds the holder's pid, command and
start time for the refusal message; a holder that ends normally removes it.

:func:`claim_output_dir` adds ``prolas fit``'s protection of an earlier result, checked
under the lock so that a run finishing in between cannot slip past it.

>>> import tempfile
>>> with hold_output_dir(Path(tempfile.mkdtemp()), "prolas fit d.csv") as lock:
...     lock.name
'.prolas.lock'
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prolas.errors import OutputExistsError, ProlasError

__all__ = ["LOCK_NAME", "OutputBusyError", "claim_output_dir", "hold_output_dir"]

#: The lock file inside an output directory.
LOCK_NAME = ".prolas.lock"

#: The directories held by this process, by resolved path, with the (pid, thread) that
#: holds each: the same thread may nest a hold (a forked child's copy names its parent).
_HELD: dict[Path, tuple[int, int]] = {}


class OutputBusyError(ProlasError):
    """Another running prolas process writes to the output directory."""


if sys.platform == "win32":  # pragma: no cover - Windows
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def _holder(path: Path) -> str:
    """What the lock file says about its holder (pid, command, start), or a generic name."""
    try:
        text = " ".join(path.read_text(encoding="utf-8").split())
    except OSError:
        text = ""
    return text or "another process"


def _acquire(path: Path, command: str) -> int:
    """An open descriptor of ``path`` holding its lock; refused when held elsewhere."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ProlasError(f"cannot write to {path.parent} ({exc.strerror})") from None
        if not _try_lock(fd):
            os.close(fd)
            raise OutputBusyError(
                f"{path.parent} is in use by a running prolas ({_holder(path)}); wait for it "
                "to finish or choose another --out"
            )
        # a holder that ended normally removed the file after we opened it: our lock is on
        # a file nobody else will open, so open the path again
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()}: {command}, started {started}\n".encode())
    return fd


@contextmanager
def hold_output_dir(out: Path, command: str) -> Iterator[Path]:
    """Hold the lock of the directory ``out`` (created if missing) for the ``with`` block;
    inside a block of the same thread that holds it already, this is that hold.

    Args:
        out: the output directory.
        command: what holds it, for the message a refused run prints.

    Yields:
        the lock file's path.

    Raises:
        OutputExistsError: ``out`` is a file.
        OutputBusyError: another process holds the lock.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputExistsError(f"--out {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProlasError(f"cannot create --out {out} ({exc.strerror})") from None
    path = out / LOCK_NAME
    key, me = out.resolve(), (os.getpid(), threading.get_ident())
    if _HELD.get(key) == me:  # held by an enclosing block of this thread
        yield path
        return
    fd = _acquire(path, command)
    _HELD[key] = me
    try:
        yield path
    finally:
        del _HELD[key]
        if sys.platform != "win32":  # removed while still locked (see _acquire)
            path.unlink(missing_ok=True)
        os.close(fd)  # releases the lock


@contextmanager
def claim_output_dir(out: Path, command: str, *, force: bool, resume: bool) -> Iterator[Path]:
    """``prolas fit``'s output directory, created and locked for the ``with`` block.

    Refused: ``out`` is a file; another run holds it (:class:`OutputBusyError`); it holds
    a result (``result.json``) and neither ``force`` nor ``resume`` is given (resuming
    continues a run whose partial result.json is its own). Files other than the run's
    own are never deleted. With ``resume`` a missing directory is not created: the
    journal reports it.
    """
    out = Path(out)
    if resume and not out.exists():
        yield out
        return
    with hold_output_dir(out, command):
        if not resume and not force and (out / "result.json").exists():
            raise OutputExistsError(
                f"{out} already holds a result (result.json); use --force (force=True in "
                "Python) to replace it or choose another output directory"
            )
        yield out
