"""The Python API's one object, KernelSearch: tables in, a forecast frame, figures and the
files of `prolas fit` out, the caller's threads and matplotlib backend untouched."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import DATA, QUICK_CKS, ROOT

import prolas
from prolas import KernelSearch, ProlasError, decompose, predict
from prolas.cli import main
from prolas.errors import OutputExistsError
from prolas.report import validate_result_json

DATES = ROOT / "notebooks" / "example_airline_dates.csv"
TIMINGS = ("seconds", "wall_seconds", "elapsed")


def quick(**settings) -> KernelSearch:
    """The quickest real search (as QUICK_CKS on the command line)."""
    return KernelSearch(method="cks", budget=3, restarts=1, **settings)


@pytest.fixture(scope="module")
def monthly() -> pd.DataFrame:
    return pd.read_csv(DATES)


@pytest.fixture(scope="module")
def fitted(monthly) -> KernelSearch:
    return quick().fit(monthly, x="month", y="passengers")


def component_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c not in ("x", "mean", "lower", "upper")]


# --- the round trip ----------------------------------------------------------------------


def test_dataframe_with_dates_to_a_forecast_frame_with_dates(fitted, monthly) -> None:
    ks = fitted
    assert ks.data_.x_is_date and ks.data_.n == len(monthly) and ks.data_.y_column == "passengers"
    assert ks.result_.evaluations == 3 and ks.best_.expression == ks.result_.best.expression
    assert ks.best_.dataset is ks.data_ and ks.searched_on_ is None

    frame = ks.forecast(horizon=6, method="best")
    # month starts continue after the last month of the data
    assert list(frame["x"].dt.strftime("%Y-%m-%d")) == [f"1961-{m:02d}-01" for m in range(1, 7)]
    assert np.all(frame["lower"] < frame["mean"]) and np.all(frame["mean"] < frame["upper"])
    # one model: y's mean plus one column per additive term of the best model sum to the mean
    terms = [t.label for t in ks.best_.terms]
    assert component_columns(frame) == ["data_mean", *terms]
    np.testing.assert_allclose(frame[component_columns(frame)].sum(axis=1), frame["mean"])
    assert frame.attrs["components_of"] == ks.best_.expression and frame.attrs["level"] == 95
    # the same numbers as the forecast function and the predictive of the carried data
    fc = prolas.forecast(ks.best_, horizon=6, method="best")
    np.testing.assert_array_equal(frame["mean"], fc.mean)
    mean, _ = predict(ks.best_, fc.x)
    np.testing.assert_allclose(frame["mean"], mean)


def test_the_default_forecast_is_the_command_lines_mixture(fitted) -> None:
    frame = fitted.forecast(horizon=4)
    assert frame.attrs["method"] == "rolling-mix" and len(frame.attrs["models"]) == 3
    assert sum(frame.attrs["weights"]) == pytest.approx(1.0)
    top = frame.attrs["models"][int(np.argmax(frame.attrs["weights"]))]
    assert frame.attrs["components_of"] == top
    # the dominant model's terms and what the other models add sum to the mixture's mean
    assert component_columns(frame)[-1] == "other_models"
    np.testing.assert_allclose(frame[component_columns(frame)].sum(axis=1), frame["mean"])
    assert fitted.top_[0] is fitted.best_ and len(fitted.top_) == 3
    # a narrower band at a lower level, around the same mean
    narrow = fitted.forecast(horizon=4, level=50)
    np.testing.assert_array_equal(narrow["mean"], frame["mean"])
    assert np.all(narrow["upper"] - narrow["lower"] < frame["upper"] - frame["lower"])


def test_a_short_series_is_forecast_from_the_fixed_kernel_made_once(
    monthly, tmp_path, fixed_fit_calls
) -> None:
    """Below 144 points the default forecast, plot and save use the fixed kernel (fitted
    once for all of them; monthly dates: LIN + PER*SE + SE with the period held at the
    year); source="search" gives the search's mixture."""
    short = quick().fit(monthly.iloc[:-1], x="month", y="passengers")
    assert short.data_.n == 143
    made = fixed_fit_calls
    frame = short.forecast(horizon=4)
    short.plot(horizon=4)
    written = short.save(tmp_path / "short", horizon=4)
    # the fixed kernel's fits at three fit seeds, mixed with equal weights
    assert frame.attrs["models"] == ["LIN + PER*SE + SE"] * 3 and frame.attrs["method"] == "bma"
    assert frame.attrs["weights"] == pytest.approx([1 / 3] * 3)
    assert frame.attrs["components_of"] == "LIN + PER*SE + SE" and len(made) == 1
    # the first fit's terms, and what the other two add: together the mixture's mean
    terms = frame.drop(columns=["x", "mean", "lower", "upper"]).sum(axis=1)
    np.testing.assert_allclose(terms, frame["mean"], rtol=1e-9)
    assert [f.expression for f in written.fits] == ["LIN + PER*SE + SE"] * 3
    assert [f.season for f in written.fits] == [1.0] * 3  # the year, from the dates
    saved_frame = pd.read_csv(tmp_path / "short" / "forecast.csv")
    np.testing.assert_allclose(saved_frame["mean"], frame["mean"], rtol=1e-12)
    searched = short.forecast(horizon=4, source="search")
    assert len(searched.attrs["models"]) == 3
    assert "LIN + PER*SE + SE" not in searched.attrs["models"]
    assert short.top_[0] is short.best_  # the search's top models, whatever the source
    with pytest.raises(ProlasError, match="source must be one of auto, search, fixed"):
        short.forecast(horizon=4, source="mixed")


