"""What ``fmtsim ver`` and ``fmtsim conform`` print about an input pastes back into ``fmtsim encode``
as the same input, and flags are printed by name.

The round trips run the printed text through the CLI (fmtsim's exact oracle, one value at a time) and
hold its answer to the vector file's line (the table-driven fast path that wrote the file) or to the
code conform says fmtsim gives: two independent computations of the same conversion.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from fmtsim import encode as fmtsim_encode
from fmtsim import encode_with_flags
from fmtsim.bitpatterns import BitPattern, array_pattern, flag_names, flags_text, parse_pattern
from fmtsim.cli import main
from fmtsim.conformance.vectors import policy_files, read_tv, write_vectors

from .conftest import slow_unless

VEC = Path(__file__).resolve().parent.parent / "vectors"
MANIFEST = json.loads((VEC / "manifest.json").read_text())


def cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def encode_rows(capsys, fmt, patterns, *options):
    """(code, flags) per input, read off 'fmtsim encode' 's table."""
    rc, out, err = cli(capsys, "encode", fmt, *options, "--", *patterns)
    assert rc == 0, err
    rows = []
    for line in out.splitlines()[3:]:
        tokens = line.split()
        code = next(t for t in tokens[1:] if re.fullmatch(r"0x[0-9A-F]+", t))
        rows.append((int(code, 16), int(tokens[-1].strip("()"), 16)))
    assert len(rows) == len(patterns)
    return rows


def policy_options(meta):
    """The encode options a vector file was written under, as 'fmtsim encode' takes them."""
    if meta.get("profile"):  # the profile, and the options given beside it (or the profile's own)
        return ["--profile", meta["profile"], "--rounding", meta["rounding"], "--overflow", meta["overflow"]]
    return ["--rounding", meta["rounding"], "--overflow", meta["overflow"], "--nan", meta["nan"]]


def ver_inputs(capsys, vec_dir, name, meta):
    """Every line's input as 'fmtsim ver' prints it, from a device result with every code wrong."""
    rows = read_tv((vec_dir / name).read_text(), "vector")
    n_ops = len(rows[0]) - 2
    wrong = "".join(" ".join(r[:n_ops] + [f"{int(r[n_ops], 16) ^ 1:02X}", r[-1]]) + "\n" for r in rows)
    result = vec_dir.parent / f"{name}.device"
    result.write_text(wrong)
    rc, out, _ = cli(capsys, "ver", name, str(result), "--vectors", str(vec_dir), "--errors", str(len(rows)),
                     "--check-nans")  # one NaN code flipped into another is a failure too
    assert rc == 1
    lines = [ln for ln in out.splitlines() if ln.startswith("line ")]
    assert len(lines) == len(rows)  # every code flipped: every line fails, in order
    printed = []
    for ln in lines:
        m = re.match(r"line \d+: input (\S+) \([^)]*\)(?: rbits (0x[0-9A-F]{8}))?: expected ", ln)
        assert m, ln
        printed.append((m.group(1), m.group(2)))
    return rows, printed


def check_round_trip(capsys, vec_dir, name, meta):
    rows, printed = ver_inputs(capsys, vec_dir, name, meta)
    fmt = meta["format"]["name"]
    opts = policy_options(meta)
    if printed[0][1] is None:
        got = encode_rows(capsys, fmt, [p for p, _ in printed], *opts)
    else:  # stochastic rounding: one call per line, its own random bits
        got = [encode_rows(capsys, fmt, [p], *opts, "--rbits", rb)[0] for p, rb in printed]
    want = [(int(r[-2], 16), int(r[-1], 16)) for r in rows]
    bad = [(printed[i], got[i], want[i]) for i in range(len(rows)) if got[i] != want[i]]
    assert not bad, bad[:5]


ROUND_TRIP_FILES = [
    "f32_to_e4m3.rne.satfinite.encode_ties.tv",
    "f32_to_e4m3.rne.nonsat.encode_range.tv",  # +-0, Inf, NaN payloads of both signs, subnormals
    "f16_to_e5m2.rne.nonsat.encode_ties.tv",
    "bf16_to_e2m1.rne.satfinite.encode_ties.tv",
    "f64_to_e4m3.rne.satfinite.double_rounding.tv",
    "f32_to_e8m0.rne.satfinite.encode_range.tv",
    "f32_to_e2m1.sr.satfinite.modes.tv",  # input and random bits
    "e5m2_to_e4m3.rne.satfinite.fmt2fmt.tv",  # a conversion's input: a code of the source format
    "e4m3fnuz_to_e4m3.rne.nonsat.fmt2fmt.tv",
]


