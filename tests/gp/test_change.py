"""Change-points, change-windows and the constant kernel (docs/conventions.md).

Laws: the Gram matrices equal a numpy transcription of the convention formulas and are PSD;
a change-point far before (after) the data leaves only B (A); the analytic gradient
matches finite differences; parse/print/canonical round trips; k counts shared shape
parameters once; CKS with the change rules finds a planted change-point.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import fit_from_params

from prolas.data import Dataset
from prolas.expr import CP, CW, LIN, PER, SE, C, parse
from prolas.gp import FitResult, fit_gp, hold_unseen_transitions, natural_covar_module, predict
from prolas.gp.gram import GramModel
from prolas.gp.natural import HELD_SPANS, hold_unseen
from prolas.report import validate_result_json
from prolas.search.evaluator import Evaluator
from prolas.search.greedy import expand, search_cks

# --- a numpy transcription of the formulas in docs/conventions.md --------------------


def _sigmoid(x: np.ndarray, loc: float, width: float) -> np.ndarray:
    with np.errstate(over="ignore"):  # exp(+large) = inf gives the exact limit 0
        return 1.0 / (1.0 + np.exp(-(x - loc) / width))


def _base(kind: str, p: dict, x: np.ndarray) -> np.ndarray:
    d = x[:, None] - x[None, :]
    if kind == "SE":
        return np.exp(-(d**2) / (2 * p["lengthscale"] ** 2))
    if kind == "LIN":
        return np.outer(x - p["offset"], x - p["offset"])
    if kind == "PER":
        return np.exp(-2 * np.sin(np.pi * np.abs(d) / p["period"]) ** 2 / p["lengthscale"] ** 2)
    if kind == "RQ":
        return (1 + d**2 / (2 * p["alpha"] * p["lengthscale"] ** 2)) ** (-p["alpha"])
    if kind == "C":
        return np.ones_like(d)
    if kind in ("CP_BEFORE", "CP_AFTER"):
        s = _sigmoid(x, p["location"], p["width"])
        s = s if kind == "CP_AFTER" else 1 - s
        return np.outer(s, s)
    u = _sigmoid(x, p["start"], p["width"]) * (1 - _sigmoid(x, p["end"], p["width"]))
    u = u if kind == "CW_INSIDE" else 1 - u
    return np.outer(u, u)


def _numpy_covariance(best: dict, x: np.ndarray) -> np.ndarray:
    """K from result.json's ``best.terms`` alone, as an independent checker would."""
    K = np.zeros((x.size, x.size))
    for term in best["terms"]:
        k = term["variance"] * np.ones_like(K)
        for f in term["factors"]:
            k = k * _base(f["kernel"], f, x)
        K += k
    return K


def _fit_of(expr: str, rng: np.random.Generator, x: np.ndarray) -> FitResult:
    """A FitResult with random natural-unit hyperparameters for ``expr``."""
    from prolas.gp import theta_to_natural

    t = (x - x[0]) / (x[-1] - x[0])
    model = GramModel(parse(expr), t, period_floor=0.02)
    lo, hi = np.array(model.bounds).T
    theta = rng.uniform(np.maximum(lo, -2.0), np.minimum(hi, 1.0))
    terms, noise = theta_to_natural(model, theta, float(x[0]), float(x[-1] - x[0]))
    e = parse(expr)
    return FitResult(expr, "ok", x.size, e.n_params, 0.0, 0.0, terms, noise)


CHANGE_EXPRESSIONS = [
    "CP(LIN, PER*SE)",
    "CW(SE, LIN)",
    "CW(C, RQ) + LIN",
    "CP(CP(SE, LIN), PER)",
    "CP(SE + LIN, C)",
    "C",
    "C + PER",
]


