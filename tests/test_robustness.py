"""No crash, nothing lost (issue 16): non-finite numbers and hostile data.

* The Evaluator guard (:func:`prolas.search.evaluator.checked_score`): an ``"ok"``
  score carrying a NaN/inf (BIC, log-likelihood, a hyperparameter, the noise) or a
  scorer that raises becomes a failed evaluation with a one-line reason.
* The strict writer (:func:`prolas.records.dumps_strict`): journal lines and
  result.json never hold NaN/Infinity; if one slips past the guard, writing fails
  loudly, naming it.
* The report with no successful fit, or with failed evaluations.
* Data validation (:mod:`prolas.data`): a text ``y`` column is an error, never a
  silent switch to another column; values beyond 1e300 are an error; huge and tiny
  scales (1e-300 .. 1e300) standardise to finite values.
* A hypothesis property: random grammar expressions on random data (irregular and
  duplicate inputs, scales 1e-300 .. 1e300 in x and y, near-constant series) go
  through fit -> Evaluator -> journal -> result.json -> report without an exception,
  every file is strict JSON and every ok evaluation has finite numbers.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from prolas import records, report
from prolas.data import MAX_MAGNITUDE, Dataset, _moments, load_csv
from prolas.errors import DataError, NonFiniteError
from prolas.expr import parse
from prolas.gp import FactorFit, FitConfig, FitResult, GPScorer, TermFit, fit_gp
from prolas.pipeline import run_search
from prolas.records import Evaluation, Score, SearchResult, first_non_finite
from prolas.search.config import SearchConfig
from prolas.search.evaluator import Evaluator, TableScorer
from prolas.search.journal import JOURNAL_NAME, Journal, open_journal, read_journal

#: Small, fast fits for the property tests (the GP fit itself is tested in test_gp).
FAST = FitConfig(restarts=2, max_iter=30, screen_iter=10)


def strict_loads(text: str):
    """``json.loads`` that rejects the non-JSON tokens NaN, Infinity and -Infinity."""

    def reject(token: str):
        raise AssertionError(f"non-JSON number {token} written")

    return json.loads(text, parse_constant=reject)


def fit_with(expr: str, terms: tuple[TermFit, ...], noise: float = 0.1, ll: float = -3.0):
    """A hand-made "ok" FitResult of ``expr`` on 10 points (numbers as given)."""
    e = parse(expr)
    bic = ll - 0.5 * e.n_params * math.log(10)
    return FitResult(expr, "ok", 10, e.n_params, ll, bic, terms, noise, 0.1, None, 2)


def per_se_fit(period: float = 1.0, noise: float = 0.1) -> FitResult:
    """``PER*SE`` with the given period and noise variance."""
    term = TermFit(
        0.5,
        (
            FactorFit("PER", {"lengthscale": 1.0, "period": period}),
            FactorFit("SE", {"lengthscale": 2.0}),
        ),
    )
    return fit_with("PER*SE", (term,), noise)


class FitScorer:
    """Returns the given FitResults' scores by expression (the rest score -10)."""

    def __init__(self, *fits: FitResult) -> None:
        self.fits = {f.expression: f for f in fits}

    def __call__(self, expr) -> Score:
        fit = self.fits.get(str(expr))
        if fit is None:
            return Score(str(expr), "ok", -10.0, -5.0, expr.n_params, 0.1)
        return fit.to_score()


# --- the Evaluator guard -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fit", "fragment"),
    [
        (
            per_se_fit(period=math.inf),
            "non-finite hyperparameter: terms[0].factors[0].period = inf",
        ),
        (per_se_fit(noise=math.nan), "non-finite noise variance: noise_variance = nan"),
        (
            fit_with("SE", (TermFit(math.inf, (FactorFit("SE", {"lengthscale": 1.0}),)),)),
            "terms[0].variance = inf",
        ),
        (fit_with("SE", (), ll=math.nan), "non-finite bic = nan"),
    ],
)
def test_ok_score_with_a_non_finite_number_becomes_a_failed_evaluation(fit, fragment) -> None:
    """Checks: the evaluation is failed, names the number, drops the fit and its BIC."""
    ev = Evaluator(FitScorer(fit), budget=3)
    out = ev.evaluate_many([parse(fit.expression), parse("LIN")])
    bad, good = out
    assert bad.status == "failed" and not bad.ok and fragment in bad.error
    assert bad.bic is None and bad.log_likelihood is None and bad.fit is None
    assert good.ok and ev.result("x", 0).best.expression == "LIN"  # the search goes on


