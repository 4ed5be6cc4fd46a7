"""mlx-lm's model code without its package start-up, which imports transformers and with it torch.

`mlx_lm/__init__.py` imports the converter and tokenizer utilities, so `from mlx_lm.models.llama
import Model` loads transformers and torch: about 7 s of start-up on this CPU, and a process that
has decoded on the engine thread can then abort at interpreter exit ("terminate called without an
active exception"). The model and cache modules need none of it. `defer_package("mlx_lm")`
registers the package with its `__init__` deferred until one of its own names is first read, so
`import mlx_lm; mlx_lm.load(...)` and `from mlx_lm import generate` still work unchanged.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any


class _DeferredPackage(types.ModuleType):
    """A package whose `__init__` runs on the first read of a name it does not have yet."""

    def __getattr__(self, name: str) -> Any:
        spec = self.__spec__
        if spec is None or spec.loader is None:
            raise AttributeError(name)
        object.__setattr__(self, "__class__", types.ModuleType)
        spec.loader.exec_module(self)
        return getattr(self, name)


def defer_package(name: str) -> None:
    """Register package `name` with its `__init__` deferred; nothing if it is imported already or missing."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _DeferredPackage
    sys.modules[name] = module
