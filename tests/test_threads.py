"""How many threads a fit's minimisations get (prolas.threads.fit_threads) and where the
pipeline gives them (in-process fits: the cores; fits in worker processes: one)."""

from __future__ import annotations

import os

import pytest

from prolas.data import Dataset
from prolas.pipeline import make_evaluator
from prolas.search.config import SearchConfig
from prolas.threads import available_cores, fit_threads


def test_fit_threads_are_the_cores_unless_omp_num_threads_says_fewer(monkeypatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert available_cores() == 4 and fit_threads() == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # a worker of --workers 4 on 4 cores
    assert fit_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "16")  # never more than the cores
    assert fit_threads() == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "lots")  # not a number: ignored
    assert fit_threads() == 4


@pytest.mark.parametrize("in_process", [True, False])
def test_in_process_fits_get_the_cores_and_pooled_fits_one_thread(monkeypatch, in_process):
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    ds = Dataset.from_arrays([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 3.0, 2.0, 5.0, 4.0, 6.0])
    with ThreadPoolExecutor(1) as pool:
        ev = make_evaluator(ds, SearchConfig(budget=2), executor=None if in_process else pool)
        assert ev.scorer.workers == (2 if in_process else 1)
