"""result.json: its document, built and checked against its JSON Schema.

* :func:`result_schema` is the JSON Schema (draft 2020-12) of result.json, shipped with
  the package as ``prolas/schemas/result.schema.json``: one definition per block
  (``data``, ``search``, ``best`` with its ``term`` and ``factor`` definitions,
  ``history_entry``, ``test``).
* :func:`result_to_json` builds the document of a finished search (blocks
  ``prolas_version``, ``data``, ``search``, ``best``, ``history`` and the optional
  ``test``). In the history, an ``"ok"`` entry with a non-finite BIC is written as
  failed and other non-finite numbers (timings, a failed entry's log-likelihood) as
  ``null``; a best model with a non-finite number is refused
  (:class:`~prolas.errors.NonFiniteError`).
* :func:`validate_result_json` checks a document: first against the schema (keys,
  types, enums, ranges), then what JSON Schema cannot express (BIC consistency,
  canonical expressions and term/factor order, k, history indices, tied change
  parameters).
* :func:`log_likelihood_kind` says whether the best model's log-likelihood is exact or
  an approximation's lower bound (``best.log_likelihood_kind``).
* The writer is :func:`prolas.records.dumps_strict`: it refuses NaN and infinities
  (naming where they are) instead of writing invalid JSON.

The conventions the numbers follow (kernels, canonical form, k, BIC) are in
``docs/conventions.md``.
"""

from __future__ import annotations

import copy
import functools
import json
import math
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Any, NoReturn

import numpy as np
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match

from prolas._version import __version__
from prolas.data import Dataset
from prolas.errors import ExpressionError, NonFiniteError
from prolas.expr import Expression, factor_group, factor_kernel, factor_shape_params, parse
from prolas.gp import FitResult
from prolas.records import (
    SearchResult,
    first_non_finite,
    history_entry,
    json_clean,
    plain,
)

__all__ = [
    "RESULT_SCHEMA_FILE",
    "log_likelihood_kind",
    "result_schema",
    "result_to_json",
    "validate_result_json",
]

#: Where result.json's JSON Schema lives inside the installed package.
RESULT_SCHEMA_FILE = "schemas/result.schema.json"


@functools.cache
def _schema() -> dict:
    return json.loads(resources.files("prolas").joinpath(RESULT_SCHEMA_FILE).read_text("utf-8"))


def result_schema() -> dict:
    """The JSON Schema (draft 2020-12) of result.json, as a new dict each call.

    >>> result_schema()["$defs"]["history_entry"]["properties"]["status"]
    {'enum': ['ok', 'failed']}
    """
    return copy.deepcopy(_schema())


#: the keys of the test block, in order (the schema's)
_TEST_KEYS = tuple(_schema()["$defs"]["test"]["properties"])


# --- building -----------------------------------------------------------------------


def log_likelihood_kind(fit: FitResult) -> str:
    """``"exact"``, or which approximation ``fit.log_likelihood`` is (a lower bound)."""
    return "exact" if fit.approximation is None else f"{fit.approximation} lower bound"


def _best_block(best: FitResult | None) -> dict | None:
    """The ``best`` block; a best model holding a non-finite number is refused."""
    if best is None or not best.ok:
        return None
    block = plain(best.to_json())
    block["log_likelihood_kind"] = log_likelihood_kind(best)
    found = first_non_finite(block)
    if found is not None:
        raise NonFiniteError(
            f"the best model {best.expression} holds a non-finite number (best.{found}); "
            "its evaluations are kept in the journal"
        )
    return block


def result_to_json(
    dataset: Dataset,
    result: SearchResult,
    best: FitResult | None,
    *,
    method: str,
    seed: int,
    budget: int,
    checkpoint: str | None = None,
    test: dict | None = None,
    searched_indices: Sequence[int] | None = None,
    searched_on: dict | None = None,
    periods: dict | None = None,
) -> dict:
    """The result.json document (docs/result-json.md) of a finished search.

    Args:
        dataset: the data the search was fitted on (its ``to_json()`` is the data block).
        result: the search's :class:`SearchResult` (its history, in index order).
        best: the best fitted model (``None`` only if every evaluation failed).
        method, seed, budget, checkpoint: the search block.
        test: optional test block from :func:`test_metrics`.
        searched_indices: positions (in x order) of the points the search ran on when
            it ran on an evenly spaced subsample (``search.searched_on``; null = all
            points). ``best`` is then the refit on all points and its
            ``log_likelihood_kind`` says whether that log-likelihood is exact or an
            approximation's lower bound.
        searched_on: the whole ``search.searched_on`` block instead
            (:meth:`prolas.search.view.SearchView.to_json`: evenly spaced points and
            windows).
        periods: the ``periods`` block (:func:`prolas.report.periods.periods_block`).
    Returns:
        A dict that ``json.dumps(..., allow_nan=False)`` accepts.
    Raises:
        NonFiniteError: ``best`` holds a NaN or infinite number (the Evaluator never
            lets such a fit be "ok"; a refit could still produce one).
    """
    doc = {
        "prolas_version": __version__,
        "data": json_clean(dataset.to_json()),
        "search": {
            "method": str(method),
            "seed": int(seed),
            "budget": int(budget),
            "evaluations": len(result.history),
            "wall_seconds": json_clean(round(float(result.wall_seconds), 3)),
            "checkpoint": checkpoint,
            "searched_on": json_clean(searched_on)
            if searched_on is not None
            else _evenly_spaced_block(dataset, searched_indices),
        },
        "best": _best_block(best),
        "history": [history_entry(e) for e in result.history],
    }
    if periods is not None:
        doc["periods"] = json_clean(periods)
    if test is not None:
        doc["test"] = json_clean({k: test[k] for k in _TEST_KEYS})
    return doc


