"""Where a fit starts: data-informed random restarts and starts from related fits.

* :func:`initial_thetas`: R stratified random initialisations (periods from a Lomb-Scargle
  periodogram, change locations at the data's candidate break points, change windows at
  its candidate windows, lengthscales from
  two sample spacings to the span, LIN offsets inside the data).
* :func:`inherit_theta`: a start from a related fitted expression (the terms they share
  take its values; new terms start small).
* :func:`embed_theta`: a start *exactly at* a fitted sub-model S of the expression E
  (:mod:`prolas.nesting`): E's extra items at their limits, so E's log-likelihood there
  equals S's. A fit started there cannot end below S.
"""

from __future__ import annotations

import math
import threading
import zlib
from collections.abc import Sequence

import numpy as np

from prolas.expr import CHANGE_FACTORS, factor_group, factor_kernel, parse
from prolas.gp.gram import GramModel
from prolas.gp.natural import ParameterSpace, natural_to_theta
from prolas.gp.results import FitResult, TermFit
from prolas.kernels.spec import DIMENSIONLESS, LENGTH
from prolas.nesting import COLLAPSED_A, Embedding

__all__ = [
    "lomb_scargle",
    "candidate_breaks",
    "candidate_periods",
    "candidate_windows",
    "change_locations",
    "collapsed_change_theta",
    "embed_theta",
    "inherit_theta",
    "initial_thetas",
    "parameter_keys",
    "parameter_streams",
    "window_ends",
    "window_starts",
]


def lomb_scargle(t: np.ndarray, y: np.ndarray, freqs: np.ndarray) -> np.ndarray:
    """The Lomb-Scargle periodogram of ``y`` (zero mean) at ``t``, one value per frequency:

        P(f) = 1/2 [ (sum_n y_n cos w(t_n - tau))^2 / sum_n cos^2 w(t_n - tau)
                   + (sum_n y_n sin w(t_n - tau))^2 / sum_n sin^2 w(t_n - tau) ],

    ``w = 2 pi f``, ``tan(2 w tau) = sum_n sin 2 w t_n / sum_n cos 2 w t_n`` (Scargle 1982).
    Every sum is expanded in ``cos w t_n`` and ``sin w t_n`` (two transcendental
    evaluations per frequency and point instead of six), vectorised over blocks of
    frequencies; equal to ``scipy.signal.lombscargle`` to rounding, ~10x faster.
    """
    t = np.asarray(t, dtype=np.float64) - float(np.min(t))
    y = np.asarray(y, dtype=np.float64)
    out = np.empty(freqs.size)
    for lo in range(0, freqs.size, 256):
        w = 2.0 * np.pi * freqs[lo : lo + 256, None]
        c, s = np.cos(w * t), np.sin(w * t)
        yc, ys = c @ y, s @ y
        cc = np.einsum("ij,ij->i", c, c)
        cs = np.einsum("ij,ij->i", c, s)
        ss = t.size - cc
        two_tau = np.arctan2(2.0 * cs, cc - ss)  # 2 w tau
        a, b = np.cos(0.5 * two_tau), np.sin(0.5 * two_tau)  # cos w tau, sin w tau
        num_c, num_s = a * yc + b * ys, a * ys - b * yc
        den_c = a * a * cc + 2.0 * a * b * cs + b * b * ss
        den_s = t.size - den_c
        out[lo : lo + 256] = 0.5 * (
            num_c**2 / np.maximum(den_c, 1e-300) + num_s**2 / np.maximum(den_s, 1e-300)
        )
    return out


#: candidate_periods of the last few data sets: a search fits tens of expressions on the
#: same points, and a fit asks for its starts and for its hops.
_PERIODS_CACHE: dict[tuple, np.ndarray] = {}
#: a fit's parallel minimisations (:func:`prolas.gp.fit.fit_gp`, ``workers``) share it
_PERIODS_LOCK = threading.Lock()


#: a peak counts towards a harmonic score above ten times its running-median background
_SIGNIFICANT_LOG_POWER = math.log(10.0)


