"""benchmarks/scripts/search_goal_noise.py: the nine-series goal's noise from bench cells."""

from __future__ import annotations

import json
import math
from itertools import product

import numpy as np
import pytest
from conftest import bench_cell, load_script


def _script():
    return load_script("search_goal_noise")


def test_at_least_is_the_poisson_binomial_tail() -> None:
    sn = _script()
    p = [0.2, 0.5, 0.9]
    # brute force over the eight outcomes
    exact = {k: 0.0 for k in range(4)}
    for outcome in product([0, 1], repeat=3):
        exact[sum(outcome)] += math.prod(q if o else 1 - q for q, o in zip(p, outcome))
    for k in range(4):
        assert sn.at_least(p, k) == pytest.approx(sum(exact[j] for j in range(k, 4)))
    assert sn.at_least(p, 4) == 0.0
    assert sn.at_least([1.0] * 9, 7) == pytest.approx(1.0)


def test_margin_verdicts_follow_the_interval() -> None:
    sn = _script()
    above = sn.margin_interval([10.0, 10.5, 11.0, 10.2], target=5.0)
    assert above["verdict"] == "level" and above["p_meet"] == 1.0 and above["at_level"]
    assert above["margin"] == pytest.approx(np.mean([5.0, 5.5, 6.0, 5.2]))
    assert above["low"] <= above["margin"] <= above["high"]
    below = sn.margin_interval([1.0, 1.5, 2.0], target=5.0)
    assert below["verdict"] == "below" and below["p_meet"] == 0.0 and not below["at_level"]
    # two modes either side of CKS: the mean is above, but resampling can put it below
    split = sn.margin_interval([20.0, -40.0, 21.0, 22.0, 19.0], target=0.0)
    assert split["at_level"] and split["verdict"] == "noise" and 0.5 < split["p_meet"] < 1.0
    # a seed with nothing finished by CKS's time is a worst case, not dropped
    none = sn.margin_interval([10.0, -math.inf], target=0.0)
    assert none["margin"] == -math.inf and not none["at_level"] and none["p_meet"] < 1.0


def test_the_study_reads_grids_of_cells(tmp_path) -> None:
    sn = _script()
    # grid g0: CKS reaches 5 in 4 s; PROLAS seeds reach 6, 6, 5 within 2 s: at level
    # grid g1: CKS reaches 9; PROLAS at 6 on every seed: below
    grids = {
        "g0": [bench_cell("cks:change", 0, [1.0, 2.0, 5.0, 5.0])]
        + [bench_cell("prolas", s, [b, b, b, b], seconds=0.5) for s, b in enumerate([6, 6, 5])],
        "g1": [bench_cell("cks:change", 0, [1.0, 2.0, 9.0, 9.0])]
        + [bench_cell("prolas", s, [6.0] * 4, seconds=0.5) for s in range(3)],
    }
    specs = []
    for label, cells in grids.items():
        folder = tmp_path / label
        folder.mkdir()
        for c in cells:
            name = f"d__{c['method'].replace(':', '-')}__seed{c['seed']}.json"
            (folder / name).write_text(json.dumps(c))
        specs += ["--grid", f"{label}={folder}"]
    sn.main([*specs, "--need", "1", "--fit-seeds", "2", "--out", str(tmp_path / "out")])
    rows = (tmp_path / "out" / "grid_series.csv").read_text().splitlines()
    assert rows[1].startswith("g0,d,5.0,4.0,3,") and rows[1].endswith(",level,1.0,True")
    assert rows[2].startswith("g1,d,9.0,4.0,3,") and rows[2].endswith(",below,0.0,False")
    text = (tmp_path / "out" / "search_goal_noise.md").read_text()
    assert "| g0 | 1 | 1 / 0 | 0 | 1.000 |" in text and "| g1 | 0 | 0 / 1 | 0 | 0.000 |" in text
    # pooled: p_meet 0.5 on one series, need 1 -> 0.5 at one fit seed, 0.25 at two
    assert "| d | 2 | 1 / 1 / 0 | 5.00 … 9.00 (4.00) | 0.50 |" in text
    assert "= 0.500; at all 2 fit seeds (independent) = 0.2500." in text