def test_ok_score_with_infinite_bic_is_failed() -> None:
    """Checks: a bare (fit-less) ok score with an infinite BIC is failed."""
    ev = Evaluator(lambda e: Score(str(e), "ok", math.inf, 1.0, e.n_params, 0.1), budget=1)
    e = ev.evaluate(parse("SE"))
    assert e.status == "failed" and e.error == "non-finite bic = inf"


def test_a_raising_scorer_is_a_failed_evaluation_with_a_one_line_reason() -> None:
    """Checks: the exception never escapes; its reason is one line; later fits still run."""

    def scorer(expr) -> Score:
        if str(expr) == "PER":
            raise RuntimeError("Cholesky failed\n  in restart 3\n")
        return Score(str(expr), "ok", 1.0, 2.0, expr.n_params, 0.1)

    ev = Evaluator(scorer, budget=3)
    per, se = ev.evaluate_many([parse("PER"), parse("SE")])
    assert per.status == "failed" and per.error == "RuntimeError: Cholesky failed in restart 3"
    assert se.ok


def test_odd_scores_are_made_consistent() -> None:
    """Checks: a non-Score return, an unknown status, a multi-line failure reason, a
    failure without reason and a negative timing are all normalised."""
    returns = {
        "SE": None,
        "LIN": Score("LIN", "maybe", 1.0, 1.0, 3, 0.1),
        "PER": Score("PER", "failed", None, None, 4, 0.1, "line one\nline two"),
        "RQ": Score("RQ", "failed", None, None, 4, 0.1, None),
        "LIN*SE": Score("LIN*SE", "ok", 1.0, 2.0, 4, -1.0, "stray"),
    }
    ev = Evaluator(lambda e: returns[str(e)], budget=5)
    se, lin, per, rq, linse = ev.evaluate_many([parse(k) for k in returns])
    assert se.status == "failed" and "not a Score" in se.error
    assert lin.status == "failed" and "unknown status 'maybe'" in lin.error
    assert per.error == "line one line two" and rq.error == "failed (no reason recorded)"
    assert linse.ok and linse.error is None and math.isnan(linse.seconds)


def test_first_non_finite_walks_nested_values() -> None:
    """Checks: the path names dict keys and list indices; numpy scalars are seen."""
    assert first_non_finite({"a": [1, {"b": np.float64("-inf")}]}) == "a[1].b = -inf"
    assert first_non_finite({"a": [1, "x", None, True]}) is None
    assert first_non_finite(math.nan) == "value = nan"


# --- the strict writer -----------------------------------------------------------------------


def test_dumps_strict_refuses_non_finite_numbers_by_name() -> None:
    """Checks: NaN/inf raise NonFiniteError (a ValueError) naming the field."""
    with pytest.raises(NonFiniteError, match=r"best\.terms\[0\]\.variance = inf"):
        records.dumps_strict({"best": {"terms": [{"variance": math.inf}]}})
    assert strict_loads(records.dumps_strict({"a": [1.5, None]}, indent=2)) == {"a": [1.5, None]}


