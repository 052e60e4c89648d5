"""OCP -> FNUZ conversion of safetensors checkpoints built like real ones."""

import json
import math
import os
import struct

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("safetensors", reason="checkpoint conversion needs the safetensors package")
from safetensors.numpy import save_file  # noqa: E402

import fmtsim  # noqa: E402
from fmtsim.checkpoint import META_KEY, CheckpointError, convert, load  # noqa: E402
from fmtsim.cli import main  # noqa: E402

E4M3 = ml_dtypes.float8_e4m3fn
E5M2 = ml_dtypes.float8_e5m2


def fp8(rng, shape, dt=E4M3, specials=True):
    codes = rng.integers(0, 256, shape, dtype=np.uint8)
    if specials:
        flat = codes.reshape(-1)
        flat[:4] = [0x80, 0x7F, 0xFF, 0x80]  # -0 and NaN codes, as real data may hold
    return codes.view(dt)


def llama_layer(rng, i=0, per_channel=False):
    p = f"model.layers.{i}"
    t = {}
    for proj, (o, n) in {"self_attn.q_proj": (64, 32), "self_attn.k_proj": (16, 32),
                         "self_attn.v_proj": (16, 32), "mlp.down_proj": (32, 48)}.items():
        t[f"{p}.{proj}.weight"] = fp8(rng, (o, n))
        t[f"{p}.{proj}.weight_scale"] = (rng.uniform(1e-3, 1e-2, (o, 1)) if per_channel
                                         else np.array(rng.uniform(1e-3, 1e-2))).astype(np.float32)
        t[f"{p}.{proj}.input_scale"] = np.array(rng.uniform(1e-2, 1e-1), dtype=np.float32)
    t[f"{p}.self_attn.k_scale"] = np.array(0.05, dtype=np.float32)
    t[f"{p}.self_attn.v_scale"] = np.array(0.07, dtype=np.float32)
    t[f"{p}.input_layernorm.weight"] = rng.standard_normal(32).astype(ml_dtypes.bfloat16)
    return t


def values(codes, fmt, scale):
    return fmtsim.decode(np.asarray(codes).view(np.uint8), fmt, np.float64) * np.asarray(scale, np.float64)


def check_converted(before, after, pairs):
    for w, s in pairs:
        fmt = "e4m3" if before[w].dtype == E4M3 else "e5m2"
        assert after[w].dtype == (ml_dtypes.float8_e4m3fnuz if fmt == "e4m3" else ml_dtypes.float8_e5m2fnuz)
        old = values(before[w], fmt, 1.0)
        scale_old = np.asarray(before[s], np.float64)
        scale_new = np.asarray(after[s], np.float64)
        assert np.array_equal(scale_new, scale_old * 2)
        if scale_old.ndim == 2 and scale_old.shape != (before[w].shape[0], 1):  # 128x128 blocks
            scale_old = np.kron(scale_old, np.ones((128, 128)))[: old.shape[0], : old.shape[1]]
            scale_new = np.kron(scale_new, np.ones((128, 128)))[: old.shape[0], : old.shape[1]]
        new = values(after[w], fmt + "fnuz", 1.0)
        ok = np.isfinite(old)
        assert np.array_equal((old * scale_old)[ok], (new * scale_new)[ok])
        assert np.all(np.isnan(new[~ok]))
        # ml_dtypes' own decoders agree
        assert np.array_equal(after[w].astype(np.float64)[ok] * 2, before[w].astype(np.float64)[ok])


def test_llama_per_tensor_single_file(tmp_path, rng):
    t = llama_layer(rng)
    t["model.embed_tokens.weight"] = rng.standard_normal((10, 32)).astype(ml_dtypes.bfloat16)
    src = tmp_path / "model.safetensors"
    save_file(t, str(src), metadata={"format": "pt"})
    out = tmp_path / "out" / "model.safetensors"
    s = convert(src, out)
    after = load(out)
    before = load(src)
    pairs = [(n, n + "_scale") for n in t if n.endswith("proj.weight")]
    check_converted(before, after, pairs)
    for n in ("input_scale",):
        for k in t:
            if k.endswith(n):
                assert after[k] == before[k] * 2
    assert after["model.layers.0.self_attn.k_scale"] == np.float32(0.1)
    for k in ("model.layers.0.input_layernorm.weight", "model.embed_tokens.weight"):
        assert after[k].dtype == before[k].dtype
        assert after[k].tobytes() == before[k].tobytes()
    tot = s.totals()
    codes = np.concatenate([before[n].view(np.uint8).ravel() for n, _ in pairs])
    assert tot["fp8_tensors"] == 4
    assert tot["neg_zero"] == np.count_nonzero(codes == 0x80) >= 8
    assert tot["nan"] == np.count_nonzero((codes == 0x7F) | (codes == 0xFF)) >= 8
    assert tot["scales_doubled"] == 4 + 4 + 2
    meta = fmtsim.checkpoint.read_header(out).metadata
    assert meta["format"] == "pt" and json.loads(meta[META_KEY])["scale_multiplier"] == 2.0
    assert src.read_bytes() == _saved(t, tmp_path)  # the input is untouched


