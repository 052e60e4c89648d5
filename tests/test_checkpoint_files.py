"""Checkpoints as producers write them, and bad checkpoint files: block shapes read from where each
producer writes them (never guessed), activation scales of dequantized layers, FNUZ conversion of
MXFP8 (E8M0 scales), and every bad-file case of the checkpoint tour, each refused with the file and
the problem named, with or without the safetensors package."""

import json
import re
import struct
import sys

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("safetensors", reason="the checkpoint tests write their inputs with the safetensors package")
from gen_checkpoints import make, rewrite  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

import fmtsim  # noqa: E402
from fmtsim.checkpoint import CheckpointError, convert, load, read_header  # noqa: E402
from fmtsim.checkpoint.dequant import dequantize  # noqa: E402
from fmtsim.checkpoint.explain import explain  # noqa: E402
from fmtsim.checkpoint.inspection import inspect  # noqa: E402
from fmtsim.cli import main  # noqa: E402

E4M3 = ml_dtypes.float8_e4m3fn
F32 = np.float32

# config.json's quantization_config exactly as compressed-tensors 0.19 writes it for the FP8_BLOCK preset
# (ModelCompressor.update_config: QuantizationConfig.model_dump() plus version, quant_method, sparsity and
# transform configs); test_ct_config_is_what_compressed_tensors_writes holds it equal to the library's dump
CT_FP8_BLOCK_CONFIG = {
    "config_groups": {"group_0": {
        "targets": ["Linear"],
        "weights": {"num_bits": 8, "type": "float", "symmetric": True, "group_size": None, "strategy": "block",
                    "block_structure": [128, 128], "dynamic": False, "actorder": None, "scale_dtype": None,
                    "zp_dtype": None, "observer": None, "observer_kwargs": {}},
        "input_activations": {"num_bits": 8, "type": "float", "symmetric": True, "group_size": 128,
                              "strategy": "group", "block_structure": None, "dynamic": True, "actorder": None,
                              "scale_dtype": None, "zp_dtype": None, "observer": None, "observer_kwargs": {}},
        "output_activations": None, "format": None}},
    "kv_cache_scheme": None, "format": "float-quantized", "quantization_status": "compressed",
    "global_compression_ratio": None, "ignore": ["lm_head"],
    "version": "0.19.0", "quant_method": "compressed-tensors", "sparsity_config": {}, "transform_config": {},
}
DOWN, GATE = "model.layers.0.mlp.down_proj", "model.layers.0.mlp.gate_proj"


