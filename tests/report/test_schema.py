"""result.json's JSON Schema (prolas/schemas/result.schema.json) and the validator on top.

Laws: the schema file is valid draft 2020-12; it accepts every kind of document prolas
writes (ok and failed entries, a test block, change operators, a search on a subsample,
a search where every fit failed) and the history entries of the committed benchmark
cells; it rejects a missing key, a wrong type and an unknown status on its own, without
prolas's code; and its blocks name exactly the fields the code writes.
"""

from __future__ import annotations

import copy
import json
import math
import subprocess
import tomllib
from dataclasses import replace
from fnmatch import fnmatch

import jsonschema
import numpy as np
import pytest
from conftest import ROOT
from jsonschema import Draft202012Validator

from prolas import report
from prolas.data import Dataset, extrapolation_split
from prolas.expr import BASE_KERNELS, CHANGE_FACTORS, factor_shape_params, parse
from prolas.gp import FitConfig, GPScorer, fit_gp
from prolas.records import HISTORY_KEYS, Evaluation, Score, SearchResult
from prolas.report.periods import periods_block
from prolas.report.schema import RESULT_SCHEMA_FILE
from prolas.search.evaluator import Evaluator, TableScorer
from prolas.search.view import build_view

SCHEMA_PATH = ROOT / "prolas" / RESULT_SCHEMA_FILE


@pytest.fixture(scope="module")
def schema() -> dict:
    """The shipped file, read as a user of result.json would read it."""
    return json.loads(SCHEMA_PATH.read_text())


def definition(schema: dict, name: str) -> Draft202012Validator:
    """A validator for one block of result.json (``$defs/<name>``)."""
    return Draft202012Validator({"$defs": schema["$defs"], "$ref": f"#/$defs/{name}"})


class FailOn:
    """GPScorer that reports one expression as failed, as a real search can."""

    def __init__(self, inner: GPScorer, fail: str) -> None:
        self.inner, self.fail = inner, fail

    def __call__(self, expr) -> Score:
        if str(expr) == self.fail:
            return Score.failed(expr, "Cholesky failed in every restart (synthetic)")
        return self.inner(expr)


def _weekly(n: int = 600) -> Dataset:
    """Daily-like points with a weekly cycle: too short a period for 60 evenly spaced
    points, so a search of it on them sees a window (prolas.search.view)."""
    rng = np.random.default_rng(2)
    x = np.arange(n, dtype=np.float64)
    y = 0.01 * x + np.sin(2 * np.pi * x / 7.0) + 0.3 * rng.normal(size=n)
    return Dataset.from_arrays(x, y, name="weekly", path="weekly.csv")


def _series(n: int = 48) -> Dataset:
    rng = np.random.default_rng(1)
    x = np.linspace(1960.0, 1972.0, n)
    y = np.where(x < 1966.0, 0.3 * (x - 1960.0), np.sin(2 * np.pi * x)) + 0.05 * rng.normal(size=n)
    return Dataset.from_arrays(x, y, name="planted", path="planted.csv")


