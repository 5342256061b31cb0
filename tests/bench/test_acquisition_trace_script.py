"""benchmarks/scripts/acquisition_trace.py: the grid's own search, step by step."""

from __future__ import annotations

import json

import torch
from conftest import DATA, ROOT, load_script

trace = load_script("acquisition_trace")
GRID = ROOT / "benchmarks" / "results" / "extrapolation"


def _committed(series: str, seed: int) -> list[str]:
    cell = json.loads((GRID / "cells" / f"{series}__prolas__seed{seed}.json").read_text())
    return [e["expression"] for e in cell["history"]]


def test_trace_reproduces_the_committed_cell_whatever_the_thread_count() -> None:
    # temperature seed 0 meets an exact tie at its 27th fit: the OT distance's twins
    # CW(SE, PER) and CW(PER, SE) have equal predictions, and which comes first depended
    # on the rounding of the surrogate, i.e. on torch's thread count. The grid ran with
    # one thread; every strategy now does (prolas.pipeline.run_strategy), so one and two
    # threads give the same search. The rounding also depends on the CPU's BLAS kernels:
    # on another machine the tie can go to the other twin (it does on a SkylakeX
    # OpenBLAS), so the committed cell is matched up to the tie and the tie by either twin.
    histories = []
    threads = torch.get_num_threads()
    for n_threads in (2, 1):
        torch.set_num_threads(n_threads)
        try:
            lines, cell = trace.trace("temperature", 0, ["PER"], GRID, DATA, budget=28)
        finally:
            torch.set_num_threads(threads)
        histories.append([e["expression"] for e in cell["history"]])
    assert histories[0] == histories[1]
    committed = _committed("temperature", 0)
    assert histories[0][:26] == committed[:26]
    assert {histories[0][26], committed[26]} <= {"CW(SE, PER)", "CW(PER, SE)"}
    assert cell["new_fits"] == 0
    # after the warm start PER ranks 4th; one fit of C (BIC -565) sends it to the bottom
    assert lines[0].startswith("n=10 best=-450.92 chose C (")
    assert "PER: rank 4/956, -437.95" in lines[0]
    assert "PER: rank 943/947" in lines[1]
    assert lines[-1] == "best PER + SE (-438.31); fits not in the cache: 0"
