"""Bad input, fourth tour, data loss (issue 25): no writing command replaces a device node, a
directory, a FIFO, a socket, a symbolic link or one of its own inputs, and each refuses before it
writes anything. Every target is checked after the refusal: still what it was, bytes unchanged,
no temporary file left beside it."""

from __future__ import annotations

import os
import socket
import stat

import numpy as np
import pytest

from fmtsim.cli import main
from fmtsim.fileio import UnsafeOutputError, atomic_write, check_replaceable


def _leftovers(d):
    return sorted(p.name for p in d.iterdir() if ".tmp-" in p.name)


def _special(tmp_path, kind):
    """A non-regular file named out.npy of ``kind``, and a function that says it is intact."""
    p = tmp_path / "out.npy"
    if kind == "dir":
        p.mkdir()
        return p, lambda: p.is_dir() and not p.is_symlink()
    if kind == "fifo":
        os.mkfifo(p)
        return p, lambda: stat.S_ISFIFO(os.lstat(p).st_mode)
    if kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        s.close()
        return p, lambda: stat.S_ISSOCK(os.lstat(p).st_mode)
    if kind == "symlink":
        target = tmp_path / "precious.txt"
        target.write_bytes(b"keep me")
        p.symlink_to(target)
        return p, lambda: p.is_symlink() and target.read_bytes() == b"keep me"
    if kind == "dangling":
        p.symlink_to(tmp_path / "nowhere")
        return p, lambda: p.is_symlink() and not (tmp_path / "nowhere").exists()
    raise AssertionError(kind)


SPECIALS = ["dir", "fifo", "socket", "symlink", "dangling"]
DEVICES = [d for d in ("/dev/null", "/dev/full", "/dev/zero") if os.path.exists(d)]


# ---- the shared writer -----------------------------------------------------------------------


