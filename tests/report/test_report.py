"""result.json, its validator, test metrics, words, report files (prolas.report).

One small real search is shared by the tests: a synthetic 40-point LIN + PER series,
five expressions fitted through Evaluator + GPScorer (restarts = 2), one of them
forced to fail.
"""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import torch
from conftest import fit_from_params

from prolas import report
from prolas.data import Dataset, extrapolation_split
from prolas.expr import parse
from prolas.gp import FitConfig, GPScorer, anatomy, fit_gp
from prolas.records import Evaluation, Score, SearchResult
from prolas.search.evaluator import Evaluator

PERIOD = 2.5
EXPRESSIONS = ["SE", "LIN", "PER", "RQ", "LIN + PER"]


class FailingScorer:
    """GPScorer that reports one expression as failed (a real search can hit this)."""

    def __init__(self, inner: GPScorer, fail: str) -> None:
        self.inner, self.fail = inner, fail

    def __call__(self, expr) -> Score:
        if str(expr) == self.fail:
            return Score.failed(expr, "Cholesky failed | all restarts (synthetic)")
        return self.inner(expr)


@pytest.fixture(scope="module")
def search():
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = np.linspace(0.0, 12.0, 44)
    y = 0.4 * x + np.sin(2 * np.pi * x / PERIOD) + 0.1 * rng.standard_normal(x.size)
    full = Dataset.from_arrays(x, y, name="planted", path="planted.csv")
    train, test = extrapolation_split(full)
    ev = Evaluator(FailingScorer(GPScorer(train, FitConfig(restarts=2)), "RQ"), budget=10)
    ev.evaluate_many([parse(e) for e in EXPRESSIONS])
    result = ev.result("manual", 0)
    best = result.best.fit
    metrics = report.test_metrics(best, train, test)
    doc = report.result_to_json(
        train, result, best, method="manual", seed=0, budget=10, test=metrics
    )
    return train, test, result, best, metrics, doc


# --- result.json -------------------------------------------------------------------------


def test_result_json_is_valid_and_strict_json(search):
    train, _, result, best, metrics, doc = search
    report.validate_result_json(doc)
    text = json.dumps(doc, allow_nan=False)
    report.validate_result_json(json.loads(text))  # survives the round trip
    assert doc["data"] == train.to_json()
    assert doc["search"]["evaluations"] == len(EXPRESSIONS)
    assert [h["index"] for h in doc["history"]] == [1, 2, 3, 4, 5]
    failed = [h for h in doc["history"] if h["status"] == "failed"]
    assert [h["expression"] for h in failed] == ["RQ"] and failed[0]["bic"] is None
    assert doc["best"]["expression"] == best.expression == "LIN + PER"
    assert doc["test"] == metrics and doc["test"]["n"] == 5


def test_non_finite_numbers_become_null(search):
    train, _, _, best, _, _ = search
    history = [
        Evaluation(1, "SE", "ok", math.inf, math.nan, 3, 0.1, None),
        Evaluation(2, "LIN + PER", "ok", best.bic, best.log_likelihood, 6, 0.2, None),
        Evaluation(3, "PER", "failed", None, math.nan, 4, math.nan, "NaN loss"),
    ]
    doc = report.result_to_json(
        train, SearchResult("x", 1, 5, history, math.inf), best, method="x", seed=1, budget=5
    )
    json.dumps(doc, allow_nan=False)
    with pytest.raises(ValueError, match="wall_seconds"):  # inf wall time became null
        report.validate_result_json(doc)
    report.validate_result_json({**doc, "search": {**doc["search"], "wall_seconds": 0.0}})
    se = doc["history"][0]
    assert se["status"] == "failed" and se["bic"] is None and "non-finite" in se["error"]
    assert doc["history"][2]["log_likelihood"] is None and doc["history"][2]["seconds"] is None


def mutate(doc: dict, change) -> dict:
    d = copy.deepcopy(doc)
    change(d)
    return d


def _raise_other_bic(d):
    ok = [h for h in d["history"] if h["status"] == "ok" and h["expression"] != "LIN + PER"]
    ok[0]["bic"] = d["best"]["bic"] + 1.0


def _bic_on_failed(d):
    next(h for h in d["history"] if h["status"] == "failed")["bic"] = -10.0


