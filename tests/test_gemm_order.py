"""How a kernel orders its GEMM: ``k_order`` (K's steps walked from the end) and ``add_c`` (C added
after the chain, in an epilogue), in matmul, its Fraction twin, ``fmtsim mma matmul`` and ``fmtsim
ver``, which names a kernel that does either."""

import json
from pathlib import Path

import numpy as np
import pytest

from fmtsim.cli import main
from fmtsim.conformance.gemm_vectors import gemm_name
from fmtsim.conformance.vectors import _unpack_arrays
from fmtsim.mma import matmul, slow_matmul

VEC = Path(__file__).resolve().parent.parent / "vectors"
MANIFEST = json.loads((VEC / "manifest.json").read_text())


def _operands(unit, af, bf, k, rng, scaled=False):
    hi = {"e4m3": 0x7F, "e4m3fnuz": 0x7F, "e2m1": 16, "fp16": 0x7BFF}
    a = rng.integers(0, hi[af], (3, k)) | (rng.integers(0, 2, (3, k)) << (15 if af == "fp16" else 7 if hi[af] == 0x7F
                                                                          else 3))
    b = rng.integers(0, hi[bf], (k, 2)) | (rng.integers(0, 2, (k, 2)) << (15 if bf == "fp16" else 7 if hi[bf] == 0x7F
                                                                          else 3))
    if af == "e4m3fnuz":  # 0x80 is FNUZ's NaN: keep the operands finite
        a[a == 0x80], b[b == 0x80] = 0, 0
    if af == "e4m3":
        a[(a & 0x7F) == 0x7F], b[(b & 0x7F) == 0x7F] = 0, 0
    c = rng.standard_normal((3, 2)).astype(np.float32)
    kw = {}
    if scaled:
        kw = dict(a_scales=rng.integers(120, 135, (3, k // 32)), b_scales=rng.integers(120, 135, (k // 32, 2)),
                  scale_format="e8m0", block_size=32)
    return a, b, c, kw


CASES = [  # unit, a, b, K, block-scaled, a split_k and a promotion interval the unit takes
    ("sm90_wgmma_fp8", "e4m3", "e4m3", 96, False, [32], 64),
    ("cdna3_mfma_fp8", "e4m3fnuz", "e4m3fnuz", 96, False, [48], 32),
    ("sm100_mxf8f6f4", "e4m3", "e2m1", 96, True, [32], 64),
    ("sm100_mxf4", "e2m1", "e2m1", 192, True, [64], 128),
    ("sm70_mma_fp16", "fp16", "fp16", 24, False, [8], 8),
]


@pytest.mark.parametrize("unit,af,bf,k,scaled,split,promote", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("k_order", ["forward", "reverse"])
@pytest.mark.parametrize("add_c", ["in_chain", "epilogue"])
def test_matmul_equals_its_fraction_twin(unit, af, bf, k, scaled, split, promote, k_order, add_c):
    rng = np.random.default_rng([k, len(unit)])
    a, b, c, kw = _operands(unit, af, bf, k, rng, scaled)
    for chaining in ({}, {"split_k": split}, {"promote_every": promote}):
        d = matmul(a, b, c, unit=unit, a_format=af, b_format=bf, k_order=k_order, add_c=add_c, **kw, **chaining)
        e = slow_matmul(a, b, c, unit=unit, a_format=af, b_format=bf, k_order=k_order, add_c=add_c, **kw,
                        **chaining)
        assert (d.view(np.uint32) == e.view(np.uint32)).all(), (chaining, d, e)


def _steps_reversed(x, axis, step):
    k = x.shape[axis]
    order = np.arange(k).reshape(k // step, step)[::-1].reshape(-1)
    return np.take(x, order, axis=axis)


def test_reverse_is_the_same_gemm_on_operands_with_their_steps_reversed():
    """Defined independently of matmul's own permutation: A's columns and B's rows (and their
    scale blocks) reordered step by step, then the ordinary chain."""
    rng = np.random.default_rng(3)
    a, b, c, kw = _operands("sm100_mxf8f6f4", "e4m3", "e2m1", 128, rng, scaled=True)
    d = matmul(a, b, c, unit="sm100_mxf8f6f4", a_format="e4m3", b_format="e2m1", k_order="reverse", **kw)
    kw2 = dict(kw, a_scales=_steps_reversed(kw["a_scales"], 1, 1), b_scales=_steps_reversed(kw["b_scales"], 0, 1))
    ref = matmul(_steps_reversed(a, 1, 32), _steps_reversed(b, 0, 32), c, unit="sm100_mxf8f6f4", a_format="e4m3",
                 b_format="e2m1", **kw2)
    assert (d.view(np.uint32) == ref.view(np.uint32)).all()
    fwd = matmul(a, b, c, unit="sm100_mxf8f6f4", a_format="e4m3", b_format="e2m1", **kw)
    assert (fwd.view(np.uint32) != d.view(np.uint32)).any()  # the order shows in the bits


def test_an_epilogue_c_is_one_fp32_addition_after_the_chain():
    rng = np.random.default_rng(4)
    a, b, c, _ = _operands("sm90_wgmma_fp8", "e4m3", "e4m3", 256, rng)
    d = matmul(a, b, c, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", add_c="epilogue")
    chain = matmul(a, b, None, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")
    assert (d.view(np.uint32) == (chain + c).view(np.uint32)).all()  # numpy's float32 add is RNE
    in_chain = matmul(a, b, c, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")
    assert (in_chain.view(np.uint32) != d.view(np.uint32)).any()


def test_one_rounding_has_no_order():
    rng = np.random.default_rng(5)
    a, b, c, _ = _operands("sm90_wgmma_fp8", "e4m3", "e4m3", 96, rng)
    fwd = matmul(a, b, c, unit="exact", a_format="e4m3", b_format="e4m3")
    rev = matmul(a, b, c, unit="exact", a_format="e4m3", b_format="e4m3", k_order="reverse")
    assert (fwd.view(np.uint32) == rev.view(np.uint32)).all()


def test_bad_orders_are_refused_by_name():
    a, b = np.zeros((2, 32), int), np.zeros((32, 2), int)
    with pytest.raises(ValueError, match="k_order must be one of forward, reverse; got 'backwards'"):
        matmul(a, b, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", k_order="backwards")
    with pytest.raises(ValueError, match="add_c must be one of in_chain, epilogue"):
        slow_matmul(a, b, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", add_c="after")
    with pytest.raises(ValueError, match="sm80_mma_fp16_f16 writes rne_fp16"):
        matmul(np.zeros((2, 8), int), np.zeros((8, 2), int), unit="sm80_mma_fp16_f16", a_format="fp16",
               b_format="fp16", add_c="epilogue")


def _device_file(tmp_path, name, **how):
    """The vector file with D replaced by what a kernel ordered as ``how`` computes."""
    meta = MANIFEST["files"][name]
    raw = bytearray((VEC / name).read_bytes())
    t = _unpack_arrays(bytes(raw), meta, name)
    d = matmul(t["a_codes"], t["b_codes"], t["c"], unit=meta["unit"]["name"], a_format=meta["a_format"],
               b_format=meta["b_format"], a_scales=t.get("a_scales"), b_scales=t.get("b_scales"),
               scale_format=meta["scale_format"], block_size=meta["block_size"], **how)
    off = next(x["offset"] for x in meta["arrays"] if x["name"] == "d")
    raw[off:off + d.nbytes] = d.tobytes()
    p = tmp_path / f"device-{'-'.join(how.values())}.bin"
    p.write_bytes(bytes(raw))
    return p


@pytest.mark.parametrize("how,named", [
    ({"k_order": "reverse"}, "--k-order reverse"),
    ({"add_c": "epilogue"}, "--add-c epilogue"),
])
def test_ver_names_a_kernel_that_reverses_k_or_adds_c_in_its_epilogue(tmp_path, capsys, how, named):
    name = gemm_name("sm90_wgmma_fp8", "e4m3", "e4m3", None, None)
    p = _device_file(tmp_path, name, **how)
    assert main(["ver", name, str(p), "--vectors", str(VEC)]) == 1
    out = capsys.readouterr().out
    assert f"every line matches fmtsim under fmtsim mma matmul --unit sm90_wgmma_fp8 {named}\n" in out, out
    # the family tolerance accepts it, and says the bits are not the unit's
    assert main(["ver", name, str(p), "--vectors", str(VEC), "--family-tolerance"]) == 0
    out = capsys.readouterr().out
    assert "differ from sm90_wgmma_fp8 bit for bit, within the family bound" in out, out


def test_cli_matmul_takes_the_order_options(tmp_path):
    rng = np.random.default_rng(6)
    a, b, c, _ = _operands("sm90_wgmma_fp8", "e4m3", "e4m3", 96, rng)
    for n, x in (("a", a.astype(np.uint8)), ("b", b.astype(np.uint8)), ("c", c)):
        np.save(tmp_path / f"{n}.npy", x)
    out = tmp_path / "d.npy"
    assert main(["mma", "matmul", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), str(tmp_path / "c.npy"),
                 "--unit", "sm90_wgmma_fp8", "--a-format", "e4m3", "--b-format", "e4m3", "--k-order", "reverse",
                 "--add-c", "epilogue", "-o", str(out)]) == 0
    want = matmul(a, b, c, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", k_order="reverse",
                  add_c="epilogue")
    assert (np.load(out).view(np.uint32) == want.view(np.uint32)).all()


def test_an_fma_chain_walked_backwards_is_its_twins():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 16)).astype(np.float32).view(np.uint32)
    b = rng.standard_normal((16, 2)).astype(np.float32).view(np.uint32)
    c = rng.standard_normal((3, 2)).astype(np.float32)
    for how in ({"k_order": "reverse"}, {"add_c": "epilogue"}):
        d = matmul(a, b, c, unit="cdna1_mfma_fp32", a_format="fp32", b_format="fp32", **how)
        e = slow_matmul(a, b, c, unit="cdna1_mfma_fp32", a_format="fp32", b_format="fp32", **how)
        assert (d.view(np.uint32) == e.view(np.uint32)).all(), how


@pytest.mark.parametrize("how,option", [({"k_order": "reverse"}, "--k-order reverse"),
                                        ({"add_c": "epilogue"}, "--add-c epilogue")])
def test_probe_infer_names_the_order_when_no_unit_matches(how, option):
    """A Hopper kernel that walks K backwards matched no unit, and the nearest candidate was
    'L=64': the report now says which unit and which order give every output."""
    from fmtsim.mma import probe

    p = probe.gen("fp8")
    ps = probe._get("fp8")
    d = matmul(p["a"], p["b"], p["c"], unit="sm90_wgmma_fp8", a_format=ps.a_format, b_format=ps.b_format, **how)
    inf = probe.infer("fp8", d, p)
    assert not inf.named and inf.reordered == [f"sm90_wgmma_fp8 {option}"]
    assert f"  --unit sm90_wgmma_fp8 {option}" in inf.report()
    plain = probe.infer("fp8", matmul(p["a"], p["b"], p["c"], unit="sm90_wgmma_fp8", a_format=ps.a_format,
                                      b_format=ps.b_format), p)
    assert plain.named == ["sm90_wgmma_fp8"] and plain.reordered == []
