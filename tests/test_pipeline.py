"""Long series: search on an evenly spaced subsample (plus dense windows for the periods
it cannot resolve), refit the chosen model on all points, say which periods it leaves out."""

from __future__ import annotations

import json

import numpy as np
import pytest

from prolas.bench.long_series import fitted_periods, hourly_series, recovered
from prolas.data import Dataset
from prolas.gp import predict
from prolas.pipeline import refit, run_search
from prolas.report import validate_result_json
from prolas.search.config import SearchConfig, search_data, search_view


def _trend_and_season(n: int, seed: int = 0) -> Dataset:
    """n points over 8 'years': slope 1.5 per year plus a yearly sine plus noise."""
    rng = np.random.default_rng(seed)
    x = np.linspace(2000.0, 2008.0, n)
    y = 1.5 * (x - 2000.0) + np.sin(2 * np.pi * x) + 0.2 * rng.standard_normal(n)
    return Dataset.from_arrays(x, y, name=f"planted-{n}")


def test_search_data_is_an_evenly_spaced_subsample_with_the_full_standardisation() -> None:
    ds = _trend_and_season(1000)
    sub = search_data(ds, SearchConfig(search_points=100))
    assert sub.n == 100 and sub.x[0] == ds.x[0] and sub.x[-1] == ds.x[-1]
    assert (sub.y_mean, sub.y_std) == (ds.y_mean, ds.y_std)
    np.testing.assert_array_equal(sub.x, ds.x[ds.spaced_indices(100)])
    assert search_data(ds, SearchConfig(search_points=0)) is ds
    assert search_data(ds, SearchConfig(search_points=5000)) is ds


@pytest.mark.slow
def test_subsample_search_then_exact_refit_recovers_period_and_trend() -> None:
    """1 200 points searched on 120 (CKS); the refit on all points is exact, finds the
    planted period and extrapolates the planted trend."""
    ds = _trend_and_season(1200)
    config = SearchConfig(
        method="cks", budget=16, depth=3, restarts=2, search_points=120, change=False
    )
    result, best = run_search(ds, config)
    assert best is not None and best.ok and best.n == ds.n and best.approximation is None
    assert best.expression == "LIN + PER*SE"
    assert best.period() == pytest.approx(1.0, rel=0.02)
    # the trend: one year past the data the forecast continues the planted slope
    mean, _ = predict(best, ds, np.array([2009.0, 2009.25]))
    np.testing.assert_allclose(mean, 1.5 * 9.0 + np.sin(2 * np.pi * np.array([0, 0.25])), atol=0.6)
    sub_fit = result.best.fit
    assert sub_fit.n == 120
    # warm-started at the subsample fit: never worse than refitting from it with no steps
    again = refit(sub_fit, ds, config)
    assert again.log_likelihood == pytest.approx(best.log_likelihood, rel=1e-9)


@pytest.mark.slow
def test_cli_reports_which_points_were_searched(tmp_path) -> None:
    from prolas.cli import main

    ds = _trend_and_season(500)
    path = tmp_path / "long.csv"
    rows = "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(ds.x, ds.y))
    path.write_text("x,y\n" + rows)
    out = tmp_path / "out"
    argv = ["fit", str(path), "--search", "cks", "--budget", "6", "--depth", "2"]
    code = main([*argv, "--restarts", "2", "--search-points", "80", "--out", str(out), "--quiet"])
    assert code == 0
    doc = json.loads((out / "result.json").read_text())
    validate_result_json(doc)
    sub = doc["search"]["searched_on"]
    assert sub["n"] == 80 and sub["indices"] == ds.spaced_indices(80).tolist()
    assert doc["data"]["n"] == 500 and doc["best"]["log_likelihood_kind"] == "exact"
    # the same run on all points says so
    out2 = tmp_path / "out2"
    code = main([*argv, "--restarts", "2", "--search-points", "0", "--out", str(out2), "--quiet"])
    assert code == 0
    assert json.loads((out2 / "result.json").read_text())["search"]["searched_on"] is None


@pytest.mark.slow
def test_twenty_thousand_points_searched_on_a_subsample_refitted_with_sgpr() -> None:
    """20 000 points: CKS on 200 evenly spaced points, then the SGPR refit on all of them
    recovers the planted period and trend; the log-likelihood is marked as a bound."""
    ds = _trend_and_season(20_000)
    config = SearchConfig(method="cks", budget=16, depth=3, restarts=2, search_points=200)
    result, best = run_search(ds, config)
    assert best is not None and best.ok, best
    assert best.n == 20_000 and best.approximation == "sgpr-512"
    assert best.period() == pytest.approx(1.0, rel=0.01)
    mean, _ = predict(best, ds, np.array([2009.0, 2009.25]))
    np.testing.assert_allclose(mean, 1.5 * 9.0 + np.sin(2 * np.pi * np.array([0, 0.25])), atol=0.6)
    # the bound on all points is at least the subsample fit's bound (it started there)
    from prolas.gp.scalable import sgpr_bound

    assert best.log_likelihood >= sgpr_bound(result.best.fit, ds, inducing=512) - 1e-6


