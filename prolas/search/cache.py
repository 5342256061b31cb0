"""A persistent, shared cache of GP scores for benchmarks and comparisons.

A GP fit is a deterministic function of (data, fit settings, expression): the
restarts are seeded from the fit seed and the canonical expression
(:func:`prolas.gp.fit_gp`). Comparing methods over many seeds therefore re-fits the
same expressions again and again; :class:`CachedScorer` stores each score once in a
JSON-lines file keyed by a fingerprint of the data and the fit settings, so every
method and seed sees *identical* scores for the same expression (a fairer
comparison) and the grid costs only its distinct expressions.

The evaluation count and the per-evaluation ``seconds`` recorded in a history are
those of the original fit, so budgets and cost figures stay honest; wall-clock time
of a cached benchmark run is *not* a measure of search cost.

A warm-started fit (:class:`prolas.search.evaluator.Evaluator` ``warm_fits``) is a
function of the expression *and* of the fits it started from, so its entry is keyed by
both (:func:`warm_key`): the expression, then ``|warm:`` and a digest of the starting
fits' parameters. A cold fit's key is the expression alone, as before. A repair (a fit
redone from a contained sub-model's optimum alone, :meth:`CachedScorer.refit`) is keyed by
the expression, ``|repair:`` and the digest of that sub-model's fit. A cold fit of an
expression with a top-level constant term (``C + X``) is keyed ``|warm:offset-start``: such a
fit starts at ``X``'s cold fit (:func:`prolas.gp.fit_gp`, from after fitter 3 was numbered),
so the rows of the fitter before, keyed by the expression alone, are not read for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from prolas.expr import Expression, parse
from prolas.gp import FitResult, GPScorer
from prolas.gp.fit import FIRST_FITTER_FIELDS
from prolas.nesting import without_offset
from prolas.records import Score

__all__ = ["CachedScorer", "cold_row", "scorer_fingerprint", "warm_key"]


def _warm_digest(init: tuple) -> str | None:
    """SHA-256 (16 hex) of the parameters of the fits ``init``; ``None`` without any."""
    if not init:
        return None
    blocks = [f.to_json() for f in init]
    return hashlib.sha256(json.dumps(blocks, sort_keys=True).encode()).hexdigest()[:16]


#: The digest of a cold fit of ``C + X`` (module docstring).
OFFSET_START = "offset-start"


def _digest(expr: Expression | str, init: tuple, offset_start: bool = True) -> str | None:
    """:func:`_warm_digest` of ``init``; without it, :data:`OFFSET_START` for an
    expression with a top-level constant term if ``offset_start``
    (:attr:`prolas.gp.FitConfig.offset_start`), else ``None``."""
    digest = _warm_digest(init)
    if digest is None and offset_start:
        if without_offset(parse(expr) if isinstance(expr, str) else expr) is not None:
            return OFFSET_START
    return digest


def cold_row(row: dict) -> bool:
    """Whether a cache row holds a cold fit (no fits to start from): no ``"warm"`` digest,
    or :data:`OFFSET_START`'s."""
    return row.get("warm") in (None, OFFSET_START)


def warm_key(expr: Expression | str, init: tuple = (), offset_start: bool = True) -> str:
    """Cache key of a fit of ``expr`` warm-started from the fits ``init``: the
    expression alone without them (with ``|warm:offset-start`` for ``C + X`` if
    ``offset_start``), else with a digest of their parameters."""
    return _key(expr, _digest(expr, init, offset_start))


def _key(expr: Expression | str, digest: str | None) -> str:
    return str(expr) if digest is None else f"{expr}|warm:{digest}"


