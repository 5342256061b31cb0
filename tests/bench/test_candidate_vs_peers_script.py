"""benchmarks/scripts/candidate_vs_peers.py: a fixed-kernel candidate paired with the peers."""

from __future__ import annotations

import numpy as np
import pandas as pd
from conftest import load_script


def _tables(shift: float, n: int = 40) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Candidate rows at fit seed 0 and peer rows on ``n`` series; the candidate's MASE is
    the peers' plus ``shift`` (plus noise), its other metrics equal to the peers'."""
    rng = np.random.default_rng(1)
    series = [f"S{i}" for i in range(n)]
    base = rng.uniform(0.5, 1.5, n)
    metrics = {"interval_score_scaled": base * 5, "crps_scaled": base / 2, "coverage": 0.9}
    peers = pd.concat(
        pd.DataFrame({"series": series, "method": m, "status": "ok", "mase": base, **metrics})
        for m in ("ets", "arima", "theta", "snaive")
    )
    noise = rng.normal(0, 0.01, n)
    rows = pd.DataFrame(
        {"series": series, "seed": 0, "candidate": "Q3", "status": "ok"}
        | {"mase": base + shift + noise, **metrics}
    )
    # another candidate's rows and a failed fit are not the candidate's
    rows = pd.concat([rows, rows.assign(candidate="QD6", mase=9.0)])
    rows.loc[rows.index[0], "status"] = "failed"
    return rows, peers


def test_a_clearly_better_candidate_gets_the_verdict_and_a_tie_does_not():
    script = load_script("candidate_vs_peers")
    rows, peers = _tables(shift=-0.1)
    table = script.paired_table(rows, peers, "Q3", 0)
    assert set(table.method) == {"Q3", "ets", "arima", "theta"}
    assert (table.method == "Q3").sum() == 39  # the failed fit is dropped
    lines = script.report(rows, peers, "Q3")
    mase = [ln for ln in lines if "| mase |" in ln]
    assert len(mase) == 3 and all("Q3 better" in ln and "| 39 |" in ln for ln in mase)
    # equal metrics: every pair tied, no verdict
    assert all("no pairs" not in ln for ln in lines)
    ties = [ln for ln in lines if "| crps_scaled |" in ln]
    assert all("no clear difference" in ln for ln in ties)

    rows, peers = _tables(shift=0.0)
    mase = [ln for ln in script.report(rows, peers, "Q3") if "| mase |" in ln]
    assert all("no clear difference" in ln for ln in mase)
