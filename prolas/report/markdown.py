"""report.md and the CLI's final text table.

* :func:`report_markdown`: report.md: the data and what the search saw, the best model
  (in words, :func:`prolas.report.words.describe_fit`, and its hyperparameters), the
  whole series' significant periods and which the model leaves out
  (:mod:`prolas.report.periods`), the top models by BIC, failed evaluations, the test
  set's metrics and the plots.
* :func:`summary_table`: the CLI's compact table of the top models.

>>> from prolas.records import Evaluation, SearchResult
>>> h = [Evaluation(1, "SE", "ok", -35.0, -27.5, 3, 0.4, None)]
>>> print(summary_table(SearchResult("cks", 0, 10, h, 1.0), None).splitlines()[0].split())
['rank', 'expression', 'BIC', 'log-lik', 'k', 'seconds']
"""

from __future__ import annotations

from pathlib import Path

from prolas.data import Dataset
from prolas.gp import FitResult
from prolas.records import Evaluation, SearchResult
from prolas.report.periods import describe_periods, describe_view, left_out, say_period
from prolas.report.words import describe_fit

__all__ = ["best_fit_points", "report_markdown", "summary_table"]


def _ranked(result: SearchResult) -> list[Evaluation]:
    ok = [e for e in result.history if e.ok]
    return sorted(ok, key=lambda e: (-e.bic, e.index))


