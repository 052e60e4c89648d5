"""Every example in README.md and in the documentation pages (docs/**/*.md, the site mkdocs builds)
runs as written, against the installed fmtsim, from an empty directory.

- A ```python block runs in a fresh namespace, with a temporary directory as the working directory;
  a block written as a ``>>>`` session runs as a doctest, so every output it shows is checked.
  A block whose first line is ``# NAME.py ...`` is a file the reader is asked to write: here it is
  only compiled; the console blocks of the same page run it, with every such file of the page saved
  in their directory.
- A ```console block's ``$`` lines run in a shell in that directory, with the environment's
  ``fmtsim`` first on PATH; the lines under a command are its expected output, compared line by
  line (trailing spaces ignored). A line ``...`` stands for any number of lines, and a ``…`` in a
  line for one field that changes from run to run (a time in seconds). A trailing ``...`` also takes
  the progress lines a long command writes to stderr when it runs slowly (``fmtsim compare``: one
  line every 5 seconds, none on a quick run). The exit status must be the
  one the block shows with ``# exit N`` after the command, else 0; a traceback or a Python warning
  on stderr fails the block.
- ```sh blocks are installation commands and are not run here (CI runs them).
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
_FILE_BLOCK = re.compile(r"# ([\w.-]+\.py)\b")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _blocks(kind: str, pages: list[Path] = PAGES) -> list[tuple[str, int, str]]:
    """(page, line, code) of every fenced block of this kind."""
    out = []
    for page in pages:
        text = page.read_text()
        for m in FENCE.finditer(text):
            if m.group(1) == kind:
                out.append((_name(page), text.count("\n", 0, m.start()) + 1, m.group(2)))
    return out


def _files_for_console(page: str) -> dict[str, str]:
    files = {}
    for _, _, code in _blocks("python", [ROOT / page]):
        first = code.splitlines()[0] if code else ""
        m = _FILE_BLOCK.match(first.strip())
        if m:
            files[m.group(1)] = code
    return files


PYTHON_BLOCKS = _blocks("python")
CONSOLE_BLOCKS = _blocks("console")


def test_readme_has_examples():
    readme = _name(README)
    assert sum(p == readme for p, _, _ in PYTHON_BLOCKS) >= 3 and sum(p == readme for p, _, _ in CONSOLE_BLOCKS) >= 4
    assert len(PYTHON_BLOCKS) >= 8 and len(CONSOLE_BLOCKS) >= 8


@pytest.mark.parametrize("page,line,code", PYTHON_BLOCKS, ids=[f"{p}:{n}" for p, n, _ in PYTHON_BLOCKS])
def test_python_block_runs(page, line, code, tmp_path, monkeypatch):
    where = f"{page}:{line}"
    if _FILE_BLOCK.match(code):
        compile(code, where, "exec")
        return
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    if code.startswith(">>> "):
        test = doctest.DocTestParser().get_doctest(code, {}, where, str(ROOT / page), line)
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        runner.run(test, out=lambda text: pytest.fail(text, pytrace=False))
        assert runner.summarize(verbose=False).attempted > 0
        return
    namespace = {"__name__": f"doc_block_{line}"}
    exec(compile(code, where, "exec"), namespace)


def _line_matches(expected: str, actual: str) -> bool:
    if "…" not in expected:
        return expected == actual
    return re.fullmatch(r"\S+".join(re.escape(part) for part in expected.split("…")), actual) is not None


def _matches(expected: list[str], actual: list[str]) -> bool:
    """Line-by-line equality where an expected '...' line takes any run of actual lines (and a '…'
    within a line any one field)."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(_matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and _line_matches(expected[0], actual[0]) and _matches(expected[1:], actual[1:])


def _commands(block: str) -> list[tuple[str, int, list[str]]]:
    """(command, expected exit status, expected output lines) for each '$' line."""
    out: list[tuple[str, int, list[str]]] = []
    for raw in block.splitlines():
        if raw.startswith("$ "):
            cmd = raw[2:]
            status = 0
            m = re.search(r"\s+# exit (\d+)$", cmd)
            if m:
                status, cmd = int(m.group(1)), cmd[: m.start()]
            out.append((cmd, status, []))
        elif out:
            out[-1][2].append(raw.rstrip())
    return out


