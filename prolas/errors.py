"""Exception and warning types.

Every error a user can cause (bad CSV, bad grammar, bad checkpoint, bad expression)
is a :class:`ProlasError`; the CLI prints its message on one line and exits non-zero.
"""

from __future__ import annotations

import os
import sys
import warnings

#: The package's folder, spelled as its modules' code objects spell their files: a frame
#: whose file lies under it is prolas's own.
_PACKAGE = os.path.dirname(__file__) + os.sep


class ProlasError(Exception):
    """An error with a message meant for the user (printed on one line by the CLI)."""

    exit_code = 2


class DataError(ProlasError):
    """The input data cannot be used (missing file, bad columns, NaN, too few points)."""


class ExpressionError(ProlasError, ValueError):
    """A kernel expression cannot be parsed or built."""


class GrammarError(ProlasError):
    """A grammar file is missing, malformed or inconsistent."""


class CheckpointError(ProlasError):
    """A KG-VAE checkpoint is missing, corrupt, or does not match the grammar/encoding."""


class OutputExistsError(ProlasError):
    """The output directory already holds a result (use --force)."""


class FitError(ProlasError):
    """Every attempt to fit a GP failed (the evaluation is recorded as failed)."""


class NonFiniteError(ProlasError, ValueError):
    """A number about to be written (journal line, result.json) is NaN or infinite.

    The Evaluator turns non-finite fits into failed evaluations, so this means a bug
    upstream; the strict writer refuses rather than write invalid JSON or ``null``.
    """


class DataWarning(UserWarning):
    """Something in the user's data was worked around and the data were read: a
    Windows-1252 file, duplicate x values, dropped NaN rows (see :func:`warn_caller`)."""


def warn_caller(message: str, category: type[Warning] = DataWarning) -> None:
    """:func:`warnings.warn` located at the first frame outside the prolas package: the
    user's line that called into prolas (a notebook cell, a script), however deep in
    the library the warning arose — a fixed ``stacklevel`` points at prolas's own
    internals from some call paths."""
    frame, level = sys._getframe(1), 2  # level 2: warn_caller's caller
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


class NumericsWarning(RuntimeWarning):
    """Numerical trouble that was handled (jitter added, restart dropped, clipping)."""
