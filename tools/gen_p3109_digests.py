"""Digests of IEEE P3109's own value tables, for tests/test_p3109.py.

The P3109 working group publishes a value table per format (github.com/P3109/Public, "Value
Tables/Hexadecimal/K{K}/P{P}/{signed,unsigned}/Binary{K}p{P}{s,u}{e,f}.csv": code point, value as
a C99 hex float or Inf/-Inf/NaN, and a subnormal mark). fmtsim does not copy them: this tool reads
a checkout of that repository and writes, per format fmtsim builds (K 3..8), the SHA-256 of the
table in a canonical form (:func:`canonical`); the test renders fmtsim's decode of every code the
same way and compares digests.

    python tools/gen_p3109_digests.py --public /path/to/P3109-Public [--commit SHA]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "p3109" / "value_table_digests.json"


def canonical(rows: list[tuple[int, str, bool]]) -> bytes:
    """One line per code: ``code,value,subnormal`` with the value as Python's float.hex() (or nan,
    inf, -inf) and subnormal 0/1: the same text whoever renders the table."""
    return "".join(f"{c},{v},{int(s)}\n" for c, v, s in rows).encode()


def value_text(text: str) -> str:
    t = text.strip()
    if t in ("NaN", "Inf", "-Inf"):
        return {"NaN": "nan", "Inf": "inf", "-Inf": "-inf"}[t]
    return float.fromhex(t).hex()


def read_table(path: Path) -> list[tuple[int, str, bool]]:
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    if rows[0] != ["codepoint", "value", "subnormal"]:
        raise SystemExit(f"{path}: unexpected header {rows[0]}")
    out = [(int(r[0], 16), value_text(r[1]), r[2].strip() == "*") for r in rows[1:]]
    if [c for c, _, _ in out] != list(range(len(out))):
        raise SystemExit(f"{path}: code points are not 0, 1, 2, ...")
    return out


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
    for k in range(3, 9):
        for signed in (True, False):
            for p in range(1, k if signed else k + 1):
                for dom in "ef":
                    name = f"Binary{k}p{p}{'s' if signed else 'u'}{dom}"
                    path = base / f"K{k}" / f"P{p}" / ("signed" if signed else "unsigned") / f"{name}.csv"
                    if not path.is_file():
                        raise SystemExit(f"{path}: missing")
                    digests[name.lower()] = hashlib.sha256(canonical(read_table(path))).hexdigest()
    doc = {"source": "github.com/P3109/Public, Value Tables/Hexadecimal (interim report v4.0)",
           "commit": commit, "canonical": "code,float.hex(value)|nan|inf|-inf,subnormal(0|1) per line",
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