def candidate_periods(
    t: np.ndarray, y: np.ndarray, floor: float, k: int = 6, hints: tuple[float, ...] = ()
) -> np.ndarray:
    """:func:`periodogram_candidates`, after the ``hints``; remembered for the last 16 data
    sets and hints (a copy).

    ``hints`` (units of ``t``; a search view's significant periods of the full series,
    :attr:`prolas.data.Dataset.period_hints`) come first, those at or above ``floor``, in
    their order: they were measured on all points, the periodogram here only on the points
    fitted. The fitted points' own candidates within 5 % of a hint are left out, so that
    restarts cycling through the list start at distinct periods. The hints are part of the
    cache key: two views of the same points with different hints never share an entry.
    """
    t = np.ascontiguousarray(t, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    hints = tuple(float(h) for h in hints)
    key = (t.tobytes(), y.tobytes(), float(f"{floor:.12g}"), int(k), hints)
    with _PERIODS_LOCK:
        cached = _PERIODS_CACHE.get(key)
    if cached is not None:
        return cached.copy()
    if hints:
        first = [h for h in hints if h >= floor]
        # the fitted points' own candidates, less those a hint stands for (within 5 %)
        own = [
            float(p)
            for p in candidate_periods(t, y, floor, k)
            if all(abs(p / h - 1.0) > 0.05 for h in first)
        ]
        periods = np.array(first + own)
    else:
        periods = periodogram_candidates(t, y, floor, k)
    with _PERIODS_LOCK:
        if len(_PERIODS_CACHE) >= 16:
            del _PERIODS_CACHE[next(iter(_PERIODS_CACHE))]
        _PERIODS_CACHE[key] = periods
    return periods.copy()


def periodogram_candidates(t: np.ndarray, y: np.ndarray, floor: float, k: int = 6) -> np.ndarray:
    """Periods (in the units of ``t``) worth starting a PER factor at, best first, plus a grid.

    A Lomb-Scargle periodogram of the linearly detrended series on 2 000 geometrically
    spaced frequencies from ``1/span`` to ``min(1/floor, 1/(2 smallest spacing))`` (the
    Nyquist frequency; irregular inputs are fine) ranks peaks two ways, taken in turn:

    * **harmonic score**: a seasonal pattern that is not a sinusoid puts its power at f,
      2f, 3f, ...; ``score(f) = sum_{h=1..4} max(prom(h f) - log 10, 0)``, where ``prom``
      is the log power above its running median over 0.3 decades (the red background of
      trends and slow cycles), so the fundamental of a sharp seasonal line ranks first
      even when slow cycles carry more power, and noise (rarely ten times its
      background) adds nothing; ``f`` itself must be such a line (a subharmonic, whose
      "harmonics" are another fundamental's, scores 0);
    * **power**: the strongest peaks as they are (slow cycles, a single sinusoid).

    Peaks closer than one resolution width ``1/span`` in frequency to a better one are side
    lobes and dropped. Then a coarse grid, and periods beyond the span (PER then acts as a
    smooth kernel).
    """
    from scipy.ndimage import maximum_filter1d, median_filter

    span = float(t.max() - t.min())
    resid = y - np.polyval(np.polyfit(t, y, 1), t)
    # up to the Nyquist frequency of the closest inputs: above it, evenly spaced inputs
    # show only aliases of what lies below (and, summed as harmonics, outrank it); a
    # search view's dense windows (docs/long-series.md) keep their short periods
    gaps = np.diff(np.sort(t))
    spacing = float(gaps[gaps > 0].min()) if np.any(gaps > 0) else 0.0
    f_lo, f_hi = 1.0 / span, min(1.0 / max(floor, 1e-12), 0.5 / max(spacing, 1e-12))
    # a period that repeats in the data and is resolved by them needs f_lo < f < f_hi
    grid = np.geomspace(max(floor * 1.5, span / 50), span / 2, 4)
    if f_hi < 2.0 * f_lo:  # a handful of points: less than an octave to look at
        return np.array(list(grid) + [2.0 * span, 5.0 * span])
    freqs = np.geomspace(f_lo, f_hi, 2000)
    power = lomb_scargle(t, resid - resid.mean(), freqs)
    log_power = np.log(np.maximum(power, 1e-300))
    per_decade = freqs.size / max(math.log10(f_hi / f_lo), 1e-12)
    background = median_filter(log_power, size=max(int(0.3 * per_decade) | 1, 5), mode="nearest")
    # a harmonic may sit a grid step or two off h*f: take the prominence's local maximum
    prominence = maximum_filter1d(
        np.maximum(log_power - background, 0.0), size=max(int(0.01 * per_decade) | 1, 3)
    )
    # only what stands clearly above the background counts: the log of a noise
    # periodogram's ordinate scatters by ~1, and four harmonics of noise summed would
    # otherwise outrank one clean sinusoid
    excess = np.maximum(prominence - _SIGNIFICANT_LOG_POWER, 0.0)
    harmonic = np.zeros_like(prominence)
    for h in range(1, 5):
        inside = h * freqs <= f_hi
        harmonic[inside] += np.interp(np.log(h * freqs[inside]), np.log(freqs), excess, right=0.0)
    harmonic[excess <= 0.0] = 0.0  # a fundamental is itself a line (no subharmonics)

    def ranked(score: np.ndarray) -> list[int]:
        return [
            i
            for i in np.argsort(-score, kind="stable")
            if 0 < i < freqs.size - 1 and score[i] >= score[i - 1] and score[i] >= score[i + 1]
        ]

    chosen: list[tuple[int, int]] = []  # (index, harmonics that ranked it)
    for pair in zip(ranked(harmonic), ranked(power)):
        for i, harmonics in zip(pair, (4, 1)):
            if len(chosen) < k and all(abs(freqs[i] - freqs[j]) > f_lo for j, _ in chosen):
                chosen.append((int(i), harmonics))
        if len(chosen) >= k:
            break
    periods = [1.0 / f for f in _refined(t, resid - resid.mean(), freqs, chosen, f_lo, f_hi)]
    # a coarse grid, plus periods beyond the span (PER then acts as a smooth kernel)
    return np.array(periods + list(grid) + [2.0 * span, 5.0 * span])


def _refined(
    t: np.ndarray,
    y: np.ndarray,
    freqs: np.ndarray,
    chosen: list[tuple[int, int]],
    width: float,
    f_hi: float,
) -> list[float]:
    """Each chosen frequency ``freqs[i]`` moved to the maximum of ``sum_{h <= H} P(h f)``
    over ``f`` within ``width / 2`` of it (101 points; ``P``: :func:`lomb_scargle`; ``H``:
    the harmonics that ranked it, those below ``f_hi``). The ranking's grid and its
    smoothing place a peak to about a percent; a PER factor with a short lengthscale needs
    its period to a small fraction of that (its likelihood falls within a fraction of a
    cycle's drift over the data)."""
    offsets = np.linspace(-0.5 * width, 0.5 * width, 101)
    out = []
    for i, harmonics in chosen:
        grid = np.maximum(freqs[i] + offsets, 1e-300)
        hs = [h for h in range(1, harmonics + 1) if h * grid[-1] <= f_hi] or [1]
        power = lomb_scargle(t, y, np.concatenate([h * grid for h in hs]))
        out.append(float(grid[int(np.argmax(power.reshape(len(hs), -1).sum(0)))]))
    return out


def parameter_keys(model: GramModel) -> list[str]:
    """A name for each entry of ``theta`` that the same parameter has in every expression
    holding it: ``"LIN*SE#0/SE#0/lengthscale"`` is the lengthscale of the first SE factor of
    the first ``LIN*SE`` term, wherever that term stands; ``"CP#0/location"`` the first
    change-point's location; ``"noise"`` the noise.

    Random starts draw each parameter from a stream seeded by its name
    (:func:`initial_thetas`), so that ``C + X`` and ``X`` start their shared parameters at
    the same values: common random numbers, which make the fits of nested models (and the
    comparison of their BICs) differ by what the models differ in, not by their draws.
    """
    keys = []
    term_seen: dict[str, int] = {}
    term_key: list[str] = []
    for names in model.terms:
        signature = "*".join(sorted(factor_kernel(n) for n in names))
        term_key.append(f"{signature}#{term_seen.get(signature, 0)}")
        term_seen[signature] = term_seen.get(signature, 0) + 1
    group_rank: dict[int, str] = {}
    for p in model.params:
        if p.group >= 0 and p.group not in group_rank:
            rank = sum(1 for g, op in group_rank.items() if op.startswith(p.kernel + "#"))
            group_rank[p.group] = f"{p.kernel}#{rank}"
    for p in model.params:
        if p.group >= 0:
            keys.append(f"{group_rank[p.group]}/{p.name}")
        elif p.name == "noise":
            keys.append("noise")
        elif p.name == "variance":
            keys.append(f"{term_key[p.term]}/variance")
        else:
            kinds = [factor_kernel(n) for n in model.terms[p.term]]
            kind = kinds[p.factor]
            occurrence = kinds[: p.factor].count(kind)
            keys.append(f"{term_key[p.term]}/{kind}#{occurrence}/{p.name}")
    return keys


def parameter_streams(model: GramModel, seed: Sequence[int]) -> list[np.random.Generator]:
    """One random generator per entry of ``theta``, seeded by ``seed`` and the entry's
    :func:`parameter_keys` name (CRC-32: the same in every process and Python)."""
    return [
        np.random.default_rng([*map(int, seed), zlib.crc32(key.encode())])
        for key in parameter_keys(model)
    ]


def initial_thetas(
    model: GramModel,
    y: np.ndarray,
    floor: float,
    seed: Sequence[int],
    R: int,
    hints: tuple[float, ...] = (),
) -> np.ndarray:
    """``R x P`` random, data-informed initialisations in the scaled units of ``model.t``.

    Lengthscales log-uniform over [min(0.02, 2Δ), 1] spans; periods cycle through the
    periodogram peaks (with 3 % jitter) so restarts cover different periodicities, the
    full series' periods ``hints`` (scaled units) first and without jitter; LIN offsets
    inside the data range; term variances ~ 1/#terms; noise in [1e-3, 0.2]. Uniform
    draws are stratified, so that R restarts cover each range evenly. Each parameter
    draws from its own stream (:func:`parameter_streams`), so a parameter that two
    expressions share starts at the same R values in both.
    """
    has_period = any(p.name == "period" for p in model.params)
    periods = candidate_periods(model.t, y, floor, hints=hints) if has_period else np.empty(0)
    n_hints = sum(1 for p in hints if p >= floor)  # the first entries of ``periods``
    breaks = (
        candidate_breaks(model.t, y) if any(p.name == "location" for p in model.params) else None
    )
    has_window = any(p.name == "start" for p in model.params)
    windows = candidate_windows(model.t, y) if has_window else None
    n_terms = len(model.terms)
    theta = np.empty((R, model.size))

    streams = parameter_streams(model, seed)
    rng = streams[0]

    def uniform(lo: float, hi: float) -> np.ndarray:
        # stratified (Latin hypercube) draws: each 1/R of the range holds one restart
        u = (rng.permutation(R) + rng.uniform(0.0, 1.0, R)) / R
        return lo + (hi - lo) * u

    def logu(lo: float, hi: float) -> np.ndarray:
        return uniform(math.log(lo), math.log(hi))

    # shortest lengthscale worth starting from: two sample spacings (Nyquist, as PER)
    shortest = min(0.02, max(floor, 1e-3))
    per_index: dict[tuple[int, int], int] = {}
    starts: dict[int, np.ndarray] = {}
    for k, p in enumerate(model.params):
        rng = streams[k]
        if p.name == "location":
            theta[:, k] = change_locations(breaks, p.group, rng, uniform(0.05, 0.95))
        elif p.name == "start":
            starts[p.group] = window_starts(windows, p.group, rng, uniform(0.05, 0.8))
            theta[:, k] = starts[p.group]
        elif p.name == "end":  # the candidate window's end, or a duration in spans
            durations = np.exp(logu(0.05, 0.5))
            theta[:, k] = window_ends(windows, p.group, rng, starts[p.group], durations)
        elif p.name == "width":
            theta[:, k] = logu(0.003, 0.05)
        elif p.name == "variance":
            theta[:, k] = logu(0.3, 1.5) - math.log(n_terms)
        elif p.name == "noise":
            theta[:, k] = logu(1e-3, 0.2)
        elif p.name == "offset":
            theta[:, k] = uniform(0.0, 1.0)
        elif p.name == "alpha":
            theta[:, k] = logu(0.1, 10.0)
        elif p.name == "lengthscale" and p.unit == DIMENSIONLESS:  # PER's, PERC's shape
            theta[:, k] = np.log(uniform(0.5, 2.0))
        elif p.name == "lengthscale":
            theta[:, k] = logu(shortest, 1.0)
        elif p.name == "period":
            # Half the restarts of the first PER factor start at the strongest
            # periodogram peak; the others (and later PER factors) cycle through the
            # remaining candidates, so restarts cover several periods.
            which = per_index.setdefault((p.term, p.factor), len(per_index))
            idx = (np.arange(R) // 2 + which) % len(periods)
            if which == 0:
                idx[0::2] = 0
            jitter = np.exp(rng.normal(0, 0.03, R))
            # a hint was sharpened on all points (to ~1/span in frequency): a restart
            # starts exactly there, since 3 % off is many basins away on a long series
            jitter[idx < n_hints] = 1.0
            per = periods[idx] * jitter
            theta[:, k] = np.log(np.maximum(per, floor * 1.01))
    return np.vstack([model.clip(row) for row in theta])


def candidate_breaks(t: np.ndarray, y: np.ndarray, k: int = 4) -> np.ndarray:
    """Locations (units of ``t``) where the series most likely changes regime.

    For each split point on a grid over the inner 90 % of the range, a straight line
    is fitted on either side; the split's score is the Gaussian log-likelihood of the
    two pieces with their own residual variances, so changes of level, slope and noise
    all show. Returns the ``k`` best local maxima, best first.
    """
    grid = np.linspace(0.05, 0.95, 61) * (t.max() - t.min()) + t.min()

    def piece(mask: np.ndarray) -> float:
        tt, yy = t[mask], y[mask]
        if tt.size < 4:
            return -math.inf
        resid = yy - np.polyval(np.polyfit(tt, yy, 1), tt)
        return -0.5 * tt.size * math.log(max(float(np.mean(resid**2)), 1e-12))

    score = np.array([piece(t < b) + piece(t >= b) for b in grid])
    peaks = [
        i
        for i in range(len(grid))
        if math.isfinite(score[i])
        and (i == 0 or score[i] >= score[i - 1])
        and (i == len(grid) - 1 or score[i] >= score[i + 1])
    ]
    peaks.sort(key=lambda i: -score[i])
    return grid[peaks[:k]] if peaks else grid[[len(grid) // 2]]


def change_locations(
    breaks: np.ndarray | None, group: int, rng: np.random.Generator, spread: np.ndarray
) -> np.ndarray:
    """Initial change locations for ``R`` restarts: half at the data's candidate break
    points (cycling, with a little jitter; later groups start at later candidates), the
    other half ``spread`` evenly over the range."""
    out = np.array(spread, dtype=np.float64)
    if breaks is None or breaks.size == 0:
        return out
    R = out.size
    idx = (np.arange(R) // 2 + group) % breaks.size
    out[0::2] = breaks[idx[0::2]] + rng.normal(0.0, 0.01, out[0::2].size)
    return out


def candidate_windows(t: np.ndarray, y: np.ndarray, k: int = 4, grid: int = 41) -> np.ndarray:
    """``k x 2`` windows ``[a, b]`` (units of ``t``, best first) where the series most
    likely holds another regime than outside: the starts of a change window.

    Every window with both ends on a grid of ``grid`` points over the inner 90 % of the
    range is scored by the Gaussian log-likelihood of a three-piece model: a straight line
    inside with its own residual variance, and straight lines on the left and the right
    outside sharing one residual variance (one outside regime, as ``CW`` has)::

        score(a, b) = -n_in/2 log(RSS_in / n_in) - n_out/2 log((RSS_left + RSS_right) / n_out)

    Changes of level, slope and noise inside the window all show. Each piece needs four
    points, the inside and the outside each ``max(4, 3 %)`` of them. Windows are taken
    best first, each at least four grid steps from every one taken at one end or the
    other. Each piece's least-squares line comes from prefix sums, O(1) a window.
    """
    order = np.argsort(t, kind="stable")
    t = np.asarray(t, dtype=np.float64)[order]
    y = np.asarray(y, dtype=np.float64)[order]
    n, lo, hi = t.size, float(t.min()), float(t.max())
    points = np.linspace(0.05, 0.95, grid) * (hi - lo) + lo
    cut = np.searchsorted(t, points)  # a window [points[i], points[j]) holds cut[i]:cut[j]
    u = (t - t.mean()) / max(hi - lo, 1e-300)  # centred and scaled: sums without cancellation
    floor = 1e-12 * max(float(np.var(y)), 1e-300)

    def prefix(v: np.ndarray) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(v)])

    sums = [prefix(v) for v in (np.ones(n), u, u * u, y, u * y, y * y)]

    def rss(i: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Residual sum of squares of a least-squares line on points ``i:j``, and their count."""
        c, st, stt, sy, sty, syy = (s[j] - s[i] for s in sums)
        with np.errstate(divide="ignore", invalid="ignore"):
            cov_tt = stt - st * st / c
            cov_ty = sty - st * sy / c
            r = syy - sy * sy / c - np.where(cov_tt > 1e-12 * c, cov_ty**2 / cov_tt, 0.0)
        return np.maximum(np.nan_to_num(r), 0.0), c

    ii, jj = np.triu_indices(grid, k=1)
    a, b = cut[ii], cut[jj]
    rss_in, n_in = rss(a, b)
    rss_left, n_left = rss(np.zeros_like(a), a)
    rss_right, n_right = rss(b, np.full_like(b, n))
    n_out = n_left + n_right
    least = max(4, math.ceil(0.03 * n))
    ok = (n_in >= least) & (n_out >= least) & (n_left >= 4) & (n_right >= 4)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = -0.5 * n_in * np.log(np.maximum(rss_in / n_in, floor)) - 0.5 * n_out * np.log(
            np.maximum((rss_left + rss_right) / n_out, floor)
        )
    score = np.where(ok, score, -np.inf)
    taken: list[int] = []
    for w in np.argsort(-score, kind="stable"):
        if not np.isfinite(score[w]) or len(taken) == k:
            break
        if all(max(abs(ii[w] - ii[v]), abs(jj[w] - jj[v])) >= 4 for v in taken):
            taken.append(int(w))
    if not taken:  # too few points for any window: the middle half
        return np.array([[lo + 0.25 * (hi - lo), lo + 0.75 * (hi - lo)]])
    return np.stack([points[ii[taken]], points[jj[taken]]], axis=1)


def window_starts(
    windows: np.ndarray | None, group: int, rng: np.random.Generator, spread: np.ndarray
) -> np.ndarray:
    """Initial change-window starts for ``R`` restarts: half at the candidate windows'
    starts (:func:`candidate_windows`; cycling, later groups at later candidates, a little
    jitter), the other half ``spread``. :func:`window_ends` gives the same half the
    windows' ends."""
    out = np.array(spread, dtype=np.float64)
    if windows is None or windows.size == 0:
        return out
    idx = (np.arange(out.size) // 2 + group) % len(windows)
    out[0::2] = windows[idx[0::2], 0] + rng.normal(0.0, 0.01, out[0::2].size)
    return out


def window_ends(
    windows: np.ndarray | None,
    group: int,
    rng: np.random.Generator,
    starts: np.ndarray,
    durations: np.ndarray,
) -> np.ndarray:
    """Initial change-window ends for the restarts of :func:`window_starts`: the half that
    starts at a candidate window ends at its end (a little jitter), the others
    ``durations`` after their start."""
    out = np.asarray(starts, dtype=np.float64) + durations
    if windows is None or windows.size == 0:
        return out
    idx = (np.arange(out.size) // 2 + group) % len(windows)
    out[0::2] = windows[idx[0::2], 1] + rng.normal(0.0, 0.01, out[0::2].size)
    return out


def _term_affinity(names: tuple[str, ...], term: TermFit, used: bool) -> tuple[int, bool, int]:
    names = tuple(factor_kernel(n) for n in names)
    kinds = [f.kernel for f in term.factors]
    shared = sum(min(names.count(k), kinds.count(k)) for k in set(names))
    return shared, not used, -abs(len(kinds) - len(names))


def inherit_theta(
    model: ParameterSpace, parent: FitResult, default: np.ndarray, x0: float, s: float
) -> np.ndarray:
    """Start ``model`` from a fitted related expression (``parent``, natural units).

    A term the parent has too (the same factors) takes that term's variance and
    factor parameters. Every other term takes the factor parameters of the parent term
    it shares most factors with (a factor with no counterpart there takes the values
    of the same kernel elsewhere in the parent, else its ``default``), and that term's
    variance if no other child term has claimed it (``S -> S * B`` turns a term into
    another); a term that only adds to the parent (``S -> S + B``) starts with a tenth
    of the default variance. So when the child contains the parent's terms, the
    parent's fit is (almost) where the child starts. This is how CKS's expansions or a
    PROLAS edit reuse the work already done on ``S``.
    """
    theta = np.array(default, dtype=np.float64)
    if not parent.terms:
        return theta
    anywhere: dict[str, dict[str, float]] = {}
    for term in parent.terms:
        for f in term.factors:
            anywhere.setdefault(f.kernel, f.params)
    # first, the terms the parent has too claim their counterparts
    parent_kinds = [sorted(f.kernel for f in pt.factors) for pt in parent.terms]
    exact: dict[int, int] = {}
    for i, names in enumerate(model.terms):
        kinds = sorted(map(factor_kernel, names))
        b = next(
            (b for b, pk in enumerate(parent_kinds) if pk == kinds and b not in exact.values()),
            None,
        )
        if b is not None:
            exact[i] = b
    used: set[int] = set(exact.values())
    for i, names in enumerate(model.terms):
        # the parent term sharing most factors; ties go to an unused term, then to
        # the one closest in size (so LIN*PER*SE + LIN*SE maps onto itself)
        affinity = [_term_affinity(names, pt, b in used) for b, pt in enumerate(parent.terms)]
        best = exact.get(i, max(range(len(parent.terms)), key=affinity.__getitem__))
        source = parent.terms[best] if affinity[best][0] > 0 else None
        # a claimed term lends its shape but not its variance: the child adds a term
        adds = source is not None and i not in exact and best in used
        if source is not None:
            used.add(best)
        pool = list(source.factors) if source else []
        picked: list[dict[str, float] | None] = []
        for name in map(factor_kernel, names):
            match = next((f for f in pool if f.kernel == name), None)
            if match is not None:
                pool.remove(match)
                picked.append(match.params)
            else:
                picked.append(anywhere.get(name))
        for k, p in enumerate(model.params):
            if p.term != i:
                continue
            if p.name == "variance":
                if source is None or adds:
                    theta[k] = default[k] + math.log(0.1)
                else:
                    v = source.variance * s ** (2 * names.count("LIN"))
                    theta[k] = p.to_theta(max(v, 1e-12))
                continue
            params = picked[p.factor]
            if params is None or p.name not in params:
                continue
            value = float(params[p.name])
            if p.name == "offset":
                value = (value - x0) / s
            elif p.unit == LENGTH:  # periods, SE/RQ lengthscales (PER's shape has none)
                value = value / s
            if p.log and not value > 0:
                continue
            theta[k] = p.to_theta(value)
    # change operators: the k-th CP (CW) of the child starts where the parent's k-th was
    by_group: dict[int, tuple[str, dict[str, float]]] = {}
    for names, term in zip(parse(parent.expression).terms, parent.terms):
        for name, f in zip(names, term.factors):
            if (g := factor_group(name)) is not None:
                by_group.setdefault(g, (CHANGE_FACTORS[f.kernel], f.params))
    parent_changes: dict[str, list[dict[str, float]]] = {}
    for g in sorted(by_group):
        op, values = by_group[g]
        parent_changes.setdefault(op, []).append(values)
    rank: dict[int, int] = {}  # group -> its rank among the child's groups of that op
    for k, p in enumerate(model.params):
        if p.group < 0:
            continue
        if p.group not in rank:
            rank[p.group] = len({q.group for q in model.params if q.kernel == p.kernel} & set(rank))
        nth = rank[p.group]
        found = parent_changes.get(p.kernel, [])
        if nth < len(found) and p.name in found[nth]:
            value = float(found[nth][p.name])
            value = value / s if p.log else (value - x0) / s
            if not p.log or value > 0:
                theta[k] = p.to_theta(value)
    if parent.noise_variance is not None and parent.noise_variance > 0:
        theta[-1] = model.params[-1].to_theta(parent.noise_variance)
    lo, hi = np.array([(p.lower, p.upper) for p in model.params]).T
    return np.clip(theta, lo, hi)


def embed_theta(
    model: ParameterSpace,
    sub: FitResult,
    emb: Embedding,
    default: np.ndarray,
    x0: float,
    s: float,
) -> np.ndarray:
    """``theta`` of E (``model``) at which E's covariance on the data is that of the fitted
    sub-model S (``sub``, natural units), placed as :class:`prolas.nesting.Embedding` says.

    * a term of E reproducing a term of S takes its variance and, factor by factor, its
      shape parameters; an RQ reproducing an SE takes its lengthscale and alpha at the
      upper bound (RQ -> SE as alpha -> infinity);
    * a stationary factor with no counterpart has its lengthscale at the upper bound (1
      on the data); a term with no counterpart has its variance at the lower bound (a
      LIN factor of it centred on the data, so that its Gram matrix stays small);
    * a change operator reproducing one of S takes its transition(s) and width; one the
      data should see from one side only has its transitions at the edge of the box
      beyond the data and the narrowest width (its weights are then exactly 0 or 1 on
      the data: :func:`collapsed_change_theta`);
    * the noise is S's.

    Entries nothing here sets keep their ``default``. So ``log p(y | E, theta)`` equals
    S's log-likelihood up to the box edges (far below a nat; tests/gp/test_nesting.py).
    """
    theta = np.array(default, dtype=np.float64)
    sub_names = parse(sub.expression).terms
    sub_groups: dict[int, dict[str, float]] = {}
    for names, term in zip(sub_names, sub.terms):
        for name, f in zip(names, term.factors):
            if (g := factor_group(name)) is not None:
                sub_groups.setdefault(g, f.params)

    def put(k: int, value: float | None) -> None:
        if value is not None:
            theta[k] = value

    for k, p in enumerate(model.params):
        if p.group >= 0:
            state = emb.groups[p.group]
            if isinstance(state, str):
                theta[k] = collapsed_change_theta(p, state == COLLAPSED_A)
            else:
                put(k, natural_to_theta(p, sub_groups[state][p.name], x0, s))
            continue
        if p.name == "noise":
            put(k, natural_to_theta(p, sub.noise_variance, x0, s))
            continue
        source = emb.terms[p.term]
        if p.name == "variance":
            if source is None:
                theta[k] = p.lower
            else:
                n_lin = sum(factor_kernel(f) == "LIN" for f in model.terms[p.term])
                put(k, natural_to_theta(p, sub.terms[source].variance, x0, s, n_lin))
            continue
        if source is None:
            if p.name == "offset":
                theta[k] = 0.5  # the middle of the scaled data: (t - c)^2 <= 1/4
            continue
        j = emb.factors[p.term][p.factor]
        if j is None:  # at its limit: the factor is 1 on the data
            if p.name == "lengthscale":
                theta[k] = p.upper
            continue
        if p.factor in emb.rq_from_se[p.term] and p.name == "alpha":
            theta[k] = p.upper
            continue
        put(k, natural_to_theta(p, sub.terms[source].factors[j].params[p.name], x0, s))
    return theta


def collapsed_change_theta(p, first_side: bool) -> float:
    """A change operator's parameter ``p`` (a :class:`prolas.gp.gram.ParamInfo`) such that
    the data on ``t`` in [0, 1] see only its first side (before a change-point, outside a
    window) or only its second: every transition at the edge of the box beyond the data,
    the width at its lower bound, so each weight is exactly 0 or 1 in floating point."""
    if p.name == "width":
        return p.lower
    if p.name == "start":  # a window that never opens, or is open over all the data
        return p.upper if first_side else p.lower
    if p.name == "end":
        return p.upper
    return p.upper if first_side else p.lower  # CP's location
