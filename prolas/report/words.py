"""The best model in plain words, in the spirit of the Automatic Statistician (Lloyd et
al. 2014).

:func:`describe_fit` says each additive term in words, with its share of the variance
of the fitted mean: for term t with posterior mean ``m_t`` on the data inputs,
``share_t = Var_i(m_t(x_i)) / sum_s Var_i(m_s(x_i))``. A model with change operators
first gets one sentence per operator on where and how the series changes, and each term
says where it is active. The numbers it words (shares, factors flat on the data, change
transitions and the terms they switch, slopes) come from :mod:`prolas.gp.anatomy`; this
module only chooses the words.

A white-noise term (``WN``, ``LIN*WN``, ``WN`` under a change operator) is noise, not
signal: it is said by the standard deviation it adds and where ("Noise whose standard
deviation grows linearly away from x = 1960 ...", "The series is noisier between the
change-points at ~1973.0 and ~1978.0 ..."), without a share of the fitted mean.

Places and lengths on the x axis are said as years (and months, or the month's name when
x came from dates) when x looks like calendar years (:func:`in_years`,
:func:`say_position`); :func:`say_active_range` says where change operators let a term
act (also the plots' panel titles).
"""

from __future__ import annotations

import math

import numpy as np

from prolas.data import Dataset
from prolas.gp import FitResult
from prolas.gp.anatomy import (
    FitChange,
    active_bounds,
    fit_changes,
    flat_factors,
    noise_terms,
    term_conditions,
    term_prior_variances,
    term_shares,
    term_weight,
    trend_slope,
)
from prolas.kernels import factor as kernel_of
from prolas.kernels.spec import CONSTANT, MULTISCALE, PERIODIC, SMOOTH, TRANSITION, TREND

__all__ = ["describe_fit", "in_years", "say_active_range", "say_position", "say_window"]


# --- places and lengths on the x axis -----------------------------------------------


def in_years(dataset: Dataset) -> bool:
    """x looks like calendar years (every input between 1000 and 3000)."""
    return bool(dataset.x[0] >= 1000 and dataset.x[-1] <= 3000)


def _length(v: float, years: bool) -> str:
    """A length on the x axis in words: ``'1.00 years (12.0 months)'`` or ``'2.5 (x units)'``."""
    if years:
        text = f"{v:.2f} year" + ("" if f"{v:.2f}" == "1.00" else "s")
        if v < 2:
            text += f" ({12 * v:.1f} months)"
        return text
    return f"{v:.3g} (x units)"


def say_position(v: float, dataset: Dataset, years: bool) -> str:
    """A place on the x axis: ``'1973.4'`` in years (and the month when x came from
    dates), else with enough digits to resolve a thousandth of the data's span."""
    if years:
        text = f"{v:.1f}"
        if dataset.x_is_date:
            from prolas.data import decimal_years_to_timestamps

            try:
                text += f" ({decimal_years_to_timestamps(v)[0].strftime('%B %Y')})"
            except Exception:  # outside pandas' dates: the decimal year alone
                pass
        return text
    res = dataset.span / 1000 if dataset.span > 0 else abs(v) / 1000 or 1e-3
    digits = math.ceil(math.log10(abs(v) / res)) if v != 0 and math.isfinite(v) else 3
    return f"{v:.{min(max(digits, 2), 12)}g}"


def _duration(v: float, years: bool) -> str:
    """A width on the x axis: :func:`_length`, in days when it is under 0.05 years."""
    if years and v < 0.05:
        return f"{v:.2g} years ({365.25 * v:.2g} days)"
    return _length(v, years)


def _outside(lo: float, hi: float, dataset: Dataset) -> str:
    """``' (before the data start)'`` / ``' (after the data end)'`` for a span [lo, hi]
    that lies wholly outside the data, else ``''``."""
    if hi < dataset.x[0]:
        return " (before the data start)"
    if lo > dataset.x[-1]:
        return " (after the data end)"
    return ""


def _at(v: float, dataset: Dataset, years: bool) -> str:
    """``'~1973.4'``, saying when it lies outside the data."""
    return f"~{say_position(v, dataset, years)}" + _outside(v, v, dataset)


