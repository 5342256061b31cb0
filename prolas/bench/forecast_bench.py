"""``prolas bench --forecast SUITE``: prolas's default forecast against the forecasters users
pick instead, on the same splits, with paired comparisons.

Suites (:func:`suite_series`):

* ``tsdl``: the nine series with ABCD's published RMSE (``data/<name>_train.csv`` /
  ``_test.csv``; :data:`prolas.bench.extrapolation.ABCD_RMSE`). Seasonal period per
  series (:data:`TSDL_SEASON_LENGTH`): 12 for the monthly series (airline, call-centre,
  gas-production, mauna, sulphuric), 1 for the annual ones (solar, wages), and 1 for
  internet and temperature, irregular subsamples of an hourly and a daily series
  (1 000 of their points), where no fixed number of observations spans a day or a year
  (24 hours are 19–29 observations apart on internet; a year 110 ± 20 on temperature),
  so the peers, which model observations, get no seasonal period there. Halves: the
  three series every default of prolas was tuned on (airline, call-centre, sulphuric)
  are ``tuning``, the other six ``report``.
* ``m3-monthly``: 150 M3 monthly series (``data/m3-monthly/``), period 12, the last 18
  points held out; halves by position in the file (even: tuning, odd: report;
  ``data/m3-monthly/README.md``).
* ``m3-monthly-b``: 150 other M3 monthly series (``data/m3-monthly-b/``, drawn on
  2026-11-30 from those ``m3-monthly`` does not hold), scored and halved alike: series
  no default was tuned on before that day (its README lists what each has decided since).

Methods: ``prolas`` is ``prolas fit`` with its defaults (``--budget``, ``--restarts`` and
the search and fit seed ``--fit-seed`` as given) and its default forecast
(``rolling-mix``; from the fixed kernel below 144 training points unless
``--forecast-from`` says otherwise) evaluated at the test inputs, run through
:func:`prolas.many.run_many` into ``OUT/prolas/``; ``cks`` (not run unless asked for)
is the same with ``--search cks``, into ``OUT/cks/``, so the default search and the
greedy one are compared on the same series, by best BIC and search seconds as well as by
forecast; the peers
(:mod:`prolas.bench.peers`) forecast the test steps from the training values. Every
forecast is scored by :func:`prolas.report.scoring.score_forecast` with the series'
seasonal naive scale.
Seconds per series: prolas's search plus its test forecast (not the report and plots it
also writes), the peers' fit and forecast, each in one process (prolas's series run in
``--workers`` processes side by side, each search and its fits on one core);
``search_seconds`` is the search's wall time alone. With more than one search method the
methods take turns over blocks of series (:func:`search_blocks`), so their wall times are
measured at the same time, not in two phases.

Outputs: ``OUT/forecast_scores.csv`` (one row per series and method),
``OUT/forecast.md`` (mean scores per method, prolas against each other method with
:func:`prolas.bench.paired.compare`, the two searches' best BIC and seconds
(:func:`search_comparison`), per-series RMSE next to ABCD's for tsdl, the failures) and
``OUT/bench.json``; peers' forecasts in ``OUT/peers/<method>/<series>.json``.
``--resume`` skips finished series of every method.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.bench.cells import load_series, prepare_out
from prolas.bench.extrapolation import ABCD_RMSE
from prolas.bench.paired import compare
from prolas.bench.peers import PEERS, peer_forecast, peers_missing
from prolas.errors import DataError, ProlasError
from prolas.fitjob import ForecastSettings
from prolas.limits import (
    BIC_TIE,
    DEFAULT_FORECAST,
    DEFAULT_FORECAST_BAND,
    DEFAULT_FORECAST_SOURCE,
    DEFAULT_FORECAST_TREND,
    FIXED_FORECAST_BELOW,
    FIXED_FORECAST_KERNEL,
    FIXED_FORECAST_SEED_OFFSETS,
    FIXED_SEASONAL_KERNEL,
    FORECAST_SUITES,
)
from prolas.many import LongSeries, ManySettings, read_long, run_many
from prolas.records import json_clean, one_line, write_json
from prolas.report.scoring import SCORE_COLUMNS, score_forecast, seasonal_naive_scale
from prolas.search.config import SearchConfig

__all__ = [
    "BIC_TIE",
    "DEFAULT_FORECAST_METHODS",
    "FORECAST_METHODS_BENCH",
    "ForecastBenchConfig",
    "ForecastBenchRun",
    "HALVES",
    "M3_SEASON_LENGTH",
    "SUITES",
    "TSDL_SEASON_LENGTH",
    "TSDL_TUNING",
    "forecast_markdown",
    "m3_half",
    "run_forecast_bench",
    "search_comparison",
    "search_counts",
    "SEARCH_METHODS",
    "suite_series",
]

SUITES = FORECAST_SUITES
#: The M3 suites' long-format files under the data directory.
M3_FILES = {
    "m3-monthly": Path("m3-monthly") / "m3_monthly.csv",
    "m3-monthly-b": Path("m3-monthly-b") / "m3_monthly_b.csv",
}
HALVES = ("all", "tuning", "report")

#: Methods run as ``prolas fit --search METHOD`` (each into ``OUT/METHOD/``).
SEARCH_METHODS = ("prolas", "cks")

#: Methods of ``prolas bench --forecast``: the searches, then the peers.
FORECAST_METHODS_BENCH = (*SEARCH_METHODS, *PEERS)

#: What ``--methods`` defaults to: the default search and the peers (``cks`` on request:
#: it doubles the run's cost).
DEFAULT_FORECAST_METHODS = ("prolas", *PEERS)

#: Seasonal period of each tsdl series (module docstring says why).
TSDL_SEASON_LENGTH = {
    "airline": 12,
    "call-centre": 12,
    "gas-production": 12,
    "mauna": 12,
    "sulphuric": 12,
    "solar": 1,
    "wages": 1,
    "internet": 1,
    "temperature": 1,
}

#: The tsdl series the defaults were tuned on (benchmarks/RESULTS.md, "How the defaults were
#: chosen").
TSDL_TUNING = ("airline", "call-centre", "sulphuric")

M3_SEASON_LENGTH = 12

#: Metrics compared pairwise, in the markdown's order.
PAIRED_METRICS = [
    "rmse",
    "smape",
    "mase",
    "coverage",
    "interval_score_scaled",
    "crps_scaled",
    "seconds",
]

#: Metrics compared between the two searches as well: best BIC (higher is better) and
#: the search's wall time.
SEARCH_METRICS = ["bic", "search_seconds"]

#: Columns of forecast_scores.csv.
SCORE_TABLE_COLUMNS = (
    "series",
    "half",
    "season_length",
    "method",
    "status",
    *SCORE_COLUMNS,
    "seconds",
    "bic",
    "search_seconds",
    "error",
)


def m3_half(position: int) -> str:
    """The M3 half of the series at 0-based ``position`` in the file: even positions
    tune, odd ones report (``data/m3-monthly/README.md``)."""
    return "tuning" if position % 2 == 0 else "report"


def _tsdl(data_dir: Path) -> list[tuple[LongSeries, str]]:
    out = []
    for name in TSDL_SEASON_LENGTH:
        train = load_series(data_dir / f"{name}_train.csv")
        test = load_series(data_dir / f"{name}_test.csv")
        series = LongSeries(
            name, name, train, test.x, test.y, season_length=TSDL_SEASON_LENGTH[name]
        )
        out.append((series, "tuning" if name in TSDL_TUNING else "report"))
    return out


def _m3(data_dir: Path, suite: str = "m3-monthly") -> list[tuple[LongSeries, str]]:
    path = data_dir / M3_FILES[suite]
    series = read_long(path, "series", x="x", y="y", split="split")
    out = []
    for i, s in enumerate(series):
        s = LongSeries(
            s.name, s.folder, s.train, s.test_x, s.test_y, s.error, season_length=M3_SEASON_LENGTH
        )
        out.append((s, m3_half(i)))
    return out


def suite_series(
    suite: str,
    data_dir: str | Path = "data",
    half: str = "all",
    only: Sequence[str] | None = None,
) -> list[tuple[LongSeries, str]]:
    """The suite's series with their half, ``(LongSeries, "tuning" | "report")``, in
    the suite's order; ``half`` keeps one half, ``only`` the named series.

    Raises:
        ProlasError: an unknown suite or half, or a name in ``only`` not in the suite.
    """
    if suite not in SUITES:
        raise ProlasError(f"unknown forecast suite {suite!r}; choose from {', '.join(SUITES)}")
    if half not in HALVES:
        raise ProlasError(f"--half must be one of {', '.join(HALVES)}")
    data_dir = Path(data_dir)
    try:
        pairs = _tsdl(data_dir) if suite == "tsdl" else _m3(data_dir, suite)
    except DataError as exc:
        raise ProlasError(f"suite {suite}: {exc} (--data-dir {data_dir})") from None
    if only:
        names = {s.name for s, _ in pairs}
        unknown = [n for n in only if n not in names]
        if unknown:
            raise ProlasError(f"--series: {', '.join(unknown)} not in suite {suite}")
        pairs = [(s, h) for s, h in pairs if s.name in set(only)]
    return [(s, h) for s, h in pairs if half in ("all", h)]


@dataclass(frozen=True)
class ForecastBenchConfig:
    """Settings of one ``prolas bench --forecast`` run (those a resumed run must share)."""

    suite: str
    methods: tuple[str, ...] = DEFAULT_FORECAST_METHODS
    half: str = "all"
    series: tuple[str, ...] = ()
    fit_seed: int = 0
    budget: int = 50
    restarts: int = 8
    data_dir: str = "data"
    band: str = DEFAULT_FORECAST_BAND
    source: str = DEFAULT_FORECAST_SOURCE

    def __post_init__(self) -> None:
        bad = [m for m in self.methods if m not in FORECAST_METHODS_BENCH]
        if bad or not self.methods:
            raise ProlasError(
                f"--methods: unknown {', '.join(bad) or '(none given)'}; choose from "
                f"{', '.join(FORECAST_METHODS_BENCH)}"
            )

    def settings(self) -> dict:
        # as bench.json stores them (lists, not tuples), so a resumed run compares equal
        return json_clean(
            {**asdict(self), "forecast": DEFAULT_FORECAST, "forecast_trend": DEFAULT_FORECAST_TREND}
        )


def _forecast_source_words(source: str) -> str:
    """forecast.md's words for ``--forecast-from``."""
    n_seeds = len(FIXED_FORECAST_SEED_OFFSETS)
    fixed = (
        f"the fixed kernel `{FIXED_SEASONAL_KERNEL}` with its period held at the season "
        f"(`{FIXED_FORECAST_KERNEL}` with its period fitted where no season is known; its "
        f"fits at {n_seeds} fit seeds mixed with equal weights)"
    )
    if source == "auto":
        return (
            f"(from {fixed} on series of fewer than {FIXED_FORECAST_BELOW} training points, "
            "else from the search's top models)"
        )
    if source == "fixed":
        return f"(from {fixed})"
    return "(from the search's top models)"


