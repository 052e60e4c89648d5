"""fmtsim mma matmul (operand files -> D, tiles on this process / --jobs) and fmtsim ver
D.npy DEVICE_D (ulp distances, first differing outputs by row and column)."""

import numpy as np
import pytest

from fmtsim.cli import main
from fmtsim.mma import matmul
from fmtsim.mma.dfiles import compare_d, ulp_distance


def bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


@pytest.fixture
def operands(tmp_path, rng):
    a = rng.integers(0, 256, (21, 70)).astype(np.uint8)  # every code: NaNs too
    b = rng.integers(0, 0x7F, (70, 13)).astype(np.uint8)
    c = rng.standard_normal((21, 13)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    b.T.copy().tofile(tmp_path / "b_nk.bin")
    c.tofile(tmp_path / "c.bin")
    return a, b, c


def test_matmul_from_files_equals_the_library(tmp_path, operands, capsys):
    a, b, c = operands
    want = matmul(a, b, c, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e5m2", promote_every=64)
    d = tmp_path / "d.npy"
    rc = main(["mma", "matmul", str(tmp_path / "a.npy"), str(tmp_path / "b_nk.bin"), str(tmp_path / "c.bin"),
               "--b-nk", "--shape", "21,13,70", "--unit", "sm90_wgmma_fp8", "--a-format", "e4m3",
               "--b-format", "e5m2", "--promote-every", "64", "--jobs", "2", "--tile", "8,5", "-o", str(d)])
    assert rc == 0 and "wrote" in capsys.readouterr().out
    assert np.array_equal(bits(np.load(d)), bits(want))
    # raw float32 output, this process; and ver against itself
    main(["mma", "matmul", str(tmp_path / "a.npy"), str(tmp_path / "b_nk.bin"), str(tmp_path / "c.bin"), "--b-nk",
          "--shape", "21,13,70", "--unit", "sm90_wgmma_fp8", "--a-format", "e4m3", "--b-format", "e5m2",
          "--promote-every", "64", "-o", str(tmp_path / "d.bin")])
    assert (tmp_path / "d.bin").read_bytes() == want.astype("<f4").tobytes()
    capsys.readouterr()
    assert main(["ver", str(d), str(tmp_path / "d.bin")]) == 0
    assert "273 outputs, 273 equal, 0 differ" in capsys.readouterr().out
    # --engine numpy: the same bytes, and the line names the engine that ran
    main(["mma", "matmul", str(tmp_path / "a.npy"), str(tmp_path / "b_nk.bin"), str(tmp_path / "c.bin"), "--b-nk",
          "--shape", "21,13,70", "--unit", "sm90_wgmma_fp8", "--a-format", "e4m3", "--b-format", "e5m2",
          "--promote-every", "64", "--engine", "numpy", "-o", str(tmp_path / "d_numpy.bin")])
    assert "numpy engine" in capsys.readouterr().out
    assert (tmp_path / "d_numpy.bin").read_bytes() == want.astype("<f4").tobytes()


def test_block_scaled_matmul_from_files(tmp_path, rng):
    a = rng.integers(0, 0x7F, (9, 64)).astype(np.uint8)
    b = rng.integers(0, 0x7F, (64, 6)).astype(np.uint8)
    sa, sb = rng.integers(120, 135, (9, 2)).astype(np.uint8), rng.integers(120, 135, (2, 6)).astype(np.uint8)
    for name, x in (("a", a), ("b", b), ("sa", sa), ("sb", sb)):
        x.tofile(tmp_path / f"{name}.bin")
    kw = dict(unit="sm100_mxf8f6f4", a_format="e4m3", b_format="e4m3")
    want = matmul(a, b, **kw, a_scales=sa, b_scales=sb, scale_format="e8m0", block_size=32)
    rc = main(["mma", "matmul", str(tmp_path / "a.bin"), str(tmp_path / "b.bin"), "--shape", "9,6,64",
               "--unit", "sm100_mxf8f6f4", "--a-format", "e4m3", "--b-format", "e4m3", "--a-scales",
               str(tmp_path / "sa.bin"), "--b-scales", str(tmp_path / "sb.bin"), "--scale-format", "e8m0",
               "--block-size", "32", "-o", str(tmp_path / "d.npy")])
    assert rc == 0 and np.array_equal(bits(np.load(tmp_path / "d.npy")), bits(want))


def test_ver_reports_ulp_distances_and_row_column(tmp_path, operands, capsys):
    a, b, c = operands
    d = matmul(a, b, c, unit="sm100_f8f6f4", a_format="e4m3", b_format="e4m3")
    np.save(tmp_path / "d.npy", d)
    dev = d.copy()
    dev[2, 3] = np.nextafter(d[2, 3], np.float32(np.inf)) if np.isfinite(d[2, 3]) else np.float32(1.0)
    finite = np.argwhere(np.isfinite(d) & (d != 0))
    i, j = (int(v) for v in finite[-1])
    dev[i, j] = -d[i, j]
    dev.tofile(tmp_path / "dev.f32")
    assert main(["ver", str(tmp_path / "d.npy"), str(tmp_path / "dev.f32")]) == 1
    out = capsys.readouterr().out
    assert f"D[2, 3]: fmtsim {int(bits(d)[2, 3]):#010x}" in out and f"D[{i}, {j}]" in out
    assert "2 differ" in out
    # a NaN is a NaN unless --check-nans; ulp distance across zero counts both sides
    assert ulp_distance(np.float32([1e-45]), np.float32([-1e-45]))[0] == 2
    assert ulp_distance(np.float32([0.0]), np.float32([-0.0]))[0] == 0
    x = np.float32([[np.nan]])
    y = np.uint32([[0x7FC00001]]).view(np.float32)
    assert compare_d(x, y).failed == 0 and compare_d(x, y, check_nans=True).failed == 1


def test_bad_files_are_one_line_errors(tmp_path, operands, capsys):
    (tmp_path / "short.bin").write_bytes(b"\0" * 7)
    base = ["--unit", "sm90_wgmma_fp8", "--a-format", "e4m3", "--b-format", "e4m3", "-o", str(tmp_path / "x.npy")]
    assert main(["mma", "matmul", str(tmp_path / "a.npy"), str(tmp_path / "b_nk.bin"), *base]) == 2
    assert "give its shape with --shape" in capsys.readouterr().err
    assert main(["mma", "matmul", str(tmp_path / "a.npy"), str(tmp_path / "short.bin"), "--shape", "21,13,70",
                 *base]) == 2
    assert "holds 7 bytes" in capsys.readouterr().err
    np.save(tmp_path / "d.npy", np.zeros((2, 2), np.float32))
    assert main(["ver", str(tmp_path / "d.npy"), str(tmp_path / "short.bin")]) == 2
    assert "fmtsim: error:" in capsys.readouterr().err
    assert not (tmp_path / "x.npy").exists()