@pytest.fixture(scope="module")
def documents() -> dict[str, dict]:
    """One result.json document of every kind prolas writes, from real fits."""
    full = _series()
    train, test = extrapolation_split(full)
    scorer = FailOn(GPScorer(train, FitConfig(restarts=2)), "RQ")
    ev = Evaluator(scorer, budget=6)
    ev.evaluate_many([parse(e) for e in ("SE", "LIN", "RQ", "LIN + PER", "CP(LIN, PER)")])
    result = ev.result("manual", 0)
    best = result.best.fit
    docs = {
        "ok, failed and test": report.result_to_json(
            train,
            result,
            best,
            method="manual",
            seed=0,
            budget=6,
            test=report.test_metrics(best, train, test),
            periods=periods_block(train, best),
        )
    }
    # the change-point model alone, as the best of a one-entry search
    change = next(e for e in result.history if e.expression == "CP(LIN, PER)")
    assert change.ok, change.error
    alone = SearchResult("manual", 0, 6, [replace(change, index=1)], 1.0)
    docs["change operators"] = report.result_to_json(
        train, alone, change.fit, method="manual", seed=0, budget=6
    )
    # a search on a subsample: the history scores it, best is the refit on all points
    sub = full.spaced_indices(20)
    small = full.take(sub, "planted (20 of 48)")
    ev = Evaluator(GPScorer(small, FitConfig(restarts=1)), budget=3)
    ev.evaluate_many([parse("SE"), parse("LIN")])
    res = ev.result("manual", 0)
    refit = fit_gp(res.best.expression, full, restarts=1, init=res.best.fit)
    docs["subsample"] = report.result_to_json(
        full, res, refit, method="manual", seed=0, budget=3, searched_indices=list(sub)
    )
    # a long series searched on its view: evenly spaced points and a window for the
    # weekly period they cannot resolve; the model (no periodic term) leaves it out
    weekly = _weekly()
    view = build_view(weekly, 60, 2)
    ev = Evaluator(GPScorer(view.dataset, FitConfig(restarts=1)), budget=3)
    ev.evaluate_many([parse("SE"), parse("LIN")])
    res = ev.result("manual", 0)
    refit = fit_gp(res.best.expression, weekly, restarts=1, init=res.best.fit)
    docs["view"] = report.result_to_json(
        weekly,
        res,
        refit,
        method="manual",
        seed=0,
        budget=3,
        searched_on=view.to_json(),
        periods=periods_block(weekly, refit, hidden=[p.period for p in view.hidden]),
    )
    ev = Evaluator(TableScorer({}, fail=frozenset({"SE", "PER"})), budget=2)
    ev.evaluate_many([parse("SE"), parse("PER")])
    docs["every fit failed"] = report.result_to_json(
        full, ev.result("x", 0), None, method="x", seed=0, budget=2
    )
    return docs


def test_schema_file_is_valid_draft_2020_12(schema) -> None:
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert report.result_schema() == schema


def test_schema_ships_as_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["prolas"]
    assert any(fnmatch(RESULT_SCHEMA_FILE, p) for p in patterns), patterns
    assert "jsonschema" in " ".join(config["project"]["dependencies"])


@pytest.mark.parametrize(
    "kind", ["ok, failed and test", "change operators", "subsample", "view", "every fit failed"]
)
def test_every_kind_of_document_validates(documents, schema, kind) -> None:
    doc = json.loads(json.dumps(documents[kind], allow_nan=False))  # as written to disk
    jsonschema.validate(doc, schema, cls=Draft202012Validator)
    report.validate_result_json(doc)


def test_documents_cover_every_block(documents) -> None:
    """The fixture is what the kinds say: a failed entry, a test block, change factors,
    a subsample, a null best."""
    statuses = {h["status"] for h in documents["ok, failed and test"]["history"]}
    assert statuses == {"ok", "failed"} and "test" in documents["ok, failed and test"]
    kinds = {
        f["kernel"] for t in documents["change operators"]["best"]["terms"] for f in t["factors"]
    }
    assert {"CP_BEFORE", "CP_AFTER", "LIN", "PER"} <= kinds
    assert documents["subsample"]["search"]["searched_on"]["n"] == 20
    assert documents["every fit failed"]["best"] is None
    view = documents["view"]["search"]["searched_on"]
    assert view["evenly_spaced"] == 45 and len(view["windows"]) == 1  # 3/4 of M beside it
    assert view["windows"][0]["period"] == pytest.approx(7.0, rel=0.01)
    assert view["spacing"] == 1.0 and view["n"] > 60  # the window needs more than M/4
    periods = documents["view"]["periods"]
    assert periods["unexplained"] == [periods["significant"][0]["period"]]
    assert periods["significant"][0]["explained_by"] is None