@dataclass
class ForecastBenchRun:
    out: Path
    table: pd.DataFrame = field(default_factory=pd.DataFrame)
    skipped_peers: str | None = None
    files: list[Path] = field(default_factory=list)


def _row(series: LongSeries, half: str, method: str) -> dict:
    row = {c: None for c in SCORE_TABLE_COLUMNS}
    row.update(series=series.name, half=half, season_length=series.season_length, method=method)
    return row


def _search_rows(out: Path, pairs: list[tuple[LongSeries, str]], method: str) -> list[dict]:
    """A search method's rows from the series folders :func:`run_many` wrote into
    ``OUT/METHOD/``."""
    rows = []
    for s, half in pairs:
        row = _row(s, half, method)
        path = out / method / s.folder / "series.json"
        doc = json.loads(path.read_text()) if path.exists() else {"status": "pending"}
        row.update({k: doc.get(k) for k in ("status", "error", "bic", *SCORE_COLUMNS)})
        if doc.get("status") == "ok":
            row["search_seconds"] = doc.get("search_seconds")
            row["seconds"] = (doc.get("search_seconds") or 0.0) + (
                doc.get("forecast_seconds") or 0.0
            )
        rows.append(row)
    return rows


def _peer_cell(s: LongSeries, method: str) -> dict:
    """One peer's forecast of one series, scored; a failure is recorded, not raised."""
    cell: dict = {"series": s.name, "method": method}
    try:
        if s.train is None:
            raise DataError(s.error or "no data")
        fc = peer_forecast(method, s.train.y, s.test_x.size, s.season_length or 1)
        scale = seasonal_naive_scale(s.train.y, s.season_length or 1)
        cell.update(score_forecast(s.test_y, fc.predictive, scale))
        cell.update(
            status="ok",
            seconds=fc.seconds,
            mean=fc.predictive.mean.tolist(),
            lower=fc.predictive.lower.tolist(),
            upper=fc.predictive.upper.tolist(),
        )
    except Exception as exc:  # one peer's failure on one series is its cell, not the run's
        reason = str(exc) if isinstance(exc, ProlasError) else f"{type(exc).__name__}: {exc}"
        cell.update(status="failed", error=one_line(reason))
    return cell