# the README's quick run keeps the files of distinct input kinds that are quick; --full runs all
@pytest.mark.parametrize("name", slow_unless(ROUND_TRIP_FILES, keep={
    "f32_to_e4m3.rne.nonsat.encode_range.tv", "bf16_to_e2m1.rne.satfinite.encode_ties.tv",
    "f32_to_e8m0.rne.satfinite.encode_range.tv", "e5m2_to_e4m3.rne.satfinite.fmt2fmt.tv"}))
def test_ver_prints_inputs_encode_reads_back(name, tmp_path, capsys):
    """Each input 'fmtsim ver' prints, pasted into 'fmtsim encode' under the file's policy, gives the
    file's code and flags (NaN payloads, -0 and every source type included)."""
    meta = MANIFEST["files"][name]
    vec_dir = tmp_path / "vectors"
    vec_dir.mkdir()
    (vec_dir / name).write_bytes((VEC / name).read_bytes())
    (vec_dir / "manifest.json").write_text(json.dumps({"files": {name: meta}}))
    check_round_trip(capsys, vec_dir, name, meta)


@pytest.mark.parametrize("src,fmt,profile", [("f32", "e4m3", "torchao"), ("bf16", "e4m3", "apfloat"),
                                             ("f16", "e5m2", "ptx"), ("f32", "e2m1", "ml_dtypes")])
def test_round_trip_under_profiles_that_read_nan_bits(src, fmt, profile, tmp_path, capsys):
    """Profiles whose answer depends on a NaN's payload or its quiet bit (torchao's payload reading,
    APFloat's invalid flag for signalling NaNs only): the pattern carries those bits to encode."""
    vf = next(f for f in policy_files(src, fmt, None, None, profile) if f.meta["coverage_model"] == "encode_range")
    vec_dir = tmp_path / "vectors"
    write_vectors([vf], vec_dir, 1)
    meta = json.loads((vec_dir / "manifest.json").read_text())["files"][vf.name]
    check_round_trip(capsys, vec_dir, vf.name, meta)


# a numpy E4M3 quantizer that rounds ties half up (away from zero in magnitude): the wrong kernel
HALF_UP = '''
import ml_dtypes
import numpy as np


def encode_e4m3(x, fmt):
    v = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        a = np.abs(v)
        e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1))), -6)
        step = 2.0 ** (e - 3)
        q = np.minimum(np.floor(a / step + 0.5) * step, 448)
        codes = np.copysign(q, v).astype(ml_dtypes.float8_e4m3fn).view(np.uint8).copy()
    codes[np.isnan(v)] = 0x7F
    return codes


encode_e4m3.formats = ["e4m3"]
encode_e4m3.sources = ["float32", "float16", "bfloat16"]
'''


def test_conform_prints_inputs_encode_reads_back(tmp_path, capsys):
    (tmp_path / "half_up.py").write_text(HALF_UP)
    rc, out, _ = cli(capsys, "conform", "--impl", f"{tmp_path}/half_up.py:encode_e4m3", "--formats", "e4m3",
                     "--quick")
    assert rc == 1
    fails = [ln for ln in out.splitlines() if ln.startswith("FAIL")]
    assert fails
    for ln in fails:
        m = re.search(r": ((?:f16|bf16|f32):0x[0-9a-f]+) \([^)]*\): \S+ (0x[0-9a-f]+), fmtsim\[ocp\] (0x[0-9a-f]+)$",
                      ln)
        assert m, ln
        (code, _), = encode_rows(capsys, "e4m3", [m.group(1)], "--profile", "ocp")
        assert code == int(m.group(3), 16) != int(m.group(2), 16), ln


