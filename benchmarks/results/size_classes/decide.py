"""The rule of README.md (written before the runs) applied to the `size_classes` variant.

Run from the repository root: ``python benchmarks/results/size_classes/decide.py``.
References: fit seed 0, the grid ``extrapolation_base_kernels/``; fit seeds 1 and 2,
``initial_design/fit_seed_K/`` (CKS and random search from ``reference/``, today's default
PROLAS from ``base5/``), assembled in a temporary folder of links.
"""

import math
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, "benchmarks/scripts")
from variant_table import load, markdown, variant_rows  # noqa: E402

from prolas.bench.stats import cell_trace, mean_se  # noqa: E402

R = Path("benchmarks/results")
HERE = R / "size_classes"
DATASETS = ["airline", "call-centre", "sulphuric"]


def reference(k: int, tmp: Path) -> Path:
    if k == 0:
        return R / "extrapolation_base_kernels"
    folder = tmp / f"ref{k}"
    folder.mkdir()
    src = R / "initial_design" / f"fit_seed_{k}"
    cells = [
        *(src / "reference").glob("*__cks-change__*"),
        *(src / "reference").glob("*__random__*"),
    ]
    for cell in [*cells, *(src / "base5").glob("*__prolas__*")]:
        (folder / cell.name).symlink_to(cell.resolve())
    return folder


with tempfile.TemporaryDirectory() as tmp:
    met = {"default": 0, "size_classes": 0}
    diffs, log_ratios = [], []
    for k in (0, 1, 2):
        ref, var = reference(k, Path(tmp)), HERE / f"fit_seed_{k}"
        rows = variant_rows(ref, {"size_classes": var}, DATASETS, 50)
        (var / "variant_table.md").write_text(markdown(rows, 50))
        for r in rows:
            goals = (
                r["fits_median"] <= r["cks_fits"],  # (a) fits to CKS's final BIC
                r["best_mean"] >= r["cks_final"],  # (b) mean best BIC >= CKS's
                r["best_mean"] > r["random_mean"],  # (c) above random search
            )
            met[r["variant"]] += sum(goals)
            print(f"fit seed {k} {r['dataset']:12} {r['variant']:13} (a, b, c) = {goals}")
        for ds in DATASETS:
            a, b = load(ref, ds), load(var, ds)
            for s in sorted(set(a) & set(b)):
                diffs.append(cell_trace(b[s], 50)[-1] - cell_trace(a[s], 50)[-1])
                log_ratios.append(math.log(b[s]["test"]["rmse"] / a[s]["test"]["rmse"]))
    d, lr = np.array(diffs), np.array(log_ratios)
    (d_mean, d_se), (lr_mean, lr_se) = mean_se(d), mean_se(lr)
    print(f"1. goals met of 27: default {met['default']}, size_classes {met['size_classes']}")
    print(
        f"2. best BIC - default's, paired over {len(d)} searches: {d_mean:+.2f} ± {d_se:.2f} "
        f"({(d > 0).sum()} better, {(d < 0).sum()} worse)"
    )
    print(f"3. best models' mean log(RMSE / default's): {lr_mean:+.3f} ± {lr_se:.3f}")
