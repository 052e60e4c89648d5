"""Every fault found converting realistic checkpoints to FNUZ, each with its fix."""

import errno
import json
import os
import signal
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("safetensors", reason="checkpoint conversion needs the safetensors package")
from safetensors.numpy import save_file  # noqa: E402

from fmtsim.checkpoint import META_KEY, CheckpointError, convert, load, read_header  # noqa: E402
from fmtsim.checkpoint import files as ckfiles  # noqa: E402
from fmtsim.cli import main  # noqa: E402

E4M3 = ml_dtypes.float8_e4m3fn
E5M2 = ml_dtypes.float8_e5m2


def fp8(rng, shape, dt=E4M3):
    return rng.integers(0, 0x70, shape, dtype=np.uint8).view(dt)


def simple(rng, dt=E4M3):
    return {"l.weight": fp8(rng, (8, 16), dt), "l.weight_scale": np.array(0.25, np.float32)}


def test_rerun_with_other_options_reconverts(tmp_path, rng):
    t = simple(rng, E5M2)
    t["l.weight"].view(np.uint8)[0, 0] = 0x7C  # +Inf
    src, out = tmp_path / "m.safetensors", tmp_path / "o.safetensors"
    save_file(t, str(src))
    convert(src, out, inf="nan")
    assert load(out)["l.weight"].view(np.uint8)[0, 0] == 0x80
    again = convert(src, out, inf="max")
    assert not again.shards[0].skipped and "different options" in again.shards[0].redone
    assert load(out)["l.weight"].view(np.uint8)[0, 0] == 0x7F  # FNUZ E5M2 max
    assert convert(src, out, inf="max").shards[0].skipped


def test_rerun_without_keep_scale_doubles_and_config_counts_right(tmp_path, rng):
    src = tmp_path / "ck"
    src.mkdir()
    t = simple(rng)
    t["l.input_scale"] = np.array(0.5, np.float32)
    save_file(t, str(src / "model.safetensors"))
    (src / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "fp8"}}))
    out = tmp_path / "out"
    convert(src, out, keep_scales=("*.input_scale",))
    assert load(out / "model.safetensors")["l.input_scale"] == np.float32(0.5)
    s = convert(src, out)
    assert not s.shards[0].skipped
    assert load(out / "model.safetensors")["l.input_scale"] == np.float32(1.0)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg[META_KEY]["scales_doubled"] == 2 and cfg[META_KEY]["options"]["keep_scales"] == []


def test_skip_reverifies_and_redoes_a_corrupted_output(tmp_path, rng):
    src, out = tmp_path / "m.safetensors", tmp_path / "o.safetensors"
    save_file(simple(rng), str(src))
    convert(src, out)
    good = out.read_bytes()
    h = read_header(out)
    e = h.entries["l.weight"]
    data = bytearray(good)
    data[h.data_start + e.begin + 5] ^= 0x01  # a flipped data byte
    os.utime(out)
    out.write_bytes(bytes(data))
    s = convert(src, out)
    assert not s.shards[0].skipped and "failed verification" in s.shards[0].redone
    assert out.read_bytes() == good


def test_extra_safetensors_and_subfolders(tmp_path, rng, capsys):
    src = tmp_path / "mistral"
    (src / "inference").mkdir(parents=True)
    save_file(simple(rng), str(src / "model-00001-of-00001.safetensors"))
    (src / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {"l.weight": "model-00001-of-00001.safetensors",
                                        "l.weight_scale": "model-00001-of-00001.safetensors"}}))
    save_file({"layers.0.wq.weight": fp8(rng, (4, 4)), "layers.0.wq.qscale_weight": np.array(1.0, np.float32)},
              str(src / "consolidated.safetensors"))
    (src / "inference" / "model.py").write_text("# code\n")
    (src / "inference" / "extra.safetensors").write_bytes(b"x")
    out = tmp_path / "out"
    assert main(["fnuz", "convert", str(src), str(out)]) == 0
    text = capsys.readouterr().out
    assert not (out / "consolidated.safetensors").exists(), "an OCP file must not be copied as if converted"
    assert "consolidated.safetensors: a .safetensors file not in" in text
    assert (out / "inference" / "model.py").read_text() == "# code\n"
    assert not (out / "inference" / "extra.safetensors").exists() and "inference/extra.safetensors" in text


