"""How many points prolas computes with exactly (shared by the pipeline and the CLI).

Exact GP fits cost O(N^3) time and O(N^2) memory. A long series is therefore searched on
an evenly spaced subsample of :data:`SEARCH_POINTS` points, and the chosen model is
refitted on all points: exactly up to :data:`EXACT_REFIT_LIMIT` points, beyond that with a
sparse variational GP (:mod:`prolas.scalable`). The figures behind both numbers are in
``benchmarks/SCALING.md``.
"""

#: Default size of the evenly spaced subsample a long series is searched on.
SEARCH_POINTS = 400
#: Largest N refitted exactly; longer series are refitted with SGPR.
EXACT_REFIT_LIMIT = 2000
