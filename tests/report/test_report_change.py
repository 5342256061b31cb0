"""The report's words and plots for change-points and change-windows (issue 17, item 3).

Planted series: a yearly sine that turns into a linear trend at 1968 (fitted as
``CP(PER, LIN)``), and a yearly sine switched on between 1965 and 1970 (``CW(C, PER)``).
"""

from __future__ import annotations

import re

import matplotlib
import numpy as np
import pytest
import torch
from conftest import fit_from_params

from prolas import report
from prolas.data import Dataset
from prolas.expr import parse
from prolas.gp import anatomy, fit_gp
from prolas.gp.natural import HELD_SPANS

matplotlib.use("Agg")

X = np.linspace(1960.0, 1975.0, 150)
CHANGE = 1968.0
WINDOW = (1965.0, 1970.0)


def _planted_cp() -> Dataset:
    rng = np.random.default_rng(0)
    y = np.where(X < CHANGE, np.sin(2 * np.pi * X), 0.8 * (X - CHANGE))
    return Dataset.from_arrays(X, y + 0.05 * rng.standard_normal(X.size), name="cp")


def _planted_cw() -> Dataset:
    rng = np.random.default_rng(1)
    inside = (X > WINDOW[0]) & (X < WINDOW[1])
    y = np.where(inside, np.sin(2 * np.pi * X), 0.0)
    return Dataset.from_arrays(X, y + 0.05 * rng.standard_normal(X.size), name="cw")


def _cw(start: float, end: float, width: float) -> tuple[dict, dict]:
    out = {"kernel": "CW_OUTSIDE", "start": start, "end": end, "width": width}
    return out, {**out, "kernel": "CW_INSIDE"}


def _cp(location: float, width: float) -> tuple[dict, dict]:
    before = {"kernel": "CP_BEFORE", "location": location, "width": width}
    return before, {**before, "kernel": "CP_AFTER"}


PER = {"kernel": "PER", "lengthscale": 1.0, "period": 1.0}
LIN = {"kernel": "LIN", "offset": 1968.0}


def _cp_fit(first: dict, second: dict, location: float, width: float, n: int):
    """``CP(first, second)`` at unit variances from its parameters (no optimisation)."""
    before, after = _cp(location, width)
    return fit_from_params(
        f"CP({first['kernel']}, {second['kernel']})",
        [
            {"variance": 1.0, "factors": [before, first]},
            {"variance": 1.0, "factors": [after, second]},
        ],
        n,
    )


@pytest.fixture(scope="module")
def cp_fit():
    torch.set_num_threads(1)
    ds = _planted_cp()
    fit = fit_gp(parse("CP(PER, LIN)"), ds)
    assert fit.ok
    return ds, fit


@pytest.fixture(scope="module")
def cw_fit():
    torch.set_num_threads(1)
    ds = _planted_cw()
    # warm-started from a rough window (1963-1972), so the test is about the words
    rough_out, rough_in = _cw(1963.0, 1972.0, 0.5)
    guess = fit_from_params(
        "CW(C, PER)",
        [{"variance": 0.1, "factors": [rough_out]}, {"variance": 1.0, "factors": [rough_in, PER]}],
        ds.n,
    )
    fit = fit_gp(parse("CW(C, PER)"), ds, init=guess)
    assert fit.ok
    return ds, fit


# --- words ---------------------------------------------------------------------------------


def test_planted_change_point_is_described_at_its_place_in_order(cp_fit):
    ds, fit = cp_fit
    lines = report.describe_fit(fit, ds)
    assert len(lines) == 1 + len(fit.terms) + 1  # the change, each term, the noise
    change = lines[0]
    m = re.match(r"From about (\d{4}\.\d) \(", change)
    assert m, change
    assert abs(float(m.group(1)) - CHANGE) <= 0.3
    # periodic before, linear after, in that order
    head, _, tail = change.partition(" gives way to ")
    assert "periodic component with period 1.00 year" in head and "linear" not in head
    assert "rising linear trend" in tail and "periodic" not in tail
    per, lin = lines[1:3]
    assert per.startswith("A periodic component") and "active only before the change-point" in per
    assert lin.startswith("A linear trend (rising") and "active only after the change-point" in lin
    # the slope is that of the trend after the change (0.8 per year), not over all the data
    slope = float(re.search(r"about ([\d.]+) y units per x unit", lin).group(1))
    assert slope == pytest.approx(0.8, rel=0.1)
    assert "noise" in lines[-1]


def test_planted_change_window_is_described_with_its_start_and_end(cw_fit):
    ds, fit = cw_fit
    change, *terms, noise = report.describe_fit(fit, ds)
    m = re.match(r"Between about (\d{4}\.\d) and (\d{4}\.\d) \(", change)
    assert m, change
    assert abs(float(m.group(1)) - WINDOW[0]) <= 0.3
    assert abs(float(m.group(2)) - WINDOW[1]) <= 0.3
    assert change.endswith(
        "a periodic component with period 1.00 year (12.0 months) replaces a constant offset."
    )
    outside, inside = terms
    assert outside.startswith("A constant offset, active only outside the change-window ~1965")
    assert "active only inside the change-window ~1965" in inside and "periodic" in inside
    assert "noise" in noise


