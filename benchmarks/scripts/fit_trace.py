"""Where do two runs of one cold fit part? Every stage's values, then the first difference.

A fit is deterministic on one machine, but under another BLAS kernel (another machine, or
``OPENBLAS_CORETYPE`` on this one) its last bits differ, and sometimes its optimum does.
``trace`` records every batch of likelihood values and minimisations of one fit (the
presample, the screen, the polishes, the hops); ``compare`` prints, stage by stage, how far
two traces are apart:

    OPENBLAS_CORETYPE=Haswell python benchmarks/scripts/fit_trace.py trace call-centre \\
        'CP(CP(LIN, PER) + PER, RQ)' haswell.json
    OPENBLAS_CORETYPE=SkylakeX python benchmarks/scripts/fit_trace.py trace call-centre \\
        'CP(CP(LIN, PER) + PER, RQ)' skylakex.json
    python benchmarks/scripts/fit_trace.py compare haswell.json skylakex.json

The fit is the one of ``fit_stability.py``: the grid's points (training split thinned to
400), fit seed ``--seed``, lengthscale floor 1, default restarts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def cmd_trace(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks" / "scripts"))
    from fit_stability import _grid_points

    import prolas.gp.fit as fit_module
    from prolas.gp import FitConfig

    log: list = []
    minimise_each, value_each = fit_module._minimise_each, fit_module._value_each

    def traced_minimise_each(pool, model, thetas, y, max_iter, tolerance):
        out = minimise_each(pool, model, thetas, y, max_iter, tolerance)
        starts = [np.asarray(t).tolist() for t in thetas]
        log.append(["minimise", model.n, max_iter, starts, [ll for _, ll in out]])
        return out

    def traced_value_each(pool, model, thetas, y):
        out = value_each(pool, model, thetas, y)
        log.append(["values", model.n, [np.asarray(t).tolist() for t in thetas], list(out)])
        return out

    fit_module._minimise_each = traced_minimise_each
    fit_module._value_each = traced_value_each
    data = _grid_points(args.series, ROOT / "data", 400)
    config = FitConfig(seed=args.seed, lengthscale_floor=1.0)
    fit = fit_module.fit_gp(args.expression, data, config)
    log.append(["result", fit.log_likelihood])
    args.out.write_text(json.dumps(log))
    print(f"{args.series} {args.expression}: log-likelihood {fit.log_likelihood:.6f}")


def cmd_compare(args: argparse.Namespace) -> None:
    a, b = (json.loads(p.read_text()) for p in (args.a, args.b))
    for k, (x, y) in enumerate(zip(a, b)):
        if x[0] != y[0]:
            print(f"{k}: the stages differ ({x[0]} / {y[0]}): the paths have parted")
            return
        if x[0] == "result":
            print(f"{k}: result {x[1]:.6f} / {y[1]:.6f}")
            continue
        starts = (np.asarray(x[-2], float), np.asarray(y[-2], float))
        ll = (np.asarray(x[-1], float), np.asarray(y[-1], float))
        if starts[0].shape != starts[1].shape:
            print(f"{k}: {x[0]} on {x[1]} points: different numbers of starts")
            return
        d_start = float(np.abs(starts[0] - starts[1]).max()) if starts[0].size else 0.0
        d_ll = float(np.nanmax(np.abs(ll[0] - ll[1]))) if ll[0].size else 0.0
        what = f"{x[0]} ({x[2]} iterations)" if x[0] == "minimise" else x[0]
        print(
            f"{k}: {what} on {x[1]} points, {len(starts[0])} starts: largest difference "
            f"of a start {d_start:.3g}, of a log-likelihood {d_ll:.3g}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("trace", help="fit one pair, recording every stage")
    p.add_argument("series")
    p.add_argument("expression")
    p.add_argument("out", type=Path)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=cmd_trace)
    p = sub.add_parser("compare", help="where two traces part")
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.set_defaults(run=cmd_compare)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
