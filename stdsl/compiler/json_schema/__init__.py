"""JSON Schema (and Pydantic) to IR: resolution, logic, keys, strings, numbers, formats, recursion and validation."""
