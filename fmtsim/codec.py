"""encode() / decode() / quantize(): input checks, chunking and dispatch.

The arithmetic lives in rounding.py; this module decides what an input is,
rejects what it cannot convert exactly, and returns arrays of the input's
shape (numpy scalars for 0-d inputs, as numpy ufuncs do).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache, lru_cache
from typing import Any

import ml_dtypes
import numpy as np

from . import argcheck
from .arrays import as_numpy
from .formats import Format, get_format, power_text
from .policy import Policy, Profile, Resolved, resolve
from .rounding import (
    CHUNK,
    decode_compiled,
    decode_u8,
    encode_f64,
    encode_fast,
    encode_sr_f32,
    magnitude_keys,
    nan_input_flags,
    payload_nan_codes,
    sr_compiled,
    to_intermediate,
)
from .sources import source_type

__all__ = ["encode", "decode", "quantize", "encode_with_flags", "as_float_array"]

_FLOAT_INPUTS = {
    np.dtype(np.float16): "float16",
    np.dtype(ml_dtypes.bfloat16): "bfloat16",
    np.dtype(np.float32): "float32",
    np.dtype(np.float64): "float64",
}


def _where(shape: tuple[int, ...], flat_index: int) -> str:
    if len(shape) <= 1:
        return f"index {flat_index}"
    return f"index {tuple(int(i) for i in np.unravel_index(flat_index, shape))}"


def _integers_to_float64(arr: np.ndarray) -> np.ndarray:
    """Integers as float64, exact up to 53 significant bits and *rounded to odd* beyond: the
    nearest float64 with an odd significand is kept, so the one rounding into the target format
    that follows is the only rounding (as for float64 inputs; Boldo & Melquiond 2008)."""
    if arr.dtype.itemsize < 8:
        return arr.astype(np.float64)
    negative = arr < 0 if arr.dtype.kind == "i" else np.zeros(arr.shape, dtype=bool)
    # -2^63 negates to itself; read as uint64 it is 2^63, its magnitude
    mag = np.where(negative, np.negative(arr), arr).view(np.uint64) if arr.dtype.kind == "i" \
        else arr.astype(np.uint64, copy=False)
    exp = np.frexp(mag.astype(np.float64))[1].astype(np.int64)  # bit length, or one more if it rounded up
    top = mag >> np.clip(exp - 1, 0, 63).astype(np.uint64)
    bit_length = np.where(top == 0, exp - 1, exp)
    drop = np.clip(bit_length - 53, 0, 63).astype(np.uint64)
    kept = mag >> drop
    sticky = (mag & ((np.uint64(1) << drop) - np.uint64(1))) != 0
    odd = kept | sticky.astype(np.uint64)
    out = np.ldexp(odd.astype(np.float64), drop.astype(np.int64))
    return np.where(negative, -out, out)


def as_float_array(x: Any, what: str = "x") -> tuple[np.ndarray, str]:
    """(array, source kind) for an encodable input; raises TypeError/ValueError otherwise.

    float16, bfloat16, float32 and float64 pass through. Other ml_dtypes floats
    (FP8, FP6, FP4) are widened exactly to float32. Integer arrays of any width
    are taken exactly: beyond 53 significant bits they are rounded to odd into
    float64, which leaves the conversion into the format its only rounding
    (2^53 + 1 is inexact, and rounds up under 'rup'). PyTorch CPU tensors are read as numpy arrays
    (fmtsim.arrays); masked arrays and GPU tensors are refused.
    """
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) >= 2**63:
        raise ValueError(f"{what}: the integer {x} does not fit in 64 bits; pass a float, or give the "
                         "number to the CLI ('fmtsim encode'), which reads any decimal exactly")
    arr = as_numpy(x, what)
    dt = arr.dtype
    if dt in _FLOAT_INPUTS:
        return arr, _FLOAT_INPUTS[dt]
    if dt.kind == "b":
        raise TypeError(f"{what}: boolean arrays are not numbers to encode")
    if dt.kind in "iu":
        return _integers_to_float64(arr), "float64"
    if dt.kind == "c":
        raise TypeError(f"{what}: complex input ({dt}) has no encoding; pass the real part explicitly")
    if dt.kind == "O":
        raise TypeError(f"{what}: object arrays are not accepted; convert to a float dtype first")
    if dt.itemsize == 1 and dt.type.__module__.startswith("ml_dtypes"):
        # FP8/FP6/FP4 and E8M0 values are all float32 values: widen exactly
        return arr.astype(np.float32), "float32"
    if dt.kind == "f":
        raise TypeError(f"{what}: {dt} is not supported (float16, bfloat16, float32, float64)")
    raise TypeError(f"{what}: dtype {dt} is not a number type fmtsim can encode")


def _check_rbits(rbits: Any, shape: tuple[int, ...]) -> np.ndarray:
    r = as_numpy(rbits, "rbits")
    if r.dtype.kind not in "iu":
        raise TypeError(f"rbits must be an unsigned integer array, not {r.dtype}")
    if r.shape != shape:
        raise ValueError(f"rbits has shape {r.shape}; it needs one value per element, shape {shape}")
    if r.dtype.kind == "i" and r.size and r.min() < 0:
        bad = int(np.argmax(r.reshape(-1) < 0))
        raise ValueError(f"rbits must be non-negative; {_where(shape, bad)} holds {r.reshape(-1)[bad]}")
    flat = np.ascontiguousarray(r).reshape(-1)  # uint32 as given (the compiled path reads it); else widened
    return flat if flat.dtype == np.uint32 else flat.astype(np.uint64)


def _check_nans(flat: np.ndarray, shape: tuple[int, ...], fmt: Format) -> None:
    count = 0
    first = -1
    for i in range(0, flat.size, CHUNK):
        m = np.isnan(flat[i : i + CHUNK])
        k = int(np.count_nonzero(m))
        if k and first < 0:
            first = i + int(np.argmax(m))
        count += k
    if count:
        raise ValueError(
            f"{fmt.name} has no NaN encoding and {count} input(s) are NaN (first at "
            f"{_where(shape, first)}); pass nan='max', 'zero' or 'zero_sign_flipped' (or a profile) to choose a code"
        )


def _prepare(
    x: Any, fmt: str | Format, rounding: str | None, overflow: str | None, nan: str | None,
    rbits: Any, profile: str | Policy | Profile | None,
) -> tuple[np.ndarray, np.ndarray, str, Resolved, np.ndarray | None]:
    arr, src = as_float_array(x)
    pol = resolve(fmt, rounding, overflow, nan, profile).for_source(src)
    flat = np.ascontiguousarray(arr).reshape(-1)
    if pol.rounding == "sr":
        if rbits is None:
            raise ValueError("rounding='sr' needs rbits: one unsigned random integer per element")
        r = _check_rbits(rbits, arr.shape)
        n = pol.stochastic.bits
        if n is not None and r.size and int(r.max()) >> n:
            bad = int(np.argmax(r >> np.uint64(n)))
            raise ValueError(f"sr_bits={n}: rbits must be below 2^{n}; {_where(arr.shape, bad)} holds {int(r[bad])}")
    else:
        if rbits is not None:
            raise ValueError(f"rbits is only used with rounding='sr' (rounding is {pol.rounding!r})")
        r = None
    if pol.on_nan.mode == "raise" and flat.size:
        _check_nans(flat, arr.shape, pol.fmt)
    return arr, flat, src, pol, r




def _reads_payload(pol: Resolved) -> bool:
    payload_modes = {"payload_rounded", "payload", "quiet_payload"}
    return bool(payload_modes & {pol.on_nan.mode, pol.on_nan.negative}) or pol.on_nan.signaling is not None


def _reread_nan_payloads(flat: np.ndarray, src: str, pol: Resolved, out: np.ndarray,
                         flags: np.ndarray | None = None) -> None:
    """nan='payload_rounded' and 'payload' depend on the NaN's payload bits, which the tables
    (indexed by the top bits) and float64 widening (which quiets signalling NaNs) do not
    keep: those codes are recomputed from the source's own bit patterns."""
    for i in range(0, flat.size, CHUNK):
        part = flat[i : i + CHUNK]
        with np.errstate(invalid="ignore"):  # bfloat16 signalling NaNs
            where = np.nonzero(np.isnan(part))[0]
        if where.size:
            st = source_type(src)
            bits = part[where].view(st.bits_dtype)
            if pol.on_nan.sign_dropped:
                bits = bits & ~st.bits_dtype.type(st.sign_bit)
            if _reads_payload(pol):
                out[i + where] = payload_nan_codes(bits, src, pol)
            if flags is not None:  # a NaN that became a number (or Inf) is invalid, or a signalling one
                flags[i + where] = nan_input_flags(out[i + where], bits, src, pol)


