"""Warm-start portfolio: a meta-learned initial design from other series' BIC scores.

BO spends its first evaluations on an initial design that knows nothing about kernel
structure. A *portfolio* (Feurer et al. 2015; Wistuba et al. 2015) spends them on
expressions that scored well across a library of other series instead. The library is
``portfolio_bic.json``: the BIC of every expression evaluated on all of the benchmark
series (built by ``benchmarks/scripts/build_portfolio.py`` from the committed benchmark fit
caches; the same GP fits, restarts and thinnings as ``prolas bench``).

Selection (greedy, scale-free). For series ``d`` let ``s(e, d)`` be the rank percentile
of expression ``e``'s BIC among the candidates (0 worst, 1 best; BICs of different series
are not comparable, ranks are). A portfolio ``P`` is scored by the mean over series of
the best member's percentile, ``F(P) = mean_d max_{e in P} s(e, d)``, and built greedily:
``P_{k+1} = P_k + argmax_e F(P_k + e)``. The first pick is the best all-rounder; later
picks cover series the earlier ones served badly.

Two libraries, by the series' length. A portfolio learned on series of 144–200 points
holds expressions of ten and more parameters, which a short series rarely supports.
Given a series of fewer than :data:`~prolas.limits.SHORT_SERIES_POINTS` points (PROLAS
passes its length with ``LatentBOConfig.short_library``, off by default), the ranking
uses ``portfolio_bic_short.json`` instead, the BICs of about 130 expressions on the M3
monthly tuning half (48–126 points; built by ``benchmarks/scripts/portfolio_short.py``);
the report half of M3 is not in it (:func:`library_for`).

Leave-one-series-out. A series never warm-starts itself: the library's column for a
dataset of the same name (``airline``, ``airline_train``, ...) is dropped before ranking,
and candidates are the expressions scored on every remaining series, so the benchmark
numbers of a series are never informed by that series' own scores.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prolas.errors import GrammarError, ProlasError
from prolas.expr import Expression
from prolas.grammar import Grammar, sequence_expression
from prolas.grammar import Sequence as GSeq
from prolas.limits import SHORT_SERIES_POINTS

__all__ = [
    "PORTFOLIO_PATH",
    "SHORT_PORTFOLIO_PATH",
    "BenchmarkScores",
    "excluded_series",
    "library_for",
    "warm_start",
]

#: The shipped library of benchmark BIC scores (the nine benchmark series).
PORTFOLIO_PATH = Path(__file__).with_name("portfolio_bic.json")
#: The shipped library for short series (the M3 monthly tuning half).
SHORT_PORTFOLIO_PATH = Path(__file__).with_name("portfolio_bic_short.json")


def library_for(n_points: int | None) -> Path:
    """The library a series of ``n_points`` points ranks its warm start on: the short
    series' below :data:`~prolas.limits.SHORT_SERIES_POINTS`, else (and when the length is
    unknown) the nine benchmark series'."""
    if n_points is not None and n_points < SHORT_SERIES_POINTS:
        return SHORT_PORTFOLIO_PATH
    return PORTFOLIO_PATH


def excluded_series(dataset_name: str | None, series: tuple[str, ...]) -> tuple[str, ...]:
    """Library series that are the dataset itself: the same name or a variant of it
    (``airline_train``, ``mauna (thinned to 200 of 545)``), so it does not warm-start
    itself."""
    if not dataset_name:
        return ()
    return tuple(
        s for s in series if dataset_name == s or dataset_name.startswith((f"{s}_", f"{s} "))
    )


