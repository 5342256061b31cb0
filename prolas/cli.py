"""Command-line interface: ``prolas fit | describe | train-vae | checkpoints | compare | bench``.

Every user error is a :class:`prolas.errors.ProlasError`: it is printed on one line
(``prolas: error: ...``) and the exit code is non-zero; Ctrl-C writes the partial
result and exits 130. SIGTERM (``kill``, ``timeout``, a job scheduler) stops a run the
same way (:func:`_sigterm_as_interrupt`): the worker processes are stopped too, where the
signal's default would end this process alone and leave its workers behind.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from prolas.cli_args import non_negative_int as _non_negative_int
from prolas.cli_args import positive_int as _positive_int
from prolas.cli_bench import add_bench_parser
from prolas.errors import OutputExistsError, ProlasError
from prolas.limits import (
    DEFAULT_CHECKPOINT,
    DEFAULT_FORECAST,
    DEFAULT_FORECAST_BAND,
    DEFAULT_FORECAST_SOURCE,
    DEFAULT_FORECAST_TREND,
    DEFAULT_GRAMMAR,
    EVENLY_SPACED_SHARE,
    EXACT_REFIT_LIMIT,
    FIXED_FORECAST_BELOW,
    FIXED_FORECAST_KERNEL,
    FIXED_SEASONAL_KERNEL,
    FORECAST_BAND_CHOICES,
    FORECAST_METHODS,
    FORECAST_MODELS,
    FORECAST_SOURCES,
    FORECAST_TRENDS,
    LENGTHSCALE_FLOOR,
    SEARCH_POINTS,
    SEARCH_WINDOWS,
    SHORT_SERIES_POINTS,
    WARM_FITS,
    WARM_START,
)

if TYPE_CHECKING:  # pragma: no cover
    from prolas.fitjob import ForecastSettings

EPILOG = """examples:
  prolas fit data/airline.csv                      # PROLAS search, 50 evaluations
  prolas fit data/airline.csv --search cks --out out/airline-cks
  prolas fit data/airline_train.csv --test data/airline_test.csv
  prolas fit data/airline.csv --horizon 24          # also forecast.csv/.png, 24 steps ahead
  prolas describe "(SE + PER) * LIN"
