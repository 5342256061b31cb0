"""KG-VAE checkpoints: save, load, list and identify them.

A checkpoint is a ``*.pt`` file (a dict of tensors, loaded with ``weights_only=True``)
and a ``*.json`` metadata file (docs/search.md, KG-VAE): the prolas version, the grammar
(name, content hash, content), the encoding layout, the r_d inputs, hyperparameters and
standardisation, the architecture, the training and quality figures, the latent bounds
and the SHA-256 of the ``.pt`` (:func:`save_checkpoint`). Loading one whose grammar or
encoding does not match this prolas fails with a :class:`~prolas.errors.CheckpointError`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from prolas.encoding import RD_CHANGE_HYPERPARAMETERS, RD_HYPERPARAMETERS, GrammarEncoding
from prolas.errors import CheckpointError, GrammarError
from prolas.grammar import OPERATIONS, Grammar
from prolas.vae_model import KGVAE, TrainedVAE, VAEConfig

__all__ = [
    "CHECKPOINTS_DIR",
    "FORMAT",
    "FORMAT_VERSION",
    "checkpoint_digest",
    "list_checkpoints",
    "load_checkpoint",
    "save_checkpoint",
]

#: Directory of the shipped checkpoints.
CHECKPOINTS_DIR = Path(__file__).resolve().parent / "checkpoints"
FORMAT = "prolas-kgvae"
FORMAT_VERSION = 1


def _prolas_version() -> str:
    try:
        from importlib.metadata import version

        return version("prolas")
    except Exception:  # not installed (running from a source tree)
        return "unknown"


def _stem(path: str | Path) -> Path:
    p = Path(path)
    return p.with_suffix("") if p.suffix in (".pt", ".json") else p


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def save_checkpoint(trained: TrainedVAE, path: str | Path) -> tuple[Path, Path]:
    """Write ``path.pt`` (tensors) and ``path.json`` (metadata); returns both paths.

    The ``.pt`` holds ``{"model": state_dict, "train_tokens": int8 n x slots}``; the JSON
    holds the prolas version, the grammar (name, content hash, content), the encoding
    layout, r_d inputs/hyperparameters/standardisation, the architecture, the training
    figures, the quality figures, the latent bounds and the SHA-256 of the ``.pt``.
    """
    stem = _stem(path)
    stem.parent.mkdir(parents=True, exist_ok=True)
    pt, js = stem.with_name(stem.name + ".pt"), stem.with_name(stem.name + ".json")
    state = {
        "model": {k: v.detach().clone() for k, v in trained.model.state_dict().items()},
        "train_tokens": torch.from_numpy(trained.train_tokens.astype(np.int8)),
    }
    torch.save(state, pt)
    g = trained.grammar
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "prolas_version": _prolas_version(),
        "name": stem.name,
        "grammar": {
            "name": g.name,
            "hash": g.content_hash,
            "content": g.to_dict(),
            "base_kernels": list(g.base_kernels),
            "operations": list(g.operations),
            "max_operations": g.max_operations,
        },
        "encoding": {
            "rg": trained.encoding.layout(),
            "rd": {
                "base_kernels": list(g.base_kernels),
                "hyperparameters": {k: RD_HYPERPARAMETERS[k] for k in g.base_kernels},
                **_change_rd_meta(g),
                "inputs": [float(v) for v in trained.rd_x],
                "mean": [float(v) for v in trained.rd_mean],
                "std": [float(v) for v in trained.rd_std],
            },
            "input_length": trained.encoding.length + len(g.base_kernels),
        },
        "model": {
            "latent_dim": trained.latent_dim,
            "hidden": list(trained.config.hidden),
            "learn_rd_variance": trained.config.learn_rd_variance,
        },
        "training_set_size": int(len(trained.train_tokens)),
        "latent_bounds": trained.latent_bounds().tolist(),
        **{k: v for k, v in trained.metadata.items() if k in ("training", "quality")},
        "weights_sha256": _sha256(pt),
    }
    js.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    trained.metadata.update({k: meta[k] for k in ("name", "weights_sha256", "grammar")})
    return pt, js


def _change_rd_meta(grammar: Grammar) -> dict:
    """The change operators' r_d defaults, recorded only for a grammar that uses them (so
    the metadata of a grammar without change operations is what it was before)."""
    ops = [o for o in grammar.operations if o in RD_CHANGE_HYPERPARAMETERS]
    return {"change_hyperparameters": {o: RD_CHANGE_HYPERPARAMETERS[o] for o in ops}} if ops else {}


def checkpoint_digest(name_or_path: str | Path) -> str:
    """SHA-256 of a checkpoint's weights (from its metadata, else of the ``.pt`` file):
    what a resumed search must match, since the same name may hold other weights."""
    stem = _resolve(name_or_path)
    try:
        digest = json.loads(stem.with_name(stem.name + ".json").read_text())["weights_sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        digest = None
    return str(digest) if digest else _sha256(stem.with_name(stem.name + ".pt"))


def _resolve(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.parent == Path(".") and p.suffix == "" and (CHECKPOINTS_DIR / f"{p.name}.json").is_file():
        return CHECKPOINTS_DIR / p.name
    stem = _stem(p)
    if not stem.with_name(stem.name + ".json").is_file():
        shipped = ", ".join(c["name"] for c in list_checkpoints()) or "none"
        raise CheckpointError(f"checkpoint not found: {stem}.json (shipped checkpoints: {shipped})")
    return stem


def _read_metadata(stem: Path) -> dict:
    js = stem.with_name(stem.name + ".json")
    try:
        meta = json.loads(js.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"checkpoint {js}: unreadable metadata ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {js}: not a prolas KG-VAE checkpoint")
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {js}: format version {meta.get('format_version')!r}, "
            f"this prolas reads {FORMAT_VERSION}"
        )
    return meta


def load_checkpoint(
    name_or_path: str | Path, grammar: Grammar | str | Path | None = None
) -> TrainedVAE:
    """Load a checkpoint: a shipped name (``"default"``) or a path (with or without suffix).

    Args:
        name_or_path: checkpoint name or path to ``X``, ``X.pt`` or ``X.json``.
        grammar: if given (a Grammar or a grammar file), the checkpoint must have been
            trained for it (same content hash and encoding layout).

    Raises:
        CheckpointError: missing, corrupt or truncated files; a grammar or encoding that
            does not match.
    """
    stem = _resolve(name_or_path)
    js = stem.with_name(stem.name + ".json")
    pt = stem.with_name(stem.name + ".pt")
    meta = _read_metadata(stem)
    try:
        gmeta = meta["grammar"]
        content = gmeta["content"]
        operations = tuple(gmeta.get("operations", OPERATIONS))
        stored = Grammar(
            name=content["name"],
            base_kernels=tuple(content["base_kernels"]),
            p_base=tuple(float(v) for v in content["base_kernels"].values()),
            p_op=tuple(float(content["operations"][o]) for o in operations),
            max_operations=int(content["max_operations"]),
            source=str(js),
            operations=operations,
        )
        rd_meta = meta["encoding"]["rd"]
        rg_layout = meta["encoding"]["rg"]
        latent_dim = int(meta["model"]["latent_dim"])
        hidden = tuple(int(h) for h in meta["model"]["hidden"])
        cfg_dict = dict(meta.get("training", {}).get("config", {}))
    except (KeyError, TypeError, ValueError, AttributeError, GrammarError) as exc:
        raise CheckpointError(f"checkpoint {js}: incomplete metadata ({exc!r})") from None
    if stored.content_hash != gmeta.get("hash"):
        raise CheckpointError(f"checkpoint {js}: grammar content does not match its hash")
    if grammar is not None:
        if not isinstance(grammar, Grammar):
            grammar = Grammar.from_file(grammar)
        if grammar.content_hash != stored.content_hash:
            shipped = [
                c["name"]
                for c in list_checkpoints()
                if c.get("grammar_hash") == grammar.content_hash
            ]
            hint = f"; the shipped checkpoint {shipped[0]!r} was trained for it" if shipped else ""
            raise CheckpointError(
                f"checkpoint {stem.name} was trained for grammar {stored.name!r} "
                f"(hash {stored.content_hash}), not {grammar.name!r} "
                f"(hash {grammar.content_hash}){hint}"
            )
    enc = GrammarEncoding(stored)
    if rg_layout != enc.layout():
        raise CheckpointError(f"checkpoint {js}: r_g encoding layout does not match this prolas")
    if (
        rd_meta.get("base_kernels") != list(stored.base_kernels)
        or rd_meta.get("hyperparameters")
        != {k: RD_HYPERPARAMETERS.get(k) for k in stored.base_kernels}
        or rd_meta.get("change_hyperparameters")
        != _change_rd_meta(stored).get("change_hyperparameters")
    ):
        raise CheckpointError(f"checkpoint {js}: r_d encoding does not match this prolas")
    if not pt.is_file():
        raise CheckpointError(f"checkpoint weights missing: {pt}")
    if meta.get("weights_sha256") and _sha256(pt) != meta["weights_sha256"]:
        raise CheckpointError(f"checkpoint {pt}: corrupt or truncated (SHA-256 mismatch)")
    try:
        state = torch.load(pt, map_location="cpu", weights_only=True)
        model = KGVAE(
            enc.length,
            len(stored.base_kernels),
            latent_dim,
            hidden,
            enc.kernel_columns,
            enc.op_columns,
            enc.log_p_base,
            enc.log_p_op,
            learn_rd_variance=bool(meta["model"].get("learn_rd_variance", True)),
        )
        model.load_state_dict(state["model"], strict=True)
        tokens = state["train_tokens"].numpy().astype(np.int8)
    except Exception as exc:  # torch raises many types for bad zip/pickle/shape data
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CheckpointError(f"checkpoint {pt}: cannot load weights ({msg})") from None
    known = {f.name for f in dataclasses.fields(VAEConfig)}
    cfg_dict = {k: v for k, v in cfg_dict.items() if k in known}
    cfg_dict.update(latent_dim=latent_dim, hidden=hidden)
    config = VAEConfig(**cfg_dict)
    trained = TrainedVAE(
        model,
        stored,
        np.asarray(rd_meta["inputs"], dtype=np.float64),
        np.asarray(rd_meta["mean"], dtype=np.float64),
        np.asarray(rd_meta["std"], dtype=np.float64),
        config,
        tokens,
        metadata=meta,
    )
    bounds = meta.get("latent_bounds")
    if isinstance(bounds, list) and np.shape(bounds) == (2, latent_dim):
        # the default box, as computed at save time (saves encoding the training set)
        trained.remember_latent_bounds(torch.tensor(bounds, dtype=torch.float64), 0.001, 0.1)
    return trained


def list_checkpoints(directory: str | Path | None = None) -> list[dict]:
    """Summaries of the checkpoints in ``directory`` (default: the shipped ones)."""
    directory = CHECKPOINTS_DIR if directory is None else Path(directory)
    out = []
    for js in sorted(directory.glob("*.json")):
        stem = js.with_suffix("")
        try:
            meta = _read_metadata(stem)
            q = meta.get("quality", {})
            t = meta.get("training", {})
            out.append(
                {
                    "name": stem.name,
                    "path": str(stem),
                    "grammar": meta["grammar"]["name"],
                    "grammar_hash": meta["grammar"]["hash"],
                    "latent_dim": meta["model"]["latent_dim"],
                    "hidden": meta["model"]["hidden"],
                    "rd_inputs": len(meta["encoding"]["rd"]["inputs"]),
                    "training_set_size": meta.get("training_set_size"),
                    "heldout_reconstruction": q.get("heldout_reconstruction"),
                    "validity": q.get("validity"),
                    "sobol_distinct": q.get("sobol_distinct"),
                    "training_seconds": t.get("seconds"),
                    "training_cpu_seconds": t.get("cpu_seconds"),
                    "prolas_version": meta.get("prolas_version"),
                }
            )
        except (CheckpointError, KeyError, TypeError) as exc:
            out.append({"name": stem.name, "path": str(stem), "error": str(exc)})
    return out
