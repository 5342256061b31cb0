"""`prolas bench --performance`'s search measurement alone, for an A/B of two checkouts.

One default PROLAS search on airline with real fits (50 fits, 8 restarts, one core, no fit
cache), in this process: the strategy's own CPU milliseconds per BO step (median, p90,
mean), the wall and fit seconds and the best model, as one JSON line on stdout. Run it from
each checkout in turn, alternating, alone on the machine:

    for side in OLD NEW NEW OLD; do
        (cd $side && OMP_NUM_THREADS=1 PYTHONPATH=$PWD \\
            python /path/to/step_time_real_fits.py $PWD >> steps.jsonl)
    done
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path.cwd()
    sys.path.insert(0, str(root))
    import torch

    torch.set_num_threads(1)
    from prolas.bench.performance import _measure_search

    result = _measure_search(str(root / "data" / "airline.csv"), "prolas", 50, 8)
    print(json.dumps({"root": str(root), **result}))


if __name__ == "__main__":
    main()
