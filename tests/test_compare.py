"""fmtsim.compare against the seed post's worked INT4 examples (printed digits) and the
quantizers it wraps."""

import csv
import json
import re

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim.cli import main
from fmtsim.compare import compare, parse_scheme, quantize_dequantize

SEED = [0.12, -0.53, 0.88, -0.07, 0.31, 1.40, -0.95, 0.02]


def test_seed_int4_per_tensor_and_groups():
    rows = {r["scheme"]: r for r in compare(np.array(SEED), ["int4", "int4:sym:group=4"])}
    assert f"{rows['int4']['mse']:.4f}" == "0.0042"
    assert f"{rows['int4:sym:group=4']['mse']:.5f}" == "0.00186"


def test_seed_outlier_zeroes_the_rest():
    w = np.array(SEED)
    w[5] = 14.0
    (row,) = compare(w, ["int4"])
    assert f"{row['mse']:.4f}" == "0.2592"
    assert row["zeroed"] == pytest.approx(7 / 8)


def test_wraps_fmtsim_quantizers_bit_for_bit():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((32, 64)).astype(np.float32)
    got, bpw = quantize_dequantize(w, "mxfp4:rule=ceil")
    want = fmtsim.mx.dequantize(fmtsim.mx.quantize(w, "mxfp4", scale_rule="ceil"), np.float64)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
    assert bpw == 4 + 8 / 32
    got, bpw = quantize_dequantize(w, "nvfp4:tile=16x16")
    want = fmtsim.nvfp4.dequantize(fmtsim.nvfp4.quantize(w, tile=(16, 16)), np.float64)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
    got, _ = quantize_dequantize(w, "int8:asym:channel")
    want = fmtsim.intq.dequantize(fmtsim.intq.quantize(w, 8, symmetric=False, channel_axis=0), np.float64)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


def test_bad_spec_names_the_part():
    with pytest.raises(ValueError, match="unknown option 'chanel'"):
        parse_scheme("int4:chanel")
    with pytest.raises(ValueError, match="'rule' does not apply to nvfp4"):
        parse_scheme("nvfp4:rule=floor")


# --- float formats with a float32 scale -----------------------------------------------------------

def _manual_float(x, fmt, amax):
    s = np.float64(np.float32(amax / float(fmtsim.get_format(fmt).max_finite)))
    return np.asarray(fmtsim.decode(fmtsim.encode(x / s, fmt, rounding="rne", overflow="satfinite"), fmt,
                                    np.float64)) * s


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e4m3fnuz", "e2m1", "e3m2"])
def test_float_per_tensor_and_per_channel_are_the_codecs(fmt):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, 40)) * np.logspace(-3, 2, 6)[:, None]
    got, bpw = quantize_dequantize(w, fmt)
    assert np.array_equal(got, _manual_float(w, fmt, np.max(np.abs(w))))
    assert bpw == fmtsim.get_format(fmt).bits + 32 / w.size
    got, _ = quantize_dequantize(w, f"{fmt}:channel")
    want = np.stack([_manual_float(r, fmt, np.max(np.abs(r))) for r in w])
    assert np.array_equal(got, want)


def test_float_blocks_take_their_own_amax_partial_edges_included():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((200, 130))
    got, bpw = quantize_dequantize(w, "e4m3:block=128")
    want = np.empty_like(w)
    for r0 in (0, 128):
        for c0 in (0, 128):
            blk = w[r0:r0 + 128, c0:c0 + 128]
            want[r0:r0 + 128, c0:c0 + 128] = _manual_float(blk, "e4m3", np.max(np.abs(blk)))
    assert np.array_equal(got, want)
    assert bpw == 8 + 32 * 4 / w.size
    got, _ = quantize_dequantize(w, "e4m3:block=1x10")  # rows of 10: 13 groups a row
    assert np.array_equal(got[3, 10:20], _manual_float(w[3, 10:20], "e4m3", np.max(np.abs(w[3, 10:20]))))


# --- transforms ----------------------------------------------------------------------------------

def _outlier(shape=(64, 128), at=(3, 7), value=40.0, seed=5):
    w = np.random.default_rng(seed).standard_normal(shape)
    w[at] = value
    return w


