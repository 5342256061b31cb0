"""prolas fit-many (prolas.many): reading a long file, bad series, parallel runs, resume."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from prolas.errors import DataError, ProlasError
from prolas.many import SUMMARY_COLUMNS, ManySettings, fit_many, read_long, run_many
from prolas.report import validate_result_json
from prolas.report.scoring import SCORE_COLUMNS

QUICK = {"method": "random", "budget": 3, "restarts": 2}


def long_frame(n: int = 30, test: int = 6) -> pd.DataFrame:
    """Three monthly series with a train/test split: A (seasonal), B (constant: bad),
    C (seasonal with a trend)."""
    rng = np.random.default_rng(0)
    rows = []
    x = 2000 + np.arange(n) / 12
    for sid in ("A", "B", "C"):
        if sid == "B":
            y = np.full(n, 5.0)
        else:
            y = np.sin(2 * np.pi * x) + 0.1 * rng.standard_normal(n)
            y += 0.2 * (x - 2000) if sid == "C" else 0.0
        for i in range(n):
            rows.append(
                {"id": sid, "x": x[i], "y": y[i], "split": "test" if i >= n - test else "train"}
            )
    return pd.DataFrame(rows)


def test_read_long_series_in_order_with_their_split(tmp_path) -> None:
    path = tmp_path / "long.csv"
    long_frame().to_csv(path, index=False)
    series = read_long(path, "id", split="split")
    assert [s.name for s in series] == ["A", "B", "C"]
    a, b, _ = series
    assert a.error is None and a.train.n == 24 and a.test_x.size == 6
    assert np.all(a.test_x > a.train.x[-1])
    assert b.train is None and "constant" in b.error and f"{path}[B]" in b.error
    # without a split every row is fitted
    assert read_long(path, "id")[0].train.n == 30


def test_bad_series_get_their_reason_and_the_right_csv_line(tmp_path) -> None:
    df = long_frame()
    df.loc[3, "y"] = np.nan  # series A, CSV line 5
    df["y"] = df["y"].astype(object)
    df.loc[35, "y"] = "twelve"  # series B, CSV line 37
    df.loc[70, "split"] = "validation"  # series C, CSV line 72
    path = tmp_path / "bad.csv"
    df.to_csv(path, index=False)
    a, b, c = read_long(path, "id", split="split")
    assert "NaN/inf" in a.error and "CSV line 5" in a.error and "--dropna" in a.error
    assert "not numeric" in b.error and "CSV line 37" in b.error and "'twelve'" in b.error
    assert "'validation'" in c.error and "CSV line 72" in c.error
    # --dropna drops A's row and keeps the series
    assert read_long(path, "id", split="split", dropna=True)[0].train.n == 23


def test_a_numeral_beyond_float64_is_an_inf_value_not_text(tmp_path) -> None:
    df = long_frame()
    df["y"] = df["y"].astype(object)
    df.loc[3, "y"] = "1e400"  # series A, CSV line 5: a number, too large for float64
    path = tmp_path / "big.csv"
    df.to_csv(path, index=False)
    a = read_long(path, "id", split="split")[0]
    assert "NaN/inf" in a.error and "CSV line 5" in a.error and "not numeric" not in a.error
    assert read_long(path, "id", split="split", dropna=True)[0].train.n == 23


def test_a_repeated_column_name_is_an_error(tmp_path) -> None:
    path = tmp_path / "dup.csv"
    long_frame().to_csv(path, index=False)
    header, rest = path.read_text().split("\n", 1)
    path.write_text(header.replace(",y", ",x", 1) + "\n" + rest)  # two columns named x
    with pytest.raises(DataError, match="'x' appears 2 times"):
        read_long(path, "id", split="split")
    frame = long_frame()
    frame.columns = ["y" if c == "x" else c for c in frame.columns]
    with pytest.raises(DataError, match="'y' appears 2 times"):
        read_long(frame, "id")


def test_short_series_dates_and_frames(tmp_path) -> None:
    df = pd.DataFrame(
        {
            "store": ["s/1"] * 8 + ["s 1"] * 3,
            "month": list(pd.date_range("2020-01-01", periods=8, freq="MS").strftime("%Y-%m-%d"))
            + ["2020-01-01", "2020-02-01", "2020-03-01"],
            "sales": [1.0, 3, 2, 5, 4, 6, 5, 7, 1, 2, 3],
        }
    )
    ok, short = read_long(df, "store")  # columns found: x = the date column, y = sales
    assert ok.train.x_is_date and ok.train.x[1] == pytest.approx(2020 + 31 / 366)
    assert "3 data points" in short.error
    # file-system-safe, distinct folders for ids that clash once made safe
    assert ok.folder != short.folder and all("/" not in s.folder for s in (ok, short))


def test_dates_with_mixed_utc_offsets_are_read_as_wall_clock_times(tmp_path) -> None:
    # daily data across a daylight-saving change: the offset changes, the day does not
    days = [f"2020-03-{d:02d}T00:00:00+0{1 if d < 29 else 2}:00" for d in range(20, 32)]
    path = tmp_path / "long.csv"
    pd.DataFrame({"id": ["a"] * 12, "day": days, "y": np.sin(np.arange(12.0))}).to_csv(
        path, index=False
    )
    (a,) = read_long(path, "id")
    assert a.error is None and a.train.x_is_date
    np.testing.assert_allclose(np.diff(a.train.x), 1 / 366)


def test_a_series_with_thousands_separators_is_reported_not_fatal(tmp_path) -> None:
    y = 5000 + 900 * np.sin(np.arange(12.0))
    path = tmp_path / "long.csv"
    rows = [f'a,{i},"{v:,.1f}"' for i, v in enumerate(y)] + [f"b,{i},{v}" for i, v in enumerate(y)]
    path.write_text("id,x,y\n" + "\n".join(rows) + "\n")
    a, b = read_long(path, "id")
    assert "column 'y' is not numeric (CSV line 2: '5,000.0'; remove the thousands" in a.error
    assert b.error is None and b.train.n == 12


def test_a_semicolon_file_with_decimal_commas_reads_as_its_comma_twin(tmp_path) -> None:
    """The long reader sniffs the file as load_csv does: ';' and decimal commas, ids kept
    as text (007), and --decimal for a file whose numbers leave the mark open."""
    frame = long_frame()
    frame["id"] = frame["id"].map({"A": "007", "B": "B", "C": "C"})
    comma, semi = tmp_path / "comma.csv", tmp_path / "semi.csv"
    frame.to_csv(comma, index=False)
    frame.to_csv(semi, sep=";", decimal=",", index=False)
    for a, b in zip(read_long(comma, "id", split="split"), read_long(semi, "id", split="split")):
        assert a.name == b.name and a.error == (b.error and b.error.replace(str(semi), str(comma)))
        if a.train is not None:
            np.testing.assert_array_equal(a.train.y, b.train.y)
            np.testing.assert_array_equal(a.test_x, b.test_x)
    assert read_long(semi, "id")[0].name == "007"
    ambiguous = tmp_path / "amb.csv"
    ambiguous.write_text("id;x;y\n" + "".join(f"a;{i};{10 + i}.250\n" for i in range(8)))
    with pytest.raises(DataError, match="--decimal"):
        read_long(ambiguous, "id")
    assert read_long(ambiguous, "id", decimal=".")[0].train.y[0] == 10.25
    assert read_long(ambiguous, "id", decimal=",")[0].train.y[0] == 10250


def test_file_level_problems_are_one_line_errors(tmp_path) -> None:
    path = tmp_path / "long.csv"
    long_frame().to_csv(path, index=False)
    with pytest.raises(DataError, match="column 'series' \\(--id\\) not found; columns are"):
        read_long(path, "series")
    with pytest.raises(DataError, match="file not found"):
        read_long(tmp_path / "nope.csv", "id")
    df = long_frame()
    df.loc[4, "id"] = None
    with pytest.raises(DataError, match="empty on CSV line 6"):
        read_long(df, "id")


def test_settings_are_checked() -> None:
    with pytest.raises(ProlasError, match="season-length"):
        ManySettings(season_length=0)


@pytest.mark.slow
def test_fit_many_parallel_bad_series_skipped_and_resume_refits_nothing(tmp_path, capsys) -> None:
    """Python API in 2 worker processes, then the CLI with --resume: the bad series is
    reported and retried, the good ones are not refitted."""
    from prolas.cli import main

    path = tmp_path / "long.csv"
    long_frame().to_csv(path, index=False)
    out = tmp_path / "out"
    run = fit_many(path, "id", out, split="split", season_length=12, workers=2, **QUICK)
    assert (run.fitted, run.skipped, run.failed) == (2, 0, 1)
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.columns) == list(SUMMARY_COLUMNS)
    assert list(summary["series"]) == ["A", "B", "C"]
    assert list(summary["status"]) == ["ok", "failed", "ok"]
    good = summary[summary["status"] == "ok"]
    assert good[list(SCORE_COLUMNS)].notna().all().all()
    assert (good["n_train"] == 24).all() and (good["n_test"] == 6).all()
    assert (good["forecast_from"] == "fixed").all()  # 24 points: the fixed kernel
    assert (good["coverage"].between(0, 1)).all() and (good["seconds"] > 0).all()
    assert "constant" in summary.loc[1, "error"]
    for name in ("A", "C"):  # what prolas fit writes, plus the test forecast
        doc = json.loads((out / name / "result.json").read_text())
        validate_result_json(doc)
        assert doc["best"]["expression"] == summary.set_index("series").loc[name, "expression"]
        test = pd.read_csv(out / name / "test_forecast.csv")
        assert list(test.columns) == ["x", "y", "mean", "lower", "upper"] and len(test) == 6
        assert (out / name / "report.md").exists()
        # 24 training points: the test points are forecast from the fixed kernel
        predictive = json.loads((out / name / "test_predictive.json").read_text())
        assert predictive["source"] == "fixed" and predictive["method"] == "bma"
        # its fits at three seeds; a known season (12): LIN + PER*SE + SE, the period held
        assert predictive["models"] == ["LIN + PER*SE + SE"] * 3
        assert predictive["weights"] == pytest.approx([1 / 3] * 3)
        # --season-length 12 holds the fixed kernel's period at 12 steps (x in years: 1)
        assert predictive["season"] == pytest.approx(1.0, rel=1e-9)

    stamps = {
        p: p.stat().st_mtime_ns
        for name in ("A", "C")
        for p in (out / name).iterdir()
        if p.is_file()
    }
    args = [str(path), "--id", "id", "--split", "split", "--season-length", "12", "--out"]
    args += [str(out), "--search", "random", "--budget", "3", "--restarts", "2", "--workers", "1"]
    assert main(["fit-many", *args, "--resume"]) == 0
    err = capsys.readouterr().err
    assert "0 fitted, 2 skipped (done before), 1 failed" in err
    assert "skipped B:" in err and "constant" in err
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # nothing refitted or rewritten
    again = pd.read_csv(out / "summary.csv")
    pd.testing.assert_frame_equal(again.drop(columns="seconds"), summary.drop(columns="seconds"))

    # without --resume the run is not overwritten; other settings cannot resume it
    assert main(["fit-many", *args]) != 0
    assert "already holds a fit-many run" in capsys.readouterr().err
    changed = [a if a != "3" else "4" for a in args]
    assert main(["fit-many", *changed, "--resume"]) != 0
    assert "settings differ" in capsys.readouterr().err
    assert main(["fit-many", *args, "--forecast-from", "search", "--resume"]) != 0
    assert "settings differ" in capsys.readouterr().err


def test_run_many_records_a_failed_search_without_stopping(tmp_path, monkeypatch) -> None:
    """A search that raises for one series (not a data problem) fails that row only."""
    import prolas.pipeline

    series = read_long(long_frame(), "id", split="split")
    calls = []

    def failing(dataset, config, **kw):
        calls.append(dataset.name)
        raise RuntimeError("Cholesky exploded")

    monkeypatch.setattr(prolas.pipeline, "run_search", failing)
    run = run_many(series, tmp_path / "out", ManySettings(), workers=1)
    assert calls == ["A", "C"]  # B's bad data never reaches a search
    assert list(run.summary["status"]) == ["failed"] * 3
    assert run.summary.loc[0, "error"] == "RuntimeError: Cholesky exploded"


def _group_alive(pgid: int) -> bool:
    """Whether any process of the process group ``pgid`` still exists (signal 0)."""
    import os

    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_sigterm_stops_fit_many_and_its_workers(tmp_path) -> None:
    """SIGTERM stops a parallel fit-many as Ctrl-C does: exit 130, the summary written
    with the unfinished series pending, and no worker process left behind (SIGTERM's
    default ended the parent alone; its workers went on writing into OUT)."""
    import signal
    import subprocess
    import sys
    import time

    frame = pd.concat([long_frame().assign(id=lambda f, k=k: f["id"] + str(k)) for k in range(4)])
    frame = frame[~frame["id"].str.startswith("B")]  # 8 good series
    path, out = tmp_path / "long.csv", tmp_path / "out"
    frame.to_csv(path, index=False)
    argv = [sys.executable, "-m", "prolas", "fit-many", str(path), "--id", "id"]
    argv += ["--split", "split", "--search", "random", "--budget", "200", "--workers", "2"]
    argv += ["--out", str(out), "--quiet"]
    child = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("*/journal.jsonl")):  # a worker has begun a search
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130 and "--resume" in err, err
    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == 8 and (summary["status"] == "pending").any()
    # the child led its own session and group: its fork server and workers are in it
    deadline = time.monotonic() + 20
    while _group_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _group_alive(child.pid), "worker processes left running after SIGTERM"


def test_a_true_false_value_column_is_refused_for_the_whole_file(tmp_path) -> None:
    path = tmp_path / "long.csv"
    rows = "".join(f"{s},{i},{i % 2 == 0}\n" for s in "ab" for i in range(8))
    path.write_text("series,t,y\n" + rows)
    with pytest.raises(DataError, match="column 'y' holds True/False values") as info:
        read_long(path, "series", x="t", y="y")
    assert "\n" not in str(info.value)
    # a True/False column named y is still y, refused, not passed over for another column
    path.write_text(
        "series,t,y,other\n"
        + "".join(f"{s},{i},{i % 2 == 0},{i * i}\n" for s in "ab" for i in range(8))
    )
    with pytest.raises(DataError, match="column 'y' holds True/False values"):
        read_long(path, "series")
    # with no column named, an indicator column is passed over for x and y
    rows = "".join(f"{s},{i % 3 == 0},{i},{(i * 7) % 5}\n" for s in "ab" for i in range(8))
    path.write_text("series,promo,t,sales\n" + rows)
    first = read_long(path, "series")[0]
    assert (first.train.x_column, first.train.y_column) == ("t", "sales")
