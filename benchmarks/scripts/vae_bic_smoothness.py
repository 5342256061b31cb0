"""How smoothly does BIC vary in KG-VAE latent spaces? (benchmarks/results/kgvae/VAE.md)

Fits ~100 distinct random grammar expressions on data/airline.csv (restarts=4, cached in
benchmarks/results/kgvae/vae_bic_airline_cache.json), encodes their sequences with each checkpoint
(posterior means) and reports:

* spearman: rank correlation between latent distance and |BIC difference| over all pairs
  (higher = nearby points have more similar BIC);
* nn_ratio: mean |BIC_i - BIC_nn(i)| for the nearest latent neighbour, divided by the mean
  over all pairs (1 = no better than a random pair; lower = smoother);
* gp_r2: pooled held-out R^2 of a GP regression of BIC on z (5-fold CV, BoTorch
  SingleTaskGP, inputs scaled to the checkpoint's latent box, standardised outcome).

    .venv/bin/python benchmarks/scripts/vae_bic_smoothness.py /tmp/vae_sweep/default_d*_b0.1_dd0_s0
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from prolas.data import load_csv
from prolas.encoding import (
    GrammarEncoding,
    canonical_grid,
    distance_features,
)
from prolas.gp import fit_gp
from prolas.grammar import Grammar, sequence_expression
from prolas.vae import load_checkpoint

CACHE = Path(__file__).resolve().parents[1] / "results" / "kgvae" / "vae_bic_airline_cache.json"


def expressions(n: int, seed: int) -> list[tuple]:
    g = Grammar.default()
    rng = np.random.default_rng(seed)
    seen: dict = {}
    while len(seen) < n:
        s = g.sample_sequence(rng)
        seen.setdefault(str(sequence_expression(s)), s)
    return list(seen.values())


def bics(seqs: list[tuple], data: str, restarts: int) -> dict[str, float | None]:
    cache = json.loads(CACHE.read_text()) if CACHE.is_file() else {}
    ds = load_csv(data)
    t0 = time.perf_counter()
    for i, s in enumerate(seqs):
        key = str(sequence_expression(s))
        if key in cache:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_gp(sequence_expression(s), ds, restarts=restarts, seed=0)
        cache[key] = fit.bic if fit.status == "ok" else None
        print(
            f"[{i + 1}/{len(seqs)}] {key}: {cache[key]} ({time.perf_counter() - t0:.0f} s)",
            file=sys.stderr,
        )
        CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    return cache


def gp_r2(z: np.ndarray, y: np.ndarray, folds: int = 5, seed: int = 0) -> float:
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Standardize
    from gpytorch.mlls import ExactMarginalLogLikelihood

    idx = np.random.default_rng(seed).permutation(len(y))
    pred = np.empty_like(y)
    for f in range(folds):
        te = idx[f::folds]
        tr = np.setdiff1d(idx, te)
        X = torch.tensor(z[tr], dtype=torch.float64)
        Y = torch.tensor(y[tr, None], dtype=torch.float64)
        model = SingleTaskGP(X, Y, outcome_transform=Standardize(1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        with torch.no_grad():
            pred[te] = (
                model.posterior(torch.tensor(z[te], dtype=torch.float64)).mean.squeeze(-1).numpy()
            )
    return float(1 - np.sum((pred - y) ** 2) / np.sum((y - y.mean()) ** 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="*")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--restarts", type=int, default=4)
    ap.add_argument("--data", default="data/airline.csv")
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")  # BoTorch input-scaling notes on held-out folds
    from scipy.stats import spearmanr

    seqs = expressions(args.n, args.seed)
    table = bics(seqs, args.data, args.restarts)
    keep = [s for s in seqs if table.get(str(sequence_expression(s))) is not None]
    y = np.array([table[str(sequence_expression(s))] for s in keep])
    if not args.checkpoints:  # only fill the BIC cache
        return
    print(f"{len(keep)} expressions with a BIC; BIC range {y.min():.1f} .. {y.max():.1f}")
    iu = np.triu_indices(len(y), 1)
    dy = np.abs(y[:, None] - y[None, :])
    print("| representation | dim | spearman(dist, abs dBIC) | nn_ratio | gp_r2 (3 fold seeds) |")
    print("|---|---|---|---|---|")

    def row(label: str, zn: np.ndarray) -> None:
        dz = np.linalg.norm(zn[:, None, :] - zn[None, :, :], axis=-1)
        rho = spearmanr(dz[iu], dy[iu]).statistic
        np.fill_diagonal(dz, np.inf)
        nn = np.argmin(dz, axis=1)
        ratio = np.mean(np.abs(y - y[nn])) / np.mean(dy[iu])
        r2 = np.mean([gp_r2(zn, y, seed=args.seed + k) for k in range(3)])
        print(f"| {label} | {zn.shape[1]} | {rho:.3f} | {ratio:.3f} | {r2:.3f} |", flush=True)

    for path in args.checkpoints:
        trained = load_checkpoint(path)
        z = trained.encode_sequences(keep)
        b = trained.latent_bounds()
        row(Path(path).name, ((z - b[0]) / (b[1] - b[0])).numpy())
    # references without a VAE: the raw encodings of the same sequences
    g = Grammar.default()
    rd = distance_features(keep, canonical_grid(), g.base_kernels)
    row("reference: r_d (canonical grid)", (rd - rd.min(0)) / (rd.max(0) - rd.min(0)))
    row("reference: r_g one-hot", GrammarEncoding(g).encode_many(keep))


if __name__ == "__main__":
    main()
