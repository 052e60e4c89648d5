"""Statements of README.md and the documentation pages (docs/) that no example block runs, held to
what fmtsim does: the NVFP4 worked example's read-back, the E8M0 tie notes of ``fmtsim diff``, the
exit status into a closed pipe, the stated test-command time and the robustness tests' case counts."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fmtsim
from fmtsim import nvfp4

ROOT = Path(__file__).resolve().parent.parent
# the README and every documentation page as one text, line breaks as spaces
README = " ".join(" ".join(p.read_text().split()) for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])


def _shown(values: np.ndarray) -> str:
    """A list of float32 values as the README prints them (numpy's shortest round-trip digits)."""
    return "[" + ", ".join(str(np.float32(v)) for v in values) + "]"


def test_nvfp4_worked_example_read_back_as_the_readme_says():
    x = np.zeros(16, np.float32)
    x[:4] = [0.3, -1.2, 2.4, 5.0]
    one = {r: nvfp4.dequantize(nvfp4.quantize(x, global_scale=1.0, recipe=r))[:4] for r in nvfp4.RECIPES}
    assert _shown(one["te"]) == _shown(one["torchao"]) == "[0.40625, -1.21875, 2.4375, 4.875]"
    assert f"NVFP4 with `global_scale=1.0` → {_shown(one['te'])}" in README
    default = {r: nvfp4.dequantize(nvfp4.quantize(x, recipe=r))[:4] for r in nvfp4.RECIPES}
    assert (f"TE's recipe reads back {_shown(default['te'])} and torchao's {_shown(default['torchao'])}"
            in README), (_shown(default["te"]), _shown(default["torchao"]))


def test_e8m0_tie_notes_name_the_codes_each_rule_gives():
    """rne ties go to the even code (the biased exponent), ml_dtypes' rule up: the notes of
    ``fmtsim diff`` and the README's 3 = 1.5 * 2^1 example say which codes those are."""
    from fmtsim.conformance.diff import DIVERGENCE_SET

    ties = [(v, note) for fmt, v, _, note in DIVERGENCE_SET if fmt == "e8m0" and note.startswith("tie")]
    assert len(ties) >= 2
    for v, note in ties:
        even = int(re.search(r"the even code 0x([0-9A-F]{2})", note).group(1), 16)  # type: ignore[union-attr]
        up = int(re.search(r"up \(0x([0-9A-F]{2})", note).group(1), 16)  # type: ignore[union-attr]
        assert even % 2 == 0 and up == even + 1, note
        assert fmtsim.encode(np.float32(v), "e8m0").item() == even, note
        assert fmtsim.encode(np.float32(v), "e8m0", profile="ml_dtypes").item() == up, note
    three = fmtsim.encode(np.float32(3.0), "e8m0").item()
    assert three == 0x80 and fmtsim.decode(np.uint8(three), "e8m0") == 2.0
    assert "3 = 1.5·2^1 lies between 2 (0x80) and 4 (0x81) and gives 2" in README


def test_output_into_a_closed_pipe_exits_141():
    """The reader is gone before fmtsim writes (the read end closed first), so the outcome does not
    depend on the pipe's buffer: 141, as a program killed by SIGPIPE reports, and no traceback."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "fmtsim", "table", "e4m3"], stdout=w, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    finally:
        os.close(w)
    assert p.returncode == 141 and p.stderr == "", (p.returncode, p.stderr)
    assert "141 (as a program killed by SIGPIPE reports)" in README


def test_test_command_time_stated_once():
    """The test command's line and the measured paragraph give the same time."""
    m = re.search(r"pytest -q -n auto # run the tests \((\d+) min (\d+) s on 2 cores", README)
    measured = re.search(r"from a copy of the checkout: (\d+) s \(", README)
    assert m and measured
    assert int(m.group(1)) * 60 + int(m.group(2)) == int(measured.group(1)) < 180


def _hypothesis_counts(path: Path) -> tuple[int, int]:
    """(full, fast) examples summed over the file's @given tests, read from their settings:
    ``examples(n)`` (conftest) is n under --full and max(10, n // 4) otherwise."""
    tree = ast.parse(path.read_text())
    consts: dict[str, int] = {}
    for node in tree.body:  # NAME = examples(n), NAME = settings(max_examples=...)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            consts[node.targets[0].id] = _examples_of(node.value, consts)  # type: ignore[assignment]
    full = fast = 0
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        decos = node.decorator_list
        if not any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "given" for d in decos):
            continue
        assert not any("parametrize" in ast.unparse(d) for d in decos), f"{node.name}: parametrized @given"
        n = [x for x in (_examples_of(d, consts) for d in decos) if x is not None]
        assert len(n) == 1, f"{node.name}: no max_examples found"
        full, fast = full + n[0], fast + max(10, n[0] // 4)
    return full, fast


def _examples_of(node: ast.expr, consts: dict[str, int]) -> int | None:
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    if isinstance(node, ast.Call):
        name = getattr(node.func, "id", "")
        if name == "examples":
            return int(ast.literal_eval(node.args[0]))
        if name == "settings":
            for kw in node.keywords:
                if kw.arg == "max_examples":
                    return _examples_of(kw.value, consts)
    return None


def test_readme_robustness_counts_are_current():
    counts = [_hypothesis_counts(p) for p in sorted((ROOT / "tests").glob("test_robustness_*.py"))]
    full, fast = sum(c[0] for c in counts), sum(c[1] for c in counts)
    assert f"{full:,} cases in a full run" in README, full
    assert f"README's test command ({fast:,} cases" in README, fast


@pytest.mark.parametrize("name", ["test_robustness_codec.py", "test_robustness_blocks.py"])
def test_robustness_count_reader_sees_every_hypothesis_test(name):
    """The count above reads every @given test of the file (a test it skipped would not be counted)."""
    text = (ROOT / "tests" / name).read_text()
    given = len(re.findall(r"^@given\(", text, re.M))
    tree = ast.parse(text)
    found = sum(1 for n in tree.body if isinstance(n, ast.FunctionDef)
                and any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "given" for d in n.decorator_list))
    assert given == found > 0


def test_the_stated_vector_count_and_size_are_the_committed_ones():
    import json

    manifest = ROOT / "vectors" / "manifest.json"
    files = json.loads(manifest.read_text())["files"]
    size = sum((ROOT / "vectors" / f).stat().st_size for f in files) + manifest.stat().st_size
    assert f"level-1 golden vectors ({len(files)} files, {size / 1e6:.1f} MB with the manifest" in README
