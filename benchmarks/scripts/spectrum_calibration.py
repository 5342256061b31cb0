"""How often the whole-series scan (prolas.spectrum.scan) calls something a period.

False alarms: series without any period (white noise, smooth random components of several
lengthscales plus noise, random walks, a level step), 20 seeds each; detection: a sinusoid
of a given share of the variance and number of cycles planted in noise and in a smooth
component. Prints markdown tables:

    python benchmarks/scripts/spectrum_calibration.py
    python benchmarks/scripts/spectrum_calibration.py --min-cycles 3 --false-alarms-only

``--min-cycles`` replaces :data:`prolas.spectrum.MIN_CYCLES` for the run (how many
cycles a period must show), to measure what that rule buys.
"""

from __future__ import annotations

import argparse

import numpy as np

import prolas.spectrum
from prolas.bench.long_series import _smooth
from prolas.spectrum import scan

SEEDS = 20


def _null(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "white noise":
        return rng.standard_normal(n)
    if kind.startswith("smooth"):
        ls = float(kind.split()[1])
        return _smooth(n, ls, rng) + 0.5 * rng.standard_normal(n)
    if kind == "random walk":
        return np.cumsum(rng.standard_normal(n))
    if kind == "level step":
        return np.where(np.arange(n) < 0.7 * n, 0.0, 3.0) + rng.standard_normal(n)
    raise ValueError(kind)


def false_alarms() -> list[str]:
    rows = ["| series (no period) | N | series with a 'period' |", "|---|---|---|"]
    kinds = ["white noise", "smooth 30", "smooth 200", "smooth 480", "smooth 1440"]
    kinds += ["random walk", "level step"]
    for kind in kinds:
        for n in (3650, 20_000):
            hits = 0
            for seed in range(SEEDS):
                rng = np.random.default_rng(seed)
                hits += bool(scan(np.arange(n, dtype=float), _null(kind, n, rng)).peaks)
            rows.append(f"| {kind} (lengthscale in steps) | {n} | {hits} of {SEEDS} |")
    return rows


def detection() -> list[str]:
    rows = [
        "| planted sinusoid: share of the variance | cycles in the data | background "
        "| found within 1 % |",
        "|---|---|---|---|",
    ]
    n = 20_000
    for background in ("white noise", "smooth 480"):
        for share in (0.01, 0.02, 0.05):
            for cycles in (6, 20, 200, 2000):
                hits = 0
                for seed in range(SEEDS):
                    rng = np.random.default_rng(1000 + seed)
                    base = _null(background, n, rng)
                    amp = np.sqrt(2 * share / (1 - share) * base.var())
                    period = n / cycles
                    phase = rng.uniform(0, 2 * np.pi)
                    x = np.arange(n, dtype=float)
                    y = base + amp * np.sin(2 * np.pi * x / period + phase)
                    found = [p.period for p in scan(x, y).fundamentals]
                    hits += any(abs(p / period - 1) <= 0.01 for p in found)
                rows.append(f"| {share:.0%} | {cycles} | {background} | {hits} of {SEEDS} |")
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min-cycles", type=float, help="override prolas.spectrum.MIN_CYCLES")
    p.add_argument("--false-alarms-only", action="store_true")
    args = p.parse_args()
    if args.min_cycles is not None:
        prolas.spectrum.MIN_CYCLES = args.min_cycles  # scan reads it at each call
    sp = prolas.spectrum
    print(f"MIN_CYCLES = {sp.MIN_CYCLES:g}, FALSE_ALARM = {sp.FALSE_ALARM:g}")
    print()
    print("\n".join(false_alarms()))
    if not args.false_alarms_only:
        print()
        print("\n".join(detection()))


if __name__ == "__main__":
    main()
