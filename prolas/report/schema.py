"""result.json: its document, built and checked exactly per DESIGN.md.

* :func:`result_to_json` builds the document of a finished search (blocks
  ``prolas_version``, ``data``, ``search``, ``best``, ``history`` and the optional
  ``test``) and :func:`validate_result_json` checks one (keys, types, history indices,
  failed entries, BIC consistency, canonical term/factor order, k). In the history, an
  ``"ok"`` entry with a non-finite BIC is written as failed and other non-finite
  numbers (timings, a failed entry's log-likelihood) as ``null``; a best model with a
  non-finite number is refused (:class:`~prolas.errors.NonFiniteError`).
* :func:`log_likelihood_kind` says whether the best model's log-likelihood is exact or
  an approximation's lower bound (``best.log_likelihood_kind``).
* The writer is :func:`prolas.records.dumps_strict`: it refuses NaN and infinities
  (naming where they are) instead of writing invalid JSON.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from prolas._version import __version__
from prolas.data import Dataset
from prolas.errors import ExpressionError, NonFiniteError
from prolas.expr import factor_group, factor_kernel, factor_shape_params, parse
from prolas.gp import FitResult
from prolas.records import (
    HISTORY_KEYS,
    SearchResult,
    first_non_finite,
    history_entry,
    json_clean,
    plain,
)

__all__ = ["log_likelihood_kind", "result_to_json", "validate_result_json"]

#: the keys of result.json's blocks, in order (DESIGN.md)
_TOP_KEYS = ("prolas_version", "data", "search", "best", "history")
_DATA_KEYS = ("path", "x_column", "y_column", "n", "y_mean", "y_std")
_SEARCH_KEYS = (
    "method",
    "seed",
    "budget",
    "evaluations",
    "wall_seconds",
    "checkpoint",
    "searched_on",
)
_BEST_KEYS = (
    "expression",
    "log_likelihood",
    "n_params",
    "bic",
    "terms",
    "noise_variance",
    "log_likelihood_kind",
)
_TEST_KEYS = ("path", "n", "rmse", "mean_log_predictive_density")


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
) -> dict:
    """The result.json document (DESIGN.md) of a finished search.

    Args:
        dataset: the data the search was fitted on (its ``to_json()`` is the data block).
        result: the search's :class:`SearchResult` (its history, in index order).
        best: the best fitted model (``None`` only if every evaluation failed).
        method, seed, budget, checkpoint: the search block.
        test: optional test block from :func:`test_metrics`.
        searched_indices: positions (in x order) of the points the search ran on when
            it ran on a subsample (``search.searched_on``; null = all points). ``best``
            is then the refit on all points and its ``log_likelihood_kind`` says whether
            that log-likelihood is exact or an approximation's lower bound.
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
            "searched_on": None
            if searched_indices is None
            else {
                "n": len(searched_indices),
                "rule": "evenly spaced by position in x order",
                "indices": [int(i) for i in searched_indices],
            },
        },
        "best": _best_block(best),
        "history": [history_entry(e) for e in result.history],
    }
    if test is not None:
        doc["test"] = json_clean({k: test[k] for k in _TEST_KEYS})
    return doc


# --- checking -----------------------------------------------------------------------


def _fail(where: str, message: str) -> None:
    raise ValueError(f"result.json: {where}: {message}")


