"""Records that cross layers: scores, search histories, and their one strict JSON form.

Everything here is plain data with no GP, search or report logic, so the layers above
(``prolas.gp`` fits and returns a :class:`Score`, ``prolas.search`` strategies build a
:class:`SearchResult` of :class:`Evaluation` entries, ``prolas.report`` and the journal
write them) all import it downwards.

* :class:`Score`: what a scorer returns for one expression (``bic`` None when failed).
* :class:`Evaluation`, :class:`SearchResult`: one history entry and a whole search;
  :func:`best_so_far`: a history's best-BIC trace.
* :data:`HISTORY_KEYS`, :func:`history_entry`: the fields of one history entry, as
  result.json and the journal both write it.
* :func:`first_non_finite`, :func:`dumps_strict`, :func:`plain`, :func:`json_clean`:
  the one strict JSON writer. NaN and infinities are never written: ``dumps_strict``
  raises :class:`~prolas.errors.NonFiniteError` naming the first one.
  :func:`write_json` writes a file atomically with it.
* :func:`one_line`: an error text as one bounded line.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from prolas.errors import NonFiniteError

if TYPE_CHECKING:  # pragma: no cover
    from prolas.expr import Expression

__all__ = [
    "Score",
    "Evaluation",
    "SearchResult",
    "HISTORY_KEYS",
    "MAX_ERROR_CHARS",
    "history_entry",
    "best_so_far",
    "one_line",
    "first_non_finite",
    "dumps_strict",
    "plain",
    "json_clean",
    "write_json",
]


@dataclass(frozen=True)
class Score:
    """What a scorer returns for one expression.

    ``bic`` is ``None`` when ``status == "failed"`` (``error`` then says why).
    ``fit`` optionally carries the full :class:`prolas.gp.FitResult`.
    """

    expression: str
    status: str
    bic: float | None
    log_likelihood: float | None
    n_params: int
    seconds: float
    error: str | None = None
    fit: Any = None

    @classmethod
    def failed(cls, expr: Expression, error: str, seconds: float = 0.0) -> Score:
        return cls(str(expr), "failed", None, None, expr.n_params, seconds, error)


#: Longest error text kept for a failed evaluation (one line in result.json and report.md).
MAX_ERROR_CHARS = 300


def one_line(text: object, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` as one line: whitespace runs (newlines included) collapsed to one
    space, cut to ``limit`` characters with an ellipsis.

    >>> one_line("Cholesky failed\\n  at restart 3")
    'Cholesky failed at restart 3'
    """
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def first_non_finite(obj: Any, path: str = "") -> str | None:
    """The first number in a nested JSON-like value that is not finite, or ``None``.

    Walks dicts (in key order), lists and tuples; a float, NumPy floating scalar or
    zero-dimensional array that is NaN or infinite is reported as
    ``"<path> = <value>"``, e.g. ``"terms[0].factors[1].period = inf"``. Integers,
    booleans, strings and ``None`` are fine.

    >>> first_non_finite({"terms": [{"variance": 1.0, "factors": [{"period": float("inf")}]}]})
    'terms[0].factors[0].period = inf'
    >>> first_non_finite({"bic": -3.5, "error": None}) is None
    True
    """
    if isinstance(obj, dict):
        for k, v in obj.items():
            found = first_non_finite(v, f"{path}.{k}" if path else str(k))
            if found is not None:
                return found
        return None
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            found = first_non_finite(v, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if isinstance(obj, bool) or obj is None or isinstance(obj, (str, int)):
        return None
    try:
        value = float(obj)
    except (TypeError, ValueError):
        return None  # not a number (the JSON encoder judges other types)
    return None if math.isfinite(value) else f"{path or 'value'} = {value}"


@dataclass(frozen=True)
class Evaluation:
    """One entry of a search history.

    Attributes:
        index: 1-based position among unique evaluations (None for a cached repeat).
        cached: True if the expression had been evaluated before (no budget cost).
        repaired_from: the contained sub-model whose optimum this fit was redone from
            after that sub-model's fit beat it (a repair, no budget cost), else None.
    """

    index: int | None
    expression: str
    status: str
    bic: float | None
    log_likelihood: float | None
    n_params: int
    seconds: float
    error: str | None
    cached: bool = False
    fit: Any = field(default=None, repr=False, compare=False)
    repaired_from: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.bic is not None and math.isfinite(self.bic)

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "expression": self.expression,
            "status": self.status,
            "bic": self.bic,
            "log_likelihood": self.log_likelihood,
            "n_params": self.n_params,
            "seconds": round(self.seconds, 4),
            "error": self.error,
            **({"repaired_from": self.repaired_from} if self.repaired_from else {}),
        }


