"""Everything written after a search: result.json, report.md, plots, words.

* :func:`result_to_json` builds the result.json document exactly per DESIGN.md and
  :func:`validate_result_json` checks one (keys, types, history indices, failed
  entries, BIC consistency, canonical term/factor order, k). In the history, an
  ``"ok"`` entry with a non-finite BIC is written as failed and other non-finite
  numbers (timings, a failed entry's log-likelihood) as ``null``; a best model with a
  non-finite number is refused (:class:`~prolas.errors.NonFiniteError`).
* :func:`dumps_strict` is the one JSON writer of result.json and journal lines: it
  refuses NaN and infinities (naming where they are) instead of writing invalid JSON.
* :func:`test_metrics` scores the best model on held-out data in y's original units:

      RMSE = sqrt(mean_i (y_i - m_i)^2),
      MLPD = mean_i log N(y_i | m_i, v_i),

  where ``m_i, v_i`` are :func:`prolas.gp.predict`'s mean and variance *including
  the noise* (original units). Predictions, metrics and plots are computed for the
  standardised y and scaled back (``sd = sqrt(v') * y_std``, never ``v' * y_std**2``),
  so data of any representable scale (``1e-300`` to ``1e300``) stays finite.
* :func:`describe_fit` says each additive term in words, in the spirit of the
  Automatic Statistician (Lloyd et al. 2014), with its share of the variance of the
  fitted mean: for term t with posterior mean ``m_t`` on the data inputs,
  ``share_t = Var_i(m_t(x_i)) / sum_s Var_i(m_s(x_i))``. A model with change
  operators first gets one sentence per operator (:func:`fit_changes`) on where and
  how the series changes, and each term says where it is active. The numbers it
  words (shares, flat factors, change transitions, slopes) are computed by
  :mod:`prolas.gp.anatomy`.
* :func:`fit_figure` and :func:`components_figure` draw the fit and the additive
  components; :func:`mark_changes` marks change-points (dashed line, ±2-width band)
  and change-windows (shaded span) on them.
* :func:`write_report` writes result.json, report.md, fit.png, components.png and
  convergence.png; :func:`summary_table` is the CLI's final text table.

>>> from prolas.search.evaluator import Evaluation, SearchResult
>>> h = [Evaluation(1, "SE", "ok", -35.0, -27.5, 3, 0.4, None)]
>>> print(summary_table(SearchResult("cks", 0, 10, h, 1.0), None).splitlines()[0].split())
['rank', 'expression', 'BIC', 'log-lik', 'k', 'seconds']
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from prolas._version import __version__
from prolas.data import Dataset
from prolas.errors import ExpressionError, NonFiniteError
from prolas.expr import (
    CHANGE_FACTORS,
    factor_group,
    factor_kernel,
    factor_shape_params,
    parse,
)
from prolas.gp import FitResult, decompose, predict
from prolas.gp.anatomy import (
    FLAT_TOLERANCE,
    FitChange,
    active_bounds,
    fit_changes,
    flat_factors,
    term_conditions,
    term_shares,
    term_weight,
    trend_slope,
)
from prolas.records import (
    HISTORY_KEYS,
    Evaluation,
    SearchResult,
    dumps_strict,
    first_non_finite,
    history_entry,
    json_clean,
    one_line,
    plain,
)

__all__ = [
    "dumps_strict",
    "result_to_json",
    "validate_result_json",
    "test_metrics",
    "describe_fit",
    "FLAT_TOLERANCE",
    "flat_factors",
    "FitChange",
    "fit_changes",
    "mark_changes",
    "fit_figure",
    "components_figure",
    "write_report",
    "summary_table",
    "EXTRAPOLATE",
    "ReportWarning",
]


class ReportWarning(UserWarning):
    """A part of the report (a plot) could not be made; the rest was written."""


#: Plots extend this fraction of the data span beyond the last input.
EXTRAPOLATE = 0.2

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


# --- result.json --------------------------------------------------------------------


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


# --- held-out metrics -----------------------------------------------------------------


def _predictive(
    fit: FitResult, dataset: Dataset, xs: np.ndarray, include_noise: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Predictive mean and standard deviation at ``xs`` in y's original units."""
    mean, var = predict(fit, dataset.standardised_view(), xs, include_noise=include_noise)
    return dataset.unstandardise(mean), np.sqrt(var) * dataset.y_std


def test_metrics(fit: FitResult, train: Dataset, test: Dataset) -> dict:
    """RMSE and mean log predictive density of ``fit`` (fitted on ``train``) on ``test``.

    Both in y's original units; the predictive distribution of ``y_i`` is
    ``N(m_i, v_i)`` with ``(m, v) = predict(fit, train, test.x, include_noise=True)``.
    Returns the result.json test block ``{path, n, rmse, mean_log_predictive_density}``.
    """
    mean, var = predict(fit, train.standardised_view(), test.x, include_noise=True)
    # residuals and variances in standardised units; scaled back in logs and once in
    # the RMSE, so y values near the float limits neither overflow nor underflow
    resid = train.standardise(test.y) - mean
    rmse = float(np.sqrt(np.mean(resid**2))) * train.y_std
    var = np.maximum(var, np.finfo(np.float64).tiny)
    lpd = -0.5 * (np.log(2 * np.pi * var) + resid**2 / var) - math.log(train.y_std)
    return {
        "path": test.path,
        "n": test.n,
        "rmse": rmse,
        "mean_log_predictive_density": float(np.mean(lpd)),
    }


