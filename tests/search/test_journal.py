"""Journal format, corruption handling, fingerprints, and resume-by-replay laws."""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import pytest

from prolas.data import Dataset
from prolas.errors import OutputExistsError
from prolas.expr import Expression, parse
from prolas.gp import FactorFit, FitResult, TermFit
from prolas.grammar import Grammar
from prolas.pipeline import best_fit
from prolas.records import Evaluation, Score
from prolas.search.config import SearchConfig
from prolas.search.evaluator import BudgetExhausted, Evaluator
from prolas.search.greedy import search_cks
from prolas.search.journal import (
    Journal,
    JournalError,
    JournalWarning,
    entry_from_json,
    entry_to_json,
    fingerprint,
    open_journal,
    read_journal,
)
from prolas.search.random_search import search_random
from prolas.search.structural import search_structural


def hash_score(expr: str) -> float:
    """A distinct, deterministic pseudo-BIC per expression that favours more terms
    (so CKS keeps improving for several levels)."""
    h = int(hashlib.sha256(expr.encode()).hexdigest()[:8], 16) / 16**8
    return round(10.0 * h + 5.0 * expr.count("+") + 2.0 * expr.count("*"), 6)


class CountingScorer:
    """Pseudo scores; counts the calls (= expensive fits); fails on ``fail``."""

    def __init__(self, fail: frozenset[str] = frozenset()) -> None:
        self.calls: list[str] = []
        self.fail = fail

    def __call__(self, expr: Expression) -> Score:
        key = str(expr)
        self.calls.append(key)
        if key in self.fail:
            return Score.failed(expr, "synthetic failure")
        v = hash_score(key)
        return Score(key, "ok", v, v + 1.0, expr.n_params, 0.25)


FP = {"data": "abc", "method": "test"}

STRATEGIES = {
    "cks": lambda ev: search_cks(ev, depth=4),
    "random": lambda ev: search_random(ev, Grammar.default(), seed=3, batch=3),
    "structural": lambda ev: search_structural(
        ev, Grammar.from_file("small"), acq_opt="random", n_init=4, seed=1, batch=2
    ),
    "prolas": lambda ev: _prolas(ev),
}


def _prolas(ev: Evaluator):
    """PROLAS BO (q = 2) with the shipped KG-VAE and a small acquisition optimiser."""
    from prolas.search.latent import LatentBOConfig, search_prolas
    from prolas.vae import load_checkpoint

    cfg = SearchConfig(budget=ev.budget, seed=3, batch=2)
    opts = LatentBOConfig(n_init=3, num_restarts=4, raw_samples=64, mc_samples=32)
    return search_prolas(ev, None, cfg, trained=load_checkpoint("default"), options=opts)


def _entries(path: Path) -> list[dict]:
    """Journal entries without the wall-clock field (which differs between runs)."""
    rows = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    return [{k: v for k, v in r.items() if k != "elapsed"} for r in rows]


def _run(path: Path, strategy, budget: int, resume: bool, fail=frozenset()):
    scorer = CountingScorer(fail)
    ev = Evaluator(scorer, budget=budget)
    journal = Journal.resume(path, FP) if resume else Journal.create(path, FP)
    with journal:
        journal.attach(ev)
        result = STRATEGIES[strategy](ev)
    return result, scorer


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_resume_from_any_prefix_replays_the_same_search_without_refits(tmp_path, strategy) -> None:
    # the BO searches refit their surrogate every step: fewer resume points keep them fast
    budget, cuts = {"structural": (10, (3, 7)), "prolas": (8, (5,))}.get(
        strategy, (14, (0, 1, 5, 9, 14))
    )
    full_path = tmp_path / "full.jsonl"
    full, scorer = _run(full_path, strategy, budget, resume=False, fail=frozenset({"LIN"}))
    assert full.evaluations == budget and len(scorer.calls) == budget
    lines = full_path.read_text().splitlines(keepends=True)
    assert len(lines) == budget + 1  # header + one line per unique evaluation
    for k in cuts:
        cut = tmp_path / f"cut{k}.jsonl"
        cut.write_text("".join(lines[: k + 1]))
        resumed, scorer2 = _run(cut, strategy, budget, resume=True, fail=frozenset({"LIN"}))
        # only the evaluations that were not journalled are fitted again
        assert len(scorer2.calls) == budget - k
        assert set(scorer2.calls).isdisjoint(e["expression"] for e in _entries(cut)[:k])
        key = [(e.index, e.expression, e.status, e.bic) for e in full.history]
        assert [(e.index, e.expression, e.status, e.bic) for e in resumed.history] == key
        if strategy == "prolas":
            assert full.extra["bo_steps"] >= 2  # the BO loop itself was replayed
        # timings (CPU seconds, the strategy's milliseconds per step) differ between runs
        timeless = {k: v for k, v in full.extra.items() if not k.endswith(("seconds", "_ms"))}
        assert {k: resumed.extra[k] for k in timeless} == timeless
        assert _entries(cut) == _entries(full_path)  # the journal ends up identical


