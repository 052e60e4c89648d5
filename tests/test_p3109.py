"""IEEE P3109 (interim report v4.0): every Binary{K}p{P}{s|u}{e|f} format with K = 3..16 (504), held to
the working group's own value tables (by digest, tools/gen_p3109_digests.py), to gfloat bit for bit
(every rounding mode gfloat has, both saturations it has, the three stochastic variants), to the
Fraction twin, and to the report's rules worked out by hand (4.7.4, 4.7.5). Formats wider than a byte
have uint16 codes, and some (Binary16p1se: up to 2^16382) have values beyond float64."""

import hashlib
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import fmtsim
from fmtsim import p3109
from fmtsim.formats import CLASS_INF, CLASS_NAN, CLASS_SUBNORMAL, p3109_formats
from fmtsim.oracle import encode_one
from fmtsim.rounding import magnitude_keys

from .conftest import slow_unless

DIGESTS = json.loads((Path(__file__).parent / "fixtures" / "p3109" / "value_table_digests.json").read_text())
ALL = [f.name for f in p3109_formats()]
BINARY8 = {n for n in ALL if n.startswith("binary8")}
NARROW = [n for n in ALL if fmtsim.get_format(n).bits <= 8]
#: per K = 9..16 the extreme and middle precisions, both signednesses and domains, and every format
#: whose values go beyond float64 at K = 16
WIDE = [f.name for f in p3109_formats(range(9, 17))
        if f.man_bits + 1 in (1, 2, f.bits // 2, f.bits - 1, f.bits) or not f.fits_float64 and f.bits == 16]


def test_the_family_is_the_reports():
    # K 3..16 (the widths the working group publishes tables for): signed P 1..K-1, unsigned P 1..K, two domains
    assert len(ALL) == 504 == len(DIGESTS["sha256"]) and set(ALL) == set(DIGESTS["sha256"])
    f = fmtsim.get_format("Binary8p4se")
    assert (f.bits, f.bias, f.exp_bits, f.man_bits, f.max_finite) == (8, 8, 4, 3, 224)
    assert f.nan_codes == (0x80,) and f.inf_codes == (0x7F, 0xFF) and not f.has_neg_zero
    # 3.1's examples: 2.0 is 0x48 and Inf 0x7F in Binary8p4se
    assert fmtsim.encode(np.float32([2.0, np.inf]), f, overflow="nonsat").tolist() == [0x48, 0x7F]
    u = fmtsim.get_format("binary8p4ue")
    assert (u.bias, u.nan_codes, u.inf_codes) == (16, (0xFF,), (0xFE,))
    # the signed Finite formats are FNUZ-shaped: Binary8p4sf has E4M3FNUZ's values
    assert np.array_equal(fmtsim.get_format("binary8p4sf").values, fmtsim.get_format("e4m3fnuz").values,
                          equal_nan=True)


@pytest.mark.parametrize("name, message", [
    ("binary17p4se", "K = 3..16"), ("binary2p1se", "greater than 2"), ("binary8p8se", "P must be 1..7"),
    ("binary8p9ue", "P must be 1..8"), ("binary8p0ue", "P must be 1..8"), ("binary16p16se", "P must be 1..15"),
])
def test_names_outside_the_ranges_are_refused(name, message):
    with pytest.raises(ValueError, match=message):
        fmtsim.get_format(name)


def _canonical(f) -> bytes:
    """The digest tool's canonical form (five int64 per code: kind, sign, odd m and e of m*2^e, subnormal),
    from fmtsim's exact integer parts of every code."""
    p = f.parts
    kind = np.select([p.cls == CLASS_NAN, (p.cls == CLASS_INF) & ~p.negative, p.cls == CLASS_INF], [3, 1, 2], 0)
    sig = np.where(kind == 0, p.sig, 0)
    tz = np.zeros(sig.shape, np.int64)
    tz[sig != 0] = np.log2(sig[sig != 0] & -sig[sig != 0]).astype(np.int64)
    cols = (kind, p.negative & (kind == 0), sig >> tz, np.where(sig != 0, p.exp2 + tz, 0), p.cls == CLASS_SUBNORMAL)
    return np.stack([np.asarray(c, np.int64) for c in cols], axis=1).astype("<i8").tobytes()


@pytest.mark.parametrize("name", ALL)
def test_every_code_is_the_value_tables(name):
    assert hashlib.sha256(_canonical(fmtsim.get_format(name))).hexdigest() == DIGESTS["sha256"][name]


def test_the_integer_parts_are_the_fraction_values():
    """Format.parts (array-wide) against Format.code_value and code_class (code by code), and the values
    beyond float64 held to the report's own numbers (Binary16p1se's table: 0x0001 is 2^-16383)."""
    for name in ("binary9p4se", "binary10p1ue", "binary12p12uf", "binary16p1se"):
        f = fmtsim.get_format(name)
        p = f.parts
        n, half = f.n_codes, f.n_codes // 2
        codes = range(n) if f.bits <= 10 else [0, 1, 2, half - 2, half - 1, half, half + 1, n - 2, n - 1]
        for c in codes:
            v = f.code_value(c)
            assert f.code_class(c) == ("nan", "inf", "zero", "subnormal", "normal")[p.cls[c]], (name, c)
            if isinstance(v, Fraction):
                assert v == (-1) ** int(p.negative[c]) * int(p.sig[c]) * Fraction(2) ** int(p.exp2[c]), (name, c)
    f = fmtsim.get_format("binary16p1se")
    assert f.code_value(1) == Fraction(1, 2**16383) and f.max_finite == 2**16382 and not f.fits_float64
    assert f.code_dtype == np.uint16 and f.nan_codes == (0x8000,) and f.inf_codes == (0x7FFF, 0xFFFF)
    with pytest.raises(ValueError, match="not all float64s; read Format.parts"):
        _ = f.values


def _inputs(f, rng, n16=1 << 16):
    keys, exact = magnitude_keys(f)
    vals = np.unique(keys[exact & np.isfinite(keys)])  # every value that is a float64
    if vals.size > 3000:
        vals = np.unique(np.concatenate([vals[:500], vals[-500:], rng.choice(vals, 2000, replace=False)]))
    x16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    if n16 < x16.size:
        x16 = rng.choice(x16, n16, replace=False)
    top = float(vals[-1])
    x = np.concatenate([x16, vals, vals[:-1] + (vals[1:] - vals[:-1]) / 2, vals * (1 + 2**-20), vals * (1 - 2**-20),
                        rng.standard_normal(2000) * min(top, 1e300), [min(top * 3, 1.7e308), 1e300, 5e-324]])
    return np.concatenate([x, -x])


GF_MODES = ("TowardZero", "TowardPositive", "TowardNegative", "NearestTiesToAway", "NearestTiesToEven")


# gfloat computes a format's values in float64: it raises OverflowError for those beyond it (Binary16p1se)
@pytest.mark.parametrize("name", slow_unless(NARROW + [n for n in WIDE if fmtsim.get_format(n).fits_float64],
                                             keep={"binary8p4se", "binary8p3uf", "binary5p2se", "binary8p1ue",
                                                   "binary12p6se", "binary16p15ue"}))
def test_held_to_gfloat(name, rng):
    gf = pytest.importorskip("gfloat", reason="gfloat (pip install gfloat) is the P3109 peer")
    from gfloat.encode_ndarray import encode_ndarray
    from gfloat.formats import format_info_p3109
    from gfloat.round_ndarray import round_ndarray

    f = fmtsim.get_format(name)
    ext = f.specials == "top_inf"
    fi = format_info_p3109(f.bits, f.man_bits + 1, gf.Signedness.Signed if f.signed else gf.Signedness.Unsigned,
                           gf.Domain.Extended if ext else gf.Domain.Finite)
    x = _inputs(f, rng, n16=1 << 16 if f.bits <= 8 else 4000)
    if not f.signed:  # gfloat's round_float returns negatives unchanged into unsigned formats: not comparable
        x = x[~np.signbit(x)]
    gf_mode = {"TowardZero": gf.RoundMode.TowardZero, "TowardPositive": gf.RoundMode.TowardPositive,
               "TowardNegative": gf.RoundMode.TowardNegative, "NearestTiesToAway": gf.RoundMode.TiesToAway,
               "NearestTiesToEven": gf.RoundMode.TiesToEven}
    for mode in GF_MODES:
        # gfloat's sat=False into a Finite format gives NaN past max finite; the report (4.7.5) clamps
        for sat, saturation in ((True, "SatFinite"), (False, "SatNone"))[: 2 if ext else 1]:
            with np.errstate(all="ignore"):
                want = encode_ndarray(fi, round_ndarray(fi, x, gf_mode[mode], sat))
            got = fmtsim.encode(x, f, profile=p3109.projection(mode, saturation))
            assert got.dtype == f.code_dtype
            assert np.array_equal(got, want.astype(f.code_dtype)), (mode, saturation, x[got != want][:4])
    # gfloat's stochastic modes are the report's variants: Stochastic = C, StochasticFast = B, StochasticFastest = A
    x = x[np.isfinite(x)][:3000]
    for variant, rm in (("StochasticA", gf.RoundMode.StochasticFastest), ("StochasticB", gf.RoundMode.StochasticFast),
                        ("StochasticC", gf.RoundMode.Stochastic)):
        for n in (1, 5, 12):
            r = rng.integers(0, 1 << n, x.size)
            with np.errstate(all="ignore"):
                want = encode_ndarray(fi, round_ndarray(fi, x, rm, True, r, n))
            got = fmtsim.encode(x, f, profile=p3109.projection(variant, "SatFinite", random_bits=n),
                                rbits=r.astype(np.uint32))
            assert np.array_equal(got, want.astype(f.code_dtype)), (variant, n)


# pychop's float64 host holds formats of at most 10 exponent bits (P3109Format refuses the rest)
@pytest.mark.parametrize("name", slow_unless([n for n in WIDE if fmtsim.get_format(n).exp_bits <= 10],
                                             keep={"binary16p8se", "binary10p5uf"}))
def test_wide_formats_held_to_pychop(name, rng):
    """pychop's p3109_encode under its six deterministic modes with SatFinite, and p3109_decode of every
    code (byte formats are pychop's conform entry points: fmtsim conform --impl pychop)."""
    pychop = pytest.importorskip("pychop", reason="pychop (pip install pychop==0.6.2) is a P3109 peer")
    from fmtsim.profiles.pychop import P3109_MODES

    f = fmtsim.get_format(name)
    pf = pychop.P3109Format(f.bits, f.man_bits + 1, f.signed, "extended" if f.has_inf else "finite")
    x = _inputs(f, rng, n16=8000)
    if not f.signed:  # negatives into unsigned formats: pychop's SatNone rules, named in conform
        x = x[~np.signbit(x)]
    for mode, report_name in P3109_MODES.items():
        if report_name.startswith("Stochastic"):
            continue
        with np.errstate(all="ignore"):
            theirs = np.asarray(pychop.p3109_encode(x, pf, rounding=mode, saturate=True)).astype(np.int64)
        ours = fmtsim.encode(x, f, profile=p3109.projection(report_name, "SatFinite"))
        assert np.array_equal(ours, theirs), (mode, x[ours != theirs][:4])
    codes = np.arange(f.n_codes)
    with np.errstate(all="ignore"):
        theirs = np.asarray(pychop.p3109_decode(codes, pf), dtype=np.float64)
    assert np.array_equal(fmtsim.decode(codes, f, np.float64), theirs, equal_nan=True)


MODES = tuple(p3109.ROUNDING)


@pytest.mark.parametrize("name", slow_unless(NARROW + WIDE, keep={"binary8p4se", "binary8p4ue", "binary4p2sf",
                                                                    "binary6p6uf", "binary11p5ue", "binary16p2sf"}))
def test_fast_path_equals_the_fraction_twin(name, rng):
    f = fmtsim.get_format(name)
    keys, exact = magnitude_keys(f)
    vals = np.unique(keys[exact & np.isfinite(keys)])
    top, low = float(vals[-1]), float(vals[vals > 0][0])
    near = np.concatenate([vals, vals[:-1] + (vals[1:] - vals[:-1]) / 2, vals * 1.01,
                           rng.standard_normal(40) * min(top, 1e300)])
    x = np.concatenate([rng.choice(near, min(near.size, 40), replace=False),
                        [min(top * 5, 1.7e308), 1.7976931348623157e308, 5e-324, 3 * 5e-324, np.inf, np.nan, 0.0, -0.0,
                         low / 3]])
    x = np.concatenate([x, -x])  # every code is held to gfloat and the value tables above; here a sample per mode
    for mode in MODES:
        for saturation in p3109.SATURATION:
            bits = 6 if mode.startswith("Stochastic") else None
            prof = p3109.projection(mode, saturation, random_bits=bits)
            r = rng.integers(0, 64, x.size).astype(np.uint32) if bits else None
            codes, flags = fmtsim.encode_with_flags(x, f, profile=prof, rbits=r)
            assert np.array_equal(fmtsim.encode(x, f, profile=prof, rbits=r), codes)  # the fast path too
            for i, v in enumerate(x):
                want = encode_one(float(v), f, profile=prof, rbits=0 if r is None else int(r[i]))
                assert (int(codes[i]), int(flags[i])) == want, (mode, saturation, v)


def test_saturation_modes_by_the_report():
    se, ue, sf, uf = (fmtsim.get_format(n) for n in ("binary8p4se", "binary8p4ue", "binary8p4sf", "binary8p4uf"))
    inf = np.float32([np.inf, -np.inf])
    enc = fmtsim.encode
    # SatFinite: +-Inf to the extremal finite values; SatPropagate keeps the infinities the format has
    assert enc(inf, se, profile=p3109.projection("NearestTiesToEven", "SatFinite")).tolist() == [0x7E, 0xFE]
    assert enc(inf, se, profile=p3109.projection("NearestTiesToEven", "SatPropagate")).tolist() == [0x7F, 0xFF]
    assert enc(inf, ue, profile=p3109.projection("NearestTiesToEven", "SatPropagate")).tolist() == [0xFE, 0x00]
    # SatNone: a Finite format clamps (no infinity in its datum set); an unsigned one gives NaN below zero
    none = p3109.projection("NearestTiesToEven", "SatNone")
    assert enc(np.float32([1e9, -1e9, np.inf]), sf, profile=none).tolist() == [0x7F, 0xFF, 0x7F]
    assert enc(np.float32([-1.0, -np.inf, -1e-9, 1e9]), uf, profile=none).tolist() == [0xFF, 0xFF, 0x00, 0xFE]
    assert enc(np.float32([-1.0, -1e-9, 1e9]), ue, profile=none).tolist() == [0xFF, 0x00, 0xFE]
    # ... but a negative that rounds away from zero toward a nonzero value is the NaN: TowardNegative
    assert enc(np.float32([-1e-9]), ue, profile=p3109.projection("TowardNegative", "SatNone")).tolist() == [0xFF]
    # ToOdd under SatNone: an unsigned Extended format's max code (0xFD) is odd: no overflow to Inf;
    # a signed one's (0x7E) is even: +-Inf
    odd = p3109.projection("ToOdd", "SatNone")
    assert enc(np.float32([1e9]), ue, profile=odd).tolist() == [0xFD]
    assert enc(np.float32([1e9, -1e9]), se, profile=odd).tolist() == [0x7F, 0xFF]
    # directed rounding toward the finite side stops at max (4.7.5)
    assert enc(np.float32([1e9]), se, profile=p3109.projection("TowardZero", "SatNone")).tolist() == [0x7E]


def test_projection_arguments_are_checked():
    with pytest.raises(ValueError, match="unknown P3109 rounding mode 'Nearest'"):
        p3109.projection("Nearest")
    with pytest.raises(ValueError, match="unknown P3109 saturation mode"):
        p3109.projection("ToOdd", "SatMax")
    with pytest.raises(ValueError, match="needs random_bits"):
        p3109.projection("StochasticA")
    with pytest.raises(ValueError, match="random_bits is for the stochastic modes"):
        p3109.projection("ToOdd", random_bits=3)


def test_p3109_formats_through_the_command_line(capsys, tmp_path):
    from fmtsim.cli import main

    assert main(["encode", "binary8p4se", "2.0"]) == 0
    assert "0x48" in capsys.readouterr().out
    assert main(["table", "binary5p2ue"]) == 0
    out = capsys.readouterr().out
    assert "inf" in out.lower() and "nan" in out.lower()


def test_vectors_for_a_p3109_format_and_a_new_mode_round_trip(tmp_path, capsys):
    from fmtsim.cli import main

    out = tmp_path / "v"
    assert main(["gen", "f32_to_binary8p4se", "--rounding", "rto", "-o", str(out)]) == 0
    tv = out / "f32_to_binary8p4se.rto.satfinite.encode_ties.tv"
    lines = tv.read_text().splitlines()
    body = [ln for ln in lines if ln and not ln.startswith("#")]
    x = np.array([int(ln.split()[0], 16) for ln in body], dtype=np.uint32).view(np.float32)
    want = fmtsim.encode(x, "binary8p4se", rounding="rto")
    assert [int(ln.split()[1], 16) for ln in body] == want.tolist()
    assert main(["ver", str(tv), str(tv)]) == 0
    wrong = tmp_path / "wrong.tv"
    k = lines.index(body[5])
    code = int(body[5].split()[1], 16)
    lines[k] = f"{body[5].split()[0]} {code ^ 1:02X} {body[5].split()[2]}"
    wrong.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["ver", str(tv), str(wrong)]) == 1
    assert "1 failed" in capsys.readouterr().out


def test_a_wide_format_through_every_entry_point(tmp_path, capsys, rng):
    """A 12-bit and a 16-bit P3109 format through the API (uint16 codes, flags, quantize, threads, decode's
    refusals) and the command line (encode, decode, table, gen, ver with text and raw uint16 results)."""
    from fmtsim import mx
    from fmtsim.cli import main

    f = fmtsim.get_format("binary12p6se")
    x = rng.standard_normal(1 << 19) * 100
    codes = fmtsim.encode(x, f)
    assert codes.dtype == np.uint16 and int(codes.max()) < 1 << 12
    assert np.array_equal(fmtsim.encode(x, f, threads=2), codes)
    c, flags = fmtsim.encode_with_flags(x[:1000], f)
    assert np.array_equal(c, codes[:1000]) and flags.dtype == np.uint8
    assert np.array_equal(fmtsim.quantize(x[:1000], f), fmtsim.decode(codes[:1000], f, np.float64))
    assert fmtsim.decode(np.array([0x1FFF]), f, mask=True).tolist() == fmtsim.decode(np.array([0xFFF]), f).tolist()
    with pytest.raises(ValueError, match=r"code 4096 at index 1 is outside 0..0xfff"):
        fmtsim.decode(np.array([0, 4096]), f)
    # values beyond float32 (Binary16p7se: bias 256) decode to float64 only; beyond float64, code by code
    with pytest.raises(ValueError, match="binary16p7se: not every value is representable in float32; decode to float6"):
        fmtsim.decode(np.array([0]), "binary16p7se")
    wide = fmtsim.get_format("binary16p1se")
    assert fmtsim.decode(np.array([0x3FFE, 0x4000, 0x8000, 0x7FFF]), wide, np.float64).tolist()[:2] == [0.25, 1.0]
    with pytest.raises(ValueError, match=r"code 0x7ffe at index 1 is worth 2\^16382, not a float64"):
        fmtsim.decode(np.array([0x4000, 0x7FFE]), wide, np.float64)
    # every float64 lies inside Binary16p1se's range: the largest rounds to 2^1024, the smallest is exact
    big = fmtsim.encode(np.array([1.7976931348623157e308, 5e-324]), wide)
    assert [wide.code_value(int(c)) for c in big] == [2**1024, Fraction(1, 2**1074)]
    with pytest.raises(ValueError, match="binary12p6se has 12-bit codes; MX-style blocks take element formats of at"):
        mx.quantize(np.zeros(32, np.float32), "mx_binary12p6se")

    assert main(["encode", "binary12p6se", "2.5"]) == 0
    assert "0x428" in capsys.readouterr().out
    assert main(["decode", "binary16p1se", "0x7ffe", "0x0001"]) == 0
    out = capsys.readouterr().out
    assert "0x1p+16382   2^16382" in out and "0x1p-16383   2^-16383" in out
    assert main(["table", "binary12p6se"]) == 0
    assert capsys.readouterr().out.count("\n0x") == 4096
    assert main(["gen", "f32_to_binary12p6se", "-o", str(tmp_path / "v")]) == 0
    tv = tmp_path / "v" / "f32_to_binary12p6se.rne.satfinite.encode_ties.tv"
    body = [ln.split() for ln in tv.read_text().splitlines() if ln and not ln.startswith("#")]
    assert all(len(code) == 4 for _, code, _ in body)  # uint16 codes: four hex digits
    xs = np.array([int(i, 16) for i, _, _ in body], dtype=np.uint32).view(np.float32)
    want = fmtsim.encode(xs, f)
    assert [int(code, 16) for _, code, _ in body] == want.tolist()
    raw = tmp_path / "device.bin"
    raw.write_bytes(want.astype("<u2").tobytes())  # a device's results: one little-endian uint16 a case
    assert main(["ver", str(tv), str(raw)]) == 0
    assert f"{len(body)} passed, 0 failed" in capsys.readouterr().out
    bad = want.copy()
    bad[7] ^= 0x100
    raw.write_bytes(bad.astype("<u2").tobytes())
    assert main(["ver", str(tv), str(raw)]) == 1
    assert "1 failed" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["binary16p11se", "binary12p6se", "binary9p4ue", "binary16p12sf", "e5m10"])
def test_wide_table_path_equals_the_engine(name, rng):
    """Wide formats with a float32 round-to-odd table (P <= 12 inside float32's range) against the exact
    float64 engine (encode_with_flags runs it) on random float32 patterns and float64 values."""
    from fmtsim.policy import resolve
    from fmtsim.rounding import wide_table_f32

    f = fmtsim.get_format(name)
    x32 = rng.integers(0, 1 << 32, 300_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x64 = rng.standard_normal(100_000) * np.exp2(rng.uniform(-40, 40, 100_000))
    for rounding in ("rne", "rtz", "rto", "rna", "rup"):
        assert wide_table_f32(resolve(f, rounding)) is not None
        for x in (x32, x64):
            assert np.array_equal(fmtsim.encode(x, f, rounding=rounding), fmtsim.encode_with_flags(x, f,
                                  rounding=rounding)[0]), (rounding, x.dtype)