@dataclass
class SearchResult:
    """What every strategy returns: the unique-evaluation history and the best model."""

    method: str
    seed: int
    budget: int
    history: list[Evaluation]
    wall_seconds: float
    extra: dict = field(default_factory=dict)

    @property
    def best(self) -> Evaluation | None:
        ok = [e for e in self.history if e.ok]
        return max(ok, key=lambda e: (e.bic, -e.index)) if ok else None

    @property
    def evaluations(self) -> int:
        return len(self.history)

    def best_trace(self) -> list[float]:
        """Best BIC after each unique evaluation (:func:`best_so_far`)."""
        return best_so_far(e.bic if e.ok else None for e in self.history)


def best_so_far(bics: Iterable[float | None]) -> list[float]:
    """Best BIC after each unique evaluation of a history: the running maximum of
    ``bics``, where a failed evaluation (None, or a non-finite BIC) counts as -inf, so
    the trace is -inf before the first success.

    The one definition of a search's best-so-far trace: :meth:`SearchResult.best_trace`
    and the benchmark statistics (:mod:`prolas.bench.stats`, on stored histories) both
    use it.

    >>> best_so_far([None, 2.0, 1.0, 3.0])
    [-inf, 2.0, 2.0, 3.0]
    """
    out, best = [], -math.inf
    for bic in bics:
        if bic is not None and math.isfinite(bic):
            best = max(best, bic)
        out.append(best)
    return out


#: Fields of one history entry (result.json) and of one journal line.
HISTORY_KEYS = (
    "index",
    "expression",
    "status",
    "bic",
    "log_likelihood",
    "n_params",
    "seconds",
    "error",
)


def dumps_strict(doc: Any, *, what: str = "JSON", indent: int | None = None) -> str:
    """``json.dumps(doc, allow_nan=False)``, refusing a non-finite number by name.

    The one writer of result.json and of journal lines. NaN and infinities are not
    JSON; rather than write ``NaN`` (invalid) or silently ``null`` (a lost number),
    it raises :class:`~prolas.errors.NonFiniteError` naming the first one, e.g.
    ``"result.json: non-finite number best.terms[0].factors[1].period = inf"``.
    Other types that are not JSON raise ``TypeError`` as ``json.dumps`` does.

    >>> dumps_strict({"bic": 1.5})
    '{"bic": 1.5}'
    >>> dumps_strict({"bic": float("nan")}, what="journal line")
    Traceback (most recent call last):
    ...
    prolas.errors.NonFiniteError: journal line: non-finite number bic = nan
    """
    found = first_non_finite(doc)
    if found is not None:
        raise NonFiniteError(f"{what}: non-finite number {found}")
    return json.dumps(doc, indent=indent, allow_nan=False)


def json_clean(obj: Any) -> Any:
    """JSON-safe copy: numpy scalars -> Python, non-finite floats -> None, tuples -> lists."""
    return plain(obj, non_finite_to_none=True)


def plain(obj: Any, non_finite_to_none: bool = False) -> Any:
    """JSON-ready copy (numpy scalars -> Python, tuples -> lists); every value is kept
    unless ``non_finite_to_none``, which turns NaN and infinities into None."""
    if isinstance(obj, dict):
        return {str(k): plain(v, non_finite_to_none) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v, non_finite_to_none) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return None if non_finite_to_none and not math.isfinite(v) else v
    return obj


def history_entry(e: Evaluation) -> dict:
    d = json_clean(e.to_json())
    if d["status"] == "ok" and d["bic"] is None:
        # an "ok" fit with a non-finite score cannot be ranked: record it as failed
        d["status"] = "failed"
        d["error"] = d["error"] or "non-finite BIC"
    if d["status"] != "ok":
        d["bic"] = None
        d["error"] = d["error"] or "failed (no reason recorded)"
    return d


def write_json(path: Path, doc: Any, *, indent: int = 2) -> None:
    """Write ``doc`` to ``path`` as strict JSON (:func:`dumps_strict`) atomically.

    The text goes to ``path`` + ``.partial`` first and is renamed over ``path``, so the
    file either holds the complete document or its previous content; a non-finite
    number raises before anything is written.
    """
    text = dumps_strict(doc, what=str(path), indent=indent) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text)
    os.replace(tmp, path)
