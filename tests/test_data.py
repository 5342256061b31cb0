"""Loading, validation, standardisation and the extrapolation split (prolas.data).

Every bad-input case of issue 2 item 8 raises a DataError whose message is one line
and names the problem.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prolas.data import Dataset, as_dataset, extrapolation_split, load_csv
from prolas.errors import DataError, ProlasError

DATA = Path(__file__).resolve().parents[1] / "data"


def write(tmp_path: Path, text: str, name: str = "d.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def load_error(path, **kwargs) -> str:
    """The message of the DataError raised by load_csv; asserts it is one line."""
    with pytest.raises(DataError) as info:
        load_csv(path, **kwargs)
    msg = str(info.value)
    assert isinstance(info.value, ProlasError)
    assert msg and "\n" not in msg, msg
    return msg


# --- bad input ------------------------------------------------------------------------


def test_missing_file(tmp_path):
    msg = load_error(tmp_path / "nope.csv")
    assert "nope.csv" in msg and "not found" in msg


def test_directory(tmp_path):
    msg = load_error(tmp_path)
    assert "directory" in msg


def test_garbage_file(tmp_path):
    p = tmp_path / "g.csv"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe\xfd binary junk")
    msg = load_error(p)
    assert "cannot read" in msg and "g.csv" in msg


def test_empty_file(tmp_path):
    msg = load_error(write(tmp_path, ""))
    assert "cannot read" in msg or "no data" in msg


def test_unreadable_file(tmp_path, monkeypatch):
    # tests may run as root, where chmod 000 does not stop reading: simulate the OSError
    p = write(tmp_path, "x,y\n1,2\n")

    def deny(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(pd, "read_csv", deny)
    msg = load_error(p)
    assert "cannot read" in msg and "Permission denied" in msg


def test_no_numeric_column(tmp_path):
    p = write(tmp_path, "name,city\n" + "".join(f"a{i},b{i}\n" for i in range(6)))
    msg = load_error(p)
    assert "no numeric column" in msg and "'name'" in msg and "'city'" in msg


@pytest.mark.parametrize("flag", ["x", "y"])
def test_named_column_absent_lists_present(flag):
    msg = load_error(DATA / "airline.csv", **{flag: "passengers"})
    assert "'passengers'" in msg and "not found" in msg
    assert "'x'" in msg and "'y'" in msg  # the columns that are present


def test_nan_and_inf_are_reported_with_count_and_lines(tmp_path):
    rows = [(1, 1.0), (2, "nan"), (3, 3.0), (4, "inf"), (5, 5.0), (6, 6.0), (7, 2.0)]
    p = write(tmp_path, "x,y\n" + "".join(f"{a},{b}\n" for a, b in rows))
    msg = load_error(p)
    assert "2 NaN/inf" in msg and "'y'" in msg
    assert "line 3" in msg and "5" in msg  # CSV lines of the bad values (header = line 1)
    assert "--dropna" in msg


def test_missing_cell_is_nan(tmp_path):
    p = write(tmp_path, "x,y\n1,1\n2,\n3,3\n4,4\n5,5\n6,7\n")
    msg = load_error(p)
    assert "1 NaN/inf" in msg and "line 3" in msg


def test_dropna_drops_with_warning(tmp_path):
    rows = [(1, 1.0), (2, "nan"), (3, 3.0), (4, "inf"), (5, 5.0), (6, 6.0), (7, 2.0)]
    p = write(tmp_path, "x,y\n" + "".join(f"{a},{b}\n" for a, b in rows))
    with pytest.warns(UserWarning, match="dropped 2 row"):
        ds = load_csv(p, dropna=True)
    assert ds.n == 5
    np.testing.assert_array_equal(ds.x, [1, 3, 5, 6, 7])
    assert np.isfinite(ds.y).all()


def test_a_numeral_beyond_float64_is_inf_not_text(tmp_path):
    # pandas' parser leaves 1e400 as text; it is a number, too large: reported (and
    # dropped) as inf like a literal inf, never called "not numeric"
    rows = [(1, 1.0), (2, "1e400"), (3, 3.0), (4, "-2E+999"), (5, 5.0), (6, 6.0), (7, 2.0)]
    p = write(tmp_path, "x,y\n" + "".join(f"{a},{b}\n" for a, b in rows))
    msg = load_error(p)
    assert "2 NaN/inf" in msg and "line 3" in msg and "not numeric" not in msg
    with pytest.warns(UserWarning, match="dropped 2 row"):
        ds = load_csv(p, dropna=True)
    np.testing.assert_array_equal(ds.x, [1, 3, 5, 6, 7])
    # a stray word beside it is still text
    p = write(tmp_path, "x,y\n1,1\n2,1e400\n3,3e\n4,4\n5,5\n6,2\n", "e.csv")
    assert "not numeric" in load_error(p) and "'3e'" in load_error(p)


def test_a_repeated_column_name_is_an_error_not_a_silent_pick(tmp_path):
    # pandas would read the second 'y' as 'y.1' and prolas would fit the first unasked
    body = "".join(f"{i},{i % 3},{i % 4}\n" for i in range(8))
    msg = load_error(write(tmp_path, "x,y,y\n" + body))
    assert "'y' appears 2 times" in msg
    msg = load_error(write(tmp_path, "x;y;y \n" + body.replace(",", ";"), "semi.csv"))
    assert "'y' appears 2 times" in msg  # any delimiter; names are stripped
    frame = pd.DataFrame([[1, 2, 3], [2, 3, 1]] * 4, columns=["x", "y", "y"])
    with pytest.raises(DataError, match="'y' appears 2 times"):
        as_dataset(frame, x="x", y="y")
    # empty header cells are unnamed columns, not repeats
    assert load_csv(write(tmp_path, "x,y,,\n" + body.replace("\n", ",\n"), "u.csv")).n == 8


def test_dropna_below_minimum_still_fails(tmp_path):
    p = write(tmp_path, "x,y\n1,1\n2,nan\n3,3\n4,nan\n5,5\n6,6\n")
    with pytest.warns(UserWarning):
        msg = load_error(p, dropna=True)
    assert "4 data points" in msg and "at least 5" in msg


def test_fewer_than_five_points(tmp_path):
    p = write(tmp_path, "x,y\n1,1\n2,3\n3,2\n4,5\n")
    msg = load_error(p)
    assert "4 data points" in msg and "at least 5" in msg


def test_constant_y(tmp_path):
    p = write(tmp_path, "x,y\n" + "".join(f"{i},3.5\n" for i in range(8)))
    msg = load_error(p)
    assert "constant" in msg and "'y'" in msg


def test_non_numeric_value(tmp_path):
    p = write(tmp_path, "x,y\n1,1\n2,abc\n3,3\n4,4\n5,5\n6,2\n")
    msg = load_error(p)
    assert "not numeric" in msg and "'abc'" in msg and "line 3" in msg


def test_non_numeric_named_column(tmp_path):
    p = write(tmp_path, "x,y,label\n" + "".join(f"{i},{i % 3},l{i}\n" for i in range(6)))
    msg = load_error(p, x="x", y="label")
    assert "'label'" in msg and "not numeric" in msg


# --- column choice -------------------------------------------------------------------------


def test_default_columns_are_first_two_numeric(tmp_path):
    text = "name,t,v,w\n" + "".join(f"n{i},{i},{i * i % 7},{-i}\n" for i in range(6))
    ds = load_csv(write(tmp_path, text))
    assert (ds.x_column, ds.y_column) == ("t", "v")
    np.testing.assert_array_equal(ds.x, np.arange(6))
    np.testing.assert_array_equal(ds.y, [i * i % 7 for i in range(6)])


def test_named_columns(tmp_path):
    text = "a,b,c\n" + "".join(f"{i},{i % 4},{10 - i}\n" for i in range(6))
    ds = load_csv(write(tmp_path, text), x="c", y="a")
    assert (ds.x_column, ds.y_column) == ("c", "a")
    np.testing.assert_array_equal(ds.x, np.arange(5, 11))  # sorted by x
    np.testing.assert_array_equal(ds.y, np.arange(6)[::-1])  # y follows its x


def test_single_column_uses_index_as_x(tmp_path):
    ds = load_csv(write(tmp_path, "y\n4\n3\n2\n5\n1\n6\n"))
    np.testing.assert_array_equal(ds.x, np.arange(6))
    np.testing.assert_array_equal(ds.y, [4, 3, 2, 5, 1, 6])
    assert ds.y_column == "y"


def test_date_column_becomes_decimal_years(tmp_path):
    dates = ["2001-01-01", "2001-07-02", "2002-01-01", "2002-07-02", "2003-01-01", "2003-04-01"]
    text = "date,v\n" + "".join(f"{d},{i * 1.5 % 4}\n" for i, d in enumerate(dates))
    ds = load_csv(write(tmp_path, text))
    assert (ds.x_column, ds.y_column) == ("date", "v")
    assert ds.x[0] == 2001.0 and ds.x[2] == 2002.0
    assert abs(ds.x[1] - 2001.5) < 0.005  # 2001-07-02: 182 of 365 days
    assert abs(ds.x[5] - (2003 + 90 / 365)) < 1e-9


def test_datetime_column_with_times(tmp_path):
    stamps = [f"2020-01-0{d} 12:00:00" for d in range(1, 7)]
    text = "when,v\n" + "".join(f"{s},{i % 3}\n" for i, s in enumerate(stamps))
    ds = load_csv(write(tmp_path, text))
    np.testing.assert_allclose(np.diff(ds.x), 1 / 366)  # 2020 is a leap year


def test_dates_with_mixed_utc_offsets_are_their_wall_clock_times(tmp_path):
    # daily data across a daylight-saving change: the offset changes, the day does not
    days = [f"2020-03-{d}T00:00:00+0{1 if d < 29 else 2}:00" for d in range(24, 32)]
    text = "when,v\n" + "".join(f"{s},{i % 3}\n" for i, s in enumerate(days))
    ds = load_csv(write(tmp_path, text))
    assert ds.x_is_date
    np.testing.assert_allclose(np.diff(ds.x), 1 / 366)
    assert ds.x_dates[0] == pd.Timestamp("2020-03-24")


def test_dates_with_and_without_an_offset_in_one_column(tmp_path):
    days = [f"2021-05-0{d}T06:00:00{'+01:00' if d < 4 else ''}" for d in range(1, 9)]
    text = "when,v\n" + "".join(f"{s},{i % 3}\n" for i, s in enumerate(days))
    ds = load_csv(write(tmp_path, text))
    np.testing.assert_allclose(np.diff(ds.x), 1 / 365)


@pytest.mark.parametrize("value", ["2020-13-45", "hello", "12"])
def test_a_bad_value_among_dates_is_named_with_its_line(tmp_path, value):
    # the bad value sits after the first 20 rows, which decide that the column holds dates
    days = [str(d.date()) for d in pd.date_range("2020-01-01", periods=40)]
    days[30] = value
    text = "date,v\n" + "".join(f"{d},{i % 5}\n" for i, d in enumerate(days))
    with pytest.raises(DataError, match=f"not a date \\(CSV line 32: '{value}'\\)"):
        load_csv(write(tmp_path, text))


def test_numbers_with_thousands_separators_are_no_dates_and_named(tmp_path):
    # dateutil reads "5,841.5" as a date in the year 327 (and "2,013.5" in 2013)
    text = "x,y\n" + "".join(f'{i},"{5000 + 900 * np.sin(i):,.1f}"\n' for i in range(30))
    with pytest.raises(
        DataError, match=r"column 'y' is not numeric \(CSV line 2: '5,000.0'; remove the thousands"
    ):
        load_csv(write(tmp_path, text))


def test_a_missing_date_is_a_missing_value_that_dropna_drops(tmp_path):
    days = [str(d.date()) for d in pd.date_range("2020-01-01", periods=40)]
    days[30] = ""
    text = "date,v\n" + "".join(f"{d},{i % 5}\n" for i, d in enumerate(days))
    path = write(tmp_path, text)
    with pytest.raises(DataError, match="column 'date' has 1 NaN.*CSV line 32"):
        load_csv(path)
    with pytest.warns(UserWarning):
        ds = load_csv(path, dropna=True)
    assert ds.n == 39 and ds.x_is_date


# --- standardisation, split, duplicates ----------------------------------------------------


def test_standardisation_and_inverse():
    ds = load_csv(DATA / "airline.csv")
    z = ds.y_standardised
    assert abs(z.mean()) < 1e-12 and abs(z.std(ddof=0) - 1) < 1e-12
    assert ds.y_mean == pytest.approx(ds.y.mean()) and ds.y_std == pytest.approx(ds.y.std())
    np.testing.assert_allclose(ds.unstandardise(z), ds.y, rtol=1e-13)
    np.testing.assert_allclose(ds.standardise(ds.y), z, rtol=1e-13)
    assert ds.to_json()["n"] == 144 and ds.to_json()["y_std"] == ds.y_std


def test_from_arrays_sorts_by_x():
    ds = Dataset.from_arrays([3.0, 1.0, 2.0, 5.0, 4.0], [30.0, 10.0, 20.0, 50.0, 40.0])
    np.testing.assert_array_equal(ds.x, [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(ds.y, [10, 20, 30, 40, 50])
    assert ds.span == 4.0 and ds.spacing == 1.0


def test_extrapolation_split_matches_airline_files():
    full = load_csv(DATA / "airline.csv")
    train, test = extrapolation_split(full)
    assert (train.n, test.n) == (129, 15)
    ref_train, ref_test = load_csv(DATA / "airline_train.csv"), load_csv(DATA / "airline_test.csv")
    np.testing.assert_allclose(train.x, ref_train.x)
    np.testing.assert_allclose(train.y, ref_train.y)
    np.testing.assert_allclose(test.x, ref_test.x)
    np.testing.assert_allclose(test.y, ref_test.y)
    assert train.x.max() <= full.x[0] + 0.9 * full.span < test.x.min()


def test_duplicate_x_loads_with_warning(tmp_path):
    p = write(tmp_path, "x,y\n1,1\n1,2\n2,3\n3,1\n4,5\n")
    with pytest.warns(UserWarning, match="1 duplicate x") as caught:
        ds = load_csv(p)
    assert caught[0].filename == __file__
    assert ds.n == 5
    np.testing.assert_array_equal(ds.x, [1, 1, 2, 3, 4])


def test_clean_file_loads_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = load_csv(DATA / "mauna.csv")
    assert ds.n > 5 and np.all(np.diff(ds.x) > 0)


@pytest.mark.parametrize(("n", "m"), [(5, 10), (10, 10), (545, 200), (144, 7), (1000, 2)])
def test_spaced_indices_are_even_and_keep_both_ends(n: int, m: int) -> None:
    x = np.arange(n, dtype=float)
    idx = Dataset.from_arrays(x, np.sin(x)).spaced_indices(m)
    assert len(idx) == min(n, m) and idx[0] == 0 and idx[-1] == n - 1
    assert np.all(np.diff(idx) > 0)  # sorted, no repeats
    gaps = np.diff(idx)
    assert gaps.max() - gaps.min() <= 1  # as even as integer positions allow


def test_decimal_years_read_an_iterable_once_and_name_a_bad_value():
    from prolas.data import timestamps_to_decimal_years

    np.testing.assert_array_equal(
        timestamps_to_decimal_years(d for d in ["2020-01-01", "2021-01-01"]), [2020.0, 2021.0]
    )
    with pytest.raises(DataError, match=r"not a date: 'soon' \(value 2\)"):
        timestamps_to_decimal_years(d for d in ["2020-01-01", "soon"])


@pytest.mark.parametrize(
    "text",
    [
        "x,y\n" + "".join(f"{i},{i % 2 == 0}\n" for i in range(8)),  # bool dtype
        "x,y\n" + "".join(f"{i},{'' if i == 3 else i % 2 == 0}\n" for i in range(8)),  # with a gap
    ],
)
def test_a_true_false_column_is_refused_not_read_as_one_and_zero(tmp_path, text):
    msg = load_error(write(tmp_path, text))
    assert "column 'y' holds True/False values" in msg and "1/0" in msg
    frame = pd.read_csv(write(tmp_path, text))
    with pytest.raises(DataError, match="True/False"):
        as_dataset(frame, x="x", y="y")


def test_a_true_false_column_is_not_picked_for_x_or_y(tmp_path):
    rows = "".join(
        f"{i % 3 == 0},{'' if i == 4 else i % 2 == 0},{i},{(i * 7) % 5}\n" for i in range(8)
    )
    ds = load_csv(write(tmp_path, "holiday,promo,t,sales\n" + rows))
    assert (ds.x_column, ds.y_column) == ("t", "sales")
