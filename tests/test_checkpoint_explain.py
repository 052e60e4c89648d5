"""checkpoint explain / diff: recover each fmtsim recipe, find planted wrong bytes, and agree with torchao."""

import numpy as np
import pytest

pytest.importorskip("safetensors", reason="checkpoint jobs need the safetensors package")
from gen_checkpoints import make, rewrite  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

from fmtsim import mx  # noqa: E402
from fmtsim.checkpoint.explain import diff, explain  # noqa: E402
from fmtsim.cli import main  # noqa: E402
from fmtsim.layout import to_gpt_oss  # noqa: E402

L = "model.layers.0.mlp.experts.down_proj"



def _mx_ckpt(tmp_path, rule, rng):
    w = (rng.standard_normal((2, 64, 128)) * 0.02).astype(np.float32)
    w.reshape(-1)[::37] *= 9
    q = mx.quantize(w, "mxfp4", axis=-1, block_size=32, scale_rule=rule)
    blocks, scales = to_gpt_oss(q)
    d = tmp_path / rule
    d.mkdir()
    save_file({f"{L}_blocks": blocks, f"{L}_scales": scales}, str(d / "model.safetensors"))
    save_file({L: w}, str(tmp_path / f"{rule}.orig.safetensors"))
    return d, tmp_path / f"{rule}.orig.safetensors"


@pytest.mark.parametrize("rule", ["floor", "ceil", "even", "rceil"])
def test_mx_rule_recovered(tmp_path, rng, rule):
    d, orig = _mx_ckpt(tmp_path, rule, rng)
    (e,) = explain(d, orig)
    assert rule in e.best.split(" = ")[0] or any(rule in part for part in e.best.split(" = "))
    assert e.unexplained == 0 and e.by_recipe[f"mx scale {rule}, RNE"] == e.blocks


@pytest.mark.parametrize("producer,recipe", [("modelopt-nvfp4", "te"), ("compressed-tensors-nvfp4", "torchao")])
def test_nvfp4_recipe_recovered(tmp_path, producer, recipe):
    src = make(producer, tmp_path)
    for e in explain(src, tmp_path / f"{producer}.original.safetensors"):
        assert f"nvfp4 {recipe}" in e.best.split(" = ") and e.unexplained == 0  # ties with the stored-scale recipe
        other = "torchao" if recipe == "te" else "te"
        assert e.by_recipe[f"nvfp4 {other}"] < e.blocks  # the quiet rows tell them apart


@pytest.mark.parametrize("producer", ["deepseek-fp8-block", "compressed-tensors-fp8", "modelopt-fp8"])
def test_fp8_recipe_recovered(tmp_path, producer):
    src = make(producer, tmp_path)
    for e in explain(src, tmp_path / f"{producer}.original.safetensors"):
        assert e.best.startswith("scale amax/max") and e.unexplained == 0


