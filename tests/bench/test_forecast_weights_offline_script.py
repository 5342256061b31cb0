"""benchmarks/scripts/forecast_weights_offline.py: the default forecast's weights against
the horizon mixture's, rescored on the fits of a real (tiny) M3 run."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import ROOT, load_script

DATA = ROOT / "data"


@pytest.mark.slow
def test_rescoring_reproduces_the_run_and_scores_every_candidate(tmp_path, monkeypatch):
    from prolas.cli import main

    run = tmp_path / "run"
    argv = ["bench", "--forecast", "m3-monthly", "--series", "N1410", "--methods", "prolas"]
    argv += ["--budget", "7", "--restarts", "1", "--workers", "1", "--data-dir", str(DATA)]
    assert main([*argv, "--out", str(run), "--quiet"]) == 0
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "scripts"))  # its sibling import
    script = load_script("forecast_weights_offline")
    out, md = tmp_path / "rows.csv", tmp_path / "summary.md"
    args = [str(run), "--data-dir", str(DATA), "--candidates", "R0,H5,P5,T5,F1,M6"]
    # R0 must reproduce the run's own scores, or the script stops
    assert script.main([*args, "--out", str(out), "--markdown", str(md)]) == 0
    rows = pd.read_csv(out).set_index("candidate")
    assert (
        list(rows.index) == ["R0", "H5", "P5", "T5", "F1", "M6"]
        and (rows["series"] == "N1410").all()
    )
    # the run forecast with the default trend guard: T5 is the run's own forecast again,
    # from the same models, none of them with a polynomial trend
    from prolas.report.forecast import polynomial_trend

    def names(c):
        return [m.rsplit(":", 1)[0] for m in rows.loc[c, "models"].split(" | ")]

    assert names("T5") == names("R0") and not any(polynomial_trend(m) for m in names("T5"))
    assert rows.loc["T5", "mase"] == pytest.approx(rows.loc["R0", "mase"], rel=1e-12)
    # F1 forecasts with the fixed kernel alone; M6 adds it to the default's models
    assert rows.loc["F1", "models"] == "LIN + PER + SE:1.00"
    assert set(names("M6")) == set(names("R0")) | {"LIN + PER + SE"}
    scores = pd.read_csv(run / "forecast_scores.csv").set_index("method")
    assert rows.loc["R0", "mase"] == pytest.approx(scores.loc["prolas", "mase"], rel=1e-9)
    # H5 and P5 mix the same five models, with weights that sum to 1
    for name in ("H5", "P5"):
        weights = [float(m.rsplit(":", 1)[1]) for m in rows.loc[name, "models"].split(" | ")]
        assert len(weights) == 5 and sum(weights) == pytest.approx(1.0, abs=0.011)
    text = md.read_text()
    assert "| P5 | 1 |" in text and "* P5 mase:" in text
    with pytest.raises(SystemExit):
        script.main([*args[:3], "--candidates", "R0,X9"])