def _peer_rows(
    out: Path,
    pairs: list[tuple[LongSeries, str]],
    methods: Sequence[str],
    resume: bool,
    progress: bool,
) -> list[dict]:
    """Run (or, resuming, reuse) each peer on each series."""
    rows = []
    bar = None
    if progress:
        from prolas.progress import progress_bar

        bar = progress_bar(len(pairs) * len(methods), unit="forecast", desc="peers")
    try:
        for s, half in pairs:
            for method in methods:
                path = out / "peers" / method / f"{s.folder}.json"
                cell = json.loads(path.read_text()) if resume and path.exists() else None
                if cell is None:
                    cell = _peer_cell(s, method)
                    write_json(path, json_clean(cell), indent=None)
                row = _row(s, half, method)
                row.update({k: cell.get(k) for k in ("status", "error", "seconds", *SCORE_COLUMNS)})
                rows.append(row)
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return rows


def search_blocks(n_series: int, n_methods: int, workers: int | None) -> list[int]:
    """Where the search methods take turns: the ends of the series prefixes run one method
    after the other. One method runs all series at once; several alternate in blocks of
    ``4 x workers`` series, so that each method's searches of a block run within minutes
    of the others' and the machine's speed, which drifted by a quarter between two
    20-minute phases on a shared host (``benchmarks/results/incumbent_steps/``), weighs
    on their wall-time ratio alike.

    >>> search_blocks(10, 2, 1)
    [4, 8, 10]
    >>> search_blocks(10, 1, 1)
    [10]
    """
    from prolas.threads import available_cores

    if n_methods <= 1 or n_series == 0:
        return [n_series]
    block = 4 * max(1, workers or available_cores())
    return [*range(block, n_series, block), n_series]


