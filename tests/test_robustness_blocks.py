"""Bad input to the block-scheme and layout APIs and to `fmtsim ver`: a clear
TypeError/ValueError (CLI: exit 2, one `fmtsim: error:` line), never a silent wrong
answer or a traceback. The first half pins each case found by hand (issue 9); the
hypothesis tests below draw wrong types, shapes, ranges and dtypes at random."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shutil
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fmtsim
from fmtsim import fnuz, intq, layout, mx, nvfp4, schemes
from fmtsim.argcheck import round_to_dtype
from fmtsim.block import Blocks, block_amax, merge, row_max, scale_shape, scales_from_layout, scales_to_layout, split
from fmtsim.cli import main

from .conftest import examples

X = np.linspace(-3, 3, 64, dtype=np.float32).reshape(2, 32)


# ---------------------------------------------------------------- silent wrong results


@pytest.mark.parametrize("g", [0, 0.0, -1.0, -0.5, np.nan, np.inf, -np.inf, np.float32(0)])
@pytest.mark.parametrize("recipe", ["te", "torchao"])
def test_nvfp4_global_scale_must_be_positive_finite(g, recipe):
    with pytest.raises(ValueError, match="global_scale must be positive and finite"):
        nvfp4.quantize(X, recipe=recipe, global_scale=g)


def test_nvfp4_global_scale_one_number():
    with pytest.raises(ValueError, match=r"global_scale must be one number .* shape \(2,\)"):
        nvfp4.quantize(X, global_scale=np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="global_scale must be a number, not str"):
        nvfp4.quantize(X, global_scale="1")
    with pytest.raises(TypeError, match="global_scale must be a number, not bool"):
        nvfp4.quantize(X, global_scale=True)
    with pytest.raises(ValueError, match="reciprocal overflows"):
        nvfp4.quantize(X, global_scale=1e-45)
    # a one-element array (as checkpoints store weight_scale_2) is the same as the scalar
    a = nvfp4.quantize(X, global_scale=np.array([0.25], np.float32))
    b = nvfp4.quantize(X, global_scale=0.25)
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.scales, b.scales)
    assert a.global_scale == np.float32(0.25) and int(a.scales.max()) <= 0x7F


def test_nvfp4_given_global_scale_gives_valid_codes():
    # a huge multiplier: every UE4M3 scale underflows; codes stay E2M1 and scales 7-bit
    for g in (1e30, 3.0e38, 3e-39):
        for recipe in nvfp4.RECIPES:
            q = nvfp4.quantize(X, recipe=recipe, global_scale=g)
            assert q.codes.max() <= 15 and q.scales.max() <= 0x7F


def test_global_scale_conversions_refuse_bad_values():
    with pytest.raises(ValueError, match="positive and finite for the 'divisor' convention, not 0.0"):
        nvfp4.global_scale_to_stored(0, "divisor")
    with pytest.raises(ValueError, match="non-negative and finite for the 'multiplier' convention, not -1.0"):
        nvfp4.global_scale_from_stored(-1, "multiplier")
    with pytest.raises(ValueError, match="stored must be positive"):
        nvfp4.global_scale_from_stored(-1, "divisor")
    for conv in ("multiplier", "divisor"):
        with pytest.raises(ValueError, match="nan"):
            nvfp4.global_scale_to_stored(np.nan, conv)
        with pytest.raises(ValueError, match="inf"):
            nvfp4.global_scale_to_stored(np.inf, conv)
    with pytest.raises(ValueError, match="no float32 reciprocal"):
        nvfp4.global_scale_to_stored(1e-45, "divisor")
    with pytest.raises(ValueError, match="unknown convention 'div'"):
        nvfp4.global_scale_to_stored(1.0, "div")
    assert nvfp4.global_scale_to_stored(0.5, "divisor") == np.float32(2.0)
    assert nvfp4.global_scale_from_stored(2.0, "divisor") == np.float32(0.5)
    assert nvfp4.global_scale_to_stored(0.0, "multiplier") == 0  # torchao's all-zero tensor


@pytest.mark.parametrize("bits,exc", [(4.5, TypeError), (4.0, TypeError), ("4", TypeError), (True, TypeError),
                                      (np.float32(4), TypeError), (1, ValueError), (9, ValueError)])
def test_intq_bits_must_be_an_integer_2_to_8(bits, exc):
    with pytest.raises(exc, match="bits must be"):
        intq.quantize(X, bits)


def test_intq_bits_numpy_integer_accepted():
    assert np.array_equal(intq.quantize(X, np.int64(4)).codes, intq.quantize(X, 4).codes)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8, bool, np.complex64, "S2", object, ",", "f4,i4",
                                   "nonsense", 3.5])
def test_dequantize_refuses_non_float_dtypes(dtype):
    cases = [(mx.dequantize, mx.quantize(X, "mxfp4")), (nvfp4.dequantize, nvfp4.quantize(X)),
             (intq.dequantize, intq.quantize(X, 4))]
    for fn, q in cases:
        with pytest.raises(TypeError, match="dtype must be float16, bfloat16, float32 or float64"):
            fn(q, dtype=dtype)


def test_dequantize_bfloat16_rounds_once():
    # ml_dtypes' float64 -> bfloat16 cast goes through float32: 1 + 2^-8 + 2^-30 -> 1.0 (twice rounded)
    v = 1 + 2.0**-8 + 2.0**-30
    assert float(np.array(v).astype(ml_dtypes.bfloat16)) == 1.0
    assert float(round_to_dtype(np.array([v]), np.dtype(ml_dtypes.bfloat16))[0]) == 1 + 2.0**-7
    # float16 and float32 take numpy's direct float64 casts, which round once
    assert float(round_to_dtype(np.array([1 + 2.0**-11 + 2.0**-40]), np.dtype(np.float16))[0]) == 1 + 2.0**-10
    assert float(round_to_dtype(np.array([1 + 2.0**-24 + 2.0**-50]), np.dtype(np.float32))[0]) == 1 + 2.0**-23
    # against the exact rule on every float32 near the bfloat16 midpoints of [1, 2): one rounding
    rng = np.random.default_rng(9)
    base = rng.integers(0x3F800000, 0x40000000, 2000, dtype=np.uint64)
    mids = ((base >> 16) << 16 | 0x8000).astype(np.uint32).view(np.float32).astype(np.float64)
    x = mids + rng.choice([-1.0, 0.0, 1.0], mids.size) * 2.0**-40
    got = round_to_dtype(x, np.dtype(ml_dtypes.bfloat16)).astype(np.float64)
    lo = ((base >> 16) << 16).astype(np.uint32).view(np.float32).astype(np.float64)
    hi = (((base >> 16) + 1) << 16).astype(np.uint32).view(np.float32).astype(np.float64)
    even_lo = ((base >> 16) & 1) == 0
    want = np.where(x < mids, lo, np.where(x > mids, hi, np.where(even_lo, lo, hi)))
    assert np.array_equal(got, want)
    # and a dequantize through it agrees with the float64 result rounded the same way
    q = nvfp4.quantize(X * 1.37)
    assert np.array_equal(nvfp4.dequantize(q, ml_dtypes.bfloat16).astype(np.float64),
                          round_to_dtype(nvfp4.dequantize(q, np.float64), np.dtype(ml_dtypes.bfloat16))
                          .astype(np.float64))


def test_unpack_lengths_checked():
    one = np.array([0x21], np.uint8)
    assert layout.unpack_fp4(one).tolist() == [1, 2]
    assert layout.unpack_fp4(one, length=1).tolist() == [1]
    for bad in (5, 3, -1, 0):
        with pytest.raises(ValueError, match=f"length {bad} is impossible for 2 unpacked codes; it must be 1..2"):
            layout.unpack_fp4(one, length=bad)
    with pytest.raises(TypeError, match="length must be an integer"):
        layout.unpack_fp4(one, length=1.0)
    three = layout.pack_fp6(np.array([1, 2, 3, 4], np.uint8))
    assert layout.unpack_fp6(three, length=3).tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="length 8 is impossible for 4 unpacked codes; it must be 1..4"):
        layout.unpack_fp6(three, length=8)
    with pytest.raises(ValueError, match="length 2 is impossible for 3 unpacked codes; it must be 3..3"):
        layout.unpack_fp6(np.array([1, 2, 3], np.uint8), dense=False, length=2)


def test_scale_by_power_of_two_refuses_other_factors():
    s = np.array([1.0, 0.75], np.float32)
    for bad in (3.0, 0.3, 0, -2.0, np.inf, np.nan, 1.5):
        with pytest.raises(ValueError, match="factor must be a power of two"):
            fnuz.scale_by_power_of_two(s, bad)
    for bad in (True, "2", None, [2]):
        with pytest.raises(TypeError, match="factor must be a power of two"):
            fnuz.scale_by_power_of_two(s, bad)
    assert fnuz.scale_by_power_of_two(s, 4).tolist() == [4.0, 3.0]
    assert fnuz.scale_by_power_of_two(s, 0.25).tolist() == [0.25, 0.1875]
    with pytest.raises(OverflowError):
        fnuz.scale_by_power_of_two(np.array([60000.0], np.float16), 2.0)
    with pytest.raises(ValueError, match="overflows float16"):  # also a ValueError, as the API contract says
        fnuz.scale_by_power_of_two(np.array([60000.0], np.float16), 2.0)


# ---------------------------------------------------------------- tracebacks


def test_mx_sr_needs_rbits_of_xs_shape():
    with pytest.raises(ValueError, match=r"rounding='sr' needs rbits: .* shape \(2, 32\)"):
        mx.quantize(X, "mxfp4", rounding="sr")
    with pytest.raises(ValueError, match=r"rbits has shape \(5,\); it needs one value per element of x, "
                                         r"shape \(2, 32\)"):
        mx.quantize(X, "mxfp4", rounding="sr", rbits=np.zeros(5, np.uint32))
    with pytest.raises(ValueError, match=r"rbits has shape \(2, 64\); .* shape \(2, 40\)$"):  # not about padding
        mx.quantize(np.zeros((2, 40), np.float32), "mxfp4", pad=True, rounding="sr", rbits=np.zeros((2, 64), int))
    with pytest.raises(TypeError, match="rbits must be an integer array, not float64"):
        mx.quantize(X, "mxfp4", rounding="sr", rbits=np.zeros(X.shape))
    with pytest.raises(ValueError, match=r"rbits must be non-negative; index \(0, 3\) holds -1"):
        r = np.zeros(X.shape, np.int64)
        r[0, 3] = -1
        mx.quantize(X, "mxfp4", rounding="sr", rbits=r)
    with pytest.raises(ValueError, match="rbits is only used with rounding='sr'"):
        mx.quantize(X, "mxfp4", rbits=np.zeros(X.shape, np.uint32))
    # padded x with rbits of x's own shape works
    xp = np.ones((2, 40), np.float32) * 0.3
    q = mx.quantize(xp, "mxfp4", pad=True, rounding="sr", rbits=np.zeros((2, 40), np.uint32))
    assert q.codes.shape == (2, 64)


@pytest.mark.parametrize("kwargs,exc,msg", [
    ({"scheme": None}, TypeError, "scheme must be an MX scheme name"),
    ({"scheme": 4}, TypeError, "scheme must be an MX scheme name"),
    ({"block_size": 32.0}, TypeError, r"block_size must be an integer, not float \(32.0\)"),
    ({"block_size": True}, TypeError, r"block_size must be an integer, not bool"),
    ({"block_size": 0}, ValueError, "block_size must be at least 1, not 0"),
    ({"block_size": -32}, ValueError, "block_size must be at least 1"),
    ({"axis": 1.0}, TypeError, "axis must be an integer, not float"),
    ({"axis": 2}, ValueError, "axis 2 is out of range"),
    ({"axis": None}, TypeError, "axis must be an integer, not NoneType"),
    ({"scale_rule": None}, TypeError, "scale_rule must be one of"),
    ({"scale_rule": "round"}, ValueError, "unknown scale_rule 'round'"),
    ({"pad": 1}, TypeError, "pad must be True or False"),
    ({"flush_subnormals": "yes"}, TypeError, "flush_subnormals must be True or False"),
    ({"rounding": "nearest"}, ValueError, "unknown rounding mode 'nearest'"),
])
def test_mx_quantize_argument_errors(kwargs, exc, msg):
    kw = {"scheme": "mxfp4", **kwargs}
    with pytest.raises(exc, match=msg):
        mx.quantize(X, **kw)


def test_dequantize_and_to_gpt_oss_refuse_plain_arrays():
    for fn, name in ((mx.dequantize, "MXTensor"), (nvfp4.dequantize, "NVFP4Tensor"), (intq.dequantize, "IntTensor"),
                     (layout.to_gpt_oss, "MXTensor")):
        with pytest.raises(TypeError, match=f"q must be an {name} .*, not ndarray"):
            fn(X)
        with pytest.raises(TypeError, match=f"q must be an {name}"):
            fn(None)


@pytest.mark.parametrize("tile,exc", [(16, TypeError), ((16,), TypeError), ((2, 16), ValueError),
                                      ((16, 32), ValueError), ("1x16", TypeError), ((1.0, 16), TypeError)])
def test_nvfp4_tile_checked(tile, exc):
    with pytest.raises(exc, match="tile"):
        nvfp4.quantize(X, tile=tile)


def test_nvfp4_shapes_and_recipe():
    with pytest.raises(ValueError, match="last axis of x has length 20, not a multiple of the block size 16"):
        nvfp4.quantize(np.ones((3, 20), np.float32))
    assert "pad" not in str(pytest.raises(ValueError, nvfp4.quantize, np.ones(20, np.float32)).value)
    with pytest.raises(ValueError, match=r"16x16 tiles need x of 2 or more dimensions .* shape \(20, 32\)"):
        nvfp4.quantize(np.ones((20, 32), np.float32), tile=(16, 16))
    with pytest.raises(TypeError, match="recipe must be one of"):
        nvfp4.quantize(X, recipe=None)
    with pytest.raises(ValueError, match=r"rbits has shape \(3,\)"):
        nvfp4.quantize(X, rounding="sr", rbits=np.zeros(3, np.uint32))
    with pytest.raises(ValueError, match="beyond float32's range"):
        nvfp4.quantize(np.full((1, 16), 1e300))


def test_intq_arguments():
    with pytest.raises(TypeError, match="symmetric must be True or False"):
        intq.quantize(X, 4, symmetric="no")
    with pytest.raises(TypeError, match="group_size must be an integer"):
        intq.quantize(X, 4, group_size=16.0)
    with pytest.raises(ValueError, match="group_size must be at least 1, not 0"):
        intq.quantize(X, 4, group_size=0)
    with pytest.raises(TypeError, match="channel_axis must be an integer"):
        intq.quantize(X, 4, channel_axis=True)
    with pytest.raises(ValueError, match="length 32, not a multiple of the block size 5$"):
        intq.quantize(X, 4, group_size=5)
    with pytest.raises(TypeError, match="scale_dtype must be"):
        intq.quantize(X, 4, scale_dtype="nonsense")
    with pytest.raises(ValueError, match="scale_dtype must be float16, float32 or float64, not bfloat16"):
        intq.quantize(X, 4, scale_dtype=ml_dtypes.bfloat16)


def test_pack_fp4_on_0d_input():
    for fn in (layout.pack_fp4, layout.unpack_fp4, layout.pack_fp6, layout.unpack_fp6):
        with pytest.raises(ValueError, match="0-d input has no last axis"):
            fn(np.uint8(3))


def test_layout_argument_types():
    with pytest.raises(TypeError, match="order must be one of"):
        layout.pack_fp4(np.zeros(4, np.uint8), order=None)
    with pytest.raises(TypeError, match="pad must be True or False"):
        layout.pack_fp4(np.zeros(3, np.uint8), pad=1)
    with pytest.raises(TypeError, match="dense must be True or False"):
        layout.pack_fp6(np.zeros(4, np.uint8), dense=0)
    with pytest.raises(TypeError, match="scales must be integers"):
        layout.swizzle_scales(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="rows must be at least 0, not -1"):
        layout.unswizzle_scales(np.zeros(512, np.uint8), -1, 4)
    with pytest.raises(TypeError, match="cols must be an integer"):
        layout.unswizzle_scales(np.zeros(512, np.uint8), 128, 4.0)


def test_tampered_tensors():
    q = mx.quantize(X, "mxfp4")
    with pytest.raises(ValueError, match=r"q.scales has shape \(1, 1\); codes of shape \(2, 32\) in blocks of 32 "
                                         r"along axis 1 need \(2, 1\)"):
        mx.dequantize(dataclasses.replace(q, scales=q.scales[:1]))
    with pytest.raises(ValueError, match="q.scales has shape"):
        layout.to_gpt_oss(dataclasses.replace(q, scales=q.scales.reshape(-1)))
    with pytest.raises(ValueError, match=r"q.codes: value 16 at index \(0, 0\) does not fit in 4 bits"):
        c = q.codes.copy()
        c[0, 0] = 16
        mx.dequantize(dataclasses.replace(q, codes=c))
    with pytest.raises(ValueError, match="q.length must be"):
        mx.dequantize(dataclasses.replace(q, length=40))
    with pytest.raises(ValueError, match="q.axis must be"):
        mx.dequantize(dataclasses.replace(q, axis=5))
    with pytest.raises(TypeError, match="q.block_size must be an integer"):
        mx.dequantize(dataclasses.replace(q, block_size=32.0))
    n = nvfp4.quantize(np.tile(X, (8, 1)), tile=(16, 16))
    s = n.scales.copy()
    s[3, 0] ^= 1
    with pytest.raises(ValueError, match="repeated on each of the tile's 16 rows"):
        nvfp4.dequantize(dataclasses.replace(n, scales=s))
    with pytest.raises(ValueError, match=r"q.scales: value \d+ at index \(0, 0\) does not fit in 7 bits"):
        nvfp4.dequantize(dataclasses.replace(n, scales=n.scales | 0x80))
    with pytest.raises(ValueError, match="q.global_scale must be finite and not negative"):
        nvfp4.dequantize(dataclasses.replace(n, global_scale=np.float32(-1)))
    iq = intq.quantize(X, 4, group_size=8)
    with pytest.raises(ValueError, match=r"q.scale has shape \(2, 2\); codes of shape \(2, 32\) need \(2, 4\)"):
        intq.dequantize(dataclasses.replace(iq, scale=iq.scale[:, :2]))
    with pytest.raises(ValueError, match=r"q.codes: 9 at flat index 0 is outside -7..7"):
        c = iq.codes.copy()
        c[0, 0] = 9
        intq.dequantize(dataclasses.replace(iq, codes=c))


def test_mx_scalar_input_keeps_its_shape():
    q = mx.quantize(np.float32(0.75), "mxfp4", pad=True)
    assert q.codes.shape == (32,) and q.scales.shape == (1,)
    d = mx.dequantize(q)
    assert d.shape == () and float(d) == 0.75


def test_absurd_padding_refused():
    with pytest.raises(ValueError, match="block size 1099511627776 with pad=True would pad axis -1 from 32 to "
                                         "1099511627776 elements"):
        mx.quantize(X, "mxfp4", block_size=2**40, pad=True)
    # padding a short axis up to one ordinary block stays allowed
    q = mx.quantize(np.ones((3, 5), np.float32), "mxfp4", pad=True)
    assert q.codes.shape == (3, 32) and mx.dequantize(q).shape == (3, 5)


def test_effective_bits_arguments():
    with pytest.raises(ValueError, match="group_size must be at least 1, not 0"):
        schemes.effective_bits("nvfp4", group_size=0)
    with pytest.raises(ValueError, match="tensor_elements must be at least 1"):
        schemes.effective_bits("nvfp4", tensor_elements=0)
    with pytest.raises(TypeError, match="scheme must be a name"):
        schemes.effective_bits(None)
    with pytest.raises(ValueError, match="element_bits applies to MX schemes"):
        schemes.effective_bits("nvfp4", element_bits=8)
    with pytest.raises(TypeError, match="scale_bits must be an integer"):
        schemes.effective_bits("int4", group_size=32, scale_bits=16.0)


def test_block_engine_checks():
    b = split(X, block=8)
    assert isinstance(b, Blocks)
    with pytest.raises(ValueError, match="merge: 3 values"):
        merge(np.zeros(3), b)
    with pytest.raises(TypeError, match="b must be the Blocks"):
        merge(np.zeros(64), X)
    with pytest.raises(ValueError, match="scales_to_layout: 3 values for 8 blocks"):
        scales_to_layout(np.zeros(3), b)
    with pytest.raises(ValueError, match=r"scales have shape \(8,\)"):
        scales_from_layout(np.zeros(8), b)
    with pytest.raises(ValueError, match="row_max: expected a 2-D"):
        row_max(np.zeros(3))
    with pytest.raises(ValueError, match="block_amax: expected a 2-D"):
        block_amax(np.zeros(3))
    with pytest.raises(TypeError, match="x: block size must be an integer"):
        split(X, block=8.0)
    with pytest.raises(ValueError, match="scale_codes: amax .* is negative"):
        mx.scale_codes(np.array([-1.0]), "e4m3")
    with pytest.raises(ValueError, match="not an MX element format"):
        mx.scale_codes(np.array([1.0]), "int8")
    with pytest.raises(ValueError, match="round_half_even_div: s must be positive"):
        intq.round_half_even_div(np.array([1.0]), np.array([0.0]))


# ---------------------------------------------------------------- fmtsim ver: input as devices write it

ROOT = Path(__file__).resolve().parent.parent
VEC = ROOT / "vectors"
ENC = "f32_to_e4m3.rne.satfinite.encode_ties.tv"
SR = "f32_to_e2m1.sr.satfinite.modes.tv"
DEC = "e4m3_to_f32.decode_all.tv"


def _ver(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(["ver", *argv])
        except SystemExit as e:  # argparse
            rc = int(e.code or 0)
    return rc, out.getvalue(), err.getvalue()


def _rows(name: str) -> list[list[str]]:
    return [ln.split() for ln in (VEC / name).read_text().splitlines()]


def test_ver_crlf_trailing_blanks_and_lower_case(tmp_path):
    p = tmp_path / "dev.tv"
    p.write_bytes("".join(" ".join(r).lower() + "  \t\r\n" for r in _rows(ENC)).encode())
    rc, out, _ = _ver(ENC, str(p), "--vectors", str(VEC))
    assert rc == 0 and " 0 failed" in out
    rows = _rows(SR)  # two operands (input, rbits), lower case
    p.write_bytes("".join(" ".join(r).lower() + "\r\n" for r in rows).encode())
    assert _ver(SR, str(p), "--vectors", str(VEC))[0] == 0


def test_ver_lines_without_flags_need_ignore_flags(tmp_path):
    p = tmp_path / "dev.tv"
    rows = _rows(ENC)
    p.write_text("".join(f"{r[0]} {r[1]}\n" for r in rows))
    rc, out, _ = _ver(ENC, str(p), "--vectors", str(VEC), "--ignore-flags")
    assert rc == 0 and f"{len(rows)} cases, {len(rows)} passed" in out
    rc, _, err = _ver(ENC, str(p), "--vectors", str(VEC))
    assert rc == 2 and f"{p}: line 1: 2 fields, expected 3 (input code flags)" in err and "--ignore-flags" in err
    # a wrong code in a flag-less line is reported with the decoded fields
    bad = [f"{r[0]} {r[1]}" for r in rows]
    bad[4] = f"{rows[4][0]} {int(rows[4][1], 16) ^ 1:02x}"
    p.write_text("\n".join(bad) + "\n")
    rc, out, _ = _ver(ENC, str(p), "--vectors", str(VEC), "--ignore-flags")
    assert rc == 1 and f"line 5: input f32:0x{int(rows[4][0], 16):08x} (" in out and "sign" in out and "1 failed" in out


def test_ver_binary_file_for_a_tv_check(tmp_path):
    p = tmp_path / "garbage.dat"
    p.write_bytes(bytes([0xFF, 0xFE, 0x00, 0x80]) * 5)
    rc, out, err = _ver(ENC, str(p), "--vectors", str(VEC))
    assert rc == 2 and err.startswith(f"fmtsim: error: {p}: neither text result lines (byte 0xff at offset 0")
    assert "Traceback" not in err and err.count("\n") == 1


def test_ver_corrupt_manifest(tmp_path):
    d = tmp_path / "vec"
    shutil.copytree(VEC, d)
    m = d / "manifest.json"
    dev = tmp_path / "dev.tv"
    dev.write_text((VEC / ENC).read_text())
    for content, words in ((b"{ not json", "not valid JSON"), (b"\xff\xfe{}", "not UTF-8"),
                           (b"[1, 2]", "not a vectors manifest"), (b'{"files": {"x.tv": 3}}', "not a vectors manifest"),
                           (json.dumps({"files": {ENC: {"operation": "encode"}}}).encode(), f"entry {ENC!r} lacks"),
                           (json.dumps({"files": {"a.bin": {"operation": "mx_quantize", "arrays": [1]}}}).encode(),
                            "entry 'a.bin' lacks")):
        m.write_bytes(content)
        rc, _, err = _ver(ENC, str(dev), "--vectors", str(d))
        assert rc == 2 and f"{m}" in err and words in err, (content, err)
    m.unlink()
    rc, _, err = _ver(ENC, str(dev), "--vectors", str(d))
    assert rc == 2 and "manifest.json" in err


def test_ver_all_missing_dir(tmp_path):
    rc, _, err = _ver("all", str(tmp_path / "nope"), "--vectors", str(VEC))
    assert rc == 2 and f"{tmp_path / 'nope'}: no such directory" in err
    f = tmp_path / "file"
    f.write_text("x")
    rc, _, err = _ver("all", str(f), "--vectors", str(VEC))
    assert rc == 2 and "is not a directory" in err
    rc, _, err = _ver("all", "--vectors", str(VEC))
    assert rc == 2 and "needs DIR" in err


def _codes(name: str) -> np.ndarray:
    return np.array([int(r[-2], 16) for r in _rows(name)], np.uint8)


def _results(name: str) -> np.ndarray:
    """The expected results as a device would dump them: codes, or float32 bits for decode files."""
    if "decode" in name:
        return np.array([int(r[1], 16) for r in _rows(name)], "<u4")
    return _codes(name)


@pytest.mark.parametrize("name", [ENC, SR, "e5m2_to_e4m3.rne.satfinite.fmt2fmt.tv"])
def test_ver_raw_arrays_of_codes(tmp_path, name):
    codes = _codes(name)
    rows = _rows(name)
    n_ops = len(rows[0]) - 2
    for fname, write in (("dev.npy", lambda p, c: np.save(p, c)), ("dev.out", lambda p, c: p.write_bytes(c.tobytes())),
                         ("dev.bin", lambda p, c: p.write_bytes(c.tobytes())),
                         ("dev16.npy", lambda p, c: np.save(p, c.astype(np.int16).reshape(1, -1)))):
        p = tmp_path / fname
        write(p, codes)
        rc, out, err = _ver(name, str(p), "--vectors", str(VEC))
        assert rc == 0, err
        assert "flags not compared" in out
        bad = codes.copy()
        bad[7] ^= 1
        write(p, bad)
        rc, out, _ = _ver(name, str(p), "--vectors", str(VEC))
        e = rows[7]
        # the input as the bit pattern 'fmtsim encode' reads: float32 bits, or the source format's code
        given = f"e5m2:0x{int(e[0], 16):02x} (" if name.startswith("e5m2_") else f"f32:0x{int(e[0], 16):08x} ("
        assert rc == 1 and f"case 8: input {given}" in out and "1 failed" in out
        if n_ops == 2:
            assert f") rbits 0x{int(e[1], 16):08X}: expected " in out
        fmt = fmtsim.get_format(name.split("_to_")[1].split(".")[0])
        if fmt.kind == "float":
            s_, e_, m_ = fmt.code_fields(int(bad[7]))
            assert f"got 0x{int(bad[7]):02X} (sign {s_}, exp {e_}, man {m_}," in out


def test_ver_raw_arrays_wrong_size_or_type(tmp_path):
    n = len(_rows(ENC))
    p = tmp_path / "dev.bin"
    p.write_bytes(bytes(n - 1))
    rc, _, err = _ver(ENC, str(p), "--vectors", str(VEC))
    assert rc == 2 and f"{p}: a raw array of {n - 1} bytes for {n} cases" in err
    p = tmp_path / "dev.npy"
    np.save(p, np.zeros(n, np.float32))
    rc, _, err = _ver(ENC, str(p), "--vectors", str(VEC))
    assert rc == 2 and "a .npy array of float32; expected integer codes" in err
    np.save(p, np.full(n, 300, np.int32))
    rc, _, err = _ver(ENC, str(p), "--vectors", str(VEC))
    assert rc == 2 and "value 300 at index 0 is not a code" in err
    np.save(p, np.zeros(n + 1, np.uint8))
    rc, _, err = _ver(ENC, str(p), "--vectors", str(VEC))
    assert rc == 2 and f"({n + 1} values) for {n} cases" in err
    p.write_bytes(b"\x93NUMPY\x01\x00garbage")
    rc, _, err = _ver(ENC, str(p), "--vectors", str(VEC))
    assert rc == 2 and "not a readable .npy file" in err


def test_result_kind_rules():
    from fmtsim.conformance.vectors import result_kind

    assert result_kind(bytes(5), 5, 1) == "raw"  # one byte per code: never text
    assert result_kind(b"0 0\n" * 3, 3, 4) == "text"  # 4 bytes per case that read as 3 text lines
    assert result_kind(bytes(12), 3, 4) == "raw"
    assert result_kind(b"\x93NUMPY" + bytes(20), 3, 1) == "npy"
    assert result_kind(b"00 01 00\n", 3, 1, "dev.u8") == "raw"  # the name decides
    assert result_kind(b"00 01 00\n", 3, 1, "dev.tv") == "text"


def test_mx_element_format_of_a_tampered_scheme():
    q = mx.quantize(X, "mxfp4")
    with pytest.raises(ValueError, match="unknown MX scheme 'nope'"):
        _ = dataclasses.replace(q, scheme="nope").element_format
    with pytest.raises(TypeError, match="scheme must be an MX scheme name"):
        _ = dataclasses.replace(q, scheme=None).element_format


def test_ver_decode_file_as_float32_array(tmp_path):
    bits = np.array([int(r[1], 16) for r in _rows(DEC)], np.uint32)
    p = tmp_path / "dev.npy"
    np.save(p, bits.view(np.float32))
    assert _ver(DEC, str(p), "--vectors", str(VEC))[0] == 0
    p = tmp_path / "dev.raw"
    bits2 = bits.copy()
    bits2[0x38] ^= 1
    p.write_bytes(bits2.astype("<u4").tobytes())
    rc, out, _ = _ver(DEC, str(p), "--vectors", str(VEC))
    assert rc == 1 and "case 57: code 0x38: expected f32:0x3f800000 (1), got f32:0x3f800001 (1.0000001192092896)" in out


# ---------------------------------------------------------------- hypothesis: wrong types, shapes, ranges, dtypes
#
# Each test draws a call: every argument from a plausible strategy, and then (in about
# half of the examples) one argument, chosen at random, replaced by GARBAGE: a value of
# the wrong type, shape, range or dtype. Exactly two outcomes are accepted: a result
# that passes the function's own invariants, or a TypeError/ValueError with a non-empty
# message. Anything else (AttributeError, IndexError, MemoryError, AssertionError, a
# broadcast error deep in numpy...) fails the test.

API_EXAMPLES = examples(150)  # per public function below (a quarter outside --full)
VER_EXAMPLES = examples(100)  # per `fmtsim ver` test below (likewise)

_SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)


def _viewed(base: Any, dt: Any) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(base, _SHAPES).map(lambda a: a.view(dt))


GARBAGE_ARRAYS = st.one_of(
    hnp.arrays(st.sampled_from([np.float16, np.float32, np.float64, np.int8, np.uint8, np.int32, np.int64,
                                np.uint64, np.bool_, np.complex64]), _SHAPES),
    _viewed(np.uint16, ml_dtypes.bfloat16),
    _viewed(np.uint8, ml_dtypes.float8_e4m3fn),
    _viewed(np.uint8, ml_dtypes.float8_e4m3fnuz),
    st.builds(lambda n: np.array(["a"] * n), st.integers(0, 3)),
    st.builds(lambda n: np.array([object()] * n, dtype=object), st.integers(0, 3)),
)
GARBAGE = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=6),
    st.binary(max_size=4), st.lists(st.integers(-3, 40), max_size=4), st.tuples(st.integers(0, 20), st.integers(0, 20)),
    st.sampled_from([np.float32(1.5), np.int64(3), np.bool_(True), np.uint8(7), 32.0, -1, 0, 2**40, 1j]),
    GARBAGE_ARRAYS,
)


def _either(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """good or bad, even odds (st.one_of would weigh each of GARBAGE's branches like good)."""
    return st.booleans().flatmap(lambda ok: good if ok else bad)


@st.composite
def _call(draw: Any, **good: st.SearchStrategy[Any]) -> dict[str, Any]:
    """Keyword arguments: all plausible, or (half the time) one of them garbage."""
    bad = draw(st.one_of(st.none(), st.sampled_from(sorted(good))))
    return {name: draw(GARBAGE if name == bad else s) for name, s in good.items()}


_FLOAT_IN = st.sampled_from([np.float16, np.float32, np.float64, ml_dtypes.bfloat16])


@st.composite
def _block_arrays(draw: Any, multiple: int = 32, max_rows: int = 4) -> np.ndarray:
    """Float arrays whose last axis is often a multiple of ``multiple``; any values incl. NaN/Inf."""
    dt = draw(_FLOAT_IN)
    lead = draw(st.lists(st.integers(0, max_rows), max_size=2))
    k = draw(st.one_of(st.integers(0, 3).map(lambda n: n * multiple), st.integers(0, 70)))
    shape = (*lead, k)
    elems = st.one_of(st.floats(-1e6, 1e6, width=32), st.sampled_from([0.0, -0.0, np.nan, np.inf, -np.inf,
                                                                       1e-40, 3.4e38, 1e300]))
    with np.errstate(over="ignore", invalid="ignore"):
        return np.array(draw(hnp.arrays(np.float64, shape, elements=elems)), dtype=np.float64).astype(dt)


def _finite(a: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return np.nan_to_num(a.astype(np.float64), nan=1.0, posinf=7.0, neginf=-7.0).astype(a.dtype)


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """fn's result, or None when it raised TypeError/ValueError with a message."""
    try:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    except (TypeError, ValueError) as e:
        assert str(e).strip(), f"{type(e).__name__} without a message"
        return None


def _check_mx(q: mx.MXTensor, x: Any) -> None:
    assert q.codes.dtype == np.uint8 and q.scales.dtype == np.uint8
    assert int(q.codes.max(initial=0)) < 1 << q.element_format.bits
    b = mx.check_tensor(q)  # fields agree
    assert q.scales.shape == scale_shape(b)
    shape = np.shape(x) or (1,)
    assert q.codes.shape[: q.axis] + q.codes.shape[q.axis + 1:] == shape[: q.axis] + shape[q.axis + 1:]
    for dt in (np.float64, np.float32, ml_dtypes.bfloat16):
        d = mx.dequantize(q, dt)
        assert d.dtype == dt and d.shape == np.shape(x)
    # every block with scale 0xFF decodes to NaN, and only those; finite blocks decode exactly to a value
    # of at most max_elem * 2^(scale - 127)
    d = mx.dequantize(q, np.float64).reshape(shape)
    idx = np.arange(shape[q.axis]) // q.block_size  # the block of each element along the axis
    nan_blocks = np.take(q.scales == mx.E8M0_NAN, idx, axis=q.axis)
    assert np.array_equal(np.isnan(d), nan_blocks)
    top = np.take(np.ldexp(float(q.element_format.max_finite), q.scales.astype(np.int32) - 127), idx, axis=q.axis)
    with np.errstate(invalid="ignore"):
        assert np.all(nan_blocks | (np.abs(d) <= top))


_ROUNDINGS = st.sampled_from(["rne", "rna", "rtz", "rup", "rdn", "sr"])


def _rbits_for(x: Any) -> Any:
    if not isinstance(x, np.ndarray):
        return np.zeros(3, np.uint32)
    n = np.arange(x.size, dtype=np.uint64)
    return (n * np.uint64(2654435761) % np.uint64(2**32)).astype(np.uint32).reshape(x.shape)


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(x=_block_arrays(), scheme=st.sampled_from(list(mx.SCHEMES) + ["mxfp8", "MXFP4"]),
                axis=st.sampled_from([-1, -1, 0, 1, -2]), block_size=st.sampled_from([32, 32, 16, 8, 1, 2**40]),
                scale_rule=st.sampled_from(mx.SCALE_RULES), rounding=_ROUNDINGS, pad=st.booleans(),
                flush_subnormals=st.booleans(), rbits=st.just("auto")))
def test_hyp_mx_quantize(kw):
    if isinstance(kw["rbits"], str):  # the plausible rbits: one per element when rounding is sr
        kw["rbits"] = _rbits_for(kw["x"]) if isinstance(kw["rounding"], str) and kw["rounding"] == "sr" else None
    x = kw.pop("x")
    q = _outcome(mx.quantize, x, **kw)
    if q is not None:
        _check_mx(q, x)


_MX = mx.quantize(np.linspace(-9, 9, 128).reshape(2, 64), "mxfp4", pad=False)
_MXP = mx.quantize(np.linspace(-9, 9, 80).reshape(2, 40), "mxfp8_e5m2", pad=True)
_NV = nvfp4.quantize(np.linspace(-9, 9, 512).reshape(16, 32), tile=(16, 16))
_IQ = intq.quantize(np.linspace(-9, 9, 64).reshape(2, 32), 4, group_size=8)


@st.composite
def _tampered(draw: Any, *qs: Any) -> Any:
    """One of ``qs`` as it is, or with one field replaced by garbage or another field's value."""
    q = draw(st.sampled_from(qs))
    if draw(st.booleans()):
        names = [f.name for f in dataclasses.fields(q)]
        name = draw(st.sampled_from(names))
        value = draw(st.one_of(GARBAGE, st.sampled_from([getattr(q, n) for n in names])))
        q = dataclasses.replace(q, **{name: value})
    return q


_DTYPES = st.sampled_from([np.float32, np.float64, np.float16, ml_dtypes.bfloat16, "float32"])


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(q=_tampered(_MX, _MXP), dtype=_DTYPES))
def test_hyp_mx_dequantize(kw):
    q = kw["q"]
    d = _outcome(mx.dequantize, **kw)
    if d is not None:
        assert d.dtype == np.dtype(kw["dtype"]) and d.shape[q.axis] == q.length
        if q is _MX or q is _MXP:
            assert np.array_equal(d.astype(np.float64), mx.dequantize(q, np.float64).astype(kw["dtype"])
                                  .astype(np.float64), equal_nan=True)


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(q=_either(_tampered(_MX, _MXP), GARBAGE))
def test_hyp_mx_check_tensor_and_to_gpt_oss(q):
    b = _outcome(mx.check_tensor, q)
    if b is not None:
        assert np.shape(q.scales) == scale_shape(b)
    r = _outcome(layout.to_gpt_oss, q)
    if r is not None:
        blocks, scales = r
        back = layout.from_gpt_oss(blocks, scales)
        assert np.array_equal(back.codes, q.codes) and np.array_equal(back.scales, q.scales)


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(amax=hnp.arrays(st.sampled_from([np.float32, np.float64]), _SHAPES, elements=st.floats(0, width=32)),
                elem=st.sampled_from(list(mx.SCHEMES.values())), rule=st.sampled_from(mx.SCALE_RULES)))
