"""optimum-quanto, HQQ and torchao checkpoints written by the libraries themselves on the CPU
(tools/gen_hub2_fixtures.py; tests/fixtures/hub/HUB2_README.md), each with the SHA-256 of the library's
own dequantization of every quantized Linear (own_dequant.json).

Where the library rounds once, fmtsim's bfloat16 output is its bits. Where it rounds twice (quanto's
qint4/qint2, HQQ, torchao's NVFP4), fmtsim gives the exact value rounded once, and the library's bits are
held to a model of its arithmetic over codes this test unpacks itself, by the rules the README read off
each library's source; fmtsim's exact values are held to the same unpacking.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("safetensors", reason="checkpoint jobs need the safetensors package")

from fmtsim.checkpoint.dequant import dequantize  # noqa: E402
from fmtsim.checkpoint.files import load, read_header  # noqa: E402
from fmtsim.checkpoint.inspection import inspect  # noqa: E402

HUB = Path(__file__).parent / "fixtures" / "hub"
BF16 = ml_dtypes.bfloat16
ONCE = ["quanto-qint8", "quanto-qfloat8", "torchao-int8wo", "torchao-fp8wo", "torchao-intx4-g32", "torchao-mxfp8",
        "torchao-mxfp4"]
TWICE = ["quanto-qint4", "quanto-qint2", "hqq-1bit-g64", "hqq-2bit-g64", "hqq-3bit-g64", "hqq-4bit-g64",
         "hqq-5bit-g64", "hqq-6bit-g64", "hqq-8bit-g64", "torchao-nvfp4wo"]
RECORD = {"quanto-qint8": "quanto-qbytes", "quanto-qfloat8": "quanto-qbytes", "quanto-qint4": "quanto-qbits",
          "quanto-qint2": "quanto-qbits"}


def _digest(bits: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(bits).tobytes()).hexdigest()


def _own(folder: str) -> dict:
    return json.loads((HUB / folder / "own_dequant.json").read_text())


def _read(folder: str, tmp_path: Path, dtype: str) -> dict:
    out = tmp_path / f"{folder}-{dtype}"
    dequantize(HUB / folder, out, dtype=dtype)
    return load(out / "model.safetensors")


@pytest.mark.parametrize("folder", ONCE + TWICE)
def test_every_layer_is_found_and_clean(folder):
    r = inspect(HUB / folder)
    want = RECORD.get(folder, folder.split("-")[0])
    assert r.errors == 0 and r.producers == {want: len(_own(folder))}, [f.message for f in r.findings]


@pytest.mark.parametrize("folder", ONCE)
def test_where_the_library_rounds_once_fmtsim_gives_its_bits(folder, tmp_path):
    got = _read(folder, tmp_path, "bfloat16")
    for name, d in _own(folder).items():
        assert list(got[name].shape) == d["shape"] and _digest(got[name].view(np.uint16)) == d["sha256"], name


def _bf(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32).astype(BF16).astype(np.float32)


def _quanto_model(t: dict, name: str, bits: int, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(exact float64, quanto's bf16(bf16(q * s) - shift)). Codes: packed along axis 0 in slices, slice i at
    bits i*bits (the first slice lowest); groups of 128 of a row when in > 128, else one per row."""
    packed, s, sh = t[name + "._data._data"], t[name + "._scale"], t[name + "._shift"]
    k = 8 // bits
    q = np.concatenate([(packed >> (bits * i)) & ((1 << bits) - 1) for i in range(k)], axis=0)[: s.shape[0]]
    s32, sh32 = s.astype(np.float32), sh.astype(np.float32)
    exact = (q.astype(np.float64) * s32.astype(np.float64) - sh32.astype(np.float64)).reshape(shape)
    return exact, _bf(_bf(q * s32) - sh32).reshape(shape)


