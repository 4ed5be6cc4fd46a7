"""Forced text in the tokenizer's own split (Theorem 20, D.3): the forced planner and the boundary cover."""