def test_resume_with_a_larger_budget_continues_the_search(tmp_path) -> None:
    path = tmp_path / "j.jsonl"
    first, _ = _run(path, "random", 6, resume=False)
    more, scorer = _run(path, "random", 10, resume=True)
    assert len(scorer.calls) == 4 and more.evaluations == 10
    assert [e.expression for e in more.history[:6]] == [e.expression for e in first.history]
    straight, _ = _run(tmp_path / "s.jsonl", "random", 10, resume=False)
    assert [e.expression for e in more.history] == [e.expression for e in straight.history]


def test_preloaded_evaluations_never_proposed_are_kept_and_count_against_the_budget() -> None:
    old = [
        Evaluation(1, "LIN*PER*RQ*SE", "ok", 50.0, 60.0, 9, 1.0, None),
        Evaluation(2, "SE", "ok", 1.0, 2.0, 3, 1.0, None),
    ]
    scorer = CountingScorer()
    ev = Evaluator(scorer, budget=5)
    ev.preload(old, elapsed=12.0)
    assert not ev.seen("SE") and ev.pending_replay == 2  # not seen until re-proposed
    with pytest.raises(BudgetExhausted):
        ev.evaluate_many([parse(e) for e in ("LIN", "SE", "PER", "RQ", "LIN + SE")])
    # SE is replayed in place; only 3 new fits fit in the budget (2 are journalled)
    assert scorer.calls == ["LIN", "PER", "RQ"]
    assert [e.expression for e in ev.history] == ["LIN", "SE", "PER", "RQ"]
    res = ev.result("x", 0)
    assert [e.expression for e in res.history] == ["LIN", "SE", "PER", "RQ", "LIN*PER*RQ*SE"]
    assert [e.index for e in res.history] == [1, 2, 3, 4, 5]
    assert res.best.expression == "LIN*PER*RQ*SE" and res.wall_seconds >= 12.0


def _fit() -> FitResult:
    terms = (
        TermFit(0.7, (FactorFit("PER", {"lengthscale": 0.9, "period": 1.002}),)),
        TermFit(0.2, (FactorFit("LIN", {"offset": 1946.5}), FactorFit("SE", {"lengthscale": 3.1}))),
    )
    ll = 100.123456789
    k = parse("LIN*SE + PER").n_params
    return FitResult(
        expression="LIN*SE + PER",
        status="ok",
        n=144,
        n_params=k,
        log_likelihood=ll,
        bic=ll - 0.5 * k * 4.969813299576001,
        terms=terms,
        noise_variance=0.0039,
        seconds=1.25,
        restarts=4,
    )


def test_entry_round_trip_keeps_the_fitted_model_so_the_best_needs_no_refit() -> None:
    fit = _fit()
    ev = Evaluation(3, fit.expression, "ok", fit.bic, fit.log_likelihood, fit.n_params, 1.25, None)
    ev = Evaluation(**{**ev.__dict__, "fit": fit})
    back, elapsed = entry_from_json(json.loads(json.dumps(entry_to_json(ev, 7.5))))
    assert back == ev and back.fit == fit and elapsed == 7.5
    failed = Evaluation(4, "RQ", "failed", None, None, 4, 0.1, "Cholesky failed")
    assert entry_from_json(entry_to_json(failed, 8.0))[0] == failed
    # best_fit takes the journalled model (a refit would need a data set of n = 144)
    from prolas.records import SearchResult

    tiny = Dataset.from_arrays([0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 0.0, 1.0, 0.5])
    result = SearchResult("cks", 0, 5, [back], 1.0)
    assert best_fit(result, tiny, SearchConfig(method="cks")) is back.fit


