"""benchmarks/scripts/forecast_weights_offline.py: the default forecast's weights against
the horizon mixture's, rescored on the fits of a real (tiny) M3 run."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import ROOT, load_script

DATA = ROOT / "data"


@pytest.mark.slow
def test_rescoring_reproduces_the_run_and_scores_every_candidate(tmp_path, monkeypatch):
    from prolas.cli import main

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "scripts"))  # its sibling import
    script = load_script("forecast_weights_offline")
    rows = {}
    # N1410 has 126 training points: by default its forecast is the fixed kernel's
    for source in ("search", "auto"):
        run = tmp_path / source
        argv = ["bench", "--forecast", "m3-monthly", "--series", "N1410", "--methods", "prolas"]
        argv += ["--budget", "7", "--restarts", "1", "--workers", "1", "--data-dir", str(DATA)]
        argv += ["--forecast-from", source]
        assert main([*argv, "--out", str(run), "--quiet"]) == 0
        out, md = tmp_path / f"{source}.csv", tmp_path / f"{source}.md"
        args = [str(run), "--data-dir", str(DATA), "--candidates", "R0,H5,P5,T5,F1,M6,F3"]
        # R0 must reproduce the run's own scores, or the script stops
        assert script.main([*args, "--out", str(out), "--markdown", str(md)]) == 0
        rows[source] = pd.read_csv(out).set_index("candidate")
        scores = pd.read_csv(run / "forecast_scores.csv").set_index("method")
        got = rows[source].loc["R0", "mase"]
        assert got == pytest.approx(scores.loc["prolas", "mase"], rel=1e-9)
    search, auto = rows["search"], rows["auto"]
    assert list(search.index) == ["R0", "H5", "P5", "T5", "F1", "M6", "F3"]
    assert (search["series"] == "N1410").all()
    # the run forecast with the default trend guard: T5 is the run's own forecast again,
    # from the same models, none of them with a polynomial trend
    from prolas.report.forecast import polynomial_trend

    def names(t, c):
        return [m.rsplit(":", 1)[0] for m in t.loc[c, "models"].split(" | ")]

    assert names(search, "T5") == names(search, "R0")
    assert not any(polynomial_trend(m) for m in names(search, "T5"))
    assert search.loc["T5", "mase"] == pytest.approx(search.loc["R0", "mase"], rel=1e-12)
    # F1 forecasts with the fixed kernel alone; M6 adds it to the default's models
    assert search.loc["F1", "models"] == "LIN + PER + SE:1.00"
    assert set(names(search, "M6")) == set(names(search, "R0")) | {"LIN + PER + SE"}
    # F3 mixes LIN + PER + SE's fits at three seeds with the period free; by default the
    # run's own forecast (R0, reproduced) mixes three fits of LIN + PER*SE + SE with it held
    # at the season (M3: 12 steps, one year)
    assert search.loc["F3", "models"] == " | ".join(["LIN + PER + SE:0.33"] * 3)
    assert auto.loc["R0", "models"] == " | ".join(["LIN + PER*SE + SE:0.33"] * 3)
    predictive = (tmp_path / "auto" / "prolas" / "N1410" / "test_predictive.json").read_text()
    assert json.loads(predictive)["season"] == pytest.approx(1.0, rel=1e-5)  # x to 6 decimals
    assert auto.loc["R0", "mase"] != pytest.approx(auto.loc["F3", "mase"], rel=1e-6)
    for key in ("mase", "coverage", "interval_score_scaled", "crps_scaled"):
        assert auto.loc["F3", key] == pytest.approx(search.loc["F3", key], rel=1e-9)
        assert auto.loc["T5", key] == pytest.approx(search.loc["R0", key], rel=1e-9)
    # H5 and P5 mix the same five models, with weights that sum to 1
    for name in ("H5", "P5"):
        weights = [float(m.rsplit(":", 1)[1]) for m in search.loc[name, "models"].split(" | ")]
        assert len(weights) == 5 and sum(weights) == pytest.approx(1.0, abs=0.011)
    text = (tmp_path / "search.md").read_text()
    assert "| P5 | 1 |" in text and "* P5 mase:" in text
    with pytest.raises(SystemExit):
        script.main([str(tmp_path / "auto"), "--data-dir", str(DATA), "--candidates", "R0,X9"])
