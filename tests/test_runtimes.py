"""The deployed runtimes (onnxruntime, XLA, OpenVINO, NumKong, LLVM APFloat) and the ONNX Cast
spec, each against its fmtsim profile. Fast tier: each one's headline behaviour, run on the
implementation itself; slow tier: `fmtsim conform --impl NAME` on every coverage model."""

import numpy as np
import pytest

import fmtsim
from fmtsim.conformance import impls, run
from fmtsim.conformance.plugin import Request


def _need(impl_name):
    why = impls.get_implementation(impl_name).missing()
    if why is not None:
        pytest.skip(why)
    return impls.get_implementation(impl_name)


def _path(impl, label):
    req = Request(tuple(fmtsim.FORMATS), None, None, False, big=False)
    return next(p for p in impl.encoders(req) if p.name == label)


def test_onnxruntime_nosat_e4m3_bug_band_and_profile():
    ort = _path(_need("onnxruntime"), "onnxruntime[saturate=0]")
    x = np.array([470.0, 480.0, 495.0, 496.0, -500.0, np.nan, -np.nan], np.float32)
    got = ort.encode(x, "e4m3").tolist()
    assert got == [0x7F, 0x7E, 0x7E, 0x7F, 0xFF, 0x7F, 0xFF]  # 480 and 495: +-448, the bug
    bug = ort.known("e4m3", "float32", x)["onnxruntime.e4m3_nosat_480_to_496"]
    assert bug.tolist() == [False, True, True, False, False, False, False]
    ours = fmtsim.encode(x, "e4m3", profile="onnxruntime_nosat")
    assert np.array_equal(ours[~bug], np.array(got)[~bug])


def test_onnxruntime_bfloat16_nosat_drops_the_nan_sign():
    import ml_dtypes

    ort = _path(_need("onnxruntime"), "onnxruntime[saturate=0]")
    x = np.array([-np.nan, -np.inf], np.float32).astype(ml_dtypes.bfloat16)
    assert ort.encode(x, "e4m3").tolist() == [0x7F, 0xFF]
    assert fmtsim.encode(x, "e4m3", profile="onnxruntime_nosat").tolist() == [0x7F, 0xFF]


def test_numkong_simd_e5m2_nan_band_and_serial():
    nk = _need("numkong")
    simd, serial = _path(nk, "numkong[simd]"), _path(nk, "numkong[serial]")
    x = np.array([73728.0, 100000.0, 122880.0, np.nan, -np.nan], np.float32)
    s = simd.encode(x, "e5m2")
    assert s[0] == 0x7C and 0x7C < s[1] <= 0x7F and s[2] == 0x7C and s[3] == 0x7C  # NaN -> +Inf
    # serial: 0x7D with the NaN's sign (nan='fixed', nan_code=0x7D, nan_code_sign='input')
    assert serial.encode(x, "e5m2").tolist() == [0x7C, 0x7C, 0x7C, 0x7D, 0xFD]
    assert fmtsim.encode(x, "e5m2", profile="numkong_serial").tolist() == [0x7C, 0x7C, 0x7C, 0x7D, 0xFD]
    assert simd.known("e5m2", "float32", x)["numkong.simd_e5m2_73728_to_122880_nan"].tolist() == \
        [False, True, False, False, False]


def test_openvino_rounds_float32_through_float16():
    ov = _path(_need("openvino"), "openvino")
    x = np.array([1.0625 + 2.0**-20], np.float32)  # float16: 1.0625, an E4M3 tie -> 1.0
    assert ov.encode(x, "e4m3").tolist() == [0x38]
    assert fmtsim.encode(x, "e4m3", profile="openvino").tolist() == [0x38]
    assert fmtsim.encode(x, "e4m3").tolist() == [0x39]  # rounded once


