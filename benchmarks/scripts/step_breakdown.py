"""Where the PROLAS strategy's own time per BO step goes, part by part.

Runs :mod:`strategy_speed`'s default PROLAS search (a table scorer: no GP fits) with
``time.process_time`` wrapped around the parts of a BO step, and prints each part's CPU
milliseconds per BO step (mean over the search's steps). No profiler: cProfile's
per-call overhead inflates the many small Python calls of canonicalisation and the
graphs several-fold and misplaces the time.

    python benchmarks/scripts/step_breakdown.py \\
        --scorer table:benchmarks/results/search_airline_defaults/fits/airline.jsonl \\
        --seeds 0 1 2

Parts (nested: a line's time includes the lines indented under it):

* ``step``: the whole BO step, including the Evaluator's bookkeeping for the table
  scorer (``step_ms`` excludes the time inside the Evaluator, so its median is lower);
* ``candidate_pool``: the pool's draws and their decoding (``TrainedVAE.decode``);
* ``surrogate.best``: the OT GP on the pool's new expressions: the graphs of expressions
  met for the first time (``ExpressionRegistry.indices``), the fit, and the prediction
  with the OT distances of every candidate to the training expressions
  (``OTGP.predict``). Before d9b0134 the first fit of a process also imported
  ``torch._dynamo`` (1.2–2.7 s: ``torch.optim.LBFGS`` is decorated with
  ``torch._disable_dynamo``), which was in the fit's mean; the fit now uses SciPy's
  L-BFGS-B.
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import strategy_speed  # noqa: E402  (the script beside this one)

latent = importlib.import_module("prolas.search.latent")  # `prolas.search` is also a function
ot = importlib.import_module("prolas.surrogates.ot")
ot_gp = importlib.import_module("prolas.surrogates.ot_gp")
vae_model = importlib.import_module("prolas.vae_model")

PARTS = (
    ("step", latent._LatentSearch, "step"),
    ("  candidate_pool", latent._LatentSearch, "candidate_pool"),
    ("    decode", vae_model.TrainedVAE, "decode"),
    ("  surrogate.best", latent._ExpressionGP, "best"),
    ("    graphs (registry.indices)", ot.ExpressionRegistry, "indices"),
    ("    fit (OTGP.fit)", ot_gp.OTGP, "fit"),
    ("    predict with distances (OTGP.predict)", ot_gp.OTGP, "predict"),
)


def _install(seconds: collections.Counter, calls: collections.Counter) -> None:
    """Wrap every part's method so that its CPU seconds add up in ``seconds`` and its
    calls in ``calls``."""
    for label, owner, name in PARTS:
        raw = owner.__dict__[name]
        is_classmethod = isinstance(raw, classmethod)
        func = raw.__func__ if is_classmethod else raw

        def wrapped(*args, _func=func, _label=label, **kwargs):
            start = time.process_time()
            calls[_label] += 1
            try:
                return _func(*args, **kwargs)
            finally:
                seconds[_label] += time.process_time() - start

        functools.update_wrapper(wrapped, func)
        setattr(owner, name, classmethod(wrapped) if is_classmethod else wrapped)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scorer", required=True, help="as strategy_speed.py's --scorer")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--budget", type=int, default=50)
    # the rest goes to strategy_speed.py run (--restarts, --cache-dir, --option, ...)
    args, rest = parser.parse_known_args()
    seconds: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()
    _install(seconds, calls)
    for seed in args.seeds:
        seconds.clear()
        calls.clear()
        with tempfile.TemporaryDirectory() as tmp:
            argv = ["run", "--scorer", args.scorer, "--seeds", str(seed)]
            argv += ["--budget", str(args.budget), "--out", str(Path(tmp) / "run.jsonl")]
            argv += rest
            strategy_speed.main(argv)
        steps = max(calls["step"], 1)
        for label, _, _ in PARTS:
            print(f"seed {seed}  {label:45s} {1000.0 * seconds[label] / steps:7.1f} ms/step")


if __name__ == "__main__":
    main()
