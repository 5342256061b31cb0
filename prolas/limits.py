"""Defaults shared by the pipeline and the CLI: how many points prolas computes with
exactly, and which grammar and checkpoint a search uses.

Exact GP fits cost O(N^3) time and O(N^2) memory. A long series is therefore searched on
:data:`SEARCH_POINTS` of its points (evenly spaced ones and dense windows for short
periods, :mod:`prolas.search.view`), and the chosen model is
refitted on all points: exactly up to :data:`EXACT_REFIT_LIMIT` points, beyond that with a
sparse variational GP (:mod:`prolas.gp.scalable`). The figures behind both numbers are in
``benchmarks/results/long_series/`` and ``benchmarks/results/sgpr_refit/SCALABLE.md``.
"""

#: Default number of points a long series is searched on, its windows included.
SEARCH_POINTS = 400
#: Largest N refitted exactly; longer series are refitted with SGPR.
EXACT_REFIT_LIMIT = 2000
#: Most dense windows a long series' search sees among its points, one
#: per significant period of the full series that they cannot resolve
#: (:mod:`prolas.search.view`; measured in benchmarks/results/long_series/).
SEARCH_WINDOWS = 2
#: The windows count in :data:`SEARCH_POINTS`: the evenly spaced points make room for
#: them, down to this share of the points (:func:`prolas.search.view.build_view`; chosen
#: in benchmarks/results/long_series/README.md, "The windows inside the budget").
EVENLY_SPACED_SHARE = 0.75

#: The grammar and KG-VAE checkpoint a search uses unless told otherwise: the grammar with
#: change-points, change-windows and the constant (``grammars/change.toml``). Measured on the
#: tuning series (airline, call-centre, sulphuric; benchmarks/RESULTS.md), PROLAS on it forecast
#: better than on ``default`` on two of three (call-centre 200.8 -> 29.9 RMSE).
DEFAULT_GRAMMAR = "change"
DEFAULT_CHECKPOINT = "change"

#: SE and RQ lengthscales of every fit are at least this many median input spacings
#: (:attr:`prolas.gp.FitConfig.lengthscale_floor`, ``--lengthscale-floor``; 0 = off).
#: Measured on the tuning series (airline, call-centre, sulphuric; 3 seeds;
#: benchmarks/RESULTS.md): PROLAS's test RMSE fell on all three (best model 18.40 -> 13.86,
#: 32.05 -> 27.40, 67.55 -> 59.80); the reference fits of docs/conventions.md still hold.
LENGTHSCALE_FLOOR = 1.0

#: Searches warm-start each fit from related fits (``--warm-fits``; measured in
#: benchmarks/results/warm_fits/).
WARM_FITS = False