@pytest.mark.parametrize("page,line,block", CONSOLE_BLOCKS, ids=[f"{p}:{n}" for p, n, _ in CONSOLE_BLOCKS])
def test_console_block_runs(page, line, block, tmp_path):
    where = f"{page}:{line}"
    for name, code in _files_for_console(page).items():
        (tmp_path / name).write_text(code)
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(tmp_path)
    env["COLUMNS"] = "200"
    for cmd, status, expected in _commands(block):
        cmd = re.sub(r"^python\b", sys.executable, cmd)
        r = subprocess.run(cmd, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert "Traceback" not in r.stderr, f"{where}: {cmd}\n{r.stderr}"
        assert not re.search(r"\w+Warning: ", r.stderr), f"{where}: {cmd} warns\n{r.stderr}"
        assert r.returncode == status, f"{where}: {cmd} exited {r.returncode}\n{r.stdout}\n{r.stderr}"
        if expected:
            actual = [s.rstrip() for s in (r.stdout + r.stderr).splitlines()]
            assert _matches(expected, actual), (
                f"{where}: {cmd}\n--- README shows\n" + "\n".join(expected)
                + "\n--- fmtsim printed\n" + "\n".join(actual))


def test_project_cites_only_itself():
    """Docs and code cite the project's own docs (docs/rules.md) and primary sources, never notes that
    live outside the repository."""
    root = README.parent
    paths = [README, *root.glob("docs/**/*.md"), *root.glob("vectors/README.md"), *root.glob("fmtsim/**/*.py"),
             *root.glob("tools/**/*.py"), *root.glob("tools/c/*.c")]
    for p in paths:
        text = p.read_text()
        for word in ("SPEC_NOTES", "../shared", "shared/DESIGN"):
            assert word not in text, f"{p.relative_to(root)} cites {word}"


def _number(cell: str):
    from fractions import Fraction

    cell = cell.split(" step")[0].strip()
    if cell.startswith("2^"):
        return Fraction(2) ** int(cell[2:])
    return Fraction(cell)


def test_format_table_agrees_with_the_records():
    """The format table (docs/formats.md) is typed by hand: its numbers must be the records' derived ones."""
    import fmtsim

    section = (ROOT / "docs" / "formats.md").read_text().split("# Formats\n", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in section.splitlines() if ln.startswith("| ")]
    checked = set()
    for name_cell, _bits, mx, mn, sub, *_ in rows[1:]:
        name = name_cell.split()[0].rstrip(",")
        if name not in fmtsim.FORMATS or "," in name_cell:
            continue
        f = fmtsim.FORMATS[name]
        assert _number(mx) == f.max_finite, name
        assert (mn == "-" and f.min_normal is None) or _number(mn) == f.min_normal, name
        if f.kind == "float":
            assert (sub == "-" and f.min_subnormal is None) or _number(sub) == f.min_subnormal, name
        checked.add(name)
    assert {"e4m3", "e4m3ieee", "e3m4", "e4m3b11fnuz", "e8m0"} <= checked


def test_readme_is_short_and_links_every_page():
    """A newcomer reads the README in five minutes: under 300 lines, the two commands, a quick start
    per job, then links; every documentation page is reachable from it or from the site's nav."""
    text = README.read_text()
    assert len(text.splitlines()) < 300
    for job in ("check a conversion kernel", "check a GEMM kernel", "convert a checkpoint", "write vectors"):
        assert f"## Quick start: {job}" in text, job
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / target).is_file(), target


def test_every_page_is_in_the_site_nav():
    """mkdocs.yml's nav names every docs page (mkdocs --strict in CI refuses one left out; this says
    so without mkdocs installed), and nothing it names is missing."""
    nav = re.findall(r":\s+([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert set(nav) == pages, (sorted(pages - set(nav)), sorted(set(nav) - pages))
