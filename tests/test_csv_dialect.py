"""Column separators, decimal commas and thousands separators (prolas.csv_dialect).

Laws: a table written with any supported separator and decimal mark loads back to the
same numbers; a file that leaves the separator or the decimal mark open is refused with
one line naming what was seen, never read as something else.
"""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pytest

from prolas.csv_dialect import SNIFF_LINES, CsvDialect, sniff_dialect
from prolas.data import load_csv, timestamps_to_decimal_years
from prolas.errors import DataError, DataWarning

SEMICOLON_SALES = (
    "date;sales\n2020-01-01;1,5\n2020-02-01;2,25\n2020-03-01;3,75\n"
    "2020-04-01;2,5\n2020-05-01;4\n2020-06-01;5,125\n"
)


def write(tmp_path, text: str, name: str = "d.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def refusal(path) -> str:
    """load_csv's DataError message; asserts it is one line."""
    with pytest.raises(DataError) as info:
        load_csv(path)
    msg = str(info.value)
    assert msg and "\n" not in msg, msg
    return msg


def test_semicolon_file_with_decimal_commas_loads_dates_and_numbers(tmp_path) -> None:
    ds = load_csv(write(tmp_path, SEMICOLON_SALES))
    assert (ds.x_column, ds.y_column, ds.x_is_date) == ("date", "sales", True)
    np.testing.assert_array_equal(ds.y, [1.5, 2.25, 3.75, 2.5, 4.0, 5.125])
    months = pd.Series(pd.date_range("2020-01-01", periods=6, freq="MS"))
    np.testing.assert_array_equal(ds.x, timestamps_to_decimal_years(months))


@pytest.mark.parametrize(
    ("sep", "decimal"), [(",", "."), (";", "."), (";", ","), ("\t", "."), ("\t", ","), ("|", ".")]
)
def test_any_separator_and_decimal_mark_round_trips(tmp_path, sep, decimal) -> None:
    """A table pandas writes with ``sep``/``decimal`` loads back to the same values."""
    rng = np.random.default_rng(3)
    n = 50
    frame = pd.DataFrame(
        {
            "when": pd.date_range("2001-03-31", periods=n, freq="QE").strftime("%Y-%m-%d"),
            "value": rng.normal(0, 1e4, n),  # negative, large and small numbers
            "count": rng.integers(0, 5000, n),
        }
    )
    path = tmp_path / "t.csv"
    frame.to_csv(path, sep=sep, decimal=decimal, index=False)
    ds = load_csv(path, y="value")
    assert (ds.x_column, ds.y_column) == ("when", "value")
    np.testing.assert_array_equal(ds.y, frame["value"].to_numpy())  # exact: repr round-trips


def test_header_with_a_comma_in_a_name_keeps_the_semicolon(tmp_path) -> None:
    """``date;sales, EUR`` splits into two fields on ',' too; ';' is chosen because a
    comma-split would leave ';' inside the cells."""
    text = SEMICOLON_SALES.replace("date;sales", "date;sales, EUR")
    ds = load_csv(write(tmp_path, text))
    assert ds.y_column == "sales, EUR" and ds.y[1] == 2.25


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (["1.234,5", "2.000", "3,75"], [1234.5, 2000.0, 3.75]),  # '.' thousands, ',' decimal
        (["1,234.5", "2,000", "3.75"], [1234.5, 2000.0, 3.75]),  # ',' thousands, '.' decimal
        (["1,500", "0,5", "2"], [1.5, 0.5, 2.0]),  # 0,5 shows the decimal comma
        (["1.500", "0.5", "2"], [1.5, 0.5, 2.0]),  # 0.5 shows the decimal point
    ],
)
def test_a_thousands_group_follows_the_evidence(tmp_path, rows, expected) -> None:
    text = "t;v\n" + "".join(f"{i};{r}\n" for i, r in enumerate(rows + ["7", "8"]))
    ds = load_csv(write(tmp_path, text))
    np.testing.assert_array_equal(ds.y, expected + [7.0, 8.0])


@pytest.mark.parametrize("cell", ["1,500", "1.500"])
def test_a_lone_thousands_group_is_ambiguous_and_refused(tmp_path, cell) -> None:
    text = f"t;v\n0;{cell}\n1;2\n2;3\n3;7\n4;1\n"
    msg = refusal(write(tmp_path, text))
    assert repr(cell) in msg and "line 2" in msg and "1.5" in msg and "1500" in msg