def test_forecast_at_given_dates(fitted) -> None:
    dates = pd.to_datetime(["1961-03-01", "1962-01-01"])
    frame = fitted.forecast(x=dates, method="best")
    assert list(frame["x"]) == list(dates)
    again = fitted.forecast(x=["1961-03-01", "1962-01-01"], method="best")
    np.testing.assert_array_equal(again["mean"], frame["mean"])


def test_series_with_a_datetime_index_and_arrays(monthly) -> None:
    series = monthly.set_index(pd.to_datetime(monthly["month"]))["passengers"]
    ks = quick().fit(series)
    assert ks.data_.x_is_date and ks.data_.y_column == "passengers"
    assert ks.data_.x_column == "month"  # the index's name
    assert ks.forecast(horizon=2, method="best")["x"].iloc[0] == pd.Timestamp("1961-01-01")

    x = np.linspace(0.0, 10.0, 60)
    y = np.sin(2 * np.pi * x / 2.5) + 0.1 * x
    ks = quick().fit(x=x, y=y)
    assert not ks.data_.x_is_date and (ks.data_.x_column, ks.data_.y_column) == ("x", "y")
    frame = ks.forecast(horizon=3, method="best")
    np.testing.assert_allclose(frame["x"], x[-1] + np.diff(x).mean() * np.arange(1, 4))
    assert quick().fit(y).data_.x_column == "index"  # y alone: positions 0..n-1


def test_a_fit_carries_its_data_for_predict_and_decompose(fitted) -> None:
    best, data = fitted.best_, fitted.data_
    xs = np.array([1961.0, 1961.5])
    for a, b in zip(predict(best, xs), predict(best, data, xs)):
        np.testing.assert_array_equal(a, b)
    for (la, ma, va), (lb, mb, vb) in zip(decompose(best, xs), decompose(best, data, xs)):
        assert la == lb
        np.testing.assert_array_equal(ma, mb)
        np.testing.assert_array_equal(va, vb)
    bare = prolas.fit_gp(best.expression, data, restarts=1)
    assert bare.dataset is data  # fit_gp's result carries the data it was fitted on
    for a, b in zip(predict(bare, xs), predict(bare, data, xs)):
        np.testing.assert_array_equal(a, b)
    detached = replace(bare, dataset=None)  # e.g. read back from result.json
    with pytest.raises(ProlasError, match="carries no data"):
        predict(detached, xs)


# --- the files of prolas fit -------------------------------------------------------------


def _without_timings(doc):
    if isinstance(doc, dict):
        return {k: _without_timings(v) for k, v in doc.items() if k not in TIMINGS}
    if isinstance(doc, list):
        return [_without_timings(v) for v in doc]
    return doc


