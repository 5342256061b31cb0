"""The whole series' significant periods against the chosen model: result.json's
``periods`` block and report.md's words about them and about what the search saw.

The periods come from :func:`prolas.spectrum.scan_dataset` (all N points). A significant
period ``p`` is **explained** by the model when one of its periodic factors (PER, PERC)
has a period ``q`` that repeats it, ``q ≈ j p`` for a whole ``j`` from 1 to
:data:`prolas.spectrum.MAX_HARMONIC` within :data:`EXPLAIN_TOLERANCE`
(:func:`prolas.spectrum.explains`; ``j`` up to the harmonics the factor's shape carries,
:func:`harmonics_carried`), ``q`` no longer than the data's span, in a term whose
prior variance on the data, ``mean_i k_t(x_i, x_i)``, is at least
:data:`MIN_TERM_VARIANCE` of the cycle's own variance ``a^2 / 2`` (``a`` its amplitude,
both for the standardised y): a periodic factor in a term of variance 3e-9 does not
explain a cycle of amplitude 3. A harmonic is explained with its fundamental.

A period is **seen** by the search when the points it fitted resolve it: all points, or
the view's evenly spaced points (``p`` at least :data:`prolas.search.view.RESOLVED_SPACINGS`
spacings) or a window made for it (:class:`prolas.search.view.SearchView`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import ive

from prolas.data import Dataset
from prolas.gp import FitResult
from prolas.gp.anatomy import term_prior_variances
from prolas.kernels import factor as kernel_of
from prolas.kernels.spec import PERIODIC
from prolas.spectrum import (
    FALSE_ALARM,
    MAX_HARMONIC,
    MIN_CYCLES,
    MIN_SHARE,
    Peak,
    Spectrum,
    explains,
    scan_dataset,
)

__all__ = [
    "EXPLAIN_TOLERANCE",
    "HARMONIC_WEIGHT",
    "MIN_TERM_VARIANCE",
    "describe_periods",
    "describe_view",
    "harmonics_carried",
    "left_out",
    "period_check_line",
    "periods_block",
    "say_period",
]

#: A model period within this relative distance of a whole multiple of a significant
#: period explains it.
EXPLAIN_TOLERANCE = 0.02
#: ... in a term whose prior variance is at least this share of the cycle's variance.
MIN_TERM_VARIANCE = 0.1
#: A periodic factor carries a harmonic whose prior variance is at least this share of
#: its fundamental's (:func:`harmonics_carried`).
HARMONIC_WEIGHT = 0.1


def harmonics_carried(shape: float) -> int:
    """The highest harmonic a periodic factor of shape lengthscale ``ℓ`` carries.

    PER = exp(-2 sin^2(π d / p) / ℓ^2) = exp(u (cos(2π d / p) - 1)) with u = 1 / ℓ^2, and
    exp(u cos θ) = I_0(u) + 2 Σ_j I_j(u) cos(j θ): a sample path's j-th harmonic has
    variance proportional to I_j(u) (PERC is the same without I_0). The factor carries
    harmonic j when ``I_j(u) / I_1(u) >=`` :data:`HARMONIC_WEIGHT`; a smooth shape
    (ℓ ≥ 1) carries the 2nd at most, a spiky one (ℓ = 0.3) about the 8th."""
    u = 1.0 / max(shape, 1e-6) ** 2
    first = float(ive(1, u))
    j = 1
    while j < MAX_HARMONIC and float(ive(j + 1, u)) >= HARMONIC_WEIGHT * first:
        j += 1
    return j


def _model_periods(fit: FitResult, dataset: Dataset) -> list[tuple[float, int, float, str]]:
    """``(period, harmonics carried, term prior variance, term label)`` of every periodic
    factor of ``fit`` no longer than the data's span."""
    if fit is None or not fit.ok or not fit.terms:
        return []
    variances = [float(np.mean(v)) for v in term_prior_variances(fit, dataset.x)]
    out = []
    for term, v in zip(fit.terms, variances):
        for f in term.factors:
            q = f.params.get("period")
            if q is not None and kernel_of(f.kernel).role == PERIODIC:
                if 0 < q <= dataset.span:
                    carried = harmonics_carried(float(f.params.get("lengthscale", 1.0)))
                    out.append((float(q), carried, v, term.label))
    return out


