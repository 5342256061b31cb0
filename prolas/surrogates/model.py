"""A GP surrogate over grammar sequences: representation + kernel + exact-GP fit + log EI.

:class:`StructuralSurrogate` ties one of the kernels of this package to the tensor
representation it reads (conditional-space rows, or expression indices for the OT
kernel), fits a GPyTorch ``ExactGP`` (constant mean, Gaussian noise, float64) by
maximising the exact marginal likelihood with L-BFGS, and predicts.

Numerics are explicit (they do not depend on what ``import botorch`` set globally):
every fit and prediction runs under :func:`dense_numerics`, i.e. dense Cholesky.

Acquisition: expected improvement for maximisation in log space,

.. math::

    \\log EI(x) = \\log \\sigma(x) + \\log h(z), \\quad z = (\\mu(x) - f^*) / \\sigma(x),
    \\quad h(z) = \\varphi(z) + z \\Phi(z),

with h evaluated as phi(z) (1 - t R(t)), t = -z, R the Mills ratio via ``erfcx``, for
z < 0 (accurate far into the tail, where plain EI underflows to 0).

>>> from prolas.grammar import Grammar
>>> g = Grammar.from_file("small")
>>> s = StructuralSurrogate("hierarchical", g)
>>> seqs = g.sample_sequences(12, __import__("numpy").random.default_rng(0))
>>> fit = s.fit(seqs, [float(len(q)) for q in seqs])
>>> fit.predict(s.encode(seqs[:2]))[0].shape
torch.Size([2])
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Iterator, Sequence

import gpytorch
import linear_operator
import numpy as np
import torch
from gpytorch.constraints import GreaterThan, Interval
from gpytorch.kernels import Kernel, ScaleKernel

from prolas.errors import NumericsWarning
from prolas.expr import Expression
from prolas.grammar import Grammar
from prolas.grammar import Sequence as GSeq
from prolas.surrogates.arc import ArcKernel
from prolas.surrogates.conditional import ConditionalKernel
from prolas.surrogates.hierarchical import HierarchicalKernel
from prolas.surrogates.laplace import LaplaceKernel
from prolas.surrogates.ot import ExpressionRegistry, OTKernel
from prolas.surrogates.space import ConditionalSpace

__all__ = [
    "SURROGATES",
    "StructuralSurrogate",
    "FittedSurrogate",
    "ExactSurrogateGP",
    "dense_numerics",
    "fit_surrogate",
    "log_ei",
]

#: Surrogate names accepted by ``--surrogate``.
SURROGATES: tuple[str, ...] = ("arc", "hierarchical", "conditional", "laplace", "ot")


@contextlib.contextmanager
def dense_numerics(ignore_warnings: bool = False) -> Iterator[None]:
    """Float64-safe GPyTorch settings for the surrogates and the latent BO, whatever
    ``import botorch`` set globally: fast computations off and no size limit on the
    Cholesky factorisation (dense Cholesky at every size). ``ignore_warnings`` also
    silences the warnings raised inside (BoTorch's standardisation and conditioning
    warnings, which the latent BO handles itself).

    :mod:`prolas.gp` computes its likelihood with its own torch Cholesky and is unaffected.
    """
    with contextlib.ExitStack() as stack:
        stack.enter_context(
            gpytorch.settings.fast_computations(
                covar_root_decomposition=False, log_prob=False, solves=False
            )
        )
        stack.enter_context(linear_operator.settings.max_cholesky_size(2**31 - 1))
        if ignore_warnings:
            stack.enter_context(warnings.catch_warnings())
            warnings.simplefilter("ignore")
        yield


class ExactSurrogateGP(gpytorch.models.ExactGP):
    """Constant mean + ``covar`` kernel; standardised targets."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, covar: Kernel, likelihood) -> None:
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = covar

    def forward(self, x: torch.Tensor):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def log_ei(mean: torch.Tensor, var: torch.Tensor, best: float) -> torch.Tensor:
    """log E[max(f - best, 0)] for f ~ N(mean, var), elementwise; stable for z << 0."""
    sigma = var.clamp_min(1e-18).sqrt()
    z = (mean - best) / sigma
    log_phi = -0.5 * z**2 - 0.5 * math.log(2 * math.pi)
    t = (-z).clamp_min(0.0)
    mills = torch.special.erfcx(t / math.sqrt(2.0)) * math.sqrt(math.pi / 2.0)
    tail = log_phi + torch.log1p(-(t * mills).clamp(max=1.0 - 1e-16))
    pos = torch.log(torch.exp(log_phi) + z * torch.special.ndtr(z))
    return torch.log(sigma) + torch.where(z < 0, tail, pos)


