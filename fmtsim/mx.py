"""OCP MX v1.0 block conversion (section 6.3): MXFP8 (E4M3, E5M2), MXFP6 (E3M2, E2M3),
MXFP4 and MXINT8, with every scale rule in use.

For a block of values V_i (32 by default) along ``axis``:

    X   = 2^shared_exp, stored as an E8M0 code (bias 127)
    P_i = element_encode(V_i / X)   rounded once with ``rounding``; magnitudes beyond the
                                    element's max are clamped to +-max (MX INT8: +-127/64)

``scale_rule`` picks shared_exp from the block's amax (bit for bit as torchao's
``ScaleCalculationMode``; emax_elem: E4M3 8, E5M2 15, E3M2 4, E2M3 2, E2M1 2, INT8 0):

    floor  floor(log2(amax)) - emax_elem            (OCP 6.3, the default)
    ceil   floor + 1 when amax is not a power of two
    even   floor after rounding amax to the element's mantissa width, half up (an amax
           that rounds up to 2^128 gets shared_exp 128 - emax_elem, a finite scale)
    rceil  the smallest power of two >= fl(amax * fl(1/max_elem)): the cuBLAS /
           TransformerEngine recipe, PTX cvt.rp.satfinite.ue8m0x2.f32 (the product is
           computed in float32 for float16/bfloat16/float32 input, float64 for float64)

floor(log2(amax)) comes from the exponent bits (integer extraction), never from a
floating-point log2: float32 log2(0x40FFFFFF) returns 3.0 and would pick the
wrong scale. As in torchao, a float32 *subnormal* amax has exponent field 0 and so
counts as 2^-127 with mantissa bits set; this only shows under ``ceil`` with
MXINT8 (emax 0), where such a block gets scale byte 1. float64 input uses the true
exponent (``frexp``). Special cases (each tested):

    NaN or Inf in a block    scale 0xFF (NaN); the block decodes to NaN; its element
                             codes are written as 0
    all-zero block           scale 0x00 (2^-127), elements 0
    shared_exp > 127         scale 0xFF (only float64 inputs can get there)
    shared_exp < -127        clamped to -127; small elements then underflow
    float32 subnormal input  handled exactly; ``flush_subnormals=True`` flushes them to
                             (signed) zero first, as microxcaling does

Rounding: ``rne`` (default; gfloat, torchao, cuDNN) or ``rna`` (microxcaling's default),
or any fmtsim mode incl. ``sr`` with ``rbits`` of x's shape.

Two engines give the same bits (tests/test_mx_compiled.py holds them equal on every scheme,
rule, rounding and special case): the numpy passes below, and a one-pass C++ kernel
(``mx_blocks.cpp``, built on first use for this CPU by :mod:`fmtsim.native`) that runs the
same steps on each block while it is in cache. ``engine="auto"`` (the default) uses the
kernel where it applies (float16/bfloat16/float32 input, every rounding but ``sr``) and
builds; ``"numpy"`` never compiles; ``"compiled"`` requires the kernel (ValueError saying why
it cannot be used).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from .argcheck import choice, flag, float_dtype, instance, integer, integer_array, round_to_dtype, rounding_name, where
from .arrays import as_numpy
from .block import Blocks, merge, scale_shape, scales_from_layout, scales_to_layout, split
from .codec import as_float_array, decode
from .formats import Format, get_format
from .native import Library
from .policy import Resolved, resolve
from .rounding import CHUNK, encode_f64, encode_fast, table_f32

__all__ = ["SCHEMES", "SCALE_RULES", "MXTensor", "quantize", "dequantize", "scale_codes", "check_tensor"]

# read-only, as mma.UNITS: a caller's SCHEMES["x"] = ... would change every later call
SCHEMES: Mapping[str, str] = MappingProxyType({
    "mxfp8_e4m3": "e4m3",
    "mxfp8_e5m2": "e5m2",
    "mxfp6_e3m2": "e3m2",
    "mxfp6_e2m3": "e2m3",
    "mxfp4": "e2m1",
    "mxint8": "mxint8",
})
_ALIASES = {"mxfp8": "mxfp8_e4m3", "mxfp6": "mxfp6_e3m2"}
# 'mx_<format>': OCP MX v1.0 6.3's conversion (shared exponent floor(log2 amax) - emax_elem, elements
# scaled and rounded, saturating) with any float element format: P3109's, or one a user defines
MX_STYLE = "mx_"
SCALE_RULES = ("floor", "ceil", "even", "rceil")
E8M0_NAN = 0xFF
_UINT = {4: np.uint32, 8: np.uint64}
_MX_CHUNK = 4 * CHUNK  # elements per pass: per-pass costs amortised, a chunk still fits a 4 MiB L2


@dataclass
class MXTensor:
    """codes: element codes (uint8, unpacked) in x's layout (padded along ``axis`` when
    ``pad`` was used); scales: E8M0 codes, x's shape with ``axis`` divided by the block."""

    codes: np.ndarray
    scales: np.ndarray
    scheme: str
    axis: int
    block_size: int
    scale_rule: str
    length: int  # original length along axis (before padding)
    shape: tuple[int, ...]

    @property
    def element_format(self) -> Format:
        """The element format of ``scheme`` (ValueError/TypeError for an unknown scheme)."""
        return _element(_scheme(self.scheme))