def say_window(c: FitChange, dataset: Dataset, years: bool) -> str:
    """A change-window's span: ``'~1971.2-1973.9'`` (saying when it lies outside the
    data), ``'from ~1974.1 on'`` / ``'up to ~1966.0'`` when one transition is held
    (at ``±inf``, :func:`prolas.gp.anatomy.fit_changes` with the data)."""
    s, e = c.params["start"], c.params["end"]
    if math.isinf(s) or math.isinf(e):  # held transitions (fit_changes)
        if math.isinf(s) and math.isinf(e):
            return "covering all x" if s < e else "that never opens"
        if math.isinf(e):
            return f"from ~{say_position(s, dataset, years)} on"
        return f"up to ~{say_position(e, dataset, years)}"
    text = f"~{say_position(s, dataset, years)}-{say_position(e, dataset, years)}"
    return text + _outside(s, e, dataset)


# --- terms --------------------------------------------------------------------------


def _base_factors(term, flat_idx: set[int]) -> tuple[dict[str, list], list[str]]:
    """A term's base-kernel factors that vary on the data, by their role in a sentence
    (each kernel's ``role`` in :mod:`prolas.kernels`: periodic, multi-scale, smooth or
    trend), as ``(kernel, params)`` pairs, and the names of those constant on the data.
    Change factors (said by the change sentences and the term's active range) and the
    constant ``C`` are neither."""
    by: dict[str, list] = {}
    flat: list[str] = []
    for i, f in enumerate(term.factors):
        kernel = kernel_of(f.kernel)
        if kernel.role in (TRANSITION, CONSTANT):
            continue
        if i in flat_idx:
            flat.append(f.kernel)
            continue
        by.setdefault(kernel.role, []).append((kernel, f.params))
    return by, flat


def _roles(term, flat_idx: set[int]) -> tuple[list, list, list, list, list[str]]:
    """``(trends, periodics, smooths, multi-scales, flat names)`` of :func:`_base_factors`."""
    by, flat = _base_factors(term, flat_idx)
    return (*(by.get(r, []) for r in (TREND, PERIODIC, SMOOTH, MULTISCALE)), flat)


def _kinds(group: list) -> str:
    """The kernel names of a group of ``(kernel, params)`` factors: ``'LIN'``."""
    return "/".join(dict.fromkeys(k.name for k, _ in group))


def _describe_term(
    term,
    mean_on_x: np.ndarray,
    dataset: Dataset,
    years: bool,
    flat_idx: set[int],
    weight: np.ndarray | None = None,
) -> str:
    """One sentence (without the share) for a product term.

    The factors are said by their role (:mod:`prolas.kernels`): a periodic factor leads
    the sentence, else a multi-scale one, else a smooth one, else the trend; the others
    modify it. Factors that are constant on the data (``flat_idx``,
    :func:`flat_factors`) are named once at the end instead of being described as
    changes of shape; a periodic factor whose period exceeds the data's span shows no
    repetition in the data, so it is said as the slow variation it is (its effective
    lengthscale for lags much shorter than the period, the kernel's
    ``slow_lengthscale``: ``p l / (2 pi)`` for PER, from ``sin u ~ u``). Change factors are left to
    :func:`describe_fit`; ``weight`` (on the inputs, their product) scales the term, so
    a trend's slope is that of the trend itself (:func:`~prolas.gp.anatomy.trend_slope`).
    """
    span = float(dataset.x[-1] - dataset.x[0])
    lins, pers, ses, rqs, flat = _roles(term, flat_idx)
    slow = [(k, p) for k, p in pers if p["period"] > span]
    pers = [(k, p) for k, p in pers if p["period"] <= span]
    mods: list[str] = [
        f"varying slowly over ~{_length(k.slow_lengthscale(p), years)} "
        f"({k.name} factor whose period, {_length(p['period'], years)}, is longer than the data)"
        for k, p in slow
    ]

    if pers:
        if len(pers) == 1:
            k, p = pers[0]
            core = (
                f"A periodic component with period {_length(p['period'], years)}, "
                f"shape lengthscale {p['lengthscale']:.2f}"
                + (" (close to a sinusoid)" if p["lengthscale"] > 2 else "")
                + (f", {k.qualifier}" if k.qualifier else "")
            )
        else:
            periods = ", ".join(_length(p["period"], years) for _, p in pers)
            core = f"A product of {len(pers)} periodic components with periods {periods}"
        for k, s in ses:
            mods.append(
                f"whose shape changes smoothly over ~{_length(s['lengthscale'], years)} "
                f"({k.name} factor)"
            )
        for k, r in rqs:
            mods.append(
                f"whose shape changes at multiple scales around "
                f"~{_length(r['lengthscale'], years)} ({k.name} factor, alpha {r['alpha']:.2g})"
            )
    elif rqs:
        k, r = rqs[0]
        core = (
            f"Smooth variation at multiple scales ({k.name} lengthscale "
            f"{_length(r['lengthscale'], years)}, alpha {r['alpha']:.2g})"
        )
        for _, r2 in rqs[1:]:
            mods.append(f"modulated by a multi-scale factor (lengthscale {r2['lengthscale']:.3g})")
        for k, s in ses:
            mods.append(
                f"within an envelope over ~{_length(s['lengthscale'], years)} ({k.name} factor)"
            )
    elif ses:
        core = f"A smooth trend with lengthscale {_length(ses[0][1]['lengthscale'], years)}"
        for k, s in ses[1:]:
            mods.append(
                f"within an envelope over ~{_length(s['lengthscale'], years)} ({k.name} factor)"
            )
    elif slow:
        core = "A smooth trend"
    elif lins:
        slope = trend_slope(dataset, mean_on_x, weight)
        direction = "rising" if slope > 0 else "falling"
        if len(lins) == 1 and math.isnan(slope):  # switched off on the data
            core = "A linear trend"
        elif len(lins) == 1:
            core = f"A linear trend ({direction}, about {slope:.3g} y units per x unit)"
        else:
            core = f"A polynomial trend of degree {len(lins)}"
        lins = []  # the LIN factors are the core here, not an amplitude modifier
    else:  # every factor is flat on the data
        core = "A constant offset"

    if lins:
        offsets = ", ".join(f"{lp['offset']:.4g}" for _, lp in lins)
        if len(lins) == 1:
            mods.insert(
                0, f"whose amplitude grows linearly away from x = {offsets} ({_kinds(lins)} factor)"
            )
        else:
            mods.insert(
                0,
                f"whose amplitude grows as a polynomial of degree {len(lins)} "
                f"({_kinds(lins)} factors, offsets {offsets})",
            )
    sentence = core + (", " + " and ".join(mods) if mods else "")
    if flat:
        sentence += (
            f" ({', '.join(flat)} factor{'s' if len(flat) > 1 else ''} constant on the data)"
        )
    return sentence