def test_hyp_mx_scale_codes(kw):
    c = _outcome(mx.scale_codes, **kw)
    if c is not None:
        assert c.dtype == np.uint8 and c.shape == np.shape(kw["amax"])
        a = np.asarray(kw["amax"])
        assert np.all(c[~np.isfinite(a)] == 0xFF)  # (finite ones above 2^127 may give 0xFF too)
        assert np.array_equal(c, mx.scale_codes(a.astype(np.float64), kw["elem"], kw["rule"])) or kw["rule"] in (
            "rceil", "ceil")  # float32 and float64 amax agree except where float32 rounding or subnormals differ


def _check_nv(q: nvfp4.NVFP4Tensor, x: Any) -> None:
    assert q.codes.dtype == np.uint8 and int(q.codes.max(initial=0)) <= 15
    assert q.scales.dtype == np.uint8 and int(q.scales.max(initial=0)) <= 0x7F
    assert q.codes.shape == np.shape(x)
    assert np.isfinite(q.global_scale) and q.global_scale >= 0
    for dt in (np.float64, np.float32, ml_dtypes.bfloat16):
        assert nvfp4.dequantize(q, dt).shape == np.shape(x)


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(x=_block_arrays(16, 33).map(_finite), tile=st.sampled_from([(1, 16), (16, 16), [16, 16]]),
                recipe=st.sampled_from(nvfp4.RECIPES),
                global_scale=st.one_of(st.none(), st.floats(3e-39, 1e38), st.just(np.array([0.5], np.float32))),
                rounding=_ROUNDINGS, rbits=st.just("auto")))