def _explained_by(
    peak: Peak, periods: list[tuple[float, int, float, str]], y_std: float
) -> tuple[str, float] | None:
    own = 0.5 * (peak.amplitude / y_std) ** 2  # the cycle's variance, standardised y
    for q, carried, v, label in periods:
        if v >= MIN_TERM_VARIANCE * own and explains(q, peak.period, EXPLAIN_TOLERANCE, carried):
            return label, q
    return None


def periods_block(
    dataset: Dataset,
    fit: FitResult | None,
    *,
    hidden: Sequence[float] = (),
    spectrum: Spectrum | None = None,
) -> dict:
    """result.json's ``periods`` block (docs/result-json.md).

    Args:
        dataset: all points (the scan is of them).
        fit: the best model (``None``: none; every period is then unexplained).
        hidden: the significant periods the search's points could not resolve
            (:attr:`prolas.search.view.SearchView.hidden`; empty when it saw all points).
        spectrum: the scan (default :func:`prolas.spectrum.scan_dataset` of ``dataset``).
    """
    spectrum = spectrum or scan_dataset(dataset)
    periods = _model_periods(fit, dataset) if fit is not None else []
    entries = []
    by_period: dict[float, dict] = {}
    for peak in sorted(spectrum.peaks, key=lambda p: p.period):  # fundamentals first
        hit = _explained_by(peak, periods, dataset.y_std)
        entry = {
            **peak.to_json(),
            "seen_by_search": peak.period not in set(hidden),
            "explained_by": None if hit is None else {"term": hit[0], "period": hit[1]},
        }
        if hit is None and peak.harmonic_of is not None:
            base = by_period.get(peak.harmonic_of)
            if base is not None and base["explained_by"] is not None:
                entry["explained_by"] = base["explained_by"]
        if peak.harmonic_of is not None and not entry["seen_by_search"]:
            base = by_period.get(peak.harmonic_of)
            entry["seen_by_search"] = bool(base and base["seen_by_search"])
        by_period[peak.period] = entry
        entries.append(entry)
    entries.sort(key=lambda e: -e["share"])
    return {
        "n": int(spectrum.n),
        "false_alarm": FALSE_ALARM,
        "min_share": MIN_SHARE,
        "min_cycles": MIN_CYCLES,
        "significant": entries,
        "unexplained": [
            e["period"] for e in entries if e["explained_by"] is None and e["harmonic_of"] is None
        ],
    }


def left_out(block: dict | None) -> list[dict]:
    """The entries of a ``periods`` block that the model does not explain (fundamentals)."""
    if not block:
        return []
    wanted = set(block["unexplained"])
    return [e for e in block["significant"] if e["period"] in wanted]


# --- words ----------------------------------------------------------------------------


def _in_years(dataset: Dataset) -> bool:
    return bool(dataset.x[0] >= 1000 and dataset.x[-1] <= 3000)


def say_period(v: float, dataset: Dataset) -> str:
    """A period in words: years, months, days or hours when x is in calendar years
    (``'1.00 year'``, ``'7.00 days'``, ``'24.0 hours'``), else x's units."""
    if not _in_years(dataset):
        return f"{v:.4g} (x units)"
    days = 365.25 * v
    if v >= 1.5:
        return f"{v:.3g} years"
    if days >= 300:
        return f"{v:.3g} year" + ("s" if f"{v:.3g}" != "1" else "")
    if days >= 45:
        return f"{12 * v:.3g} months"
    if days >= 1.5:
        return f"{days:.3g} days"
    return f"{24 * days:.3g} hours"