#: ``--forecast`` choices (:data:`prolas.report.forecast.FORECAST_METHODS` is this tuple).
FORECAST_METHODS = ("best", "bma", "rolling", "rolling-mix", "horizon-mix")
#: The forecast ``prolas fit --horizon`` writes: the top models mixed by their rolling-origin
#: log predictive density on the end of the training data (pseudo-BMA). Chosen on the tuning
#: series over fit seeds 0-2 (benchmarks/results/extrapolation/forecast_choice/README.md,
#: "The rolling-origin mixture"): against the BIC-weighted mixture (``bma``, the default
#: before), seed by seed better on airline, call-centre and sulphuric, pooled
#: log RMSE ratio -0.143 +- 0.043 (69 of 90 seeds better).
DEFAULT_FORECAST = "rolling-mix"
#: Models mixed or chosen from by ``--forecast`` unless ``--forecast-models`` says otherwise.
FORECAST_MODELS = 5
#: Bands of :func:`prolas.report.forecast.forecast`: the models' own predictive band, or
#: the band with every component's standard deviation scaled by the factor that best
#: forecast the end of the training data (:func:`prolas.report.forecast.band_scale`), from
#: the hyperparameters fitted on all the data (``calibrated``) or refitted before each
#: origin (``refitted``), or ``refitted``'s factor to the power :data:`BAND_SHRINK_POWER`
#: (``shrunk``).
FORECAST_BANDS = ("model", "calibrated", "refitted", "shrunk")
#: ``--forecast-band`` choices: a band of :data:`FORECAST_BANDS`, or ``auto``: ``shrunk``
#: for the fixed seasonal kernel's forecast, ``refitted`` for every other
#: (:func:`prolas.fitjob.band_used`).
FORECAST_BAND_CHOICES = ("auto", *FORECAST_BANDS)
#: Decided on the M3 tuning half (benchmarks/results/forecast_peers/README.md, decisions
#: 1 and 2): ``refitted`` raised the mean 95 % coverage from 0.802 to 0.883 and lowered the
#: interval score from 9.47 to 7.88 (``calibrated``: 0.787 and 9.62). For the fixed
#: seasonal kernel ``auto`` takes ``shrunk`` (benchmarks/results/band_factor/, decided on
#: the tuning half at fit seeds 0-2: interval score 5.59-5.63 -> 5.19-5.20, coverage 0.96
#: -> 0.94-0.95).
DEFAULT_FORECAST_BAND = "auto"
#: ``shrunk``'s power on the ``refitted`` factor s: s^0.5, its logarithm pulled halfway to
#: 0. The check's five overlapping origins make s a noisy estimate, and its noise widened
#: some bands for nothing while others stayed short (benchmarks/results/band_factor/).
BAND_SHRINK_POWER = 0.5
#: ``--forecast-trend`` choices: ``linear`` leaves out of a forecast's models every model
#: with a polynomial trend (a canonical term with two or more LIN factors:
#: :func:`prolas.report.forecast.polynomial_trend`), ``any`` keeps them.
FORECAST_TRENDS = ("linear", "any")
#: Decided on the M3 tuning half at fit seed 1 (benchmarks/results/trend_guard/): mean MASE
#: 1.020 -> 0.913, interval score 7.97 -> 6.75, CRPS 0.733 -> 0.663, coverage 0.899 ->
#: 0.917. On the report half, which did not decide, level (MASE 0.875 -> 0.889).
DEFAULT_FORECAST_TREND = "linear"
#: ``--forecast-from`` choices: the models a forecast mixes or chooses from. ``search``:
#: the search's top models (``--forecast-models``, ``--forecast-trend``); ``fixed``: the
#: one fixed additive kernel :data:`FIXED_FORECAST_KERNEL`, fitted on the series whatever
#: the search found; ``auto``: ``fixed`` for a series of fewer than
#: :data:`FIXED_FORECAST_BELOW` points, else ``search``. The search, its best model and
#: its report do not depend on it.
FORECAST_SOURCES = ("auto", "search", "fixed")
#: ``prolas bench --forecast`` suites: the nine series with ABCD's published RMSE, 150 M3
#: monthly series (the tuning and report halves of every forecast and search default),
#: and 150 other M3 monthly series drawn later (``data/m3-monthly-b/README.md``).
FORECAST_SUITES = ("tsdl", "m3-monthly", "m3-monthly-b")
DEFAULT_FORECAST_SOURCE = "auto"
#: The fixed kernel: a linear trend, a periodic part and a smooth part (Corani, Benavoli &
#: Zaffalon 2021's composition for M1/M3 without its spectral mixture). Decided on the M3
#: tuning half at fit seeds 1 and 2 (benchmarks/results/fixed_kernel/): against the
#: search's five-model mixture, mean MASE 0.923 -> 0.833 and 0.913 -> 0.834, interval
#: score 7.48 -> 6.95 and 7.15 -> 7.07, CRPS 0.680 -> 0.628 and 0.674 -> 0.644, coverage
#: 0.898 -> 0.928 and 0.904 -> 0.921. On the report half, which did not decide, the MASE
#: fell again (0.906 -> 0.841, 0.884 -> 0.854) but the interval score rose (6.75 -> 7.22,
#: 7.02 -> 8.27). At fit seed 0, measured after the decision, the search's mixture was
#: ahead on the tuning half (MASE 0.880 against 0.885, interval score 5.90 against 7.30).
#: Neither another fixed kernel (LIN + LIN*PER + SE), nor its own band, nor 32 restarts
#: passed their rules on the tuning half (benchmarks/results/fixed_kernel_variants/,
#: fixed_kernel_restarts/); nor did the kernel on log y (benchmarks/results/log_forecast/).
FIXED_FORECAST_KERNEL = "LIN + PER + SE"
#: The fixed kernel is fitted at the fit seed s and at s + 3 and s + 6, and the three fits'
#: predictives are mixed with equal weights: optima of nearly equal likelihood forecast
#: short series very differently, and the mixture holds that spread. Failed on the M3
#: tuning half by its MASE margin (+1.5 % at two seeds; benchmarks/results/
#: fixed_kernel_restarts/), then decided on 150 M3 series no choice had seen (set B,
#: benchmarks/results/fixed_kernel_seeds_b/): against one fit, mean interval score 8.43 ->
#: 7.92, 8.26 -> 7.91, 8.47 -> 7.76 and MASE 0.930 -> 0.895, 0.891 -> 0.875, 0.920 ->
#: 0.893 at fit seeds 0, 1, 2, coverage 0.91 -> 0.92.
FIXED_FORECAST_SEED_OFFSETS = (0, 3, 6)
#: Where the series' season is known (:func:`prolas.report.forecast.season_period`:
#: ``--season-length``, else one year for dates a month or a quarter apart) the fixed
#: forecast is this kernel instead, with PER's period held at the season (the same three
#: fit seeds, mixed equally): a seasonal shape repeating at the season whose correlation
#: decays over the SE factor's lengthscale, so the shape may drift. Decided on the M3 tuning
#: half at fit seeds 0, 1, 2 in two steps (benchmarks/results/fixed_season/): holding the
#: period of LIN + PER + SE (a free period landed on the year in 26-34 % of fits), mean MASE
#: 0.847-0.860 -> 0.797-0.800, interval score 6.72-7.10 -> 6.54-6.55; then this kernel
#: with the period held, MASE -> 0.750-0.777, interval score -> 5.59-5.63, CRPS 0.618-0.620
#: -> 0.571-0.583, coverage 0.944 -> 0.96, 1.2 s per series.
FIXED_SEASONAL_KERNEL = "LIN + PER*SE + SE"
#: Every kernel the fixed forecast may come from.
FIXED_FORECAST_KERNELS = (FIXED_FORECAST_KERNEL, FIXED_SEASONAL_KERNEL)
#: ``auto`` forecasts a series of fewer training points than this from the fixed kernel:
#: the M3 monthly series that decided it have 48-126; the rule was written for series
#: where the search's own time is most of the wait, before any forecast was scored.
FIXED_FORECAST_BELOW = 144
#: The ``refitted`` band refits each model on prefixes of at most this many points; on a
#: longer series the models keep their hyperparameters for the band's check (as
#: ``calibrated``). 25 exact refits took 80 s at 428 points (gas-production) and grow
#: about as N^2.5; the M3 series that chose the band have at most 126.
BAND_REFIT_LIMIT = 500

