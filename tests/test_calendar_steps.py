"""Calendar steps of dated series (prolas.calendar_steps).

Law: a series regular in a calendar unit, with or without a missing point, continues
exactly as the series itself would (pandas.date_range of its own frequency); a series
regular in no unit gets its median step.
"""

from __future__ import annotations

import pandas as pd
import pytest

from prolas.calendar_steps import LAST_DATE, calendar_step, continue_dates
from prolas.errors import DataError

FREQUENCIES = [
    ("2020-01-01", "MS"),  # month starts
    ("2020-01-31", "ME"),  # month ends (28, 29, 30, 31 days)
    ("2019-11-30 18:00", "ME"),  # month ends at a time of day
    ("2020-01-15", pd.DateOffset(months=1)),  # the 15th of every month
    ("2020-01-01", "QS"),  # quarters
    ("2019-12-31", "QE"),
    ("1990-01-01", "YS"),  # years
    ("1990-12-31", "YE"),
    ("2020-01-05", "W-SUN"),  # weeks
    ("2020-02-20", "D"),  # days, over 29 February
    ("2020-01-02", "B"),  # business days
    ("2020-03-28 22:00", "h"),  # hours
    ("2020-03-28 23:50", "15min"),
]


@pytest.mark.parametrize(("start", "freq"), FREQUENCIES)
@pytest.mark.parametrize("missing", [None, 4, -2])
def test_a_regular_series_continues_on_its_calendar(start, freq, missing) -> None:
    n, horizon = 30, 15
    every = pd.date_range(start, periods=n + horizon, freq=freq)
    dates = every[:n] if missing is None else every[:n].delete(missing)
    assert list(continue_dates(dates, horizon)) == list(every[n:])


def test_the_reported_monthly_case_keeps_month_starts() -> None:
    """Month starts with one month missing: the median step of 31 days drifted to
    2020-10-02."""
    dates = pd.date_range("2020-01-01", "2020-08-01", freq="MS").delete(4)
    assert calendar_step(dates) == pd.offsets.MonthBegin(1)
    future = continue_dates(dates, 3).strftime("%Y-%m-%d").tolist()
    assert future == ["2020-09-01", "2020-10-01", "2020-11-01"]


def test_steps_are_named_in_their_unit() -> None:
    months = pd.date_range("2000-01-01", periods=12, freq="QS")
    assert calendar_step(months) == pd.offsets.MonthBegin(3)
    mondays = pd.date_range("2020-01-06", periods=10, freq="W-MON")
    assert calendar_step(mondays) == pd.offsets.Week(1)  # not five business days
    weekdays = pd.date_range("2020-01-01", periods=20, freq="B").delete(7)  # a holiday
    assert calendar_step(weekdays) == pd.offsets.BDay(1)
    five_days = pd.date_range("2020-01-06", periods=5, freq="D")  # Mon-Fri: no weekend seen
    assert calendar_step(five_days) == pd.offsets.Day(1)


def test_repeated_and_unsorted_dates_are_one_series() -> None:
    dates = pd.DatetimeIndex(["2020-03-01", "2020-01-01", "2020-02-01", "2020-02-01"])
    assert list(continue_dates(dates, 1)) == [pd.Timestamp("2020-04-01")]


def test_an_off_grid_point_falls_back_to_the_median_step() -> None:
    """A date off the grid makes every unit irregular: the median step is added."""
    days = pd.date_range("2020-01-01", periods=10, freq="D")
    dates = days.append(pd.DatetimeIndex(["2020-01-10 06:00"]))
    assert calendar_step(dates) is None
    assert list(continue_dates(dates, 2)) == [
        pd.Timestamp("2020-01-11 06:00"),
        pd.Timestamp("2020-01-12 06:00"),
    ]
    # month starts and one mid-month date: not monthly, not a fixed step
    odd = pd.DatetimeIndex(["2020-01-01", "2020-02-01", "2020-03-01", "2020-03-16"])
    assert calendar_step(odd) is None


def test_a_complete_series_of_another_frequency_keeps_it() -> None:
    """The first business day of each month: regular in no unit above, pandas names it."""
    dates = pd.date_range("2020-01-01", periods=12, freq="BMS")
    assert calendar_step(dates) == pd.offsets.BusinessMonthBegin(1)
    assert continue_dates(dates, 1)[0] == pd.Timestamp("2021-01-01")


def test_dates_past_the_last_showable_date_are_refused() -> None:
    dates = pd.date_range("2200-01-01", periods=10, freq="YS")
    assert continue_dates(dates, 40)[-1] < LAST_DATE
    with pytest.raises(DataError) as info:
        continue_dates(dates, 100)
    msg = str(info.value)
    assert "\n" not in msg and "100 steps" in msg and "fewer steps" in msg