def test_atomic_write_replaces_a_regular_file_and_leaves_nothing(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(b"old")
    atomic_write(p, b"new")
    atomic_write(tmp_path / "g.txt", "text")
    assert p.read_bytes() == b"new" and (tmp_path / "g.txt").read_text() == "text"
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("kind", SPECIALS)
def test_atomic_write_refuses_what_is_not_a_regular_file(tmp_path, kind):
    p, intact = _special(tmp_path, kind)
    with pytest.raises(UnsafeOutputError, match="not a regular file"):
        atomic_write(p, b"x")
    assert intact() and _leftovers(tmp_path) == []


@pytest.mark.parametrize("device", DEVICES)
def test_atomic_write_refuses_a_device(device):
    before = os.stat(device)
    with pytest.raises(UnsafeOutputError, match="character device"):
        check_replaceable(device)
    assert stat.S_ISCHR(os.stat(device).st_mode) and os.stat(device).st_ino == before.st_ino


def test_atomic_write_refuses_an_input_by_identity_not_by_name(tmp_path):
    a = tmp_path / "a.npy"
    a.write_bytes(b"A")
    (tmp_path / "sub").mkdir()
    hard = tmp_path / "sub" / "other-name.npy"
    os.link(a, hard)
    for name in (a, tmp_path / "sub" / ".." / "a.npy", hard):
        with pytest.raises(UnsafeOutputError, match="is the input"):
            atomic_write(name, b"D", inputs=[a])
    assert a.read_bytes() == b"A"
    atomic_write(tmp_path / "d.npy", b"D", inputs=[a, None, tmp_path / "missing"])
    assert (tmp_path / "d.npy").read_bytes() == b"D"


def test_a_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    p = tmp_path / "f.bin"
    p.write_bytes(b"old")

    def boom(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError):
        atomic_write(p, b"new")
    assert p.read_bytes() == b"old" and _leftovers(tmp_path) == []


# ---- fmtsim mma matmul -o ----------------------------------------------------------------------


@pytest.fixture
def gemm(tmp_path):
    a = np.full((4, 8), 0x38, np.uint8)
    b = np.full((8, 4), 0x38, np.uint8)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    np.save(tmp_path / "c.npy", np.zeros((4, 4), np.float32))
    return tmp_path


def _matmul(d, out):
    return main(["mma", "matmul", str(d / "a.npy"), str(d / "b.npy"), str(d / "c.npy"), "-o", str(out),
                 "--unit", "sm89_mma_fp8", "--a-format", "e4m3", "--b-format", "e4m3"])


@pytest.mark.parametrize("which", ["a.npy", "b.npy", "c.npy"])
def test_matmul_refuses_to_write_d_over_an_input(gemm, which, capsys):
    before = (gemm / which).read_bytes()
    assert _matmul(gemm, gemm / which) == 2
    err = capsys.readouterr().err
    assert "is the input" in err and which in err
    assert (gemm / which).read_bytes() == before and _leftovers(gemm) == []


def test_matmul_refuses_to_write_d_over_a_scale_input(tmp_path, capsys):
    a = np.full((4, 32), 0x38, np.uint8)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", a.T.copy())
    np.save(tmp_path / "sa.npy", np.full((4, 1), 127, np.uint8))
    np.save(tmp_path / "sb.npy", np.full((1, 4), 127, np.uint8))
    base = ["mma", "matmul", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--unit", "sm100_mxf8f6f4",
            "--a-format", "e4m3", "--b-format", "e4m3", "--a-scales", str(tmp_path / "sa.npy"),
            "--b-scales", str(tmp_path / "sb.npy"), "--scale-format", "e8m0", "--block-size", "32"]
    assert main([*base, "-o", str(tmp_path / "d.npy")]) == 0  # the same command writes a new name
    for which in ("sa.npy", "sb.npy"):
        before = (tmp_path / which).read_bytes()
        assert main([*base, "-o", str(tmp_path / which)]) == 2
        assert "is the input" in capsys.readouterr().err and (tmp_path / which).read_bytes() == before


@pytest.mark.parametrize("kind", SPECIALS)
def test_matmul_refuses_a_special_output(gemm, kind, capsys):
    p, intact = _special(gemm, kind)
    assert _matmul(gemm, p) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert intact() and _leftovers(gemm) == []


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_refuses_a_device_output(gemm, device, capsys):
    assert _matmul(gemm, device) == 2
    assert "character device" in capsys.readouterr().err and stat.S_ISCHR(os.stat(device).st_mode)


def test_matmul_writes_over_its_own_earlier_output(gemm):
    assert _matmul(gemm, gemm / "d.npy") == 0
    first = (gemm / "d.npy").read_bytes()
    assert _matmul(gemm, gemm / "d.npy") == 0
    assert (gemm / "d.npy").read_bytes() == first and _leftovers(gemm) == []


# ---- gen -o, probe gen -o ----------------------------------------------------------------------


@pytest.mark.parametrize("victim", ["manifest.json", "f32_to_e4m3.rtz.satfinite.ptx.encode_ties.tv"])
@pytest.mark.parametrize("kind", ["dir", "fifo", "symlink"])
def test_gen_refuses_before_writing_any_file(tmp_path, victim, kind, capsys):
    out = tmp_path / "vec"
    out.mkdir()
    p, intact = _special(tmp_path, kind)
    os.replace(p, out / victim)
    assert main(["gen", "f32_to_e4m3", "--rounding", "rtz", "--profile", "ptx", "-o", str(out)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert sorted(q.name for q in out.iterdir()) == [victim]  # nothing else written


def test_empty_output_paths_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["gen", "f32_to_e4m3", "--rounding", "rtz", "--profile", "ptx", "-o", ""]) == 2
    assert main(["probe", "gen", "-o", ""]) == 2
    with pytest.raises(UnsafeOutputError, match="empty"):
        atomic_write("", b"x")
    assert list(tmp_path.iterdir()) == []
    assert "empty" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["dir", "fifo", "symlink"])
def test_probe_gen_refuses_before_writing_any_file(tmp_path, kind, capsys):
    out = tmp_path / "probes"
    out.mkdir()
    p, intact = _special(tmp_path, kind)
    os.replace(p, out / "probe.json")
    assert main(["probe", "gen", "-o", str(out)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert sorted(q.name for q in out.iterdir()) == ["probe.json"]


# ---- checkpoints ---------------------------------------------------------------------------------


def test_checkpoint_shard_over_a_symlink_to_the_input_is_refused(tmp_path):
    pytest.importorskip("safetensors", reason="checkpoint jobs need the safetensors package")
    from gen_checkpoints import make

    from fmtsim.checkpoint import CheckpointError
    from fmtsim.checkpoint.dequant import dequantize

    src = make("gpt-oss-mxfp4", tmp_path)
    shard = next(src.glob("*.safetensors"))
    before = shard.read_bytes()
    out = tmp_path / "out"
    out.mkdir()
    (out / shard.name).symlink_to(shard)
    with pytest.raises(CheckpointError, match="symbolic link"):
        dequantize(src, out, dtype="float32")
    assert shard.read_bytes() == before and (out / shard.name).is_symlink()


@pytest.mark.parametrize("device", DEVICES)
def test_checkpoint_commands_refuse_a_device(tmp_path, device, capsys):
    pytest.importorskip("safetensors", reason="checkpoint jobs need the safetensors package")
    import ml_dtypes
    from safetensors.numpy import save_file

    codes = np.full((64, 64), 0x38, np.uint8).view(ml_dtypes.float8_e4m3fn)
    src = tmp_path / "m.safetensors"
    save_file({"l.weight": codes, "l.weight_scale": np.array(2.0 ** -7, np.float32)}, str(src))
    before = src.read_bytes()
    for cmd in (["checkpoint", "dequantize", str(src), device],
                ["checkpoint", "convert", str(src), device, "--to", "mxfp8"],
                ["fnuz", "convert", str(src), device]):
        assert main(cmd) == 2, cmd
        assert "not a regular file" in capsys.readouterr().err
    assert stat.S_ISCHR(os.stat(device).st_mode) and src.read_bytes() == before
    assert main(["checkpoint", "dequantize", str(src), str(tmp_path / "o.safetensors")]) == 0
