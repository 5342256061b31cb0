"""Parallel evaluation (process pool, Dask), worker faults, and crash/Ctrl-C + resume end to end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from prolas.cli import main
from prolas.data import Dataset
from prolas.expr import Expression, parse
from prolas.gp import FitConfig, GPScorer
from prolas.records import Score
from prolas.report import validate_result_json
from prolas.search.evaluator import Evaluator
from prolas.search.executors import ExecutorError, ProcessPool, default_workers, make_executor
from prolas.search.greedy import search_cks
from prolas.search.journal import JournalWarning

AIRLINE = str(ROOT / "data" / "airline.csv")
BASE = ("SE", "LIN", "PER", "RQ")


def _score(expr: Expression) -> Score:
    key = str(expr)
    v = float(len(key) + 3 * key.count("+"))  # deterministic, favours sums
    return Score(key, "ok", v, v + 1.0, expr.n_params, 0.01)


class SlowFirstScorer:
    """Sleeps ``delay`` seconds on ``slow``; logs every finish (in finishing order) to a file."""

    def __init__(self, log: Path, slow: str, delay: float) -> None:
        self.log, self.slow, self.delay = str(log), slow, delay

    def __call__(self, expr: Expression) -> Score:
        if str(expr) == self.slow:
            time.sleep(self.delay)
        with open(self.log, "a") as fh:
            fh.write(str(expr) + "\n")
        return _score(expr)


class FaultyScorer:
    """Dies (``os._exit``) or raises on chosen expressions, only inside worker processes.

    ``times`` = how many attempts of a chosen expression fail (0 = every attempt);
    attempts are counted with marker files so the count survives dead workers.
    """

    def __init__(self, marks: Path, die=(), raise_=(), times: int = 0) -> None:
        self.marks, self.die, self.raise_, self.times = str(marks), set(die), set(raise_), times
        self.parent = os.getpid()

    def attempts(self, key: str) -> int:
        return sum(1 for f in os.listdir(self.marks) if f.startswith(key + "."))

    def __call__(self, expr: Expression) -> Score:
        key = str(expr)
        if os.getpid() != self.parent and key in self.die | self.raise_:
            n = self.attempts(key)
            Path(self.marks, f"{key}.{n + 1}").touch()
            if self.times == 0 or n < self.times:
                if key in self.die:
                    os._exit(1)  # the worker process dies mid-fit
                raise RuntimeError(f"fit of {key} blew up")
        return _score(expr)


class IntervalScorer:
    """Sleeps ``delay`` s per fit and logs each fit's (start, end) wall-clock interval."""

    def __init__(self, log: Path, delay: float) -> None:
        self.log, self.delay = str(log), delay

    def __call__(self, expr: Expression) -> Score:
        t0 = time.time()
        time.sleep(self.delay)
        with open(self.log, "a") as fh:
            fh.write(f"{expr}\t{t0}\t{time.time()}\n")
        return _score(expr)

    def overlaps(self) -> int:
        """Pairs of fits that ran at the same time (in different worker processes)."""
        rows = [line.split("\t") for line in Path(self.log).read_text().splitlines()]
        iv = [(float(a), float(b)) for _, a, b in rows]
        pairs = [(a, b) for i, a in enumerate(iv) for b in iv[:i]]
        return sum(1 for a, b in pairs if a[0] < b[1] and b[0] < a[1])


@pytest.fixture(scope="module")
def pool():
    p = ProcessPool(2)
    yield p
    p.shutdown()


def test_out_of_order_completion_keeps_proposal_order(tmp_path, pool) -> None:
    log = tmp_path / "finished.txt"
    seen = []
    ev = Evaluator(SlowFirstScorer(log, "SE", 1.5), budget=10, executor=pool, on_result=seen.append)
    out = ev.evaluate_many([parse(e) for e in BASE])
    finished = log.read_text().split()
    assert finished[-1] == "SE" and sorted(finished) == sorted(BASE)  # SE finished last
    assert [e.expression for e in out] == list(BASE)
    assert [e.expression for e in ev.history] == list(BASE)
    assert [e.index for e in ev.history] == [1, 2, 3, 4]
    assert [e.expression for e in seen] == list(BASE)  # journal/progress order too


def test_worker_killed_mid_fit_is_retried_and_the_batch_completes(tmp_path, pool) -> None:
    replaced = pool.replaced
    scorer = FaultyScorer(tmp_path, die={"PER"}, times=1)
    ev = Evaluator(scorer, budget=10, executor=pool)
    out = ev.evaluate_many([parse(e) for e in (*BASE, "LIN + SE")])
    assert [e.status for e in out] == ["ok"] * 5
    assert [e.bic for e in out] == [_score(parse(e)).bic for e in (*BASE, "LIN + SE")]
    assert scorer.attempts("PER") == 2 and pool.replaced == replaced + 1


def _exit_worker() -> None:
    os._exit(3)