@pytest.mark.parametrize("sep", [";", "\t", "|"])
def test_a_given_decimal_mark_reads_a_file_the_numbers_leave_open(tmp_path, sep) -> None:
    """Every number with three digits after its one mark: refused as ambiguous until the
    user says which mark is the decimal one, then read that way, both ways."""
    rows = ["0", "10.283"], ["1", "12.500"], ["2", "9.125"], ["3", "11.020"], ["4", "10.001"]
    path = write(tmp_path, "t" + sep + "v\n" + "".join(sep.join(r) + "\n" for r in rows))
    assert "--decimal" in refusal(path)
    np.testing.assert_array_equal(
        load_csv(path, decimal=".").y, [10.283, 12.5, 9.125, 11.02, 10.001]
    )
    np.testing.assert_array_equal(load_csv(path, decimal=",").y, [10283, 12500, 9125, 11020, 10001])
    assert sniff_dialect(path.read_text(), "f", ",") == CsvDialect(sep, ",", ".")


@pytest.mark.parametrize(
    ("cell", "decimal", "written"),
    [
        ("2,5", ".", "decimal comma"),
        ("1.234,5", ".", "decimal comma"),
        ("2.5", ",", "decimal point"),
    ],
)
def test_a_number_against_the_given_decimal_mark_is_refused(tmp_path, cell, decimal, written):
    path = write(tmp_path, f"t;v\n0;1\n1;{cell}\n2;3\n3;7\n4;1\n")
    with pytest.raises(DataError) as info:
        load_csv(path, decimal=decimal)
    msg = str(info.value)
    assert f"given as {decimal!r}" in msg and f"{cell!r} (line 3)" in msg and written in msg


def test_a_given_decimal_mark_in_a_comma_file(tmp_path) -> None:
    """A comma file has decimal points: '.' changes nothing, ',' is refused."""
    path = write(tmp_path, "x,y\n0,1.5\n1,2.25\n2,3\n3,7\n4,1\n")
    np.testing.assert_array_equal(load_csv(path, decimal=".").y, load_csv(path).y)
    with pytest.raises(DataError, match="separated by ','.*for files separated by ';'"):
        load_csv(path, decimal=",")
    with pytest.raises(DataError, match="must be '.' or ','"):
        load_csv(path, decimal="·")


def test_mixed_decimal_marks_are_refused(tmp_path) -> None:
    msg = refusal(write(tmp_path, "t;v\n0;1.5\n1;2,5\n2;3\n3;7\n4;1\n"))
    assert "'2,5', line 3" in msg and "'1.5', line 2" in msg and "one decimal mark" in msg


def test_a_decimal_point_far_down_stops_a_thousands_dot(tmp_path) -> None:
    """Every line counts, not only the lines the separator is sniffed on: a thousands '.'
    would read the late '1.5' as 15."""
    rows = [f"{i};1.234,5" for i in range(SNIFF_LINES + 500)] + ["99999;1.5"]
    msg = refusal(write(tmp_path, "t;v\n" + "\n".join(rows) + "\n"))
    assert "'1.5'" in msg and f"line {SNIFF_LINES + 502}" in msg


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("sales\n" + "".join(f"2020-0{m}-01;{m},5\n" for m in range(1, 7)), "separated by ';'"),
        ("sales\n" + "".join(f"2020-0{m}-01,{m}\n" for m in range(1, 7)), "separated by ','"),
        ("sales\n" + "".join(f"2020-0{m}-01\t{m}\n" for m in range(1, 7)), "separated by tab"),
    ],
)
def test_one_column_header_over_delimited_rows_is_refused(tmp_path, text, fragment) -> None:
    msg = refusal(write(tmp_path, text))
    assert "header has one column ('sales')" in msg and "2 values" in msg
    assert fragment in msg and "line 2" in msg


def test_a_header_shorter_than_every_row_is_refused(tmp_path) -> None:
    """pandas would turn the first values into a row index and shift the names."""
    text = "x,y\n" + "".join(f"{i},{i + 1},{i % 3}\n" for i in range(6))
    msg = refusal(write(tmp_path, text))
    assert "header names 2 columns" in msg and "3 values" in msg


@pytest.mark.parametrize(
    "text",
    [
        "x,y\n1,2,\n3,4,\n5,6,\n7,1,\n9,3,\n",  # pandas would index by x and read y as NaN
        "x,y\n1,2,\n3,4\n5,6,\n7,1\n9,3,\n",  # on some rows only
        "x;y\n1;2;\n3;4;\n5;6;\n7;1;\n9;3;\n",
    ],
)
def test_a_trailing_separator_is_not_a_column(tmp_path, text) -> None:
    ds = load_csv(write(tmp_path, text))
    assert (ds.x_column, ds.y_column) == ("x", "y")
    np.testing.assert_array_equal(ds.x, [1, 3, 5, 7, 9])
    np.testing.assert_array_equal(ds.y, [2, 4, 6, 1, 3])