# pytest would otherwise collect ``test_metrics`` wherever it is imported into a test module
test_metrics.__test__ = False


# --- words ------------------------------------------------------------------------------


def _in_years(dataset: Dataset) -> bool:
    """x looks like calendar years (every input between 1000 and 3000)."""
    return bool(dataset.x[0] >= 1000 and dataset.x[-1] <= 3000)


def _length(v: float, years: bool) -> str:
    """A length on the x axis in words: ``'1.00 years (12.0 months)'`` or ``'2.5 (x units)'``."""
    if years:
        text = f"{v:.2f} year" + ("" if f"{v:.2f}" == "1.00" else "s")
        if v < 2:
            text += f" ({12 * v:.1f} months)"
        return text
    return f"{v:.3g} (x units)"


def _base_factors(term, flat_idx: set[int]) -> tuple[dict[str, list], list[str]]:
    """A term's base-kernel factors that vary on the data, by kernel, and the names of
    those constant on the data. Change factors (said by the change sentences and the
    term's active range) and the constant ``C`` are neither."""
    by: dict[str, list] = {}
    flat: list[str] = []
    for i, f in enumerate(term.factors):
        if f.kernel in CHANGE_FACTORS or f.kernel == "C":
            continue
        if i in flat_idx:
            flat.append(f.kernel)
            continue
        by.setdefault(f.kernel, []).append(f.params)
    return by, flat


def _describe_term(
    term,
    mean_on_x: np.ndarray,
    dataset: Dataset,
    years: bool,
    flat_idx: set[int],
    weight: np.ndarray | None = None,
) -> str:
    """One sentence (without the share) for a product term.

    Factors that are constant on the data (``flat_idx``, :func:`flat_factors`) are
    named once at the end instead of being described as changes of shape; a PER factor
    whose period exceeds the data's span shows no repetition in the data, so it is said
    as the slow variation it is (its effective lengthscale for lags much shorter than
    the period is ``p l / (2 pi)``, from ``sin u ~ u``). Change factors are left to
    :func:`describe_fit`; ``weight`` (on the inputs, their product) scales the term, so
    a trend's slope is that of the trend itself (:func:`~prolas.gp.anatomy.trend_slope`).
    """
    span = float(dataset.x[-1] - dataset.x[0])
    by, flat = _base_factors(term, flat_idx)
    lins, pers, ses, rqs = (by.get(k, []) for k in ("LIN", "PER", "SE", "RQ"))
    slow = [p for p in pers if p["period"] > span]
    pers = [p for p in pers if p["period"] <= span]
    mods: list[str] = [
        f"varying slowly over ~{_length(p['period'] * p['lengthscale'] / (2 * math.pi), years)} "
        f"(PER factor whose period, {_length(p['period'], years)}, is longer than the data)"
        for p in slow
    ]

    if pers:
        if len(pers) == 1:
            p = pers[0]
            core = (
                f"A periodic component with period {_length(p['period'], years)}, "
                f"shape lengthscale {p['lengthscale']:.2f}"
                + (" (close to a sinusoid)" if p["lengthscale"] > 2 else "")
            )
        else:
            periods = ", ".join(_length(p["period"], years) for p in pers)
            core = f"A product of {len(pers)} periodic components with periods {periods}"
        for s in ses:
            mods.append(
                f"whose shape changes smoothly over ~{_length(s['lengthscale'], years)} (SE factor)"
            )
        for r in rqs:
            mods.append(
                f"whose shape changes at multiple scales around "
                f"~{_length(r['lengthscale'], years)} (RQ factor, alpha {r['alpha']:.2g})"
            )
    elif rqs:
        r = rqs[0]
        core = (
            f"Smooth variation at multiple scales (RQ lengthscale "
            f"{_length(r['lengthscale'], years)}, alpha {r['alpha']:.2g})"
        )
        for r2 in rqs[1:]:
            mods.append(f"modulated by a multi-scale factor (lengthscale {r2['lengthscale']:.3g})")
        for s in ses:
            mods.append(f"within an envelope over ~{_length(s['lengthscale'], years)} (SE factor)")
    elif ses:
        core = f"A smooth trend with lengthscale {_length(ses[0]['lengthscale'], years)}"
        for s in ses[1:]:
            mods.append(f"within an envelope over ~{_length(s['lengthscale'], years)} (SE factor)")
    elif slow:
        core = "A smooth trend"
    elif lins:
        slope = trend_slope(dataset, mean_on_x, weight)
        direction = "rising" if slope > 0 else "falling"
        if len(lins) == 1 and math.isnan(slope):  # switched off on the data
            core = "A linear trend"
        elif len(lins) == 1:
            core = f"A linear trend ({direction}, about {slope:.3g} y units per x unit)"
        else:
            core = f"A polynomial trend of degree {len(lins)}"
        lins = []  # the LIN factors are the core here, not an amplitude modifier
    else:  # every factor is flat on the data
        core = "A constant offset"

    if lins:
        offsets = ", ".join(f"{lp['offset']:.4g}" for lp in lins)
        if len(lins) == 1:
            mods.insert(0, f"whose amplitude grows linearly away from x = {offsets} (LIN factor)")
        else:
            mods.insert(
                0,
                f"whose amplitude grows as a polynomial of degree {len(lins)} "
                f"(LIN factors, offsets {offsets})",
            )
    sentence = core + (", " + " and ".join(mods) if mods else "")
    if flat:
        sentence += (
            f" ({', '.join(flat)} factor{'s' if len(flat) > 1 else ''} constant on the data)"
        )
    return sentence