@pytest.mark.parametrize("expr", CHANGE_EXPRESSIONS)
def test_gram_equals_design_formulas_and_is_psd(expr: str) -> None:
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(1950.0, 1970.0, 45))
    fit = _fit_of(expr, rng, x)
    best = fit.to_json()
    K_np = _numpy_covariance(best, x)
    module = natural_covar_module(fit)
    xt = torch.tensor(x, dtype=torch.float64).reshape(-1, 1)
    with torch.no_grad():
        K_torch = module(xt, xt).to_dense().numpy()
    np.testing.assert_allclose(K_torch, K_np, rtol=1e-9, atol=1e-9 * np.abs(K_np).max())
    np.testing.assert_allclose(K_np, K_np.T, atol=1e-12 * np.abs(K_np).max())
    assert np.linalg.eigvalsh(K_np).min() > -1e-8 * np.abs(K_np).max()
    # the analytic fit core builds the same matrix in scaled units
    t = (x - x[0]) / (x[-1] - x[0])
    model = GramModel(parse(expr), t, period_floor=0.02)
    from prolas.gp import inherit_theta

    theta = inherit_theta(model, fit, np.zeros(model.size), float(x[0]), float(x[-1] - x[0]))
    K_gram = model.covariance(theta, noise=False)
    np.testing.assert_allclose(K_gram, K_np, rtol=1e-6, atol=1e-8 * np.abs(K_np).max())


@pytest.mark.parametrize("expr", CHANGE_EXPRESSIONS)
def test_gradient_matches_finite_differences(expr: str) -> None:
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 1, 40))
    y = np.where(t < 0.6, np.sin(15 * t), 2 * t) + 0.1 * rng.standard_normal(40)
    model = GramModel(parse(expr), t, period_floor=0.02)
    theta = np.array([rng.uniform(0.2, 0.8) if not p.log else math.log(0.1) for p in model.params])
    for k, p in enumerate(model.params):
        if p.name in ("variance", "lengthscale", "alpha", "period"):
            theta[k] = rng.uniform(-1.0, 0.5)
        if p.name == "noise":
            theta[k] = math.log(0.05)
    ll, g = model.log_likelihood(theta, y)
    h = 1e-6
    fd = [
        (
            model.log_likelihood(theta + h * e, y, False)[0]
            - model.log_likelihood(theta - h * e, y, False)[0]
        )
        / (2 * h)
        for e in np.eye(model.size)
    ]
    assert math.isfinite(ll)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-5)


def test_change_point_far_before_the_data_is_B_and_far_after_is_A() -> None:
    x = np.linspace(0.0, 10.0, 30)
    se = {"kernel": "SE", "lengthscale": 1.3}
    lin = {"kernel": "LIN", "offset": 2.0}
    K_se = _base("SE", se, x)
    K_lin = _base("LIN", lin, x)
    xt = torch.tensor(x, dtype=torch.float64).reshape(-1, 1)

    def cp(location: float) -> tuple[np.ndarray, np.ndarray]:
        """K of CP(SE, LIN) at ``location``: numpy convention formulas, GPyTorch modules."""
        change = {"location": location, "width": 0.5}
        terms = [
            {"variance": 1.0, "factors": [{"kernel": "CP_BEFORE", **change}, se]},
            {"variance": 1.0, "factors": [{"kernel": "CP_AFTER", **change}, lin]},
        ]
        with torch.no_grad():
            module = natural_covar_module(fit_from_params("CP(SE, LIN)", terms, x.size))
            K_module = module(xt, xt).to_dense().numpy()
        return _numpy_covariance({"terms": terms}, x), K_module

    for K in cp(-1e3):  # CP(SE, LIN): only LIN after a change long before the data
        np.testing.assert_allclose(K, K_lin, atol=1e-12)
    for K in cp(1e3):
        np.testing.assert_allclose(K, K_se, atol=1e-12)


# --- expressions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("CP(SE, LIN) * PER", "CP(PER*SE, LIN*PER)"),
        ("per * cp(se, lin)", "CP(PER*SE, LIN*PER)"),
        ("CW(SE, C) * LIN", "CW(LIN*SE, LIN)"),
        ("C * SE", "SE"),
        ("C * C + SE", "C + SE"),
        ("CP(LIN + SE, PER) + RQ", "CP(LIN + SE, PER) + RQ"),
        ("CP(SE + LIN, PER) + CP(LIN + SE, PER)", "CP(LIN + SE, PER)"),
        ("CW(C, (SE + PER) * LIN)", "CW(C, LIN*PER + LIN*SE)"),
    ],
)
def test_canonical_form_of_change_operators(text: str, canonical: str) -> None:
    e = parse(text)
    assert str(e) == canonical
    assert parse(str(e)) == e and str(parse(str(e))) == str(e)
    assert parse(e.tree_str()) == e


