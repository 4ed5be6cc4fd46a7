"""Certified block-parallel decoding (Theorem 23): blocks of the language, drafts, certification."""
