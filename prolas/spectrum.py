"""The periods a whole series shows: a periodogram of all N points, in O(N log N).

A long series is searched on a few hundred of its points (:mod:`prolas.search.view`).
Before that, this module looks at *all* of them, so that the search can be shown the
periods a subsample would hide, the refit can sharpen the periods the search found, and
the report can name the periods the chosen model leaves out (docs/long-series.md).

**Periodogram.** Let ``r`` be y with its least-squares line removed
(:data:`TREND_DEGREE`). When the inputs are
evenly spaced (every spacing within 1 % of the median spacing Δ) ``r`` is used as it is;
otherwise it is interpolated linearly onto ``m`` evenly spaced inputs at spacing Δ (at
most :data:`MAX_GRID`; repeated inputs are averaged first). With the Hann taper
``w_j = 1/2 - 1/2 cos(2π j / (m - 1))`` and ``F = rfft(w r)``,

    P_k = |F_k|^2 at the frequency f_k = k / (m h),  k = 1 .. m // 2,

where ``h`` is the grid spacing (cycles per x unit; the period is ``1 / f_k``). The taper
keeps a strong cycle from leaking power into distant frequencies (its sidelobes fall as
1/k^3 instead of 1/k).

**Background and significance.** Noise and smooth (non-periodic) structure give a
spectrum that varies slowly with frequency; a period is a narrow peak above it. The
background ``S(f)`` is the larger of two estimates: the median of ``P`` in bands of
frequencies a factor :data:`BAND_RATIO` wide (at least :data:`MIN_BAND_BINS` bins each),
divided by ``ln 2`` (the median of an exponential variable of mean S), interpolated
log-linearly between the bands; and a local one from the :data:`LOCAL_BINS` bins either
side of the peak's own (:data:`PEAK_BINS`): a parabola through them, or at the ends of
the spectrum a straight line, at the peak (:func:`_local_background`). The local estimate
follows the steep, curved low-frequency spectrum of a smooth random component, which a
band 16 bins wide (or a median) lies far under. Where the series is locally Gaussian noise
of spectrum S, the ratio
``z_k = P_k / S(f_k)`` is exponential with mean 1, so among ``M`` tested frequencies the
largest exceeds

    z* = -ln(1 - (1 - α)^(1/M))   (≈ ln(M / α))

with probability α (the false-alarm probability, :data:`FALSE_ALARM`). A frequency is a
**significant period** when it is a local maximum of P with ``z > z*``, at least
:data:`MIN_CYCLES` cycles fit in the data and its peak (the bins within
:data:`PEAK_BINS` of it) carries at least :data:`MIN_SHARE` of the detrended series'
variance above the background, ``share = Σ_peak (P - S) / Σ_all P`` (Parseval). Of the
peaks closer than :data:`PEAK_BINS` bins only the strongest is kept.

**Sharpening.** A peak's frequency is refined on the raw inputs: the tapered Fourier
power ``D(f) = |Σ_i w(x_i) r_i exp(-2πi f x_i)|^2`` is maximised over one bin either side
(grid, then a bounded scalar search; :func:`sharpen_frequency`), so the period is
resolved to a small fraction of a bin, ``1 / span``, not to the grid. The amplitude of
the sinusoid at that frequency is ``2 sqrt(D) / Σ_i w(x_i)`` (y's units).

**Harmonics.** A periodic shape that is not a sinusoid shows peaks at multiples of its
frequency. A peak within two bins of ``j f_b`` (``2 ≤ j ≤`` :data:`MAX_HARMONIC`) of a
lower significant peak ``f_b`` that is not itself a harmonic is marked as a harmonic of
``1 / f_b`` when ``j ≤`` :data:`FIRST_HARMONICS` or a lower harmonic ``i`` (``2 ≤ i < j``)
of ``f_b`` is significant too (a square wave's 3rd, 5th, 7th; not a daily cycle, the 7th
multiple of a weekly one that shows no other): a periodic kernel with period
``1 / f_b`` and a short enough shape lengthscale repeats it.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from prolas.data import Dataset

__all__ = [
    "BAND_RATIO",
    "FALSE_ALARM",
    "FIRST_HARMONICS",
    "MAX_GRID",
    "MAX_HARMONIC",
    "MIN_BAND_BINS",
    "MIN_CYCLES",
    "MIN_SCAN_POINTS",
    "MIN_SHARE",
    "PEAK_BINS",
    "TREND_DEGREE",
    "Peak",
    "Spectrum",
    "explains",
    "periodogram",
    "scan",
    "scan_dataset",
    "sharpen_frequency",
]

#: False-alarm probability of the whole scan: the chance that pure noise shows a
#: significant period anywhere.
FALSE_ALARM = 0.01
#: A significant period's peak carries at least this share of the detrended variance
#: (statistically significant but smaller cycles are not worth a user's attention).
MIN_SHARE = 0.01
#: A period shows at least this many cycles in the data (period ≤ span / MIN_CYCLES):
#: a smooth random component's spectrum falls off steeply within the lowest few
#: frequencies and reads as a "period" of a few cycles (24 of 200 smooth series at 3,
#: 3 of 200 at 6: benchmarks/results/long_series/README.md), as does a level step
#: (call-centre's read as 2.9 cycles).
MIN_CYCLES = 6.0
#: The background is a median over frequency bands this factor wide ...
BAND_RATIO = 1.25
#: ... holding at least this many frequency bins.
MIN_BAND_BINS = 16
#: Bins either side of a peak that belong to it (the Hann taper's main lobe is ±2).
PEAK_BINS = 3
#: Bins either side beyond those that the local background is fitted on.
LOCAL_BINS = 12
#: Harmonics up to this multiple of a significant frequency are attributed to it ...
MAX_HARMONIC = 8
#: ... beyond this order only when a lower harmonic of it is significant too: a daily
#: cycle is the 7th multiple of a weekly one, but not its harmonic when none of the
#: 2nd to 6th shows.
FIRST_HARMONICS = 3
#: Most evenly spaced points an uneven series is interpolated onto.
MAX_GRID = 1 << 22
#: The trend removed before the periodogram: a polynomial of this degree (a straight
#: line; a cubic, tried, raised the false alarms on smooth random components).
TREND_DEGREE = 1
#: Fewer points than this are not scanned (no period can be significant).
MIN_SCAN_POINTS = 16
#: The most significant periods kept (strongest first).
MAX_PEAKS = 12


@dataclass(frozen=True)
class Peak:
    """One significant period of a series.

    Attributes:
        period: in x's units, sharpened on all points (``1 / frequency``).
        power_ratio: the periodogram over its background at the peak (``z``).
        share: the share of the detrended series' variance (about the least-squares
            line) in the peak, above background.
        amplitude: of the sinusoid at the sharpened frequency, in y's units.
        harmonic_of: the period this one is a harmonic of (``None``: a fundamental).
    """

    period: float
    power_ratio: float
    share: float
    amplitude: float
    harmonic_of: float | None = None

    @property
    def frequency(self) -> float:
        return 1.0 / self.period

    def to_json(self) -> dict:
        return {
            "period": float(self.period),
            "share": float(self.share),
            "amplitude": float(self.amplitude),
            "power_ratio": float(self.power_ratio),
            "harmonic_of": None if self.harmonic_of is None else float(self.harmonic_of),
        }


@dataclass(frozen=True)
class Spectrum:
    """The scan of one series (:func:`scan`).

    Attributes:
        n: points scanned.
        span: ``max x - min x``.
        resolution: the frequency bin width ``1 / (m h)`` (cycles per x unit).
        resampled: the inputs were uneven and interpolated onto an even grid.
        tested: how many frequencies were tested.
        threshold: ``z*`` for :data:`FALSE_ALARM` over ``tested`` frequencies.
        peaks: the significant periods, the largest share first (harmonics included,
            marked by ``harmonic_of``).
    """

    n: int
    span: float
    resolution: float
    resampled: bool
    tested: int
    threshold: float
    peaks: tuple[Peak, ...] = ()

    @property
    def fundamentals(self) -> tuple[Peak, ...]:
        """The significant periods that are not harmonics of another, largest share first."""
        return tuple(p for p in self.peaks if p.harmonic_of is None)


def _detrended(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct inputs (repeats averaged) and y minus its least-squares polynomial of
    degree :data:`TREND_DEGREE` (a line) in the centred inputs."""
    xu, inverse = np.unique(x, return_inverse=True)
    yu = np.bincount(inverse, weights=y) / np.bincount(inverse)
    centre = xu - xu.mean()
    degree = min(TREND_DEGREE, xu.size - 1)
    coef = np.polyfit(centre, yu, degree) if degree > 0 else np.array([yu.mean()])
    return xu, yu - np.polyval(coef, centre)


