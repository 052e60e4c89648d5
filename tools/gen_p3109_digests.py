"""Digests of IEEE P3109's own value tables, for tests/test_p3109.py.

The P3109 working group publishes a value table per format (github.com/P3109/Public, "Value
Tables/Hexadecimal/K{K}/P{P}/{signed,unsigned}/Binary{K}p{P}{s,u}{e,f}.csv": code point, value as
a C99 hex float or Inf/-Inf/NaN, and a subnormal mark) for K = 3..16. fmtsim does not copy them:
this tool reads a checkout of that repository and writes, per format (504 of them), the SHA-256 of
the table in a canonical form (:func:`canonical`); the test computes the same form from fmtsim's
exact value of every code and compares digests.

    python tools/gen_p3109_digests.py --public /path/to/P3109-Public [--commit SHA]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "p3109" / "value_table_digests.json"
WIDTHS = range(3, 17)
#: kind column of the canonical form
FINITE, PLUS_INF, MINUS_INF, NAN = range(4)
_HEX = re.compile(r"(-?)0x([0-9a-fA-F]+)(?:\.([0-9a-fA-F]*))?p([+-]?\d+)")


def canonical(kind: np.ndarray, negative: np.ndarray, sig: np.ndarray, exp2: np.ndarray,
              subnormal: np.ndarray) -> bytes:
    """Five little-endian int64 columns, one row per code: kind (FINITE, PLUS_INF, MINUS_INF, NAN),
    sign, and a finite value as (-1)^sign * m * 2^e with m odd (m = e = 0 for zero; 0 elsewhere),
    then the subnormal mark (0/1): the same bytes whoever computes the values, whatever their range."""
    sig = np.where(kind == FINITE, sig, 0).astype(np.int64)
    exp2 = np.where(sig != 0, exp2, 0).astype(np.int64)
    tz = np.zeros(sig.shape, np.int64)
    nz = sig != 0
    low = sig[nz] & -sig[nz]  # the lowest set bit: 2^(trailing zeros)
    tz[nz] = np.log2(low).astype(np.int64)
    cols = (kind, negative & (kind == FINITE), sig >> tz, exp2 + tz, subnormal)
    return np.stack([np.asarray(c, np.int64) for c in cols], axis=1).astype("<i8").tobytes()


def parse_value(text: str) -> tuple[int, bool, int, int]:
    """(kind, negative, significand, exponent) of one table value, exactly."""
    t = text.strip()
    if t in ("NaN", "Inf", "-Inf"):
        return {"NaN": NAN, "Inf": PLUS_INF, "-Inf": MINUS_INF}[t], t == "-Inf", 0, 0
    m = _HEX.fullmatch(t)
    if m is None:
        raise ValueError(f"not a hex float: {text!r}")
    frac = m[3] or ""
    return FINITE, m[1] == "-", int(m[2] + frac, 16), int(m[4]) - 4 * len(frac)


def read_table(path: Path) -> bytes:
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    if rows[0] != ["codepoint", "value", "subnormal"]:
        raise SystemExit(f"{path}: unexpected header {rows[0]}")
    if [int(r[0], 16) for r in rows[1:]] != list(range(len(rows) - 1)):
        raise SystemExit(f"{path}: code points are not 0, 1, 2, ...")
    try:
        parsed = [parse_value(r[1]) for r in rows[1:]]
    except ValueError as e:
        raise SystemExit(f"{path}: {e}") from None
    kind, negative, sig, exp2 = (np.array(col, dtype=np.int64) for col in zip(*parsed, strict=True))
    subnormal = np.array([r[2].strip() == "*" for r in rows[1:]])
    return canonical(kind, negative.astype(bool), sig, exp2, subnormal)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--public", type=Path, required=True, help="a checkout of github.com/P3109/Public")
    ap.add_argument("--commit", help="the commit of that checkout, recorded in the output (default: git's)")
    args = ap.parse_args(argv)
    base = args.public / "Value Tables" / "Hexadecimal"
    if not base.is_dir():
        raise SystemExit(f"{args.public}: no 'Value Tables/Hexadecimal' folder; is it a P3109/Public checkout?")
    commit = args.commit or subprocess.run(["git", "-C", str(args.public), "rev-parse", "HEAD"],
                                           capture_output=True, text=True).stdout.strip() or "unknown"
    digests = {}
    for k in WIDTHS:
        for signed in (True, False):
            for p in range(1, k if signed else k + 1):
                for dom in "ef":
                    name = f"Binary{k}p{p}{'s' if signed else 'u'}{dom}"
                    path = base / f"K{k}" / f"P{p}" / ("signed" if signed else "unsigned") / f"{name}.csv"
                    if not path.is_file():
                        raise SystemExit(f"{path}: missing")
                    digests[name.lower()] = hashlib.sha256(read_table(path)).hexdigest()
    doc = {"source": "github.com/P3109/Public, Value Tables/Hexadecimal (interim report v4.0)",
           "commit": commit, "canonical": "per code, five little-endian int64: kind (0 finite, 1 +Inf, 2 -Inf, 3 NaN), "
                        "sign, odd significand m and exponent e of a finite value m*2^e (0, 0 for zero), "
                        "subnormal (0|1)",
           "sha256": digests}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=OUT.parent, prefix=".digests.")
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, OUT)
    print(f"wrote {OUT} ({len(digests)} formats, commit {commit})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