def describe_view(searched_on: dict, dataset: Dataset) -> str:
    """What the search saw, in one sentence (from result.json's ``search.searched_on``)."""
    n, even = searched_on["n"], searched_on["evenly_spaced"]
    step = dataset.span / max(even - 1, 1)
    finest = 4 * step
    text = (
        f"searched on {n} of {dataset.n} points: {even} evenly spaced "
        f"(about {say_period(step, dataset)} apart, so periods shorter than about "
        f"{say_period(finest, dataset)} were not resolved by them)"
    )
    windows = searched_on["windows"]
    if windows:
        parts = [
            f"{w['n']} points from {w['x_start']:.6g} to {w['x_end']:.6g} "
            f"(every {say_period(w['spacing'], dataset)}) for the period "
            f"{say_period(w['period'], dataset)}"
            for w in windows
        ]
        text += " and " + ("a window of " if len(parts) == 1 else "windows of ")
        text += "; ".join(parts)
    if searched_on["start_periods"]:
        starts = ", ".join(say_period(p, dataset) for p in searched_on["start_periods"])
        text += f"; its fits also started from the full series' periods {starts}"
    return text + (
        ". The BICs in the tables below are on those points; the best model was then "
        "refitted on all points"
    )


def _peak_words(e: dict, dataset: Dataset) -> str:
    return (
        f"{say_period(e['period'], dataset)} ({100 * e['share']:.1f}% of the variance "
        f"about the trend line, amplitude {e['amplitude']:.3g} {dataset.y_column} units)"
    )


def describe_periods(block: dict, dataset: Dataset, searched_on: dict | None) -> list[str]:
    """report.md's section on the whole series' periods (markdown lines)."""
    rule = (
        f"a cycle that repeats at least {block['min_cycles']:g} times, stands out of the "
        f"periodogram's background with a false-alarm probability of "
        f"{100 * block['false_alarm']:g} % and holds at least {100 * block['min_share']:g} % "
        "of the variance about the straight-line trend"
    )
    sig = block["significant"]
    if not sig:
        return [f"A periodogram of all {block['n']} points finds no significant period ({rule})."]
    lines = [
        f"A periodogram of all {block['n']} points finds {len(sig)} significant "
        f"period{'s' * (len(sig) != 1)} ({rule}):",
        "",
    ]
    for e in sig:
        text = f"- {_peak_words(e, dataset)}"
        if e["harmonic_of"] is not None:
            text += f", a harmonic of the {say_period(e['harmonic_of'], dataset)} cycle"
        hit = e["explained_by"]
        if hit is not None:
            text += (
                f": in the model, as its term `{hit['term']}` with period "
                f"{say_period(hit['period'], dataset)}."
            )
        elif e["harmonic_of"] is not None:
            text += ": not in the model (nor is its fundamental)."
        else:
            text += ": **not in the model**"
            text += "." if e["seen_by_search"] else f" — {_why_unseen(e, searched_on, dataset)}."
        lines.append(text)
    missing = left_out(block)
    if missing:
        names = ", ".join(say_period(e["period"], dataset) for e in missing)
        lines += [
            "",
            f"**The model leaves out the series' significant period{'s' * (len(missing) != 1)} "
            f"of {names}.** Forecasts and components will not show "
            f"{'this cycle' if len(missing) == 1 else 'these cycles'}.",
        ]
    return lines


def _why_unseen(e: dict, searched_on: dict | None, dataset: Dataset) -> str:
    if not searched_on:
        return "the search saw all points"
    even = searched_on["evenly_spaced"]
    step = dataset.span / max(even - 1, 1)
    return (
        f"the search never saw it: its {even} evenly spaced points, about "
        f"{say_period(step, dataset)} apart, cannot resolve it and it had no window for it "
        "(--search-windows); search again with more windows or a larger --search-points"
    )


def period_check_line(block: dict | None, dataset: Dataset) -> str | None:
    """The CLI's one-line note when the model leaves out significant periods, else None."""
    missing = left_out(block)
    if not missing:
        return None
    names = ", ".join(say_period(e["period"], dataset) for e in missing)
    unseen = any(not e["seen_by_search"] for e in missing)
    return f"note: the best model leaves out the series' significant period(s) of {names}" + (
        " (the search could not see them; see report.md)" if unseen else " (see report.md)"
    )