def _evenly_spaced_block(dataset: Dataset, indices: Sequence[int] | None) -> dict | None:
    """``search.searched_on`` of a search on the evenly spaced points ``indices`` alone."""
    if indices is None:
        return None
    idx = [int(i) for i in indices]
    x = dataset.x[idx]
    return {
        "n": len(idx),
        "rule": "evenly spaced by position in x order",
        "indices": idx,
        "evenly_spaced": len(idx),
        "windows": [],
        "spacing": float(np.median(np.diff(np.unique(x)))),
        "start_periods": [],
    }


# --- checking -----------------------------------------------------------------------


def _fail(where: str, message: str) -> NoReturn:
    raise ValueError(f"result.json: {where}: {message}")


def _check(cond: bool, where: str, message: str) -> None:
    if not cond:
        _fail(where, message)


def _where(path: Iterable[str | int]) -> str:
    """A JSON path as ``best.terms[1].factors[0]`` (``top`` for the document itself)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "top"


def _json_text(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_JSON_TYPES = {
    "object": "an object",
    "array": "a list",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "null": "null",
    "boolean": "a boolean",
}


#: keywords of a schema that describes a block (an object or a list), not one value
_BLOCK_KEYWORDS = frozenset({"properties", "items", "$ref"})


def _schema_message(error: ValidationError) -> str:
    """One line for a schema violation, in the words the checks after the schema use."""
    kind, value, instance = error.validator, error.validator_value, error.instance
    if kind == "required":
        return f"missing key {next(k for k in value if k not in instance)!r}"
    if kind == "additionalProperties":
        allowed = error.schema.get("properties", {})
        return f"unexpected key {sorted(k for k in instance if k not in allowed)[0]!r}"
    if kind == "type":
        wanted = [value] if isinstance(value, str) else list(value)
        message = f"expected {' or '.join(_JSON_TYPES[w] for w in wanted)}"
    elif kind in ("enum", "const"):
        options = value if kind == "enum" else [value]
        message = f"expected {' or '.join(_json_text(v) for v in options)}"
    elif kind in ("minimum", "exclusiveMinimum"):
        message = f"expected a number {'>=' if kind == 'minimum' else '>'} {value}"
    elif kind == "minItems":
        message = f"expected at least {value} item{'s' * (value != 1)}"
    elif kind == "pattern":
        message = f"expected a string matching {value!r}"
    else:
        return error.message
    message += f", got {_json_text(instance)}"
    # a value's own description says what it must be; a block's would be noise
    about = None if _BLOCK_KEYWORDS & set(error.schema) else error.schema.get("description")
    return f"{message} ({about})" if about else message


@functools.cache
def _schema_validator() -> Draft202012Validator:
    return Draft202012Validator(result_schema())


def _check_schema(d: Any) -> None:
    """The document against :func:`result_schema`: structure, types, required keys,
    enums and ranges. Numbers must be finite first (JSON has no NaN or infinity)."""
    found = first_non_finite(d)
    if found is not None:
        where, _, value = found.rpartition(" = ")
        _fail(where or "top", f"not a finite number ({value})")
    error = best_match(_schema_validator().iter_errors(d))
    if error is not None:
        _fail(_where(error.absolute_path), _schema_message(error))


def _canonical(expr: str, where: str) -> Expression:
    try:
        e = parse(expr)
    except ExpressionError as exc:
        _fail(where, str(exc))
    _check(str(e) == expr, where, f"{expr!r} is not canonical (expected {str(e)!r})")
    return e


def _validate_best(best: dict, n: int) -> None:
    e = _canonical(best["expression"], "best.expression")
    _check(
        best["n_params"] == e.n_params,
        "best.n_params",
        f"{best['n_params']} but {best['expression']!r} has k = {e.n_params}",
    )
    expected = best["log_likelihood"] - 0.5 * best["n_params"] * math.log(n)
    _check(
        abs(best["bic"] - expected) <= 1e-6 * max(1.0, abs(expected)),
        "best.bic",
        f"{best['bic']} != log_likelihood - k/2 ln N = {expected}",
    )
    terms = best["terms"]
    _check(
        len(terms) == len(e.terms),
        "best.terms",
        f"{len(terms)} terms but {best['expression']!r} has {len(e.terms)}",
    )
    tied: dict[int, tuple[str, dict]] = {}  # change group -> (first place, its values)
    for i, (term, expanded) in enumerate(zip(terms, e.terms)):
        where = f"best.terms[{i}]"
        names = tuple(factor_kernel(f) for f in expanded)
        factors = term["factors"]
        got = tuple(f["kernel"] for f in factors)
        _check(got == names, f"{where}.factors", f"kernels {got} but canonical order is {names}")
        for j, f in enumerate(factors):
            if (g := factor_group(expanded[j])) is None:
                continue
            shape = factor_shape_params(names[j])
            first, values = tied.setdefault(g, (f"{where}.factors[{j}]", {p: f[p] for p in shape}))
            _check(
                all(f[p] == values[p] for p in shape),
                f"{where}.factors[{j}]",
                f"change parameters differ from {first} (one change operator, tied values)",
            )


def validate_result_json(d: dict) -> None:
    """Check a result.json document; ``ValueError`` names the first violation.

    First against the JSON Schema (:func:`result_schema`, after a check that every
    number is finite): the keys of every block, types, ``status`` ``"ok"`` or
    ``"failed"``, an ok entry with a number for bic and log-likelihood and a null error,
    a failed entry with a null bic and an error string, positive shape parameters and
    variances, each factor with exactly its kernel's shape parameters. Then what JSON
    Schema cannot express: ``search.evaluations == len(history)`` within the budget;
    history indices exactly 1..n in order, expressions canonical and distinct,
    ``n_params`` equal to the expression's k; ``search.searched_on.indices`` its ``n``
    increasing positions inside the data, made of its evenly spaced points and windows;
    ``periods.unexplained`` exactly the significant periods (not harmonics) that no term
    explains; ``best`` null only when no entry is ok, else
    its BIC the maximum ok BIC of the history (within 1e-9; after a search on a
    subsample, its expression the history's best one) and equal to
    ``log_likelihood - k/2 ln N``; ``best.terms`` in the canonical term order and,
    inside, the canonical factor order, with one value per change operator's parameter
    (tied across its factors). Conventions: docs/conventions.md.
    """
    _check_schema(d)
    data, search, history = d["data"], d["search"], d["history"]
    sub = search["searched_on"]
    if sub is not None:
        idx = sub["indices"]
        _check(
            len(idx) == sub["n"]
            and all(i < data["n"] for i in idx)
            and all(a < b for a, b in zip(idx, idx[1:])),
            "search.searched_on.indices",
            f"expected {sub['n']} increasing positions in 0..{data['n'] - 1}",
        )
        _check(
            sub["evenly_spaced"] + sum(w["n"] for w in sub["windows"]) >= sub["n"]
            and sub["evenly_spaced"] <= sub["n"],
            "search.searched_on.evenly_spaced",
            f"{sub['evenly_spaced']} evenly spaced points and windows of "
            f"{sum(w['n'] for w in sub['windows'])} do not make the {sub['n']} searched",
        )
        for i, w in enumerate(sub["windows"]):
            _check(
                w["x_start"] <= w["x_end"] and w["n"] <= sub["n"],
                f"search.searched_on.windows[{i}]",
                "a window ends before it starts or holds more points than were searched",
            )
    if "periods" in d:
        periods = d["periods"]
        plain = {e["period"] for e in periods["significant"] if e["harmonic_of"] is None}
        missing = {
            e["period"]
            for e in periods["significant"]
            if e["harmonic_of"] is None and e["explained_by"] is None
        }
        _check(
            set(periods["unexplained"]) == missing and missing <= plain,
            "periods.unexplained",
            "must list exactly the significant periods (not harmonics) with explained_by null",
        )
    _check(
        search["evaluations"] == len(history),
        "search.evaluations",
        f"{search['evaluations']} but history has {len(history)} entries",
    )
    _check(
        len(history) <= search["budget"],
        "history",
        f"{len(history)} evaluations exceed the budget of {search['budget']}",
    )
    seen: set[str] = set()
    best_ok = -math.inf
    for i, h in enumerate(history):
        where = f"history[{i}]"
        _check(h["index"] == i + 1, f"{where}.index", "not 1..n in order")
        e = _canonical(h["expression"], f"{where}.expression")
        _check(h["expression"] not in seen, f"{where}.expression", "repeated expression")
        seen.add(h["expression"])
        _check(
            h["n_params"] == e.n_params,
            f"{where}.n_params",
            f"{h['n_params']!r} but k = {e.n_params}",
        )
        if h["status"] == "ok":
            best_ok = max(best_ok, h["bic"])

    best = d["best"]
    if best is None:
        _check(best_ok == -math.inf, "best", "null although the history has ok entries")
        return
    _validate_best(best, data["n"])
    if sub is None:
        _check(
            abs(best["bic"] - best_ok) <= 1e-9 * max(1.0, abs(best_ok)),
            "best.bic",
            f"{best['bic']} is not the best ok BIC of the history ({best_ok})",
        )
    else:  # the history scores the subsample; best is the refit on all points
        winners = {h["expression"] for h in history if h["status"] == "ok" and h["bic"] == best_ok}
        _check(
            best["expression"] in winners,
            "best.expression",
            "is not the expression of the history's best ok BIC",
        )
