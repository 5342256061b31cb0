"""prolas: Gaussian-process kernel structure discovery.

Public API::

    from prolas import load_csv, parse, SE, LIN, PER, RQ, fit_gp, Grammar, search
    ds = load_csv("data/airline.csv")
    fit = fit_gp(parse("LIN*PER*SE + LIN*SE"), ds)
    result, best = search(ds, method="cks", budget=20)
    fc = forecast(best, ds, horizon=12)  # Forecast: x, mean, lower, upper (95 % band)
    run = fit_many("long.csv", "series", "out/many", split="split", season_length=12)
"""

from __future__ import annotations

# The subpackage prolas.search is imported before the function `search` below is
# defined: importing a package's submodule for the first time binds it as an attribute
# of its parent, so a later first import of prolas.search would replace the function.
import prolas.search  # noqa: F401  (before `def search`, see above)
from prolas._version import __version__
from prolas.data import Dataset, extrapolation_split, load_csv
from prolas.errors import ProlasError
from prolas.expr import LIN, PER, RQ, SE, Expression, parse
from prolas.gp import FitConfig, FitResult, decompose, fit_gp, predict
from prolas.grammar import Grammar
from prolas.many import fit_many
from prolas.report.forecast import Forecast, forecast


def search(dataset: Dataset, method: str = "prolas", **settings):
    """Run a structure search; returns ``(SearchResult, best FitResult)``.

    ``settings`` are the fields of :class:`prolas.search.config.SearchConfig`
    (budget, restarts, seed, depth, grammar, checkpoint, batch, ...).
    """
    from prolas.pipeline import run_search
    from prolas.search.config import SearchConfig

    return run_search(dataset, SearchConfig(method=method, **settings))


__all__ = [
    "__version__",
    "Dataset",
    "Expression",
    "FitConfig",
    "FitResult",
    "Forecast",
    "Grammar",
    "LIN",
    "PER",
    "ProlasError",
    "RQ",
    "SE",
    "decompose",
    "extrapolation_split",
    "fit_gp",
    "fit_many",
    "forecast",
    "load_csv",
    "parse",
    "predict",
    "search",
]