def _term_noun(
    term, mean_on_x: np.ndarray, dataset: Dataset, years: bool, flat_idx: set[int], weight
) -> str:
    """A short noun phrase for a product term, for the change sentences: ``'a rising
    linear trend'``, ``'a periodic component with period 1.00 year (12.0 months)'``,
    ``'a constant offset'`` (the classification of :func:`_describe_term`)."""
    lins, pers, ses, rqs, _ = _roles(term, flat_idx)
    slow = [(k, p) for k, p in pers if p["period"] > dataset.span]
    pers = [(k, p) for k, p in pers if p["period"] <= dataset.span]
    grows = ""
    if lins:
        grows = (
            " of linearly growing amplitude"
            if len(lins) == 1
            else f" of amplitude growing as a polynomial of degree {len(lins)}"
        )
    if pers:
        if len(pers) == 1:
            k, p = pers[0]
            own = f" {k.qualifier.split(' (')[0]}" if k.qualifier else ""
            return f"a periodic component with period {_length(p['period'], years)}{own}{grows}"
        periods = ", ".join(_length(p["period"], years) for _, p in pers)
        return f"a product of {len(pers)} periodic components (periods {periods}){grows}"
    if rqs:
        return f"smooth variation at multiple scales{grows}"
    if ses or slow:
        return f"a smooth trend{grows}"
    if lins:
        if len(lins) > 1:
            return f"a polynomial trend of degree {len(lins)}"
        slope = trend_slope(dataset, mean_on_x, weight)
        if math.isnan(slope):
            return "a linear trend"
        return f"a {'rising' if slope > 0 else 'falling'} linear trend"
    return "a constant offset"


# --- noise terms --------------------------------------------------------------------


def _noise_growth(term, dataset: Dataset, years: bool) -> tuple[str, str]:
    """``(sentence core, noun)`` of a white-noise term from its LIN factors: noise whose
    standard deviation grows linearly away from LIN's offset (``LIN*WN``), as a
    polynomial (``LIN*LIN*WN``), or plain white noise."""
    offsets = [f.params["offset"] for f in term.factors if kernel_of(f.kernel).role == TREND]
    names = "*".join(f.kernel for f in term.factors if kernel_of(f.kernel).role != TRANSITION)
    if len(offsets) == 1:
        at = say_position(offsets[0], dataset, years)
        return (
            f"Noise whose standard deviation grows linearly away from x = {at} ({names})",
            f"noise growing linearly away from x = {at}",
        )
    if offsets:
        degree = len(offsets)
        at = ", ".join(say_position(c, dataset, years) for c in offsets)
        return (
            f"Noise whose standard deviation grows as a polynomial of degree {degree} "
            f"(offsets {at}; {names})",
            f"noise growing as a polynomial of degree {degree}",
        )
    return f"White noise ({names})", "extra noise"


