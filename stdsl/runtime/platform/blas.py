"""Bind a real BLAS (MKL's libmkl_rt) for MLX's CPU backend, whenever MLX was imported.

MLX's Linux CPU wheel bundles the reference BLAS (~2 GFLOP/s). Its library's BLAS and LAPACK calls
(cblas_sgemm, sgetrf_, ...) are sent to MKL (~180 GFLOP/s on one thread) by rewriting their PLT slots
(`plt_slots.rebind`), so the order of `import mlx.core` and `stdsl.load()` does not matter, MKL is loaded
privately (RTLD_LOCAL, no symbol of it is seen by other libraries) and no environment variable is set:
unless the process's environment says otherwise, MKL runs sequentially on one thread and the LP64
interface, set through its own calls. Called by `stdsl.load()`; nothing happens at import.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import platform
import sys
import sysconfig
import threading
import warnings
from pathlib import Path

MKL_LIBRARY_NAMES = ("libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so")
MLX_LIBRARY_PREFIX = "libmlx."
MKL_THREADING_SEQUENTIAL = 1
MKL_INTERFACE_LP64 = 0

_bound_path: str | None = None
_warned: set[str] = set()
_lock = threading.Lock()


def _candidate_dirs() -> list[Path]:
    """Directories where PyPI `mkl` puts its shared libraries (venv, user and system prefixes)."""
    dirs: list[Path] = []
    for prefix in (sys.prefix, sys.base_prefix, sysconfig.get_config_var("userbase")):
        if prefix:
            dirs.append(Path(prefix) / "lib")
    for key in ("data", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.append(Path(path) / "lib")
    return dirs


def find_mkl() -> Path | None:
    """Return the path of `libmkl_rt` from the installed `mkl` distribution, or None if absent."""
    try:
        dist = importlib.metadata.distribution("mkl")
        for entry in dist.files or ():
            if Path(str(entry)).name in MKL_LIBRARY_NAMES:
                located = Path(str(dist.locate_file(entry))).resolve()
                if located.is_file():
                    return located
    except importlib.metadata.PackageNotFoundError:
        pass
    for directory in _candidate_dirs():
        for name in MKL_LIBRARY_NAMES:
            candidate = directory / name
            if candidate.is_file():
                return candidate.resolve()
    return None


def _warn_once(kind: str, message: str) -> None:
    if kind not in _warned:
        _warned.add(kind)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _open_mkl(library: Path) -> ctypes.CDLL:
    """libmkl_rt, loaded privately; set to one sequential thread and LP64 when this call loaded it first and the
    environment does not choose (MKL_NUM_THREADS, MKL_THREADING_LAYER, MKL_INTERFACE_LAYER)."""
    try:
        ctypes.CDLL(str(library), mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        return ctypes.CDLL(str(library))
    except OSError:
        mkl = ctypes.CDLL(str(library))
    if "MKL_INTERFACE_LAYER" not in os.environ:
        mkl.MKL_Set_Interface_Layer(MKL_INTERFACE_LP64)
    if "MKL_NUM_THREADS" not in os.environ:
        if "MKL_THREADING_LAYER" not in os.environ:
            mkl.MKL_Set_Threading_Layer(MKL_THREADING_SEQUENTIAL)
        mkl.MKL_Set_Num_Threads(1)
    return mkl


def bind_blas() -> str | None:
    """Send MLX's CPU BLAS and LAPACK calls to MKL; returns the bound library's path or None.

    Idempotent and thread-safe; imports `mlx.core`. None, with nothing done, off Linux x86_64, when
    `STDSL_NO_BLAS=1` or when MLX's library makes no BLAS call through a PLT slot. None with one warning
    when PyPI `mkl` is missing or MLX's library cannot be rebound (MLX then keeps its reference BLAS).
    """
    global _bound_path
    with _lock:
        if _bound_path is not None:
            return _bound_path
        if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
            return None
        if os.environ.get("STDSL_NO_BLAS") == "1":
            return None
        import mlx.core  # noqa: F401  (its library's slots are what gets rebound)

        from stdsl.runtime.platform import plt_slots

        mlx_library = plt_slots.loaded_library(MLX_LIBRARY_PREFIX)
        if mlx_library is None:
            return None
        library = find_mkl()
        if library is None:
            _warn_once("missing", "stdsl: PyPI `mkl` is not installed, so MLX's CPU backend uses its slow reference "
                                  "BLAS; install it with: pip install mkl")
            return None
        try:
            rewritten, kept = plt_slots.rebind(mlx_library, _open_mkl(library))
        except (OSError, plt_slots.BindingError) as error:
            _warn_once("rebind", f"stdsl: MLX keeps its slow reference BLAS: {error}; set STDSL_NO_BLAS=1 to "
                                 "silence this")
            return None
        if rewritten + kept == 0:
            return None
        _bound_path = str(library)
        return _bound_path


def bound_blas() -> str | None:
    """The library path bound by `bind_blas`, or None if nothing was bound in this process."""
    return _bound_path
