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
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..sources import source_of

__all__ = ["ShimUnavailable", "SOURCE_CODES", "cache_dir", "compiler_command", "damage", "find_compiler", "build",
           "source_name", "source_bits",
           "unavailable"]

# the shims' numbering of source types (each shim's entry points take one of these)
SOURCE_CODES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3}
_SOURCE_BITS = {"float32": np.float32, "float64": np.float64, "float16": np.uint16, "bfloat16": np.uint16}


_ANNOUNCED: set[str] = set()  # the builds that said so on stderr in this process


class ShimUnavailable(RuntimeError):
    """No compiler, no headers, or the compile failed: the reason is the message."""

    remembered: Path | None = None  # where build(remember_failure=True) keeps the failure
    damaged: str | None = None  # the damaged cache entry the failed build was to replace, said so

    def __init__(self, message: str, *, quiet: bool = False) -> None:
        super().__init__(message)
        # quiet: the ordinary state of a machine without a compiler (no CXX set, none on PATH),
        # where a fallback says nothing; every other reason is worth a warning
        self.quiet = quiet


def cache_dir() -> Path:
    env = os.environ.get("FMTSIM_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fmtsim"


def compiler_command() -> list[str]:
    """The C++ compiler's command line: ``$CXX`` split as a shell splits it (as make does, so
    ``CXX="ccache g++"`` and ``CXX="g++ -O1"`` work), its program found on PATH; else g++, c++
    or clang++ on PATH. ShimUnavailable saying why when there is none."""
    cxx = os.environ.get("CXX")
    if cxx is not None and cxx.strip():
        try:
            words = shlex.split(cxx)
        except ValueError as e:  # an unbalanced quote
            raise ShimUnavailable(f"no C++ compiler found: CXX={cxx!r} cannot be split into words ({e})") from None
        program = shutil.which(words[0]) or (words[0] if Path(words[0]).is_file() else None)
        if program is None:
            named = "" if words == [cxx] else f" names {words[0]!r}, which"
            raise ShimUnavailable(f"no C++ compiler found: CXX={cxx!r}{named} is not a program on PATH or a file "
                                  "(set CXX to a C++ compiler, or install g++)")
        return [program, *words[1:]]
    for name in ("g++", "c++", "clang++"):
        found = shutil.which(name)
        if found:
            return [found]
    raise ShimUnavailable("no C++ compiler found (set CXX, or install g++)", quiet=True)


def find_compiler() -> str | None:
    """The C++ compiler's command line as one string (:func:`compiler_command`), or None."""
    try:
        return shlex.join(compiler_command())
    except ShimUnavailable:
        return None


def source_name(x: np.ndarray) -> str:
    """The source type of a float32, float64, float16 or bfloat16 array (ValueError otherwise)."""
    st = source_of(x.dtype)
    if st is None:
        raise ValueError(f"the shims take float32, float64, float16 or bfloat16 inputs, not {x.dtype}")
    return st.name


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


def _sidecar(lib: Path) -> Path:
    return lib.with_name(lib.name + ".sha256")


def _stamp(lib: Path) -> str:
    """What the sidecar of a sound ``lib`` holds: its name, size and SHA-256."""
    data = lib.read_bytes()
    return f"{lib.name} {len(data)} {hashlib.sha256(data).hexdigest()}\n"


def damage(lib: Path) -> str | None:
    """Why the cached ``lib`` is not the library fmtsim built and installed (no sidecar, another
    size, other contents, a sidecar of another library), or None when it is. Checked before the
    file is loaded: dlopen maps a truncated library and the process dies of SIGBUS on a page past
    its end; a foreign file may load and run anything."""
    side = _sidecar(lib)
    try:
        want = side.read_text(encoding="ascii", errors="replace")
    except OSError:
        return f"no {side.name} records what was built"
    try:
        got = _stamp(lib)
    except OSError as e:
        return f"it cannot be read: {e.strerror or e}"
    if want == got:
        return None
    parts, have = want.split(), got.split()
    if len(parts) != 3 or parts[0] != lib.name:
        return f"{side.name} records another library"
    if parts[1] != have[1]:
        return f"it holds {have[1]} bytes, {parts[1]} were built"
    return "its contents are not what was built (SHA-256 differs)"


def _load(path: Path, symbols: tuple[str, ...]) -> tuple[ctypes.CDLL, list[str]]:
    """``path`` loaded (OSError where it does not load), and those of ``symbols`` it lacks."""
    handle = ctypes.CDLL(str(path))
    return handle, [name for name in symbols if not hasattr(handle, name)]


def _lacks(lib: str, cxx: str, lacking: list[str]) -> str:
    return (f"the library {lib} built by {cxx} lacks the entry point{'s' if len(lacking) > 1 else ''} "
            f"{', '.join(lacking)} (a compiler that hides symbols or builds an empty library?)")


def build(shim: str, include_dirs: list[Path], identity: list[Path], defines: tuple[str, ...] = (),
          what: str = "shim", source: bytes | None = None, compile_flags: tuple[str, ...] = (),
          link_flags: tuple[str, ...] = (), identity_text: str = "", announce: bool = False,
          remember_failure: bool = False, symbols: tuple[str, ...] = (), language: str = "c++") -> ctypes.CDLL:
    """The shim ``shims/<shim>.cpp`` (or ``source``) compiled against ``include_dirs`` and loaded.

    ``language`` "c": the shim is C, ``shims/<shim>.c``, compiled by the same compiler driver as C11
    (``-x c``; g++ and clang++ compile C so): for C-only headers (cpfloat's) that C++ refuses.

    ``identity``: the header files whose change must trigger a rebuild; ``identity_text``: more
    of the same (a toolchain's version); ``compile_flags`` go before the source, ``link_flags``
    after it (libraries). ``announce``: say on stderr, before compiling, that it is compiling
    (when stderr is a terminal: a pipe or a log stays clean; once per ``what`` and process).
    ``remember_failure``: a compile that fails is remembered in the cache (keyed as the
    library, and by the compiler's size and time), not run again by later processes: for a
    build with a fallback (flags the compiler may refuse). ``symbols``: the entry points the
    library must export; a library that lacks one, or does not load, is a failed build.

    A library is compiled under a temporary name, loaded and checked there, and only then
    renamed into the cache, with a sidecar (``<name>.so.sha256``: its name, size and SHA-256)
    written after it; a cached library whose sidecar does not match it (truncated, replaced,
    left by an older fmtsim) is never loaded but built again over it."""
    try:
        cmd = compiler_command()
    except ShimUnavailable as e:
        raise ShimUnavailable(f"{what}: {e}", quiet=e.quiet) from None
    cxx = shlex.join(cmd)
    if language not in ("c++", "c"):
        raise ValueError(f"{what}: language must be 'c++' or 'c', not {language!r}")
    if source is None:
        suffix = ".c" if language == "c" else ".cpp"
        source = resources.files("fmtsim.conformance.shims").joinpath(f"{shim}{suffix}").read_bytes()
    std = ["-x", "c", "-std=c11"] if language == "c" else ["-std=c++17"]
    flags = ["-O2", "-shared", "-fPIC", *std, *[f"-D{d}" for d in defines],
             *[f"-I{d}" for d in include_dirs], *compile_flags]
    h = hashlib.sha256(source)
    h.update("\0".join([*cmd, *flags, *link_flags, identity_text]).encode())
    for p in identity:
        st = p.stat()
        h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
    out_dir = cache_dir()
    lib = out_dir / f"{shim}-{h.hexdigest()[:16]}.so"
    damaged = None
    if lib.exists():
        damaged = damage(lib)
        if damaged is None:  # as it was built, yet refused here (a swapped sidecar too): build it afresh
            try:
                handle, lacking = _load(lib, symbols)
            except OSError as e:
                damaged = f"it does not load here: {e}"
            else:
                if not lacking:
                    return handle
                damaged = f"it lacks {', '.join(lacking)}"
    failed = None
    if remember_failure:
        st = Path(cmd[0]).stat()
        h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        failed = out_dir / f"{shim}-{h.hexdigest()[:16]}.failed"
        if failed.exists():
            raise ShimUnavailable(failed.read_text(errors="replace"))
    where = f"; the cached {lib} is damaged ({damaged}) and was not replaced" if damaged else ""

    def refuse(why: str, remember_in: str | None = None) -> ShimUnavailable:
        """The failed build's error; with ``remember_in`` (the temporary directory) remembered
        in the cache where the caller asked for it."""
        err = ShimUnavailable(f"{what}: {why}{where}")
        err.damaged = where[2:] or None
        if remember_in is not None and failed is not None:
            (Path(remember_in) / "failed").write_text(str(err))
            os.replace(Path(remember_in) / "failed", failed)
            err.remembered = failed
        return err

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise refuse(f"cannot create the cache directory {out_dir}: {e.strerror or e} "
                     "(set FMTSIM_CACHE to a writable directory)") from e
    if announce and what not in _ANNOUNCED and sys.stderr is not None and sys.stderr.isatty():
        _ANNOUNCED.add(what)  # a fallback build after a refused one is the same wait
        print(f"fmtsim: compiling {what} (once; cached in {out_dir})", file=sys.stderr, flush=True)

    try:
        with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
            src = Path(tmp) / f"{shim}{'.c' if language == 'c' else '.cpp'}"
            src.write_bytes(source)
            tmp_lib = Path(tmp) / lib.name
            try:
                r = subprocess.run([*cmd, *flags, str(src), "-o", str(tmp_lib), *link_flags],
                                   capture_output=True, text=True)
            except OSError as e:  # not executable, not a program for this machine
                raise refuse(f"cannot run the compiler {cxx}: {e.strerror or e}") from e
            if r.returncode != 0:
                first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[:300])
                raise refuse(f"compiling {shim}.cpp with {cxx} failed: "
                             f"{first or f'exit status {r.returncode}, no message'}", remember_in=tmp)
            if not tmp_lib.is_file() or tmp_lib.stat().st_size == 0:
                raise refuse(f"compiling {shim}.cpp with {cxx} produced no library (exit status 0, "
                             f"{'an empty file' if tmp_lib.is_file() else 'no output file'}): is CXX a C++ "
                             "compiler?", remember_in=tmp)
            try:
                handle, lacking = _load(tmp_lib, symbols)
            except OSError as e:  # a cache on a noexec mount, a compiler that wrote something else
                raise refuse(f"cannot load the library {lib.name} built by {cxx}: {e} (a cache directory "
                             "mounted noexec cannot hold it: set FMTSIM_CACHE)") from e
            if lacking:
                raise refuse(_lacks(lib.name, cxx, lacking))
            # loaded from its temporary name (the mapping stays valid after the rename); the
            # sidecar last, so that a library without one is never taken for a finished build
            stamp = Path(tmp) / "stamp"
            stamp.write_text(_stamp(tmp_lib), encoding="ascii")
            os.replace(tmp_lib, lib)
            os.replace(stamp, _sidecar(lib))
            return handle
    except OSError as e:  # a cache directory that cannot be written (permissions, a full disk)
        raise refuse(f"cannot write to the cache directory {out_dir}: {e} "
                     "(set FMTSIM_CACHE to a writable directory)") from e