def _saved(t, tmp_path):
    p = tmp_path / "again.safetensors"
    save_file(t, str(p), metadata={"format": "pt"})
    return p.read_bytes()


def test_per_channel_and_deepseek_blocks(tmp_path, rng):
    t = llama_layer(rng, per_channel=True)
    w = "model.layers.3.mlp.experts.7.down_proj.weight"
    t[w] = fp8(rng, (300, 200))
    t[w + "_scale_inv"] = rng.uniform(1e-4, 1e-3, (3, 2)).astype(np.float32)
    src = tmp_path / "m.safetensors"
    save_file(t, str(src))
    out = tmp_path / "fnuz.safetensors"
    convert(src, out)
    before, after = load(src), load(out)
    pairs = [(n, n + "_scale") for n in t if n.endswith("proj.weight") and "experts" not in n]
    pairs.append((w, w + "_scale_inv"))
    check_converted(before, after, pairs)


def test_sharded_directory_with_index_and_config(tmp_path, rng):
    src = tmp_path / "ckpt"
    src.mkdir()
    shards = {"model-00001-of-00002.safetensors": llama_layer(rng, 0),
              "model-00002-of-00002.safetensors": llama_layer(rng, 1)}
    # a weight in one shard, its scale in the other (happens in real shards)
    moved = "model.layers.1.mlp.down_proj.weight_scale"
    shards["model-00001-of-00002.safetensors"][moved] = shards["model-00002-of-00002.safetensors"].pop(moved)
    weight_map = {}
    for name, tensors in shards.items():
        save_file(tensors, str(src / name))
        weight_map.update({k: name for k in tensors})
    (src / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 1},
                                                                  "weight_map": weight_map}))
    qc = {"quant_method": "fp8", "activation_scheme": "static"}
    (src / "config.json").write_text(json.dumps({"model_type": "llama", "quantization_config": qc}))
    (src / "tokenizer.json").write_text("{}")
    out = tmp_path / "ckpt-fnuz"
    s = convert(src, out, jobs=2)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in src.iterdir())
    before, after = load(src), load(out)
    pairs = [(n, n + "_scale") for n in before if n.endswith("proj.weight")]
    check_converted(before, after, pairs)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["quantization_config"]["quant_method"] == "fp8"
    assert cfg["quantization_config"][META_KEY]["target_format"] == "FNUZ"
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert index["weight_map"] == weight_map and META_KEY in index["metadata"]
    assert (out / "tokenizer.json").read_text() == "{}"
    assert all(r.verified for r in s.shards)
    # re-running skips the verified shards
    again = convert(src, out)
    assert all(r.skipped for r in again.shards)
    assert load(out).keys() == after.keys()


