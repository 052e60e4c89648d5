"""Plug your own implementation into ``fmtsim conform``.

An adapter is a Python callable ``encode(x, fmt) -> codes``: ``x`` a 1-D numpy array
of one source dtype, ``fmt`` an fmtsim format name, the result one integer code per
element (any integer dtype; a CuPy or torch result converted with ``.get()`` /
``.cpu().numpy()``). Optional attributes on the callable say what it claims:

    profile  the fmtsim profile it should match bit for bit (default "ocp"; "ptx" for
             cvt.rn.satfinite kernels, "ml_dtypes" for numpy casts)
    formats  the format names it implements (default: every format)
    sources  the input dtypes it accepts, from "float16", "bfloat16", "float32",
             "float64" (default: ("float32",))

Name it on the command line as ``module:function`` or ``path/to/file.py:function``::

    fmtsim conform --impl fmtsim my_kernels.py:encode_e4m3

Inputs that the claimed profile refuses (NaN into FP4/FP6 under "ocp") are left out.

An emulation library (pychop, qtorch, cpfloat) returns values, not codes: :func:`codes_of` turns
its values into the codes of the format it emulates (-1 for a value that is no code of it), and a
format of its own that fmtsim has no record of is a :class:`~fmtsim.formats.Format` the adapter
carries in ``records`` and names in ``formats``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..codec import decode, encode, encode_with_flags
from ..formats import Format, get_format
from ..policy import PROFILES, resolve
from ..profiles import Variant
from .divergences import Divergence, explain, explain_among

__all__ = ["Adapter", "codes_of", "load_adapter"]


@dataclass
class Adapter:
    """One encode entry point and what it claims: the profile (plus explicit encode options,
    e.g. ``{"overflow": "nonsat"}`` for a non-saturating kernel) it matches bit for bit, the
    formats and source dtypes it takes, and its named divergences: the name of an
    implementation (its ``divergences``, :func:`~fmtsim.conformance.divergences.divergences_of`), or
    the :class:`~fmtsim.conformance.divergences.Divergence` records themselves."""

    name: str
    encode: Callable[[np.ndarray, str], Any]
    profile: str = "ocp"
    formats: tuple[str, ...] | None = None
    sources: tuple[str, ...] = ("float32",)
    divergences: str | tuple[Divergence, ...] | None = None
    options: dict[str, str] = field(default_factory=dict)  # encode keywords beside the profile
    # an entry point that also reports exception flags: ``with_flags(x, fmt) -> (codes, flags)``,
    # the flags as fmtsim's bits (encode_with_flags), of which it reports those in ``flag_bits``
    with_flags: Callable[[np.ndarray, str], tuple[Any, Any]] | None = None
    flag_bits: int = 0
    # the variant of ``profile`` it is held to (None: the profile's default variant), and
    # why, when that variant was not read off the version run: "unverified version X
    # (profile read off Y)"; both set by the runner from fmtsim.profiles.select
    variant: Variant | None = None
    unverified: str = ""
    # the implementation's own formats that fmtsim has no record of (qtorch's E4M3, which uses every
    # exponent and reaches 480), each named in ``formats`` by its record's name; a record whose
    # ``aliases`` name a format of fmtsim's stands in for that one (``--formats e4m3`` runs it, and
    # so does a run of every format)
    records: tuple[Format, ...] = ()
    # a stochastic entry point: the random integers it is given for inputs ``x`` (a function of x
    # alone, so that fmtsim is given the same ones as ``rbits``); None for a deterministic one
    rbits: Callable[[np.ndarray], np.ndarray] | None = None

    def record(self, fmt: str) -> Format:
        """The format ``fmt`` names for this entry point: one of its ``records``, else fmtsim's."""
        for rec in self.records:
            if rec.name == fmt:
                return rec
        return get_format(fmt)

    def covering(self, fmt: str) -> str | None:
        """The name of the format this entry point runs when ``fmt`` is asked for: ``fmt`` itself
        when it takes it, else the name of one of its records standing in for ``fmt``; None when
        it has neither."""
        if self.formats is None or fmt in self.formats:
            return fmt
        return next((rec.name for rec in self.records if fmt in rec.aliases and rec.name in self.formats), None)

    def policy_for(self, fmt: str) -> dict[str, Any]:
        """The encode keywords this path is held to for ``fmt`` (the profile, or the variant of
        it chosen for the version run, plus options)."""
        return {"profile": self.variant.policy if self.variant is not None else self.profile, **self.options}

    def expected(self, x: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray]:
        """(mask of inputs the profile accepts, fmtsim's codes for them)."""
        kw = self.policy_for(fmt)
        rec = self.record(fmt)
        pol = resolve(rec, **kw)
        keep = np.ones(x.shape, bool)
        if pol.on_nan.mode == "raise":
            with np.errstate(invalid="ignore"):
                keep = ~np.isnan(x.astype(np.float64))
        if self.rbits is not None:
            kw = {**kw, "rbits": self.rbits(x[keep])}
        with np.errstate(invalid="ignore"):  # widening a signalling NaN quiets it: still a NaN
            return keep, np.asarray(encode(x[keep], rec, **kw), dtype=get_format(rec).code_dtype).reshape(-1)

    def expected_flags(self, x: np.ndarray, fmt: str) -> np.ndarray:
        """fmtsim's flags (only the bits this entry point reports) for inputs the profile accepts."""
        kw = self.policy_for(fmt)
        if self.rbits is not None:
            kw = {**kw, "rbits": self.rbits(x)}
        _, flags = encode_with_flags(x, self.record(fmt), **kw)
        return np.asarray(flags, dtype=np.uint8).reshape(-1) & self.flag_bits

    def known(self, fmt: str, source: str, x: np.ndarray) -> dict[str, np.ndarray]:
        """name -> mask of the inputs each of this path's named divergences covers."""
        if self.divergences is None:
            return {}
        if isinstance(self.divergences, str):
            return explain(self.divergences, self.record(fmt), source, x)
        return explain_among(self.divergences, self.record(fmt), source, x)


