"""Exception and warning types.

Every error a user can cause (bad CSV, bad grammar, bad checkpoint, bad expression)
is a :class:`ProlasError`; the CLI prints its message on one line and exits non-zero.
"""

from __future__ import annotations


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


class NumericsWarning(RuntimeWarning):
    """Numerical trouble that was handled (jitter added, restart dropped, clipping)."""
