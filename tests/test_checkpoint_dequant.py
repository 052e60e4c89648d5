"""Dequantizing every producer's layout: every output value against the exact oracle (Fractions)."""

import json
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("safetensors", reason="checkpoint jobs need the safetensors package")

from gen_checkpoints import make  # noqa: E402

from fmtsim.checkpoint import CheckpointError, load  # noqa: E402
from fmtsim.checkpoint.dequant import dequantize, round_to_target  # noqa: E402
from fmtsim.checkpoint.producers import PRODUCERS  # noqa: E402
from fmtsim.cli import main  # noqa: E402
from fmtsim.oracle import value_of  # noqa: E402

from .conftest import slow_unless  # noqa: E402

TARGET = {"bfloat16": (8, -126, 127, ml_dtypes.bfloat16, np.uint16),
          "float16": (11, -14, 15, np.float16, np.uint16),
          "float32": (24, -126, 127, np.float32, np.uint32)}


def round_fraction(v, target):
    """Round a Fraction to nearest even in the target IEEE format (independent of fmtsim)."""
    p, emin, emax, _, _ = TARGET[target]
    if v == 0:
        return 0.0
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    ulp = Fraction(2) ** (e - p + 1)
    n = a / ulp
    k = n.numerator // n.denominator
    rem = n - k
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and k % 2 == 1):
        k += 1
    r = k * ulp
    if r >= Fraction(2) ** (emax + 1):
        return math.copysign(math.inf, v)
    return float(r) if v > 0 else -float(r)


def expected_bits(codes_fmt, keys, key_value, target):
    """keys: int array per element; key_value(key) -> (Fraction | 'nan', negative zero?)."""
    uniq, inv = np.unique(keys, return_inverse=True)
    vals = np.empty(uniq.size, np.float64)
    for i, k in enumerate(uniq.tolist()):
        v, neg = key_value(k)
        if isinstance(v, str):
            vals[i] = np.nan
        elif v == 0:
            vals[i] = -0.0 if neg else 0.0
        else:
            vals[i] = round_fraction(v, target)
    _, _, _, dt, _ = TARGET[target]
    return vals[inv.reshape(keys.shape)].astype(dt)


def frac(x):
    return Fraction(float(x))