def test_equal_models_print_equally_and_operators_build_the_same_tree() -> None:
    assert CP(SE, LIN) * PER == PER * CP(SE, LIN) == parse("CP(SE*PER, LIN*PER)")
    assert CW(C, SE) != CW(SE, C)
    assert CP(SE, LIN) != CP(LIN, SE)
    assert hash(CP(SE + LIN, PER)) == hash(parse("CP(LIN + SE, PER)"))


def test_n_params_counts_shared_change_parameters_once() -> None:
    # CP: location, width; terms: (v, ls) for SE before, (v, offset) for LIN after; noise
    assert CP(SE, LIN).n_params == 2 + 2 + 2 + 1
    # CW: start, end, width; C outside (v); SE inside (v, ls); noise
    assert CW(C, SE).n_params == 3 + 1 + 2 + 1
    assert parse("CP(LIN + SE, PER)").n_params == 2 + 2 + 2 + 3 + 1
    assert C.n_params == 2
    assert parse("CP(CP(SE, LIN), PER)").n_params == 2 + 2 + 2 + 2 + 3 + 1


@pytest.mark.parametrize(
    "text, message",
    [
        ("CP(SE)", "expected ','"),
        ("CP SE, LIN", "expected '('"),
        ("CW(SE, LIN", "expected ')'"),
        ("XP(SE, LIN)", "unknown kernel 'XP'"),
    ],
)
def test_parse_errors_point_at_the_problem(text: str, message: str) -> None:
    from prolas.errors import ExpressionError

    with pytest.raises(ExpressionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(text)


def test_cks_change_rules_are_neighbours() -> None:
    bases = ("SE", "LIN", "PER", "RQ")
    plain = {str(e) for e in expand(SE, bases)}
    with_change = {str(e) for e in expand(SE, bases, change=True)}
    assert not any("CP" in s or "CW" in s for s in plain)
    for s in ("CP(SE, SE)", "CW(SE, SE)", "CW(SE, C)", "CW(C, SE)", "CP(SE, LIN)", "CP(PER, SE)"):
        assert s in with_change
    # replacements reach inside a change operator
    assert "CP(SE, PER)" in {str(e) for e in expand(parse("CP(SE, LIN)"), bases)}


# --- fitting and search ---------------------------------------------------------------


def _planted(n: int = 150, break_at: float = 1968.0) -> Dataset:
    """A sine with period 1 that turns into a linear trend at ``break_at``."""
    rng = np.random.default_rng(3)
    x = np.linspace(1960.0, 1975.0, n)
    y = np.where(x < break_at, np.sin(2 * np.pi * x), 0.8 * (x - break_at))
    return Dataset.from_arrays(x, y + 0.05 * rng.standard_normal(n))


def test_fit_recovers_a_planted_change_point_and_result_json_validates() -> None:
    ds = _planted()
    fit = fit_gp(parse("CP(PER, LIN)"), ds, restarts=6)
    assert fit.ok, fit.error
    before = fit.terms[0].factors[0]
    assert before.kernel == "CP_BEFORE"
    assert abs(before.params["location"] - 1968.0) < 0.02 * ds.span
    assert fit.bic > fit_gp(parse("LIN + PER"), ds, restarts=6).bic + 50
    # tied values repeat in every term, and result.json's best block validates
    assert fit.terms[1].factors[0].params == before.params
    # an independent numpy log-likelihood from the written terms equals the reported one
    best = fit.to_json()
    K = _numpy_covariance(best, ds.x) + best["noise_variance"] * np.eye(ds.n)
    y = ds.y_standardised
    L = np.linalg.cholesky(K)
    a = np.linalg.solve(L, y)
    ll = -0.5 * a @ a - np.log(np.diag(L)).sum() - 0.5 * ds.n * math.log(2 * math.pi)
    assert ll == pytest.approx(fit.log_likelihood, abs=1e-6)


@pytest.mark.slow
def test_cks_with_change_rules_finds_a_planted_change_point() -> None:
    from prolas.gp import GPScorer

    ds = _planted()
    ev = Evaluator(GPScorer(ds), budget=30)
    result = search_cks(ev, depth=3, change=True)
    best = parse(result.best.expression)
    assert best.has_change, result.best.expression
    fit = result.best.fit
    locations = [
        f.params["location"] for t in fit.terms for f in t.factors if f.kernel.startswith("CP")
    ]
    assert any(abs(loc - 1968.0) < 0.03 * ds.span for loc in locations), locations


def test_result_json_with_change_operators_validates(tmp_path) -> None:
    from prolas.cli import main

    ds = _planted(80)
    path = tmp_path / "planted.csv"
    path.write_text("x,y\n" + "\n".join(f"{float(a)!r},{float(b)!r}" for a, b in zip(ds.x, ds.y)))
    code = main(
        ["fit", str(path), "--search", "cks", "--change", "--budget", "14", "--restarts", "3"]
        + ["--out", str(tmp_path / "out")]
    )
    assert code == 0
    import json

    doc = json.loads((tmp_path / "out" / "result.json").read_text())
    validate_result_json(doc)
    assert doc["best"]["expression"].startswith("CP("), doc["best"]["expression"]
    kinds = [f["kernel"] for t in doc["best"]["terms"] for f in t["factors"]]
    assert "CP_BEFORE" in kinds and "CP_AFTER" in kinds
    # a tampered tied value is caught by the validator
    for t in doc["best"]["terms"]:
        for f in t["factors"]:
            if f["kernel"] == "CP_AFTER":
                f["location"] += 1.0
    with pytest.raises(ValueError, match="tied"):
        validate_result_json(doc)


def test_cold_fit_finds_a_planted_change_window() -> None:
    rng = np.random.default_rng(0)
    x = np.linspace(1960.0, 1975.0, 150)
    inside = (x > 1965.0) & (x < 1970.0)
    ds = Dataset.from_arrays(
        x, np.where(inside, np.sin(2 * np.pi * x), 0.0) + 0.05 * rng.normal(size=150)
    )
    fit = fit_gp(parse("CW(C, PER)"), ds, restarts=8)
    assert fit.ok, fit.error
    window = fit.terms[0].factors[0].params
    assert abs(window["start"] - 1965.0) < 0.02 * ds.span
    assert abs(window["end"] - 1970.0) < 0.02 * ds.span


def test_warm_start_keeps_each_change_operator_apart() -> None:
    """Two change-points with the same kind start where the parent's two were."""
    from prolas.gp import inherit_theta, theta_to_natural

    ds = _planted()
    parent = fit_gp(parse("CP(CP(PER, LIN), SE)"), ds, restarts=4)
    assert parent.ok
    t = (ds.x - ds.x[0]) / ds.span
    child = GramModel(parse("CP(CP(PER, LIN), SE) + C"), t, period_floor=0.01)
    theta = inherit_theta(child, parent, np.zeros(child.size), float(ds.x[0]), float(ds.span))
    terms, _ = theta_to_natural(child, theta, float(ds.x[0]), float(ds.span))
    got = {
        tuple(sorted(f.params.items())) for term in terms for f in term.factors if "CP" in f.kernel
    }
    want = {
        tuple(sorted(f.params.items()))
        for term in parent.terms
        for f in term.factors
        if "CP" in f.kernel
    }
    assert len(want) == 2
    for a, b in zip(sorted(got), sorted(want)):
        np.testing.assert_allclose([v for _, v in a], [v for _, v in b], rtol=1e-9)


# --- transitions the data cannot see ---------------------------------------------------


@pytest.mark.parametrize(
    "shape, moved",
    [
        ({"location": 1.0 + 25 * 0.01, "width": 0.01}, {"location": 1.0 + HELD_SPANS}),
        ({"location": -25 * 0.01, "width": 0.01}, {"location": -HELD_SPANS}),
        ({"location": 1.0 + 5 * 0.01, "width": 0.01}, {}),  # the data see its onset
        ({"location": 2.0, "width": 0.5}, {}),  # a slow change under way in the data
        ({"start": 0.4, "end": 1.0 + 30 * 0.02, "width": 0.02}, {"end": 1.0 + HELD_SPANS}),
        ({"start": -1.0, "end": 0.6, "width": 0.01}, {"start": -HELD_SPANS}),
        (
            {"start": 3.0, "end": 4.0, "width": 0.01},
            {"start": 1 + HELD_SPANS, "end": 1 + HELD_SPANS},
        ),
        ({"start": 0.2, "end": 0.6, "width": 0.01}, {}),
        ({"location": 1.0 + 5 * HELD_SPANS, "width": 0.01}, {}),  # already further out
    ],
)
def test_hold_unseen_moves_exactly_the_transitions_the_data_cannot_see(shape, moved) -> None:
    held = hold_unseen(shape)
    assert held == {**shape, **moved}
    assert hold_unseen(held) == held  # idempotent


def _window_open_at_the_end(seed: int = 0) -> Dataset:
    """Nothing, then a sine with period 1 from 1970 to the end of the data (1975)."""
    rng = np.random.default_rng(seed)
    x = np.linspace(1960.0, 1975.0, 150)
    y = np.where(x > 1970.0, np.sin(2 * np.pi * x), 0.0) + 0.05 * rng.normal(size=150)
    return Dataset.from_arrays(x, y)


def test_a_window_the_data_never_see_close_stays_open_in_forecasts() -> None:
    ds = _window_open_at_the_end()
    fit = fit_gp(parse("CW(C, PER)"), ds, restarts=8)
    assert fit.ok, fit.error
    window = fit.terms[0].factors[0].params
    assert abs(window["start"] - 1970.0) < 0.02 * ds.span
    # the optimiser cannot place the end (the data never see it): it is held off
    assert window["end"] >= ds.x[-1] + HELD_SPANS * ds.span
    # the written terms still give the reported log-likelihood (docs/conventions.md formulas)
    best = fit.to_json()
    K = _numpy_covariance(best, ds.x) + best["noise_variance"] * np.eye(ds.n)
    L = np.linalg.cholesky(K)
    a = np.linalg.solve(L, ds.y_standardised)
    ll = -0.5 * a @ a - np.log(np.diag(L)).sum() - 0.5 * ds.n * math.log(2 * math.pi)
    assert ll == pytest.approx(fit.log_likelihood, abs=1e-6)
    # forecasts continue the sine the data end in
    x_new = np.linspace(1975.1, 1977.0, 40)
    mean, _ = predict(fit, ds, x_new)
    assert np.sqrt(np.mean((mean - np.sin(2 * np.pi * x_new)) ** 2)) < 0.2


def test_holding_a_drifted_window_end_changes_forecasts_not_the_likelihood() -> None:
    """A fit made before the rule, its window end drifted 40 widths past the data: held,
    it has the same likelihood, and CW(A, B) with its end at infinity is CP(A, B) at its
    start; unheld, the forecast falls back to A after the arbitrary end."""
    ds = _window_open_at_the_end()
    window = {"start": 1970.0, "end": 1975.0 + 40 * 0.02, "width": 0.02}
    per = {"kernel": "PER", "lengthscale": 1.0, "period": 1.0}
    terms = [
        {"variance": 0.01, "factors": [{"kernel": "CW_OUTSIDE", **window}]},
        {"variance": 1.0, "factors": [{"kernel": "CW_INSIDE", **window}, per]},
    ]
    drifted = fit_from_params("CW(C, PER)", terms, ds.n)
    held = hold_unseen_transitions(drifted, ds)
    assert held is not drifted and hold_unseen_transitions(held, ds) == held
    assert held.terms[1].factors[0].params["end"] >= ds.x[-1] + HELD_SPANS * ds.span
    assert held.terms[1].factors[0].params["start"] == window["start"]
    for f in (drifted, held):
        K = _numpy_covariance(f.to_json(), ds.x)
        assert np.all(np.isfinite(K))
    np.testing.assert_allclose(
        _numpy_covariance(held.to_json(), ds.x),
        _numpy_covariance(drifted.to_json(), ds.x),
        atol=1e-12,
    )
    cp = {"location": window["start"], "width": window["width"]}
    as_cp = fit_from_params(
        "CP(C, PER)",
        [
            {"variance": 0.01, "factors": [{"kernel": "CP_BEFORE", **cp}]},
            {"variance": 1.0, "factors": [{"kernel": "CP_AFTER", **cp}, per]},
        ],
        ds.n,
    )
    x_new = np.linspace(1975.1, 1980.0, 50)
    np.testing.assert_allclose(predict(held, ds, x_new)[0], predict(as_cp, ds, x_new)[0], atol=1e-9)
    after = x_new > window["end"] + 0.5
    assert np.abs(predict(drifted, ds, x_new)[0][after] - ds.y_mean).max() < 0.1
    assert np.abs(predict(held, ds, x_new)[0][after] - ds.y_mean).max() > 0.5
