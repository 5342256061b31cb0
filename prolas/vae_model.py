"""The KG-VAE model (PROLAS §2.3): the network, a trained model and its training.

Input r = [r_g, r_d~] of length ``L + |B|`` (see :mod:`prolas.encoding`), where r_d~ is
r_d standardised with the training mean and standard deviation.

* Encoder: MLP (``hidden``, ReLU) -> ``mu, logvar`` (each ``batch x latent_dim``),
  q(z | r) = N(mu, diag(exp(logvar))).
* Decoder: MLP (reversed ``hidden``, ReLU) -> per-slot logits for r_g (``batch x L``) and
  the mean of r_d~ (``batch x |B|``); r_d~ has a learned (or fixed) log-variance per
  column, p(r_d~ | z) = N(mean, diag(exp(rd_logvar))).
* Grammar likelihood: the chain of categoricals p(r_g | z) = prod_j p(slot_j | z)^{a_j},
  where slot j is active (a_j = 1) iff no stop precedes it; inactive slots are neither
  scored nor emitted, and tokens with zero prior probability are masked.
* Loss (negative ELBO per item):  -log p(r_g|z) - log p(r_d~|z) + beta * w_t * KL(q || N(0, I)),
  with a linear KL warm-up ``w_t`` over the first ``kl_warmup_epochs`` epochs.

``decode(z)`` returns the mode of p(r_g | z) under the stop chain (exact, vectorised:
:meth:`prolas.encoding.GrammarEncoding.decode_indices` with ``method="mode"``), hence a
valid expression for every z, including z far outside the training region or NaN.

Checkpoints (save, load, list) are in :mod:`prolas.vae_checkpoints`; the KG-VAE a search
uses is chosen by :func:`prolas.vae.resolve_vae`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from prolas.encoding import GrammarEncoding, canonical_grid, distance_features, rd_inputs
from prolas.errors import GrammarError
from prolas.expr import Expression
from prolas.grammar import Grammar, Sequence, sequence_expression
from prolas.progress import progress_bar

__all__ = [
    "VAEConfig",
    "KGVAE",
    "TrainedVAE",
    "evaluate_quality",
    "tokens_to_sequences",
    "train_kgvae",
]

_MIN_RD_LOGVAR = -6.0


@dataclass(frozen=True)
class VAEConfig:
    """KG-VAE architecture and training settings.

    Attributes:
        latent_dim: d, the latent dimension.
        hidden: hidden layer widths of the encoder (the decoder mirrors them).
        lr: Adam learning rate.  batch_size: minibatch size.
        epochs: maximum number of epochs.  patience: early-stopping patience (epochs
            without a better validation loss).
        kl_warmup_epochs: KL weight rises linearly from 0 to ``beta`` over these epochs.
        beta: final KL weight (1 = the ELBO).
        val_fraction: share of the training sequences held out for early stopping.
        dedupe: keep one sequence per canonical expression in the training data.
        learn_rd_variance: learn the r_d log-variance (else fixed at 0 on standardised r_d).
        rd_weight: weight of the r_d log-likelihood in the loss.
        seed: seeds sampling, initialisation, shuffling.
    """

    latent_dim: int = 8
    hidden: tuple[int, ...] = (400, 400)
    lr: float = 1e-3
    batch_size: int = 256
    epochs: int = 60
    patience: int = 8
    kl_warmup_epochs: int = 10
    beta: float = 0.1
    val_fraction: float = 0.1
    dedupe: bool = False
    learn_rd_variance: bool = True
    rd_weight: float = 1.0
    seed: int = 0

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["hidden"] = list(self.hidden)
        return d


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class KGVAE(nn.Module):
    """Encoder/decoder pair over r = [r_g, r_d~].

    Args:
        rg_length: L.  rd_length: |B|.  latent_dim: d.  hidden: encoder widths.
        kernel_columns: ``(N+1) x |B|`` column indices of the kernel slots in r_g.
        op_columns: ``N x |O|`` column indices of the op slots.
        log_p_base, log_p_op: log priors (``-inf`` = never emitted, masked).
    """

    def __init__(
        self,
        rg_length: int,
        rd_length: int,
        latent_dim: int,
        hidden: tuple[int, ...],
        kernel_columns: np.ndarray,
        op_columns: np.ndarray,
        log_p_base: np.ndarray,
        log_p_op: np.ndarray,
        learn_rd_variance: bool = True,
    ) -> None:
        super().__init__()
        self.rg_length, self.rd_length, self.latent_dim = rg_length, rd_length, latent_dim
        d_in = rg_length + rd_length
        self.encoder = _mlp([d_in, *hidden, 2 * latent_dim])
        self.decoder = _mlp([latent_dim, *reversed(hidden), d_in])
        self.rd_logvar = nn.Parameter(torch.zeros(rd_length), requires_grad=learn_rd_variance)
        self.register_buffer("kernel_columns", torch.as_tensor(kernel_columns, dtype=torch.long))
        self.register_buffer("op_columns", torch.as_tensor(op_columns, dtype=torch.long))
        self.register_buffer(
            "kernel_mask", torch.as_tensor(np.where(np.isneginf(log_p_base), -np.inf, 0.0))
        )
        self.register_buffer(
            "op_mask", torch.as_tensor(np.where(np.isneginf(log_p_op), -np.inf, 0.0))
        )

    def encode(self, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch x (L+|B|)`` -> ``mu, logvar`` each ``batch x d``."""
        h = self.encoder(r)
        mu, logvar = h.chunk(2, dim=-1)
        return mu, logvar.clamp(-12.0, 8.0)

    def decode(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch x d`` -> r_g logits ``batch x L`` and r_d~ mean ``batch x |B|``."""
        out = self.decoder(z)
        return out[..., : self.rg_length], out[..., self.rg_length :]

    def slot_log_probs(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-slot log-softmax with masked tokens: ``batch x (N+1) x |B|``, ``batch x N x |O|``."""
        k = logits[:, self.kernel_columns] + self.kernel_mask.to(logits.dtype)
        o = logits[:, self.op_columns] + self.op_mask.to(logits.dtype)
        return torch.log_softmax(k, dim=-1), torch.log_softmax(o, dim=-1)

    def losses(
        self,
        r: torch.Tensor,
        k_target: torch.Tensor,
        o_target: torch.Tensor,
        sample: bool = True,
    ) -> dict[str, torch.Tensor]:
        """Per-item loss terms (each ``batch``): ``nll_g``, ``nll_d``, ``kl``.

        Targets: ``k_target`` ``batch x (N+1)``, ``o_target`` ``batch x N`` token indices,
        -1 for inactive slots (after a stop).
        """
        mu, logvar = self.encode(r)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar) if sample else mu
        logits, rd_mean = self.decode(z)
        lk, lo = self.slot_log_probs(logits)
        nll_g = -(_gather(lk, k_target) + _gather(lo, o_target))
        rd = r[:, self.rg_length :]
        lv = self.rd_logvar.clamp(min=_MIN_RD_LOGVAR)
        nll_d = 0.5 * (((rd - rd_mean) ** 2) * torch.exp(-lv) + lv + math.log(2 * math.pi)).sum(-1)
        kl = 0.5 * (mu**2 + logvar.exp() - 1.0 - logvar).sum(-1)
        return {"nll_g": nll_g, "nll_d": nll_d, "kl": kl}


