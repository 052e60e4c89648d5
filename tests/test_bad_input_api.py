"""Bad input to the API and the CLI, second tour (a 1008-case walk by a new user): each case a right
answer or a clear refusal (TypeError/ValueError naming the argument; the CLI one line
``fmtsim: error: ...`` and exit 2), never a silent wrong answer or a traceback."""

from __future__ import annotations

import errno
import hashlib
import json
import warnings
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

import fmtsim
from fmtsim import intq, layout, mx
from fmtsim.cli import main
from fmtsim.mma import UNITS, Unit, matmul, slow_matmul
from fmtsim.oracle import encode_one


def cli(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def assert_usage_error(rc, err, *needles):
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fmtsim: error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])


ONE = 0x38  # E4M3 1.0
HOPPER = UNITS["sm90_wgmma_fp8"]


# ---------------------------------------------------------------- matrix units: the Unit record


@pytest.mark.parametrize("change,needle", [
    (dict(fraction_bits=62), "fraction_bits=62"),
    (dict(fraction_bits=200), "fraction_bits=200"),
    (dict(fraction_bits=-1), "fraction_bits=-1"),
    (dict(k=-32), "k=-32"),
    (dict(k=0), "k=0"),
    (dict(family="bogus"), "family='bogus'"),
    (dict(output="rd"), "output='rd'"),
    (dict(formats=("e4m3", "e9m9")), "formats"),
    (dict(scale_formats=("e4m3",), block_sizes=(32,)), "scale_formats"),
    (dict(scale_formats=("e8m0",)), "block_sizes"),
    (dict(e_zero=1 << 40), "e_zero"),
    (dict(name=""), "name"),
])
def test_unit_fields_validated_when_made(change, needle):
    with pytest.raises(ValueError, match="Unit") as e:
        replace(HOPPER, **change)
    assert needle in str(e.value)


@pytest.mark.parametrize("change", [dict(k=32.0), dict(fraction_bits="13"), dict(even_odd=1), dict(formats="e4m3")])
def test_unit_field_types(change):
    with pytest.raises(TypeError, match="Unit"):
        replace(HOPPER, **change)


def test_grouped_and_amd_units_checked_against_their_operands():
    with pytest.raises(ValueError, match="group"):
        replace(UNITS["sm100_mxf4"], group=24)  # 64 is not a multiple of 24
    with pytest.raises(ValueError, match="fraction_bits=19 is below the 20"):
        replace(UNITS["cdna3_mfma_fp16"], fraction_bits=19)  # fp16 x fp16 products have 20 fraction bits
    with pytest.raises(ValueError, match="even_odd"):
        replace(UNITS["cdna3_mfma_fp8"], k=1)


@pytest.mark.parametrize("unit,change,needle", [
    ("cdna3_mfma_fp8", dict(fraction_bits=33), "wider than fraction_bits2 + 1 = 32"),
    ("cdna3_mfma_fp16", dict(fraction_bits=40), "wider than fraction_bits2 + 1 = 32"),
    ("cdna3_mfma_fp8", dict(fraction_bits=47, fraction_bits2=50), "F + 2 + bit_length(k) <= 53"),
    ("sm90_wgmma_fp16", dict(product_overflow_inf=True), "not read by the nv family"),
    ("exact", dict(fraction_bits=13), "not read by the exact family"),
    ("cdna2_mfma_fp16", dict(fraction_bits=24), "not read by the ftz family"),
    ("sm80_mma_fp64", dict(e_zero=-133), "not read by the fma family"),
    ("sm90_wgmma_fp8", dict(fraction_bits2=31), "not read by the nv family"),
    ("sm100_f8f6f4", dict(group=16), "not read by the nv family"),
    ("sm90_wgmma_fp8", dict(even_odd=True), "not read by the nv family"),
    ("cdna2_mfma_fp16", dict(k=8), "k=8 must be 2 or 4 for the ftz family"),
    ("cdna2_mfma_fp16", dict(k=1), "k=1 must be 2 or 4 for the ftz family"),
    ("sm100_mxf4", dict(k=48), "block_sizes=(32,) must divide k=48"),
    ("sm100_mxf4", dict(k=16), "block_sizes=(32,) must divide k=16"),
])
def test_family_rules_refused(unit, change, needle):
    """An AMD unit with F above F2 + 1 gave 16 for a sum of 32 ones (the Fraction twin: 32); a
    field no step of the family reads was kept silently, and product_overflow_inf outside the amd
    family was honoured by the Fraction twin only (2^128 - 2^128: NaN there, 0 from matmul); an ftz
    unit with k=8 summed 4 of 16 ones in both paths (k=1: IndexError); an nv_grouped unit whose
    step splits a scale block failed inside numpy (the twin gave numbers)."""
    with pytest.raises(ValueError, match="Unit") as e:
        replace(UNITS[unit], name="w", **change)
    assert needle in str(e.value)


