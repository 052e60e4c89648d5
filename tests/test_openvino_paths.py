"""OpenVINO's two FP8 code paths (``avx512_core_fp16``: oneDNN's JIT emulation; ``reference``:
its float8 constructors, on every other CPU) and the policy field that models the reference
path's float16 constructor (``intermediate_carry='doubles_subnormal'``): the field's exact slow
twin equals its fast path, its numbers are the ones worked out by hand from the constructor's
arithmetic, and, where OpenVINO is installed and this CPU takes the reference path, OpenVINO
itself gives them."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim.formats import get_format
from fmtsim.oracle import encode_one
from fmtsim.policy import Policy, resolve
from fmtsim.profiles import select, variants

E5M2 = get_format("e5m2")


def _policy(path: str) -> Policy:
    return select("openvino", "2026.4.1", path).variant.policy(E5M2)


def _edge_inputs() -> np.ndarray:
    """float32 around every power of two from 2^-40 to 2^-12 (the carries and their
    neighbours, ties included), both signs, plus a spread of others and NaNs."""
    out = []
    for k in range(-40, -11):
        c = np.float32(2.0 ** k).view(np.uint32)
        out.append(np.arange(c - 300, c + 300, dtype=np.uint32))
        t = np.float32((2 - 2.0 ** -11) * 2.0 ** (k - 1)).view(np.uint32)  # the float16 tie below 2^k
        out.append(np.arange(t - 3, t + 4, dtype=np.uint32))
    b = np.concatenate(out)
    b = np.concatenate([b, b | np.uint32(0x80000000)])
    rng = np.random.default_rng(5)
    nans = (rng.integers(1, 1 << 23, 400, dtype=np.uint32) | np.uint32(0x7F800000)) | \
        (rng.integers(0, 2, 400, dtype=np.uint32) << np.uint32(31))
    wide = rng.integers(0, 1 << 32, 3000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([b, nans, wide]).view(np.float32)


@pytest.mark.parametrize("policy", [
    _policy("reference"),
    pytest.param(Policy("rne", "nonsat", "payload", intermediate="float16", intermediate_carry="doubles_subnormal"),
                 marks=pytest.mark.slow),
    pytest.param(Policy("rtz", "satfinite", "signed", intermediate="bfloat16", intermediate_carry="doubles_subnormal"),
                 marks=pytest.mark.slow),
], ids=["openvino-reference", "float16-rne", "bfloat16-rtz"])  # the quick run: the profile's own policy
def test_fast_path_equals_the_oracle(policy):
    x = _edge_inputs()
    fmt = "e4m3" if policy.intermediate == "bfloat16" else "e5m2"
    codes, flags = fmtsim.encode_with_flags(x, fmt, profile=policy)
    pol = resolve(fmt, profile=policy)
    bits = x.view(np.uint32)
    for i in range(x.size):
        nb = int(bits[i]) if np.isnan(x[i]) else None
        want = encode_one(float(x[i]), fmt, src="float32", policy=pol, nan_bits=nb, nan_bits32=nb)
        assert (int(codes[i]), int(flags[i])) == want, (hex(int(bits[i])), int(codes[i]), int(flags[i]), want)


def test_the_constructors_numbers_by_hand():
    """float32 0x377fffff = 2^-16 (1 - 2^-24): float16's constructor rounds its significand at
    normal precision (carry: 2^-16 with exponent field -1), then shifts the unrounded
    significand by one bit less than 2^-16 needs: 0x0200 = 2^-15, E5M2 0x02. One rounding,
    and the JIT path: 2^-16 = E5M2 0x01."""
    ref, jit = _policy("reference"), _policy("avx512_core_fp16")
    cases = [  # float32 bits, reference path, JIT path
        (0x377FFFFF, 0x02, 0x01), (0x37FFFFFF, 0x04, 0x02), (0xB77FFFFF, 0x82, 0x81),
        (0x37800000, 0x01, 0x01),  # 2^-16 itself: no carry
        (0x387FFFFF, 0x04, 0x04),  # just below 2^-14: float16's exponent field 0, a normal result
        (0x7FABDDD1, 0x7D, 0x7F),  # a NaN: top payload bits 01, kept / quieted
        (0x7F800001, 0x7C, 0x7E),  # a NaN with clear top bits: an infinity on the reference path
        (0xFFA05A34, 0xFD, 0xFF),
    ]
    x = np.array([c[0] for c in cases], np.uint32).view(np.float32)
    assert [int(c) for c in fmtsim.encode(x, "e5m2", profile=ref)] == [c[1] for c in cases]
    assert [int(c) for c in fmtsim.encode(x, "e5m2", profile=jit)] == [c[2] for c in cases]
    bf = np.array([0x7F81, 0x7FC1, 0x7FE1], np.uint16).view(ml_dtypes.bfloat16)
    assert [int(c) for c in fmtsim.encode(bf, "e5m2", profile=ref)] == [0x7C, 0x7E, 0x7F]
    h = np.array([0x7C01, 0x7D01], np.uint16).view(np.float16)  # F16C's widening quiets: 0x7E, 0x7F
    assert [int(c) for c in fmtsim.encode(h, "e5m2", profile=ref)] == [0x7E, 0x7F]


def test_the_carry_rule_in_exact_arithmetic():
    from fmtsim.oracle import _carry_below_half_normal as carries

    assert carries(Fraction(2) ** -16 * (1 - Fraction(1, 2 ** 24)), "float16")
    assert carries(Fraction(2) ** -16 * (1 - Fraction(1, 2 ** 12)), "float16")  # the tie: to even, carries
    assert not carries(Fraction(2) ** -16 * (1 - Fraction(3, 2 ** 13)), "float16")
    assert carries(Fraction(2) ** -15 * (1 - Fraction(1, 2 ** 24)), "float16")  # float16 exponent field -1
    assert not carries(Fraction(2) ** -14 * (1 - Fraction(1, 2 ** 24)), "float16")  # field 0: a normal result
    assert not carries(Fraction(0), "float16")


def test_carry_without_an_intermediate_is_refused():
    with pytest.raises(ValueError, match="give intermediate"):
        resolve("e5m2", profile=Policy("rne", intermediate_carry="doubles_subnormal"))
    with pytest.raises(ValueError, match="intermediate_carry"):
        resolve("e5m2", profile=Policy("rne", intermediate="float16", intermediate_carry="halves"))


def test_both_paths_are_recorded_variants():
    paths = {v.code_paths for v in variants("openvino")}
    assert paths == {("avx512_core_fp16",), ("reference",)}
    for v in variants("openvino"):  # E4M3, E8M0 and FP4 take one path everywhere
        for fmt in ("e4m3", "e8m0", "e2m1"):
            assert v.policy(get_format(fmt)) == variants("openvino")[0].policy(get_format(fmt))


@pytest.mark.parametrize("flags,path", [
    ("fpu sse avx avx2 f16c fma", "reference"),
    ("avx2 avx512f avx512bw avx512vl avx512dq avx512_bf16", "reference"),  # an AVX-512 EPYC
    ("avx2 avx512f avx512bw avx512vl avx512dq avx512_bf16 avx512_fp16 amx_tile", "avx512_core_fp16"),
    ("avx512_fp16", "reference"),  # not avx512_core
])
def test_the_code_path_is_read_from_the_cpu(flags, path):
    from fmtsim.conformance.impls.openvino import code_path_for

    assert code_path_for("x86_64", set(flags.split())) == path
    assert code_path_for("aarch64", {"asimd", "sve"}) == "reference"


def test_openvino_itself_on_this_cpu():
    pytest.importorskip("openvino", reason="OpenVINO is not installed: its own conversions cannot be compared")
    from fmtsim.conformance.impls.openvino import Openvino, _encode

    path = Openvino().code_path()
    x = _edge_inputs()
    got = _encode(x, "e5m2")
    assert np.array_equal(got, np.asarray(fmtsim.encode(x, "e5m2", profile=_policy(path)))), path
    for dt in (np.float16, ml_dtypes.bfloat16):  # every 16-bit pattern
        h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dt)
        assert np.array_equal(_encode(h, "e5m2"), np.asarray(fmtsim.encode(h, "e5m2", profile=_policy(path))))
