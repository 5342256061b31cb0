"""KG-VAE: the Kernel Grammar Variational Auto-encoder (PROLAS §2.3), and the one a search uses.

The model (encoder, stop-chain decoder, ELBO) and its training are in
:mod:`prolas.vae_model`, checkpoints in :mod:`prolas.vae_checkpoints` (a ``*.pt`` file of
tensors, loaded with ``weights_only=True``, and a ``*.json`` metadata file;
docs/search.md, KG-VAE). This module chooses the KG-VAE of a search
(:func:`resolve_vae`: a checkpoint, or a quick one trained on the data's inputs) and
re-exports the public names of both.

>>> trained = load_checkpoint("default")            # doctest: +SKIP
>>> z = trained.encode_sequences([("LIN", "*", "PER", "stop")])   # 1 x latent_dim
>>> str(trained.decode(z)[0])                       # doctest: +SKIP
'LIN*PER'
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from prolas.grammar import Grammar
from prolas.threads import torch_threads
from prolas.vae_checkpoints import (
    CHECKPOINTS_DIR,
    checkpoint_digest,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from prolas.vae_model import KGVAE, TrainedVAE, VAEConfig, evaluate_quality, train_kgvae

__all__ = [
    "VAEConfig",
    "KGVAE",
    "TrainedVAE",
    "train_kgvae",
    "save_checkpoint",
    "load_checkpoint",
    "list_checkpoints",
    "checkpoint_digest",
    "resolve_vae",
    "quick_vae_config",
    "CHECKPOINTS_DIR",
    "QUICK_VAE_SAMPLES",
    "evaluate_quality",
]

#: Grammar draws for a quick data-specific KG-VAE (``prolas fit --train-vae``).
QUICK_VAE_SAMPLES = 20_000

#: Loaded checkpoints, keyed by (name or path, modification time, grammar hash checked).
_LOADED: dict[tuple, TrainedVAE] = {}


def quick_vae_config(latent_dim: int = 8) -> VAEConfig:
    """Quick data-specific KG-VAE settings for ``--train-vae`` (goal: <= 2 min, 2 cores)."""
    return VAEConfig(
        latent_dim=latent_dim, hidden=(256, 256), epochs=30, patience=5, kl_warmup_epochs=8
    )


def resolve_vae(
    checkpoint: str | Path,
    grammar: str | Path = "default",
    *,
    train_x: np.ndarray | None = None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> TrainedVAE:
    """The KG-VAE a search uses: ``checkpoint`` (shipped name or path), or, given
    ``train_x``, a quick KG-VAE for ``grammar`` trained on those inputs (r_d on x; the
    latent dimension of the shipped ``default`` checkpoint, seeded with ``seed``).

    A checkpoint must have been trained for ``grammar`` unless that is ``"default"`` (a
    checkpoint carries its own grammar). Loaded checkpoints are kept in memory (keyed by
    file and modification time), so multi-seed comparisons load each once.
    """
    log = log or (lambda s: None)
    g = Grammar.from_file(grammar)
    if train_x is not None:
        t0 = time.perf_counter()
        vcfg = dataclasses.replace(quick_vae_config(_default_latent_dim()), seed=seed)
        log(
            f"training a data-specific KG-VAE on {len(train_x)} inputs "
            f"(latent dim {vcfg.latent_dim}, {QUICK_VAE_SAMPLES} grammar draws, "
            f"<= {vcfg.epochs} epochs)"
        )
        with torch_threads(1):  # measured: two threads on busy cores train 10x slower
            trained = train_kgvae(g, vcfg, x=train_x, n_samples=QUICK_VAE_SAMPLES, progress=False)
        q = trained.metadata.get("quality", {})
        log(
            f"trained KG-VAE in {time.perf_counter() - t0:.0f} s "
            f"(held-out reconstruction {q.get('heldout_reconstruction', float('nan')):.0%})"
        )
        return trained
    stem = str(checkpoint)
    p = Path(stem)
    key_path = p if p.suffix in (".pt", ".json") else p.with_name(p.name + ".json")
    mtime = key_path.stat().st_mtime if key_path.is_file() else None
    check = g if grammar != "default" else None
    key = (stem, mtime, check.content_hash if check is not None else None)
    if key not in _LOADED:
        _LOADED[key] = load_checkpoint(stem, grammar=check)
    trained = _LOADED[key]
    acc = trained.metadata.get("quality", {}).get("heldout_reconstruction")
    log(
        f"loaded checkpoint {checkpoint} (latent dim {trained.latent_dim}"
        + (f", held-out reconstruction {acc:.0%}" if acc is not None else "")
        + ")"
    )
    return trained


def _default_latent_dim() -> int:
    """Latent dimension of the shipped ``default`` checkpoint (8 if it is missing)."""
    for c in list_checkpoints():
        if c.get("name") == "default" and "latent_dim" in c:
            return int(c["latent_dim"])
    return 8
