"""A compile in a fresh process imports no module it does not need: a module's import can cost more than a small
schema's whole compile (issue 36, item 3: a cold compile with its imports ≤ 50 ms)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize(("schema", "strict", "modules"), [
    # the shipped free-form table is matched by its structure text, not by a digest (OpenSSL's import: ~3 ms)
    ({"type": "object", "properties": {"a": {}}}, False, ["hashlib", "_hashlib"]),
    # annotation keys are ruled out as misspellings by difflib's own cheap bounds, without importing it
    ({"type": "object", "properties": {"a": {"type": "string", "label": "A", "ui:widget": "x"}}}, True, ["difflib"]),
    # an open object's undeclared key (`name_complement`) sorts its child bytes without `np.unique` (numpy.ma: ~20 ms)
    ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}, False, ["numpy.ma"]),
], ids=["free-form value", "annotations", "undeclared keys"])
def test_a_cold_compile_imports_none_of(schema: dict, strict: bool, modules: list[str]) -> None:
    code = ("import json, sys; from stdsl.compiler.constraint import compile; "
            f"compile(json.loads({json.dumps(json.dumps(schema))}), strict={strict}); "
            f"print(json.dumps([m for m in {modules!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
