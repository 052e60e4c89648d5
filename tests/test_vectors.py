"""Golden vectors: committed copies fresh, the verifier, and a C consumer."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fmtsim
from fmtsim.cli import main
from fmtsim.oracle import encode_one

ROOT = Path(__file__).resolve().parent.parent
VEC = ROOT / "vectors"


def test_committed_level1_vectors_are_fresh():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_vectors.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    manifest = json.loads((VEC / "manifest.json").read_text())
    assert sum(m["bytes"] for m in manifest["files"].values()) < 20e6


def test_encode_lines_agree_with_the_oracle():
    name = "f32_to_e4m3.rne.nonsat.encode_ties.tv"
    for line in (VEC / name).read_text().splitlines()[::7]:
        x_hex, code, flags = line.split()
        x = float(np.array([int(x_hex, 16)], np.uint32).view(np.float32)[0])
        c, fl = encode_one(x, "e4m3", "rne", "nonsat", negative_nan=x_hex[0] in "89ABCDEF")
        assert (int(code, 16), int(flags, 16)) == (c, fl), line


@pytest.mark.parametrize("fmt", ["e4m3ieee", "e3m4", "e4m3b11fnuz"])
def test_new_fp8_vector_lines_agree_with_the_oracle(fmt):
    for ov in ("satfinite", "nonsat"):
        for line in (VEC / f"f32_to_{fmt}.rne.{ov}.encode_ties.tv").read_text().splitlines()[::5]:
            x_hex, code, flags = line.split()
            x = float(np.array([int(x_hex, 16)], np.uint32).view(np.float32)[0])
            c, fl = encode_one(x, fmt, "rne", ov, negative_nan=x_hex[0] in "89ABCDEF")
            assert (int(code, 16), int(flags, 16)) == (c, fl), (ov, line)


def test_ver_accepts_own_output_and_reports_failures(tmp_path, capsys):
    name = "f32_to_e2m1.rne.satfinite.encode_ties.tv"
    good = (VEC / name).read_text()
    assert main(["ver", name, str(VEC / name), "--vectors", str(VEC)]) == 0
    assert "0 failed" in capsys.readouterr().out
    lines = good.splitlines()
    parts = lines[5].split()
    parts[1] = f"{(int(parts[1], 16) ^ 1):02X}"
    lines[5] = " ".join(parts)
    bad = tmp_path / "bad.tv"
    bad.write_text("\n".join(lines) + "\n")
    assert main(["ver", name, str(bad), "--vectors", str(VEC)]) == 1
    out = capsys.readouterr().out
    assert "line 6" in out and "sign" in out and "1 failed" in out
    bad.write_text("\n".join(lines[:3] + ["zz 00 00"] + lines[4:]) + "\n")
    assert main(["ver", name, str(bad), "--vectors", str(VEC)]) == 2
    assert "line 4" in capsys.readouterr().err


def test_ver_nan_and_flags_options(tmp_path, capsys):
    name = "f32_to_e5m2.rne.satfinite.encode_range.tv"
    lines = (VEC / name).read_text().splitlines()
    out = []
    for line in lines:
        x, c, f = line.split()
        if int(c, 16) in fmtsim.get_format("e5m2").nan_codes:
            c = "7D"  # another NaN of the target format
        out.append(f"{x} {c} 00")
    p = tmp_path / "dev.tv"
    p.write_text("\n".join(out) + "\n")
    assert main(["ver", name, str(p), "--vectors", str(VEC), "--ignore-flags"]) == 0
    assert main(["ver", name, str(p), "--vectors", str(VEC), "--ignore-flags", "--check-nans"]) == 1
    capsys.readouterr()


def test_gen_operands_to_stdout(capsys):
    assert main(["gen", "f32_to_e2m1.rne.satfinite.encode_ties.tv", "--operands"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "00000000"


def test_c_consumer_reads_the_vectors(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler on this machine")
    exe = tmp_path / "check_vectors"
    subprocess.run([cc, "-std=c99", "-O2", "-Wall", "-Werror", "-o", str(exe),
                    str(ROOT / "tools" / "c" / "check_vectors.c"), "-lm"], check=True)
    r = subprocess.run([str(exe), str(VEC)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "256 codes, 0 mismatches" in r.stdout
    assert "mxf8f6f4 GEMM: 128 outputs, 0 mismatches" in r.stdout
    # a corrupted copy must fail
    gemm = "sm100_mxf8f6f4.e4m3xe4m3.e8m0x32.gemm.bin"
    bad = tmp_path / "vec"
    bad.mkdir()
    text = (VEC / "e4m3_to_f32.decode_all.tv").read_text().replace("3F800000", "3F800001")
    (bad / "e4m3_to_f32.decode_all.tv").write_text(text)
    shutil.copy(VEC / "mxfp4.floor.rne.block_mx.bin", bad)
    shutil.copy(VEC / gemm, bad)
    r = subprocess.run([str(exe), str(bad)], capture_output=True, text=True)
    assert r.returncode == 1
    # one expected D off by one ulp: the C model of the mxf8f6f4 step catches it
    shutil.copy(VEC / "e4m3_to_f32.decode_all.tv", bad)
    meta = json.loads((VEC / "manifest.json").read_text())["files"][gemm]
    off = next(a["offset"] for a in meta["arrays"] if a["name"] == "d") + 4 * 9
    data = bytearray((VEC / gemm).read_bytes())
    data[off] ^= 1
    (bad / gemm).write_bytes(bytes(data))
    r = subprocess.run([str(exe), str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and "mxf8f6f4 GEMM: 128 outputs, 1 mismatches" in r.stdout


@pytest.mark.parametrize("src,dst", [("e5m2", "e4m3"), ("e4m3", "e5m2"), ("e4m3", "e4m3fnuz"),
                                     ("e5m2", "e5m2fnuz"), ("e4m3fnuz", "e4m3"), ("e5m2fnuz", "e5m2"),
                                     ("e4m3", "e4m3ieee"), ("e4m3ieee", "e4m3"), ("e4m3", "e3m4"),
                                     ("e4m3fnuz", "e4m3b11fnuz")])
def test_fmt2fmt_nonsat_files_agree_with_ml_dtypes_casts(src, dst):
    """An independent source: ml_dtypes' own FP8 -> FP8 casts (non-saturating, NaN keeps sign)."""
    lines = (VEC / f"{src}_to_{dst}.rne.nonsat.fmt2fmt.tv").read_text().split("\n")[:-1]
    codes = np.array([int(ln.split()[0], 16) for ln in lines], np.uint8)
    want = np.array([int(ln.split()[1], 16) for ln in lines], np.uint8)
    fa, fb = fmtsim.get_format(src), fmtsim.get_format(dst)
    theirs = codes.view(fa.ml_dtype).astype(fb.ml_dtype).view(np.uint8)
    assert np.array_equal(theirs, want)


