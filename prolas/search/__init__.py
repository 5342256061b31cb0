"""The search layer: strategies over kernel expressions, all scored by one :class:`Evaluator`.

Imports the layers below it (records, data, expressions, grammar, encoding, KG-VAE,
:mod:`prolas.gp`, :mod:`prolas.surrogates`) and nothing above (pipeline, report, bench,
cli). Its modules:

* :mod:`prolas.search.config`: :class:`~prolas.search.config.SearchConfig` (one
  search's settings, validated) and ``search_data`` (the points it searches).
* :mod:`prolas.search.evaluator`: the :class:`Evaluator` every strategy proposes to
  (canonical de-duplication, budget, batches), :class:`TableScorer` for tests.
* :mod:`prolas.search.executors`: where fits run (in process, a process pool, Dask).
* :mod:`prolas.search.cache`: the persistent fit cache shared by benchmark grids.
* :mod:`prolas.search.journal`: the crash-safe journal and ``--resume`` by replay,
  refused when the search's fingerprint differs.
* One module per strategy: :mod:`~prolas.search.greedy` (CKS),
  :mod:`~prolas.search.latent` (PROLAS, Algorithm 2), its warm start
  :mod:`~prolas.search.portfolio`, :mod:`~prolas.search.random_search` and
  :mod:`~prolas.search.structural` (BO over structures with the surrogates' kernels).

:mod:`prolas.pipeline` (the layer above) wires a configured strategy to its data and
refits the best model.
"""

from prolas.search.evaluator import BudgetExhausted, Evaluator, TableScorer

__all__ = ["BudgetExhausted", "Evaluator", "TableScorer"]
