"""Shared fixtures: repository paths, small real and synthetic data sets."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

from prolas.processes import main_module_is_guarded

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"

#: The quickest real search for end-to-end CLI tests: `prolas fit DATA *QUICK_CKS ...`.
QUICK_CKS = ("--search", "cks", "--budget", "3", "--restarts", "1")

# Small-N fits are fastest single-threaded (docs/fit.md); also keeps tests stable on 2 cores.
torch.set_num_threads(1)
# pytest's entry points run nothing on import: a fit's worker processes may start here
# (prolas.processes.main_module_rerun_by_workers), so tests/gp/test_split.py splits.
main_module_is_guarded()


def load_script(name: str) -> ModuleType:
    """The benchmark script ``benchmarks/scripts/<name>.py`` as a module (scripts are not a
    package; their tests call its functions)."""
    path = ROOT / "benchmarks" / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_cell(
    method: str, seed: int, bics: list, seconds: float = 1.0, strategy: float = 0.0
) -> dict:
    """A bench cell of data set ``d`` whose history scores ``bics`` in order (None: a
    failed fit), each fit taking ``seconds``, plus ``strategy`` seconds of proposals."""
    history = [
        {
            "index": i + 1,
            "status": "ok" if b is not None else "failed",
            "bic": b,
            "seconds": seconds,
        }
        for i, b in enumerate(bics)
    ]
    return {
        "dataset": "d",
        "method": method,
        "seed": seed,
        "evaluations": len(bics),
        "history": history,
        "fit_seconds": seconds * len(bics),
        "strategy_seconds": strategy,
        "wall_seconds": seconds * len(bics) + strategy,
        "new_fits": len(bics),
    }


def fit_from_params(expression: str, terms: list[dict], n: int, noise: float = 0.01):
    """A FitResult with given natural-unit hyperparameters (``terms`` in canonical order,
    as in result.json's ``best.terms``); its scores are placeholders."""
    from prolas.expr import parse
    from prolas.gp import FitResult

    best = {
        "expression": expression,
        "log_likelihood": 0.0,
        "n_params": parse(expression).n_params,
        "bic": 0.0,
        "terms": terms,
        "noise_variance": noise,
    }
    return FitResult.from_json(best, n=n)


def assert_ot_pseudometric(exprs: list) -> None:
    """The OT distance's laws on ``exprs`` (prolas.surrogates.ot): symmetric (also
    computed in the other order without the registry's cache), zero on identical
    expressions, positive between different base-kernel counts, the triangle inequality
    on all triples; the normalised distance in [0, 1]."""
    from prolas.surrogates.ot import ExpressionRegistry, expression_graph, otmann_distance

    reg = ExpressionRegistry()
    idx = reg.indices(exprs)
    d, db = reg.distances(idx, idx)
    assert np.all(np.isfinite(d)) and np.allclose(d, d.T, atol=1e-12)
    same = np.array([[str(a) == str(b) for b in exprs] for a in exprs])
    assert np.all(d[same] == 0.0)
    # a pseudometric: d = 0 only if the graphs have the same labelled nodes and path
    # lengths, so expressions with different base-kernel counts are always apart
    counts = np.array([[a.base_counts != b.base_counts for b in exprs] for a in exprs])
    assert np.all(d[counts] > 0.0)
    assert np.all((db >= 0) & (db <= 1 + 1e-12))
    # triangle inequality on all triples (d only; d_bar is not a metric)
    viol = d[:, None, :] - (d[:, :, None] + d[None, :, :])
    assert viol.max() <= 1e-9
    graphs = [expression_graph(e) for e in exprs[-8:]]
    for a in graphs:
        for b in graphs:
            assert otmann_distance(a, b)[0] == pytest.approx(otmann_distance(b, a)[0], abs=1e-12)


@pytest.fixture
def fixed_fit_calls(monkeypatch) -> list:
    """Counts the fixed forecast kernel's fits (``prolas.report.forecast.fixed_fit``):
    one entry per call, the real fit still made."""
    import prolas.report.forecast as fc_module

    calls: list = []
    real = fc_module.fixed_fit

    def counted(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(fc_module, "fixed_fit", counted)
    return calls


@pytest.fixture(scope="session")
def airline():
    from prolas.data import load_csv

    return load_csv(DATA / "airline.csv")


@pytest.fixture(scope="session")
def planted_se_per():
    """100 points drawn from SE + PER(period 1) with noise; seeds fixed."""
    from prolas.data import Dataset

    rng = np.random.default_rng(3)
    x = np.linspace(0.0, 8.0, 100)
    d = x[:, None] - x[None, :]
    K = 1.0 * np.exp(-(d**2) / (2 * 2.0**2)) + 1.0 * np.exp(
        -2 * np.sin(np.pi * np.abs(d) / 1.0) ** 2 / 1.0**2
    )
    L = np.linalg.cholesky(K + 1e-8 * np.eye(100))
    y = L @ rng.standard_normal(100) + 0.1 * rng.standard_normal(100)
    return Dataset.from_arrays(x, y, name="planted")


@pytest.fixture(scope="session")
def trend_season():
    """60 monthly points: a linear trend plus a yearly cycle plus noise (the forecast
    tests' data)."""
    from prolas.data import Dataset

    rng = np.random.default_rng(5)
    x = 2000 + np.arange(60) / 12
    y = 3 * (x - 2000) + np.sin(2 * np.pi * x) + 0.1 * rng.standard_normal(60)
    return Dataset.from_arrays(x, y, name="trend_season")


@pytest.fixture(scope="session")
def fits(trend_season):
    """A good model of trend_season (``LIN + PER``) and two that miss its cycle or its
    trend (``SE``, ``LIN``; far lower BIC)."""
    from prolas.gp import fit_gp

    return [fit_gp(e, trend_season, restarts=2) for e in ("LIN + PER", "SE", "LIN")]