def codes_of(values: Any, fmt: str | Format) -> np.ndarray:
    """The codes of ``fmt`` whose values are ``values`` (an emulation library's output), int64;
    -1 where a value is no code of ``fmt`` (beyond its range, between two of its values, an Inf
    or NaN it lacks, a -0 it lacks). A NaN is the format's NaN with the value's sign (fmtsim's
    ``nan='signed'`` code): an emulator's NaN payload is its host type's, not the format's."""
    f = get_format(fmt)
    with np.errstate(invalid="ignore", over="ignore"):  # widening a signalling NaN quiets it: still a NaN
        v = np.ascontiguousarray(np.asarray(values, dtype=np.float64)).reshape(-1)
        c = np.asarray(encode(v, f, rounding="rtz", overflow="nonsat", nan="signed" if f.has_nan else "zero"),
                       dtype=f.code_dtype).reshape(-1)
    back = decode(c, f, np.float64)
    same = (back.view(np.uint64) == v.view(np.uint64)) | (np.isnan(back) & np.isnan(v))
    return np.where(same, c.astype(np.int64), -1)


def load_adapter(spec: str) -> Adapter:
    """``module:attr`` or ``file.py:attr`` -> Adapter (the attr may already be one)."""
    if ":" not in spec:
        raise ValueError(f"adapter {spec!r}: write it as module:function or path/to/file.py:function")
    where, attr = spec.rsplit(":", 1)
    if where.endswith(".py"):
        path = Path(where)
        if not path.exists():
            raise ValueError(f"adapter file {where} does not exist")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
        except SyntaxError as e:
            raise ValueError(f"adapter file {where}, line {e.lineno}: syntax error: {e.msg}") from None
        except (Exception, SystemExit) as e:  # the user's module failed (or exited) while loading: say where
            raise ValueError(f"adapter file {where} failed to load: {type(e).__name__}: {e}") from None
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise ValueError(f"adapter module {where!r} cannot be imported: {e}") from None
        except SyntaxError as e:
            raise ValueError(f"adapter module {where!r}: {e.filename}, line {e.lineno}: syntax error: {e.msg}") \
                from None
        except (Exception, SystemExit) as e:
            raise ValueError(f"adapter module {where!r} failed to load: {type(e).__name__}: {e}") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise ValueError(f"adapter {spec!r}: {where} has no attribute {attr!r}")
    if isinstance(obj, Adapter):
        return obj
    if not callable(obj):
        raise ValueError(f"adapter {spec!r} is not callable")
    profile = getattr(obj, "profile", "ocp")
    if profile not in PROFILES:
        raise ValueError(f"adapter {spec!r}: unknown profile {profile!r}; choose from {', '.join(PROFILES)}")
    formats = getattr(obj, "formats", None)
    if formats is not None:
        formats = tuple(get_format(f).name for f in formats)
    return Adapter(spec, obj, profile, formats, tuple(getattr(obj, "sources", ("float32",))))
