"""Exact logic keywords: not, oneOf, if/then/else as set differences, complements and disjointness proofs."""
