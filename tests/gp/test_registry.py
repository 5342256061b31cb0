"""The kernel registry (prolas.kernels): every entry obeys the same laws in every back end.

For every base kernel and change factor, and a Matérn-5/2 written here the way
docs/adding-a-kernel.md says (to show that a kernel added to the registry reaches every
back end with no other code):

* its Gram matrix is symmetric and positive semi-definite;
* its gradient factors match central finite differences, for every parameter;
* its views agree on the same parameters: the exact fit's NumPy Gram matrix, the
  GPyTorch module (in x's units), SGPR's torch forms, to 1e-12 relative;
* its parameters' units round-trip between scaled and natural values;

and so do sums, products and change operators built from them (GramModel, the GPyTorch
covariance and the SGPR kernel, the likelihood's gradient, the SGPR bound's gradient).
The registry's starting heuristics reproduce the exact fit's random restarts bit for bit.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from prolas.data import Dataset
from prolas.encoding import distance_features
from prolas.expr import parse
from prolas.gp import (
    DTYPE,
    FitResult,
    dense_covariance,
    fit_gp,
    natural_covar_module,
    theta_to_natural,
)
from prolas.gp.gram import GramModel
from prolas.gp.kernels import KERNEL_MODULES
from prolas.gp.scalable import _problem, refit_sgpr
from prolas.gp.starts import (
    candidate_breaks,
    candidate_periods,
    candidate_windows,
    change_locations,
    initial_thetas,
    parameter_streams,
    window_ends,
    window_starts,
)
from prolas.kernels import (
    BASE_KERNELS,
    CHANGE_FACTORS,
    CHANGE_OPERATORS,
    OPERATORS,
    TRANSITIONS,
    factor,
    is_noise_term,
    kernel_costs,
)
from prolas.kernels.se import LENGTHSCALE
from prolas.kernels.spec import (
    DENSE,
    LENGTH,
    LOWRANK,
    MULTIPLY,
    ONE,
    POSITION,
    ROLES,
    SGPR_NOISE,
    SGPR_ROLES,
    SMOOTH,
    VECTOR,
    GramGrid,
    Kernel,
    Stationary,
)
from prolas.report.words import describe_fit

# the inputs below repeat one value on purpose (k(0) on and off the diagonal)
pytestmark = pytest.mark.filterwarnings("ignore:.*duplicate x value")


class Matern52(Stationary):
    """Matérn-5/2, ``(1 + a + a^2/3) exp(-a)`` with ``a = sqrt(5) |d| / l``: the example
    of docs/adding-a-kernel.md, written only as ``log_k`` and ``dlog_k``."""

    name = "MAT52"
    params = (LENGTHSCALE,)
    formula = "(1 + sqrt(5) |d| / l + 5 d^2 / (3 l^2)) exp(-sqrt(5) |d| / l)"
    description = "rough smooth function"
    role = SMOOTH
    ot_costs = {"SE": 0.3, "RQ": 0.4}

    def log_k(self, d2, v, xp):
        a = xp.sqrt(5.0 * d2) / v[0]
        return xp.log1p(a + a * a / 3.0) - a

    def dlog_k(self, d2, v, xp):
        a = xp.sqrt(5.0 * d2) / v[0]
        return [a * a * (1.0 + a) / (3.0 + 3.0 * a + a * a)]


@pytest.fixture
def matern(monkeypatch) -> Kernel:
    """Matérn-5/2 in the registry for one test (as one line in prolas/kernels would)."""
    entry = Matern52()
    monkeypatch.setitem(BASE_KERNELS, entry.name, entry)
    return entry


ENTRIES = [*BASE_KERNELS, *TRANSITIONS]
#: the registry's entries and the Matérn example (registered by the ``matern`` fixture)
ALL = [*ENTRIES, "MAT52"]
RANK_ONE = [n for n in ENTRIES if factor(n).sgpr_role == VECTOR]
DENSE_STATIONARY = [n for n in ENTRIES if isinstance(factor(n), Stationary)] + ["MAT52"]

# scaled inputs: irregular, two of them repeated, inside [0, 1]
_T = np.sort(np.concatenate([np.random.default_rng(7).uniform(0, 1, 22), [0.0, 1.0, 0.5, 0.5]]))
X0, SPAN = 1950.0, 12.0


def _entry(name: str, request) -> Kernel:
    if name == "MAT52":
        return request.getfixturevalue("matern")
    return factor(name)


def _value(spec, rng: np.random.Generator) -> float:
    """A parameter value (scaled units) where its factor is well away from its limits."""
    if spec.name == "start":
        return rng.uniform(0.2, 0.4)
    if spec.name == "end":
        return rng.uniform(0.6, 0.8)
    if spec.name == "width":
        return rng.uniform(0.03, 0.2)
    if spec.name == "period":
        return rng.uniform(0.15, 0.5)
    if spec.unit == POSITION:
        return rng.uniform(0.1, 0.9)
    if spec.unit == LENGTH:
        return rng.uniform(0.1, 0.6)
    return rng.uniform(0.5, 2.5)


def _values(kernel: Kernel, rng: np.random.Generator) -> list[float]:
    return [_value(spec, rng) for spec in kernel.params]


def _theta(kernel: Kernel, values: list[float]) -> list[float]:
    return [math.log(v) if p.log else v for p, v in zip(kernel.params, values)]


def _dense(M) -> np.ndarray:
    """A derivative factor as a matrix: the fit contracts some without forming them
    (``prolas.kernels.spec``: ``ScaledDerivative``, ``MarginalDerivative`` ...)."""
    return M if isinstance(M, np.ndarray) else M.dense()


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


# --- one factor -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_gram_is_symmetric_and_positive_semidefinite(name, request) -> None:
    kernel = _entry(name, request)
    grid = GramGrid.of(_T)
    for seed in range(3):
        th = _theta(kernel, _values(kernel, np.random.default_rng(seed)))
        k, _ = kernel.gram(grid, th, grad=False)
        assert k.shape == (_T.size, _T.size) and np.all(np.isfinite(k))
        np.testing.assert_allclose(k, k.T, rtol=0, atol=1e-15 * np.abs(k).max())
        eig = np.linalg.eigvalsh(0.5 * (k + k.T))
        assert eig.min() >= -1e-10 * max(eig.max(), 1e-300)


@pytest.mark.parametrize("name", ALL)
def test_gradient_factors_match_finite_differences(name, request) -> None:
    kernel = _entry(name, request)
    grid = GramGrid.of(_T)
    th = _theta(kernel, _values(kernel, np.random.default_rng(1)))
    k, derivs = kernel.gram(grid, th, grad=True)
    assert len(derivs) == len(kernel.params)
    h = 1e-6
    for q, (M, relative) in enumerate(derivs):
        up, down = list(th), list(th)
        up[q] += h
        down[q] -= h
        fd = (kernel.gram(grid, up, False)[0] - kernel.gram(grid, down, False)[0]) / (2 * h)
        M = _dense(M)
        analytic = k * M if relative else M
        scale = max(np.abs(fd).max(), 1.0)
        assert np.abs(analytic - fd).max() <= 1e-6 * scale, (name, kernel.params[q].name)


def _sgpr_matrix(kernel: Kernel, values: list[float], th: list[float]) -> list[torch.Tensor]:
    """The kernel on the scaled inputs through each of its SGPR views."""
    t = torch.tensor(_T, dtype=DTYPE)
    v = [torch.tensor(x, dtype=DTYPE) for x in values]
    d2 = (t[:, None] - t[None, :]) ** 2
    role = kernel.sgpr_role
    if role == ONE:
        return [torch.ones_like(d2)]
    if role == VECTOR:
        s = kernel.vector(t, v)
        out = [torch.outer(s, s)]
        if kernel.vector_relative:
            s2, _ = kernel.vector_and_m(t, values)
            out.append(torch.outer(s2, s2))
        return out
    if role == LOWRANK:
        outs = []
        for lefts, rights, c in (kernel.sgpr_lowrank(t, t, v), kernel.sgpr_lowrank_theta(t, t, th)):
            outs.append(torch.exp(torch.stack(lefts, 1) @ torch.stack(rights, 0) - c))
        return outs
    if role == MULTIPLY:
        return [kernel.sgpr_value(t, t, v), kernel.sgpr_value_theta(t, t, th)]
    if role == SGPR_NOISE:
        return []  # no SGPR view: the SGPR model refuses it (test_sgpr_refuses_white_noise)
    assert role == DENSE
    g, coef = kernel.sgpr_log_into(d2, th, lambda name: torch.empty_like(d2))
    return [torch.exp(kernel.sgpr_log(d2, v)), torch.exp(coef * (d2 if g is None else g))]


@pytest.mark.parametrize("name", ALL)
def test_numpy_gpytorch_and_sgpr_views_agree(name, request) -> None:
    kernel = _entry(name, request)
    rng = np.random.default_rng(3)
    values = _values(kernel, rng)
    th = _theta(kernel, values)
    k, _ = kernel.gram(GramGrid.of(_T), th, grad=False)
    # GPyTorch, in x's units: a factor in x's units carries span^power
    module = KERNEL_MODULES[name]().to(DTYPE)
    for spec, v in zip(kernel.params, values):
        module.set_param(spec.name, spec.to_natural(v, X0, SPAN))
    x = torch.tensor(X0 + SPAN * _T, dtype=DTYPE).reshape(-1, 1)
    with torch.no_grad():
        natural = module.forward(x, x).numpy() / SPAN**kernel.variance_power
        diag = module.forward(x, x, diag=True).numpy() / SPAN**kernel.variance_power
    assert _rel(natural, k) < 1e-12
    assert _rel(diag, np.diag(k)) < 1e-12
    with torch.no_grad():
        for view in _sgpr_matrix(kernel, values, th):
            assert _rel(view.numpy(), k) < 1e-12


@pytest.mark.parametrize("name", RANK_ONE)
def test_rank_one_derivatives_match_finite_differences(name, request) -> None:
    """SGPR's rank-one views: ``m = (ds/dθ)/s`` of a change factor, LIN's constant slopes."""
    kernel = _entry(name, request)
    t = torch.tensor(_T, dtype=DTYPE)
    values = _values(kernel, np.random.default_rng(4))
    th = _theta(kernel, values)
    h = 1e-6

    def s_at(theta_q: list[float]) -> torch.Tensor:
        v = [math.exp(x) if p.log else x for p, x in zip(kernel.params, theta_q)]
        return kernel.vector(t, v)

    s = s_at(th)
    ms = kernel.vector_and_m(t, values)[1] if kernel.vector_relative else None
    for q in range(len(kernel.params)):
        up, down = list(th), list(th)
        up[q] += h
        down[q] -= h
        fd = (s_at(up) - s_at(down)) / (2 * h)
        analytic = s * ms[q] if ms is not None else torch.full_like(s, kernel.vector_slopes[q])
        assert float((analytic - fd).abs().max()) <= 1e-6 * max(float(fd.abs().max()), 1.0)


@pytest.mark.parametrize("name", DENSE_STATIONARY)
def test_stationary_formula_gives_the_same_kernel_as_its_views(name, request) -> None:
    """A dense stationary kernel's ``log_k``/``dlog_k`` (what a new kernel writes) and the
    views derived from them agree with the views the shipped kernels spell out."""
    kernel = _entry(name, request)
    grid = GramGrid.of(_T)
    th = _theta(kernel, _values(kernel, np.random.default_rng(5)))
    k, derivs = kernel.gram(grid, th, grad=True)
    k0, derivs0 = Stationary.gram(kernel, grid, th, grad=True)
    assert _rel(k0, k) < 1e-12
    for (m, _), (m0, _) in zip(derivs, derivs0):
        assert _rel(k * _dense(m0), k * _dense(m)) < 1e-10
    assert float(k.diagonal().min()) == pytest.approx(1.0, abs=1e-15)  # k(0) = 1


@pytest.mark.parametrize("name", ALL)
def test_stationary_kernels_depend_on_the_difference_only(name, request) -> None:
    kernel = _entry(name, request)
    th = _theta(kernel, _values(kernel, np.random.default_rng(6)))
    k, _ = kernel.gram(GramGrid.of(_T), th, grad=False)
    shifted, _ = kernel.gram(GramGrid.of(_T + 0.37), th, grad=False)
    assert (_rel(shifted, k) < 1e-12) == kernel.stationary


@pytest.mark.parametrize("name", ALL)
def test_units_round_trip_and_boxes_hold_the_r_d_values(name, request) -> None:
    kernel = _entry(name, request)
    for spec in kernel.params:
        for v in (0.013, 0.5, 2.75):
            natural = spec.to_natural(v, X0, SPAN)
            assert spec.from_natural(natural, X0, SPAN) == pytest.approx(v, rel=1e-14)
        lo, hi = spec.box(period_floor=0.02, lengthscale_floor=0.01)
        assert lo < hi
        rd = math.log(spec.rd) if spec.log else spec.rd
        assert lo <= rd <= hi, (name, spec.name)
        if spec.floor is not None:  # a data floor raises the lower bound
            assert spec.box(0.3, 0.3)[0] >= math.log(0.3) - 1e-15


def test_every_entry_declares_what_the_back_ends_read() -> None:
    roles = set(SGPR_ROLES)
    for name in ENTRIES:
        k = factor(name)
        assert k.name == name and k.formula and k.description and k.role in ROLES
        assert k.sgpr_role in roles
        assert len(set(k.shape_params)) == len(k.params)
        if k.sgpr_role == VECTOR and not k.vector_relative:
            assert len(k.vector_slopes) == len(k.params)
    # the change operators and their factors agree
    for op, (shape, sides) in CHANGE_OPERATORS.items():
        assert OPERATORS[op].shape_params == shape
        for side in sides:
            assert CHANGE_FACTORS[side] == op and TRANSITIONS[side].shape_params == shape
    # OT label costs: every pair a kernel declares is between base kernels, in [0, 1]
    costs = kernel_costs()
    assert all(set(pair) <= set(BASE_KERNELS) and 0 < c <= 1 for pair, c in costs.items())


# --- sums, products and change operators -----------------------------------------------

_PAIRS = [f"{a}*{b}" for a, b in itertools.combinations_with_replacement(sorted(BASE_KERNELS), 2)]
EXPRESSIONS = [
    *_PAIRS,
    "C + LIN + PER + RQ + SE",
    "CP(LIN*PER, SE) + RQ",
    "CW(RQ, C) + LIN*LIN",
    "CP(CW(SE, PER), LIN*RQ)",
    "CP(LIN*WN, C) + PERC*SE",
    "CW(LIN*PERC, WN) + LIN*LIN*WN",
    "CP(PERC*PERC, LIN*PERC*RQ)",
]


def _has_noise(expr: str) -> bool:
    return any(is_noise_term(t) for t in parse(expr).terms)


def _scaled_model(expr: str, seed: int = 0):
    """``(dataset, GramModel, theta, fit)``: ``expr`` at well-conditioned values."""
    x = X0 + SPAN * _T
    y = np.sin(2 * np.pi * _T * 3) + _T
    ds = Dataset.from_arrays(x, y)
    t = (ds.x - ds.x[0]) / ds.span
    model = GramModel(parse(expr), t, 2.0 * ds.spacing / ds.span)
    rng = np.random.default_rng(seed)
    theta = np.empty(model.size)
    for k, p in enumerate(model.params):
        if p.name == "variance":
            theta[k] = math.log(rng.uniform(0.3, 1.5))
        elif p.name == "noise":
            theta[k] = math.log(0.05)
        else:
            spec = (OPERATORS[p.kernel] if p.group >= 0 else factor(p.kernel)).param(p.name)
            v = _value(spec, rng)
            theta[k] = math.log(v) if spec.log else v
    terms, noise = theta_to_natural(model, theta, float(ds.x[0]), ds.span)
    fit = FitResult(expr, "ok", ds.n, parse(expr).n_params, 0.0, 0.0, terms, noise)
    return ds, model, theta, fit


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_expressions_agree_across_back_ends_and_are_psd(expr) -> None:
    ds, model, theta, fit = _scaled_model(expr)
    K = model.covariance(theta, noise=False)
    eig = np.linalg.eigvalsh(K)
    assert np.allclose(K, K.T, rtol=0, atol=1e-14 * np.abs(K).max())
    assert eig.min() >= -1e-10 * eig.max()
    x = torch.tensor(ds.x, dtype=DTYPE).reshape(-1, 1)
    with torch.no_grad():
        gpy = dense_covariance(natural_covar_module(fit), x, x).numpy()
    assert _rel(gpy, K) < 1e-12
    if _has_noise(expr):  # SGPR refuses white noise (test_sgpr_refuses_white_noise)
        return
    problem, th = _problem(fit, ds, ds.n)
    np.testing.assert_allclose(th, theta, rtol=0, atol=1e-12)
    t = torch.tensor(model.t, dtype=DTYPE)
    with torch.no_grad():
        sgpr = problem.model.cross(torch.tensor(th, dtype=DTYPE), t, t).numpy()
        diag = problem.model.diag(torch.tensor(th, dtype=DTYPE), t).numpy()
    assert _rel(sgpr, K) < 1e-12
    assert _rel(diag, np.diag(K)) < 1e-12


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_likelihood_and_bound_gradients_match_finite_differences(expr) -> None:
    ds, model, theta, fit = _scaled_model(expr, seed=1)
    y = ds.y_standardised
    _, g = model.log_likelihood(theta, y)
    h = 1e-6
    fd = np.array(
        [
            (
                model.log_likelihood(theta + e, y, False)[0]
                - model.log_likelihood(theta - e, y, False)[0]
            )
            / (2 * h)
            for e in h * np.eye(theta.size)
        ]
    )
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-5)
    if _has_noise(expr):
        return
    # the SGPR bound with fewer inducing inputs than points: its closed-form gradient
    problem, th = _problem(fit, ds, 12, cache_bytes=0.0)
    _, gs = problem.value_and_grad(th)
    h = 1e-5
    fds = np.array(
        [
            (problem.value_and_grad(th + e, False)[0] - problem.value_and_grad(th - e, False)[0])
            / (2 * h)
            for e in h * np.eye(th.size)
        ]
    )
    np.testing.assert_allclose(gs, fds, rtol=1e-4, atol=1e-4)


# --- a kernel added to the registry reaches every back end ---------------------------------


@pytest.mark.parametrize("expr", ["MAT52", "LIN*MAT52 + PER", "CP(MAT52, C)"])
def test_an_added_kernel_works_in_every_back_end(matern, expr) -> None:
    ds, model, theta, fit = _scaled_model(expr, seed=2)
    K = model.covariance(theta, noise=False)
    x = torch.tensor(ds.x, dtype=DTYPE).reshape(-1, 1)
    with torch.no_grad():
        assert _rel(dense_covariance(natural_covar_module(fit), x, x).numpy(), K) < 1e-12
    problem, th = _problem(fit, ds, ds.n)
    t = torch.tensor(model.t, dtype=DTYPE)
    with torch.no_grad():
        assert _rel(problem.model.cross(torch.tensor(th, dtype=DTYPE), t, t).numpy(), K) < 1e-12
    # its SGPR gradient comes from dlog_k (elementwise): against finite differences
    problem, th = _problem(fit, ds, 12, cache_bytes=0.0)
    _, gs = problem.value_and_grad(th)
    h = 1e-5
    fds = [
        (problem.value_and_grad(th + e, False)[0] - problem.value_and_grad(th - e, False)[0])
        / (2 * h)
        for e in h * np.eye(th.size)
    ]
    np.testing.assert_allclose(gs, fds, rtol=1e-4, atol=1e-4)


def test_an_added_kernel_is_fitted_refitted_and_described(matern) -> None:
    x = np.linspace(0.0, 10.0, 40)
    noise = 0.1 * np.random.default_rng(0).standard_normal(x.size)
    ds = Dataset.from_arrays(x, np.sin(x) + 0.1 * x + noise)
    fit = fit_gp("MAT52 + LIN", ds, restarts=2)
    assert fit.ok and fit.terms[1].factors[0].kernel == "MAT52"
    assert fit.n_params == 5 and math.isfinite(fit.log_likelihood)
    refit = refit_sgpr(fit, ds, inducing=ds.n, max_iter=0)  # M = N: the exact value
    assert refit.log_likelihood == pytest.approx(fit.log_likelihood, rel=1e-6, abs=1e-6)
    assert any("smooth" in s for s in describe_fit(fit, ds))
    rd = distance_features([parse("MAT52"), parse("SE")], x, ("SE", "MAT52"))
    assert rd[0, 1] == pytest.approx(0.0, abs=1e-6) and rd[1, 0] == pytest.approx(0.0, abs=1e-6)
    assert rd[0, 0] > 0.0


# --- starting heuristics ------------------------------------------------------------------


class _Draws:
    """The random draws of :func:`prolas.gp.starts.initial_thetas`, for the registry's rules."""

    def __init__(self, model, y, floor, rng, R):
        self.rng, self.R = rng, R
        self.periods = candidate_periods(model.t, y, floor)
        names = {p.name for p in model.params}
        self.breaks = candidate_breaks(model.t, y) if "location" in names else None
        self.windows = candidate_windows(model.t, y) if "start" in names else None
        self.shortest_lengthscale = min(0.02, max(floor, 1e-3))
        self.floor = floor
        self.per_index: dict[tuple[int, int], int] = {}
        self.starts: dict[int, np.ndarray] = {}

    def uniform(self, lo, hi):
        u = (self.rng.permutation(self.R) + self.rng.uniform(0.0, 1.0, self.R)) / self.R
        return lo + (hi - lo) * u

    def log_uniform(self, lo, hi):
        return self.uniform(math.log(lo), math.log(hi))

    def periodogram(self, p):
        which = self.per_index.setdefault((p.term, p.factor), len(self.per_index))
        idx = (np.arange(self.R) // 2 + which) % len(self.periods)
        if which == 0:
            idx[0::2] = 0
        per = self.periods[idx] * np.exp(self.rng.normal(0, 0.03, self.R))
        return np.log(np.maximum(per, self.floor * 1.01))

    def break_locations(self, p, spread):
        self.starts[p.group] = change_locations(self.breaks, p.group, self.rng, spread)
        return self.starts[p.group]

    def window_starts(self, p, spread):
        self.starts[p.group] = window_starts(self.windows, p.group, self.rng, spread)
        return self.starts[p.group]

    def window_ends(self, p, durations):
        return window_ends(self.windows, p.group, self.rng, self.starts[p.group], durations)


@pytest.mark.parametrize(
    "expr",
    [
        "LIN*PER*SE + LIN*SE",
        "PER*PER*RQ + C",
        "CP(LIN, PER*SE)",
        "CW(SE, C) + CP(RQ, LIN)",
        "LIN*WN + PER*PERC*SE",
    ],
)
def test_start_rules_reproduce_the_random_restarts(expr) -> None:
    """Each parameter's :class:`~prolas.kernels.spec.Start` rule, drawn in ``theta``'s
    order, gives the exact fit's restarts bit for bit (so the fit can read them)."""
    x = np.linspace(0.0, 1.0, 60)
    y = np.sin(2 * np.pi * 5 * x) + np.where(x > 0.6, x, 0.0)
    model = GramModel(parse(expr), x, 2.0 / 59, 0.0)
    floor, R = 2.0 / 59, 7
    expected = initial_thetas(model, y, floor, (11,), R)
    streams = parameter_streams(model, (11,))
    draws = _Draws(model, y, floor, streams[0], R)
    theta = np.empty((R, model.size))
    for k, p in enumerate(model.params):
        draws.rng = streams[k]  # each parameter draws from its own stream
        if p.name == "variance":
            theta[:, k] = draws.log_uniform(0.3, 1.5) - math.log(len(model.terms))
        elif p.name == "noise":
            theta[:, k] = draws.log_uniform(1e-3, 0.2)
        else:
            spec = (OPERATORS[p.kernel] if p.group >= 0 else factor(p.kernel)).param(p.name)
            theta[:, k] = spec.start.draw(draws, p)
    theta = np.vstack([model.clip(row) for row in theta])
    np.testing.assert_array_equal(theta, expected)


def test_the_result_schema_lists_every_entry_with_exactly_its_parameters() -> None:
    """result.json's schema is a published file; it must say what the registry says."""
    from prolas.report.schema import result_schema

    defs = result_schema()["$defs"]
    assert set(defs["factor"]["properties"]["kernel"]["enum"]) == set(ENTRIES)
    for name in ENTRIES:
        kernel = factor(name)
        block = defs[f"factor_{CHANGE_FACTORS.get(name, name)}"]
        assert set(block["required"]) == {"kernel", *kernel.shape_params}
        for spec in kernel.params:
            positive = block["properties"][spec.name].get("exclusiveMinimum") == 0
            assert positive == spec.log, (name, spec.name)


def test_rq_near_its_alpha_bound_keeps_its_precision_in_x_units() -> None:
    """At alpha's upper bound RQ reproduces an SE (a nested sub-model's embedding puts it
    there). ``(1 + u)^(-alpha)`` rounds away most of u ~ 1e-10 and the power multiplies the
    error by alpha: ~1e-8 relative in k, enough to make ``17 000 K + 1.6e-4 I`` indefinite
    (the natural-unit recompute then failed and a fit fell back to a worse optimum, below a
    model it contains: mauna, benchmarks/results/fit_reliability/). The GPyTorch view must
    match ``exp(-alpha log1p(u))`` in float64 and keep that matrix positive definite."""
    ls, alpha = 2.0, 1e8
    x = np.linspace(0.0, 30.0, 400)
    u = (x[:, None] - x[None, :]) ** 2 / (2.0 * alpha * ls**2)
    reference = np.exp(-alpha * np.log1p(u))
    module = KERNEL_MODULES["RQ"]().to(DTYPE)
    module.set_param("lengthscale", ls)
    module.set_param("alpha", alpha)
    xt = torch.tensor(x, dtype=DTYPE).reshape(-1, 1)
    with torch.no_grad():
        k = module.forward(xt, xt).numpy()
    assert _rel(k, reference) < 1e-12
    np.linalg.cholesky(1.7e4 * k + 1.6e-4 * np.eye(x.size))  # raises if not PD
