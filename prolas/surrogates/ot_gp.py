"""The GP with the optimal-transport kernel of PROLAS's default surrogate, in NumPy.

The model and the objective are those of :func:`prolas.surrogates.model.fit_surrogate`
with an :class:`~prolas.surrogates.ot.OTKernel` (the GPyTorch ``ExactGP`` of structural
BO); this module computes them without GPyTorch's per-call machinery, which was most of
a PROLAS step's surrogate fit. For training expressions with distances ``d_ij``,
``d_bar_ij`` (:class:`~prolas.surrogates.ot.ExpressionRegistry`) and targets ``y``:

.. math::

    y_s = (y - \\bar y) / s_y, \\qquad y_s \\sim N(c \\mathbf 1, K + \\sigma^2 I),
    \\qquad K_{ij} = \\alpha e^{-\\beta d_{ij}} + \\bar\\alpha e^{-\\bar\\beta \\bar d_{ij}},

with ``s_y`` the sample standard deviation (1 if it is 0), ``alpha, beta, alpha_bar,
beta_bar = l + (u - l) sigmoid(raw)`` in ``[l, u] = [1e-4, 1e3]``, ``sigma^2 =
softplus(raw) + sigma_min^2`` (the noise floor, 1e-4 by default) and a free constant
mean ``c``. An indefinite K (smallest eigenvalue ``lambda < -1e-10 max|lambda|``) gets
``-lambda (1 + 1e-8) + 1e-12`` added to its diagonal, as :meth:`OTKernel._repair` does.
The fit maximises the exact marginal log-likelihood per point,

.. math::

    \\frac1n \\log N(y_s \\mid c\\mathbf 1, \\Sigma) = -\\frac1n \\Big[\\tfrac12 r^\\top
    \\Sigma^{-1} r + \\sum_i \\log L_{ii} + \\tfrac n2 \\log 2\\pi\\Big],
    \\quad r = y_s - c\\mathbf 1, \\; \\Sigma = K + \\sigma^2 I = L L^\\top,

by SciPy's L-BFGS-B from given raw values (the previous step's: a warm
start), keeping the best finite state. The posterior of the noise-free f at candidates
with cross-covariances ``k_*`` (the raw kernel, as ``FittedSurrogate.predict(joint=False)``)
and prior variance ``k_** = max_i K_ii``:

.. math::

    \\mu_* = \\bar y + s_y (c + k_*^\\top \\Sigma^{-1} r), \\qquad
    \\sigma_*^2 = s_y^2 \\max(k_{**} - k_*^\\top \\Sigma^{-1} k_*, 10^{-12}).

The Cholesky factor and ``Sigma^{-1} r`` are computed once per fit and reused for every
candidate batch.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from scipy.linalg import lapack, solve_triangular
from scipy.optimize import minimize
from scipy.special import expit

from prolas.errors import NumericsWarning
from prolas.surrogates.ot import ExpressionRegistry

__all__ = ["OTGP", "OT_GP_BOUNDS", "default_raw"]

#: Box of alpha, beta, alpha_bar, beta_bar (as :class:`OTKernel`'s constraints).
OT_GP_BOUNDS: tuple[float, float] = (1e-4, 1e3)
_NOISE_FLOOR = 1e-4
#: Order of the raw hyperparameters.
NAMES: tuple[str, ...] = ("noise", "constant", "alpha", "beta", "alpha_bar", "beta_bar")
_INITIAL = {"noise": 0.1, "constant": 0.0, "alpha": 0.5, "beta": 0.5, "alpha_bar": 0.5}
_INITIAL["beta_bar"] = 5.0
#: The loss L-BFGS-B is given where the objective cannot be computed: its line search
#: backs off (as :func:`prolas.gp.minimise.minimise`).
_PENALTY = 1e10
_TOL = 1e-10  # eigenvalues above -tol * max|lambda| count as non-negative


def default_raw(noise_floor: float = _NOISE_FLOOR) -> torch.Tensor:
    """The raw hyperparameters of a fresh fit: noise 0.1 (the floor plus 0.01 when the
    floor is 0.09 or more), c = 0, alpha = beta = alpha_bar = 0.5, beta_bar = 5
    (:class:`OTKernel`'s and ``fit_surrogate``'s start)."""
    lo, hi = OT_GP_BOUNDS
    excess = max(_INITIAL["noise"] - noise_floor, 0.01)
    noise = torch.tensor(excess, dtype=torch.float64)
    raw = [noise + torch.log(-torch.expm1(-noise)), torch.tensor(0.0, dtype=torch.float64)]
    for name in NAMES[2:]:
        p = torch.tensor((_INITIAL[name] - lo) / (hi - lo), dtype=torch.float64)
        raw.append(torch.log(p) - torch.log(1 - p))
    return torch.stack(raw)


def _unpack(x: np.ndarray, noise_floor: float = _NOISE_FLOOR) -> tuple[float, float, np.ndarray]:
    """``(sigma^2, c, (alpha, beta, alpha_bar, beta_bar))`` from the raw values ``x``."""
    lo, hi = OT_GP_BOUNDS
    return _softplus(float(x[0])) + noise_floor, float(x[1]), expit(x[2:]) * (hi - lo) + lo


def _raw_array(raw: torch.Tensor | np.ndarray) -> np.ndarray:
    """Raw values as a fresh float64 array (a warm start may be a tensor)."""
    if isinstance(raw, torch.Tensor):
        raw = raw.detach().cpu().numpy()
    return np.array(raw, dtype=np.float64)


def _softplus(v: float) -> float:
    """``log(1 + e^v)``, as torch's softplus (``v`` itself above 20)."""
    return v if v > 20.0 else math.log1p(math.exp(v))