@pytest.mark.parametrize("fmt,f,f2", [("e4m3fnuz", 32, 31), ("e5m2fnuz", 46, 50), ("fp16", 32, 31)])
def test_widest_valid_amd_unit_agrees_with_the_fraction_twin(fmt, f, f2):
    unit = replace(UNITS["cdna3_mfma_fp8" if fmt != "fp16" else "cdna3_mfma_fp16"], name="w", fraction_bits=f,
                   fraction_bits2=f2)
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((3, 2 * unit.k)), rng.standard_normal((2 * unit.k, 4))
    if fmt == "fp16":
        a, b = x.astype(np.float16).view(np.uint16), y.astype(np.float16).view(np.uint16)
    else:
        a, b = fmtsim.encode(x, fmt), fmtsim.encode(y, fmt)
    c = rng.standard_normal((3, 4)).astype(np.float32)
    d = matmul(a, b, c, unit=unit, a_format=fmt, b_format=fmt)
    s = slow_matmul(a, b, c, unit=unit, a_format=fmt, b_format=fmt)
    assert d.view(np.uint32).tolist() == s.view(np.uint32).tolist()
    ones = fmtsim.encode(np.ones((1, 32)), "e4m3fnuz"), fmtsim.encode(np.ones((32, 1)), "e4m3fnuz")
    if fmt != "fp16":  # the case that gave 16
        assert matmul(*ones, unit=unit, a_format="e4m3fnuz", b_format="e4m3fnuz").tolist() == [[32.0]]


def test_widest_valid_unit_still_agrees_with_the_fraction_twin():
    """F = 40 (the probe grid's widest) keeps the exact sum 32 of 32 ones, as the Fraction twin does;
    F = 62 gave [[0.]] before the record was checked."""
    wide = replace(HOPPER, name="wide", fraction_bits=40)
    a, b = np.full((1, 32), ONE), np.full((32, 1), ONE)
    d = matmul(a, b, unit=wide, a_format="e4m3", b_format="e4m3")
    s = slow_matmul(a, b, unit=wide, a_format="e4m3", b_format="e4m3")
    assert d.view(np.uint32).tolist() == s.view(np.uint32).tolist() == [[np.float32(32).view(np.uint32)]]


def test_units_is_read_only():
    with pytest.raises(TypeError):
        UNITS["mine"] = HOPPER  # type: ignore[index]
    with pytest.raises(TypeError):
        del UNITS["exact"]  # type: ignore[attr-defined]
    assert UNITS["sm90_wgmma_fp8"] is HOPPER and "exact" in list(UNITS) and len(dict(UNITS.items())) == len(UNITS)
    assert isinstance(UNITS["exact"], Unit)


