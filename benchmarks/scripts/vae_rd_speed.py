"""Speed of the r_d features: 10 000 grammar expressions on 144 inputs (goal < 30 s).

Also times r_d on 1 000 inputs (subsampled to 256) and a naive per-expression loop for
comparison (first 500 expressions, extrapolated).

    .venv/bin/python benchmarks/scripts/vae_rd_speed.py
"""

from __future__ import annotations

import time

import numpy as np
import torch

from prolas.data import load_csv
from prolas.encoding import (
    base_kernel_matrices,
    distance_features,
    rd_inputs,
)
from prolas.grammar import Grammar, sequence_expression


def naive(exprs, x, names):
    bases = base_kernel_matrices(rd_inputs(x), names)
    out = []
    for e in exprs:
        k = sum(np.prod([bases[f] for f in t], axis=0) for t in e.terms)
        k = k / np.mean(np.diag(k))
        out.append([np.linalg.norm(k - bases[b]) / len(k) for b in names])
    return np.array(out)


def main() -> None:
    torch.set_num_threads(1)
    g = Grammar.default()
    seqs = g.sample_sequences(10_000, np.random.default_rng(0))
    exprs = [sequence_expression(s) for s in seqs]
    x = load_csv("data/airline.csv").x
    print(f"{len(set(exprs))} distinct expressions among {len(exprs)}")
    for label, xx in (
        ("airline, 144 inputs", x),
        ("1000 inputs (-> 256)", np.linspace(0, 1, 1000)),
    ):
        t0 = time.perf_counter()
        rd = distance_features(exprs, xx, g.base_kernels)
        dt = time.perf_counter() - t0
        print(f"r_d of 10 000 expressions, {label}: {dt:.2f} s")
    t0 = time.perf_counter()
    ref = naive(exprs[:500], x, g.base_kernels)
    dt = time.perf_counter() - t0
    err = np.abs(ref - distance_features(exprs[:500], x, g.base_kernels)).max()
    print(
        f"naive loop: {dt:.2f} s for 500 (x20 = {20 * dt:.1f} s for 10 000); max |diff| {err:.1e}"
    )
    assert rd.shape == (10_000, 4)


if __name__ == "__main__":
    main()
