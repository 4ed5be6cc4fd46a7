"""Recursion: pushdown grammars over called definitions, the machine that steps them, and the constraint around both."""
