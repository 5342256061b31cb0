"""benchmarks/scripts/portfolio_library.py: the candidates of a rebuilt warm-start library."""

from __future__ import annotations

from conftest import load_script

from prolas.expr import parse
from prolas.search.portfolio import BenchmarkScores


def _script():
    return load_script("portfolio_library")


def test_candidates_are_the_library_plus_every_one_operation_change_expression() -> None:
    found = _script().candidates()
    shipped = BenchmarkScores.load().expressions
    assert found[: len(shipped)] == list(shipped)
    assert len(set(found)) == len(found)  # canonical strings, no model twice
    assert all(str(parse(e)) == e for e in found)
    added = found[len(shipped) :]
    changes = {
        f"{op}({a}, {b})"
        for op in ("CP", "CW")
        for a in ("SE", "LIN", "PER", "RQ", "C")
        for b in ("SE", "LIN", "PER", "RQ", "C")
    }
    assert changes <= set(added) and "C" in added
    assert set(added) - changes == {"C", "C + SE", "C + LIN", "C + PER", "C + RQ"}
    # the shipped library has none of them: it predates the change operators
    assert not any("CP(" in e or "CW(" in e or "C" in e.split(" + ") for e in shipped)
