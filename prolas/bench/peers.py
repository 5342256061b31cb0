"""The forecasters users pick instead of prolas, through one adapter: statsforecast's
AutoETS, AutoARIMA, AutoTheta and SeasonalNaive (Garza et al., Nixtla).

statsforecast is an optional extra (``pip install 'prolas[bench]'``), imported only when
a peer runs; :func:`peers_missing` says in one line when it is absent, and
``prolas bench --forecast`` then runs prolas alone.

Each peer sees the training values as a sequence (statsforecast models observations,
not inputs): the k-th test point is its k-th step ahead. That is exact for a series
sampled regularly with no gap after the training data (every M3 series and seven of the
nine tsdl series) and an approximation for an irregular subsample (tsdl's internet and
temperature; :mod:`prolas.bench.forecast_bench` says which period they get).

The predictive (:class:`prolas.report.scoring.Predictive`): the point forecast is the
model's ``mean``; the 95 % interval is its ``lo-95``/``hi-95``; the 100 quantiles of the
CRPS are the ends of its central intervals at levels 1, 3, ..., 99 %
(:data:`prolas.report.scoring.INTERVAL_LEVELS`: level L has ends at τ = (1 ∓ L/100)/2).
For ETS, ARIMA and the seasonal naive forecast these are Gaussian quantiles; AutoTheta's
come from simulated paths and are sorted per point before scoring.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np

from prolas.errors import ProlasError
from prolas.report.scoring import INTERVAL_LEVELS, QUANTILE_LEVELS, Predictive

__all__ = ["PEERS", "PeerForecast", "peer_forecast", "peers_missing", "STATSFORECAST_HINT"]

#: Method names of ``prolas bench --forecast --methods`` -> statsforecast model classes.
PEERS = {
    "ets": "AutoETS",
    "arima": "AutoARIMA",
    "theta": "AutoTheta",
    "snaive": "SeasonalNaive",
}

STATSFORECAST_HINT = "pip install 'prolas[bench]'"


@dataclass(frozen=True, eq=False)
class PeerForecast:
    """A peer's forecast of h steps: its :class:`Predictive` and the seconds it took
    (fit and forecast, one process)."""

    method: str
    predictive: Predictive
    seconds: float


def peers_missing() -> str | None:
    """None when statsforecast can be imported, else the one-line reason."""
    try:
        import statsforecast  # noqa: F401
    except ImportError:
        return f"statsforecast is not installed ({STATSFORECAST_HINT})"
    return None


def _model(method: str, season_length: int):
    if method not in PEERS:
        raise ProlasError(f"unknown peer {method!r}; choose from {', '.join(PEERS)}")
    missing = peers_missing()
    if missing:
        raise ProlasError(f"peer {method!r} needs statsforecast: {missing}")
    from statsforecast import models

    return getattr(models, PEERS[method])(season_length=int(season_length))


def peer_forecast(method: str, y: np.ndarray, h: int, season_length: int) -> PeerForecast:
    """Fit peer ``method`` to the training values ``y`` ``(n,)`` and forecast ``h`` steps.

    Raises:
        ProlasError: an unknown method, statsforecast absent, or a forecast with
            non-finite values (e.g. a seasonal model on fewer points than a season).
    """
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    model = _model(method, season_length)
    levels = sorted(set(INTERVAL_LEVELS) | {95})
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = model.forecast(y=y, h=int(h), level=levels)
    seconds = time.perf_counter() - start

    def column(key: str) -> np.ndarray:
        return np.asarray(out[key], dtype=np.float64).reshape(-1)

    # tau < 0.5 is the lower end of the level 100 (1 - 2 tau) interval, tau > 0.5 the upper
    quantiles = np.column_stack(
        [
            column(f"lo-{round(100 * (1 - 2 * t))}")
            if t < 0.5
            else column(f"hi-{round(100 * (2 * t - 1))}")
            for t in QUANTILE_LEVELS
        ]
    )
    try:
        pred = Predictive(column("mean"), column("lo-95"), column("hi-95"), quantiles)
    except ProlasError as exc:
        raise ProlasError(f"{method}: {exc}") from None
    return PeerForecast(method, pred, seconds)
