"""Paths of the data the tests read: the in-repository copies under tests/data (tests/data/SOURCES.md says where
each came from), and the one large optional input, the MaskBench sample, which only `-m slow` tests read."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
JSON_SCHEMA_SUITE = DATA / "json-schema-test-suite" / "draft2020-12"
GRAMMARS = DATA / "grammars"
TASKS = DATA / "tasks"
EXTRACTION = TASKS / "extraction"
RECURSIVE = TASKS / "recursive"
FIELDS = TASKS / "fields"

MASKBENCH = Path(__file__).resolve().parents[1].parent / "shared" / "jsonschemabench" / "maskbench-sample"
MASKBENCH_ABSENT = "the optional MaskBench sample (../shared/jsonschemabench/maskbench-sample) is not beside this clone"
