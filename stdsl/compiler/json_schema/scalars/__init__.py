"""Scalar languages as byte-level IR: JSON strings and their characters, numbers and multipleOf, formats, key names."""
