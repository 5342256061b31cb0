"""The report on models with white noise (``WN``) and the centred periodic (``PERC``):
the words, the components, result.json against its schema, a forecast's band.

The fits are built from given hyperparameters (``fit_from_params``), so every number the
words say can be checked by hand.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import jsonschema
import numpy as np
import pytest
from conftest import ROOT, fit_from_params
from jsonschema import Draft202012Validator

from prolas import report
from prolas.data import Dataset
from prolas.expr import parse
from prolas.gp import FitConfig, GPScorer, decompose
from prolas.records import SearchResult
from prolas.report.schema import RESULT_SCHEMA_FILE
from prolas.report.words import describe_fit
from prolas.search.evaluator import Evaluator

pytestmark = pytest.mark.filterwarnings("ignore:.*duplicate x value")


def _years(n: int = 41, seed: int = 0) -> Dataset:
    x = np.linspace(1960.0, 1980.0, n)
    y = 0.2 * (x - 1960.0) + np.random.default_rng(seed).standard_normal(n)
    return Dataset.from_arrays(x, y, name="years", path="years.csv")


def _lin(c: float) -> dict:
    return {"kernel": "LIN", "offset": c}


def test_noise_growing_linearly_is_said_with_its_standard_deviation() -> None:
    ds = _years()
    v = 0.01  # standardised y^2 per year^2
    fit = fit_from_params(
        "LIN + LIN*WN",
        [
            {"variance": 0.002, "factors": [_lin(1955.0)]},
            {"variance": v, "factors": [_lin(1962.0), {"kernel": "WN"}]},
        ],
        ds.n,
        noise=0.02,
    )
    sentences = describe_fit(fit, ds)
    noise = next(s for s in sentences if s.startswith("Noise"))
    assert "standard deviation grows linearly away from x = 1962.0 (LIN*WN)" in noise
    sd_first = math.sqrt(v) * 2.0 * ds.y_std  # |1960 - 1962| = 2 years
    sd_last = math.sqrt(v) * 18.0 * ds.y_std
    assert f"standard deviation {sd_first:.3g} at the first input and {sd_last:.3g}" in noise
    assert "lowest" in noise and "1962.0" in noise  # the offset is inside the data
    assert "of the fitted mean's variance" not in noise  # noise has no share of the mean
    trend = next(s for s in sentences if s.startswith("A linear trend"))
    assert "100.0% of the fitted mean's variance" in trend
    assert sentences[-1].startswith("Observation noise")


def test_white_noise_inside_a_change_window_is_said_as_a_noisier_stretch() -> None:
    ds = _years()
    window = {"start": 1973.0, "end": 1978.0, "width": 0.05}
    fit = fit_from_params(
        "CW(C, WN) + LIN",
        [
            {"variance": 0.3, "factors": [{"kernel": "CW_OUTSIDE", **window}]},
            {"variance": 0.5, "factors": [{"kernel": "CW_INSIDE", **window}, {"kernel": "WN"}]},
            {"variance": 0.002, "factors": [_lin(1955.0)]},
        ],
        ds.n,
    )
    sentences = describe_fit(fit, ds)
    noisier = next(s for s in sentences if s.startswith("The series is noisier"))
    assert noisier.startswith("The series is noisier inside the change-window ~1973.0-1978.0")
    assert f"up to {math.sqrt(0.5) * ds.y_std:.3g}" in noisier
    change = sentences[0]
    assert "extra noise replaces a constant offset" in change and "1973.0" in change


def test_a_noisier_start_before_a_change_point() -> None:
    ds = _years()
    cp = {"location": 1970.0, "width": 0.1}
    fit = fit_from_params(
        "CP(WN, C) + LIN",
        [
            {"variance": 0.4, "factors": [{"kernel": "CP_BEFORE", **cp}, {"kernel": "WN"}]},
            {"variance": 0.3, "factors": [{"kernel": "CP_AFTER", **cp}]},
            {"variance": 0.002, "factors": [_lin(1955.0)]},
        ],
        ds.n,
    )
    sentences = describe_fit(fit, ds)
    assert any(
        s.startswith("The series is noisier before the change-point at ~1970.0") for s in sentences
    )
    assert "extra noise gives way to a constant offset" in sentences[0]


def test_the_centred_periodic_is_said_as_a_periodic_without_its_own_offset() -> None:
    ds = _years()
    fit = fit_from_params(
        "LIN + PERC",
        [
            {"variance": 0.002, "factors": [_lin(1955.0)]},
            {"variance": 0.5, "factors": [{"kernel": "PERC", "lengthscale": 0.8, "period": 1.0}]},
        ],
        ds.n,
    )
    words = " ".join(describe_fit(fit, ds))
    assert "A periodic component with period 1.00 year (12.0 months), shape lengthscale 0.80" in (
        words
    )
    assert "without its own offset (it averages to zero over a period)" in words


def test_the_white_noise_model_is_said_as_noise_only() -> None:
    ds = _years()
    fit = fit_from_params("WN", [{"variance": 0.5, "factors": [{"kernel": "WN"}]}], ds.n, 0.5)
    (sentence,) = describe_fit(fit, ds)
    assert "White noise around the mean" in sentence
    assert f"{math.sqrt(1.0) * ds.y_std:.3g}" in sentence


def test_components_of_a_noise_term_are_its_noise_band() -> None:
    ds = _years()
    fit = fit_from_params(
        "LIN + LIN*WN",
        [
            {"variance": 0.002, "factors": [_lin(1955.0)]},
            {"variance": 0.01, "factors": [_lin(1962.0), {"kernel": "WN"}]},
        ],
        ds.n,
    )
    xs = np.array([1965.0, 1990.0])
    (_, _, _), (label, mean, var) = decompose(fit, ds, xs)
    assert label == "LIN*WN"
    np.testing.assert_array_equal(mean, 0.0)
    np.testing.assert_allclose(var, 0.01 * (xs - 1962.0) ** 2 * ds.y_std**2, rtol=1e-12)
    fig = report.components_figure(fit, ds)
    titles = [ax.get_title() for ax in fig.axes]
    assert any("noise: ± 2 sd of what it adds" in t for t in titles)
    assert any("100.0% of the fitted variance" in t for t in titles)


def test_result_json_with_white_noise_and_centred_periodic_validates(tmp_path) -> None:
    rng = np.random.default_rng(3)
    x = np.linspace(0.0, 8.0, 60)
    y = 0.5 * x + np.sin(2 * np.pi * x / 1.5) + 0.2 * x * rng.standard_normal(60)
    ds = Dataset.from_arrays(x, y, name="noisy", path="noisy.csv")
    ev = Evaluator(GPScorer(ds, FitConfig(restarts=2)), budget=4)
    ev.evaluate_many([parse(e) for e in ("LIN + LIN*WN + PERC", "CP(WN, LIN)", "WN")])
    result = ev.result("manual", 0)
    assert all(e.ok for e in result.history), [e.error for e in result.history]
    schema = json.loads((ROOT / "prolas" / RESULT_SCHEMA_FILE).read_text())
    for entry in result.history:  # each model as the best of a one-entry search
        alone = SearchResult("manual", 0, 4, [replace(entry, index=1)], 1.0)
        doc = report.result_to_json(ds, alone, entry.fit, method="manual", seed=0, budget=4)
        doc = json.loads(json.dumps(doc, allow_nan=False))
        jsonschema.validate(doc, schema, cls=Draft202012Validator)
        report.validate_result_json(doc)
        kernels = {f["kernel"] for t in doc["best"]["terms"] for f in t["factors"]}
        assert "WN" in kernels
        assert ("PERC" in kernels) == ("PERC" in entry.expression)
    best = result.best
    doc = report.result_to_json(ds, result, best.fit, method="manual", seed=0, budget=4)
    report.validate_result_json(doc)
    paths = report.write_report(tmp_path / "out", ds, result, best.fit, doc)
    assert any(p.name == "components.png" for p in paths)
    # a broken WN factor (a parameter it does not have) is refused by the schema
    bad = json.loads(json.dumps(doc, allow_nan=False))
    for term in bad["best"]["terms"]:
        for f in term["factors"]:
            if f["kernel"] == "WN":
                f["lengthscale"] = 1.0
    if bad != doc:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema, cls=Draft202012Validator)
