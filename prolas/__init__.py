"""prolas: Gaussian-process kernel structure discovery.

Public API::

    import prolas
    ks = prolas.KernelSearch(method="prolas", budget=50, seed=0).fit(df, x="date", y="sales")
    ks.best_, ks.describe(), ks.forecast(horizon=24, level=95)  # frame: bands, components
    ks.plot(horizon=24), ks.plot_components(), ks.plot_convergence()  # matplotlib figures
    ks.save("out/sales", horizon=24)  # what `prolas fit` writes

    from prolas import load_csv, parse, fit_gp, predict, search, forecast, fit_many
    ds = load_csv("data/airline.csv")
    fit = fit_gp(parse("LIN*PER*SE + LIN*SE"), ds)
    result, best = search(ds, method="cks", budget=20)  # best carries ds
    fc = forecast(best, horizon=12)  # Forecast: x, mean, lower, upper (95 % band)
    run = fit_many("long.csv", "series", "out/many", split="split", season_length=12)
"""

from __future__ import annotations

# The subpackage prolas.search is imported before the function `search` below is
# defined: importing a package's submodule for the first time binds it as an attribute
# of its parent, so a later first import of prolas.search would replace the function.
import prolas.search  # noqa: F401  (before `def search`, see above)
from prolas._version import __version__
from prolas.data import Dataset, as_dataset, extrapolation_split, load_csv
from prolas.errors import ProlasError
from prolas.expr import LIN, PER, RQ, SE, Expression, parse
from prolas.gp import FitConfig, FitResult, decompose, fit_gp, predict
from prolas.grammar import Grammar
from prolas.kernel_search import KernelSearch
from prolas.many import fit_many
from prolas.report.forecast import Forecast, forecast


def search(dataset: Dataset, method: str = "prolas", **settings):
    """Run a structure search in this process; returns ``(SearchResult, best FitResult)``,
    the best model carrying ``dataset``. :class:`KernelSearch` does the same and more
    (any table, parallel fits, forecasts, plots, the report).

    ``settings`` are the fields of :class:`prolas.search.config.SearchConfig`
    (budget, restarts, seed, depth, grammar, checkpoint, batch, ...). The caller's torch
    and BLAS thread settings are left as they were.
    """
    from prolas.pipeline import run_search
    from prolas.search.config import SearchConfig
    from prolas.threads import restore_threads

    config = SearchConfig(method=method, **settings)
    with restore_threads():
        return run_search(dataset, config)


__all__ = [
    "__version__",
    "Dataset",
    "Expression",
    "FitConfig",
    "FitResult",
    "Forecast",
    "Grammar",
    "KernelSearch",
    "LIN",
    "PER",
    "ProlasError",
    "RQ",
    "SE",
    "as_dataset",
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
