"""The rule in README.md (written before the runs): stacking the rolling-origin check's
predictives (``fixed_stack``) against the default's pseudo-BMA mixture (``fixed_mix``),
search by search, on the tuning series; step 1 at fit seed 0, steps 2-3 over fit seeds 0-2
when their records are here.

Run from the repository root: ``python benchmarks/results/forecast_stacking/decide.py``.
Reads every ``records_fit_seed_*.jsonl`` in this folder.
"""

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.bench.stats import mean_se

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "scripts"))
from forecast_rules import TUNING, rule_rmses  # noqa: E402


def log_ratios() -> pd.Series:
    """log(RMSE stack / RMSE mix) per (dataset, fit seed, seed), tuning series only."""
    rows = {}
    for path in sorted(HERE.glob("records_fit_seed_*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec["dataset"] in TUNING:
                r = rule_rmses(rec)
                key = (rec["dataset"], rec["fit_seed"], rec["seed"])
                rows[key] = np.log(r["fixed_stack"] / r["fixed_mix"])
    index = pd.MultiIndex.from_tuples(rows, names=["dataset", "fit_seed", "seed"])
    return pd.Series(list(rows.values()), index=index)


def table(ratio: pd.Series, label: str) -> dict[str, float]:
    """Print the per-series table; return each series' (and the pooled) mean."""
    print(f"\n{label}\n")
    print("| data | mean log(RMSE stack / RMSE mix) ± s.e. | searches better / worse |")
    print("|---|---|---|")
    means = {}
    for name in [*TUNING, "pooled"]:
        v = ratio if name == "pooled" else ratio.xs(name, level="dataset")
        means[name], se = mean_se(v.to_numpy())
        means[f"{name} se"] = se
        print(f"| {name} | {means[name]:+.3f} ± {se:.3f} | {(v < 0).sum()} / {(v > 0).sum()} |")
    return means


def main() -> None:
    ratio = log_ratios()
    zero = ratio.xs(0, level="fit_seed", drop_level=False)
    m = table(zero, f"Step 1: fit seed 0 ({zero.size} searches)")
    step1 = m["pooled"] < 0 and all(m[d] <= 0.05 for d in TUNING)
    print(f"\nStep 1 passed (go on to fit seeds 1 and 2): {'yes' if step1 else 'no'}")
    # steps 2-3 need every tuning search at fit seeds 0-2 (records_fit_seed_1.jsonl holds
    # sulphuric only, recorded for ceiling.py)
    counts = ratio.groupby(level="fit_seed").size()
    if not step1 or any(counts.get(s, 0) < 10 * len(TUNING) for s in (0, 1, 2)):
        return
    m = table(ratio, f"Steps 2-3: fit seeds 0-2 ({ratio.size} searches)")
    better = sum(m[d] < 0 for d in TUNING)
    adopt = m["pooled"] < -2 * m["pooled se"] and better >= 2
    print(f"\nStep 3: adopt stacking as the default: {'yes' if adopt else 'no'}")


if __name__ == "__main__":
    main()
