"""Checkpoints written by the hub libraries (bitsandbytes fixtures made by bitsandbytes 0.50.2 itself,
tools/gen_hub_fixtures.py, with the library's own dequantization of every quantized Linear): fmtsim
reads them value for value, and a declared method it does not read is refused, never "0 quantized
tensors" with exit 0."""

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("safetensors", reason="checkpoint jobs need the safetensors package")
from safetensors.numpy import load_file, save_file  # noqa: E402

from fmtsim.checkpoint.bnb import bnb4_absmax, bnb4_state, bnb4_values  # noqa: E402
from fmtsim.checkpoint.dequant import dequantize  # noqa: E402
from fmtsim.checkpoint.files import CheckpointError, load  # noqa: E402
from fmtsim.checkpoint.inspection import inspect  # noqa: E402
from fmtsim.cli import main  # noqa: E402

HUB = Path(__file__).parent / "fixtures" / "hub"
LINEARS = 7  # q, k, v, o, gate, up, down of the one layer
BNB = {"bnb-nf4": "bitsandbytes-4bit", "bnb-nf4-dq": "bitsandbytes-4bit", "bnb-fp4-dq": "bitsandbytes-4bit",
       "bnb-int8": "bitsandbytes-int8"}
# the one Linear whose row length (96) is not a multiple of the 64-value block: bitsandbytes' CPU kernel
# reads other absmax values for it than its quantizer wrote (fmtsim.checkpoint.bnb.CPU_KERNEL_ROW_BLOCKS)
ODD_ROWS = "model.layers.0.mlp.down_proj.weight"


@pytest.mark.parametrize("folder", sorted(BNB))
def test_bitsandbytes_folders_are_read_as_bitsandbytes_reads_them(folder, tmp_path, capsys):
    r = inspect(HUB / folder)
    assert r.producers == {BNB[folder]: LINEARS}
    assert r.config_producers == [BNB[folder]]
    assert r.errors == 0, [f.message for f in r.findings]
    own = np.load(HUB / folder / "own_dequant.npz")
    assert sorted(t.tensor for t in r.tensors) == sorted(own.files)
    assert main(["checkpoint", "inspect", str(HUB / folder)]) == 0
    assert "bitsandbytes" in capsys.readouterr().out
    int8 = folder == "bnb-int8"
    dtype = "float32" if int8 else "bfloat16"  # bitsandbytes' own output: float32 / the state's bfloat16
    dequantize(HUB / folder, tmp_path / "out", dtype=dtype)
    got = load(tmp_path / "out" / "model.safetensors")
    assert not any(".absmax" in n or "quant_state" in n or n.endswith(".SCB") for n in got)
    for name in own.files:
        bits = got[name].view(np.uint32 if int8 else np.uint16)
        assert bits.shape == own[name].shape, name
        if int8 or name != ODD_ROWS:
            assert np.array_equal(bits, own[name]), name
        else:
            assert not np.array_equal(bits, own[name])  # the kernel's divergence: held below


@pytest.mark.parametrize("folder", ["bnb-nf4", "bnb-nf4-dq", "bnb-fp4-dq"])
def test_the_cpu_kernel_reads_row_blocks_where_rows_are_not_whole_blocks(folder):
    """bitsandbytes 0.50.2's CPU kernel on the [64, 96] down_proj: its output is the model of its absmax
    indexing (r * (n // 64) + c // 64), and the file's own blocks are those of the flattened weight."""
    t = load(HUB / folder / "model.safetensors")
    entries = {n: None for n in t}
    layer = ODD_ROWS[: -len(".weight")]
    _, state = bnb4_state(layer, entries, lambda n: t[n])
    nested = ODD_ROWS + ".nested_quant_map"
    absmax = bnb4_absmax(state, t[ODD_ROWS + ".absmax"], t.get(nested), t.get(ODD_ROWS + ".nested_absmax"))
    own = np.load(HUB / folder / "own_dequant.npz")[ODD_ROWS]
    kernel = bnb4_values(state, t[ODD_ROWS], t[ODD_ROWS + ".quant_map"], absmax, cpu_kernel_rows=True)
    assert np.array_equal(kernel.astype(ml_dtypes.bfloat16).view(np.uint16), own)
    # every 64-value block of the flattened weight holds a code of magnitude 1 (its absmax): the quantizer's
    b = t[ODD_ROWS].view(np.uint8).reshape(-1)
    codes = np.stack([b >> 4, b & 0xF], axis=1).reshape(-1, 64)
    qm = t[ODD_ROWS + ".quant_map"]
    assert (np.abs(qm[codes]) == 1).any(axis=1).all()