def test_output_path_forms(tmp_path, rng):
    src = tmp_path / "m.safetensors"
    save_file(simple(rng), str(src))
    s = convert(src, str(tmp_path / "newdir") + "/")
    assert s.output == tmp_path / "newdir" / "m.safetensors" and s.output.is_file()
    (tmp_path / "existing").mkdir()
    s = convert(src, tmp_path / "existing")
    assert (tmp_path / "existing" / "m.safetensors").is_file()
    d = tmp_path / "dir"
    d.mkdir()
    save_file(simple(rng), str(d / "model.safetensors"))
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    with pytest.raises(CheckpointError, match="exists and is not a directory"):
        convert(d, blocker)
    with pytest.raises(CheckpointError, match="inside the input"):
        convert(d, d / "sub")


def test_disk_full_is_a_clear_error_and_leaves_nothing(tmp_path, rng, monkeypatch):
    src, out = tmp_path / "m.safetensors", tmp_path / "o" / "o.safetensors"
    save_file(simple(rng), str(src))
    calls = {"n": 0}
    real = ckfiles.write_chunk

    def full(fh, data):
        calls["n"] += 1
        if calls["n"] > 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fh, data)

    monkeypatch.setattr(ckfiles, "write_chunk", full)
    with pytest.raises(CheckpointError, match="o.safetensors: cannot write: no space left"):
        convert(src, out)
    assert list(out.parent.iterdir()) == []
    assert main(["fnuz", "convert", str(src), str(out)]) == 2  # the CLI: one line, no traceback


def test_read_only_output_found_by_a_real_write(tmp_path, rng):
    src = tmp_path / "m.safetensors"
    save_file(simple(rng), str(src))
    if os.geteuid() == 0:  # root: os.access says yes to a read-only mount, a real write says no
        assert os.access("/sys", os.W_OK)
        with pytest.raises(CheckpointError, match="output directory /sys is not writable"):
            convert(src, "/sys/fmtsim-test.safetensors")
        return
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        probe_ok = True
        try:
            (ro / "x").write_text("x")
            (ro / "x").unlink()
        except OSError:
            probe_ok = False
        if probe_ok:
            pytest.skip("this user can write into a 0500 directory")
        with pytest.raises(CheckpointError, match="not writable"):
            convert(src, ro / "o.safetensors")
    finally:
        ro.chmod(0o700)


def test_stale_temp_of_a_dead_process_is_removed(tmp_path, rng):
    src, out = tmp_path / "m.safetensors", tmp_path / "o" / "o.safetensors"
    save_file(simple(rng), str(src))
    out.parent.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = out.parent / f".o.safetensors.tmp-{dead.pid}"
    stale.write_bytes(b"half")
    s = convert(src, out)
    assert not stale.exists() and any("killed run" in n for n in s.notes)


def test_kill_9_during_a_run_then_rerun(tmp_path, rng):
    src = tmp_path / "big.safetensors"
    codes = rng.integers(0, 0x78, (4096, 4096), dtype=np.uint8)
    save_file({f"l{i}.weight": codes.view(E4M3) for i in range(4)}
              | {f"l{i}.weight_scale": np.array(0.5, np.float32) for i in range(4)}, str(src))
    out = tmp_path / "out" / "big.safetensors"
    out.parent.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "fmtsim", "fnuz", "convert", str(src), str(out)],
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    deadline = time.time() + 60
    tmp = out.parent / f".big.safetensors.tmp-{proc.pid}"
    while time.time() < deadline and not tmp.exists() and proc.poll() is None:
        time.sleep(0.002)
    was_writing = tmp.exists()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if not was_writing:
        pytest.skip("the conversion finished before it could be killed")
    assert tmp.exists() and not out.exists()
    s = convert(src, out)
    assert not tmp.exists() and s.shards[0].verified and not s.shards[0].skipped
    assert np.array_equal(load(out)["l3.weight"].view(np.uint8), codes)


def test_unscaled_warning_names_only_unscaled(tmp_path, rng, capsys):
    src = tmp_path / "m.safetensors"
    save_file({"layers.0.wq.weight": fp8(rng, (4, 4)), "layers.0.wq.qscale_weight": np.array(1.0, np.float32),
               "layers.0.wk.weight": fp8(rng, (4, 4)), "layers.0.wq.qscale_act": np.array(2.0, np.float32),
               "layers.0.wv.weight": fp8(rng, (4, 4)),
               "layers.0.wv.scale_w": np.array(4.0, np.float32)}, str(src))
    out = tmp_path / "o.safetensors"
    assert main(["fnuz", "convert", str(src), str(out), "--allow-unscaled", "--double-scale", "*.scale_w"]) == 0
    text = capsys.readouterr().out
    assert "WARNING: 1 FP8 tensor(s) had no scale; their values are now half: layers.0.wk.weight" in text
    got = load(out)
    assert got["layers.0.wq.qscale_weight"] == 2.0 and got["layers.0.wq.qscale_act"] == 4.0
    assert got["layers.0.wv.scale_w"] == 8.0


