"""prolas bench --forecast: suites, the peers' adapter, paired comparisons, outputs."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import DATA

from prolas.bench import forecast_bench as fb
from prolas.bench.paired import bootstrap_interval, compare, differences, sign_test, verdict
from prolas.errors import ProlasError
from prolas.report.scoring import QUANTILE_LEVELS

# --- paired comparisons ----------------------------------------------------------------


def test_sign_test_by_hand() -> None:
    # six of six better: two-sided p = 2 / 2^6
    assert sign_test(np.array([-1.0, -2, -3, -4, -5, -6])) == (6, 0, 0, pytest.approx(2 / 64))
    # ties are dropped from the trials; NaNs ignored
    better, worse, ties, p = sign_test(np.array([-1.0, 0.0, 2.0, np.nan]))
    assert (better, worse, ties) == (1, 1, 1) and p == pytest.approx(1.0)
    assert math.isnan(sign_test(np.zeros(3))[3])


def test_bootstrap_interval_and_verdict() -> None:
    assert bootstrap_interval(np.full(5, -0.5)) == (-0.5, -0.5, -0.5)  # no spread
    d = np.random.default_rng(1).normal(-1.0, 0.1, size=40)
    mean, low, high = bootstrap_interval(d)
    assert low < mean < high < 0 and mean == pytest.approx(d.mean())
    assert bootstrap_interval(d) == (mean, low, high)  # fixed seed
    # a verdict needs the interval and the sign test to agree
    assert verdict(low, high, 40, 0, 1e-12) == "prolas better"
    assert verdict(0.1, 0.2, 0, 40, 1e-12, other="ets") == "ets better"
    assert verdict(-2.0, -1.0, 2, 0, 0.5) == "no clear difference"  # two series: no verdict
    assert verdict(-0.1, 0.2, 30, 10, 0.001) == "no clear difference"


def test_differences_favour_the_first_method_when_negative() -> None:
    assert differences([1.0], [2.0], "rmse")[0] == pytest.approx(math.log(0.5))
    assert differences([0.94], [0.80], "coverage")[0] == pytest.approx(0.01 - 0.15)
    assert differences([0.3], [0.5], "mase")[0] == pytest.approx(-0.2)
    # a higher BIC is better, a shorter search too
    assert differences([-70.0], [-72.5], "bic")[0] == pytest.approx(-2.5)
    assert differences([10.0], [20.0], "search_seconds")[0] == pytest.approx(math.log(0.5))


def test_search_comparison_counts_bic_ties_and_the_time_ratio() -> None:
    """prolas's best BIC against CKS's per half: within BIC_TIE counts as at least."""
    rows = []
    # (series, half, prolas bic, cks bic, prolas s, cks s)
    for name, half, bp, bc, sp, sc in [
        ("a", "tuning", -70.0, -72.0, 20.0, 10.0),  # higher
        ("b", "tuning", -50.05, -50.0, 30.0, 10.0),  # a tie within 0.1
        ("c", "report", -80.0, -79.0, 10.0, 20.0),  # lower
        ("d", "report", 5.0, 4.0, 8.0, 8.0),  # higher
    ]:
        rows.append(dict(series=name, half=half, method="prolas", bic=bp, search_seconds=sp))
        rows.append(dict(series=name, half=half, method="cks", bic=bc, search_seconds=sc))
    lines = fb.search_comparison(pd.DataFrame(rows))
    table = {line.split(" | ")[0].strip("| "): line for line in lines if line.startswith("| ")}
    assert table["tuning"] == "| tuning | 2 | 2 (100%) | 1 | 0 | 25.0 / 10.0 | 2.50 |"
    assert table["report"] == "| report | 2 | 1 (50%) | 1 | 1 | 9.0 / 14.0 | 0.75 |"
    assert table["all"].startswith("| all | 4 | 3 (75%) | 2 | 1 |")


def test_compare_pairs_only_series_both_scored() -> None:
    table = pd.DataFrame(
        {
            "series": ["a", "a", "b", "b", "c", "c"],
            "method": ["prolas", "ets"] * 3,
            "mase": [0.5, 1.0, 0.7, 1.0, np.nan, 1.0],
        }
    )
    row = compare(table, "prolas", ["ets"], ["mase"]).iloc[0]
    assert (row.series, row.better, row.worse) == (2, 2, 0)
    assert row["mean"] == pytest.approx(-0.4) and row.verdict == "no clear difference"


# --- suites ----------------------------------------------------------------------------


def test_tsdl_suite_periods_and_halves() -> None:
    pairs = fb.suite_series("tsdl", DATA)
    assert [s.name for s, _ in pairs] == list(fb.TSDL_SEASON_LENGTH)
    by = {s.name: (s, h) for s, h in pairs}
    air, half = by["airline"]
    assert half == "tuning" and air.season_length == 12 and air.test_x.size == 15
    assert by["wages"][0].season_length == 1 and by["wages"][1] == "report"
    assert [s.name for s, _ in fb.suite_series("tsdl", DATA, "tuning")] == list(fb.TSDL_TUNING)


def test_m3_suite_halves_follow_the_file_positions() -> None:
    pairs = fb.suite_series("m3-monthly", DATA)
    assert len(pairs) == 150 and all(s.error is None for s, _ in pairs)
    assert all(s.test_x.size == 18 and s.season_length == 12 for s, _ in pairs)
    assert [h for _, h in pairs[:4]] == ["tuning", "report", "tuning", "report"]
    tuning = fb.suite_series("m3-monthly", DATA, "tuning")
    assert len(tuning) == 75 and tuning[1][0].name == pairs[2][0].name
    only = fb.suite_series("m3-monthly", DATA, only=["N1413", "N1410"])
    assert [s.name for s, _ in only] == ["N1410", "N1413"]
    with pytest.raises(ProlasError, match="N9999 not in suite"):
        fb.suite_series("m3-monthly", DATA, only=["N9999"])
    with pytest.raises(ProlasError, match="unknown forecast suite"):
        fb.suite_series("m4", DATA)
    with pytest.raises(ProlasError, match="--methods"):
        fb.ForecastBenchConfig("tsdl", methods=("prolas", "prophet"))


def test_m3_set_b_is_150_other_series_halved_alike() -> None:
    a = fb.suite_series("m3-monthly", DATA)
    b = fb.suite_series("m3-monthly-b", DATA)
    assert len(b) == 150 and all(s.error is None for s, _ in b)
    assert not {s.name for s, _ in a} & {s.name for s, _ in b}
    assert all(s.test_x.size == 18 and s.season_length == 12 for s, _ in b)
    assert all(np.all(s.train.y > 0) and 50 <= s.train.n <= 126 for s, _ in b)
    # x is t / 12: a year is 1 in x, as in set A; the test inputs follow the training ones
    s = b[0][0]
    assert s.train.x[0] == 0.0 and np.allclose(np.diff(s.train.x), 1 / 12)
    assert np.allclose(s.test_x, (s.train.n + np.arange(18)) / 12)
    assert [h for _, h in b[:4]] == ["tuning", "report", "tuning", "report"]
    assert len(fb.suite_series("m3-monthly-b", DATA, "report")) == 75


# --- the peers -------------------------------------------------------------------------


def _two_m3_series():
    return [s for s, _ in fb.suite_series("m3-monthly", DATA, only=["N1410", "N1413"])]


def test_peers_on_two_m3_series() -> None:
    pytest.importorskip("statsforecast")
    from prolas.bench.peers import PEERS, peer_forecast, peers_missing

    assert peers_missing() is None
    for s in _two_m3_series():
        y = s.train.y
        for method in PEERS:
            fc = peer_forecast(method, y, 18, 12)
            pred = fc.predictive
            assert pred.mean.shape == pred.lower.shape == pred.upper.shape == (18,)
            assert pred.quantiles.shape == (18, QUANTILE_LEVELS.size)
            assert np.all(pred.lower <= pred.mean) and np.all(pred.mean <= pred.upper)
            assert np.all(pred.quantiles[:, 0] < pred.quantiles[:, -1]) and fc.seconds >= 0
        # the seasonal naive forecast by hand: the last season repeated
        naive = peer_forecast("snaive", y, 18, 12).predictive
        np.testing.assert_allclose(naive.mean, np.tile(y[-12:], 2)[:18])
        # its band is Gaussian about the mean: the quantiles are symmetric
        np.testing.assert_allclose(
            naive.quantiles[:, 0] + naive.quantiles[:, -1], 2 * naive.mean, rtol=1e-9
        )


def test_peers_only_run_writes_scores_and_resumes(tmp_path, monkeypatch) -> None:
    pytest.importorskip("statsforecast")
    config = fb.ForecastBenchConfig(
        "m3-monthly", methods=("snaive", "ets"), series=("N1410", "N1413"), data_dir=str(DATA)
    )
    run = fb.run_forecast_bench(config, tmp_path / "out", progress=False)
    table = pd.read_csv(tmp_path / "out" / "forecast_scores.csv")
    assert len(table) == 4 and (table["status"] == "ok").all()
    assert set(table["half"]) == {"tuning", "report"}
    assert table["mase"].notna().all() and (table["season_length"] == 12).all()
    md = (tmp_path / "out" / "forecast.md").read_text()
    assert "| snaive | 2 |" in md and "| ets | 2 |" in md
    fixed = "from the fixed kernel `LIN + PER*SE + SE` with its period held at the season"
    assert fixed in md and "on series of fewer than 144" in md
    # resuming reuses every cell: a peer that would now fail is never called
    import prolas.bench.forecast_bench as module

    monkeypatch.setattr(module, "peer_forecast", lambda *a, **k: 1 / 0)
    again = fb.run_forecast_bench(config, tmp_path / "out", resume=True, progress=False)
    pd.testing.assert_frame_equal(again.table, run.table)


def test_without_statsforecast_the_peers_are_skipped_in_one_line(tmp_path, monkeypatch) -> None:
    import prolas.bench.forecast_bench as module

    monkeypatch.setattr(module, "peers_missing", lambda: "statsforecast is not installed (…)")
    lines = []
    config = fb.ForecastBenchConfig(
        "tsdl", methods=("snaive",), series=("airline",), data_dir=str(DATA)
    )
    run = fb.run_forecast_bench(config, tmp_path / "out", progress=False, log=lines.append)
    assert run.skipped_peers in lines and "statsforecast is not installed" in run.skipped_peers
    assert run.table.empty
    assert "statsforecast is not installed" in (tmp_path / "out" / "forecast.md").read_text()


@pytest.mark.slow
def test_bench_forecast_cli_prolas_cks_and_a_peer(tmp_path, capsys) -> None:
    """The command end to end on two M3 series with a tiny budget: both searches and a
    peer, and the searches compared by best BIC and wall time."""
    pytest.importorskip("statsforecast")
    from prolas.cli import main

    out = tmp_path / "bench"
    argv = ["bench", "--forecast", "m3-monthly", "--series", "N1410,N1413", "--methods"]
    argv += ["prolas,cks,snaive", "--budget", "3", "--restarts", "1", "--workers", "1"]
    argv += ["--data-dir", str(DATA), "--out", str(out), "--quiet"]
    assert main(argv) == 0
    table = pd.read_csv(out / "forecast_scores.csv")
    assert set(table["method"]) == {"prolas", "cks", "snaive"}
    assert (table["status"] == "ok").all()
    for method in ("prolas", "cks"):
        mine = table[table["method"] == method]
        assert (mine["seconds"] > 0).all() and mine["crps_scaled"].notna().all()
        assert (mine["search_seconds"] > 0).all() and mine["bic"].notna().all()
        assert (out / method / "N1410" / "test_forecast.csv").exists()
        # the BIC in the table is the one the search's result.json reports
        doc = json.loads((out / method / "N1413" / "result.json").read_text())
        assert mine.set_index("series").loc["N1413", "bic"] == pytest.approx(doc["best"]["bic"])
        assert doc["search"]["method"] == method
    assert table[table["method"] == "snaive"]["bic"].isna().all()
    md = (out / "forecast.md").read_text()
    assert "| snaive | crps_scaled | 2 |" in md and "| cks | bic | 2 |" in md
    assert "## The two searches" in md and "| all | 2 |" in md
    # a second run without --resume refuses to mix into it
    assert main(argv) != 0
    assert "--resume" in capsys.readouterr().err


def test_two_searches_take_turns_over_blocks_of_series(tmp_path, monkeypatch) -> None:
    """With prolas and cks, each block of series runs under one method and then the other
    (their wall times are measured at the same time), later blocks resuming the runs."""
    import prolas.bench.forecast_bench as module

    calls = []

    def fake_run_many(series, out, settings, *, workers, resume, **kwargs):
        calls.append((out.name, len(series), resume, settings.config.method))

    monkeypatch.setattr(module, "run_many", fake_run_many)
    pairs = fb.suite_series("m3-monthly", str(DATA), "all", ())
    series = tuple(s.name for s, _ in pairs[:10])
    config = fb.ForecastBenchConfig(
        "m3-monthly", methods=("prolas", "cks"), series=series, data_dir=str(DATA)
    )
    lines: list[str] = []
    run = fb.run_forecast_bench(
        config, tmp_path / "out", workers=1, progress=False, log=lines.append
    )
    assert [line for line in lines if line.startswith("search ")] == [
        "search prolas, series 1–4 of 10:",
        "search cks, series 1–4 of 10:",
        "search prolas, series 5–8 of 10:",
        "search cks, series 5–8 of 10:",
        "search prolas, series 9–10 of 10:",
        "search cks, series 9–10 of 10:",
    ]
    assert calls == [
        ("prolas", 4, False, "prolas"),
        ("cks", 4, False, "cks"),
        ("prolas", 8, True, "prolas"),
        ("cks", 8, True, "cks"),
        ("prolas", 10, True, "prolas"),
        ("cks", 10, True, "cks"),
    ]
    assert len(run.table) == 20 and set(run.table["status"]) == {"pending"}
    assert fb.search_blocks(10, 1, 2) == [10] and fb.search_blocks(0, 2, 2) == [0]
    assert fb.search_blocks(16, 2, 2) == [8, 16]
