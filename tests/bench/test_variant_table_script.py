"""benchmarks/scripts/variant_table.py: PROLAS variants against the default."""

from __future__ import annotations

import json
import math

from conftest import bench_cell, load_script

vt = load_script("variant_table")


def _write(folder, method: str, seed: int, bics: list, rmse: float) -> None:
    cell = {**bench_cell(method, seed, bics), "test": {"rmse": rmse}}
    label = method.replace(":", "-")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"d__{label}__seed{seed}.json").write_text(json.dumps(cell))


def test_variants_are_compared_on_common_seeds_against_the_cks_target(tmp_path) -> None:
    ref, var = tmp_path / "ref" / "cells", tmp_path / "var"
    _write(ref, "cks:change", 0, [1.0, 3.0, 3.0], 9.0)
    _write(ref, "prolas", 0, [4.0, 4.0, 4.0], 2.0)  # reaches 3 at fit 1
    _write(ref, "prolas", 1, [0.0, 0.0, 2.0], 4.0)  # never
    _write(ref, "prolas", 2, [9.0, 9.0, 9.0], 1.0)  # seed 2: not run by the variant
    _write(var, "prolas", 0, [0.0, 3.0, 5.0], 3.0)  # fit 2
    _write(var, "prolas", 1, [0.0, 0.0, 3.0], 5.0)  # fit 3
    _write(ref, "random", 0, [1.0, 2.0, 2.0], 9.0)
    _write(ref, "random", 1, [1.0, 1.0, 1.0], 9.0)
    rows = vt.variant_rows(tmp_path / "ref", {"v": var}, ["d"], budget=3)
    default, v = rows
    assert default["variant"] == "default" and default["seeds"] == 2
    assert default["cks_final"] == 3.0 and default["cks_fits"] == 2  # CKS reaches 3 at fit 2
    assert default["best_mean"] == 3.0
    # fits to 3.0: seed 0 at 1, seed 1 never -> the median of (1, never) is never
    assert math.isinf(default["fits_median"]) and default["reached"] == 1
    assert v["best_mean"] == 4.0 and v["fits_median"] == 2.5 and v["reached"] == 2
    assert v["rmse_mean"] == 4.0
    assert default["random_mean"] == v["random_mean"] == 1.5
    # paired by seed: seed 0 5 - 4, seed 1 3 - 2; RMSE 3/2 and 5/4
    assert v["diff_mean"] == 1.0 and v["diff_se"] == 0.0
    assert v["log_rmse_ratio"] == (math.log(1.5) + math.log(1.25)) / 2
    assert default["diff_mean"] == 0.0 and default["log_rmse_ratio"] == 0.0
    table = vt.markdown(rows, 3)
    assert (
        "| d (3.00, 2) | v | 2 | 4.00 ± 1.00 | 2.5 (2/2) | 4 | 0 | 1.50 | +1.00 ± 0.00 | +0.314 |"
        in table
    )
    assert (
        "| d (3.00, 2) | default | 2 | 3.00 ± 1.00 | never (1/2) | 3 | 0 | 1.50 | "
        "+0.00 ± 0.00 | +0.000 |" in table
    )