@pytest.mark.slow
def test_save_writes_what_prolas_fit_writes(tmp_path, capsys) -> None:
    train, test = str(DATA / "airline_train.csv"), str(DATA / "airline_test.csv")
    cli = tmp_path / "cli"
    argv = ["fit", train, *QUICK_CKS, "--horizon", "5", "--test", test, "--out", str(cli)]
    code = main([*argv, "--quiet"])
    assert code == 0, capsys.readouterr().err
    lib = tmp_path / "lib"
    ks = quick().fit(train)
    written = ks.save(lib, test=test, horizon=5)
    names = sorted(p.name for p in cli.iterdir() if p.name != "journal.jsonl")
    assert sorted(p.name for p in lib.iterdir()) == names
    assert sorted(p.name for p in written.files) == names
    doc = json.loads((lib / "result.json").read_text())
    validate_result_json(doc)
    assert doc == json.loads(json.dumps(written.doc)) and doc["test"]["n"] == 15
    assert _without_timings(doc) == _without_timings(json.loads((cli / "result.json").read_text()))
    # airline_train has 129 points: both forecast from the fixed kernel (one model, so
    # no rolling-origin check to write)
    forecasts = [n for n in names if n.startswith("forecast")]
    assert forecasts == ["forecast.csv", "forecast.png"]
    assert (lib / "forecast.csv").read_bytes() == (cli / "forecast.csv").read_bytes()
    # a result is never replaced without force
    with pytest.raises(OutputExistsError, match="force"):
        ks.save(lib)
    assert ks.save(lib, force=True).forecast_line is None


# --- the caller's session ----------------------------------------------------------------


def test_thread_settings_are_restored(monthly) -> None:
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas() -> list[int]:
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    before_torch = torch.get_num_threads()
    limiter = threadpool_limits(limits=2, user_api="blas")
    try:
        torch.set_num_threads(2)
        pools = blas()
        ks = quick().fit(monthly, x="month", y="passengers")
        assert torch.get_num_threads() == 2 and blas() == pools
        ks.forecast(horizon=3)
        ks.plot_components()
        assert torch.get_num_threads() == 2 and blas() == pools
        prolas.search(ks.data_, method="random", budget=2, restarts=1)
        assert torch.get_num_threads() == 2 and blas() == pools
    finally:
        limiter.restore_original_limits()
        torch.set_num_threads(before_torch)


def test_plots_return_figures_and_draw_on_a_given_axes(fitted) -> None:
    from matplotlib.figure import Figure

    for fig in (
        fitted.plot(),
        fitted.plot(horizon=6),
        fitted.plot_components(),
        fitted.plot_convergence(),
    ):
        assert isinstance(fig, Figure) and fig.axes
        assert fig._repr_png_().startswith(b"\x89PNG")  # a notebook shows it by itself
    host = Figure()
    left, right = host.subplots(1, 2)
    assert fitted.plot(ax=left) is host and fitted.plot_convergence(ax=right) is host
    assert left.get_title().startswith(fitted.best_.expression) and right.lines