def test_hyp_nvfp4_quantize(kw):
    if isinstance(kw["rbits"], str):
        kw["rbits"] = _rbits_for(kw["x"]) if isinstance(kw["rounding"], str) and kw["rounding"] == "sr" else None
    x = kw.pop("x")
    q = _outcome(nvfp4.quantize, x, **kw)
    if q is not None:
        _check_nv(q, x)


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(q=_tampered(_NV), dtype=_DTYPES))
def test_hyp_nvfp4_dequantize(kw):
    d = _outcome(nvfp4.dequantize, **kw)
    if d is not None:
        assert d.dtype == np.dtype(kw["dtype"]) and d.shape == kw["q"].codes.shape


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(value=st.one_of(st.floats(), st.floats(1e-38, 1e38)),
                convention=st.sampled_from(["multiplier", "divisor"])), forward=st.booleans())
def test_hyp_nvfp4_global_scale_conversions(kw, forward):
    fn = nvfp4.global_scale_to_stored if forward else nvfp4.global_scale_from_stored
    g = _outcome(fn, kw["value"], kw["convention"])
    if g is not None:
        assert isinstance(g, np.float32) and np.isfinite(g) and g >= 0
        v = np.float32(np.asarray(kw["value"]).reshape(-1)[0])
        assert g == (np.float32(np.float32(1) / v) if kw["convention"] == "divisor" else v)


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(x=_block_arrays(8).map(_finite), bits=st.integers(1, 9), symmetric=st.booleans(),
                channel_axis=st.one_of(st.none(), st.none(), st.integers(-2, 1)),
                group_size=st.one_of(st.none(), st.sampled_from([8, 16, 32, 3])), axis=st.sampled_from([-1, 0, 1]),
                scale_dtype=st.sampled_from([np.float16, np.float32, np.float64])))
