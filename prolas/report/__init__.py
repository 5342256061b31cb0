"""The report layer: everything the user gets after a search.

Imports the layers below it (:mod:`prolas.records`, :mod:`prolas.data`,
:mod:`prolas.expr`, :mod:`prolas.gp`, :mod:`prolas.pipeline`) and nothing above
(bench, cli). Its modules, lower ones first:

* :mod:`prolas.report.schema`: result.json: :func:`result_schema` is its JSON Schema,
  :func:`result_to_json` builds the document, :func:`validate_result_json` checks one
  (the schema, then BIC, k and canonical order; docs/conventions.md),
  :func:`log_likelihood_kind` names the best model's likelihood (exact or a bound).
* :mod:`prolas.report.metrics`: held-out RMSE and mean log predictive density
  (:func:`test_metrics`), and the predictive mean and sd in y's original units.
* :mod:`prolas.report.words`: :func:`describe_fit`, the best model in plain sentences
  (change operators, then each term with its share of the fitted mean's variance, then
  the noise). The numbers behind the words are GP maths in :mod:`prolas.gp.anatomy`.
* :mod:`prolas.report.figure`: every figure is a matplotlib ``Figure`` made without
  pyplot (no backend is selected; a notebook shows it once).
* :mod:`prolas.report.plots`: fit.png, components.png and convergence.png
  (:func:`plot_fit`, :func:`plot_components`, :func:`plot_convergence`), the figures
  behind them (:func:`fit_figure`, :func:`components_figure`,
  :func:`convergence_figure`) and :func:`mark_changes`.
* :mod:`prolas.report.periods`: the whole series' significant periods against the best
  model (result.json's ``periods`` block, :func:`periods_block`) and the words on them
  and on what the search of a long series saw.
* :mod:`prolas.report.markdown`: report.md and :func:`summary_table`, the CLI's table.
* :mod:`prolas.report.write`: :func:`write_report` writes result.json, report.md and
  the plots in one directory.
* :mod:`prolas.report.forecast`: forecasts beyond the data from the best model or a
  mixture of the top models (weighted by BIC or by their rolling-origin forecasts of the
  data's end), forecast.csv and forecast.png (its names are
  not re-exported here: ``from prolas.report.forecast import forecast``).

The names below are the layer's public API (``from prolas.report import write_report``).
:func:`dumps_strict` (:mod:`prolas.records`) and :func:`flat_factors`, :class:`FitChange`,
:func:`fit_changes`, :data:`FLAT_TOLERANCE` (:mod:`prolas.gp.anatomy`) are re-exported
from where they live, for the callers that knew them here.
"""

from prolas.gp.anatomy import FLAT_TOLERANCE, FitChange, fit_changes, flat_factors
from prolas.records import dumps_strict
from prolas.report.markdown import best_fit_points, report_markdown, summary_table
from prolas.report.metrics import predictive_mean_sd, test_metrics
from prolas.report.plots import (
    EXTRAPOLATE,
    components_figure,
    convergence_figure,
    fit_figure,
    mark_changes,
    plot_components,
    plot_convergence,
    plot_fit,
)
from prolas.report.schema import (
    log_likelihood_kind,
    result_schema,
    result_to_json,
    validate_result_json,
)
from prolas.report.words import describe_fit
from prolas.report.write import ReportWarning, write_report

__all__ = [
    "EXTRAPOLATE",
    "FLAT_TOLERANCE",
    "FitChange",
    "ReportWarning",
    "best_fit_points",
    "components_figure",
    "convergence_figure",
    "describe_fit",
    "dumps_strict",
    "fit_changes",
    "fit_figure",
    "flat_factors",
    "log_likelihood_kind",
    "mark_changes",
    "plot_components",
    "plot_convergence",
    "plot_fit",
    "predictive_mean_sd",
    "report_markdown",
    "result_schema",
    "result_to_json",
    "summary_table",
    "test_metrics",
    "validate_result_json",
    "write_report",
]
