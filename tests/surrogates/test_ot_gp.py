"""The NumPy OT-kernel GP of PROLAS's surrogate (prolas.surrogates.ot_gp) against
the GPyTorch model of fit_surrogate with the same kernel: the same objective, the same
predictions at the same hyperparameters, and the same fitted model."""

from __future__ import annotations

import math
import warnings

import gpytorch
import numpy as np
import pytest
import torch
from conftest import ROOT

from prolas.errors import NumericsWarning
from prolas.grammar import Grammar
from prolas.surrogates.model import (
    ExactSurrogateGP,
    FittedSurrogate,
    StructuralSurrogate,
    dense_numerics,
    fit_surrogate,
)
from prolas.surrogates.ot_gp import NAMES, OT_GP_BOUNDS, OTGP, default_raw

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def data():
    """Distinct change-grammar expressions, a target that depends on their structure,
    and a surrogate whose registry has the training expressions as anchors."""
    rng = np.random.default_rng(7)
    grammar = Grammar.from_file(ROOT / "grammars" / "change.toml")
    exprs = list(dict.fromkeys(str(grammar.sample(rng)) for _ in range(200)))
    train, cands = exprs[:40], exprs[40:160]
    y = np.array([len(e) / 10 + e.count("PER") - 0.5 * e.count("CP") for e in train])
    y = y + 0.1 * rng.standard_normal(len(y))
    surrogate = StructuralSurrogate("ot", grammar)
    registry = surrogate.registry
    registry.anchor(registry.indices(train))
    return surrogate, train, cands, y


def _gpytorch_model(surrogate, train, y, raw: torch.Tensor) -> tuple[FittedSurrogate, float]:
    """fit_surrogate's model at the raw hyperparameters ``raw`` (no optimisation) and its
    marginal log-likelihood per point."""
    x = surrogate.encode_expressions(train)
    kernel = surrogate.new_kernel()
    yt = torch.as_tensor(y)
    mean, std = float(yt.mean()), float(yt.std())
    ys = (yt - mean) / std
    lik = gpytorch.likelihoods.GaussianLikelihood(
        noise_constraint=gpytorch.constraints.GreaterThan(1e-4)
    ).double()
    model = ExactSurrogateGP(x, ys, kernel, lik).double()
    values = dict(zip(NAMES, raw.tolist()))
    lik.noise_covar.raw_noise.data.fill_(values["noise"])
    model.mean_module.raw_constant.data.fill_(values["constant"])
    for name in NAMES[2:]:
        getattr(kernel, f"raw_{name}").data.fill_(values[name])
    model.train()
    with torch.no_grad(), dense_numerics(), warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)  # OTKernel's repair, expected
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)(model(x), ys)
    model.eval()
    return FittedSurrogate(model, mean, std, float(mll) * len(y)), float(mll)


def test_default_start_is_fit_surrogates(data) -> None:
    surrogate, train, _, y = data
    fitted, _ = _gpytorch_model(surrogate, train, y, default_raw())
    kern = fitted.model.covar_module
    assert kern.alpha.item() == pytest.approx(0.5) and kern.beta.item() == pytest.approx(0.5)
    assert kern.alpha_bar.item() == pytest.approx(0.5)
    assert kern.beta_bar.item() == pytest.approx(5.0)
    assert fitted.noise == pytest.approx(0.1)


