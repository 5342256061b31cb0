"""CSV -> Dataset: loading, validation, standardisation and the extrapolation split.

Conventions (docs/conventions.md): inputs are 1-D in the data's own units; y is standardised
before fitting, ``y' = (y - mean) / std`` with ``ddof = 0``.

Reading: the column separator (``,`` ``;`` tab ``|``), the decimal mark and a thousands
separator come from the file itself (:mod:`prolas.csv_dialect`); what the file leaves
open is refused, never guessed.

Column choice when ``x``/``y`` are not named: a column literally named ``y`` is y and
one literally named ``x`` is x (each is used or rejected, never skipped for another
column); otherwise the first two numeric columns; a single numeric column is y with
``x = 0..N-1``; a date/datetime column becomes x in decimal years
(``2001-07-02`` -> 2001.5).

In memory (:func:`as_dataset`): a pandas DataFrame follows the same column rules (its
index is x when it holds dates and no x is named), a Series is y over its index, and
arrays are x and y; the messages name positions and keyword arguments (``dropna=True``)
instead of CSV lines and flags.

Valid values (:meth:`Dataset.from_arrays`): finite, at most :data:`MAX_MAGNITUDE` in
magnitude (float64 ends at 1.8e308; predictions and plots extend beyond the data and
need headroom), at least two distinct x values, y not constant to 12 significant
digits. The mean and standard deviation of y are computed on y scaled by a power of
two (bit-identical to ``y.mean()``/``y.std()`` wherever those do not overflow or
underflow), so y of any scale from ``1e-300`` to ``1e300`` standardises to finite
values; x is rescaled inside the fit, ``t = (x - x0) / span``.

>>> ds = Dataset.from_arrays([0.0, 1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 5.0, 4.0])
>>> round(float(ds.y_standardised.mean()), 12), ds.n
(0.0, 5)
"""

from __future__ import annotations

import io
import math
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.csv_dialect import read_text, sniff_dialect
from prolas.errors import DataError, warn_caller

__all__ = [
    "CSV_ROWS",
    "Dataset",
    "FRAME_ROWS",
    "RowNames",
    "as_dataset",
    "load_csv",
    "extrapolation_split",
    "decimal_years_to_timestamps",
    "parse_dates",
    "timestamps_to_decimal_years",
    "MIN_POINTS",
    "MAX_MAGNITUDE",
]

#: Fewer points than this cannot support a kernel search.
MIN_POINTS = 5

#: Largest accepted magnitude of an x or y value: float64 ends at 1.8e308, and the
#: fit, the extrapolation (plots run 20 % of the span beyond the data) and the
#: predictive bands need room above the data's own scale.
MAX_MAGNITUDE = 1e300

#: y is constant when its standard deviation is below this fraction of its largest
#: magnitude (equal to 12 significant digits), whatever its scale.
CONSTANT_TOLERANCE = 1e-12


@dataclass(frozen=True)
class RowNames:
    """How a one-line error names the rows and options of where the data came from.

    Attributes:
        line: what a row is called (``"CSV line"``, ``"position"``).
        first: the number of the first data row (2 in a CSV file: the header is line 1).
        x_option, y_option, dropna: the options as the user gives them (``--x`` or
            ``x=``; ``--dropna`` or ``dropna=True``).
    """

    line: str
    first: int
    x_option: str
    y_option: str
    dropna: str

    def at(self, bad: np.ndarray) -> str:
        """``"CSV line 3, 7, 9 ..."``: the first 5 flagged rows."""
        rows = ", ".join(str(i + self.first) for i in np.flatnonzero(bad)[:5])
        return f"{self.line} {rows}" + (" ..." if bad.sum() > 5 else "")


#: A CSV file's rows and the command line's flags (:func:`load_csv`, ``prolas fit``).
CSV_ROWS = RowNames("CSV line", 2, "--x", "--y", "--dropna")
#: In-memory data (:func:`as_dataset`): positions from 0 and keyword arguments.
FRAME_ROWS = RowNames("position", 0, "x=", "y=", "dropna=True")