def test_journal_fails_loudly_on_an_unguarded_non_finite_ok_entry(tmp_path) -> None:
    """Checks: an ok Evaluation that bypassed the Evaluator is refused, not written as
    NaN or null; a failed entry's non-finite numbers and timings are written as null."""
    j = Journal.create(tmp_path / JOURNAL_NAME, {"method": "test"})
    with pytest.raises(NonFiniteError, match="bic = inf"):
        j.append(Evaluation(1, "SE", "ok", math.inf, 1.0, 3, 0.1, None), elapsed=1.0)
    fit = per_se_fit(period=math.nan)
    with pytest.raises(NonFiniteError, match=r"fit\.terms\[0\]\.factors\[0\]\.period = nan"):
        j.append(Evaluation(1, "PER*SE", "ok", fit.bic, -3.0, 6, 0.1, None, fit=fit), 1.0)
    j.append(Evaluation(1, "RQ", "failed", None, math.nan, 4, math.inf, "boom"), math.nan)
    j.close()
    lines = (tmp_path / JOURNAL_NAME).read_text().splitlines()
    assert len(lines) == 2  # header + the failed entry; the refused lines left no trace
    entry = strict_loads(lines[1])
    assert entry["log_likelihood"] is None and entry["seconds"] is None
    assert entry["elapsed"] is None and entry["fit"] is None
    header, entries, elapsed, keep, _ = read_journal(tmp_path / JOURNAL_NAME)
    assert [e.expression for e in entries] == ["RQ"] and keep is None and elapsed == 0.0


def test_journal_reader_rejects_nan_tokens(tmp_path) -> None:
    """Checks: a (hand-edited) journal line holding NaN is corrupt, not silently read."""
    j = Journal.create(tmp_path / JOURNAL_NAME, {"method": "test"})
    j.append(Evaluation(1, "SE", "ok", -3.0, -1.0, 3, 0.1, None), 0.5)
    j.append(Evaluation(2, "LIN", "ok", -4.0, -2.0, 3, 0.1, None), 0.9)
    j.close()
    path = tmp_path / JOURNAL_NAME
    path.write_text(path.read_text().replace("-3.0", "NaN"))
    with pytest.raises(Exception, match="line 2 is corrupt.*NaN"):
        read_journal(path)


def test_result_with_a_non_finite_best_is_refused_before_anything_is_written(tmp_path) -> None:
    """Checks: result_to_json refuses a best model holding inf (naming it); no file is
    written by write_report for a document holding NaN."""
    ds = Dataset.from_arrays(np.arange(10.0), np.sin(np.arange(10.0)))
    fit = per_se_fit(period=math.inf)
    history = [Evaluation(1, "PER*SE", "ok", fit.bic, fit.log_likelihood, 6, 0.1, None)]
    result = SearchResult("x", 0, 5, history, 1.0)
    with pytest.raises(NonFiniteError, match=r"best\.terms\[0\]\.factors\[0\]\.period = inf"):
        report.result_to_json(ds, result, fit, method="x", seed=0, budget=5)
    doc = report.result_to_json(ds, result, None, method="x", seed=0, budget=5)
    doc["search"]["wall_seconds"] = math.nan
    with pytest.raises(NonFiniteError, match="wall_seconds = nan"):
        report.write_report(tmp_path / "out", ds, result, None, doc)
    assert not (tmp_path / "out").exists()


def test_report_of_a_search_where_every_fit_failed(tmp_path) -> None:
    """Checks: best is None -> a valid result.json with best null, report.md listing
    the failures and convergence.png; no fit or component plot."""
    ds = Dataset.from_arrays(np.arange(10.0), np.cos(np.arange(10.0)))
    ev = Evaluator(TableScorer({}, fail=frozenset({"SE", "PER"})), budget=2)
    ev.evaluate_many([parse("SE"), parse("PER")])
    result = ev.result("x", 0)
    assert result.best is None
    doc = report.result_to_json(ds, result, None, method="x", seed=0, budget=2)
    paths = report.write_report(tmp_path, ds, result, None, doc)
    assert sorted(p.name for p in paths) == ["convergence.png", "report.md", "result.json"]
    back = strict_loads((tmp_path / "result.json").read_text())
    report.validate_result_json(back)
    assert back["best"] is None and all(h["status"] == "failed" for h in back["history"])
    md = (tmp_path / "report.md").read_text()
    assert "No evaluation succeeded" in md and "`PER`: synthetic failure" in md


# --- data ------------------------------------------------------------------------------------