# --- change operators in words --------------------------------------------------------------


#: a transition counts as complete (or not yet begun) on the data when its sigmoid is
#: within this of 1 (or 0) at the data's end (or start)
_SETTLED = 0.01


def _position(v: float, dataset: Dataset, years: bool) -> str:
    """A place on the x axis: ``'1973.4'`` in years (and the month when x came from
    dates), else with enough digits to resolve a thousandth of the data's span."""
    if years:
        text = f"{v:.1f}"
        if dataset.x_is_date:
            from prolas.data import decimal_years_to_timestamps

            try:
                text += f" ({decimal_years_to_timestamps(v)[0].strftime('%B %Y')})"
            except Exception:  # outside pandas' dates: the decimal year alone
                pass
        return text
    res = dataset.span / 1000 if dataset.span > 0 else abs(v) / 1000 or 1e-3
    digits = math.ceil(math.log10(abs(v) / res)) if v != 0 and math.isfinite(v) else 3
    return f"{v:.{min(max(digits, 2), 12)}g}"


def _duration(v: float, years: bool) -> str:
    """A width on the x axis: :func:`_length`, in days when it is under 0.05 years."""
    if years and v < 0.05:
        return f"{v:.2g} years ({365.25 * v:.2g} days)"
    return _length(v, years)


def _outside(lo: float, hi: float, dataset: Dataset) -> str:
    """``' (before the data start)'`` / ``' (after the data end)'`` for a span [lo, hi]
    that lies wholly outside the data, else ``''``."""
    if hi < dataset.x[0]:
        return " (before the data start)"
    if lo > dataset.x[-1]:
        return " (after the data end)"
    return ""


def _at(v: float, dataset: Dataset, years: bool) -> str:
    """``'~1973.4'``, saying when it lies outside the data."""
    return f"~{_position(v, dataset, years)}" + _outside(v, v, dataset)


def _active_range(conds: list[tuple[FitChange, int]], dataset: Dataset, years: bool) -> str:
    """Where a term is switched on, from its change factors: ``'active only before
    the change-point at ~1973.4'``, ``'... between the change-points at ~1966.3 and
    ~1974.1'``, ``'... outside the change-window ~1971.2-1973.9'``
    (:func:`~prolas.gp.anatomy.active_bounds`)."""
    lo, hi, outside = active_bounds(conds)

    def name(bound, which: str) -> str:
        x, c = bound
        if c.op == "CP":
            return f"the change-point at {_at(x, dataset, years)}"
        return f"the {which} of the change-window at {_at(x, dataset, years)}"

    parts = []
    if lo is not None and hi is not None:
        if lo[1] is hi[1]:
            parts.append(f"inside the change-window {_window(lo[1], dataset, years)}")
        elif lo[1].op == hi[1].op == "CP":
            parts.append(
                f"between the change-points at {_at(lo[0], dataset, years)} "
                f"and {_at(hi[0], dataset, years)}"
            )
        else:
            parts.append(f"between {name(lo, 'start')} and {name(hi, 'end')}")
        if lo[0] >= hi[0]:
            parts[-1] += " (an empty range, so it is switched off)"
    elif lo is not None:
        parts.append(f"after {name(lo, 'start')}")
    elif hi is not None:
        parts.append(f"before {name(hi, 'end')}")
    parts += [f"outside the change-window {_window(c, dataset, years)}" for c in outside]
    return "active only " + " and ".join(parts) if parts else ""


def _window(c: FitChange, dataset: Dataset, years: bool) -> str:
    s, e = c.params["start"], c.params["end"]
    text = f"~{_position(s, dataset, years)}-{_position(e, dataset, years)}"
    return text + _outside(s, e, dataset)


