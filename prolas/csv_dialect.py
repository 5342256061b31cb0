"""How a CSV file is written: its column separator, decimal and thousands marks.

Everyday files are not all comma-separated with decimal points: a spreadsheet in a
country that writes ``1,5`` for one and a half saves ``date;sales`` /
``2020-01-01;1,5``, and databases export tab- or ``|``-separated text.
:func:`sniff_dialect` reads the whole text and decides, or refuses with a one-line
:class:`~prolas.errors.DataError` saying what it saw and what to do; it never guesses
where the file leaves a choice open.

The separator. Each candidate, ``,`` ``;`` tab ``|``, splits the first
:data:`SNIFF_LINES` lines into fields (quotes respected, blank lines skipped). A
candidate *fits* when the header has at least two fields, no row has more fields than
the header and most rows have exactly as many. One fitting candidate is the separator.
When several fit (a header ``date;sales, EUR`` splits on both), the one whose cells
contain none of the other fitting candidates wins (under ``;``, a comma inside a number
such as ``1,5`` is a decimal mark, not a separator); a tie is refused. When none fits:

* a header with two or more fields (ragged rows): that separator, and the CSV reader
  names the first bad line, as for any malformed file;
* a header and rows of one field each: a single column (``y``, with ``x = 0..N-1``);
* a header of one field whose rows split into several: refused, since the rows' values
  would be read under the wrong names; except a single column of numbers with a
  decimal comma (``1,5``), which is read as one column;
* a header with fewer fields than every row (the CSV reader would silently turn the
  first values into a row index): refused.

A row one field longer than the header whose last field is blank ends with a trailing
separator (``x,y`` / ``1,2,``): it counts as the header's length and is read so.

The number format. With ``,`` as separator the decimal mark is ``.`` (an unquoted
decimal comma cannot occur). With another separator every cell that is a number with
a ``,`` or ``.`` in it is evidence:

==================  =========================  =================================
cell                read as                    evidence
==================  =========================  =================================
``1,5`` ``-0,25``   decimal comma              decimal ``,``
``1.234,5``         ``.`` thousands, ``,``     decimal ``,`` (thousands ``.``)
``1.5`` ``2020.5``  decimal point              decimal ``.``
``1,234.5``         ``,`` thousands, ``.``     decimal ``.`` (thousands ``,``)
``1,500`` ``1.500`` one group of three digits  none: 1.5 or 1500
``12`` ``2020-01``  integer, date, text        none
==================  =========================  =================================

Evidence for both marks is refused (a file that mixes ``1.5`` and ``2,5``); evidence for
one decides it, and a single group is then read consistently with it: in a decimal-comma
file ``1,500`` is 1.5 and ``1.500`` is 1500 (the dot can only group thousands there), in
a decimal-point file the other way round. With no evidence, a ``1,500`` or ``1.500`` is
refused as ambiguous; otherwise the decimal mark is ``.``. Every cell of the file
counts, so a thousands separator ``.`` is never applied to a file holding a decimal
point further down (the CSV reader would read ``1.5`` as 15).

The user can say which (``decimal``, ``prolas fit --decimal``): a file whose numbers all
have three digits after their one mark (``10.283``, or ``12.500`` for 12.5) is then read,
and a cell that contradicts the given mark is refused, never read another way. A
comma-separated file has decimal points; ``decimal=","`` is refused there.

>>> sniff_dialect("date;sales\\n2020-01-01;1,5\\n2020-02-01;2,25\\n", "d.csv")
CsvDialect(delimiter=';', decimal=',', thousands=None, trailing_separator=False)
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import lzma
import re
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from prolas.errors import DataError, warn_caller

__all__ = ["CsvDialect", "DECIMAL_MARKS", "DELIMITERS", "read_text", "sniff_dialect"]

#: Column separators a file may use, in order of preference.
DELIMITERS = (",", ";", "\t", "|")

#: Decimal marks a user may give (None: read from the numbers).
DECIMAL_MARKS = (None, ".", ",")

#: Lines the separator is decided on (the number format is read from every line).
SNIFF_LINES = 1000

_EXP = r"(?:[eE][-+]?\d+)?"
#: one thousands group and nothing else, 1,500 / 1.500: 1.5 or 1500?
_COMMA_GROUP = r"[1-9]\d{0,2},\d{3}"
_DOT_GROUP = r"[1-9]\d{0,2}\.\d{3}"


def _kind_patterns() -> dict[str, re.Pattern]:
    """Each number format (module docstring's table) as a regular expression that a whole
    stripped cell matches; no cell has two formats (a single group is only a group). The
    patterns tell only 0 from the other digits, so a cell's *shape* (digits 1-9 written as
    9, :data:`_SHAPE`) has the format of the cell."""
    not_group = rf"(?!(?:{_COMMA_GROUP}|{_DOT_GROUP})\Z)"
    kinds = {
        "comma group": _COMMA_GROUP,
        "dot group": _DOT_GROUP,
        # 1,234,567 / 1,234.5 and 1.234.567 / 1.234,5
        "comma thousands": not_group + r"[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?",
        "dot thousands": not_group + r"[1-9]\d{0,2}(?:\.\d{3})+(?:,\d+)?",
        # 1,5 / ,5 / 1,5e3 and 1.5 / .5 / 1.5e3
        "comma decimal": not_group + rf"(?:\d+,\d*|,\d+){_EXP}",
        "dot decimal": not_group + rf"(?:\d+\.\d*|\.\d+){_EXP}",
    }
    return {kind: re.compile(rf"[-+]?{body}") for kind, body in kinds.items()}


_KINDS = _kind_patterns()
_SHAPE = str.maketrans("123456789", "999999999")


@dataclass(frozen=True)
class CsvDialect:
    """The separator, decimal mark and thousands separator (or None) of a CSV file."""

    delimiter: str = ","
    decimal: str = "."
    thousands: str | None = None
    #: rows end with a separator the header lacks (``x,y`` / ``1,2,``)
    trailing_separator: bool = False

    def read_csv_options(self) -> dict[str, object]:
        """Keyword arguments of :func:`pandas.read_csv` for this dialect."""
        options: dict[str, object] = {
            "sep": self.delimiter,
            "decimal": self.decimal,
            "thousands": self.thousands,
            # correctly rounded numbers, whatever the pandas version (pandas 2's default
            # parser may be off by an ulp, which changes fits in their last bits)
            "float_precision": "round_trip",
        }
        if self.trailing_separator:  # else pandas makes the first column a row index
            options["index_col"] = False
        return options


def _name(delimiter: str) -> str:
    return "tab" if delimiter == "\t" else repr(delimiter)


def _short(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


#: The first bytes of a spreadsheet workbook: .xlsx/.ods (a zip archive), .xls (OLE2).
SPREADSHEET_MAGIC = (b"PK\x03\x04", b"\xd0\xcf\x11\xe0")

#: The encoding tried when a file is not UTF-8: what spreadsheets on Windows save as
#: "CSV" in Western Europe and the Americas. Numbers are ASCII in it as in UTF-8, so only
#: names and dates written in words can read differently; a file not valid in it either
#: is refused.
FALLBACK_ENCODING = "cp1252"


def read_text(path: Path) -> tuple[str, str]:
    """The file's text and the encoding it was read with.

    UTF-8 (a byte-order mark dropped), else :data:`FALLBACK_ENCODING` with a warning
    that says so; ``.gz``, ``.bz2``, ``.xz`` and single-member ``.zip`` files are
    decompressed, as :func:`pandas.read_csv` does.

    Raises:
        DataError: an unreadable file, a bad archive, a spreadsheet workbook (.xlsx,
            .ods, .xls) instead of CSV text, or bytes that are text in neither encoding.
    """
    suffix = path.suffix.lower()
    try:
        if suffix == ".zip":
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
                if len(names) != 1:
                    raise DataError(f"{path}: a .zip must hold one CSV file, it holds {len(names)}")
                data = archive.read(names[0])
        else:
            opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}.get(suffix, open)
            with opener(path, "rb") as fh:
                data = fh.read()
    except (OSError, EOFError, zipfile.BadZipFile, lzma.LZMAError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: cannot read as CSV ({msg})") from None
    if data.startswith(SPREADSHEET_MAGIC):
        raise DataError(
            f"{path}: is a spreadsheet workbook (.xlsx, .ods, .xls) or another binary file, "
            "not CSV text; save the sheet as CSV (in Excel: Save As, 'CSV UTF-8')"
        )
    try:
        return data.decode("utf-8-sig"), "utf-8-sig"
    except UnicodeDecodeError as exc:
        utf8_error = exc
    try:
        text = data.decode(FALLBACK_ENCODING)
    except UnicodeDecodeError:
        bad = data[utf8_error.start]
        raise DataError(
            f"{path}: cannot read as CSV (not UTF-8 text: byte 0x{bad:02x} at position "
            f"{utf8_error.start}); save it as UTF-8"
        ) from None
    if "\x00" in text:  # UTF-16 or binary: Windows-1252 decodes any such byte
        raise DataError(
            f"{path}: cannot read as CSV (not UTF-8 text: it holds NUL bytes, as UTF-16 text "
            "or a binary file does); save it as UTF-8"
        )
    warn_caller(
        f"{path}: not UTF-8 text; read as Windows-1252 (Western European), the encoding "
        "spreadsheets save CSV in on Windows"
    )
    return text, FALLBACK_ENCODING


@dataclass
class _Split:
    """The file split at one candidate separator: fields and physical line of each record."""

    delimiter: str
    records: list[list[str]]
    lines: list[int]

    @property
    def header_fields(self) -> int:
        return len(self.records[0])

    def _trailing(self, record: list[str]) -> bool:
        return len(record) == len(self.records[0]) + 1 and not record[-1].strip()

    @property
    def row_fields(self) -> list[int]:
        """Fields of each row; a trailing separator (an extra blank last field) not counted."""
        return [len(r) - self._trailing(r) for r in self.records[1:]]

    @property
    def trailing_separator(self) -> bool:
        return any(self._trailing(r) for r in self.records[1:])

    def fits(self) -> bool:
        """Header of 2+ fields, no row longer, most rows exactly as long."""
        n, rows = self.header_fields, self.row_fields
        return n >= 2 and bool(rows) and max(rows) <= n and 2 * rows.count(n) >= len(rows)


def _split(text: str, delimiter: str) -> _Split:
    """``text`` split into records at ``delimiter`` (quotes respected); blank lines are
    skipped, as the CSV reader does."""
    records, lines = [], []
    if delimiter not in text:  # one field per line
        for i, line in enumerate(text.split("\n"), start=1):
            if line.strip():
                records.append([line.rstrip("\r")])
                lines.append(i)
        return _Split(delimiter, records, lines)
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    for record in reader:
        if any(cell.strip() for cell in record):
            records.append(record)
            lines.append(reader.line_num)
    return _Split(delimiter, records, lines)


def _head(text: str, lines: int) -> str:
    """The first ``lines`` lines of ``text``."""
    end = -1
    for _ in range(lines):
        end = text.find("\n", end + 1)
        if end < 0:
            return text
    return text[:end]


def sniff_dialect(text: str, source: str, decimal: str | None = None) -> CsvDialect:
    """The dialect of a CSV text (module docstring: the rules).

    The separator is decided on the first :data:`SNIFF_LINES` lines (a later malformed
    line is the CSV reader's error), the number format on every line.

    Args:
        text: the whole file.
        source: the file's name for messages.
        decimal: the decimal mark, ``"."`` or ``","``, when the user knows it; None
            (default) reads it from the numbers.

    Raises:
        DataError: a one-line message when the separator or the decimal mark cannot be
            told, a number contradicts the given ``decimal``, or the header does not
            name the rows' columns.
    """
    if decimal not in DECIMAL_MARKS:
        raise DataError(f"the decimal mark must be '.' or ',', not {decimal!r}")
    head = _head(text, SNIFF_LINES)
    try:
        splits = {d: _split(head, d) for d in DELIMITERS}
    except csv.Error:  # e.g. NUL bytes: left to the CSV reader's own error
        return CsvDialect()
    if len(splits[","].records) < 2:  # empty or header only: nothing to sniff
        return CsvDialect(decimal=decimal or ".")
    fitting = [s for s in splits.values() if s.fits()]
    if len(fitting) > 1:
        fitting = _cleanest(fitting, source)
    chosen = fitting[0] if fitting else _without_fit(splits, source)
    if chosen is None:
        return _single_column(text, splits, source, decimal)
    if chosen.delimiter == ",":
        if decimal == ",":  # an unquoted decimal comma would split its column
            raise DataError(
                f"{source}: the columns are separated by ',', so its numbers have decimal "
                "points; --decimal ',' is for files separated by ';', tab or '|'"
            )
        return CsvDialect(trailing_separator=chosen.trailing_separator)
    mark, thousands = _number_format(text, chosen.delimiter, source, decimal)
    return CsvDialect(chosen.delimiter, mark, thousands, chosen.trailing_separator)


def _number_kind(cell: str) -> str | None:
    """The number format of a stripped cell (module docstring's table), or None."""
    if "," not in cell and "." not in cell:
        return None
    return next((k for k, p in _KINDS.items() if p.fullmatch(cell)), None)


def _bare(cell: str) -> str:
    """A cell without padding and quotes."""
    return cell.strip().strip('"').strip()


def _foreign_cells(split: _Split, others: list[str]) -> int:
    """Cells holding another fitting separator (a comma inside a number is a decimal mark
    or a thousands separator under a non-comma separator, so it does not count)."""
    count = 0
    for record in split.records:
        for cell in record:
            if split.delimiter != "," and _number_kind(cell.strip()) is not None:
                cell = cell.replace(",", "")
            count += any(d in cell for d in others)
    return count


def _cleanest(fitting: list[_Split], source: str) -> list[_Split]:
    """The fitting separator whose cells contain none of the others; a tie is refused."""
    names = [s.delimiter for s in fitting]
    scores = [_foreign_cells(s, [d for d in names if d != s.delimiter]) for s in fitting]
    winners = [s for s, score in zip(fitting, scores) if score == min(scores)]
    if len(winners) > 1:
        which = " and ".join(_name(s.delimiter) for s in winners)
        raise DataError(
            f"{source}: cannot tell the column separator: {which} both split every line into "
            "the header's number of columns; keep one of them out of the values"
        )
    return winners


def _text_of(split: _Split, i: int) -> str:
    """Record ``i`` joined back with its separator (for messages)."""
    return split.delimiter.join(split.records[i])


def _without_fit(splits: dict[str, _Split], source: str) -> _Split | None:
    """No separator fits: a malformed file (left to the CSV reader), a single column
    (None), or a header with fewer fields than every row (refused)."""
    named = [s for s in splits.values() if s.header_fields >= 2]
    if not named:
        return None
    chosen = named[0]  # ',' first: a malformed comma file fails as it always did
    n, rows = chosen.header_fields, chosen.row_fields
    if rows and min(rows) > n:
        raise DataError(
            f"{source}: the header names {n} columns but every row holds more "
            f"({Counter(rows).most_common(1)[0][0]} values separated by "
            f"{_name(chosen.delimiter)}, line {chosen.lines[1]}: "
            f"{_short(_text_of(chosen, 1))}); name every column in the header"
        )
    return chosen


def _single_column(
    text: str, splits: dict[str, _Split], source: str, decimal: str | None
) -> CsvDialect:
    """The header is one field under every separator. Rows of one field are a single
    column; rows that only a comma splits, each a number (``1,5``), are one column of
    numbers with a decimal comma; any other split rows are refused."""
    split_rows = {d: [c for c in s.row_fields if c > 1] for d, s in splits.items()}
    if not any(split_rows.values()):
        ends = [s.delimiter for s in splits.values() if s.trailing_separator]
        if ends:
            return CsvDialect(ends[0], decimal or ".", trailing_separator=True)
        return CsvDialect(decimal=decimal or ".")
    if not any(split_rows[d] for d in DELIMITERS[1:]):
        comma = splits[","]
        lines = [_text_of(comma, i).strip() for i in range(1, len(comma.records))]
        if all(_number_kind(line) is not None for line in lines if "," in line):
            mark, thousands = _number_format(text, None, source, decimal)
            return CsvDialect(";", mark, thousands)  # no ';' in the rows: one column
    # name the separator that splits the most rows
    rows = splits[max(DELIMITERS[::-1], key=lambda d: len(split_rows[d]))]
    i = next(i for i, c in enumerate(rows.row_fields, start=1) if c > 1)
    n = Counter(c for c in rows.row_fields if c > 1).most_common(1)[0][0]
    raise DataError(
        f"{source}: the header has one column ({_short(rows.records[0][0].strip())}) but "
        f"the rows hold {n} values separated by {_name(rows.delimiter)} (line "
        f"{rows.lines[i]}: {_short(_text_of(rows, i))}); name every column in the header, "
        "separated the same way"
    )


def _first_cells(text: str, delimiter: str | None) -> dict[str, tuple[str, int]]:
    """Every number format among the cells after the header (``delimiter`` None: one cell
    per line), each with its first cell and that cell's line.

    Fast on long files: the distinct cell *shapes* (:data:`_SHAPE`) are classified, then
    the lines are walked only until the first cell of each format found.
    """
    start = text.find("\n") + 1
    if not start:
        return {}
    body = text[start:]
    shapes = body.translate(_SHAPE)
    cells = shapes.replace(delimiter, "\n") if delimiter else shapes
    kind_of = {c: k for c in set(cells.split("\n")) if (k := _number_kind(_bare(c)))}
    present = set(kind_of.values())
    first: dict[str, tuple[str, int]] = {}
    for i, line in enumerate(body.split("\n") if present else ()):
        for cell in line.split(delimiter) if delimiter else (line,):
            kind = kind_of.get(cell.translate(_SHAPE))
            if kind is not None and kind not in first:
                first[kind] = (_bare(cell), i + 2)  # the header is line 1
        if len(first) == len(present):
            break
    return first


def _number_format(
    text: str, delimiter: str | None, source: str, decimal: str | None = None
) -> tuple[str, str | None]:
    """``(decimal, thousands)`` from the number format of every cell after the header
    (``delimiter`` None: one cell per line) and the user's ``decimal`` if given, or
    refused (module docstring)."""
    first = _first_cells(text, delimiter)
    what = f"{_name(delimiter)}-separated" if delimiter else "one-column"
    comma = [first[k] for k in ("comma decimal", "dot thousands") if k in first]
    dot = [first[k] for k in ("dot decimal", "comma thousands") if k in first]
    if decimal is not None:
        against = comma if decimal == "." else dot
        if against:
            cell, line = against[0]
            other = "a decimal comma" if decimal == "." else "a decimal point"
            raise DataError(
                f"{source}: the decimal mark was given as {decimal!r} but the {what} number "
                f"{cell!r} (line {line}) is written with {other}"
            )
        return decimal, _thousands(decimal, first)
    if comma and dot:
        (c, c_line), (d, d_line) = comma[0], dot[0]
        raise DataError(
            f"{source}: the {what} numbers mix decimal commas ({c!r}, line {c_line}) and "
            f"decimal points ({d!r}, line {d_line}); write every number with one decimal mark"
        )
    if comma or dot:
        mark = "," if comma else "."
        return mark, _thousands(mark, first)
    for kind, mark in (("comma group", ","), ("dot group", ".")):
        if kind in first:
            cell, line = first[kind]
            whole, fraction = cell.replace(mark, ""), float(cell.replace(mark, "."))
            raise DataError(
                f"{source}: the {what} number {cell!r} (line {line}) may be {fraction:g} "
                f"(decimal {mark!r}) or {whole} (thousands {mark!r}) and no other number tells "
                "which; say which with --decimal (decimal= in Python), or write the numbers "
                "with a decimal point and no thousands separator"
            )
    return ".", None


def _thousands(decimal: str, first: dict[str, tuple[str, int]]) -> str | None:
    """The thousands separator that goes with ``decimal``: the other mark, if any cell
    groups thousands with it (``1.234,5`` or a single group ``1.500`` under a decimal
    comma), else None."""
    other = "." if decimal == "," else ","
    word = "dot" if other == "." else "comma"
    return other if f"{word} thousands" in first or f"{word} group" in first else None
