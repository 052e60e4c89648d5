"""Write docs/implementations.md: what each implementation does, behaviour by behaviour.

Every cell is computed, not typed: the behaviour's input is encoded by fmtsim under the
profile (and options) the implementation's entry point is held to, which `fmtsim conform
--impl NAME` checks bit for bit against the implementation itself; a cell whose input falls
inside one of the entry point's named divergences (a bug) says so. Columns are the entry
points of the implementations registered in fmtsim.conformance.impls, with the versions
their profiles were read off. tests/test_implementations_doc.py fails when the committed
file differs from what this script writes.

    python tools/gen_implementations.py            # rewrite docs/implementations.md
    python tools/gen_implementations.py --check    # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import fmtsim
from fmtsim.conformance.adapters import Adapter
from fmtsim.conformance.impls import registry
from fmtsim.conformance.plugin import Implementation, Request
from fmtsim.formats import Format, get_format

OUT = Path(__file__).resolve().parent.parent / "docs" / "implementations.md"


@dataclass(frozen=True)
class Behaviour:
    name: str  # the row's label
    fmt: str
    inputs: tuple[float, ...]  # float32 inputs, one cell shows them all
    headline: bool = False  # shown in the README too
    flags: bool = False  # the cell shows the exception flags (entry points that report them)


BEHAVIOURS = (
    Behaviour("NaN input -> E4M3 (+NaN, -NaN)", "e4m3", (np.nan, -np.nan), True),
    Behaviour("NaN input -> E5M2 (+NaN, -NaN)", "e5m2", (np.nan, -np.nan), True),
    Behaviour("NaN input -> E2M1 (+NaN, -NaN)", "e2m1", (np.nan, -np.nan)),
    Behaviour("NaN input -> E8M0 (+NaN, -NaN)", "e8m0", (np.nan, -np.nan)),
    Behaviour("overflow -> E4M3 (500, -500)", "e4m3", (500.0, -500.0), True),
    Behaviour("overflow -> E5M2 (70000, -70000)", "e5m2", (70000.0, -70000.0), True),
    Behaviour("E4M3 450: overflow checked after rounding gives 448", "e4m3", (450.0,)),
    Behaviour("E5M2 60000: overflow checked after rounding gives 57344", "e5m2", (60000.0,)),
    Behaviour("+-Inf -> E4M3", "e4m3", (np.inf, -np.inf), True),
    Behaviour("+-Inf -> E5M2", "e5m2", (np.inf, -np.inf)),
    Behaviour("+-Inf -> E2M1", "e2m1", (np.inf, -np.inf)),
    Behaviour("-0 -> E4M3FNUZ", "e4m3fnuz", (-0.0,)),
    Behaviour("E8M0 specials (0, -3, +Inf, 2^-130)", "e8m0", (0.0, -3.0, np.inf, 2.0**-130), True),
    Behaviour("E8M0 ties (0.75, 3)", "e8m0", (0.75, 3.0)),
    Behaviour("E2M1 tie 5 (4: even, 6: away)", "e2m1", (5.0,)),
    Behaviour("double rounding: E4M3 1.0625+2^-20 (once: 0x39)", "e4m3", (1.0625 + 2.0**-20,), True),
    Behaviour("flags: E2M1 7 (clamped to 6)", "e2m1", (7.0,), flags=True),
    Behaviour("flags: E4M3 0.0146484375 (rounds to 2^-6)", "e4m3", (0.0146484375,), flags=True),
    Behaviour("flags: +Inf -> E4M3", "e4m3", (np.inf,), flags=True),
    Behaviour("flags: quiet NaN -> E2M1", "e2m1", (np.nan,), flags=True),
    Behaviour("flags: -0 -> E4M3FNUZ", "e4m3fnuz", (-0.0,), flags=True),
)
_FLAG_NAMES = ((1, "inexact"), (2, "underflow"), (4, "overflow"), (16, "invalid"), (32, "saturated"))


@dataclass(frozen=True)
class Column:
    impl: Implementation
    paths: tuple[Adapter, ...]  # entry points with the same profile and options (one per format
    # for implementations that have one entry point per format); empty: fmtsim's own default

    @property
    def label(self) -> str:
        if not self.paths:
            return "fmtsim default"
        p = self.paths[0]
        if len(self.paths) == 1:
            return p.name
        return f"{self.impl.name}[{','.join(p.options.values())}]" if p.options else self.impl.name

    def path_for(self, fmt: str) -> Adapter | None:
        """The entry point that runs ``fmt`` (the format itself, or a record of the implementation's
        own standing in for it: qtorch's E4M3 for ``e4m3``)."""
        return next((p for p in self.paths if p.covering(fmt) is not None), None)


def columns() -> list[Column]:
    req = Request(tuple(fmtsim.FORMATS), None, None, False, big=False, recorded=True)
    cols = [Column(registry()["fmtsim"], ())]
    for impl in registry().values():
        if "encode" not in impl.capabilities:
            continue
        groups: dict[tuple[str, tuple[tuple[str, str], ...], str], list[Adapter]] = {}
        for p in impl.encoders(req):
            if p.rbits is not None or not any(p.covering(b.fmt) for b in BEHAVIOURS):
                continue  # stochastic (its cells need random bits), or into none of the rows' formats (P3109)
            key = (p.profile, tuple(sorted(p.options.items())), p.name if p.formats is None or len(p.formats) > 1
                   else "")
            groups.setdefault(key, []).append(p)
        cols.extend(Column(impl, tuple(ps)) for ps in groups.values())
    return cols


def _code(c: int, fmt: str | Format) -> str:
    f = get_format(fmt)
    cls = f.code_class(c)
    v = f.code_value(c)
    negative = f.signed and bool(c & f.sign_mask)
    if cls == "nan":
        text = "-NaN" if negative and f.specials != "fnuz" else "NaN"
    elif cls == "inf":
        text = "-Inf" if negative else "+Inf"
    elif cls == "zero":
        text = "-0" if negative else "0"
    else:
        e = math.log2(abs(float(v)))
        text = f"{'-' if v < 0 else ''}2^{int(e)}" if e == int(e) and abs(e) > 10 else f"{float(v):g}"
    return f"0x{c:0{1 if f.bits <= 4 else 2}X} ({text})"


def cell(col: Column, b: Behaviour) -> str:
    fmt = b.fmt
    path = col.path_for(fmt)
    if col.paths and path is None:
        return "no cast"
    kw = {} if path is None else path.policy_for(fmt)
    if b.flags and path is not None and path.with_flags is None:
        return "not reported"
    if path is not None and path.rbits is not None:
        return "stochastic"
    name = fmt if path is None else path.covering(fmt) or fmt
    rec: str | Format = fmt if path is None else path.record(name)  # the implementation's own record, if any
    parts = []
    for v in b.inputs:
        x = np.array([v], np.float32)
        try:
            if b.flags:
                code, fl = fmtsim.encode_with_flags(x, rec, **kw)
                bits = int(fl[0]) & (path.flag_bits if path is not None else 0xFF)
                text = _code(int(code[0]), rec) + ": " + ("|".join(n for m, n in _FLAG_NAMES if bits & m) or "none")
            else:
                text = _code(int(fmtsim.encode(x, rec, **kw)[0]), rec)
        except ValueError:
            text = "raises"
        if path is not None:
            hit = [n for n, m in path.known(name, "float32", x).items() if m.any()]
            if hit:
                text += f" [divergence: {', '.join(hit)}]"
        parts.append(text)
    return ", ".join(parts)


def render() -> str:
    cols = columns()
    out = ["# Implementations: what each one does", "",
           "<!-- generated by tools/gen_implementations.py; do not edit (a test fails when stale) -->", "",
           "Each column is one entry point of an implementation `fmtsim conform --impl NAME` runs; "
           "each cell is the code (and its value) that entry point writes for the float32 input(s) named in "
           "the row. The cells are computed by fmtsim under the profile the entry point is held to, and "
           "`fmtsim conform` checks that profile against the implementation itself on every coverage "
           "model (every float16/bfloat16 pattern, random and boundary float32, float64 where taken, "
           "every code decoded). `[divergence: NAME]` marks an input inside one of the entry point's "
           "named divergences (its bugs): there the implementation may differ from the profile, see below. "
           "`no cast` means the implementation has no conversion into that format. Entry points into none of "
           "these formats (pychop's P3109 ones) and stochastic ones (whose codes depend on random bits) have no "
           "column; they are named with their implementation below.", ""]
    out.append("## Behaviours")
    out.append("")
    header = ["behaviour"] + [c.label for c in cols]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "---|" * len(header))
    out.append("| held to (profile) | " + " | ".join(
        "no profile (defaults)" if not c.paths else
        "`" + ",".join([c.paths[0].profile, *(f"{k}={v}" for k, v in c.paths[0].options.items())]) + "`"
        for c in cols) + " |")
    out.append("| version checked | " + " | ".join(c.impl.checked_with or "this fmtsim" for c in cols) + " |")
    for b in BEHAVIOURS:
        out.append(f"| {b.name} | " + " | ".join(cell(c, b) for c in cols) + " |")
    out.append("")
    out.append("## Profile variants: the versions and code paths each was read off")
    out.append("")
    out.append("A profile's variant applies to a version range and a set of code paths; `fmtsim conform` "
               "holds each entry point to the variant for the version and code path it runs (`fmtsim env` "
               "shows which), and marks its rows `unverified` where that version is not one the variant "
               "was read off. The first variant of a profile is the one `encode(..., profile=NAME)` uses.")
    out.append("")
    out.append("| profile | versions | code paths | verified on | read off |")
    out.append("|---|---|---|---|---|")
    from fmtsim.profiles import VARIANTS

    for v in VARIANTS:
        low, high = v.versions
        rng = "any" if low is None and high is None else (
            f">= {low}" if high is None else f"< {high}" if low is None else f"{low} .. < {high}")
        out.append(f"| `{v.profile}` | {rng} | {', '.join(v.code_paths) or 'any'} | "
                   f"{', '.join(v.verified_versions) or 'every version (a spec)'} | {v.provenance.describe()} |")
    out.append("")
    out.append("## Implementations and their named divergences")
    out.append("")
    for impl in registry().values():
        caps = ", ".join(impl.capabilities)
        line = f"- **{impl.name}**"
        if impl.aliases:
            line += f" (also {', '.join(impl.aliases)})"
        line += f": {impl.summary}. Checks: {caps}."
        if impl.checked_with:
            line += f" Read off {impl.checked_with}."
        if impl.install:
            line += f" Install: `{impl.install}`."
        out.append(line)
        for d in impl.divergences:
            fmts = ", ".join(d.formats) if len(d.formats) <= 8 else \
                f"{len(d.formats)} formats: {', '.join(d.formats[:3])}, ..., {d.formats[-1]}"
            out.append(f"  - `{d.name}` ({fmts}; from {', '.join(d.sources)}): {d.description}")
    out.append("")
    return "\n".join(out)