#: What PROLAS models BIC with (``prolas fit --latent-surrogate``): ``ot``, a GP with the
#: optimal-transport kernel on the decoded expressions (default), or ``latent``, a GP on the
#: latent point (Algorithm 2 as published); :mod:`prolas.search.latent`.
LATENT_SURROGATES = ("latent", "ot")
#: Points of PROLAS's initial design: the grammar's base kernels, then ``--warm-start K``
#: portfolio expressions (:mod:`prolas.search.portfolio`), then Sobol points (on series of
#: ``SHORT_SERIES_POINTS`` or more, ``LatentBOConfig.long_draws`` grammar draws come after
#: the portfolio, extra to these).
INITIAL_DESIGN = 10
#: Portfolio expressions after the base kernels (decided over fit seeds 1 and 2 of the
#: tuning series: ``benchmarks/results/initial_design/``).
WARM_START = 5
#: With ``LatentBOConfig.short_library`` (off by default), series with fewer points
#: than this take PROLAS's warm start from the short-series library
#: (``portfolio_bic_short.json``: the M3 monthly tuning half, 48–126 points), longer ones
#: from the nine benchmark series' library (144–200 points); airline's 144 points are the
#: shortest of the nine (``benchmarks/results/portfolio_short/``). Also the length below
#: which ``LatentBOConfig.short_patience`` applies.
SHORT_SERIES_POINTS = 144
#: Two searches' best BICs this close count as the same optimum: the fit of one
#: expression ends within this of its optimum in either search (benchmarks/results/
#: fit_reliability/), so a smaller difference says nothing about the search. It is also
#: what a patience stop counts as progress (``LatentBOConfig.short_patience``).
BIC_TIE = 0.1