def test_gen_with_policy_flags(tmp_path, capsys):
    assert main(["gen", "f32_to_e4m3", "--rounding", "rtz", "--profile", "ptx", "-o", str(tmp_path)]) == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert set(manifest["files"]) == {f"f32_to_e4m3.rtz.satfinite.ptx.{m}.tv"
                                      for m in ("encode_ties", "encode_range", "encode_random")}
    meta = manifest["files"]["f32_to_e4m3.rtz.satfinite.ptx.encode_ties.tv"]
    assert meta["nan"] == "canonical" and meta["rounding"] == "rtz"
    for line in (tmp_path / "f32_to_e4m3.rtz.satfinite.ptx.encode_ties.tv").read_text().splitlines()[::11]:
        x_hex, code, _ = line.split()
        x = float(np.array([int(x_hex, 16)], np.uint32).view(np.float32)[0])
        assert int(code, 16) == encode_one(x, "e4m3", "rtz", "satfinite", "canonical")[0]
    capsys.readouterr()
    assert main(["gen", "e4m3", "--rounding", "rtz"]) == 2
    assert main(["gen", "f32_to_e2m1", "--profile", "ocp", "--list"]) == 0  # NaN inputs left out


def _arrays(name):
    meta = json.loads((VEC / "manifest.json").read_text())["files"][name]
    data = (VEC / name).read_bytes()
    return {a["name"]: np.frombuffer(data[a["offset"]:a["offset"] + a["nbytes"]], dtype=a["dtype"]).reshape(a["shape"])
            for a in meta["arrays"]}, meta


