"""The search layer: strategies over kernel expressions, all scored by one :class:`Evaluator`."""

from prolas.search.evaluator import BudgetExhausted, Evaluator, TableScorer

__all__ = ["BudgetExhausted", "Evaluator", "TableScorer"]