@pytest.mark.parametrize("spec", ["int8+hadamard=16", "int8+hadamard2=16", "int8+hadamard2=8+signs=4"])
def test_a_rotation_is_undone_exactly_and_adds_no_error_of_its_own(spec):
    from fmtsim.compare import _rotate

    w = _outlier()
    b, both = int(spec.split("=")[1].split("+")[0]), "hadamard2" in spec
    seed = 4 if "signs" in spec else None
    y = _rotate(w, b, both, seed, spec, inverse=False)
    back = _rotate(y, b, both, seed, spec, inverse=True)
    assert np.max(np.abs(back - w)) < 1e-12  # orthonormal: H H = I (to float64 rounding)
    assert abs(np.sum(y * y) - np.sum(w * w)) < 1e-9 * np.sum(w * w)  # the norm, so the MSE, is kept
    got, _ = quantize_dequantize(w, spec)
    plain = fmtsim.intq.dequantize(fmtsim.intq.quantize(y, 8), np.float64)
    assert np.array_equal(got, _rotate(plain, b, both, seed, spec, inverse=True))


def test_rotation_spreads_an_outlier_as_the_seed_post_shows():
    """The seed post: Hadamard on both sides brings per-tensor FP4 error down by about 9x and the
    kurtosis from thousands to about 3; here a 40-sigma outlier in 8,192 Gaussian weights."""
    rows = {r["scheme"]: r for r in compare(_outlier(), ["e2m1", "e2m1+hadamard2=64+signs=1"])}
    plain, rot = rows["e2m1"], rows["e2m1+hadamard2=64+signs=1"]
    assert plain["kurtosis"] > 100 and 2.5 < rot["kurtosis_quantized"] < 3.5
    assert rot["mse"] < plain["mse"] / 5


def test_clipping():
    w = _outlier()
    rows = {r["scheme"]: r for r in compare(w, ["int4", "int4+clip=mse", "int4+clip=p99.9"])}
    assert rows["int4+clip=mse"]["mse"] <= rows["int4"]["mse"]  # the search includes no clipping at all
    assert rows["int4+clip=mse"]["mse"] < rows["int4"]["mse"] / 4  # and here clipping the outlier wins
    assert rows["int4+clip=p99.9"]["clipped"] == pytest.approx(np.mean(np.abs(w) > np.percentile(np.abs(w), 99.9)))
    assert rows["int4"]["clipped"] == 0


@pytest.mark.parametrize("spec, message", [
    ("int4+clip=p0", "percentile in"), ("int4+clip=x", "percentile in"), ("int4+hadamard=48", "power of two"),
    ("int4+signs=3", "+signs applies to a rotation"), ("int4+rotate=2", "unknown transform '+rotate=2'"),
    ("int9", "integer width must be 2..8"), ("e4m3:block=0", "block must be positive"),
    ("e4m3:group=x", "group must be a positive whole number"), ("e8m0", "unknown name 'e8m0'"),
    ("e4m3:rule=even", "'rule' does not apply to e4m3")])
