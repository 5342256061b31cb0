"""benchmarks/scripts/nested_fits.py: the nesting rules it relies on, and its counting."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import load_script

from prolas.data import load_csv
from prolas.expr import parse
from prolas.gp import FitConfig, fit_gp
from prolas.gp.fit import FactorFit, TermFit, _natural_log_likelihood

nested = load_script("nested_fits")
ROOT = Path(__file__).resolve().parents[2]


def test_one_step_sub_models_drop_an_item_or_a_stationary_factor_never_lin() -> None:
    assert nested.nested_submodels(parse("LIN*PER*SE + RQ")) == {
        "LIN*PER*SE",
        "RQ",
        "LIN*SE + RQ",
        "LIN*PER + RQ",
    }
    assert nested.nested_submodels(parse("CW(PER + SE, C)")) == {"CW(PER, C)", "CW(SE, C)"}
    assert nested.nested_submodels(parse("LIN")) == set()


@pytest.mark.parametrize(
    ("sub", "extra"),
    [
        ("PER*SE", "item"),  # C + PER*SE nests PER*SE: the C term's variance at its bound
        ("PER", "factor"),  # PER*SE nests PER: SE's lengthscale at its bound (1e3 spans)
    ],
)
def test_the_nesting_limit_reproduces_the_sub_models_log_likelihood(sub: str, extra: str) -> None:
    ds = load_csv(ROOT / "data" / "airline_train.csv")
    fit = fit_gp(sub, ds, FitConfig(restarts=2))
    if extra == "item":
        tiny = TermFit(1e-8, (FactorFit("C", {}),))
        bigger = replace(fit, expression="C + PER*SE", terms=(tiny, *fit.terms))
    else:
        (term,) = fit.terms
        se = FactorFit("SE", {"lengthscale": 1e3 * ds.span})
        bigger = replace(
            fit, expression="PER*SE", terms=(TermFit(term.variance, (*term.factors, se)),)
        )
    assert _natural_log_likelihood(bigger, ds) == pytest.approx(fit.log_likelihood, abs=1e-3)


def test_shortfalls_count_a_fit_below_its_sub_model_in_the_same_cache_key(tmp_path: Path) -> None:
    def line(key: str, expr: str, ll: float | None) -> str:
        fit = (
            {"status": "ok", "best": {"log_likelihood": ll}}
            if ll is not None
            else {"status": "failed"}
        )
        return json.dumps({"key": key, "expression": expr, "fit": fit})

    cache = tmp_path / "fits.jsonl"
    cache.write_text(
        "\n".join(
            [
                line("a", "PER", -10.0),
                line("a", "C + PER", -50.0),  # 40 nats below its sub-model PER
                line("a", "PER*SE", -9.0),  # above PER: fine
                line("b", "PER", 5.0),  # another key: not compared with key a
                line("b", "PER*SE", 4.5),  # 0.5 below: within a 2-nat tolerance
                line("a", "SE", None),  # failed fits are ignored
            ]
        )
    )
    gaps = nested.shortfalls(nested.best_log_likelihoods(cache))
    assert gaps == {
        ("a", "C + PER"): pytest.approx(40.0),
        ("a", "PER*SE"): pytest.approx(-1.0),
        ("b", "PER*SE"): pytest.approx(0.5),
    }