def headline_rows() -> list[str]:
    """The behaviours the short table of docs/conformance.md shows."""
    return [b.name for b in BEHAVIOURS if b.headline]


BEGIN, END = "<!-- implementations:begin (tools/gen_implementations.py) -->", "<!-- implementations:end -->"
SUMMARY = OUT.parent / "conformance.md"


def summary_section() -> str:
    """docs/conformance.md's short table: the headline behaviours, one column per implementation (its
    first entry point), codes only."""
    # one column per implementation: all its entry points, the first that has the format answers
    cols: list[Column] = []
    for c in columns():
        same = next((i for i, d in enumerate(cols) if d.impl is c.impl and d.paths), None)
        if same is None:
            cols.append(c)
        else:
            cols[same] = Column(c.impl, cols[same].paths + c.paths)
    lines = [BEGIN, "", "| behaviour | " + " | ".join(c.impl.name if c.paths else c.label for c in cols) + " |",
             "|" + "---|" * (len(cols) + 1)]
    for b in BEHAVIOURS:
        if b.headline:
            cells = [cell(c, b).replace(" [divergence: ", " [").replace("no cast", "-") for c in cols]
            short = [", ".join(p.split(" (")[0] + ("*" if "[" in p else "") for p in x.split(", "))
                     for x in cells]
            lines.append(f"| {b.name} | " + " | ".join(short) + " |")
    lines += ["", "Codes in hex; `-`: no such cast; `*`: a named divergence (bug) of that implementation "
              "covers the input. Every entry point, its version and every behaviour: "
              "[docs/implementations.md](implementations.md).", "", END]
    return "\n".join(lines)


def summary_text() -> str:
    text = SUMMARY.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{SUMMARY}: the markers {BEGIN} ... {END} are missing")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + summary_section() + tail


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if docs/implementations.md is stale")
    args = p.parse_args(argv)
    wanted = {OUT: render(), SUMMARY: summary_text()}
    if args.check:
        stale = [p.name for p, text in wanted.items() if not p.exists() or p.read_text() != text]
        print(f"stale: {', '.join(stale)} (run python tools/gen_implementations.py)" if stale else "current")
        return 1 if stale else 0
    for path, text in wanted.items():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