def _describe_noise(
    term, sd: np.ndarray, conds: list, dataset: Dataset, years: bool, off: bool
) -> str:
    """One sentence for a white-noise term: what its standard deviation does and, under
    change operators, where the series is noisier; ``sd`` is its standard deviation on
    the data inputs (y's units)."""
    core, _ = _noise_growth(term, dataset, years)
    unit = f"{dataset.y_column} units"
    lins = any(kernel_of(f.kernel).role == TREND for f in term.factors)
    if lins:
        size = f"standard deviation {sd[0]:.3g} at the first input and {sd[-1]:.3g} at the last"
        low = int(np.argmin(sd))
        if 0 < low < len(sd) - 1:
            at = say_position(dataset.x[low], dataset, years)
            size += f", lowest ({sd[low]:.3g}) near x = {at}"
        size += f" ({unit})"
    elif conds:
        size = f"standard deviation up to {float(sd.max()):.3g} {unit}"
    else:
        size = f"standard deviation {float(sd.max()):.3g} {unit}"
    if off:
        where = say_active_range(conds, dataset, years)
        return f"{core}, {where}, so it does not act on the data."
    if conds:
        where = say_active_range(conds, dataset, years).removeprefix("active only ")
        return (
            f"The series is noisier {where}: {core[0].lower()}{core[1:]}, {size}, on top of "
            "the observation noise."
        )
    return f"{core}: {size}, on top of the observation noise."


# --- change operators ---------------------------------------------------------------


#: a transition counts as complete (or not yet begun) on the data when its sigmoid is
#: within this of 1 (or 0) at the data's end (or start)
_SETTLED = 0.01


def say_active_range(conds: list[tuple[FitChange, int]], dataset: Dataset, years: bool) -> str:
    """Where a term is switched on, from its change factors: ``'active only before
    the change-point at ~1973.4'``, ``'... between the change-points at ~1966.3 and
    ~1974.1'``, ``'... outside the change-window ~1971.2-1973.9'``
    (:func:`~prolas.gp.anatomy.active_bounds`)."""
    lo, hi, outside = active_bounds(conds)
    if (lo is not None and lo[0] == math.inf) or (hi is not None and hi[0] == -math.inf):
        return "never active: the change that would switch it on lies beyond the data"

    def name(bound, which: str) -> str:
        x, c = bound
        if c.op == "CP":
            return f"the change-point at {_at(x, dataset, years)}"
        return f"the {which} of the change-window at {_at(x, dataset, years)}"

    parts = []
    if lo is not None and hi is not None:
        if lo[1] is hi[1]:
            parts.append(f"inside the change-window {say_window(lo[1], dataset, years)}")
        elif lo[1].op == hi[1].op == "CP":
            parts.append(
                f"between the change-points at {_at(lo[0], dataset, years)} "
                f"and {_at(hi[0], dataset, years)}"
            )
        else:
            parts.append(f"between {name(lo, 'start')} and {name(hi, 'end')}")
        if lo[0] >= hi[0]:
            parts[-1] += " (an empty range, so it is switched off)"
    elif lo is not None:
        parts.append(f"after {name(lo, 'start')}")
    elif hi is not None:
        parts.append(f"before {name(hi, 'end')}")
    parts += [f"outside the change-window {say_window(c, dataset, years)}" for c in outside]
    return "active only " + " and ".join(parts) if parts else ""


def _inner_qualifier(
    c: FitChange, conds: list[tuple[FitChange, int]], dataset: Dataset, years: bool
) -> str:
    """Where, within side of ``c``, a term is on, from the change operators nested in
    ``c`` (``' (from about 1974.1)'``); operators that hold ``c`` are the context."""
    words = []
    for h, side in conds:
        if not h.terms < c.terms:  # not nested inside c
            continue
        if h.op == "CP":
            if math.isinf(h.params["location"]):  # held: one side throughout
                continue
            at = say_position(h.params["location"], dataset, years)
            words.append(f"from about {at}" if side == 1 else f"until about {at}")
        else:
            win = say_window(h, dataset, years)
            where = f"about {win[1:]}" if win.startswith("~") else win
            words.append(f"{'inside' if side == 1 else 'outside'} the window {where}")
    return f" ({', '.join(words)})" if words else ""