def _gather(logp: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Sum of ``logp[b, j, target[b, j]]`` over active slots (target >= 0): ``batch``."""
    active = target >= 0
    picked = logp.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return torch.where(active, picked, torch.zeros_like(picked)).sum(-1)


class TrainedVAE:
    """A trained KG-VAE with everything needed to use it.

    Attributes:
        model: the :class:`KGVAE` (eval mode, float32).
        grammar, encoding: the grammar and its r_g layout.
        rd_x: ``(n,)`` inputs r_d is computed on.  rd_mean, rd_std: ``(|B|,)`` r_d standardisation.
        config: the :class:`VAEConfig`.  train_tokens: ``(n_train, n_slots)`` int8 token
        indices of the training sequences (-1 = inactive).  metadata: the JSON metadata.
    """

    def __init__(
        self,
        model: KGVAE,
        grammar: Grammar,
        rd_x: np.ndarray,
        rd_mean: np.ndarray,
        rd_std: np.ndarray,
        config: VAEConfig,
        train_tokens: np.ndarray,
        metadata: dict | None = None,
    ) -> None:
        self.model = model.eval()
        self.grammar = grammar
        self.encoding = GrammarEncoding(grammar)
        self.rd_x = np.asarray(rd_x, dtype=np.float64)
        self.rd_mean = np.asarray(rd_mean, dtype=np.float64)
        self.rd_std = np.asarray(rd_std, dtype=np.float64)
        self.config = config
        self.train_tokens = np.asarray(train_tokens, dtype=np.int8)
        self.metadata = dict(metadata or {})
        self._bounds_cache: dict[tuple[float, float], torch.Tensor] = {}

    @property
    def latent_dim(self) -> int:
        return self.config.latent_dim

    # --- representations -------------------------------------------------------------
    def represent(self, seqs: list[Sequence]) -> torch.Tensor:
        """Model input r = [r_g, standardised r_d]: ``n x (L+|B|)`` float32."""
        rg = self.encoding.encode_many(seqs)
        rd = distance_features(seqs, self.rd_x, self.grammar.base_kernels)
        rd = (rd - self.rd_mean) / self.rd_std
        return torch.from_numpy(np.concatenate([rg, rd], axis=1)).float()

    @torch.no_grad()
    def encode_sequences(self, seqs: Iterable[Sequence]) -> torch.Tensor:
        """Posterior means of q(z | r): ``n x d`` float64."""
        seqs = [tuple(s) for s in seqs]
        if not seqs:
            return torch.zeros(0, self.latent_dim, dtype=torch.float64)
        mu, _ = self.model.encode(self.represent(seqs))
        return mu.double()

    @torch.no_grad()
    def decode_sequences(
        self, z: torch.Tensor | np.ndarray, method: str = "mode"
    ) -> list[Sequence]:
        """Mode of p(r_g | z) under the stop chain for each row of ``z`` (``b x d``)."""
        z = torch.as_tensor(z, dtype=torch.float32)
        if z.ndim == 1:
            z = z[None, :]
        if z.shape[-1] != self.latent_dim:
            raise ValueError(f"z must be b x {self.latent_dim}, got {tuple(z.shape)}")
        logits, _ = self.model.decode(z)
        return self.encoding.decode_scores(logits, method=method)

    def decode(self, z: torch.Tensor | np.ndarray) -> list[Expression]:
        """Most likely expression for each row of ``z`` (``b x d``); always valid."""
        return [sequence_expression(s) for s in self.decode_sequences(z)]

    # --- latent box and training data --------------------------------------------------
    def latent_bounds(self, quantile: float = 0.001, expand: float = 0.1) -> torch.Tensor:
        """``2 x d`` box for search: per dimension the [q, 1-q] quantiles of the encoded
        training sequences (posterior means), widened by ``expand`` x range on each side."""
        key = (float(quantile), float(expand))
        if key not in self._bounds_cache:
            z = self.encode_sequences(self.training_sequences())
            lo = torch.quantile(z, quantile, dim=0)
            hi = torch.quantile(z, 1 - quantile, dim=0)
            width = (hi - lo).clamp(min=1e-6)
            self._bounds_cache[key] = torch.stack([lo - expand * width, hi + expand * width])
        return self._bounds_cache[key].clone()

    def remember_latent_bounds(
        self, bounds: torch.Tensor, quantile: float = 0.001, expand: float = 0.1
    ) -> None:
        """Use ``bounds`` (``2 x d``, as computed when the checkpoint was saved) as
        :meth:`latent_bounds` for ``quantile`` and ``expand``, instead of encoding the
        training set again."""
        self._bounds_cache[(float(quantile), float(expand))] = bounds

    def training_sequences(self) -> list[Sequence]:
        """All training sequences (decoded from the stored token indices)."""
        return tokens_to_sequences(self.train_tokens, self.grammar)

    def sample_training_sequences(self, n: int, rng: np.random.Generator) -> list[Sequence]:
        """``n`` training sequences drawn uniformly with replacement."""
        rows = rng.integers(0, len(self.train_tokens), size=n)
        return tokens_to_sequences(self.train_tokens[rows], self.grammar)


def tokens_to_sequences(tokens: np.ndarray, grammar: Grammar) -> list[Sequence]:
    """Rows of slot token indices (-1 = inactive) -> token sequences."""
    out = []
    for row in np.asarray(tokens):
        seq = []
        for j, t in enumerate(row):
            if t < 0:
                break
            seq.append(grammar.base_kernels[t] if j % 2 == 0 else grammar.operations[t])
        out.append(tuple(seq))
    return out


# --- training -----------------------------------------------------------------------
def _sample_training_data(
    grammar: Grammar, n_samples: int, rng: np.random.Generator, dedupe: bool
) -> list[Sequence]:
    seqs = grammar.sample_sequences(n_samples, rng)
    if dedupe:
        seen: dict = {}
        for s in seqs:
            seen.setdefault(sequence_expression(s), s)
        seqs = list(seen.values())
    return seqs


def _targets(enc: GrammarEncoding, seqs: list[Sequence]) -> tuple[torch.Tensor, torch.Tensor]:
    idx, _ = enc.token_indices(seqs)
    idx = torch.from_numpy(idx)
    return idx[:, 0::2].contiguous(), idx[:, 1::2].contiguous()


def train_kgvae(
    grammar: Grammar,
    config: VAEConfig | None = None,
    x: np.ndarray | None = None,
    n_samples: int = 50_000,
    progress: bool = True,
    evaluate: bool = True,
) -> TrainedVAE:
    """Sample ``n_samples`` grammar sequences and train a KG-VAE on them.

    Args:
        grammar: the kernel grammar.
        config: architecture and training settings (defaults: :class:`VAEConfig`).
        x: inputs for r_d (None = :func:`prolas.encoding.canonical_grid` (128 points on
            [0, 1]), which serves any 1-D series).
        n_samples: number of grammar draws (before de-duplication).
        progress: show a progress bar over epochs (:func:`prolas.progress.progress_bar`).
        evaluate: compute the quality figures (:func:`evaluate_quality`) into the metadata.

    Returns:
        A :class:`TrainedVAE` (metadata holds the training figures).
    """
    config = config or VAEConfig()
    t0, c0 = time.perf_counter(), time.process_time()
    rng = np.random.default_rng(config.seed)
    torch.manual_seed(config.seed)
    enc = GrammarEncoding(grammar)
    rd_x = rd_inputs(canonical_grid() if x is None else x)
    seqs = _sample_training_data(grammar, n_samples, rng, config.dedupe)
    if len(seqs) < 2:
        raise GrammarError(f"grammar {grammar.name}: too few distinct training sequences")
    order = rng.permutation(len(seqs))
    seqs = [seqs[i] for i in order]
    n_val = max(1, int(round(config.val_fraction * len(seqs)))) if len(seqs) >= 10 else 0
    rg = enc.encode_many(seqs)
    rd = distance_features(seqs, rd_x, grammar.base_kernels)
    train_rd = rd[n_val:]
    rd_mean = train_rd.mean(axis=0)
    rd_std = np.maximum(train_rd.std(axis=0), 1e-6)
    r = torch.from_numpy(np.concatenate([rg, (rd - rd_mean) / rd_std], axis=1)).float()
    kt, ot = _targets(enc, seqs)
    model = KGVAE(
        enc.length,
        len(grammar.base_kernels),
        config.latent_dim,
        tuple(config.hidden),
        enc.kernel_columns,
        enc.op_columns,
        enc.log_p_base,
        enc.log_p_op,
        learn_rd_variance=config.learn_rd_variance,
    )
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=config.lr)
    va = slice(0, n_val)
    n_train = len(seqs) - n_val
    gen = torch.Generator().manual_seed(config.seed)
    best_state, best_val, bad_epochs = None, math.inf, 0
    history: list[dict] = []
    bar = progress_bar(config.epochs, unit="epoch", desc="KG-VAE", shown=progress, leave=False)
    for epoch in range(config.epochs):
        w = config.beta * min(1.0, (epoch + 1) / max(1, config.kl_warmup_epochs))
        model.train()
        perm = torch.randperm(n_train, generator=gen) + n_val
        total = 0.0
        for start in range(0, n_train, config.batch_size):
            b = perm[start : start + config.batch_size]
            parts = model.losses(r[b], kt[b], ot[b])
            loss = (parts["nll_g"] + config.rd_weight * parts["nll_d"] + w * parts["kl"]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(b)
        train_loss = total / n_train
        model.eval()
        with torch.no_grad():
            if n_val:
                parts = model.losses(r[va], kt[va], ot[va], sample=False)
                val = float(
                    (
                        parts["nll_g"]
                        + config.rd_weight * parts["nll_d"]
                        + config.beta * parts["kl"]
                    ).mean()
                )
            else:
                val = train_loss
        history.append({"epoch": epoch + 1, "train_loss": train_loss, "val_loss": val})
        bar.set_postfix_str(f"train {train_loss:.3f}, val {val:.3f}")
        bar.update(1)
        if val < best_val - 1e-4:
            best_val, best_state, bad_epochs = val, copy.deepcopy(model.state_dict()), 0
        else:
            bad_epochs += 1
            # never stop while the KL weight is still rising
            if bad_epochs >= config.patience and epoch + 1 > config.kl_warmup_epochs:
                break
    bar.close()
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    tokens, _ = enc.token_indices(seqs[n_val:])
    trained = TrainedVAE(model, grammar, rd_x, rd_mean, rd_std, config, tokens.astype(np.int8))
    seconds = time.perf_counter() - t0
    trained.metadata = {
        "training": {
            "config": config.to_dict(),
            "n_samples": n_samples,
            "n_sequences": len(seqs),
            "n_train": n_train,
            "n_val": n_val,
            "n_distinct_expressions": len({sequence_expression(s) for s in seqs}),
            "epochs_run": len(history),
            "best_val_loss": best_val,
            "final_train_loss": history[-1]["train_loss"] if history else None,
            "seconds": seconds,
            "cpu_seconds": time.process_time() - c0,
            "threads": torch.get_num_threads(),
        },
        "history": history,
    }
    if evaluate:
        trained.metadata["quality"] = evaluate_quality(trained, seed=config.seed + 1)
    return trained


@torch.no_grad()
def evaluate_quality(
    trained: TrainedVAE,
    seed: int = 1,
    n_heldout: int = 2000,
    n_random: int = 1000,
    n_sobol: int = 10_000,
) -> dict:
    """Quality figures of a trained KG-VAE.

    * ``heldout_reconstruction``: share of ``n_heldout`` fresh grammar draws whose decoded
      posterior mean has the same canonical expression (exact match);
      ``heldout_unseen_reconstruction``: the same on the draws not in the training set.
    * ``validity``: share of decoded z ~ N(0, 4 I) (half of them scaled to ||z|| = 50)
      that are valid grammar sequences.
    * ``sobol_distinct``: distinct canonical expressions decoded from a scrambled Sobol grid
      of ``n_sobol`` points over :meth:`TrainedVAE.latent_bounds`.
    """
    rng = np.random.default_rng(seed + 10_000)
    held = trained.grammar.sample_sequences(n_heldout, rng)
    z = trained.encode_sequences(held)
    dec = trained.decode_sequences(z)
    ok = np.array(
        [sequence_expression(a) == sequence_expression(b) for a, b in zip(held, dec, strict=True)]
    )
    train_set = set(trained.training_sequences())
    unseen = np.array([s not in train_set for s in held])
    g = torch.Generator().manual_seed(seed)
    zr = 2.0 * torch.randn(n_random, trained.latent_dim, generator=g, dtype=torch.float64)
    zr[: n_random // 2] *= 50.0 / zr[: n_random // 2].norm(dim=1, keepdim=True)
    valid = 0
    for s in trained.decode_sequences(zr):
        try:
            trained.grammar.validate_sequence(s)
            valid += 1
        except GrammarError:
            pass
    bounds = trained.latent_bounds()
    sobol = torch.quasirandom.SobolEngine(trained.latent_dim, scramble=True, seed=seed)
    zs = bounds[0] + (bounds[1] - bounds[0]) * sobol.draw(n_sobol, dtype=torch.float64)
    distinct = len({sequence_expression(s) for s in trained.decode_sequences(zs)})
    return {
        "heldout_reconstruction": float(ok.mean()),
        "heldout_unseen_reconstruction": float(ok[unseen].mean()) if unseen.any() else None,
        "n_heldout": n_heldout,
        "n_heldout_unseen": int(unseen.sum()),
        "validity": valid / n_random,
        "n_random": n_random,
        "sobol_distinct": distinct,
        "n_sobol": n_sobol,
    }