def test_hyp_intq_quantize(kw):
    x = kw["x"]
    q = _outcome(intq.quantize, **kw)
    if q is None:
        return
    bits, symmetric = kw["bits"], kw["symmetric"]
    lo, hi = (-(2 ** (bits - 1) - 1), 2 ** (bits - 1) - 1) if symmetric else (0, 2**bits - 1)
    assert q.codes.shape == np.shape(x)
    assert q.codes.size == 0 or (lo <= q.codes.min() and q.codes.max() <= hi)
    assert np.all(np.isfinite(q.scale)) and np.all(q.scale > 0)
    d = intq.dequantize(q, np.float64)
    assert d.shape == np.shape(x)
    # each value is within half a step of its dequantized value unless clamped at the range's end
    s = np.broadcast_to(np.asarray(q.scale, np.float64), d.shape) if q.group_size is None else \
        np.repeat(np.asarray(q.scale, np.float64), q.group_size, axis=q.axis)
    err = np.abs(np.asarray(x, np.float64) - d)
    clamped = (q.codes == lo) | (q.codes == hi)
    assert np.all((err <= s / 2 * (1 + 2.0**-40)) | clamped)  # s / 2 exactly on a tie; float64 arithmetic here


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(q=_tampered(_IQ), dtype=_DTYPES))
def test_hyp_intq_dequantize(kw):
    d = _outcome(intq.dequantize, **kw)
    if d is not None:
        assert d.dtype == np.dtype(kw["dtype"]) and d.shape == kw["q"].codes.shape


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(x=hnp.arrays(np.float64, _SHAPES, elements=st.floats(-1e6, 1e6)),
                s=hnp.arrays(np.float64, _SHAPES, elements=st.floats(1e-3, 1e3))))
