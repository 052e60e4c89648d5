"""Run the coverage models against implementations and tabulate the result.

Implementations:

    fmtsim     the table-driven fast paths against the exact rational oracle
               (fmtsim.oracle), on decode_all and encode_ties, every format,
               rne with satfinite and nonsat. Must be 100 %.
    ml_dtypes  numpy ``astype`` into ml_dtypes types against fmtsim's
               ``ml_dtypes`` profile on every model; differences covered by a
               named divergence (conformance.divergences) are reported as such.
    torch      PyTorch's FP8/E8M0 casts against the ``torch`` profile (when
               importable; see conformance.torch_peers).
    torchao    torchao's FP4/FP6 casts against the ``torchao`` profile, its MX
               ``to_mx`` (every element format and scale mode) and NVFP4 quantizer
               against fmtsim's, block by block (when importable).
    cuda       NVIDIA's cuda_fp8.h / cuda_fp6.h / cuda_fp4.h host conversions, compiled into
               a shim against the machine's CUDA headers, against the ``cuda`` profile
               under each overflow and rounding mode they take (conformance.cuda_impl).
    hip        AMD's amd_hip_fp8.h host conversions, compiled against a ROCm install,
               against the ``hip`` profile (conformance.hip_impl).
    mmasim     MMA-Sim's matrix-instruction models against fmtsim.mma, every named
               unit it has, output bits (conformance.mma_peers; ``formats`` may
               name units to run only those).

Both also run the committed golden vectors (vectors/*.tv, when the package runs
from a checkout): fmtsim must reproduce every line; ml_dtypes runs the files
whose policy it shares (rne, nonsat, signed NaN; not float64 inputs, not E8M0).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from ..codec import decode, encode
from ..formats import FORMATS, get_format
from ..oracle import encode_one, value_of
from ..policy import resolve
from .adapters import Adapter, load_adapter
from .divergences import explain
from .models import iter_models

__all__ = ["Row", "run", "IMPLEMENTATIONS"]

IMPLEMENTATIONS = ("fmtsim", "ml_dtypes", "torch", "torchao", "mmasim", "cuda", "hip")


@dataclass
class Row:
    impl: str
    fmt: str
    model: str
    cases: int = 0
    passed: int = 0
    known: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, ok: np.ndarray, known: dict[str, np.ndarray], describe: Callable[[int], str]) -> None:
        self.cases += ok.size
        self.passed += int(ok.sum())
        covered = np.zeros(ok.shape, bool)
        for name, mask in known.items():
            hit = ~ok & mask
            if hit.any():
                self.known[name] = self.known.get(name, 0) + int(hit.sum())
            covered |= mask
        bad = np.nonzero(~ok & ~covered)[0]
        self.failed += bad.size
        for i in bad[: max(0, 3 - len(self.examples))]:
            self.examples.append(describe(int(i)))


def _decode_all_fmtsim(name: str) -> Row:
    f = get_format(name)
    row = Row("fmtsim", name, "decode_all")
    codes = np.arange(f.n_codes)
    got = decode(codes, name, np.float64)
    want = [value_of(int(c), f) for c in codes]
    ok = np.array([
        np.isnan(g) if w == "nan" else (g == float(w) if not isinstance(w, str) else
                                         g == (np.inf if w == "+inf" else -np.inf))
        for g, w in zip(got, want, strict=True)
    ])
    row.add(ok, {}, lambda i: f"code {i:#x}: got {got[i]!r}, oracle {want[i]}")
    return row


def _encode_ties_fmtsim(name: str, profile: str | None = None) -> Row:
    """Fast path vs oracle: rne under both overflow policies, or one profile's policy."""
    f = get_format(name)
    row = Row("fmtsim" if profile is None else f"fmtsim[{profile}]", name, "encode_ties")
    if profile is None:
        policies = [resolve(name, "rne", ov, None if f.has_nan else "zero")
                    for ov in (("satfinite", "nonsat") if (f.has_inf or f.has_nan) else ("satfinite",))]
    else:
        policies = [resolve(name, profile=profile)]
    for _model, src, x in iter_models(name, big=False):
        for pol in policies:
            xs = x
            if pol.nan == "raise":
                with np.errstate(invalid="ignore"):
                    xs = x[~np.isnan(x.astype(np.float64))]
            wide = xs.astype(np.float64)
            # a profile's finer fields (per-sign NaN codes, E8M0 specials ...) ride on the profile
            got = (encode(xs, name, profile=profile) if profile is not None else
                   encode(xs, name, rounding=pol.rounding, overflow=pol.overflow, nan=pol.nan))
            want = np.array([
                encode_one(float(v), name, src=src, policy=pol,
                           negative_nan=bool(np.signbit(v)))[0]
                for v in wide
            ], dtype=np.uint8)
            row.add(got == want, {}, _mismatch(src, wide, got, "fmtsim", want, "oracle"))
    return row