@dataclass(frozen=True)
class BenchmarkScores:
    """BIC of expressions on library series.

    Attributes:
        series: library series names, ``S``.
        expressions: canonical expressions, ``E``.
        sequences: for each expression a grammar token sequence producing it (the
            shortest in the default grammar), used to place it in the VAE's latent space.
        bic: ``E x S`` BIC values, NaN where an expression was not evaluated.
    """

    series: tuple[str, ...]
    expressions: tuple[str, ...]
    sequences: tuple[tuple[str, ...], ...]
    bic: np.ndarray

    @classmethod
    def load(cls, path: str | Path | None = None) -> BenchmarkScores:
        """Read a library file (default: the shipped :data:`PORTFOLIO_PATH`)."""
        p = Path(path) if path is not None else PORTFOLIO_PATH
        try:
            data = json.loads(p.read_text())
            series = tuple(data["series"])
            rows = data["expressions"]
            exprs = tuple(r["expression"] for r in rows)
            seqs = tuple(tuple(r["sequence"]) for r in rows)
            bic = np.array(
                [[math.nan if v is None else float(v) for v in r["bic"]] for r in rows],
                dtype=float,
            ).reshape(len(rows), len(series))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ProlasError(f"cannot read portfolio library {p}: {exc}") from exc
        return cls(series, exprs, seqs, bic)

    def select(
        self, k: int, exclude: tuple[str, ...] = (), weights: dict[str, float] | None = None
    ) -> list[int]:
        """Indices of a greedy portfolio of at most ``k`` expressions (module docstring),
        ranked on the series not in ``exclude``; best first.

        ``weights`` (series name -> weight >= 0, used for the series not excluded, then
        normalised) replace the mean over series by a weighted mean,
        ``F(P) = sum_d w_d max_{e in P} s(e, d)`` (e.g. to favour series similar to the
        target, ``benchmarks/scripts/portfolio_similarity.py``); None is the plain mean."""
        cols = [j for j, s in enumerate(self.series) if s not in exclude]
        if k <= 0 or not cols:
            return []
        B = self.bic[:, cols]
        rows = np.flatnonzero(np.isfinite(B).all(axis=1))
        if rows.size == 0:
            return []
        S = _rank_percentiles(B[rows])  # candidates x series
        if weights is None:

            def average(X: np.ndarray) -> np.ndarray:
                return X.mean(axis=1)

        else:
            w = np.array([float(weights[self.series[j]]) for j in cols])
            if not (np.isfinite(w).all() and (w >= 0).all() and w.sum() > 0):
                raise ProlasError(f"portfolio weights must be >= 0 and not all 0: {weights}")
            w = w / w.sum()

            def average(X: np.ndarray) -> np.ndarray:
                return X @ w

        chosen: list[int] = []
        cover = np.full(S.shape[1], -np.inf)
        mean_score = average(S)
        for _ in range(min(k, rows.size)):
            gain = average(np.maximum(cover[None, :], S))
            gain[chosen] = -np.inf
            # ties (e.g. no further gain possible): the better all-rounder, then the lower
            # index. Gains are float means, so two candidates with equal coverage can differ
            # in the last bit; a different summation order (a column-major S: rankdata's
            # layout) flips such ties and changes the portfolio, hence the C-contiguous S.
            best = max(range(len(gain)), key=lambda i: (gain[i], mean_score[i], -i))
            chosen.append(best)
            cover = np.maximum(cover, S[best])
        return [int(rows[i]) for i in chosen]


def _rank_percentiles(B: np.ndarray) -> np.ndarray:
    """Column-wise rank percentiles of ``n x m`` values in [0, 1] (ties share the mean
    rank; 1 is the highest value), as a C-contiguous array (see :meth:`select`)."""
    from scipy.stats import rankdata

    n = B.shape[0]
    if n == 1:
        return np.ones_like(B)
    return np.ascontiguousarray((rankdata(B, method="average", axis=0) - 1.0) / (n - 1))


def warm_start(
    grammar: Grammar,
    k: int,
    seen: Callable[[Expression], bool],
    dataset_name: str | None = None,
    path: str | Path | None = None,
    log: Callable[[str], None] | None = None,
    n_points: int | None = None,
) -> list[tuple[GSeq, Expression]]:
    """The warm start of a search: up to ``k`` portfolio expressions (best first) of the
    library at ``path`` (default: the shipped library for a series of ``n_points``
    points, :func:`library_for`), ranked without the series that are ``dataset_name``
    (:func:`excluded_series`), each with the token sequence that produces it. Only
    expressions in ``grammar``'s search space (a valid sequence of non-zero probability)
    that are not ``seen`` are kept.
    """
    path = library_for(n_points) if path is None else path
    library = BenchmarkScores.load(path)
    left_out = excluded_series(dataset_name, library.series)
    picked: list[tuple[GSeq, Expression]] = []
    for i in library.select(len(library.expressions), left_out):
        seq = library.sequences[i]
        try:
            grammar.validate_sequence(seq)
        except GrammarError:
            continue  # not in this grammar's search space
        e = sequence_expression(seq)
        if math.isfinite(grammar.log_prob(seq)) and not seen(e):
            picked.append((seq, e))
        if len(picked) == k:
            break
    if picked and log is not None:
        log(
            f"warm start: {len(picked)} portfolio expressions ranked on "
            f"{len(library.series) - len(left_out)} series of {Path(path).name}"
            + (f" (left out: {', '.join(left_out)})" if left_out else "")
        )
    return picked
