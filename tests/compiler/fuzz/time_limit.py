"""The compile time limit the fuzzers run under and how far past it a compile may end.

`max_seconds` must be honoured within 10% plus a small constant: the constant covers the last stretch
between two deadline checks and the work outside the checked loops (reading the input, the cache key).
"""

from __future__ import annotations

LIMIT_SECONDS = 0.5
TOLERANCE = 0.1
SLACK_SECONDS = 0.25


def assert_within_limit(elapsed: float, what: str) -> None:
    """Fail when a compile that took `elapsed` seconds overshot the limit by more than the tolerance."""
    allowed = LIMIT_SECONDS * (1 + TOLERANCE) + SLACK_SECONDS
    assert elapsed <= allowed, f"compiling {what[:300]} took {elapsed:.3f} s under max_seconds={LIMIT_SECONDS}"