def test_xla_fp4_nan_and_folded_e8m0():
    xla = _need("xla")
    x = np.array([np.nan, -np.nan], np.float32)
    assert _path(xla, "xla[eager]").encode(x, "e2m1").tolist() == [0x8, 0x8]
    assert _path(xla, "xla[folded]").encode(np.array([0.0, 3.0], np.float32), "e8m0").tolist() == [0x00, 0x81]
    assert fmtsim.encode(np.array([0.0, 3.0], np.float32), "e8m0", profile="xla_folded").tolist() == [0x00, 0x81]


def test_xla_folder_is_chosen_per_constant():
    _need("xla")
    from fmtsim.conformance.impls.xla import _fold

    # StableHLO's folder (APFloat): E8M0 0 -> 0x00, FP4 +-Inf -> +-0, NaN -> a zero of its sign
    quiet = np.array([0.0, np.inf, -np.inf, np.nan, -np.nan], np.float32)
    assert _fold(quiet, "e8m0").tolist()[:1] == [0x00]
    assert _fold(quiet, "e2m1").tolist() == [0x0, 0x0, 0x8, 0x0, 0x8]
    assert fmtsim.encode(quiet, "e2m1", profile="xla_folded").tolist() == [0x0, 0x0, 0x8, 0x0, 0x8]
    # one signalling NaN hands the whole constant to the HLO evaluator: 0 -> 0xFF, Inf -> +-max,
    # NaN -> ml_dtypes' zero of the opposite sign
    snan = np.array([0x7F800001], np.uint32).view(np.float32)
    both = np.concatenate([quiet, snan])
    assert _fold(both, "e8m0").tolist()[:1] == [0xFF]
    assert _fold(both, "e2m1").tolist() == [0x0, 0x7, 0xF, 0x8, 0x0, 0x8]
    assert fmtsim.encode(both, "e2m1", profile="xla_folded_hlo").tolist() == [0x0, 0x7, 0xF, 0x8, 0x0, 0x8]
    # so does a constant of more than 65536 elements
    big = np.zeros(65537, np.float32)
    big[:5] = quiet
    assert _fold(big, "e2m1")[:5].tolist() == [0x0, 0x7, 0xF, 0x8, 0x0]
    # folded on its own, a signalling NaN gets the HLO evaluator's code (nan_signaling_sources)
    assert _fold(snan, "e2m1").tolist() == [0x8]
    assert fmtsim.encode(snan, "e2m1", profile="xla_folded").tolist() == [0x8]
    e5 = np.array([0x7FA00000, 0xFFE00000], np.uint32).view(np.float32)  # signalling, quiet
    assert _fold(e5, "e5m2").tolist() == [0x7E, 0xFE]  # HLO evaluator: the signed quiet NaN
    assert _fold(e5[1:], "e5m2").tolist() == [0xFF]  # StableHLO: the quieted payload's top bits
    assert fmtsim.encode(e5, "e5m2", profile="xla_folded").tolist() == [0x7E, 0xFF]


def test_apfloat_finite_only_formats_and_rounding_modes():
    ap = _need("apfloat")
    from fmtsim.conformance.impls.apfloat import encode_with_status

    codes, status = encode_with_status(np.array([np.inf, -np.inf, 7.0, 500.0], np.float32), "e2m1")
    assert codes.tolist() == [0x0, 0x8, 0x7, 0x7]  # +-Inf -> +-0; overflow clamps
    assert status[3] & 16  # inexact
    rows = run.run((ap.name,), formats=["e2m1"], big=False)
    assert {r.impl for r in rows} >= {"apfloat[rne]", "apfloat[rtz]", "apfloat[rna]", "apfloat"}
    assert any(r.model.endswith(" flags") and r.cases for r in rows)  # the status flags are compared too
    assert sum(r.failed for r in rows) == 0, [(r.impl, r.examples) for r in rows if r.failed]


