"""``onnx_spec``: the ONNX Cast operator's own tables, read from the installed onnx's Cast schema
(``onnx.defs.get_schema("Cast").doc``), against fmtsim's ``onnx_spec_sat`` / ``onnx_spec_nosat``
profiles.

The FP8 tables (saturate=1 and saturate=0; columns E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) and the
E8M0 table ("saturate + up", "non-saturate + nearest") are parsed cell by cell; each row becomes
inputs (``0``, ``-0``, ``NaN``, ``-NaN``, ``Inf``, ``-Inf``, values past the largest finite, below
the smallest E8M0, and for ``else``/``RNE`` every boundary point of the format), and each cell's
meaning (``0``, ``-0``, ``NaN``, ``-NaN``, ``Inf``, ``FLT_MAX``, ``E8M0_MIN``, ``RNE``...) is the code
fmtsim must give. ``Unspecified`` cells are not checked. (The reference evaluator and
onnxruntime are the implementations ``onnx`` and ``onnxruntime``: each differs from the table.)
"""

from __future__ import annotations

import re

import numpy as np

from ...codec import encode
from ...formats import get_format
from ..models import boundary_points
from ..plugin import Implementation, Request
from ..rows import Row

COLUMNS = {"E4M3FN": "e4m3", "E4M3FNUZ": "e4m3fnuz", "E5M2": "e5m2", "E5M2FNUZ": "e5m2fnuz"}


def tables() -> list[tuple[list[str], list[list[str]]]]:
    """Every markdown table of the installed onnx's Cast doc: (header cells, rows of cells)."""
    import onnx

    doc = onnx.defs.get_schema("Cast").doc or ""
    out: list[tuple[list[str], list[list[str]]]] = []
    lines = doc.splitlines() + [""]
    block: list[list[str]] = []
    for ln in lines:
        if ln.strip().startswith("|"):
            block.append([c.strip() for c in ln.strip().strip("|").split("|")])
        elif block:
            header, rows = block[0], [r for r in block[2:] if r]
            out.append((header, rows))
            block = []
    return out


def _inputs(label: str, fmt: str) -> np.ndarray | None:
    f = get_format(fmt)
    top = float(f.max_finite)
    big = 2.0 ** (np.floor(np.log2(top)) + 2)
    label = label.replace("\\", "")
    table = {"0": [0.0], "-0": [-0.0], "NaN": [np.nan], "-NaN": [-np.nan], "Inf": [np.inf], "-Inf": [-np.inf],
             "[x] > FLT_MAX": [big, 1e30], "[x] < -FLT_MAX": [-big, -1e30],
             "x > E8M0_MAX": [2.0**128 * 0.99, 3e38], "x < E8M0_MIN": [2.0**-128, 1e-40]}
    if label in table:
        return np.array(table[label], np.float32)
    if label == "else":
        x = boundary_points(fmt, np.float32)
        with np.errstate(invalid="ignore"):
            x64 = x.astype(np.float64)
        return x[np.isfinite(x64) & (np.abs(x64) <= top)]
    return None  # "x < 0" and other rows the table leaves unspecified for E8M0


def _want(cell: str, x: np.ndarray, fmt: str, rounding: str) -> np.ndarray | None:
    """The codes the cell means for ``x`` (-1: any NaN of the input's sign, -2: any NaN), or None."""
    f = get_format(fmt)
    pos_max = int(encode(np.float32(f.max_finite), fmt))
    if cell == "RNE" or cell == "RNE ":
        return np.asarray(encode(x, fmt, rounding="rne", overflow="nonsat"), np.int64)
    codes = {"0": 0, "-0": f.sign_mask if fmt in ("e4m3", "e5m2") else 0, "FLT_MAX": pos_max,
             "-FLT_MAX": pos_max | f.sign_mask, "E8M0_MAX": 0xFE, "E8M0_MIN": 0x00,
             "Inf": 0x7C, "-Inf": 0xFC, "NaN": -2 if f.specials == "fnuz" or fmt == "e8m0" else -1,
             "-NaN": -1}
    if cell not in codes:
        return None
    return np.full(x.shape, codes[cell], np.int64)


def spec_rows() -> list[Row]:
    rows: list[Row] = []
    for header, body in tables():
        if header[0] != "x":
            continue
        if header[1:] and header[1].strip() in COLUMNS:  # an FP8 table: saturate=1 comes first
            seen_fp8 = sum(1 for r in rows if r.model.startswith("Cast table FP8"))
            saturate = seen_fp8 == 0
            columns = [(COLUMNS[h.strip()], "onnx_spec_sat" if saturate else "onnx_spec_nosat", "rne")
                       for h in header[1:]]
            model = f"Cast table FP8 saturate={int(saturate)}"
        elif any("saturate" in h for h in header[1:]):  # the E8M0 table
            columns = [("e8m0", "onnx_spec_sat" if h.startswith("saturate") else "onnx_spec_nosat",
                        "rup" if "up" in h else "rne") for h in header[1:]]
            model = "Cast table E8M0"
        else:
            continue
        for j, (fmt, profile, rounding) in enumerate(columns):
            row = next((r for r in rows if r.fmt == fmt and r.model == model), None)
            if row is None:
                row = Row("onnx_spec", fmt, model)
                rows.append(row)
            for cells in body:
                x = _inputs(cells[0], fmt)
                if x is None or j + 1 >= len(cells):
                    continue
                cell = re.sub(r"\s+", " ", cells[j + 1]).strip()
                want = _want(cell, x, fmt, rounding)
                if want is None:
                    continue
                got = np.asarray(encode(x, fmt, profile=profile), np.int64).reshape(-1)
                f = get_format(fmt)
                is_nan = np.isin(got, list(f.nan_codes))
                neg = np.signbit(x)
                ok = np.where(want == -2, is_nan,
                              np.where(want == -1, is_nan & (((got & f.sign_mask) != 0) == neg), got == want))

                def describe(i: int, x: np.ndarray = x, got: np.ndarray = got, cell: str = cell,
                             label: str = cells[0], profile: str = profile) -> str:
                    return f"row {label!r} cell {cell!r}: input {x[i]!r}, fmtsim[{profile}] {int(got[i]):#x}"

                row.add(ok, {}, describe)
    return rows


class OnnxSpec(Implementation):
    name = "onnx_spec"
    summary = "the ONNX Cast operator's special-value tables (FP8 saturate=1/0, E8M0), read from onnx"
    requires = ("onnx",)
    install = 'pip install "fmtsim[peers]"'
    capabilities = ("oracle",)
    profiles = ("onnx_spec_sat", "onnx_spec_nosat")
    checked_with = "onnx 1.23 (Cast, opset 25)"

    def oracle_rows(self, req: Request) -> list[Row]:
        return [r for r in spec_rows() if r.fmt in req.names]


IMPLEMENTATIONS = [OnnxSpec()]