def _and(phrases: list[str]) -> str:
    phrases = list(dict.fromkeys(phrases))  # in order, without repeats
    if len(phrases) <= 1:
        return "".join(phrases)
    return ", ".join(phrases[:-1]) + " and " + phrases[-1]


def _transition(c: FitChange, dataset: Dataset, years: bool, plural: bool = False) -> str:
    """``'over ~0.80 years (9.6 months)'``, or ``'abruptly'`` when the whole transition
    (±2 widths: 12 % to 88 %) fits between two neighbouring inputs."""
    w = c.params["width"]
    if dataset.n > 1 and 4 * w < dataset.spacing:
        return "abrupt transitions" if plural else "abruptly"
    return f"transitions over ~{_duration(w, years)}" if plural else f"over ~{_duration(w, years)}"


def _describe_held(c: FitChange, a: str, b: str, dataset: Dataset, years: bool) -> str:
    """The sentence for a change operator with a held transition (at ``±inf``: the data
    cannot see it, so it never happens: :func:`prolas.gp.fit.hold_unseen`); ``''`` when
    it has none."""
    unseen = "lies too far beyond the data for them to see it"
    if c.op == "CP":
        loc = c.params["location"]
        if loc == math.inf:
            return f"A change-point from {a} to {b} {unseen}: {a} throughout, forecasts included."
        if loc == -math.inf:
            return f"A change-point from {a} to {b} {unseen}: {b} throughout."
        return ""
    s, e = c.params["start"], c.params["end"]
    if not (math.isinf(s) or math.isinf(e)):
        return ""
    if s == math.inf or e == -math.inf or s >= e:
        return f"A change-window of {b} {unseen}: {a} throughout, forecasts included."
    how = _transition(c, dataset, years)
    if math.isinf(s) and math.isinf(e):
        return f"A change-window of {b} covers all the data and beyond: {b} throughout."
    if math.isinf(e):
        return (
            f"From about {say_position(s, dataset, years)} ({how}), {b} replaces {a} to the "
            f"end of the data, and forecasts continue {b}: the window's end {unseen}."
        )
    return (
        f"Until about {say_position(e, dataset, years)} ({how}), {b} holds in place of {a}; "
        f"the window's start {unseen}."
    )


def _describe_change(
    c: FitChange, nouns: list[str], conds: list[list], dataset: Dataset, years: bool
) -> str:
    """One sentence on where and how the series changes at one change operator.

    CP: ``"From about 1973.4 (over ~0.80 years (9.6 months)), A gives way to B."``;
    CW: ``"Between about 1971.2 and 1973.9 (transitions over ~...), B replaces A."``,
    where A and B are the short phrases of the terms on each side. A change outside the
    data is said so, with what the data (and forecasts) see; so is a transition held off
    because the data cannot see it (at ``±inf``, :func:`prolas.gp.anatomy.fit_changes`).
    """
    a, b = (
        _and([nouns[i] + _inner_qualifier(c, conds[i], dataset, years) for i in side]) or "nothing"
        for side in c.sides
    )
    held = _describe_held(c, a, b, dataset, years)
    if held:
        return held
    x0, x1 = float(dataset.x[0]), float(dataset.x[-1])
    if c.op == "CP":
        loc = c.params["location"]
        at, how = say_position(loc, dataset, years), _transition(c, dataset, years)
        if c.weight(1, x0) > 1 - _SETTLED:
            return (
                f"A change-point at about {at} ({how}), before the data start, has no effect "
                f"on the data: there {a} has already given way to {b}."
            )
        if c.weight(1, x1) < _SETTLED:
            return (
                f"After the data end, from about {at} ({how}), {a} gives way to {b}; the data "
                f"see only {a}, forecasts beyond about {at} see {b}."
            )
        where = (
            "just before the data start"
            if loc < x0
            else "just after the data end"
            if loc > x1
            else ""
        )
        return f"From about {at} ({how}{', ' + where if where else ''}), {a} gives way to {b}."
    s, e = c.params["start"], c.params["end"]
    grid = np.linspace(x0, x1, 512) if x1 > x0 else np.array([x0])
    u = c.weight(1, np.concatenate([grid, dataset.x]))
    ps, pe = say_position(s, dataset, years), say_position(e, dataset, years)
    how = _transition(c, dataset, years, plural=True)
    if e <= s:
        return (
            f"An empty change-window (its start, about {ps}, is after its end, about {pe}) "
            f"has no effect: {a} throughout."
        )
    if float(u.max()) < _SETTLED:
        if e < x0:
            return (
                f"A change-window between about {ps} and {pe}, before the data start, has no "
                f"effect on the data: they see only {a}."
            )
        if s > x1:
            return (
                f"After the data end, between about {ps} and {pe} ({how}), {b} replaces {a}; "
                f"the data see only {a}."
            )
        return (
            f"A change-window between about {ps} and {pe} ({how}) is too narrow to show in "
            f"the data: they see only {a}."
        )
    if float(u.min()) > 1 - _SETTLED:
        return (
            f"A change-window between about {ps} and {pe} covers all the data: they see "
            f"only {b}; {a} holds outside it."
        )
    start = ps + (" (before the data start)" if s < x0 else "")
    end = pe + (" (after the data end)" if e > x1 else "")
    return f"Between about {start} and {end} ({how}), {b} replaces {a}."