def test_layout_vectors_follow_the_written_rules():
    t, _ = _arrays("fp4_pack.low_first.layout.bin")
    c, p = t["codes"].tolist(), t["packed"].tolist()
    assert p == [c[2 * i] | c[2 * i + 1] << 4 for i in range(len(p))]
    t, _ = _arrays("fp4_pack.high_first.layout.bin")
    c, p = t["codes"].tolist(), t["packed"].tolist()
    assert p == [c[2 * i] << 4 | c[2 * i + 1] for i in range(len(p))]
    t, _ = _arrays("fp6_pack.dense.layout.bin")
    c, p = t["codes"].tolist(), t["packed"].tolist()
    for g in range(len(c) // 4):
        w = c[4 * g] | c[4 * g + 1] << 6 | c[4 * g + 2] << 12 | c[4 * g + 3] << 18
        assert p[3 * g:3 * g + 3] == [w & 0xFF, w >> 8 & 0xFF, w >> 16]
    t, meta = _arrays("scale_swizzle.128x4.layout.bin")
    s, sw = t["scales"], t["swizzled"]
    assert sw.size == 256 * 8
    for r in range(s.shape[0]):
        for col in range(s.shape[1]):
            tile = (r // 128) * 2 + col // 4
            assert sw[tile * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + col % 4] == s[r, col]


def test_dot_vectors_against_fsum():
    import math

    for name, elem in (("mxfp8_e4m3.floor.rne.dot.bin", "e4m3"), ("mxfp4.floor.rne.dot.bin", "e2m1")):
        t, meta = _arrays(name)
        codes_a = t["a_codes"] if elem == "e4m3" else fmtsim.layout.unpack_fp4(t["a_codes"])
        codes_b = t["b_codes"] if elem == "e4m3" else fmtsim.layout.unpack_fp4(t["b_codes"])
        def scale(s):
            return np.exp2(np.repeat(s.astype(np.float64) - 127, 32, 1))

        da = fmtsim.decode(codes_a, elem, np.float64) * scale(t["a_scales"])
        db = fmtsim.decode(codes_b, elem, np.float64) * scale(t["b_scales"])
        for i in range(8):
            for j in range(8):
                s = math.fsum(da[i] * db[j])  # every product is exact in float64
                c = t["c"][i, j]
                if t["c_exact"][i, j]:
                    assert float(c) == s
                assert abs(float(c) - s) <= float(t["c_bound"][i, j]) + abs(s) * 2.0**-24


def test_cli_gen_writes_the_committed_vectors(tmp_path):
    assert main(["gen", "-o", str(tmp_path)]) == 0
    assert (tmp_path / "manifest.json").read_bytes() == (VEC / "manifest.json").read_bytes()


def test_ver_binary_files(tmp_path, capsys):
    for name in ("mxfp4.floor.rne.block_mx.bin", "nvfp4.te.1x16.block_nvfp4.bin", "mxfp4.floor.rne.dot.bin",
                 "scale_swizzle.128x4.layout.bin"):
        good = (VEC / name).read_bytes()
        p = tmp_path / name
        p.write_bytes(good)
        assert main(["ver", name, str(p), "--vectors", str(VEC)]) == 0
    capsys.readouterr()
    t, meta = _arrays("mxfp4.floor.rne.block_mx.bin")
    data = bytearray((VEC / "mxfp4.floor.rne.block_mx.bin").read_bytes())
    off = next(a["offset"] for a in meta["arrays"] if a["name"] == "scales")
    data[off + 3] ^= 1
    p = tmp_path / "bad.bin"
    p.write_bytes(bytes(data))
    assert main(["ver", "mxfp4.floor.rne.block_mx.bin", str(p), "--vectors", str(VEC)]) == 1
    assert "scales[3, 0]: expected np.uint8(127), got np.uint8(126)" in capsys.readouterr().out
    p.write_bytes(b"\0" * 10)
    assert main(["ver", "mxfp8_e4m3.floor.rne.dot.bin", str(p), "--vectors", str(VEC)]) == 2
    assert "bytes" in capsys.readouterr().err


def test_ver_all_summarises_per_model(tmp_path, capsys):
    for name in ("f32_to_e2m1.rne.satfinite.encode_ties.tv", "f16_to_e2m1.rne.satfinite.encode_ties.tv",
                 "f32_to_e2m1.rne.satfinite.encode_range.tv"):
        shutil.copy(VEC / name, tmp_path / name)
    bad = tmp_path / "f32_to_e2m1.rne.satfinite.encode_range.tv"
    lines = bad.read_text().splitlines()
    x, c, f = lines[2].split()
    lines[2] = f"{x} {int(c, 16) ^ 1:02X} {f}"
    bad.write_text("\n".join(lines) + "\n")
    (tmp_path / "unrelated.txt").write_text("ignored")
    assert main(["ver", "all", str(tmp_path), "--vectors", str(VEC)]) == 1
    out = capsys.readouterr().out
    table = out.split("coverage model")[1]
    assert "encode_ties       2" in table and "encode_range      1" in table
    assert main(["ver", "all", str(tmp_path / "nothing"), "--vectors", str(VEC)]) == 2


def test_two_gen_runs_into_one_directory_list_both(tmp_path, capsys):
    """Issue #24: the second run's manifest dropped the first run's files, and ver then refused them."""
    import json

    out = tmp_path / "v"
    assert main(["gen", "f32_to_e4m3", "--rounding", "rtz", "--profile", "ptx", "-o", str(out)]) == 0
    first = set(json.loads((out / "manifest.json").read_text())["files"])
    assert main(["gen", "f32_to_e5m2", "--rounding", "rne", "--profile", "ocp", "-o", str(out)]) == 0
    assert "also lists 3 file(s) an earlier run wrote" in capsys.readouterr().out
    files = json.loads((out / "manifest.json").read_text())["files"]
    assert first < set(files) and len(files) == len(first) + 3
    for name in sorted(first):  # each of the first run's files still verifies against itself
        assert main(["ver", name, str(out / name), "--vectors", str(out)]) == 0
    # a rerun of the same files replaces their entries; a file deleted by hand is dropped
    victim = sorted(first)[0]
    (out / victim).unlink()
    assert main(["gen", "f32_to_e5m2", "--rounding", "rne", "--profile", "ocp", "-o", str(out)]) == 0
    assert set(json.loads((out / "manifest.json").read_text())["files"]) == set(files) - {victim}


def test_gen_refuses_to_merge_what_it_cannot(tmp_path, capsys):
    import json

    out = tmp_path / "v"
    assert main(["gen", "f32_to_e4m3", "--rounding", "rtz", "--profile", "ptx", "-o", str(out)]) == 0
    m = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps(dict(m, fmtsim_version="0.0.1")))
    before = sorted(p.name for p in out.iterdir())
    assert main(["gen", "f32_to_e5m2", "--rounding", "rne", "--profile", "ocp", "-o", str(out)]) == 2
    assert "written by fmtsim '0.0.1'" in capsys.readouterr().err
    (out / "manifest.json").write_text("{not json")
    assert main(["gen", "f32_to_e5m2", "--rounding", "rne", "--profile", "ocp", "-o", str(out)]) == 2
    assert "cannot be merged" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written


def test_ver_all_goes_on_past_a_file_it_cannot_read(tmp_path, capsys):
    """A corrupt result file is reported and the rest still checked; the run exits 2 (bad input)."""
    good = "f32_to_e2m1.rne.satfinite.encode_ties.tv"
    shutil.copy(VEC / good, tmp_path / good)
    broken = "f16_to_e2m1.rne.satfinite.encode_ties.tv"
    (tmp_path / broken).write_text("this is not a result file\n")
    assert main(["ver", "all", str(tmp_path), "--vectors", str(VEC)]) == 2
    out = capsys.readouterr().out
    assert f"{broken}: not checked: " in out and f"{good}: " in out and " 0 failed" in out
    assert f"1 of 2 result files could not be checked: {broken}" in out


@pytest.mark.parametrize("level", [1, 2])
def test_the_progress_total_is_the_number_of_conversion_files(monkeypatch, level):
    """gen's bar counts the conversion files against scalar_file_count, known before they are made:
    the generator itself (its encodes replaced by a stub, so level 2 costs nothing) yields that many,
    and at level 1 so many of the committed files are conversion files."""
    from fmtsim.conformance import vectors

    monkeypatch.setattr(vectors, "_encode_file", lambda model, *a, **k: vectors.VectorFile(model, b"", {}))
    monkeypatch.setattr(vectors, "random_float32", lambda n, seed: np.zeros(1, np.float32))
    assert len(list(vectors.scalar_files(level))) == vectors.scalar_file_count(level)
    if level == 1:  # and the committed level-1 files hold exactly that many conversion files
        names = json.loads((Path(__file__).resolve().parent.parent / "vectors" / "manifest.json").read_text())["files"]
        sources = ("f32", "f16", "bf16", "f64")
        conversions = [n for n in names if n.endswith(".tv") and (
            (n.split("_to_")[0] in sources and n.split("_to_")[1].split(".")[0] in vectors.SCALAR_FORMATS)
            or (n.endswith(".decode_all.tv") and n.split("_to_")[0] in vectors.SCALAR_FORMATS))]
        assert len(conversions) == vectors.scalar_file_count(1)