def test_the_fixtures_hold_every_quantized_linear_and_its_own_dequantization():
    for folder in BNB:
        own = np.load(HUB / folder / "own_dequant.npz")
        tensors = load_file(HUB / folder / "model.safetensors")
        assert len(own.files) == LINEARS
        for name in own.files:
            assert name in tensors
            want = np.uint32 if folder == "bnb-int8" else np.uint16  # float32 / bfloat16 bits
            assert own[name].dtype == want


def test_llm_int8_fixture_is_q_times_scb_times_float32_reciprocal_of_127():
    """The LLM.int8 layout the bitsandbytes-int8 record documents, held to bitsandbytes' own
    int8_vectorwise_dequant: float32 (q * SCB[row]) then * float32(1/127), each product rounded."""
    t = load_file(HUB / "bnb-int8" / "model.safetensors")
    own = np.load(HUB / "bnb-int8" / "own_dequant.npz")
    for name in own.files:
        q, scb = t[name].astype(np.float32), t[name[: -len(".weight")] + ".SCB"]
        got = (q * scb[:, None]) * np.float32(1 / 127)
        assert np.array_equal(got.astype(np.float32).view(np.uint32), own[name]), name


def _folder(tmp_path: Path, config: dict, tensors: dict) -> Path:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    save_file(tensors, str(tmp_path / "model.safetensors"))
    return tmp_path


@pytest.mark.parametrize("method", ["awq", "hqq", "quanto", "torchao"])  # awq: no version (gemm is read)
def test_a_declared_method_no_record_reads_is_refused_with_what_was_found(tmp_path, method, capsys):
    d = _folder(tmp_path / method, {"quantization_config": {"quant_method": method, "bits": 4}},
                {"l.qweight": np.zeros((8, 16), np.int32), "l.qzeros": np.zeros((1, 2), np.int32),
                 "l.scales": np.ones((1, 16), np.float16), "embed.weight": np.zeros((4, 4), np.float16)})
    with pytest.raises(CheckpointError, match=f"quant_method '{method}', a layout fmtsim does not read; the folder "
                       r"holds 2 packed tensor\(s\) \(I32 x2, e\.g\. l\.qweight\)"):
        inspect(d)
    with pytest.raises(CheckpointError, match="does not read"):
        dequantize(d, tmp_path / "out")
    assert main(["checkpoint", "inspect", str(d)]) != 0
    assert "does not read" in capsys.readouterr().err


@pytest.mark.parametrize("qc, message", [
    ({"bits": 5}, r"bits is 5 in config.json's quantization_config \(or quantize_config.json\); GPTQ packs "
                  r"\(2, 3, 4, 8\) bits"),
    ({}, "bits is None in config.json's quantization_config"),
    ({"bits": 4, "checkpoint_format": "marlin"}, "checkpoint_format 'marlin': fmtsim reads GPTQ's 'gptq' "),
])
def test_gptq_layouts_it_cannot_place_are_refused_by_name(tmp_path, qc, message):
    d = _folder(tmp_path / "g", {"quantization_config": {"quant_method": "gptq", **qc}},
                {"l.qweight": np.zeros((8, 16), np.int32), "l.qzeros": np.zeros((1, 2), np.int32),
                 "l.scales": np.ones((1, 16), np.float16)})
    with pytest.raises(CheckpointError, match=message):
        dequantize(d, tmp_path / "out")
    assert any(f.code == "layout" for f in inspect(d).findings)


def test_a_declared_method_over_plain_weights_is_not_refused(tmp_path):
    d = _folder(tmp_path / "plain", {"quantization_config": {"quant_method": "gptq"}},
                {"embed.weight": np.zeros((4, 4), np.float16)})
    assert inspect(d).errors == 0