def _term_noun(
    term, mean_on_x: np.ndarray, dataset: Dataset, years: bool, flat_idx: set[int], weight
) -> str:
    """A short noun phrase for a product term, for the change sentences: ``'a rising
    linear trend'``, ``'a periodic component with period 1.00 year (12.0 months)'``,
    ``'a constant offset'`` (the classification of :func:`_describe_term`)."""
    by, _ = _base_factors(term, flat_idx)
    lins, pers, ses, rqs = (by.get(k, []) for k in ("LIN", "PER", "SE", "RQ"))
    slow = [p for p in pers if p["period"] > dataset.span]
    pers = [p for p in pers if p["period"] <= dataset.span]
    grows = ""
    if lins:
        grows = (
            " of linearly growing amplitude"
            if len(lins) == 1
            else f" of amplitude growing as a polynomial of degree {len(lins)}"
        )
    if pers:
        if len(pers) == 1:
            return f"a periodic component with period {_length(pers[0]['period'], years)}{grows}"
        periods = ", ".join(_length(p["period"], years) for p in pers)
        return f"a product of {len(pers)} periodic components (periods {periods}){grows}"
    if rqs:
        return f"smooth variation at multiple scales{grows}"
    if ses or slow:
        return f"a smooth trend{grows}"
    if lins:
        if len(lins) > 1:
            return f"a polynomial trend of degree {len(lins)}"
        slope = trend_slope(dataset, mean_on_x, weight)
        if math.isnan(slope):
            return "a linear trend"
        return f"a {'rising' if slope > 0 else 'falling'} linear trend"
    return "a constant offset"


def _inner_qualifier(
    c: FitChange, conds: list[tuple[FitChange, int]], dataset: Dataset, years: bool
) -> str:
    """Where, within side of ``c``, a term is on, from the change operators nested in
    ``c`` (``' (from about 1974.1)'``); operators that hold ``c`` are the context."""
    words = []
    for h, side in conds:
        if not h.terms < c.terms:  # not nested inside c
            continue
        if h.op == "CP":
            at = _position(h.params["location"], dataset, years)
            words.append(f"from about {at}" if side == 1 else f"until about {at}")
        else:
            win = _window(h, dataset, years)[1:]
            words.append(f"{'inside' if side == 1 else 'outside'} the window about {win}")
    return f" ({', '.join(words)})" if words else ""


def _and(phrases: list[str]) -> str:
    phrases = list(dict.fromkeys(phrases))  # in order, without repeats
    if len(phrases) <= 1:
        return "".join(phrases)
    return ", ".join(phrases[:-1]) + " and " + phrases[-1]


def _transition(c: FitChange, dataset: Dataset, years: bool, plural: bool = False) -> str:
    """``'over ~0.80 years (9.6 months)'``, or ``'abruptly'`` when the whole transition
    (±2 widths: 12 % to 88 %) fits between two neighbouring inputs."""
    w = c.params["width"]
    if dataset.n > 1 and 4 * w < dataset.spacing:
        return "abrupt transitions" if plural else "abruptly"
    return f"transitions over ~{_duration(w, years)}" if plural else f"over ~{_duration(w, years)}"


def _describe_change(
    c: FitChange, nouns: list[str], conds: list[list], dataset: Dataset, years: bool
) -> str:
    """One sentence on where and how the series changes at one change operator.

    CP: ``"From about 1973.4 (over ~0.80 years (9.6 months)), A gives way to B."``;
    CW: ``"Between about 1971.2 and 1973.9 (transitions over ~...), B replaces A."``,
    where A and B are the short phrases of the terms on each side. A change outside the
    data is said so, with what the data (and forecasts) see.
    """
    a, b = (
        _and([nouns[i] + _inner_qualifier(c, conds[i], dataset, years) for i in side]) or "nothing"
        for side in c.sides
    )
    x0, x1 = float(dataset.x[0]), float(dataset.x[-1])
    if c.op == "CP":
        loc = c.params["location"]
        at, how = _position(loc, dataset, years), _transition(c, dataset, years)
        if c.weight(1, x0) > 1 - _SETTLED:
            return (
                f"A change-point at about {at} ({how}), before the data start, has no effect "
                f"on the data: there {a} has already given way to {b}."
            )
        if c.weight(1, x1) < _SETTLED:
            return (
                f"After the data end, from about {at} ({how}), {a} gives way to {b}; the data "
                f"see only {a}, forecasts beyond about {at} see {b}."
            )
        where = (
            "just before the data start"
            if loc < x0
            else "just after the data end"
            if loc > x1
            else ""
        )
        return f"From about {at} ({how}{', ' + where if where else ''}), {a} gives way to {b}."
    s, e = c.params["start"], c.params["end"]
    grid = np.linspace(x0, x1, 512) if x1 > x0 else np.array([x0])
    u = c.weight(1, np.concatenate([grid, dataset.x]))
    ps, pe = _position(s, dataset, years), _position(e, dataset, years)
    how = _transition(c, dataset, years, plural=True)
    if e <= s:
        return (
            f"An empty change-window (its start, about {ps}, is after its end, about {pe}) "
            f"has no effect: {a} throughout."
        )
    if float(u.max()) < _SETTLED:
        if e < x0:
            return (
                f"A change-window between about {ps} and {pe}, before the data start, has no "
                f"effect on the data: they see only {a}."
            )
        if s > x1:
            return (
                f"After the data end, between about {ps} and {pe} ({how}), {b} replaces {a}; "
                f"the data see only {a}."
            )
        return (
            f"A change-window between about {ps} and {pe} ({how}) is too narrow to show in "
            f"the data: they see only {a}."
        )
    if float(u.min()) > 1 - _SETTLED:
        return (
            f"A change-window between about {ps} and {pe} covers all the data: they see "
            f"only {b}; {a} holds outside it."
        )
    start = ps + (" (before the data start)" if s < x0 else "")
    end = pe + (" (after the data end)" if e > x1 else "")
    return f"Between about {start} and {end} ({how}), {b} replaces {a}."