def run_forecast_bench(
    config: ForecastBenchConfig,
    out: str | Path,
    *,
    workers: int | None = None,
    resume: bool = False,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> ForecastBenchRun:
    """Run every method of ``config`` on the suite's series and write the outputs
    (module docstring). Peers are skipped with one line through ``log`` when
    statsforecast is absent; prolas then runs alone."""
    log = log or (lambda s: None)
    out = Path(out)
    pairs = suite_series(config.suite, config.data_dir, config.half, config.series)
    run = ForecastBenchRun(out)
    peers = [m for m in config.methods if m in PEERS]
    if peers and (missing := peers_missing()):
        run.skipped_peers = f"peers skipped ({', '.join(peers)}): {missing}; running prolas alone"
        log(run.skipped_peers)
        peers = []
    prepare_out(out, "forecast", config.settings(), {"workers": workers}, resume)
    searches = [m for m in SEARCH_METHODS if m in config.methods]
    log(
        f"bench --forecast {config.suite}: {len(pairs)} series ({config.half}), methods "
        f"{', '.join(searches + peers)}"
    )
    rows: list[dict] = []
    # every series carries its own seasonal period (suite_series); 1 is never used
    settings = {
        method: ManySettings(
            SearchConfig(
                method=method, budget=config.budget, restarts=config.restarts, seed=config.fit_seed
            ),
            ForecastSettings(band=config.band, source=config.source),
            1,
        )
        for method in searches
    }
    start = 0
    for k, end in enumerate(search_blocks(len(pairs), len(searches), workers)):
        for method in searches:
            if len(searches) > 1:
                log(f"search {method}, series {start + 1}–{end} of {len(pairs)}:")
            run_many(
                [s for s, _ in pairs[:end]],
                out / method,
                settings[method],
                workers=workers,
                # later blocks continue the same runs: the series done before are skipped
                resume=resume or k > 0,
                progress=progress,
                source={"suite": config.suite, "half": config.half},
                log=log,
            )
        start = end
    for method in searches:
        rows += _search_rows(out, pairs, method)
    if peers:
        rows += _peer_rows(out, pairs, peers, resume, progress)
    table = pd.DataFrame(rows, columns=list(SCORE_TABLE_COLUMNS))
    table.to_csv(out / "forecast_scores.csv", index=False)
    (out / "forecast.md").write_text(forecast_markdown(table, config, run.skipped_peers))
    run.table = table
    run.files = [out / "forecast_scores.csv", out / "forecast.md"]
    return run


# --- the summary -----------------------------------------------------------------------


def _num(v: float, digits: int = 3) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v:.{digits}g}" if abs(v) >= 1000 else f"{v:.{digits}f}"


