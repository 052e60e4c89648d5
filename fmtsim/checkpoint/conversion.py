"""OCP FP8 safetensors checkpoints -> AMD FNUZ.

The output has the input's shape (one file, or a directory with the index, the
shards and every other file, subfolders included). FP8 weights (``F8_E4M3``,
``F8_E5M2``) keep their bits except the specials (fmtsim.fnuz) and are tagged
``F8_E4M3FNUZ`` / ``F8_E5M2FNUZ``; every scale that multiplies them is doubled in
its own dtype; everything else is copied byte for byte.

Which scales are doubled, and why (a scale ``s`` multiplies FP8 codes ``q``:
``x = q * s``; the same bits read as FNUZ are worth half, so ``s`` doubles):

    <fp8 tensor>_scale          weight scales: compressed-tensors / llm-compressor,
    (.weight_scale)             NVIDIA ModelOpt, FBGEMM, AMD Quark (per tensor,
                                per channel [out, 1] or per block); MXFP8's U8 E8M0
                                exponents [out, in/32] double as code + 1 (0xFF, NaN,
                                stays; 0xFE = 2^127 cannot double and is refused,
                                naming the tensor and the block)
    <fp8 tensor>_scale_inv      DeepSeek-V3 128x128 block scales
    (.weight_scale_inv)         [ceil(out/128), ceil(in/128)]: despite the name they
                                multiply (w = q * s; deepseek-ai/DeepSeek-V3
                                inference/fp8_cast_bf16.py), so they double too
    L.weights_scaling_factor    TensorRT-LLM checkpoints: multiplies L.weight
    L.qscale_weight             Mistral consolidated checkpoints: multiplies L.weight
    L.input_scale               static activation scales (compressed-tensors, ModelOpt,
    L.output_scale              Quark), TensorRT-LLM activation_scaling_factor, Mistral
    L.activation_scaling_factor qscale_act: the activations become FNUZ FP8 as well, and
    L.qscale_act                vLLM's normalize_e4m3fn_to_e4m3fnuz doubles input_scale
    .k_scale .v_scale           FP8 KV-cache / attention scales (vLLM, ModelOpt, Quark,
    .kv_scale .q_scale          TensorRT-LLM kv_cache_scaling_factor): the cache is FNUZ
    .prob_scale                 on FNUZ hardware, so they double
    .kv_cache_scaling_factor
    .input_scale_ub             FBGEMM's bound on activation magnitude: a value, not a
                                multiplier of codes: copied unchanged

A tensor whose last name component mentions a scale and matches none of these is
refused by name (``keep_scales`` / ``double_scales`` glob patterns resolve it); an
FP8 tensor with no weight scale is refused unless ``allow_unscaled=True`` (its
values then halve, and the summary names exactly those tensors). An FP8 tensor
that is itself a scale (NVFP4's F8_E4M3 block scales) is refused: FNUZ conversion
is for FP8 weights, and NVFP4 has no FNUZ form.

Every problem the data can hold is found before anything is written: doubled scales
that overflow their dtype, E5M2 Inf codes without an ``inf`` choice (``dry_run``
reports both). A re-run skips a shard only when its output records the same source
fingerprint and the same options and re-verifies byte for byte; otherwise it is
converted again. The conversion is recorded in each header's metadata under
``fmtsim_conversion``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..argcheck import path as check_path
from ..fnuz import ocp_to_fnuz, scale_by_power_of_two
from .files import (
    CHUNK_BYTES,
    DTYPES,
    INDEX_NAME,
    CheckpointError,
    Header,
    ShardWriter,
    Source,
    check_output,
    check_paths,
    chunks,
    copy_side_files,
    crosscheck,
    find_source,
    header_bytes,
    make_output_dir,
    read_header,
    read_headers,
    read_tensor,
    remove_stale_temps,
    run_shards,
)

__all__ = ["plan", "convert", "ConversionPlan", "ConversionSummary", "ShardResult", "META_KEY"]

META_KEY = "fmtsim_conversion"
OCP_FP8 = {"F8_E4M3": ("e4m3", "F8_E4M3FNUZ"), "F8_E5M2": ("e5m2", "F8_E5M2FNUZ")}
FNUZ_TAGS = {"F8_E4M3FNUZ", "F8_E5M2FNUZ"}
SCALE_FLOATS = {"F64", "F32", "F16", "BF16"}
# suffix -> what it multiplies, relative to the layer prefix
WEIGHT_SCALE_SUFFIXES = {"_scale": "", "_scale_inv": ""}  # appended to the weight's own name
LAYER_WEIGHT_SCALES = (".weights_scaling_factor", ".qscale_weight")  # L.<this> multiplies L.weight
ACTIVATION_SUFFIXES = (".input_scale", ".output_scale", ".activation_scaling_factor", ".qscale_act")
ATTENTION_SUFFIXES = (".k_scale", ".v_scale", ".kv_scale", ".q_scale", ".prob_scale", ".kv_cache_scaling_factor")
UNCHANGED_SUFFIXES = (".input_scale_ub",)
E8M0_TAGS = {"U8", "F8_E8M0"}  # how MXFP8 checkpoints store their power-of-two block scales


def _check_e8m0_layout(name: str, scale: tuple[int, ...], weight: tuple[int, ...]) -> None:
    """A U8 weight scale is read as E8M0 exponents only in the MX block layout: the weight's shape with the
    last dimension divided into whole blocks ([out, in/32] for MXFP8)."""
    if len(scale) != len(weight) or scale[:-1] != weight[:-1] or not scale[-1] or weight[-1] % scale[-1]:
        raise CheckpointError(f"{name}: a U8 scale of shape {list(scale)} is not an E8M0 block scale of an FP8 "
                              f"weight of shape {list(weight)} (expected [..., in / block]); cannot tell how to "
                              "double it")


def double_e8m0(codes: np.ndarray, name: str, weight_cols: int | None = None) -> np.ndarray:
    """E8M0 scale bytes doubled: code + 1 (the value is 2^(code - 127)); 0xFF (NaN) stays NaN. 0xFE is
    2^127, the largest E8M0 value: it cannot double, and a ValueError names the tensor and the block."""
    c = np.ascontiguousarray(codes).view(np.uint8)
    top = c == 0xFE
    if top.any():
        at = [int(i) for i in np.argwhere(top)[0]] if c.ndim else []
        cols = ""
        if weight_cols is not None and c.ndim:
            per = weight_cols // c.shape[-1]
            cols = f" (weight columns {at[-1] * per}..{at[-1] * per + per - 1})" if at else ""
        raise ValueError(f"{name}: E8M0 scale byte 0xFE (2^127) at block {at}{cols} cannot double: 2^128 is not an "
                         f"E8M0 value ({int(np.count_nonzero(top))} such block(s))")
    return np.where(c == 0xFF, c, c + np.uint8(1)).astype(np.uint8)


def is_scale_like(name: str) -> bool:
    """Does the last name component mention a scale (scale, scale_inv, scaling_factor, qscale)?"""
    return "scal" in name.rsplit(".", 1)[-1].lower()


@dataclass
class ConversionPlan:
    """What a conversion will do: tensor name -> action, and everything it found."""

    source: Source
    headers: dict[Path, Header]
    where: dict[str, Path]  # tensor -> shard
    options: dict[str, Any]
    fp8: dict[str, str] = field(default_factory=dict)  # tensor -> 'e4m3' | 'e5m2'
    doubled: dict[str, str] = field(default_factory=dict)  # scale -> why
    unchanged_scales: dict[str, str] = field(default_factory=dict)
    unscaled: list[str] = field(default_factory=list)
    e8m0: set[str] = field(default_factory=set)  # doubled scales that are E8M0 exponent bytes (MXFP8)
    inf_codes: dict[str, int] = field(default_factory=dict)  # E5M2 tensor -> Inf codes (dry run)
    problems: list[str] = field(default_factory=list)  # what a real run would refuse (dry run)
    scale_errors: list[str] = field(default_factory=list)  # inspect's scale errors converted anyway (allowed)

    @property
    def shards(self) -> list[Path]:
        return self.source.shards

    @property
    def index(self) -> dict[str, Any] | None:
        return self.source.index

    def action(self, name: str) -> str:
        if name in self.fp8:
            return "fp8"
        if name in self.doubled:
            return "double"
        return "copy"

    @property
    def total_bytes(self) -> int:
        return sum(h.file_size for h in self.headers.values())


def plan(
    path: str | Path,
    *,
    allow_unscaled: bool = False,
    keep_scales: tuple[str, ...] = (),
    double_scales: tuple[str, ...] = (),
    inf: str | None = None,
    scan: bool = False,
    allow_scale_errors: bool = False,
) -> ConversionPlan:
    """Find the FP8 tensors and the scales that multiply them; refuse what is unclear.

    A scale ``fmtsim checkpoint inspect`` calls an error (NaN, Inf, negative, zero over non-zero
    codes, E8M0 0xFF) stops the conversion unless ``allow_scale_errors``: doubling it would carry a
    broken checkpoint into a new one. ``scan=True`` also reads every E5M2 tensor for Inf codes and
    records problems instead of raising for them (what ``--dry-run`` shows)."""
    check_path(path, "plan: path")
    if inf is not None and inf not in ("nan", "max", "ocp_max"):
        raise CheckpointError(f"inf must be nan, max or ocp_max, not {inf!r}")
    src = find_source(path)
    headers, where = read_headers(src)
    options = {"inf": inf, "allow_unscaled": allow_unscaled, "keep_scales": sorted(keep_scales),
               "double_scales": sorted(double_scales)}
    p = ConversionPlan(src, headers, where, options)
    done = [h for h in headers.values() if META_KEY in h.metadata]
    fnuz = [(n, h.entries[n].dtype) for h in headers.values() for n in h.entries if h.entries[n].dtype in FNUZ_TAGS]
    if done or fnuz:
        what = f"metadata '{META_KEY}' in {done[0].path.name}" if done else f"tensor {fnuz[0][0]!r} is {fnuz[0][1]}"
        raise CheckpointError(f"{src.path}: input is already FNUZ ({what}); nothing to do")

    dtype_of = {n: headers[where[n]].entries[n].dtype for n in where}
    fp8_scales = sorted(n for n, d in dtype_of.items() if d in OCP_FP8 and is_scale_like(n))
    if fp8_scales:
        n = fp8_scales[0]
        layer = n.rsplit(".", 1)[0]
        packed = [w for w in (f"{layer}.weight", f"{layer}.weight_packed") if dtype_of.get(w) == "U8"]
        what = (f"the F8_E4M3 block scales of the U8-packed FP4 weight {packed[0]!r} (an NVFP4 checkpoint)"
                if packed else f"an FP8 scale ({dtype_of[n]}), not an FP8 weight")
        raise CheckpointError(f"{where[n]}: {n!r} is {what}: FNUZ conversion is for FP8 weights; NVFP4 block "
                              f"scales have no FNUZ form ({len(fp8_scales)} such tensor(s)); nothing written")
    p.fp8 = {n: OCP_FP8[d][0] for n, d in dtype_of.items() if d in OCP_FP8}
    has_weight_scale: set[str] = set()
    unknown: list[str] = []
    for name, dt in dtype_of.items():
        if name in p.fp8:
            continue
        layer = name.rsplit(".", 1)[0]
        target = None
        for suffix in WEIGHT_SCALE_SUFFIXES:
            if name.endswith(suffix) and name[: -len(suffix)] in p.fp8:
                target = name[: -len(suffix)]
        if target is None and name.endswith(LAYER_WEIGHT_SCALES) and f"{layer}.weight" in p.fp8:
            target = f"{layer}.weight"
        why = None
        if any(fnmatch.fnmatchcase(name, pat) for pat in keep_scales):
            p.unchanged_scales[name] = "kept by --keep-scale"
            continue
        if target is not None:
            why = f"multiplies {target}"
            has_weight_scale.add(target)
        elif name.endswith(UNCHANGED_SUFFIXES):
            p.unchanged_scales[name] = "activation bound (FBGEMM input_scale_ub), not a multiplier"
            continue
        elif name.endswith(ACTIVATION_SUFFIXES):
            if f"{layer}.weight" in p.fp8 or layer.endswith(("k_proj", "v_proj")):
                why = f"activation scale of {layer}"
            else:
                raise CheckpointError(f"{name}: activation scale of a layer without an FP8 weight; "
                                      "say what it is with --keep-scale or --double-scale")
        elif name.endswith(ATTENTION_SUFFIXES):
            why = "FP8 attention / KV-cache scale"
        elif any(fnmatch.fnmatchcase(name, pat) for pat in double_scales):
            why = "doubled by --double-scale"
            if f"{layer}.weight" in p.fp8:  # e.g. a producer's own weight-scale name
                why = f"doubled by --double-scale (multiplies {layer}.weight)"
                has_weight_scale.add(f"{layer}.weight")
        elif is_scale_like(name):
            unknown.append(name)
            continue
        if why is None:
            continue
        if dt in E8M0_TAGS and target is not None:
            _check_e8m0_layout(name, headers[where[name]].entries[name].shape,
                               headers[where[target]].entries[target].shape)
            p.e8m0.add(name)
            why += " (E8M0 exponents: doubled as code + 1)"
        elif dt not in SCALE_FLOATS:
            raise CheckpointError(f"{name}: a scale stored as {dt}; only F64/F32/F16/BF16 scales, and E8M0 (U8) "
                                  "block scales of an FP8 weight, can be doubled")
        p.doubled[name] = why
    if unknown:
        raise CheckpointError(
            "cannot tell what these scale-like tensors multiply: " + ", ".join(sorted(unknown)[:20])
            + ("" if len(unknown) <= 20 else f" (and {len(unknown) - 20} more)")
            + "; name them with --keep-scale PATTERN or --double-scale PATTERN"
        )
    p.unscaled = sorted(set(p.fp8) - has_weight_scale)
    if p.unscaled and not allow_unscaled:
        msg = (f"{len(p.unscaled)} FP8 tensor(s) have no scale: " + ", ".join(p.unscaled[:20])
               + "; pass --allow-unscaled to convert them anyway (their values then halve)")
        if not scan:
            raise CheckpointError(msg)
        p.problems.append(msg)
    _check_scales(p, raise_now=not scan)
    _check_scale_findings(p, allow_scale_errors, raise_now=not scan)
    if scan:
        _scan_inf(p)
    return p


# inspect's findings about a scale's value that make the weights it multiplies meaningless
SCALE_ERRORS = ("nan-scale", "inf-scale", "negative-scale", "zero-scale", "e8m0-nan")


def _check_scale_findings(p: ConversionPlan, allowed: bool, raise_now: bool) -> None:
    """The scale errors ``fmtsim checkpoint inspect`` reports for the FP8 weights being converted."""
    from .inspection import inspect  # inspection reads the producer records (dequant); imported when used

    try:
        report = inspect(p.source.path)
    except CheckpointError:  # a layout no record knows: the name rules above decided what to double
        return
    bad = [f for f in report.findings if f.severity == "error" and f.code in SCALE_ERRORS]
    if not bad or allowed:
        p.scale_errors = [f"{f.tensor}: {f.code}: {f.message}" for f in bad]
        return
    shown = "; ".join(f"{f.tensor}: {f.message}" for f in bad[:5]) + (f" (and {len(bad) - 5} more)" if len(bad) > 5
                                                                       else "")
    msg = (f"{len(bad)} scale error(s) that 'fmtsim checkpoint inspect' reports: {shown}; the converted checkpoint "
           "would carry them: fix the source, or pass --allow-scale-errors (allow_scale_errors=True) to convert "
           "anyway")
    if raise_now:
        raise CheckpointError(msg)
    p.problems.append(msg)


def _check_scales(p: ConversionPlan, raise_now: bool) -> None:
    """Every doubled scale must stay finite and exact in its dtype (read now, before any write)."""
    by_shard: dict[Path, list[str]] = {}
    for n in p.doubled:
        by_shard.setdefault(p.where[n], []).append(n)
    for shard, names in by_shard.items():
        h = p.headers[shard]
        with open(shard, "rb") as fh:
            for n in sorted(names, key=lambda k: h.entries[k].begin):
                e = h.entries[n]
                arr = read_tensor(fh, h, e).view(DTYPES[e.dtype]).reshape(e.shape)
                try:
                    if n in p.e8m0:
                        double_e8m0(arr, n, _weight_cols(p, n))
                    else:
                        scale_by_power_of_two(arr, 2.0, n)
                except (OverflowError, ValueError) as err:
                    msg = f"{shard}: cannot double scale {err}; keep it with --keep-scale if it is not a multiplier"
                    if raise_now:
                        raise CheckpointError(msg) from None
                    p.problems.append(msg)


def _weight_cols(p: ConversionPlan, scale: str) -> int | None:
    """Columns of the FP8 weight an E8M0 scale multiplies (to name a block's columns in errors)."""
    for suffix in WEIGHT_SCALE_SUFFIXES:
        w = scale[: -len(suffix)] if scale.endswith(suffix) else None
        if w in p.fp8:
            return p.headers[p.where[w]].entries[w].shape[-1]
    return None


def _scan_inf(p: ConversionPlan) -> None:
    buf = np.empty(CHUNK_BYTES, dtype=np.uint8)
    for n, fmt in sorted(p.fp8.items()):
        if fmt != "e5m2":
            continue
        h = p.headers[p.where[n]]
        count = 0
        with open(h.path, "rb") as fh:
            for c in chunks(fh, h, h.entries[n], buf):
                count += int(np.count_nonzero((c & 0x7F) == 0x7C))
        if count:
            p.inf_codes[n] = count
    if p.inf_codes and p.options["inf"] is None:
        total = sum(p.inf_codes.values())
        p.problems.append(f"{total} E5M2 Inf code(s) in {len(p.inf_codes)} tensor(s) (first: "
                          f"{min(p.inf_codes)!r}); a real run needs --inf nan|max|ocp_max")


# ---- converting one shard ------------------------------------------------------------


@dataclass
class ShardResult:
    shard: str
    skipped: bool = False
    redone: str = ""  # why an existing output was not kept
    tensors: int = 0
    bytes: int = 0
    fp8_tensors: int = 0
    neg_zero: int = 0
    nan: int = 0
    inf: int = 0
    scales_doubled: int = 0
    verified: bool = False
    seconds: float = 0.0


def _fingerprint(h: Header) -> str:
    st = h.path.stat()
    return hashlib.sha256(h.raw + f"{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()


class _Scratch:
    """Reused work buffers: fresh megabyte arrays would page-fault on every chunk."""

    def __init__(self) -> None:
        self.u8 = np.empty(CHUNK_BYTES, dtype=np.uint8)
        self.mask = np.empty(CHUNK_BYTES, dtype=bool)
        self.mask2 = np.empty(CHUNK_BYTES, dtype=bool)
        self.diff = np.empty(CHUNK_BYTES, dtype=bool)


def _special_mask(chunk: np.ndarray, fmt: str, scratch: _Scratch) -> np.ndarray:
    """Bytes that are -0, NaN or Inf in OCP ``fmt`` (the only codes whose bits change)."""
    n = chunk.size
    m = 0x7F if fmt == "e4m3" else 0x7C
    tmp, mask, extra = scratch.u8[:n], scratch.mask[:n], scratch.mask2[:n]
    np.bitwise_and(chunk, m, out=tmp)
    np.equal(tmp, m, out=mask)
    np.equal(chunk, 0x80, out=extra)
    np.logical_or(mask, extra, out=mask)
    return mask


@dataclass
class _Job:
    shard: Path
    out_path: Path
    plan_fp8: dict[str, str]
    plan_doubled: dict[str, str]
    plan_e8m0: set[str]
    inf: str | None
    verify: bool
    options: dict[str, Any]


def _luts(job: _Job) -> dict[str, np.ndarray]:
    # code -> code tables; Inf codes met without an --inf choice are refused before use
    return {fmt: ocp_to_fnuz(np.arange(256, dtype=np.uint8), fmt, inf=job.inf or "nan")[0]
            for fmt in set(job.plan_fp8.values())}


def _existing_is_good(h: Header, job: _Job, fingerprint: str) -> str:
    """'' when the output on disk is this conversion, complete and verified; else why not."""
    try:
        prior = read_header(job.out_path)
        info = json.loads(prior.metadata.get(META_KEY, "{}"))
    except (CheckpointError, json.JSONDecodeError):
        return "the existing output is not a finished conversion"
    if info.get("source_fingerprint") != fingerprint:
        return "the existing output was made from a different input"
    if info.get("options") != job.options:
        return "the existing output was made with different options"
    try:
        _verify_shard(h, job.out_path, job, _luts(job), _Scratch())
    except CheckpointError as e:
        return f"the existing output failed verification ({e})"
    return ""


def _convert_shard(job: _Job, progress: Callable[[int], None] | None = None) -> ShardResult:
    t0 = time.perf_counter()
    h = read_header(job.shard)
    res = ShardResult(job.shard.name, bytes=h.file_size, tensors=len(h.entries))
    fingerprint = _fingerprint(h)
    if job.out_path.exists():
        res.redone = _existing_is_good(h, job, fingerprint)
        if not res.redone:
            res.skipped = res.verified = True
            if progress:
                progress(h.file_size)
            res.seconds = time.perf_counter() - t0
            return res
    luts = _luts(job)
    tags = {n: OCP_FP8[h.entries[n].dtype][1] for n in h.entries if n in job.plan_fp8}
    conv = {"source_format": "OCP", "target_format": "FNUZ", "scale_multiplier": 2.0,
            "fmtsim_version": __version__, "source_file": job.shard.name,
            "source_fingerprint": fingerprint, "verified": job.verify, "options": job.options,
            "fp8_tensors": sorted(tags), "scales_doubled": sorted(n for n in h.entries if n in job.plan_doubled)}
    meta = dict(h.metadata)
    meta[META_KEY] = json.dumps(conv, separators=(",", ":"))
    header = header_bytes(h.ordered(), tags, meta)
    buf = np.empty(CHUNK_BYTES, dtype=np.uint8)
    scratch = _Scratch()
    with open(job.shard, "rb") as src, ShardWriter(job.out_path) as dst:
        dst.write(header)
        pos = 0
        for e in h.ordered():
            if e.begin > pos:  # keep any padding between tensors as it was
                src.seek(h.data_start + pos)
                dst.write(src.read(e.begin - pos))
            if e.name in job.plan_fp8:
                fmt = job.plan_fp8[e.name]
                res.fp8_tensors += 1
                for chunk in chunks(src, h, e, buf):
                    special = _special_mask(chunk, fmt, scratch)
                    if special.any():
                        idx = np.flatnonzero(special)
                        vals = chunk[idx]
                        neg_zero = int(np.count_nonzero(vals == 0x80))
                        infs = int(np.count_nonzero((vals & 0x7F) == 0x7C)) if fmt == "e5m2" else 0
                        if infs and job.inf is None:
                            raise CheckpointError(f"{job.shard}: tensor {e.name!r} holds E5M2 Inf codes; "
                                                  "pass --inf nan|max|ocp_max")
                        res.neg_zero += neg_zero
                        res.inf += infs
                        res.nan += int(idx.size) - neg_zero - infs
                        chunk[idx] = luts[fmt][vals]
                    dst.write(chunk.data)
                    if progress:
                        progress(chunk.size)
            elif e.name in job.plan_doubled:
                raw = read_tensor(src, h, e).view(DTYPES[e.dtype])
                try:
                    doubled = double_e8m0(raw.reshape(e.shape), e.name) if e.name in job.plan_e8m0 else \
                        scale_by_power_of_two(raw, 2.0, e.name)
                except (OverflowError, ValueError) as err:
                    raise CheckpointError(f"{job.shard}: cannot double scale {err}") from None
                dst.write(doubled.tobytes())
                res.scales_doubled += 1
                if progress:
                    progress(e.nbytes)
            else:
                for chunk in chunks(src, h, e, buf):
                    dst.write(chunk.data)
                    if progress:
                        progress(chunk.size)
            pos = e.end
        tail = h.file_size - h.data_start - pos
        if tail:
            src.seek(h.data_start + pos)
            dst.write(src.read(tail))
        tmp = dst.finish()
        if job.verify:
            _verify_shard(h, tmp, job, luts, scratch)
            res.verified = True
        dst.commit()
    res.seconds = time.perf_counter() - t0
    return res


def _verify_shard(h: Header, out_path: Path, job: _Job, luts: dict[str, np.ndarray], scratch: _Scratch) -> None:
    """Re-read the written file: FP8 codes against the rule, scales exactly doubled,
    every other tensor byte-identical."""
    o = read_header(out_path)
    crosscheck(o)
    if set(o.entries) != set(h.entries):
        raise CheckpointError(f"{out_path}: verification failed: tensor names differ")
    a_buf = np.empty(CHUNK_BYTES, dtype=np.uint8)
    b_buf = np.empty(CHUNK_BYTES, dtype=np.uint8)
    with open(h.path, "rb") as a, open(out_path, "rb") as b:
        for e in h.ordered():
            oe = o.entries[e.name]
            if (oe.shape, oe.begin, oe.end) != (e.shape, e.begin, e.end):
                raise CheckpointError(f"{out_path}: verification failed: {e.name!r} moved or reshaped")
            if e.name in job.plan_doubled:
                if e.name in job.plan_e8m0:  # exponent bytes: one step up, NaN (0xFF) kept
                    old_u8, new_u8 = read_tensor(a, h, e), read_tensor(b, o, oe)
                    want = np.where(old_u8 == 0xFF, old_u8, old_u8.astype(np.int64) + 1)
                    if oe.dtype != e.dtype or not np.array_equal(new_u8, want):
                        raise CheckpointError(f"{out_path}: verification failed: E8M0 scale {e.name!r} is not 2x")
                    continue
                old = read_tensor(a, h, e).view(DTYPES[e.dtype]).astype(np.float64)
                new = read_tensor(b, o, oe).view(DTYPES[oe.dtype]).astype(np.float64)
                if oe.dtype != e.dtype or not np.array_equal(new, old * 2, equal_nan=True):
                    raise CheckpointError(f"{out_path}: verification failed: scale {e.name!r} is not 2x")
                continue
            fmt = job.plan_fp8.get(e.name)
            want_tag = OCP_FP8[e.dtype][1] if fmt else e.dtype
            if oe.dtype != want_tag:
                raise CheckpointError(f"{out_path}: verification failed: {e.name!r} tagged {oe.dtype}")
            for ca, cb in zip(chunks(a, h, e, a_buf), chunks(b, o, oe, b_buf), strict=True):
                if fmt is None:
                    same = np.array_equal(ca, cb)
                else:
                    # every byte keeps its bits unless it is an OCP special, which must follow the rule
                    special = _special_mask(ca, fmt, scratch)
                    diff = np.not_equal(ca, cb, out=scratch.diff[: ca.size])
                    same = np.array_equal(diff, special)
                    if same and special.any():
                        idx = np.flatnonzero(special)
                        same = np.array_equal(cb[idx], luts[fmt][ca[idx]])
                if not same:
                    raise CheckpointError(f"{out_path}: verification failed in tensor {e.name!r}")


# ---- the whole conversion --------------------------------------------------------------


@dataclass
class ConversionSummary:
    plan: ConversionPlan
    shards: list[ShardResult]
    seconds: float
    output: Path
    dry_run: bool = False
    notes: list[str] = field(default_factory=list)  # files left out, stale temporaries removed

    def totals(self) -> dict[str, int]:
        keys = ("tensors", "bytes", "fp8_tensors", "neg_zero", "nan", "inf", "scales_doubled")
        return {k: sum(getattr(s, k) for s in self.shards) for k in keys}


def convert(
    src: str | Path,
    out: str | Path,
    *,
    inf: str | None = None,
    allow_unscaled: bool = False,
    keep_scales: tuple[str, ...] = (),
    double_scales: tuple[str, ...] = (),
    dry_run: bool = False,
    jobs: int = 1,
    verify: bool = True,
    progress: bool = False,
    scheduler: Any = None,
    allow_scale_errors: bool = False,
) -> ConversionSummary:
    """Convert an OCP FP8 checkpoint to FNUZ. See the module docstring for every rule.
    Shards run in ``jobs`` local processes or, with ``scheduler`` (a dask.distributed.Client
    or an address, fmtsim[dask]), on a Dask cluster's workers (fmtsim.executor)."""
    check_path(src, "convert: src")
    check_path(out, "convert: out")
    check_paths(src, out)
    t0 = time.perf_counter()
    p = plan(src, allow_unscaled=allow_unscaled, keep_scales=keep_scales, double_scales=double_scales,
             inf=inf, scan=dry_run, allow_scale_errors=allow_scale_errors)
    out_p = check_output(p.source, out)
    if dry_run:
        return ConversionSummary(p, [], time.perf_counter() - t0, out_p, dry_run=True,
                                 notes=[f"{q.name}: a .safetensors file not in {INDEX_NAME}: would be left out"
                                        for q in p.source.extra])
    is_dir = p.source.is_dir
    out_dir = out_p if is_dir else out_p.parent
    make_output_dir(out_dir)
    notes = [f"removed {q.name} (left by a killed run)" for q in remove_stale_temps(out_dir)]
    jobs_list = [
        _Job(s, (out_p / s.name) if is_dir else out_p, {n: f for n, f in p.fp8.items() if p.where[n] == s},
             {n: w for n, w in p.doubled.items() if p.where[n] == s}, {n for n in p.e8m0 if p.where[n] == s},
             inf, verify, p.options)
        for s in p.shards
    ]
    results: list[ShardResult] = run_shards(_convert_shard, jobs_list, jobs, lambda r: r.bytes, scheduler,
                                            (p.total_bytes, "fnuz convert") if progress else None)
    if is_dir:
        notes += _write_side_files(p, out_p)
    return ConversionSummary(p, results, time.perf_counter() - t0, out_p, notes=notes)


def _write_side_files(p: ConversionPlan, out: Path) -> list[str]:
    """Index (with a conversion note), config.json (quantization_config annotated), the rest copied."""
    note = {"source_format": "OCP", "target_format": "FNUZ", "scale_multiplier": 2.0,
            "fmtsim_version": __version__, "options": p.options, "scales_doubled": len(p.doubled),
            "fp8_tensors": len(p.fp8)}
    src = p.source.path
    rewrite: dict[str, bytes] = {}
    if p.index is not None:
        index = dict(p.index)
        index["metadata"] = dict(index.get("metadata") or {}, **{META_KEY: note})
        rewrite[INDEX_NAME] = (json.dumps(index, indent=2) + "\n").encode()
    cfg_path = src / "config.json"
    if cfg_path.is_file():
        try:
            cfg = json.loads(cfg_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{cfg_path}: not valid JSON: {e}") from None
        if isinstance(cfg, dict):
            qc = cfg.get("quantization_config")
            if isinstance(qc, dict):
                qc[META_KEY] = note
            cfg[META_KEY] = note
            rewrite["config.json"] = (json.dumps(cfg, indent=2) + "\n").encode()
    return copy_side_files(p.source, out, {s.name for s in p.shards}, rewrite)