def describe_fit(fit: FitResult, dataset: Dataset) -> list[str]:
    """Plain-language sentences: one per change operator, one per additive term, then
    one on the noise.

    Lengths are in x's units, said as years (and months) when x looks like calendar
    years. Factors that are constant on the data (:func:`flat_factors`) are named, not
    described as structure, and a PER whose period exceeds the data's span is said as
    slow variation. Each term sentence ends with its share of the variance of the fitted mean
    (see the module docstring); the noise sentence gives its standard deviation in
    y's original units.

    A model with change operators (:func:`fit_changes`) first gets one sentence per
    operator saying where and how the series changes, from the terms on its two sides
    ("From about 1973.4 (over ~0.80 years (9.6 months)), a rising linear trend gives
    way to a periodic component with period 1.00 year (12.0 months)."; for a window
    "Between about 1971.2 and 1973.9 (...), B replaces A."), and each term sentence
    says where the term is active ("..., active only before the change-point at
    ~1973.4"); the slope of a trend is that of the trend where it acts. A term that
    its change operators switch off on the whole data is said so; its factors are then
    described as fitted (what forecasts there would see), none as constant on the data.
    """
    if not fit.ok:
        return [f"The fit of {fit.expression} failed: {fit.error}"]
    years = _in_years(dataset)
    shares, means = term_shares(fit, dataset)
    flats = flat_factors(fit, dataset)
    changes = fit_changes(fit)
    conds = term_conditions(changes, len(fit.terms))
    weights = [term_weight(cs, dataset.x) for cs in conds]
    off = [w is not None and float(w.max()) < _SETTLED for w in weights]
    flats = [set() if o else f for f, o in zip(flats, off)]
    nouns = [
        _term_noun(t, m, dataset, years, f, w)
        for t, m, f, w in zip(fit.terms, means, flats, weights)
    ]
    out = [_describe_change(c, nouns, conds, dataset, years) for c in changes]
    for i, (term, share, m, flat) in enumerate(zip(fit.terms, shares, means, flats)):
        sentence = _describe_term(term, m, dataset, years, flat, weights[i])
        if conds[i]:
            sentence += ", " + _active_range(conds[i], dataset, years)
            if off[i] and not sentence.endswith("switched off)"):
                sentence += ", so it does not act on the data"
        out.append(f"{sentence}; it explains {100 * share:.1f}% of the fitted mean's variance.")
    sd = math.sqrt(fit.noise_variance) * dataset.y_std
    out.append(
        f"Observation noise with standard deviation {sd:.3g} {dataset.y_column} units "
        f"({math.sqrt(fit.noise_variance):.3g} of y's standard deviation)."
    )
    return out


# --- tables -------------------------------------------------------------------------------


def _ranked(result: SearchResult) -> list[Evaluation]:
    ok = [e for e in result.history if e.ok]
    return sorted(ok, key=lambda e: (-e.bic, e.index))


