"""What a GP fit returns: :class:`FitResult` (natural units) and the BIC.

A fit's hyperparameters are reported in x's own units and for standardised y
(docs/conventions.md): one variance per product term (:class:`TermFit`), the shape
parameters of each factor (:class:`FactorFit`) and the Gaussian noise variance. The
``best`` block of result.json is :meth:`FitResult.to_json`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prolas.expr import Expression, parse
from prolas.records import Score

if TYPE_CHECKING:  # pragma: no cover
    from prolas.data import Dataset

__all__ = ["FactorFit", "TermFit", "FitResult", "bic"]


def bic(log_likelihood: float, n_params: int, n: int) -> float:
    """``BIC = log_likelihood - k/2 ln N`` (docs/conventions.md; higher is better)."""
    return float(log_likelihood - 0.5 * n_params * math.log(n))


@dataclass(frozen=True)
class FactorFit:
    """A fitted factor: kernel name and its shape parameters in x's own units."""

    kernel: str
    params: dict[str, float]

    def to_json(self) -> dict:
        return {"kernel": self.kernel, **{k: float(v) for k, v in self.params.items()}}


@dataclass(frozen=True)
class TermFit:
    """A fitted product term: its variance (for standardised y) and its factors."""

    variance: float
    factors: tuple[FactorFit, ...]

    @property
    def label(self) -> str:
        return "*".join(f.kernel for f in self.factors)

    def to_json(self) -> dict:
        return {"variance": float(self.variance), "factors": [f.to_json() for f in self.factors]}


@dataclass(frozen=True)
class FitResult:
    """Outcome of fitting one expression (``status`` is ``"ok"`` or ``"failed"``)."""

    expression: str
    status: str
    n: int
    n_params: int
    log_likelihood: float | None = None
    bic: float | None = None
    terms: tuple[TermFit, ...] = ()
    noise_variance: float | None = None
    seconds: float = 0.0
    error: str | None = None
    restarts: int = 0
    restart_log_likelihoods: tuple[float, ...] = field(default=(), repr=False)
    #: ``None`` when ``log_likelihood`` is the exact log marginal likelihood; otherwise
    #: the name of the approximation it comes from (e.g. ``"sgpr-512"``: the collapsed
    #: variational lower bound with 512 inducing points, :mod:`prolas.gp.scalable`).
    approximation: str | None = None
    #: The value every period was held at instead of fitted, in x's units
    #: (:attr:`prolas.gp.FitConfig.season`); 0 when the periods were fitted. A refit of
    #: the model (the forecast band's, :func:`prolas.report.forecast.band_scale`) keeps it.
    season: float = 0.0
    #: The data the model is conditioned on, when known (a search's best and top models
    #: carry it): :func:`prolas.gp.predict` and :func:`prolas.gp.decompose` use it when
    #: no dataset is passed. Not part of result.json, of equality or of the repr.
    dataset: Dataset | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def failed(
        cls, expression: str, n: int, n_params: int, error: str, seconds: float, **extra
    ) -> FitResult:
        """A failed fit: no numbers, the reason in ``error``."""
        return cls(expression, "failed", n, n_params, seconds=seconds, error=error, **extra)

    @property
    def expr(self) -> Expression:
        return parse(self.expression)

    def to_json(self) -> dict:
        """The ``best`` block of result.json (docs/result-json.md)."""
        return {
            "expression": self.expression,
            "log_likelihood": self.log_likelihood,
            "n_params": self.n_params,
            "bic": self.bic,
            "terms": [t.to_json() for t in self.terms],
            "noise_variance": self.noise_variance,
        }

    @classmethod
    def from_json(cls, d: dict, n: int) -> FitResult:
        terms = tuple(
            TermFit(
                t["variance"],
                tuple(
                    FactorFit(f["kernel"], {k: v for k, v in f.items() if k != "kernel"})
                    for f in t["factors"]
                ),
            )
            for t in d["terms"]
        )
        return cls(
            expression=d["expression"],
            status="ok",
            n=n,
            n_params=d["n_params"],
            log_likelihood=d["log_likelihood"],
            bic=d["bic"],
            terms=terms,
            noise_variance=d["noise_variance"],
        )

    def period(self, kernel: str = "PER") -> float:
        """Period of the first PER factor (convenience for reports and tests)."""
        for t in self.terms:
            for f in t.factors:
                if f.kernel == kernel:
                    return f.params["period"]
        raise KeyError(f"no {kernel} factor in {self.expression}")

    def to_score(self) -> Score:
        return Score(
            self.expression,
            self.status,
            self.bic,
            self.log_likelihood,
            self.n_params,
            self.seconds,
            self.error,
            self,
        )
