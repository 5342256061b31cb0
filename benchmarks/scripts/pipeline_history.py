"""The N = 1 000 cell of ``prolas bench --performance`` (a default ``prolas fit`` of the
daily series: search on its view, refit on all points) in this process, its figures and
search history written to a file, so two runs can be compared fit by fit.

    python benchmarks/scripts/pipeline_history.py OUT.json [--n 1000] [--budget 50]

Prints wall seconds, CPU seconds, seconds inside the GP scorer and the best expression
(:func:`prolas.bench.performance.measure_pipeline`; OUT.json holds its whole record,
``history`` included). Run it alone on the machine: two runs of the same code a few
minutes apart differed by 10 % in fit seconds.
"""

from __future__ import annotations

import argparse
import json

from prolas.bench.performance import measure_pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--budget", type=int, default=50)
    args = parser.parse_args()
    record = measure_pipeline(args.n, args.budget)
    with open(args.out, "w") as fh:
        json.dump(record, fh, indent=1)
    print(
        f"wall {record['wall_seconds']:.1f} s, CPU {record['cpu_seconds']:.1f} s, "
        f"in fits {record['fit_seconds']:.1f} s, best {record['best']}"
    )


if __name__ == "__main__":
    main()
