"""Search strategies over kernel expressions; all share :class:`Evaluator`."""

from prolas.search.evaluator import (
    BudgetExhausted,
    Evaluation,
    Evaluator,
    Score,
    SearchResult,
    TableScorer,
)

__all__ = ["BudgetExhausted", "Evaluation", "Evaluator", "Score", "SearchResult", "TableScorer"]
