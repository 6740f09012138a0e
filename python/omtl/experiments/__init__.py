"""The papers' experiments: ``omtl reproduce table1`` and ``omtl reproduce table2``.

- ``.table1`` — Cavallanti & Cesa-Bianchi, Table 1 (budget learners vs the Perceptron battery).
- ``.table2`` — Yang et al. (ROMCO), Tables 2 and 3 and Figs. 1–2 on the substitute data sets.
- ``.figures`` — the PNG figures.
- ``.paper_numbers`` — the published numbers, transcribed with their source table.
- ``.runner`` — data sets, budgets (§7.2), learner lookup, parallel jobs with progress bars.

See ``docs/experiments.md``.
"""

from .runner import budget_from_percent, budgets_from_battery
from .table1 import run_table1
from .table2 import run_table2

__all__ = ["budget_from_percent", "budgets_from_battery", "run_table1", "run_table2"]