def _write_journal(path: Path, n: int) -> list[str]:
    j = Journal.create(path, FP)
    for i, e in enumerate(("SE", "LIN", "PER", "RQ", "LIN + SE")[:n], 1):
        j.append(Evaluation(i, e, "ok", float(i), float(i), parse(e).n_params, 0.1, None), i)
    j.close()
    return path.read_text().splitlines(keepends=True)


def test_torn_last_line_is_dropped_with_a_warning_and_cut_before_appending(tmp_path) -> None:
    path = tmp_path / "journal.jsonl"
    lines = _write_journal(path, 4)
    path.write_text("".join(lines[:4]) + lines[4][:25])  # power cut in the middle of line 5
    with pytest.warns(JournalWarning, match="line 5"):
        j = Journal.resume(path, FP)
    assert [e.expression for e in j.entries] == ["SE", "LIN", "PER"]
    j.append(Evaluation(4, "RQ", "ok", 4.0, 4.0, 4, 0.1, None), 4.0)
    j.close()
    header, entries, elapsed, keep, _ = read_journal(path)
    assert keep is None and [e.expression for e in entries] == ["SE", "LIN", "PER", "RQ"]
    assert elapsed == 4.0 and header["fingerprint"] == FP


def test_complete_last_line_without_newline_is_kept(tmp_path) -> None:
    path = tmp_path / "journal.jsonl"
    lines = _write_journal(path, 2)
    path.write_text("".join(lines)[:-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: nothing was lost
        j = Journal.resume(path, FP)
    j.append(Evaluation(3, "PER", "ok", 3.0, 3.0, 4, 0.1, None), 3.0)
    j.close()
    assert [e.expression for e in read_journal(path)[1]] == ["SE", "LIN", "PER"]


@pytest.mark.parametrize(
    ("line", "bad"),
    [(3, "{not json"), (2, '{"index": 1}'), (3, '{"index": 2, "expression": "PER+SE"}')],
)
def test_corrupt_middle_line_is_an_error_naming_the_line(tmp_path, line, bad) -> None:
    path = tmp_path / "journal.jsonl"
    lines = _write_journal(path, 4)
    lines[line - 1] = bad + "\n"
    path.write_text("".join(lines))
    with pytest.raises(JournalError, match=f"line {line} is corrupt"):
        Journal.resume(path, FP)


def test_not_a_journal_and_missing_journal_are_clear_errors(tmp_path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text('{"hello": 1}\n')
    with pytest.raises(JournalError, match="not a prolas journal"):
        Journal.resume(path, FP)
    with pytest.raises(JournalError, match="nothing to resume"):
        Journal.resume(tmp_path / "none.jsonl", FP)


def test_torn_header_starts_afresh(tmp_path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text('{"prolas_jour')
    with pytest.warns(JournalWarning):
        j = Journal.resume(path, FP)
    j.close()
    header, entries, _, keep, _ = read_journal(path)
    assert header["fingerprint"] == FP and entries == [] and keep is None


def test_fingerprint_names_what_differs_and_ignores_the_budget(tmp_path) -> None:
    ds = Dataset.from_arrays([0.0, 1.0, 2.0, 3.0, 4.0], [1.0, 0.0, 2.0, 1.0, 0.5])
    base = SearchConfig(method="cks", budget=5, restarts=2)
    assert fingerprint(ds, base) == fingerprint(ds, base.replace(budget=50))
    assert fingerprint(ds, base) == fingerprint(ds, base.replace(grammar="small", batch=3))
    rnd = base.replace(method="random")
    assert fingerprint(ds, rnd) == fingerprint(ds, rnd.replace(depth=9))  # depth: cks only
    assert fingerprint(ds, rnd) != fingerprint(ds, rnd.replace(grammar="small"))
    other = Dataset.from_arrays([0.0, 1.0, 2.0, 3.0, 4.0], [1.0, 0.0, 2.0, 1.5, 0.5])
    assert fingerprint(ds, base) != fingerprint(other, base)

    j = open_journal(tmp_path, ds, base, resume=False, force=False)
    j.close()
    # a header-only journal (a run that failed before its first fit) holds nothing to lose
    open_journal(tmp_path, ds, base, resume=False, force=False).close()
    j = open_journal(tmp_path, ds, base, resume=False, force=False)
    j.append(Evaluation(1, "SE", "ok", 1.0, 1.0, 3, 0.1, None), 1.0)
    j.close()
    with pytest.raises(JournalError, match="seed 0 -> 1"):
        open_journal(tmp_path, ds, base.replace(seed=1), resume=True, force=False)
    with pytest.raises(JournalError, match="restarts 2 -> 3"):
        open_journal(tmp_path, ds, base.replace(restarts=3), resume=True, force=False)
    with pytest.raises(JournalError, match="data values"):
        open_journal(tmp_path, other, base, resume=True, force=False)
    # a new run must not silently overwrite the journal of an earlier one
    with pytest.raises(OutputExistsError, match="--resume"):
        open_journal(tmp_path, ds, base, resume=False, force=False)
    open_journal(tmp_path, ds, base, resume=False, force=True).close()
    open_journal(tmp_path, ds, base.replace(budget=99), resume=True, force=False).close()


def test_resume_refuses_a_budget_below_the_journalled_evaluations(tmp_path) -> None:
    ds = Dataset.from_arrays([0.0, 1.0, 2.0, 3.0, 4.0], [1.0, 0.0, 2.0, 1.0, 0.5])
    cfg = SearchConfig(method="cks", budget=5, restarts=2)
    j = open_journal(tmp_path, ds, cfg, resume=False, force=False)
    for i, e in enumerate(("SE", "LIN", "PER"), 1):
        j.append(Evaluation(i, e, "ok", float(i), float(i), parse(e).n_params, 0.1, None), i)
    j.close()
    with pytest.raises(JournalError, match="--budget 3 or more"):
        open_journal(tmp_path, ds, cfg.replace(budget=2), resume=True, force=False)


def test_prolas_fingerprint_holds_every_setting_that_changes_its_proposals(tmp_path) -> None:
    """A resumed PROLAS search must not continue a different one (issue 19)."""
    ds = Dataset.from_arrays([0.0, 1.0, 2.0, 3.0, 4.0], [1.0, 0.0, 2.0, 1.0, 0.5])
    base = SearchConfig(method="prolas", budget=5, restarts=2)
    fp = fingerprint(ds, base)
    assert fp["latent_surrogate"] == "ot" and fp["warm_start"] == 5
    assert fp["initial_design"] == "base kernels first"
    assert fp["dataset_name"] == ds.name and len(fp["checkpoint_sha256"]) == 64
    assert fp != fingerprint(ds, base.replace(latent_surrogate="latent"))
    assert fp != fingerprint(ds, base.replace(warm_start=0))
    assert fp != fingerprint(ds, base.replace(checkpoint="default", grammar="default"))
    renamed = Dataset.from_arrays(ds.x, ds.y, name="airline")
    assert fp != fingerprint(renamed, base)  # the warm start leaves out a series by name
    j = open_journal(tmp_path, ds, base, resume=False, force=False)
    j.append(Evaluation(1, "SE", "ok", 1.0, 1.0, 3, 0.1, None), 1.0)
    j.close()
    with pytest.raises(JournalError, match="latent_surrogate 'ot' -> 'latent'"):
        open_journal(
            tmp_path, ds, base.replace(latent_surrogate="latent"), resume=True, force=False
        )
    with pytest.raises(JournalError, match="warm_start 5 -> 0"):
        open_journal(tmp_path, ds, base.replace(warm_start=0), resume=True, force=False)
    # a journal written before the base kernels opened the initial design does not resume
    path = tmp_path / "journal.jsonl"
    lines = path.read_text().splitlines()
    head = json.loads(lines[0])
    assert head["fingerprint"].pop("initial_design") == "base kernels first"
    path.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    with pytest.raises(JournalError, match="initial_design"):
        open_journal(tmp_path, ds, base, resume=True, force=False)


def test_cks_fingerprint_names_the_change_rules(tmp_path) -> None:
    ds = Dataset.from_arrays([0.0, 1.0, 2.0, 3.0, 4.0], [1.0, 0.0, 2.0, 1.0, 0.5])
    cks = SearchConfig(method="cks", budget=5, restarts=2)
    assert fingerprint(ds, cks)["change"] is True
    assert "change" not in fingerprint(ds, cks.replace(change=False))