def search_counts(difference: Sequence[float], time_ratio: Sequence[float]) -> dict:
    """How two searches compare over series: ``difference`` is prolas's best BIC minus
    CKS's per series, ``time_ratio`` prolas's search seconds over CKS's. Returns ``n``;
    ``at_least`` (difference ≥ −:data:`BIC_TIE`), ``higher`` (> BIC_TIE) and ``lower``
    (< −BIC_TIE) series counts; and the ``median_ratio``."""
    d = np.asarray(difference, dtype=np.float64)
    return {
        "n": int(d.size),
        "at_least": int((d >= -BIC_TIE).sum()),
        "higher": int((d > BIC_TIE).sum()),
        "lower": int((d < -BIC_TIE).sum()),
        "median_ratio": float(np.median(np.asarray(time_ratio, dtype=np.float64))),
    }


def search_comparison(ok: pd.DataFrame) -> list[str]:
    """The markdown lines comparing the two searches on the series both finished (rows
    of ``ok``, methods ``prolas`` and ``cks``), by half and overall: the share of series
    where prolas's best BIC is at least CKS's (within :data:`BIC_TIE`), strictly higher,
    and the median ratio of their search wall times (prolas / CKS)."""
    wide = ok.pivot_table(
        index=["series", "half"], columns="method", values=["bic", "search_seconds"]
    )
    lines = [
        "## The two searches: prolas's best BIC against CKS's, and their wall times",
        "",
        f"Series both searches finished. At least: prolas's best BIC ≥ CKS's − {BIC_TIE} "
        "(a smaller difference is within one fit's reach of its optimum); higher: by more "
        f"than {BIC_TIE}. Wall time: each search on one core, in seconds (`search_seconds`).",
        "",
        "| half | series | prolas at least CKS | prolas higher | CKS higher "
        "| median seconds prolas / CKS | median ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    if not {("bic", "prolas"), ("bic", "cks")} <= set(wide.columns):
        return lines
    wide = wide.dropna(subset=[("bic", "prolas"), ("bic", "cks")])
    halves = [h for h in HALVES[1:] if h in set(wide.index.get_level_values("half"))]
    for half in [*halves, "all"] if len(halves) > 1 else halves or ["all"]:
        part = wide if half == "all" else wide.xs(half, level="half", drop_level=False)
        if part.empty:
            continue
        sec_p, sec_c = part[("search_seconds", "prolas")], part[("search_seconds", "cks")]
        c = search_counts(part[("bic", "prolas")] - part[("bic", "cks")], sec_p / sec_c)
        lines.append(
            f"| {half} | {c['n']} | {c['at_least']} ({c['at_least'] / c['n']:.0%}) | "
            f"{c['higher']} | {c['lower']} | "
            f"{_num(sec_p.median(), 1)} / {_num(sec_c.median(), 1)} | "
            f"{_num(c['median_ratio'], 2)} |"
        )
    return lines


def forecast_markdown(
    table: pd.DataFrame, config: ForecastBenchConfig, skipped: str | None = None
) -> str:
    """forecast.md: the settings, mean scores per method, prolas against each peer, the
    tsdl series' RMSE next to ABCD's, and the failed forecasts."""
    ok = table[table["status"] == "ok"]
    methods = [m for m in FORECAST_METHODS_BENCH if m in set(table["method"])]
    n_series = table["series"].nunique()
    lines = [
        f"# Forecasts on `{config.suite}` ("
        + (f"{config.half} half: " if config.half != "all" else "")
        + f"{n_series} series)",
        "",
        f"prolas: `prolas fit` defaults with budget {config.budget}, {config.restarts} restarts "
        f"and seed {config.fit_seed}, its `{DEFAULT_FORECAST}` forecast "
        + _forecast_source_words(config.source)
        + " evaluated at the test inputs. "
        + ("cks: the same with `--search cks`. " if "cks" in methods else "")
        + "Peers: statsforecast "
        + ", ".join(f"{PEERS[m]} (`{m}`)" for m in methods if m in PEERS)
        + ", fitted on the training values as a sequence. Scores: "
        "`prolas/report/scoring.py`; MASE, interval score and CRPS divided by the seasonal "
        "naive forecast's in-sample mean absolute error; CRPS from 100 quantiles for every "
        "method.",
    ]
    if skipped:
        lines += ["", f"**{skipped}.**"]
    lines += [
        "",
        "## Mean over the series each method forecast",
        "",
        "| method | series | sMAPE | MASE (median) | 95 % coverage | interval score | CRPS "
        "| seconds per series |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in methods:
        mine = ok[ok["method"] == m]
        if mine.empty:
            lines.append(f"| {m} | 0 | - | - | - | - | - | - |")
            continue
        mean = mine[["smape", "mase", "coverage", "interval_score_scaled", "crps_scaled"]].mean()
        lines.append(
            f"| {m} | {len(mine)} | {_num(mean['smape'], 2)} | {_num(mean['mase'])} "
            f"({_num(mine['mase'].median())}) | {_num(mean['coverage'])} | "
            f"{_num(mean['interval_score_scaled'])} | {_num(mean['crps_scaled'])} | "
            f"{_num(mine['seconds'].mean(), 2)} |"
        )
    peers = [m for m in methods if m != "prolas"]
    if "prolas" in methods and peers:
        cmp = pd.concat(
            [
                compare(ok, "prolas", [m], PAIRED_METRICS + SEARCH_METRICS * (m in SEARCH_METHODS))
                for m in peers
            ],
            ignore_index=True,
        )
        lines += [
            "",
            "## prolas against each other method, series by series",
            "",
            "d per series, negative when prolas is better: the log RMSE ratio and log "
            "seconds ratio, |coverage − 0.95| minus the peer's, the other search's best BIC "
            "minus prolas's, else prolas's score minus "
            "the peer's. Sign test: two-sided exact binomial on the series where d ≠ 0. "
            "Interval: 95 % percentile bootstrap of the mean d (10 000 resamples of the "
            "series). A verdict needs both: the interval excludes 0 and the sign test's "
            "p < 0.05 in the same direction (impossible with fewer than 6 series).",
            "",
            "| peer | metric | series | prolas better / worse / tied | sign test p "
            "| mean d [95 % interval] | verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in cmp.itertuples():
            lines.append(
                f"| {r.peer} | {r.metric} | {r.series} | {r.better} / {r.worse} / {r.ties} | "
                f"{_num(r.sign_p)} | {_num(r.mean)} [{_num(r.low)}, {_num(r.high)}] | "
                f"{r.verdict} |"
            )
    if "prolas" in methods and "cks" in methods:
        lines += ["", *search_comparison(ok)]
    if config.suite == "tsdl":
        rmse = ok.pivot_table(index="series", columns="method", values="rmse")
        lines += [
            "",
            "## RMSE per series (ABCD: published, Lloyd et al. 2014)",
            "",
            "| series | half | m | " + " | ".join(methods) + " | ABCD |",
            "|" + "---|" * (len(methods) + 4),
        ]
        for name in dict.fromkeys(table["series"]):
            first = table[table["series"] == name].iloc[0]
            cells = [
                _num(rmse.loc[name, m], 4) if name in rmse.index and m in rmse else "-"
                for m in methods
            ]
            lines.append(
                f"| {name} | {first['half']} | {first['season_length']} | "
                + " | ".join(cells)
                + f" | {_num(ABCD_RMSE.get(name, math.nan), 4)} |"
            )
    failed = table[table["status"] != "ok"]
    if not failed.empty:
        lines += ["", "## Not scored", ""]
        for r in failed.itertuples():
            lines.append(
                f"- {r.series}, {r.method}: {r.status}" + (f" ({r.error})" if r.error else "")
            )
    return "\n".join(lines) + "\n"
