"""checkpoint inspect: detection per producer, statistics, and every lint finding planted and found."""

import json

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("safetensors", reason="checkpoint jobs need the safetensors package")
from gen_checkpoints import make, rewrite  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

import fmtsim  # noqa: E402
from fmtsim import nvfp4  # noqa: E402
from fmtsim.checkpoint import load  # noqa: E402
from fmtsim.checkpoint import producers as prod  # noqa: E402
from fmtsim.checkpoint.inspection import inspect  # noqa: E402
from fmtsim.cli import main  # noqa: E402
from fmtsim.layout import pack_fp4, swizzle_scales  # noqa: E402

E4M3 = ml_dtypes.float8_e4m3fn
DOWN = "model.layers.0.mlp.down_proj"



def codes_of(r):
    return {(f.code, f.tensor) for f in r.findings}


@pytest.mark.parametrize("producer", [p.name for p in prod.PRODUCERS if not p.refuse and p.synthetic])
def test_clean_checkpoints_are_recognised_without_errors(tmp_path, producer):
    r = inspect(make(producer, tmp_path))
    assert r.producers == {producer: 2}
    assert r.errors == 0, r.findings
    assert all(t.codes["values"] > 0 for t in r.tensors)


def test_fp8_statistics_match_a_direct_count(tmp_path):
    src = make("deepseek-fp8-block", tmp_path)
    rewrite(src, DOWN + ".weight", lambda w: _set(w, [0x7F, 0xFF, 0x80, 0x7E, 0xFE, 0x01]))
    r = inspect(src)
    t = next(t for t in r.tensors if t.tensor == DOWN + ".weight")
    c = load(src)[DOWN + ".weight"].view(np.uint8)
    assert t.codes["nan_codes"] == np.count_nonzero((c & 0x7F) == 0x7F) >= 2
    assert t.codes["neg_zero"] == np.count_nonzero(c == 0x80) >= 1
    assert t.codes["at_max"] == np.count_nonzero((c & 0x7F) == 0x7E) >= 2
    assert t.codes["subnormal"] == np.count_nonzero(((c & 0x78) == 0) & ((c & 0x07) != 0))
    assert t.codes["unused_codes"] == 254 - len(set(c.reshape(-1).tolist()) - {0x7F, 0xFF})


def _set(w, codes):
    w.view(np.uint8).reshape(-1)[: len(codes)] = codes
    return w


@pytest.mark.parametrize("value,code", [(np.nan, "nan-scale"), (np.inf, "inf-scale"), (-1e-3, "negative-scale"),
                                        (0.0, "zero-scale")])
def test_bad_fp8_block_scales(tmp_path, value, code):
    src = make("deepseek-fp8-block", tmp_path)
    rewrite(src, DOWN + ".weight_scale_inv", lambda s: _put(s, (1, 2), value))
    r = inspect(src)
    assert (code, DOWN + ".weight_scale_inv") in codes_of(r)
    assert r.errors >= 1
    assert main(["checkpoint", "inspect", str(src)]) == 1


def _put(a, idx, v):
    a[idx] = v
    return a


def test_e8m0_nan_and_linear_scales(tmp_path):
    src = make("gpt-oss-mxfp4", tmp_path)
    name = "model.layers.0.mlp.experts.down_proj_scales"
    rewrite(src, name, lambda s: _put(s, (1, 5, 1), 0xFF))
    r = inspect(src)
    f = next(f for f in r.findings if f.code == "e8m0-nan")
    assert f.tensor == name and "[1, 5, 1]" in f.message
    rewrite(src, name, lambda s: (np.arange(s.size) % 7).astype(np.uint8).reshape(s.shape))
    assert ("e8m0-linear", name) in codes_of(inspect(src))


@pytest.mark.parametrize("producer,tensor", [("modelopt-nvfp4", ".weight_scale_2"),
                                             ("compressed-tensors-nvfp4", ".weight_global_scale")])
def test_global_scale_direction(tmp_path, producer, tensor):
    src = make(producer, tmp_path)
    assert not any(f.code == "global-direction" for f in inspect(src).findings)
    rewrite(src, DOWN + tensor, lambda g: np.asarray(np.float32(1) / g, dtype=np.float32).reshape(g.shape))
    r = inspect(src)
    assert ("global-direction", DOWN + tensor) in codes_of(r)


def _nvfp4_layer(w, swizzle=False, swap=False):
    q = nvfp4.quantize(w, recipe="te")
    codes = q.codes
    packed = pack_fp4(codes, order="high_first" if swap else "low_first")
    sc = q.scales.astype(np.uint8)
    if swizzle:
        sc = swizzle_scales(sc).reshape(sc.shape)
    return {"weight": packed, "weight_scale": sc.view(E4M3), "weight_scale_2": np.array(q.global_scale, np.float32),
            "input_scale": np.array(0.01, np.float32)}


