"""Sweep KG-VAE settings: latent dim, KL weight, de-duplication (benchmarks/results/kgvae/VAE.md).

For each setting: train on grammar samples (r_d on the canonical 128-point grid), then
measure held-out exact canonical reconstruction (fresh grammar draws; also on draws not
in the training set; decoding by the exact chain mode and by greedy argmax), validity of
decoded random z (half at ||z|| = 50), distinct expressions decoded from a 10 000-point
Sobol grid over the latent box, and training time. Each trained model is saved as a
checkpoint under --ckpt-dir for benchmarks/scripts/vae_bic_smoothness.py.

    .venv/bin/python benchmarks/scripts/vae_sweep.py --dims 2 4 8 16 --betas 0.1
    .venv/bin/python benchmarks/scripts/vae_sweep.py --dims 8 --betas 0.1 --dedupe 1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from prolas.grammar import Grammar, sequence_expression
from prolas.vae import VAEConfig, save_checkpoint, train_kgvae


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grammar", default="default")
    ap.add_argument("--dims", type=int, nargs="+", default=[2, 4, 8, 16])
    ap.add_argument("--betas", type=float, nargs="+", default=[0.1])
    ap.add_argument("--dedupe", type=int, nargs="+", default=[0])
    ap.add_argument("--samples", type=int, default=50_000)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ckpt-dir", default="/tmp/vae_sweep")
    ap.add_argument("--out", default="benchmarks/results/kgvae/vae_sweep_results.jsonl")
    args = ap.parse_args()
    torch.set_num_threads(1)
    grammar = Grammar.from_file(args.grammar)
    for dedupe in args.dedupe:
        for beta in args.betas:
            for dim in args.dims:
                cfg = VAEConfig(
                    latent_dim=dim,
                    beta=beta,
                    dedupe=bool(dedupe),
                    epochs=args.epochs,
                    seed=args.seed,
                )
                tag = f"{grammar.name}_d{dim}_b{beta:g}_dd{dedupe}_s{args.seed}"
                t0 = time.perf_counter()
                trained = train_kgvae(grammar, cfg, n_samples=args.samples, progress=False)
                q = trained.metadata["quality"]
                # greedy decoding on the same held-out draws, for comparison with the mode
                rng = np.random.default_rng(cfg.seed + 1 + 10_000)
                held = grammar.sample_sequences(q["n_heldout"], rng)
                z = trained.encode_sequences(held)
                greedy = trained.decode_sequences(z, method="greedy")
                q["heldout_reconstruction_greedy"] = float(
                    np.mean(
                        [
                            sequence_expression(a) == sequence_expression(b)
                            for a, b in zip(held, greedy, strict=True)
                        ]
                    )
                )
                # decode speed: 10 000 latent points
                zz = torch.randn(10_000, dim, dtype=torch.float64)
                t1 = time.perf_counter()
                trained.decode(zz)
                q["decode_10000_seconds"] = time.perf_counter() - t1
                save_checkpoint(trained, Path(args.ckpt_dir) / tag)
                row = {
                    "tag": tag,
                    "latent_dim": dim,
                    "beta": beta,
                    "dedupe": bool(dedupe),
                    "seed": args.seed,
                    **{
                        k: trained.metadata["training"][k]
                        for k in ("n_train", "epochs_run", "seconds")
                    },
                    "wall_seconds": time.perf_counter() - t0,
                    **q,
                }
                print(json.dumps(row), flush=True)
                with open(args.out, "a") as fh:
                    fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