def _mismatch(src: str, x: np.ndarray, a: np.ndarray, a_name: str, b: np.ndarray, b_name: str
              ) -> Callable[[int], str]:
    def describe(i: int) -> str:
        return f"{src} {x[i]!r}: {a_name} {int(a[i]):#x}, {b_name} {int(b[i]):#x}"
    return describe


def _ml_dtypes_rows(name: str, big: bool) -> list[Row]:
    f = get_format(name)
    dt = f.ml_dtype
    assert dt is not None
    rows = []
    dec = Row("ml_dtypes", name, "decode_all")
    codes = np.arange(f.n_codes, dtype=np.uint8)
    theirs = codes.view(dt).astype(np.float32).view(np.uint32)
    ours = decode(codes, name, np.float32).view(np.uint32)
    dec.add(theirs == ours, {}, lambda i: f"code {i:#x}: ml_dtypes {theirs[i]:#010x}, fmtsim {ours[i]:#010x}")
    rows.append(dec)
    by_model: dict[str, Row] = {}
    for model, src, x in iter_models(name, big=big):
        row = by_model.setdefault(model, Row("ml_dtypes", name, model))
        ours_c = encode(x, name, profile="ml_dtypes")
        with np.errstate(invalid="ignore", over="ignore"):
            theirs_c = x.astype(dt).view(np.uint8)
        row.add(ours_c == theirs_c, explain("ml_dtypes", name, src, x),
                _mismatch(src, x, ours_c, "fmtsim", theirs_c, "ml_dtypes"))
    rows.extend(by_model.values())
    return rows


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


def _vector_rows(impl: str, names: list[str], vec_dir: Path) -> list[Row]:
    """The committed .tv vectors, run through ``impl``: fmtsim must reproduce every line;
    ml_dtypes is run on the files whose policy it shares (rne, nonsat, signed NaN)."""
    manifest_path = vec_dir / "manifest.json"
    if not manifest_path.exists():
        return []
    manifest = json.loads(manifest_path.read_text())
    rows: dict[str, Row] = {}
    for fname, meta in sorted(manifest["files"].items()):
        if not fname.endswith(".tv") or meta.get("operation") != "encode" or meta["format"]["name"] not in names:
            continue
        fmt = meta["format"]["name"]
        f = get_format(fmt)
        src = fname.split("_to_")[0]
        if impl == "ml_dtypes" and not (
            f.ml_dtype is not None and f.has_nan and fmt != "e8m0" and meta["rounding"] == "rne"
            and meta["overflow"] == "nonsat" and src != "f64"
        ):
            continue
        lines = [ln.split() for ln in (vec_dir / fname).read_text().splitlines() if ln.strip()]
        dt = _SRC_DTYPES[src]
        x = np.array([int(ln[0], 16) for ln in lines], dtype=np.uint64).astype(_UINT[dt.itemsize]).view(dt)
        want = np.array([int(ln[-2], 16) for ln in lines], dtype=np.uint8)
        if impl == "fmtsim":
            rb = np.array([int(ln[1], 16) for ln in lines], np.uint32) if len(lines[0]) == 4 else None
            got = np.asarray(encode(x, fmt, rounding=meta["rounding"], overflow=meta["overflow"], nan=meta["nan"],
                                    rbits=rb), dtype=np.uint8).reshape(-1)
        else:
            with np.errstate(invalid="ignore", over="ignore"):
                got = x.astype(f.ml_dtype).view(np.uint8)
        row = rows.setdefault(f"{impl}:{fmt}", Row(impl, fmt, "vectors (committed .tv)"))
        row.add(got == want, explain(impl, fmt, SRC_NAME.get(src, src), x) if impl != "fmtsim" else {},
                _mismatch(f"{fname}", x, got, impl, want, "vector"))
    return list(rows.values())


SRC_NAME = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}