def test_diff_compares_bitsandbytes_absmax_as_values(capsys):
    # the same weights with and without double quantization: same codes, absmax within the nested rounding
    assert main(["checkpoint", "diff", str(HUB / "bnb-nf4"), str(HUB / "bnb-nf4-dq")]) == 1
    out = capsys.readouterr().out
    assert "model.layers.0.self_attn.q_proj.weight: 63 of 64 scales differ (98.4%), 0 of 2048 element codes differ" \
        in out
    assert "eighths of a binade" not in out  # every absmax within 1/16 of a binade: no whole step


# checkpoints written by their own libraries (tools/gen_awq_fixtures.py, tools/gen_gptq_fixtures.py ...): each
# quantized Linear's own dequantization in own_dequant.npz, as the raw bits of the library's dtype
OWN_READ = {"awq-gemm": ("awq-gemm", "float16"), "awq-gemm-g64-skip": ("awq-gemm", "float16"),
            # autoawq dequantizes GEMV only in its CUDA kernel (scale * (q - zero), exact, then float16): its
            # own_dequant is the weight it packed (tests/fixtures/hub/AWQ_README.md)
            "awq-gemv": ("awq-gemv", "float16"), "awq-marlin": ("awq-marlin", "float16")}


@pytest.mark.parametrize("folder", sorted(OWN_READ))
def test_library_checkpoints_dequantize_as_their_library_does(folder, tmp_path):
    record, dtype = OWN_READ[folder]
    r = inspect(HUB / folder)
    own = np.load(HUB / folder / "own_dequant.npz")
    assert r.errors == 0 and r.producers == {record: len(own.files)}, [f.message for f in r.findings]
    dequantize(HUB / folder, tmp_path / "out", dtype=dtype)
    got = load(tmp_path / "out" / "model.safetensors")
    for name in own.files:
        bits = got[name].view(np.uint16 if dtype != "float32" else np.uint32)
        assert bits.shape == own[name].shape and np.array_equal(bits, own[name]), name