def test_hyp_round_half_even_div(kw):
    k = _outcome(intq.round_half_even_div, **kw)
    if k is not None:
        xs = np.asarray(kw["x"], np.float64) / np.asarray(kw["s"], np.float64)
        assert np.all(k == np.round(k)) and np.all(np.abs(k - xs) <= 0.5 + 1e-9 * np.abs(xs))


_CODES = hnp.arrays(st.sampled_from([np.uint8, np.int32, np.int64]), hnp.array_shapes(min_dims=1, max_dims=3,
                                                                                      max_side=9),
                    elements=st.integers(0, 15))


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(codes=_CODES, order=st.sampled_from(["low_first", "high_first"]), pad=st.booleans()),
       length=st.one_of(st.none(), st.integers(-2, 20), GARBAGE))
def test_hyp_pack_unpack_fp4(kw, length):
    p = _outcome(layout.pack_fp4, **kw)
    codes, order = kw["codes"], kw["order"]
    if p is not None:
        c = np.asarray(codes)
        assert p.dtype == np.uint8 and p.shape[-1] == -(-c.shape[-1] // 2)
        assert np.array_equal(layout.unpack_fp4(p, order=order, length=c.shape[-1]), c)
    u = _outcome(layout.unpack_fp4, codes, order=order, length=length)
    if u is not None:
        n = 2 * np.shape(codes)[-1]
        assert u.dtype == np.uint8 and u.shape[-1] in (n, n - 1) and int(u.max(initial=0)) <= 15


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(codes=_CODES.map(lambda a: a * 4), dense=st.booleans(), pad=st.booleans()),
       length=st.one_of(st.none(), st.integers(-2, 20), GARBAGE))