@pytest.mark.parametrize("registry,key", [(fmtsim.FORMATS, "e4m3"), (fmtsim.PROFILES, "ocp"), (mx.SCHEMES, "mxfp4")])
def test_public_registries_are_read_only(registry, key):
    """As UNITS: FORMATS["e4m3"] = FORMATS["e5m2"] would have changed every later encode by that name."""
    with pytest.raises(TypeError):
        registry[key] = registry[key]
    with pytest.raises(TypeError):
        del registry[key]
    assert key in registry and len(dict(registry.items())) == len(registry)


# ---------------------------------------------------------------- matrix units: matmul arguments


@pytest.mark.parametrize("unit", ["sm90_wgmma_fp8", "sm100_f8f6f4", "exact"])
def test_matmul_k0_is_c(unit):
    """No product, so no instruction: D is C bit for bit (it was cut to the unit's fraction bits)."""
    c = np.array([[1.0001, -3.3e-30], [np.float32(2) ** -140, 7.0]], np.float32)
    a, b = np.zeros((2, 0), np.uint8), np.zeros((0, 2), np.uint8)
    d = matmul(a, b, c, unit=unit, a_format="e4m3", b_format="e4m3")
    s = slow_matmul(a, b, c, unit=unit, a_format="e4m3", b_format="e4m3")
    assert d.view(np.uint32).tolist() == s.view(np.uint32).tolist() == c.view(np.uint32).tolist()
    assert not matmul(a, b, unit=unit, a_format="e4m3", b_format="e4m3").any()


