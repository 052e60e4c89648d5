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
instead, with a RuntimeWarning giving the reason unless the reason is that the machine has no
compiler at all (or, where the caller asked for the compiled path, an error gives the reason).
A library that does not load or lacks one of its entry points is a failed build, and a cache
entry that is not what was built (truncated, replaced) is never loaded but built again
(:func:`fmtsim.conformance.shim_build.build`).

Every fast path built here has a numpy twin, and a test holds the two equal bit for bit.
"""

from __future__ import annotations

import ctypes
import platform
import warnings
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


def build_tuned(package: str, name: str, what: str, symbols: tuple[str, ...] = ()) -> ctypes.CDLL:
    """``<package>/<name>.cpp`` compiled for this CPU (portable flags if the native ones fail)
    and loaded, exporting ``symbols``; ShimUnavailable with the reason when no compiler builds it."""
    from .conformance.shim_build import ShimUnavailable, build

    source = resources.files(package).joinpath(f"{name}.cpp").read_bytes()
    identity = _cpu_identity()
    try:
        return build(name, [], [], what=what, source=source, compile_flags=(*_PORTABLE, *_NATIVE),
                     identity_text=identity, announce=True, remember_failure=True, symbols=symbols)
    except ShimUnavailable as refused:  # a compiler without those flags (remembered: not tried again)
        try:
            return build(name, [], [], what=what, source=source, compile_flags=_PORTABLE,
                         identity_text=identity, announce=True, symbols=symbols)
        except ShimUnavailable as again:  # not the flags, then: try them again once the toolchain is mended
            if refused.remembered is not None:
                refused.remembered.unlink(missing_ok=True)
            if refused.damaged is not None and again.damaged is None:  # the entry that was to be replaced
                raise ShimUnavailable(f"{again}; {refused.damaged}") from again
            raise


class Library:
    """One of fmtsim's C++ fast paths: built on first use, its entry points (``symbols``, the
    names the library must export) bound by ``bind`` (the loaded CDLL -> what callers use), a
    failed build remembered, not retried."""

    def __init__(self, package: str, name: str, what: str, symbols: tuple[str, ...],
                 bind: Callable[[ctypes.CDLL], Any]) -> None:
        self.package, self.name, self.what, self.symbols, self._bind = package, name, what, symbols, bind
        self._loaded: tuple[Any, str | None] | None = None
        self._quiet = False  # the failure is the plain absence of a compiler: fall back without a word
        self._warned = False

    def _load(self) -> tuple[Any, str | None]:
        from .conformance.shim_build import ShimUnavailable

        if self._loaded is None:
            try:
                lib = build_tuned(self.package, self.name, self.what, self.symbols)
                self._loaded = (self._bind(lib), None)
            except ShimUnavailable as e:
                self._loaded, self._quiet = (None, str(e)), e.quiet
            except AttributeError as e:  # an entry point bind needs that ``symbols`` does not list
                self._loaded = (None, f"{self.what}: the library lacks an entry point: {e}")
        return self._loaded

    def forget(self) -> None:
        """Build (or fail) afresh on the next use: for tests that change the compiler."""
        self._loaded = None
        self._warned = False

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
        """Whether a checked ``engine`` runs this library ('auto': when it builds; where it does
        not, once per process, a RuntimeWarning says why the numpy path runs instead)."""
        if engine == "compiled":
            return True
        if engine != "auto":
            return False
        why = self.unavailable_reason()
        if why is not None and not self._quiet and not self._warned:
            self._warned = True
            warnings.warn(f"fmtsim: {why}; engine='auto' runs the numpy path instead (the same bits, slower)",
                          RuntimeWarning, stacklevel=3)
        return why is None