def _torch_rows(impl: str, formats: list[str] | None, names: list[str], big: bool,
                profile: str | None) -> list[Row]:
    from . import torch_peers

    why = torch_peers.missing(impl)
    if why is not None:
        raise ValueError(why)
    adapter = torch_peers.torch_adapter() if impl == "torch" else torch_peers.torchao_adapter()
    if profile is not None:
        adapter.profile = profile
    rows = torch_peers.decode_rows(impl, names) + _adapter_rows(adapter, names, big)
    if impl == "torchao":
        schemes = None if formats is None else [s for s in formats if s.startswith(("mx", "nvfp4"))]
        if formats is None or schemes:
            rows.extend(torch_peers.torchao_block_rows(schemes))
    return rows


def _adapter_rows(adapter: Adapter, names: list[str], big: bool) -> list[Row]:
    rows: list[Row] = []
    for name in names:
        if adapter.formats is not None and name not in adapter.formats:
            continue
        by_model: dict[str, Row] = {}
        for model, src, x in iter_models(name, big=big):
            if src not in adapter.sources:
                continue
            row = by_model.setdefault(model, Row(adapter.name, name, model))
            keep, want = adapter.expected(x, name)
            xs = x[keep]
            try:
                got = np.asarray(adapter.encode(xs, name)).astype(np.int64).reshape(-1)
            except Exception as e:  # the adapter's own failure is a failed case set, not a crash
                row.cases += xs.size
                row.failed += xs.size
                row.examples.append(f"{src}: adapter raised {type(e).__name__}: {e}")
                continue
            if got.shape != want.shape:
                row.cases += xs.size
                row.failed += xs.size
                row.examples.append(f"{src}: adapter returned {got.size} codes for {xs.size} inputs")
                continue
            known = explain(adapter.divergences, name, src, xs) if adapter.divergences else {}
            row.add(got == want, known, _mismatch(src, xs, got, adapter.name, want, f"fmtsim[{adapter.profile}]"))
        rows.extend(by_model.values())
    return rows


def run(impls: tuple[str, ...] = ("fmtsim", "ml_dtypes"), formats: list[str] | None = None,
        big: bool = True, vectors: Path | None = None, profile: str | None = None) -> list[Row]:
    """Every model for every (implementation, format) pair that applies. An entry of
    ``impls`` may also be an adapter spec (``module:function`` or ``file.py:function``,
    see conformance.adapters). ``profile`` checks fmtsim against the oracle under that
    profile's policy and overrides the profile an adapter claims. ``formats`` may also
    name block schemes (mxfp8_e4m3 ... mxfp4, nvfp4) for torchao's block rows."""
    from ..mma import UNITS
    from ..mx import SCHEMES

    blocks = set(SCHEMES) | {"nvfp4"}  # block schemes, which only torchao's rows check
    units = [n for n in formats or [] if n in UNITS]
    names = ([get_format(n).name for n in formats if n not in blocks and n not in UNITS] if formats
             else list(FORMATS))
    rows: list[Row] = []
    for impl in impls:
        if ":" in impl:
            adapter = load_adapter(impl)
            if profile is not None:
                adapter.profile = profile
            rows.extend(_adapter_rows(adapter, names, big))
            continue
        if impl not in IMPLEMENTATIONS:
            raise ValueError(f"unknown implementation {impl!r}; choose from {', '.join(IMPLEMENTATIONS)} "
                             "or name an adapter as module:function")
        if impl in ("torch", "torchao"):
            rows.extend(_torch_rows(impl, formats, names, big, profile))
            continue
        if impl in ("cuda", "hip"):  # vendor headers compiled into a shim (cuda_impl / hip_impl)
            import importlib

            rows.extend(importlib.import_module(f"{__package__}.{impl}_impl").rows(names, big))
            continue
        if impl == "mmasim":
            from .mma_peers import mmasim_rows

            if formats and not units:
                continue
            rows.extend(mmasim_rows(units or None, big=big))
            continue
        for name in names:
            if impl == "fmtsim":
                rows.append(_decode_all_fmtsim(name))
                rows.append(_encode_ties_fmtsim(name, profile))
            elif impl == "ml_dtypes":
                f = get_format(name)
                if f.kind == "float" and f.ml_dtype is not None:
                    rows.extend(_ml_dtypes_rows(name, big))
        if vectors is not None:
            rows.extend(_vector_rows(impl, names, vectors))
    return rows
