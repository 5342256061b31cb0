"""Step 1 of the rule in README.md (written before the runs): rolling_mix with the top 10
models against the top 5, search by search, on the tuning series at fit seed 0.

Run from the repository root: ``python benchmarks/results/forecast_models/decide.py``.
The top-5 figures are the committed grid's (``extrapolation_base_kernels/forecast_choice/``);
the top-10 ones are ``forecast_choice_k10.csv`` here (same cells, same refits of the top 5:
the ``best`` rows agree to the last digit).
"""

from pathlib import Path

import numpy as np
import pandas as pd

from prolas.bench.stats import mean_se

R = Path("benchmarks/results")
TUNING = ["airline", "call-centre", "sulphuric"]
KEY = ["dataset", "seed"]


def rolling_mix(path: Path) -> pd.Series:
    table = pd.read_csv(path)
    table = table[(table.method == "prolas") & (table.way == "rolling_mix")]
    return table[table.dataset.isin(TUNING)].set_index(KEY).rmse


def main() -> None:
    k5 = rolling_mix(R / "extrapolation_base_kernels/forecast_choice/forecast_choice.csv")
    k10 = rolling_mix(R / "forecast_models/forecast_choice_k10.csv")
    ratio = np.log(k10 / k5.loc[k10.index])
    print("| data | mean log(RMSE k=10 / RMSE k=5) ± s.e. | searches better / worse |")
    print("|---|---|---|")
    means = {}
    for name in TUNING + ["pooled"]:
        v = ratio if name == "pooled" else ratio.loc[name]
        means[name], se = mean_se(v.to_numpy())
        print(f"| {name} | {means[name]:+.3f} ± {se:.3f} | {(v < 0).sum()} / {(v > 0).sum()} |")
    go_on = means["pooled"] < 0 and all(means[d] <= 0.05 for d in TUNING)
    print(f"\nStep 1 passed (go on to fit seeds 1 and 2): {'yes' if go_on else 'no'}")


if __name__ == "__main__":
    main()