def summary_table(result: SearchResult, best_fit: FitResult | None, top: int = 5) -> str:
    """Compact text table of the ``top`` evaluations by BIC (rank, expression, BIC,
    log-lik, k, seconds), followed by a one-line count of evaluations and failures."""
    rows = [("rank", "expression", "BIC", "log-lik", "k", "seconds")]
    for rank, e in enumerate(_ranked(result)[:top], 1):
        rows.append(
            (
                str(rank),
                e.expression,
                f"{e.bic:.2f}",
                f"{e.log_likelihood:.2f}" if e.log_likelihood is not None else "-",
                str(e.n_params),
                f"{e.seconds:.2f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [r[0].rjust(widths[0]), r[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(r[2:], widths[2:])]
        lines.append("  ".join(cells).rstrip())
    failed = sum(not e.ok for e in result.history)
    repaired = sum(bool(getattr(e, "repaired_from", None)) for e in result.history)
    # a repair: a fit redone from a contained sub-model that beat it (no budget)
    also = f", {repaired} refitted from a sub-model that beat them" if repaired else ""
    lines.append(
        f"{len(result.history)} evaluations ({failed} failed{also}) in {result.wall_seconds:.1f} s"
    )
    if best_fit is not None and best_fit.ok:
        where = ""
        if best_fit.n != best_fit_points(result, best_fit):
            kind = f", {best_fit.approximation} lower bound" if best_fit.approximation else ""
            where = f" (refitted on all {best_fit.n} points{kind})"
        lines.append(f"best: {best_fit.expression}  BIC {best_fit.bic:.2f}{where}")
    return "\n".join(lines)


def best_fit_points(result: SearchResult, fit: FitResult) -> int:
    """How many points the search scored ``fit``'s expression on (``fit.n`` if unknown)."""
    for e in result.history:
        if e.expression == fit.expression and getattr(e.fit, "n", None):
            return int(e.fit.n)
    return fit.n


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def report_markdown(
    dataset: Dataset,
    result: SearchResult,
    best_fit: FitResult | None,
    doc: dict,
    top: int,
    test: dict | None,
    plots: list[str],
    skipped: list[str] = (),
) -> str:
    """The text of report.md.

    Args:
        dataset, result, best_fit: the data, the search and its best model (``None`` or
            failed when no evaluation succeeded).
        doc: the result.json document (its search block and version are reported).
        top: how many models the ranking table lists.
        test: the test block (:func:`prolas.report.metrics.test_metrics`) or ``None``.
        plots: file names of the drawn plots (linked as images).
        skipped: one reason per plot that could not be drawn.
    """
    s = doc["search"]
    lines = [
        f"# prolas report: {dataset.name}",
        "",
        f"- data: `{dataset.path}`, {dataset.n} points, x = `{dataset.x_column}` "
        f"({dataset.x[0]:.6g} to {dataset.x[-1]:.6g}), y = `{dataset.y_column}` "
        f"(mean {dataset.y_mean:.4g}, std {dataset.y_std:.4g})",
        f"- search: {s['method']}, seed {s['seed']}, {s['evaluations']} of {s['budget']} "
        f"evaluations, {s['wall_seconds']:.1f} s"
        + (f", checkpoint `{s['checkpoint']}`" if s["checkpoint"] else ""),
        *([f"- {describe_view(s['searched_on'], dataset)}"] if s.get("searched_on") else []),
        *(
            [
                "- **left out:** the best model does not contain the series' significant "
                "period(s) of "
                + ", ".join(say_period(e["period"], dataset) for e in left_out(doc["periods"]))
                + ' (see "Periods in the whole series" below)'
            ]
            if left_out(doc.get("periods"))
            else []
        ),
        f"- prolas {doc['prolas_version']}",
        "",
        "## Best model",
        "",
    ]
    if best_fit is None or not best_fit.ok:
        lines += ["No evaluation succeeded; see the failed evaluations below.", ""]
    else:
        lines += [
            f"`{best_fit.expression}`: BIC {best_fit.bic:.2f}, log-likelihood "
            f"{best_fit.log_likelihood:.2f} nats"
            + (
                f" ({best_fit.approximation}: a lower bound on the exact value)"
                if best_fit.approximation
                else ""
            )
            + f", k = {best_fit.n_params}, "
            f"noise variance {best_fit.noise_variance:.4g} (standardised y).",
            "",
            "### In words",
            "",
        ]
        lines += [f"{i}. {t}" for i, t in enumerate(describe_fit(best_fit, dataset), 1)]
        lines += [
            "",
            "### Hyperparameters",
            "",
            "Variances are for standardised y; lengths, periods and offsets in x's units.",
            "",
            "| term | variance | factor | parameters |",
            "|---|---|---|---|",
        ]
        for i, term in enumerate(best_fit.terms, 1):
            for j, f in enumerate(term.factors):
                params = ", ".join(f"{k} {v:.4g}" for k, v in f.params.items()) or "-"
                lines.append(
                    f"| {i if j == 0 else ''} | {f'{term.variance:.4g}' if j == 0 else ''} "
                    f"| {f.kernel} | {params} |"
                )
    if doc.get("periods") is not None:
        lines += ["", "## Periods in the whole series", ""]
        lines += describe_periods(doc["periods"], dataset, s.get("searched_on"))
    lines += [
        "",
        f"## Top {top} models by BIC",
        "",
        "| rank | expression | BIC | log-likelihood | k | seconds | evaluation |",
        "|---|---|---|---|---|---|---|",
    ]
    ranked = _ranked(result)[:top]
    if not ranked:
        lines[-2:] = ["No successful evaluation."]
    for rank, e in enumerate(ranked, 1):
        lines.append(
            f"| {rank} | `{e.expression}` | {e.bic:.2f} | {e.log_likelihood:.2f} | "
            f"{e.n_params} | {e.seconds:.2f} | {e.index} |"
        )
    failed = [e for e in result.history if not e.ok]
    lines += ["", "## Failed evaluations", ""]
    if failed:
        lines += [f"- #{e.index} `{e.expression}`: {_md_cell(e.error or 'failed')}" for e in failed]
    else:
        lines.append("None.")
    if test is not None:
        lines += [
            "",
            "## Test set",
            "",
            f"`{test['path']}`, {test['n']} points: RMSE {test['rmse']:.4g} "
            f"({dataset.y_column} units), mean log predictive density "
            f"{test['mean_log_predictive_density']:.4g} nats per point.",
        ]
    if plots or skipped:
        lines += ["", "## Plots", ""]
        lines += [f"![{Path(p).stem}]({p})" for p in plots]
        lines += [f"- {_md_cell(s)}" for s in skipped]
    return "\n".join(lines) + "\n"