def _block_quantize(w: np.ndarray, b: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """E4M3 codes and float32 amax/448 scales of ``w`` in b[0] x b[1] blocks (the last ones partial)."""
    rows, cols = w.shape
    nr, nc = -(-rows // b[0]), -(-cols // b[1])
    padded = np.zeros((nr * b[0], nc * b[1]), F32)
    padded[:rows, :cols] = w
    amax = np.abs(padded.reshape(nr, b[0], nc, b[1])).max(axis=(1, 3))
    s = (amax / F32(448.0)).astype(F32)
    full = np.repeat(np.repeat(s, b[0], axis=0), b[1], axis=1)[:rows, :cols]
    codes = np.asarray(fmtsim.encode((w / full).astype(F32), "e4m3")).astype(np.uint8)
    return codes, s


def _exact_f32(codes: np.ndarray, s: np.ndarray, b: tuple[int, int]) -> np.ndarray:
    """code value x block scale in float64 (exact: 4 + 24 significant bits), rounded once to float32."""
    vals = np.asarray(fmtsim.decode(codes, "e4m3", np.float64))
    full = np.repeat(np.repeat(s.astype(np.float64), b[0], axis=0), b[1], axis=1)[: codes.shape[0], : codes.shape[1]]
    return (vals * full).astype(F32)


def _ct_fp8_block(d, config=CT_FP8_BLOCK_CONFIG, seed=3):
    """A compressed-tensors FP8_BLOCK checkpoint with a 320-wide layer (intermediate size 320)."""
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    t, want = {}, {}
    for L, shape in ((DOWN, (192, 320)), (GATE, (320, 192))):
        w = (rng.standard_normal(shape) * 0.02).astype(F32)
        w[:, ::41] *= F32(16.0)  # outlier columns: neighbouring blocks get very different scales
        codes, s = _block_quantize(w, (128, 128))
        t[L + ".weight"], t[L + ".weight_scale"] = codes.view(E4M3), s
        want[L + ".weight"] = _exact_f32(codes, s, (128, 128))
    save_file(t, str(d / "model.safetensors"), metadata={"format": "pt"})
    if config is not None:
        (d / "config.json").write_text(json.dumps({"model_type": "llama", "quantization_config": config}))
    return d, want


# ---- 1. the block shape of block scales ------------------------------------------------------------


def test_ct_fp8_block_reads_block_structure_and_dequantizes_exactly(tmp_path):
    ck, want = _ct_fp8_block(tmp_path / "ct")
    s = dequantize(ck, tmp_path / "out", dtype="float32")
    assert {tj.block for tj in s.jobs.values()} == {(128, 128)}
    assert all("config_groups.group_0.weights.block_structure" in tj.block_source for tj in s.jobs.values())
    got = load(tmp_path / "out" / "model.safetensors")
    for name, w in want.items():
        assert np.array_equal(got[name].view(np.uint32), w.view(np.uint32)), name
    # the element the issue reported: column 107 is in the first 128-column block, not the second
    c = load(ck / "model.safetensors")
    v = float(fmtsim.decode(np.uint8(c[DOWN + ".weight"].view(np.uint8)[0, 107]), "e4m3", np.float64))
    assert got[DOWN + ".weight"][0, 107] == F32(v * float(c[DOWN + ".weight_scale"][0, 0]))
    rep = inspect(ck)
    assert rep.errors == 0 and {tuple(t.block) for t in rep.tensors} == {(128, 128)}
    # bfloat16: the exact float64 product rounded once to 8 significant bits, by integer arithmetic
    dequantize(ck, tmp_path / "bf16", dtype="bfloat16")
    got16 = load(tmp_path / "bf16" / "model.safetensors")
    for name in want:
        codes = c[name].view(np.uint8)
        vals = np.asarray(fmtsim.decode(codes, "e4m3", np.float64)) * np.repeat(np.repeat(
            c[name + "_scale"].astype(np.float64), 128, 0), 128, 1)[: codes.shape[0], : codes.shape[1]]
        assert np.array_equal(got16[name].view(np.uint16), _bf16_rne(vals)), name


def _bf16_rne(x: np.ndarray) -> np.ndarray:
    """float64 (normal in bfloat16's range, or zero) -> bfloat16 bits, rounded to nearest even once."""
    b = x.view(np.uint64)
    keep = b >> np.uint64(45)  # sign, 11 exponent bits, 7 of the 52 fraction bits
    rest = b & np.uint64((1 << 45) - 1)
    half = np.uint64(1 << 44)
    keep = keep + ((rest > half) | ((rest == half) & ((keep & np.uint64(1)) == 1))).astype(np.uint64)
    f64 = (keep << np.uint64(45)).view(np.float64)
    return (f64.astype(F32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)  # exact: 8 significant bits


def test_unknown_block_shape_is_refused_and_flagged(tmp_path, capsys):
    cfg = json.loads(json.dumps(CT_FP8_BLOCK_CONFIG))
    del cfg["config_groups"]["group_0"]["weights"]["block_structure"]
    ck, _ = _ct_fp8_block(tmp_path / "ct", config=cfg)
    with pytest.raises(CheckpointError, match=r"down_proj.weight .*unknown block shape.*107\.\.159 columns"):
        dequantize(ck, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    rep = inspect(ck)
    codes = {(f.code, f.tensor) for f in rep.findings if f.severity == "error"}
    assert ("block-shape", DOWN + ".weight") in codes and ("block-shape", GATE + ".weight") in codes
    assert main(["checkpoint", "inspect", str(ck)]) == 1
    assert "refusing to guess" in capsys.readouterr().out
    assert main(["checkpoint", "convert", "--to", "mxfp8", str(ck), str(tmp_path / "mx")]) == 2
    assert "unknown block shape" in capsys.readouterr().err
    # no config file at all: the same refusal
    (ck / "config.json").unlink()
    with pytest.raises(CheckpointError, match="unknown block shape"):
        dequantize(ck, tmp_path / "out2")


def test_inspect_flags_a_layout_dequantize_refuses(tmp_path):
    f = tmp_path / "m.safetensors"
    save_file({"l.weight": np.full((8, 16), 0x38, np.uint8).view(E4M3), "l.weight_scale": np.ones(7, F32)}, str(f))
    with pytest.raises(CheckpointError, match="cannot tell how scale l.weight_scale"):
        dequantize(f, tmp_path / "o.safetensors")
    rep = inspect(f)
    assert [(x.severity, x.code, x.tensor) for x in rep.findings] == [("error", "layout", "l.weight")]
    assert "dequantize refuses it" in rep.findings[0].message


@pytest.mark.parametrize("value,message", [
    ([128], r"config.json quantization_config.config_groups.group_0.weights.block_structure is \[128\]; a block "
            "shape is two positive integers"),
    ([64, 64], r"scale model.layers.0.mlp.down_proj.weight_scale \[2, 3\] does not cover \[192, 320\] in 64x64 "
               "blocks"),
])
def test_a_wrong_declared_block_shape_is_refused(tmp_path, value, message):
    cfg = json.loads(json.dumps(CT_FP8_BLOCK_CONFIG))
    cfg["config_groups"]["group_0"]["weights"]["block_structure"] = value
    ck, _ = _ct_fp8_block(tmp_path / "ct", config=cfg)
    with pytest.raises(CheckpointError, match=message):
        dequantize(ck, tmp_path / "out")
    assert ("error", "block-shape") in {(f.severity, f.code) for f in inspect(ck).findings}


def test_block_shape_inferred_only_when_one_fits_and_said(tmp_path, capsys):
    # [3, 3] codes under [2, 2] scales: ceil(3 / b) = 2 only for b = 2
    codes = np.array([[0x38, 0x40, 0x30], [0x38, 0x38, 0x38], [0x44, 0x30, 0x38]], np.uint8)
    s = np.array([[0.5, 2.0], [4.0, 0.25]], F32)
    f = tmp_path / "m.safetensors"
    save_file({"l.weight": codes.view(E4M3), "l.weight_scale": s}, str(f))
    out = tmp_path / "o.safetensors"
    assert main(["checkpoint", "dequantize", str(f), str(out), "--dtype", "float32"]) == 0
    assert "l.weight: block shape inferred from the scale's shape: 2x2 is the only" in capsys.readouterr().out
    assert np.array_equal(load(out)["l.weight"], _exact_f32(codes, s, (2, 2)))
    rep = inspect(f)
    assert [(x.severity, x.code) for x in rep.findings] == [("warning", "block-inferred")]


def test_config_groups_with_different_block_shapes_follow_their_targets(tmp_path):
    rng = np.random.default_rng(5)
    d = tmp_path / "ct"
    d.mkdir()
    t, want = {}, {}
    for L, b in ((DOWN, (64, 64)), (GATE, (128, 128))):
        w = (rng.standard_normal((192, 320)) * 0.02).astype(F32)
        codes, s = _block_quantize(w, b)
        t[L + ".weight"], t[L + ".weight_scale"] = codes.view(E4M3), s
        want[L + ".weight"] = _exact_f32(codes, s, b)
    save_file(t, str(d / "model.safetensors"))
    cfg = json.loads(json.dumps(CT_FP8_BLOCK_CONFIG))
    g0 = cfg["config_groups"]["group_0"]
    g0["targets"] = ["re:.*gate_proj$"]
    g1 = json.loads(json.dumps(g0))
    g1["targets"], g1["weights"]["block_structure"] = ["re:.*down_proj$"], [64, 64]
    cfg["config_groups"]["group_1"] = g1
    (d / "config.json").write_text(json.dumps({"quantization_config": cfg}))
    s = dequantize(d, tmp_path / "out", dtype="float32")
    assert s.jobs[DOWN + ".weight"].block == (64, 64) and s.jobs[GATE + ".weight"].block == (128, 128)
    got = load(tmp_path / "out" / "model.safetensors")
    assert all(np.array_equal(got[n], w) for n, w in want.items())


@pytest.mark.slow  # importing compressed-tensors (and transformers) takes seconds
def test_ct_config_is_what_compressed_tensors_writes():
    ct = pytest.importorskip("compressed_tensors", reason="compressed-tensors is not installed: its own config "
                             "dump cannot be compared")
    from compressed_tensors.quantization import QuantizationConfig, preset_name_to_scheme

    qc = QuantizationConfig(config_groups={"group_0": preset_name_to_scheme("FP8_BLOCK", ["Linear"])},
                            format="float-quantized", quantization_status="compressed", ignore=["lm_head"])
    dumped = qc.model_dump(exclude=["quant_method"])
    ours = {k: v for k, v in CT_FP8_BLOCK_CONFIG.items()
            if k not in ("version", "quant_method", "sparsity_config", "transform_config")}
    assert json.loads(json.dumps(dumped)) == ours
    assert ct.__version__.startswith("0.")


@pytest.mark.slow
def test_ct_compressor_output_dequantizes_as_compressed_tensors_does(tmp_path):
    pytest.importorskip("compressed_tensors", reason="compressed-tensors is not installed: its compressor "
                        "cannot write the fixture")
    torch = pytest.importorskip("torch", reason="compressed-tensors needs torch")
    from compressed_tensors.compressors.naive_quantized.base import FloatQuantizationCompressor
    from compressed_tensors.quantization import preset_name_to_scheme

    scheme = preset_name_to_scheme("FP8_BLOCK", ["Linear"])
    rng = np.random.default_rng(9)
    w = (rng.standard_normal((192, 320)) * 0.02).astype(F32)
    _, s = _block_quantize(w, (128, 128))  # the scales an observer would give (amax / 448 per block)
    packed = FloatQuantizationCompressor.compress({"weight": torch.from_numpy(w), "weight_scale":
                                                   torch.from_numpy(s)}, scheme)
    codes = packed["weight"].contiguous().view(torch.uint8).numpy()  # the compressor returns a padded view
    d = tmp_path / "ct"
    d.mkdir()
    save_file({DOWN + ".weight": codes.view(E4M3), DOWN + ".weight_scale": packed["weight_scale"].numpy()},
              str(d / "model.safetensors"))
    (d / "config.json").write_text(json.dumps({"quantization_config": CT_FP8_BLOCK_CONFIG}))
    theirs = FloatQuantizationCompressor.decompress(dict(packed), scheme)["weight"].numpy()
    dequantize(d, tmp_path / "out", dtype="float32")
    ours = load(tmp_path / "out" / "model.safetensors")[DOWN + ".weight"]
    assert np.array_equal(ours.view(np.uint32), theirs.astype(F32).view(np.uint32))
    assert np.array_equal(ours, _exact_f32(codes, s, (128, 128)))


# ---- 3. activation scales of dequantized layers ----------------------------------------------------


def test_quark_activation_scales_are_recognised_and_dropped(tmp_path):
    ck = make("quark-mxfp4", tmp_path)
    L = "model.layers.0.mlp.down_proj"
    shard = next(s for s in sorted(ck.glob("*.safetensors")) if L + ".weight" in load(s))
    t = load(shard)
    t[L + ".input_scale"] = np.array([0.125], F32)  # mxfp4_fp8: the FP8 activations' scale
    save_file(t, str(shard))
    idx = json.loads((ck / "model.safetensors.index.json").read_text())
    idx["weight_map"][L + ".input_scale"] = shard.name
    (ck / "model.safetensors.index.json").write_text(json.dumps(idx))
    rep = inspect(ck)
    assert not [f for f in rep.findings if f.code == "unmatched"]
    s = dequantize(ck, tmp_path / "out")
    out = {n for sh in (tmp_path / "out").glob("*.safetensors") for n in load(sh)}
    assert L + ".input_scale" not in out and L + ".weight" in out
    assert L + ".input_scale" not in json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())[
        "weight_map"]
    assert s.totals()["dropped"] >= 3


def test_quark_nvfp4_input_scale_2_is_dropped(tmp_path):
    ck = make("modelopt-nvfp4", tmp_path)
    (ck / "hf_quant_config.json").unlink()
    (ck / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "quark"}}))
    L = "model.layers.0.self_attn.q_proj"
    shard = next(s for s in sorted(ck.glob("*.safetensors")) if L + ".weight" in load(s))
    t = load(shard)
    t[L + ".input_scale_2"] = np.array([1.0], F32)
    save_file(t, str(shard))
    idx = json.loads((ck / "model.safetensors.index.json").read_text())
    idx["weight_map"][L + ".input_scale_2"] = shard.name
    (ck / "model.safetensors.index.json").write_text(json.dumps(idx))
    assert not [f for f in inspect(ck).findings if f.code == "unmatched"]
    dequantize(ck, tmp_path / "out")
    assert all(L + ".input_scale_2" not in load(sh) for sh in (tmp_path / "out").glob("*.safetensors"))