# --- the whole model ----------------------------------------------------------------


def describe_fit(fit: FitResult, dataset: Dataset) -> list[str]:
    """Plain-language sentences: one per change operator, one per additive term, then
    one on the noise.

    Lengths are in x's units, said as years (and months) when x looks like calendar
    years. Factors that are constant on the data (:func:`flat_factors`) are named, not
    described as structure, and a PER whose period exceeds the data's span is said as
    slow variation. Each term sentence ends with its share of the variance of the fitted mean
    (see the module docstring); the noise sentence gives its standard deviation in
    y's original units.

    A model with change operators (:func:`fit_changes`) first gets one sentence per
    operator saying where and how the series changes, from the terms on its two sides
    ("From about 1973.4 (over ~0.80 years (9.6 months)), a rising linear trend gives
    way to a periodic component with period 1.00 year (12.0 months)."; for a window
    "Between about 1971.2 and 1973.9 (...), B replaces A."), and each term sentence
    says where the term is active ("..., active only before the change-point at
    ~1973.4"); the slope of a trend is that of the trend where it acts. A term that
    its change operators switch off on the whole data is said so; its factors are then
    described as fitted (what forecasts there would see), none as constant on the data.
    """
    if not fit.ok:
        return [f"The fit of {fit.expression} failed: {fit.error}"]
    years = in_years(dataset)
    shares, means = term_shares(fit, dataset)
    flats = flat_factors(fit, dataset)
    changes = fit_changes(fit, dataset)
    conds = term_conditions(changes, len(fit.terms))
    weights = [term_weight(cs, dataset.x) for cs in conds]
    off = [w is not None and float(w.max()) < _SETTLED for w in weights]
    flats = [set() if o else f for f, o in zip(flats, off)]
    noise = noise_terms(fit)
    prior = term_prior_variances(fit, dataset.x)  # standardised y
    noise_sd = [np.sqrt(v) * dataset.y_std for v in prior]
    nouns = [
        _noise_growth(t, dataset, years)[1] if n else _term_noun(t, m, dataset, years, f, w)
        for t, m, f, w, n in zip(fit.terms, means, flats, weights, noise)
    ]
    out = [_describe_change(c, nouns, conds, dataset, years) for c in changes]
    if all(noise) and not changes:  # the white-noise model: WN alone
        total = math.sqrt(float(prior[0][0]) + fit.noise_variance)
        out.append(
            "White noise around the mean: the model finds no structure. With the observation "
            f"noise, its standard deviation is {total * dataset.y_std:.3g} "
            f"{dataset.y_column} units."
        )
        return out
    for i, (term, share, m, flat) in enumerate(zip(fit.terms, shares, means, flats)):
        if noise[i]:
            out.append(_describe_noise(term, noise_sd[i], conds[i], dataset, years, off[i]))
            continue
        sentence = _describe_term(term, m, dataset, years, flat, weights[i])
        if conds[i]:
            sentence += ", " + say_active_range(conds[i], dataset, years)
            if off[i] and not sentence.endswith("switched off)"):
                sentence += ", so it does not act on the data"
        out.append(f"{sentence}; it explains {100 * share:.1f}% of the fitted mean's variance.")
    sd = math.sqrt(fit.noise_variance) * dataset.y_std
    out.append(
        f"Observation noise with standard deviation {sd:.3g} {dataset.y_column} units "
        f"({math.sqrt(fit.noise_variance):.3g} of y's standard deviation)."
    )
    return out
