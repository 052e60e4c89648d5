"""GEMM on a matrix unit: ``matmul`` chains the unit's fused steps along K (the fp32
result of one step is the next step's C), with an optional promotion interval and an
explicit split-K, over operand codes or MXTensor / NVFP4Tensor objects.

Conventions (numpy's): a is (M, K), b is (K, N), scales are per block along K:
a_scales (M, K / block_size), b_scales (K / block_size, N). K is padded with zero
codes (and scale 1.0) up to a multiple of the unit's K, as a kernel's zero-filled tile
is. The result is float32 (M, N); a NaN result is the canonical 0x7FFFFFFF. The fp64
fma units (fp64 mma, fp64 MFMA) take an fp64 C and return float64, NaN as
0x7FFFFFFFFFFFFFFF.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from ..argcheck import optional_integer
from ..arrays import as_numpy
from ..executor import check_scheduler
from ..formats import get_format
from .arith import IEEE_FORMATS, NAN, ZERO_EXP, canonical_operand_format, operand_table
from .compiled import (
    SIG_LIMIT,
    check_engine,
    fma_chain,
    grouped_chain,
    grouped_fit,
    narrow_terms,
    operands_fit,
    uses_compiled,
)
from .compiled import chain as compiled_chain
from .step import Side, amd_step, ftz_step, grouped_step, nv_step
from .units import UNITS, Unit, get_unit

__all__ = ["matmul", "prepare", "Prepared", "memory_bytes", "too_large", "check_names", "operand_format", "K_ORDERS",
           "ADD_C", "ORDER_EXPLANATIONS", "check_order"]

_ONE = {"e8m0": 127, "ue4m3": 0x38}
_CHUNK = 1 << 21  # products per vectorised slab (rows * N * L)
K_ORDERS = ("forward", "reverse")  # the order a kernel walks K's steps in
ADD_C = ("in_chain", "epilogue")  # where C joins: as the first step's accumulator, or after the chain
# How a kernel may order a GEMM differently from the instruction chain of its unit, as `fmtsim mma
# matmul` options and matmul keywords: what `fmtsim ver` (a unit_gemm file) and `fmtsim probe infer`
# try, in this order, when a device's D is not the unit's
ORDER_EXPLANATIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--k-order reverse", {"k_order": "reverse"}),
    ("--add-c epilogue", {"add_c": "epilogue"}),
    ("--k-order reverse --add-c epilogue", {"k_order": "reverse", "add_c": "epilogue"}),
    ("--split-k 2", {"split_k": 2}),
    ("--add-c epilogue --split-k 2", {"add_c": "epilogue", "split_k": 2}),
)


def _steps_reversed(a: np.ndarray, b: np.ndarray, a_scales: np.ndarray | None, b_scales: np.ndarray | None,
                    step: int, block_size: int | None) -> tuple[np.ndarray, np.ndarray, Any, Any]:
    """The operands (K padded to whole steps) with K's steps in reverse order, each step's columns
    (and its scale blocks) in their own order: a kernel that walks K from the end."""
    kp = a.shape[1]
    order = (np.arange(kp).reshape(kp // step, step)[::-1]).reshape(-1)
    a, b = a[:, order], b[order, :]
    if a_scales is not None and b_scales is not None and block_size:
        nb, per = kp // block_size, step // block_size
        blocks = (np.arange(nb).reshape(nb // per, per)[::-1]).reshape(-1)
        a_scales, b_scales = a_scales[:, blocks], b_scales[blocks, :]
    return a, b, a_scales, b_scales


def check_order(k_order: Any, add_c: Any, unit: Unit, who: str = "matmul") -> None:
    """k_order one of K_ORDERS and add_c one of ADD_C; an epilogue C needs an fp32 or fp64 D."""
    for name, value, choices in (("k_order", k_order, K_ORDERS), ("add_c", add_c, ADD_C)):
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"{who}: {name} must be one of {', '.join(choices)}; got {value!r}")
    if add_c == "epilogue" and unit.output not in ("rz_fp32", "rne_fp32", "rne_fp64", "rz_e8m13"):
        raise ValueError(f"{who}: add_c='epilogue' adds C to an fp32 (or fp64) D; unit {unit.name} writes "
                         f"{unit.output}, whose epilogue's precision fmtsim does not model")


class Prepared:
    """Operands checked, padded and split once; chain() runs any range of K."""

    def __init__(self, unit: Unit, a: np.ndarray, b: np.ndarray, a_format: str, b_format: str,
                 a_scales: np.ndarray | None, b_scales: np.ndarray | None, scale_format: str | None,
                 block_size: int | None, *, engine: str = "auto", k_order: str = "forward") -> None:
        self.unit = unit
        self.engine = engine
        # the split operands of the compiled engine, made on first use: the nv/amd steps', the
        # nv_grouped one's (probe inference runs one Prepared under units of both families)
        self._compiled_operands: tuple[Any, ...] | None = None
        self._grouped_ops: tuple[Any, ...] | None = None
        self.a_format, self.b_format = a_format, b_format
        self.scale_format, self.block_size = scale_format, block_size
        m, k = a.shape
        n = b.shape[1]
        step = unit.k or k or 1
        if block_size:
            step = int(np.lcm(step, block_size))
        kp = -(-k // step) * step if k else step
        if kp != k:
            a = np.concatenate([a, np.zeros((m, kp - k), a.dtype)], axis=1)
            b = np.concatenate([b, np.zeros((kp - k, n), b.dtype)], axis=0)
            if a_scales is not None and b_scales is not None and block_size and scale_format:
                extra = kp // block_size - a_scales.shape[1]
                one = _ONE[scale_format]
                a_scales = np.concatenate([a_scales, np.full((m, extra), one, a_scales.dtype)], axis=1)
                b_scales = np.concatenate([b_scales, np.full((extra, n), one, b_scales.dtype)], axis=0)
        if k_order == "reverse" and kp > step:
            a, b, a_scales, b_scales = _steps_reversed(a, b, a_scales, b_scales, step, block_size)
        self.m, self.n, self.k, self.k_padded = m, n, k, kp
        if unit.family == "fma":  # fp32 / fp64 patterns: the values themselves, B kept (K, N)
            self.av, self.bv = _ieee_values(a, a_format), _ieee_values(b, b_format)
            self.sa = self.sb = None
            return
        self.a = _side(a, a_format)
        self.b = _side(b.T, b_format)
        self.sa = self.sb = None
        if a_scales is not None and b_scales is not None and scale_format is not None:
            self.sa = _side(a_scales, scale_format, scale=True)
            self.sb = _side(np.ascontiguousarray(b_scales.T), scale_format, scale=True)

    def step_k(self) -> int:
        return self.unit.k or self.k_padded

    def chain(self, c: np.ndarray, k0: int, k1: int) -> np.ndarray:
        """C through the unit's steps over K columns k0 .. k1 (multiples of the step)."""
        u = self.unit
        L = u.k
        if u.family == "fma":  # one exactly rounded FMA per column of K, in order
            from .fma import fma

            out = np.asarray(c, dtype=u.out_dtype)
            if self.m and self.n and uses_compiled(u, self.engine):
                return fma_chain(self.av, self.bv, out, k0, k1)
            for kk in range(k0, k1):
                out = fma(self.av[:, kk, None], self.bv[None, kk, :], out)
            return out
        if u.family == "exact":
            from .exact import exact_range
            if not L:
                return exact_range(self, c, k0, k1)
            out = np.asarray(c, dtype=np.float32)
            for s in range(k0, k1, L):  # CDNA1: one exact rounding per step of L products
                out = exact_range(self, out, s, s + L)
            return out
        out = np.asarray(c, dtype=np.float32)
        if self.m and self.n and uses_compiled(u, self.engine):
            if u.family == "nv_grouped":
                grouped = self._grouped_operands()
                if grouped is not None:
                    return self._grouped_chain(grouped, out, k0, k1)
            else:
                operands = self._compiled()
                if operands is not None:
                    return self._compiled_chain(operands, out, k0, k1)
        return self._numpy_chain(out, k0, k1)

    def _numpy_chain(self, out: np.ndarray, k0: int, k1: int) -> np.ndarray:
        u, L = self.unit, self.unit.k
        for s in range(k0, k1, L):
            # the given C is in the instruction's C format; a chained C is the previous output
            out = self._step(out, s, s + L, u.c_emin if s == k0 else u.out_emin)
        return out

    def _compiled(self) -> tuple[Any, ...] | None:
        """A and B for the compiled engine, split once (block scales folded in over all of K):
        (a_sig, a_exp, a_special, b_sig, b_exp, b_special, (man_a, man_b, top_a, top_b)), the
        tops being the largest significand magnitudes. None when the C++ arithmetic would not
        hold them exactly for this unit (:func:`operands_fit`; the numpy step runs). The split
        does not depend on the unit, the fit does: probe inference runs one Prepared under
        many candidate units."""
        if self._compiled_operands is None:
            a, b = self.a.slice_k(0, self.k_padded), self.b.slice_k(0, self.k_padded)
            if self.sa is not None:
                a, b = self._fold_scales(a, b, 0, self.k_padded, 0, self.m)
            sig_a, sig_b = a.sgn * a.mag, b.sgn * b.mag
            tops = (int(np.abs(sig_a).max(initial=0)), int(np.abs(sig_b).max(initial=0)))
            if max(tops) >= SIG_LIMIT:  # no unit's C++ arithmetic holds such significands
                self._compiled_operands = ()
            else:
                def i32(x: np.ndarray) -> np.ndarray:
                    return np.ascontiguousarray(x, np.int32)

                self._compiled_operands = (i32(sig_a), i32(a.exp), a.cls != 0, i32(sig_b.T), i32(b.exp.T),
                                           b.cls != 0, (a.man, b.man, *tops))
        ops = self._compiled_operands
        return ops if ops and operands_fit(self.unit, *self._fields(ops)) else None

    @staticmethod
    def _fields(ops: tuple[Any, ...]) -> tuple[int, int, int, int]:
        """(top_a, top_b, man_a, man_b) of the compiled operands, as operands_fit takes them."""
        man_a, man_b, top_a, top_b = ops[6]
        return top_a, top_b, man_a, man_b

    def _compiled_chain(self, operands: tuple[Any, ...], c: np.ndarray, k0: int, k1: int) -> np.ndarray:
        """The chain in C++; outputs it leaves (NaN / Inf operands, a non-finite C, an
        overflow) recomputed by the numpy step on the rows and columns that hold them."""
        a_sig, a_exp, a_sp, b_sig, b_exp, b_sp, (man_a, man_b, _, _) = operands
        u = self.unit
        narrow = narrow_terms(u, *self._fields(operands))
        row_bad, col_bad = np.asarray(a_sp[:, k0:k1].any(1)), np.asarray(b_sp[:, k0:k1].any(1))
        out, bail = compiled_chain(u, a_sig, a_exp, b_sig, b_exp, man_a, man_b, narrow, row_bad, col_bad, c, k0, k1,
                                   u.c_emin)
        return self._hand_back(out, bail, c, k0, k1)

    def _grouped_operands(self) -> tuple[Any, ...] | None:
        """The nv_grouped units' operands for the compiled engine, made once: (a_val, b_val,
        sa_mag, sa_exp, sb_mag, sb_exp, a_special, b_special, sa_special, sb_special, tops,
        fraction bits): element values in units of their format's smallest step (as the numpy
        step sums them), B and its scales K-major. None when the C++ arithmetic would not hold
        them exactly for this unit (:func:`grouped_fit`)."""
        assert self.sa is not None and self.sb is not None
        if self._grouped_ops is None:
            def values(side: _Split) -> np.ndarray:
                v = side.sgn * (side.mag.astype(np.int64) << np.clip(side.exp - side.emin, 0, 31))
                return np.where(side.mag == 0, 0, v)

            av, bv = values(self.a), values(self.b)
            tops = tuple(int(np.abs(x).max(initial=0)) for x in (av, bv, self.sa.mag, self.sb.mag))
            if max(tops) >= SIG_LIMIT:
                self._grouped_ops = ()
            else:
                def i32(x: np.ndarray) -> np.ndarray:
                    return np.ascontiguousarray(x, np.int32)

                frac = (self.a.man - self.a.emin) + (self.b.man - self.b.emin) + self.sa.man + self.sb.man
                self._grouped_ops = (i32(av), i32(bv.T), i32(self.sa.mag), i32(self.sa.exp), i32(self.sb.mag.T),
                                     i32(self.sb.exp.T), self.a.cls != 0, self.b.cls != 0, self.sa.cls != 0,
                                     self.sb.cls != 0, tops, frac)
        ops = self._grouped_ops
        if not ops:
            return None
        top_a, top_b, top_sa, top_sb = ops[10]
        return ops if grouped_fit(self.unit, top_a, top_b, top_sa, top_sb, self.unit.fraction_bits - ops[11]) else None

    def _grouped_chain(self, operands: tuple[Any, ...], c: np.ndarray, k0: int, k1: int) -> np.ndarray:
        """The nv_grouped chain in C++, its bail-outs (NaN / Inf elements or NaN scales among the
        row's or column's K, a non-finite C, an overflow) recomputed by the numpy step."""
        av, bv, sam, sae, sbm, sbe, a_sp, b_sp, sa_sp, sb_sp, _, frac = operands
        u, block = self.unit, self.block_size
        assert block
        b0, b1 = k0 // block, k1 // block
        row_bad = np.asarray(a_sp[:, k0:k1].any(1) | sa_sp[:, b0:b1].any(1))
        col_bad = np.asarray(b_sp[:, k0:k1].any(1) | sb_sp[:, b0:b1].any(1))
        out, bail = grouped_chain(u, av, bv, sam, sae, sbm, sbe, block, u.fraction_bits - frac, row_bad, col_bad, c,
                                  k0, k1)
        return self._hand_back(out, bail, c, k0, k1)

    def _hand_back(self, out: np.ndarray, bail: np.ndarray, c: np.ndarray, k0: int, k1: int) -> np.ndarray:
        """The outputs the C++ code left, recomputed by the numpy step on their rows and columns."""
        if bail.any():
            rows, cols = np.flatnonzero(bail.any(1)), np.flatnonzero(bail.any(0))
            ix = np.ix_(rows, cols)
            sub = self._subset(rows, cols)._numpy_chain(np.ascontiguousarray(c[ix], np.float32), k0, k1)
            out[ix] = np.where(bail[ix], sub, out[ix])
        return out

    def _subset(self, rows: np.ndarray, cols: np.ndarray) -> Prepared:
        """The same problem on some rows of A and columns of B (split operands taken, not redone)."""
        p = copy.copy(self)
        p.a, p.b = self.a.take(rows), self.b.take(cols)
        if self.sa is not None and self.sb is not None:
            p.sa, p.sb = self.sa.take(rows), self.sb.take(cols)
        p.m, p.n = len(rows), len(cols)
        p._compiled_operands = p._grouped_ops = None
        return p

    def _step(self, c: np.ndarray, k0: int, k1: int, c_emin: int = -126) -> np.ndarray:
        u = self.unit
        L = k1 - k0
        if self.m == 0:
            return c  # no rows: nothing to fuse (the loop below would make no part)
        rows = self.m if u.family == "nv" else max(1, _CHUNK // max(1, self.n * L))  # nv_step slabs itself
        parts = []
        bs = self.b.slice_k(k0, k1)
        for r0 in range(0, self.m, rows):
            r1 = min(self.m, r0 + rows)
            as_ = self.a.slice_k(k0, k1, r0, r1)
            cc = c[r0:r1]
            if u.family == "nv":
                if self.sa is not None:
                    as_, bs2 = self._fold_scales(as_, bs, k0, k1, r0, r1)
                else:
                    bs2 = bs
                parts.append(nv_step(u, as_, bs2, cc, c_emin))
            elif u.family == "nv_grouped":
                assert self.sa is not None and self.sb is not None and self.block_size
                b0, b1 = k0 // self.block_size, k1 // self.block_size
                sa = self.sa.slice_k(b0, b1, r0, r1)
                sb = self.sb.slice_k(b0, b1)
                as_, bs2 = _nan_blocks(as_, sa, self.block_size), _nan_blocks(bs, sb, self.block_size)
                parts.append(grouped_step(u, as_, bs2, cc, sa, sb, self.block_size // u.group))
            elif u.family == "ftz":
                parts.append(ftz_step(u, as_, bs, cc))
            else:
                parts.append(amd_step(u, as_, bs, cc))
        return np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]

    def _fold_scales(self, a: Side, b: Side, k0: int, k1: int, r0: int, r1: int) -> tuple[Side, Side]:
        """Block-scaled nv units: each product times its scale product before alignment."""
        assert self.sa is not None and self.sb is not None and self.block_size
        bsz = self.block_size
        idx = np.arange(k0, k1) // bsz
        out = []
        for side, sc in ((a, self.sa.rows(r0, r1)), (b, self.sb.rows(0, None))):
            smag, sexp, scls = sc.mag[:, idx], sc.exp[:, idx], sc.cls[:, idx]
            mag = side.mag * smag
            exp = np.where(mag == 0, ZERO_EXP, side.exp + np.where(smag == 0, 0, sexp)).astype(np.int32)
            cls = np.where(scls == NAN, NAN, side.cls).astype(np.int8)
            out.append(Side(side.sgn, mag, exp, cls, side.man + sc.man, side.emin))
        return out[0], out[1]


class _Split:
    """Codes of one operand split once: (rows, K) arrays."""

    def __init__(self, codes: np.ndarray, fmt: str) -> None:
        t = operand_table(fmt)
        idx = codes.astype(np.intp)
        self.sgn = t.sign[idx].astype(np.int32)
        self.mag = t.sig[idx]
        self.exp = np.where(self.mag == 0, ZERO_EXP, t.exp[idx]).astype(np.int32)
        self.cls = t.cls[idx]
        self.man, self.emin = t.man_bits, t.emin

    def slice_k(self, k0: int, k1: int, r0: int = 0, r1: int | None = None) -> Side:
        return Side(self.sgn[r0:r1, k0:k1], self.mag[r0:r1, k0:k1], self.exp[r0:r1, k0:k1],
                    self.cls[r0:r1, k0:k1], self.man, self.emin)

    def take(self, idx: np.ndarray) -> _Split:
        """These rows (of A; columns of B, which is held transposed)."""
        def same_layout(x: np.ndarray) -> np.ndarray:
            # B's split is column-major, and the numpy step runs twice as fast on it: keep that
            y = x[idx]
            return np.asfortranarray(y) if x.flags.f_contiguous and not x.flags.c_contiguous else y

        t = copy.copy(self)
        t.sgn, t.mag, t.exp, t.cls = same_layout(self.sgn), same_layout(self.mag), same_layout(self.exp), \
            same_layout(self.cls)
        return t

    def rows(self, r0: int, r1: int | None) -> Side:
        return Side(self.sgn[r0:r1], self.mag[r0:r1], self.exp[r0:r1], self.cls[r0:r1], self.man, self.emin)


def _side(codes: np.ndarray, fmt: str, scale: bool = False) -> _Split:
    if scale and canonical_operand_format(fmt) == "ue4m3":
        codes = codes & 0x7F  # the hardware ignores bit 7 of a UE4M3 scale byte
    return _Split(codes, fmt)


def _ieee_values(codes: np.ndarray, fmt: str) -> np.ndarray:
    """fp32 / fp64 bit patterns (already range-checked) as float32 / float64 values."""
    udt, fdt = IEEE_FORMATS[fmt]
    return np.ascontiguousarray(codes.astype(udt)).view(fdt)


def _nan_blocks(side: Side, scales: Side, block: int) -> Side:
    """Elements of a block whose scale is NaN become NaN (the products are NaN)."""
    if not (scales.cls == NAN).any():
        return side
    idx = np.arange(side.mag.shape[1]) // block
    cls = np.where(scales.cls[:, idx] == NAN, NAN, side.cls).astype(np.int8)
    return Side(side.sgn, side.mag, side.exp, cls, side.man, side.emin)


def _codes(x: Any, what: str) -> np.ndarray:
    arr = as_numpy(x, f"matmul: {what}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"matmul: {what} must hold integer codes, not {arr.dtype} (view FP8 arrays as uint8, "
                        "fp32 / fp64 arrays as uint32 / uint64)")
    if arr.ndim != 2:
        raise ValueError(f"matmul: {what} must be 2-D, got shape {arr.shape}")
    return arr


def _check_range(codes: np.ndarray, fmt: str, what: str) -> None:
    if fmt in IEEE_FORMATS:  # fp32 / fp64 patterns: any 32 / 64-bit unsigned code
        bits = IEEE_FORMATS[fmt][0].itemsize * 8
        if not codes.size:
            return
        bad_mask = codes < 0 if codes.dtype.kind == "i" else np.zeros(codes.shape, bool)
        if bits == 32 and codes.dtype.itemsize > 4:
            bad_mask |= codes > 0xFFFFFFFF
        if bad_mask.any():
            bad = np.argwhere(bad_mask)[0]
            raise ValueError(f"matmul: {what}[{bad[0]}, {bad[1]}] = {int(codes[tuple(bad)])} is not a {fmt} bit "
                             f"pattern (0..{(1 << bits) - 1:#x})")
        return
    n = operand_table(fmt).n_codes
    if codes.size and (codes.min() < 0 or codes.max() >= n):
        bad = np.argwhere((codes < 0) | (codes >= n))[0]
        raise ValueError(f"matmul: {what}[{bad[0]}, {bad[1]}] = {int(codes[tuple(bad)])} is not a {fmt} code "
                         f"(0..{n - 1:#x})")


def _from_tensor(q: Any, which: str) -> tuple[np.ndarray, np.ndarray, str, str, int, float]:
    """(codes as (M, K) for a / (K, N) for b, scales likewise, element format, scale format,
    block size, global scale) of an MXTensor or NVFP4Tensor."""
    from ..mx import MXTensor
    from ..nvfp4 import NVFP4Tensor

    if isinstance(q, MXTensor):
        codes, scales = np.asarray(q.codes), np.asarray(q.scales)
        if codes.ndim != 2:
            raise ValueError(f"matmul: {which} MXTensor must be 2-D, got shape {codes.shape}")
        if q.length != codes.shape[q.axis]:
            raise ValueError(f"matmul: {which} MXTensor was padded along its block axis; slice it first")
        axis = q.axis % 2
        fmt, sfmt, bs, g = q.element_format.name, "e8m0", q.block_size, 1.0
    elif isinstance(q, NVFP4Tensor):
        codes, scales = np.asarray(q.codes), np.asarray(q.scales)
        if codes.ndim != 2:
            raise ValueError(f"matmul: {which} NVFP4Tensor must be 2-D, got shape {codes.shape}")
        axis, fmt, sfmt, bs, g = 1, "e2m1", "ue4m3", 16, float(q.global_scale)
    else:
        raise TypeError(f"matmul: {which} must be codes with a_format/b_format, an MXTensor or an NVFP4Tensor")
    # blocks run along K: a is (M, K) with blocks along axis 1, b is (K, N) with blocks along axis 0
    want = 1 if which == "a" else 0
    if axis != want:
        codes, scales = codes.T, scales.T
    return codes, scales, fmt, sfmt, bs, g


def memory_bytes() -> int | None:
    """This machine's physical memory in bytes, or None where the system does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows), or no such name
        return None


def _size(n: int) -> str:
    for unit, scale in (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def too_large(shape: tuple[int, ...], dtype: Any, what: str) -> str | None:
    """Why an array ``what`` of ``shape`` and ``dtype`` cannot be held here (more bytes than the
    machine's memory), or None. Python ints: 2^32 x 2^32 does not wrap to 0 as an int64 does."""
    need = math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize
    have = memory_bytes()
    if have is None or need <= have:
        return None
    return (f"{what} would be {' x '.join(map(str, shape))} {np.dtype(dtype)} ({_size(need)}), more than this "
            f"machine's memory ({_size(have)})")


def _to_f32(c: Any, m: int, n: int, dtype: Any = np.float32) -> np.ndarray:
    """C as the unit's accumulator dtype (float32, or float64 for the fp64 units), refused
    where a value would change (never narrowed silently)."""
    dt = np.dtype(dtype)
    what = "fp64" if dt == np.float64 else "fp32"
    if c is None:
        why = too_large((m, n), dt, "D")
        if why is not None:  # numpy's MemoryError would say it only after trying
            raise ValueError(f"matmul: {why}")
        return np.zeros((m, n), dt)
    arr = as_numpy(c, "matmul: c")
    if arr.shape != (m, n):
        raise ValueError(f"matmul: c must have shape {(m, n)}, got {arr.shape}")
    if arr.dtype.kind != "f" and arr.dtype != np.dtype(ml_dtypes.bfloat16):
        raise TypeError(f"matmul: c must be a float array ({what} values), not {arr.dtype}")
    out = arr.astype(dt)
    with np.errstate(invalid="ignore"):  # compared in C's own dtype (a long double too)
        bad = (out.astype(arr.dtype) != arr) & ~np.isnan(arr.astype(np.float64))
    if bad.any():
        i = np.argwhere(bad)[0]
        raise ValueError(f"matmul: c[{i[0]}, {i[1]}] = {arr[tuple(i)]!r} is not an {what} value")
    return out


def prepare(a: Any, b: Any, *, unit: str | Unit, a_format: str | None = None, b_format: str | None = None,
            a_scales: Any = None, b_scales: Any = None, scale_format: str | None = None,
            block_size: int | None = None) -> tuple[Prepared, float]:
    """Check and split the operands of :func:`matmul`; returns (Prepared, epilogue alpha)."""
    checked, alpha = _checked(a, b, unit=unit, a_format=a_format, b_format=b_format, a_scales=a_scales,
                              b_scales=b_scales, scale_format=scale_format, block_size=block_size)
    return Prepared(*checked), alpha


def check_names(a_format: Any, b_format: Any, scale_format: Any, block_size: Any, who: str = "matmul") -> int | None:
    """The format arguments are None or names (str) and block_size None or a positive integer
    (a numpy integer too; a bool or a float such as 32.0 is refused, as numpy's lcm refused it
    with its own message): TypeError / ValueError naming the argument; block_size as an int."""
    for name, value in (("a_format", a_format), ("b_format", b_format), ("scale_format", scale_format)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{who}: {name} must be a format name such as 'e4m3', not {type(value).__name__} "
                            f"({value!r:.40})")
    return optional_integer(block_size, f"{who}: block_size", low=1)


def operand_format(name: str, which: str, who: str = "matmul") -> str:
    """An operand format name made canonical; an unknown one is a ValueError naming ``which``."""
    try:
        return canonical_operand_format(name)
    except ValueError as e:
        raise ValueError(f"{who}: {which}: {e}") from None


def _checked(a: Any, b: Any, *, unit: str | Unit, a_format: str | None, b_format: str | None,
             a_scales: Any, b_scales: Any, scale_format: str | None, block_size: int | None
             ) -> tuple[tuple[Any, ...], float]:
    """The operands of :func:`matmul` checked (codes, formats, scales), not yet split:
    (Prepared's arguments, epilogue alpha)."""
    u = get_unit(unit)
    block_size = check_names(a_format, b_format, scale_format, block_size)
    alpha = 1.0
    a_operand = a  # named in errors after a becomes its codes
    for which, q, given in (("a", a, (a_format, a_scales)), ("b", b, (b_format, b_scales))):
        if not isinstance(q, np.ndarray) and hasattr(q, "codes") and any(x is not None for x in given):
            raise ValueError(f"matmul: {which} is a {type(q).__name__}, which carries its own format and scales; "
                             f"{which}_format and {which}_scales are for code arrays only")
    if not isinstance(a, np.ndarray) and hasattr(a, "codes"):
        a, a_scales, a_format, sf, bs, ga = _from_tensor(a, "a")
        # the caller's scale_format/block_size must be the tensor's own (they were dropped silently)
        for name, asked, own in (("scale_format", scale_format, sf), ("block_size", block_size, bs)):
            if asked is not None and asked != own:
                raise ValueError(f"matmul: a is a {type(a_operand).__name__} with {name} {own!r}; {name}={asked!r} "
                                 "contradicts it (leave it out: the tensor carries it)")
        scale_format, block_size = sf, bs
        alpha *= ga
    if not isinstance(b, np.ndarray) and hasattr(b, "codes"):
        b, b_scales, b_format, sf, bs, gb = _from_tensor(b, "b")
        if scale_format is not None and sf != scale_format or block_size is not None and bs != block_size:
            raise ValueError(f"matmul: a and b carry different block scales ({scale_format} x{block_size} "
                             f"vs {sf} x{bs})")
        scale_format, block_size = sf, bs
        alpha *= gb
    if a_format is None or b_format is None:
        raise TypeError("matmul: codes need a_format and b_format")
    a_format, b_format = operand_format(a_format, "a_format"), operand_format(b_format, "b_format")
    A, B = _codes(a, "a"), _codes(b, "b")
    A, a_format = tf32_codes(A, a_format, u, "a")
    B, b_format = tf32_codes(B, b_format, u, "b")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"matmul: a is {A.shape} and b is {B.shape}; a's columns must equal b's rows (K)")
    for fmt, which in ((a_format, "a_format"), (b_format, "b_format")):
        if not u.takes(fmt):
            raise ValueError(f"matmul: unit {u.name} does not take {which}={fmt}; it takes {', '.join(u.formats)}")
    _check_range(A, a_format, "a")
    _check_range(B, b_format, "b")
    u.check_operands(a_format, b_format, scale_format if a_scales is not None else None)
    have = [x is not None for x in (a_scales, b_scales)]
    if any(have) and not all(have):
        raise ValueError("matmul: give both a_scales and b_scales, or neither")
    SA = SB = None
    if all(have):
        if not u.scaled:
            raise ValueError(f"matmul: unit {u.name} takes no block scales (scaled units: "
                             f"{', '.join(n for n, x in UNITS.items() if x.scaled)})")
        if scale_format is None or block_size is None:
            raise ValueError("matmul: block scales need scale_format and block_size")
        try:
            scale_format = get_format(scale_format).name
        except ValueError as e:
            raise ValueError(f"matmul: scale_format: {e}") from None
        if scale_format not in u.scale_formats:
            raise ValueError(f"matmul: unit {u.name} takes scale_format {' or '.join(u.scale_formats)}, "
                             f"not {scale_format}")
        if block_size not in u.block_sizes:
            raise ValueError(f"matmul: unit {u.name} takes block_size {' or '.join(map(str, u.block_sizes))}, "
                             f"not {block_size}")
        if u.family == "nv_grouped" and scale_format == "ue4m3" and block_size != 16:
            raise ValueError(f"matmul: {u.name} takes UE4M3 scales with block_size 16 only")
        SA, SB = _codes(a_scales, "a_scales"), _codes(b_scales, "b_scales")
        nb = -(-A.shape[1] // block_size)
        if SA.shape != (A.shape[0], nb) or SB.shape != (nb, B.shape[1]):
            raise ValueError(f"matmul: with K={A.shape[1]} and block_size {block_size}, a_scales must be "
                             f"{(A.shape[0], nb)} and b_scales {(nb, B.shape[1])}; got {SA.shape} and {SB.shape}")
        if scale_format == "ue4m3":
            SA, SB = SA & 0x7F, SB & 0x7F
        _check_range(SA, scale_format, "a_scales")
        _check_range(SB, scale_format, "b_scales")
        if A.shape[1] % block_size:
            raise ValueError(f"matmul: K={A.shape[1]} is not a multiple of block_size {block_size}")
    elif u.scaled and u.family != "exact":
        raise ValueError(f"matmul: unit {u.name} is block-scaled: give a_scales, b_scales, scale_format and "
                         "block_size (or MXTensor / NVFP4Tensor operands)")
    return (u, A, B, a_format, b_format, SA, SB, scale_format if SA is not None else None,
            block_size if SA is not None else None), alpha


def tf32_codes(codes: np.ndarray, fmt: str, u: Unit, what: str) -> tuple[np.ndarray, str]:
    """fp32 bit patterns given to a tf32 unit: the 13 low bits dropped (tf32 codes, as the
    hardware truncates fp32 operands; MMA-Sim's truncate_fp32_to_tf32)."""
    if fmt != "fp32" or u.family == "fma":
        return codes, fmt
    if not u.tf32_inputs:
        raise ValueError(f"matmul: unit {u.name} does not take {what}_format=fp32; it takes {', '.join(u.formats)}")
    if codes.size and (codes.min() < 0 or codes.max() >= 1 << 32):
        raise ValueError(f"matmul: {what} holds values outside 0..0xffffffff (fp32 bit patterns)")
    return (codes.astype(np.int64) >> 13), "tf32"


def _check_fp16(c: np.ndarray) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        bad = (c.astype(np.float16).astype(np.float32) != c) & ~np.isnan(c)
    if bad.any():
        i = np.argwhere(bad)[0]
        raise ValueError(f"matmul: c[{i[0]}, {i[1]}] = {c[tuple(i)]!r} is not an fp16 value (this unit's C is fp16)")


def _f32_add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """One RNE addition in the accumulator's format (x's: float32, or float64 for fp64 units)."""
    dt = np.float64 if x.dtype == np.float64 else np.float32
    with np.errstate(over="ignore", invalid="ignore"):
        return (x.astype(dt) + y.astype(dt)).astype(dt)


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def check_like_matmul(a: Any, b: Any, c: Any, *, unit: str | Unit, a_format: str | None, b_format: str | None,
                      a_scales: Any, b_scales: Any, scale_format: str | None, block_size: int | None,
                      promote_every: int | None, split_k: int | Sequence[int] | None, who: str) -> None:
    """matmul's checks of code operands, scales, C and chaining, the errors named for ``who`` (the
    Fraction twin takes exactly what matmul takes: it ignored scales without scale_format, narrowed
    C, and summed split_k=[-1] to 65 ones of 64)."""
    try:
        checked, _ = _checked(a, b, unit=unit, a_format=a_format, b_format=b_format, a_scales=a_scales,
                              b_scales=b_scales, scale_format=scale_format, block_size=block_size)
        _chaining(Prepared(*checked), promote_every, split_k)
        if c is not None:
            _to_f32(c, np.shape(a)[0], np.shape(b)[1], get_unit(unit).out_dtype)
    except (TypeError, ValueError) as e:
        msg = str(e).replace(" (or MXTensor / NVFP4Tensor operands)", "")  # the twin takes codes only
        raise type(e)(who + msg[len("matmul"):] if msg.startswith("matmul:") else msg) from None


def check_chaining(promote_every: Any, split_k: Any, who: str = "matmul") -> None:
    """TypeError unless promote_every is None or an integer and split_k None, an integer or a
    sequence of integers (32.5 is not a K boundary; 2.0 is not a slice count)."""
    if promote_every is not None and not _is_int(promote_every):
        raise TypeError(f"{who}: promote_every must be an integer, not {type(promote_every).__name__} "
                        f"({promote_every!r})")
    if split_k is None or _is_int(split_k):
        return
    if isinstance(split_k, (str, bytes)) or not isinstance(split_k, (Sequence, np.ndarray)):
        raise TypeError(f"{who}: split_k must be a slice count or a sequence of K boundaries (integers), "
                        f"not {type(split_k).__name__} ({split_k!r})")
    for e in split_k:
        if not _is_int(e):
            raise TypeError(f"{who}: split_k boundaries must be integers, got {e!r} ({type(e).__name__})")


def _slices(k: int, step: int, split_k: int | Sequence[int] | None) -> list[tuple[int, int]]:
    if split_k is None:
        return [(0, k)]
    if isinstance(split_k, (int, np.integer)):
        n = int(split_k)
        if n < 1:
            raise ValueError(f"matmul: split_k must be >= 1, got {n}")
        steps = k // step
        if n > max(steps, 1):  # empty slices would be dropped: the user would get fewer than asked
            raise ValueError(f"matmul: split_k {n} is more slices than K={k} has steps of the unit's K "
                             f"({step}): at most {max(steps, 1)}")
        edges = [step * (steps * i // n) for i in range(n + 1)]
    else:
        edges = [0, *[int(e) for e in split_k], k]
        for e in edges[1:-1]:
            if e % step or not 0 < e < k:
                raise ValueError(f"matmul: split_k boundary {e} must be a multiple of the unit's K ({step}) "
                                 f"strictly inside 0..{k}")
        if any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
            raise ValueError(f"matmul: split_k boundaries must strictly increase, got {list(split_k)}")
    return [(a, b) for a, b in zip(edges, edges[1:], strict=False) if b > a] or [(0, k)]


def matmul(a: Any, b: Any, c: Any = None, *, unit: str | Unit, a_format: str | None = None,
           b_format: str | None = None, a_scales: Any = None, b_scales: Any = None,
           scale_format: str | None = None, block_size: int | None = None,
           promote_every: int | None = None, split_k: int | Sequence[int] | None = None,
           jobs: int | None = None, scheduler: Any = None, tile: int | tuple[int, int] | None = None,
           progress: Callable[[int, int], None] | None = None, engine: str = "auto",
           k_order: str = "forward", add_c: str = "in_chain") -> np.ndarray:
    """D = A @ B + C as the named matrix unit computes it, bit for bit (float32 (M, N)).

    a: (M, K) codes of ``a_format``; b: (K, N) codes of ``b_format`` (fmtsim format names,
    plus fp16 / bf16 for the 16-bit units); or MXTensor / NVFP4Tensor operands (blocks
    along K; one quantized along its last axis is read as (N, K) and transposed for b),
    whose formats and scales are taken from the objects. a_scales (M, K / block_size) and
    b_scales (K / block_size, N): scale codes of ``scale_format`` (e8m0, or ue4m3 whose
    bit 7 the hardware ignores). c: fp32 values (M, N) or None (zeros); units whose
    instruction takes an fp16 C (``c_format="fp16"``) need fp16 values, and the fp16-output
    units (``rne_fp16``) return fp16 values held in float32. tf32 units take ``tf32`` codes
    or ``a_format="fp32"`` / ``b_format="fp32"`` bit patterns (uint32), 13 low bits dropped.
    The fma units (family ``fma``: fp64 mma, fp32 / fp64 MFMA) take ``fp32`` / ``fp64`` bit
    patterns (uint32 / uint64 codes; view float arrays as those) and an fp32 / fp64 C; the
    fp64 ones return float64 D (nothing is narrowed: a C value fp32 cannot hold is refused
    by the fp32 units, kept by the fp64 ones).

    Chaining: the unit's steps run along K, each step's fp32 result is the next step's C.
    promote_every: every that many elements of K (a multiple of the unit's K) the
    partial sum, started from 0, is added to an fp32 accumulator (started from C) with
    one RNE addition, as DeepGEMM does every 128 on Hopper. split_k: a number of equal
    slices, or the K boundaries; each slice is chained separately (the first from C, the
    others from 0) and the slices' results are added left to right in fp32 (RNE).
    NVFP4Tensor global scales are applied after, as a kernel epilogue: D = fl32(alpha * D)
    with alpha = fl32(global_a * global_b).

    How the kernel orders its work, which is what kernels get wrong: k_order="reverse" walks
    K's steps from the end (each step of the unit's K, or of the block size where that is
    longer, keeps its own products; split_k boundaries and promotion intervals count in the
    reversed K). add_c="epilogue" starts the chain from zero and adds C after it, with one RNE
    addition in fp32 (fp64 for the fp64 units) after alpha: D = fl(fl(alpha * chain) + C), as a
    kernel that adds C in its epilogue does; the default "in_chain" passes C to the first step,
    as the instruction takes it. NaN operands and NaN scales (E8M0 0xFF,
    UE4M3 0x7F) make NaN; Inf follows IEEE rules; results beyond fp32 become +-Inf.

    Tiles: every output chains its own K, so the work splits into output tiles (``tile``
    rows x columns, default up to 256 x 256) with the same bits as one run. jobs=N runs
    the tiles on N local processes (jobs=1: one after the other in this process, holding
    one tile's split operands at a time); scheduler (a dask.distributed.Client or a
    scheduler address, fmtsim[dask]) runs them on a Dask cluster. progress(done, total)
    is called with products done as tiles finish.

    K = 0: there is no product and no instruction runs, so D is C (times alpha; a NaN
    as the canonical NaN), never C cut to the unit's fraction bits.

    engine: how the steps of the NVIDIA units (families ``nv`` and ``nv_grouped``), of
    CDNA3's FP8 units and of the FMA chains (``fma``) are computed, with the same bits either
    way: "compiled" (C++ built on first use with the system compiler,
    :mod:`fmtsim.mma.compiled`; an error says why when it cannot be), "numpy", or "auto"
    (compiled when it builds, else numpy). The other units always run in numpy.
    """
    check_chaining(promote_every, split_k)
    check_engine(engine)
    _check_tile(tile)
    try:  # checked before the work, even where it runs in this process (empty D, K = 0)
        check_scheduler(scheduler)
    except (TypeError, ValueError) as e:
        raise type(e)(f"matmul: {e}") from None
    if progress is not None and not callable(progress):
        raise TypeError(f"matmul: progress must be a function (done, total) or None, not {type(progress).__name__}")
    checked, alpha = _checked(a, b, unit=unit, a_format=a_format, b_format=b_format, a_scales=a_scales,
                              b_scales=b_scales, scale_format=scale_format, block_size=block_size)
    u, A, B, af, bf, SA, SB, sf, bs = checked
    check_order(k_order, add_c, u)
    c32 = _to_f32(c, A.shape[0], B.shape[1], u.out_dtype)
    if u.c_format == "fp16":
        _check_fp16(c32)
    if A.shape[1] == 0:  # no product, so no instruction runs: D is C (through the epilogue)
        return _epilogue(c32.copy(), alpha)
    # the chaining arguments checked once, on a one-row one-column problem of the same K
    one = (u, A[:1], B[:, :1], af, bf, None if SA is None else SA[:1], None if SB is None else SB[:, :1], sf, bs)
    _chaining(Prepared(*one), promote_every, split_k)
    if jobs is None and scheduler is None or 0 in c32.shape:
        d = _compute(Prepared(*checked, engine=engine, k_order=k_order), alpha, c32, promote_every, split_k, add_c)
        if progress is not None:  # one pass in this process: all of it done at once
            progress(c32.size * A.shape[1], c32.size * A.shape[1])
        return d
    from ..executor import check_jobs, get_executor

    check_jobs(jobs)
    tm, tn = _tile_shape(tile, c32.shape[0], c32.shape[1], jobs if scheduler is None else None)
    pieces = [(r0, c0, (u, A[r0:r0 + tm], B[:, c0:c0 + tn], af, bf,
                        None if SA is None else SA[r0:r0 + tm], None if SB is None else SB[:, c0:c0 + tn], sf, bs),
               alpha, c32[r0:r0 + tm, c0:c0 + tn], promote_every, split_k, engine, k_order, add_c)
              for r0 in range(0, c32.shape[0], tm) for c0 in range(0, c32.shape[1], tn)]
    out = np.empty_like(c32)
    total, done = c32.size * A.shape[1], 0
    with get_executor(jobs, scheduler, pieces=len(pieces)) as ex:
        for r0, c0, d in ex.imap(_tile_job, pieces):
            out[r0:r0 + d.shape[0], c0:c0 + d.shape[1]] = d
            done += d.size * A.shape[1]
            if progress is not None:
                progress(done, total)
    return out


def _check_tile(tile: Any) -> tuple[int, int] | None:
    """tile as (rows, columns): None, a positive integer or a pair of them."""
    if tile is None:
        return None
    pair = (tile, tile) if _is_int(tile) else tuple(tile) if isinstance(tile, (tuple, list)) else ()
    if len(pair) != 2 or not all(_is_int(t) for t in pair):
        raise TypeError(f"matmul: tile must be an integer or a pair of integers (rows, columns), not {tile!r}")
    if min(pair) < 1:
        raise ValueError(f"matmul: tile must be positive, got {tile}")
    return int(pair[0]), int(pair[1])


def _tile_shape(tile: int | tuple[int, int] | None, m: int, n: int, jobs: int | None) -> tuple[int, int]:
    """Rows x columns of an output tile: as given, or up to 256 x 256, halved (down to 16)
    until every worker has at least two tiles."""
    given = _check_tile(tile)
    if given is not None:
        return given
    tm, tn = min(256, m), min(256, n)
    want = 2 * (jobs or 2)
    while -(-m // tm) * -(-n // tn) < want and max(tm, tn) > 16:
        if tm >= tn:
            tm = -(-tm // 2)
        else:
            tn = -(-tn // 2)
    return tm, tn


def _tile_job(piece: tuple[Any, ...]) -> tuple[int, int, np.ndarray]:
    """One output tile (run by the executor, possibly in another process)."""
    r0, c0, checked, alpha, c32, promote_every, split_k, engine, k_order, add_c = piece
    return r0, c0, _compute(Prepared(*checked, engine=engine, k_order=k_order), alpha, c32, promote_every,
                            split_k, add_c)


def _chaining(p: Prepared, promote_every: int | None, split_k: int | Sequence[int] | None
              ) -> list[tuple[int, int]]:
    """The K slices of split_k, after checking promote_every against the unit's K."""
    step = p.step_k()
    if p.unit.family == "exact" and not p.unit.k and (promote_every or split_k):
        step = p.block_size or 1
    if promote_every is not None and (promote_every <= 0 or promote_every % step):
        raise ValueError(f"matmul: promote_every must be a positive multiple of the unit's K ({step}), "
                         f"got {promote_every}")
    return _slices(p.k_padded, step, split_k)


def _compute(p: Prepared, alpha: float, c32: np.ndarray, promote_every: int | None,
             split_k: int | Sequence[int] | None, add_c: str = "in_chain") -> np.ndarray:
    """D of checked, split operands: the chained steps, split_k and promotion, the epilogue."""
    out: np.ndarray | None = None
    for i, (k0, k1) in enumerate(_chaining(p, promote_every, split_k)):
        start = c32 if i == 0 and add_c == "in_chain" else np.zeros_like(c32)
        if promote_every is None:
            part = p.chain(start, k0, k1)
        else:
            part = start
            for j in range(k0, k1, promote_every):
                part = _f32_add(part, p.chain(np.zeros_like(c32), j, min(k1, j + promote_every)))
        out = part if out is None else _f32_add(out, part)
    assert out is not None
    if add_c == "epilogue":
        return _epilogue(_f32_add(_epilogue(out, alpha), c32), 1.0)
    return _epilogue(out, alpha)


def _epilogue(out: np.ndarray, alpha: float) -> np.ndarray:
    """fl32(alpha * D), NaN results written as the canonical 0x7FFFFFFF (fp64 units: their D
    as is, NaN as 0x7FFFFFFFFFFFFFFF; they take no global scales)."""
    if out.dtype == np.float64:
        bits64 = out.view(np.uint64).copy()
        bits64[np.isnan(out)] = 0x7FFFFFFFFFFFFFFF
        return bits64.view(np.float64)
    if alpha != 1.0:
        with np.errstate(over="ignore", invalid="ignore"):
            out = (np.float32(alpha) * out).astype(np.float32)
    bits = out.view(np.uint32).copy()
    bits[np.isnan(out)] = 0x7FFFFFFF
    return bits.view(np.float32)