def periodogram(
    x: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float, bool, np.ndarray, np.ndarray]:
    """The tapered periodogram of ``y`` against ``x`` (module docstring).

    Returns ``(f, P, h, resampled, xu, r)``: the frequencies ``f_k`` (k = 1 .. m // 2), the
    power ``P_k``, the grid spacing ``h``, whether the inputs were interpolated, and the
    distinct inputs with their detrended values (for :func:`sharpen_frequency`).
    """
    xu, r = _detrended(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
    diffs = np.diff(xu)
    delta = float(np.median(diffs))
    span = float(xu[-1] - xu[0])
    even = bool(np.all(np.abs(diffs - delta) <= 0.01 * delta))
    if even:
        g, m = r, xu.size
    else:
        m = int(min(math.floor(span / delta) + 1, MAX_GRID))
        m = max(m, xu.size if xu.size <= MAX_GRID else MAX_GRID)
        g = np.interp(np.linspace(xu[0], xu[-1], m), xu, r)
    h = span / (m - 1)
    w = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(m) / (m - 1))
    power = np.abs(np.fft.rfft(g * w)) ** 2
    k = np.arange(1, m // 2 + 1)
    return k / (m * h), power[1 : m // 2 + 1], h, not even, xu, r


def _background(f: np.ndarray, power: np.ndarray) -> np.ndarray:
    """``S(f)``: band medians / ln 2, log-linear between the bands' centres."""
    edges = [0]
    while edges[-1] < f.size:
        a = edges[-1]
        edges.append(min(f.size, max(a + MIN_BAND_BINS, math.ceil((a + 1) * BAND_RATIO))))
    if len(edges) > 2 and edges[-1] - edges[-2] < MIN_BAND_BINS:  # no short last band
        edges.pop(-2)
    centres, levels = [], []
    for a, b in zip(edges, edges[1:]):
        centres.append(math.log(math.sqrt(f[a] * f[b - 1])))
        levels.append(math.log(max(float(np.median(power[a:b])), 1e-300) / math.log(2.0)))
    if len(centres) == 1:
        return np.full_like(power, math.exp(levels[0]))
    logf = np.log(f)
    out = np.interp(logf, centres, levels)
    # below the first band's centre, continue the first two bands' slope when the
    # background rises towards low frequencies (a trend's or a random walk's red
    # spectrum), so that the lowest bins are not compared with a level they exceed
    slope = (levels[1] - levels[0]) / (centres[1] - centres[0])
    low = logf < centres[0]
    if slope < 0:
        out[low] = levels[0] + slope * (logf[low] - centres[0])
    return np.exp(out)


#: ``E[log median of 7 exponentials of mean 1]`` (Monte Carlo, 2e6 draws): the offset of
#: the running median's log below the log of the mean it estimates.
LOG_MEDIAN7 = -0.4099


def _local_background(power: np.ndarray) -> np.ndarray:
    """``S_loc(k)`` from the bins ``PEAK_BINS < |j - k| <= PEAK_BINS + LOCAL_BINS`` around
    bin ``k`` (the peak's own bins left out), of ``u = log P`` after a running median of
    ``2 PEAK_BINS + 1 = 7`` bins (which takes out narrow peaks, other periods):

    * where the window lies whole inside the spectrum, a parabola fitted by least squares
      to ``u_j`` against ``j - k``, at ``j = k`` (a fixed linear filter): it follows a
      steep, curved spectrum (a smooth random component's, which falls faster and faster
      into the noise), under which a median or a straight line would lie;
    * at the ends, a straight line through the bins that are there, continued to ``k``:
      at the lowest frequencies it continues the low-frequency spectrum down to ``k``.

    ``S_loc = exp(û - LOG_MEDIAN7)``: the running median's log lies :data:`LOG_MEDIAN7`
    below the log of the spectrum it follows.
    """
    from scipy.ndimage import median_filter

    u = median_filter(np.log(np.maximum(power, 1e-300)), size=2 * PEAK_BINS + 1, mode="nearest")
    m = u.size
    g, w = PEAK_BINS, LOCAL_BINS
    k = np.arange(m)
    # straight lines (cumulative sums over each bin's window, clipped at the ends)
    j = np.arange(m, dtype=np.float64)

    def cum(v: np.ndarray) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(v)])

    cn, cx, cy, cxx, cxy = cum(np.ones(m)), cum(j), cum(u), cum(j * j), cum(j * u)
    n = sx = sy = sxx = sxy = 0.0
    for lo, hi in ((k - g - w, k - g - 1), (k + g + 1, k + g + w)):
        a, b = np.clip(lo, 0, m), np.clip(hi + 1, 0, m)
        b = np.maximum(a, b)
        n = n + (cn[b] - cn[a])
        sx, sy = sx + (cx[b] - cx[a]), sy + (cy[b] - cy[a])
        sxx, sxy = sxx + (cxx[b] - cxx[a]), sxy + (cxy[b] - cxy[a])
    den = n * sxx - sx * sx
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where((n >= 3) & (den > 0), (n * sxy - sx * sy) / den, 0.0)
        fit = np.where(n > 0, (sy - slope * sx) / np.maximum(n, 1) + slope * k, -np.inf)
    # parabolas where the whole window is inside: a fixed filter over the offsets d
    d = np.r_[-(g + w) : -g, g + 1 : g + w + 1].astype(np.float64)
    if m >= 2 * (g + w) + 1:
        design = np.stack([np.ones_like(d), d, d * d], axis=1)
        coef = design @ np.linalg.solve(design.T @ design, np.array([1.0, 0.0, 0.0]))
        taps = np.zeros(2 * (g + w) + 1)
        taps[(d + g + w).astype(int)] = coef
        inner = np.convolve(u, taps[::-1], mode="valid")  # centred at k = g + w .. m - g - w - 1
        fit[g + w : m - g - w] = inner
    out = np.exp(fit - LOG_MEDIAN7)
    return np.where(np.isfinite(out), out, 0.0)