"""

#: Files a fit writes into its output directory (the only files --force replaces).
OUTPUT_FILES = (
    "result.json",
    "report.md",
    "fit.png",
    "components.png",
    "convergence.png",
    "journal.jsonl",
    "forecast.csv",
    "forecast.png",
    "forecast_check.csv",
)


def _add_search_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("search")
    g.add_argument(
        "--search",
        choices=("prolas", "cks", "random", "structural"),
        default="prolas",
        help="strategy: prolas = BO in the KG-VAE latent space (default); cks = greedy "
        "compositional kernel search; random = grammar samples; structural = BO "
        "directly over expressions",
    )
    g.add_argument("--budget", type=_positive_int, default=50, help="unique GP fits (default 50)")
    g.add_argument(
        "--restarts",
        type=_positive_int,
        default=8,
        help="random restarts per GP fit: each screened for 20 iterations, the best 2 polished "
        "(default 8)",
    )
    g.add_argument(
        "--seed", type=_non_negative_int, default=0, help="random seed, >= 0 (default 0)"
    )
    g.add_argument("--depth", type=_positive_int, default=4, help="CKS depth limit (default 4)")
    g.add_argument(
        "--base-kernels",
        default=None,
        metavar="K1,K2,...",
        help="CKS's base kernel set (default SE,LIN,PER,RQ; SE,LIN,PER,C,WN is the Automatic "
        "Statistician's, with white noise WN; PERC is the centred periodic)",
    )
    g.add_argument(
        "--change",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="CKS also tries change-points and change-windows: CP(S, S), CW(S, S), CW(S, C), "
        "CW(C, S), CP(S, B), CP(B, S) (default on; --no-change for the plain CKS of "
        "Duvenaud et al. 2013)",
    )
    g.add_argument(
        "--grammar",
        default=DEFAULT_GRAMMAR,
        help="grammar file or shipped name (change, default, seasonal, small) for random, "
        f"structural and prolas; default {DEFAULT_GRAMMAR!r}: SE, LIN, PER, RQ, C with +, *, "
        "change-points CP and change-windows CW",
    )
    g.add_argument(
        "--checkpoint",
        default=DEFAULT_CHECKPOINT,
        help="KG-VAE checkpoint: path to a .pt/.json pair or a shipped name (default "
        f"{DEFAULT_CHECKPOINT!r}, trained on the {DEFAULT_GRAMMAR!r} grammar; 'default' goes "
        "with --grammar default)",
    )
    g.add_argument(
        "--train-vae",
        action="store_true",
        help="first train a data-specific KG-VAE on this data's inputs (quick mode)",
    )
    g.add_argument(
        "--batch", type=_positive_int, default=1, help="proposals per BO iteration, q (default 1)"
    )
    g.add_argument(
        "--latent-surrogate",
        choices=("ot", "latent"),
        default="ot",
        help="PROLAS: model BIC with a GP on the decoded expressions with the optimal-"
        "transport kernel (ot, default: measured better) or on the latent point (latent, "
        "the paper's Algorithm 2)",
    )
    g.add_argument(
        "--warm-fits",
        action=argparse.BooleanOptionalAction,
        default=WARM_FITS,
        help="also start each new expression's fit from the fitted hyperparameters of the "
        "best and of the most similar expression fitted so far (never worse than the "
        f"random restarts alone; default {'on' if WARM_FITS else 'off'})",
    )
    g.add_argument(
        "--lengthscale-floor",
        type=float,
        default=LENGTHSCALE_FLOOR,
        metavar="K",
        help="bound SE and RQ lengthscales below by K median input spacings, so that no "
        "stationary factor acts as extra noise finer than the sampling; 0 = only the "
        f"numerical bound (default {LENGTHSCALE_FLOOR:g})",
    )
    g.add_argument(
        "--search-points",
        type=int,
        default=SEARCH_POINTS,
        metavar="M",
        help=f"search a longer series on M of its points (evenly spaced, plus the windows "
        f"of --search-windows), then refit the best model on all points (exactly up to "
        f"{EXACT_REFIT_LIMIT} points, beyond with a sparse variational GP); 0 searches on "
        f"all points (default {SEARCH_POINTS})",
    )
    g.add_argument(
        "--search-windows",
        type=_non_negative_int,
        default=SEARCH_WINDOWS,
        metavar="W",
        help="among those M points, show the search up to W dense windows of the series, "
        "one per significant period of the whole series (found by a periodogram of all "
        "points) that the evenly spaced points are too far apart to resolve; they make "
        f"room for the windows, down to {EVENLY_SPACED_SHARE:.0%}% of M; 0 = none "
        f"(default {SEARCH_WINDOWS})",
    )
    g.add_argument(
        "--warm-start",
        type=int,
        default=WARM_START,
        metavar="K",
        help="PROLAS: the 10-point initial design fits the grammar's base kernels, then K "
        "expressions that ranked well on other benchmark series (a meta-learned portfolio; "
        "a series never ranks itself), then Sobol points; 0 disables the portfolio "
        f"(default {WARM_START}). On a series of fewer than {SHORT_SERIES_POINTS} points "
        "the design is the base kernels, then CKS's second level around the best of them "
        "(no portfolio)",
    )
    g.add_argument(
        "--surrogate",
        choices=("arc", "hierarchical", "conditional", "laplace", "ot"),
        default="hierarchical",
        help="structural search: surrogate kernel over expressions",
    )
    g.add_argument(
        "--acq-opt",
        choices=("ea", "local", "random"),
        default="ea",
        help="structural search: acquisition optimiser over expressions",
    )


def _add_forecast_args(p: argparse.ArgumentParser) -> None:
    # parsed as text and checked in cmd_fit, so that a bad value is a one-line error
    g = p.add_argument_group("forecast")
    g.add_argument(
        "--horizon",
        metavar="H",
        help="forecast H future steps after the last x, continuing the data's spacing (its "
        "median step; calendar steps, e.g. months, when x is a date column); writes "
        "forecast.csv (x — dates when the input had dates — mean, lower, upper: the 95%% "
        "predictive band in y's units) and forecast.png",
    )
    g.add_argument(
        "--forecast",
        choices=FORECAST_METHODS,
        help="with --horizon: rolling-mix = the mixture of the predictives of the top "
        "--forecast-models models, each weighted by how well it forecast the last 10%% of the "
        "training data (exp of its summed log predictive density from 5 origins; default, "
        "chosen on the tuning series: benchmarks/RESULTS.md, 'How the defaults were "
        "chosen'); bma = their mixture weighted by exp(BIC); best = the best-BIC model's "
        "predictive; rolling = the predictive of the one of the top models that forecast the "
        "last 10%% of the training data best (same 5 origins, lowest RMSE); horizon-mix = "
        "the same mixture, weighted instead by forecasts up to H steps ahead (at most a "
        "third of the data) from 5 origins with each model refitted on the points before "
        "each origin (pseudo-BMA+ over the origins)",
    )
    g.add_argument(
        "--forecast-models",
        metavar="K",
        help=f"with --forecast bma, rolling, rolling-mix or horizon-mix: mix or choose from the "
        f"K best "
        f"distinct models of the search (default "
        f"{FORECAST_MODELS}; refitted on all points when the search ran on a subsample)",
    )
    g.add_argument(
        "--forecast-band",
        choices=FORECAST_BAND_CHOICES,
        help="with --horizon: model = the models' own 95%% predictive band; calibrated = "
        "every model's predictive standard deviation times the factor (0.5 to 4) under "
        "which the forecast best predicted the end of the training data at the same lead "
        "times; refitted = the same with each model's hyperparameters refitted on the data "
        "before each of those forecasts; shrunk = times the square root of refitted's "
        "factor; auto (default) = shrunk for the fixed seasonal kernel's forecast, else "
        "refitted (benchmarks/results/forecast_peers/, band_factor/)",
    )
    g.add_argument(
        "--forecast-trend",
        choices=FORECAST_TRENDS,
        help="with --horizon: linear = leave the models with a polynomial trend (a term with "
        "two or more LIN factors: a mean or a seasonal amplitude growing as x^2 or faster) out "
        "of the top models a forecast mixes or chooses from, even the best model; they are "
        "still searched, scored and reported; any = keep them (default "
        f"{DEFAULT_FORECAST_TREND}: benchmarks/results/trend_guard/)",
    )
    g.add_argument(
        "--forecast-from",
        choices=FORECAST_SOURCES,
        help="with --horizon: the models the forecast mixes or chooses from: search = the "
        f"search's top models; fixed = one fixed kernel, {FIXED_SEASONAL_KERNEL} (a linear "
        "trend, a seasonal shape held at the season that may drift, a smooth part) where "
        f"the season is known (see --season-length), else {FIXED_FORECAST_KERNEL} with "
        "its period fitted, fitted on the series at three fit seeds and mixed with equal "
        "weights, whatever the search found and whatever "
        f"--forecast says; auto = fixed for a series of fewer than {FIXED_FORECAST_BELOW} "
        "points, else search (default "
        f"{DEFAULT_FORECAST_SOURCE}: on short M3 monthly series it gave a lower MASE than "
        "the search's models at two of three fit seeds, with a wider band; "
        "benchmarks/results/fixed_kernel/, fixed_kernel_seeds_b/, fixed_season/). The "
        "search, its best model and the report do not change",
    )


def _forecast_settings(args: argparse.Namespace) -> ForecastSettings:
    """The forecast flags as :class:`prolas.fitjob.ForecastSettings`; one-line errors."""
    from prolas.fitjob import ForecastSettings  # imported late: `prolas --help` stays quick

    def positive(flag: str, text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise ProlasError(f"{flag} must be a positive integer, got {text!r}") from None
        if v < 1:
            raise ProlasError(f"{flag} must be a positive integer, got {v}")
        return v

    horizon = getattr(args, "horizon", None)
    method = getattr(args, "forecast", None)
    models = getattr(args, "forecast_models", None)
    band = getattr(args, "forecast_band", None)
    trend = getattr(args, "forecast_trend", None)
    source = getattr(args, "forecast_from", None)
    season = getattr(args, "forecast_season", None)
    if horizon is None:
        if any(v is not None for v in (method, models, band, trend, source, season)):
            raise ProlasError(
                "--forecast, --forecast-models, --forecast-band, --forecast-trend, "
                "--forecast-from and --season-length need --horizon H"
            )
        return ForecastSettings()
    from prolas.report.forecast import MAX_HORIZON

    h = positive("--horizon", horizon)
    if h > MAX_HORIZON:
        raise ProlasError(f"--horizon {h} is beyond the limit of {MAX_HORIZON} steps")
    k = FORECAST_MODELS if models is None else positive("--forecast-models", models)
    return ForecastSettings(
        h,
        method or DEFAULT_FORECAST,
        k,
        band or DEFAULT_FORECAST_BAND,
        trend or DEFAULT_FORECAST_TREND,
        source or DEFAULT_FORECAST_SOURCE,
        season,
    )


def _add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", help="CSV file with a header row")
    p.add_argument("--x", help="input column (default: first numeric/date column)")
    p.add_argument("--y", help="output column (default: second numeric column)")
    p.add_argument(
        "--dropna", action="store_true", help="drop rows with NaN/inf instead of failing"
    )
    _add_decimal_arg(p)


def _add_decimal_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--decimal",
        choices=(".", ","),
        help="the numbers' decimal mark (default: read from the file; say it when every "
        "number leaves it open, e.g. 10.283 in a ';'- or tab-separated file)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prolas",
        description="Discover the kernel structure of a Gaussian process for a 1-D series "
        "(which combination of trend, periodicity and smoothness explains it), scored by BIC.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from prolas import __version__

    parser.add_argument("--version", action="version", version=f"prolas {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    fit = sub.add_parser(
        "fit",
        help="search kernel structures for a CSV series and write a report",
        description="Search kernel structures for DATA.csv; write result.json, report.md and "
        "plots to --out.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_data_args(fit)
    _add_search_args(fit)
    fit.add_argument("--test", help="held-out CSV to predict with the best model (same columns)")
    fit.add_argument("--out", help="output directory (default: prolas-out/<data name>)")
    fit.add_argument("--force", action="store_true", help="replace an earlier result in --out")
    fit.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    _add_forecast_args(fit)
    fit.add_argument(
        "--season-length",
        dest="forecast_season",
        type=_non_negative_int,
        metavar="M",
        help="with --horizon: the season in steps of the data's spacing (12 for monthly "
        "data) at which the fixed kernel's periodic part is held when the forecast comes "
        f"from it (the kernel is then {FIXED_SEASONAL_KERNEL}, a seasonal shape that may "
        f"drift); 0 fits its period ({FIXED_FORECAST_KERNEL}). Default: one year when x "
        "holds dates a month or a quarter apart, else fitted. On short M3 monthly series "
        "the held season lowered the mean MASE from 0.85 to 0.75-0.78: "
        "benchmarks/results/fixed_season/",
    )
    _add_execution_args(fit)
    fit.set_defaults(func=cmd_fit)

    desc = sub.add_parser(
        "describe", help="print the canonical form and parameter count of an expression"
    )
    desc.add_argument("expression", help='kernel expression, e.g. "(SE + PER) * LIN"')
    desc.set_defaults(func=cmd_describe)

    tv = sub.add_parser(
        "train-vae",
        help="train a KG-VAE checkpoint on grammar samples",
        description="Sample expressions from a grammar, encode them as r = [r_g, r_d] and "
        "train a Kernel Grammar VAE; writes PATH.pt (weights) and PATH.json (metadata).",
    )
    tv.add_argument("--grammar", default=DEFAULT_GRAMMAR, help="grammar file or shipped name")
    tv.add_argument(
        "--data",
        help="CSV whose inputs r_d is computed on (default: a canonical grid on [0, 1], "
        "which serves any 1-D series)",
    )
    tv.add_argument("--x", help="input column of --data")
    tv.add_argument("--samples", type=_positive_int, default=50_000, help="grammar samples")
    tv.add_argument("--latent-dim", type=_positive_int, help="latent dimension")
    tv.add_argument("--epochs", type=_positive_int, help="maximum epochs (early stopping)")
    tv.add_argument("--dedupe", action="store_true", help="one sample per canonical expression")
    tv.add_argument("--seed", type=_non_negative_int, default=0, help="random seed, >= 0")
    tv.add_argument("--out", required=True, help="output path stem (writes .pt and .json)")
    tv.add_argument("--force", action="store_true", help="replace an existing checkpoint")
    tv.add_argument("--quiet", action="store_true")
    tv.set_defaults(func=cmd_train_vae)

    ck = sub.add_parser("checkpoints", help="list the shipped KG-VAE checkpoints")
    ck.add_argument("--dir", help="list checkpoints in this directory instead")
    ck.set_defaults(func=cmd_checkpoints)

    cmp = sub.add_parser(
        "compare",
        help="compare search methods over seeds on one data set (shared fit cache)",
        description="Run every method x seed through identical Evaluators (one shared GP fit "
        "cache, DIR/fits.jsonl); write evaluations.csv, convergence.png, summary.md/csv.",
    )
    _add_data_args(cmp)
    cmp.add_argument(
        "--methods", default="prolas,cks,random", help="comma-separated (default prolas,cks,random)"
    )
    cmp.add_argument("--seeds", type=_positive_int, default=20, help="seeds 0..n-1 (default 20)")
    cmp.add_argument("--budget", type=_positive_int, default=50, help="unique GP fits per run")
    cmp.add_argument(
        "--restarts", type=_positive_int, default=4, help="restarts per GP fit (default 4)"
    )
    cmp.add_argument(
        "--checkpoint", default=DEFAULT_CHECKPOINT, help="KG-VAE checkpoint for prolas"
    )
    cmp.add_argument(
        "--grammar", default=DEFAULT_GRAMMAR, help="grammar for random/structural/prolas"
    )
    cmp.add_argument("--batch", type=_positive_int, default=1, help="proposals per BO step, q")
    cmp.add_argument("--out", required=True, help="output directory")
    cmp.add_argument(
        "--cache", help="GP fit cache file to share between comparisons (default DIR/fits.jsonl)"
    )
    cmp.add_argument("--quiet", action="store_true", help="no progress bar")
    cmp.set_defaults(func=cmd_compare)

    _add_fit_many_parser(sub)
    add_bench_parser(sub)
    return parser


def _add_fit_many_parser(sub) -> None:
    """``prolas fit-many``: every series of a long-format file (:mod:`prolas.many`)."""
    fm = sub.add_parser(
        "fit-many",
        help="fit every series of a long-format CSV (one row per observation, a series id)",
        description="Fit every series of LONG.csv as prolas fit would, one series per worker "
        "process; write OUT/<series>/ (result.json, report.md, plots, forecast files) and "
        "OUT/summary.csv (series, status, best expression, BIC, test scores with --split, "
        "seconds, error). A series with bad data is reported and skipped; --resume skips "
        "the series finished before and retries the failed ones.",
    )
    fm.add_argument("data", help="long-format CSV file with a header row")
    fm.add_argument("--id", required=True, metavar="COLUMN", help="the series id column")
    fm.add_argument("--x", help="input column (default: x, else the first numeric/date column)")
    fm.add_argument("--y", help="output column (default: y, else the next numeric column)")
    fm.add_argument(
        "--split",
        metavar="COLUMN",
        help="column of train/test values: test rows are held out, forecast at their x by "
        "--forecast and scored (RMSE, sMAPE, MASE, 95%% coverage, interval score, CRPS)",
    )
    fm.add_argument(
        "--season-length",
        type=_positive_int,
        default=1,
        metavar="M",
        help="seasonal period of the MASE scale (the seasonal naive forecast's in-sample "
        "error; 12 for monthly data; default 1, the naive forecast); 2 or more also holds "
        "the fixed forecast kernel's period at M steps (default: one year for dates a month "
        "or a quarter apart, else fitted)",
    )
    fm.add_argument(
        "--dropna", action="store_true", help="drop rows with NaN/inf instead of failing the series"
    )
    _add_decimal_arg(fm)
    fm.add_argument("--out", help="output directory (default: prolas-out/<data name>)")
    fm.add_argument(
        "--workers",
        type=_positive_int,
        help="worker processes, one series each (default: the available cores)",
    )
    fm.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out: finished series are skipped, failed ones refitted, "
        "interrupted ones continue from their journal (same settings)",
    )
    fm.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    _add_search_args(fm)
    _add_forecast_args(fm)
    fm.set_defaults(func=cmd_fit_many)


# --- commands ---------------------------------------------------------------------------


def cmd_describe(args: argparse.Namespace) -> int:
    from prolas.expr import BASE_KERNELS, factor_group, parse

    expr = parse(args.expression)
    print(f"canonical: {expr}")
    print(f"terms:     {expr.n_terms}")
    print(
        f"k:         {expr.n_params}  (per term: 1 variance + shape parameters; "
        "per change operator: its shape parameters once; +1 noise)"
    )
    for group in expr.change_groups:
        name = f"{group.op} #{group.index}"
        print(f"  {name:<20} {', '.join(group.shape_params)} (shared by its terms)")
    for term in expr.terms:
        parts = ", ".join(
            f"{f}({', '.join(BASE_KERNELS[f].shape_params)})"
            for f in term
            if factor_group(f) is None and BASE_KERNELS[f].shape_params
        )
        print(f"  {'*'.join(term):<20} variance" + (f", {parts}" if parts else ""))
    return 0


def cmd_train_vae(args: argparse.Namespace) -> int:
    import dataclasses

    from prolas.grammar import Grammar
    from prolas.vae import VAEConfig, save_checkpoint, train_kgvae

    stem = Path(args.out)
    if stem.suffix in (".pt", ".json"):
        stem = stem.with_suffix("")
    for suffix in (".pt", ".json"):
        target = stem.with_suffix(suffix)
        if target.exists() and not args.force:
            raise OutputExistsError(f"{target} exists; use --force to replace it")
    grammar = Grammar.from_file(args.grammar)
    x = None
    if args.data:
        from prolas.data import load_csv

        x = load_csv(args.data, args.x).x
    changes = {"seed": args.seed, "dedupe": args.dedupe}
    if args.latent_dim:
        changes["latent_dim"] = args.latent_dim
    if args.epochs:
        changes["epochs"] = args.epochs
    config = dataclasses.replace(VAEConfig(), **changes)
    trained = train_kgvae(grammar, config, x=x, n_samples=args.samples, progress=not args.quiet)
    pt, meta = save_checkpoint(trained, stem)
    import json

    quality = json.loads(Path(meta).read_text()).get("quality", {})
    summary = ", ".join(f"{k} {v:.3g}" for k, v in quality.items() if isinstance(v, float))
    print(f"wrote {pt} and {meta}; {summary}", file=sys.stderr)
    return 0


def cmd_checkpoints(args: argparse.Namespace) -> int:
    from prolas.vae import list_checkpoints

    rows = list_checkpoints(args.dir) if args.dir else list_checkpoints()
    if not rows:
        print("no checkpoints found")
        return 0
    for row in rows:
        print(row.get("name", "?"))
        for key, value in row.items():
            if key != "name":
                print(f"  {key}: {value}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from prolas.bench.compare import run_compare
    from prolas.data import load_csv

    dataset = load_csv(args.data, args.x, args.y, dropna=args.dropna, decimal=args.decimal)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    say = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr))
    from prolas.output_lock import hold_output_dir

    with hold_output_dir(Path(args.out), f"prolas compare {args.data}"):
        res = run_compare(
            dataset,
            methods,
            seeds=args.seeds,
            budget=args.budget,
            out=args.out,
            restarts=args.restarts,
            checkpoint=args.checkpoint,
            grammar=args.grammar,
            batch=args.batch,
            cache_path=args.cache,
            progress=not args.quiet,
            log=say,
        )
    if not args.quiet:
        print((Path(args.out) / "summary.md").read_text(), file=sys.stderr)
    print("wrote " + ", ".join(str(f) for f in res.files))
    return 0


def cmd_fit_many(args: argparse.Namespace) -> int:
    from prolas.many import ManySettings, read_long, run_many
    from prolas.search.executors import available_cores

    # with --split, --forecast and --forecast-models also choose the test points' forecast
    probe = vars(args) | {"horizon": args.horizon or ("1" if args.split else None)}
    forecast = _forecast_settings(argparse.Namespace(**probe))
    if args.horizon is None:
        forecast = dataclasses.replace(forecast, horizon=None)
    settings = ManySettings(_search_config(args), forecast, args.season_length)
    series = read_long(
        args.data,
        args.id,
        x=args.x,
        y=args.y,
        split=args.split,
        dropna=args.dropna,
        decimal=args.decimal,
    )
    out = Path(args.out) if args.out else Path("prolas-out") / Path(args.data).stem
    say = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr))
    workers = min(args.workers or available_cores(), len(series))
    say(
        f"prolas fit-many: {len(series)} series from {args.data} (id {args.id!r}); "
        f"search={settings.config.method}, budget={settings.config.budget}, "
        f"restarts={settings.config.restarts}, seed={settings.config.seed}; "
        f"{workers} worker process{'es' if workers > 1 else ''}"
    )
    source = {
        "data": str(args.data),
        "id": args.id,
        "x": args.x,
        "y": args.y,
        "split": args.split,
        "dropna": args.dropna,
    }
    from prolas.output_lock import hold_output_dir

    try:
        with hold_output_dir(out, f"prolas fit-many {args.data}"):
            run = run_many(
                series,
                out,
                settings,
                workers=args.workers,
                resume=args.resume,
                progress=not args.quiet,
                source=source,
                log=say,
            )
    except KeyboardInterrupt:
        print(
            f"prolas: interrupted; finished series are in {out}/summary.csv; continue with "
            "the same command and --resume",
            file=sys.stderr,
        )
        return 130
    for row in run.summary.itertuples():
        if row.status == "failed":
            say(f"  skipped {row.series}: {row.error}")
    print(f"wrote {out}/summary.csv")
    if run.fitted + run.skipped == 0:
        raise ProlasError(f"no series could be fitted ({run.failed} failed; see {out}/summary.csv)")
    return 0


def _search_config(args: argparse.Namespace):
    """The search flags (:func:`_add_search_args`) as a SearchConfig."""
    from prolas.search.config import SearchConfig

    return SearchConfig(
        method=args.search,
        budget=args.budget,
        restarts=args.restarts,
        seed=args.seed,
        depth=args.depth,
        base_kernels=args.base_kernels,
        change=args.change,
        grammar=args.grammar,
        checkpoint=args.checkpoint,
        train_vae=args.train_vae,
        batch=args.batch,
        surrogate=args.surrogate,
        latent_surrogate=args.latent_surrogate,
        warm_start=args.warm_start,
        acq_opt=args.acq_opt,
        search_points=args.search_points,
        search_windows=args.search_windows,
        lengthscale_floor=args.lengthscale_floor,
        warm_fits=args.warm_fits,
    )


def cmd_fit(args: argparse.Namespace) -> int:
    """``prolas fit``: the flags, then :class:`prolas.KernelSearch` (fit, then save)."""
    from prolas.data import load_csv
    from prolas.output_lock import claim_output_dir

    _forecast_settings(args)  # before anything is read or written
    dataset = load_csv(args.data, args.x, args.y, dropna=args.dropna, decimal=args.decimal)
    test_ds = None
    if args.test:
        test_ds = load_csv(
            args.test,
            dataset.x_column if dataset.x_column != "index" else None,
            dataset.y_column,
            dropna=args.dropna,
            decimal=args.decimal,
        )
    ks = _kernel_search(args)
    # after every check of the arguments: a rejected command leaves no output directory
    out = Path(args.out) if args.out else Path("prolas-out") / Path(args.data).stem
    # one run at a time writes --out (its journal and result), from here to the last file
    with claim_output_dir(out, f"prolas fit {args.data}", force=args.force, resume=args.resume):
        return _search_into(out, args, ks, dataset, test_ds)


def _kernel_search(args: argparse.Namespace):
    """The search and execution flags as a KernelSearch (checked, nothing run)."""
    import dataclasses

    from prolas.kernel_search import KernelSearch

    config = dataclasses.asdict(_search_config(args))
    execution = {"workers": args.workers, "scheduler": args.scheduler}
    season = _forecast_settings(args).season_length  # the fixed forecast kernel's season
    return KernelSearch(**config, **execution, dask_local=args.dask_local, season_length=season)


def _search_into(out: Path, args: argparse.Namespace, ks, dataset, test_ds) -> int:
    """``prolas fit`` in the claimed output directory: the search, its journal, outputs."""
    from prolas.kernel_search import SearchInterrupted
    from prolas.search.journal import open_journal

    config = ks.config
    say = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr))
    say(
        f"prolas: {dataset.n} points from {dataset.path} (x={dataset.x_column!r}, "
        f"y={dataset.y_column!r}); search={config.method}, budget={config.budget}, "
        f"restarts={config.restarts}, seed={config.seed}"
    )
    journal = open_journal(out, dataset, config, resume=args.resume, force=args.force)
    try:
        ks.fit(dataset, journal=journal, progress=not args.quiet, log=say)
    except SearchInterrupted as stop:
        return _interrupted(out, stop)
    finally:
        journal.close()
    return _write_outputs(args, out, ks, test_ds)


def _add_execution_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("execution (parallel fits, crash-safe runs)")
    g.add_argument(
        "--workers",
        type=_positive_int,
        help="local worker processes fitting GPs in parallel (default: the available cores "
        "for searches that propose batches, i.e. cks or --batch > 1, with more than 10 "
        "evaluations; 1 = in-process)",
    )
    g.add_argument("--scheduler", help="fit on a running Dask cluster at tcp://HOST:PORT")
    g.add_argument(
        "--dask-local",
        type=_positive_int,
        metavar="N",
        help="fit on a Dask LocalCluster of N single-threaded worker processes",
    )
    g.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted run in --out from its journal.jsonl (same data and "
        "settings; --budget may grow); journalled fits are not redone",
    )


def _interrupted(out: Path, stop) -> int:
    """Ctrl-C: the partial result.json is written (by the search); say so; exit 130."""
    if stop.result is None:
        print("prolas: interrupted before any evaluation finished", file=sys.stderr)
        return 130
    print(
        f"prolas: interrupted after {stop.result.evaluations} of {stop.budget} evaluations; "
        f"partial result in {out / 'result.json'}; continue with the same command and --resume",
        file=sys.stderr,
    )
    return 130


def _write_outputs(args, out: Path, ks, test_ds) -> int:
    from prolas import report
    from prolas.report.periods import period_check_line

    forecast = _forecast_settings(args)
    written = ks.save(
        out,
        test=test_ds,
        horizon=forecast.horizon,
        method=forecast.method,
        models=forecast.models,
        band=forecast.band,
        trend=forecast.trend,
        source=forecast.source,
        force=args.force or args.resume,  # this run's claim checked the directory
        log=None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True)),
    )
    test = written.test
    if not args.quiet:
        print(report.summary_table(ks.result_, ks.best_), file=sys.stderr)
        if test is not None:
            print(
                f"test: RMSE {test['rmse']:.4g} on {test['n']} points, mean log predictive "
                f"density {test['mean_log_predictive_density']:.3f}",
                file=sys.stderr,
            )
        print(f"wrote {out}/result.json, report.md and plots", file=sys.stderr)
        note = period_check_line(written.doc.get("periods"), ks.data_)
        if note:
            print(note, file=sys.stderr)
        if written.forecast_line:
            print(written.forecast_line, file=sys.stderr)
    print(ks.best_.expression)
    return 0


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt in the main thread, so that a
    run stops as on Ctrl-C: worker processes are terminated, the partial result or
    summary is written and the output lock released. By default SIGTERM ends the process
    at once, and the pool's workers (children of the fork server, not of this process)
    were left running, still writing into OUT. The previous handler is restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (an API caller's thread)
        return

    def interrupt(signum: int, frame) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def console_main() -> int:
    """The ``prolas`` console script and ``python -m prolas``: their main modules run
    nothing on import, so a fit may start worker processes
    (:func:`prolas.processes.main_module_is_guarded`)."""
    from prolas.processes import main_module_is_guarded

    main_module_is_guarded()
    return main()


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """A warning as one line for a person at a terminal, ``prolas: warning: ...``: prolas's
    own warnings (raised in prolas, or of a prolas category: a data warning is located at
    the caller's line) say what happened in words, so the source line Python would print
    after them is noise; another package's warning keeps its category and origin."""
    text = " ".join(str(message).split())
    own = category.__module__.split(".")[0] == "prolas"  # located at the caller's line
    if not own and not Path(filename).resolve().is_relative_to(Path(__file__).resolve().parent):
        text = f"{text} ({category.__name__}, {Path(filename).name}:{lineno})"
    return f"prolas: warning: {text}\n"


@contextlib.contextmanager
def _one_line_warnings() -> Iterator[None]:
    """Warnings shown through :func:`_format_warning` for the block. The format, not
    ``showwarning``, is replaced, so whoever records warnings (``pytest.warns``, a
    caller's ``catch_warnings(record=True)``) still receives them."""
    before = warnings.formatwarning
    warnings.formatwarning = _format_warning
    try:
        yield
    finally:
        warnings.formatwarning = before


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings(), _sigterm_as_interrupt(), _one_line_warnings():
            if getattr(args, "quiet", False):
                warnings.simplefilter("ignore")
            return args.func(args)
    except ProlasError as exc:
        print(f"prolas: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("prolas: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
