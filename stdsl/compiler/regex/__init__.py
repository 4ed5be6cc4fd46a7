"""Regular expressions: the Python `re` syntax parsed to IR, with anchors."""