def test_an_evaluator_on_other_points_than_the_search_is_refused() -> None:
    """A caller that builds its own Evaluator on all points while the search runs on a
    subsample would score other data than the strategy sees: a clear error instead."""
    from prolas.errors import ProlasError
    from prolas.gp import FitConfig, GPScorer
    from prolas.search.evaluator import Evaluator

    ds = _trend_and_season(500)
    config = SearchConfig(method="cks", budget=2, search_points=100)
    with pytest.raises(ProlasError, match="scores 500 points but the search runs on 100"):
        run_search(ds, config, evaluator=Evaluator(GPScorer(ds, FitConfig(restarts=1)), 2))
    ev = Evaluator(GPScorer(search_data(ds, config), FitConfig(restarts=1)), 2)
    result, best = run_search(ds, config, evaluator=ev)
    assert result.evaluations == 2 and best.n == 500


def test_every_strategy_runs_on_one_torch_thread_and_the_count_is_restored() -> None:
    """A strategy's rounding, and with it the order of exactly tied candidates, must not
    depend on torch's thread count (tests/bench/test_acquisition_trace_script.py shows
    the path that changed with it); the caller's count comes back afterwards."""
    import torch

    from prolas.pipeline import run_strategy
    from prolas.search.evaluator import Evaluator, TableScorer

    seen: list[int] = []
    table = TableScorer({"LIN + PER": 5.0}, default=0.0)

    def scorer(expr, *init):
        seen.append(torch.get_num_threads())
        return table(expr)

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for method in ("cks", "random"):
            run_strategy(Evaluator(scorer, budget=6), None, SearchConfig(method=method, budget=6))
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert len(seen) == 12 and set(seen) == {1}


@pytest.mark.slow
def test_daily_and_yearly_periods_of_20000_hourly_points_are_found_by_the_search() -> None:
    """20 000 hourly values (2.3 years) with a daily and a yearly cycle: evenly spaced
    points (225 beside the window, 3/4 of the 300 searched) are 3.7 days apart and cannot
    show the daily cycle; the view adds a window of it, and the search itself finds both
    periods within 1 %, as does the SGPR refit."""
    ds = hourly_series(20_000)
    config = SearchConfig(
        method="cks", budget=12, depth=3, restarts=3, change=False, search_points=300
    )
    view = search_view(ds, config)
    assert [round(w.period, 3) for w in view.windows] == [1.0]
    result, best = run_search(ds, config)
    found = result.best.fit  # the search's best, fitted on the view
    assert found.n == view.dataset.n and found.expression == best.expression
    assert recovered(found, (1.0, 365.25)) == [True, True], fitted_periods(found)
    assert best.n == 20_000 and best.approximation == "sgpr-512"
    assert recovered(best, (1.0, 365.25)) == [True, True], fitted_periods(best)


@pytest.mark.slow
def test_the_report_names_a_planted_period_the_search_was_kept_from_seeing(
    tmp_path, capsys
) -> None:
    """The same series searched on 300 evenly spaced points without windows: no model can
    hold the daily cycle, and result.json, report.md and the command say it is left out."""
    from prolas.cli import main

    ds = hourly_series(20_000)
    path = tmp_path / "hourly.csv"
    path.write_text("x,y\n" + "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(ds.x, ds.y)))
    out = tmp_path / "out"
    argv = ["fit", str(path), "--search", "cks", "--budget", "4", "--depth", "2"]
    argv += ["--restarts", "1", "--no-change", "--search-points", "300"]
    assert main([*argv, "--search-windows", "0", "--out", str(out)]) == 0
    doc = json.loads((out / "result.json").read_text())
    validate_result_json(doc)
    assert doc["search"]["searched_on"]["windows"] == []
    (daily,) = doc["periods"]["significant"]
    assert daily["period"] == pytest.approx(1.0, rel=1e-4)
    assert doc["periods"]["unexplained"] == [daily["period"]]
    assert daily["explained_by"] is None and daily["seen_by_search"] is False
    text = (out / "report.md").read_text()
    assert "**The model leaves out the series' significant period of 1 (x units).**" in text
    assert "the search never saw it" in text and "--search-windows" in text
    assert "left out:** the best model does not contain" in text
    assert "note: the best model leaves out the series' significant period(s) of 1" in (
        capsys.readouterr().err
    )
