"""`stdsl.Program` and `@stdsl.program` compile without the runtime: MLX loads only when a program runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BUILD_AND_COMPILE = """
import json, sys
import stdsl

prog = stdsl.Program('param name = "x"\\noutput \\"\\"\\"Hi {{ name }}: {n: int(1..9)}\\"\\"\\"')
constraint = stdsl.compile(prog)

@stdsl.program
def count(text: str):
    '''
    user \\"\\"\\"{{ text }}\\"\\"\\"
    output \\"\\"\\"{n: int(1..9)}\\"\\"\\"
    '''

print(json.dumps({
    "accepts": [constraint.accepts("Hi x: 7"), constraint.accepts("Hi x: 0")],
    "decorated": [stdsl.compile(count).accepts("5"), stdsl.compile(count).accepts("10")],
    "loaded": sorted(m for m in sys.modules if m.split(".")[0] == "mlx" or m.startswith("stdsl.runtime")),
}))
"""


def test_building_and_compiling_a_program_loads_no_runtime(tmp_path: Path) -> None:
    script = tmp_path / "build_and_compile.py"
    script.write_text(BUILD_AND_COMPILE, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["accepts"] == [True, False] and report["decorated"] == [True, False]
    assert report["loaded"] == []
