"""Bad input, fourth tour: packed zero points with one element, outputs over devices and inputs,
damaged compiled libraries, broken optional packages, misleading messages (issue 25).

Checkpoints here are built by hand: every packed word is written bit by bit from the producer's
documented layout (compressed-tensors ``pack_to_int32``: code + 2^(b-1) at bits i*b, the zero point
packed along dim 0; Quark ``Pack_4_bits``: nibble k of a word holds output 8j + (0,2,4,6,1,3,5,7)[k]),
never with fmtsim's packers, and the expected values are exact integers times powers of two."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("safetensors", reason="checkpoint tests need the safetensors package")
from safetensors.numpy import save_file  # noqa: E402

from fmtsim.checkpoint import CheckpointError, load  # noqa: E402
from fmtsim.checkpoint.dequant import dequantize  # noqa: E402
from fmtsim.checkpoint.inspection import inspect  # noqa: E402

BF16 = ml_dtypes.bfloat16
QUARK_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


# ---- producers' packings, bit by bit -------------------------------------------------------


def ct_pack_rows(codes: np.ndarray, bits: int) -> np.ndarray:
    """compressed-tensors pack_to_int32(packed_dim=1): [rows, n] signed codes -> int32 [rows, ceil(n*b/32)]."""
    rows, n = codes.shape
    words = -(-n * bits // 32)
    out = np.zeros((rows, words), np.uint64)
    for r in range(rows):
        big = 0
        for i in range(n):
            big |= (int(codes[r, i]) + (1 << (bits - 1))) << (i * bits)
        for k in range(words):
            out[r, k] = (big >> (32 * k)) & 0xFFFFFFFF
    return out.astype(np.uint32).view(np.int32)


def ct_pack_dim0(z: np.ndarray, bits: int) -> np.ndarray:
    """pack_to_int32(packed_dim=0): [rows, groups] -> int32 [ceil(rows*b/32), groups]."""
    return ct_pack_rows(np.asarray(z).T, bits).T.copy()


def quark_pack(values: np.ndarray) -> np.ndarray:
    """Quark Pack_4_bits along the last axis (int4 two's complement or uint4 nibbles)."""
    v = np.asarray(values, np.int64)
    flat = v.reshape(-1, v.shape[-1])
    words = -(-flat.shape[1] // 8)
    out = np.zeros((flat.shape[0], words), np.uint64)
    for r in range(flat.shape[0]):
        for j in range(words):
            w = 0
            for k in range(8):
                idx = 8 * j + QUARK_ORDER[k]
                if idx < flat.shape[1]:
                    w |= (int(flat[r, idx]) & 0xF) << (4 * k)
            out[r, j] = w
    return out.astype(np.uint32).view(np.int32).reshape(*v.shape[:-1], words)


def _ct_config(bits: int, strategy: str, group: int | None, symmetric: bool = False) -> dict:
    w = {"num_bits": bits, "type": "int", "strategy": strategy, "symmetric": symmetric}
    if group:
        w["group_size"] = group
    return {"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                    "config_groups": {"group_0": {"targets": ["Linear"], "weights": w}}}}


def _write(d, tensors, config):
    d.mkdir(exist_ok=True)
    save_file(tensors, str(d / "model.safetensors"))
    (d / "config.json").write_text(json.dumps(config))
    return d


def _deq(src, tmp_path, name="l.weight"):
    out = tmp_path / (src.name + "-out")
    dequantize(src, out, dtype="float32")
    return load(out / "model.safetensors")[name].astype(np.float64)


# ---- class 1: a packed zero point with one element -------------------------------------------


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("rows", [1, 3, 4, 8, 9, 16])
@pytest.mark.parametrize("strategy", ["channel", "group-one", "group-two"])
def test_compressed_tensors_asym_zero_point_of_few_rows(tmp_path, rng, bits, rows, strategy):
    """A zero point of <= 32/b rows packs into one int32 per group: it holds every row's zero point."""
    cols = 64
    groups = {"channel": 1, "group-one": 1, "group-two": 2}[strategy]
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    q = rng.integers(lo, hi + 1, (rows, cols))
    z = rng.integers(lo, hi + 1, (rows, groups))
    s = (2.0 ** rng.integers(-6, 2, (rows, groups))).astype(BF16)
    group = cols // groups
    t = {"l.weight_packed": ct_pack_rows(q, bits), "l.weight_scale": s,
         "l.weight_zero_point": ct_pack_dim0(z, bits), "l.weight_shape": np.array([rows, cols], np.int64)}
    cfg = _ct_config(bits, "channel" if strategy == "channel" else "group",
                     None if strategy == "channel" else group)
    d = _write(tmp_path / f"ct{bits}-{rows}-{strategy}", t, cfg)
    got = _deq(d, tmp_path)
    want = (q - np.repeat(z, group, axis=1)) * np.repeat(s.astype(np.float64), group, axis=1)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("element", ["int4", "uint4"])
@pytest.mark.parametrize("rows", [8, 16, 24])
def test_quark_per_channel_zero_point_of_one_word(tmp_path, rng, element, rows):
    cols = 32
    lo, hi = (-8, 7) if element == "int4" else (0, 15)
    q = rng.integers(lo, hi + 1, (rows, cols))
    z = rng.integers(lo, hi + 1, rows)
    s = (2.0 ** rng.integers(-6, 2, rows)).astype(BF16)
    t = {"l.weight": quark_pack(q), "l.weight_scale": s, "l.weight_zero_point": quark_pack(z)}
    cfg = {"quantization_config": {"quant_method": "quark", "global_quant_config": {"weight": {
        "dtype": element, "qscheme": "per_channel", "ch_axis": 0}}}}
    d = _write(tmp_path / f"q{element}{rows}", t, cfg)
    assert t["l.weight_zero_point"].shape == (rows // 8,)
    want = (q - z[:, None]) * s.astype(np.float64)[:, None]
    assert np.array_equal(_deq(d, tmp_path), want)


@pytest.mark.parametrize("element", ["int4", "uint4"])
@pytest.mark.parametrize("rows", [8, 16])
@pytest.mark.parametrize("cols", [32, 64])
def test_quark_per_group_zero_point_of_one_word(tmp_path, rng, element, rows, cols):
    group = 32
    lo, hi = (-8, 7) if element == "int4" else (0, 15)
    q = rng.integers(lo, hi + 1, (rows, cols))
    z = rng.integers(lo, hi + 1, (rows, cols // group))
    s = (2.0 ** rng.integers(-6, 2, (rows, cols // group))).astype(np.float32)
    t = {"l.weight": quark_pack(q.T), "l.weight_scale": s.T.copy(), "l.weight_zero_point": quark_pack(z.T)}
    cfg = {"quantization_config": {"quant_method": "quark", "global_quant_config": {"weight": {
        "dtype": element, "qscheme": "per_group", "group_size": group}}}}
    d = _write(tmp_path / f"qg{element}{rows}-{cols}", t, cfg)
    want = (q - np.repeat(z, group, axis=1)) * np.repeat(s.astype(np.float64), group, axis=1)
    assert np.array_equal(_deq(d, tmp_path), want)


def _int4_fp8(rng, rows, zp_shape_fix=None, with_scale=True):
    cols = 16
    q = rng.integers(-8, 8, (rows, cols))
    z = rng.integers(-8, 8, rows)
    s2 = (2.0 ** rng.integers(-4, 2, rows)).astype(np.float32)
    t = {"l.weight": quark_pack(q), "l.weight_scale_2": s2, "l.weight_zero_point_2": quark_pack(z)}
    if with_scale:
        t["l.weight_scale"] = np.array(0.125, np.float32)
    cfg = {"quantization_config": {"quant_method": "quark", "global_quant_config": {"weight": [
        {"dtype": "fp8_e4m3", "qscheme": "per_tensor"}, {"dtype": "int4", "qscheme": "per_channel", "ch_axis": 0}]}}}
    return t, cfg, (q - z[:, None]) * s2.astype(np.float64)[:, None] * 0.125


@pytest.mark.parametrize("rows", [8, 16])
def test_quark_int4_fp8_zero_point_2_of_one_word(tmp_path, rng, rows):
    t, cfg, want = _int4_fp8(rng, rows)
    assert t["l.weight_zero_point_2"].shape == (rows // 8,)
    assert np.array_equal(_deq(_write(tmp_path / f"i4f8-{rows}", t, cfg), tmp_path), want)


@pytest.mark.parametrize("bad", ["one-word-for-16", "unpacked-int32", "float32", "int8", "2-D"])
def test_quark_per_channel_zero_point_of_the_wrong_shape_refused(tmp_path, rng, bad):
    rows, cols = 16, 32
    q = rng.integers(-8, 8, (rows, cols))
    z = rng.integers(-8, 8, rows)
    zp = {"one-word-for-16": quark_pack(z[:8]), "unpacked-int32": z.astype(np.int32),
          "float32": z.astype(np.float32), "int8": z.astype(np.int8), "2-D": quark_pack(z).reshape(1, 2)}[bad]
    t = {"l.weight": quark_pack(q), "l.weight_scale": np.ones(rows, BF16), "l.weight_zero_point": zp}
    cfg = {"quantization_config": {"quant_method": "quark", "global_quant_config": {"weight": {
        "dtype": "int4", "qscheme": "per_channel", "ch_axis": 0}}}}
    d = _write(tmp_path / bad, t, cfg)
    words = r"int32 \[ceil\(out / 8\)\] = \[2\]"
    with pytest.raises(CheckpointError, match=r"zero point l\.weight_zero_point is .*" + words):
        dequantize(d, tmp_path / "o")
    errs = [f for f in inspect(d).findings if f.severity == "error"]
    assert any("zero point l.weight_zero_point" in f.message for f in errs), errs


def test_w8a16_zero_point_with_too_few_rows_named(tmp_path, rng):
    rows, cols = 16, 32
    q = rng.integers(-128, 128, (rows, cols))
    z = rng.integers(-128, 128, (8, 1))  # packs 8 rows: two words, four are needed
    t = {"l.weight_packed": ct_pack_rows(q, 8), "l.weight_scale": np.ones((rows, 1), BF16),
         "l.weight_zero_point": ct_pack_dim0(z, 8), "l.weight_shape": np.array([rows, cols], np.int64)}
    d = _write(tmp_path / "few", t, _ct_config(8, "channel", None))
    with pytest.raises(CheckpointError, match=r"zero point l\.weight_zero_point is I32 \[2, 1\].*\[4, 1\]"):
        dequantize(d, tmp_path / "o")


def test_w8a16_asymmetric_without_its_zero_point_is_an_error(tmp_path, rng):
    rows, cols = 8, 32
    q = rng.integers(-128, 128, (rows, cols))
    t = {"l.weight_packed": ct_pack_rows(q, 8), "l.weight_scale": np.ones((rows, 1), BF16),
         "l.weight_shape": np.array([rows, cols], np.int64)}
    d = _write(tmp_path / "nozp", t, _ct_config(8, "channel", None, symmetric=False))
    with pytest.raises(CheckpointError, match="no zero point l.weight_zero_point.*symmetric: false"):
        dequantize(d, tmp_path / "o")
    # the symmetric twin reads with no zero point at all
    d2 = _write(tmp_path / "sym", t, _ct_config(8, "channel", None, symmetric=True))
    assert np.array_equal(_deq(d2, tmp_path), q.astype(np.float64))


def test_quark_int4_fp8_without_weight_scale_is_a_missing_scale(tmp_path, rng):
    t, cfg, _ = _int4_fp8(rng, 8, with_scale=False)
    rep = inspect(_write(tmp_path / "noscale", t, cfg))
    miss = [f for f in rep.findings if f.code == "missing-scale"]
    assert miss and miss[0].tensor == "l.weight" and "l.weight_scale" in miss[0].message, rep.findings


def _awq(rng, pre):
    rows, cols = 8, 32
    q = rng.integers(-8, 8, (rows, cols))
    lo, hi = (q[0::2] & 0xF), (q[1::2] & 0xF)
    t = {"l.weight": (lo | (hi << 4)).astype(np.uint8), "l.weight_scale": np.ones((rows, 1), np.float32),
         "l.pre_quant_scale": pre.astype(BF16)}
    cfg = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "W4A16_AWQ"}}
    return t, cfg


def test_inspect_flags_a_nan_pre_quant_scale(tmp_path, rng):
    pre = np.ones(32)
    pre[5] = np.nan
    t, cfg = _awq(rng, pre)
    d = tmp_path / "awq"
    d.mkdir()
    save_file(t, str(d / "model.safetensors"))
    (d / "hf_quant_config.json").write_text(json.dumps(cfg))
    errs = [f for f in inspect(d).findings if f.severity == "error"]
    assert any(f.tensor == "l.pre_quant_scale" and "NaN" in f.message and "5" in f.message for f in errs), errs


@pytest.mark.parametrize("algo", ["W4A16_AWQ", "W8A8_SQ_PER_CHANNEL"])
def test_valid_pre_quant_scale_is_not_unmatched(tmp_path, rng, algo):
    t, cfg = _awq(rng, 1 + rng.random(32))
    if algo != "W4A16_AWQ":
        t["l.weight"] = rng.integers(-128, 128, (8, 32)).astype(np.int8)
    cfg["quantization"]["quant_algo"] = algo
    d = tmp_path / algo
    d.mkdir()
    save_file(t, str(d / "model.safetensors"))
    (d / "hf_quant_config.json").write_text(json.dumps(cfg))
    rep = inspect(d)
    assert [r.tensor for r in rep.tensors] == ["l.weight"]
    assert not [f for f in rep.findings if f.tensor == "l.pre_quant_scale"], rep.findings


# ---- ModelOpt W4A16_NVFP4: the group size its config names, not a fixed 32 ------------------------


@pytest.mark.parametrize("group", [16, 32])
def test_modelopt_w4a16_nvfp4_reads_its_group_size(tmp_path, group):
    """ModelOpt 0.47 writes W4A16_NVFP4 with group_size 16 or 32 (hf_quant_config.json says which; the
    scales are [out, in/group]). Every value: e2m1 x UE4M3 x weight_scale_2, exact in float64, rounded
    once to float32, from fmtsim's decoders of the two element formats only."""
    from gen_checkpoints import make

    import fmtsim

    src = make("modelopt-w4a16-nvfp4", tmp_path, group_size=group)
    t = load(src)
    rep = inspect(src)
    assert rep.errors == 0 and {x.producer for x in rep.tensors} == {"modelopt-w4a16-nvfp4"}
    dequantize(src, tmp_path / "out", dtype="float32")
    got = load(tmp_path / "out")
    layers = [k[: -len(".weight_scale_2")] for k in t if k.endswith(".weight_scale_2")]
    assert len(layers) == 2
    for L in layers:
        packed, sc = t[L + ".weight"].view(np.uint8), t[L + ".weight_scale"].view(np.uint8)
        codes = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(packed.shape[0], -1)
        assert sc.shape == (codes.shape[0], codes.shape[1] // group)
        e = np.asarray(fmtsim.decode(codes, "e2m1", np.float64))
        s = np.repeat(np.asarray(fmtsim.decode(sc, "e4m3", np.float64)), group, axis=1)
        want = (e * s * float(t[L + ".weight_scale_2"])).astype(np.float32)
        assert np.array_equal(got[L + ".weight"].view(np.uint32), want.view(np.uint32)), L


def test_modelopt_w4a16_nvfp4_group_not_named_by_the_config_is_refused(tmp_path):
    from gen_checkpoints import make

    src = make("modelopt-w4a16-nvfp4", tmp_path, group_size=16)
    cfg = src / "hf_quant_config.json"
    cfg.write_text(cfg.read_text().replace('"group_size": 16', '"group_size": 32'))
    with pytest.raises(CheckpointError, match=r"16 values per scale; the config names group sizes \[32\]"):
        dequantize(src, tmp_path / "out", dtype="float32")
