#!/bin/bash
# make demo's search, this checkout against another, in turns (ROUNDS rounds, default 2):
#   bash benchmarks/scripts/demo_ab.sh /path/to/other/checkout [ROUNDS]
# Each side runs `prolas fit data/airline.csv --out DIR --force --horizon 24` from its own
# source tree (PYTHONPATH) with this checkout's .venv; prints the end-to-end seconds, the
# search's seconds (result.json) and the best model. Run it alone on the machine.
set -euo pipefail
new=$(cd "$(dirname "$0")/../.." && pwd)
old=$(cd "$1" && pwd)
rounds=${2:-2}
source "$new/.venv/bin/activate"
out=$(mktemp -d)
cd "$out"
for round in $(seq "$rounds"); do
  for side in new old; do
    if [ "$side" = new ]; then root=$new; else root=$old; fi
    start=$(date +%s.%N)
    PYTHONPATH=$root python -m prolas fit "$root/data/airline.csv" --out "$out/$side" \
      --force --horizon 24 > "$out/$side.log" 2>&1
    end=$(date +%s.%N)
    python - "$out/$side/result.json" "$side" "$round" "$start" "$end" <<'PY'
import json, sys
path, side, rnd, start, end = sys.argv[1:]
r = json.load(open(path))
print(f"{side} ({rnd}): end to end {float(end) - float(start):.1f} s, search "
      f"{r['search']['wall_seconds']:.1f} s, best {r['best']['expression']} "
      f"{r['best']['bic']:.3f}")
PY
  done
done
echo "run folders: $out"
