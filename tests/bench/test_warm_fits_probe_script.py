"""benchmarks/scripts/warm_fits_probe.py on the last fits of a committed airline search."""

from __future__ import annotations

from conftest import load_script

probe = load_script("warm_fits_probe")


def test_probe_refits_the_committed_cold_fits_and_warm_is_never_worse() -> None:
    # the last 5 of the 50 fits of the committed default search (seed 0); the probe
    # itself stops if a cold refit differs from the committed fit cache
    rows = probe.probe("airline", 0, n_init=45)
    assert len(rows) == 5
    assert all(r["gain"] >= -1e-9 for r in rows)
    assert all(r["t_cold"] > 0 and r["t_warm"] > 0 for r in rows)