def test_bad_transforms_and_options_are_named(spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_scheme(spec)


def test_a_shape_a_transform_cannot_take_is_named():
    with pytest.raises(ValueError, match=r"shape \(10, 12\) is not a multiple of the rotation block 8"):
        quantize_dequantize(np.ones((10, 12)), "int4+hadamard=8")


# --- fmtsim compare SOURCE -----------------------------------------------------------------------

@pytest.fixture
def model(tmp_path):
    """A two-shard model folder: float32, float16 and bfloat16 weights, a norm vector, int8 codes."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(6)
    d = tmp_path / "model"
    d.mkdir()
    up = rng.standard_normal((64, 128)).astype(np.float32)
    up[5, 9] = 30
    one = {"model.layers.0.mlp.up_proj.weight": up,
           "model.layers.0.mlp.down_proj.weight": (rng.standard_normal((128, 64)) / 2).astype(np.float16)}
    two = {"model.layers.1.self_attn.q_proj.weight": rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16),
           "model.norm.weight": np.ones(64, np.float32), "model.codes.weight": np.ones((4, 4), np.int8)}
    save_file(one, str(d / "model-00001-of-00002.safetensors"))
    save_file(two, str(d / "model-00002-of-00002.safetensors"))
    wm = {k: f"model-0000{i}-of-00002.safetensors" for i, shard in ((1, one), (2, two)) for k in shard}
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    return d, {**one, **two}


def test_compare_a_model_folder(model, tmp_path, capsys):
    d, tensors = model
    schemes = ["int4:group=32", "e4m3", "mxfp4", "nvfp4", "int8+hadamard=64"]
    rc = main(["compare", str(d), "--schemes", *schemes, "--csv", str(tmp_path / "r.csv"),
               "--json", str(tmp_path / "r.json"), "--per-tensor"])
    out = capsys.readouterr().out
    assert rc == 0
    assert f"{d}: 3 tensors, {64 * 128 * 2 + 64 * 64:,} weights; ranked by MSE" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    names = [t["name"] for t in doc["tensors"]]
    assert names == sorted(n for n in tensors if tensors[n].ndim == 2 and tensors[n].dtype.kind == "f"
                           or tensors[n].dtype == ml_dtypes.bfloat16)
    # each tensor's row is the API on that tensor, in float64, and the overall row sums them by size
    for t in doc["tensors"]:
        x = np.asarray(tensors[t["name"]], np.float64)
        want = {r["scheme"]: r for r in compare(x, schemes)}
        for r in t["rows"]:
            assert r["mse"] == want[r["scheme"]]["mse"] and r["bits_per_weight"] == want[r["scheme"]]["bits_per_weight"]
    for o in doc["overall"]:
        rows = [r for t in doc["tensors"] for r in t["rows"] if r["scheme"] == o["scheme"]]
        assert o["mse"] == pytest.approx(sum(r["mse"] * r["weights"] for r in rows) / sum(r["weights"] for r in rows),
                                         rel=1e-12)
    assert [o["scheme"] for o in doc["overall"]] == [r for r in out.split() if r in schemes][:len(schemes)]
    csv_rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert len(csv_rows) == 3 * len(schemes) + len(schemes) and csv_rows[-1]["tensor"] == "(all)"


def test_compare_the_same_digits_in_worker_processes(model, tmp_path):
    from fmtsim.compare.cli import to_json
    from fmtsim.compare.source import compare_source

    d, _ = model
    one = compare_source(d, ["int4:group=32", "mxfp4+clip=mse"])
    two = compare_source(d, ["int4:group=32", "mxfp4+clip=mse"], jobs=2)
    assert to_json(one) == to_json(two)


def test_compare_a_npy_and_schemes_that_do_not_fit(tmp_path, capsys):
    np.save(tmp_path / "w.npy", np.random.default_rng(7).standard_normal((16, 64)))
    assert main(["compare", str(tmp_path / "w.npy"), "--schemes", "int4", "int4:group=128"]) == 0
    out = capsys.readouterr().out
    assert "not ranked (they do not apply to every tensor):" in out
    assert "int4:group=128: w: intq: axis -1 has length 64, not a multiple of the block size 128" in out


@pytest.mark.parametrize("argv, message", [
    (["--tensors", "model.codes.*"], "tensor 'model.codes.weight' is I8, not float weights"),
    (["--tensors", "zzz*"], "no tensor matching zzz* (of 5 tensors)"),
    (["--schemes", "int4:chanel"], "unknown option 'chanel'"),
    (["--csv", "/dev/null"], "--csv /dev/null is a character device"),
])
def test_compare_refusals(model, argv, message, capsys):
    d, _ = model
    rc = main(["compare", str(d), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err, err


def test_compare_will_not_write_over_its_input(model, capsys):
    d, _ = model
    shard = d / "model-00001-of-00002.safetensors"
    before = shard.read_bytes()
    assert main(["compare", str(d), "--schemes", "int4", "--csv", str(shard)]) == 2
    assert f"--csv {shard} is the input {shard}: writing it would destroy that input" in capsys.readouterr().err
    assert shard.read_bytes() == before


def test_compare_names_a_tensor_with_nan(tmp_path, capsys):
    w = np.ones((4, 32))
    w[2, 5] = np.nan
    np.save(tmp_path / "w.npy", w)
    assert main(["compare", str(tmp_path / "w.npy"), "--schemes", "int4"]) == 2
    assert "tensor 'w' holds a NaN or Inf (first at flat index 69)" in capsys.readouterr().err