def _finish(out: np.ndarray, shape: tuple[int, ...]) -> Any:
    out = out.reshape(shape)
    return out[()] if out.ndim == 0 else out


def encode(
    x: Any,
    fmt: str | Format,
    *,
    rounding: str | None = None,
    overflow: str | None = None,
    nan: str | None = None,
    rbits: Any = None,
    profile: str | Policy | Profile | None = None,
    threads: int | None = None,
) -> Any:
    """Encode numbers into ``fmt`` codes (np.uint8; np.uint16 for formats wider than a byte, such as
    Binary16p11se), each rounded once from its exact value.

    x: float16, bfloat16, float32 or float64 array (or Python float / numpy scalar;
       other ml_dtypes floats and exactly-representable integers are widened exactly).
    rounding: 'rne' (default), 'rna', 'rtz', 'rup', 'rdn' or 'sr'.
    overflow: 'satfinite' (default), 'nonsat', or 'satsym' for signed integers.
    nan: what NaN inputs become; default 'signed' for formats with a NaN,
         'raise' (ValueError) for formats without. See fmtsim.policy.
    rbits: with rounding='sr' only; unsigned integers of x's shape (see
           fmtsim.rounding for exactly which bits are used).
    profile: a named bundle of defaults (a name in fmtsim.policy.PROFILES: 'ocp',
             'ptx', 'cuda', 'hip', 'ml_dtypes', ...), or a fmtsim.policy.Policy for
             the finer choices (NaN codes per sign and source, overflow before
             rounding, Inf inputs, E8M0 specials, an intermediate type); explicit
             keywords win over it.
    threads: split a large array into up to this many contiguous ranges converted on threads of
             this process (default 1); the codes are the same for any value (each element is
             converted on its own).

    Returns codes of x's shape (a numpy scalar for 0-d input), as ``fmt.code_dtype``. UE4M3
    codes fit in 7 bits; FP4/FP6/int4 codes in 4 or 6 bits.
    """
    nthreads = _check_threads(threads)
    arr, flat, src, pol, r = _prepare(x, fmt, rounding, overflow, nan, rbits, profile)
    out = np.empty(flat.size, dtype=pol.fmt.code_dtype)
    _in_parts(flat.size, nthreads, lambda a, b: _encode_part(flat[a:b], src, pol, None if r is None else r[a:b],
                                                             out[a:b]))
    return _finish(out, arr.shape)


