"""Bad or unusual input to the codec and the CLI: a right answer or a clear refusal, never a silent
wrong result, a hang or a traceback. One test per case found when fmtsim was tried as a new user."""

from __future__ import annotations

import subprocess
import sys
import time
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim.cli import main
from fmtsim.numbers import parse_number, round_to_float
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


# ---------------------------------------------------------------- integers beyond 2^53


def test_integer_above_2_53_is_rounded_once():
    codes, flags = fmtsim.encode_with_flags(np.array([2**53 + 1]), "e8m0", rounding="rup")
    assert int(codes[0]) == 181 and int(flags[0]) == 1  # 2^54 (code 127 + 54), inexact
    codes, flags = fmtsim.encode_with_flags(np.array([2**53]), "e8m0", rounding="rup")
    assert int(codes[0]) == 180 and int(flags[0]) == 0


@pytest.mark.parametrize("fmt", ["e8m0", "e4m3", "e5m2", "int8", "uint8", "e2m1"])
@pytest.mark.parametrize("rounding", ["rne", "rna", "rtz", "rup", "rdn"])
def test_wide_integers_match_the_oracle(fmt, rounding):
    # around 2^53..2^63: exact, odd, ties of E8M0 (1.5 * 2^k) and +-1 around them, both signs
    base = [2**k for k in range(52, 63)] + [3 * 2**k for k in range(51, 61)]
    vals = sorted({v + d for v in base for d in (-1, 0, 1)} | {2**63 - 1})
    vals = vals + [-v for v in vals] + [-(2**63)]
    arr = np.array(vals, dtype=np.int64)
    codes, flags = fmtsim.encode_with_flags(arr, fmt, rounding=rounding)
    for i, v in enumerate(vals):
        assert (int(codes[i]), int(flags[i])) == encode_one(Fraction(v), fmt, rounding), v
    u = np.array([2**64 - 1, 2**63 + 1, 3 * 2**62], dtype=np.uint64)
    codes, flags = fmtsim.encode_with_flags(u, fmt, rounding=rounding)
    for i, v in enumerate(u.tolist()):
        assert (int(codes[i]), int(flags[i])) == encode_one(Fraction(v), fmt, rounding), v


def test_python_int_beyond_64_bits_refused():
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        fmtsim.encode(2**70, "e4m3")


# ---------------------------------------------------------------- arrays people hold


def test_masked_array_refused():
    m = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    with pytest.raises(TypeError, match="masked arrays"):
        fmtsim.encode(m, "e4m3")
    with pytest.raises(TypeError, match="masked arrays"):
        fmtsim.decode(np.ma.masked_array([1, 2], mask=[0, 1]), "e4m3")


def test_torch_tensors_read_exactly():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal(4096).astype(np.float32) * 100
    for dt, np_dt in [(torch.float32, np.float32), (torch.float16, np.float16),
                      (torch.bfloat16, ml_dtypes.bfloat16), (torch.float64, np.float64)]:
        t = torch.from_numpy(x).to(dt)
        ref = x.astype(np_dt) if np_dt is not ml_dtypes.bfloat16 else t.view(torch.int16).numpy().view(np_dt)
        got = fmtsim.encode(t, "e4m3")
        assert isinstance(got, np.ndarray) and np.array_equal(got, fmtsim.encode(ref, "e4m3"))
    # requires_grad, a non-contiguous view, a float8 tensor (widened exactly), integer codes to decode
    t = torch.from_numpy(x.reshape(64, 64)).requires_grad_(True)
    assert np.array_equal(fmtsim.encode(t.T, "e5m2"), fmtsim.encode(x.reshape(64, 64).T, "e5m2"))
    f8 = torch.from_numpy(x).to(torch.float8_e4m3fn)
    assert np.array_equal(fmtsim.encode(f8, "e4m3"), f8.view(torch.uint8).numpy())
    codes = torch.arange(256, dtype=torch.uint8)
    assert np.array_equal(fmtsim.decode(codes, "e4m3", np.float64), fmtsim.decode(np.arange(256), "e4m3", np.float64),
                          equal_nan=True)