@pytest.mark.parametrize(
    "location, expected",
    [
        (
            1950.0,
            "A change-point at about 1950.0 (over ~0.50 years (6.0 months)), before the "
            "data start, has no effect on the data",
        ),
        (1959.9, "From about 1959.9 (over ~0.50 years (6.0 months), just before the data start)"),
        (1990.0, "After the data end, from about 1990.0"),
    ],
)
def test_change_points_outside_the_data_are_said_so(location, expected):
    fit = _cp_fit(LIN, PER, location, 0.5, X.size)
    lines = report.describe_fit(fit, _planted_cp())
    assert lines[0].startswith(expected), lines[0]
    if location == 1990.0:  # the data see the trend; forecasts after 1990 the cycle
        assert "the data see only a rising linear trend" in lines[0]
        assert "forecasts beyond about 1990.0 see a periodic component" in lines[0]
        assert lines[2].startswith("A periodic component")  # described, not "constant"
        assert "(after the data end), so it does not act on the data" in lines[2]


def test_windows_outside_or_around_the_data():
    ds = _planted_cp()

    def first(start: float, end: float) -> str:
        out, inside = _cw(start, end, 0.2)
        fit = fit_from_params(
            "CW(LIN, PER)",
            [{"variance": 1.0, "factors": [out, LIN]}, {"variance": 1.0, "factors": [inside, PER]}],
            ds.n,
        )
        return report.describe_fit(fit, ds)[0]

    assert "before the data start, has no effect on the data" in first(1950.0, 1955.0)
    assert first(1980.0, 1985.0).startswith("After the data end, between about 1980.0 and 1985.0")
    assert "covers all the data" in first(1950.0, 1990.0)
    assert first(1970.0, 1965.0).startswith("An empty change-window")
    assert first(1955.0, 1965.0).startswith(
        "Between about 1955.0 (before the data start) and 1965.0"
    )


def test_nested_change_points_and_the_constant():
    ds = _planted_cp()
    b0, a0 = _cp(1964.0, 0.1)
    b1, a1 = _cp(1971.0, 0.1)
    fit = fit_from_params(
        "CP(LIN, CP(C, PER))",
        [
            {"variance": 1.0, "factors": [b0, LIN]},
            {"variance": 1.0, "factors": [a0, b1]},
            {"variance": 1.0, "factors": [a0, a1, PER]},
        ],
        ds.n,
    )
    outer, inner, lin, const, per, _ = report.describe_fit(fit, ds)
    assert outer == (
        "From about 1964.0 (over ~0.10 years (1.2 months)), a rising linear trend gives way to "
        "a constant offset (until about 1971.0) and a periodic component with period 1.00 year "
        "(12.0 months) (from about 1971.0)."
    )
    assert inner.startswith("From about 1971.0 (over ~0.10 years (1.2 months)), a constant offset")
    assert "active only before the change-point at ~1964.0" in lin
    assert const.startswith(
        "A constant offset, active only between the change-points at ~1964.0 and ~1971.0"
    )
    # after 1964 and after 1971 is after 1971
    assert "active only after the change-point at ~1971.0;" in per
    c = fit_from_params("C", [{"variance": 1.0, "factors": [{"kernel": "C"}]}], ds.n)
    assert report.describe_fit(c, ds)[0].startswith("A constant offset; it explains")


def test_a_gradual_change_points_band_is_named_in_the_legend(cp_fit):
    """The fixture's change is abrupt (its band unnamed, above); the same model with a
    transition of two years gets a band the legend names, ±2 widths around it."""
    import matplotlib.pyplot as plt

    ds, _ = cp_fit
    fit = _cp_fit(PER, LIN, 1966.0, 0.5, ds.n)
    fig = report.fit_figure(fit, ds)
    try:
        texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert "change-point ~1966.0" in texts and "transition ~1965.0 to 1967.0" in texts
    finally:
        plt.close(fig)


def test_change_positions_in_x_units_when_x_is_not_years():
    x = np.linspace(0.0, 12.0, 60)
    ds = Dataset.from_arrays(x, np.where(x < 6.3, np.sin(x), 0.5 * x))
    before, after = _cp(6.3, 0.2)
    fit = fit_from_params(
        "CP(LIN, PER)",
        [{"variance": 1.0, "factors": [before, LIN]}, {"variance": 1.0, "factors": [after, PER]}],
        ds.n,
    )
    assert report.describe_fit(fit, ds)[0].startswith("From about 6.3 (over ~0.2 (x units)), ")


# --- plots ---------------------------------------------------------------------------------


def _vlines_at(ax, x: float) -> list:
    return [ln for ln in ax.lines if np.allclose(ln.get_xdata(), x) and len(ln.get_xdata()) == 2]