def _encode_part(flat: np.ndarray, src: str, pol: Resolved, r: np.ndarray | None, out: np.ndarray) -> None:
    """encode's work on one contiguous range (every step is element by element, so any split of the
    input gives the same codes)."""
    if pol.rounding == "sr":
        assert r is not None
        if sr_compiled(pol, src) and flat.size:
            encode_sr_f32(flat, pol, r, out)
        else:
            for i in range(0, flat.size, CHUNK):
                out[i : i + CHUNK], _ = encode_f64(
                    flat[i : i + CHUNK].astype(np.float64), pol, rbits=r[i : i + CHUNK], src=src
                )
    elif flat.size:
        if pol.via.type is not None:  # double rounding, as the implementation does
            with np.errstate(invalid="ignore"):  # widening signalling NaNs quiets them: fine
                fast_in = np.concatenate([to_intermediate(flat[i : i + CHUNK].astype(np.float64), pol.via.type,
                                                          pol.via.carry)
                                          for i in range(0, flat.size, CHUNK)])
            encode_fast(fast_in, pol.without_intermediate(), out)
        else:
            encode_fast(flat, pol, out)
    if _reads_payload(pol):
        _reread_nan_payloads(flat, src, pol, out)


# a thread's share of an array is at least this many elements: below it, starting a thread costs
# more than the conversion it takes over
_MIN_PART = 1 << 18


def _check_threads(threads: Any) -> int:
    if threads is None:
        return 1
    return argcheck.integer(threads, "threads", low=1)