# ---- 5. FNUZ conversion of MXFP8 (E8M0 scales) -----------------------------------------------------


def test_fnuz_convert_mxfp8_doubles_e8m0_scales_exactly(tmp_path):
    ck = make("modelopt-mxfp8", tmp_path)
    L = "model.layers.0.mlp.down_proj"
    rewrite(ck, L + ".weight_scale", lambda s: np.where(np.arange(s.size).reshape(s.shape) == 3, 0xFF, s
                                                        ).astype(np.uint8))  # one NaN scale stays NaN
    src = load(ck / "model-00001-of-00002.safetensors") | load(ck / "model-00002-of-00002.safetensors")
    with pytest.raises(CheckpointError, match="e8m0|NaN"):  # the planted 0xFF is a scale error inspect reports
        convert(ck, tmp_path / "fnuz")
    s = convert(ck, tmp_path / "fnuz", allow_scale_errors=True)
    assert s.totals()["scales_doubled"] == 2
    got = load(tmp_path / "fnuz" / "model-00001-of-00002.safetensors") | load(
        tmp_path / "fnuz" / "model-00002-of-00002.safetensors")
    for layer in ("model.layers.0.mlp.down_proj", "model.layers.0.self_attn.q_proj"):
        old_s, new_s = src[layer + ".weight_scale"], got[layer + ".weight_scale"]
        assert new_s.dtype == np.uint8
        assert np.array_equal(new_s, np.where(old_s == 0xFF, 0xFF, old_s.astype(np.int64) + 1))
        assert got[layer + ".weight"].dtype == ml_dtypes.float8_e4m3fnuz
        # every value kept: OCP code x 2^(s - 127) == FNUZ code x 2^(s + 1 - 127), in float64 (exact)
        ocp = src[layer + ".weight"].astype(np.float64) * np.repeat(np.exp2(old_s.astype(np.float64) - 127), 32, 1)
        fnuz = got[layer + ".weight"].astype(np.float64) * np.repeat(np.exp2(new_s.astype(np.float64) - 127), 32, 1)
        fin = np.isfinite(ocp) & np.repeat(old_s != 0xFF, 32, 1)
        assert np.array_equal(ocp[fin], fnuz[fin])