def _scheme(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"scheme must be an MX scheme name ({', '.join(SCHEMES)}), not {type(name).__name__}")
    key = name.lower()
    key = _ALIASES.get(key, key)
    if key in SCHEMES:
        return key
    if key.startswith(MX_STYLE):  # OCP's algorithm with another element format (P3109, a user format)
        try:
            elem = get_format(key[len(MX_STYLE):])
        except ValueError as e:
            raise ValueError(f"MX-style scheme {name!r}: {e}") from None
        if elem.kind != "float" or not elem.has_zero:
            raise ValueError(f"MX-style scheme {name!r}: the element must be a float format with a zero")
        if elem.bits > 8:  # MX blocks hold byte codes, and the block kernels read byte tables
            raise ValueError(f"MX-style scheme {name!r}: {elem.name} has {elem.bits}-bit codes; MX-style blocks take "
                             "element formats of at most 8 bits (OCP MX v1.0's are 4, 6 and 8)")
        return MX_STYLE + elem.name
    raise ValueError(f"unknown MX scheme {name!r}; choose from {', '.join(SCHEMES)}, or 'mx_<format>' for OCP's "
                     "block conversion with another float element format (e.g. 'mx_binary8p4se')")


def _element(key: str) -> Format:
    """The element format of a checked scheme name."""
    return get_format(SCHEMES[key] if key in SCHEMES else key[len(MX_STYLE):])


def _codes_from_exponent(e: np.ndarray, finite: np.ndarray) -> np.ndarray:
    """Unbiased shared exponents -> E8M0 codes: clamp below at -127, NaN above 127."""
    e = np.maximum(e, -127)
    code = np.where(finite & (e <= 127), e + 127, E8M0_NAN)
    return code.astype(np.uint8)


def scale_codes(amax: np.ndarray, elem: str | Format, rule: str = "floor") -> np.ndarray:
    """E8M0 scale code for each block amax, per ``rule``.

    amax: non-negative float32 or float64 values (float16/bfloat16 and integers are
    widened exactly to float64; NaN/Inf give 0xFF). elem: an MX element format
    (e4m3, e5m2, e3m2, e2m3, e2m1, mxint8)."""
    f = get_format(elem)
    if f.name not in SCHEMES.values() and f.kind != "float":
        raise ValueError(f"scale_codes: {f.name} is not an MX element format ({', '.join(SCHEMES.values())}) "
                         "or a float format")
    choice(rule, "scale_rule", SCALE_RULES)
    emax = f.emax
    mbits = f.precision - 1
    a = as_numpy(amax, "amax")
    if a.dtype.kind == "b" or (a.dtype.kind not in "iuf" and a.dtype.name != "bfloat16"):
        raise TypeError(f"scale_codes: amax must be a float array, not {a.dtype}")
    if a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    with np.errstate(invalid="ignore"):
        neg = a < 0
    if neg.any():
        i = int(np.argmax(neg.reshape(-1)))
        raise ValueError(f"scale_codes: amax {a.reshape(-1)[i]!r} at {where(a.shape, i)} is negative")
    finite = np.isfinite(a)
    if a.dtype == np.float32:
        u = a.view(np.uint32).astype(np.int64) & 0x7FFFFFFF
        if rule == "rceil":
            with np.errstate(over="ignore", invalid="ignore"):
                d = (a * np.float32(1.0 / float(f.max_finite))).astype(np.float32)
            du = d.view(np.uint32).astype(np.int64) & 0x7FFFFFFF
            dexp, dman = du >> 23, du & 0x7FFFFF
            # ceil to a power of two; float32 subnormals: byte 0 is 2^-127, above it byte 1
            up = np.where(dexp == 0, dman > 0x400000, dman != 0)
            code = dexp + up
            return np.where(np.isfinite(d) & finite & (code <= 254), code, E8M0_NAN).astype(np.uint8)
        if rule == "even":  # an amax rounding up to 2^128 has exponent field 255: shared_exp 128 - emax
            u = (u + (1 << (23 - mbits - 1))) & 0x7F800000
        exp_field = u >> 23
        e = exp_field - 127
        if rule == "ceil":
            e = e + ((u & 0x7FFFFF) != 0)
        return _codes_from_exponent(e - emax, finite)
    a64 = a.astype(np.float64)
    m, ex = np.frexp(a64)  # a = m * 2^ex, m in [0.5, 1): floor(log2 a) = ex - 1, exactly
    floor_log2 = np.where(a64 > 0, ex - 1, -1100)
    if rule == "rceil":
        with np.errstate(over="ignore", invalid="ignore"):
            d = a64 * (1.0 / float(f.max_finite))
        dm, dex = np.frexp(d)
        e = np.where(d > 0, np.where(dm == 0.5, dex - 1, dex), -1100)
        return _codes_from_exponent(e, finite & np.isfinite(d))
    if rule == "ceil":
        floor_log2 = floor_log2 + ((a64 > 0) & (m != 0.5))
    elif rule == "even":
        floor_log2 = floor_log2 + ((a64 > 0) & (m >= 1 - 2.0 ** -(mbits + 2)))
    return _codes_from_exponent(floor_log2 - emax, finite)