def test_pattern_means_the_bits():
    for text, dt, bits in [("f32:0x3a800000", np.float32, 0x3A800000), ("bf16:0x7f81", ml_dtypes.bfloat16, 0x7F81),
                           ("f16:0x8000", np.float16, 0x8000), ("F64:0X3FF0000000000001", np.float64,
                                                                 0x3FF0000000000001),
                           ("float32:0x1", np.float32, 1), ("f32:0x_3f80_0000", np.float32, 0x3F800000)]:
        p = parse_pattern(text)
        assert p is not None and p.bits == bits
        arr = p.as_array()
        assert arr.dtype == np.dtype(dt) and int(arr.view(f"u{arr.itemsize}")[0]) == bits
        assert parse_pattern(array_pattern(arr)) == p  # printed, read back: the same pattern
    assert parse_pattern("e5m2:0x3c") == BitPattern("e5m2", 0x3C) and BitPattern("e5m2", 0x3C).value() == 1.0
    assert parse_pattern("fp8_e4m3:0x7e") == BitPattern("e4m3", 0x7E)  # format aliases name the canonical format
    assert str(BitPattern("f32", 1)) == "f32:0x00000001" and str(BitPattern("e2m1", 7)) == "e2m1:0x7"
    assert parse_pattern("1.5") is None and parse_pattern("0x3a800000") is None  # no type: not a pattern


@pytest.mark.parametrize("text,needle", [
    ("x32:0x1", "unknown bit pattern type 'x32'"),
    ("f32:3a800000", "f32:0x followed by hex digits"),
    ("f32:0x", "f32:0x followed by hex digits"),
    ("f32:0x3g", "f32:0x followed by hex digits"),
    ("f32:0x1ffffffff", "more than the 32 bits"),
    ("bf16:0x10000", "more than the 16 bits"),
    ("e2m1:0x10", "more than the 4 bits"),
    ("ue4m3:0x80", "more than the 7 bits"),
    ("-f32:0x1", "takes no sign"),
    ("f32:0x1__0", "f32:0x followed by hex digits"),
])
def test_malformed_patterns_are_refused(text, needle, capsys):
    with pytest.raises(ValueError, match=re.escape(needle)):
        parse_pattern(text)
    rc, _, err = cli(capsys, "encode", "e4m3", "--", text)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err
    if not text.startswith("-"):  # argparse passes '-f32:..' as a value, not an option
        rc, _, err = cli(capsys, "encode", "e4m3", text)
        assert rc == 2 and needle in err


@pytest.mark.parametrize("text,value", [("0x3a800000", 981467136), ("0x7F", 127), ("-0x10", -16),
                                        ("0o17", 15), ("0b101", 5), ("0x_1_0", 16)])
def test_prefixed_integer_is_refused_not_guessed(text, value, capsys):
    """'0x3a800000' is the integer 981,467,136 or float32 bits: encode says so instead of picking one."""
    rc, out, err = cli(capsys, "encode", "e4m3", "--", text)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"could be the number {value} or a bit pattern" in err and "f32:0x" in err
    # both readings remain available, spelled so that only one is possible
    if text.lstrip("-")[:2] == "0x":
        assert f"{text}p0" in err
        assert encode_rows(capsys, "e4m3", [str(value)]) == encode_rows(capsys, "e4m3", [f"{text}p0"])


def test_the_issue_transcript(capsys):
    """ver printed 0x3a800000 (2^-10, an E4M3 tie between 0 and the smallest subnormal 2^-9);
    encode read the integer 981467136 and answered 0x7E. Now the pattern means 2^-10: RNE picks 0x00."""
    assert encode_rows(capsys, "e4m3", ["f32:0x3a800000"]) == [(0x00, 0x03)]
    assert encode_rows(capsys, "e4m3", ["0x1p-10"]) == [(0x00, 0x03)]
    assert encode_rows(capsys, "e4m3", ["981467136"]) == [(0x7E, 0x25)]  # inexact|overflow|saturated
    rc, out, _ = cli(capsys, "encode", "e4m3", "f32:0x3a800000")
    row = out.splitlines()[3]
    assert row.startswith("f32:0x3a800000 (0.0009765625) ") and " yes " in row  # the value, and a tie


def test_decimals_and_hex_floats_keep_working(capsys):
    got = encode_rows(capsys, "e4m3", ["464", "0.1", "0x1.8p3", "1/3", "-0", "inf", "nan", "1e-3"])
    x = np.array([464, 0.1, 12, 1 / 3, -0.0, np.inf, np.nan, 1e-3])
    codes, flags = encode_with_flags(x[[0, 2, 4, 5, 6]], "e4m3")  # the values float64 holds exactly
    assert [got[i] for i in (0, 2, 4, 5, 6)] == list(zip(codes.tolist(), flags.tolist(), strict=True))
    assert got[1] == (0x1D, 0x01) and got[3] == (0x2B, 0x01) and got[7] == (0x01, 0x03)