def _check_keys(d: Any, keys: Iterable[str], where: str) -> None:
    if not isinstance(d, dict):
        _fail(where, f"expected an object, got {type(d).__name__}")
    keys = tuple(keys)
    missing = [k for k in keys if k not in d]
    if missing:
        _fail(where, f"missing key {missing[0]!r}")
    extra = sorted(set(d) - set(keys))
    if extra:
        _fail(where, f"unexpected key {extra[0]!r}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check(cond: bool, where: str, message: str) -> None:
    if not cond:
        _fail(where, message)


def _canonical(expr: Any, where: str):
    _check(isinstance(expr, str), where, "expression must be a string")
    try:
        e = parse(expr)
    except ExpressionError as exc:
        _fail(where, str(exc))
    _check(str(e) == expr, where, f"{expr!r} is not canonical (expected {str(e)!r})")
    return e


def _validate_best(best: dict, n: int) -> None:
    _check_keys(best, _BEST_KEYS, "best")
    e = _canonical(best["expression"], "best.expression")
    for key in ("log_likelihood", "bic", "noise_variance"):
        _check(_is_num(best[key]), f"best.{key}", f"expected a finite number, got {best[key]!r}")
    _check(best["noise_variance"] > 0, "best.noise_variance", "must be positive")
    kind = best["log_likelihood_kind"]
    _check(
        kind == "exact" or isinstance(kind, str) and kind.endswith("lower bound"),
        "best.log_likelihood_kind",
        f"expected 'exact' or '<approximation> lower bound', got {kind!r}",
    )
    _check(_is_int(best["n_params"]), "best.n_params", "expected an integer")
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
    _check(isinstance(terms, list), "best.terms", "expected a list")
    _check(
        len(terms) == len(e.terms),
        "best.terms",
        f"{len(terms)} terms but {best['expression']!r} has {len(e.terms)}",
    )
    tied: dict[int, tuple[str, dict]] = {}  # change group -> (first place, its values)
    for i, (term, expanded) in enumerate(zip(terms, e.terms)):
        where = f"best.terms[{i}]"
        names = tuple(factor_kernel(f) for f in expanded)
        _check_keys(term, ("variance", "factors"), where)
        _check(_is_num(term["variance"]) and term["variance"] >= 0, where, "bad variance")
        factors = term["factors"]
        _check(isinstance(factors, list), f"{where}.factors", "expected a list")
        got = tuple(f.get("kernel") if isinstance(f, dict) else None for f in factors)
        _check(got == names, f"{where}.factors", f"kernels {got} but canonical order is {names}")
        for j, (f, name) in enumerate(zip(factors, names)):
            fw = f"{where}.factors[{j}]"
            shape = factor_shape_params(name)
            _check_keys(f, ("kernel", *shape), fw)
            for p in shape:
                _check(_is_num(f[p]), f"{fw}.{p}", f"expected a finite number, got {f[p]!r}")
                if p not in ("offset", "location", "start", "end"):
                    _check(f[p] > 0, f"{fw}.{p}", "must be positive")
            if (g := factor_group(expanded[j])) is not None:
                first, values = tied.setdefault(g, (fw, {p: f[p] for p in shape}))
                _check(
                    all(f[p] == values[p] for p in shape),
                    fw,
                    f"change parameters differ from {first} (one change operator, tied values)",
                )


def validate_result_json(d: dict) -> None:
    """Check a result.json document against DESIGN.md; ``ValueError`` names the first violation.

    Checked: exact keys of every block; types; ``search.evaluations == len(history)``;
    history indices are exactly 1..n in order, expressions canonical and distinct,
    ``seconds`` non-negative (or null when the timing was not finite),
    ``n_params`` equal to the expression's k; ``ok`` entries have finite bic and
    log-likelihood and a null error; failed entries have a null bic and an error
    string; ``best.bic`` is the maximum ok BIC of the history (within 1e-9) and
    equals ``log_likelihood - k/2 ln N``; ``best.terms`` follow the canonical term
    order and, inside, the canonical factor order, each factor with exactly its
    kernel's shape parameters; the optional test block.
    """
    _check_keys(d, _TOP_KEYS + (("test",) if isinstance(d, dict) and "test" in d else ()), "top")
    _check(isinstance(d["prolas_version"], str), "prolas_version", "expected a string")

    data = d["data"]
    _check_keys(data, _DATA_KEYS, "data")
    for key in ("path", "x_column", "y_column"):
        _check(isinstance(data[key], str), f"data.{key}", "expected a string")
    _check(_is_int(data["n"]) and data["n"] >= 1, "data.n", "expected a positive integer")
    _check(_is_num(data["y_mean"]), "data.y_mean", "expected a finite number")
    _check(_is_num(data["y_std"]) and data["y_std"] > 0, "data.y_std", "expected a positive number")

    search = d["search"]
    _check_keys(search, _SEARCH_KEYS, "search")
    _check(isinstance(search["method"], str), "search.method", "expected a string")
    _check(_is_int(search["seed"]), "search.seed", "expected an integer")
    _check(_is_int(search["budget"]) and search["budget"] >= 1, "search.budget", "expected >= 1")
    _check(_is_int(search["evaluations"]), "search.evaluations", "expected an integer")
    _check(
        _is_num(search["wall_seconds"]) and search["wall_seconds"] >= 0,
        "search.wall_seconds",
        "expected a non-negative number",
    )
    _check(
        search["checkpoint"] is None or isinstance(search["checkpoint"], str),
        "search.checkpoint",
        "expected a string or null",
    )
    sub = search["searched_on"]
    if sub is not None:
        _check_keys(sub, ("n", "rule", "indices"), "search.searched_on")
        idx = sub["indices"]
        _check(
            isinstance(idx, list)
            and all(_is_int(i) for i in idx)
            and len(idx) == sub["n"]
            and all(0 <= i < data["n"] for i in idx)
            and all(a < b for a, b in zip(idx, idx[1:])),
            "search.searched_on.indices",
            f"expected {sub['n']} increasing positions in 0..{data['n'] - 1}",
        )

    history = d["history"]
    _check(isinstance(history, list), "history", "expected a list")
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
        _check_keys(h, HISTORY_KEYS, where)
        _check(_is_int(h["index"]) and h["index"] == i + 1, f"{where}.index", "not 1..n in order")
        e = _canonical(h["expression"], f"{where}.expression")
        _check(h["expression"] not in seen, f"{where}.expression", "repeated expression")
        seen.add(h["expression"])
        _check(
            _is_int(h["n_params"]) and h["n_params"] == e.n_params,
            f"{where}.n_params",
            f"{h['n_params']!r} but k = {e.n_params}",
        )
        sec = h["seconds"]
        _check(sec is None or _is_num(sec) and sec >= 0, f"{where}.seconds", "bad seconds")
        if h["status"] == "ok":
            _check(_is_num(h["bic"]), f"{where}.bic", "an ok entry needs a finite bic")
            _check(_is_num(h["log_likelihood"]), f"{where}.log_likelihood", "needs a number")
            _check(h["error"] is None, f"{where}.error", "an ok entry has error null")
            best_ok = max(best_ok, h["bic"])
        elif h["status"] == "failed":
            _check(h["bic"] is None, f"{where}.bic", "a failed entry must have bic null")
            _check(
                isinstance(h["error"], str) and h["error"].strip() != "",
                f"{where}.error",
                "a failed entry needs an error string",
            )
        else:
            _fail(f"{where}.status", f"expected 'ok' or 'failed', got {h['status']!r}")

    best = d["best"]
    if best is None:
        _check(best_ok == -math.inf, "best", "null although the history has ok entries")
    else:
        _validate_best(best, data["n"])
        if sub is None:
            _check(
                abs(best["bic"] - best_ok) <= 1e-9 * max(1.0, abs(best_ok)),
                "best.bic",
                f"{best['bic']} is not the best ok BIC of the history ({best_ok})",
            )
        else:  # the history scores the subsample; best is the refit on all points
            winners = {
                h["expression"] for h in history if h["status"] == "ok" and h["bic"] == best_ok
            }
            _check(
                best["expression"] in winners,
                "best.expression",
                "is not the expression of the history's best ok BIC",
            )

    if "test" in d:
        test = d["test"]
        _check_keys(test, _TEST_KEYS, "test")
        _check(isinstance(test["path"], str), "test.path", "expected a string")
        _check(_is_int(test["n"]) and test["n"] >= 1, "test.n", "expected a positive integer")
        _check(_is_num(test["rmse"]) and test["rmse"] >= 0, "test.rmse", "expected >= 0")
        mlpd = test["mean_log_predictive_density"]
        _check(mlpd is None or _is_num(mlpd), "test.mean_log_predictive_density", "bad value")