def test_same_predictions_and_likelihood_at_the_same_hyperparameters(data) -> None:
    """At any hyperparameters (a fresh GPyTorch model loaded with them), the cached
    Cholesky factor gives GPyTorch's marginal likelihood and its predictions (the
    joint=False path) to 1e-10, for candidates in several batches; also where the
    training Gram matrix is indefinite and both add the same jitter."""
    surrogate, train, cands, y = data
    registry = surrogate.registry
    rng = np.random.default_rng(0)
    raws = [default_raw() + torch.as_tensor(rng.normal(0.0, 1.0, len(NAMES))) for _ in range(3)]
    raws.append(_raw(alpha=1.0, beta=0.05, alpha_bar=1.0, beta_bar=0.05))  # indefinite K
    repaired = []
    for raw in raws:
        ours = OTGP(registry, registry.indices(train), y, raw, mll=0.0)
        repaired.append(ours.repaired)
        fitted, mll = _gpytorch_model(surrogate, train, y, raw)
        for batch in (cands[:50], cands[50:]):
            mu, var = fitted.predict(surrogate.encode_expressions(batch), joint=False)
            mu2, var2 = ours.predict(registry.indices(batch))
            np.testing.assert_allclose(mu2.numpy(), mu.numpy(), rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(var2.numpy(), var.numpy(), rtol=1e-9, atol=1e-12)
        loss = _objective(ours, y)
        assert loss == pytest.approx(-mll, rel=1e-10)
    assert repaired == [False, False, False, True]  # both of OTKernel's cases were met


def _raw(**values: float) -> torch.Tensor:
    """Raw hyperparameters with the given kernel values (the rest at the start)."""
    raw = default_raw().clone()
    lo, hi = OT_GP_BOUNDS
    for name, v in values.items():
        p = (v - lo) / (hi - lo)
        raw[NAMES.index(name)] = math.log(p) - math.log(1 - p)
    return raw


def _objective(model: OTGP, y) -> float:
    """The fit's objective at the model's hyperparameters: minus the mean log density
    of the standardised targets under N(c, K + noise I)."""
    ys = (np.asarray(y) - model.y_mean) / model.y_std
    r = ys - model.constant
    chol = model._chol
    quad = float(r @ np.linalg.solve(chol.T, np.linalg.solve(chol, r)))
    logdet = float(np.log(chol.diagonal()).sum())
    n = len(ys)
    return (0.5 * quad + logdet + 0.5 * n * np.log(2 * np.pi)) / n


@pytest.mark.parametrize("noise", [1.0, 0.1])
def test_fit_reaches_fit_surrogates_optimum(data, noise) -> None:
    """From the same start, our fit (SciPy's L-BFGS-B) on the same objective reaches the
    GPyTorch fit's optimum (torch's L-BFGS) or a higher one. With targets whose noise pins
    the hyperparameters down (sd 1) the two reach the same marginal likelihood to 1e-8;
    the optimum is flat along some directions, where the two optimisers stop apart in the
    4th digit of the hyperparameters, so the predictions agree to 1e-3. With nearly
    noiseless targets (sd 0.1) the model has a ridge (a kernel term with beta_bar -> 0 is a
    constant, like the mean) along which torch's L-BFGS stops early: ours is never lower.
    A warm start from our optimum never goes down; where the optimum is well posed it
    stays there. On the ridge the training Gram matrix needs the repair, which switches
    on and off along it, so where a fit stops there depends on the last bits of the
    matrix (measured: our fit stops 0.5 nats below where its warm start then goes)."""
    surrogate, train, cands, _ = data
    registry = surrogate.registry
    rng = np.random.default_rng(7)
    y = np.array([len(e) / 10 + e.count("PER") - 0.5 * e.count("CP") for e in train])
    y = y + noise * rng.standard_normal(len(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        warnings.simplefilter("ignore", gpytorch.utils.warnings.NumericalWarning)
        reference = fit_surrogate(
            surrogate.new_kernel(), surrogate.encode_expressions(train), y, max_iter=200
        )
        ours = OTGP.fit(registry, registry.indices(train), y, max_iter=200)
        again = OTGP.fit(registry, registry.indices(train), y, init=ours.raw, max_iter=200)
    start = _gpytorch_model(surrogate, train, y, default_raw())[0].mll
    assert ours.mll > start + 1.0  # the fit moved far from its start...
    mu, var = reference.predict(surrogate.encode_expressions(cands), joint=False)
    mu2, var2 = ours.predict(registry.indices(cands))
    if noise == 1.0:  # ...to the same optimum
        assert ours.mll == pytest.approx(reference.mll, rel=1e-8)
        np.testing.assert_allclose(mu2.numpy(), mu.numpy(), rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(var2.numpy(), var.numpy(), rtol=2e-3, atol=1e-8)
    else:  # ...to the ridge, never below torch's stop on it (there: 4 nats above it)
        assert ours.mll >= reference.mll - 1e-4 * abs(reference.mll)
    assert again.mll >= ours.mll - 1e-9
    if noise == 1.0:
        assert again.mll <= ours.mll + 1e-5


def test_fit_refuses_repeated_expressions(data) -> None:
    surrogate, train, _, y = data
    idx = surrogate.registry.indices(train)
    with pytest.raises(ValueError, match="distinct"):
        OTGP.fit(surrogate.registry, idx[:3] + idx[:1], y[:4])


def test_objective_gradient_is_autograds(data) -> None:
    """The fit's closed-form gradient equals torch autograd's of the same objective
    (written out independently) to 1e-9, where the Gram matrix is definite and where the
    repair adds jitter (a constant for both)."""
    from prolas.surrogates.ot_gp import _objective

    surrogate, train, _, y = data
    registry = surrogate.registry
    dn, dbn = registry.distances(*[registry.indices(train)] * 2)
    d, db = torch.as_tensor(dn), torch.as_tensor(dbn)
    ysn = (y - y.mean()) / y.std(ddof=1)
    ys = torch.as_tensor(ysn)
    n = len(ys)
    rng = np.random.default_rng(1)
    raws = [default_raw() + torch.as_tensor(rng.normal(0.0, 0.5, len(NAMES))) for _ in range(3)]
    raws.append(_raw(alpha=1.0, beta=0.05, alpha_bar=1.0, beta_bar=0.05))
    for raw in raws:
        loss, grad = _objective(raw.numpy(), dn, dbn, ysn)
        r = raw.clone().requires_grad_(True)
        lo, hi = 1e-4, 1e3
        noise = torch.nn.functional.softplus(r[0]) + 1e-4
        theta = lo + (hi - lo) * torch.sigmoid(r[2:])
        k = theta[0] * torch.exp(-theta[1] * d) + theta[2] * torch.exp(-theta[3] * db)
        lam = torch.linalg.eigvalsh(k.detach())
        if lam[0] < -1e-10 * lam.abs().max():
            k = k + (-lam[0] * (1 + 1e-8) + 1e-12) * torch.eye(n, dtype=k.dtype)
        dist = torch.distributions.MultivariateNormal(r[1].expand(n), k + noise * torch.eye(n))
        reference = -dist.log_prob(ys) / n
        reference.backward()
        assert loss == pytest.approx(reference.detach().item(), rel=1e-8)
        np.testing.assert_allclose(grad, r.grad.numpy(), rtol=1e-6, atol=1e-9)


def test_a_noise_floor_bounds_the_fitted_noise_and_widens_predictions(data) -> None:
    """With nearly noiseless targets the fit takes the least noise it may; a higher
    floor is respected, keeps the objective's gradient exact at that floor, and leaves
    every prediction at least as uncertain (the predictive of a new observation)."""
    from prolas.surrogates.ot_gp import _objective, default_raw

    surrogate, train, cands, _ = data
    registry = surrogate.registry
    idx = registry.indices(train)
    y = np.array([len(e) / 10 + e.count("PER") for e in train])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        tight = OTGP.fit(registry, idx, y, max_iter=100)
        loose = OTGP.fit(registry, idx, y, max_iter=100, noise_floor=0.05)
    assert tight.hyperparameters["noise"] < 1e-3
    assert loose.hyperparameters["noise"] >= 0.05 and loose.noise_floor == 0.05
    _, v1 = tight.predict(registry.indices(cands))
    _, v2 = loose.predict(registry.indices(cands))
    s1 = v1 + tight.noise * tight.y_std**2
    s2 = v2 + loose.noise * loose.y_std**2
    assert bool((s2 >= 0.99 * s1).all())
    # the closed-form gradient at a floor other than the default is autograd's
    d, db = registry.distances(idx, idx)
    ys = (y - y.mean()) / y.std(ddof=1)
    assert torch.isfinite(default_raw(0.05)).all() and torch.isfinite(default_raw(0.2)).all()
    raw = default_raw(0.05).numpy()
    loss, grad = _objective(raw, d, db, ys, 0.05)
    h = 1e-6
    for j in range(len(raw)):
        step = np.zeros_like(raw)
        step[j] = h
        up, _ = _objective(raw + step, d, db, ys, 0.05)
        down, _ = _objective(raw - step, d, db, ys, 0.05)
        assert float(grad[j]) == pytest.approx((up - down) / (2 * h), rel=1e-4, abs=1e-7)
    with pytest.raises(ValueError, match="noise_floor"):
        OTGP.fit(registry, idx, y, noise_floor=0.0)


def test_a_fit_whose_steps_fail_backs_off_and_keeps_its_best_state(data, monkeypatch) -> None:
    """Where the objective cannot be computed (a Gram matrix that will not factorise, a
    non-finite loss) the optimiser is told a large loss and backs off: the fit ends at
    the best finite state it met, says so with a NumericsWarning, and its mll is the
    objective there. If no state was finite, the fit raises (the search then records a
    surrogate failure)."""
    import prolas.surrogates.ot_gp as ot_gp

    surrogate, train, _, y = data
    registry = surrogate.registry
    idx = registry.indices(train)
    real = ot_gp._objective
    calls = {"n": 0}

    def flaky(raw, d, db, ys, noise_floor=ot_gp._NOISE_FLOOR):
        calls["n"] += 1
        if float(raw[0]) < -3.0:  # small noise: "not positive definite"
            raise np.linalg.LinAlgError("not positive definite (test)")
        if calls["n"] % 3 == 0:
            return math.nan, np.zeros_like(raw)
        return real(raw, d, db, ys, noise_floor)

    monkeypatch.setattr(ot_gp, "_objective", flaky)
    # nearly noiseless targets: the fit heads for small noise, where the steps fail
    yt = np.array([len(e) / 10 + e.count("PER") for e in train])
    with pytest.warns(NumericsWarning, match="not positive definite"):
        fit = OTGP.fit(registry, idx, yt, max_iter=100)
    assert float(fit.raw[0]) >= -3.0 and math.isfinite(fit.mll)
    ys = (yt - yt.mean()) / yt.std(ddof=1)
    d, db = registry.distances(idx, idx)
    loss, _ = real(fit.raw.numpy(), d, db, ys)
    assert fit.mll == pytest.approx(-loss * len(idx), rel=1e-12)
    monkeypatch.setattr(ot_gp, "_objective", lambda raw, *a: (math.nan, np.zeros_like(raw)))
    with pytest.raises(RuntimeError, match="no finite marginal likelihood"):
        OTGP.fit(registry, idx, yt)