def _taper(x: np.ndarray) -> np.ndarray:
    u = (x - x[0]) / (x[-1] - x[0])
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * u)


def sharpen_frequency(
    x: np.ndarray, r: np.ndarray, f0: float, half_width: float
) -> tuple[float, float]:
    """The frequency in ``[f0 - half_width, f0 + half_width]`` that maximises the tapered
    Fourier power ``D(f)`` of ``r`` on the raw inputs ``x`` (module docstring), and the
    amplitude of the sinusoid there. Each evaluation costs O(N)."""
    w = _taper(x)
    wr = w * r
    t = x - x[0]

    def neg_power(f: float) -> float:
        phase = 2.0 * np.pi * f * t
        return -float(np.dot(wr, np.cos(phase)) ** 2 + np.dot(wr, np.sin(phase)) ** 2)

    lo, hi = max(f0 - half_width, 1e-300), f0 + half_width
    grid = np.linspace(lo, hi, 25)
    values = [neg_power(f) for f in grid]
    i = int(np.argmin(values))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    best_f, best_v = float(grid[i]), values[i]
    if b > a:
        res = minimize_scalar(
            neg_power, bounds=(a, b), method="bounded", options={"xatol": 1e-6 * (b - a)}
        )
        if res.fun < best_v:
            best_f, best_v = float(res.x), float(res.fun)
    amplitude = 2.0 * math.sqrt(max(-best_v, 0.0)) / float(w.sum())
    return best_f, amplitude