def test_one_column_of_decimal_commas_loads(tmp_path) -> None:
    ds = load_csv(write(tmp_path, "level\n1,5\n2,25\n3\n0,5\n4,75\n"))
    assert ds.y_column == "level" and ds.x_column == "index"
    np.testing.assert_array_equal(ds.y, [1.5, 2.25, 3.0, 0.5, 4.75])


def test_two_equally_good_separators_are_refused(tmp_path) -> None:
    text = "a;b|c\n" + "".join(f"{i};{i}|{i % 4}\n" for i in range(6))
    msg = refusal(write(tmp_path, text))
    assert "cannot tell the column separator" in msg and "';' and '|'" in msg


def test_comma_files_keep_their_reading() -> None:
    """Plain comma files (quotes, empty cells, one column) are read as pandas reads them."""
    assert sniff_dialect('x,y,note\n1,2,"a, b"\n2,,c;d\n', "f") == CsvDialect()
    assert sniff_dialect("y\n4\n3\n2\n", "f") == CsvDialect()
    assert sniff_dialect("", "f") == CsvDialect()
    assert sniff_dialect("x,y\n", "f") == CsvDialect()


def test_compressed_files_are_sniffed(tmp_path) -> None:
    path = tmp_path / "d.csv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(SEMICOLON_SALES)
    assert load_csv(path).y[2] == 3.75


def test_a_windows_1252_file_is_read_with_a_warning(tmp_path) -> None:
    """A spreadsheet's CSV from Windows (not UTF-8): its names read right, its numbers
    as in UTF-8, and the user is told; the long reader reads it the same way."""
    from prolas.many import read_long

    path = tmp_path / "w.csv"
    path.write_bytes(
        "id;Monat;Umsatz €\n".encode("cp1252")
        + b"".join(f"a;{i};{i % 5},5\n".encode("cp1252") for i in range(8))
    )
    with pytest.warns(DataWarning, match="not UTF-8 text; read as Windows-1252") as caught:
        ds = load_csv(path, "Monat", "Umsatz €")
    np.testing.assert_array_equal(ds.y, [i % 5 + 0.5 for i in range(8)])
    with pytest.warns(UserWarning, match="Windows-1252") as caught_long:
        assert read_long(path, "id", y="Umsatz €")[0].train.y[1] == 1.5
    # both readers place the warning at the caller's line (here), not inside prolas
    assert caught[0].filename == caught_long[0].filename == __file__


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"PK\x03\x04\x14\x00\x06\x00xl/workbook.xml", "spreadsheet workbook"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "spreadsheet workbook"),
        ("x,y\n1,2\n2,3\n".encode("utf-16"), "NUL bytes"),
        (b"x,y\n1,\x81\x81\n", "byte 0x81 at position 6"),
    ],
)
def test_a_file_that_is_not_csv_text_is_refused(tmp_path, data, fragment) -> None:
    path = tmp_path / "d.csv"
    path.write_bytes(data)
    assert fragment in refusal(path)


def test_cli_refuses_an_ambiguous_file_in_one_line(tmp_path, capsys) -> None:
    from prolas.cli import main

    path = write(tmp_path, "t;v\n0;1,500\n1;2\n2;3\n3;7\n4;1\n")
    out = tmp_path / "out"
    assert main(["fit", str(path), "--budget", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("prolas: error:") and err.count("\n") == 1 and "'1,500'" in err
    assert not out.exists()


def test_cli_reads_an_ambiguous_file_with_decimal(tmp_path, capsys) -> None:
    from prolas.cli import main

    path = write(tmp_path, "t;v\n0;1.500\n1;2.250\n2;3.125\n3;7.000\n4;1.750\n5;2.500\n")
    out = tmp_path / "out"
    assert main(["fit", str(path), "--budget", "1", "--out", str(out), "--quiet"]) == 2
    assert "--decimal" in capsys.readouterr().err and not out.exists()
    argv = ["fit", str(path), "--decimal", ".", "--budget", "1", "--restarts", "1"]
    assert main([*argv, "--search", "random", "--out", str(out), "--quiet"]) == 0
    assert (out / "result.json").exists()
