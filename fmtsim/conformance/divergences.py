"""Known, named differences between peers and the exact answer.

Each entry says which implementation and format it concerns, describes the
behaviour, and gives ``expected(x, fmt)``: a boolean mask of the inputs on
which the peer is known to differ from fmtsim's matching profile. Tests and
``fmtsim conform`` report such differences by name instead of failing, and
fail on any difference outside them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..codec import encode
from ..formats import Format, get_format

__all__ = ["Divergence", "DIVERGENCES", "BLOCK_DIVERGENCES", "explain", "explain_among"]


@dataclass(frozen=True)
class Divergence:
    name: str
    implementation: str
    formats: tuple[str, ...]
    sources: tuple[str, ...]  # input dtypes it concerns
    description: str
    # the inputs on which the peer may differ (for some, e.g. onnx's E8M0, a superset:
    # whether a huge negative differs depends on the peer's saturate flag)
    expected: Callable[[np.ndarray, Format], np.ndarray]


def _e8m0_subnormal(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        a = np.asarray(x, dtype=np.float64)
    return (a > 2.0**-127) & (a < 1.5 * 2.0**-127)


def _through_float32(profile: str) -> Callable[[np.ndarray, Format], np.ndarray]:
    def expected(x: np.ndarray, fmt: Format) -> np.ndarray:
        x64 = np.asarray(x, dtype=np.float64)
        with np.errstate(over="ignore"):
            x32 = x64.astype(np.float32)
        once = encode(x64, fmt, profile=profile)
        twice = encode(x32, fmt, profile=profile)
        return np.asarray(once != twice)
    return expected


def _e8m0_subnormal_magnitude(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return _e8m0_subnormal(np.abs(np.asarray(x, dtype=np.float64)), fmt)


def _hip_wide_shift(x: np.ndarray, fmt: Format) -> np.ndarray:
    """Inputs for which AMD's host cast_to_f8 shifts a 64-bit integer by 64 or more bits.

    It builds ``1ull << (mfmt - wm + exponent_diff)`` (mfmt: the source's significand
    bits, 52 for double, 23 for float, which half and bfloat16 go through; wm: the
    format's mantissa bits; exponent_diff = (1 - f8_bias) - the input's unbiased
    exponent, at least 1 - f8_bias + 126 for float subnormals): undefined in C++ once the
    count reaches 64, and on x86 the count wraps."""
    x = np.asarray(x)
    mfmt = 52 if x.dtype == np.float64 else 23
    with np.errstate(invalid="ignore", divide="ignore"):
        a = np.abs(x.astype(np.float64))
        _, e = np.frexp(a)
    act = e.astype(np.int64) - 1  # unbiased exponent of a normal input
    if mfmt == 23:  # float subnormals: the header uses the exponent field's 1 - bias
        act = np.maximum(act, -126)
    bias = (1 << (fmt.exp_bits - 1)) - 1 + (1 if fmt.specials == "fnuz" else 0)
    diff = (1 - bias) - act
    return np.isfinite(a) & (a > 0) & (mfmt - fmt.man_bits + diff >= 64)


def _zero_or_negative(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        a = np.asarray(x, dtype=np.float64)
    return np.isfinite(a) & ((a == 0) | np.signbit(a))


def _onnx_e8m0(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        a = np.asarray(x, dtype=np.float64)
    return ((a <= 2.0**-127) | np.signbit(a)) & np.isfinite(a)


def _gfloat_e8m0_underflow(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        a = np.asarray(x, dtype=np.float64)
    return (a > 0) & (a < 1.5 * 2.0**-128)


def _gfloat_overflow(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        a = np.abs(np.asarray(x, dtype=np.float64))
    return ~np.isnan(a) & (a > float(fmt.max_finite))


DIVERGENCES = [
    Divergence(
        "ml_dtypes.e8m0_subnormal_ties_up",
        "ml_dtypes",
        ("e8m0",),
        ("float32", "bfloat16"),
        "ml_dtypes 0.6 encodes float32/bfloat16 subnormal inputs strictly between 2^-127 and "
        "1.5*2^-127 as 0x01 (2^-126); the nearest E8M0 value is 0x00 (2^-127).",
        _e8m0_subnormal,
    ),
    Divergence(
        "ml_dtypes.float64_double_rounding",
        "ml_dtypes",
        ("e2m1", "e3m2", "e2m3", "e4m3", "e4m3fnuz", "e5m2", "e5m2fnuz", "e8m0", "e4m3ieee", "e3m4",
         "e4m3b11fnuz"),
        ("float64",),
        "ml_dtypes casts float64 arrays through float32 (two roundings); its scalar "
        "constructor rounds once. Example: 1.0625 + 2^-40 -> E4M3 gives 1.0, exact is 1.125.",
        _through_float32("ml_dtypes"),
    ),
    Divergence(
        "onnx.e8m0_zero_and_negatives",
        "onnx",
        ("e8m0",),
        ("float32",),
        "The ONNX reference Cast to FLOAT8E8M0 (onnx 1.23) reads only the exponent bits: 0 "
        "becomes 0x00 and a finite negative x the code of |x| (the onnx_sat profile: NaN 0xFF, "
        "fmtsim's former E8M0 rule, as ml_dtypes does); and a float32 subnormal, whose "
        "exponent field is 0, rounds up to 0x01 even at or below 2^-127 (fmtsim: 0x00).",
        _onnx_e8m0,
    ),
    Divergence(
        "hip.shift_of_64_or_more",
        "hip",
        ("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz"),
        ("float32", "float64", "float16", "bfloat16"),
        "AMD's host cast_to_f8 (amd_hip_fp8.h, from rocBLAS) shifts a 64-bit integer by "
        "mfmt - wm + exponent_diff bits, 64 or more for inputs far below the format's smallest "
        "subnormal (float: |x| < 2^-49 into E4M3; double: |x| < 2^-20): undefined behaviour in "
        "C++; on x86 the count wraps and e.g. float 5.3e-23 gives E4M3 0x01 (exact: 0x00).",
        _hip_wide_shift,
    ),
    Divergence(
        "gfloat.overflow_raises",
        "gfloat",
        ("e2m1", "e3m2", "e2m3"),
        ("float32", "float64"),
        "gfloat's round_float(sat=False) raises ValueError when a value overflows a format "
        "with neither Inf nor NaN; fmtsim saturates (there is nothing else to write).",
        _gfloat_overflow,
    ),
    Divergence(
        "torch.float64_through_float32",
        "torch",
        ("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e8m0"),
        ("float64",),
        "PyTorch 2.13 casts float64 tensors to FP8/E8M0 through float32 (two roundings): "
        "float64 2^-10 + 2^-62 -> E4M3 gives 0 (the float32 tie rounds to even), exact is 2^-9.",
        _through_float32("torch"),
    ),
    Divergence(
        "torch.e8m0_zero_and_sign",
        "torch",
        ("e8m0",),
        ("float16", "bfloat16", "float32", "float64"),
        "PyTorch 2.13's cast to float8_e8m0fnu reads the exponent and mantissa bits only: "
        "+-0 becomes 0x00 and a negative x the code of |x| (fmtsim: NaN 0xFF, since E8M0 has "
        "no zero or sign, OCP MX 5.4.1, as ml_dtypes does).",
        _zero_or_negative,
    ),
    Divergence(
        "torch.e8m0_subnormal_ties_up",
        "torch",
        ("e8m0",),
        ("float32", "bfloat16", "float64"),
        "As ml_dtypes: float32/bfloat16 subnormals strictly between 2^-127 and 1.5*2^-127 "
        "(of either sign, see torch.e8m0_zero_and_sign) encode as 0x01; the nearest is 0x00.",
        _e8m0_subnormal_magnitude,
    ),
    Divergence(
        "gfloat.e8m0_underflow_nan",
        "gfloat",
        ("e8m0",),
        ("float32", "float64"),
        "gfloat rounds positive values below 1.5*2^-128 (0.75 of the smallest scale 2^-127; measured "
        "on gfloat 0.5 by bisection) toward a zero that E8M0 lacks and writes NaN 0xFF; fmtsim "
        "writes the smallest scale 0x00.",
        _gfloat_e8m0_underflow,
    ),
]


# Block-level differences of torchao 0.18 from fmtsim's mx / nvfp4 (checked block by
# block in conformance.torch_peers; the masks are computed there).
BLOCK_DIVERGENCES = {
    "torchao.mx_inf_block_scale":
        "A block holding +-Inf (and no NaN): torchao reads the exponent field of amax = Inf "
        "(255) like any other, so the scale is 2^(128 - emax_elem) and the Inf elements clamp "
        "to +-max; fmtsim gives the block the NaN scale 0xFF (docs/rules.md §3).",
    "torchao.mx_min_scale_divisor":
        "Blocks whose scale byte is 0x00 (2^-127): torchao divides the elements by 2^-126 "
        "(it clamps the float32 scale to the smallest normal, see the comment in to_mx), so "
        "the stored codes are worth half the input; fmtsim divides by 2^-127.",
    "torchao.mx_nan_block_elements":
        "Blocks with the NaN scale 0xFF: torchao writes the element casts it computed, "
        "fmtsim writes 0. The block decodes to NaN either way.",
    "torchao.nvfp4_amax0_nan_bits":
        "NVFP4 with tensor amax 0: torchao's per-tensor scale is 0 and its block scales 0/0, "
        "whose bits are the CPU's default NaN (x86: scales 0xFF, element codes 0xC); fmtsim "
        "writes scales 0x7F and codes 0. The tensor decodes to NaN either way.",
}


def explain(
    implementation: str, fmt: str | Format, source: str, x: np.ndarray
) -> dict[str, np.ndarray]:
    """name -> mask of inputs covered by each known divergence of ``implementation``."""
    return explain_among([d for d in DIVERGENCES if d.implementation == implementation], fmt, source, x)


def explain_among(
    divergences: Iterable[Divergence], fmt: str | Format, source: str, x: np.ndarray
) -> dict[str, np.ndarray]:
    """name -> mask of inputs covered by each of ``divergences`` that concerns ``fmt`` and ``source``."""
    f = get_format(fmt)
    out = {}
    for d in divergences:
        if f.name in d.formats and source in d.sources:
            out[d.name] = d.expected(x, f)
    return out
