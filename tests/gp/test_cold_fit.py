"""A cold fit finds its optimum on its own: the cases where the first fitter missed by
hundreds of nats (a model below a sub-model it contains, and different optima at
different fit seeds). Each pair is fitted cold, as a user's ``fit_gp`` call is, on the
benchmark grid's points (the training split, thinned to 400 points, lengthscale floor 1).
"""

from __future__ import annotations

import pytest
from conftest import DATA

from prolas.bench.cells import load_series, thin
from prolas.gp import FitConfig, fit_gp

#: (series, larger expression, the expression it contains by dropping ``C``)
CASES = [
    ("wages", "C + PER", "PER"),
    # Not reached yet (issue 40 open; benchmarks/results/cold_fit/). Two basins 3.7 nats
    # apart: PER*PER (yearly period 1.0042, the slow factor's 47.8 years) at 798.22 at
    # every seed; C + PER*PER ends in the other (0.9999, 63.3 years) at 794.55 at seed 1
    # (at seed 0 too when this was written; 798.03 there on 2026-11-30, AVX-512 kernels).
    # A hop moves one parameter at a time; leaving this basin takes three at once.
    pytest.param(
        "mauna",
        "C + PER*PER",
        "PER*PER",
        marks=pytest.mark.xfail(reason="C + PER*PER ends 3.7 nats below PER*PER at seed 1"),
    ),
    # The same for a PER factor used as a smooth kernel (period about the span): C + LIN +
    # PER ends at period 27.8 years at seed 0 (-322.25), 33.9 at seeds 1, 2 (-304.05) with
    # OpenBLAS's AVX2 (Haswell) kernels; with its AVX-512 (SkylakeX) kernels it agrees and
    # the case passes (benchmarks/results/cold_fit/, "The same fit on another machine").
    pytest.param(
        "sulphuric",
        "C + LIN + PER",
        "LIN + PER",
        marks=pytest.mark.xfail(
            reason="C + LIN + PER: 18 nats apart at fit seeds 0 and 1 (Haswell kernels)"
        ),
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("series", "larger", "smaller"), CASES)
def test_cold_fits_agree_over_fit_seeds_and_respect_nesting(
    series: str, larger: str, smaller: str
) -> None:
    ds = thin(load_series(DATA / f"{series}_train.csv"), 400)
    ll = {
        (e, seed): fit_gp(e, ds, FitConfig(seed=seed, lengthscale_floor=1.0)).log_likelihood
        for e in (larger, smaller)
        for seed in (0, 1)
    }
    for e in (larger, smaller):
        assert abs(ll[e, 0] - ll[e, 1]) <= 2.0, (e, ll)
    # the larger model contains the smaller, so its optimum is at least as likely (0.5
    # nats: the optimiser's convergence tolerance, not a miss of a basin)
    for seed in (0, 1):
        assert ll[larger, seed] >= ll[smaller, seed] - 0.5, ll
