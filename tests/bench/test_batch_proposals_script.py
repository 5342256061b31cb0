"""benchmarks/scripts/batch_proposals.py: when a run reaches CKS's BIC, and its table."""

from __future__ import annotations

import math

from conftest import load_script


def _script():
    return load_script("batch_proposals")


def test_reach_counts_fits_and_seconds_of_the_running_best() -> None:
    bp = _script()
    entries = [
        {"status": "ok", "bic": 1.0, "elapsed": 0.5},
        {"status": "failed", "bic": None, "elapsed": 0.9},
        {"status": "ok", "bic": 3.0, "elapsed": 1.5},
        {"status": "ok", "bic": 2.0, "elapsed": 2.0},
    ]
    assert bp.reach(entries, 3.0) == (3.0, 1.5)
    assert bp.reach(entries, 3.0 + 1e-9) == (3.0, 1.5)  # within the bench tolerance
    assert bp.reach(entries, 1.0) == (1.0, 0.5)
    assert bp.reach(entries, 3.1) == (math.inf, math.inf)


def test_summary_medians_and_seeds_reaching() -> None:
    bp = _script()
    row = {"data": "d", "method": "prolas q=1", "evaluations": 50}
    rows = [
        {
            **row,
            "seed": 0,
            "best_bic": 1.0,
            "wall_seconds": 10.0,
            "fits_to_cks": 5.0,
            "seconds_to_cks": 2.0,
        },
        {
            **row,
            "seed": 1,
            "best_bic": 3.0,
            "wall_seconds": 30.0,
            "fits_to_cks": math.inf,
            "seconds_to_cks": math.inf,
        },
        {
            **row,
            "seed": 2,
            "best_bic": 2.0,
            "wall_seconds": 20.0,
            "fits_to_cks": 9.0,
            "seconds_to_cks": 4.0,
        },
    ]
    line = bp.summary(rows).splitlines()[-1]
    assert line == "| d | prolas q=1 | 3 | 2.00 ± 0.58 | 20.0 | 9 | 4.0 | 2/3 |"
