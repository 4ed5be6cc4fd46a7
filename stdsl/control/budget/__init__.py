"""Valid outputs under a token budget (Theorem 21): need on automata and pushdowns, the budget masks."""
