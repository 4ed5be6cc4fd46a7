"""The constraint controller: masks, forced spans and budgets of one constraint (DFA or pushdown), and a row's log.

numpy only: importing it loads no MLX and changes nothing in the process, so the integrations
(torch, vLLM) and the runtime share it.
"""