def _swap_term_order(d):
    d["best"]["terms"].reverse()


def _swap_factor_order(d):
    """A consistent LIN*PER best (k and BIC formula right) with its factors reversed."""
    lin, per = (t["factors"][0] for t in d["best"]["terms"])
    d["best"].update(
        expression="LIN*PER", n_params=5, terms=[{"variance": 1.0, "factors": [per, lin]}]
    )
    d["best"]["bic"] = d["best"]["log_likelihood"] - 2.5 * math.log(d["data"]["n"])


BROKEN = [
    ("missing key", lambda d: d.pop("history"), "missing key 'history'"),
    ("missing data key", lambda d: d["data"].pop("y_std"), "missing key 'y_std'"),
    ("extra key", lambda d: d.__setitem__("notes", 1), "unexpected key 'notes'"),
    ("best not max", _raise_other_bic, "not the best ok BIC"),
    ("failed with bic", _bic_on_failed, "must have bic null"),
    ("failed w/o error", lambda d: d["history"][3].__setitem__("error", None), "error string"),
    ("duplicate index", lambda d: d["history"][1].__setitem__("index", 1), "index"),
    ("wrong k", lambda d: d["history"][0].__setitem__("n_params", 7), "n_params"),
    ("non-canonical", lambda d: d["history"][4].__setitem__("expression", "PER+LIN"), "canonical"),
    ("bic formula", lambda d: d["best"].__setitem__("bic", d["best"]["bic"] - 1), "best.bic"),
    ("term order", _swap_term_order, "canonical order"),
    ("factor order", _swap_factor_order, "canonical order is ('LIN', 'PER')"),
    ("term count", lambda d: d["best"]["terms"].pop(), "terms"),
    ("missing shape", lambda d: d["best"]["terms"][1]["factors"][0].pop("period"), "period"),
    ("evaluations", lambda d: d["search"].__setitem__("evaluations", 4), "evaluations"),
    ("bool as int", lambda d: d["search"].__setitem__("seed", True), "seed"),
    ("status", lambda d: d["history"][0].__setitem__("status", "done"), "status"),
    ("test block", lambda d: d["test"].pop("rmse"), "missing key 'rmse'"),
]


@pytest.mark.parametrize("name, change, expected", BROKEN, ids=[b[0] for b in BROKEN])
def test_validator_rejects_broken_documents(search, name, change, expected):
    doc = search[-1]
    with pytest.raises(ValueError, match="result.json") as info:
        report.validate_result_json(mutate(doc, change))
    assert expected in str(info.value)


# --- held-out metrics: an independent numpy GP ----------------------------------------------


