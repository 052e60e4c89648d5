"""The fmtsim command: outputs checked against spec numbers, exit codes."""

import subprocess
import sys

import pytest

from fmtsim.cli import main


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_formats(capsys):
    rc, out, _ = run(capsys, "formats")
    assert rc == 0
    assert "e4m3" in out and "448" in out and "57344" in out and "2^-127" in out


def test_formats_lists_the_ml_dtypes_fp8_variants(capsys):
    rc, out, _ = run(capsys, "formats")
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.strip()}
    # name bits exp man bias max_finite ...: ml_dtypes 0.6 README / LLVM APFloat definitions
    assert rows["e4m3ieee"][1:6] == ["8", "4", "3", "7", "240"] and "float8_e4m3" in rows["e4m3ieee"]
    assert rows["e3m4"][1:6] == ["8", "3", "4", "3", "15.5"]
    assert rows["e4m3b11fnuz"][1:6] == ["8", "4", "3", "11", "30"]
    assert rows["int2"][5] == "1" and rows["uint2"][5] == "3"


def test_table_csv_ieee_e4m3(capsys):
    rc, out, _ = run(capsys, "table", "float8_e4m3", "--csv")
    lines = out.strip().splitlines()
    assert rc == 0 and len(lines) == 257
    assert lines[1 + 0x77] == "0x77,0.1110.111,normal,0x1.ep+7,240"
    assert lines[1 + 0x78] == "0x78,0.1111.000,inf,inf,inf"
    assert lines[1 + 0x79].split(",")[2] == "nan"


def test_table_csv(capsys):
    rc, out, _ = run(capsys, "table", "e2m1", "--csv")
    lines = out.strip().splitlines()
    assert rc == 0 and len(lines) == 17
    assert lines[0] == "code,bits,class,hex_value,value"
    assert lines[8] == "0x7,0.11.1,normal,0x1.8p+2,6"


def test_encode_shows_tie_and_neighbours(capsys):
    rc, out, _ = run(capsys, "encode", "e4m3", "464", "0.1")
    assert rc == 0
    row = [line for line in out.splitlines() if line.startswith("464")][0]
    assert "0x7E" in row and "inexact" in row
    row = [line for line in out.splitlines() if line.startswith("0.1 ")][0]
    # 0.1 lies between 0x1C (0.09375) and 0x1D (0.1015625) and is nearer the latter
    assert "0x1C (0.09375)" in row and "0x1D (0.1015625)" in row
    rc, out, _ = run(capsys, "encode", "e2m1", "5")
    row = [line for line in out.splitlines() if line.startswith("5")][0]
    assert "0x6" in row and " yes " in row  # 5.0 is a tie -> 4.0
    rc, out, _ = run(capsys, "encode", "e4m3", "1000")
    assert "saturated" in out and "0x7E" in out


def test_encode_exact_decimal_input(capsys):
    # an exact decimal just above the E4M3 tie 1.0625: float64 would also see it, but
    # the CLI reads the decimal exactly
    rc, out, _ = run(capsys, "encode", "e4m3", "1.06250000000000000000000001")
    assert "0x39" in out


def test_decode(capsys):
    rc, out, _ = run(capsys, "decode", "e4m3fnuz", "0x80", "0x7f", "127")
    assert rc == 0
    assert "nan" in out and "240" in out


@pytest.mark.parametrize("argv", [
    ("encode", "fp9", "1"),
    ("decode", "e2m1", "0x1f"),
    ("decode", "e4m3", "zz"),
    ("encode", "e4m3", "abc"),
    ("encode", "e2m1", "nan"),
    ("table", "nope"),
])
def test_usage_errors_exit_2(capsys, argv):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and err.startswith("fmtsim: error:")


def test_unknown_format_lists_names(capsys):
    rc, _, err = run(capsys, "table", "fp8")
    assert "e4m3" in err and "e5m2fnuz" in err


def test_module_entry_point():
    r = subprocess.run([sys.executable, "-m", "fmtsim", "decode", "e8m0", "0xfe"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "2^127" not in r.stdout and "0x1p+127" in r.stdout


def test_conform_quick_passes(capsys):
    rc, out, _ = run(capsys, "conform", "--quick", "--formats", "e4m3", "e2m1")
    assert rc == 0
    assert "0 unexpected failures" in out
    assert "vectors (committed .tv)" in out and "golden vectors:" in out
    rc, _, err = run(capsys, "conform", "--quick", "--vectors", "/nonexistent-dir")
    assert rc == 2 and "no manifest.json" in err