@pytest.mark.slow
def test_importing_prolas_and_plotting_leaves_the_backend_alone(tmp_path) -> None:
    """A subprocess picks the svg backend; prolas never switches it nor loads pyplot."""
    code = f"""
import sys, matplotlib
matplotlib.use("svg")
import numpy as np, prolas
x = np.linspace(0, 6, 40)
ks = prolas.KernelSearch(method="cks", budget=2, restarts=1).fit(x=x, y=np.sin(x) + 0.1 * x)
figures = [ks.plot(), ks.plot(horizon=5), ks.plot_components(), ks.plot_convergence()]
ks.save({str(tmp_path / "out")!r}, horizon=3)
print(matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules, len(figures))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["svg", "False", "4"]
    assert (tmp_path / "out" / "forecast.png").stat().st_size > 1000


def test_notebook_view_lists_the_models_and_the_words(fitted) -> None:
    page = fitted._repr_html_()
    assert "<table>" in page and fitted.best_.expression in page
    assert fitted.describe().splitlines()[0][:20] in page
    assert "fitted on 144 points" in repr(fitted)
    assert "not fitted" in quick()._repr_html_()


# --- bad input ---------------------------------------------------------------------------


def one_line_error(call, *fragments: str) -> str:
    with pytest.raises(ProlasError) as info:
        call()
    msg = str(info.value)
    assert "\n" not in msg, msg
    for fragment in fragments:
        assert fragment in msg, msg
    return msg


def test_bad_input_is_a_one_line_error(monthly, fitted) -> None:
    holed = monthly.assign(passengers=monthly["passengers"].where(monthly.index != 3))
    one_line_error(
        lambda: quick().fit(holed, x="month"), "'passengers'", "position 3", "dropna=True"
    )
    with pytest.warns(UserWarning, match="dropped 1 row") as caught:
        assert quick().fit(holed, x="month", dropna=True).data_.n == len(monthly) - 1
    assert caught[0].filename == __file__  # the user's line, not prolas's internals
    one_line_error(lambda: quick().fit(monthly, x="date"), "'date' (x=) not found", "'month'")
    text = monthly.assign(passengers="many")
    one_line_error(lambda: quick().fit(text, x="month", y="passengers"), "not numeric")
    one_line_error(lambda: quick().fit(x=[1.0, 2.0, 3.0], y=[1.0, 2.0]), "3 values", "2")
    one_line_error(lambda: quick().fit(monthly.head(3), x="month"), "at least 5")
    one_line_error(lambda: KernelSearch(budgt=5), "unknown setting 'budgt'")
    one_line_error(lambda: KernelSearch(method="greedy"), "unknown search method")
    one_line_error(lambda: KernelSearch(budget="ten"), "budget must be an integer")
    one_line_error(lambda: KernelSearch(budget=0), "budget (--budget) must be at least 1")
    # conflicting execution options are refused when the object is made, not at .fit()
    one_line_error(lambda: KernelSearch(workers=2, dask_local=2), "workers (--workers) is for")
    one_line_error(
        lambda: KernelSearch(scheduler="tcp://h:1", dask_local=2), "scheduler (--scheduler) or"
    )
    one_line_error(lambda: quick().forecast(horizon=3), "not fitted")
    one_line_error(lambda: fitted.forecast(horizon=3, level=0.95), "percentage")
    one_line_error(lambda: fitted.forecast(horizon=0), "horizon")
    one_line_error(lambda: fitted.forecast(), "exactly one of horizon")
    one_line_error(lambda: fitted.forecast(horizon=2, method="mean"), "method must be one of")
    one_line_error(lambda: fitted.forecast(horizon=2.5), "horizon must be a positive integer")
    one_line_error(lambda: fitted.forecast(x=["soon"]), "not dates")
    one_line_error(lambda: fitted.save("unused", horizon=3, models=0), "models must be")
    one_line_error(lambda: fitted.forecast(x=[1.0], horizon=2), "exactly one of horizon")


def test_ctrl_c_keeps_the_finished_evaluations_and_a_partial_result(
    monthly, tmp_path, monkeypatch
) -> None:
    """Ctrl-C after two fits: a SearchInterrupted (a KeyboardInterrupt) holding them; with
    a journal, a valid partial result.json beside it (what `prolas fit` then reports)."""
    from prolas.kernel_search import SearchInterrupted, SearchProgress
    from prolas.search.journal import open_journal

    def interrupt_at_the_second(self, ev) -> None:
        if ev.index == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(SearchProgress, "update_eval", interrupt_at_the_second)
    with pytest.raises(SearchInterrupted) as bare:
        quick().fit(monthly, x="month", y="passengers")
    assert isinstance(bare.value, KeyboardInterrupt) and bare.value.path is None
    assert [e.index for e in bare.value.result.history] == [1, 2]

    ks = quick()
    data = prolas.as_dataset(monthly, x="month", y="passengers")
    journal = open_journal(tmp_path, data, ks.config, resume=False, force=False)
    try:
        with pytest.raises(SearchInterrupted) as kept:
            ks.fit(data, journal=journal)
    finally:
        journal.close()
    assert kept.value.path == tmp_path / "result.json" and kept.value.result.evaluations == 2
    doc = json.loads(kept.value.path.read_text())
    validate_result_json(doc)
    assert doc["search"]["evaluations"] == 2 and not hasattr(ks, "result_")