def test_source_type_comes_from_the_pattern(capsys):
    """Stochastic rounding discards the bits below the source's ulp: a float16 pattern is rounded as
    float16 (D = 7 bits into E4M3's normal range), whatever --src would say by default."""
    # 1 + 2^-10 (one float16 ulp above 1): E4M3 keeps 3 fraction bits, the 7 below decide
    half = encode_rows(capsys, "e4m3", ["f16:0x3c01"], "--rounding", "sr", "--rbits", "0x7f")
    as_f16 = encode_rows(capsys, "e4m3", ["0x1.004p0"], "--rounding", "sr", "--rbits", "0x7f", "--src", "float16")
    as_f32 = encode_rows(capsys, "e4m3", ["0x1.004p0"], "--rounding", "sr", "--rbits", "0x7f")
    wanted_f16 = encode_with_flags(np.array([1 + 2**-10], np.float16), "e4m3", rounding="sr",
                                   rbits=np.array([0x7F], np.uint32))
    assert half == as_f16 == [(int(wanted_f16[0][0]), int(wanted_f16[1][0]))] and half != as_f32
    rc, _, err = cli(capsys, "encode", "e4m3", "f16:0x3c01", "--src", "float32")
    assert rc == 2 and "f16:0x3c01 is a float16 bit pattern, and --src says float32" in err
    assert encode_rows(capsys, "e4m3", ["f16:0x3c01"], "--src", "float16") == encode_rows(capsys, "e4m3",
                                                                                             ["f16:0x3c01"])


def test_decode_codes_are_unambiguous(capsys):
    rc, out, _ = cli(capsys, "decode", "e4m3", "e4m3:0x7e", "fp8_e4m3fn:0x7e", "0x7e", "126", "10")
    assert rc == 0 and [ln.split()[0] for ln in out.splitlines()[2:]] == ["0x7E"] * 4 + ["0x0A"]
    rc, _, err = cli(capsys, "decode", "e4m3", "7E")  # a .tv file's field: bare hex
    assert rc == 2 and "has hex digits but no 0x; write 0x7E" in err
    rc, _, err = cli(capsys, "decode", "e4m3", "e5m2:0x7e")
    assert rc == 2 and "not a code of e4m3: 'e5m2:0x7e' is a e5m2 bit pattern" in err
    rc, _, err = cli(capsys, "decode", "e4m3", "f32:0x3f800000")
    assert rc == 2 and "fmtsim encode e4m3 f32:0x3f800000" in err


def test_diff_takes_patterns(capsys):
    rc, out, _ = cli(capsys, "diff", "f32:0x40a00000", "bf16:0x40e0", "--format", "e2m1")
    assert rc == 0
    inputs = [m.group(1) for ln in out.splitlines()[2:] if (m := re.search(r" e2m1 +(\S+) +float32 ", ln))]
    assert inputs == ["5.0", "7.0"]
    rc, _, err = cli(capsys, "diff", "f64:0x3ff0000000000001", "--format", "e2m1")
    assert rc == 2 and "is not a float32 value" in err


# ---------------------------------------------------------------- flags by name


def test_flag_names():
    assert flag_names(0) == "none" and flags_text(0) == "none (0x00)"
    assert flag_names(0x25) == "inexact|overflow|saturated" and flags_text(0x10) == "invalid (0x10)"
    assert flag_names(0x03) == "inexact|underflow" and flag_names(0x40) == "unknown 0x40"
    # the names are fmtsim.rounding's flag bits, each once
    from fmtsim import rounding

    for name in ("inexact", "underflow", "overflow", "infinite", "invalid", "saturated"):
        assert flag_names(getattr(rounding, f"FLAG_{name.upper()}")) == name


def test_ver_prints_flags_by_name(tmp_path, capsys):
    name = "f32_to_e4m3.rne.satfinite.encode_range.tv"
    rows = read_tv((VEC / name).read_text(), "vector")
    i = next(k for k, r in enumerate(rows) if int(r[2], 16) == 0x21)  # inexact|saturated: +inf, 1e30
    lines = [" ".join(r) for r in rows]
    lines[i] = f"{rows[i][0]} {rows[i][1]} 01"  # the right code, the saturated flag missing
    p = tmp_path / "out.tv"
    p.write_text("\n".join(lines) + "\n")
    rc, out, _ = cli(capsys, "ver", name, str(p), "--vectors", str(VEC))
    assert rc == 1
    assert (f"line {i + 1}: input f32:0x{int(rows[i][0], 16):08x} (" in out
            and "flags inexact|saturated (0x21), got 0x7E " in out and "flags inexact (0x01)" in out), out