@pytest.mark.slow
def test_fnuz_mxfp8_loads_with_torch_as_float8_e4m3fnuz(tmp_path):
    torch = pytest.importorskip("torch", reason="torch is not installed: the FNUZ tag cannot be loaded by torch")
    from safetensors.torch import load_file

    ck = make("modelopt-mxfp8", tmp_path)
    convert(ck, tmp_path / "fnuz")
    L = "model.layers.0.mlp.down_proj"
    src = load(ck / "model-00001-of-00002.safetensors") | load(ck / "model-00002-of-00002.safetensors")
    tt = load_file(str(tmp_path / "fnuz" / "model-00001-of-00002.safetensors")) | load_file(
        str(tmp_path / "fnuz" / "model-00002-of-00002.safetensors"))
    assert tt[L + ".weight"].dtype == torch.float8_e4m3fnuz and tt[L + ".weight_scale"].dtype == torch.uint8
    # torch's own FNUZ decode times the doubled E8M0 scale gives every original value
    theirs = tt[L + ".weight"].to(torch.float64) * torch.exp2(
        tt[L + ".weight_scale"].to(torch.float64) - 127).repeat_interleave(32, dim=1)
    ours = src[L + ".weight"].astype(np.float64) * np.repeat(np.exp2(src[L + ".weight_scale"].astype(np.float64)
                                                                     - 127), 32, 1)
    assert np.array_equal(theirs.numpy(), ours)