def test_hyp_pack_unpack_fp6(kw, length):
    p = _outcome(layout.pack_fp6, **kw)
    codes, dense = kw["codes"], kw["dense"]
    if p is not None:
        c = np.asarray(codes)
        assert p.dtype == np.uint8
        assert np.array_equal(layout.unpack_fp6(p, dense=dense, length=c.shape[-1]), c)
    u = _outcome(layout.unpack_fp6, codes, dense=dense, length=length)
    if u is not None:
        assert u.dtype == np.uint8 and int(u.max(initial=0)) < 64


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(s=hnp.arrays(np.uint8, hnp.array_shapes(min_dims=2, max_dims=2, max_side=200)),
                rows=st.integers(0, 300), cols=st.integers(0, 9), swizzled=st.just("auto")))
def test_hyp_swizzle(kw):
    s = kw["s"]
    z = _outcome(layout.swizzle_scales, s)
    if z is not None:
        r, c = np.shape(s)
        assert z.size == -(-r // 128) * 128 * -(-c // 4) * 4
        assert np.array_equal(layout.unswizzle_scales(z, r, c), s)
    sw = kw["swizzled"]
    if isinstance(sw, str):  # plausible: a swizzled matrix of about the size the rows and cols need
        rows, cols = kw["rows"] if isinstance(kw["rows"], int) else 1, kw["cols"] if isinstance(kw["cols"], int) else 1
        sw = np.zeros(min(max(0, -(-rows // 128) * 128 * -(-cols // 4) * 4), 1 << 20), np.uint8)
    u = _outcome(layout.unswizzle_scales, sw, kw["rows"], kw["cols"])
    if u is not None:
        assert u.shape == (kw["rows"], kw["cols"])


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(blocks=hnp.arrays(np.uint8, st.sampled_from([(2, 3, 16), (0, 1, 16), (3, 16)])),
                scales=hnp.arrays(np.uint8, st.sampled_from([(2, 3), (0, 1), (3,)]))))
def test_hyp_from_gpt_oss(kw):
    q = _outcome(layout.from_gpt_oss, **kw)
    if q is not None:
        _check_mx(q, np.zeros(q.codes.shape))
        assert all(np.array_equal(a, b) for a, b in zip(layout.to_gpt_oss(q), (kw["blocks"], kw["scales"]),
                                                         strict=True))


_FP8 = hnp.arrays(np.uint8, _SHAPES)


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(codes=st.one_of(_FP8, _FP8.map(lambda a: a.view(ml_dtypes.float8_e4m3fn)),
                                _FP8.map(lambda a: a.view(ml_dtypes.float8_e5m2fnuz))),
                fmt=st.sampled_from(["e4m3", "e5m2", "float8_e4m3fn"]),
                choice=st.sampled_from([None, "nan", "max", "ocp_max", "inf"])), forward=st.booleans())
def test_hyp_fnuz_conversions(kw, forward):
    if forward:
        r = _outcome(fnuz.ocp_to_fnuz, kw["codes"], kw["fmt"], inf=kw["choice"])
    else:
        r = _outcome(fnuz.fnuz_to_ocp, kw["codes"], kw["fmt"], unrepresentable=kw["choice"])
    if r is not None:
        out, mult, rep = r
        assert out.dtype == np.uint8 and out.shape == np.shape(kw["codes"]) and mult == (2.0 if forward else 0.5)
        assert rep.elements == out.size


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(scale=hnp.arrays(st.sampled_from([np.float16, np.float32, np.float64]), _SHAPES),
                factor=st.sampled_from([2, 2.0, 0.5, 4, 0.25, 2.0**-20])))
def test_hyp_scale_by_power_of_two(kw):
    out = _outcome(fnuz.scale_by_power_of_two, **kw)
    if out is not None:
        a = np.asarray(kw["scale"], np.float64)
        assert out.dtype == np.asarray(kw["scale"]).dtype and out.shape == np.shape(kw["scale"])
        assert np.all(np.isnan(a) | (out.astype(np.float64) == a * float(kw["factor"])))


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(scheme=st.sampled_from(["mxfp4", "nvfp4", "int4", "uint8", "mxfp8_e5m2", "int0"]),
                group_size=st.one_of(st.none(), st.integers(-1, 256)),
                scale_bits=st.one_of(st.none(), st.integers(-1, 32)),
                element_bits=st.one_of(st.none(), st.none(), st.integers(0, 16)), zero_point_bits=st.integers(-1, 8),
                tensor_elements=st.one_of(st.none(), st.integers(0, 10**6))))
def test_hyp_effective_bits(kw):
    b = _outcome(schemes.effective_bits, **kw)
    if b is not None:
        assert isinstance(b, float) and np.isfinite(b) and b >= 1


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(x=_block_arrays(8), axis=st.sampled_from([-1, 0, 1]),
                block=st.one_of(st.none(), st.sampled_from([8, 4, 3, 2**40])), rows=st.sampled_from([1, 1, 2]),
                channel_axis=st.one_of(st.none(), st.none(), st.integers(-2, 2)), pad=st.booleans()))
