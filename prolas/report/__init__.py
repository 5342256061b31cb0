"""Everything written after a search (:mod:`prolas.report.words` holds it for now; the
next commit splits it into one module per concept)."""

from prolas.report.words import (  # noqa: F401  (the public API, re-exported)
    EXTRAPOLATE,
    FLAT_TOLERANCE,
    FitChange,
    ReportWarning,
    _pyplot,
    best_fit_points,
    components_figure,
    describe_fit,
    dumps_strict,
    fit_changes,
    fit_figure,
    flat_factors,
    log_likelihood_kind,
    mark_changes,
    plot_components,
    plot_convergence,
    plot_fit,
    result_to_json,
    summary_table,
    test_metrics,
    validate_result_json,
    write_report,
)
from prolas.report.words import __all__ as __all__