def test_fnuz_convert_refuses_e8m0_0xfe_naming_tensor_and_block(tmp_path, capsys):
    ck = make("modelopt-mxfp8", tmp_path)
    L = "model.layers.0.self_attn.q_proj"

    def plant(s):
        s[5, 2] = 0xFE
        return s

    rewrite(ck, L + ".weight_scale", plant)
    with pytest.raises(CheckpointError, match=rf"{L}.weight_scale: E8M0 scale byte 0xFE .* at block \[5, 2\] "
                                              r"\(weight columns 64\.\.95\) cannot double"):
        convert(ck, tmp_path / "fnuz")
    assert not (tmp_path / "fnuz").exists() or not list((tmp_path / "fnuz").glob("*.safetensors"))
    assert main(["fnuz", "convert", str(ck), str(tmp_path / "fnuz2"), "--dry-run"]) == 1
    assert "PROBLEM:" in capsys.readouterr().out


# ---- 6. bad checkpoint files -----------------------------------------------------------------------


def _two_shards(tmp_path):
    return make("compressed-tensors-fp8", tmp_path / "src")


def _index(ck):
    return json.loads((ck / "model.safetensors.index.json").read_text())


def _set_index(ck, idx):
    (ck / "model.safetensors.index.json").write_text(json.dumps(idx))