def test_tensor_off_the_cpu_refused():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"device 'meta'.*\.cpu\(\)"):
        fmtsim.encode(torch.empty(3, device="meta"), "e4m3")


# ---------------------------------------------------------------- numbers as text


@pytest.mark.parametrize("text", ["-0", "-0.0", "-0.00", "-0e0", "-000", "-0x0p0", "-.0", "-0/7", "-0E+99"])
def test_every_negative_zero_spelling(text, capsys):
    v = parse_number(text)
    assert isinstance(v, float) and v == 0 and np.signbit(v)
    rc, out, _ = cli(capsys, "encode", "e4m3", "--", text)
    assert rc == 0 and "0x80" in out.splitlines()[3]


def test_hex_floats_read_exactly(capsys):
    assert parse_number("0x1.0000000000000000001p0") == 1 + Fraction(1, 2**76)
    assert parse_number("0x1.8p3") == 12 and parse_number("-0x.Cp-2") == Fraction(-3, 16)
    rc, out, _ = cli(capsys, "encode", "e4m3", "0x1.0000000000000000001p0", "--rounding", "rup")
    row = out.splitlines()[3]
    assert rc == 0 and "0x39" in row and "inexact" in row
    rc, out, _ = cli(capsys, "encode", "e4m3", "0x1p-2000", "--rounding", "rup")
    row = out.splitlines()[3]
    assert rc == 0 and row.split()[1] == "0x01" and "inexact|underflow (0x03)" in row


@pytest.mark.parametrize("text,fmt,code,flags", [
    ("1e999999999", "e4m3", "0x7E", "inexact|overflow|saturated (0x25)"),
    ("-1e999999999", "e5m2", "0xFB", "inexact|overflow|saturated (0x25)"),
    ("1e-9999999", "e4m3", "0x00", "inexact|underflow (0x03)"),
    ("0x1p-99999999999999999999999", "e8m0", "0x00", "inexact|underflow (0x03)"),
    ("1e" + "9" * 5000, "e2m1", "0x7", "inexact|overflow|saturated (0x25)"),
])
def test_far_exponents_answer_at_once(text, fmt, code, flags, capsys):
    t0 = time.perf_counter()
    rc, out, _ = cli(capsys, "encode", fmt, "--", text)
    assert time.perf_counter() - t0 < 5  # generous bound for CI; the parse itself is microseconds
    row = out.splitlines()[3].split()
    assert rc == 0 and row[1] == code and " ".join(row[-2:]) == flags


def test_far_exponent_parse_is_instant():
    t0 = time.perf_counter()
    for text in ("1e999999999", "1e-999999999", "0x1p999999999", "7e12345678901234567890"):
        parse_number(text)
    assert time.perf_counter() - t0 < 0.1


def test_long_decimal_is_a_number(capsys):
    text = "1." + "0" * 6000 + "1"   # longer than Python's default int-from-string limit
    assert parse_number(text) == 1 + Fraction(1, 10**6001)
    rc, out, _ = cli(capsys, "encode", "e4m3", text, "--rounding", "rup")
    assert rc == 0 and "0x39" in out.splitlines()[3]


@pytest.mark.parametrize("text", ["", "abc", "1..2", "0x", "1e", "--1", "1/0", "0xg", "nan1"])
def test_not_a_number(text, capsys):
    rc, _, err = cli(capsys, "encode", "e4m3", "--", text)
    assert_usage_error(rc, err, "not a number")


def test_round_to_float_single_rounding():
    # 1 + 2^-24 + 2^-60: float64 RNE gives 1 + 2^-24 (a float32 tie), a cast then gives 1.0; once: 1 + 2^-23
    v = 1 + Fraction(1, 2**24) + Fraction(1, 2**60)
    assert round_to_float(v, np.float32) == np.float32(1 + 2**-23)
    assert round_to_float(Fraction(1, 10), np.float32) == np.float32(0.1)
    assert np.isinf(round_to_float(Fraction(2) ** 2000, np.float64))


