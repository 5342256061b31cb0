"""Train the shipped KG-VAE checkpoints (prolas/checkpoints/) with the chosen defaults.

Default: the default grammar, VAEConfig() (latent_dim 8, hidden 400x400, beta 0.1, KL
warm-up 10 epochs, <= 60 epochs, patience 8, seed 0), 50 000 grammar draws, r_d on the
canonical 128-point grid on [0, 1]. Equivalent to
``prolas train-vae --grammar grammars/default.toml --out prolas/checkpoints/default``.

    .venv/bin/python benchmarks/scripts/vae_train_shipped.py default
    .venv/bin/python benchmarks/scripts/vae_train_shipped.py seasonal --latent-dim 16
    .venv/bin/python benchmarks/scripts/vae_train_shipped.py change --latent-dim 16
"""

from __future__ import annotations

import argparse
import json

import torch

from prolas.grammar import Grammar
from prolas.vae import CHECKPOINTS_DIR, VAEConfig, save_checkpoint, train_kgvae


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grammars", nargs="+", help="shipped grammar names, e.g. default seasonal")
    ap.add_argument("--samples", type=int, default=50_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--latent-dim", type=int, default=VAEConfig().latent_dim)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.grammars:
        grammar = Grammar.from_file(name)
        trained = train_kgvae(
            grammar, VAEConfig(latent_dim=args.latent_dim), n_samples=args.samples, progress=False
        )
        save_checkpoint(trained, CHECKPOINTS_DIR / grammar.name)
        print(
            name, json.dumps(trained.metadata["quality"]), trained.metadata["training"]["seconds"]
        )


if __name__ == "__main__":
    main()