COMMANDS = [
    ["fnuz", "convert", "{ck}", "{out}"],
    ["checkpoint", "dequantize", "{ck}", "{out}"],
    ["checkpoint", "inspect", "{ck}"],
    ["checkpoint", "convert", "--to", "mxfp8", "{ck}", "{out}"],
    ["checkpoint", "explain", "{ck}", "--original", "{orig}"],
]


def _run_all(ck, tmp_path, capsys, *patterns):
    """Every checkpoint command refuses ``ck`` with exit 2 and a one-line message matching the patterns."""
    for i, cmd in enumerate(COMMANDS):
        out = tmp_path / f"out{i}"
        args = [a.format(ck=ck, out=out, orig=tmp_path / "src" / "compressed-tensors-fp8.original.safetensors")
                for a in cmd]
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("fmtsim: error:") and "Traceback" not in err, (args, err)
        for pat in patterns:
            assert pat in err, (args, err)
        assert not out.exists() or not list(out.rglob("*.safetensors")), args


@pytest.mark.parametrize("where", ["../outside/model-00001-of-00002.safetensors", "absolute"])
def test_index_entries_outside_the_folder_are_refused_everywhere(tmp_path, capsys, where):
    ck = _two_shards(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    shard = ck / "model-00001-of-00002.safetensors"
    (outside / shard.name).write_bytes(shard.read_bytes())
    target = str(outside / shard.name) if where == "absolute" else where
    idx = _index(ck)
    idx["weight_map"] = {k: (target if v == shard.name else v) for k, v in idx["weight_map"].items()}
    _set_index(ck, idx)
    shard.unlink()
    _run_all(ck, tmp_path, capsys, "not a plain file name in the checkpoint's folder", target)


def test_tensor_missing_from_weight_map_is_refused_by_name(tmp_path, capsys):
    ck = _two_shards(tmp_path)
    idx = _index(ck)
    name = sorted(idx["weight_map"])[0]
    shard = idx["weight_map"].pop(name)
    _set_index(ck, idx)
    _run_all(ck, tmp_path, capsys, f"tensor {name!r} is not in model.safetensors.index.json's weight_map", shard)


def test_weight_map_with_integer_values(tmp_path, capsys):
    ck = _two_shards(tmp_path)
    idx = _index(ck)
    first = sorted(idx["weight_map"])[0]
    idx["weight_map"][first] = 1
    _set_index(ck, idx)
    _run_all(ck, tmp_path, capsys, "model.safetensors.index.json: weight_map maps", "(int), not to a shard file name")


def test_utf16_index(tmp_path, capsys):
    ck = _two_shards(tmp_path)
    p = ck / "model.safetensors.index.json"
    p.write_bytes(p.read_text().encode("utf-16"))
    _run_all(ck, tmp_path, capsys, "model.safetensors.index.json: the index is UTF-16 text")


def test_empty_weight_map_with_shards(tmp_path, capsys):
    ck = _two_shards(tmp_path)
    idx = _index(ck)
    idx["weight_map"] = {}
    _set_index(ck, idx)
    _run_all(ck, tmp_path, capsys, "weight_map is empty", "model-00001-of-00002.safetensors")


def test_a_text_file_given_as_a_checkpoint(tmp_path, capsys):
    f = tmp_path / "config.safetensors"
    f.write_text('cfg = {"hidden_size": 160}\n' * 4)
    for cmd in (["fnuz", "convert", str(f), str(tmp_path / "o.safetensors")], ["checkpoint", "inspect", str(f)],
                ["checkpoint", "dequantize", str(f), str(tmp_path / "d.safetensors")]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert f"{f}: not a safetensors file: its first 8 bytes give a header length of" in err
        assert "it starts with the text 'cfg = {\"'" in err


def test_explain_against_an_unrelated_file_fails(tmp_path, capsys):
    ck = make("modelopt-nvfp4", tmp_path)
    unrelated = tmp_path / "unrelated.safetensors"
    save_file({"encoder.block.0.weight": np.ones((4, 4), F32)}, str(unrelated))
    assert main(["checkpoint", "explain", str(ck), "--original", str(unrelated)]) == 2
    err = capsys.readouterr().err
    assert "holds none of the 2 quantized tensors" in err and "not its original" in err
    with pytest.raises(CheckpointError, match="nothing was compared"):
        explain(ck, unrelated)


def test_explain_with_nothing_compared_is_not_success(tmp_path, capsys):
    ck = make("compressed-tensors-w4a16", tmp_path)
    orig = tmp_path / "compressed-tensors-w4a16.original.safetensors"
    assert main(["checkpoint", "explain", str(ck), "--original", str(orig)]) == 0  # every block explained
    capsys.readouterr()
    # an original without down_proj: that tensor is "0 of 0", which is not success
    part = tmp_path / "q_only.safetensors"
    save_file({"model.layers.0.self_attn.q_proj.weight": load(orig)["model.layers.0.self_attn.q_proj.weight"]},
              str(part))
    assert main(["checkpoint", "explain", str(ck), "--original", str(part)]) == 1
    out = capsys.readouterr().out
    assert ("NOT EXAMINED model.layers.0.mlp.down_proj.weight_packed: no tensor "
            "'model.layers.0.mlp.down_proj.weight' in the original") in out
    assert "1 of 2 quantized tensor(s) not examined" in out


def _raw_file(path, tensors, data_size, pad=True):
    """A safetensors file written by hand: tensors name -> (dtype, shape, begin, end)."""
    hdr = {n: {"dtype": d, "shape": list(s), "data_offsets": [b, e]} for n, (d, s, b, e) in tensors.items()}
    raw = json.dumps(hdr).encode()
    if pad:
        raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(range(256)) * (data_size // 256)
                     + bytes(data_size % 256))
    return path


BAD_LAYOUTS = {
    "trailing": ({"l.weight": ("F8_E4M3", (8, 8), 0, 64), "l.weight_scale": ("F32", (), 64, 68)}, 68 + 64,
                 "64 trailing bytes after the last tensor"),
    "hole": ({"l.weight": ("F8_E4M3", (8, 8), 0, 64), "l.weight_scale": ("F32", (), 128, 132)}, 132,
             "a hole of 64 bytes before tensor 'l.weight_scale'"),
    "gap at the start": ({"l.weight": ("F8_E4M3", (8, 8), 8, 72)}, 72, "a hole of 8 bytes before tensor 'l.weight'"),
    "alias": ({"l.weight": ("F8_E4M3", (8, 8), 0, 64), "l.weight_scale": ("U8", (64,), 0, 64)}, 64, "overlap"),
    "unknown dtype": ({"l.weight": ("F8_E4M3X", (8, 8), 0, 64)}, 64, "not a safetensors dtype"),
}


@pytest.mark.parametrize("hide_safetensors", [False, True], ids=["with-safetensors", "without-safetensors"])
@pytest.mark.parametrize("case", list(BAD_LAYOUTS))
def test_data_section_must_be_covered_exactly(tmp_path, monkeypatch, capsys, case, hide_safetensors):
    tensors, size, message = BAD_LAYOUTS[case]
    f = _raw_file(tmp_path / "m.safetensors", tensors, size)
    if not hide_safetensors:  # the reference parser refuses each of these files too
        from safetensors import safe_open

        with pytest.raises(Exception):  # noqa: B017 - safetensors' own error type
            with safe_open(str(f), framework="np") as fh:
                list(fh.keys())
    else:
        monkeypatch.setitem(sys.modules, "safetensors", None)  # as if not installed
    with pytest.raises(CheckpointError, match=message):
        read_header(f)
    for cmd in (["fnuz", "convert", str(f), str(tmp_path / "o.safetensors")], ["checkpoint", "inspect", str(f)]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert message in err and not (tmp_path / "o.safetensors").exists()
        assert ("safetensors is not installed (pip install 'fmtsim[checkpoint]')" in err) == hide_safetensors


def test_without_safetensors_commands_say_the_crosscheck_is_skipped(tmp_path, monkeypatch, capsys):
    f = tmp_path / "m.safetensors"
    save_file({"l.weight": np.full((8, 32), 0x38, np.uint8).view(E4M3), "l.weight_scale": np.array(0.5, F32)},
              str(f))
    monkeypatch.setitem(sys.modules, "safetensors", None)
    assert main(["fnuz", "convert", str(f), str(tmp_path / "o.safetensors")]) == 0
    err = capsys.readouterr().err
    assert err.startswith("fmtsim: warning: safetensors is not installed") and "not cross-checked" in err
    from fmtsim.checkpoint.files import CrosscheckSkipped, crosscheck

    with pytest.warns(CrosscheckSkipped, match="not cross-checked"):
        crosscheck(read_header(f))


def test_checkpoint_docs_name_the_checkpoint_extra():
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "checkpoints.md").read_text()
    assert "pip install 'fmtsim[checkpoint]'" in page


@pytest.mark.parametrize("head,named", [
    (b"GGUF" + (3).to_bytes(4, "little") + bytes(24), "it is a GGUF file (llama.cpp's format, version 3)"),
    (b"PK\x03\x04" + bytes(28), "it is a zip archive, as torch.save writes"),
    (b"\x80\x02" + bytes(30), "it is a Python pickle"),
    (b"\x93NUMPY" + bytes(26), "it is a numpy .npy array"),
])
def test_a_model_file_of_another_container_is_named(tmp_path, head, named):
    """A .gguf or a pytorch_model.bin passed by mistake is named for what it is (the GGUF spec's magic
    'GGUF' and a little-endian uint32 version; zip's local-header magic; pickle's PROTO opcode),
    not refused with a meaningless header length."""
    from fmtsim.checkpoint.files import CheckpointError

    f = tmp_path / "model.x"
    f.write_bytes(head)
    with pytest.raises(CheckpointError, match=re.escape(named)):
        read_header(f)
    d = tmp_path / "folder"
    d.mkdir()
    (d / "model.gguf").write_bytes(head)
    if head.startswith(b"GGUF"):
        from fmtsim.checkpoint.files import find_source

        want = r"no \.safetensors file; it holds GGUF file\(s\) model\.gguf: give one of them itself \(fmtsim "
        with pytest.raises(CheckpointError, match=want + r"checkpoint inspect .*model\.gguf\)"):
            find_source(d)
