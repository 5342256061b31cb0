"""prolas.progress: tqdm where a bar can redraw, whole lines in a log."""

from __future__ import annotations

import io

import pytest

from prolas.progress import LineProgress, progress_bar


def test_line_progress_writes_a_line_at_every_tenth_and_at_the_end() -> None:
    out = io.StringIO()
    bar = LineProgress(25, unit="fit", desc="search", file=out)
    for i in range(23):
        bar.update(1)
        if i == 4:
            bar.set_postfix_str("best BIC 1.50: SE")
        if i == 10:
            bar.write("a message", file=out)
    bar.close()
    bar.close()  # closing twice writes nothing more
    lines = out.getvalue().splitlines()
    # a line each time the count passes a multiple of ceil(25 / 10) = 3, then the end (23)
    counts = [int(line.split(": ")[1].split("/")[0]) for line in lines if "/25" in line]
    assert counts == [3, 6, 9, 12, 15, 18, 21, 23]
    assert lines[0].startswith("search: 3/25 fits (12 %), ") and lines[0].endswith(" s")
    assert lines[1].endswith("; best BIC 1.50: SE")
    assert "a message" in lines and "\r" not in out.getvalue()


def test_line_progress_counts_from_initial_and_names_one_unit() -> None:
    out = io.StringIO()
    bar = LineProgress(4, unit="series", desc="series", initial=3, file=out)
    bar.close()  # nothing new since the start: no line
    assert out.getvalue() == ""
    bar = LineProgress(4, unit="series", desc="series", initial=2, file=out)
    bar.update(2)
    assert out.getvalue().startswith("series: 4/4 series (100 %), ")  # not "seriess"
    out.seek(0)
    out.truncate()
    bar = LineProgress(1, unit="fit", file=out)
    bar.update(1)
    bar.close()
    assert out.getvalue().startswith("1/1 fit (100 %), ")
    assert out.getvalue().count("\n") == 1


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False])
def test_progress_bar_redraws_only_on_a_terminal(monkeypatch, terminal) -> None:
    stream = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    bar = progress_bar(3, unit="fit", desc="search")
    for _ in range(3):
        bar.update(1)
    bar.close()
    text = stream.getvalue()
    assert isinstance(bar, LineProgress) is not terminal
    # tqdm redraws with carriage returns; the log gets whole lines
    assert ("\r" in text) is terminal
    assert "search" in text and "3/3" in text


def test_a_bar_not_shown_writes_nothing(monkeypatch) -> None:
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    bar = progress_bar(5, unit="epoch", desc="KG-VAE", shown=False)
    bar.update(5)
    bar.set_postfix_str("train 1.0")
    bar.close()
    assert stream.getvalue() == ""