def _in_parts(n: int, threads: int, work: Callable[[int, int], None]) -> None:
    """work(a, b) over [0, n) split into at most ``threads`` contiguous ranges run on threads of this
    process (the compiled kernels and numpy's loops release the GIL); in the calling thread alone
    where one range suffices. The first error a range raises is raised here."""
    parts = max(1, min(threads, n // _MIN_PART))
    if parts == 1:
        work(0, n)
        return
    edges = [n * k // parts // 64 * 64 for k in range(parts)] + [n]  # ranges start on a cache line
    with ThreadPoolExecutor(max_workers=parts, thread_name_prefix="fmtsim") as pool:
        for f in [pool.submit(work, a, b) for a, b in zip(edges[:-1], edges[1:], strict=True)]:
            f.result()


def encode_with_flags(
    x: Any,
    fmt: str | Format,
    *,
    rounding: str | None = None,
    overflow: str | None = None,
    nan: str | None = None,
    rbits: Any = None,
    profile: str | Policy | Profile | None = None,
    threads: int | None = None,
) -> tuple[Any, Any]:
    """Like :func:`encode`, also returning per-element exception flags (np.uint8).

    Flag bits (TestFloat order): 1 inexact, 2 underflow (tiny before rounding and
    inexact), 4 overflow, 8 infinite (never set by a conversion), 16 invalid
    (a NaN turned into a number, or an input with no meaning in the format
    turned into NaN), 32 saturated (clamped to the format's range).
    """
    nthreads = _check_threads(threads)
    arr, flat, src, pol, r = _prepare(x, fmt, rounding, overflow, nan, rbits, profile)
    out = np.empty(flat.size, dtype=pol.fmt.code_dtype)
    flags = np.empty(flat.size, dtype=np.uint8)
    _in_parts(flat.size, nthreads, lambda a, b: _flags_part(flat[a:b], src, pol, None if r is None else r[a:b],
                                                            out[a:b], flags[a:b]))
    return _finish(out, arr.shape), _finish(flags, arr.shape)


def _flags_part(flat: np.ndarray, src: str, pol: Resolved, r: np.ndarray | None, out: np.ndarray,
                flags: np.ndarray) -> None:
    for i in range(0, flat.size, CHUNK):
        with np.errstate(invalid="ignore"):  # widening signalling NaNs quiets them: fine
            wide = flat[i : i + CHUNK].astype(np.float64)
        c, f = encode_f64(wide, pol, want_flags=True, src=src, rbits=None if r is None else r[i : i + CHUNK])
        out[i : i + CHUNK] = c
        assert f is not None
        flags[i : i + CHUNK] = f
    if _reads_payload(pol) or pol.flags.nan == "signaling":
        _reread_nan_payloads(flat, src, pol, out, flags)


_DECODE_DTYPES = (np.float16, ml_dtypes.bfloat16, np.float32, np.float64)


@cache
def _decode_table(fmt: Format, dtype: np.dtype) -> np.ndarray:
    """Every code's value as ``dtype``: ValueError unless each is exact there (a format whose values
    go beyond float64 gets :func:`_partial_decode_table` instead)."""
    vals = fmt.values
    with np.errstate(over="ignore"):
        t = vals.astype(dtype)
    finite = np.isfinite(vals)
    if not np.array_equal(t[finite].astype(np.float64), vals[finite]):
        wide = "float64" if dtype == np.float32 or not np.array_equal(
            vals[finite].astype(np.float32).astype(np.float64), vals[finite]) else "float32 or float64"
        raise ValueError(f"{fmt.name}: not every value is representable in {dtype}; decode to {wide}")
    t.flags.writeable = False
    return t


@cache
def _partial_decode_table(fmt: Format, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """For a format with values beyond float64 (wide P3109 formats): each code's value as ``dtype``
    where it is one exactly, and the mask of the codes where it is not (their slots hold 0)."""
    p = fmt.parts
    keys, exact = magnitude_keys(fmt)
    mag = np.where(exact | ~p.finite, keys, 0.0)
    v = np.where(p.negative, -mag, mag)
    with np.errstate(over="ignore"):
        t = v.astype(dtype)
    fits = ~p.finite | (exact & (t.astype(np.float64) == v))
    t[~fits] = 0
    for a in (t, fits):
        a.flags.writeable = False
    return t, ~fits


def decode(codes: Any, fmt: str | Format, dtype: Any = np.float32, *, mask: bool = False,
           threads: int | None = None) -> Any:
    """Values of integer ``codes`` in ``fmt``, exactly, as ``dtype``.

    dtype: float32 (default), float64, float16 or bfloat16, accepted where every value of the
    format is one (float32 holds every byte format; ValueError names the type that holds them);
    either byte order ('>f4' too). A format whose values go beyond float64 (wide P3109 formats
    such as Binary16p1se, up to 2^16382) decodes every code that is a value of ``dtype`` and
    refuses, naming the first, any code that is not. NaN codes decode to a quiet NaN carrying the code's sign bit.
    Codes outside 0 .. 2^bits - 1 (e.g. 0x1F for FP4, or UE4M3 codes with bit 7
    set) raise ValueError naming the first bad index, unless ``mask=True``, which
    keeps only the low ``bits`` bits of each code. threads: as for :func:`encode`.
    """
    f = get_format(fmt)
    nthreads = _check_threads(threads)
    try:
        dt = np.dtype(np.float32 if dtype is None else dtype)  # None: the default, not numpy's float64
    except (TypeError, ValueError, SyntaxError):  # numpy parses some strings (',') as Python and fails so
        raise TypeError(f"decode dtype must be float16, bfloat16, float32 or float64, not {dtype!r}") from None
    native = dt.newbyteorder("=")  # '>f4' is float32 in the other byte order: decoded, then swapped
    if native not in [np.dtype(d) for d in _DECODE_DTYPES]:
        raise TypeError(f"decode dtype must be float16, bfloat16, float32 or float64, not {dt}")
    c = as_numpy(codes, "codes")
    if c.dtype.kind not in "iu":
        raise TypeError(
            f"codes must be an integer array, not {c.dtype} (view FP8 arrays as uint8 first)"
        )
    if not isinstance(mask, (bool, np.bool_)):
        raise TypeError(f"decode: mask must be True or False, not {type(mask).__name__}")
    unfit = None
    if f.fits_float64:
        table = _decode_table(f, native)
    else:
        table, unfit = _partial_decode_table(f, native)
    flat = np.ascontiguousarray(c).reshape(-1)
    n = f.n_codes
    if mask:
        # in a wide type: n - 1 (255) does not fit int8, and a negative code keeps its low bits
        flat = np.bitwise_and(flat.astype(np.int64, copy=False), n - 1)
    elif flat.size and not (c.dtype == np.uint8 and n == 256):
        if flat.min() < 0 or flat.max() >= n:
            bad = int(np.argmax((flat < 0) | (flat >= n)))
            raise ValueError(
                f"{f.name}: code {int(flat[bad])} at {_where(c.shape, bad)} is outside "
                f"0..{n - 1:#x}; pass mask=True to keep only the low {f.bits} bits"
            )
    if unfit is not None and flat.size and unfit[flat].any():
        bad = int(np.argmax(unfit[flat]))
        code = int(flat[bad])
        worth = power_text(f.code_value(code))  # type: ignore[arg-type]  # a finite code: a Fraction
        raise ValueError(f"{f.name}: code {code:#x} at {_where(c.shape, bad)} is worth {worth}, not a {native} "
                         f"(this format's values reach {power_text(f.max_finite)}); decode to "
                         "float64 where it is one, or read Format.code_value for the exact value")
    out = np.empty(flat.size, dtype=native)
    if native == np.float32 and flat.dtype == np.uint8 and f.n_codes <= 256 and flat.size and decode_compiled():
        table256 = _decode_table_256(f)  # the same table, read by the compiled lookup
        _in_parts(flat.size, nthreads, lambda a, b: decode_u8(flat[a:b], table256, out[a:b]))
    else:
        _in_parts(flat.size, nthreads, lambda a, b: _take_part(table, flat[a:b], out[a:b]))
    return _finish(out if native == dt else out.astype(dt), c.shape)


def _take_part(table: np.ndarray, codes: np.ndarray, out: np.ndarray) -> None:
    # codes are in range (checked or masked): mode="wrap" only skips numpy's bounds-error path,
    # which costs a third of the time
    for i in range(0, codes.size, CHUNK):
        np.take(table, codes[i : i + CHUNK], out=out[i : i + CHUNK], mode="wrap")


@lru_cache(maxsize=64)
def _decode_table_256(fmt: Format) -> np.ndarray:
    """The float32 decode table with room for every byte (codes above the format's are refused
    before the lookup, so the padding is never read)."""
    t = np.zeros(256, dtype=np.float32)
    t[: fmt.n_codes] = _decode_table(fmt, np.dtype(np.float32))
    t.flags.writeable = False
    return t


def quantize(x: Any, fmt: str | Format, *, dtype: Any = None, **kwargs: Any) -> Any:
    """decode(encode(x, fmt, **kwargs)): x rounded onto fmt's grid.

    dtype defaults to float64 for float64 input and float32 otherwise.
    """
    unknown = sorted(set(kwargs) - _ENCODE_KEYWORDS)
    if unknown:
        raise TypeError(f"quantize() got an unexpected keyword argument {unknown[0]!r}; it takes dtype and "
                        f"encode's keywords ({', '.join(sorted(_ENCODE_KEYWORDS))})")
    arr, _ = as_float_array(x)
    if dtype is None:
        dtype = np.float64 if arr.dtype == np.float64 else np.float32
    else:
        try:
            ok = np.dtype(dtype).newbyteorder("=") in [np.dtype(d) for d in _DECODE_DTYPES]
        except (TypeError, ValueError, SyntaxError):
            ok = False
        if not ok:
            raise TypeError(f"quantize: dtype must be float16, bfloat16, float32 or float64, not {dtype!r}")
    return decode(encode(arr, fmt, **kwargs), fmt, dtype, threads=kwargs.get("threads"))


_ENCODE_KEYWORDS = frozenset({"rounding", "overflow", "nan", "rbits", "profile", "threads"})
