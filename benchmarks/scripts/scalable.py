"""SGPR refit (prolas.gp.scalable) against the exact fit, and against GPyTorch's SGPR.

Series: synthetic, the same function sampled at N evenly spaced points over 40 "years"
(``x`` in [0, 40]): a linear trend, a yearly cycle whose amplitude drifts, a random
smooth function of lengthscale 0.5 (amplitude 0.5) and Gaussian noise (sd 0.2), so the
structure is the same at every N and only the density grows. The last 10 % (x > 36) is held out
(:func:`prolas.data.extrapolation_split`).

For each N the expression ``LIN + PER*SE + SE`` (3 terms, k = 9) is first fitted on
an evenly spaced 500-point subsample of the training part (``fit_gp``, 4 restarts,
seed 0): the start both refits share. Then, each in a fresh process (so that
``ru_maxrss`` is that configuration's own peak):

* ``exact``: ``gp.fit_gp`` on all training points warm-started from the subsample fit
  (``FitConfig(restarts=1, keep=1, max_iter=...)``): exact log-likelihood per point;
* ``sgpr-M``: ``refit_sgpr(start, train, inducing=M)``: the bound per point, and for
  N <= 5 000 the exact log-likelihood per point at the SGPR hyperparameters;
* RMSE of the forecast of the held-out 10 % (``predict`` / ``predict_sgpr``), in y's
  units; seconds of the (re)fit; peak RSS of the process (``resource.getrusage``).

``--eval`` rows time one value-and-gradient of the bound at the start
hyperparameters, prolas.gp.scalable against ``gpytorch.kernels.InducingPointKernel`` in
an ``ExactGP`` (default settings, where its ``LowRankRootAddedDiagLinearOperator``
uses Woodbury and a Cholesky of the M x M capacitance; with
``fast_computations(False, False, False)`` it factorises the dense N x N matrix).

Usage (the table in benchmarks/results/sgpr_refit/SCALABLE.md):

    .venv/bin/python benchmarks/scripts/scalable.py
    .venv/bin/python benchmarks/scripts/scalable.py --quick   # N = 2 000 only, a smoke test
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

EXPR = "LIN + PER*SE + SE"
SPAN = 40.0
SUBSAMPLE = 500


def series(n: int):
    """The synthetic series at ``n`` points (deterministic; the same function at every n)."""
    from prolas.data import Dataset

    x = np.linspace(0.0, SPAN, n)
    # a random smooth function with lengthscale 0.5 (random Fourier features of an SE
    # kernel), fixed across n: span / lengthscale = 80, so M matters
    feat = np.random.default_rng(12345)
    w = feat.normal(0.0, 1.0 / 0.5, 300)
    phase = feat.uniform(0.0, 2 * np.pi, 300)
    smooth = np.zeros(n)
    for wk, pk in zip(w, phase):
        smooth += np.cos(wk * x + pk)
    smooth *= np.sqrt(2.0 / w.size)
    y = (
        0.15 * x
        + (1.0 + 0.3 * np.sin(2 * np.pi * x / 23.0)) * np.sin(2 * np.pi * x)
        + 0.5 * smooth
        + 0.2 * np.random.default_rng(n).standard_normal(n)
    )
    return Dataset.from_arrays(x, y, name=f"synthetic-{n}")


def split(n: int):
    from prolas.data import extrapolation_split

    return extrapolation_split(series(n), 0.9)


def start_fit(n: int):
    from prolas.gp import fit_gp

    train, _ = split(n)
    sub = train.subset(train.spaced_indices(SUBSAMPLE))
    return fit_gp(EXPR, sub, restarts=4, seed=0)


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def exact_ll(fit, ds) -> float:
    import torch

    from prolas.gp import DTYPE, dense_covariance, exact_log_likelihood, natural_covar_module

    x = torch.tensor(ds.x, dtype=DTYPE).reshape(-1, 1)
    with torch.no_grad():
        K = dense_covariance(natural_covar_module(fit), x, x)
        K += fit.noise_variance * torch.eye(ds.n, dtype=DTYPE)
        ll, ok = exact_log_likelihood(K, torch.tensor(ds.y_standardised, dtype=DTYPE))
    return float(ll) if bool(ok) else math.nan


# --- one configuration (child process) ----------------------------------------------------


def child(cfg: dict) -> dict:
    import torch

    from prolas.gp import FitConfig, FitResult, fit_gp, predict
    from prolas.gp.scalable import predict_sgpr, refit_sgpr

    n, kind = cfg["n"], cfg["kind"]
    train, test = split(n)
    start = FitResult.from_json(json.loads(Path(cfg["start"]).read_text()), SUBSAMPLE)
    out = {"threads": torch.get_num_threads()}
    if kind == "exact":
        t0 = time.perf_counter()
        config = FitConfig(restarts=1, keep=1, max_iter=cfg["max_iter"])
        fit = fit_gp(EXPR, train, config, init=start)
        out["seconds"] = time.perf_counter() - t0
        out["status"] = fit.status
        if fit.ok:
            out["ll_exact"] = fit.log_likelihood / train.n
            mean, _ = predict(fit, train, test.x)
            out["rmse"] = float(np.sqrt(np.mean((mean - test.y) ** 2)))
            out["period"] = fit.period()
    elif kind == "sgpr":
        t0 = time.perf_counter()
        fit = refit_sgpr(start, train, inducing=cfg["m"], max_iter=cfg["max_iter"])
        out["seconds"] = time.perf_counter() - t0
        out["status"] = fit.status if fit.ok else f"failed: {fit.error}"
        if fit.ok:
            out["bound"] = fit.log_likelihood / train.n
            mean, _ = predict_sgpr(fit, train, test.x)
            out["rmse"] = float(np.sqrt(np.mean((mean - test.y) ** 2)))
            out["period"] = fit.period()
            out["peak_gb"] = peak_gb()  # before the dense exact check below
            if train.n <= 5000:
                out["ll_exact"] = exact_ll(fit, train) / train.n
    elif kind == "eval-prolas":
        from prolas.gp.scalable import _problem

        t0 = time.perf_counter()
        problem, theta = _problem(start, train, cfg["m"])
        times = []
        for _ in range(2):
            t1 = time.perf_counter()
            value, _ = problem.value_and_grad(theta)
            times.append(time.perf_counter() - t1)
        out["seconds"] = times[-1]
        out["first"] = times[0]
        out["bound"] = value / train.n
        out["setup"] = t0
    elif kind == "eval-gpytorch":
        out.update(gpytorch_eval(start, train, cfg["m"]))
    out.setdefault("peak_gb", peak_gb())
    return out


def gpytorch_eval(start, train, m: int) -> dict:
    """One value-and-gradient of GPyTorch's SGPR (InducingPointKernel + ExactGP)."""
    import gpytorch
    import torch

    from prolas.gp import DTYPE, NOISE_FLOOR, natural_covar_module
    from prolas.gp.kernels import log_positive
    from prolas.gp.scalable import inducing_inputs

    X = torch.tensor(train.x, dtype=DTYPE).reshape(-1, 1)
    Y = torch.tensor(train.y_standardised, dtype=DTYPE)
    Z = torch.tensor(inducing_inputs(train.x, m), dtype=DTYPE).reshape(-1, 1)
    lik = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=log_positive(NOISE_FLOOR)).to(
        DTYPE
    )
    lik.noise = start.noise_variance

    class SGPR(gpytorch.models.ExactGP):
        def __init__(self) -> None:
            super().__init__(X, Y, lik)
            self.mean = gpytorch.means.ZeroMean()
            self.covar = gpytorch.kernels.InducingPointKernel(natural_covar_module(start), Z, lik)
            self.covar.inducing_points.requires_grad_(False)

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean(x), self.covar(x))

    model = SGPR().to(DTYPE)
    model.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        model.zero_grad()
        loss = -mll(model(X), Y) * train.n
        loss.backward()
        times.append(time.perf_counter() - t0)
    return {"seconds": times[-1], "first": times[0], "bound": -float(loss.detach()) / train.n}


