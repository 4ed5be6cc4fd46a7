"""Per-row constraint control: the row state (DFA or pushdown), forced planner and boundary cover, budgets."""
