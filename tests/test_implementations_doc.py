"""docs/implementations.md is generated (tools/gen_implementations.py) and must be current."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("gen_implementations", ROOT / "tools" / "gen_implementations.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_implementations"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_the_committed_matrix_is_current():
    doc = ROOT / "docs" / "implementations.md"
    if not doc.exists():
        pytest.skip("no docs/ beside the tests (not a checkout)")
    stale = "docs/implementations.md is stale: run python tools/gen_implementations.py"
    assert doc.read_text() == _tool().render(), stale


def test_every_registered_entry_point_is_a_column_and_cells_are_computed():
    from fmtsim.conformance.impls import registry

    tool = _tool()
    cols = tool.columns()
    labels = [c.label for c in cols]
    assert len(set(labels)) == len(labels)
    assert {c.impl.name for c in cols} == {n for n, i in registry().items() if "encode" in i.capabilities} | {"fmtsim"}
    e4m3_nan = next(b for b in tool.BEHAVIOURS if b.name.startswith("NaN input -> E4M3"))
    fmtsim_default = cols[0]
    assert tool.cell(fmtsim_default, e4m3_nan) == "0x7F (NaN), 0xFF (-NaN)"


def test_the_conformance_page_shows_the_headline_rows_and_links_the_matrix():
    assert "docs/implementations.md" in (ROOT / "README.md").read_text()
    page = (ROOT / "docs" / "conformance.md").read_text()
    assert "implementations.md" in page
    for name in _tool().headline_rows():
        assert name in page, name
