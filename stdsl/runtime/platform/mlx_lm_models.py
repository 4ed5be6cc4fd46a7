"""mlx-lm's model and cache code without its package start-up, leaving `import mlx_lm` to whoever wants it.

`mlx_lm/__init__.py` imports the converter and tokenizer utilities, so `from mlx_lm.models.llama import Model`
loads transformers and torch: seconds of start-up, and a process that decoded on the runner thread could then
abort at exit ("terminate called without an active exception"). The model modules need none of it, so while
`mlx_lm` is not imported its submodule (`mlx_lm.models`, `mlx_lm.sample_utils`) is loaded on its own from
mlx-lm's folder and entered in `sys.modules` under its real name; then `from mlx_lm.models.llama import Model`
works anywhere with no parent package. `sys.modules["mlx_lm"]` is never written: a later `import mlx_lm` runs
the real package start-up, shares these modules (the same classes), and finds them as its attributes
(`mlx_lm.models`) as a plain import would have left them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from stdsl.errors import UnsupportedModelError

_lock = threading.Lock()


class _ChildrenAttached(importlib.abc.Loader):
    """The package's own loader, which first attaches the submodules already in `sys.modules` to the package (and
    retires the finder that made it: the package is imported from then on)."""

    def __init__(self, loader: importlib.abc.Loader, finder: _ParentFinder) -> None:
        self.loader = loader
        self.finder = finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        prefix = module.__name__ + "."
        for name, child in list(sys.modules.items()):
            if name.startswith(prefix) and "." not in name[len(prefix):] and child is not None:
                setattr(module, name[len(prefix):], child)
        self.loader.exec_module(module)


class _ParentFinder(importlib.abc.MetaPathFinder):
    """Finds the real package with a loader that attaches its loaded parts; leaves `sys.meta_path` once it loads."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.package:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _ChildrenAttached(spec.loader, self)
        return spec


def import_without_package_init(name: str) -> ModuleType:
    """Import module `name` (`package.part[.more]`) without running `package/__init__.py` if the package is not
    imported yet: `package.part` is loaded from the package's folder on its own, the rest imported under it.

    Raises UnsupportedModelError when the package or the part is not installed.
    """
    package, _, rest = name.partition(".")
    part = rest.partition(".")[0]
    first = f"{package}.{part}"
    with _lock:
        if package not in sys.modules and part and first not in sys.modules:
            _load_alone(package, part)
    return importlib.import_module(name)


def _load_alone(package: str, part: str) -> None:
    """Enter `package.part` in `sys.modules`, executed from the package's folder with no package module."""
    package_spec = importlib.util.find_spec(package)
    if package_spec is None or not package_spec.submodule_search_locations:
        raise UnsupportedModelError(f"{package}.{part} needs the {package} package; install it with: "
                                    f"pip install {package}")
    spec = importlib.machinery.PathFinder.find_spec(f"{package}.{part}", list(package_spec.submodule_search_locations))
    if spec is None or spec.loader is None:
        raise UnsupportedModelError(f"{package} has no module {part!r} (found {package_spec.origin})")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[spec.name]
        raise
    if not any(isinstance(finder, _ParentFinder) and finder.package == package for finder in sys.meta_path):
        sys.meta_path.insert(0, _ParentFinder(package))


if TYPE_CHECKING:
    from mlx_lm.models import cache, llama, qwen2, qwen3
else:
    cache, llama, qwen2, qwen3 = (import_without_package_init(f"mlx_lm.models.{name}")
                                  for name in ("cache", "llama", "qwen2", "qwen3"))
KVCache = cache.KVCache
make_prompt_cache = cache.make_prompt_cache


__all__ = ["KVCache", "cache", "import_without_package_init", "llama", "make_prompt_cache", "qwen2",
           "qwen3"]
