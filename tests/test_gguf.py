"""GGUF: fmtsim's parser, its ggml dequantizers and reference quantizers, held to ggml's own C
(the committed fixture tests/fixtures/gguf/, made by tools/gen_gguf_fixtures.py from llama.cpp's
ggml-quants.c) and to gguf-py (the gguf package: its reader, its numpy dequantizers and quantizers).
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fmtsim.checkpoint import ggml, ggml_tables
from fmtsim.checkpoint import gguf as G
from fmtsim.checkpoint.files import CheckpointError
from fmtsim.checkpoint.ggml_quant import REFERENCE_QUANTIZERS, fp32_to_ue4m3, quantize_ref

FIX = Path(__file__).parent / "fixtures" / "gguf"
FIXTURE = FIX / "ggml_types.gguf"
EXPECTED = FIX / "ggml_types.expected.npz"

gguf_py = pytest.importorskip("gguf", reason="gguf (gguf-py) is in the test extra: pip install '.[test]'")
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import quants as gq  # noqa: E402


@pytest.fixture(scope="module")
def fixture():
    return G.read_gguf(FIXTURE), np.load(EXPECTED)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


# -- the fixture: ggml's C output, bit for bit ---------------------------------------------------

def test_the_fixture_holds_every_type_ggml_can_store_and_read_back(fixture):
    g, _ = fixture
    have = {t.type.name for t in g.tensors}
    # Q8_1 has no dequantizer in ggml; Q2_0 (unknown to gguf-py 0.19.0's writer) is in
    # ggml_newer_types.gguf; the integer and float64 types have no quantizer (tests/fixtures/gguf/README.md)
    left_out = {"Q8_1", "Q2_0", "I8", "I16", "I32", "I64", "F64"}
    assert have == set(ggml.BY_NAME) - left_out


def test_every_type_dequantizes_as_ggml_c_does(fixture):
    g, expected = fixture
    newer = G.read_gguf(FIX / "ggml_newer_types.gguf")  # Q2_0: gguf 0.19.0 cannot write it (the fixture's README)
    assert [t.type.name for t in newer.tensors] == ["Q2_0"]
    assert any("does not know type(s) Q2_0" in n for n in newer.notes)
    assert set(G.load_gguf(FIX / "ggml_newer_types.gguf")) == {"blk.0.q2_0.weight"}
    for f in (g, newer):
        for t in f.tensors:
            got = G.read_values(f, t.name)
            assert got.shape == (4, 512)
            assert np.array_equal(_bits(got), _bits(expected[t.name])), t.type.name


def test_reference_quantizers_give_ggml_c_bytes(fixture):
    g, expected = fixture
    newer = G.read_gguf(FIX / "ggml_newer_types.gguf")
    assert set(REFERENCE_QUANTIZERS) == {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "MXFP4", "NVFP4", "Q1_0", "Q2_0",
                                         "TQ1_0", "TQ2_0", "Q8_K"}
    for name in REFERENCE_QUANTIZERS:
        f = newer if name == "Q2_0" else g
        t = f.tensor(f"blk.0.{name.lower()}.weight")
        assert np.array_equal(quantize_ref(name, expected["source"]), G.read_raw(f, t)), name


def test_the_tables_equal_gguf_py_s_copies():
    for cls, mine in [(gq.IQ2_XXS, ggml_tables.IQ2XXS_GRID), (gq.IQ2_XS, ggml_tables.IQ2XS_GRID),
                      (gq.IQ2_S, ggml_tables.IQ2S_GRID), (gq.IQ3_XXS, ggml_tables.IQ3XXS_GRID),
                      (gq.IQ3_S, ggml_tables.IQ3S_GRID), (gq.IQ1_S, ggml_tables.IQ1S_GRID)]:
        cls.init_grid()
        assert np.array_equal(cls.grid.reshape(mine.shape), mine.astype(np.float32)), cls.__name__
    assert np.array_equal(np.frombuffer(gq.IQ2_XXS.ksigns, np.uint8), ggml_tables.KSIGNS_IQ2XS)
    assert list(gq.IQ4_NL.kvalues) == ggml_tables.KVALUES_IQ4NL.tolist()
    assert list(gq.MXFP4.kvalues) == ggml_tables.KVALUES_MXFP4.tolist()


def test_the_sign_table_is_the_even_parity_rule():
    # ksigns_iq2xs[i]: the 7 bits of i, the eighth set when that makes the number of set bits even
    i = np.arange(128)
    parity = np.array([bin(v).count("1") & 1 for v in i])
    assert np.array_equal(ggml_tables.KSIGNS_IQ2XS, (i | (parity << 7)).astype(np.uint8))


# -- gguf-py's numpy dequantizers, on random bytes (every scale, NaN and Inf included) --------------

@pytest.mark.parametrize("name", [t.name for t in ggml.TYPES.values() if t.decode is not None and t.block > 1])
def test_dequantize_equals_gguf_py_on_random_bytes(name):
    t = ggml.BY_NAME[name]
    if name not in Q.__members__:
        pytest.skip(f"gguf {_gguf_version()} has no {name}")
    raw = np.random.default_rng(t.code).integers(0, 256, (64, t.nbytes), dtype=np.uint8)
    try:
        with np.errstate(all="ignore"):
            ref = gq.dequantize(raw.reshape(4, -1), Q[name]).astype(np.float32).reshape(-1)
    except NotImplementedError:
        pytest.skip(f"gguf {_gguf_version()} cannot dequantize {name} (held to ggml's C by the fixture)")
    mine = ggml.dequantize_blocks(t, raw)
    same = (_bits(mine) == _bits(ref)) | (np.isnan(mine) & np.isnan(ref))
    assert same.all(), f"{np.count_nonzero(~same)} differ, first at {np.flatnonzero(~same)[0]}"


def _gguf_version() -> str:
    from importlib.metadata import version
    return version("gguf")


def _edge_rows() -> np.ndarray:
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((16, 256)) * 0.02).astype(np.float32)
    x[0] = 0
    x[1, :32] = -0.0
    x[2] = np.float32(2.0 ** -5 * (1 - 2 ** -23))  # amax just below a power of two (MXFP4's log2f floor)
    x[3] = rng.choice(np.array([0, 1, 2, 3, 4, 6, -1, -3, 0.5, 1.5], np.float32) * 2 ** -6, 256)  # ties
    x[4] = x[4] * np.float32(1e-36)
    x[5, ::7] = 3.0
    x[6] = np.nextafter(np.float32(2.0 ** -8), np.float32(0)) * np.sign(rng.standard_normal(256)).astype(np.float32)
    return x


@pytest.mark.parametrize("name", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "MXFP4", "TQ1_0", "TQ2_0"])
def test_reference_quantizers_equal_gguf_py_s(name):
    x = _edge_rows()
    with np.errstate(all="ignore"):
        ref = gq.quantize(x, Q[name]).reshape(-1)
    assert np.array_equal(quantize_ref(name, x).reshape(-1), ref)


def test_ue4m3_rounding_is_ggml_s_half_up():
    # 1.0625 = 1 + 1/16 lies halfway between UE4M3 1.0 (0x38) and 1.125 (0x39): ggml rounds up
    assert fp32_to_ue4m3(np.float32(1.0625)) == 0x39
    assert fp32_to_ue4m3(np.float32(1000.0)) == 0x7E  # clamped to 448, never 0x7F (NaN in OCP E4M3)
    assert fp32_to_ue4m3(np.float32(-1.0)) == 0 and fp32_to_ue4m3(np.float32(0.0)) == 0
    assert ggml.UE4M3_HALF[0x7F] == 0 and ggml.E8M0_HALF[0xFF] == np.float32(2.0 ** 127)


def test_quantize_ref_refuses_what_it_does_not_model():
    with pytest.raises(ValueError, match="search"):
        quantize_ref("Q4_K", np.zeros(256, np.float32))
    with pytest.raises(ValueError, match="NaN inputs are not modelled .*index 3"):
        quantize_ref("Q4_0", np.array([0, 0, 0, np.nan] + [0] * 28, np.float32))
    with pytest.raises(ValueError, match="whole number of 32-element"):
        quantize_ref("Q8_0", np.zeros(33, np.float32))


def test_types_without_a_dequantizer_are_refused_by_name():
    with pytest.raises(ValueError, match="ggml defines no dequantization for Q8_1"):
        ggml.dequantize_blocks(ggml.BY_NAME["Q8_1"], np.zeros((1, 36), np.uint8))
    with pytest.raises(ValueError, match="I32 tensors are stored as int32"):
        ggml.dequantize_blocks(ggml.BY_NAME["I32"], np.zeros((1, 4), np.uint8))


def test_block_sizes_equal_gguf_py_s():
    from gguf.constants import GGML_QUANT_SIZES
    for t in ggml.TYPES.values():
        if t.name in Q.__members__ and t.name != "Q8_1":
            assert GGML_QUANT_SIZES[Q[t.name]] == (t.block, t.nbytes), t.name
    # gguf 0.19.0 still gives Q8_1 the 40-byte block of its float32 d and s; ggml-common.h has
    # float16 d and s (static_assert: 2*sizeof(ggml_half) + QK8_1 = 36). No file stores Q8_1.
    assert ggml.BY_NAME["Q8_1"].nbytes == 36


# -- the container ----------------------------------------------------------------------------------

def test_parser_agrees_with_gguf_py_s_reader(fixture):
    g, _ = fixture
    assert g.notes == []  # cross-checked, nothing left out
    r = gguf_py.GGUFReader(FIXTURE)
    assert [t.name for t in r.tensors] == [t.name for t in g.tensors]
    assert g.metadata["general.name"] == "fmtsim ggml types fixture"
    assert g.metadata["general.architecture"] == "llama"


def _write(path: Path, tensors: dict[str, tuple[np.ndarray, object]], file_type: int | None = None,
           **meta: str) -> Path:
    w = gguf_py.GGUFWriter(path, "llama")
    if file_type is not None:
        w.add_file_type(file_type)
    for k, v in meta.items():
        w.add_string(k, v)
    for name, (arr, qt) in tensors.items():
        w.add_tensor(name, arr, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _small(tmp_path: Path) -> Path:
    x = _edge_rows()[7:11]
    return _write(tmp_path / "m.gguf", {"blk.0.attn_q.weight": (gq.quantize(x, Q.Q4_0), Q.Q4_0),
                                        "blk.0.ffn_down.weight": (gq.quantize(x, Q.Q8_0), Q.Q8_0),
                                        "output_norm.weight": (x[0].copy(), None)}, file_type=2)


def test_truncated_and_damaged_files_are_refused_with_the_place(tmp_path):
    good = _small(tmp_path).read_bytes()
    cases = {
        "short": (good[:20], "byte 16: the metadata count needs 8 bytes, the file ends at 20"),
        "no data": (good[:-100], "the file ends at"),
        "magic": (b"GGUX" + good[4:], "not a GGUF file"),
        "v1": (good[:4] + struct.pack("<I", 1) + good[8:], "GGUF version 1"),
        "big-endian": (good[:4] + struct.pack(">I", 3) + good[8:], "big-endian GGUF"),
        "v9": (good[:4] + struct.pack("<I", 9) + good[8:], "GGUF version 9"),
    }
    for label, (data, message) in cases.items():
        p = tmp_path / f"{label}.gguf"
        p.write_bytes(data)
        with pytest.raises(CheckpointError, match=message):
            G.read_gguf(p)


def _patch_tensor_info(data: bytes, name: str, *, type_code: int | None = None, offset: int | None = None) -> bytes:
    i = data.index(name.encode()) + len(name)
    n_dims = struct.unpack_from("<I", data, i)[0]
    at = i + 4 + 8 * n_dims
    b = bytearray(data)
    if type_code is not None:
        struct.pack_into("<I", b, at, type_code)
    if offset is not None:
        struct.pack_into("<Q", b, at + 4, offset)
    return bytes(b)


def test_bad_tensor_infos_are_refused_by_name(tmp_path):
    good = _small(tmp_path).read_bytes()
    cases = {
        "unknown type": (_patch_tensor_info(good, "output_norm.weight", type_code=77),
                         "tensor 'output_norm.weight': ggml type 77 is not one fmtsim knows"),
        "misaligned": (_patch_tensor_info(good, "blk.0.ffn_down.weight", offset=3),
                       "starts at data offset 3, not a multiple of the alignment 32"),
        "overlap": (_patch_tensor_info(good, "blk.0.ffn_down.weight", offset=0), "overlap"),
        "past the end": (_patch_tensor_info(good, "output_norm.weight", offset=1 << 30), "the file ends at"),
    }
    for label, (data, message) in cases.items():
        p = tmp_path / f"{label.replace(' ', '_')}.gguf"
        p.write_bytes(data)
        with pytest.raises(CheckpointError, match=message):
            G.read_gguf(p)


def test_a_type_gguf_py_does_not_know_is_read_and_said(tmp_path):
    # Q2_0 (42): ggml has it, gguf 0.19.0 does not. A Q4_0 tensor's infos rewritten as Q2_0 over
    # twice the elements: both types store 18-byte blocks (of 32 and of 64 elements)
    x = _edge_rows()[8:10]
    p = _write(tmp_path / "q2.gguf", {"w": (gq.quantize(x, Q.Q4_0), Q.Q4_0)})
    data = bytearray(p.read_bytes())
    i = data.index(b"w\x02\x00\x00\x00") + 1  # name 'w', 2 dims
    ne0 = struct.unpack_from("<Q", data, i + 4)[0]
    struct.pack_into("<Q", data, i + 4, ne0 * 2)      # Q2_0 blocks hold 64 elements in 18 bytes
    struct.pack_into("<I", data, i + 4 + 16, 42)
    p.write_bytes(bytes(data))
    if 42 in {int(v) for v in Q}:
        pytest.skip("this gguf-py knows Q2_0")
    g = G.read_gguf(p)
    assert any("does not know type(s) Q2_0" in n for n in g.notes)
    v = G.read_values(g, "w")
    raw = G.read_raw(g, g.tensor("w"))
    # Q2_0 by hand: y = (q - 1) * d, q = 2-bit fields from the low bits up
    d = raw[:, :2].copy().view("<f2").astype(np.float32)
    q = (raw[:, 2:, None] >> np.array([0, 2, 4, 6], np.uint8)) & 3
    by_hand = (q.reshape(len(raw), 64).astype(np.float32) - 1) * d
    assert np.array_equal(_bits(v.reshape(-1)), _bits(by_hand.reshape(-1)))


# -- the commands -----------------------------------------------------------------------------------

def _fmtsim(*args: str, check: int | None = 0) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "fmtsim", *args], capture_output=True, text=True)
    if check is not None:
        assert r.returncode == check, r.stdout + r.stderr
    return r


def test_inspect_names_the_type_mix_and_the_preset(tmp_path):
    r = _fmtsim("checkpoint", "inspect", str(FIXTURE))
    assert "GGUF v3, architecture llama; llama.cpp preset not declared" in r.stdout
    assert "IQ2_XXS" in r.stdout and "2.062" in r.stdout  # bits per weight
    p = _small(tmp_path)
    r = _fmtsim("checkpoint", "inspect", str(p))
    assert "llama.cpp preset Q4_0; bulk of the weights in" in r.stdout
    assert "WARNING: general.file_type says Q4_0" in r.stdout  # ffn_down is Q8_0: as many bytes as not
    js = _fmtsim("checkpoint", "inspect", str(p), "--json").stdout
    import json
    d = json.loads(js)
    assert d["format"] == "gguf" and d["preset"] == "Q4_0" and d["type_mix"]["Q4_0"]["tensors"] == 1


def test_dequantize_writes_ggml_s_values(tmp_path):
    from safetensors.numpy import load_file

    out = tmp_path / "f32.safetensors"
    r = _fmtsim("checkpoint", "dequantize", str(FIXTURE), str(out), "--dtype", "float32")
    assert "dequantized as ggml's reference C does" in r.stdout
    got = load_file(out)
    exp = np.load(EXPECTED)
    g = G.read_gguf(FIXTURE)
    for t in g.tensors:
        if t.quantized:
            assert got[t.name].dtype == np.float32 and np.array_equal(_bits(got[t.name]), _bits(exp[t.name])), t.name
        else:  # F32/F16/BF16 copied as they are
            assert np.array_equal(got[t.name].view(np.uint8), G.read_values(g, t.name).view(np.uint8)), t.name
    out16 = tmp_path / "bf16.safetensors"
    _fmtsim("checkpoint", "dequantize", str(FIXTURE), str(out16))
    import ml_dtypes
    got16 = load_file(out16)
    name = "blk.0.q4_k.weight"
    assert np.array_equal(got16[name].view(np.uint16),
                          exp[name].astype(ml_dtypes.bfloat16).view(np.uint16))
    r = _fmtsim("checkpoint", "dequantize", str(FIXTURE), str(out16), "--jobs", "2", check=2)
    assert "--jobs: not for a GGUF file" in r.stderr


def test_explain_names_the_reference_quantizer_and_the_searched_types(tmp_path):
    exp = np.load(EXPECTED)
    g = G.read_gguf(FIXTURE)
    original = _write(tmp_path / "orig.gguf", {t.name: (exp["source"].copy(), None) for t in g.tensors})
    r = _fmtsim("checkpoint", "explain", str(FIXTURE), "--original", str(original), check=1)
    here = [n for n in REFERENCE_QUANTIZERS if n != "Q2_0"]  # Q2_0 is in ggml_newer_types.gguf
    for name in here:
        assert f"blk.0.{name.lower()}.weight" in r.stdout
    lines = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln.startswith("blk.0.")}
    for name in here:
        t = g.tensor(f"blk.0.{name.lower()}.weight")
        n = t.nbytes // t.type.nbytes
        assert f"{n} of {n}" in lines[t.name], lines[t.name]
    assert "NOT EXAMINED blk.0.q4_k.weight: Q4_K is made by a search" in r.stdout  # exit 1: not examined


def test_explain_finds_a_changed_block(tmp_path):
    x = _edge_rows()[7:11]
    original = _write(tmp_path / "orig.gguf", {"w": (x, None)})
    b = gq.quantize(x, Q.Q8_0)
    b[0, 2 * 34 + 5] ^= 1  # row 0, block 2 (34 bytes each: d, then the codes), element 3
    quant = _write(tmp_path / "q.gguf", {"w": (b, Q.Q8_0)})
    r = _fmtsim("checkpoint", "explain", str(quant), "--original", str(original), check=1)
    assert "31 of 32" in r.stdout and "UNEXPLAINED w block [2]" in r.stdout and "element 3 is" in r.stdout


def test_a_gguf_given_to_a_safetensors_command_says_which_commands_read_it(tmp_path):
    r = _fmtsim("fnuz", "convert", str(FIXTURE), str(tmp_path / "o"), check=2)
    assert "a GGUF file (llama.cpp's format, version 3): fmtsim checkpoint inspect, dequantize and explain" in r.stderr
    r = _fmtsim("checkpoint", "convert", str(FIXTURE), str(tmp_path / "o"), "--to", "nvfp4", check=2)
    assert "convert reads it with --to mxfp4" in r.stderr and "dequantize" in r.stderr
    assert not (tmp_path / "o").exists()


def test_mxfp4_moves_between_gguf_and_gpt_oss_layouts_code_for_code(tmp_path):
    from safetensors.numpy import load_file

    st = tmp_path / "st"
    r = _fmtsim("checkpoint", "convert", str(FIXTURE), str(st), "--to", "mxfp4")
    assert "1 MXFP4 tensor moved code for code" in r.stdout
    # fmtsim's gpt-oss reader (the gpt-oss-mxfp4 record) gives ggml's C values for the moved codes
    deq = tmp_path / "deq"
    _fmtsim("checkpoint", "dequantize", str(st), str(deq), "--dtype", "float32")
    got = load_file(deq / "model.safetensors")
    exp = np.load(EXPECTED)
    assert np.array_equal(_bits(got["blk.0.mxfp4.weight"]), _bits(exp["blk.0.mxfp4.weight"]))
    assert np.array_equal(_bits(got["blk.0.q6_k.weight"]), _bits(exp["blk.0.q6_k.weight"]))  # ggml's float32
    # gpt-oss's own rule, by hand: byte i of a group holds elements 2i (low nibble) and 2i+1
    raw = load_file(st / "model.safetensors")
    codes = np.stack([raw["blk.0.mxfp4.weight_blocks"] & 0xF, raw["blk.0.mxfp4.weight_blocks"] >> 4], -1)
    e2m1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])
    by_hand = e2m1[codes.reshape(4, 16, 32)] * np.exp2(raw["blk.0.mxfp4.weight_scales"].astype(float) - 127)[..., None]
    assert np.array_equal(by_hand.reshape(4, 512).astype(np.float32), exp["blk.0.mxfp4.weight"])
    back = tmp_path / "back.gguf"
    _fmtsim("checkpoint", "convert", str(st), str(back), "--to", "gguf")
    g0, g1 = G.read_gguf(FIXTURE), G.read_gguf(back)
    t0 = g0.tensor("blk.0.mxfp4.weight")
    assert g1.tensor("blk.0.mxfp4.weight").type.name == "MXFP4"
    assert np.array_equal(G.read_raw(g1, g1.tensor(t0.name)), G.read_raw(g0, t0))
    r = _fmtsim("checkpoint", "diff", str(FIXTURE), str(back))
    assert "blk.0.mxfp4.weight (MXFP4): 0 of 64 blocks differ (0%), 0 of 2048 values differ" in r.stdout
    assert "blk.0.q4_0.weight (Q4_0 in A, F32 in B): 0 of 2048 values differ" in r.stdout


def test_diff_counts_blocks_and_values(tmp_path):
    x = _edge_rows()[7:11]
    a = _write(tmp_path / "a.gguf", {"w": (gq.quantize(x, Q.Q8_0), Q.Q8_0), "only_a": (x, None)})
    b8 = gq.quantize(x, Q.Q8_0)
    b8[1, 34 + 7] ^= 4  # row 1, block 1, element 5: flat index 256 + 32 + 5
    b = _write(tmp_path / "b.gguf", {"w": (b8, Q.Q8_0)})
    r = _fmtsim("checkpoint", "diff", str(a), str(b), check=1)
    assert "w (Q8_0): 1 of 32 blocks differ (3.1%), 1 of 1024 values differ (0.1%), first at flat index 293" \
        in r.stdout, r.stdout
    assert "1 tensor(s) in one file only, not compared: only_a" in r.stdout
    _fmtsim("checkpoint", "diff", str(a), str(b), "--exit-zero")
    r = _fmtsim("checkpoint", "diff", str(a), str(FIXTURE.parent / "README.md"), check=2)
    assert "not one of each" in r.stderr


def test_the_docs_table_of_types_is_current():
    # regenerate with: python tools/gen_ggml_tables.py --docs
    text = (Path(__file__).parent.parent / "docs" / "producers.md").read_text()
    assert "<!-- ggml types -->\n" + ggml.markdown_table() + "<!-- ggml types -->" in text


def test_compare_reads_a_float_gguf_as_the_same_weights_in_safetensors(tmp_path):
    from safetensors.numpy import save_file

    from fmtsim.compare.source import compare_source

    x = np.random.default_rng(3).normal(0, 0.02, (2, 64, 256)).astype(np.float32)
    p = _write(tmp_path / "f.gguf", {"blk.0.attn_q.weight": (x[0], None), "blk.0.ffn_down.weight": (x[1], None),
                                     "blk.0.q.weight": (gq.quantize(x[0], Q.Q8_0), Q.Q8_0)})
    save_file({"blk.0.attn_q.weight": x[0], "blk.0.ffn_down.weight": x[1]}, str(tmp_path / "f.safetensors"))
    a = compare_source(p, ["mxfp4", "nvfp4"])
    b = compare_source(tmp_path / "f.safetensors", ["mxfp4", "nvfp4"])
    def rows(r):  # the output-error columns are NaN without activations: NaN != NaN
        return [{k: v for k, v in row.items() if not (isinstance(v, float) and np.isnan(v))} for row in r.overall()]
    assert rows(a) == rows(b)
    assert any("blk.0.q.weight (Q8_0)" in n for n in a.notes)  # a quantized weight is left out, and said
    q = _write(tmp_path / "q.gguf", {"blk.0.q.weight": (gq.quantize(x[0], Q.Q8_0), Q.Q8_0)})
    with pytest.raises(ValueError, match="its 2-D weights are quantized .*llama-quantize starts from"):
        compare_source(q, ["mxfp4"])


def test_a_split_gguf_shard_is_refused_with_how_to_merge(tmp_path):
    x = _edge_rows()[7:11]
    w = gguf_py.GGUFWriter(tmp_path / "m-00001-of-00003.gguf", "llama")
    w.add_uint16("split.no", 0)
    w.add_uint16("split.count", 3)
    w.add_int32("split.tensors.count", 9)
    w.add_tensor("a", x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(CheckpointError, match=r"shard 1 of a GGUF split into 3 files \(1 of its 9 tensors\): merge"):
        G.read_gguf(tmp_path / "m-00001-of-00003.gguf")


def test_gguf_outputs_are_named_as_given(tmp_path):
    out = tmp_path / "new" / "weights.bin"  # a parent to create, a name to keep
    _fmtsim("checkpoint", "dequantize", str(FIXTURE), str(out), "--dtype", "float32")
    assert out.is_file() and not (tmp_path / "new" / "weights.safetensors").exists()
    d = tmp_path / "outdir"
    d.mkdir()
    _fmtsim("checkpoint", "dequantize", str(FIXTURE), str(d))
    assert (d / "ggml_types.safetensors").is_file()  # into a folder: named after the input, as safetensors
    r = _fmtsim("checkpoint", "convert", str(FIXTURE), str(out), "--to", "mxfp4", check=2)
    assert f"output {out} exists and is not a directory (the output is a folder" in r.stderr


def test_nan_scales_are_counted_and_trailing_bytes_said(tmp_path):
    x = _edge_rows()[7:11]
    b = gq.quantize(x, Q.Q8_0)
    b[0, 0:2] = np.frombuffer(np.float16(np.nan).tobytes(), np.uint8)  # block 0's d: NaN
    p = _write(tmp_path / "n.gguf", {"w": (b, Q.Q8_0)})
    r = _fmtsim("checkpoint", "dequantize", str(p), str(tmp_path / "n.safetensors"))
    assert "WARNING: 32 NaN value(s): NaN or Inf block scales in the file" in r.stdout
    with open(p, "ab") as fh:
        fh.write(bytes(100))
    assert any("100 bytes after the last tensor's data" in n for n in G.read_gguf(p).notes)


def test_convert_to_gguf_never_replaces_a_symlink(tmp_path):
    st = tmp_path / "st"
    _fmtsim("checkpoint", "convert", str(FIXTURE), str(st), "--to", "mxfp4")
    target = tmp_path / "elsewhere.gguf"
    target.write_bytes(b"keep")
    link = tmp_path / "out.gguf"
    link.symlink_to(target)
    r = _fmtsim("checkpoint", "convert", str(st), str(link), "--to", "gguf", check=2)
    assert "out.gguf" in r.stderr and target.read_bytes() == b"keep" and link.is_symlink()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # nothing half-written left
