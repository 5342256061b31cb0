"""Crash-safe search journal (``OUT/journal.jsonl``) and resuming from it.

File format (JSON lines, UTF-8):

* line 1, the header: ``{"prolas_journal": 1, "fingerprint": {...}}``. The
  fingerprint (:func:`fingerprint`) names everything that decides which expressions
  a search proposes and what they score: a SHA-256 of the data values, the method,
  the seed, the GP fit settings (restarts, iterations, ...) and the method's own
  settings (CKS depth; grammar content hash; batch; checkpoint; surrogate). The
  budget is *not* part of it: a run may be resumed with a larger budget.
* one line per finished evaluation, in history order: the
  :class:`~prolas.records.Evaluation` fields, ``elapsed`` (wall seconds
  since the search started) and ``fit``, the fitted model (the ``best`` block of
  result.json plus ``n``, ``seconds``, ``restarts``; ``null`` for a failed fit), so
  the best model of a resumed search needs no refit.

* a *repair* line when a fit was redone from a contained sub-model's optimum
  (:class:`~prolas.search.evaluator.Repair`): the repaired entry as above (same index)
  plus ``"repair": {"source": S, "before": log-likelihood before, "seconds": …}``. On
  resume the replayed search meets the same repair and takes the recorded refit.

Every line is written, flushed and ``fsync``-ed by :meth:`Journal.append` from the
Evaluator's ``on_result`` hook, i.e. before the search sees the result and moves on.
Durability therefore costs one fsync (≈ milliseconds) per GP fit (≈ seconds).

Lines are strict JSON (:func:`prolas.records.dumps_strict`): an ``"ok"`` entry's
numbers and its fitted model are finite (the Evaluator fails any fit that is not,
:func:`~prolas.search.evaluator.checked_score`), a failed entry's BIC and
log-likelihood are ``null`` and an unknown timing is ``null``; anything else
non-finite raises :class:`~prolas.errors.NonFiniteError` instead of writing ``NaN``.
Reading rejects ``NaN``/``Infinity`` tokens as corrupt.

Reading. A last line that does not parse (a write cut off by a crash or power cut)
is dropped with a :class:`JournalWarning` and cut from the file before appending;
a bad line anywhere else is a :class:`JournalError` naming the line.

Resuming (:meth:`Journal.attach`) preloads the journalled evaluations into the
Evaluator for *replay* (:meth:`~prolas.search.evaluator.Evaluator.preload`): the
strategy runs again from the start with the same seed, and every proposal that was
journalled returns its recorded result instantly, without a fit. For the
deterministic strategies (CKS, random, structural BO, PROLAS BO: each seeds all its
randomness from the seed, and its decisions depend only on the scores it receives)
the replay retraces the interrupted run exactly, including the BO surrogate data and
the RNG state, because the replayed scores are bit-identical (JSON round-trips
Python floats exactly); the search then continues where the crash stopped it.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "journal.jsonl"
>>> j = Journal.create(p, {"method": "cks"})
>>> from prolas.records import Evaluation
>>> j.append(Evaluation(1, "SE", "ok", -35.0, -27.5, 3, 0.4, None), elapsed=0.5)
>>> j.close()
>>> [e.expression for e in Journal.resume(p, {"method": "cks"}).entries]
['SE']
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prolas.errors import OutputExistsError, ProlasError
from prolas.expr import parse
from prolas.records import HISTORY_KEYS, Evaluation, dumps_strict
from prolas.search.evaluator import Evaluator, Repair

if TYPE_CHECKING:  # pragma: no cover
    from prolas.data import Dataset
    from prolas.search.config import SearchConfig

__all__ = [
    "JOURNAL_NAME",
    "Journal",
    "JournalError",
    "JournalWarning",
    "fingerprint",
    "read_journal",
    "open_journal",
]

JOURNAL_NAME = "journal.jsonl"
FORMAT_VERSION = 1
_ENTRY_KEYS = HISTORY_KEYS


class JournalError(ProlasError):
    """A journal is missing, corrupt, or belongs to a different data set or settings."""


class JournalWarning(UserWarning):
    """A recoverable journal problem (a torn last line was dropped)."""


# --- fingerprint ---------------------------------------------------------------------------


def data_hash(dataset: Dataset) -> str:
    """SHA-256 (16 hex) of the data values the GPs are fitted on (x and y, float64)."""
    h = hashlib.sha256()
    h.update(dataset.x.astype("float64").tobytes())
    h.update(dataset.y.astype("float64").tobytes())
    return h.hexdigest()[:16]


def fingerprint(dataset: Dataset, config: SearchConfig) -> dict[str, Any]:
    """What must match for a journal to be resumed (everything except the budget).

    Only the settings the chosen method uses are included, so e.g. ``--depth`` does
    not block resuming a random search.
    """
    fp: dict[str, Any] = {
        "data": data_hash(dataset),
        "n": int(dataset.n),
        "method": config.method,
        "seed": int(config.seed),
        "fit": config.fit_config.key(),
    }
    if config.warm_fits:  # absent when off, so journals of cold searches still resume
        fp["warm_fits"] = True
    if not config.nested:  # nested starts and repairs change what a search fits
        fp["nested"] = False
    from prolas.search.config import search_data

    view = search_data(dataset, config)
    if view.n < dataset.n:  # a subsample search scores other data than a full one
        fp["searched_points"] = int(view.n)
    identity = view.fit_identity()
    if identity:  # a view's windows' floor and starting periods (absent: a plain thinning)
        fp["search_view"] = identity
    if config.method == "cks":
        fp["depth"] = int(config.depth)
        if config.change:  # absent when off, so journals written before it still resume
            fp["change"] = True
        if config.base_kernels is not None:  # absent for the standard set (older journals)
            fp["base_kernels"] = list(config.base_kernels)
    else:
        from prolas.grammar import Grammar

        fp["grammar"] = Grammar.from_file(config.grammar).content_hash
        fp["batch"] = int(config.batch)
    if config.method == "prolas":
        from prolas.vae import checkpoint_digest

        fp["checkpoint"] = config.checkpoint
        # the same name may hold other weights (a retrained or replaced checkpoint)
        fp["checkpoint_sha256"] = checkpoint_digest(config.checkpoint)
        fp["train_vae"] = bool(config.train_vae)
        fp["latent_surrogate"] = config.latent_surrogate
        fp["warm_start"] = int(config.warm_start)
        # journals written before the base kernels opened the design lack this: they
        # searched another initial design, so they do not resume
        fp["initial_design"] = "base kernels first"
        if config.warm_start:  # the portfolio leaves out the library series of this name
            fp["dataset_name"] = dataset.name
    if config.method == "structural":
        fp["surrogate"] = config.surrogate
        fp["acq_opt"] = config.acq_opt
    return json.loads(json.dumps(fp))  # normalise (tuples -> lists) for comparison


def _differences(old: dict, new: dict) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out += [f"{key}.{d}" for d in _differences(a, b)]
        else:
            out.append(f"{key} {a!r} -> {b!r}" if key != "data" else "data values")
    return out


# --- entries ---------------------------------------------------------------------------


def _finite(v: float | None) -> float | None:
    return v if v is None or math.isfinite(v) else None


def entry_to_json(ev: Evaluation, elapsed: float) -> dict[str, Any]:
    """One journal line for an evaluation.

    A failed entry's non-finite BIC/log-likelihood and any non-finite timing
    (``seconds``, ``elapsed``, the fit's ``seconds``) become ``null``; the fitted
    model is kept only for an ``"ok"`` entry. An ``"ok"`` entry's numbers are left
    as they are, so that a non-finite one is refused by the strict writer.
    """
    from prolas.gp import FitResult

    d: dict[str, Any] = {k: getattr(ev, k) for k in _ENTRY_KEYS}
    if ev.repaired_from:
        d["repaired_from"] = ev.repaired_from
    if d["status"] != "ok":
        for k in ("bic", "log_likelihood"):
            d[k] = _finite(d[k])
    d["seconds"] = _finite(d["seconds"])
    d["elapsed"] = _finite(round(float(elapsed), 4))
    fit = ev.fit
    if d["status"] == "ok" and isinstance(fit, FitResult) and fit.ok:
        best = fit.to_json()
        d["fit"] = {**best, "n": fit.n, "seconds": _finite(fit.seconds), "restarts": fit.restarts}
    else:
        d["fit"] = None
    return d


def _reject_constant(token: str) -> float:
    """``json.loads`` hook: ``NaN``/``Infinity`` are not JSON, so a line holding one is corrupt."""
    raise ValueError(f"non-finite number {token} (not JSON)")


def _number_or_nan(v: Any) -> float:
    """A JSON number, or NaN for ``null`` (a timing that was not finite when written)."""
    return math.nan if v is None else float(v)


def entry_from_json(d: Any) -> tuple[Evaluation, float]:
    """Inverse of :func:`entry_to_json`; ``ValueError``/``KeyError``/``TypeError`` if malformed."""
    from prolas.gp import FitResult

    if not isinstance(d, dict):
        raise TypeError("not a JSON object")
    missing = [k for k in (*_ENTRY_KEYS, "elapsed", "fit") if k not in d]
    if missing:
        raise KeyError(f"missing {missing[0]!r}")
    expr = d["expression"]
    if not isinstance(expr, str) or str(parse(expr)) != expr:
        raise ValueError(f"expression {expr!r} is not canonical")
    if d["status"] not in ("ok", "failed"):
        raise ValueError(f"status {d['status']!r}")
    fit = None
    if d["fit"] is not None:
        f = d["fit"]
        fit = FitResult.from_json(f, n=int(f["n"]))
        fit = replace(fit, seconds=_number_or_nan(f["seconds"]), restarts=int(f["restarts"]))
    ev = Evaluation(
        index=d["index"],
        expression=expr,
        status=d["status"],
        bic=d["bic"],
        log_likelihood=d["log_likelihood"],
        n_params=int(d["n_params"]),
        seconds=_number_or_nan(d["seconds"]),
        error=d["error"],
        fit=fit,
        repaired_from=d.get("repaired_from"),
    )
    elapsed = _number_or_nan(d["elapsed"])
    return ev, elapsed if math.isfinite(elapsed) else 0.0


def repair_to_json(repair: Repair, elapsed: float) -> dict[str, Any]:
    """One journal line for a repair: the repaired entry plus what it was repaired from."""
    d = entry_to_json(repair.evaluation, elapsed)
    d["repair"] = {
        "source": repair.source,
        "before": repair.before,
        "seconds": _finite(repair.seconds),
    }
    return d


def repair_from_json(d: dict) -> tuple[Repair, float]:
    """Inverse of :func:`repair_to_json`; ``ValueError``/``KeyError``/``TypeError`` if malformed."""
    info = d["repair"]
    if not isinstance(info, dict):
        raise TypeError("repair is not a JSON object")
    ev, elapsed = entry_from_json({k: v for k, v in d.items() if k != "repair"})
    source = info["source"]
    if not isinstance(source, str) or str(parse(source)) != source:
        raise ValueError(f"repair source {source!r} is not canonical")
    if ev.fit is None or ev.repaired_from != source:
        raise ValueError("a repair line needs its fit and repaired_from = its source")
    repair = Repair(
        index=int(ev.index),
        expression=ev.expression,
        source=source,
        before=float(info["before"]),
        evaluation=ev,
        seconds=_number_or_nan(info["seconds"]),
    )
    return repair, elapsed


# --- reading ---------------------------------------------------------------------------


def read_journal(
    path: str | Path,
) -> tuple[dict | None, list[Evaluation], float, int | None, list[Repair]]:
    """Parse a journal.

    Returns:
        ``(header, entries, elapsed, keep_bytes, repairs)``: the header (``None`` if the
        file is empty or only holds a torn header), the evaluations in order (as first
        fitted), the wall seconds of the last line, the byte length of the valid prefix
        when a torn last line was dropped (``None`` if the file is intact), and the
        repairs in order.
    Raises:
        JournalError: a bad line before the last, or a first line that is not a header.
    """
    path = Path(path)
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the file ends with a newline, as it should
    header: dict | None = None
    entries: list[Evaluation] = []
    repairs: list[Repair] = []
    elapsed = 0.0
    offset = 0
    keep: int | None = None
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        try:
            d = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
            if i == 0:
                if not isinstance(d, dict) or d.get("prolas_journal") != FORMAT_VERSION:
                    raise JournalError(f"{path} is not a prolas journal (line 1 is no header)")
                if not isinstance(d.get("fingerprint"), dict):
                    raise ValueError("header without a fingerprint")
                header = d
            elif isinstance(d, dict) and "repair" in d:
                repair, elapsed = repair_from_json(d)
                repairs.append(repair)
            else:
                ev, elapsed = entry_from_json(d)
                entries.append(ev)
        except JournalError:
            raise
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, ProlasError) as exc:
            if not last:
                raise JournalError(
                    f"{path} line {i + 1} is corrupt ({type(exc).__name__}: {exc}); "
                    "fix or delete that line, or start over with --force"
                ) from None
            warnings.warn(
                f"{path}: dropped a torn last line (line {i + 1}, {len(line)} bytes): the "
                "previous run stopped while writing it; that evaluation will be redone",
                JournalWarning,
                stacklevel=2,
            )
            keep = offset
        offset += len(line) + 1
    if keep is None and raw and not raw.endswith(b"\n"):
        keep = len(raw)  # complete last line without its newline: add it before appending
    return header, entries, elapsed, keep, repairs


# --- the journal ---------------------------------------------------------------------------


class Journal:
    """An append-only, fsync-ed journal of one search (see the module docstring).

    Use :meth:`create` for a new search, :meth:`resume` to continue one, then
    :meth:`attach` it to the Evaluator.

    Attributes:
        path: the journal file.
        fingerprint: the settings it belongs to.
        entries: evaluations read from the file when resuming (empty for a new one).
        elapsed: wall seconds the journalled part of the search took.
    """

    def __init__(
        self,
        path: Path,
        fp: dict,
        entries: list[Evaluation],
        elapsed: float,
        repairs: list[Repair] | None = None,
    ) -> None:
        self.path = path
        self.fingerprint = fp
        self.entries = entries
        self.repairs = list(repairs or [])
        self.elapsed = elapsed
        self.appended = 0
        self._fh = open(path, "ab")  # noqa: SIM115 - closed by close()

    @classmethod
    def create(cls, path: str | Path, fp: dict) -> Journal:
        """Start a new journal at ``path`` (replacing any file there) with a header."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"prolas_journal": FORMAT_VERSION, "fingerprint": fp}
        with open(path, "wb") as fh:
            fh.write(dumps_strict(header, what=f"{path} header").encode() + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        return cls(path, fp, [], 0.0)

    @classmethod
    def resume(cls, path: str | Path, fp: dict) -> Journal:
        """Open an existing journal to continue its search.

        Raises:
            JournalError: no journal, a corrupt line other than the last, or a
                fingerprint that differs from ``fp`` (other data or settings).
        """
        path = Path(path)
        if not path.is_file():
            raise JournalError(
                f"--resume: no journal at {path}; nothing to resume (run without --resume)"
            )
        header, entries, elapsed, keep, repairs = read_journal(path)
        if header is None:  # nothing was journalled, not even the whole header
            warnings.warn(
                f"{path} held no complete header; starting afresh", JournalWarning, stacklevel=2
            )
            return cls.create(path, fp)
        old = header["fingerprint"]
        if old != fp:
            diff = ", ".join(_differences(old, fp))
            raise JournalError(
                f"{path} belongs to a different search ({diff}); resume with the same data "
                "and settings (only --budget may change), or use another --out or --force"
            )
        if keep is not None:  # cut a torn tail (or complete a missing newline)
            with open(path, "r+b") as fh:
                fh.truncate(keep)
                if keep and not _ends_with_newline(fh, keep):
                    fh.seek(keep)
                    fh.write(b"\n")
                fh.flush()
                os.fsync(fh.fileno())
        return cls(path, fp, entries, elapsed, repairs)

    def append(self, ev: Evaluation, elapsed: float) -> None:
        """Write one evaluation durably (write, flush, fsync) before returning."""
        line = dumps_strict(entry_to_json(ev, elapsed), what=f"{self.path} line").encode()
        line += b"\n"
        self._fh.write(line)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.appended += 1

    def append_repair(self, repair: Repair, elapsed: float) -> None:
        """Write one repair durably, like :meth:`append`."""
        line = dumps_strict(repair_to_json(repair, elapsed), what=f"{self.path} line").encode()
        self._fh.write(line + b"\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def attach(self, evaluator: Evaluator) -> None:
        """Preload the journalled evaluations (and repairs) for replay and journal every
        new one.

        The journal write runs before any ``on_result`` callback the evaluator
        already had (e.g. a progress bar).
        """
        evaluator.preload(self.entries, elapsed=self.elapsed, repairs=self.repairs)
        downstream_repair = evaluator.on_repair

        def on_repair(repair: Repair) -> None:
            self.append_repair(repair, time.perf_counter() - evaluator.started)
            if downstream_repair is not None:
                downstream_repair(repair)

        evaluator.on_repair = on_repair
        downstream = evaluator.on_result

        def on_result(ev: Evaluation) -> None:
            self.append(ev, time.perf_counter() - evaluator.started)
            if downstream is not None:
                downstream(ev)

        evaluator.on_result = on_result

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _ends_with_newline(fh, size: int) -> bool:
    fh.seek(size - 1)
    return fh.read(1) == b"\n"


def _has_entries(path: Path) -> bool:
    """Whether a journal holds any evaluation (a header-only one has nothing to lose)."""
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip()) > 1


def open_journal(
    out: str | Path, dataset: Dataset, config: SearchConfig, *, resume: bool, force: bool
) -> Journal:
    """The CLI's journal policy for ``prolas fit --out OUT``.

    ``resume``: continue ``OUT/journal.jsonl`` (must exist and match). Otherwise a new
    journal is started; an existing one holding evaluations (an unfinished or earlier
    run) is only replaced with ``force``.
    """
    path = Path(out) / JOURNAL_NAME
    fp = fingerprint(dataset, config)
    if resume:
        journal = Journal.resume(path, fp)
        if len(journal.entries) > config.budget:
            journal.close()
            raise JournalError(
                f"{path} holds {len(journal.entries)} evaluations, more than --budget "
                f"{config.budget}; resume with --budget {len(journal.entries)} or more"
            )
        return journal
    if path.exists() and not force and _has_entries(path):
        raise OutputExistsError(
            f"{out} holds the journal of an earlier run ({JOURNAL_NAME}); use --resume to "
            "continue it, --force to start over, or another --out"
        )
    return Journal.create(path, fp)