def test_dry_run_writes_nothing(tmp_path, rng, capsys):
    src = tmp_path / "m.safetensors"
    save_file(llama_layer(rng), str(src))
    out = tmp_path / "o" / "m.safetensors"
    assert main(["fnuz", "convert", str(src), str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "nothing written" in text and "4 FP8 tensors converted, 10 scales doubled" in text
    assert not out.exists() and not out.parent.exists()


def test_cli_summary(tmp_path, rng, capsys):
    src = tmp_path / "m.safetensors"
    save_file(llama_layer(rng), str(src))
    out = tmp_path / "m_fnuz.safetensors"
    assert main(["fnuz", "convert", str(src), str(out)]) == 0
    text = capsys.readouterr().out
    assert "total" in text and "verified" in text


def test_e5m2_inf_needs_a_choice_and_nothing_is_left(tmp_path, rng):
    t = {"w": fp8(rng, (8, 8), E5M2, specials=False), "w_scale": np.array(0.5, np.float32)}
    codes = t["w"].view(np.uint8)
    codes[0, :3] = [0x7C, 0xFC, 0x7D]
    src = tmp_path / "m.safetensors"
    save_file(t, str(src))
    out = tmp_path / "o.safetensors"
    with pytest.raises(CheckpointError, match="Inf"):
        convert(src, out)
    assert list(tmp_path.iterdir()) == [src], "no output and no temporary file left behind"
    convert(src, out, inf="ocp_max")
    after = load(out)["w"].view(np.uint8)
    assert after[0, :3].tolist() == [0x7B, 0xFB, 0x80]


def test_unscaled_and_unknown_scales_are_refused(tmp_path, rng):
    src = tmp_path / "m.safetensors"
    save_file({"a.weight": fp8(rng, (4, 4)), "b.weight": fp8(rng, (4, 4)),
               "b.weight_scale": np.array(1.0, np.float32)}, str(src))
    with pytest.raises(CheckpointError, match="1 FP8 tensor.*no scale: a.weight"):
        convert(src, tmp_path / "o.safetensors")
    s = convert(src, tmp_path / "o.safetensors", allow_unscaled=True)
    assert s.plan.unscaled == ["a.weight"]
    assert np.array_equal(load(tmp_path / "o.safetensors")["a.weight"].astype(np.float64)[2:] * 2,
                          load(src)["a.weight"].astype(np.float64)[2:], equal_nan=True)  # rng is session-wide
    src2 = tmp_path / "n.safetensors"
    save_file({"a.weight": fp8(rng, (4, 4)), "a.weight_scale": np.array(1.0, np.float32),
               "a.smooth_scale": np.ones(4, np.float32)}, str(src2))
    with pytest.raises(CheckpointError, match="a.smooth_scale"):
        convert(src2, tmp_path / "n_out.safetensors")
    convert(src2, tmp_path / "n_out.safetensors", keep_scales=("*.smooth_scale",))
    assert np.array_equal(load(tmp_path / "n_out.safetensors")["a.smooth_scale"], np.ones(4))


def test_already_fnuz_is_refused(tmp_path, rng):
    src = tmp_path / "m.safetensors"
    save_file(llama_layer(rng), str(src))
    out = tmp_path / "f.safetensors"
    convert(src, out)
    with pytest.raises(CheckpointError, match="already FNUZ"):
        convert(out, tmp_path / "g.safetensors")
    assert not (tmp_path / "g.safetensors").exists()


def _write_raw(path, header, data=b""):
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


@pytest.mark.parametrize("case,match", [
    ("truncated", "truncated"),
    ("corrupt", "corrupt header"),
    ("offsets", "out of range"),
    ("duplicate", "duplicated tensor name"),
    ("tiny", "truncated file"),
])
def test_bad_files(tmp_path, case, match):
    p = tmp_path / "bad.safetensors"
    if case == "truncated":
        good = tmp_path / "good.safetensors"
        save_file({"x": np.ones(100, np.float32)}, str(good))
        p.write_bytes(good.read_bytes()[:50])
    elif case == "corrupt":
        p.write_bytes(struct.pack("<Q", 10) + b"{not json}")
    elif case == "offsets":
        _write_raw(p, {"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8)
    elif case == "duplicate":
        raw = (b'{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
               b'"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}')
        p.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0")
    else:
        p.write_bytes(b"\1\2")
    with pytest.raises(CheckpointError, match=match):
        convert(p, tmp_path / "out.safetensors")
    assert not (tmp_path / "out.safetensors").exists()


def test_missing_shard_and_bad_outputs(tmp_path, rng):
    src = tmp_path / "ckpt"
    src.mkdir()
    save_file(llama_layer(rng), str(src / "a.safetensors"))
    (src / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}}))
    with pytest.raises(CheckpointError, match="missing: b.safetensors"):
        convert(src, tmp_path / "out")
    (src / "model.safetensors.index.json").unlink()
    with pytest.raises(CheckpointError, match="inside the input"):
        convert(src, src / "sub")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CheckpointError, match="cannot create output directory|not writable"):
        convert(src, blocker / "out")
    single = src / "a.safetensors"
    with pytest.raises(CheckpointError, match="inside the input"):
        convert(single, single)


def test_load_returns_fnuz_dtypes(tmp_path):
    src = tmp_path / "m.safetensors"
    x = np.array([1.5, -2.0, 0.0], np.float32)
    save_file({"w": x.astype(E4M3), "w_scale": np.array(3.0, np.float32)}, str(src))
    convert(src, tmp_path / "f.safetensors")
    got = load(tmp_path / "f.safetensors")
    assert got["w"].dtype == ml_dtypes.float8_e4m3fnuz
    assert np.array_equal(got["w"].astype(np.float32) * got["w_scale"], x * 3.0)
    assert not math.isnan(float(got["w_scale"]))
    assert os.path.exists(tmp_path / "f.safetensors")



def test_torch_loads_the_fnuz_output(tmp_path, rng):
    """safetensors.torch reads the F8_E4M3FNUZ / F8_E5M2FNUZ tags as torch's FNUZ dtypes,
    and torch's own FNUZ decode times the doubled scale gives the original values."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'fmtsim[torch]')")
    from safetensors.torch import load_file

    t = {"a.weight": fp8(rng, (8, 16)), "a.weight_scale": np.array(0.01, np.float32),
         "b.weight": fp8(rng, (8, 16), E5M2), "b.weight_scale": np.array(0.02, np.float32)}
    t["b.weight"].view(np.uint8)[0, 4:6] = [0x7C, 0xFC]  # E5M2 +-Inf: written as NaN here
    save_file(t, str(tmp_path / "m.safetensors"))
    convert(tmp_path / "m.safetensors", tmp_path / "f.safetensors", inf="nan")
    got = load_file(str(tmp_path / "f.safetensors"))
    for name, dt, fmt in (("a.weight", torch.float8_e4m3fnuz, "e4m3"), ("b.weight", torch.float8_e5m2fnuz, "e5m2")):
        assert got[name].dtype == dt
        old = values(t[name], fmt, np.float64(t[name + "_scale"]))
        new = got[name].to(torch.float64).numpy() * float(got[name + "_scale"])
        ok = np.isfinite(old)
        assert np.array_equal(old[ok], new[ok])
        assert np.all(np.isnan(new[~ok]))
