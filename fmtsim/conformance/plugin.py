"""What an implementation under test is: one :class:`Implementation` object per implementation.

An implementation says what it implements and how it is held to fmtsim, and nothing else
knows about it: ``fmtsim conform`` (conformance.run) asks each one for its capabilities and
runs them. The capabilities, in the order the runner uses them:

    oracle   rows the implementation computes itself against an exact source (fmtsim's fast
             paths against the Fraction oracle)
    decode   :class:`Decoder` s: every code of a format decoded by the implementation, against
             :func:`fmtsim.decode`
    encode   :class:`~fmtsim.conformance.adapters.Adapter` s, one per entry point (a cast kernel
             with its options): the coverage models' inputs encoded by the implementation against
             :func:`fmtsim.encode` under the profile (and options) it is held to, differences
             inside a named divergence counted under its name
    block    rows for shared-scale schemes (MX, NVFP4), block by block
    gemm     rows for matrix units
    vectors  the committed golden vectors, through :meth:`Implementation.vector_encoder`

An implementation lives in one module under ``fmtsim/conformance/impls/`` (or in any
installed package that names it under the ``fmtsim.implementations`` entry-point group):
the module defines ``IMPLEMENTATIONS``, a list of objects of this class. Importing such a
module must be cheap and must not import the implementation's own package: that happens
in the methods, after :meth:`Implementation.missing` said it is there.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from .adapters import Adapter
from .divergences import Divergence
from .rows import Row

__all__ = ["CAPABILITIES", "IMPORT_MESSAGES", "Request", "Decoder", "Implementation", "import_problem"]

CAPABILITIES = ("oracle", "decode", "encode", "block", "gemm", "vectors")

# What a peer's own import logged at WARNING or below (torchao names the CUDA-only extensions it
# cannot load on a CPU build; torch warns about its own registrations), by module: held back so a
# conform run's output is fmtsim's alone, and shown by ``fmtsim env``. Errors still pass through.
IMPORT_MESSAGES: dict[str, list[str]] = {}


@contextmanager
def _holding_log_records(mod: str) -> Iterator[None]:
    held = IMPORT_MESSAGES.setdefault(mod, [])
    handle = logging.Logger.handle

    def hold(self: logging.Logger, record: logging.LogRecord) -> None:
        if record.levelno > logging.WARNING:
            handle(self, record)
        else:
            held.append(f"{record.name}: {record.getMessage()}")

    logging.Logger.handle = hold  # type: ignore[method-assign]
    try:
        yield
    finally:
        logging.Logger.handle = handle  # type: ignore[method-assign]


def import_problem(impl: str, modules: tuple[str, ...], install: str = "") -> str | None:
    """Why one of ``modules`` cannot be imported for ``impl`` (not installed, or installed but
    failing to import: a missing shared library, an ABI mismatch, any exception its import
    raises), or None when all of them import."""
    how = f" ({install})" if install else ""
    for mod in modules:
        err: Exception | None = None
        try:
            with _holding_log_records(mod):  # a submodule's spec imports its parent packages
                found = importlib.util.find_spec(mod) is not None
        except ModuleNotFoundError as e:  # a parent of a submodule is not there
            found = not (e.name and (mod == e.name or mod.startswith(e.name + ".")))
        except Exception as e:  # a broken parent package, a module whose __spec__ is None
            found, err = False, e
        if not found and err is None:
            if "." in mod:  # a submodule: another version of the package, without it
                return f"{impl}: the installed {mod.split('.')[0]} has no {mod}{how}"
            return f"{impl}: the {mod} package is not installed{how}"
        try:
            with _holding_log_records(mod):
                importlib.import_module(mod)
        except (Exception, SystemExit) as e:  # the package's own import failed: name it, not a traceback
            first = (str(e).strip().splitlines() or [""])[0][:300]
            return (f"{impl}: the {mod} package is installed but does not import ({type(e).__name__}"
                    f"{': ' + first if first else ''}){how}")
    return None


@dataclass(frozen=True)
class Request:
    """What the user asked ``fmtsim conform`` for, already sorted by kind."""

    names: tuple[str, ...]  # element formats (canonical names)
    schemes: tuple[str, ...] | None  # block schemes named; None: all (no --formats given)
    units: tuple[str, ...] | None  # matrix units named; None: all
    formats_given: bool
    big: bool = True
    profile: str | None = None  # --profile: overrides every encode path's claimed profile
    vectors: Path | None = None
    # True: describe the entry points as recorded (every format any recorded version has, each
    # held to its profile's default variant), not as this machine's versions and CPU would run
    # them: what the generated docs show, identical on every machine
    recorded: bool = False


@dataclass
class Decoder:
    """One decode entry point: ``decode(codes, fmt) -> float32 values`` for every code."""

    label: str
    decode: Callable[[np.ndarray, str], Any]
    formats: tuple[str, ...]
    nan_bits: bool = False  # True: NaN results must equal fmtsim's bit for bit; else any NaN
    # its named divergences (bugs) in decoding: each one's ``expected(codes, fmt)`` is the mask
    # of codes it may decode differently from the format's definition
    divergences: tuple[Divergence, ...] = ()


class Implementation:
    """One implementation under test. Subclass it (or instantiate it and set the attributes);
    every method has a default that says "not implemented by this one"."""

    name: str = ""
    aliases: tuple[str, ...] = ()
    summary: str = ""  # one line: what is run
    requires: tuple[str, ...] = ()  # importable modules it needs
    imports: tuple[str, ...] = ()  # their submodules it imports too (checked to import, like requires)
    install: str = ""  # how a user gets them (printed when they are missing)
    capabilities: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()  # the fmtsim profiles it is held to
    divergences: tuple[Divergence, ...] = ()  # its named divergences (bugs), each an exact predicate
    checked_with: str = ""  # the version(s) the profiles and divergences were read off

    def missing(self) -> str | None:
        """Why this implementation cannot run here (a required module not installed, or
        installed but failing to import), or None when it can."""
        return import_problem(self.name, (*self.requires, *self.imports), self.install)

    def version(self) -> str:
        """The version actually run (for the report)."""
        out = []
        for mod in self.requires:
            try:
                out.append(f"{mod} {importlib.metadata.version(mod)}")
            except importlib.metadata.PackageNotFoundError:
                continue
        return ", ".join(out)

    def profile_version(self) -> str | None:
        """The version its profile variants are keyed by (:func:`fmtsim.profiles.select`), or
        None where it is unknown: by default the installed version of the module named as the
        implementation, else of the first of :attr:`requires` installed (torchao needs torch,
        and torchao's version keys it)."""
        for mod in sorted(self.requires, key=lambda m: m != self.name):
            try:
                return importlib.metadata.version(mod)
            except importlib.metadata.PackageNotFoundError:
                continue
        return None

    def code_path(self) -> str | None:
        """The code path its profile variants are keyed by here (None: the entry points'
        profiles name it, or there is one)."""
        return None

    def cannot_run(self, req: Request) -> str | None:
        """Why this implementation, though importable, cannot run the request here: every one
        of its entry points that applies fails on a single value (an old or broken install:
        a missing attribute, a library that refuses the type), or None. Without this a broken
        install shows as thousands of "unexpected failures" of correct rules."""
        tried: list[str] = []
        try:
            entries: list[tuple[str, Callable[[], Any]]] = []
            for d in self.decoders(req) if "decode" in self.capabilities else []:
                names = [n for n in req.names if n in d.formats]
                if names:
                    entries.append((d.label, functools.partial(d.decode, np.zeros(1, np.uint8), names[0])))
            for a in self.encoders(req) if "encode" in self.capabilities else []:
                names = [n for n in req.names if a.formats is None or n in a.formats]
                if names:
                    src = np.dtype(ml_dtypes.bfloat16) if a.sources[0] == "bfloat16" else np.dtype(a.sources[0])
                    entries.append((a.name, functools.partial(a.encode, np.ones(1, src), names[0])))
        except Exception as e:
            return f"{self.name}: its entry points could not be set up here ({type(e).__name__}: {e}){self._ran()}"
        if not entries:
            return None
        for label, call in entries:
            try:
                call()
                return None
            except (Exception, SystemExit) as e:
                first = (str(e).strip().splitlines() or [""])[0][:200]
                tried.append(f"{label}: {type(e).__name__}{': ' + first if first else ''}")
        return (f"{self.name}: every entry point fails on a single value here ({tried[0]}"
                f"{f'; and {len(tried) - 1} more' if len(tried) > 1 else ''}){self._ran()}")

    def _ran(self) -> str:
        have = self.version()
        return (f"; installed: {have or 'version unknown'}"
                + (f"; fmtsim's rules for it were read off {self.checked_with}" if self.checked_with else ""))

    def covers(self) -> str:
        """What this implementation checks, in words: the element formats of its decode and
        encode entry points, plus block schemes / matrix units where it has rows of those.
        ``fmtsim conform`` says it when the formats asked leave nothing to check."""
        everything = Request((), None, None, False, big=False)
        formats: set[str] = set()
        try:
            for d in self.decoders(everything):
                formats |= set(d.formats)
            for a in self.encoders(everything):
                formats |= set(a.formats or ())
        except Exception as e:  # an entry point that cannot even be listed: say so, not a traceback
            return f"(its entry points could not be listed: {type(e).__name__}: {e})"
        kinds = [f"formats {' '.join(sorted(formats))}"] if formats else []
        base = Implementation
        if type(self).oracle_rows is not base.oracle_rows:
            kinds.append("every format against the exact oracle")
        if type(self).block_rows is not base.block_rows:
            kinds.append("block schemes (mxfp8_e4m3 ... mxfp4, nvfp4)")
        if type(self).gemm_rows is not base.gemm_rows:
            kinds.append("matrix units (fmtsim.mma.UNITS)")
        return "; ".join(kinds) or "nothing"

    def decoders(self, req: Request) -> list[Decoder]:
        return []

    def encoders(self, req: Request) -> list[Adapter]:
        return []

    def oracle_rows(self, req: Request) -> list[Row]:
        return []

    def block_rows(self, req: Request) -> list[Row]:
        return []

    def gemm_rows(self, req: Request) -> list[Row]:
        return []

    def vector_encoder(self, meta: dict[str, Any], src: str
                       ) -> tuple[Callable[[np.ndarray, np.ndarray | None], Any], Adapter | None] | None:
        """For one committed vector file (its manifest entry, source dtype name): a function
        ``(x, rbits) -> codes`` and the encode path whose divergences apply (None: none
        apply), or None when this implementation does not run that file."""
        return None