@pytest.mark.parametrize("how", ["shutdown", "replace"])
def test_a_worker_the_broken_pool_did_not_stop_cannot_hang_us(monkeypatch, how) -> None:
    """Seen once in CI: a pool broke, one idle worker was left in its process table
    (a submit had raced the breaking), and CPython 3.11's manager thread joined it
    forever, so pytest hung at exit. The state is recreated exactly: the manager's
    final join meets a live process it did not stop. ProcessPool must kill it when it
    replaces (next submit) or shuts down the broken pool."""
    import multiprocessing
    import threading
    from concurrent.futures import process

    stuck: list = []
    added = threading.Event()
    original = process._ExecutorManagerThread.join_executor_internals

    def join_with_a_straggler(self) -> None:
        if stuck:  # only the broken pool (the first to get here); a replacement is normal
            return original(self)
        proc = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(3600,))
        proc.start()
        self.processes[-1] = proc  # as if spawned after the manager terminated the others
        stuck.append(proc)
        added.set()
        original(self)

    monkeypatch.setattr(
        process._ExecutorManagerThread, "join_executor_internals", join_with_a_straggler
    )
    pool = ProcessPool(1, threads=1)
    try:
        with pytest.raises(process.BrokenProcessPool):
            pool.submit(_exit_worker).result(timeout=60)
        assert added.wait(timeout=60) and stuck[0].is_alive()
        if how == "replace":
            assert pool.submit(os.getpid).result(timeout=60) > 0 and pool.replaced == 1
        done = threading.Thread(target=pool.shutdown, daemon=True)
        done.start()
        done.join(timeout=30)
        assert not done.is_alive(), "shutdown hung on the broken pool's straggler"
        # the pool's manager thread reaps the straggler too; two threads waiting on one
        # child can make Process.is_alive() say True for a moment after it died, so wait
        # for the exit code the reaping thread records
        deadline = time.time() + 20
        while stuck[0].exitcode is None and time.time() < deadline:
            time.sleep(0.05)
        assert stuck[0].exitcode is not None, "the straggler survived"
    finally:
        for proc in stuck:
            proc.kill()


def test_worker_that_always_dies_is_recorded_failed_and_search_goes_on(tmp_path, pool) -> None:
    scorer = FaultyScorer(tmp_path, die={"PER"})
    ev = Evaluator(scorer, budget=30, executor=pool, retries=1)
    result = search_cks(ev, depth=2)
    by = {e.expression: e for e in result.history}
    assert by["PER"].status == "failed" and "BrokenProcessPool" in by["PER"].error
    assert all(by[k].ok for k in ("SE", "LIN", "RQ"))
    # the search went on through level 2 (the expansions of the level-1 winner)
    assert result.extra["stopped"] == "depth" and result.evaluations > 4
    # charged only for runs where it was alone (1 + 1 retry), after at most two
    # resubmissions as part of a batch whose pool it broke
    assert 2 <= scorer.attempts("PER") <= 4


def test_raising_worker_is_retried_once_then_recorded_failed(tmp_path, pool) -> None:
    flaky = FaultyScorer(tmp_path / "a", raise_={"RQ"}, times=1)
    (tmp_path / "a").mkdir()
    ev = Evaluator(flaky, budget=4, executor=pool)
    assert [e.status for e in ev.evaluate_many([parse(e) for e in BASE])] == ["ok"] * 4
    (tmp_path / "b").mkdir()
    bad = FaultyScorer(tmp_path / "b", raise_={"RQ"})
    ev = Evaluator(bad, budget=4, executor=pool, retries=1)
    out = ev.evaluate_many([parse(e) for e in BASE])
    assert [e.status for e in out] == ["ok", "ok", "ok", "failed"]
    assert "RuntimeError: fit of RQ blew up" in out[3].error and bad.attempts("RQ") == 2


@pytest.mark.parametrize("method", ["random", "structural"])
def test_batch_proposals_of_other_strategies_run_in_parallel(tmp_path, pool, method) -> None:
    from prolas.grammar import Grammar
    from prolas.search.random_search import search_random
    from prolas.search.structural import search_structural

    scorer = IntervalScorer(tmp_path / "iv.tsv", 0.3)
    ev = Evaluator(scorer, budget=8, executor=pool)
    if method == "random":
        res = search_random(ev, Grammar.default(), seed=0, batch=4)
    else:
        res = search_structural(
            ev, Grammar.from_file("small"), acq_opt="random", n_init=4, seed=0, batch=2
        )
    assert res.evaluations == 8
    assert scorer.overlaps() >= 3  # fits of one batch overlapped in time on the 2 workers
    seq = Evaluator(_score, budget=8)
    if method == "random":
        ref = search_random(seq, Grammar.default(), seed=0, batch=4)
    else:
        ref = search_structural(
            seq, Grammar.from_file("small"), acq_opt="random", n_init=4, seed=0, batch=2
        )
    assert [e.expression for e in res.history] == [e.expression for e in ref.history]