def test_hyp_block_engine(kw):
    x = kw.pop("x")
    b = _outcome(split, x, **kw)
    if b is None:
        return
    back = merge(b.data, b)
    assert back.shape == (np.shape(x) or (1,))
    xa = np.asarray(x).reshape(back.shape)
    assert back.dtype == xa.dtype
    if xa.dtype == object:
        assert np.array_equal(back, xa)
    else:  # bit for bit (NaN payloads included)
        assert np.array_equal(np.ascontiguousarray(back).view(np.uint8), np.ascontiguousarray(xa).view(np.uint8))
    per = np.arange(b.n_blocks)
    lay = scales_to_layout(per, b)
    assert lay.shape == scale_shape(b)
    assert np.array_equal(scales_from_layout(lay, b), per)
    am = _outcome(block_amax, b.data)
    if am is not None:
        assert am.shape == (b.n_blocks,)


@settings(max_examples=API_EXAMPLES, deadline=None)
@given(kw=_call(a=hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=2, max_side=9)),
                flat=hnp.arrays(np.float32, st.just(16)), scales=hnp.arrays(np.uint8, st.just((2, 2)))))
def test_hyp_block_helpers(kw):
    a, flat, scales = kw["a"], kw["flat"], kw["scales"]
    b = split(np.zeros((2, 8)), block=4)
    for fn, args in ((row_max, (a,)), (block_amax, (a,)), (merge, (flat, b)), (scales_to_layout, (scales, b)),
                     (scales_from_layout, (scales, b)), (merge, (b.data, a)), (scale_shape, (a,))):
        r = _outcome(fn, *args)
        if r is not None and fn in (row_max, block_amax):
            assert r.shape == (np.shape(a)[0],)
            if np.shape(a)[1]:
                with np.errstate(invalid="ignore"):
                    want = np.max(np.abs(a) if fn is block_amax else a, axis=1)
                assert np.array_equal(r, want, equal_nan=True)


