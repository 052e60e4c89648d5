"""Every FNUZ checkpoint fmtsim writes, fmtsim reads: each producer fixture (the producers' own exports in
tests/fixtures/producers/ and the synthetic layouts of tools/gen_checkpoints.py) converted OCP -> FNUZ, then
recognised by inspect with no error, dequantized to the input's values bit for bit (FNUZ code x doubled
scale = OCP code x scale; the one difference is the sign of a zero: FNUZ has no -0), explained by the OCP
recipe followed by the conversion, and diffed against its source with no difference. Values are checked
against ml_dtypes' own FP8 decoders (and torch's where installed), not only fmtsim's. A scale inspect calls
an error stops the conversion unless asked."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("safetensors", reason="checkpoint jobs need the safetensors package")
from gen_checkpoints import make, rewrite  # noqa: E402

from fmtsim.checkpoint import CheckpointError, load  # noqa: E402
from fmtsim.checkpoint.conversion import convert  # noqa: E402
from fmtsim.checkpoint.dequant import dequantize  # noqa: E402
from fmtsim.checkpoint.explain import diff, explain  # noqa: E402
from fmtsim.checkpoint.inspection import inspect  # noqa: E402
from fmtsim.checkpoint.producers import PRODUCERS  # noqa: E402
from fmtsim.cli import main  # noqa: E402

from .conftest import slow_unless  # noqa: E402

HERE = Path(__file__).parent / "fixtures" / "producers"
# edge/ is a second set with its own original (the edge-weight fixtures below)
FIXTURES = sorted(d.name for d in HERE.iterdir() if d.is_dir() and d.name not in ("original", "edge")) \
    if HERE.is_dir() else []
FP8_RECORDS = [p.name for p in PRODUCERS if p.scheme == "fp8" and not p.refuse]
FAST = {"llmcompressor-fp8_block", "modelopt-mxfp8_default", "quark-fp8", "llmcompressor-nvfp4", "quark-int8"}
SYNTHETIC_FAST = {"deepseek-fp8-block", "modelopt-mxfp8"}


def _has_fp8_weights(path: Path) -> bool:
    """Whether an FP8 producer record claims a tensor: the one kind of checkpoint FNUZ conversion is for."""
    return any(t.scheme == "fp8" for t in inspect(path).tensors)


def _float_bits(a: np.ndarray) -> np.ndarray:
    return a.view({4: np.uint32, 2: np.uint16}[a.dtype.itemsize])


def _check_read_back(src: Path, out: Path, tmp: Path, original: Path | None, doubled: set[str]) -> None:
    a, b = inspect(src), inspect(out)
    assert b.errors == 0, b.findings
    assert b.producers == a.producers and [t.tensor for t in b.tensors] == [t.tensor for t in a.tensors]
    assert {t.element for t in b.tensors if t.scheme == "fp8"} == {"e4m3fnuz"}
    raw_src, raw_out = load(src), load(out)
    for t in a.tensors:  # the stored codes and scales themselves, through ml_dtypes' decoders
        codes_src, codes_out = raw_src[t.tensor], raw_out[t.tensor]
        assert codes_src.dtype == ml_dtypes.float8_e4m3fn and codes_out.dtype == ml_dtypes.float8_e4m3fnuz
        neg_zero = codes_src.view(np.uint8) == 0x80
        assert np.array_equal(codes_out.view(np.uint8)[~neg_zero], codes_src.view(np.uint8)[~neg_zero])
        assert np.all(codes_out.view(np.uint8)[neg_zero] == 0)
        v_src, v_out = codes_src.astype(np.float64), codes_out.astype(np.float64)
        assert np.array_equal(v_out * 2, v_src)  # -0 == +0 in float comparison
    for dtype in ("float32", "bfloat16"):
        dequantize(src, tmp / f"a-{dtype}", dtype=dtype)
        dequantize(out, tmp / f"b-{dtype}", dtype=dtype)
        da, db = load(tmp / f"a-{dtype}"), load(tmp / f"b-{dtype}")
        assert sorted(da) == sorted(db)
        for name in da:
            if name in doubled:  # activation / KV-cache scales: doubled, as the activations are FNUZ too
                assert np.array_equal(da[name].astype(np.float64) * 2, db[name].astype(np.float64)), name
                continue
            x, y = _float_bits(da[name]), _float_bits(db[name])
            sign = np.asarray(1 << (8 * da[name].dtype.itemsize - 1), x.dtype)
            zero_sign_only = (x == sign) & (y == 0)  # -0 in OCP, +0 in FNUZ
            assert np.array_equal(x[~zero_sign_only], y[~zero_sign_only]), f"{name} ({dtype})"
    for d in diff(src, out):
        assert d.scales_differ == 0 and d.codes_differ == 0 and d.compared_as.startswith("A (e4m3)"), d
    if original is not None:
        before = {e.tensor: e for e in explain(src, original)}
        for e in explain(out, original):
            was = before[e.tensor]
            assert e.unexplained == was.unexplained
            if was.best != "-":
                first = was.best.split(" = ")[0]
                assert f"{first}, then OCP -> FNUZ (scale x2)" in e.best.split(" = "), (e.best, was.best)


@pytest.mark.parametrize("name", slow_unless(FIXTURES, keep=FAST))
def test_producer_fixture_converted_and_read_back(tmp_path, name):
    src = HERE / name
    out = tmp_path / "fnuz"
    if not _has_fp8_weights(src):
        with pytest.raises(CheckpointError):  # NVFP4 / MXFP4 / int checkpoints have nothing FNUZ can hold
            convert(src, out)
        assert not out.exists()
        return
    _check_read_back(src, out, tmp_path, HERE / "original", set(convert(src, out).plan.doubled))


@pytest.mark.parametrize("producer", slow_unless(FP8_RECORDS, keep=SYNTHETIC_FAST))
def test_synthetic_layout_converted_and_read_back(tmp_path, producer):
    src = make(producer, tmp_path)
    out = tmp_path / "fnuz"
    _check_read_back(src, out, tmp_path, tmp_path / f"{producer}.original.safetensors",
                     set(convert(src, out).plan.doubled))


def test_cli_reads_its_own_fnuz_output(tmp_path, capsys):
    out = tmp_path / "fnuz"
    assert main(["fnuz", "convert", str(HERE / "quark-fp8"), str(out)]) == 0
    assert main(["checkpoint", "inspect", str(out)]) == 0
    assert "e4m3fnuz" in capsys.readouterr().out
    assert main(["checkpoint", "dequantize", str(out), str(tmp_path / "bf16")]) == 0
    assert main(["checkpoint", "dequantize", str(out), str(tmp_path / "f32"), "--producer", "quark-fp8"]) == 0


def test_fnuz_values_match_torch(tmp_path):
    torch = pytest.importorskip("torch", reason="torch's float8_e4m3fnuz is the second decoder")
    from safetensors.torch import load_file

    src = make("deepseek-fp8-block", tmp_path)
    out = tmp_path / "fnuz"
    convert(src, out)
    dequantize(out, tmp_path / "dq", dtype="float32")
    mine = load(tmp_path / "dq")
    t = {k: v for shard in sorted(out.glob("*.safetensors")) for k, v in load_file(str(shard)).items()}
    assert any(v.dtype == torch.float8_e4m3fnuz for v in t.values())
    for name in (n for n in t if n.endswith(".weight") and t[n].dtype == torch.float8_e4m3fnuz):
        q = t[name].to(torch.float64)
        s = t[name + "_scale_inv"].to(torch.float64)
        full = s.repeat_interleave(128, 0).repeat_interleave(128, 1)[: q.shape[0], : q.shape[1]]
        want = (q * full).to(torch.float32).numpy()  # one product of an exact FP8 value and a float32 scale
        assert np.array_equal(want.view(np.uint32) & 0x7FFFFFFF, mine[name].view(np.uint32) & 0x7FFFFFFF)


@pytest.mark.parametrize("value,code", [(0.0, "zero-scale"), (np.nan, "nan-scale"), (-1e-3, "negative-scale")])
def test_a_scale_inspect_calls_an_error_stops_convert(tmp_path, value, code, capsys):
    src = make("deepseek-fp8-block", tmp_path)
    scale = "model.layers.0.mlp.down_proj.weight_scale_inv"

    def put(s):
        s[1, 0] = value
        return s

    rewrite(src, scale, put)
    assert (code, scale) in {(f.code, f.tensor) for f in inspect(src).findings}
    out = tmp_path / "fnuz"
    with pytest.raises(CheckpointError, match="allow-scale-errors") as e:
        convert(src, out)
    assert scale in str(e.value)
    assert not out.exists()
    assert main(["fnuz", "convert", str(src), str(out)]) == 2
    assert "--allow-scale-errors" in capsys.readouterr().err
    assert main(["fnuz", "convert", "--dry-run", str(src), str(out)]) == 1
    assert "PROBLEM" in capsys.readouterr().out
    assert main(["fnuz", "convert", "--allow-scale-errors", str(src), str(out)]) == 0
    assert f"scale error (--allow-scale-errors): {scale}" in capsys.readouterr().out
    got = load(out)[scale].astype(np.float64)
    assert np.array_equal(got, load(src)[scale].astype(np.float64) * 2, equal_nan=True)