def test_tensorrt_llm_scaling_factors(tmp_path, rng):
    src = tmp_path / "rank0.safetensors"
    L = "transformer.layers.0.attention.qkv"
    save_file({f"{L}.weight": fp8(rng, (8, 8)), f"{L}.weights_scaling_factor": np.array(0.5, np.float32),
               f"{L}.activation_scaling_factor": np.array(0.25, np.float32),
               "transformer.layers.0.attention.kv_cache_scaling_factor": np.array(1.0, np.float32)}, str(src))
    s = convert(src, tmp_path / "o.safetensors")
    assert s.plan.unscaled == []
    got = load(tmp_path / "o.safetensors")
    assert got[f"{L}.weights_scaling_factor"] == 1.0 and got[f"{L}.activation_scaling_factor"] == 0.5
    assert got["transformer.layers.0.attention.kv_cache_scaling_factor"] == 2.0
    src2 = tmp_path / "unknown.safetensors"
    save_file({f"{L}.weight": fp8(rng, (8, 8)), f"{L}.weights_scaling_factor": np.array(0.5, np.float32),
               f"{L}.prequant_scaling_factor": np.ones(8, np.float32)}, str(src2))
    with pytest.raises(CheckpointError, match="prequant_scaling_factor"):
        convert(src2, tmp_path / "o2.safetensors")


def test_nvfp4_block_scales_are_refused(tmp_path, rng):
    src = tmp_path / "nvfp4.safetensors"
    L = "model.layers.0.mlp.down_proj"
    save_file({f"{L}.weight": rng.integers(0, 256, (8, 16), dtype=np.uint8),
               f"{L}.weight_scale": rng.integers(0x30, 0x40, (8, 2), dtype=np.uint8).view(E4M3),
               f"{L}.weight_scale_2": np.array(0.01, np.float32),
               f"{L}.input_scale": np.array(0.1, np.float32)}, str(src))
    with pytest.raises(CheckpointError, match="block scales of the U8-packed FP4 weight.*FNUZ conversion is for FP8"):
        convert(src, tmp_path / "o.safetensors")
    assert not (tmp_path / "o.safetensors").exists()


def test_float16_scale_overflow_names_tensor_and_file(tmp_path, rng, capsys):
    src = tmp_path / "m.safetensors"
    save_file({"l.weight": fp8(rng, (4, 4)), "l.weight_scale": np.array([40000.0], np.float16)}, str(src))
    out = tmp_path / "o.safetensors"
    with pytest.raises(CheckpointError, match=r"m.safetensors: cannot double scale l.weight_scale.*overflows"):
        convert(src, out)
    assert not out.exists()
    assert main(["fnuz", "convert", str(src), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fmtsim: error:") and "l.weight_scale" in err and "Traceback" not in err
    assert main(["fnuz", "convert", str(src), str(out), "--dry-run"]) == 1
    assert "PROBLEM:" in capsys.readouterr().out


def test_dry_run_finds_e5m2_inf(tmp_path, rng, capsys):
    t = simple(rng, E5M2)
    t["l.weight"].view(np.uint8)[1, :3] = [0x7C, 0xFC, 0x7C]
    src = tmp_path / "m.safetensors"
    save_file(t, str(src))
    out = tmp_path / "o.safetensors"
    assert main(["fnuz", "convert", str(src), str(out), "--dry-run"]) == 1
    text = capsys.readouterr().out
    assert "3 E5M2 Inf code(s)" in text and "3 Inf code(s)" in text and not out.exists()
    assert main(["fnuz", "convert", str(src), str(out), "--dry-run", "--inf", "nan"]) == 0


def test_dev_null_input_says_what_is_wrong(tmp_path, capsys):
    assert main(["fnuz", "convert", "/dev/null", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "not a regular file or a directory of safetensors" in err and "no such file" not in err


def test_checkpoint_convert_is_the_same_job(tmp_path, rng):
    src = tmp_path / "m.safetensors"
    save_file(simple(rng), str(src))
    assert main(["checkpoint", "convert", "--to", "fnuz", str(src), str(tmp_path / "a.safetensors")]) == 0
    assert main(["fnuz", "convert", str(src), str(tmp_path / "b.safetensors")]) == 0
    assert np.array_equal(load(tmp_path / "a.safetensors")["l.weight"].view(np.uint8),
                          load(tmp_path / "b.safetensors")["l.weight"].view(np.uint8))