def _magnitude_max(m: np.ndarray) -> np.ndarray:
    """Max of each row of non-negative floats (NaN if the row holds one). Magnitudes order as
    their bit patterns (a NaN's above Inf's), so the max is taken on the integers: exact, and
    several times faster than a float max, which must watch for NaN. Rows of a power-of-two
    length halve by pairs over the whole chunk (long strided loops, no per-row overhead)."""
    u = m.view(_UINT[m.dtype.itemsize])
    w = m.shape[1]
    if w < 2 or w & (w - 1):
        return np.asarray(u.max(axis=1)).view(m.dtype)
    x = u.reshape(-1)
    while w > 1:
        x = np.maximum(x[0::2], x[1::2])
        w //= 2
    return x.view(m.dtype)


def _bind(lib: Any) -> dict[str, Any]:
    import ctypes

    p, i64, i32, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_float
    mx_fn, nvfp4_fn = lib.fmtsim_mx_f32, lib.fmtsim_nvfp4_f32
    mx_fn.argtypes = [i64, i64, p, p, i32, i32, i32, ctypes.c_uint32, f32, i32, p, p]
    nvfp4_fn.argtypes = [i64, i64, p, i32, f32, f32, f32, p, i32, p, p, i32, p, p]
    mx_fn.restype = nvfp4_fn.restype = None
    return {"mx": mx_fn, "nvfp4": nvfp4_fn}


# mx_blocks.cpp holds both block conversions; fmtsim.nvfp4 uses this same library
_LIBRARY = Library("fmtsim", "mx_blocks", "the block quantizers' C++ kernel", ("fmtsim_mx_f32", "fmtsim_nvfp4_f32"),
                   _bind)


def _quantize_compiled(data: np.ndarray, elem: Format, scale_rule: str, pol: Resolved, flush: bool,
                       codes: np.ndarray, scales: np.ndarray) -> None:
    """The C++ kernel over float32 blocks (rows of ``data``): the numpy loop of :func:`quantize`
    (with :func:`_flush` and :func:`scale_codes`) in one pass per block."""
    data = np.ascontiguousarray(data, np.float32)
    table, shift = table_f32(pol)
    n_blocks, blen = data.shape
    mbits = elem.precision - 1
    recip = float(np.float32(1.0 / float(elem.max_finite)))  # rceil's factor, in float32 as scale_codes has it
    _LIBRARY.entry()["mx"](n_blocks, blen, data.ctypes.data, table.ctypes.data, shift, SCALE_RULES.index(scale_rule),
                     elem.emax, 1 << (23 - mbits - 1), recip, int(flush), codes.ctypes.data, scales.ctypes.data)


