"""A missing optional part is one line naming the `pip install` to run (issue 28 item 4): `stcon serve` without
fastapi or uvicorn exits 2 with `stcon: error: ...` and no traceback; the vLLM and transformers integrations
without their engines raise MissingExtraError (an ImportError) with that line. Each case runs in a real process
whose imports of the missing packages are refused by a meta-path finder, as if they were not installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

UNINSTALL = """
import sys

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {missing!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
"""


def run_without(missing: set[str], code: str) -> subprocess.CompletedProcess[str]:
    script = UNINSTALL.format(missing=missing) + code
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("missing", ["uvicorn", "fastapi"])
def test_serve_without_the_serve_extra_is_one_line_and_status_2(missing: str, tmp_path: Path) -> None:
    done = run_without({missing}, "from stdsl.cli import main\n"
                                  f"sys.exit(main(['serve', '--model', {str(tmp_path / 'none.gguf')!r}]))")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"stcon: error: stcon serve needs {missing}, which is not installed; run: pip install "
                           f"'stdsl[serve]' (from this checkout: pip install -e '{ROOT}[serve]')\n")


@pytest.mark.parametrize(("module", "missing", "install"), [
    pytest.param("stdsl.integrations.vllm", "vllm", "pip install vllm", marks=pytest.mark.slow),  # imports torch
    ("stdsl.integrations.vllm", "torch", "pip install vllm"),
    pytest.param("stdsl.integrations.transformers", "transformers", "pip install torch transformers",
                 marks=pytest.mark.slow),
    ("stdsl.integrations.transformers", "torch", "pip install torch transformers"),
])
def test_integrations_without_their_engine_name_the_install(module: str, missing: str, install: str) -> None:
    done = run_without({missing}, f"""
from stdsl.errors import MissingExtraError
try:
    import {module}
except ImportError as error:
    assert isinstance(error, MissingExtraError) and error.extra == {module.rsplit('.', 1)[1]!r}
    print(error)
    sys.exit(2)
""")
    assert done.returncode == 2, done.stderr
    assert done.stdout == f"{module} needs {missing}, which is not installed; run: {install}\n"
