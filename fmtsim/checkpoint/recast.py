"""``fmtsim checkpoint convert --to nvfp4|mxfp4|fp8-block|mxfp8``: re-encode quantized tensors in
another block format, with an honest loss report.

Every source value is first taken exactly (float64: the products of MXFP4, NVFP4 with a
multiplier global scale, and FP8 x F32 scales are all exact there; an NVFP4 divisor global
scale can give values float64 cannot hold, and those blocks are reported as inexact), then
encoded with fmtsim's own rules, choosing power-of-two scales so that a value the target can
hold is kept:

    mxfp4 -> nvfp4       per 16 values: scale 2^k by the OCP floor rule (fmtsim.mx.scale_codes),
                         one power-of-two global scale G = 2^(max k - 8) so every block scale is a
                         UE4M3 power of two (2^-9 .. 2^8) where it can be; E2M1 codes RNE. Written
                         in ModelOpt's layout (weight U8, weight_scale F8_E4M3, weight_scale_2 = G).
    nvfp4 -> mxfp4       fmtsim.mx.quantize per block of 32 with the OCP floor rule, or rceil where
                         floor would clip (whichever loses less), RNE; AMD Quark's layout (weight
                         U8, weight_scale U8 E8M0 [out, in/32]).
    mxfp4 -> fp8-block   per 128x128 tile: scale 2^k, the smallest power of two with amax / 2^k <=
                         448 (the rceil rule), E4M3 RNE; DeepSeek-V3's layout (weight F8_E4M3,
                         weight_scale_inv F32). 2-D weights only.
    fp8   -> mxfp8       as nvfp4 -> mxfp4 with "mxfp8_e4m3" elements; weight F8_E4M3 and
                         weight_scale U8 [out, in/32] (the ``modelopt-mxfp8`` record).

Each target block is compared with the exact source values: the report gives, per tensor, how
many blocks convert exactly, the largest absolute error, and an example block. With
``require_exact`` nothing is written when any block would lose information. Non-quantized
tensors are copied; the index is rewritten; config.json's ``quantization_config`` is replaced by
a note (the output's producer is named there) and ``hf_quant_config.json`` is left out.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from .. import __version__, mx
from ..argcheck import path as check_path
from ..codec import decode, encode
from ..fileio import UnsafeOutputError, atomic_write
from .dequant import TensorJob, _e2m1, _scale_values, _scan, divide_exactly, layer_plan
from .files import (
    INDEX_NAME,
    CheckpointError,
    Entry,
    Header,
    ShardWriter,
    check_output,
    check_paths,
    copy_side_files,
    crosscheck,
    header_bytes,
    make_output_dir,
    read_array,
    read_header,
)
from .producers import LayerMatch

__all__ = ["TARGETS", "recast", "TensorLoss", "RecastSummary"]

TARGETS = {"nvfp4": ("mxfp4",), "mxfp4": ("nvfp4",), "fp8-block": ("mxfp4",), "mxfp8": ("fp8",)}
META_KEY = "fmtsim_recast"

SCALE_TABLE = {"e8m0": "e8m0", "ue4m3": "e4m3", "ue5m3": "ue5m3"}  # a record's scale_format -> its byte table


@dataclass
class TensorLoss:
    tensor: str
    out_name: str
    blocks: int
    exact: int
    max_abs_error: float
    example: dict[str, Any] | None = None  # the block with the largest error: where, source, target values


@dataclass
class RecastSummary:
    target: str
    output: Path | None
    tensors: list[TensorLoss]
    written: bool
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def lossy(self) -> int:
        return sum(t.blocks - t.exact for t in self.tensors)


CHUNK_VALUES = 1 << 20  # source values per step (float64 work arrays of a few MiB)


class _Source:
    """One quantized tensor's bytes, read a range of rows (of the [rows, K] value view) at a time."""

    def __init__(self, m: LayerMatch, tj: TensorJob, headers: dict[Path, Header], where: dict[str, Path]) -> None:
        self.m, self.tj = m, tj
        self.headers, self.where = headers, where
        self.k = tj.out_shape[-1]
        self.rows = int(np.prod(tj.out_shape[:-1], dtype=np.int64))
        self.scale = self._whole(m.scale)
        self.glob = float(self._whole(m.global_scale).astype(np.float64).reshape(-1)[0]) if m.global_scale else None

    def _whole(self, name: str) -> np.ndarray:
        h = self.headers[self.where[name]]
        with open(h.path, "rb") as fh:
            return read_array(fh, h, h.entries[name])

    def values(self, r0: int, r1: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact float64 values of rows [r0, r1) and a mask of those float64 could not hold."""
        m, p = self.m, self.m.producer
        h = self.headers[self.where[m.codes]]
        e = h.entries[m.codes]
        row_bytes = e.nbytes // self.rows
        with open(h.path, "rb") as fh:
            fh.seek(h.data_start + e.begin + r0 * row_bytes)
            raw = fh.read((r1 - r0) * row_bytes)
        if len(raw) != (r1 - r0) * row_bytes:
            raise CheckpointError(f"{h.path}: truncated data in tensor {m.codes!r}")
        b = np.frombuffer(raw, dtype=np.uint8).reshape(r1 - r0, row_bytes)
        if p.scheme in ("mxfp4", "nvfp4"):
            codes = np.stack([b & 0xF, b >> 4], axis=-1).reshape(r1 - r0, self.k)
            sc = self.scale.view(np.uint8).reshape(self.rows, -1)[r0:r1]
            per = self.k // sc.shape[1]  # 32 (MX), 16 (NVFP4) or 32 (ModelOpt W4A16_NVFP4, Quark amdfp4_g32)
            svals = _scale_values(SCALE_TABLE[p.scale_format])[sc.astype(np.intp)]
            with np.errstate(invalid="ignore", over="ignore"):
                x = _e2m1()[codes] * np.repeat(svals, per, axis=1)
            inexact = np.zeros(x.shape, bool)
            if p.scheme == "nvfp4" and self.glob is not None:  # Quark's plain amdfp4 has no global scale
                if p.global_direction == "multiplier":
                    x = x * self.glob
                else:
                    x, sticky = divide_exactly(x, self.glob)
                    inexact = sticky != 0
            return x, inexact
        x = np.asarray(decode(b, self.tj.match.element, np.float64))
        assert self.tj.block is not None
        br, bc = self.tj.block
        s = np.asarray(decode(self.scale.view(np.uint8), "e8m0", np.float64)) if p.scale_format == "e8m0" \
            else self.scale.astype(np.float64)
        if s.size == 1:
            return x * float(s.reshape(-1)[0]), np.zeros(x.shape, bool)
        s2 = s.reshape(self.rows, 1) if s.ndim == 1 else s
        rows_idx = np.arange(r0, r1) // br
        full = np.repeat(s2[rows_idx], bc, axis=1)[:, : self.k]
        return x * full, np.zeros(x.shape, bool)


def _ue4m3_pow2(e: np.ndarray) -> np.ndarray:
    """UE4M3 code of 2^e for e in [-9, 8] (subnormals below 2^-6)."""
    return np.where(e >= -6, (e + 7) << 3, 1 << np.clip(e + 9, 0, 2)).astype(np.uint8)


def _nvfp4_exponents(x: np.ndarray) -> np.ndarray:
    """Per 16 values: the OCP floor-rule exponent (fmtsim.mx.scale_codes), -inf-like for empty blocks."""
    amax = np.max(np.abs(np.nan_to_num(x.reshape(-1, 16))), axis=1)
    kb = mx.scale_codes(amax, "e2m1", "floor").astype(np.int64) - 127
    return np.where(amax > 0, kb, np.iinfo(np.int64).min // 2)


def _to_nvfp4(x: np.ndarray, m: int) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    rows, k = x.shape
    blocks = x.reshape(-1, 16)
    kb = _nvfp4_exponents(x)
    e = np.clip(kb - m, -9, 8)
    codes = np.asarray(encode((blocks / np.exp2(e + m)[:, None]).astype(np.float64), "e2m1")).astype(np.uint8)
    back = _e2m1()[codes] * np.exp2(e + m)[:, None]
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).reshape(rows, k // 2)
    return ({".weight": packed, ".weight_scale": _ue4m3_pow2(e).reshape(rows, k // 16).view(ml_dtypes.float8_e4m3fn),
             ".weight_scale_2": np.array(2.0 ** m, np.float32)}, back.reshape(rows, k), 16)


def _to_mx(x: np.ndarray, scheme: str) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """Per block of 32, the scale of the OCP floor rule, or of rceil (the smallest that does not clip)
    where floor would clip: whichever loses less, floor on a tie."""
    rows, k = x.shape
    best_codes = best_scales = best_back = None
    best_err = None
    for rule in ("floor", "rceil"):
        q = mx.quantize(x, scheme, axis=-1, block_size=32, scale_rule=rule)
        back = mx.dequantize(q, np.float64)
        err = np.abs(np.nan_to_num(back - x, nan=np.inf)).reshape(-1, 32)
        err = np.where((back == x).reshape(-1, 32) | (np.isnan(x) & np.isnan(back)).reshape(-1, 32), 0.0, err)
        err = err.max(axis=1)
        if best_err is None:
            best_codes, best_scales, best_back, best_err = q.codes.copy(), q.scales.copy(), back, err
            continue
        better = err < best_err
        assert best_codes is not None and best_scales is not None and best_back is not None
        bc = best_codes.reshape(-1, 32)
        bc[better] = q.codes.reshape(-1, 32)[better]
        bs = best_scales.reshape(-1)
        bs[better] = np.asarray(q.scales).reshape(-1)[better]
        bb = best_back.reshape(-1, 32)
        bb[better] = back.reshape(-1, 32)[better]
        best_err = np.minimum(best_err, err)
    assert best_codes is not None and best_scales is not None and best_back is not None
    if scheme == "mxfp4":
        c = best_codes.astype(np.uint8)
        weight = (c[:, 0::2] | (c[:, 1::2] << 4)).astype(np.uint8)
    else:
        weight = best_codes.astype(np.uint8).view(ml_dtypes.float8_e4m3fn)
    return {".weight": weight, ".weight_scale": np.asarray(best_scales, np.uint8).reshape(rows, k // 32)}, \
        best_back.reshape(rows, k), 32


def _to_fp8_block(x: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    rows, cols = x.shape
    nrb, ncb = -(-rows // 128), -(-cols // 128)
    xp = np.pad(x, ((0, nrb * 128 - rows), (0, ncb * 128 - cols)))
    tiles = xp.reshape(nrb, 128, ncb, 128)
    amax = np.max(np.abs(np.nan_to_num(tiles)), axis=(1, 3))
    k = mx.scale_codes(amax, "e4m3", "rceil").astype(np.int64) - 127
    k = np.where(amax > 0, k, 0)
    s = np.exp2(k.astype(np.float64))
    full = np.repeat(np.repeat(s, 128, axis=0), 128, axis=1)[:rows, :cols]
    codes = np.asarray(encode((x / full).astype(np.float64), "e4m3")).astype(np.uint8)
    back = np.asarray(decode(codes, "e4m3", np.float64)) * full
    return {".weight": codes.view(ml_dtypes.float8_e4m3fn), ".weight_scale_inv": s.astype(np.float32)}, back, 128


class _Loss:
    """Exact blocks, largest error and the worst block, accumulated over row chunks."""

    def __init__(self, name: str, out_name: str, per: int, tile: bool) -> None:
        self.t = TensorLoss(name, out_name, 0, 0, 0.0)
        self.per, self.tile = per, tile
        self.worst = -1.0

    def add(self, r0: int, x: np.ndarray, inexact: np.ndarray, back: np.ndarray) -> None:
        per = self.per
        same = ((x == back) | (np.isnan(x) & np.isnan(back))) & ~inexact
        err = np.where(same, 0.0, np.abs(np.nan_to_num(back - x, nan=np.inf)))
        if self.tile:
            rows, cols = x.shape
            nrb, ncb = -(-rows // per), -(-cols // per)
            pad = ((0, nrb * per - rows), (0, ncb * per - cols))
            ok = np.pad(same, pad, constant_values=True).reshape(nrb, per, ncb, per).all(axis=(1, 3)).reshape(-1)
            berr = np.pad(err, pad).reshape(nrb, per, ncb, per).max(axis=(1, 3)).reshape(-1)
        else:
            ok = same.reshape(-1, per).all(axis=1)
            berr = err.reshape(-1, per).max(axis=1)
        self.t.blocks += int(ok.size)
        self.t.exact += int(np.count_nonzero(ok))
        if ok.all():
            return
        b = int(np.argmax(np.where(ok, -1.0, berr)))
        if float(berr[b]) <= self.worst:
            return
        self.worst = float(berr[b])
        self.t.max_abs_error = max(self.t.max_abs_error, self.worst)
        if self.tile:
            ncb = -(-x.shape[1] // per)
            rr, cc = (b // ncb) * per, (b % ncb) * per
            bx, bb = x[rr:rr + per, cc:cc + per].reshape(-1), back[rr:rr + per, cc:cc + per].reshape(-1)
            where: dict[str, Any] = {"tile": [(r0 + rr) // per, b % ncb]}
        else:
            row, col = divmod(b * per, x.shape[1])
            bx, bb = x.reshape(-1, per)[b], back.reshape(-1, per)[b]
            where = {"row": r0 + row, "first column": col}
        with np.errstate(invalid="ignore"):
            gap = np.where(bx != bb, np.abs(bx.astype(np.float64) - bb.astype(np.float64)), -1.0)
        i = int(np.nanargmax(gap))  # the element with the largest error, the one the report names
        self.t.example = dict(where, element=i, source=float(bx[i]), target=float(bb[i]))


def _encode(to: str, x: np.ndarray, m_global: int) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    if to == "nvfp4":
        return _to_nvfp4(x, m_global)
    if to in ("mxfp4", "mxfp8"):
        return _to_mx(x, "mxfp4" if to == "mxfp4" else "mxfp8_e4m3")
    return _to_fp8_block(x)


def _step_rows(k: int) -> int:
    return max(128, (CHUNK_VALUES // max(k, 1)) // 128 * 128)  # whole 128-row tiles for block FP8


def recast(src: str | Path, out: str | Path, *, to: str, require_exact: bool = False, dry_run: bool = False,
           producer: str | None = None) -> RecastSummary:
    """Re-encode every quantized tensor of a source scheme in ``to``; see the module docstring."""
    check_path(src, "recast: src")
    check_path(out, "recast: out")
    check_paths(src, out)
    t0 = time.perf_counter()
    if to not in TARGETS:
        raise CheckpointError(f"--to must be one of fnuz, {', '.join(TARGETS)}; not {to!r}")
    source, headers, where, configs, det = _scan(src, producer)
    entries = {n: headers[where[n]].entries[n] for n in where}
    todo = {n: m for n, m in det.layers.items() if m.producer.scheme in TARGETS[to]}
    if not todo:
        have = ", ".join(sorted({m.producer.scheme for m in det.layers.values()})) or "none"
        raise CheckpointError(f"{source.path}: no {' or '.join(TARGETS[to])} tensor to convert to {to} "
                              f"(quantized schemes found: {have})")

    losses: list[TensorLoss] = []
    plans: dict[str, tuple[_Source, int, list[tuple[str, str, tuple[int, ...]]]]] = {}
    dropped: set[str] = set()
    for name, m in sorted(todo.items()):
        tj = layer_plan(m, entries, configs)
        if to == "fp8-block" and len(tj.out_shape) != 2:
            raise CheckpointError(f"{name}: {len(tj.out_shape)}-D; block FP8 (DeepSeek layout) is for 2-D weights")
        per_target = {"nvfp4": 16, "mxfp4": 32, "mxfp8": 32, "fp8-block": 1}[to]
        if tj.out_shape[-1] % per_target:
            raise CheckpointError(f"{name}: rows of {tj.out_shape[-1]} values do not split into {to} blocks of "
                                  f"{per_target}")
        srcq = _Source(m, tj, headers, where)
        step = _step_rows(srcq.k)
        m_global = 0
        if to == "nvfp4":  # one power-of-two global scale: the largest block exponent must fit 2^8
            top = np.iinfo(np.int64).min // 2
            for r0 in range(0, srcq.rows, step):
                x, _ = srcq.values(r0, min(srcq.rows, r0 + step))
                top = max(top, int(_nvfp4_exponents(x).max()))
            m_global = top - 8 if top > np.iinfo(np.int64).min // 4 else 0
        loss = _Loss(name, m.layer + ".weight", 128 if to == "fp8-block" else per_target, to == "fp8-block")
        for r0 in range(0, srcq.rows, step):
            r1 = min(srcq.rows, r0 + step)
            x, inexact = srcq.values(r0, r1)
            _, back, _ = _encode(to, x, m_global)
            loss.add(r0, x, inexact, back)
        losses.append(loss.t)
        lead, k = tuple(tj.out_shape[:-1]), tj.out_shape[-1]
        layouts: dict[str, list[tuple[str, str, tuple[int, ...]]]] = {
            "nvfp4": [(".weight", "U8", lead + (k // 2,)), (".weight_scale", "F8_E4M3", lead + (k // 16,)),
                      (".weight_scale_2", "F32", ())],
            "mxfp4": [(".weight", "U8", lead + (k // 2,)), (".weight_scale", "U8", lead + (k // 32,))],
            "mxfp8": [(".weight", "F8_E4M3", lead + (k,)), (".weight_scale", "U8", lead + (k // 32,))],
            "fp8-block": [(".weight", "F8_E4M3", (srcq.rows, k)),
                          (".weight_scale_inv", "F32", (-(-srcq.rows // 128), -(-k // 128)))]}
        layout = layouts[to]
        plans[name] = (srcq, m_global, [(m.layer + suffix, tag, shape) for suffix, tag, shape in layout])
        dropped |= {t for t in (m.codes, m.scale, m.global_scale, m.zero_point, m.shape_tensor) if t}
    new_names = {n for _, _, lay in plans.values() for n, _, _ in lay}
    clash = new_names & (set(where) - dropped)
    if clash:
        raise CheckpointError(f"output tensor {sorted(clash)[0]!r} already exists in the input")
    summary = RecastSummary(to, None, losses, False, 0.0)
    if dry_run or (require_exact and summary.lossy):
        if require_exact and summary.lossy:
            summary.notes.append(f"--require-exact: {summary.lossy} block(s) would lose information; nothing written")
        summary.seconds = time.perf_counter() - t0
        return summary
    out_p = check_output(source, out)
    out_dir = out_p if source.is_dir else out_p.parent
    make_output_dir(out_dir)
    new_where: dict[str, str] = {}
    sizes = {"U8": 1, "F8_E4M3": 1, "F32": 4}
    for shard in source.shards:
        h = read_header(shard)
        ents: list[Entry] = []
        order: list[Entry | str] = []
        pos = 0
        for e in h.ordered():
            if e.name in plans:
                for oname, tag, shape in plans[e.name][2]:
                    n = int(np.prod(shape, dtype=np.int64)) * sizes[tag]
                    ents.append(Entry(oname, tag, shape, pos, pos + n))
                    pos += n
                    new_where[oname] = shard.name
                order.append(e.name)
                continue
            if e.name in dropped:
                continue
            ents.append(Entry(e.name, e.dtype, e.shape, pos, pos + e.nbytes))
            order.append(e)
            pos += e.nbytes
            new_where[e.name] = shard.name
        meta = dict(h.metadata)
        meta[META_KEY] = json.dumps({"target": to, "fmtsim_version": __version__}, separators=(",", ":"))
        target = (out_p / shard.name) if source.is_dir else out_p
        with open(shard, "rb") as fh, ShardWriter(target) as w:
            w.write(header_bytes(ents, {}, meta))
            for item in order:
                if isinstance(item, Entry):
                    fh.seek(h.data_start + item.begin)
                    left = item.nbytes
                    while left:
                        piece = fh.read(min(left, 1 << 20))
                        if not piece:
                            raise CheckpointError(f"{h.path}: truncated data in tensor {item.name!r}")
                        w.write(piece)
                        left -= len(piece)
                    continue
                srcq, m_global, lay = plans[item]
                step = _step_rows(srcq.k)
                rest: dict[str, list[bytes]] = {}  # scale tensors follow the codes: kept until the codes are out
                for r0 in range(0, srcq.rows, step):
                    x, _ = srcq.values(r0, min(srcq.rows, r0 + step))
                    parts, _, _ = _encode(to, x, m_global)
                    first = True
                    for (oname, _, _), (_, arr) in zip(lay, parts.items(), strict=True):
                        if first:
                            w.write(np.ascontiguousarray(arr).tobytes())
                            first = False
                        elif arr.ndim:
                            rest.setdefault(oname, []).append(np.ascontiguousarray(arr).tobytes())
                        else:
                            rest[oname] = [np.ascontiguousarray(arr).tobytes()]
                for oname, _, _ in lay[1:]:
                    for piece in rest.get(oname, []):
                        w.write(piece)
            tmp = w.finish()
            crosscheck(read_header(tmp))
            w.commit()
    if source.is_dir:
        rewrite: dict[str, bytes] = {}
        if source.index is not None:
            index = {"metadata": {META_KEY: {"target": to}}, "weight_map": dict(sorted(new_where.items()))}
            rewrite[INDEX_NAME] = (json.dumps(index, indent=2) + "\n").encode()
        cfg_path = source.path / "config.json"
        if cfg_path.is_file():
            cfg = json.loads(cfg_path.read_text())
            if isinstance(cfg, dict):
                qc = cfg.pop("quantization_config", None)
                cfg[META_KEY] = {"target": to, "was": qc, "layout": {"nvfp4": "modelopt-nvfp4",
                                                                     "mxfp4": "quark-mxfp4",
                                                                     "fp8-block": "deepseek-fp8-block",
                                                                     "mxfp8": "modelopt-mxfp8"}[to]}
                if to == "fp8-block":
                    cfg["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
                rewrite["config.json"] = (json.dumps(cfg, indent=2) + "\n").encode()
        skip = {s.name for s in source.shards} | {"hf_quant_config.json"}
        summary.notes += copy_side_files(source, out_p, skip, rewrite)
        if to == "nvfp4":
            try:
                atomic_write(out_p / "hf_quant_config.json", json.dumps(
                    {"producer": {"name": "fmtsim", "version": __version__},
                     "quantization": {"quant_algo": "NVFP4", "group_size": 16}}, indent=2) + "\n")
            except UnsafeOutputError as e:
                raise CheckpointError(str(e)) from None
    summary.output, summary.written = out_p, True
    summary.seconds = time.perf_counter() - t0
    return summary