def check_fp8(before, after, layer, scale_name, target, block=None):
    codes = before[layer + ".weight"].view(np.uint8)
    s = before[scale_name].astype(np.float64)
    rows, cols = codes.shape
    if s.size == 1:
        bid = np.zeros(codes.shape, np.int64)
        sflat = s.reshape(-1)
    elif s.shape == (rows, 1):
        bid = np.repeat(np.arange(rows)[:, None], cols, axis=1)
        sflat = s.reshape(-1)
    else:
        br, bc = block
        bid = (np.arange(rows)[:, None] // br) * s.shape[1] + (np.arange(cols)[None, :] // bc)
        sflat = s.reshape(-1)
    keys = bid * 256 + codes

    def kv(k):
        code, b = k % 256, k // 256
        v = value_of(code, "e4m3")
        if isinstance(v, str):
            return v, False
        return v * frac(sflat[b]), (code & 0x80) != 0 and sflat[b] > 0

    return expected_bits("e4m3", keys, kv, target)


def nibbles(packed):
    p = packed.astype(np.uint8)
    return np.stack([p & 0xF, p >> 4], axis=-1).reshape(*p.shape[:-1], -1)


def check_fp4(codes, scale_val, per, target, glob=None, divisor=False):
    """codes [..., K] E2M1 codes; scale_val(i) -> Fraction of block i (flattened, per elements each)."""
    n = codes.size
    bid = np.arange(n).reshape(codes.shape) // per
    keys = bid * 16 + codes

    def kv(k):
        code, b = k % 16, k // 16
        v = value_of(code, "e2m1") * scale_val(b)
        if glob is not None:
            v = v / glob if divisor else v * glob
        return v, code >= 8

    return expected_bits("e2m1", keys, kv, target)


@pytest.mark.parametrize("target", slow_unless(["bfloat16", "float16", "float32"], keep={"bfloat16"}))
# the fast tier keeps one record of the block FP8, NVFP4 (multiplier), MXFP4 and int4 value rules;
# --full runs every record (per-tensor FP8, NVFP4 divisor, MXFP8 and int8 included)
@pytest.mark.parametrize("producer", slow_unless([p.name for p in PRODUCERS if not p.refuse and p.synthetic], keep={  # noqa: E501
    "deepseek-fp8-block", "modelopt-nvfp4", "gpt-oss-mxfp4", "compressed-tensors-w4a16"}))
def test_every_value_against_the_oracle(tmp_path, producer, target):
    src = make(producer, tmp_path)
    out = tmp_path / "out"
    s = dequantize(src, out, dtype=target)
    before, after = load(src), load(out)
    rec = next(p for p in PRODUCERS if p.name == producer)
    assert set(s.detection.producers) == {producer}
    checked = 0
    for tj in s.jobs.values():
        m = tj.match
        got = after[tj.out_name]
        assert got.dtype == TARGET[target][3] and got.shape == tj.out_shape
        if rec.scheme == "fp8" and rec.scale_format == "e8m0":
            codes = before[m.codes].view(np.uint8)
            sc = before[m.scale].view(np.uint8).reshape(-1)
            n = codes.shape[1] // 32
            bid = (np.arange(codes.shape[0])[:, None] * n + np.arange(codes.shape[1])[None, :] // 32)

            def kv(k, sc=sc):
                v = value_of(k % 256, "e4m3")
                return (v, False) if isinstance(v, str) else (v * Fraction(2) ** (int(sc[k // 256]) - 127),
                                                              (k % 256) >= 0x80)

            want = expected_bits("e4m3", bid * 256 + codes, kv, target)
        elif rec.scheme == "fp8":
            want = check_fp8(before, after, m.layer, m.scale, target, block=(128, 128))
        elif rec.scheme in ("nvfp4", "mxfp4"):
            packed = before[m.codes]
            sc = before[m.scale].view(np.uint8).reshape(-1)
            codes = nibbles(packed).reshape(tj.out_shape)
            if rec.scheme == "mxfp4":
                want = check_fp4(codes, lambda b, sc=sc: Fraction(2) ** (int(sc[b]) - 127), 32, target)
            elif rec.scale_format == "ue5m3":  # Quark amdfp4: 5 exponent bits (bias 15), 3 mantissa bits, no sign
                def ue5m3(b, sc=sc):
                    e, mant = int(sc[b]) >> 3, int(sc[b]) & 7
                    frac_part = Fraction(mant, 8) if e == 0 else Fraction(8 + mant, 8)
                    return frac_part * Fraction(2) ** (max(e, 1) - 15)

                want = check_fp4(codes, ue5m3, tj.block[1], target)
            else:
                g = frac(before[m.global_scale].reshape(-1)[0])
                want = check_fp4(codes, lambda b, sc=sc: value_of(int(sc[b]), "e4m3"),
                                 (tj.block or rec.block)[1], target,
                                 glob=g, divisor=rec.global_direction == "divisor")
        elif rec.scheme == "mxfp6":  # Quark: four codes per little-endian 3-byte word, code k at bit 6k
            b = before[m.codes].astype(np.int64).reshape(tj.out_shape[0], -1, 3)
            word = b[..., 0] + (b[..., 1] << 8) + (b[..., 2] << 16)
            codes = np.stack([(word >> (6 * k)) & 63 for k in range(4)], axis=-1).reshape(tj.out_shape)
            sc = before[m.scale].view(np.uint8).reshape(-1)
            bid = np.arange(codes.size).reshape(codes.shape) // 32

            def kv(k, sc=sc, el=rec.element):
                v = value_of(k % 64, el)
                return v * Fraction(2) ** (int(sc[k // 64]) - 127), (k % 64) >= 32

            want = expected_bits(rec.element, bid * 64 + codes, kv, target)
        elif rec.scheme == "gptq":
            # the codes by hand: each column's int32 words as one little-endian bit string, 4 bits a row;
            # zero points along each row the same way, stored minus 1 (v1); the group of row i is g_idx[i]
            def bitstring(words, n, axis):
                u = np.ascontiguousarray(np.moveaxis(words.view(np.uint32), axis, -1))
                bits_ = np.unpackbits(u.view(np.uint8), axis=-1, bitorder="little")[..., : n * 4]
                return (bits_.reshape(*u.shape[:-1], n, 4).astype(np.int64) << np.arange(4)).sum(-1)

            out_f, in_f = tj.out_shape
            q = bitstring(before[m.codes], in_f, 0)       # [out, in]
            z = bitstring(before[m.zero_point], out_f, 1) + 1  # [groups, out]
            g = before[m.layer + ".g_idx"].astype(np.int64)
            sc = before[m.scale]
            keys = (g[None, :] * out_f + np.arange(out_f)[:, None]) * 16 + q
            want = expected_bits("float32", keys, lambda k, sc=sc, z=z, out_f=out_f: (
                Fraction(int(k % 16) - int(z.reshape(-1)[k // 16])) * frac(sc.reshape(-1)[k // 16]), False), target)
        elif rec.scheme in ("bnb4", "bnb8"):
            # bitsandbytes' values are its float32 arithmetic: each product exact in float64 (24 x 24
            # bits or 8 x 24), rounded to float32 by the cast, then rounded once to the target by the oracle
            if rec.scheme == "bnb8":
                q, scb = before[m.codes].astype(np.float64), before[m.scale].astype(np.float64)
                f32 = ((q * scb[:, None]).astype(np.float32).astype(np.float64)
                       * float(np.float32(1 / 127))).astype(np.float32)
            else:
                state = json.loads(bytes(before[m.layer + ".weight.quant_state.bitsandbytes__nf4"]).decode())
                b = before[m.codes].reshape(-1)
                n = int(np.prod(state["shape"]))
                codes = np.stack([b >> 4, b & 0xF], axis=1).reshape(-1)[:n]
                qm = before[m.layer + ".weight.quant_map"].astype(np.float64)
                am = np.repeat(before[m.scale].astype(np.float64), 64)[:n]
                f32 = (qm[codes] * am).astype(np.float32).reshape(state["shape"])
            flat = f32.reshape(-1)
            want = expected_bits("float32", np.arange(flat.size).reshape(f32.shape),
                                 lambda k, flat=flat: (frac(flat[k]), bool(np.signbit(flat[k]))), target)
        elif rec.packing in ("byte", "int4-rows", "int4x8-reorder-t", "int4x8-reorder"):  # int layouts
            from .exact_int import expected_int

            zp = before[m.zero_point] if m.zero_point else None
            pre = before[m.pre_scale] if m.pre_scale else None
            glob = before[m.global_scale] if m.global_scale else None
            want = expected_int(rec.packing, before[m.codes], before[m.scale], zp, pre, target, tj.block[1],
                                rec.element != "uint4", glob).astype(TARGET[target][3])
        else:  # compressed-tensors pack-quantized: element i of a row at bit i*b of its little-endian bit string
            bits = {"int4x8": 4, "int8x4": 8}[rec.packing]
            packed = before[m.codes].astype("<i4")
            rows, cols = (int(v) for v in before[m.shape_tensor].reshape(-1))
            stream = np.unpackbits(packed.view(np.uint8).reshape(rows, -1), axis=1, bitorder="little")
            q = (stream[:, : cols * bits].reshape(rows, cols, bits).astype(np.int64) << np.arange(bits)).sum(axis=2)
            sc = before[m.scale].astype(np.float64)
            group = json.loads((src / "config.json").read_text())["quantization_config"]["config_groups"][
                "group_0"]["weights"]["group_size"]
            bid = (np.arange(rows)[:, None] * sc.shape[1] + np.arange(cols)[None, :] // group)
            span = 1 << bits
            keys = bid * span + q  # q + 2^(b-1) as stored
            want = expected_bits(rec.element, keys, lambda k, sc=sc, span=span: (
                Fraction(k % span - span // 2) * frac(sc.reshape(-1)[k // span]), False), target)
        assert want.shape == got.shape
        w_bits, g_bits = want.view(TARGET[target][4]), got.view(TARGET[target][4])
        nan = np.isnan(want.astype(np.float64))
        assert np.array_equal(np.isnan(got.astype(np.float64)), nan)
        bad = (w_bits != g_bits) & ~nan
        assert not bad.any(), f"{tj.out_name}: first mismatch at {np.argwhere(bad)[0]}"
        checked += got.size
    assert checked == s.totals()["values"] > 0
    # dropped: scales and activation scales of the matched layers; others copied byte for byte
    for name in before:
        if name in s.jobs:
            continue
        if name in after:
            assert after[name].tobytes() == before[name].tobytes()


def test_round_to_target_is_one_rounding():
    # 1 + 2^-8 + 2^-40 lies above the bfloat16 midpoint: one rounding goes up; float64 -> float32
    # -> bfloat16 (what ml_dtypes' own cast does) lands on the midpoint and goes to even (down)
    x = np.array([1 + 2**-8 + 2**-40, -(1 + 2**-8 + 2**-40), 1 + 2**-8, 3 * 2**-140], np.float64)
    got = round_to_target(x, "bfloat16").astype(np.float64)
    assert got.tolist() == [round_fraction(Fraction(v), "bfloat16") for v in x.tolist()]
    assert got[0] == 1 + 2**-7 and got[2] == 1.0
    assert x.astype(ml_dtypes.bfloat16).astype(np.float64)[0] == 1.0  # the double rounding avoided


def test_divisor_sticky_at_a_midpoint():
    from fmtsim.checkpoint.dequant import divide_exactly

    rng = np.random.default_rng(5)
    a = rng.integers(1, 1 << 6, 2000).astype(np.float64) * 2.0 ** rng.integers(-8, 8, 2000)
    g = float(np.float32(rng.uniform(1, 1000)))
    for target in TARGET:
        q, sticky = divide_exactly(a, g)
        got = round_to_target(q, target, sticky).astype(np.float64)
        want = [round_fraction(Fraction(v) / Fraction(g), target) for v in a.tolist()]
        assert got.tolist() == want


def test_index_config_and_side_files(tmp_path):
    src = make("modelopt-nvfp4", tmp_path)
    (src / "tokenizer.json").write_text("{}")
    out = tmp_path / "bf16"
    assert main(["checkpoint", "dequantize", str(src), str(out), "--dtype", "bfloat16"]) == 0
    assert not (out / "hf_quant_config.json").exists()
    assert (out / "tokenizer.json").read_text() == "{}"
    index = json.loads((out / "model.safetensors.index.json").read_text())
    got = load(out)
    assert set(index["weight_map"]) == set(got)
    assert not any(k.endswith(("weight_scale", "weight_scale_2", "input_scale")) for k in got)
    assert got["model.layers.0.mlp.down_proj.weight"].dtype == ml_dtypes.bfloat16


def test_gpt_oss_expert_layout(tmp_path):
    src = make("gpt-oss-mxfp4", tmp_path)
    s = dequantize(src, tmp_path / "o")
    got = load(tmp_path / "o")
    assert got["model.layers.0.mlp.experts.gate_up_proj"].shape == (2, 128, 96)
    assert got["model.layers.0.mlp.experts.down_proj"].shape == (2, 64, 64)
    assert "model.layers.0.mlp.experts.gate_up_proj_blocks" not in got
    assert s.totals()["dequantized"] == 2
    cfg = json.loads((tmp_path / "o" / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["fmtsim_dequantized"]["quantization_config"]["quant_method"]


def test_resume_skips_only_an_intact_output(tmp_path):
    src = make("deepseek-fp8-block", tmp_path)
    out = tmp_path / "o"
    dequantize(src, out)
    again = dequantize(src, out)
    assert all(r.skipped for r in again.shards)
    shard = sorted(out.glob("*.safetensors"))[0]
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0x40
    shard.write_bytes(bytes(data))
    third = dequantize(src, out)
    assert [r.redone for r in third.shards if not r.skipped] == [
        "the existing output's data do not match its recorded CRC-32"]
    f32 = dequantize(src, out, dtype="float32")
    assert all("different options" in r.redone for r in f32.shards)


def test_ambiguity_is_reported_and_producer_overrides(tmp_path):
    src = make("modelopt-fp8", tmp_path)
    (src / "hf_quant_config.json").unlink()
    s = dequantize(src, tmp_path / "o")  # every FP8 record reads weight_scale the same way: no ambiguity
    assert len(s.jobs) == 2
    with pytest.raises(CheckpointError, match="unknown producer"):
        dequantize(src, tmp_path / "o2", producer="nonesuch")
    s = dequantize(src, tmp_path / "o3", producer="quark-fp8")
    assert set(s.detection.producers) == {"quark-fp8"}


def test_nothing_to_dequantize(tmp_path):
    from safetensors.numpy import save_file

    save_file({"x": np.ones(4, np.float32)}, str(tmp_path / "m.safetensors"))
    with pytest.raises(CheckpointError, match="no tensor matches a known producer"):
        dequantize(tmp_path / "m.safetensors", tmp_path / "o.safetensors")


def test_torch_loads_the_output(tmp_path):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from safetensors.torch import load_file

    src = make("deepseek-fp8-block", tmp_path)
    out = tmp_path / "o"
    dequantize(src, out)
    ours = load(out)
    for shard in sorted(out.glob("*.safetensors")):
        for k, v in load_file(str(shard)).items():
            if v.dtype == torch.bfloat16:
                assert np.array_equal(v.view(torch.int16).numpy().view(np.uint16), ours[k].view(np.uint16))


def test_jobs_give_the_same_bytes(tmp_path):
    src = make("deepseek-fp8-block", tmp_path)
    dequantize(src, tmp_path / "one", jobs=1)
    dequantize(src, tmp_path / "two", jobs=2)
    for shard in sorted((tmp_path / "one").glob("*.safetensors")):
        assert shard.read_bytes() == (tmp_path / "two" / shard.name).read_bytes()


def test_float16_overflow_and_float32_rounding_are_counted(tmp_path):
    from safetensors.numpy import save_file

    codes = np.array([[0x7E, 0x70, 0x38, 0x01, 0xFE, 0x7F]], np.uint8)  # 448, 2^7, 1, 2^-9, -448, NaN
    save_file({"l.weight": codes.view(ml_dtypes.float8_e4m3fn), "l.weight_scale": np.array(300.0, np.float32)},
              str(tmp_path / "m.safetensors"))
    s = dequantize(tmp_path / "m.safetensors", tmp_path / "h.safetensors", dtype="float16")
    t = s.totals()
    # 448 * 300 and -448 * 300 exceed float16's 65504; 128 * 300 = 38400 does not
    assert (t["overflow"], t["nan"], t["values"]) == (2, 1, 6)
    got = load(tmp_path / "h.safetensors")["l.weight"].astype(np.float64)[0]
    assert got[0] == np.inf and got[4] == -np.inf and np.isnan(got[5]) and got[1] == 38400.0
    # float32: 300 = 75 * 4 needs 7 bits; every product is exact in float32 here
    s32 = dequantize(tmp_path / "m.safetensors", tmp_path / "f.safetensors", dtype="float32")
    assert s32.totals()["rounded"] == 0
    save_file({"l.weight": codes.view(ml_dtypes.float8_e4m3fn),
               "l.weight_scale": np.array(1 + 2.0 ** -23, np.float32)}, str(tmp_path / "r.safetensors"))
    s32 = dequantize(tmp_path / "r.safetensors", tmp_path / "g.safetensors", dtype="float32")
    # q * (1 + 2^-23) needs 24 + (bits of q) bits: inexact for 448 (1.75 * 2^8), 2^7, 1 and 2^-9 are exact
    want = sum(1 for v in (448.0, 128.0, 1.0, 2.0 ** -9, -448.0)
               if float(np.float32(v * (1 + 2.0 ** -23))) != v * (1 + 2.0 ** -23))
    assert s32.totals()["rounded"] == want == 2


def test_disk_full_and_output_inside_input(tmp_path, monkeypatch):
    import errno
    import os

    from fmtsim.checkpoint import files as ckfiles

    src = make("gpt-oss-mxfp4", tmp_path)
    with pytest.raises(CheckpointError, match="inside the input"):
        dequantize(src, src / "bf16")
    calls = {"n": 0}
    real = ckfiles.write_chunk

    def full(fh, data):
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fh, data)

    monkeypatch.setattr(ckfiles, "write_chunk", full)
    out = tmp_path / "out"
    with pytest.raises(CheckpointError, match="no space left"):
        dequantize(src, out)
    assert not list(out.glob("*.safetensors")) and not list(out.glob(".*tmp*"))
    monkeypatch.setattr(ckfiles, "write_chunk", real)
    assert main(["checkpoint", "dequantize", str(src), str(out)]) == 0


def test_a_killed_runs_temporary_file_is_removed(tmp_path):
    import subprocess
    import sys

    src = make("modelopt-fp8", tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = out / f".model-00001-of-00002.safetensors.tmp-{dead.pid}"
    stale.write_bytes(b"half a shard")
    s = dequantize(src, out)
    assert not stale.exists() and any("killed run" in n for n in s.notes)
    assert all(not r.skipped for r in s.shards)


@pytest.mark.parametrize("jobs", [1, 2])
def test_progress_bar_counts_every_input_byte(tmp_path, capsys, jobs):
    """Long work shows progress: the bar (tqdm, the checkpoint extra) reaches the checkpoint's
    size, in this process (per chunk) and with worker processes (per finished shard)."""
    pytest.importorskip("tqdm", reason="tqdm is not installed (pip install 'fmtsim[checkpoint]')")
    src = make("modelopt-nvfp4", tmp_path)
    dequantize(src, tmp_path / "out", dtype="bfloat16", jobs=jobs, progress=True)
    err = capsys.readouterr().err
    assert "dequantize" in err and "100%" in err, err[-300:]
