"""User adapters in fmtsim conform: a correct kernel passes, a shipped bug is caught."""

import textwrap

from fmtsim.cli import main

GOOD = textwrap.dedent('''
    import numpy as np, ml_dtypes

    def encode_e4m3(x, fmt):
        """Like cvt.rn.satfinite.e4m3x2.f32: saturate, NaN -> 0x7F."""
        with np.errstate(invalid="ignore"):
            c = np.clip(x.astype(np.float32), -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        return np.where(np.isnan(x.astype(np.float32)), 0x7F, c)
    encode_e4m3.profile = "ptx"
    encode_e4m3.formats = ["e4m3"]
    encode_e4m3.sources = ["float32", "float16", "bfloat16"]

    def ties_up_fp4(x, fmt):
        """E2M1 with ties rounded up, the bug of ONNX PR #5456 and ROCm aiter #3992."""
        grid = np.array([0, .5, 1, 1.5, 2, 3, 4, 6])
        a = np.minimum(np.abs(x.astype(np.float64)), 6)
        idx = np.searchsorted((grid[:-1] + grid[1:]) / 2, a, side="right")
        return idx | np.where(np.signbit(x), 8, 0)
    ties_up_fp4.profile = "ptx"
    ties_up_fp4.formats = ["e2m1"]

    def wrong_length(x, fmt):
        return x[:1]
''')


def test_adapters(tmp_path, capsys):
    p = tmp_path / "my_kernels.py"
    p.write_text(GOOD)
    assert main(["conform", "--impl", f"{p}:encode_e4m3", "--formats", "e4m3"]) == 0
    out = capsys.readouterr().out
    assert "encode_all16" in out and "0 unexpected failures" in out
    assert main(["conform", "--impl", f"{p}:ties_up_fp4", "--quick", "--formats", "e2m1"]) == 1
    out = capsys.readouterr().out
    assert "f32:0x3e800000 (0.25)" in out and "fmtsim[ptx] 0x0" in out  # bits (as encode reads them), value
    assert main(["conform", "--impl", f"{p}:wrong_length", "--quick", "--formats", "e2m1"]) == 1
    assert "codes for" in capsys.readouterr().out
    assert main(["conform", "--impl", f"{p}:missing"]) == 2
    assert "no attribute" in capsys.readouterr().err
    assert main(["conform", "--impl", "nosuchthing"]) == 2


def test_conform_profile_option(tmp_path, capsys):
    assert main(["conform", "--impl", "fmtsim", "--profile", "gfloat", "--quick", "--formats", "e4m3"]) == 0
    assert "fmtsim[gfloat]" in capsys.readouterr().out
    p = tmp_path / "my_kernels.py"
    p.write_text(GOOD)
    # the saturating kernel is not what a non-saturating profile expects
    assert main(["conform", "--impl", f"{p}:encode_e4m3", "--profile", "ml_dtypes", "--quick",
                 "--formats", "e4m3"]) == 1