def test_missing_flags_field_names_ignore_flags(tmp_path, capsys):
    name = "f32_to_e4m3.rne.satfinite.encode_ties.tv"
    rows = read_tv((VEC / name).read_text(), "vector")
    p = tmp_path / "out.tv"
    p.write_text("".join(f"{r[0]} {r[1]}\n" for r in rows))
    rc, _, err = cli(capsys, "ver", name, str(p), "--vectors", str(VEC))
    assert rc == 2 and "line 1: 2 fields, expected 3 (input code flags)" in err and "--ignore-flags" in err
    rc, out, _ = cli(capsys, "ver", name, str(p), "--vectors", str(VEC), "--ignore-flags")
    assert rc == 0 and "0 failed" in out


def test_conform_flags_rows_print_names(tmp_path, capsys):
    """An entry point that reports flags but never 'saturated': its flags rows fail, printed by name."""
    (tmp_path / "k.py").write_text(
        "import numpy as np\nimport fmtsim\nfrom fmtsim.conformance.adapters import Adapter\n\n"
        "def with_flags(x, fmt):\n    c, f = fmtsim.encode_with_flags(x, fmt, profile='ocp')\n"
        "    return c, f & ~np.uint8(0x20)\n\n"
        "k = Adapter('k', lambda x, fmt: fmtsim.encode(x, fmt, profile='ocp'), 'ocp', ('e4m3',), "
        "with_flags=with_flags, flag_bits=0x3f)\n")
    rc, out, _ = cli(capsys, "conform", "--impl", f"{tmp_path}/k.py:k", "--formats", "e4m3", "--quick")
    fails = [ln for ln in out.splitlines() if ln.startswith("FAIL")]
    assert rc == 1 and fails and all(" flags" in ln.split(":")[0] for ln in fails), fails  # only flags rows
    for ln in fails:
        m = re.search(r"k flags ([a-z|]+) \((0x[0-9a-f]{2})\), fmtsim\[ocp\] flags ([a-z|]+) \((0x[0-9a-f]{2})\)$", ln)
        assert m, ln
        assert m.group(3) == m.group(1).replace("none", "") .strip("|") + "|saturated" or \
            m.group(3).endswith("saturated"), ln
        assert flag_names(int(m.group(2), 16)) == m.group(1) and flag_names(int(m.group(4), 16)) == m.group(3)
        assert int(m.group(4), 16) & ~0x20 == int(m.group(2), 16)


# ---------------------------------------------------------------- mismatches by rule
#
# Deliberately wrong quantizers, written with numpy and ml_dtypes alone, run on a vector file's
# inputs; 'fmtsim ver' must put each wrong line under the rule it breaks, and the count per rule
# must equal the count worked out here from the quantizer's own definition.

E4M3 = ml_dtypes.float8_e4m3fn
_E4M3_VALUES = np.unique(np.array(range(256), np.uint8).view(E4M3).astype(np.float64))
_E4M3_VALUES = _E4M3_VALUES[np.isfinite(_E4M3_VALUES)]
E4M3_MIDPOINTS = set(((_E4M3_VALUES[:-1] + _E4M3_VALUES[1:]) / 2).tolist())


def _half_up(x):
    """E4M3 with ties rounded half up in magnitude (away from zero), saturating; NaN -> 0x7F."""
    v = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        a = np.abs(v)
        step = 2.0 ** (np.maximum(np.floor(np.log2(np.where(a > 0, a, 1))), -6) - 3)
        q = np.minimum(np.floor(a / step + 0.5) * step, 448)
        codes = np.copysign(q, v).astype(E4M3).view(np.uint8).copy()
    codes[np.isnan(v)] = 0x7F
    return codes


def _truncate(x):
    """E4M3 rounded toward zero (truncation), saturating."""
    v = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        a = np.abs(v)
        step = 2.0 ** (np.maximum(np.floor(np.log2(np.where(a > 0, a, 1))), -6) - 3)
        q = np.minimum(np.floor(a / step) * step, 448)
        return np.copysign(q, v).astype(E4M3).view(np.uint8)