def test_apfloat_status_conventions():
    _need("apfloat")
    from fmtsim.conformance.impls.apfloat import encode_with_status, status_as_flags

    # APFloat opStatus: 1 invalid, 4 overflow, 8 underflow, 16 inexact
    cases = [  # (format, rounding, float32 bits, opStatus)
        ("e4m3", "rtz", 0x43F00000, 16),  # 480 -> 448: no overflow flag when the result is finite
        ("e4m3", "rne", 0x49742400, 4 | 16),  # 1e6 -> NaN: overflow
        ("e4m3", "rne", 0x3C700000, 16),  # 0.0146484375 -> 2^-6: the result is normal, no underflow
        ("e4m3", "rne", 0x7F800000, 16),  # +Inf -> NaN: inexact
        ("e2m1", "rne", 0x7F800000, 0),  # +Inf -> +0: exact
        ("e2m1", "rne", 0x7FC00000, 0),  # quiet NaN -> +0: no flag
        ("e2m1", "rne", 0x7FA00000, 1),  # signalling NaN: invalid
        ("e4m3fnuz", "rne", 0x80000000, 16),  # -0 -> 0: inexact
    ]
    for fmt, r, bits, want in cases:
        x = np.array([bits], np.uint32).view(np.float32)
        _, st = encode_with_status(x, fmt, r)
        assert int(st[0]) == want, (fmt, r, hex(bits), int(st[0]))
        _, ours = fmtsim.encode_with_flags(x, fmt, profile="apfloat", rounding=r)
        assert int(ours[0]) & 0x17 == int(status_as_flags(st)[0]), (fmt, r, hex(bits), int(ours[0]))


def test_onnx_spec_tables_hold_and_a_wrong_profile_fails(monkeypatch):
    _need("onnx_spec")
    from fmtsim.conformance.impls import onnx_spec
    from fmtsim.profiles import _PROFILES as PROFILES  # PROFILES itself is read-only

    rows = onnx_spec.spec_rows()
    assert {r.fmt for r in rows} == {"e4m3", "e4m3fnuz", "e5m2", "e5m2fnuz", "e8m0"}
    assert sum(r.failed for r in rows) == 0, [(r.fmt, r.model, r.examples) for r in rows if r.failed]
    # the reference evaluator's saturating E8M0 (0 -> NaN) is not the table's (0 -> E8M0_MIN)
    monkeypatch.setitem(PROFILES, "onnx_spec_sat", PROFILES["onnx_reference_sat"])
    assert sum(r.failed for r in onnx_spec.spec_rows() if r.fmt == "e8m0") > 0


@pytest.mark.slow
@pytest.mark.parametrize("impl_name", ["onnxruntime", "numkong", "openvino", "xla", "apfloat", "onnx", "gfloat",
                                       "onnx_spec"])
def test_conform_every_coverage_model_zero_unexpected(impl_name):
    impl = _need(impl_name)
    rows = run.run((impl_name,), big=True)
    bad = [r for r in rows if r.failed]
    assert rows and not bad, [(r.impl, r.fmt, r.model, r.examples) for r in bad]
    seen = {name for r in rows for name in r.known}
    assert {d.name for d in impl.divergences} <= seen  # every named divergence really occurs


def test_runtime_versions_are_recorded():
    for name in ("onnxruntime", "numkong", "openvino", "xla", "apfloat"):
        impl = impls.get_implementation(name)
        assert impl.checked_with and impl.install
        if impl.missing() is None:
            assert impl.version()


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["onnxruntime_sat", "onnxruntime_nosat", "onnx_spec_sat", "onnx_spec_nosat",
                                     "openvino", "xla", "xla_folded", "xla_folded_hlo", "numkong_simd",
                                     "numkong_serial", "apfloat",
                                     "onnx_reference_sat", "onnx_reference_nosat"])
def test_runtime_profiles_fast_path_equals_oracle(profile):
    rows = run.run(("fmtsim",), big=False, profile=profile)
    assert rows and all(r.failed == 0 for r in rows), [(r.fmt, r.model, r.examples) for r in rows if r.failed]