def summary_table(result: SearchResult, best_fit: FitResult | None, top: int = 5) -> str:
    """Compact text table of the ``top`` evaluations by BIC (rank, expression, BIC,
    log-lik, k, seconds), followed by a one-line count of evaluations and failures."""
    rows = [("rank", "expression", "BIC", "log-lik", "k", "seconds")]
    for rank, e in enumerate(_ranked(result)[:top], 1):
        rows.append(
            (
                str(rank),
                e.expression,
                f"{e.bic:.2f}",
                f"{e.log_likelihood:.2f}" if e.log_likelihood is not None else "-",
                str(e.n_params),
                f"{e.seconds:.2f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [r[0].rjust(widths[0]), r[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(r[2:], widths[2:])]
        lines.append("  ".join(cells).rstrip())
    failed = sum(not e.ok for e in result.history)
    lines.append(
        f"{len(result.history)} evaluations ({failed} failed) in {result.wall_seconds:.1f} s"
    )
    if best_fit is not None and best_fit.ok:
        where = ""
        if best_fit.n != best_fit_points(result, best_fit):
            kind = f", {best_fit.approximation} lower bound" if best_fit.approximation else ""
            where = f" (refitted on all {best_fit.n} points{kind})"
        lines.append(f"best: {best_fit.expression}  BIC {best_fit.bic:.2f}{where}")
    return "\n".join(lines)


def best_fit_points(result: SearchResult, fit: FitResult) -> int:
    """How many points the search scored ``fit``'s expression on (``fit.n`` if unknown)."""
    for e in result.history:
        if e.expression == fit.expression and getattr(e.fit, "n", None):
            return int(e.fit.n)
    return fit.n


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _report_markdown(
    dataset: Dataset,
    result: SearchResult,
    best_fit: FitResult | None,
    doc: dict,
    top: int,
    test: dict | None,
    plots: list[str],
    skipped: list[str] = (),
) -> str:
    s = doc["search"]
    lines = [
        f"# prolas report: {dataset.name}",
        "",
        f"- data: `{dataset.path}`, {dataset.n} points, x = `{dataset.x_column}` "
        f"({dataset.x[0]:.6g} to {dataset.x[-1]:.6g}), y = `{dataset.y_column}` "
        f"(mean {dataset.y_mean:.4g}, std {dataset.y_std:.4g})",
        f"- search: {s['method']}, seed {s['seed']}, {s['evaluations']} of {s['budget']} "
        f"evaluations, {s['wall_seconds']:.1f} s"
        + (f", checkpoint `{s['checkpoint']}`" if s["checkpoint"] else ""),
        *(
            [
                f"- searched on {s['searched_on']['n']} evenly spaced points of {dataset.n} "
                "(the BICs in the tables below are on those points); the best model was then "
                "refitted on all points"
            ]
            if s.get("searched_on")
            else []
        ),
        f"- prolas {doc['prolas_version']}",
        "",
        "## Best model",
        "",
    ]
    if best_fit is None or not best_fit.ok:
        lines += ["No evaluation succeeded; see the failed evaluations below.", ""]
    else:
        lines += [
            f"`{best_fit.expression}`: BIC {best_fit.bic:.2f}, log-likelihood "
            f"{best_fit.log_likelihood:.2f} nats"
            + (
                f" ({best_fit.approximation}: a lower bound on the exact value)"
                if best_fit.approximation
                else ""
            )
            + f", k = {best_fit.n_params}, "
            f"noise variance {best_fit.noise_variance:.4g} (standardised y).",
            "",
            "### In words",
            "",
        ]
        lines += [f"{i}. {t}" for i, t in enumerate(describe_fit(best_fit, dataset), 1)]
        lines += [
            "",
            "### Hyperparameters",
            "",
            "Variances are for standardised y; lengths, periods and offsets in x's units.",
            "",
            "| term | variance | factor | parameters |",
            "|---|---|---|---|",
        ]
        for i, term in enumerate(best_fit.terms, 1):
            for j, f in enumerate(term.factors):
                params = ", ".join(f"{k} {v:.4g}" for k, v in f.params.items()) or "-"
                lines.append(
                    f"| {i if j == 0 else ''} | {f'{term.variance:.4g}' if j == 0 else ''} "
                    f"| {f.kernel} | {params} |"
                )
    lines += [
        "",
        f"## Top {top} models by BIC",
        "",
        "| rank | expression | BIC | log-likelihood | k | seconds | evaluation |",
        "|---|---|---|---|---|---|---|",
    ]
    ranked = _ranked(result)[:top]
    if not ranked:
        lines[-2:] = ["No successful evaluation."]
    for rank, e in enumerate(ranked, 1):
        lines.append(
            f"| {rank} | `{e.expression}` | {e.bic:.2f} | {e.log_likelihood:.2f} | "
            f"{e.n_params} | {e.seconds:.2f} | {e.index} |"
        )
    failed = [e for e in result.history if not e.ok]
    lines += ["", "## Failed evaluations", ""]
    if failed:
        lines += [f"- #{e.index} `{e.expression}`: {_md_cell(e.error or 'failed')}" for e in failed]
    else:
        lines.append("None.")
    if test is not None:
        lines += [
            "",
            "## Test set",
            "",
            f"`{test['path']}`, {test['n']} points: RMSE {test['rmse']:.4g} "
            f"({dataset.y_column} units), mean log predictive density "
            f"{test['mean_log_predictive_density']:.4g} nats per point.",
        ]
    if plots or skipped:
        lines += ["", "## Plots", ""]
        lines += [f"![{Path(p).stem}]({p})" for p in plots]
        lines += [f"- {_md_cell(s)}" for s in skipped]
    return "\n".join(lines) + "\n"


# --- plots ----------------------------------------------------------------------------------


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_grid(dataset: Dataset, test_dataset: Dataset | None, n: int = 400) -> np.ndarray:
    """``n`` inputs from the first input to ``EXTRAPOLATE`` of the span beyond the last
    (and over the test inputs); the data's validation leaves room for this."""
    lo, hi = dataset.x[0], dataset.x[-1] + EXTRAPOLATE * dataset.span
    if test_dataset is not None:
        lo, hi = min(lo, test_dataset.x[0]), max(hi, test_dataset.x[-1])
    return np.linspace(lo, hi, n)


def _drawable(values: np.ndarray) -> np.ndarray:
    """Non-finite values as NaN: matplotlib leaves a gap instead of failing on inf."""
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.isfinite(values), values, np.nan)


def mark_changes(ax, fit: FitResult, dataset: Dataset, groups=None) -> list:
    """Mark the transitions of ``fit``'s change operators on ``ax`` (x axis = x's units).

    A change-point: a dashed vertical line at its location, labelled ``"change-point
    ~1973.4"``, over a light band of ±2 widths (where its sigmoid runs from 12 % to
    88 %), capped to the axis; a change-window: a light span from its start to its end,
    labelled ``"change-window ~1971.2-1973.9"``. Only what lies within the axis' current
    x range is drawn (the x limits are kept). ``groups``: the change groups to mark
    (all by default). Returns the artists drawn.
    """
    years = _in_years(dataset)
    lo, hi = ax.get_xlim()
    artists = []
    for c in fit_changes(fit):
        if groups is not None and c.group not in groups:
            continue
        w = c.params["width"]
        if c.op == "CP":
            loc = c.params["location"]
            if not lo <= loc <= hi:
                continue
            band = (max(lo, loc - 2 * w), min(hi, loc + 2 * w))
            artists.append(ax.axvspan(*band, color="C2", alpha=0.15, lw=0))
            artists.append(
                ax.axvline(
                    loc,
                    color="C2",
                    ls="--",
                    lw=1.2,
                    label=f"change-point ~{_position(loc, dataset, years)}",
                )
            )
        else:
            start, end = c.params["start"], c.params["end"]
            if not (end > start and start <= hi and end >= lo):
                continue
            label = (
                f"change-window ~{_position(start, dataset, years)}"
                f"-{_position(end, dataset, years)}"
            )
            artists.append(
                ax.axvspan(max(lo, start), min(hi, end), color="C4", alpha=0.15, lw=0, label=label)
            )
    ax.set_xlim(lo, hi)
    return artists


def fit_figure(fit: FitResult, dataset: Dataset, test_dataset: Dataset | None = None):
    """The figure of :func:`plot_fit` (a matplotlib ``Figure``; the caller closes it)."""
    plt = _pyplot()
    xs = _plot_grid(dataset, test_dataset)
    mean, sd = _predictive(fit, dataset, xs, include_noise=True)
    mean, lo, hi = (_drawable(v) for v in (mean, mean - 1.96 * sd, mean + 1.96 * sd))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.fill_between(xs, lo, hi, color="C0", alpha=0.2, label="95% predictive band")
    ax.plot(xs, mean, color="C0", lw=1.5, label="posterior mean")
    ax.plot(dataset.x, dataset.y, "k.", ms=3, label="data")
    if test_dataset is not None:
        ax.plot(test_dataset.x, test_dataset.y, "o", color="C3", ms=3, mfc="none", label="test")
    ax.axvline(dataset.x[-1], color="0.6", ls="--", lw=0.8)
    mark_changes(ax, fit, dataset)
    ax.set_xlabel(dataset.x_column)
    ax.set_ylabel(dataset.y_column)
    ax.set_title(f"{fit.expression}   (BIC {fit.bic:.2f})")
    ax.legend(loc="best", fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def plot_fit(
    path: Path, fit: FitResult, dataset: Dataset, test_dataset: Dataset | None = None
) -> Path:
    """Data, posterior mean and 95 % predictive band (noise included), extrapolated
    ``EXTRAPOLATE`` of the span beyond the data; test points if given; the transitions
    of change operators marked (:func:`mark_changes`)."""
    plt = _pyplot()
    fig = fit_figure(fit, dataset, test_dataset)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _panel_label(label: str, conds: list[tuple[FitChange, int]], dataset: Dataset) -> str:
    """A component's title: its base kernels, and where a change operator lets it act
    (``"LIN  (before ~1973.4)"``); a term without change factors keeps its label."""
    if not conds:
        return label
    bases = [k for k in label.split("*") if k not in CHANGE_FACTORS] or ["C"]
    where = _active_range(conds, dataset, _in_years(dataset)).removeprefix("active only ")
    where = where.replace(" (before the data start)", "").replace(" (after the data end)", "")
    return f"{'*'.join(bases)}  ({where})"


def components_figure(fit: FitResult, dataset: Dataset):
    """The figure of :func:`plot_components` (a matplotlib ``Figure``; the caller closes it)."""
    plt = _pyplot()
    xs = _plot_grid(dataset, None)
    parts = decompose(fit, dataset.standardised_view(), xs)
    shares, _ = term_shares(fit, dataset)
    conds = term_conditions(fit_changes(fit), len(fit.terms))
    fig, axes = plt.subplots(
        len(parts), 1, figsize=(9, 2.4 * len(parts) + 0.4), sharex=True, squeeze=False
    )
    for i, (ax, (label, mean_z, var_z), share) in enumerate(zip(axes[:, 0], parts, shares)):
        mean, sd = mean_z * dataset.y_std, np.sqrt(var_z) * dataset.y_std
        lo, hi, mean = (_drawable(v) for v in (mean - 2 * sd, mean + 2 * sd, mean))
        ax.fill_between(xs, lo, hi, color="C1", alpha=0.25)
        ax.plot(xs, mean, color="C1", lw=1.3)
        ax.axvline(dataset.x[-1], color="0.6", ls="--", lw=0.8)
        title = _panel_label(label, conds[i], dataset)
        ax.set_title(f"{title}  ({100 * share:.1f}% of the fitted variance)", fontsize=9)
        ax.set_ylabel(f"{dataset.y_column} - mean")
        lo_b, hi_b, outside = active_bounds(conds[i])  # the changes that bound this term
        groups = {b[1].group for b in (lo_b, hi_b) if b is not None} | {c.group for c in outside}
        if groups and mark_changes(ax, fit, dataset, groups=groups):
            ax.legend(loc="upper left", fontsize=7, frameon=False)
    axes[-1, 0].set_xlabel(dataset.x_column)
    fig.suptitle(f"Additive components of {fit.expression} (mean ± 2 sd)", fontsize=10)
    fig.tight_layout()
    return fig


def plot_components(path: Path, fit: FitResult, dataset: Dataset) -> Path:
    """One panel per additive term: its posterior mean ± 2 sd (y units, without the
    data mean) on the data range plus ``EXTRAPOLATE`` of the span; a term switched on
    and off by change operators has their transitions marked (:func:`mark_changes`)."""
    plt = _pyplot()
    fig = components_figure(fit, dataset)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_convergence(path: Path, result: SearchResult) -> Path:
    """Best BIC so far against the evaluation index, each evaluation's BIC as a dot,
    failed evaluations marked with a red x at the bottom of the axis."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7, 4))
    ok = [e for e in result.history if e.ok]
    failed = [e for e in result.history if not e.ok]
    if ok:
        ax.plot(
            [e.index for e in ok],
            [e.bic for e in ok],
            "o",
            color="0.55",
            ms=3.5,
            label="evaluation",
        )
        trace = result.best_trace()
        idx = [i + 1 for i, v in enumerate(trace) if math.isfinite(v)]
        ax.step(
            idx, [trace[i - 1] for i in idx], where="post", color="C0", lw=1.8, label="best so far"
        )
        bics = [e.bic for e in ok]
        lo, hi = min(bics), max(bics)
        pad = 0.05 * (hi - lo) if hi > lo else 1.0
        ax.set_ylim(lo - 2 * pad, hi + pad)
    if failed:
        y0 = ax.get_ylim()[0] if ok else 0.0
        ax.plot(
            [e.index for e in failed],
            [y0] * len(failed),
            "x",
            color="C3",
            ms=6,
            clip_on=False,
            label="failed",
        )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("evaluation (unique GP fits)")
    ax.set_ylabel("BIC (higher is better)")
    best = result.best
    title = f"{result.method}: " + (f"best {best.expression}" if best else "no successful fit")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(
    out_dir: str | Path,
    dataset: Dataset,
    result: SearchResult,
    best_fit: FitResult | None,
    result_json: dict,
    *,
    top: int = 10,
    test: dict | None = None,
    test_dataset: Dataset | None = None,
) -> list[Path]:
    """Write result.json, report.md, fit.png, components.png and convergence.png.

    Creates ``out_dir`` if needed and overwrites only these five files (the CLI
    decides whether an existing result may be replaced). The fit and component plots
    are skipped when no model was fitted successfully. result.json is serialised
    first (:func:`dumps_strict`: a non-finite number raises before any file is
    written) and written after the plots; a plot that cannot be drawn is skipped
    with a warning and its reason in report.md, so the result is never lost to a
    plotting problem. Returns the written paths.
    """
    out = Path(out_dir)
    result_path = out / "result.json"
    text = dumps_strict(result_json, what=str(result_path), indent=2) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    has_fit = best_fit is not None and best_fit.ok
    if test is None:
        test = result_json.get("test")

    drawings = []
    if has_fit:
        drawings.append(("fit.png", lambda p: plot_fit(p, best_fit, dataset, test_dataset)))
        drawings.append(("components.png", lambda p: plot_components(p, best_fit, dataset)))
    drawings.append(("convergence.png", lambda p: plot_convergence(p, result)))
    plots: list[Path] = []
    skipped: list[str] = []
    for name, draw in drawings:
        try:
            plots.append(draw(out / name))
        except Exception as exc:  # a plot is not worth the result: say why, keep going
            reason = one_line(f"{type(exc).__name__}: {exc}")
            skipped.append(f"{name} could not be drawn ({reason})")
            warnings.warn(f"{out / name} not drawn: {reason}", ReportWarning, stacklevel=2)
            _pyplot().close("all")

    result_path.write_text(text)
    written.append(result_path)
    md = _report_markdown(
        dataset, result, best_fit, result_json, top, test, [p.name for p in plots], skipped
    )
    path = out / "report.md"
    path.write_text(md)
    written.append(path)
    return written + plots