class FittedSurrogate:
    """A fitted GP surrogate; predictions in the units of the training targets."""

    def __init__(self, model: ExactSurrogateGP, y_mean: float, y_std: float, mll: float) -> None:
        self.model = model
        self.y_mean = y_mean
        self.y_std = y_std
        self.mll = mll

    def hyperparameters(self) -> dict[str, torch.Tensor]:
        """A copy of the model's state dict (raw hyperparameters), for warm starts."""
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    @property
    def noise(self) -> float:
        return float(self.model.likelihood.noise.item())

    def predict(
        self, x: torch.Tensor, chunk: int = 512, joint: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior mean and variance of f (noise-free), each shape ``n``.

        For the OT kernel, ``joint=True`` repairs one Gram matrix over training and test
        expressions together (O((n + m)^2) distances); ``joint=False`` repairs the
        training Gram matrix only and uses the raw cross-covariances and the training
        diagonal for the test points (O(n m) distances: for ranking large candidate sets).
        """
        m = self.model
        xt, yt = m.train_inputs[0], m.train_targets
        kern = m.covar_module
        c = m.mean_module.constant.detach()
        s2 = m.likelihood.noise.detach().reshape(())
        means, variances = [], []
        with torch.no_grad(), dense_numerics():
            if _is_ot(kern) and not joint:
                ktt = kern.forward(xt, xt)
                it = xt[:, 0].round().long().numpy()
                kst = kern.gram(x[:, 0].round().long().numpy(), it, dtype=ktt.dtype)
                kss = torch.full((len(x),), float(ktt.diagonal().max()), dtype=ktt.dtype)
                return self._condition(ktt, kst, kss, yt, c, s2)
            if _is_ot(kern):
                # one joint Gram matrix (repaired once) so all blocks share one PSD kernel
                joint = kern.forward(torch.cat([xt, x]), torch.cat([xt, x]))
                n = len(xt)
                ktt, kst, kss = joint[:n, :n], joint[n:, :n], torch.diagonal(joint[n:, n:])
                return self._condition(ktt, kst, kss, yt, c, s2)
            ktt = kern.forward(xt, xt)
            for start in range(0, len(x), chunk):
                xs = x[start : start + chunk]
                kst = kern.forward(xs, xt)
                kss = kern.forward(xs, xs, diag=True)
                mu, var = self._condition(ktt, kst, kss, yt, c, s2)
                means.append(mu)
                variances.append(var)
        return torch.cat(means), torch.cat(variances)

    def _condition(self, ktt, kst, kss, yt, c, s2):
        eye = torch.eye(len(yt), dtype=ktt.dtype)
        chol, jitter = None, 0.0
        for _ in range(6):
            chol, info = torch.linalg.cholesky_ex(ktt + (s2 + jitter) * eye)
            if int(info) == 0:
                break
            jitter = max(jitter * 10, 1e-8)
        alpha = torch.cholesky_solve((yt - c).unsqueeze(-1), chol).squeeze(-1)
        mu = c + kst @ alpha
        v = torch.linalg.solve_triangular(chol, kst.transpose(-1, -2), upper=False)
        var = (kss - (v**2).sum(0)).clamp_min(1e-12)
        return mu * self.y_std + self.y_mean, var * self.y_std**2

    def log_ei(self, x: torch.Tensor, best: float, joint: bool = True) -> torch.Tensor:
        mu, var = self.predict(x, joint=joint)
        return log_ei(mu, var, best)


def _is_ot(kern: Kernel) -> bool:
    return isinstance(kern, OTKernel)


class StructuralSurrogate:
    """Factory for one surrogate kind over a grammar's sequences.

    Args:
        name: one of :data:`SURROGATES`.
        grammar: defines the slots.
        features: optional callable ``list of sequences -> n x F array`` of
            always-active continuous features (e.g. r_d); vector kernels only.
        feature_bounds: ``[(l, u)] * F`` for the features.
        kernel_options: keyword arguments for the kernel constructor.
        registry: for ``ot``, an :class:`ExpressionRegistry` to share (its distance
            cache is reused); a new one by default.
    """

    def __init__(
        self,
        name: str,
        grammar: Grammar,
        features: Callable[[list[GSeq]], np.ndarray] | None = None,
        feature_bounds: Sequence[tuple[float, float]] | None = None,
        kernel_options: dict | None = None,
        registry: ExpressionRegistry | None = None,
    ) -> None:
        if name not in SURROGATES:
            raise ValueError(f"unknown surrogate {name!r}; choose from {', '.join(SURROGATES)}")
        self.name = name
        self.grammar = grammar
        self.features = features
        self.kernel_options = dict(kernel_options or {})
        n_feat = len(feature_bounds) if feature_bounds is not None else 0
        if features is not None and feature_bounds is None:
            raise ValueError("feature_bounds are required with features")
        self.space = ConditionalSpace.from_grammar(grammar, n_feat, feature_bounds)
        if name == "ot" and registry is None:
            registry = ExpressionRegistry()
        self.registry = registry if name == "ot" else None

    def encode(self, seqs: Sequence[GSeq]) -> torch.Tensor:
        """``n x 2D`` conditional-space rows, or ``n x 1`` registry indices for ``ot``."""
        seqs = list(seqs)
        if self.registry is not None:
            idx = [self.registry.index(self.grammar.to_expression(s)) for s in seqs]
            return torch.tensor(idx, dtype=torch.float64).reshape(-1, 1)
        feats = self.features(seqs) if self.features is not None else None
        return self.space.encode(seqs, feats)

    def encode_expressions(self, exprs: Sequence[Expression]) -> torch.Tensor:
        """``n x 1`` registry indices (``ot`` only: it needs no sequence)."""
        if self.registry is None:
            raise ValueError("only the ot surrogate reads expressions directly")
        return torch.tensor(self.registry.indices(exprs), dtype=torch.float64).reshape(-1, 1)

    def new_kernel(self) -> Kernel:
        """A fresh kernel with default hyperparameters (float64)."""
        opts = self.kernel_options
        if self.name == "ot":
            return OTKernel(self.registry, **opts).double()
        inner = {
            "arc": ArcKernel,
            "hierarchical": HierarchicalKernel,
            "conditional": ConditionalKernel,
            "laplace": LaplaceKernel,
        }[self.name](self.space, **opts)
        return ScaleKernel(inner, outputscale_constraint=Interval(1e-3, 1e2)).double()

    def fit(
        self,
        seqs: Sequence[GSeq],
        y: Sequence[float],
        max_iter: int = 100,
        warm_start: FittedSurrogate | None = None,
    ) -> FittedSurrogate:
        """Fit on (sequences, targets); ``warm_start`` copies a previous fit's hyperparameters."""
        init = warm_start.hyperparameters() if warm_start is not None else None
        return fit_surrogate(self.new_kernel(), self.encode(seqs), y, max_iter=max_iter, init=init)


def fit_surrogate(
    kernel: Kernel,
    x: torch.Tensor,
    y: Sequence[float] | torch.Tensor,
    max_iter: int = 100,
    init: dict[str, torch.Tensor] | None = None,
) -> FittedSurrogate:
    """Fit an exact GP with ``kernel`` on standardised ``y`` by L-BFGS on the exact MLL.

    Deterministic: fixed initial hyperparameters (the kernel's defaults, noise 0.1),
    or ``init`` (a state dict from :meth:`FittedSurrogate.hyperparameters`). If the
    optimiser produces a non-finite loss the best finite state is restored.
    """
    y = torch.as_tensor(np.asarray(y, dtype=np.float64))
    y_mean = float(y.mean())
    y_std = float(y.std()) if len(y) > 1 and float(y.std()) > 0 else 1.0
    ys = (y - y_mean) / y_std
    lik = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=GreaterThan(1e-4)).double()
    lik.noise = 0.1
    model = ExactSurrogateGP(x, ys, kernel, lik).double()
    if init is not None:
        model.load_state_dict(init)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    model.train()
    lik.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe")
    record: dict = {"loss": math.inf, "state": None}

    def closure():
        opt.zero_grad()
        with dense_numerics():
            loss = -mll(model(x), ys)
        value = loss.item()
        if math.isfinite(value):
            if value < record["loss"]:
                record["loss"] = value
                record["state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
            loss.backward()
        return loss

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gpytorch.utils.warnings.NumericalWarning)
        try:
            opt.step(closure)
        except (RuntimeError, ValueError) as exc:  # NotPSDError and friends
            warnings.warn(f"surrogate fit stopped early: {exc}", NumericsWarning, stacklevel=2)
    loss = record["loss"]
    if record["state"] is not None:
        model.load_state_dict(record["state"])
    model.eval()
    lik.eval()
    return FittedSurrogate(
        model, y_mean, y_std, -loss * len(y) if math.isfinite(loss) else -math.inf
    )