def _quantize_numpy(data: np.ndarray, elem: Format, scale_rule: str, pol: Resolved, r: np.ndarray | None,
                    src: str, codes: np.ndarray, scales: np.ndarray) -> None:
    """The numpy passes over blocks (rows of ``data``, already flushed where asked), a chunk of
    blocks at a time: the kernel's twin, and the path of float64 input and ``sr``."""
    n_rows, blen = data.shape
    rows_per = max(1, _MX_CHUNK // max(blen, 1))
    tiny = np.nextafter(data.dtype.type(0), data.dtype.type(1))
    mag = np.empty((min(rows_per, n_rows), blen), dtype=data.dtype)
    for r0 in range(0, n_rows, rows_per):
        d = data[r0 : r0 + rows_per]
        m = np.abs(d, out=mag[: d.shape[0]])
        sc = scale_codes(_magnitude_max(m), elem, scale_rule)
        scales[r0 : r0 + rows_per] = sc
        nan_block = sc == E8M0_NAN
        # X = 2^(code - 127) is a power of two, so x / X is exact unless it underflows
        factor = np.ldexp(data.dtype.type(1), (127 - np.where(nan_block, 127, sc.astype(np.int32))))
        try:
            # the underflow flag is raised for every tiny inexact product: only then can a
            # nonzero have become zero
            with np.errstate(invalid="ignore", under="raise"):
                scaled = np.multiply(d, factor[:, None].astype(data.dtype), out=m)
            underflow = False
        except FloatingPointError:
            with np.errstate(invalid="ignore", under="ignore"):
                scaled = np.multiply(d, factor[:, None].astype(data.dtype), out=m)
            underflow = True
        if underflow and np.count_nonzero(scaled) != np.count_nonzero(d):
            # a nonzero that underflowed keeps its sign and its being nonzero, which is all
            # that directed and stochastic rounding can see this far below the element grid
            lost = (scaled == 0) & (d != 0)
            scaled[lost] = np.copysign(tiny, d[lost])
        if nan_block.any():
            scaled[nan_block] = 0
        flat = scaled.reshape(-1)
        out = codes[r0 : r0 + rows_per].reshape(-1)
        if r is None:
            encode_fast(flat, pol, out)
        else:
            out[:] = encode_f64(flat.astype(np.float64), pol, rbits=r[r0 : r0 + rows_per].reshape(-1),
                                src=src)[0]


def _flush(x: np.ndarray) -> np.ndarray:
    """Subnormals -> zero of the same sign, judged in float32 (microxcaling's behaviour)."""
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(x) < tiny, np.copysign(np.zeros_like(x), x), x)


def quantize(
    x: Any,
    scheme: str = "mxfp8_e4m3",
    *,
    axis: int = -1,
    block_size: int = 32,
    scale_rule: str = "floor",
    rounding: str = "rne",
    rbits: Any = None,
    pad: bool = False,
    flush_subnormals: bool = False,
    engine: str = "auto",
) -> MXTensor:
    """MX-quantize ``x`` along ``axis`` (see the module docstring for every rule).

    x: float16, bfloat16, float32 or float64 values (what :func:`fmtsim.encode` accepts).
    scheme: one of SCHEMES ('mxfp8' and 'mxfp6' are aliases of the E4M3 and E3M2 ones).
    axis, block_size: integers (bool and float refused); block_size >= 1. The axis length
    must be a multiple of block_size unless ``pad=True``, which appends zeros (at most
    enough to double the array, or to 2^26 elements).
    scale_rule: one of SCALE_RULES. rounding: an fmtsim rounding mode; 'sr' needs
    ``rbits``, non-negative integers of x's shape (and rbits is refused otherwise).
    pad, flush_subnormals: True or False.
    engine: 'auto', 'compiled' or 'numpy' (see the module docstring; the same bits).
    Bad arguments raise TypeError or ValueError naming them.
    """
    key = _scheme(scheme)
    elem = _element(key)
    axis = integer(axis, "axis")
    block_size = integer(block_size, "block_size", low=1)
    scale_rule = choice(scale_rule, "scale_rule", SCALE_RULES)
    rounding_name(rounding)
    pad = flag(pad, "pad")
    flush_subnormals = flag(flush_subnormals, "flush_subnormals")
    engine = _LIBRARY.check_engine(engine, "mx.quantize")
    arr, src = as_float_array(x)
    work = arr.astype(np.float64 if src == "float64" else np.float32, copy=False)
    pol = resolve(elem, rounding, "satsym" if elem.kind == "int" else "satfinite",
                  "zero" if not elem.has_nan else None)
    r = None
    if pol.rounding == "sr":
        if rbits is None:
            raise ValueError("rounding='sr' needs rbits: one non-negative random integer per element of x, "
                             f"shape {arr.shape}")
        ra = integer_array(rbits, "rbits")
        if ra.shape != arr.shape:
            raise ValueError(f"rbits has shape {ra.shape}; it needs one value per element of x, shape {arr.shape}")
        if ra.dtype.kind == "i" and ra.size and ra.min() < 0:
            i = int(np.argmax(ra.reshape(-1) < 0))
            raise ValueError(f"rbits must be non-negative; {where(ra.shape, i)} holds {ra.reshape(-1)[i]}")
        r = split(ra.astype(np.uint64), axis=axis, block=block_size, pad=pad, what="rbits").data
    elif rbits is not None:
        raise ValueError(f"rbits is only used with rounding='sr' (rounding is {pol.rounding!r})")
    compiled = work.dtype == np.float32 and r is None
    if engine == "compiled" and not compiled:
        raise ValueError("mx.quantize: engine='compiled' takes float16, bfloat16 or float32 input and a rounding "
                         f"other than 'sr' (here {src} input, rounding {pol.rounding!r}); use engine='auto' or "
                         "'numpy'")
    compiled = compiled and _LIBRARY.used(engine)
    if flush_subnormals and not compiled:  # the kernel flushes as it reads
        work = _flush(work)
    b = split(work, axis=axis, block=block_size, pad=pad, what=key)
    n_rows, blen = b.data.shape
    codes = np.empty((n_rows, blen), dtype=np.uint8)
    codes_x = np.empty(n_rows, dtype=np.uint8)
    if compiled:
        _quantize_compiled(b.data, elem, scale_rule, pol, flush_subnormals, codes, codes_x)
    else:
        _quantize_numpy(b.data, elem, scale_rule, pol, r, src, codes, codes_x)
    return MXTensor(
        codes=merge(codes, b, trim=False),
        scales=scales_to_layout(codes_x, b),
        scheme=key,
        axis=b.axis,
        block_size=block_size,
        scale_rule=scale_rule,
        length=arr.shape[b.axis] if arr.ndim else 1,
        shape=arr.shape,
    )


