"""write_report: the files of a finished search in one directory.

result.json (:mod:`prolas.report.schema`), report.md (:mod:`prolas.report.markdown`),
fit.png, components.png and convergence.png (:mod:`prolas.report.plots`).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from prolas.data import Dataset
from prolas.gp import FitResult
from prolas.records import SearchResult, dumps_strict, one_line
from prolas.report.markdown import report_markdown
from prolas.report.plots import plot_components, plot_convergence, plot_fit

__all__ = ["ReportWarning", "write_report"]


class ReportWarning(UserWarning):
    """A part of the report (a plot) could not be made; the rest was written."""


def write_report(
    out_dir: str | Path,
    dataset: Dataset,
    result: SearchResult,
    best_fit: FitResult | None,
    result_json: dict,
    *,
    top: int = 10,
    test: dict | None = None,
    test_dataset: Dataset | None = None,
) -> list[Path]:
    """Write result.json, report.md, fit.png, components.png and convergence.png.

    Creates ``out_dir`` if needed and overwrites only these five files (the CLI
    decides whether an existing result may be replaced). The fit and component plots
    are skipped when no model was fitted successfully. result.json is serialised
    first (:func:`dumps_strict`: a non-finite number raises before any file is
    written) and written after the plots; a plot that cannot be drawn is skipped
    with a warning and its reason in report.md, so the result is never lost to a
    plotting problem. Returns the written paths.
    """
    out = Path(out_dir)
    result_path = out / "result.json"
    text = dumps_strict(result_json, what=str(result_path), indent=2) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    has_fit = best_fit is not None and best_fit.ok
    if test is None:
        test = result_json.get("test")

    drawings = []
    if has_fit:
        drawings.append(("fit.png", lambda p: plot_fit(p, best_fit, dataset, test_dataset)))
        drawings.append(("components.png", lambda p: plot_components(p, best_fit, dataset)))
    drawings.append(("convergence.png", lambda p: plot_convergence(p, result)))
    plots: list[Path] = []
    skipped: list[str] = []
    for name, draw in drawings:
        try:
            plots.append(draw(out / name))
        except Exception as exc:  # a plot is not worth the result: say why, keep going
            reason = one_line(f"{type(exc).__name__}: {exc}")
            skipped.append(f"{name} could not be drawn ({reason})")
            warnings.warn(f"{out / name} not drawn: {reason}", ReportWarning, stacklevel=2)

    result_path.write_text(text)
    written.append(result_path)
    md = report_markdown(
        dataset, result, best_fit, result_json, top, test, [p.name for p in plots], skipped
    )
    path = out / "report.md"
    path.write_text(md)
    written.append(path)
    return written + plots