def _flush(x):
    """ml_dtypes' E4M3 cast (correct, saturated first) with results below 2^-6 flushed to zero."""
    v = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        codes = np.clip(v, -448, 448).astype(E4M3).view(np.uint8).copy()
    codes[np.abs(v) < 2.0**-6] &= 0x80
    return codes


def _via_float16(x):
    """ml_dtypes' E4M3 cast of the input first rounded to float16: two roundings."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.clip(x.astype(np.float16).astype(np.float64), -448, 448).astype(E4M3).view(np.uint8)


def _no_saturation(x):
    """ml_dtypes' plain cast: beyond 464 (and Inf) it gives NaN where satfinite gives +-448."""
    with np.errstate(invalid="ignore", over="ignore"):
        codes = x.astype(np.float64).astype(E4M3).view(np.uint8).copy()
    codes[np.isnan(x)] = np.where(np.signbit(x[np.isnan(x)]), 0xFF, 0x7F)
    return codes


def _unsigned_zero(x):
    """ml_dtypes' cast, saturated, but every zero is +0."""
    with np.errstate(invalid="ignore"):
        codes = np.clip(x.astype(np.float64), -448, 448).astype(E4M3).view(np.uint8).copy()
    codes[codes == 0x80] = 0
    return codes


def _positive_nan(x):
    """ml_dtypes' cast, saturated, but every NaN is +NaN (0x7F), as PTX writes it."""
    with np.errstate(invalid="ignore"):
        codes = np.clip(x.astype(np.float64), -448, 448).astype(E4M3).view(np.uint8).copy()
    codes[np.isnan(x)] = 0x7F
    return codes