def _write_nvfp4(path, layers):
    t = {}
    for L, parts in layers.items():
        t.update({f"{L}.{k}": v for k, v in parts.items()})
    save_file(t, str(path))
    return path


def test_swizzled_scales(tmp_path, rng):
    rows = np.exp2(rng.integers(-6, 3, 256)).astype(np.float32)[:, None]  # per-row magnitudes, as real layers
    w = (rng.standard_normal((256, 256)).astype(np.float32) * rows).astype(np.float32)
    plain = _write_nvfp4(tmp_path / "plain.safetensors", {DOWN: _nvfp4_layer(w)})
    assert "swizzled-scales" not in {f.code for f in inspect(plain).findings}
    sw = _write_nvfp4(tmp_path / "sw.safetensors", {DOWN: _nvfp4_layer(w, swizzle=True)})
    assert ("swizzled-scales", DOWN + ".weight_scale") in codes_of(inspect(sw))


def test_nibble_order(tmp_path):
    x = np.linspace(0, 40, 512, dtype=np.float32)
    w = (np.sin(x)[None, :] * np.linspace(0.5, 1.5, 64, dtype=np.float32)[:, None]).astype(np.float32)
    ok = _write_nvfp4(tmp_path / "ok.safetensors", {DOWN: _nvfp4_layer(w)})
    assert "nibble-order" not in {f.code for f in inspect(ok).findings}
    bad = _write_nvfp4(tmp_path / "bad.safetensors", {DOWN: _nvfp4_layer(w, swap=True)})
    assert ("nibble-order", DOWN + ".weight") in codes_of(inspect(bad))


def test_fused_pairs_with_different_global_scales(tmp_path, rng):
    g = "model.layers.0.mlp.gate_proj"
    u = "model.layers.0.mlp.up_proj"
    w1 = rng.standard_normal((32, 64)).astype(np.float32)
    src = _write_nvfp4(tmp_path / "m.safetensors", {g: _nvfp4_layer(w1), u: _nvfp4_layer(w1 * np.float32(3))})
    r = inspect(src)
    assert ("fused-global-scales", g + ".weight") in codes_of(r)
    same = _write_nvfp4(tmp_path / "s.safetensors", {g: _nvfp4_layer(w1), u: _nvfp4_layer(w1)})
    assert "fused-global-scales" not in {f.code for f in inspect(same).findings}


def test_missing_and_unmatched_and_json(tmp_path, rng, capsys):
    src = tmp_path / "m.safetensors"
    save_file({"a.weight": rng.integers(0, 0x70, (4, 4), dtype=np.uint8).view(E4M3),
               "b.weight": rng.integers(0, 0x70, (4, 4), dtype=np.uint8).view(E4M3),
               "b.weight_scale": np.array(0.5, np.float32),
               "b.smooth_scale": np.ones(4, np.float32)}, str(src))
    assert main(["checkpoint", "inspect", str(src), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    got = {(f["severity"], f["code"], f["tensor"]) for f in d["findings"]}
    assert ("error", "missing-scale", "a.weight") in got
    assert ("warning", "unmatched", "b.smooth_scale") in got
    assert d["errors"] == 1 and d["tensors"][0]["tensor"] == "b.weight"


def test_ambiguity_is_reported_not_guessed(tmp_path, monkeypatch):
    src = make("modelopt-nvfp4", tmp_path)
    (src / "hf_quant_config.json").unlink()
    twin = prod.Producer(**{**prod.get_producer("modelopt-nvfp4").__dict__, "name": "twin-divisor",
                            "global_direction": "divisor", "config": ()})
    monkeypatch.setattr(prod, "PRODUCERS", prod.PRODUCERS + (twin,))
    r = inspect(src)
    assert {f.code for f in r.findings} >= {"ambiguous"} and r.tensors == []
    r = inspect(src, producer="modelopt-nvfp4")
    assert r.errors == 0 and len(r.tensors) == 2


def test_hf_cache_snapshot(tmp_path):
    snap_root = tmp_path / "models--org--name"
    src = make("deepseek-fp8-block", snap_root / "snapshots")
    rev = src.rename(snap_root / "snapshots" / "abc123")
    (snap_root / "refs").mkdir()
    (snap_root / "refs" / "main").write_text("abc123\n")
    r = inspect(snap_root)
    assert r.path == str(rev) and r.producers == {"deepseek-fp8-block": 2}
    assert fmtsim.__version__
