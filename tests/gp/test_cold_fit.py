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
    ("mauna", "C + PER*PER", "PER*PER"),
    ("sulphuric", "C + LIN + PER", "LIN + PER"),
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