# --- driver ---------------------------------------------------------------------------------


def run(cfg: dict, limit_gb: float | None = None) -> dict:
    """Run one configuration in a fresh interpreter; its JSON result (or the error)."""
    env = dict(os.environ)
    cmd = [sys.executable, __file__, "--child", json.dumps(cfg)]
    if limit_gb:
        cmd += ["--limit-gb", str(limit_gb)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["?"]
        return {"status": f"error: {tail[0][:80]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fmt(v, spec: str) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 2 000 only")
    ap.add_argument("--only", help="comma-separated N values to run (default: all)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--limit-gb", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        if args.limit_gb:
            lim = int(args.limit_gb * 1e9)
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
        print(json.dumps(child(json.loads(args.child))))
        return

    # (N, [(kind, M, max_iter)])
    plan = [
        (2000, [("exact", 0, 50), ("sgpr", 128, 50), ("sgpr", 256, 50), ("sgpr", 512, 50)]),
        (
            5000,
            [
                ("exact", 0, 10),
                ("sgpr", 128, 50),
                ("sgpr", 256, 50),
                ("sgpr", 512, 50),
                ("sgpr", 1024, 50),
            ],
        ),
        (20000, [("sgpr", 256, 50), ("sgpr", 512, 50)]),
        (100000, [("sgpr", 512, 50)]),
    ]
    evals = [(5000, 512), (20000, 512), (100000, 512)]
    if args.quick:
        plan, evals = plan[:1], []
    if args.only:
        keep = {int(v) for v in args.only.split(",")}
        plan = [(n, c) for n, c in plan if n in keep]
        evals = [(n, m) for n, m in evals if n in keep]

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        starts = {}
        for n in sorted({n for n, _ in plan} | {n for n, _ in evals}):
            t0 = time.perf_counter()
            fit = start_fit(n)
            path = Path(tmp) / f"start-{n}.json"
            path.write_text(json.dumps(fit.to_json()))
            starts[n] = str(path)
            print(
                f"N={n}: subsample fit ({SUBSAMPLE} points) {time.perf_counter() - t0:.1f} s, "
                f"period {fit.period():.4f}, ll/point {fit.log_likelihood / SUBSAMPLE:.4f}",
                file=sys.stderr,
            )
        for n, configs in plan:
            train, _ = split(n)
            for kind, m, max_iter in configs:
                cfg = {"n": n, "kind": kind, "m": m, "max_iter": max_iter, "start": starts[n]}
                r = run(cfg)
                label = "exact" if kind == "exact" else f"sgpr-{m}"
                rows.append((n, train.n, label, max_iter, r))
                print(n, label, r, file=sys.stderr)
        eval_rows = []
        for n, m in evals:
            for kind in ("eval-prolas", "eval-gpytorch"):
                cfg = {"n": n, "kind": kind, "m": m, "start": starts[n]}
                r = run(cfg, limit_gb=16.0 if kind == "eval-gpytorch" else None)
                eval_rows.append((n, m, kind[5:], r))
                print(n, kind, r, file=sys.stderr)

    print(f"Expression {EXPR}; start = fit on a {SUBSAMPLE}-point subsample of the training part.")
    print("ll/pt: exact log-likelihood per training point (for sgpr: at its hyperparameters);")
    print("bound/pt: SGPR bound per point; gap: exact log-lik minus bound, in nats (N <= 5000);")
    print("iter: max_iter; RMSE: forecast of the held-out last 10 %; s: seconds of the (re)fit.\n")
    print("| N | train | fit | iter | ll/pt | bound/pt | gap | RMSE | period | s | peak GB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, n_train, label, max_iter, r in rows:
        gap = None
        if "bound" in r and "ll_exact" in r:
            gap = (r["ll_exact"] - r["bound"]) * n_train
        print(
            f"| {n} | {n_train} | {label} | {max_iter} | {fmt(r.get('ll_exact'), '.5f')} | "
            f"{fmt(r.get('bound'), '.5f')} | {fmt(gap, '.2f')} | {fmt(r.get('rmse'), '.4f')} | "
            f"{fmt(r.get('period'), '.4f')} | {fmt(r.get('seconds'), '.1f')} | "
            f"{fmt(r.get('peak_gb'), '.2f')} |"
            + ("" if r.get("status", "ok") == "ok" else f" {r['status']}")
        )
    if eval_rows:
        print("\nOne value + gradient of the bound at the start (second of two calls):\n")
        print("| N | M | implementation | bound/pt | seconds | peak RSS GB |")
        print("|---|---|---|---|---|---|")
        for n, m, impl, r in eval_rows:
            print(
                f"| {n} | {m} | {impl} | {fmt(r.get('bound'), '.6f')} | "
                f"{fmt(r.get('seconds'), '.2f')} | {fmt(r.get('peak_gb'), '.2f')} |"
                + (f" {r['status']}" if "status" in r else "")
            )
    threads = next((r.get("threads") for *_, r in rows if "threads" in r), None)
    print(f"\ntorch threads per process: {threads}; machine: {os.cpu_count()} cores (shared)")


if __name__ == "__main__":
    main()
