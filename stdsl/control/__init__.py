"""The constraint controller: per-row state (DFA or pushdown), masks, forced spans, budgets.

numpy only: importing it loads no MLX and changes nothing in the process, so the integrations
(torch, vLLM) and the runtime share it.
"""