def scorer_fingerprint(scorer: GPScorer, algorithm: int | None = None) -> str:
    """SHA-256 (16 hex) of the data values (with :meth:`prolas.data.Dataset.fit_identity`)
    and the fit configuration.

    ``algorithm``: the fingerprint the same settings had under that version of the
    fitter (:data:`prolas.gp.fit.FIT_ALGORITHM`); 1, the first, did not name itself in
    the key. Used to replay caches written by an earlier fitter (their fits are that
    fitter's, never mixed into a cache of today's)."""
    key = scorer.config.key()
    if algorithm == 1:
        key = {k: v for k, v in key.items() if k in FIRST_FITTER_FIELDS}
    elif algorithm is not None:
        key["algorithm"] = algorithm
    h = hashlib.sha256()
    h.update(scorer.dataset.x.tobytes())
    h.update(scorer.dataset.y.tobytes())
    # a search view's floors and starting periods (nothing for an ordinary data set, so
    # the fingerprints of caches written before views existed are unchanged)
    identity = scorer.dataset.fit_identity()
    if identity:
        h.update(json.dumps(identity, sort_keys=True).encode())
    h.update(json.dumps(key, sort_keys=True).encode())
    return h.hexdigest()[:16]


class CachedScorer:
    """Wrap a :class:`GPScorer` with an append-only JSONL cache at ``path``.

    Each line: ``{"key": fingerprint, "expression": ..., "fit": FitResult fields}``,
    plus ``"warm": digest`` for a warm-started fit (:func:`warm_key`).
    Lines of other fingerprints (other data or settings) are ignored, so one file can
    serve several data sets. A torn last line is skipped.
    """

    def __init__(self, scorer: GPScorer, path: str | Path, recorded_by: int | None = None) -> None:
        self.scorer = scorer
        self.path = Path(path)
        # ``recorded_by``: read (and extend) the entries an earlier fitter wrote
        # (:func:`scorer_fingerprint`): for replaying committed benchmark grids
        self.key = scorer_fingerprint(scorer, recorded_by)
        # cold C + X fits keyed apart: this fitter's, not an earlier one's (module docstring)
        self.offset_start = scorer.config.offset_start and recorded_by is None
        self._lock = threading.Lock()
        self._table: dict[str, FitResult] = {}
        self.hits = 0
        self.misses = 0
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn final line from an interrupted run
                if row.get("key") == self.key:
                    key = _key(row["expression"], row.get("warm"))
                    self._table[key] = _fit_from_row(row["fit"])

    def lookup(self, expr: Expression | str, init: tuple = ()) -> FitResult | None:
        """The cached fit of ``expr`` (warm-started from ``init``), without fitting."""
        with self._lock:
            return self._table.get(warm_key(expr, init, self.offset_start))

    def __call__(self, expr: Expression, init: tuple = ()) -> Score:
        digest = _digest(expr, init, self.offset_start)
        return self._cached(expr, _key(expr, digest), digest, lambda: self.scorer(expr, init))

    def refit(self, expr: Expression, init: tuple) -> Score:
        """:meth:`prolas.gp.GPScorer.refit` (a repair), cached under its own key."""
        digest = f"repair:{_warm_digest(init)}"
        return self._cached(expr, _key(expr, digest), digest, lambda: self.scorer.refit(expr, init))

    def _cached(self, expr: Expression, key: str, digest: str | None, fit_now) -> Score:
        with self._lock:
            hit = self._table.get(key)
        if hit is not None:
            self.hits += 1
            return hit.to_score()
        self.misses += 1
        score = fit_now()
        fit = score.fit
        if isinstance(fit, FitResult):
            with self._lock:
                self._table[key] = fit
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as fh:
                    row = {"key": self.key, "expression": str(expr), "fit": _fit_to_row(fit)}
                    if digest is not None:
                        row["warm"] = digest
                    fh.write(json.dumps(row) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
        return score

    def __len__(self) -> int:
        return len(self._table)


def _fit_to_row(fit: FitResult) -> dict:
    return {
        "status": fit.status,
        "n": fit.n,
        "n_params": fit.n_params,
        "seconds": fit.seconds,
        "error": fit.error,
        "restarts": fit.restarts,
        "best": fit.to_json() if fit.ok else None,
        "expression": fit.expression,
    }


def _fit_from_row(row: dict) -> FitResult:
    if row["status"] == "ok" and row["best"] is not None:
        fit = FitResult.from_json(row["best"], n=row["n"])
        return FitResult(
            **{**fit.__dict__, "seconds": row["seconds"], "restarts": row.get("restarts", 0)}
        )
    return FitResult(
        expression=row["expression"],
        status="failed",
        n=row["n"],
        n_params=row["n_params"],
        seconds=row["seconds"],
        error=row["error"],
    )