def test_committed_benchmark_histories_validate(schema) -> None:
    """The history entries of committed benchmark cells (one file per study directory,
    written by every version of prolas that made them) fit the ``history_entry`` block."""
    files = subprocess.run(
        ["git", "ls-files", "benchmarks/results/*.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    first: dict[str, dict] = {}
    for name in files:
        folder = name.rsplit("/", 1)[0]
        if folder in first:
            continue
        doc = json.loads((ROOT / name).read_text())
        if isinstance(doc, dict) and isinstance(doc.get("history"), list):
            first[folder] = doc
    assert len(first) >= 10, sorted(first)
    entry = definition(schema, "history_entry")
    for folder, doc in first.items():
        for h in doc["history"]:
            errors = [e.message for e in entry.iter_errors(h)]
            assert not errors, (folder, h, errors)


# --- the schema alone rejects broken documents ------------------------------------------


def _pop_key(d: dict) -> None:
    del d["search"]["budget"]


def _wrong_type(d: dict) -> None:
    d["data"]["n"] = "48"


def _unknown_status(d: dict) -> None:
    d["history"][0]["status"] = "skipped"


def _failed_with_bic(d: dict) -> None:
    entry = next(h for h in d["history"] if h["status"] == "failed")
    entry["bic"] = -3.0


def _ok_without_bic(d: dict) -> None:
    entry = next(h for h in d["history"] if h["status"] == "ok")
    entry["bic"] = None


def _unknown_kernel(d: dict) -> None:
    d["best"]["terms"][0]["factors"][0]["kernel"] = "MATERN"


def _extra_shape_param(d: dict) -> None:
    factor = next(f for t in d["best"]["terms"] for f in t["factors"] if f["kernel"] == "LIN")
    factor["period"] = 1.0  # a LIN factor has only an offset


def _negative_lengthscale(d: dict) -> None:
    factor = next(f for t in d["best"]["terms"] for f in t["factors"] if f["kernel"] == "PER")
    factor["period"] = -1.0


def _extra_history_key(d: dict) -> None:
    d["history"][0]["note"] = "x"


def _window_without_period(d: dict) -> None:
    del d["search"]["searched_on"]["windows"][0]["period"]


def _period_not_a_number(d: dict) -> None:
    d["periods"]["significant"][0]["share"] = "18 %"


OK_FAILED, CHANGE = "ok, failed and test", "change operators"
SCHEMA_BROKEN = [
    ("missing key", OK_FAILED, _pop_key, "search: missing key 'budget'"),
    ("wrong type", OK_FAILED, _wrong_type, "data.n: expected an integer"),
    ("unknown status", OK_FAILED, _unknown_status, 'history[0].status: expected "ok" or "failed"'),
    ("failed with a bic", OK_FAILED, _failed_with_bic, "a failed entry must have bic null"),
    ("ok without a bic", OK_FAILED, _ok_without_bic, "an ok entry needs a finite bic"),
    ("extra history key", OK_FAILED, _extra_history_key, "history[0]: unexpected key 'note'"),
    ("unknown kernel", CHANGE, _unknown_kernel, "factors[0].kernel: expected"),
    ("extra shape parameter", CHANGE, _extra_shape_param, "unexpected key 'period'"),
    ("negative period", CHANGE, _negative_lengthscale, ".period: expected a number > 0"),
    ("window without its period", "view", _window_without_period, "missing key 'period'"),
    ("share not a number", "view", _period_not_a_number, "share: expected a number"),
]


@pytest.mark.parametrize(
    "name, kind, change, message", SCHEMA_BROKEN, ids=[b[0] for b in SCHEMA_BROKEN]
)
def test_schema_rejects_broken_documents(documents, schema, name, kind, change, message) -> None:
    """The schema alone rejects the document, and the validator says where and why."""
    doc = copy.deepcopy(documents[kind])
    jsonschema.validate(doc, schema, cls=Draft202012Validator)  # valid before
    change(doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema, cls=Draft202012Validator)
    with pytest.raises(ValueError, match="result.json") as info:
        report.validate_result_json(doc)
    assert message in str(info.value)


def test_validator_checks_what_the_periods_and_the_view_must_agree_on(documents) -> None:
    """Beyond the schema: the unexplained periods are exactly the fundamentals no term
    explains, and the searched points are the evenly spaced ones and the windows'."""
    doc = copy.deepcopy(documents["view"])
    doc["periods"]["unexplained"] = []
    with pytest.raises(ValueError, match=r"periods\.unexplained: must list exactly"):
        report.validate_result_json(doc)
    doc = copy.deepcopy(documents["view"])
    doc["search"]["searched_on"]["windows"] = []
    with pytest.raises(ValueError, match=r"searched_on\.evenly_spaced: .* do not make"):
        report.validate_result_json(doc)
    doc = copy.deepcopy(documents["view"])
    w = doc["search"]["searched_on"]["windows"][0]
    w["x_start"], w["x_end"] = w["x_end"], w["x_start"]
    with pytest.raises(ValueError, match=r"windows\[0\]: a window ends before it starts"):
        report.validate_result_json(doc)


def test_non_finite_number_is_named(documents) -> None:
    doc = copy.deepcopy(documents["ok, failed and test"])
    doc["best"]["terms"][0]["variance"] = math.inf
    with pytest.raises(ValueError, match=r"best\.terms\[0\]\.variance: not a finite number"):
        report.validate_result_json(doc)


def test_result_schema_is_a_copy(documents) -> None:
    mine = report.result_schema()
    mine["$defs"]["history_entry"]["properties"]["status"]["enum"].append("skipped")
    doc = copy.deepcopy(documents["ok, failed and test"])
    doc["history"][0]["status"] = "skipped"
    with pytest.raises(ValueError, match="status"):
        report.validate_result_json(doc)


# --- the schema names exactly the fields the code writes -----------------------------------


def test_history_entry_block_is_history_keys(schema) -> None:
    block = schema["$defs"]["history_entry"]
    # every entry has HISTORY_KEYS; a repaired one also names what it was repaired from
    assert tuple(block["properties"]) == (*HISTORY_KEYS, "repaired_from")
    assert tuple(block["required"]) == HISTORY_KEYS
    repaired = Evaluation(3, "C + PER", "ok", 1.0, 5.0, 5, 0.1, None, repaired_from="PER")
    assert set(repaired.to_json()) == set(block["properties"])


def test_blocks_match_what_the_code_writes(documents, schema) -> None:
    doc = documents["ok, failed and test"]
    defs = schema["$defs"]
    assert list(schema["properties"]) == list(doc)  # every block, the optional ones too
    for block in ("data", "search", "best", "test"):
        assert list(defs[block]["properties"]) == list(doc[block]), block
        assert set(defs[block]["required"]) == set(doc[block]), block
    for kind in ("subsample", "view"):
        searched_on = documents[kind]["search"]["searched_on"]
        assert list(defs["searched_on"]["properties"]) == list(searched_on), kind
        assert set(defs["searched_on"]["required"]) == set(searched_on), kind
    view = documents["view"]
    assert list(defs["window"]["properties"]) == list(view["search"]["searched_on"]["windows"][0])
    assert list(defs["periods"]["properties"]) == list(view["periods"])
    assert set(defs["periods"]["required"]) == set(view["periods"])
    assert list(defs["period"]["properties"]) == list(view["periods"]["significant"][0])
    assert set(defs["period"]["required"]) == set(view["periods"]["significant"][0])


def test_factor_blocks_are_the_kernels_shape_parameters(schema) -> None:
    defs = schema["$defs"]
    kinds = [*BASE_KERNELS, *CHANGE_FACTORS]
    assert set(defs["factor"]["properties"]["kernel"]["enum"]) == set(kinds)
    factor = definition(schema, "factor")
    for kind in kinds:
        shape = factor_shape_params(kind)
        valid = {"kernel": kind, **{p: 0.5 for p in shape}}
        assert not list(factor.iter_errors(valid)), kind
        for p in shape:  # each shape parameter is required
            assert list(factor.iter_errors({k: v for k, v in valid.items() if k != p})), (kind, p)
        assert list(factor.iter_errors({**valid, "extra": 1.0})), kind