def test_planted_bytes_are_found_and_located(tmp_path, rng, capsys):
    d, orig = _mx_ckpt(tmp_path, "floor", rng)
    rewrite(d, f"{L}_scales", lambda s: _bump(s, (1, 7, 2), -1))  # one E8M0 step lower: block (1, 7, 2)
    rewrite(d, f"{L}_blocks", lambda b: _flip(b, (0, 3, 1, 5)))  # element 11 of block (0, 3, 1)
    (e,) = explain(d, orig)
    assert e.unexplained == 2
    where = {tuple(m.block): m for m in e.misses}
    groups = 128 // 32
    s_block = (1 * 64 + 7) * groups + 2
    c_block = (0 * 64 + 3) * groups + 1
    assert set(where) == {(s_block // groups, s_block % groups), (c_block // groups, c_block % groups)}
    ms = where[(s_block // groups, s_block % groups)]
    assert int(ms.found_scale, 16) == int(ms.expected_scale, 16) - 1
    mc = where[(c_block // groups, c_block % groups)]
    assert mc.element == 11 and mc.expected_scale == mc.found_scale and mc.found_code == mc.expected_code ^ 0x1
    assert main(["checkpoint", "explain", str(d), "--original", str(orig)]) == 1
    out = capsys.readouterr().out
    assert "UNEXPLAINED" in out and "element 11" in out


def _bump(s, idx, by):
    s[idx] = int(s[idx]) + by
    return s


def _flip(b, idx):
    b[idx] ^= 0x10  # the high nibble of byte 5 = element 11
    return b


def test_diff_counts_steps_and_names_recipes(tmp_path, rng, capsys):
    w = (rng.standard_normal((2, 64, 128)) * 0.02).astype(np.float32)
    orig = tmp_path / "orig.safetensors"
    save_file({L: w}, str(orig))
    dirs = {}
    for rule in ("floor", "ceil"):
        blocks, scales = to_gpt_oss(mx.quantize(w, "mxfp4", axis=-1, block_size=32, scale_rule=rule))
        dirs[rule] = tmp_path / rule
        dirs[rule].mkdir()
        save_file({f"{L}_blocks": blocks, f"{L}_scales": scales}, str(dirs[rule] / "model.safetensors"))
    (d,) = diff(dirs["ceil"], dirs["floor"], original=orig)
    fl = mx.quantize(w, "mxfp4", axis=-1, block_size=32, scale_rule="floor").scales.astype(int)
    ce = mx.quantize(w, "mxfp4", axis=-1, block_size=32, scale_rule="ceil").scales.astype(int)
    assert d.scales_differ == np.count_nonzero(fl != ce) > 0
    assert d.steps == {-1: int(np.count_nonzero(fl - ce == -1))}
    assert d.recipes["A"].startswith("mx scale ceil") and d.recipes["B"].startswith("mx scale floor")
    assert main(["checkpoint", "diff", str(dirs["ceil"]), str(dirs["floor"])]) == 1  # they differ
    assert main(["checkpoint", "diff", str(dirs["ceil"]), str(dirs["floor"]), "--exit-zero"]) == 0
    assert main(["checkpoint", "diff", str(dirs["ceil"]), str(dirs["ceil"])]) == 0  # the same: 0
    pct = 100 * d.steps[-1] / d.scales
    out = capsys.readouterr().out
    share = "100%" if d.steps[-1] == d.scales else f"{pct:.1f}%"
    assert f"{d.steps[-1]} of {d.scales} scales ({share}) are 1 E8M0 step lower in B" in out, out


def test_torchao_nvfp4_is_explained(tmp_path, rng):
    """Quantize with torchao itself (where installed), store as compressed-tensors does, and let
    explain name the recipe from torchao's bytes alone."""
    torch = pytest.importorskip("torch")
    ao = pytest.importorskip("torchao.prototype.mx_formats.nvfp4_tensor")
    import ml_dtypes

    w = (rng.standard_normal((64, 128)) * 0.02).astype(np.float32)
    w[:2] *= np.float32(1e-5)  # quiet rows: te gives subnormal UE4M3 scales there, torchao clamps to 2^-6
    amax = torch.max(torch.abs(torch.from_numpy(w)))
    g = ao.per_tensor_amax_to_scale(amax)
    s, data = ao.nvfp4_quantize(torch.from_numpy(w.copy()), 16, g)
    scales = s.view(torch.uint8).numpy().reshape(64, 8).copy()
    packed = data.view(torch.uint8).numpy().reshape(64, 64).copy()
    d = tmp_path / "ct"
    d.mkdir()
    save_file({f"{L}.weight_packed": packed, f"{L}.weight_scale": scales.view(ml_dtypes.float8_e4m3fn),
               f"{L}.weight_global_scale": np.array([np.float32(1) / np.float32(g.item())], np.float32)},
              str(d / "model.safetensors"))
    save_file({f"{L}.weight": w}, str(tmp_path / "orig.safetensors"))
    (e,) = explain(d, tmp_path / "orig.safetensors")
    assert e.best == "nvfp4 torchao" and e.unexplained == 0
    assert e.by_recipe.get("nvfp4 te", 0) < e.blocks  # a recipe that explains no block is not listed


@pytest.mark.parametrize("rule", ["floor", "ceil", "even", "rceil"])
def test_torchao_mxfp4_rule_is_recovered(tmp_path, rng, rule):
    """torchao's to_mx with each ScaleCalculationMode, stored as gpt-oss stores MXFP4: explain names the rule."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx

    w = (rng.standard_normal((2, 64, 128)) * 0.02).astype(np.float32)
    w.reshape(-1)[::37] *= 9
    s, d = to_mx(torch.from_numpy(w.reshape(-1, 128).copy()), torch.float4_e2m1fn_x2, 32, ScaleCalculationMode(rule))
    scales = s.view(torch.uint8).numpy().reshape(2, 64, 4).copy()
    blocks = d.view(torch.uint8).numpy().reshape(2, 64, 4, 16).copy()
    dd = tmp_path / "ao"
    dd.mkdir()
    save_file({f"{L}_blocks": blocks, f"{L}_scales": scales}, str(dd / "model.safetensors"))
    save_file({L: w}, str(tmp_path / "orig.safetensors"))
    (e,) = explain(dd, tmp_path / "orig.safetensors")
    assert e.unexplained == 0 and f"mx scale {rule}, RNE" in e.best.split(" = ")
