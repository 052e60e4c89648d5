"""Building fmtsim's own C++ fast paths (the MX and NVFP4 block quantizers
``fmtsim/mx_blocks.cpp``, the matrix units' chains ``fmtsim/mma/nv_chain.cpp``) on the user's
machine, tuned for its CPU.

Each is compiled on first use with the system C++ compiler through
:func:`fmtsim.conformance.shim_build.build` (cached per user; the cache name carries the
source, the compiler, the flags and this CPU's identity, so a library never travels to
another CPU), first with ``-march=native`` and, if that fails, with portable flags (where
those build, the refusal is remembered in the cache: later processes do not compile again).
The first build prints one line on stderr when stderr is a terminal (it takes a few
seconds). A failed build is remembered by its :class:`Library` and the numpy path is used
instead (or, where the caller asked for the compiled path, an error gives the reason).

Every fast path built here has a numpy twin, and a test holds the two equal bit for bit.
"""

from __future__ import annotations

import ctypes
import platform
from collections.abc import Callable
from importlib import resources
from typing import Any

__all__ = ["ENGINES", "Library", "build_tuned"]

ENGINES = ("auto", "compiled", "numpy")

# -fno-trapping-math lets the compiler vectorise the selects (nothing reads the FP flags);
# -ffp-contract=off keeps every multiply and add rounded on its own, as numpy rounds them
_PORTABLE = ("-O3", "-fno-trapping-math", "-ffp-contract=off")
_NATIVE = {"x86_64": ("-march=native", "-mprefer-vector-width=512"), "AMD64": ("-march=native",
           "-mprefer-vector-width=512")}.get(platform.machine(), ("-mcpu=native",))


def _cpu_identity() -> str:
    """What -march=native compiles for: a cached library must not travel to another CPU."""
    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith(("flags", "model name", "Features")):
                    flags += line
                if line.strip() == "":
                    break
    except OSError:
        pass
    return f"{platform.machine()}|{platform.processor()}|{flags}"


def build_tuned(package: str, name: str, what: str) -> ctypes.CDLL:
    """``<package>/<name>.cpp`` compiled for this CPU (portable flags if the native ones fail)
    and loaded; ShimUnavailable with the reason when no compiler builds it."""
    from .conformance.shim_build import ShimUnavailable, build

    source = resources.files(package).joinpath(f"{name}.cpp").read_bytes()
    identity = _cpu_identity()
    try:
        return build(name, [], [], what=what, source=source, compile_flags=(*_PORTABLE, *_NATIVE),
                     identity_text=identity, announce=True, remember_failure=True)
    except ShimUnavailable as refused:  # a compiler without those flags (remembered: not tried again)
        try:
            return build(name, [], [], what=what, source=source, compile_flags=_PORTABLE,
                         identity_text=identity, announce=True)
        except ShimUnavailable:  # not the flags, then: try them again once the toolchain is mended
            if refused.remembered is not None:
                refused.remembered.unlink(missing_ok=True)
            raise


class Library:
    """One of fmtsim's C++ fast paths: built on first use, its entry points bound by ``bind``
    (the loaded CDLL -> what callers use), a failed build remembered, not retried."""

    def __init__(self, package: str, name: str, what: str, bind: Callable[[ctypes.CDLL], Any]) -> None:
        self.package, self.name, self.what, self._bind = package, name, what, bind
        self._loaded: tuple[Any, str | None] | None = None

    def _load(self) -> tuple[Any, str | None]:
        from .conformance.shim_build import ShimUnavailable

        if self._loaded is None:
            try:
                self._loaded = (self._bind(build_tuned(self.package, self.name, self.what)), None)
            except ShimUnavailable as e:
                self._loaded = (None, str(e))
        return self._loaded

    def forget(self) -> None:
        """Build (or fail) afresh on the next use: for tests that change the compiler."""
        self._loaded = None

    def entry(self) -> Any:
        """What ``bind`` returned (call only where :meth:`unavailable_reason` is None)."""
        got, why = self._load()
        assert why is None, why
        return got

    def unavailable_reason(self) -> str | None:
        """Why this library cannot be used here (no compiler, a failed build), or None."""
        return self._load()[1]

    def check_engine(self, engine: object, what: str) -> str:
        """``engine`` checked: one of ENGINES (TypeError for a non-string, ValueError for another
        name); 'compiled' where the library does not build is a ValueError giving the reason.
        ``what``: the caller's name for messages."""
        if not isinstance(engine, str):  # as argcheck.choice: the wrong type is a TypeError
            raise TypeError(f"{what}: engine must be one of {', '.join(ENGINES)}, not {type(engine).__name__}")
        if engine not in ENGINES:
            raise ValueError(f"{what}: engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        if engine == "compiled":
            why = self.unavailable_reason()
            if why is not None:
                raise ValueError(f"{what}: engine='compiled' is unavailable: {why}")
        return engine

    def used(self, engine: str) -> bool:
        """Whether a checked ``engine`` runs this library ('auto': when it builds)."""
        return engine == "compiled" or (engine == "auto" and self.unavailable_reason() is None)