@pytest.mark.parametrize("kw,err,needle", [
    (dict(promote_every=128.0), TypeError, "promote_every must be an integer"),
    (dict(promote_every=True), TypeError, "promote_every"),
    (dict(split_k=2.0), TypeError, "split_k"),
    (dict(split_k=[32.5]), TypeError, "32.5"),
    (dict(split_k=[np.float64(32)]), TypeError, "boundaries must be integers"),
    (dict(split_k="2"), TypeError, "split_k"),
])
@pytest.mark.parametrize("fn", [matmul, slow_matmul])
def test_chaining_arguments_must_be_integers(fn, kw, err, needle):
    a, b = np.full((1, 64), ONE), np.full((64, 1), ONE)
    with pytest.raises(err, match=needle):
        fn(a, b, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", **kw)


@pytest.mark.parametrize("kw,needle", [
    (dict(split_k=[-1]), "split_k boundary -1 must be a multiple"),  # the twin summed 65 ones of 64
    (dict(split_k=[48, 16]), "split_k boundary 48"),  # the twin: 112
    (dict(split_k=[32, 32]), "must strictly increase"),
    (dict(split_k=0), "split_k must be >= 1"),  # the twin: ZeroDivisionError
    (dict(split_k=-2), "split_k must be >= 1"),  # the twin: NaN
    (dict(promote_every=0), "promote_every must be a positive multiple"),  # the twin: range() error
    (dict(promote_every=-128), "promote_every must be a positive multiple"),  # the twin: 0
    (dict(promote_every=48), r"multiple of the unit's K \(32\), got 48"),  # the twin: 80
])
@pytest.mark.parametrize("fn", [matmul, slow_matmul])
def test_chaining_values_checked_alike(fn, kw, needle):
    a, b = np.full((1, 64), ONE), np.full((64, 1), ONE)
    with pytest.raises(ValueError, match=f"^{fn.__name__}: .*{needle}"):
        fn(a, b, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", **kw)


@pytest.mark.parametrize("kw,err,needle", [
    (dict(tile=2.5), TypeError, "tile must be an integer or a pair"),  # was: cannot unpack non-iterable float
    (dict(tile=(2,)), TypeError, "tile must be an integer or a pair"),  # was: not enough values to unpack
    (dict(tile="ab"), TypeError, "tile must be an integer or a pair"),  # was: invalid literal for int()
    (dict(tile=0), ValueError, "tile must be positive"),
    (dict(progress=5), TypeError, "progress must be a function"),  # was: 'int' object is not callable
])
@pytest.mark.parametrize("jobs", [None, 1])
def test_matmul_tile_and_progress_checked(kw, err, needle, jobs):
    """Checked whether or not tiles are used (without jobs they were ignored silently)."""
    a, b = np.full((2, 32), ONE), np.full((32, 2), ONE)
    with pytest.raises(err, match=f"^matmul: {needle}"):
        matmul(a, b, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", jobs=jobs, **kw)


def test_matmul_progress_reports_without_jobs():
    a, b = np.full((2, 32), ONE), np.full((32, 3), ONE)
    calls: list[tuple[int, int]] = []
    d = matmul(a, b, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", progress=lambda *x: calls.append(x))
    assert calls == [(2 * 3 * 32, 2 * 3 * 32)] and (d == 32).all()


def test_slow_matmul_shapes_and_outputs_checked():
    a, b = np.full((2, 32), ONE), np.full((32, 3), ONE)
    kw = dict(unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")
    with pytest.raises(ValueError, match=r"slow_matmul: a must be \(M, K\)"):
        slow_matmul(a, b[:16], **kw)
    with pytest.raises(ValueError, match="slow_matmul: c must have shape"):
        slow_matmul(a, b, np.zeros((3, 2), np.float32), **kw)
    for bad in ([(2, 0)], [(0, 3)], [(-1, 0)], [(0,)]):
        with pytest.raises(ValueError, match="outputs must hold"):
            slow_matmul(a, b, outputs=bad, **kw)
    assert slow_matmul(a, b, outputs=[(1, 2)], **kw)[1, 2] == 32


def test_tensor_operand_with_scales_or_format_refused():
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    q = mx.quantize(x, "mxfp8_e4m3")
    with pytest.raises(ValueError, match="a is a MXTensor.*a_scales"):
        matmul(q, q, unit="sm100_mxf8f6f4", a_scales=np.full((4, 2), 127), b_scales=np.full((2, 4), 127))
    with pytest.raises(ValueError, match="b is a MXTensor"):
        matmul(q, q, unit="sm100_mxf8f6f4", b_format="e5m2")
    d = matmul(q, q, unit="sm100_mxf8f6f4")  # the tensors alone still work
    assert d.shape == (4, 4)


def test_tensor_operand_with_other_block_scales_refused():
    """block_size / scale_format beside MXTensor operands were dropped (the tensor's own were used)."""
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    q = mx.quantize(x, "mxfp8_e4m3")
    for kw, needle in ((dict(block_size=16), "block_size 32; block_size=16"),
                       (dict(scale_format="ue4m3"), "scale_format 'e8m0'; scale_format='ue4m3'")):
        with pytest.raises(ValueError, match="a is a MXTensor with " + needle):
            matmul(q, q, unit="sm100_mxf8f6f4", **kw)
    same = matmul(q, q, unit="sm100_mxf8f6f4", block_size=32, scale_format="e8m0")  # the tensor's own: fine
    assert same.view(np.uint32).tolist() == matmul(q, q, unit="sm100_mxf8f6f4").view(np.uint32).tolist()


SCALED = dict(unit="sm100_mxf8f6f4", a_format="e4m3", b_format="e4m3")
TWO = np.full((1, 1), 128, np.uint8)  # E8M0 2^1


@pytest.mark.parametrize("kw,needle", [
    (dict(a_scales=TWO, b_scales=np.full((1, 2), 127, np.uint8)), "block scales need scale_format and block_size"),
    (dict(a_scales=TWO, scale_format="e8m0", block_size=32), "give both a_scales and b_scales"),
    (dict(), "is block-scaled: give a_scales, b_scales, scale_format and block_size"),
    (dict(a_scales=np.full((1, 7), 127, np.uint8), b_scales=np.full((3, 2), 127, np.uint8), scale_format="e8m0",
          block_size=32), r"a_scales must be \(1, 1\) and b_scales \(1, 2\)"),
    (dict(a_scales=TWO, b_scales=np.full((1, 2), 127, np.uint8), scale_format="ue4m3", block_size=16),
     "takes scale_format e8m0, not ue4m3"),
    (dict(a_scales=TWO, b_scales=np.full((1, 2), 127, np.uint8), scale_format="e8m0", block_size=32,
          c=np.array([[0.1, 0.2]])), r"c\[0, 0\] = np.float64\(0.1\) is not an fp32 value"),
])
def test_slow_matmul_refuses_what_matmul_refuses(kw, needle):
    """The twin ignored scales given without scale_format (32 where matmul gives 256), read missing
    scales as 1, gave NaN for a scale format the unit does not take and narrowed a float64 C."""
    a, b = np.full((1, 32), ONE, np.uint8), np.full((32, 2), ONE, np.uint8)
    kw = dict(kw)
    c = kw.pop("c", None)
    for fn, who in ((matmul, "matmul"), (slow_matmul, "slow_matmul")):
        with pytest.raises(ValueError, match=f"^{who}: .*{needle}"):
            fn(a, b, c, **SCALED, **kw)
    good = dict(a_scales=TWO, b_scales=np.full((1, 2), 127, np.uint8), scale_format="e8m0", block_size=32)
    assert slow_matmul(a, b, **SCALED, **good).tolist() == matmul(a, b, **SCALED, **good).tolist() == [[64.0, 64.0]]


# ---------------------------------------------------------------- integer quantization: subnormal scales


def test_intq_float16_subnormal_scale_rounded_up():
    """amax / 127 = 7.87e-8 is a float16 subnormal; nearest (2^-24 = 5.96e-8) would push 1e-5 to
    code 168 and clip it to 127 (read back 7.57e-6). Rounded up (2^-23) every value fits."""
    x = np.array([1e-5, -3e-6])
    q = intq.quantize(x, 8, scale_dtype=np.float16)
    s = Fraction(float(q.scale))
    assert s == Fraction(1, 2**23) and s >= Fraction(1e-5) / 127
    for v, c in zip(x, q.codes.tolist(), strict=True):  # codes: round(x / s), half to even, exactly
        assert abs(Fraction(float(v)) / s - c) <= Fraction(1, 2)
    back = intq.dequantize(q, np.float64)
    assert abs(back[0] - 1e-5) <= float(s) / 2
    # normal float16 scales are still rounded to nearest
    q = intq.quantize(np.array([1.0, -0.3]), 8, scale_dtype=np.float16)
    assert float(q.scale) == float(np.float16(1 / 127))


def test_intq_scale_that_underflows_to_zero_still_refused():
    with pytest.raises(ValueError, match="does not fit in float16"):
        intq.quantize(np.array([1e-12]), 8, scale_dtype=np.float16)


def test_intq_scale_that_overflows_refused_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "overflow encountered in cast" was printed first
        with pytest.raises(ValueError, match="does not fit in float16"):
            intq.quantize(np.array([65504.0 * 127 + 1e6, 1.0]), 8, scale_dtype=np.float16)


# ---------------------------------------------------------------- arrays and keywords


@pytest.mark.parametrize("dt", [">f2", ">f4", ">f8", "<f4"])
def test_other_byte_order_floats_read_exactly(dt):
    x = np.array([0.1, 464.0, -3.5, 1e-30, np.inf, -0.0, 2.0**-9], dtype=dt.replace(">", "<"))
    native = fmtsim.encode(x, "e4m3")
    swapped = x.astype(dt)
    assert swapped.dtype.str == dt
    assert fmtsim.encode(swapped, "e4m3").tolist() == native.tolist()
    assert fmtsim.quantize(swapped, "e5m2").tolist() == fmtsim.quantize(x, "e5m2").tolist()
    assert fmtsim.decode(np.array([0x38, 0xFE], ">u2"), "e4m3").tolist() == [1.0, -448.0]


@pytest.mark.parametrize("dt", [">f2", ">f4", ">f8"])
def test_other_byte_order_float_dtypes_written_exactly(dt):
    """decode/quantize to '>f4' (float32 in the other byte order) were refused as not float32."""
    codes = np.arange(256, dtype=np.uint8)
    native = np.dtype(dt).newbyteorder("=")
    swapped = fmtsim.decode(codes, "e4m3", dtype=dt)
    assert swapped.dtype.str == dt
    bits = f"u{native.itemsize}"
    assert swapped.astype(native).view(bits).tolist() == fmtsim.decode(codes, "e4m3", dtype=native).view(bits).tolist()
    x = np.array([0.3, -1e-3, 500.0, -np.inf])
    q = fmtsim.quantize(x, "e5m2", dtype=dt)
    assert q.dtype.str == dt and q.tolist() == fmtsim.quantize(x, "e5m2", dtype=native).tolist()
    with pytest.raises(TypeError, match="not >i4"):
        fmtsim.decode(codes, "e4m3", dtype=">i4")


def test_quantize_names_itself():
    with pytest.raises(TypeError, match=r"quantize\(\) got an unexpected keyword argument 'roundng'"):
        fmtsim.quantize(np.ones(2), "e4m3", roundng="rtz")
    for bad in (np.int8, "foo"):
        with pytest.raises(TypeError, match="quantize: dtype must be"):
            fmtsim.quantize(np.ones(2), "e4m3", dtype=bad)
    assert fmtsim.quantize(np.ones(2), "e4m3", dtype=np.float16).dtype == np.float16


def test_swizzle_scales_takes_bytes_only():
    for bad in (300, -1):
        s = np.full((2, 3), 7, np.int16)
        s[1, 2] = bad
        with pytest.raises(ValueError, match=f"{bad} at flat index 5 is not a scale byte"):
            layout.swizzle_scales(s)
    good = np.arange(6, dtype=np.int16).reshape(2, 3) * 50  # 0..250 in an int16 array: fine
    sw = layout.swizzle_scales(good)
    assert (layout.unswizzle_scales(sw, 2, 3) == good).all()
    sw[0] = 256
    with pytest.raises(ValueError, match="unswizzle_scales: swizzled: 256"):
        layout.unswizzle_scales(sw, 2, 3)


# ---------------------------------------------------------------- adapters


def test_adapter_that_exits_is_a_failed_case_set(tmp_path, capsys):
    (tmp_path / "k.py").write_text("import sys\n\ndef enc(x, fmt):\n    sys.exit(0)\n\nenc.formats = ['e4m3']\n")
    rc, out, _ = cli(capsys, "conform", "--impl", f"{tmp_path}/k.py:enc", "--formats", "e4m3", "--quick")
    assert rc == 1 and "adapter raised SystemExit" in out and " 0 passed" in out


def test_adapter_failures_print_bits_with_sign(tmp_path, capsys):
    """An adapter without .profile is held to 'ocp' (canonical NaN 0x7F); fmtsim.encode itself keeps
    the NaN's sign, so it fails on negative NaNs, and the line shows the input's bits."""
    (tmp_path / "k.py").write_text("import fmtsim\n\ndef enc(x, fmt):\n    return fmtsim.encode(x, fmt)\n\n"
                                   "enc.formats = ['e4m3']\n")
    rc, out, _ = cli(capsys, "conform", "--impl", f"{tmp_path}/k.py:enc", "--formats", "e4m3", "--quick")
    assert rc == 1
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert fails and all("f32:0xff" in line and "(-nan)" in line and "fmtsim[ocp] 0x7f" in line
                         for line in fails), fails


# ---------------------------------------------------------------- the CLI: numbers, vectors, files


INTEGER_SPELLINGS = ["17", "0017", "+17", "0x11", "0X11", "0x_11", "0o21", "0b1_0001", "0B10001", "1_7"]
NOT_NUMBERS = ["1__7", "_17", "17_", "0o8", "0b2", "0x", "1_e3", "١٧"]


@pytest.mark.parametrize("text", INTEGER_SPELLINGS)
def test_one_number_grammar_for_decode_and_encode(text, capsys):
    rc, out, _ = cli(capsys, "decode", "e4m3", text)
    assert rc == 0 and out.splitlines()[2].split()[0] == "0x11"
    rc, out, err = cli(capsys, "encode", "e8m0", text)  # 17 in E8M0: the tie-free neighbour 16, code 0x83
    if text.lower().lstrip("+")[:2] in ("0x", "0o", "0b"):
        # a prefixed integer reads as a code or a bit pattern elsewhere: encode refuses to guess
        assert_usage_error(rc, err, "could be the number 17 or a bit pattern")
    else:
        assert rc == 0 and out.splitlines()[3].split()[:2] == [text, "0x83"]


@pytest.mark.parametrize("text", NOT_NUMBERS)
def test_one_number_grammar_refuses_the_same(text, capsys):
    rc, _, err = cli(capsys, "decode", "e4m3", text)
    assert_usage_error(rc, err, "not a code")
    rc, _, err = cli(capsys, "encode", "e4m3", text)
    assert_usage_error(rc, err, "not a number")


def test_number_grammar_documented_in_help(capsys):
    for cmd in ("encode", "decode"):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "0o17" in text and "underscores between digits" in text, text


def test_encode_reads_underscores_in_every_part(capsys):
    rc, out, _ = cli(capsys, "encode", "e5m2", "1_024.000_0e0_0", "0x1_0p-0_4")
    assert rc == 0 and [line.split()[1] for line in out.splitlines()[3:]] == ["0x64", "0x3C"]


def test_gen_full_disk_names_the_file(tmp_path, capsys, monkeypatch):
    from fmtsim.conformance import vectors

    real = vectors.atomic_write
    calls = []

    def full_disk(path, data):
        calls.append(path)
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(vectors, "atomic_write", full_disk)
    rc, _, err = cli(capsys, "gen", "f32_to_e4m3", "--rounding", "rtz", "-o", str(tmp_path / "v"))
    assert_usage_error(rc, err, str(calls[-1]), "No space left on device")
    assert not (tmp_path / "v" / "manifest.json").exists()


def _gen(capsys, out, *extra):
    rc, _, _ = cli(capsys, "gen", "f32_to_e4m3", "--rounding", "sr", "-o", str(out), *extra)
    assert rc == 0
    return json.loads((out / "manifest.json").read_text())


def test_gen_sr_writes_its_random_bits(tmp_path, capsys):
    m = _gen(capsys, tmp_path / "a", "--seed", "5")
    _gen(capsys, tmp_path / "b", "--seed", "5")
    _gen(capsys, tmp_path / "c", "--seed", "6")
    name = "f32_to_e4m3.sr.satfinite.encode_random.tv"
    assert m["files"][name]["line"] == "input rbits code flags"
    text = (tmp_path / "a" / name).read_text()
    assert text == (tmp_path / "b" / name).read_text() != (tmp_path / "c" / name).read_text()
    rows = [line.split() for line in text.splitlines()]
    r = [int(t[1], 16) for t in rows]
    assert r[0] == 0 and r[-1] == 0xFFFFFFFF and len(set(r)) > len(r) // 3
    for x, rb, code, flags in rows[::97]:  # every line is the oracle's answer for its own bits
        v = float(np.uint32(int(x, 16)).view(np.float32))
        assert (int(code, 16), int(flags, 16)) == encode_one(v, "e4m3", "sr", "satfinite",
                                                                rbits=int(rb, 16), src="float32")
    rc, out, _ = cli(capsys, "ver", str(tmp_path / "a" / name), str(tmp_path / "a" / name))
    assert rc == 0 and "0 failed" in out


def test_ver_names_a_corrupt_vector_file(tmp_path, capsys):
    d = tmp_path / "v"
    _gen(capsys, d)
    name = "f32_to_e4m3.sr.satfinite.encode_ties.tv"
    device = tmp_path / "device.tv"
    device.write_bytes((d / name).read_bytes())
    lines = (d / name).read_text().splitlines()
    lines[1] = lines[1][:-5] + " 7E 00"  # one expected code changed, the manifest left as it was
    (d / name).write_text("\n".join(lines) + "\n")
    rc, _, err = cli(capsys, "ver", str(d / name), str(device))
    assert_usage_error(rc, err, f"{d / name}: the vector file is corrupt", "sha256")
    # restored, it passes: the check is the hash, not the content
    m = json.loads((d / "manifest.json").read_text())
    m["files"][name]["sha256"] = hashlib.sha256((d / name).read_bytes()).hexdigest()
    (d / "manifest.json").write_text(json.dumps(m))
    rc, out, _ = cli(capsys, "ver", str(d / name), str(device))
    assert rc == 1 and "1 failed" in out
    del m["files"][name]["sha256"]  # an entry without its hash: nothing to check against, so refused
    (d / "manifest.json").write_text(json.dumps(m))
    rc, _, err = cli(capsys, "ver", str(d / name), str(device))
    assert_usage_error(rc, err, f"{d / name}: its manifest.json entry records no sha256")


# ---------------------------------------------------------------- checkpoint summaries: counts in words


def test_fnuz_dry_run_counts_in_the_singular(tmp_path, capsys):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    save_file = pytest.importorskip("safetensors.numpy", reason="safetensors is not installed").save_file
    codes = fmtsim.encode(np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8), "e4m3")
    save_file({"m.weight": codes.view(ml_dtypes.float8_e4m3fn), "m.weight_scale": np.array(0.5, np.float32),
               "norm.weight": np.ones(8, np.float32)}, str(tmp_path / "model.safetensors"))
    rc = main(["fnuz", "convert", str(tmp_path / "model.safetensors"), str(tmp_path / "out"), "--dry-run"])
    out = capsys.readouterr().out
    assert rc == 0 and "1 FP8 tensor converted, 1 scale doubled, 1 tensor copied" in out and "in 1 file" in out, out


def test_diff_shares_never_round_to_zero():
    from fmtsim.checkpoint.cli import _count, _share

    assert [_share(n, t) for n, t in ((1, 4800), (0, 7), (7, 7), (4799, 4800), (679, 1000))] == \
        ["0.02%", "0%", "100%", "99.98%", "67.9%"]
    assert [_count(1, "tensor"), _count(2, "tensor"), _count(3, "eighth of a binade")] == \
        ["1 tensor", "2 tensors", "3 eighths of a binade"]


def test_a_cpu_that_flushes_subnormals_is_refused():
    """With FTZ/DAZ on (torch.set_flush_denormal(True)) float32 subnormals read as zero and both
    MX engines gave wrong codes (and different ones under 'rup'); every array intake refuses
    instead, and works again once it is off."""
    torch = pytest.importorskip("torch", reason="torch is not installed (it sets FTZ/DAZ here)")
    from fmtsim import mma, mx

    x = np.full((1, 32), np.float32(2.0**-149))
    want = mx.quantize(x, rounding="rup").codes
    assert torch.set_flush_denormal(True), "this CPU has no flush-to-zero mode to test"
    try:
        calls = [lambda: mx.quantize(x, rounding="rup"), lambda: fmtsim.encode(x, "e4m3"),
                 lambda: fmtsim.decode(np.zeros(3, np.uint8), "e4m3"),
                 lambda: mma.matmul(np.zeros((1, 32), np.uint8), np.zeros((32, 1), np.uint8), unit="sm90_wgmma_fp8",
                                    a_format="e4m3", b_format="e4m3")]
        for call in calls:
            with pytest.raises(RuntimeError, match="flushes subnormal numbers to zero .*set_flush_denormal\\(False\\)"):
                call()
    finally:
        torch.set_flush_denormal(False)
    assert np.array_equal(mx.quantize(x, rounding="rup").codes, want) and want.any()
