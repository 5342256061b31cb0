"""Many series: fit every series of a long-format file, in parallel, resumably.

``prolas fit-many LONG.csv --id COLUMN`` (and :func:`fit_many` in Python) reads a
long-format table, one row per observation with a series id, and fits each series as
``prolas fit`` would (:func:`prolas.pipeline.run_search`, then the files of
:mod:`prolas.fitjob`), one series per worker process:

* **Input** (:func:`read_long`): ``--id`` names the series column; ``--x`` (default: the
  column ``x``, else the first other numeric or date column, else positions 0..n-1) and
  ``--y`` (default: the column ``y``, else the first other numeric column); with
  ``--split COLUMN`` the rows whose value is ``test`` are held out (``train`` rows are
  fitted) and the forecast at the test inputs is scored
  (:func:`prolas.fitjob.write_test_forecast`; MASE and the scaled scores use the seasonal
  naive scale at period ``--season-length``). A series with bad data (non-numeric, NaN,
  too short, constant, an unknown split value) is reported with its reason and skipped;
  the others are fitted.
* **Output**: ``OUT/<series>/`` per series (result.json, report.md, plots, journal,
  forecast files, ``series.json`` with its summary row, written last) and
  ``OUT/summary.csv``, one row per series in input order: :data:`SUMMARY_COLUMNS`
  (``status`` is ``ok``, ``failed`` or, after an interruption, ``pending``; the test
  scores only with ``--split``). ``OUT/many.json`` records the settings.
* **Parallel**: ``workers`` processes (default: the available cores), each fitting one
  series at a time on one thread (:class:`prolas.search.executors.ProcessPool` pins
  torch and BLAS to ``cores // workers`` threads).
* **Resumable**: with ``resume`` a series whose ``series.json`` says ``ok`` for the same
  data is skipped and counted as such; a failed series is fitted again; a series that
  was interrupted continues from its journal (its finished fits are replayed, not
  refitted). Settings must match the interrupted run's.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from prolas.data import (
    NUMBER,
    Dataset,
    boolean_column_error,
    check_unique_columns,
    is_boolean_column,
    not_numeric,
    parse_dates,
    parse_numbers,
    read_csv_table,
    timestamps_to_decimal_years,
)
from prolas.errors import DataError, OutputExistsError, ProlasError
from prolas.fitjob import (
    ForecastSettings,
    forecast_fits,
    source_used,
    write_outputs,
    write_test_forecast,
)
from prolas.limits import (
    DEFAULT_FORECAST,
    DEFAULT_FORECAST_BAND,
    DEFAULT_FORECAST_SOURCE,
    DEFAULT_FORECAST_TREND,
    FORECAST_MODELS,
)
from prolas.records import json_clean, one_line, write_json
from prolas.report.scoring import SCORE_COLUMNS
from prolas.search.config import SearchConfig

__all__ = [
    "LongSeries",
    "ManyRun",
    "ManySettings",
    "SUMMARY_COLUMNS",
    "fit_many",
    "fit_series",
    "read_long",
    "run_many",
]

#: summary.csv's columns; the score columns (:data:`SCORE_COLUMNS`) only with a split.
SUMMARY_COLUMNS = (
    "series",
    "status",
    "expression",
    "bic",
    "n_train",
    "n_test",
    "forecast_from",
    *SCORE_COLUMNS,
    "seconds",
    "error",
)

_SPLITS = ("train", "test")


@dataclass(frozen=True, eq=False)
class LongSeries:
    """One series of a long-format table.

    Attributes:
        name: its id, as text.
        folder: its output folder's name (the id with unsafe characters replaced).
        train: the points to fit, or None when the data are bad (``error`` says why).
        test_x, test_y: the held-out points (empty without a split).
        error: why the series cannot be fitted, or None.
        season_length: the seasonal period of its scores (None: the run's setting).
    """

    name: str
    folder: str
    train: Dataset | None
    test_x: np.ndarray = field(default_factory=lambda: np.empty(0))
    test_y: np.ndarray = field(default_factory=lambda: np.empty(0))
    error: str | None = None
    season_length: int | None = None

    @property
    def data_sha256(self) -> str:
        """A hash of the series' values (train and test): a resumed run refits a series
        whose data changed."""
        h = hashlib.sha256()
        if self.train is not None:
            h.update(np.ascontiguousarray(self.train.x).tobytes())
            h.update(np.ascontiguousarray(self.train.y).tobytes())
        h.update(np.ascontiguousarray(self.test_x, dtype=np.float64).tobytes())
        h.update(np.ascontiguousarray(self.test_y, dtype=np.float64).tobytes())
        h.update((self.error or "").encode())
        return h.hexdigest()


@dataclass(frozen=True)
class ManySettings:
    """What every series of a run is fitted and scored with."""

    config: SearchConfig = field(default_factory=SearchConfig)
    forecast: ForecastSettings = field(default_factory=ForecastSettings)
    season_length: int = 1

    def __post_init__(self) -> None:
        if self.season_length < 1:
            raise ProlasError("--season-length must be a positive integer")

    def to_json(self) -> dict:
        return {
            "search": asdict(self.config),
            "forecast": asdict(self.forecast),
            "season_length": self.season_length,
        }


@dataclass
class ManyRun:
    """A finished (or interrupted) run: the summary table and the counts."""

    out: Path
    summary: pd.DataFrame
    fitted: int = 0
    skipped: int = 0
    failed: int = 0
    files: list[Path] = field(default_factory=list)


# --- reading ---------------------------------------------------------------------------


def _folder_names(ids: Sequence[str]) -> dict[str, str]:
    """A distinct, file-system-safe folder name per id (``[A-Za-z0-9._-]``; a hash
    suffix where two ids would clash)."""
    safe = {i: re.sub(r"[^A-Za-z0-9._-]+", "_", i).lstrip(".") or "series" for i in ids}
    counts: dict[str, int] = {}
    for name in safe.values():
        counts[name.lower()] = counts.get(name.lower(), 0) + 1
    return {
        i: s if counts[s.lower()] == 1 else f"{s}-{hashlib.sha1(i.encode()).hexdigest()[:8]}"
        for i, s in safe.items()
    }


def _as_dates(values: pd.Series) -> np.ndarray | None:
    """Decimal years when every value of a text column parses as a date, else None."""
    if pd.api.types.is_datetime64_any_dtype(values):
        return timestamps_to_decimal_years(values)
    if pd.api.types.is_numeric_dtype(values):
        return None
    text = values.dropna().astype(str)
    if text.empty or text.str.fullmatch(NUMBER).all():  # plain numbers are no dates
        return None
    dates, bad = parse_dates(values)
    if bad.any():
        return None
    return timestamps_to_decimal_years(dates)


def _pick_columns(
    df: pd.DataFrame, where: str, id_column: str, x: str | None, y: str | None, split: str | None
) -> tuple[str | None, str]:
    present = ", ".join(repr(c) for c in df.columns)
    for flag, col in (("--id", id_column), ("--x", x), ("--y", y), ("--split", split)):
        if col is not None and col not in df.columns:
            raise DataError(f"{where}: column {col!r} ({flag}) not found; columns are {present}")
    others = [c for c in df.columns if c not in (id_column, split)]
    # an indicator (True/False) column is never picked for x or y, as in load_csv; one
    # named y or x is taken (and refused by read_long) like any column of that name
    usable = [
        c
        for c in others
        if not is_boolean_column(df[c])
        and (pd.api.types.is_numeric_dtype(df[c]) or _as_dates(df[c]) is not None)
    ]
    # as load_csv: columns named y and x are y and x; else the first two usable columns
    if y is None and "y" in others and x != "y":
        y = "y"
    if x is None and "x" in others and y != "x":
        x = "x"
    if x is None and y is None:
        x = usable[0] if len(usable) > 1 else None
        numeric = [c for c in usable if c != x and pd.api.types.is_numeric_dtype(df[c])]
        if not numeric:
            raise DataError(f"{where}: no numeric column for y; name it with --y ({present})")
        y = numeric[0]
    elif y is None:
        numeric = [c for c in usable if c != x and pd.api.types.is_numeric_dtype(df[c])]
        if not numeric:
            raise DataError(f"{where}: no numeric column for y besides {x!r}; name it with --y")
        y = numeric[0]
    elif x is None:
        rest = [c for c in usable if c != y]
        x = rest[0] if rest else None
    return x, y


def _lines(mask: np.ndarray) -> str:
    """The CSV lines (header = line 1) of the first flagged rows."""
    rows = np.flatnonzero(mask)
    text = ", ".join(str(r + 2) for r in rows[:5])
    return text + (f" and {rows.size - 5} more" if rows.size > 5 else "")


def read_long(
    source: str | Path | pd.DataFrame,
    id_column: str,
    *,
    x: str | None = None,
    y: str | None = None,
    split: str | None = None,
    dropna: bool = False,
    decimal: str | None = None,
) -> list[LongSeries]:
    """The series of a long-format CSV file (or DataFrame), in order of first appearance.

    The file is read as :func:`~prolas.data.load_csv` reads one (separator, decimal mark
    and thousands separator from the file, ``decimal`` when given). Column choice and
    validation as in the module docstring. A problem with the file (missing, unreadable,
    an absent column, rows without an id) is a one-line :class:`DataError`; a problem
    with one series' values is that series' ``error``. With ``dropna`` rows whose x or y
    is NaN/inf are dropped instead.
    """
    if isinstance(source, pd.DataFrame):
        df, where = source.reset_index(drop=True), "<data frame>"
        check_unique_columns(df.columns, where)
    else:
        p = Path(source)
        where = str(p)
        if not p.is_file():
            raise DataError(f"{p}: file not found" if not p.exists() else f"{p}: not a file")
        df = read_csv_table(p, decimal=decimal, text_columns=(id_column,))
    df.columns = [str(c).strip() for c in df.columns]
    if df.empty:
        raise DataError(f"{where}: no data rows")
    x, y = _pick_columns(df, where, id_column, x, y, split)
    ids = df[id_column]
    if ids.isna().any():
        raise DataError(f"{where}: column {id_column!r} is empty on CSV line {_lines(ids.isna())}")
    ids = ids.astype(str).str.strip()
    for column in (y, x):
        if column is not None and is_boolean_column(df[column]):
            raise boolean_column_error(where, column)
    yv, y_text = parse_numbers(df[y])
    x_is_date = False
    if x is None:
        xv, x_text = None, np.zeros(len(df), dtype=bool)
    else:
        dates = _as_dates(df[x])
        x_is_date = dates is not None
        xv, x_text = (dates, np.zeros(len(df), dtype=bool)) if x_is_date else parse_numbers(df[x])
    roles = np.full(len(df), "train", dtype=object)
    bad_role = np.zeros(len(df), dtype=bool)
    if split is not None:
        roles = df[split].astype(str).str.strip().str.lower().to_numpy(dtype=object)
        bad_role = ~np.isin(roles, _SPLITS)
    order = list(dict.fromkeys(ids))
    folders = _folder_names(order)
    out: list[LongSeries] = []
    for name, rows in ids.groupby(ids, sort=False).groups.items():
        rows = np.asarray(rows)
        mask = np.zeros(len(df), dtype=bool)
        mask[rows] = True
        out.append(
            _one_series(
                name,
                folders[name],
                where,
                mask,
                (xv, yv),
                (x_text, y_text),
                roles,
                bad_role,
                columns=(x, y, split),
                x_is_date=x_is_date,
                dropna=dropna,
                raw=df,
            )
        )
    out.sort(key=lambda s: order.index(s.name))
    return out


def _one_series(
    name, folder, where, mask, values, text, roles, bad_role, *, columns, x_is_date, dropna, raw
) -> LongSeries:
    """One series' LongSeries from its rows (``mask``) of the whole table."""
    x_col, y_col, split_col = columns
    xv, yv = values
    path = f"{where}[{name}]"

    def failed(message: str) -> LongSeries:
        return LongSeries(name, folder, None, error=message)

    for col, flagged in ((x_col, text[0]), (y_col, text[1])):
        bad = flagged & mask
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            return failed(
                f"{path}: {not_numeric(col, f'CSV line {first + 2}', raw[col].iloc[first])}"
            )
    if (bad_role & mask).any():
        first = int(np.flatnonzero(bad_role & mask)[0])
        return failed(
            f"{path}: column {split_col!r} is {raw[split_col].iloc[first]!r} on CSV line "
            f"{first + 2}; expected train or test"
        )
    rows = np.flatnonzero(mask)
    x = np.arange(rows.size, dtype=np.float64) if xv is None else xv[rows]
    y = yv[rows]
    finite = np.isfinite(x) & np.isfinite(y)
    if not finite.all():
        if not dropna:
            bad = np.zeros(mask.size, dtype=bool)
            bad[rows[~finite]] = True
            return failed(
                f"{path}: {int((~finite).sum())} NaN/inf value(s) (CSV line {_lines(bad)}); "
                "fix them or pass --dropna"
            )
        rows, x, y = rows[finite], x[finite], y[finite]
    is_test = roles[rows] == "test"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # repeated x: valid, fitted
            train = Dataset.from_arrays(
                x[~is_test],
                y[~is_test],
                name=name,
                path=path,
                x_column=x_col or "index",
                y_column=y_col,
                x_is_date=x_is_date,
            )
    except DataError as exc:
        return failed(str(exc))
    order = np.argsort(x[is_test], kind="stable")
    return LongSeries(name, folder, train, x[is_test][order], y[is_test][order])


# --- one series ------------------------------------------------------------------------


def _journal(folder: Path, dataset: Dataset, config: SearchConfig):
    """Continue the folder's journal when it belongs to this search, else start anew."""
    from prolas.search.journal import JOURNAL_NAME, JournalError, open_journal

    if (folder / JOURNAL_NAME).exists():
        try:
            return open_journal(folder, dataset, config, resume=True, force=False)
        except JournalError:
            pass  # another search's or a corrupt journal: this series starts over
    return open_journal(folder, dataset, config, resume=False, force=True)


def _test_dataset(series: LongSeries) -> Dataset | None:
    """The test points as a Dataset for result.json's test block and fit.png, when they
    make a valid one (at least 5 points, y not constant); the scores need no Dataset."""
    if series.train is None or series.test_x.size == 0:
        return None
    try:
        return Dataset.from_arrays(
            series.test_x,
            series.test_y,
            name=f"{series.name}_test",
            path=f"{series.train.path} (test rows)",
            x_column=series.train.x_column,
            y_column=series.train.y_column,
            x_is_date=series.train.x_is_date,
        )
    except DataError:
        return None


def fit_series(series: LongSeries, folder: Path, settings: ManySettings) -> dict:
    """Fit one series into ``folder`` and return its summary row; never raises for a bad
    series or a failed search (the row's ``status`` is ``failed`` with the ``error``).

    The search is :func:`prolas.pipeline.run_search` with a journal in the folder; the
    files are :func:`prolas.fitjob.write_outputs` and, with test points,
    :func:`prolas.fitjob.write_test_forecast`. ``series.json`` (the row, the seconds of
    the search and of the test forecast, and the data's hash) is written last, so its
    presence marks a finished series.
    """
    from prolas.pipeline import run_search

    start = time.perf_counter()
    row: dict = {c: None for c in SUMMARY_COLUMNS}
    row.update(series=series.name, n_test=int(series.test_x.size))
    timing = {"search_seconds": None, "forecast_seconds": None}
    try:
        if series.train is None:
            raise DataError(series.error or "no data")
        row["n_train"] = series.train.n
        folder.mkdir(parents=True, exist_ok=True)
        config = settings.config
        m = series.season_length or settings.season_length
        forecast_settings = settings.forecast
        if forecast_settings.season_length is None and m >= 2:
            # the scores' season is the fixed forecast kernel's season too
            forecast_settings = replace(forecast_settings, season_length=m)
        journal = _journal(folder, series.train, config)
        try:
            result, best = run_search(series.train, config, journal=journal)
        finally:
            journal.close()
        timing["search_seconds"] = time.perf_counter() - start
        written = write_outputs(
            folder,
            series.train,
            config,
            result,
            best,
            test_dataset=_test_dataset(series),
            forecast=forecast_settings,
        )
        row.update(expression=best.expression, bic=best.bic)
        fits = written.fits  # the forecast's models (None without a horizon)
        if series.test_x.size:
            begun = time.perf_counter()
            fits = fits or forecast_fits(result, series.train, config, best, forecast_settings)
            row.update(
                write_test_forecast(
                    folder,
                    series.train,
                    fits,
                    forecast_settings,
                    series.test_x,
                    series.test_y,
                    m,
                )
            )
            # the forecast's own cost (the top models' refits, the rolling check, the
            # predictive): with the search's, what a forecaster pays per series
            timing["forecast_seconds"] = time.perf_counter() - begun
        if fits is not None:
            row["forecast_from"] = source_used(forecast_settings, series.train, fits)
        row["status"] = "ok"
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # one series' failure is its row, never the run's
        reason = str(exc) if isinstance(exc, ProlasError) else f"{type(exc).__name__}: {exc}"
        row.update(status="failed", error=one_line(reason))
    row["seconds"] = time.perf_counter() - start
    folder.mkdir(parents=True, exist_ok=True)
    doc = {**row, **timing, "data_sha256": series.data_sha256}
    write_json(folder / "series.json", json_clean(doc))
    return row


def _finished(folder: Path, series: LongSeries) -> dict | None:
    """The summary row of a series fitted before on the same data, or None."""
    path = folder / "series.json"
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if doc.get("status") != "ok" or doc.get("data_sha256") != series.data_sha256:
        return None
    return {c: doc.get(c) for c in SUMMARY_COLUMNS}


# --- many series -----------------------------------------------------------------------


def _prepare(out: Path, settings: dict, resume: bool) -> None:
    """Record the run's settings in ``OUT/many.json``; refuse to mix runs."""
    meta = out / "many.json"
    if out.exists() and not out.is_dir():
        raise OutputExistsError(f"--out {out} exists and is not a directory")
    if meta.exists():
        old = json.loads(meta.read_text())
        if not resume:
            raise OutputExistsError(
                f"{out} already holds a fit-many run; use --resume to continue it or choose "
                "another --out"
            )
        if old.get("settings") != json.loads(json.dumps(json_clean(settings))):
            before = old.get("settings", {})
            diff = sorted(k for k in settings if json_clean(settings[k]) != before.get(k))
            raise ProlasError(
                f"--resume: settings differ from the run in {out} ({', '.join(diff)}); use "
                "the same settings or another --out"
            )
    elif resume and out.exists() and any(out.iterdir()):
        raise ProlasError(f"--resume: {out} holds no fit-many run (no many.json)")
    out.mkdir(parents=True, exist_ok=True)
    write_json(meta, json_clean({"kind": "fit-many", "settings": settings}), indent=1)


def run_many(
    series: Sequence[LongSeries],
    out: str | Path,
    settings: ManySettings,
    *,
    workers: int | None = None,
    resume: bool = False,
    progress: bool = False,
    source: dict | None = None,
    log: Callable[[str], None] | None = None,
) -> ManyRun:
    """Fit every series into ``OUT/<folder>/`` and write ``OUT/summary.csv``.

    Args:
        series: from :func:`read_long` (or built by a benchmark suite).
        workers: processes, one series each (default: the available cores; 1 fits
            in this process).
        resume: skip the series finished before (module docstring).
        source: what the series were read from, recorded with the settings.

    Ctrl-C stops the workers, writes summary.csv with the unfinished series as
    ``pending`` and re-raises KeyboardInterrupt.
    """
    from prolas.search.executors import ProcessPool, available_cores

    out = Path(out)
    log = log or (lambda s: None)
    _prepare(out, {**settings.to_json(), "source": source or {}}, resume)
    rows: dict[str, dict] = {}
    run = ManyRun(out, pd.DataFrame())
    todo = []
    for s in series:
        done = _finished(out / s.folder, s) if resume else None
        if done is not None:
            rows[s.name] = done
            run.skipped += 1
        else:
            todo.append(s)
    cores = available_cores()
    workers = max(1, min(workers or cores, len(todo) or 1))
    bar = _SeriesBar(len(series), run.skipped, progress)

    def collect(row: dict) -> None:
        rows[row["series"]] = row
        run.fitted += row["status"] == "ok"
        run.failed += row["status"] == "failed"
        bar.update(row)

    pool = None
    try:
        if workers == 1:
            for s in todo:
                collect(fit_series(s, out / s.folder, settings))
        else:
            pool = ProcessPool(workers, threads=max(1, cores // workers))
            futures = {pool.submit(fit_series, s, out / s.folder, settings): s for s in todo}
            for fut in as_completed(futures):
                s = futures[fut]
                try:
                    collect(fut.result())
                except Exception as exc:  # the worker process died (killed, out of memory)
                    row = {c: None for c in SUMMARY_COLUMNS}
                    row.update(series=s.name, status="failed", error=one_line(f"worker: {exc}"))
                    collect(row)
            pool.shutdown(wait=True)
    except KeyboardInterrupt:
        if pool is not None:
            pool.terminate()
        _write_summary(run, series, rows)
        raise
    finally:
        bar.close()
    _write_summary(run, series, rows)
    log(
        f"fit-many: {len(series)} series: {run.fitted} fitted, {run.skipped} skipped (done "
        f"before), {run.failed} failed"
    )
    return run


def _write_summary(run: ManyRun, series: Sequence[LongSeries], rows: dict[str, dict]) -> None:
    table = []
    for s in series:
        row = rows.get(s.name) or {c: None for c in SUMMARY_COLUMNS}
        table.append({**row, "series": s.name, "status": row.get("status") or "pending"})
    frame = pd.DataFrame(table, columns=list(SUMMARY_COLUMNS))
    frame = frame.astype({"n_train": "Int64", "n_test": "Int64"})
    if not any(s.test_x.size for s in series):
        frame = frame.drop(columns=list(SCORE_COLUMNS))
    path = run.out / "summary.csv"
    frame.to_csv(path, index=False)
    run.summary, run.files = frame, [path]


class _SeriesBar:
    """A progress bar over series with the counts so far (:func:`prolas.progress.progress_bar`)."""

    def __init__(self, total: int, initial: int, show: bool) -> None:
        self.bar = None
        self.ok = self.failed = 0
        if show:
            from prolas.progress import progress_bar

            self.bar = progress_bar(total, unit="series", desc="series", initial=initial)

    def update(self, row: dict) -> None:
        self.ok += row["status"] == "ok"
        self.failed += row["status"] == "failed"
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.ok} ok, {self.failed} failed; last {row['series']}")
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def fit_many(
    source: str | Path | pd.DataFrame,
    id_column: str,
    out: str | Path,
    *,
    x: str | None = None,
    y: str | None = None,
    split: str | None = None,
    dropna: bool = False,
    decimal: str | None = None,
    season_length: int = 1,
    horizon: int | None = None,
    forecast: str = DEFAULT_FORECAST,
    forecast_models: int = FORECAST_MODELS,
    forecast_band: str = DEFAULT_FORECAST_BAND,
    forecast_trend: str = DEFAULT_FORECAST_TREND,
    forecast_from: str = DEFAULT_FORECAST_SOURCE,
    workers: int | None = None,
    resume: bool = False,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    **search_settings,
) -> ManyRun:
    """Fit every series of a long-format file or DataFrame (the Python form of
    ``prolas fit-many``); ``search_settings`` are :class:`SearchConfig` fields (method,
    budget, restarts, seed, ...).

    >>> run = fit_many("data/m3-monthly/m3_monthly.csv", "series", "out/m3",
    ...                split="split", season_length=12, budget=20)  # doctest: +SKIP
    >>> run.summary[["series", "status", "expression", "mase"]]       # doctest: +SKIP

    The caller's torch and BLAS thread settings are left as they were.
    """
    from prolas.threads import restore_threads

    settings = ManySettings(
        SearchConfig(**search_settings),
        ForecastSettings(
            horizon, forecast, forecast_models, forecast_band, forecast_trend, forecast_from
        ),
        season_length,
    )
    series = read_long(source, id_column, x=x, y=y, split=split, dropna=dropna, decimal=decimal)
    where = "<data frame>" if isinstance(source, pd.DataFrame) else str(source)
    info = {"data": where, "id": id_column, "x": x, "y": y, "split": split, "dropna": dropna}
    with restore_threads():
        return run_many(
            series,
            out,
            settings,
            workers=workers,
            resume=resume,
            progress=progress,
            source=info,
            log=log,
        )