def test_executor_options() -> None:
    with make_executor(workers=1) as ex:
        assert ex is None
    with pytest.raises(ExecutorError, match="not both"):
        with make_executor(scheduler="tcp://127.0.0.1:1", dask_local=2):
            pass
    with pytest.raises(ExecutorError, match="tcp://HOST:PORT"):
        with make_executor(scheduler="localhost"):
            pass
    assert default_workers("cks", 1, 50, cores=2) == 2
    assert default_workers("prolas", 1, 50, cores=2) == 1  # sequential BO: nothing to share
    assert default_workers("prolas", 4, 50, cores=2) == 2
    assert default_workers("cks", 1, 6, cores=2) == 1  # small job: no pool start-up


@pytest.mark.slow
def test_dask_local_cluster_cks_equals_sequential() -> None:
    rng = np.random.default_rng(0)
    x = np.linspace(0.0, 6.0, 40)
    y = np.sin(2 * np.pi * x / 1.5) + 0.3 * x + 0.1 * rng.standard_normal(40)
    scorer = GPScorer(Dataset.from_arrays(x, y, name="tiny"), FitConfig(restarts=1, max_iter=60))
    seq = search_cks(Evaluator(scorer, budget=9), depth=2)
    with make_executor(dask_local=2) as ex:
        assert type(ex).__name__ == "ClientExecutor"
        par = search_cks(Evaluator(scorer, budget=9, executor=ex), depth=2)
    assert [e.expression for e in par.history] == [e.expression for e in seq.history]
    for a, b in zip(par.history, seq.history):
        assert a.status == b.status == "ok"
        assert a.bic == pytest.approx(b.bic, rel=1e-9, abs=1e-9)
    assert par.best.expression == seq.best.expression


def _journal_lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True) if path.exists() else []


def _wait_for_entries(proc: subprocess.Popen, journal: Path, k: int, timeout: float = 150) -> None:
    t0 = time.monotonic()
    while len(_journal_lines(journal)) < k + 1:  # header + k evaluations
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() - t0 < timeout, "no progress"
        time.sleep(0.05)


@pytest.mark.slow
def test_sigkill_then_ctrl_c_then_resume_keeps_every_journalled_fit(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    journal = out / "journal.jsonl"
    budget = 8
    args = ["fit", AIRLINE, "--search", "cks", "--restarts", "1", "--budget", str(budget)]
    args += ["--out", str(out), "--workers", "1", "--quiet"]
    cmd = [sys.executable, "-m", "prolas.cli", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    # 1. killed with SIGKILL after 3 journalled evaluations (no chance to clean up)
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        _wait_for_entries(proc, journal, 3)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed = _journal_lines(journal)
    k1 = len(killed) - 1
    assert 3 <= k1 < budget and not (out / "result.json").exists()

    # 2. resumed, then interrupted with Ctrl-C (SIGINT): exit 130 and a valid partial result
    # a process started in the background by a non-interactive shell inherits SIGINT as
    # ignored, and Python then never raises KeyboardInterrupt: give the child the default
    proc = subprocess.Popen(
        [*cmd, "--resume"],
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        _wait_for_entries(proc, journal, k1 + 2)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read().decode()
    assert code == 130, err
    assert "partial result" in err and "--resume" in err
    partial = json.loads((out / "result.json").read_text())
    validate_result_json(partial)
    interrupted = _journal_lines(journal)
    assert interrupted[: k1 + 1] == killed  # nothing journalled was redone or rewritten
    assert k1 + 2 <= partial["search"]["evaluations"] < budget

    # 3. a power cut tore the last line; resuming drops it with a warning and finishes
    with open(journal, "a") as fh:
        fh.write(interrupted[-1][:40])
    k2 = len(interrupted) - 1
    with pytest.warns(JournalWarning, match="torn last line"):
        code = main([*args[:-1], "--resume"])  # without --quiet: warnings are shown
    assert code == 0, capsys.readouterr().err
    final = _journal_lines(journal)
    assert final[: k2 + 1] == interrupted  # every journalled evaluation kept, byte for byte
    rows = [json.loads(line) for line in final[1:]]
    assert len(rows) == budget  # each expression fitted exactly once: none refitted
    assert len({r["expression"] for r in rows}) == budget
    doc = json.loads((out / "result.json").read_text())
    validate_result_json(doc)
    assert doc["search"]["evaluations"] == budget
    assert [(h["expression"], h["bic"]) for h in doc["history"]] == [
        (r["expression"], r["bic"]) for r in rows
    ]


def test_resume_without_journal_and_bad_executor_options_are_one_line_errors(
    tmp_path, capsys
) -> None:
    code = main(["fit", AIRLINE, "--out", str(tmp_path / "x"), "--resume", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "nothing to resume" in err and len(err.strip().splitlines()) == 1
    code = main(
        ["fit", AIRLINE, "--out", str(tmp_path / "y"), "--dask-local", "2"]
        + ["--workers", "2", "--quiet"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "--workers" in err
