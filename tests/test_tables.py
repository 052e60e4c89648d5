"""fmtsim.tables: tables fit a terminal by wrapping between words, and stay whole elsewhere."""

import io
import re

import pytest

from fmtsim import tables
from fmtsim.cli import main

ROWS = [["mmasim", "cdna3_mfma_fp8 e4m3fnuzxe4m3fnuz [CDNA3 f32_32x32x16_fp8_fp8]", "zero_blocks", "512", "0"],
        ["apfloat[rne]", "e2m1", "encode_ties", "464",
         "torch.e8m0_zero_and_sign: 2,134,900,737; torch.e8m0_subnormal_ties_up: 4,194,302"]]
HEADERS = ["implementation", "format", "model", "cases", "known divergences"]


def _words(text):
    return set(re.findall(r"\S+", text))


def test_a_wide_table_fits_by_wrapping_between_words():
    whole = tables.table(ROWS, HEADERS, width=10_000)
    assert max(map(len, whole.splitlines())) > 150  # on one line each
    fitted = tables.table(ROWS, HEADERS, width=100)
    assert max(map(len, fitted.splitlines())) <= 100
    cells = {w for r in ROWS for c in r for w in c.split()}
    assert cells <= _words(fitted)  # every word whole: nothing cut inside a name or a number


def test_a_table_that_cannot_narrow_keeps_its_words():
    fitted = tables.table(ROWS, HEADERS, width=20)
    assert {w for r in ROWS for c in r for w in c.split()} <= _words(fitted)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_only_a_terminal_sets_a_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "90")
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert tables.output_width() is None  # a pipe or a file: whole rows for grep and diff
    monkeypatch.setattr("sys.stdout", _Terminal())
    assert tables.output_width() == 90


@pytest.mark.parametrize("argv", [["formats"], ["table", "e5m2"]])
def test_commands_fit_a_narrow_terminal(monkeypatch, argv):
    out = _Terminal()
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr("sys.stdout", out)
    assert main(argv) == 0
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) <= 100, [ln for ln in lines if len(ln) > 100]


def test_columns_left_out_are_named_and_a_pipe_gets_them_all(monkeypatch, capsys):
    out = _Terminal()
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr("sys.stdout", out)
    assert main(["formats"]) == 0
    text = " ".join(out.getvalue().split())
    assert "(left out to fit the terminal: description," in text
    monkeypatch.undo()
    assert main(["formats"]) == 0
    piped = capsys.readouterr().out
    assert "description" in piped.splitlines()[0] and "left out" not in piped