def write_csv(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "data.csv"
    p.write_text(text)
    return p


TEXT_Y = "x,y\n1,a\n2,b\n3,c\n4,d\n5,e\n6,f\n"


@pytest.mark.parametrize(
    ("text", "kwargs", "fragment"),
    [
        (TEXT_Y, {}, "column 'y' is not numeric (CSV line 2: 'a')"),
        (TEXT_Y, {"y": "y"}, "column 'y' is not numeric (CSV line 2: 'a')"),
        ("x,y,z\n" + "".join(f"{i},v{i},{i % 3}\n" for i in range(6)), {}, "column 'y'"),
        ("t,y\n" + "".join(f"{i},{'?' if i == 3 else i % 4}\n" for i in range(6)), {}, "line 5"),
        ("x,y\n" + "".join(f"n{i},{i % 4}\n" for i in range(6)), {}, "column 'x' is not numeric"),
    ],
)
def test_a_chosen_column_that_is_not_numeric_is_an_error(tmp_path, text, kwargs, fragment):
    """Checks: a column named (or literally called) y/x that holds text is rejected with
    its name and first bad CSV line, never replaced by another column."""
    with pytest.raises(DataError) as err:
        load_csv(write_csv(tmp_path, text), **kwargs)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_literal_y_column_is_y_even_when_it_is_not_second(tmp_path) -> None:
    """Checks: with columns y, t, x the default is x='x', y='y' (named columns win)."""
    text = "y,t,x\n" + "".join(f"{i % 3},{10 + i},{i}\n" for i in range(6))
    ds = load_csv(write_csv(tmp_path, text))
    assert (ds.x_column, ds.y_column) == ("x", "y")
    np.testing.assert_array_equal(ds.y, [i % 3 for i in range(6)])


@pytest.mark.parametrize("column", ["x", "y"])
@pytest.mark.parametrize("value", ["1e308", "-1.5e301"])
def test_values_beyond_1e300_are_an_error(tmp_path, column, value) -> None:
    """Checks: a value beyond MAX_MAGNITUDE is a one-line error naming column and line."""
    rows = [[str(i), str((i * 7) % 5)] for i in range(8)]
    rows[3][0 if column == "x" else 1] = value
    text = "x,y\n" + "".join(",".join(r) + "\n" for r in rows)
    with pytest.raises(DataError) as err:
        load_csv(write_csv(tmp_path, text))
    msg = str(err.value)
    assert f"column {column!r}" in msg and "beyond 1e+300" in msg and "CSV line 5" in msg


@pytest.mark.parametrize("x_scale", [1e-300, 1.0, 1e295])
@pytest.mark.parametrize("y_scale", [1e-300, 1e-160, 1.0, 1e160, 1e299])
def test_huge_and_tiny_scales_standardise_finitely(x_scale, y_scale) -> None:
    """Checks: mean/std of y are finite and positive at any scale within the limit, the
    standardised y has mean 0 and std 1, and x's span is finite and positive."""
    rng = np.random.default_rng(4)
    x = np.sort(rng.uniform(0, 3, 20)) * x_scale
    y = (rng.standard_normal(20) + 2.0) * y_scale
    ds = Dataset.from_arrays(x, y)
    assert math.isfinite(ds.y_mean) and math.isfinite(ds.y_std) and ds.y_std > 0
    z = ds.y_standardised
    assert abs(z.mean()) < 1e-12 and z.std() == pytest.approx(1.0, rel=1e-12)
    assert 0 < ds.span < math.inf and 0 < ds.spacing < math.inf
    assert np.abs(ds.y).max() <= MAX_MAGNITUDE


def test_moments_are_bit_identical_to_numpy_where_numpy_is_finite() -> None:
    """Checks: the scaled mean/std equal y.mean()/y.std() exactly (results of existing
    runs and journals do not change)."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        y = rng.standard_normal(rng.integers(5, 80)) * 10.0 ** rng.uniform(-50, 50)
        y = y + rng.standard_normal() * 10.0 ** rng.uniform(-50, 50)
        assert _moments(y) == (float(y.mean()), float(y.std()))


def test_tiny_variation_at_a_tiny_scale_is_not_called_constant() -> None:
    """Checks: constancy is relative (12 digits), so 1e-300-scale data are fitted, while
    a series equal to 12 digits is still rejected."""
    Dataset.from_arrays(np.arange(6.0), np.array([1, 3, 2, 5, 4, 6]) * 1e-300)
    with pytest.raises(DataError, match="constant"):
        Dataset.from_arrays(np.arange(6.0), 1e5 + np.array([0, 1, 0, 1, 0, 1]) * 1e-9)


# --- the property: fit -> Evaluator -> journal -> result.json -> report --------------------------

X_KINDS = ("regular", "irregular", "duplicates")
Y_KINDS = ("smooth", "noise", "near-constant", "steps")


def make_data(
    n: int, x_kind: str, x_exp: int, x_offset: float, y_kind: str, y_exp: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Inputs of ``n`` points in ``[offset, offset + 1] * 10**x_exp`` (regular, irregular
    or drawn with repeats from a few values) and outputs of one of four shapes scaled to
    ``10**y_exp``."""
    rng = np.random.default_rng(seed)
    if x_kind == "regular":
        u = np.linspace(0.0, 1.0, n)
    elif x_kind == "irregular":
        u = np.sort(rng.uniform(0.0, 1.0, n))
    else:
        u = np.sort(rng.choice(np.linspace(0.0, 1.0, max(2, n // 3)), n))
        u[0], u[-1] = 0.0, 1.0  # at least two distinct values
    x = (x_offset + u) * 10.0**x_exp
    if y_kind == "smooth":
        y = np.sin(9 * u) + u + 0.05 * rng.standard_normal(n)
    elif y_kind == "noise":
        y = rng.standard_normal(n)
    elif y_kind == "near-constant":
        y = 1.0 + 1e-9 * rng.standard_normal(n)
    else:
        y = (u > 0.5).astype(float) + 0.01 * rng.standard_normal(n)
    return x, y * 10.0**y_exp


def check_pipeline(x: np.ndarray, y: np.ndarray, seed: int, budget: int, out: Path) -> None:
    """Run the real search pipeline (random grammar search on ``small``) with a journal,
    write result.json and the report, and check every output."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate-x warnings
        try:
            ds = Dataset.from_arrays(x, y, name="prop", path="prop.csv")
        except DataError as exc:  # rejected data: a one-line error is an acceptable outcome
            assert "\n" not in str(exc)
            return
    config = SearchConfig(method="random", grammar="small", budget=budget, restarts=2, seed=seed)
    ev = Evaluator(GPScorer(ds, replace(FAST, seed=seed)), budget=budget)
    journal = open_journal(out, ds, config, resume=False, force=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numerics warnings of hard fits
        try:
            result, best = run_search(ds, config, evaluator=ev, journal=journal)
        finally:
            journal.close()
        test = report.test_metrics(best, ds, ds) if best is not None else None
        doc = report.result_to_json(
            ds, result, best, method="random", seed=seed, budget=budget, test=test
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error", report.ReportWarning)  # every plot must be drawn
            report.write_report(out, ds, result, best, doc, test=test, test_dataset=ds)

    # every ok evaluation holds only finite numbers
    assert len(result.history) == budget
    for e in result.history:
        if e.status == "ok":
            assert math.isfinite(e.bic) and math.isfinite(e.log_likelihood), e
            assert e.fit is None or first_non_finite(e.fit.to_json()) is None, e
        else:
            assert e.error and "\n" not in e.error
    # the journal: strict JSON, one line per evaluation, read back unchanged
    lines = (out / JOURNAL_NAME).read_text().splitlines()
    assert len(lines) == 1 + budget
    for line in lines[1:]:
        entry = strict_loads(line)
        if entry["status"] == "ok":
            assert first_non_finite(entry) is None
    _, entries, _, keep, _ = read_journal(out / JOURNAL_NAME)
    assert keep is None
    assert [(e.expression, e.status, e.bic) for e in entries] == [
        (e.expression, e.status, e.bic) for e in result.history
    ]
    # result.json: strict JSON, valid per its schema and conventions; the report and its plots
    back = strict_loads((out / "result.json").read_text())
    report.validate_result_json(back)
    assert (back["best"] is None) == (best is None)
    pngs = ["convergence.png"] + (["fit.png", "components.png"] if best is not None else [])
    for name in pngs:
        assert (out / name).read_bytes()[:4] == b"\x89PNG", name
    assert "## Best model" in (out / "report.md").read_text()


@pytest.mark.slow
@settings(
    max_examples=int(os.environ.get("PROLAS_HYPOTHESIS_EXAMPLES", "16")),
    deadline=None,
    derandomize=True,  # the same examples on every run: no flaky suite on a shared machine
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    n=st.integers(5, 40),
    x_kind=st.sampled_from(X_KINDS),
    x_exp=st.integers(-300, 297),
    x_offset=st.sampled_from([0.0, 1.0, 100.0]),
    y_kind=st.sampled_from(Y_KINDS),
    y_exp=st.integers(-300, 297),
    seed=st.integers(0, 2**16),
    budget=st.integers(1, 3),
)
@example(
    n=12, x_kind="regular", x_exp=-300, x_offset=0.0, y_kind="smooth", y_exp=297, seed=0, budget=3
)
@example(
    n=30, x_kind="irregular", x_exp=297, x_offset=1.0, y_kind="noise", y_exp=-300, seed=1, budget=3
)
@example(
    n=20,
    x_kind="duplicates",
    x_exp=0,
    x_offset=0.0,
    y_kind="near-constant",
    y_exp=0,
    seed=2,
    budget=3,
)
@example(
    n=5, x_kind="duplicates", x_exp=3, x_offset=100.0, y_kind="steps", y_exp=150, seed=3, budget=2
)
def test_property_pipeline_never_crashes_and_writes_strict_json(
    n, x_kind, x_exp, x_offset, y_kind, y_exp, seed, budget
) -> None:
    """Checks (random expressions of the ``small`` grammar, random data): no exception
    escapes fit -> Evaluator -> journal -> result.json -> report; every journal line and
    result.json are strict JSON (no NaN/Infinity); result.json validates; every ok
    evaluation has finite numbers; every plot is drawn."""
    x, y = make_data(n, x_kind, x_exp, x_offset, y_kind, y_exp, seed)
    with tempfile.TemporaryDirectory() as tmp:
        check_pipeline(x, y, seed, budget, Path(tmp) / "out")


# --- fit-core edge cases found by the property test ----------------------------------------


@pytest.mark.parametrize("scale", [1e-300, 1e160, 1e290])
def test_fit_gp_of_lin_on_extreme_x_scales_returns_instead_of_raising(scale) -> None:
    """Checks: fit_gp never raises on valid data; an ok fit holds finite numbers (LIN's
    variance in x's units, v / span**2, is beyond float range for these spans: the fit
    is then recorded as failed with that reason)."""
    ds = Dataset.from_arrays(np.arange(6.0) * scale, [0.3, 1.2, 0.5, 2.0, 1.1, 2.5])
    fit = fit_gp("LIN", ds, FAST)
    assert fit.status == "failed" or first_non_finite(fit.to_json()) is None


def test_fit_gp_of_rq_se_on_repeated_inputs_returns_instead_of_raising() -> None:
    """Checks: fit_gp never raises on valid data of ordinary scale (32 points on 10
    distinct inputs, found by the property test's exploration)."""
    x, y = make_data(32, "duplicates", 4, 1.0, "smooth", -3, 59330)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_gp("RQ*SE", Dataset.from_arrays(x, y), replace(FAST, seed=59330))
    assert fit.status == "failed" or first_non_finite(fit.to_json()) is None


@pytest.mark.slow
@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (TEXT_Y, "prolas: error: {path}: column 'y' is not numeric (CSV line 2: 'a')"),
        ("x,y\n" + "".join(f"{i},{(-1) ** i}e308\n" for i in range(8)), "beyond 1e+300"),
    ],
)
def test_console_script_rejects_bad_values_in_one_line(tmp_path, content, fragment) -> None:
    """Checks (a real process, so a traceback would show): non-zero exit, exactly one
    stderr line starting "prolas: error:", nothing on stdout, no output directory."""
    import subprocess
    import sys

    path = write_csv(tmp_path, content)
    exe = Path(sys.executable).parent / "prolas"
    out = tmp_path / "o"
    proc = subprocess.run(
        [exe, "fit", str(path), "--budget", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("prolas: error:")
    assert fragment.format(path=path) in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()
