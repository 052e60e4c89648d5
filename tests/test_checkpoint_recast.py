"""checkpoint convert --to nvfp4|mxfp4|fp8-block|mxfp8: exact where the target can hold the values,
an honest loss report elsewhere, --require-exact writes nothing."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("safetensors", reason="checkpoint jobs need the safetensors package")
from gen_checkpoints import make  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

from fmtsim.checkpoint import load  # noqa: E402
from fmtsim.checkpoint.dequant import dequantize  # noqa: E402
from fmtsim.checkpoint.inspection import inspect  # noqa: E402
from fmtsim.checkpoint.recast import recast  # noqa: E402
from fmtsim.cli import main  # noqa: E402
from fmtsim.oracle import value_of  # noqa: E402


def f32_values(path):
    return {k: v for k, v in load(path).items() if v.dtype == np.float32}


@pytest.mark.parametrize("producer,to", [("gpt-oss-mxfp4", "nvfp4"), ("quark-mxfp4", "nvfp4"),
                                         ("quark-mxfp4", "fp8-block")])
def test_exact_conversions_keep_every_value(tmp_path, producer, to):
    src = make(producer, tmp_path)
    s = recast(src, tmp_path / "out", to=to, require_exact=True)
    assert s.written and s.lossy == 0 and all(t.exact == t.blocks > 0 for t in s.tensors)
    r = inspect(tmp_path / "out")
    assert r.errors == 0 and len(r.tensors) == 2
    dequantize(src, tmp_path / "a", dtype="float32")
    dequantize(tmp_path / "out", tmp_path / "b", dtype="float32")
    a, b = f32_values(tmp_path / "a"), f32_values(tmp_path / "b")
    for k, v in a.items():
        name = k if k in b else k + ".weight"
        assert np.array_equal(v.view(np.uint32), b[name].view(np.uint32)), k


def test_lossy_conversion_reports_and_require_exact_refuses(tmp_path, capsys):
    src = make("modelopt-nvfp4", tmp_path)
    out = tmp_path / "out"
    assert main(["checkpoint", "convert", "--to", "mxfp4", str(src), str(out), "--require-exact"]) == 1
    assert not out.exists()
    assert "nothing written" in capsys.readouterr().out
    s = recast(src, out, to="mxfp4")
    assert s.written and s.lossy > 0
    t = next(t for t in s.tensors if t.tensor.endswith("down_proj.weight"))
    ex = t.example
    # the example's source value, recomputed exactly from the checkpoint's bytes
    raw = load(src)
    L = "model.layers.0.mlp.down_proj"
    row, col = ex["row"], ex["first column"] + ex["element"]
    byte = int(raw[L + ".weight"].view(np.uint8)[row, col // 2])
    code = byte & 0xF if col % 2 == 0 else byte >> 4
    scale = value_of(int(raw[L + ".weight_scale"].view(np.uint8)[row, col // 16]), "e4m3")
    exact = value_of(code, "e2m1") * scale * Fraction(float(raw[L + ".weight_scale_2"]))
    assert Fraction(ex["source"]) == exact
    got = load(out)
    tb = int(got[L + ".weight"][row, col // 2])
    tcode = tb & 0xF if col % 2 == 0 else tb >> 4
    tval = value_of(tcode, "e2m1") * Fraction(2) ** (int(got[L + ".weight_scale"][row, col // 32]) - 127)
    # the example is the block's worst element: its error is the largest error reported
    assert Fraction(ex["target"]) == tval and abs(float(tval - exact)) == t.max_abs_error


def test_fp8_to_mxfp8_exact_blocks_are_exact(tmp_path, rng):
    codes = rng.integers(0x30, 0x50, (64, 64), dtype=np.uint8)
    save_file({"l.weight": codes.view(ml_dtypes.float8_e4m3fn), "l.weight_scale": np.array(2.0 ** -7, np.float32)},
              str(tmp_path / "m.safetensors"))
    s = recast(tmp_path / "m.safetensors", tmp_path / "o.safetensors", to="mxfp8", require_exact=True)
    assert s.written and s.tensors[0].exact == s.tensors[0].blocks == 128
    a = dequantize(tmp_path / "m.safetensors", tmp_path / "a.safetensors", dtype="float32")
    b = dequantize(tmp_path / "o.safetensors", tmp_path / "b.safetensors", dtype="float32")
    assert a.totals()["rounded"] == b.totals()["rounded"] == 0
    assert np.array_equal(load(tmp_path / "a.safetensors")["l.weight"], load(tmp_path / "b.safetensors")["l.weight"])


def test_nothing_to_convert_and_3d_block_fp8(tmp_path):
    src = make("deepseek-fp8-block", tmp_path)
    assert main(["checkpoint", "convert", "--to", "nvfp4", str(src), str(tmp_path / "o")]) == 2
    g = make("gpt-oss-mxfp4", tmp_path)
    with pytest.raises(Exception, match="3-D; block FP8"):
        recast(g, tmp_path / "o2", to="fp8-block")


@pytest.mark.parametrize("producer,to", [("quark-mxfp4", "nvfp4"), ("quark-mxfp4", "fp8-block"),
                                         ("modelopt-nvfp4", "mxfp4"), ("modelopt-mxfp8", "mxfp8")])
def test_row_chunks_give_the_same_bytes_and_report(tmp_path, monkeypatch, producer, to):
    import fmtsim.checkpoint.recast as rc

    src = make(producer, tmp_path)
    whole = recast(src, tmp_path / "whole", to=to)
    monkeypatch.setattr(rc, "CHUNK_VALUES", 4096)  # 128-row steps: several per tensor
    parts = recast(src, tmp_path / "parts", to=to)
    assert [(t.blocks, t.exact, t.max_abs_error) for t in whole.tensors] == \
        [(t.blocks, t.exact, t.max_abs_error) for t in parts.tensors]
    for shard in sorted((tmp_path / "whole").glob("*.safetensors")):
        assert shard.read_bytes() == (tmp_path / "parts" / shard.name).read_bytes()