def _rules(out):
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^  (.+?): (\d+) \(", out, re.M)}


def _run_device(tmp_path, capsys, name, device, *options):
    rows = read_tv((VEC / name).read_text(), "vector")
    x = np.array([int(r[0], 16) for r in rows], np.uint32).view(np.float32)
    codes = device(x)
    p = tmp_path / "device.tv"
    p.write_text("".join(f"{r[0]} {c:02X}\n" for r, c in zip(rows, codes.tolist(), strict=True)))
    rc, out, err = cli(capsys, "ver", name, str(p), "--vectors", str(VEC), "--ignore-flags", "--errors", "100000",
                       *options)
    assert rc in (0, 1), err
    want = np.array([int(r[1], 16) for r in rows])
    wrong = codes != want
    if "--check-nans" not in options:  # any NaN code passes for a NaN
        wrong &= ~(np.isin(codes, [0x7F, 0xFF]) & np.isin(want, [0x7F, 0xFF]))
    tagged = re.findall(r"^line (\d+): .*\[(.+)\]$", out, re.M)
    assert len(tagged) == int(wrong.sum())  # every wrong line printed, each with its rule
    with np.errstate(invalid="ignore"):  # signalling NaN inputs widen quietly
        wide = x.astype(np.float64)
    return wide, want, codes, wrong, _rules(out), {int(n) - 1: rule for n, rule in tagged}, out


def test_half_up_ties_are_named_ties(tmp_path, capsys):
    """The issue's quantizer: the summary says 'tie', with the count of inputs that are E4M3 midpoints
    and that half-up rounds the other way; the one example reads as the tie it is."""
    x, _, _, wrong, rules, per_line, out = _run_device(tmp_path, capsys, "f32_to_e4m3.rne.satfinite.encode_ties.tv",
                                                     _half_up)
    ties = np.array([abs(v) in E4M3_MIDPOINTS for v in x]) & wrong
    assert ties.sum() == 126 and rules["tie"] == 126
    assert rules == {"tie": 126, "NaN/Inf encoding": int((wrong & np.isinf(x)).sum())}  # +-Inf -> NaN
    assert all((per_line[i] == "tie") == bool(ties[i]) for i in np.nonzero(wrong)[0])
    summary = out.split("\nline ")[0]
    assert "this input is a tie between 0 and 0.001953125; RNE picks the even code 0x00 (0), the device gave " \
           "0x01 (0.001953125) (ties away from zero)" in summary
    assert out.index("mismatches by rule") < out.index("\nline ")  # the summary before the lines


@pytest.mark.parametrize("name,device,rule,lines", [
    # truncation on random inputs (none a tie): another rounding mode
    ("f32_to_e4m3.rne.satfinite.encode_random.tv", _truncate, "rounding direction (rtz)", None),
    # results below E4M3's smallest normal flushed: every wrong line is a nonzero answer below 2^-6
    ("f32_to_e4m3.rne.satfinite.encode_ties.tv", _flush, "subnormal flush",
     lambda x, want: np.abs(x) < 2.0**-6),
    # one float32 ulp off a midpoint that float16 holds: through float16 the input lands on the tie
    ("f32_to_e4m3.rne.satfinite.double_rounding.tv", _via_float16, "double rounding (float16)", None),
    ("f32_to_e4m3.rne.satfinite.encode_range.tv", _unsigned_zero, "sign of zero", lambda x, want: want == 0x80),
    ("f32_to_e4m3.rne.satfinite.encode_range.tv", _positive_nan, "NaN/Inf encoding", lambda x, want: np.isnan(x)),
])
def test_wrong_quantizers_are_named_by_rule(name, device, rule, lines, tmp_path, capsys):
    options = ["--check-nans"] if device is _positive_nan else []  # the NaN's code itself is the rule here
    x, want, _, wrong, rules, per_line, _ = _run_device(tmp_path, capsys, name, device, *options)
    assert wrong.any()
    assert rules == {rule: int(wrong.sum())}, rules
    assert set(per_line.values()) == {rule}
    if lines is not None:  # the lines the quantizer's own definition says it gets wrong
        assert (wrong == (lines(x, want) & wrong)).all()


def test_no_saturation_is_overflow(tmp_path, capsys):
    x, _, _, wrong, rules, per_line, out = _run_device(tmp_path, capsys, "f32_to_e4m3.rne.satfinite.encode_range.tv",
                                                     _no_saturation)
    beyond = wrong & np.isfinite(x) & (np.abs(x) > 448)
    assert rules == {"overflow/saturation": int(beyond.sum()), "NaN/Inf encoding": int((wrong & np.isinf(x)).sum())}
    assert beyond.sum() >= 4 and all((per_line[i] == "overflow/saturation") == bool(beyond[i])
                                     for i in np.nonzero(wrong)[0])
    assert "is beyond e4m3's largest finite magnitude 448; overflow=satfinite gives 0x7E (448), the device gave " \
           "0x7F (nan)" in out


def test_conform_names_the_rule(tmp_path, capsys):
    """conform: the same classification, one line per row and rule before the FAIL lines."""
    (tmp_path / "half_up.py").write_text(HALF_UP)
    rc, out, _ = cli(capsys, "conform", "--impl", f"{tmp_path}/half_up.py:encode_e4m3", "--formats", "e4m3",
                     "--quick")
    assert rc == 1
    by_rule = re.findall(r"^  \S+ e4m3 encode_ties: (.+?): (\d+) \(((?:f16|bf16|f32):0x[0-9a-f]+)", out, re.M)
    assert by_rule and out.index("by rule") < out.index("\nFAIL ")
    counts = {}
    for rule, n, pattern in by_rule:
        counts[rule] = counts.get(rule, 0) + int(n)
        if rule == "tie":  # the example is a tie indeed: exactly halfway between two E4M3 values
            p = parse_pattern(pattern)
            assert abs(p.value()) in E4M3_MIDPOINTS
    row = re.search(r"encode_ties +(\d+) +(\d+) +- +(\d+)", out)
    assert sum(counts.values()) == int(row.group(3)) and counts["tie"] > 0


def test_decode_mismatches_by_rule(tmp_path, capsys):
    """A decoder that flushes E4M3 subnormals, drops -0's sign and writes every NaN as +NaN: 14 subnormal
    codes (0x01-0x07, 0x81-0x87), one zero, one NaN (0xFF; 0x7F is already +NaN)."""
    name = "e4m3_to_f32.decode_all.tv"
    codes = np.arange(256, dtype=np.uint8)
    bits = np.clip(codes.view(E4M3).astype(np.float32), -np.inf, np.inf).view(np.uint32).copy()
    subnormal = ((codes & 0x78) == 0) & ((codes & 0x07) != 0)
    bits[subnormal] &= 0x80000000
    bits[0x80] = 0
    bits[np.isnan(codes.view(E4M3).astype(np.float32))] = 0x7FC00000
    p = tmp_path / "dec.tv"
    p.write_text("".join(f"{c:02X} {b:08X}\n" for c, b in zip(codes.tolist(), bits.tolist(), strict=True)))
    rc, out, _ = cli(capsys, "ver", name, str(p), "--vectors", str(VEC), "--ignore-flags", "--errors", "300")
    assert rc == 1 and _rules(out) == {"subnormal flush": int(subnormal.sum()), "sign of zero": 1,
                                       "NaN/Inf encoding": 1}
    assert "line 2: code 0x01: e4m3 code 0x01 is 0.001953125; fmtsim decodes it to f32:0x3b000000, the device " \
           "gave f32:0x00000000 (0): a subnormal read as zero" in out


def test_gen_profile_writes_the_profile_itself(tmp_path, capsys):
    """'fmtsim gen OP --profile ptx' lines are what encode gives under that profile, its finer fields
    included: PTX's cvt.rp.ue8m0 reads a negative input's exponent bits (-3 -> 0x81)."""
    vf = next(policy_files("f32", "e8m0", "rup", None, "ptx"))
    rows = read_tv(vf.text.decode(), "vector")
    x = np.array([int(r[0], 16) for r in rows], np.uint32).view(np.float32)
    codes, flags = encode_with_flags(x, "e8m0", rounding="rup", profile="ptx")
    assert [int(r[1], 16) for r in rows] == codes.tolist() and [int(r[2], 16) for r in rows] == flags.tolist()
    assert encode_rows(capsys, "e8m0", ["-3"], "--rounding", "rup", "--profile", "ptx")[0][0] == 0x81
    neg = [int(r[1], 16) for r, v in zip(rows, x.tolist(), strict=True) if v == -3.0]
    assert neg == [0x81] * len(neg) and neg


def test_conform_decode_rows_name_the_rule(monkeypatch):
    """A registered decoder that flushes E4M3 subnormals: its decode_all row tallies 'subnormal flush'."""
    from fmtsim.conformance import impls, run
    from fmtsim.conformance.plugin import Decoder, Implementation

    def flushing(codes, fmt):
        v = np.asarray(codes, np.uint8).view(E4M3).astype(np.float32)
        return np.where(np.abs(v) < 2.0**-6, np.copysign(np.float32(0), v), v).astype(np.float32)

    class Flush(Implementation):
        name = "flushing"
        summary = "test double"
        capabilities = ("decode",)

        def decoders(self, req):
            return [Decoder("flushing", flushing, ("e4m3",))]

    monkeypatch.setitem(impls.registry(), "flushing", Flush())
    (row,) = run.run(("flushing",), formats=["e4m3"], big=False)
    assert row.failed == 14 and [(r, n) for r, n, _ in row.rules.summary()] == [("subnormal flush", 14)]


@pytest.mark.parametrize("device,name,options", [
    (_truncate, "f32_to_e4m3.rne.satfinite.encode_random.tv", ["--rounding rtz --overflow satfinite"]),
    (_no_saturation, "f32_to_e4m3.rne.satfinite.encode_range.tv",
     ["--profile ml_dtypes", "--rounding rne --overflow nonsat"]),
])
def test_ver_names_the_policy_the_device_follows(device, name, options, tmp_path, capsys):
    """A device that follows another fmtsim policy on every line is told which: each option named, re-run
    through 'fmtsim encode' on the file's inputs, gives the device's codes."""
    *_, out = _run_device(tmp_path, capsys, name, device)
    line = next(ln for ln in out.splitlines() if "every line matches fmtsim under" in ln)
    assert all(o in line for o in options), line
    x = np.array([int(r[0], 16) for r in read_tv((VEC / name).read_text(), "vector")], np.uint32).view(np.float32)
    for opt in options:
        kw = dict(zip(opt.split()[::2], opt.split()[1::2], strict=True))
        kw = {k.lstrip("-"): v for k, v in kw.items()}
        with np.errstate(invalid="ignore"):
            got = fmtsim_encode(x, "e4m3", **kw)
        same = (got == device(x)) | (np.isin(got, [0x7F, 0xFF]) & np.isin(device(x), [0x7F, 0xFF]))
        assert same.all(), opt
    # the issue's quantizer follows no policy: nothing is claimed
    *_, out = _run_device(tmp_path, capsys, "f32_to_e4m3.rne.satfinite.encode_ties.tv", _half_up)
    assert "every line matches" not in out
