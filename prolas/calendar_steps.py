"""The calendar step of a dated series, and the dates that continue it.

A series whose x came from dates is continued on its own calendar: month starts stay
month starts, month ends month ends, and so on; adding a number of days, or of decimal
years, would drift (31 days after 2020-09-01 is 2020-10-02). :func:`calendar_step`
reads the step from the distinct dates ``t_0 < t_1 < ... < t_{n-1}`` as a pandas offset,
in the first of these units in which the dates are regular:

1. months: every date on the same day of its month (day 1, a month start, up to day
   28), or every date the last day of its month, all at one time of day. The steps
   are ``s_i = 12 (year_{i+1} - year_i) + (month_{i+1} - month_i)`` months; quarters
   are 3 months, years 12.
2. business days: every date a weekday at midnight, the most common step one calendar
   day and at least one step over a weekend. The steps are counted in business days
   (``numpy.busday_count``).
3. a fixed duration (weeks, days, hours, seconds, ...): ``s_i = t_{i+1} - t_i``.

In each unit the step is the most common step ``k`` (the smaller on a tie) and the dates
are regular in that unit when every ``s_i`` is a whole multiple of ``k``: a missing point
(``s_i = 2k``) leaves the step unchanged, a point off the grid makes the unit irregular.
When no unit is regular, a complete series of another frequency pandas recognises
(:func:`pandas.infer_freq`, e.g. the first business day of each month) continues at it;
failing that, :func:`continue_dates` adds the median step, which is exact for a series
regular in time but off the calendar's grid.

>>> dates = pd.to_datetime(["2020-01-01", "2020-02-01", "2020-04-01", "2020-05-01"])
>>> calendar_step(dates)
<MonthBegin>
>>> continue_dates(dates, 2).strftime("%Y-%m-%d").tolist()
['2020-06-01', '2020-07-01']
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset
from pandas.tseries.offsets import BaseOffset

from prolas.errors import DataError

__all__ = ["LAST_DATE", "calendar_step", "continue_dates"]

#: Forecast dates end before this: decimal years reach 2261.0
#: (:func:`prolas.data.decimal_years_to_timestamps`), nanosecond dates 2262-04-11.
LAST_DATE = pd.Timestamp("2261-01-01")

_DAY = pd.Timedelta(days=1)
_WEEK = pd.Timedelta(days=7)


def _mode(steps: np.ndarray) -> int:
    """The most common step, the smaller on a tie."""
    counts = Counter(steps.tolist())
    return int(min(counts, key=lambda s: (-counts[s], s)))


def _regular_step(steps: np.ndarray) -> int | None:
    """The most common of the positive integer ``steps`` when every step is a whole
    multiple of it; else None."""
    if steps.size == 0 or np.any(steps <= 0):
        return None
    k = _mode(steps)
    return k if np.all(steps % k == 0) else None


def _month_step(dates: pd.DatetimeIndex) -> BaseOffset | None:
    """k months when the dates share a day of the month (<= 28) or are all month ends,
    at one time of day."""
    if len(set(dates.time)) != 1:
        return None
    days = dates.day
    if np.all(days == days[0]) and days[0] <= 28:
        kind = "start" if days[0] == 1 else "day"
    elif np.all(dates.is_month_end):
        kind = "end"
    else:
        return None
    months = np.asarray(dates.year * 12 + dates.month, dtype=np.int64)
    k = _regular_step(np.diff(months))
    if k is None:
        return None
    if kind == "start":
        return pd.offsets.MonthBegin(k)
    if kind == "end":
        return pd.offsets.MonthEnd(k)
    return pd.DateOffset(months=k)


def _business_day_step(dates: pd.DatetimeIndex, calendar_days: np.ndarray) -> BaseOffset | None:
    """k business days for weekday dates at midnight stepping mostly a day at a time and
    skipping at least one weekend."""
    if not np.all(dates == dates.normalize()) or np.any(dates.dayofweek >= 5):
        return None
    if _mode(calendar_days) != 1:
        return None
    days = dates.values.astype("datetime64[D]")
    business = np.busday_count(days[:-1], days[1:])
    if np.array_equal(business, calendar_days):  # no weekend in between: plain days
        return None
    k = _regular_step(business)
    return None if k is None else pd.offsets.BDay(k)


def _fixed_step(dates: pd.DatetimeIndex) -> BaseOffset | None:
    """A fixed duration: whole weeks, whole days, or a pandas Tick (hours, minutes, ...)."""
    steps = np.diff(dates.values.astype("datetime64[ns]").astype(np.int64))
    k = _regular_step(steps)
    if k is None:
        return None
    step = pd.Timedelta(k, unit="ns")
    if step % _WEEK == pd.Timedelta(0):
        return pd.offsets.Week(step // _WEEK)
    if step % _DAY == pd.Timedelta(0):
        return pd.offsets.Day(step // _DAY)
    return to_offset(step)


def calendar_step(dates: pd.DatetimeIndex) -> BaseOffset | None:
    """The calendar step of ``dates`` (module docstring), or None when the dates are not
    regular in any calendar unit.

    Args:
        dates: at least two distinct dates (repeats are ignored; sorted here).
    """
    dates = pd.DatetimeIndex(dates).unique().sort_values()
    if len(dates) < 2:
        return None
    step = _month_step(dates)
    if step is None:
        calendar_days = np.diff(dates.normalize().values.astype("datetime64[D]")).astype(np.int64)
        step = _business_day_step(dates, calendar_days)
    if step is None:
        step = _fixed_step(dates)
    if step is None and len(dates) >= 3:
        try:
            freq = pd.infer_freq(dates)
        except (TypeError, ValueError):
            freq = None
        step = to_offset(freq) if freq is not None else None
    return step


def continue_dates(dates: pd.DatetimeIndex, horizon: int) -> pd.DatetimeIndex:
    """The ``horizon`` dates after the last of ``dates``, one :func:`calendar_step` apart
    (exact on the calendar), or the median step apart when the dates are regular in no
    calendar unit. Nanosecond resolution.

    Raises:
        DataError: the dates would run past :data:`LAST_DATE`.
    """
    dates = pd.DatetimeIndex(dates).unique().sort_values()
    last = dates[-1]
    step = calendar_step(dates)
    median = pd.Series(dates).diff().dropna().median()
    try:
        if step is not None:
            future = pd.date_range(last + step, periods=horizon, freq=step).as_unit("ns")
        else:
            future = pd.DatetimeIndex([last + j * median for j in range(1, horizon + 1)])
        ok = future[-1] < LAST_DATE
    except (OverflowError, pd.errors.OutOfBoundsDatetime):
        ok = False
    if not ok:
        what = f"steps of {step.freqstr}" if step is not None else f"median steps of {median}"
        raise DataError(
            f"{horizon} {what} after {last:%Y-%m-%d} run past {LAST_DATE:%Y-%m-%d}, the end of "
            "the dates that can be shown; forecast fewer steps"
        )
    return pd.DatetimeIndex(future).as_unit("ns")