@pytest.mark.parametrize("text,fmt", [("464", "e4m3"), ("-464", "e4m3"), ("61440", "e5m2"), ("7", "e2m1"),
                                      ("30", "e3m2"), ("127.5", "int8"), ("1.5", "e8m0")])
def test_overflow_ties_are_ties(text, fmt, capsys):
    rc, out, _ = cli(capsys, "encode", fmt, "--", text)
    assert rc == 0 and out.splitlines()[3].split()[-3] == "yes"
    rc, out, _ = cli(capsys, "encode", fmt, "--", text + "1")  # just past the tie
    assert out.splitlines()[3].split()[-3] == "no"


def test_diff_format_filters_builtin_set(capsys):
    rc, out, _ = cli(capsys, "diff", "--format", "e2m1")
    rows = [line for line in out.splitlines()[2:] if line.strip() and not line.startswith("*  the")]
    body = [r for r in rows if "e2m1" in r or "e4m3" in r or "e8m0" in r]
    assert rc == 0 and body and all(" e2m1 " in r for r in body)


@pytest.mark.parametrize("argv,needle", [
    (["encode", "e4m3", "0x1p2000"], None),
    (["diff", "0x1p2000", "--format", "e2m1"], "beyond float32's range"),
    (["diff", "1e999", "--format", "e2m1", "--src", "float64"], "beyond float64's range"),
])
def test_huge_values_no_overflow_error(argv, needle, capsys):
    rc, out, err = cli(capsys, *argv)
    if needle is None:
        assert rc == 0 and "0x7E" in out
    else:
        assert_usage_error(rc, err, needle)


# ---------------------------------------------------------------- CLI files and environment


