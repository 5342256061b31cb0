"""``prolas bench``: its flags and its command (search-quality grids, extrapolation,
performance, and forecasts against the peers users pick instead).

Kept apart from :mod:`prolas.cli`, which adds this subcommand to its parser.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prolas.cli_args import non_negative_int, positive_int
from prolas.errors import ProlasError
from prolas.limits import (
    DEFAULT_CHECKPOINT,
    DEFAULT_FORECAST_BAND,
    DEFAULT_FORECAST_SOURCE,
    DEFAULT_GRAMMAR,
    FORECAST_BAND_CHOICES,
    FORECAST_SOURCES,
    FORECAST_SUITES,
    LENGTHSCALE_FLOOR,
    WARM_FITS,
)

__all__ = ["add_bench_parser", "cmd_bench"]


def add_bench_parser(sub) -> None:
    """``prolas bench``: search-quality grid, --extrapolation, --performance, --forecast."""
    b = sub.add_parser(
        "bench",
        help="benchmark grids: methods x data sets x seeds, extrapolation, performance, "
        "forecasts against statsforecast's peers",
        description="Search-quality grid over data/<name>.csv (default), or --extrapolation "
        "(search on <name>_train.csv, RMSE on <name>_test.csv, next to ABCD's published RMSE), "
        "or --performance (seconds per fit vs N, restart batching, evaluations/s, memory). "
        "All fits of a data set share one GP fit cache (OUT/fits/<name>.jsonl); finished "
        "cells are skipped with --resume.",
    )
    mode = b.add_mutually_exclusive_group()
    mode.add_argument("--extrapolation", action="store_true", help="held-out extrapolation")
    mode.add_argument("--performance", action="store_true", help="write OUT/PERFORMANCE.md")
    mode.add_argument(
        "--forecast",
        metavar="SUITE",
        choices=FORECAST_SUITES,
        help="forecast benchmark on a suite (tsdl: the nine series with ABCD's RMSE; "
        "m3-monthly: 150 M3 series; m3-monthly-b: 150 other M3 series): prolas's default "
        "forecast and statsforecast's AutoETS, AutoARIMA, AutoTheta and SeasonalNaive "
        "(--methods prolas,ets,arima,theta,snaive; the peers need pip install "
        "'prolas[bench]') scored on the same test points, with paired comparisons; add cks "
        "to --methods to run prolas fit --search cks beside the default search and compare "
        "their best BIC and wall time; writes OUT/forecast.md and OUT/forecast_scores.csv",
    )
    b.add_argument(
        "--datasets", default="airline", help="comma-separated names in --data-dir, or 'all'"
    )
    b.add_argument(
        "--methods",
        help="comma-separated: prolas, cks, random, structural[:SURROGATE[:OPTIMISER]] "
        "(e.g. structural:arc, structural:ot:local; default prolas,cks,random); with "
        "--forecast: prolas, cks, ets, arima, theta, snaive (default all but cks)",
    )
    b.add_argument("--seeds", type=positive_int, default=5, help="seeds 0..S-1 (default 5)")
    b.add_argument("--budget", type=positive_int, default=50, help="unique GP fits per search")
    b.add_argument(
        "--restarts",
        type=positive_int,
        help="restarts per GP fit (default 4; with --forecast 8, prolas fit's default)",
    )
    b.add_argument(
        "--fit-seed",
        type=non_negative_int,
        default=0,
        help="seed of every GP fit of the grid (default 0). All cells share one fit per "
        "expression, so a grid carries the luck of its fit seed: repeat it with other fit "
        "seeds (and another --out) to see how much (benchmarks/results/nested_fits/); "
        "with --forecast, prolas fit's --seed, which seeds its search and its fits",
    )
    b.add_argument(
        "--lengthscale-floor",
        type=float,
        default=LENGTHSCALE_FLOOR,
        metavar="K",
        help="SE and RQ lengthscales of every fit at least K median input spacings "
        f"(default {LENGTHSCALE_FLOOR:g}; 0 reproduces studies run before the floor)",
    )
    b.add_argument(
        "--max-points",
        type=positive_int,
        default=500,
        help="search longer series on an evenly spaced thinning of this size (default 500)",
    )
    b.add_argument(
        "--warm-fits",
        action=argparse.BooleanOptionalAction,
        default=WARM_FITS,
        help="searches warm-start each fit from the best and the most similar expression "
        f"fitted so far (as prolas fit --warm-fits; default {'on' if WARM_FITS else 'off'})",
    )
    b.add_argument(
        "--nested",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="searches start each fit also at the best contained sub-model fitted so far "
        "and repair fits a later sub-model beats (default on; --no-nested to measure it)",
    )
    b.add_argument(
        "--refit-full",
        action="store_true",
        help="extrapolation: re-optimise the best model on all training points when the "
        "search ran on a thinning (default: condition on them with the thinning's "
        "hyperparameters)",
    )
    b.add_argument("--data-dir", default="data", help="where <name>.csv files live (default data)")
    b.add_argument(
        "--grammar", default=DEFAULT_GRAMMAR, help="grammar for random/structural/prolas"
    )
    b.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT, help="KG-VAE checkpoint for prolas")
    b.add_argument(
        "--sizes",
        default="100,300,1000,2000",
        help="performance: series lengths N of one exact fit (--budget sets the timed "
        "searches' size)",
    )
    b.add_argument(
        "--pipeline-sizes",
        default="1000,10000,100000",
        help="performance: series lengths N of a default `prolas fit` (search on a "
        "subsample, refit on all N)",
    )
    b.add_argument(
        "--pipeline-budget",
        type=positive_int,
        default=50,
        help="performance: fits of each timed `prolas fit` (default 50)",
    )
    b.add_argument(
        "--half",
        choices=("all", "tuning", "report"),
        default="all",
        help="--forecast: the suite's tuning half, report half or all series (M3 suites: "
        "even / odd positions in the file; tsdl: airline, call-centre, sulphuric / the rest)",
    )
    b.add_argument("--series", help="--forecast: comma-separated series names of the suite")
    b.add_argument(
        "--forecast-band",
        choices=FORECAST_BAND_CHOICES,
        default=DEFAULT_FORECAST_BAND,
        help="--forecast: prolas's band, as prolas fit --forecast-band (default "
        f"{DEFAULT_FORECAST_BAND})",
    )
    b.add_argument(
        "--forecast-from",
        choices=FORECAST_SOURCES,
        default=DEFAULT_FORECAST_SOURCE,
        help="--forecast: the models prolas forecasts from, as prolas fit --forecast-from "
        f"(default {DEFAULT_FORECAST_SOURCE})",
    )
    b.add_argument(
        "--workers",
        type=positive_int,
        help="--forecast: prolas's worker processes, one series each (default: the cores)",
    )
    b.add_argument("--out", required=True, help="output directory")
    b.add_argument("--resume", action="store_true", help="continue: skip finished cells")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    b.set_defaults(func=cmd_bench)


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ProlasError(f"{flag} must be comma-separated integers, got {text!r}") from None
    if any(v < 10 for v in values):
        raise ProlasError(f"{flag}: every size must be at least 10")
    return values


def cmd_bench(args: argparse.Namespace) -> int:
    from prolas import bench
    from prolas.output_lock import hold_output_dir

    say = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr))
    if args.forecast:
        with hold_output_dir(Path(args.out), f"prolas bench --forecast {args.forecast}"):
            return _cmd_forecast_bench(args, say)
    if args.series or args.workers or args.half != "all":
        raise ProlasError("--series, --half and --workers go with --forecast SUITE")
    args.methods = args.methods or "prolas,cks,random"
    args.restarts = args.restarts or 4
    if args.performance:
        sizes, pipeline_sizes = (
            _int_list(args.sizes, "--sizes"),
            _int_list(args.pipeline_sizes, "--pipeline-sizes"),
        )
        with hold_output_dir(Path(args.out), "prolas bench --performance"):
            path = bench.run_performance(
                args.out,
                sizes=sizes,
                pipeline_sizes=pipeline_sizes,
                pipeline_budget=args.pipeline_budget,
                restarts=args.restarts,
                search_budget=args.budget,
                data=str(Path(args.data_dir) / "airline.csv"),
                progress=not args.quiet,
                log=say,
            )
        print(f"wrote {path}")
        return 0
    config = bench.BenchConfig(
        datasets=bench.parse_datasets(args.datasets, args.data_dir),
        methods=bench.parse_methods(args.methods),
        seeds=args.seeds,
        budget=args.budget,
        restarts=args.restarts,
        fit_seed=args.fit_seed,
        max_points=args.max_points,
        grammar=args.grammar,
        checkpoint=args.checkpoint,
        data_dir=args.data_dir,
        refit_full=args.refit_full,
        lengthscale_floor=args.lengthscale_floor,
        warm_fits=args.warm_fits,
        nested=args.nested,
    )
    runner = bench.run_extrapolation if args.extrapolation else bench.run_bench
    with hold_output_dir(Path(args.out), f"prolas bench --out {args.out}"):
        res = runner(config, args.out, resume=args.resume, progress=not args.quiet, log=say)
    say(
        f"bench: {res.cells_run} cells run, {res.cells_skipped} skipped (done before), "
        f"{res.new_fits} new GP fits"
    )
    print("wrote " + ", ".join(str(f) for f in res.files))
    return 0


def _cmd_forecast_bench(args: argparse.Namespace, say) -> int:
    from prolas.bench.forecast_bench import (
        DEFAULT_FORECAST_METHODS,
        ForecastBenchConfig,
        run_forecast_bench,
    )

    methods = args.methods or ",".join(DEFAULT_FORECAST_METHODS)
    config = ForecastBenchConfig(
        suite=args.forecast,
        methods=tuple(m.strip() for m in methods.split(",") if m.strip()),
        half=args.half,
        series=tuple(s.strip() for s in (args.series or "").split(",") if s.strip()),
        fit_seed=args.fit_seed,
        budget=args.budget,
        restarts=args.restarts or 8,
        data_dir=args.data_dir,
        band=args.forecast_band,
        source=args.forecast_from,
    )
    run = run_forecast_bench(
        config,
        args.out,
        workers=args.workers,
        resume=args.resume,
        progress=not args.quiet,
        log=say,
    )
    if not args.quiet:
        print((Path(args.out) / "forecast.md").read_text(), file=sys.stderr)
    print("wrote " + ", ".join(str(f) for f in run.files))
    return 0