def numpy_kernel(name: str, p: dict, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kernel formulas of docs/conventions.md, written independently of prolas.gp.kernels."""
    d = a[:, None] - b[None, :]
    if name == "SE":
        return np.exp(-(d**2) / (2 * p["lengthscale"] ** 2))
    if name == "LIN":
        return (a[:, None] - p["offset"]) * (b[None, :] - p["offset"])
    if name == "PER":
        return np.exp(-2 * np.sin(np.pi * np.abs(d) / p["period"]) ** 2 / p["lengthscale"] ** 2)
    if name == "RQ":
        return (1 + d**2 / (2 * p["alpha"] * p["lengthscale"] ** 2)) ** (-p["alpha"])
    raise AssertionError(name)


def numpy_cov(fit, a, b):
    K = np.zeros((a.size, b.size))
    for t in fit.terms:
        Kt = t.variance * np.ones_like(K)
        for f in t.factors:
            Kt = Kt * numpy_kernel(f.kernel, f.params, a, b)
        K += Kt
    return K


def test_test_metrics_equal_hand_computation(search):
    train, test, _, best, metrics, _ = search
    z = (train.y - train.y.mean()) / train.y.std()
    K = numpy_cov(best, train.x, train.x) + best.noise_variance * np.eye(train.n)
    Ks = numpy_cov(best, test.x, train.x)
    mean = train.y.mean() + train.y.std() * Ks @ np.linalg.solve(K, z)
    var_z = (
        np.diag(numpy_cov(best, test.x, test.x))
        - np.einsum("ij,ji->i", Ks, np.linalg.solve(K, Ks.T))
        + best.noise_variance
    )
    var = var_z * train.y.std() ** 2
    rmse = math.sqrt(np.mean((test.y - mean) ** 2))
    mlpd = np.mean(-0.5 * np.log(2 * np.pi * var) - 0.5 * (test.y - mean) ** 2 / var)
    assert metrics["rmse"] == pytest.approx(rmse, rel=1e-6)
    assert metrics["mean_log_predictive_density"] == pytest.approx(mlpd, rel=1e-6, abs=1e-8)
    assert metrics["path"] == test.path and metrics["n"] == test.n
    # the planted structure extrapolates well: far better than predicting the train mean
    assert rmse < 0.5 * math.sqrt(np.mean((test.y - train.y.mean()) ** 2))


# --- words ---------------------------------------------------------------------------------


def test_describe_fit_mentions_periodic_and_period(search):
    train, _, _, best, _, _ = search
    lines = report.describe_fit(best, train)
    assert len(lines) == len(best.terms) + 1
    periodic = [s for s in lines if "periodic" in s]
    assert len(periodic) == 1
    assert f"{best.period():.3g}" in periodic[0] and abs(best.period() - PERIOD) < 0.1
    linear = [s for s in lines if "linear trend" in s]
    assert len(linear) == 1 and "rising" in linear[0]
    shares = [float(s.split("explains ")[1].split("%")[0]) for s in lines[:-1]]
    assert sum(shares) == pytest.approx(100.0, abs=0.2)
    assert "noise" in lines[-1] and "standard deviation" in lines[-1]


def test_describe_fit_says_years_for_calendar_x():
    x = 2000 + np.arange(48) / 12
    y = np.sin(2 * np.pi * x) + 0.05 * np.cos(7 * x)
    ds = Dataset.from_arrays(x, y)
    fit = fit_gp(parse("PER"), ds, FitConfig(restarts=2))
    (sentence, noise) = report.describe_fit(fit, ds)
    assert "periodic" in sentence and "1.00 year (12.0 months)" in sentence
    assert "100.0%" in sentence and "noise" in noise


def _per_se(per_ls: float, se_ls: float, variance: float = 1.0) -> list[dict]:
    per = {"kernel": "PER", "lengthscale": per_ls, "period": 1.0}
    return [{"variance": variance, "factors": [per, {"kernel": "SE", "lengthscale": se_ls}]}]


def test_flat_factors_agree_with_a_numpy_evaluation_of_the_rule():
    x = 1960 + np.arange(120) / 3  # 40 years, 120 points (all used: fewer than 200)
    ds = Dataset.from_arrays(x, np.sin(2 * np.pi * x))
    d = x[:, None] - x[None, :]
    noise = 0.01
    for per_ls, se_ls, variance in [
        (1.2, 3.2e8, 1.0),
        (1.2, 15.0, 1.0),
        (1.2, 4e3, 2.0),
        (1.2, 1e5, 2.0),
        (30.0, 15.0, 1.0),
    ]:
        fit = fit_from_params("PER*SE", _per_se(per_ls, se_ls, variance), ds.n, noise)
        k_per = np.exp(-2 * np.sin(np.pi * np.abs(d) / 1.0) ** 2 / per_ls**2)
        k_se = np.exp(-(d**2) / (2 * se_ls**2))
        expect = set()
        if np.abs(variance * k_se * (k_per - 1)).max() < anatomy.FLAT_TOLERANCE * noise:
            expect.add(0)
        if np.abs(variance * k_per * (k_se - 1)).max() < anatomy.FLAT_TOLERANCE * noise:
            expect.add(1)
        assert anatomy.flat_factors(fit, ds) == [expect], (per_ls, se_ls, variance)
    # the last case: a PER with lengthscale 30 still varies by 0.2 % of a unit variance
    assert anatomy.flat_factors(fit, ds) == [set()]
    assert anatomy.flat_factors(fit_from_params("PER*SE", _per_se(1.2, 3.2e8), ds.n), ds) == [{1}]
    # a long-lengthscale PER with a large variance is "constant + sinusoid", not flat
    big = [{"variance": 1e3, "factors": [{"kernel": "PER", "lengthscale": 20.0, "period": 1.0}]}]
    assert anatomy.flat_factors(fit_from_params("PER", big, ds.n), ds) == [set()]


def test_describe_fit_does_not_read_flat_factors_as_structure():
    """Hyperparameters far outside the data's scale (as mauna's fits produce: an SE
    lengthscale of 3e8 years, a 568-year period) are said as what they do on the data."""
    x = 1960 + np.arange(120) / 3  # 40 years
    ds = Dataset.from_arrays(x, np.sin(2 * np.pi * x) + 0.02 * (x - 1960))
    slow_per = {"kernel": "PER", "lengthscale": 0.85, "period": 567.76}
    fit = fit_from_params(
        "PER*RQ + PER*SE",
        [
            {
                "variance": 2.0,
                "factors": [slow_per, {"kernel": "RQ", "lengthscale": 67.7, "alpha": 4.5e-6}],
            },
            _per_se(1.2, 3.2e8)[0],
        ],
        n=ds.n,
    )
    slow, yearly, noise = report.describe_fit(fit, ds)
    assert "periodic component with period 1.00 year" in yearly
    assert "changes smoothly" not in yearly and "(SE factor constant on the data)" in yearly
    assert slow.startswith("A smooth trend") and "periodic" not in slow
    assert "567.76 years, is longer than the data" in slow
    assert f"~{567.76 * 0.85 / (2 * math.pi):.2f} years" in slow
    assert "(RQ factor constant on the data)" in slow and "noise" in noise
    # a factor that does vary on the data is still described as before
    (sentence, _) = report.describe_fit(fit_from_params("PER*SE", _per_se(1.2, 15.0), ds.n), ds)
    assert "shape changes smoothly over ~15.00 years (SE factor)" in sentence
    assert "constant on the data" not in sentence


# --- files ---------------------------------------------------------------------------------


def test_write_report_writes_valid_files(search, tmp_path):
    import matplotlib.image as mpimg

    train, test, result, best, metrics, doc = search
    (tmp_path / "other.txt").write_text("keep me")
    paths = report.write_report(
        tmp_path / "out", train, result, best, doc, test=metrics, test_dataset=test
    )
    names = sorted(p.name for p in paths)
    assert names == sorted(
        ["result.json", "report.md", "fit.png", "components.png", "convergence.png"]
    )
    assert all(p.parent == tmp_path / "out" for p in paths)
    report.validate_result_json(json.loads((tmp_path / "out" / "result.json").read_text()))
    for p in paths:
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            img = mpimg.imread(p)
            assert img.shape[0] > 200 and img.shape[1] > 400
            assert img[..., :3].std() > 0.05  # not a blank canvas
    md = (tmp_path / "out" / "report.md").read_text()
    assert "`LIN + PER`" in md and f"{best.bic:.2f}" in md
    assert "periodic" in md and "## Failed evaluations" in md
    assert "`RQ`: Cholesky failed \\| all restarts" in md  # reason, table-safe
    assert f"RMSE {metrics['rmse']:.4g}" in md
    for png in ("fit.png", "components.png", "convergence.png"):
        assert f"]({png})" in md
    top = md.split("## Top 10 models by BIC")[1].split("##")[0]
    ranked = [
        line.split("`")[1] for line in top.splitlines() if line.startswith("| ") and "`" in line
    ]
    bics = {e.expression: e.bic for e in result.history if e.ok}
    assert ranked == sorted(bics, key=lambda e: -bics[e])
    assert (tmp_path / "other.txt").read_text() == "keep me"


def test_summary_table(search):
    _, _, result, best, _, _ = search
    text = report.summary_table(result, best, top=3)
    lines = text.splitlines()
    assert lines[0].split() == ["rank", "expression", "BIC", "log-lik", "k", "seconds"]
    rows = lines[1:4]
    assert [r.split()[0] for r in rows] == ["1", "2", "3"]
    assert rows[0].split()[1:4] == ["LIN", "+", "PER"]
    bics = [float(r.split()[-4]) for r in rows]
    assert bics == sorted(bics, reverse=True) and bics[0] == pytest.approx(best.bic, abs=0.01)
    assert "5 evaluations (1 failed)" in text