def test_fit_and_component_plots_mark_the_change_point(cp_fit):
    import matplotlib.pyplot as plt

    ds, fit = cp_fit
    (change,) = anatomy.fit_changes(fit)
    loc, width = change.params["location"], change.params["width"]
    fig = report.fit_figure(fit, ds)
    try:
        ax = fig.axes[0]
        (line,) = _vlines_at(ax, loc)
        assert line.get_linestyle() == "--"
        assert line.get_label() == f"change-point ~{loc:.1f}"
        assert f"change-point ~{loc:.1f}" in [t.get_text() for t in ax.get_legend().get_texts()]
        # the ±2-width band, capped to the axis
        lo, hi = ax.get_xlim()
        bands = [p.get_x() for p in ax.patches]
        assert any(b == pytest.approx(max(lo, loc - 2 * width)) for b in bands)
        # a gradual transition's band is named in the legend, an abrupt one's is not
        gradual = 4 * width >= ds.spacing
        texts = [t.get_text() for t in ax.get_legend().get_texts()]
        named = f"transition ~{loc - 2 * width:.1f} to {loc + 2 * width:.1f}"
        assert (named in texts) == gradual and any(
            t.startswith("transition") for t in texts
        ) == gradual
    finally:
        plt.close(fig)
    fig = report.components_figure(fit, ds)
    try:
        assert len(fig.axes) == 2
        for ax in fig.axes:  # both terms are switched by the change-point
            assert len(_vlines_at(ax, loc)) == 1
        titles = [ax.get_title() for ax in fig.axes]
        assert titles[0].startswith(f"PER  (before the change-point at ~{loc:.1f})")
        assert titles[1].startswith(f"LIN  (after the change-point at ~{loc:.1f})")
    finally:
        plt.close(fig)


def test_plots_mark_windows_and_skip_changes_outside_the_axis(cw_fit, tmp_path):
    import matplotlib.pyplot as plt

    ds, fit = cw_fit
    (change,) = anatomy.fit_changes(fit)
    start, end = change.params["start"], change.params["end"]
    fig = report.fit_figure(fit, ds)
    try:
        (span,) = [p for p in fig.axes[0].patches if p.get_label().startswith("change-window")]
        assert span.get_label() == f"change-window ~{start:.1f}-{end:.1f}"
        assert span.get_x() == pytest.approx(start) and span.get_width() == pytest.approx(
            end - start
        )
    finally:
        plt.close(fig)
    # a change-point after the plotted range is not drawn
    far = _cp_fit(LIN, PER, 2010.0, 0.5, ds.n)
    fig = report.fit_figure(far, ds)
    try:
        assert not _vlines_at(fig.axes[0], 2010.0)
        assert fig.axes[0].get_xlim()[1] < 1990.0
    finally:
        plt.close(fig)
    # the files are still written
    assert report.plot_fit(tmp_path / "fit.png", fit, ds).stat().st_size > 0
    assert report.plot_components(tmp_path / "components.png", fit, ds).stat().st_size > 0


def test_held_transitions_are_said_to_lie_beyond_what_the_data_see():
    """A transition held off because the data cannot see it (prolas.gp.fit.hold_unseen)
    is not said at its stand-in position: a window open at the data's end stays open in
    forecasts, a change-point after the data never happens."""
    ds = _planted_cw()
    far = ds.x[-1] + HELD_SPANS * ds.span
    outside, inside = _cw(1970.0, far, 0.02)
    fit = fit_from_params(
        "CW(C, PER)",
        [{"variance": 0.01, "factors": [outside]}, {"variance": 1.0, "factors": [inside, PER]}],
        X.size,
    )
    lines = report.describe_fit(fit, ds)
    assert lines[0].startswith("From about 1970.0 (abruptly), a periodic component"), lines[0]
    assert "to the end of the data, and forecasts continue a periodic component" in lines[0]
    assert str(round(far)) not in " ".join(lines)
    assert "active only after the start of the change-window at ~1970.0" in lines[2]
    import matplotlib.pyplot as plt

    fig = report.fit_figure(fit, ds)
    try:  # the plot marks the window from its start to the axis' end
        (span,) = [p for p in fig.axes[0].patches if p.get_label().startswith("change-window")]
        assert span.get_label() == "change-window from ~1970.0 on"
        assert span.get_x() + span.get_width() == pytest.approx(fig.axes[0].get_xlim()[1])
    finally:
        plt.close(fig)
    before, after = _cp(far, 0.5)
    fit = fit_from_params(
        "CP(LIN, PER)",
        [{"variance": 1.0, "factors": [before, LIN]}, {"variance": 1.0, "factors": [after, PER]}],
        X.size,
    )
    lines = report.describe_fit(fit, ds)
    assert re.fullmatch(
        r"A change-point from (a \w+ linear trend) to a periodic component .* lies too far "
        r"beyond the data for them to see it: \1 throughout, forecasts included\.",
        lines[0],
    ), lines[0]
    assert "never active" in lines[2]