def test_awq_gemv_fast_is_its_kernels_one_fused_step_and_its_codes_are_autoawqs(tmp_path):
    """GEMV_fast stores qzeros = float16(-(scale * zero)); autoawq dequantizes it only in CUDA
    (awq_v2_ext's __hfma2: q * scale + qzeros, one float16 rounding), which fmtsim gives. The codes it reads
    are autoawq's: with the zero recovered as round(-qzeros / scale), (q - zero) * scale is the weight
    autoawq packed (own_dequant), for every element."""
    dequantize(HUB / "awq-gemv-fast", tmp_path / "out", dtype="float32")
    got = load(tmp_path / "out" / "model.safetensors")
    src = load(HUB / "awq-gemv-fast" / "model.safetensors")
    own = np.load(HUB / "awq-gemv-fast" / "own_dequant.npz")
    differ = 0
    for name in own.files:
        layer = name[: -len(".weight")]
        k = src[layer + ".qweight"].shape[1]
        g = np.arange(k) // 32
        s = src[layer + ".scales"].astype(np.float64)[: k // 32].T[:, g]
        z = src[layer + ".qzeros"].astype(np.float64)[: k // 32].T[:, g]
        exact = got[name].astype(np.float64)
        q = (exact - z) / s  # the float32 output is exact here (15 bits + an 11-bit addend)
        assert np.array_equal(q, np.rint(q)) and q.min() >= 0 and q.max() <= 15, name
        kernel = (q * s + z).astype(np.float16)
        assert np.array_equal(dequantize_f16(tmp_path, name), kernel.view(np.uint16)), name
        packed = ((q - np.rint(-z / np.where(s == 0, 1, s))) * s).astype(np.float16).view(np.uint16)
        assert np.array_equal(packed, own[name]), name
        differ += int(np.count_nonzero(kernel.view(np.uint16) != own[name]))
    assert differ == 21567  # the kernel's value is not the packed weight for 44 % of them (AWQ_README.md)


def dequantize_f16(tmp_path: Path, name: str) -> np.ndarray:
    out = tmp_path / "out16"
    if not out.exists():
        dequantize(HUB / "awq-gemv-fast", out, dtype="float16")
    return load(out / "model.safetensors")[name].view(np.uint16)


GPTQ = ["gptq-2bit", "gptq-3bit", "gptq-3bit-asym", "gptq-4bit", "gptq-4bit-desc_act", "gptq-4bit-asym",
        "gptq-4bit-v2", "gptq-4bit-asym-v2", "gptq-8bit"]


def _gptq_model_of_bf16_load(src: dict, exact: dict, name: str) -> np.ndarray:
    """gptqmodel's bfloat16 load: its float16 scales rounded to bfloat16, times (q - z), rounded again.
    q - z is read back from fmtsim's exact float32 values (scale * (q - z) is exact in float32)."""
    layer = name[: -len(".weight")]
    s = src[layer + ".scales"].astype(np.float64)[src[layer + ".g_idx"].astype(np.int64), :].T  # [out, in]
    q_minus_z = exact[name].astype(np.float64) / s
    assert np.array_equal(q_minus_z, np.rint(q_minus_z))
    s_bf16 = s.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
    return (s_bf16 * q_minus_z.astype(np.float32)).astype(ml_dtypes.bfloat16).view(np.uint16)


@pytest.mark.parametrize("folder", GPTQ)
def test_gptq_checkpoints_made_by_gptqmodel_read_exactly(folder, tmp_path):
    """gptqmodel 7.7.0 on the CPU (tools/gen_gptq_fixtures.py): every width, act-order, asymmetric, v1 and v2.
    fmtsim's exact values, rounded as gptqmodel's bfloat16 load rounds them, are its own bits."""
    r = inspect(HUB / folder)
    own = np.load(HUB / folder / "own_dequant.npz")
    assert r.errors == 0 and r.producers == {"gptq": len(own.files)}, [f.message for f in r.findings]
    dequantize(HUB / folder, tmp_path / "out", dtype="float32")
    exact = load(tmp_path / "out" / "model.safetensors")
    src = load(HUB / folder / "model.safetensors")
    for name in own.files:
        assert np.array_equal(_gptq_model_of_bf16_load(src, exact, name), own[name]), name
    dequantize(HUB / folder, tmp_path / "out16", dtype="float16")  # gptqmodel's float16 load: one rounding
    f16 = load(tmp_path / "out16" / "model.safetensors")
    for name in own.files:
        assert np.array_equal(f16[name], exact[name].astype(np.float16)), name


def test_gptq_v1_zero_points_borrow_across_the_word():
    """A v1 zero point of 0 is stored as 0 - 1 taken from the whole int32 word: the field reads 15 and the
    one above it one less. Reading each field + 1 would give 16 there (and a wrong neighbour)."""
    from fmtsim.checkpoint.gptq import v1_zero_points
    from fmtsim.checkpoint.intcodes import unpack_dense

    src = load(HUB / "gptq-4bit-asym" / "model.safetensors")
    qz = src["model.layers.0.self_attn.q_proj.qzeros"]
    right = v1_zero_points(qz, 4, 64)
    per_field = unpack_dense(qz, 4, 64, packed_dim=1) + 8 + 1
    assert right.min() == 0 and per_field.max() == 16
    assert 0 < np.count_nonzero(right != per_field) < right.size
    v2 = load(HUB / "gptq-4bit-asym-v2" / "model.safetensors")["model.layers.0.self_attn.q_proj.qzeros"]
    assert np.array_equal(unpack_dense(v2, 4, 64, packed_dim=1) + 8, right)  # the same zero points, stored as is


@pytest.mark.parametrize("folder", ["bnb-nf4", "bnb-nf4-dq", "bnb-fp4-dq"])
def test_arithmetic_library_gives_bitsandbytes_cpu_output_even_where_it_misreads(folder, tmp_path):
    dequantize(HUB / folder, tmp_path / "out", dtype="bfloat16", arithmetic="library")
    got = load(tmp_path / "out" / "model.safetensors")
    own = np.load(HUB / folder / "own_dequant.npz")
    for name in own.files:  # down_proj included: the CPU kernel's row-block absmax
        assert np.array_equal(got[name].view(np.uint16), own[name]), name