def check_tensor(q: MXTensor, what: str = "q") -> Blocks:
    """Check that ``q`` is a consistent MXTensor (codes in the element's range, scales
    of the layout's shape, padding shorter than one block) and cut its codes into
    blocks; TypeError/ValueError naming the field otherwise."""
    instance(q, MXTensor, what, "from mx.quantize or layout.from_gpt_oss")
    key = _scheme(q.scheme)
    codes = integer_array(q.codes, f"{what}.codes", bits=_element(key).bits)
    if codes.ndim == 0:
        raise ValueError(f"{what}.codes is 0-d; MX codes have at least one axis")
    axis = integer(q.axis, f"{what}.axis", low=-codes.ndim, high=codes.ndim - 1) % codes.ndim
    block = integer(q.block_size, f"{what}.block_size", low=1)
    b = split(codes, axis=axis, block=block, what=f"{what}.codes", can_pad=False)
    n = codes.shape[axis]
    integer(q.length, f"{what}.length", low=max(0, n - block + 1), high=n)  # padding < one block
    scales = integer_array(q.scales, f"{what}.scales", bits=8)
    if scales.shape != scale_shape(b):
        raise ValueError(f"{what}.scales has shape {scales.shape}; codes of shape {codes.shape} in blocks of "
                         f"{block} along axis {axis} need {scale_shape(b)}")
    return b


def dequantize(q: MXTensor, dtype: Any = np.float32) -> np.ndarray:
    """Exact values element * 2^(scale - 127) (NaN for NaN scales), padding removed,
    rounded once to ``dtype`` (float16, bfloat16, float32 or float64; float64 is exact,
    the others overflow to Inf beyond their range as a cast does).

    q: an MXTensor whose fields agree (codes in the element's range, scales of the
    layout's shape, 0 <= length <= padded length); otherwise TypeError/ValueError."""
    dt = float_dtype(dtype)
    b = check_tensor(q)
    elem = q.element_format
    vals = decode(b.data, elem, np.float64)
    sc = scales_from_layout(np.asarray(q.scales), b).astype(np.int64)
    with np.errstate(over="ignore", under="ignore"):
        out = np.ldexp(vals, (sc - 127)[:, None].astype(np.int32))
    out = np.where((sc == E8M0_NAN)[:, None], np.nan, out)
    full = merge(out, b, trim=False)
    length = int(q.length)
    full = np.take(full, np.arange(length), axis=b.axis) if length != full.shape[b.axis] else full
    if isinstance(q.shape, tuple) and q.shape == () and full.size == 1:
        full = full.reshape(())  # a 0-d x was quantized as one element along one axis
    # float32 cannot hold e.g. 448 * 2^127: Inf, as a cast gives
    return round_to_dtype(full, dt)