def _hqq_model(t: dict, layer: str) -> tuple[np.ndarray, np.ndarray]:
    """(exact, HQQ's bf16(bf16(q - zero) * scale)). Codes: packed along axis 0 in slices, the first slice in
    the high bits; 3 bits: ten per int32, bits 29..0."""
    packing = bytes(t[layer + ".packing"]).decode()  # 5 and 6 bits are stored one code per byte
    nbits = {"8bit_u8": 8, "4bit_u8": 4, "2bit_u8": 2, "1bit_u8": 1, "3bit_32": 3}[packing]
    shape = tuple(int(v) for v in t[layer + ".shape"])
    w = t[layer + ".W_q"]
    groups = t[layer + ".scale"].shape[0]
    if nbits == 8:
        q = w.astype(np.int64)
    elif nbits == 3:
        u = w.view(np.uint32).astype(np.int64)
        q = np.concatenate([(u >> (27 - 3 * i)) & 7 for i in range(10)], axis=0)
    else:
        u = w.astype(np.int64)
        q = np.concatenate([(u >> (8 - nbits * (i + 1))) & ((1 << nbits) - 1) for i in range(8 // nbits)], axis=0)
    q = q[:groups]
    z, s = t[layer + ".zero"].astype(np.float32), t[layer + ".scale"].astype(np.float32)
    exact = ((q - z.astype(np.float64)) * s.astype(np.float64)).reshape(shape)
    return exact, _bf(_bf(q - z) * s).reshape(shape)


def _nvfp4_model(t: dict, h, layer: str) -> tuple[np.ndarray, np.ndarray]:
    """(exact, torchao's bf16(f32(e2m1) * f32(per_tensor_scale * e4m3))); scales un-blocked from cuBLAS's
    128x4 layout: entry (r, c) at ((r//128)*ceil(C/4) + c//4)*512 + (r%32)*16 + ((r%128)//32)*4 + c%4."""
    b = t[layer + "._weight_qdata"]
    codes = np.stack([b & 0xF, b >> 4], axis=-1).reshape(b.shape[0], -1)
    rows, cols = codes.shape[0], codes.shape[1] // 16
    r, c = np.arange(rows)[:, None], np.arange(cols)[None, :]
    idx = ((r // 128) * -(-cols // 4) + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4
    sc = t[layer + "._weight_scale"].reshape(-1)[idx].astype(np.float32)
    pts = np.float32(t[layer + "._weight_per_tensor_scale"])
    e2m1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)[codes]
    exact = e2m1.astype(np.float64) * np.repeat(sc.astype(np.float64) * float(pts), 16, axis=1)
    return exact, _bf(e2m1 * np.repeat(pts * sc, 16, axis=1))


@pytest.mark.parametrize("folder", TWICE)
def test_where_the_library_rounds_twice_its_bits_are_a_model_over_fmtsims_codes(folder, tmp_path):
    t = load(HUB / folder / "model.safetensors")
    h = read_header(HUB / folder / "model.safetensors")
    qmap = json.loads((HUB / folder / "quanto_qmap.json").read_text()) if folder.startswith("quanto") else {}
    got32 = _read(folder, tmp_path, "float32")
    got16 = _read(folder, tmp_path, "bfloat16")
    differ = 0
    for name, d in _own(folder).items():
        layer = name[: -len(".weight")]
        shape = tuple(d["shape"])
        if folder.startswith("quanto"):
            exact, model = _quanto_model(t, name, {"qint4": 4, "qint2": 2}[qmap[layer]["weights"]], shape)
        elif folder.startswith("hqq"):
            exact, model = _hqq_model(t, layer)
        else:
            exact, model = _nvfp4_model(t, h, layer)
        assert _digest(model.astype(BF16).view(np.uint16)) == d["sha256"], name  # the library's arithmetic
        assert np.array_equal(got32[name].view(np.uint32), exact.astype(np.float32).view(np.uint32)), name
        differ += int(np.count_nonzero(got16[name].view(np.uint16) != model.astype(BF16).view(np.uint16)))
    if folder == "torchao-nvfp4wo":
        assert differ == 0  # on this fixture torchao's two float32 roundings never change the bfloat16 result
    else:
        assert differ > 0  # rounding twice is not rounding once: quanto's and HQQ's bits differ from fmtsim's


def test_quanto_qint4_and_qint2_need_the_shape_from_config(tmp_path):
    import shutil

    from fmtsim.checkpoint.files import CheckpointError

    d = tmp_path / "q"
    shutil.copytree(HUB / "quanto-qint4", d)
    (d / "config.json").write_text("{}")
    with pytest.raises(CheckpointError, match="quanto stores no shape for qint4/qint2 weights"):
        dequantize(d, tmp_path / "out")


def test_every_record_without_a_generator_is_held_to_its_library_here():
    from fmtsim.checkpoint.producers import PRODUCERS

    held = {RECORD.get(f, f.split("-")[0]) for f in ONCE + TWICE} | {"awq-gemv", "awq-gemv-fast", "awq-marlin"}
    assert {p.name for p in PRODUCERS if not p.synthetic} == held


@pytest.mark.parametrize("folder", TWICE)
def test_arithmetic_library_gives_the_librarys_bits(folder, tmp_path):
    out = tmp_path / "lib"
    dequantize(HUB / folder, out, dtype="bfloat16", arithmetic="library")
    got = load(out / "model.safetensors")
    for name, d in _own(folder).items():
        assert _digest(got[name].view(np.uint16)) == d["sha256"], name


def test_arithmetic_library_gives_gptqmodels_bfloat16_load(tmp_path):
    for folder in ("gptq-4bit-asym", "gptq-3bit-asym", "gptq-8bit", "gptq-4bit-desc_act"):
        out = tmp_path / folder
        dequantize(HUB / folder, out, dtype="bfloat16", arithmetic="library")
        got = load(out / "model.safetensors")
        own = np.load(HUB / folder / "own_dequant.npz")
        for name in own.files:
            assert np.array_equal(got[name].view(np.uint16), own[name]), (folder, name)


def _without(folder: str, tmp_path: Path, drop: str, config: dict | None = None) -> Path:
    """A copy of a fixture folder with one tensor left out (its bytes, the rest byte for byte)."""
    import shutil

    from fmtsim.checkpoint.files import Entry, header_bytes

    d = tmp_path / f"{folder}-no{drop.rsplit('.', 1)[-1]}"
    shutil.copytree(HUB / folder, d)
    src = HUB / folder / "model.safetensors"
    h = read_header(src)
    keep = [e for e in h.ordered() if e.name != drop]
    assert len(keep) == len(h.entries) - 1, drop
    raw = src.read_bytes()
    pos, entries, chunks = 0, [], []
    for e in keep:
        entries.append(Entry(e.name, e.dtype, e.shape, pos, pos + e.nbytes))
        chunks.append(raw[h.data_start + e.begin: h.data_start + e.end])
        pos += e.nbytes
    (d / "model.safetensors").write_bytes(header_bytes(entries, {}, h.metadata) + b"".join(chunks))
    if config is not None:
        (d / "config.json").write_text(json.dumps(config))
    return d


@pytest.mark.parametrize("folder, drop, message", [
    ("gptq-4bit", "model.layers.0.mlp.down_proj.scales", "GPTQ .* codes without model.layers.0.mlp.down_proj.scales"),
    ("awq-gemm", "model.layers.0.mlp.down_proj.scales", "AWQ GEMM .* codes without"),
    ("bnb-int8", "model.layers.0.mlp.down_proj.SCB", "LLM.int8 .* codes without model.layers.0.mlp.down_proj.SCB"),
    ("hqq-4bit-g64", "model.layers.0.mlp.down_proj.scale", "HQQ .* codes without model.layers.0.mlp.down_proj.scale"),
    ("hqq-4bit-g64", "model.layers.0.mlp.down_proj.zero", "no model.layers.0.mlp.down_proj.zero .HQQ writes them"),
    ("torchao-nvfp4wo", "model.layers.0.mlp.down_proj._weight_per_tensor_scale",
     "NVFP4 codes with E4M3 block scales but no model.layers.0.mlp.down_proj._weight_per_tensor_scale"),
    ("gptq-4bit-desc_act", "model.layers.0.mlp.down_proj.g_idx", "no model.layers.0.mlp.down_proj.g_idx, and the "
     "config says desc_act"),
])
def test_a_missing_tensor_is_refused_never_copied_or_guessed(folder, drop, message, tmp_path):
    d = _without(folder, tmp_path, drop)
    with pytest.raises(Exception, match=message) as e:
        dequantize(d, tmp_path / "out")
    assert type(e.value).__name__ == "CheckpointError"
    assert not (tmp_path / "out").exists()


def test_library_arithmetic_in_float16_would_round_the_librarys_bfloat16_again(tmp_path):
    from fmtsim.checkpoint.files import CheckpointError

    with pytest.raises(CheckpointError, match="--arithmetic library gives its library's bfloat16 values"):
        dequantize(HUB / "hqq-4bit-g64", tmp_path / "out", dtype="float16", arithmetic="library")
    assert not (tmp_path / "out").exists()


def test_quanto_qint4_without_its_shift_is_refused(tmp_path):
    d = _without("quanto-qint4", tmp_path, "model.layers.0.mlp.down_proj.weight._shift")
    with pytest.raises(Exception, match=r"no model.layers.0.mlp.down_proj.weight._shift: quanto's qint4 codes need"):
        dequantize(d, tmp_path / "out")


def test_gptq_codes_without_any_config_are_refused_not_called_unquantized(tmp_path):
    import shutil

    d = tmp_path / "g"
    shutil.copytree(HUB / "gptq-4bit", d)
    (d / "config.json").unlink()
    (d / "quantize_config.json").unlink()
    with pytest.raises(Exception, match=r"look like the codes of .*GPTQ.*only config.json's quantization_config tells"):
        inspect(d)
    b = tmp_path / "b"  # the width from quantize_config.json alone, as AutoGPTQ writes it
    shutil.copytree(HUB / "gptq-4bit", b)
    cfg = json.loads((b / "config.json").read_text())
    qc = cfg.pop("quantization_config")
    (b / "config.json").write_text(json.dumps({**cfg, "quantization_config": {"quant_method": "gptq"}}))
    (b / "quantize_config.json").write_text(json.dumps(qc))
    assert inspect(b).errors == 0
