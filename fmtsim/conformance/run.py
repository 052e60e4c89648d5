"""Run the coverage models against implementations and tabulate the result.

The implementations are the plugins registered in :mod:`fmtsim.conformance.impls` (and
user adapters named ``module:function``, see conformance.adapters); this module names
none of them. For each one asked for it runs the capabilities the implementation declares
(conformance.plugin): oracle rows, decodes of every code, encodes of every coverage model
(conformance.models) against fmtsim under the profile the entry point is held to, block
and GEMM rows, and the committed golden vectors (vectors/*.tv) it takes. Differences
covered by a named divergence (the implementation's own, beside its conformance module) are
counted under that name; any other is a failure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from ..codec import decode
from ..formats import FORMATS, get_format
from .adapters import Adapter, load_adapter
from .impls import DEFAULT_IMPLEMENTATIONS, get_implementation, registry
from .models import iter_models
from .plugin import Decoder, Implementation, Request
from .rows import Row, mismatch

__all__ = ["Row", "run", "implementations", "find_vectors"]


def implementations() -> tuple[str, ...]:
    """The names of the registered implementations."""
    return tuple(registry())


def __getattr__(name: str) -> Any:  # IMPLEMENTATIONS, computed from the registry when asked for
    if name == "IMPLEMENTATIONS":
        return implementations()
    raise AttributeError(name)


def find_vectors() -> Path | None:
    """The golden vectors fmtsim ships: ``fmtsim/vectors`` inside an installed package (the build
    copies the repository's ``vectors/`` there), else the repository's ``vectors/`` beside the
    package when fmtsim runs from a checkout (an editable install)."""
    package = Path(__file__).resolve().parent.parent
    for cand in (package / "vectors", package.parent / "vectors"):
        if (cand / "manifest.json").is_file():
            return cand
    return None

_SRC_DTYPES = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "f32": np.dtype(np.float32),
               "f64": np.dtype(np.float64)}
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
SRC_NAME = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}




def decode_rows(dec: Decoder, names: tuple[str, ...]) -> list[Row]:
    """Every code of each format ``dec`` implements, decoded by it, against fmtsim.decode:
    bit-equal float32, or both NaN (unless the decoder claims NaN bits too)."""
    rows = []
    for name in names:
        if name not in dec.formats:
            continue
        f = get_format(name)
        codes = np.arange(f.n_codes, dtype=f.code_dtype)
        row = Row(dec.label, name, "decode_all")
        try:
            theirs = np.asarray(dec.decode(codes, name), dtype=np.float32).reshape(-1)
        except (Exception, SystemExit) as e:  # the implementation's own failure (or exit) is a failed case set
            row.fail_all(codes.size, f"decode raised {type(e).__name__}: {e}")
            rows.append(row)
            continue
        ours = decode(codes, name, np.float32)
        ok = ours.view(np.uint32) == theirs.view(np.uint32)
        if not dec.nan_bits:
            ok |= np.isnan(ours) & np.isnan(theirs)

        def describe(i: int, t: np.ndarray = theirs, o: np.ndarray = ours) -> str:
            return (f"code {i:#x}: {dec.label} {t[i]!r} ({int(t[i:i + 1].view(np.uint32)[0]):#010x}), "
                    f"fmtsim {o[i]!r} ({int(o[i:i + 1].view(np.uint32)[0]):#010x})")

        def classify(i: int, t: np.ndarray = theirs, o: np.ndarray = ours, f: Any = f) -> tuple[str, list[Any]]:
            from .classify import explain_decode

            return f"code {i:#x}", explain_decode(f, i, int(o[i:i + 1].view(np.uint32)[0]),
                                                  int(t[i:i + 1].view(np.uint32)[0]), who=dec.label)

        known = {d.name: np.asarray(d.expected(codes, f), bool) for d in dec.divergences if name in d.formats}
        row.add(ok, known, describe, classify)
        rows.append(row)
    return rows


def encode_rows(adapter: Adapter, names: tuple[str, ...], big: bool) -> list[Row]:
    """Every coverage model's inputs of the source dtypes ``adapter`` takes, encoded by it,
    against fmtsim under the profile (and options) it claims; one Row per (format, model)."""
    rows: list[Row] = []
    for asked in names:
        name = adapter.covering(asked)  # the format itself, or a record of the implementation's standing in
        if name is None:
            continue
        by_model: dict[str, Row] = {}
        for model, src, x in iter_models(adapter.record(name), big=big):
            if src not in adapter.sources:
                continue
            row = by_model.setdefault(model, Row(adapter.name, name, model))
            keep, want = adapter.expected(x, name)
            xs = x[keep]
            got_flags = None
            try:
                if adapter.with_flags is not None:
                    c, fl = adapter.with_flags(xs, name)
                    got_flags = np.asarray(fl).astype(np.int64).reshape(-1) & adapter.flag_bits
                else:
                    c = adapter.encode(xs, name)
                got = np.asarray(c).astype(np.int64).reshape(-1)
            except (Exception, SystemExit) as e:  # the adapter's own failure (or exit) is a failed case set
                row.fail_all(xs.size, f"{src}: adapter raised {type(e).__name__}: {e}")
                continue
            if got.shape != want.shape:
                row.fail_all(xs.size, f"{src}: adapter returned {got.size} codes for {xs.size} inputs")
                continue
            claim = ",".join([adapter.profile, *(f"{k}={v}" for k, v in adapter.options.items())])
            known = adapter.known(name, src, xs)
            row.add(got == want, known, mismatch(src, xs, got, adapter.name, want, f"fmtsim[{claim}]"),
                    _rule_of(adapter, name, src, xs, want, got))
            if got_flags is not None:  # the exception flags, a row of their own
                frow = by_model.setdefault(f"{model} flags", Row(adapter.name, name, f"{model} flags"))
                want_flags = adapter.expected_flags(xs, name)
                if got_flags.shape != want_flags.shape:
                    frow.fail_all(xs.size, f"{src}: adapter returned {got_flags.size} flags for {xs.size} inputs")
                    continue
                frow.add(got_flags == want_flags, known,
                         mismatch(src, xs, got_flags, f"{adapter.name} flags", want_flags, f"fmtsim[{claim}] flags",
                                  flags=True))
        rows.extend(by_model.values())
    return rows


def _rule_of(adapter: Adapter, fmt: str, src: str, xs: np.ndarray, want: np.ndarray, got: np.ndarray
             ) -> Any:
    """``classify(i)`` for :meth:`Row.add`: the rule case ``i``'s code breaks (conformance.classify),
    with the input as a bit pattern; None when the claimed policy cannot be rebuilt here."""
    from ..bitpatterns import SOURCE_TAGS
    from ..policy import resolve
    from .classify import encode_classifier
    from .rows import input_text

    if not any(n == src for _, n in SOURCE_TAGS.values()):
        return None
    try:
        clf = encode_classifier(resolve(adapter.record(fmt), **adapter.policy_for(fmt)), src, who=adapter.name)
    except ValueError:
        return None

    def classify(i: int) -> tuple[str, list[Any]]:
        return input_text(xs[i]), clf(xs[i], int(want[i]), int(got[i]), 0)
    return classify


def vector_rows(impl: Implementation, names: tuple[str, ...], vec_dir: Path) -> list[Row]:
    """The committed .tv encode vectors ``impl`` takes (it says which, file by file),
    run through it: every line's code must equal the vector's."""
    manifest_path = vec_dir / "manifest.json"
    if not manifest_path.exists():
        return []
    manifest = json.loads(manifest_path.read_text())
    rows: dict[str, Row] = {}
    for fname, meta in sorted(manifest["files"].items()):
        if not fname.endswith(".tv") or meta.get("operation") != "encode" or meta["format"]["name"] not in names:
            continue
        fmt = meta["format"]["name"]
        src = fname.split("_to_")[0]
        how = impl.vector_encoder(meta, src)
        if how is None:
            continue
        run_it, path = how
        lines = [ln.split() for ln in (vec_dir / fname).read_text().splitlines() if ln.strip()]
        dt = _SRC_DTYPES[src]
        x = np.array([int(ln[0], 16) for ln in lines], dtype=np.uint64).astype(_UINT[dt.itemsize]).view(dt)
        want = np.array([int(ln[-2], 16) for ln in lines], dtype=np.int64)
        rb = np.array([int(ln[1], 16) for ln in lines], np.uint32) if len(lines[0]) == 4 else None
        got = np.asarray(run_it(x, rb), dtype=np.int64).reshape(-1)
        row = rows.setdefault(f"{impl.name}:{fmt}", Row(impl.name, fmt, "vectors (committed .tv)"))
        row.add(got == want, path.known(fmt, SRC_NAME.get(src, src), x) if path is not None else {},
                mismatch(f"{fname}", x, got, impl.name, want, "vector"))
    return list(rows.values())


def _adapter_implementation(adapter: Adapter) -> Implementation:
    """A user adapter is an implementation with one encode path."""
    impl = Implementation()
    impl.name = adapter.name
    impl.capabilities = ("encode",)
    impl.profiles = (adapter.profile,)
    impl.encoders = lambda req: [adapter]  # type: ignore[method-assign]
    return impl


def hold_to_variants(impl: Implementation, encoders: list[Adapter]) -> None:
    """Hold each entry point to the variant of its profile for the version (and code path) run
    here (fmtsim.profiles.select): ``variant`` set unless the entry point chose one itself;
    ``unverified`` set when that variant was not read off this version, so its rows say so.
    A profile with one variant and no recorded version (a spec's rules) is left as it is. Only
    a known version can be unverified: where none is known (a user's adapter, whose claimed
    profile is the whole claim), the default variant holds and its failures count."""
    from ..profiles import select, variants

    version, path = impl.profile_version(), impl.code_path()
    for enc in encoders:
        try:
            every = variants(enc.profile)
        except ValueError:  # a profile only a user's adapter knows (PROFILES holds it, no variants)
            continue
        if len(every) == 1 and not every[0].verified_versions:
            continue
        sel = select(enc.profile, version, path)
        if enc.variant is None:
            enc.variant = sel.variant
        if version is not None and not sel.verified and enc.variant is sel.variant:
            enc.unverified = f"unverified version {version} (profile read off {sel.variant.provenance.describe()})"


def _canonical(name: str, unknown: dict[str, ValueError]) -> str:
    """fmtsim's name of the format ``name``; a name fmtsim does not know is kept (and remembered
    in ``unknown`` with the error): it may name one of an implementation's own records."""
    try:
        return get_format(name).name
    except ValueError as e:
        unknown[name] = e
        return name


def _entry_points(impl: Implementation, req: Request) -> list[Adapter]:
    """The encode entry points of ``impl`` (none where they cannot even be listed)."""
    try:
        return impl.encoders(req) if "encode" in impl.capabilities else []
    except Exception:
        return []


def rows_for(impl: Implementation, req: Request) -> list[Row]:
    """Every row of every capability ``impl`` declares, for the request."""
    rows: list[Row] = []
    caps = impl.capabilities
    if "oracle" in caps:
        rows.extend(impl.oracle_rows(req))
    decoders = impl.decoders(req) if "decode" in caps else []
    encoders = impl.encoders(req) if "encode" in caps else []
    if req.profile is not None:
        for enc in encoders:
            enc.profile = req.profile
    else:
        hold_to_variants(impl, encoders)
    names = list(req.names)
    if not req.formats_given:  # every format too that only some entry point has (P3109, its own records)
        covered = {e.covering(n) for e in encoders for n in names}  # records standing in for one asked
        for fmts in [d.formats for d in decoders] + [e.formats or () for e in encoders]:
            names.extend(n for n in fmts if n not in names and n not in covered)
    done: set[tuple[int, str]] = set()  # (entry point, format): a record standing in runs once
    for name in names:  # grouped by format: decodes first, then each entry point's encodes
        for dec in decoders:
            rows.extend(decode_rows(dec, (name,)))
        for i, enc in enumerate(encoders):
            ran = enc.covering(name)
            if ran is None or (i, ran) in done:
                continue
            done.add((i, ran))
            for row in encode_rows(enc, (name,), req.big):
                row.unverified = enc.unverified
                rows.append(row)
    if "block" in caps and (not req.formats_given or req.schemes):
        rows.extend(impl.block_rows(req))
    if "gemm" in caps and (not req.formats_given or req.units):
        rows.extend(impl.gemm_rows(req))
    if "vectors" in caps and req.vectors is not None:
        rows.extend(vector_rows(impl, req.names, req.vectors))
    return rows


def run(impls: tuple[str, ...] = DEFAULT_IMPLEMENTATIONS, formats: list[str] | None = None,
        big: bool = True, vectors: Path | None = None, profile: str | None = None,
        skipped: list[str] | None = None,
        progress: Callable[[int, int, str], None] | None = None) -> list[Row]:
    """Every model for every (implementation, format) pair that applies. An entry of
    ``impls`` is a registered implementation's name (conformance.impls) or an adapter spec
    (``module:function`` or ``file.py:function``, see conformance.adapters). ``profile``
    checks fmtsim against the oracle under that profile's policy and overrides the profile
    every encode path claims. ``formats`` may also name block schemes (mxfp8_e4m3 ...
    mxfp4, nvfp4) and matrix units (fmtsim.mma.UNITS).

    An implementation that cannot run here (its package is missing, does not import, or
    every entry point of it fails on a single value) raises ValueError
    saying why, unless ``skipped`` is a list: then the reason is appended to it and the
    others run. ``progress(done, total, name)`` is called before each implementation runs and
    once at the end (name '')."""
    from ..mma import UNITS
    from ..mx import SCHEMES

    blocks = set(SCHEMES) | {"nvfp4"}
    unknown: dict[str, ValueError] = {}  # names fmtsim does not know: an implementation's own records?
    if formats:
        names = tuple(_canonical(n, unknown) for n in formats if n not in blocks and n not in UNITS)
        req = Request(names, tuple(n for n in formats if n in blocks), tuple(n for n in formats if n in UNITS),
                      True, big, profile, vectors)
    else:
        req = Request(tuple(FORMATS), None, None, False, big, profile, vectors)
    if unknown:
        own = {rec.name for spec in impls if ":" not in spec
               for enc in _entry_points(get_implementation(spec), req) for rec in enc.records}
        for name, err in unknown.items():
            if name not in own:
                raise err
    chosen: list[Implementation] = []
    for spec in impls:
        if ":" in spec:
            chosen.append(_adapter_implementation(load_adapter(spec)))
            continue
        impl = get_implementation(spec)
        why = impl.missing() or impl.cannot_run(req)
        if why is not None:
            if skipped is None:
                raise ValueError(why)
            skipped.append(why)
            continue
        chosen.append(impl)
    rows: list[Row] = []
    for i, impl in enumerate(chosen):
        if progress is not None:
            progress(i, len(chosen), impl.name)
        rows.extend(rows_for(impl, req))
    if progress is not None:
        progress(len(chosen), len(chosen), "")
    return rows
