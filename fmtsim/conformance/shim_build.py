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
import tempfile
from importlib import resources
from pathlib import Path

__all__ = ["ShimUnavailable", "cache_dir", "find_compiler", "build"]


class ShimUnavailable(RuntimeError):
    """No compiler, no headers, or the compile failed: the reason is the message."""


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


def build(shim: str, include_dirs: list[Path], identity: list[Path], defines: tuple[str, ...] = (),
          what: str = "shim") -> ctypes.CDLL:
    """The shim ``shims/<shim>.cpp`` compiled against ``include_dirs`` and loaded.

    ``identity``: the header files whose change must trigger a rebuild."""
    cxx = find_compiler()
    if cxx is None:
        raise ShimUnavailable(f"{what}: no C++ compiler found (set CXX, or install g++)")
    source = resources.files("fmtsim.conformance.shims").joinpath(f"{shim}.cpp").read_bytes()
    flags = ["-O2", "-shared", "-fPIC", "-std=c++17", *[f"-D{d}" for d in defines],
             *[f"-I{d}" for d in include_dirs]]
    h = hashlib.sha256(source)
    h.update("\0".join([cxx, *flags]).encode())
    for p in identity:
        st = p.stat()
        h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
    out_dir = cache_dir()
    lib = out_dir / f"{shim}-{h.hexdigest()[:16]}.so"
    if not lib.exists():
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
            src = Path(tmp) / f"{shim}.cpp"
            src.write_bytes(source)
            tmp_lib = Path(tmp) / "shim.so"
            r = subprocess.run([cxx, *flags, str(src), "-o", str(tmp_lib)], capture_output=True, text=True)
            if r.returncode != 0:
                first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[:300])
                raise ShimUnavailable(f"{what}: compiling the shim with {cxx} failed: {first}")
            os.replace(tmp_lib, lib)
    return ctypes.CDLL(str(lib))
