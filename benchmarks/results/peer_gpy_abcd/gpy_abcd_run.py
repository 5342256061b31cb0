#!/usr/bin/env python3
"""Run GPy-ABCD (a peer) on a 90/10 split: search on train, RMSE on test, wall time.

The project's peer recipe (``../shared/peers/gpy_abcd_run.py``), reformatted; runs in its
own virtual environment (see README.md), not in prolas's. Standardises y, runs
``explore_model_space`` (default grammar, BIC, beam [3, 2, 1], 5 restarts, one process),
predicts the test split with the best model and appends one JSON line to ``OUT``.

    python gpy_abcd_run.py TRAIN.csv TEST.csv ROUNDS OUT.jsonl
"""

import json
import sys
import time
import warnings

import numpy as np
import pandas as pd

warnings.filterwarnings("ignore")
from GPy_ABCD import explore_model_space  # noqa: E402
from GPy_ABCD.Models.modelSearch import fit_mods_not_parallel  # noqa: E402


def main(train: str, test: str, rounds: int, out: str) -> None:
    tr = pd.read_csv(train)
    te = pd.read_csv(test)
    x = tr.x.to_numpy(float)[:, None]
    y = tr.y.to_numpy(float)[:, None]
    mu, sd = y.mean(), y.std()
    t0 = time.time()
    sorted_models, tested, *_ = explore_model_space(
        x,
        (y - mu) / sd,
        rounds=rounds,
        restarts=5,
        model_list_fitter=fit_mods_not_parallel,
        verbose=False,
    )
    wall = time.time() - t0
    best = sorted_models[0]
    m, _ = best.model.predict(te.x.to_numpy(float)[:, None])
    pred = m.ravel() * sd + mu
    rmse = float(np.sqrt(np.mean((pred - te.y.to_numpy(float)) ** 2)))
    record = {
        "train": train,
        "expression": str(best.kernel_expression),
        "loglik": float(best.model.log_likelihood()),
        "bic": float(best.cached_utility_function),
        "n_models": sum(len(t) for t in tested),
        "wall": wall,
        "rmse": rmse,
        "rounds": rounds,
    }
    print(json.dumps(record))
    with open(out, "a") as f:
        f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