def _kernel(theta: np.ndarray, d: np.ndarray, db: np.ndarray) -> np.ndarray:
    return theta[0] * np.exp(-theta[1] * d) + theta[2] * np.exp(-theta[3] * db)


def _repair(k: np.ndarray) -> tuple[np.ndarray, bool]:
    """K with jitter on the diagonal if it is indefinite (:meth:`OTKernel._repair`). A
    K whose Cholesky factorisation succeeds is positive definite to rounding, far inside
    the tolerance, so only a K that fails it needs its eigenvalues."""
    if not len(k) or lapack.dpotrf(k, lower=1, clean=0)[1] == 0:
        return k, False
    evals = np.linalg.eigvalsh(k)
    lam, scale = float(evals[0]), float(np.abs(evals).max())
    if lam >= -_TOL * max(scale, 1e-300):
        return k, False
    return _plus_diagonal(k, -lam * (1.0 + 1e-8) + 1e-12), True


def _cholesky(s: np.ndarray, tries: int, first: float) -> np.ndarray:
    """The lower Cholesky factor of ``s``, adding jitter ``first``, 10x, ... on failure."""
    jitter = 0.0
    for _ in range(tries):
        chol, info = lapack.dpotrf(_plus_diagonal(s, jitter), lower=1, clean=1, overwrite_a=1)
        if info == 0:
            return chol
        jitter = first if jitter == 0.0 else 10 * jitter
    raise np.linalg.LinAlgError(f"not positive definite after jitter {jitter:.1e}")


def _plus_diagonal(k: np.ndarray, v: float) -> np.ndarray:
    """A copy of the square ``k`` with ``v`` added to its diagonal."""
    out = k.copy()
    out.flat[:: len(k) + 1] += v
    return out


