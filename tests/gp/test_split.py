"""A fit split between this process and a worker process gives the fit of one process,
to the last bit; a worker that dies costs time, never the fit."""

from __future__ import annotations

import os

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import prolas.gp.split as split
from prolas.expr import parse
from prolas.gp import fit_gp
from prolas.gp.gram import GramModel
from prolas.gp.minimise import log_likelihood_at, minimise
from prolas.gp.starts import initial_thetas


@pytest.fixture(scope="module")
def ready() -> None:
    if not split.wait_ready(1, timeout=120):
        pytest.fail(f"the fit's worker process did not start: {split.disabled()}")


def _model_and_starts(ds, expr: str, n: int = 5):
    t = (ds.x - ds.x[0]) / ds.span
    floor_t = 2 * ds.spacing / ds.span
    model = GramModel(parse(expr), t, floor_t, ds.spacing / ds.span)
    y = np.ascontiguousarray(ds.y_standardised)
    return model, y, list(initial_thetas(model, y, floor_t, (0, 0), n))


@pytest.mark.parametrize("expr", ["CP(PER*SE, PER*SE)", "LIN*PER + PER*RQ"])
def test_a_split_fit_is_the_fit_of_one_process(airline, ready, expr) -> None:
    """workers=2 on 144 points (below THREADED_FIT_POINTS): half of every batch of
    minimisations runs in the worker; every restart's log-likelihood and every
    hyperparameter agree with the fit in one process."""
    init = fit_gp("PER*SE", airline, restarts=2)  # the warm and exact starts too
    alone = fit_gp(expr, airline, restarts=4, init=init)
    both = fit_gp(expr, airline, restarts=4, init=init, workers=2)
    assert split.disabled() is None and split._POOL is not None
    assert both.restart_log_likelihoods == alone.restart_log_likelihoods
    assert both.to_json() == alone.to_json()


def test_the_split_runs_items_in_order_here_and_in_the_worker(airline, ready) -> None:
    model, y, thetas = _model_and_starts(airline, "PER*SE + LIN")
    with threadpool_limits(limits=1, user_api="blas"):  # as in a fit, and in the worker
        here = [minimise(model, th, y, 15, 1e-7) for th in thetas]
        there = split.ProcessSplit(2).minimise(model, thetas, y, 15, 1e-7)
    for (a, la), (b, lb) in zip(here, there):
        np.testing.assert_array_equal(a, b)
        assert la == lb or (np.isnan(la) and np.isnan(lb))
    with threadpool_limits(limits=1, user_api="blas"):
        values = split.ProcessSplit(2).value(model, thetas, y)
        assert values == [log_likelihood_at(model, th, y) for th in thetas]
        assert split.ProcessSplit(2).value(model, thetas[:1], y) == values[:1]
    with pytest.raises(ValueError, match="at least 2"):
        split.ProcessSplit(1)


def _die(spec, batch):  # a worker's batch that kills its process
    os._exit(3)


def test_a_worker_that_dies_costs_time_not_the_fit(airline, ready, monkeypatch) -> None:
    """The worker is killed in the middle of a batch: its items run here, a warning says
    why once, and the process's later fits run here only."""
    monkeypatch.setattr(split, "_FAILED", None)
    model, y, thetas = _model_and_starts(airline, "PER*SE")
    local = [log_likelihood_at(model, th, y) for th in thetas]  # all here: same threads
    with pytest.warns(RuntimeWarning, match="worker process failed"):
        got = split.ProcessSplit(2)._run(
            model, y, thetas, _die, lambda th: log_likelihood_at(model, th, y)
        )
    assert got == local and split.disabled() is not None
    assert split._POOL is None  # shut down; not started again in this process
    assert split.ProcessSplit(2).value(model, thetas, y) == local
    assert split._POOL is None
    monkeypatch.setattr(split, "_FAILED", None)  # later tests may use the pool again