def _moments(v: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation (``ddof = 0``) of ``v`` without overflow or underflow.

    Computed on ``v / 2**e`` with ``2**e`` the power of two just above ``max |v|``
    and scaled back: dividing by a power of two is exact, so the result is bit-identical
    to ``v.mean()``/``v.std()`` wherever those are finite and not subnormal, and stays
    finite (and non-zero for non-constant data) for values up to 1.8e308 and down to
    the smallest normal floats, where squaring would overflow (1e200**2) or underflow
    (1e-200**2).
    """
    peak = float(np.max(np.abs(v)))
    if peak == 0.0:
        return 0.0, 0.0
    scale = math.ldexp(1.0, math.frexp(peak)[1])
    z = v / scale
    return float(z.mean()) * scale, float(z.std()) * scale


@dataclass(frozen=True, eq=False)
class Dataset:
    """A 1-D regression data set, sorted by x.

    Attributes:
        x: inputs in the data's own units, shape ``(n,)``, float64, sorted.
        y: outputs in original units, shape ``(n,)``, float64.
        y_mean, y_std: standardisation constants (``ddof = 0``).
        path, x_column, y_column: provenance (for result.json).
        x_is_date: x came from a date column and holds decimal years
            (:func:`decimal_years_to_timestamps` turns it back into dates). Not part of
            result.json's data block (its keys are fixed by its schema).
        fixed_spacing: Δ of these points when it is not their median spacing: a search
            view of a long series (:mod:`prolas.search.view`) whose dense windows resolve
            shorter periods than its evenly spaced points; ``None`` (every ordinary data
            set): the median spacing (:attr:`spacing`).
        period_hints: periods (x's units) that fits of these points also start from:
            a search view's significant periods of the full series
            (:mod:`prolas.spectrum`); empty for an ordinary data set.

    ``fixed_spacing`` and ``period_hints`` are inputs of every fit on the data set, so
    they are part of its identity wherever fits are cached or journalled
    (:meth:`fit_identity`).
    """

    x: np.ndarray
    y: np.ndarray
    y_mean: float
    y_std: float
    path: str = "<memory>"
    x_column: str = "x"
    y_column: str = "y"
    name: str = field(default="data")
    x_is_date: bool = False
    fixed_spacing: float | None = None
    period_hints: tuple[float, ...] = ()

    @classmethod
    def from_arrays(
        cls,
        x: np.ndarray | list[float],
        y: np.ndarray | list[float],
        *,
        name: str = "data",
        path: str = "<memory>",
        x_column: str = "x",
        y_column: str = "y",
        x_is_date: bool = False,
        rows: RowNames = CSV_ROWS,
    ) -> Dataset:
        """Validate, sort by x and compute the standardisation constants.

        Checked, each failure a one-line :class:`DataError`: x and y have the same
        length; every value is finite (NaN/inf, with the CSV lines, or what ``rows``
        calls the rows, in the order given) and at most
        :data:`MAX_MAGNITUDE` in magnitude; at least :data:`MIN_POINTS` points; y is
        not constant (standard deviation at least :data:`CONSTANT_TOLERANCE` of its
        largest magnitude) and standardises to finite values; x has two distinct
        values and a finite span.
        """
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if x.shape != y.shape:
            raise DataError(f"{path}: x has {x.size} values but y has {y.size}")
        for label, v in ((x_column, x), (y_column, y)):
            bad = ~np.isfinite(v)
            if bad.any():
                raise DataError(
                    f"{path}: column {label!r} has {int(bad.sum())} NaN/inf value(s) "
                    f"({rows.at(bad)}); fix them or pass {rows.dropna}"
                )
        for label, v in ((x_column, x), (y_column, y)):
            huge = np.abs(v) > MAX_MAGNITUDE
            if huge.any():
                raise DataError(
                    f"{path}: column {label!r} has {int(huge.sum())} value(s) beyond "
                    f"{MAX_MAGNITUDE:.0e} in magnitude ({rows.at(huge)}, "
                    f"largest {float(np.max(np.abs(v))):.3g}); rescale the column"
                )
        if x.size < MIN_POINTS:
            raise DataError(f"{path}: {x.size} data points; at least {MIN_POINTS} are needed")
        mean, std = _moments(y)  # ddof = 0 (docs/conventions.md)
        if not std > 0 or std < CONSTANT_TOLERANCE * float(np.max(np.abs(y))):
            raise DataError(f"{path}: column {y_column!r} is constant; nothing to model")
        if not np.all(np.isfinite((y - mean) / std)):  # a guard: |y| <= 1e300 keeps this true
            raise DataError(
                f"{path}: column {y_column!r} cannot be standardised in float64 "
                f"(mean {mean:.3g}, std {std:.3g}); rescale the column"
            )
        span = float(np.max(x) - np.min(x))
        if not span > 0:
            raise DataError(f"{path}: column {x_column!r} is constant; need distinct inputs")
        if not math.isfinite(span):  # a guard: |x| <= 1e300 keeps this true
            raise DataError(f"{path}: column {x_column!r} spans more than float64 can hold")
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
        n_dup = x.size - np.unique(x).size
        if n_dup:
            warn_caller(
                f"{path}: {n_dup} duplicate x value(s); they are fitted as repeated observations"
            )
        x.setflags(write=False)
        y.setflags(write=False)
        return cls(x, y, mean, std, path, x_column, y_column, name, x_is_date)

    # --- derived quantities ------------------------------------------------------------
    @property
    def n(self) -> int:
        return int(self.x.size)

    @property
    def y_standardised(self) -> np.ndarray:
        """``(y - mean) / std``, shape ``(n,)``."""
        return (self.y - self.y_mean) / self.y_std

    @property
    def span(self) -> float:
        return float(self.x[-1] - self.x[0])

    @property
    def spacing(self) -> float:
        """Δ: the median spacing of the sorted distinct inputs (PER's period floor is 2Δ),
        or :attr:`fixed_spacing` when set (a search view with dense windows)."""
        if self.fixed_spacing is not None:
            return float(self.fixed_spacing)
        return float(np.median(np.diff(np.unique(self.x))))

    def fit_identity(self) -> dict:
        """What besides x and y decides a fit on these points: ``{}`` for an ordinary data
        set, else its ``fixed_spacing`` and ``period_hints`` (fit caches and journals add
        it to the data's fingerprint)."""
        out: dict = {}
        if self.fixed_spacing is not None:
            out["fixed_spacing"] = float(self.fixed_spacing)
        if self.period_hints:
            out["period_hints"] = [float(p) for p in self.period_hints]
        return out

    def with_fit_hints(
        self, fixed_spacing: float | None, period_hints: tuple[float, ...] = ()
    ) -> Dataset:
        """This data set with the given :attr:`fixed_spacing` and :attr:`period_hints`."""
        if fixed_spacing is not None and not (math.isfinite(fixed_spacing) and fixed_spacing > 0):
            raise DataError(f"{self.name}: the spacing must be a positive number")
        hints = tuple(float(p) for p in period_hints if math.isfinite(p) and p > 0)
        return replace(self, fixed_spacing=fixed_spacing, period_hints=hints)

    def standardise(self, y: np.ndarray) -> np.ndarray:
        return (np.asarray(y, dtype=np.float64) - self.y_mean) / self.y_std

    def unstandardise(self, y: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`standardise` for means (variances scale by ``y_std**2``)."""
        return np.asarray(y, dtype=np.float64) * self.y_std + self.y_mean

    def spaced_indices(self, max_points: int) -> np.ndarray:
        """At most ``max_points`` evenly spaced indices (by position in x order), first and
        last included; every index when the data are short enough."""
        if self.n <= max_points:
            return np.arange(self.n)
        return np.unique(np.linspace(0, self.n - 1, max_points).round().astype(int))

    def thinned(self, max_points: int) -> Dataset:
        """At most ``max_points`` evenly spaced points (by position in x order).

        Keeps the first and last point and *this* data set's ``y_mean``/``y_std``, so
        hyperparameters fitted on the thinning (for standardised y) are valid for the
        full data. Returns ``self`` when it is short enough.
        """
        if self.n <= max_points:
            return self
        idx = self.spaced_indices(max_points)
        return self.take(idx, f"{self.name} (thinned to {len(idx)} of {self.n})")

    def take(self, indices: np.ndarray, name: str) -> Dataset:
        """The points at ``indices`` (positions in x order, increasing), keeping *this*
        data set's standardisation: hyperparameters fitted for its standardised y stay
        valid (a thinning, or the prefix a rolling-origin check conditions on)."""
        x, y = self.x[indices].copy(), self.y[indices].copy()
        x.setflags(write=False)
        y.setflags(write=False)
        return Dataset(
            x,
            y,
            self.y_mean,
            self.y_std,
            self.path,
            self.x_column,
            self.y_column,
            name,
            self.x_is_date,
        )

    def standardised_view(self) -> Dataset:
        """This data set with y replaced by its standardised values (mean 0, std 1).

        :func:`prolas.gp.predict` and :func:`prolas.gp.decompose` on this view return
        standardised means and variances; the callers scale them back themselves
        (``sd = sqrt(v') * y_std``), which stays finite where ``v' * y_std**2`` would
        overflow (``y_std > 1e154``) or underflow (``y_std < 1e-154``).
        """
        y = self.y_standardised
        y.setflags(write=False)
        return Dataset(
            self.x,
            y,
            0.0,
            1.0,
            self.path,
            self.x_column,
            self.y_column,
            self.name,
            self.x_is_date,
        )

    def subset(self, mask: np.ndarray, name: str | None = None) -> Dataset:
        return Dataset.from_arrays(
            self.x[mask],
            self.y[mask],
            name=name or self.name,
            path=self.path,
            x_column=self.x_column,
            y_column=self.y_column,
            x_is_date=self.x_is_date,
        )

    @property
    def x_dates(self) -> pd.DatetimeIndex:
        """x as dates (:func:`decimal_years_to_timestamps`); only when ``x_is_date``."""
        if not self.x_is_date:
            raise ValueError(f"{self.name}: x ({self.x_column!r}) did not come from dates")
        return decimal_years_to_timestamps(self.x)

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "x_column": self.x_column,
            "y_column": self.y_column,
            "n": self.n,
            "y_mean": self.y_mean,
            "y_std": self.y_std,
        }


def parse_dates(values: pd.Series | Iterable) -> tuple[pd.Series, np.ndarray]:
    """``(dates, not-a-date mask)`` of a column of dates.

    Each date is its wall-clock date and time: an offset or time zone is dropped, since the
    calendar the data were kept in is the one to model (daily data across a
    daylight-saving change stay one day apart). A missing value is ``NaT`` and not flagged;
    a value that is present but no date is ``NaT`` and flagged. pandas' vectorised parser
    (one format for the column) is tried first; a column that mixes formats or offsets, or
    holds a bad value, is parsed value by value, where a plain number is no date
    (``dateutil`` would read ``"12"`` as the 12th of the current month).

    Returns a ``datetime64[ns]`` Series (the input's index) and a bool array, one per value.
    """
    s = values if isinstance(values, pd.Series) else pd.Series(list(values))
    if isinstance(s.dtype, pd.PeriodDtype):
        s = s.dt.to_timestamp()
    no_bad = np.zeros(len(s), dtype=bool)
    if pd.api.types.is_datetime64_any_dtype(s):
        return _naive(s), no_bad
    text = s.dropna().astype(str)
    numerals = text.str.fullmatch(NUMBER) | text.str.fullmatch(THOUSANDS)
    parsed = None
    if not numerals.any():  # else the value-by-value parse flags them
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                parsed = pd.to_datetime(s)
            except (ValueError, TypeError, OverflowError):
                pass
    if parsed is not None and pd.api.types.is_datetime64_any_dtype(parsed):
        return _naive(parsed), no_bad
    # mixed formats or offsets (pandas gives objects or raises), or a bad value
    dates = [_wall_clock(v) for v in s]
    bad = np.array([d is None for d in dates], dtype=bool)
    out = pd.Series([pd.NaT if d is None else d for d in dates], index=s.index)
    return out.astype("datetime64[ns]"), bad


def _naive(dates: pd.Series) -> pd.Series:
    """Datetimes as their local wall-clock times, without the zone."""
    return dates.dt.tz_localize(None) if dates.dt.tz is not None else dates


def _wall_clock(value: object) -> pd.Timestamp | None:
    """One value as a naive Timestamp (its wall-clock time), NaT if missing, None if it
    is no date."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return pd.NaT
    text = str(value)
    if isinstance(value, str | int | float) and (
        re.fullmatch(NUMBER, text) or re.fullmatch(THOUSANDS, text)
    ):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = pd.Timestamp(value).as_unit("ns")  # outside 1677-2262: no date here
    except (ValueError, TypeError, OverflowError):
        return None
    if t is pd.NaT:
        return pd.NaT
    return t.tz_localize(None) if t.tzinfo is not None else t


def timestamps_to_decimal_years(values: pd.Series | Iterable) -> np.ndarray:
    """Datetimes -> decimal years: ``Y + (t - Jan 1 of Y) / (Jan 1 of Y+1 - Jan 1 of Y)``
    for a date ``t`` in year ``Y`` (start of year plus the fraction of the year elapsed,
    with the year's true length, 365 or 366 days). Returns float64, one per value, NaN
    for a missing date; the inverse is :func:`decimal_years_to_timestamps`. Text is read
    by :func:`parse_dates` (wall-clock times).

    Raises:
        DataError: a value that is no date.
    """
    s = values if isinstance(values, pd.Series) else pd.Series(list(values))  # read once
    dates, bad = parse_dates(s)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"not a date: {s.iloc[i]!r} (value {i + 1})")
    t = dates.to_numpy(dtype="datetime64[ns]")
    valid = ~np.isnat(t)
    years = t.astype("datetime64[Y]")
    start = years.astype("datetime64[ns]")
    end = (years + 1).astype("datetime64[ns]")
    out = np.full(t.shape, np.nan)
    with np.errstate(invalid="ignore"):
        frac = (t[valid] - start[valid]) / (end[valid] - start[valid])
    out[valid] = years[valid].astype(np.int64) + 1970 + frac
    return out


def decimal_years_to_timestamps(
    values: np.ndarray | list[float] | float, resolution: str | None = "s"
) -> pd.DatetimeIndex:
    """Decimal years -> dates: the inverse of :func:`timestamps_to_decimal_years`.

    ``v = Y + f`` with ``Y = floor(v)`` is the date ``Jan 1 of Y + f * (length of
    year Y)``, with the year's true length (365 or 366 days), exactly as
    :func:`timestamps_to_decimal_years` measures the fraction. A float64 decimal year near 2000
    resolves about 7 microseconds, so the dates are rounded to ``resolution``
    (``"s"``, a second, by default; ``None`` keeps nanoseconds): a date with whole
    seconds survives ``dates -> decimal years -> dates`` exactly.

    >>> decimal_years_to_timestamps([2001.0, 2001.5]).strftime("%Y-%m-%d %H:%M").tolist()
    ['2001-01-01 00:00', '2001-07-02 12:00']

    Raises:
        DataError: a value that is not finite or outside pandas' date range
            (1678-2261).
    """
    v = np.atleast_1d(np.asarray(values, dtype=np.float64))
    lo, hi = pd.Timestamp.min.year + 1, pd.Timestamp.max.year - 1
    bad = ~np.isfinite(v) | (v < lo) | (v >= hi)
    if bad.any():
        raise DataError(
            f"decimal year {float(v[bad][0])!r} cannot be shown as a date "
            f"(dates run from {lo} to {hi})"
        )
    years = np.floor(v).astype(np.int64)
    start = (years - 1970).astype("datetime64[Y]").astype("datetime64[ns]")
    end = (years - 1969).astype("datetime64[Y]").astype("datetime64[ns]")
    length = (end - start).astype(np.int64)  # nanoseconds in the year
    offset = np.rint((v - years) * length).astype(np.int64).astype("timedelta64[ns]")
    out = pd.DatetimeIndex(start + offset)
    return out.round(resolution) if resolution else out


def _as_numeric(
    df: pd.DataFrame, col: str, path: str, rows: RowNames = CSV_ROWS
) -> tuple[np.ndarray, bool]:
    """A column as float64; dates become decimal years. Returns (values, was_date).

    A True/False column is refused rather than read as 1/0: it is an indicator column
    picked by mistake far more often than a series (a user who means it writes 1/0)."""
    s = df[col]
    if is_boolean_column(s):
        raise boolean_column_error(path, col)
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        return s.to_numpy(dtype=np.float64, na_value=np.nan), False
    if (
        isinstance(s.dtype, pd.PeriodDtype)
        or pd.api.types.is_datetime64_any_dtype(s)
        or _looks_like_dates(s)
    ):
        dates, bad = parse_dates(s)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            where = rows.at(np.arange(len(s)) == i)
            raise DataError(
                f"{path}: column {col!r} holds dates but one value is not a date "
                f"({where}: {s.iloc[i]!r})"
            )
        return timestamps_to_decimal_years(dates), True
    values, bad = parse_numbers(s)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        where = rows.at(np.arange(len(s)) == i)
        raise DataError(f"{path}: {not_numeric(col, where, s.iloc[i])}")
    return values, False


def is_boolean_column(s: pd.Series) -> bool:
    """Whether the column's values are all True/False (bool dtype, or bools among missing
    values, which pandas keeps as objects)."""
    if pd.api.types.is_bool_dtype(s):
        return True
    present = s.dropna()
    return (
        s.dtype == object
        and len(present) > 0
        and all(isinstance(v, (bool, np.bool_)) for v in present)
    )


def boolean_column_error(where: str, col: str) -> DataError:
    """The one-line error for a True/False column where numbers are needed."""
    return DataError(
        f"{where}: column {col!r} holds True/False values, not numbers; choose a numeric "
        "column, or write them as 1/0 if they are the series"
    )


#: A plain decimal numeral (no thousands separators, no ``inf``/``nan`` words; spelled out:
#: a class like ``[\d.eE+-]+`` also matches 2001-07-02).
NUMBER = r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*"

#: A numeral with thousands separators (``5,841.5``): not read as a number (``1,234`` may be
#: 1.234 in a file with decimal commas), and never a date (``dateutil`` reads it as one).
THOUSANDS = r"\s*[-+]?\d{1,3}(?:,\d{3})+(?:\.\d*)?\s*"


def not_numeric(col: str, where: str, value: object) -> str:
    """The message for a value of a numeric column that is no number, with a hint for a
    numeral with thousands separators."""
    hint = (
        "; remove the thousands separators"
        if isinstance(value, str) and re.fullmatch(THOUSANDS, value)
        else ""
    )
    return f"column {col!r} is not numeric ({where}: {value!r}{hint})"


def parse_numbers(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(float64 values, not-a-number mask)`` of a column read as text.

    Text that is no number is NaN and flagged; a missing value is NaN and not flagged. A
    numeral beyond float64's range (``1e400``), which pandas' parser leaves as text, is
    ``±inf`` as Python's ``float`` reads it, not flagged: the NaN/inf checks then name it
    (and ``--dropna`` drops it) instead of calling a number "not numeric"."""
    converted = pd.to_numeric(values, errors="coerce")
    out = converted.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = (converted.isna() & values.notna()).to_numpy()
    if bad.any():
        text = values[bad].astype(str)
        numeral = text.str.fullmatch(NUMBER).to_numpy()
        at = np.flatnonzero(bad)[numeral]
        out[at] = [float(t) for t in text[numeral]]
        bad[at] = False
    return out, bad


def check_unique_columns(names: Iterable[object], where: str) -> None:
    """Raise a :class:`DataError` when two of a table's column names are the same once
    stripped: pandas renames a repeat (``y``, ``y.1``), so one column would be read in
    place of the other without a word. Unnamed columns (empty header cells) are skipped."""
    seen: dict[str, int] = {}
    for c in names:
        if c is None or (isinstance(c, float) and math.isnan(c)):
            continue
        key = str(c).strip()
        seen[key] = seen.get(key, 0) + 1
    repeated = [c for c, k in seen.items() if k > 1]
    if repeated:
        raise DataError(
            f"{where}: column {repeated[0]!r} appears {seen[repeated[0]]} times in the header; "
            "give each column its own name"
        )


def header_names(source: Path | io.StringIO, **read_options: object) -> list[object]:
    """The raw names of a CSV header row (before pandas renames repeats); ``source`` is
    a file or its decoded text."""
    options = {k: v for k, v in read_options.items() if k in ("sep", "index_col")}
    head = pd.read_csv(source, header=None, nrows=1, dtype=str, **options)
    return head.iloc[0].tolist() if len(head) else []


def _mostly_numeric(s: pd.Series) -> bool:
    """A text column whose values are mostly numbers (a few stray strings).

    Such a column is meant to be numeric: it is selected like one, and
    :func:`_as_numeric` then names the offending value instead of the column being
    silently skipped.
    """
    if s.dtype != object and not pd.api.types.is_string_dtype(s):
        return False
    values = s.dropna()
    if values.empty:
        return False
    return bool(pd.to_numeric(values, errors="coerce").notna().mean() >= 0.5)


def _looks_like_dates(s: pd.Series) -> bool:
    if s.dtype != object and not pd.api.types.is_string_dtype(s):
        return False
    sample = s.dropna().astype(str).head(20)
    # plain numbers are not dates (a character class such as [\d.eE+-]+ would also
    # match "2001-07-02", so spell the number out)
    if sample.empty or sample.str.fullmatch(NUMBER).all():
        return False
    _, bad = parse_dates(sample)
    return not bad.any()


def load_csv(
    path: str | Path,
    x: str | None = None,
    y: str | None = None,
    *,
    dropna: bool = False,
    name: str | None = None,
    decimal: str | None = None,
) -> Dataset:
    """Load a CSV file into a :class:`Dataset`.

    The column separator (``,`` ``;`` tab ``|``), the decimal mark and a thousands
    separator are read from the file (:func:`prolas.csv_dialect.sniff_dialect`), so
    ``date;sales`` / ``2020-01-01;1,5`` loads dates as x and 1.5 as y; a file that leaves
    them open, or whose header does not name its rows' columns, is refused.

    Args:
        path: CSV file with a header row (``.gz``, ``.bz2``, ``.xz``, ``.zip`` are
            decompressed).
        x, y: column names; by default the columns named ``x`` and ``y`` if present,
            else the first two numeric (or date) columns, or a single column as y
            with ``x = 0..N-1``. A chosen column that is not numeric is an error
            naming it and its first bad CSV line, never a switch to another column.
        dropna: drop rows whose x or y is NaN/inf (reported with a warning) instead
            of failing.
        decimal: the decimal mark, ``"."`` or ``","``, for a file whose numbers leave it
            open (``10.283`` in a ``;``-separated file: 10.283 or 10283?); default: read
            from the numbers.

    Raises:
        DataError: missing/unreadable file, a separator or decimal mark that cannot be
            told, a number that contradicts ``decimal``, a header that does not name the
            rows' columns or names one twice, absent column (lists those present), no
            numeric column, a chosen column that is not numeric, NaN/inf values (a
            numeral beyond float64, ``1e400``, is inf), values beyond
            :data:`MAX_MAGNITUDE`, fewer than 5 points, constant y.
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"{p}: file not found")
    if p.is_dir():
        raise DataError(f"{p}: is a directory, expected a CSV file")
    df = read_csv_table(p, decimal=decimal)
    if df.empty or df.shape[1] == 0:
        raise DataError(f"{p}: no data rows")
    return _frame_dataset(
        df, x, y, dropna=dropna, name=name or p.stem, path=str(path), where=str(p), rows=CSV_ROWS
    )


def read_csv_table(
    path: Path, *, decimal: str | None = None, text_columns: Iterable[str] = ()
) -> pd.DataFrame:
    """The table of a CSV file, read the way the file is written: its separator, decimal
    mark and thousands separator (:func:`~prolas.csv_dialect.sniff_dialect`; ``decimal``
    when the user gives it), numbers correctly rounded, column names stripped. Columns
    named in ``text_columns`` are read as text (a series id ``007`` stays ``007``).
    Shared by :func:`load_csv` and the long-format reader of ``prolas fit-many``.

    The file is read from disk and decoded once (:func:`~prolas.csv_dialect.read_text`:
    decompressed, UTF-8 or Windows-1252); pandas parses that text.

    Raises:
        DataError: an unreadable file, text in neither encoding or a spreadsheet workbook,
            a separator or decimal mark that cannot be told, a malformed file, a column
            named twice.
    """
    text, _ = read_text(path)
    options = sniff_dialect(text, str(path), decimal).read_csv_options()
    try:
        dtype = None
        if wanted := set(text_columns):
            header = pd.read_csv(io.StringIO(text), nrows=0, **options)
            dtype = {c: str for c in header.columns if str(c).strip() in wanted} or None
        df = pd.read_csv(io.StringIO(text), dtype=dtype, **options)
        check_unique_columns(header_names(io.StringIO(text), **options), str(path))
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: cannot read as CSV ({msg})") from None
    df.columns = [str(c).strip() for c in df.columns]
    return df


def _frame_dataset(
    df: pd.DataFrame,
    x: str | None,
    y: str | None,
    *,
    dropna: bool,
    name: str,
    path: str,
    where: str,
    rows: RowNames,
) -> Dataset:
    """The Dataset of a table: :func:`load_csv`'s column choice and checks, shared with
    :func:`as_dataset`. ``where`` starts each message; ``rows`` names rows and options."""
    present = ", ".join(repr(c) for c in df.columns)
    for label, col in ((rows.x_option, x), (rows.y_option, y)):
        if col is not None and col not in df.columns:
            raise DataError(f"{where}: column {col!r} ({label}) not found; columns are {present}")

    usable = []
    for c in df.columns:
        s = df[c]
        if is_boolean_column(s):  # an indicator column is never picked for x or y
            continue
        numeric = pd.api.types.is_numeric_dtype(s)
        if (
            numeric
            or pd.api.types.is_datetime64_any_dtype(s)
            or isinstance(s.dtype, pd.PeriodDtype)
            or _looks_like_dates(s)
            or _mostly_numeric(s)
        ):
            usable.append(c)
    # a column literally named y (x) is y (x): used, or rejected by _as_numeric with
    # the first bad line, but never skipped in favour of another column
    if y is None and "y" in df.columns and x != "y":
        y = "y"
    if x is None and "x" in df.columns and y != "x":
        x = "x"
    if x is None and y is None:
        if not usable:
            raise DataError(f"{where}: no numeric column found (columns are {present})")
        if len(usable) == 1:
            y = usable[0]
        else:
            x, y = usable[0], usable[1]
    elif y is None:
        rest = [c for c in usable if c != x]
        if not rest:
            raise DataError(f"{where}: no numeric column for y besides {x!r} (columns: {present})")
        y = rest[0]
    elif x is None:
        rest = [c for c in usable if c != y]
        x = rest[0] if rest else None

    x_is_date = False
    yv, y_is_date = _as_numeric(df, y, where, rows)
    if y_is_date:
        raise DataError(
            f"{where}: column {y!r} holds dates; y must be numeric (use {rows.y_option})"
        )
    if x is None:
        xv = np.arange(len(df), dtype=np.float64)
        x_col = "index"
    else:
        xv, x_is_date = _as_numeric(df, x, where, rows)
        x_col = x
    if dropna:
        keep = np.isfinite(xv) & np.isfinite(yv)
        if not keep.all():
            warn_caller(f"{where}: dropped {int((~keep).sum())} row(s) with NaN/inf values")
            xv, yv = xv[keep], yv[keep]
    return Dataset.from_arrays(
        xv,
        yv,
        name=name,
        path=path,
        x_column=x_col,
        y_column=y,
        x_is_date=x_is_date,
        rows=rows,
    )


def as_dataset(
    data: Dataset | pd.DataFrame | pd.Series | str | Path | np.ndarray | list | None = None,
    x: str | np.ndarray | list | None = None,
    y: str | np.ndarray | list | None = None,
    *,
    dropna: bool = False,
    name: str | None = None,
) -> Dataset:
    """A :class:`Dataset` from what a user holds, with :func:`load_csv`'s rules and errors.

    * a **DataFrame**: ``x`` and ``y`` name columns (``x`` may name the index); by
      default the index is x when it holds dates (a DatetimeIndex or PeriodIndex),
      else the column rules of :func:`load_csv` (columns named ``x`` and ``y``, else the
      first two numeric or date columns, or a single column as y at positions 0..n-1);
    * a **Series**: y over its index (dates when it is a DatetimeIndex or PeriodIndex);
    * **arrays**: ``as_dataset(x=..., y=...)`` (x may hold dates), or ``as_dataset(y)``
      for y at positions 0..n-1;
    * a **CSV path**: :func:`load_csv`; a **Dataset**: itself.

    Dates become decimal years (``x_is_date``; time zones keep their wall-clock time).
    A bad value is a one-line :class:`DataError` naming its column and position (from
    0); ``dropna`` drops rows whose x or y is missing, NaN or infinite instead.

    >>> import pandas as pd
    >>> s = pd.Series([3.0, 5, 4, 6, 5], pd.date_range("2001-01-01", periods=5, freq="MS"))
    >>> ds = as_dataset(s)
    >>> ds.x_is_date, ds.n, round(float(ds.x[1]), 3)
    (True, 5, 2001.085)
    """
    if isinstance(data, Dataset):
        if x is not None or y is not None:
            raise DataError("a Dataset already has its x and y; pass x= and y= with a table")
        return data
    if isinstance(data, (str, Path)):
        return load_csv(data, x, y, dropna=dropna, name=name)
    if isinstance(data, pd.DataFrame):
        if data.shape[0] == 0 or data.shape[1] == 0:
            raise DataError("<data frame>: no data rows")
        frame = _with_index_as_x(data, x)
        x = x if x is not None or frame is data else str(frame.columns[0])
        return _frame(frame, x, y, dropna=dropna, name=name or "data", where="<data frame>")
    if isinstance(data, pd.Series):
        if x is not None or y is not None:
            raise DataError("a Series is y over its index; pass x= and y= with a DataFrame")
        y_name = str(data.name) if data.name is not None else "y"
        x_name = str(data.index.name) if data.index.name is not None else "index"
        if x_name == y_name:
            x_name = f"{x_name} (index)"
        frame = pd.DataFrame({x_name: _index_values(data.index), y_name: data.to_numpy()})
        return _frame(frame, x_name, y_name, dropna=dropna, name=name or y_name, where="<series>")
    if data is not None:  # y alone: at positions 0..n-1
        if y is not None:
            raise DataError("give the values once: as_dataset(y) or as_dataset(x=..., y=...)")
        data, y = None, data
    if isinstance(x, str) or isinstance(y, str):
        raise DataError("x and y name columns only with a DataFrame or a CSV file")
    if y is None:
        raise DataError("no data: give a DataFrame, a Series, a CSV path or y (and x) values")
    columns = {"y": _values(y, "y")}
    if x is not None:
        columns = {"x": _values(x, "x"), **columns}
        if len(columns["x"]) != len(columns["y"]):
            raise DataError(
                f"<arrays>: x has {len(columns['x'])} values but y has {len(columns['y'])}"
            )
    frame = pd.DataFrame(columns)
    return _frame(
        frame,
        "x" if x is not None else None,
        "y",
        dropna=dropna,
        name=name or "data",
        where="<arrays>",
    )


def _frame(frame: pd.DataFrame, x, y, *, dropna: bool, name: str, where: str) -> Dataset:
    check_unique_columns(frame.columns, where)
    frame = frame.reset_index(drop=True)
    frame.columns = [str(c).strip() for c in frame.columns]
    return _frame_dataset(
        frame, x, y, dropna=dropna, name=name, path=where, where=where, rows=FRAME_ROWS
    )


def _index_values(index: pd.Index) -> pd.Series:
    """An index as a column: dates stay dates (periods become their start)."""
    if isinstance(index, pd.PeriodIndex):
        index = index.to_timestamp()
    return pd.Series(np.asarray(index) if not isinstance(index, pd.DatetimeIndex) else index)


def _with_index_as_x(df: pd.DataFrame, x: str | None) -> pd.DataFrame:
    """``df`` with its index as its first column when it is x: named by ``x``, or holding
    dates when no x is named; else ``df`` itself."""
    name = str(df.index.name) if df.index.name is not None else "index"
    dated = isinstance(df.index, (pd.DatetimeIndex, pd.PeriodIndex))
    named = x is not None and x == name and x not in df.columns
    if not (named or (x is None and dated and "x" not in df.columns)):
        return df
    if name in df.columns:
        name = f"{name} (index)"
    frame = df.copy()
    frame.insert(0, name, _index_values(df.index).to_numpy())
    return frame


def _values(v, label: str) -> pd.Series:
    """Array-like values as a column (dates stay dates)."""
    if isinstance(v, pd.Index):
        return _index_values(v)
    if isinstance(v, pd.Series):
        return v.reset_index(drop=True)
    arr = np.asarray(v)
    if arr.ndim == 2 and 1 in arr.shape:  # a column or row vector
        arr = arr.reshape(-1)
    if arr.ndim != 1:
        raise DataError(f"<arrays>: {label} must be one-dimensional, got shape {arr.shape}")
    return pd.Series(arr)


def extrapolation_split(dataset: Dataset, fraction: float = 0.9) -> tuple[Dataset, Dataset]:
    """Cut on the time range at ``min + fraction * (max - min)``: train is x <= cut."""
    cut = dataset.x[0] + fraction * dataset.span
    train = dataset.x <= cut
    return (
        dataset.subset(train, name=f"{dataset.name}_train"),
        dataset.subset(~train, name=f"{dataset.name}_test"),
    )
