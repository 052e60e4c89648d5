#!/usr/bin/env python3
"""Regenerate the committed level-1 golden vectors in vectors/ (and manifest.json).

    python tools/gen_vectors.py            # write
    python tools/gen_vectors.py --check    # exit 1 if a committed file or the manifest is stale

vectors/README.md is written by hand and left alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from fmtsim.conformance.vectors import level1_files, manifest_text, write_vectors

OUT = Path(__file__).resolve().parent.parent / "vectors"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    files = level1_files()
    if not args.check:
        write_vectors(files, OUT, 1, merge=False)
        print(f"wrote {len(files)} files to {OUT}")
        return 0
    stale = []
    manifest = json.loads((OUT / "manifest.json").read_text()) if (OUT / "manifest.json").exists() else {}
    listed = manifest.get("files", {})
    for f in files:
        path = OUT / f.name
        digest = hashlib.sha256(f.text).hexdigest()
        if not path.exists() or path.read_bytes() != f.text or listed.get(f.name, {}).get("sha256") != digest:
            stale.append(f.name)
    extra = sorted(set(listed) - {f.name for f in files})
    if (OUT / "manifest.json").exists() and (OUT / "manifest.json").read_bytes() != manifest_text(files, 1):
        stale.append("manifest.json")
    for name in stale + extra:
        print(f"stale: vectors/{name}")
    return 1 if stale or extra else 0


if __name__ == "__main__":
    sys.exit(main())