class OTGP:
    """An exact GP with the OT kernel, fitted to distinct training expressions
    (module docstring). Build it with :meth:`fit`.

    Attributes:
        raw: the fitted raw hyperparameters (:data:`NAMES` order), for a warm start.
        mll: the marginal log-likelihood of the standardised targets (summed over points).
        repaired: whether the training Gram matrix needed jitter.
        noise_floor: the least noise variance ``sigma_min^2`` (standardised units).
    """

    def __init__(
        self,
        registry: ExpressionRegistry,
        train: list[int],
        y: np.ndarray,
        raw: torch.Tensor | np.ndarray,
        mll: float,
        noise_floor: float = _NOISE_FLOOR,
    ) -> None:
        self.registry = registry
        self.noise_floor = noise_floor
        self.train = list(train)
        x = _raw_array(raw)
        self.raw = torch.from_numpy(x)
        self.mll = mll
        y = np.asarray(y, dtype=np.float64)
        self.y_mean, self.y_std = _standardisation(y)
        ys = (y - self.y_mean) / self.y_std
        self.noise, self.constant, self.theta = _unpack(x, noise_floor)
        d, db = registry.distances(self.train, self.train)
        k, self.repaired = _repair(_kernel(self.theta, d, db))
        self.prior_var = float(k.diagonal().max())
        self._chol = _cholesky(_plus_diagonal(k, self.noise), tries=6, first=1e-8)
        self._weights = lapack.dpotrs(self._chol, ys - self.constant, lower=1)[0]

    @property
    def hyperparameters(self) -> dict[str, float]:
        """Noise, constant mean and the kernel's four values (standardised units)."""
        values = [self.noise, self.constant, *self.theta]
        return {name: float(v) for name, v in zip(NAMES, values)}

    @classmethod
    def fit(
        cls,
        registry: ExpressionRegistry,
        train: list[int],
        y: np.ndarray | list[float],
        init: torch.Tensor | None = None,
        max_iter: int = 50,
        noise_floor: float = _NOISE_FLOOR,
    ) -> OTGP:
        """Fit on distinct registry indices ``train`` with targets ``y`` by L-BFGS-B
        (SciPy, at most ``max_iter`` iterations) from ``init`` (raw values;
        :func:`default_raw` if None), the noise variance at least ``noise_floor``. A
        point whose Gram matrix cannot be factorised, or whose loss is not finite, gets a
        large loss and a zero gradient (the line search backs off; a warning says so if
        it happened); the best finite state is kept."""
        if not noise_floor > 0.0:
            raise ValueError(f"noise_floor must be positive, got {noise_floor}")
        if len(set(train)) != len(train):
            raise ValueError("training expressions must be distinct")
        y = np.asarray(y, dtype=np.float64)
        mean, std = _standardisation(y)
        ys = (y - mean) / std
        d, db = registry.distances(train, train)
        n = len(train)
        start = default_raw(noise_floor) if init is None else init
        best: dict = {"loss": math.inf, "raw": None, "error": None}

        def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
            try:
                loss, grad = _objective(x, d, db, ys, noise_floor)
            except (np.linalg.LinAlgError, ValueError) as exc:  # not positive definite
                best["error"] = exc
                return _PENALTY, np.zeros_like(x)
            if not math.isfinite(loss):
                return _PENALTY, np.zeros_like(x)
            if loss < best["loss"]:
                best["loss"], best["raw"] = loss, x.copy()
            return loss, grad

        # SciPy's L-BFGS-B, as the GP fits: torch.optim's first optimiser in a process
        # imports torch._dynamo (1-3 s, paid by a search's first BO step)
        x0 = _raw_array(start)
        options = {"maxiter": max_iter, "ftol": 1e-12, "gtol": 1e-7, "maxcor": 20}
        minimize(objective, x0, jac=True, method="L-BFGS-B", options=options)
        if best["raw"] is None:
            raise RuntimeError(f"surrogate fit: no finite marginal likelihood ({best['error']})")
        if best["error"] is not None:
            warnings.warn(
                f"surrogate fit: a step was not positive definite ({best['error']})",
                NumericsWarning,
                stacklevel=2,
            )
        return cls(registry, train, y, best["raw"], -best["loss"] * n, noise_floor)

    def predict(self, cands: list[int] | np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior mean and variance of the noise-free f at registry indices
        ``cands``, in the units of the training targets (module docstring)."""
        d, db = self.registry.distances(cands, self.train)
        kst = _kernel(self.theta, d, db)
        mu = self.constant + kst @ self._weights
        v = solve_triangular(self._chol, kst.T, lower=True, check_finite=False)
        var = np.maximum(self.prior_var - (v**2).sum(0), 1e-12)
        mean = torch.from_numpy(mu * self.y_std + self.y_mean)
        return mean, torch.from_numpy(var * self.y_std**2)


def _objective(
    x: np.ndarray,
    d: np.ndarray,
    db: np.ndarray,
    ys: np.ndarray,
    noise_floor: float = _NOISE_FLOOR,
) -> tuple[float, np.ndarray]:
    """Minus the marginal log-likelihood per point (module docstring) and its gradient
    in the raw values ``x``. With ``Sigma = L L^T``, ``a = Sigma^{-1} r`` and ``W =
    Sigma^{-1} - a a^T``: ``d/d theta = tr(W dSigma/d theta) / (2n)`` for the noise
    (``dSigma = I``) and the kernel's values (``dK/d alpha = e^{-beta d}``, ``dK/d beta =
    -alpha d e^{-beta d}``, likewise for the bars; the repair's jitter is a constant, as
    in :meth:`OTKernel._repair`), ``-sum(a) / n`` for c; then the transforms' derivatives
    (``sigmoid`` for softplus, ``(u - l) s (1 - s)`` for the box). A failed factorisation
    raises; a non-finite loss comes back as such. NumPy and LAPACK on ``n x n`` arrays:
    torch's per-operation overhead was most of a call at these sizes (n <= ~100)."""
    n = len(ys)
    noise, c, theta = _unpack(x, noise_floor)
    with np.errstate(over="ignore", invalid="ignore"):
        e1, e2 = np.exp(-theta[1] * d), np.exp(-theta[3] * db)
        k, _ = _repair(theta[0] * e1 + theta[2] * e2)
    chol = _cholesky(_plus_diagonal(k, noise), tries=4, first=1e-8)
    r = ys - c
    a = lapack.dpotrs(chol, r, lower=1)[0]
    quad = float(r @ a)
    logdet = float(np.log(chol.diagonal()).sum())
    loss = (0.5 * quad + logdet + 0.5 * n * math.log(2 * math.pi)) / n
    if not math.isfinite(loss):
        return loss, np.zeros_like(x)
    inv = lapack.dpotri(chol, lower=1)[0]  # the lower triangle of Sigma^{-1}
    w = np.tril(inv) + np.tril(inv, -1).T - np.outer(a, a)
    we1, we2 = w * e1, w * e2
    g_theta = 0.5 * np.array(
        [we1.sum(), -theta[0] * (we1 * d).sum(), we2.sum(), -theta[2] * (we2 * db).sum()]
    )
    lo, hi = OT_GP_BOUNDS
    s = expit(x[2:])
    grad = np.empty(len(x))
    grad[0] = 0.5 * float(w.trace()) * float(expit(x[0]))
    grad[1] = -float(a.sum())
    grad[2:] = g_theta * (hi - lo) * s * (1 - s)
    return loss, grad / n


def _standardisation(y: np.ndarray) -> tuple[float, float]:
    """Mean and sample standard deviation of ``y`` (1 for fewer than two values or no
    spread), as ``fit_surrogate`` standardises."""
    t = torch.as_tensor(y)
    mean = float(t.mean())
    std = float(t.std()) if len(t) > 1 and float(t.std()) > 0 else 1.0
    return mean, std