def test_gen_output_problems(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    rc, _, err = cli(capsys, "gen", "-o", str(f))
    assert_usage_error(rc, err, "not a directory")
    rc, _, err = cli(capsys, "gen", "-o", str(f / "sub"))
    assert_usage_error(rc, err, "cannot write vectors there")
    rc, _, err = cli(capsys, "gen", "-o", "/proc/fmtsim-no-such-place/x")
    assert_usage_error(rc, err, "cannot write vectors there")


def test_adapter_that_fails_to_load(tmp_path, capsys):
    (tmp_path / "bad_import.py").write_text("import fmtsim_no_such_module\n")
    (tmp_path / "bad_syntax.py").write_text("def f(:\n")
    rc, _, err = cli(capsys, "conform", "--impl", f"{tmp_path}/bad_import.py:f")
    assert_usage_error(rc, err, "bad_import.py failed to load", "fmtsim_no_such_module")
    rc, _, err = cli(capsys, "conform", "--impl", f"{tmp_path}/bad_syntax.py:f")
    assert_usage_error(rc, err, "bad_syntax.py, line 1: syntax error")


def test_argparse_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["encode", "e4m3", "1", "--rounding", "up"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert_usage_error(2, err, "--rounding", "invalid choice")


@pytest.mark.parametrize("argv", [["table", "e4m3"], pytest.param(["gen", "--list"], marks=pytest.mark.slow),
                                  pytest.param(["formats"], marks=pytest.mark.slow)])
def test_output_into_a_closed_pipe(argv):
    p = subprocess.run(f"{sys.executable} -m fmtsim {' '.join(argv)} | head -n 1", shell=True,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr and "Error" not in p.stderr
    assert len(p.stdout.splitlines()) == 1


def test_torch_tensors_through_the_block_schemes():
    torch = pytest.importorskip("torch")
    from fmtsim import fnuz, intq, layout, mx, nvfp4

    x = np.random.default_rng(2).standard_normal((32, 64)).astype(np.float32)
    t = torch.from_numpy(x).requires_grad_(True)
    qn, qt = mx.quantize(x, "mxfp4"), mx.quantize(t, "mxfp4")
    assert np.array_equal(qn.codes, qt.codes) and np.array_equal(qn.scales, qt.scales)
    assert np.array_equal(nvfp4.quantize(x).codes, nvfp4.quantize(t).codes)
    assert np.array_equal(intq.quantize(x, 4).codes, intq.quantize(t, 4).codes)
    codes = torch.from_numpy(qn.codes)
    assert np.array_equal(layout.pack_fp4(codes), layout.pack_fp4(qn.codes))
    f8 = torch.from_numpy(x).to(torch.float8_e4m3fn).view(torch.uint8)
    assert np.array_equal(fnuz.ocp_to_fnuz(f8, "e4m3")[0], fnuz.ocp_to_fnuz(f8.numpy(), "e4m3")[0])
    with pytest.raises(TypeError, match=r"\.cpu\(\)"):
        mx.quantize(torch.empty(32, device="meta"), "mxfp4")


@pytest.mark.parametrize("kw", [dict(rounding=np.array(["rne", "rtz"])), dict(overflow=["nonsat"]),
                                dict(nan=np.array(["signed"])), dict(profile=np.array(["ptx"]))])
def test_policy_names_must_be_strings(kw):
    with pytest.raises(TypeError, match="must be a name"):
        fmtsim.encode(np.ones(2), "e4m3", **kw)


def test_decode_dtype_numpy_cannot_parse():
    with pytest.raises(TypeError, match="decode dtype"):
        fmtsim.decode(np.ones(2, int), "e4m3", dtype=",")


# ---------------------------------------------------------------- found by a newcomer's review


def _safetensors(path, header: dict, data: bytes = b"") -> None:
    import json
    import struct

    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


@pytest.mark.parametrize("shape", [[2**64], [2**62, 4], [-1], [1.5], [True]])
def test_checkpoint_header_dimensions(tmp_path, shape, capsys):
    from fmtsim.checkpoint import load

    f = tmp_path / "bad.safetensors"
    _safetensors(f, {"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}})
    with pytest.raises(ValueError, match="bad.safetensors"):  # CheckpointError is a ValueError
        load(f)
    rc, _, err = cli(capsys, "checkpoint", "inspect", str(f))
    assert_usage_error(rc, err, "bad.safetensors")


def test_checkpoint_empty_paths_and_jobs(tmp_path, capsys):
    f = tmp_path / "m.safetensors"
    _safetensors(f, {"w": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]},
                     "w_scale": {"dtype": "F32", "shape": [], "data_offsets": [2, 6]}}, b"\x38\x38" + b"\0\0\x80\x3f")
    for argv in (["checkpoint", "dequantize", str(f), ""], ["fnuz", "convert", str(f), ""],
                 ["checkpoint", "convert", "--to", "nvfp4", str(f), ""], ["fnuz", "convert", "", str(tmp_path / "o")]):
        rc, _, err = cli(capsys, *argv)
        assert_usage_error(rc, err, "path is empty")
    for jobs in ("0", "-3", "x"):
        with pytest.raises(SystemExit):
            main(["fnuz", "convert", str(f), str(tmp_path / "o"), "--jobs", jobs])
        assert_usage_error(2, capsys.readouterr().err, "--jobs")
    from fmtsim.checkpoint.files import worker_count

    assert worker_count(100000, 2) == 2 and worker_count(3, 10) <= 3


def test_adapter_that_exits_while_loading(tmp_path, capsys):
    (tmp_path / "exits.py").write_text("raise SystemExit(0)\n")
    rc, _, err = cli(capsys, "conform", "--impl", f"{tmp_path}/exits.py:f")
    assert_usage_error(rc, err, "exits.py failed to load", "SystemExit")


def test_cli_negative_numbers_without_double_dash(capsys):
    rc, out, _ = cli(capsys, "encode", "e4m3", "-inf", "-0x1p3", "-1/3", "-nan", "-0x0p0", "1")
    codes = [line.split()[1] for line in out.splitlines()[3:]]
    assert rc == 0 and codes == ["0xFE", "0xD0", "0xAB", "0xFF", "0x80", "0x38"]


def test_cli_rbits_checked_as_the_api_does(capsys):
    rc, _, err = cli(capsys, "encode", "e4m3", "1.0625", "--rbits", "5")
    assert_usage_error(rc, err, "only used with --rounding sr")
    for bad in ("-1", "abc"):
        with pytest.raises(SystemExit):
            main(["encode", "e4m3", "1", "--rounding", "sr", "--rbits", bad])
        assert_usage_error(2, capsys.readouterr().err, "--rbits")


def test_matmul_takes_the_one_intake():
    torch = pytest.importorskip("torch")
    from fmtsim.mma import matmul

    a = np.arange(64).reshape(2, 32) % 0x7E
    b = np.arange(64).reshape(32, 2) % 0x7E
    c = np.ones((2, 2), np.float32)
    ref = matmul(a, b, c, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")
    got = matmul(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c).requires_grad_(True),
                 unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")
    assert np.array_equal(ref.view(np.uint32), got.view(np.uint32))
    with pytest.raises(TypeError, match="masked"):
        matmul(np.ma.masked_array(a, mask=True), b, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")


def test_ulps_apart_refuses_other_dtypes_and_flags_nan():
    from fmtsim.conformance.gemm_vectors import ulps_apart

    with pytest.raises(TypeError, match="float32"):
        ulps_apart(np.array([1.0]), np.array([1 + 2**-52], np.float32))  # mixed: not rounded into one
    with pytest.raises(TypeError, match="float16"):
        ulps_apart(np.array([1.0], np.float16), np.array([1.0], np.float16))
    assert ulps_apart(np.array([1.0, -0.0]), np.array([1 + 2**-52, 0.0])).tolist() == [1, 0]  # fp64 D
    got = ulps_apart(np.array([np.nan, 1], np.float32), np.array([1, 1], np.float32))
    assert got.tolist() == [-1, 0]


def test_ver_takes_a_path_to_a_generated_vector_file(tmp_path, capsys):
    name = "f32_to_e2m1.rne.satfinite.encode_ties.tv"
    assert main(["gen", name, "-o", str(tmp_path / "vecs")]) == 0
    capsys.readouterr()
    (tmp_path / "out.tv").write_text((tmp_path / "vecs" / name).read_text())
    rc, out, _ = cli(capsys, "ver", str(tmp_path / "vecs" / name), str(tmp_path / "out.tv"))
    assert rc == 0 and " 0 failed" in out
    rc, _, err = cli(capsys, "ver", "no-such.tv", str(tmp_path / "out.tv"))
    assert_usage_error(rc, err, "--vectors DIR")


def test_diff_format_without_builtin_cases(capsys):
    rc, _, err = cli(capsys, "diff", "--format", "int8")
    assert_usage_error(rc, err, "no int8 cases", "fmtsim diff VALUE... --format int8")


def test_split_k_boundaries_strictly_increase():
    from fmtsim.mma import matmul

    a, b = np.zeros((1, 96), np.int64), np.zeros((96, 1), np.int64)
    for bad in ([32, 32], [64, 32]):
        with pytest.raises(ValueError, match="strictly increase"):
            matmul(a, b, unit="sm100_f8f6f4", a_format="e4m3", b_format="e4m3", split_k=bad)


def test_probe_infer_set_count(tmp_path, capsys):
    files = [tmp_path / "a.bin", tmp_path / "b.bin"]
    for f in files:
        f.write_bytes(b"")
    rc, _, err = cli(capsys, "probe", "infer", *map(str, files), "--set", "fp8", "fp4", "fp16")
    assert_usage_error(rc, err, "3 sets for 2 result file(s)")


def test_fnuz_convert_without_fp8_says_it_copied(tmp_path, capsys):
    f = tmp_path / "plain.safetensors"
    _safetensors(f, {"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0\0\x80\x3f")
    rc, out, _ = cli(capsys, "fnuz", "convert", str(f), str(tmp_path / "out.safetensors"))
    assert rc == 0 and "no OCP FP8 tensor" in out and "the output is a copy" in out
