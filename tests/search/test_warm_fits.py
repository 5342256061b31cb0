"""Warm-started fits in a search: each new expression also starts from the fits of the
best and of the most similar expression evaluated so far (Evaluator ``warm_fits``)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import ROOT

from prolas.cli import main
from prolas.data import Dataset
from prolas.expr import parse
from prolas.gp import FitConfig, GPScorer, fit_gp
from prolas.records import Evaluation, Score
from prolas.report import validate_result_json
from prolas.search.cache import CachedScorer, cold_row, warm_key
from prolas.search.config import SearchConfig
from prolas.search.evaluator import Evaluator, related_fits
from prolas.search.journal import fingerprint


def _evaluation(expr: str, bic: float | None, fit: object = "fit") -> Evaluation:
    status = "ok" if bic is not None else "failed"
    return Evaluation(1, expr, status, bic, bic, 3, 0.1, None, fit=f"{fit}:{expr}")


def test_related_fits_are_the_best_and_the_most_similar() -> None:
    history = [
        _evaluation("SE", 1.0),
        _evaluation("LIN*PER + SE", 5.0),
        _evaluation("PER*SE", 3.0),
        _evaluation("LIN*PER + PER*SE + SE", None),  # failed: never a source
    ]
    # Jaccard of the terms of LIN*PER + PER*SE: 1/3 with LIN*PER + SE, 1/2 with PER*SE
    assert related_fits(parse("LIN*PER + PER*SE"), history) == (
        "fit:LIN*PER + SE",
        "fit:PER*SE",
    )
    # the best is also the most similar: one source
    assert related_fits(parse("LIN*PER + RQ + SE"), history) == ("fit:LIN*PER + SE",)
    # ties in similarity go to the higher BIC; an expression never warm-starts itself
    assert related_fits(parse("PER*SE"), history) == ("fit:LIN*PER + SE",)
    assert related_fits(parse("RQ"), []) == ()
    assert related_fits(parse("RQ"), [_evaluation("SE", None)]) == ()


class _RecordingScorer:
    """Scores by the number of terms; records the warm starts it was given."""

    def __init__(self) -> None:
        self.calls: dict[str, tuple] = {}

    def __call__(self, expr, init: tuple = ()) -> Score:
        self.calls[str(expr)] = tuple(init)
        b = float(len(expr.terms))
        return Score(str(expr), "ok", b, b, expr.n_params, 0.0, fit=f"fit:{expr}")


def test_evaluator_warm_starts_from_the_history_before_each_batch() -> None:
    batches = [["SE"], ["SE + PER", "LIN"], ["LIN + PER + SE", "PER"]]
    calls = []
    for executor in (None, ThreadPoolExecutor(2)):
        scorer = _RecordingScorer()
        ev = Evaluator(scorer, budget=10, executor=executor, warm_fits=True)
        for batch in batches:
            ev.evaluate_many([parse(e) for e in batch])
        calls.append(scorer.calls)
    sequential, parallel = calls
    assert sequential == parallel  # same sources whether a batch is fitted in parallel
    assert sequential["SE"] == ()
    # a batch's members never start from each other: LIN saw only SE
    assert sequential["LIN"] == ("fit:SE",)
    assert sequential["PER + SE"] == ("fit:SE",)
    # best so far is PER + SE (2 terms); the most similar to PER is PER + SE as well
    assert sequential["LIN + PER + SE"] == ("fit:PER + SE",)
    # cold evaluators call the scorer with the expression only
    plain = _RecordingScorer()
    Evaluator(plain, budget=3).evaluate_many([parse("SE"), parse("LIN")])
    assert plain.calls == {"SE": (), "LIN": ()}


_PARENTS: dict[str, object] = {}


def _parent(airline: Dataset, expr: str):
    """A well-fitted parent (16 restarts), shared by the tests below."""
    if expr not in _PARENTS:
        _PARENTS[expr] = fit_gp(expr, airline, FitConfig(restarts=16, seed=0))
    return _PARENTS[expr]


@pytest.mark.parametrize(
    ("parent", "child"),
    [
        ("LIN*PER*SE + SE", "LIN*PER*SE + LIN*SE + SE"),  # S -> S + B
        ("LIN*PER*SE + SE", "LIN*LIN*PER*SE + SE"),  # S -> S * B on one term
        ("LIN*PER*SE + PER*SE + SE", "LIN*PER*SE + PER*SE + RQ"),  # B -> B' (SE -> RQ)
    ],
)
def test_warm_fit_is_never_worse_than_the_cold_fit(airline: Dataset, parent, child) -> None:
    parent = _parent(airline, parent)
    config = FitConfig(restarts=2, seed=0)
    cold = fit_gp(child, airline, config)
    warm = fit_gp(child, airline, config, init=parent)
    assert cold.ok and warm.ok
    assert warm.log_likelihood >= cold.log_likelihood - 1e-9
    if set(parse(parent.expression).terms) <= set(parse(child).terms):
        # the child adds to the parent: it starts (almost) at the parent's fit
        assert warm.log_likelihood >= parent.log_likelihood - 1e-2


@pytest.mark.parametrize(("parent", "child"), [("LIN*PER*SE + SE", "LIN*LIN*PER*SE + SE")])
def test_warm_start_finds_what_two_restarts_miss(airline: Dataset, parent, child) -> None:
    """Two bare random restarts often miss the optimum by many nats (19.7 at fit seed 0
    when this was written); started also from the parent's fit, the same two reach what 16
    random restarts find, at every fit seed. Which seeds miss depends on the rounding of
    the CPU's BLAS kernels, so four seeds are tried and at least one must miss.

    A second case, ``LIN*PER*SE + LIN*SE`` -> ``+ SE``, held on the machine it was
    written on (4.4 nats) and not on a SkylakeX OpenBLAS, where the warm start ends at
    the cold fit's optimum at every seed (no worse, no better), 3.4 nats below 16
    restarts."""
    parent = _parent(airline, parent)
    thorough = fit_gp(child, airline, FitConfig(restarts=16, seed=0))
    missed = []
    for seed in range(4):
        # two bare restarts (no presampling, no hops: the default cold fit no longer
        # misses here, benchmarks/results/cold_fit/)
        config = FitConfig(restarts=2, seed=seed, presample=0, hops=0)
        cold = fit_gp(child, airline, config)
        warm = fit_gp(child, airline, config, init=parent)
        assert warm.log_likelihood >= cold.log_likelihood - 1e-9
        # within 0.5 nats: the "reach" of benchmarks/results/cold_fit/ (this surface's
        # top is a ridge: 16 restarts end at 133.16, a warm start at 132.84)
        assert warm.log_likelihood >= thorough.log_likelihood - 0.5
        missed.append(cold.log_likelihood < thorough.log_likelihood - 1.0)
    assert any(missed), "two random restarts found the optimum at every seed: no case"


def test_cached_scorer_keys_warm_fits_by_their_sources(tmp_path, planted_se_per) -> None:
    ds = planted_se_per
    path = tmp_path / "fits.jsonl"
    scorer = CachedScorer(GPScorer(ds, FitConfig(restarts=1)), path)
    source = scorer(parse("SE")).fit
    cold = scorer(parse("PER + SE"))
    warm = scorer(parse("PER + SE"), (source,))
    assert scorer.misses == 3 and warm.log_likelihood >= cold.log_likelihood - 1e-9
    assert warm_key("PER + SE", (source,)) != warm_key("PER + SE") == "PER + SE"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["expression"] for r in rows] == ["SE", "PER + SE", "PER + SE"]
    assert "warm" not in rows[1] and len(rows[2]["warm"]) == 16
    again = CachedScorer(GPScorer(ds, FitConfig(restarts=1)), path)
    assert again(parse("PER + SE"), (source,)).log_likelihood == warm.log_likelihood
    assert again(parse("PER + SE")).log_likelihood == cold.log_likelihood
    assert again.misses == 0 and again.hits == 2
    # lookup reads the cache without fitting: a fit never made is None
    assert again.lookup("PER + SE", (source,)).log_likelihood == warm.log_likelihood
    assert again.lookup("PER*SE") is None and again.misses == 0


def test_journal_fingerprint_tells_warm_from_cold_searches(planted_se_per) -> None:
    cold = fingerprint(planted_se_per, SearchConfig(method="cks", warm_fits=False))
    warm = fingerprint(planted_se_per, SearchConfig(method="cks", warm_fits=True))
    assert "warm_fits" not in cold and warm["warm_fits"] is True


def test_cli_warm_fits_in_parallel_equal_sequential_and_resume_checks_it(tmp_path, capsys) -> None:
    airline = str(ROOT / "data" / "airline.csv")
    args = ["fit", airline, "--search", "cks", "--budget", "8", "--restarts", "2", "--quiet"]
    docs = []
    for name, extra in (("seq", ["--workers", "1"]), ("par", ["--workers", "2"])):
        out = tmp_path / name
        assert main([*args, "--warm-fits", *extra, "--out", str(out)]) == 0
        doc = json.loads((out / "result.json").read_text())
        validate_result_json(doc)
        docs.append([(h["expression"], h["bic"]) for h in doc["history"]])
    capsys.readouterr()
    assert docs[0] == docs[1] and len(docs[0]) == 8
    # a journal of a warm search does not resume as a cold one
    code = main([*args, "--no-warm-fits", "--resume", "--out", str(tmp_path / "seq")])
    err = capsys.readouterr().err
    assert code != 0 and "warm_fits" in err and len(err.strip().splitlines()) == 1


def test_cached_scorer_keys_cold_offset_fits_apart_from_the_fitter_before(
    tmp_path, planted_se_per
) -> None:
    """A cold ``C + X`` starts at ``X``'s cold fit (prolas.gp.fit_gp) since fitter 3 was
    numbered: its row is keyed ``|warm:offset-start``, and a row of the fitter before
    (the expression alone) is not read for it; other cold fits keep their rows."""
    ds = planted_se_per
    path = tmp_path / "fits.jsonl"
    scorer = CachedScorer(GPScorer(ds, FitConfig(restarts=1)), path)
    offset = scorer(parse("C + PER"))
    plain = scorer(parse("PER"))
    assert offset.log_likelihood >= plain.log_likelihood - 1e-6
    assert warm_key("C + PER") == "C + PER|warm:offset-start" and warm_key("PER") == "PER"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows[0]["warm"] == "offset-start" and "warm" not in rows[1]
    assert cold_row(rows[0]) and cold_row(rows[1])
    # a row written by the fitter before, keyed by the expression alone, with a BIC no
    # fit gives: not read for the cold fit of C + PER, which is fitted again
    stale = {**rows[0], "fit": {**rows[0]["fit"], "best": {**rows[0]["fit"]["best"], "bic": 1e6}}}
    stale.pop("warm")
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps(stale) + "\n" + json.dumps(rows[1]) + "\n")
    again = CachedScorer(GPScorer(ds, FitConfig(restarts=1)), old)
    assert again(parse("C + PER")).bic == offset.bic
    assert again(parse("PER")).bic == plain.bic
    assert (again.hits, again.misses) == (1, 1)
