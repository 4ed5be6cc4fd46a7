"""Typed values read from an output while it streams: each value as its closing byte is accepted (README.md and
docs/serving.md)."""
