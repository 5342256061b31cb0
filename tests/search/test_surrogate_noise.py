"""The OT surrogate's noise floor (``LatentBOConfig.surrogate_noise_floor``) and its
offline replay (``benchmarks/scripts/surrogate_noise_offline.py``)."""

from __future__ import annotations

import importlib
import json
import zlib

import numpy as np
import pytest
from conftest import load_script

from prolas.data import Dataset
from prolas.errors import ProlasError
from prolas.records import Score
from prolas.search.config import SearchConfig
from prolas.search.evaluator import Evaluator
from prolas.search.latent import LatentBOConfig, search_prolas

offline = load_script("surrogate_noise_offline")


@pytest.fixture(scope="module")
def trained():
    from prolas.vae import load_checkpoint

    return load_checkpoint("default")


def _score(e) -> Score:
    bic = zlib.crc32(str(e).encode()) / 2**32 + 0.1 * e.n_params
    return Score(str(e), "ok", bic, bic, e.n_params, 0.0)


def test_the_search_fits_its_surrogate_above_the_floor(trained, monkeypatch) -> None:
    ot_gp = importlib.import_module("prolas.surrogates.ot_gp")
    fitted, fit = [], ot_gp.OTGP.fit.__func__

    def recording(cls, *args, **kwargs):
        model = fit(cls, *args, **kwargs)
        fitted.append((kwargs.get("noise_floor"), model.hyperparameters["noise"]))
        return model

    monkeypatch.setattr(ot_gp.OTGP, "fit", classmethod(recording))
    x = np.linspace(0.0, 1.0, 60)
    data = Dataset.from_arrays(x, np.sin(6 * x), name="synthetic")
    options = LatentBOConfig(surrogate_noise_floor=0.05, pool_sobol=64, pool_local=64)
    res = search_prolas(
        Evaluator(_score, 16), data, SearchConfig(budget=16), trained=trained, options=options
    )
    assert res.evaluations == 16 and len(fitted) >= 4
    assert all(floor == 0.05 and noise >= 0.05 for floor, noise in fitted)


def test_the_floor_must_be_positive() -> None:
    with pytest.raises(ProlasError, match="surrogate_noise_floor"):
        LatentBOConfig(surrogate_noise_floor=0.0)
    assert LatentBOConfig.from_record({}).surrogate_noise_floor == 1e-4


def test_the_offline_replay_predicts_each_later_success_once_per_floor(tmp_path) -> None:
    exprs = ["SE", "LIN", "PER", "RQ", "C", "SE + LIN", "PER*SE", "LIN*PER", "RQ + PER"]
    exprs += ["SE*RQ", "LIN + PER", "CP(SE, LIN)", "PER + SE", "LIN*SE"]
    rows = []
    for i, e in enumerate(exprs, start=1):
        k = 2 + e.count("+") + e.count("*") + 3 * e.count("CP")
        ok = e != "CP(SE, LIN)"  # one failure: a training target, never predicted
        bic = float(i % 5) - 0.3 * k if ok else None
        rows.append(
            {
                "index": i,
                "expression": e,
                "status": "ok" if ok else "failed",
                "bic": bic,
                "log_likelihood": None if bic is None else bic + 2.0 * k,
                "n_params": k,
            }
        )
    # a repair of evaluation 3 after evaluation 11 changes its target from then on
    rows.insert(11, {**rows[2], "bic": 5.0, "log_likelihood": 5.0 + 2.0 * 2, "repaired_from": "X"})
    path = tmp_path / "journal.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [{"prolas_journal": 1}, *rows]) + "\n")
    table = offline.replay(offline.journal_rows(path), [1e-4, 0.05], n_init=10)
    # predicted: evaluations 11..14 except the failure (12): 3 per floor
    assert sorted(table.step.unique()) == [10, 12, 13]
    assert len(table) == 6 and np.isfinite(table.lpd).all()
    # the targets are log-likelihoods: BIC + k/2 ln N, with (ll - bic) / k = 2
    first = table[(table.floor == 1e-4) & (table.step == 10)].iloc[0]
    assert first.y == pytest.approx(rows[10]["bic"] + 2.0 * rows[10]["n_params"])
    # the repair (after the first prediction) moves the later predictions only
    unrepaired = [r for r in rows if "repaired_from" not in r]
    plain = offline.replay(unrepaired, [1e-4], n_init=10)
    repaired = table[table.floor == 1e-4]
    assert plain.mu.iloc[0] == pytest.approx(repaired.mu.iloc[0], rel=1e-9, abs=1e-9)
    assert abs(plain.mu.iloc[1] - repaired.mu.iloc[1]) > 1e-6
    # both floors predict the same recorded path: the same points, the same truths
    a, b = (table[table.floor == f].reset_index() for f in (1e-4, 0.05))
    assert list(a.step) == list(b.step) and list(a.y) == list(b.y)


def test_a_failed_fit_is_scored_below_the_worst_success() -> None:
    from prolas.search.latent import failed_fit_target

    assert failed_fit_target([0.0, 5.0], 0.1) == -1.0  # at least 1 below the worst
    assert failed_fit_target([0.0, 100.0], 0.1) == pytest.approx(-10.0)  # 10 % of the range
    assert failed_fit_target([3.0], 0.1) == 2.0
