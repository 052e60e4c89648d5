"""Compile a shim (fmtsim/conformance/shims/*.cpp) with the system C++ compiler, cache it per
user, load it with ctypes.

The cache lives in ``$FMTSIM_CACHE`` or ``$XDG_CACHE_HOME/fmtsim`` or ``~/.cache/fmtsim``;
the library's name carries a hash of the shim source, the compiler, its flags and the
headers' identity (path, size, modification time), so a new toolkit or a changed shim
compiles afresh. The library is written under a temporary name and renamed.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

__all__ = ["ShimUnavailable", "SOURCE_CODES", "cache_dir", "find_compiler", "build", "source_name", "source_bits",
           "unavailable"]

# the shims' numbering of source types (each shim's entry points take one of these)
SOURCE_CODES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3}
_SOURCE_BITS = {"float32": np.float32, "float64": np.float64, "float16": np.uint16, "bfloat16": np.uint16}


_ANNOUNCED: set[str] = set()  # the builds that said so on stderr in this process


class ShimUnavailable(RuntimeError):
    """No compiler, no headers, or the compile failed: the reason is the message."""

    remembered: Path | None = None  # where build(remember_failure=True) keeps the failure


def cache_dir() -> Path:
    env = os.environ.get("FMTSIM_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fmtsim"


def find_compiler() -> str | None:
    """``$CXX``, else g++, c++ or clang++ on PATH."""
    cxx = os.environ.get("CXX")
    if cxx:
        return shutil.which(cxx) or (cxx if Path(cxx).is_file() else None)
    for name in ("g++", "c++", "clang++"):
        found = shutil.which(name)
        if found:
            return found
    return None


def source_name(x: np.ndarray) -> str:
    """The source type of a float32, float64, float16 or bfloat16 array (ValueError otherwise)."""
    if x.dtype == ml_dtypes.bfloat16:
        return "bfloat16"
    names = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64", np.dtype(np.float16): "float16"}
    if x.dtype not in names:
        raise ValueError(f"the shims take float32, float64, float16 or bfloat16 inputs, not {x.dtype}")
    return names[x.dtype]


def source_bits(x: np.ndarray) -> np.ndarray:
    """``x`` contiguous, as the shims read it: float32/float64 values, 16-bit patterns."""
    return np.ascontiguousarray(x).view(_SOURCE_BITS[source_name(x)])


def unavailable(load: Callable[[], Any]) -> str | None:
    """Why ``load()`` (a shim's cached loader) cannot give the shim here, None when it can."""
    try:
        load()
    except ShimUnavailable as e:
        return str(e)
    return None


def build(shim: str, include_dirs: list[Path], identity: list[Path], defines: tuple[str, ...] = (),
          what: str = "shim", source: bytes | None = None, compile_flags: tuple[str, ...] = (),
          link_flags: tuple[str, ...] = (), identity_text: str = "", announce: bool = False,
          remember_failure: bool = False) -> ctypes.CDLL:
    """The shim ``shims/<shim>.cpp`` (or ``source``) compiled against ``include_dirs`` and loaded.

    ``identity``: the header files whose change must trigger a rebuild; ``identity_text``: more
    of the same (a toolchain's version); ``compile_flags`` go before the source, ``link_flags``
    after it (libraries). ``announce``: say on stderr, before compiling, that it is compiling
    (when stderr is a terminal: a pipe or a log stays clean; once per ``what`` and process).
    ``remember_failure``: a compile that fails is remembered in the cache (keyed as the
    library, and by the compiler's size and time), not run again by later processes: for a
    build with a fallback (flags the compiler may refuse)."""
    cxx = find_compiler()
    if cxx is None:
        raise ShimUnavailable(f"{what}: no C++ compiler found (set CXX, or install g++)")
    if source is None:
        source = resources.files("fmtsim.conformance.shims").joinpath(f"{shim}.cpp").read_bytes()
    flags = ["-O2", "-shared", "-fPIC", "-std=c++17", *[f"-D{d}" for d in defines],
             *[f"-I{d}" for d in include_dirs], *compile_flags]
    h = hashlib.sha256(source)
    h.update("\0".join([cxx, *flags, *link_flags, identity_text]).encode())
    for p in identity:
        st = p.stat()
        h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
    out_dir = cache_dir()
    lib = out_dir / f"{shim}-{h.hexdigest()[:16]}.so"
    failed = None
    if remember_failure and not lib.exists():
        st = Path(cxx).stat()
        h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        failed = out_dir / f"{shim}-{h.hexdigest()[:16]}.failed"
        if failed.exists():
            raise ShimUnavailable(failed.read_text(errors="replace"))
    if not lib.exists():
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ShimUnavailable(f"{what}: cannot create the cache directory {out_dir}: {e.strerror or e} "
                                  "(set FMTSIM_CACHE to a writable directory)") from e
        if announce and what not in _ANNOUNCED and sys.stderr is not None and sys.stderr.isatty():
            _ANNOUNCED.add(what)  # a fallback build after a refused one is the same wait
            print(f"fmtsim: compiling {what} (once; cached in {out_dir})", file=sys.stderr, flush=True)
        try:
            with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
                src = Path(tmp) / f"{shim}.cpp"
                src.write_bytes(source)
                tmp_lib = Path(tmp) / "shim.so"
                try:
                    r = subprocess.run([cxx, *flags, str(src), "-o", str(tmp_lib), *link_flags],
                                       capture_output=True, text=True)
                except OSError as e:  # not executable, not a program for this machine
                    raise ShimUnavailable(f"{what}: cannot run the compiler {cxx}: {e.strerror or e}") from e
                if r.returncode != 0:
                    first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[:300])
                    why = f"{what}: compiling {shim}.cpp with {cxx} failed: " \
                          f"{first or f'exit status {r.returncode}, no message'}"
                    err = ShimUnavailable(why)
                    if failed is not None:
                        (Path(tmp) / "failed").write_text(why)
                        os.replace(Path(tmp) / "failed", failed)
                        err.remembered = failed
                    raise err
                os.replace(tmp_lib, lib)
        except OSError as e:  # a cache directory that cannot be written (permissions, a full disk)
            raise ShimUnavailable(f"{what}: cannot write to the cache directory {out_dir}: {e} "
                                  "(set FMTSIM_CACHE to a writable directory)") from e
    try:
        return ctypes.CDLL(str(lib))
    except OSError as e:  # a cache on a noexec mount, a damaged file
        raise ShimUnavailable(f"{what}: cannot load the library {lib}: {e} (a cache directory mounted "
                              "noexec cannot hold it: set FMTSIM_CACHE; a damaged file: delete it)") from e