# ---------------------------------------------------------------- hypothesis: garbage for `fmtsim ver`

_VER_NAMES = [ENC, SR, DEC, "e4m3_to_e2m1.rne.satfinite.fmt2fmt.tv", "mxfp4.floor.rne.block_mx.bin",
              "fp4_pack.low_first.layout.bin"]


def _assert_clean(rc: int, out: str, err: str) -> None:
    assert rc in (0, 1, 2), rc
    assert "Traceback" not in out + err
    if rc == 2:
        assert err.startswith("fmtsim: error: ") and err.count("\n") == 1 and len(err) > 16, err
    else:
        assert err == "", err


@st.composite
def _mutated_text(draw: Any, name: str) -> bytes:
    """The vector file's own lines, mutated the ways device output goes wrong."""
    rows = [r[:] for r in _rows(name)[:40]] if name.endswith(".tv") else [["00", "00", "00"]]
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(rows) - 1))
        how = draw(st.sampled_from(["drop_field", "add_field", "lower", "garbage", "swap", "delete", "code"]))
        if how == "drop_field" and rows[i]:
            rows[i].pop()
        elif how == "add_field":
            rows[i].append(draw(st.text("0123456789abcdefXZ \t", min_size=1, max_size=9)))
        elif how == "lower":
            rows[i] = [f.lower() for f in rows[i]]
        elif how == "garbage":
            rows[i] = draw(st.lists(st.text(max_size=5), max_size=4))
        elif how == "swap":
            j = draw(st.integers(0, len(rows) - 1))
            rows[i], rows[j] = rows[j], rows[i]
        elif how == "delete" and len(rows) > 1:
            rows.pop(i)
        elif how == "code" and len(rows[i]) >= 2:
            rows[i][-2] = format(draw(st.integers(0, 2**20)), "X")
    end = draw(st.sampled_from(["\n", "\r\n", " \n", "\r"]))
    text = "".join(" ".join(r) + end for r in rows)
    return text.encode("utf-8", "surrogatepass") if draw(st.booleans()) else text.encode("utf-8", "replace")


def _npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


_RESULT_BRANCHES = (
    st.binary(max_size=300),
    st.sampled_from(_VER_NAMES).flatmap(_mutated_text),
    GARBAGE_ARRAYS.filter(lambda a: a.dtype != object).map(_npy_bytes),
    st.sampled_from([ENC, SR, DEC]).flatmap(lambda n: st.integers(-1, 1).map(
        lambda d: np.resize(_results(n), max(0, len(_rows(n)) + d)).tobytes())),  # raw, one result each, +-1
    st.sampled_from([ENC, DEC]).flatmap(lambda n: st.sampled_from([np.uint8, np.int64, np.float32]).map(
        lambda dt: _npy_bytes(_results(n).astype(dt)))),
    hnp.arrays(np.uint8, st.integers(0, 600)).map(lambda a: a.tobytes()),
    st.binary(max_size=40).map(lambda b: b"\x93NUMPY" + b),
)
_RESULT_FILES = st.integers(0, len(_RESULT_BRANCHES) - 1).flatmap(lambda i: _RESULT_BRANCHES[i])


@settings(max_examples=VER_EXAMPLES, deadline=None)
@given(name=st.sampled_from(_VER_NAMES), data=_RESULT_FILES,
       suffix=st.sampled_from([".tv", ".npy", ".bin", ".txt", ""]),
       opts=st.lists(st.sampled_from(["--ignore-flags", "--check-nans"]), unique=True),
       errors=st.integers(-2, 30))
def test_hyp_ver_garbage_results(tmp_path_factory, name, data, suffix, opts, errors):
    p = tmp_path_factory.mktemp("ver") / f"result{suffix}"
    p.write_bytes(data)
    rc, out, err = _ver(name, str(p), "--vectors", str(VEC), "--errors", str(errors), *opts)
    _assert_clean(rc, out, err)


@settings(max_examples=VER_EXAMPLES, deadline=None)
@given(manifest=st.one_of(st.binary(max_size=200), st.recursive(
           st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
           lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.sampled_from(
               ["files", ENC, "format", "name", "operation", "line", "arrays", "dtype", "shape", "offset",
                "nbytes", "e4m3", "encode"]), c, max_size=4)), max_leaves=12).map(lambda v: json.dumps(v).encode())),
       op=st.sampled_from([ENC, "all", "mxfp4.floor.rne.block_mx.bin"]))
def test_hyp_ver_garbage_manifest(tmp_path_factory, manifest, op):
    d = tmp_path_factory.mktemp("vec")
    (d / "manifest.json").write_bytes(manifest)
    for n in (ENC, "mxfp4.floor.rne.block_mx.bin"):
        shutil.copy(VEC / n, d / n)
    res = tmp_path_factory.mktemp("res")
    shutil.copy(VEC / ENC, res / ENC)
    rc, out, err = _ver(op, str(res if op == "all" else res / ENC), "--vectors", str(d))
    _assert_clean(rc, out, err)


_REAL_MANIFEST = json.loads((VEC / "manifest.json").read_text())
_JSON_GARBAGE = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.text(max_size=6),
                                       st.sampled_from(["<f4", "u1", "O", "c8", "U2", ",", "f4,", "e4m3", "encode",
                                                        "decode"])),
                             lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=4), c,
                                                                                          max_size=3)), max_leaves=6)


@settings(max_examples=VER_EXAMPLES, deadline=None)
@given(op=st.sampled_from([ENC, SR, DEC, "mxfp4.floor.rne.block_mx.bin", "mxfp8_e4m3.floor.rne.dot.bin",
                           "nvfp4.te.1x16.block_nvfp4.bin"]),
       edits=st.lists(st.tuples(st.sampled_from(["format", "operation", "line", "arrays", "coverage_model",
                                                 "array_field"]),
                                st.sampled_from(["name", "dtype", "shape", "offset", "nbytes"]), st.integers(0, 8),
                                _JSON_GARBAGE), min_size=1, max_size=3),
       use_all=st.booleans())
def test_hyp_ver_tampered_manifest_entry(tmp_path_factory, op, edits, use_all):
    """A real manifest whose entry for the file checked has fields replaced by garbage."""
    manifest = json.loads(json.dumps(_REAL_MANIFEST))
    entry = manifest["files"][op]
    for key, sub, i, value in edits:
        if key == "array_field" and isinstance(entry.get("arrays"), list) and entry["arrays"]:
            a = entry["arrays"][i % len(entry["arrays"])]
            if isinstance(a, dict):
                a[sub] = value
        else:
            entry[key] = value
    d = tmp_path_factory.mktemp("vec")
    (d / "manifest.json").write_text(json.dumps(manifest))
    shutil.copy(VEC / op, d / op)
    res = tmp_path_factory.mktemp("res")
    shutil.copy(VEC / op, res / op)
    rc, out, err = _ver("all" if use_all else op, str(res if use_all else res / op), "--vectors", str(d))
    _assert_clean(rc, out, err)