def scan(x: np.ndarray, y: np.ndarray) -> Spectrum:
    """The significant periods of ``y`` against ``x`` (module docstring): the
    periodogram of all points, its background, the false-alarm threshold, sharpened
    peaks and their harmonics. O(N log N) plus O(N) per peak."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = int(x.size)
    span = float(x.max() - x.min()) if n else 0.0
    if n < MIN_SCAN_POINTS or np.unique(x).size < MIN_SCAN_POINTS or not span > 0:
        return Spectrum(n, span, math.inf, False, 0, math.inf)
    f, power, h, resampled, xu, r = periodogram(x, y)
    resolution = float(f[0])
    background = np.maximum(_background(f, power), _local_background(power))
    z = power / background
    tested = f >= (MIN_CYCLES - 1e-9) * resolution  # k >= MIN_CYCLES
    m_tested = int(tested.sum())
    if m_tested == 0:
        return Spectrum(n, span, resolution, resampled, 0, math.inf)
    threshold = -math.log(-math.expm1(math.log1p(-FALSE_ALARM) / m_tested))
    total = float(power.sum())
    local_max = np.ones_like(tested)
    local_max[1:] &= power[1:] >= power[:-1]
    local_max[:-1] &= power[:-1] >= power[1:]
    candidates = np.flatnonzero(tested & local_max & (z > threshold))
    candidates = candidates[np.argsort(-power[candidates], kind="stable")]
    accepted: list[tuple[int, float]] = []
    for k in candidates:
        if any(abs(int(k) - a) <= PEAK_BINS for a, _ in accepted):
            continue
        lo, hi = max(int(k) - PEAK_BINS, 0), min(int(k) + PEAK_BINS + 1, power.size)
        share = float(np.clip(power[lo:hi] - background[lo:hi], 0.0, None).sum()) / total
        if share >= MIN_SHARE:
            accepted.append((int(k), share))
        if len(accepted) >= MAX_PEAKS:
            break
    peaks = []
    for k, share in accepted:
        freq, amplitude = sharpen_frequency(xu, r, float(f[k]), resolution)
        if freq * span >= MIN_CYCLES * (1.0 - 1e-9):
            peaks.append((freq, float(z[k]), share, amplitude))
    # harmonics: lowest frequency first; a fundamental is any peak not explained by a lower one
    peaks.sort(key=lambda p: p[0])
    out: list[Peak] = []
    orders: dict[float, set[int]] = {}  # a fundamental's period -> its harmonics' orders
    for freq, ratio, share, amplitude in peaks:
        base = None
        for q in out:
            if q.harmonic_of is not None:
                continue
            j = round(freq * q.period)
            near = abs(freq - j / q.period) <= 2.0 * resolution
            lower = j <= FIRST_HARMONICS or any(2 <= i < j for i in orders[q.period])
            if 2 <= j <= MAX_HARMONIC and near and lower:
                base = q.period
                orders[base].add(j)
                break
        out.append(Peak(1.0 / freq, ratio, share, amplitude, base))
        if base is None:
            orders[out[-1].period] = set()
    out.sort(key=lambda p: -p.share)
    return Spectrum(n, span, resolution, resampled, m_tested, threshold, tuple(out))


_SCANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def scan_dataset(dataset: Dataset) -> Spectrum:
    """:func:`scan` of a data set's x and y (computed once per Dataset object)."""
    found = _SCANS.get(dataset)
    if found is None:
        found = scan(dataset.x, dataset.y)
        _SCANS[dataset] = found
    return found


def explains(
    model_period: float, period: float, tolerance: float, max_harmonic: int = MAX_HARMONIC
) -> bool:
    """A periodic kernel of period ``q = model_period`` repeats a cycle of period ``p``
    when ``q`` is a whole multiple ``j p`` (``1 ≤ j ≤ max_harmonic``) within
    ``tolerance`` relative: ``|q / (j p) - 1| ≤ tolerance``."""
    if not (model_period > 0 and period > 0):
        return False
    j = max(1, round(model_period / period))
    return j <= max_harmonic and abs(model_period / (j * period) - 1.0) <= tolerance
