"""The ``fmtsim`` command: parses arguments, calls the library, prints tables.

Exit codes: 0 success, 1 conformance failures, 2 usage errors (bad names,
malformed numbers or codes).
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import io
import re
import sys
import time
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from tabulate import tabulate

from . import __version__
from .describe import (
    CODE_COLUMNS,
    FORMAT_COLUMNS,
    code_bits,
    code_rows,
    exact_decimal,
    format_rows,
    hex_value,
)
from .formats import Format, get_format
from .oracle import encode_one
from .policy import NAN_MODES, OVERFLOW_MODES, PROFILES, ROUNDING_MODES, resolve

FLAG_NAMES = ["inexact", "underflow", "overflow", "infinite", "invalid", "saturated"]


class UsageError(Exception):
    """A problem with what the user typed: reported on stderr, exit status 2."""


def _table(rows: list[list[str]], headers: list[str]) -> str:
    return tabulate(rows, headers, disable_numparse=True)


def _fmt(name: str) -> Format:
    try:
        return get_format(name)
    except ValueError as e:
        raise UsageError(str(e)) from None


def parse_value(text: str) -> float | Fraction:
    """A decimal (exact, as a Fraction), a C99 hex float, inf, -inf or nan."""
    t = text.strip().lower()
    if t in ("nan", "+nan", "-nan"):
        return float(t)
    if t in ("inf", "+inf", "-inf", "infinity", "-infinity"):
        return float(t)
    try:
        if "0x" in t:
            return float.fromhex(t)
        if t in ("-0", "-0.0"):
            return -0.0
        return Fraction(t)
    except (ValueError, ZeroDivisionError):
        raise UsageError(f"not a number: {text!r} (decimal, hex float like 0x1.8p3, inf or nan)") from None


def parse_code(text: str, f: Format) -> int:
    try:
        c = int(text, 0)
    except ValueError:
        raise UsageError(f"not a code: {text!r} (decimal, 0x.. hex or 0b.. binary)") from None
    if not 0 <= c < f.n_codes:
        raise UsageError(f"{f.name}: code {text} is outside 0..{f.n_codes - 1:#x}")
    return c


def _flag_text(flags: int) -> str:
    return ",".join(n for i, n in enumerate(FLAG_NAMES) if flags >> i & 1) or "exact"


def _value_text(f: Format, code: int) -> str:
    if f.kind == "float" and f.code_class(code) == "zero" and code & f.sign_mask:
        return "-0"
    return exact_decimal(f.code_value(code))


def _neighbours(f: Format, v: Fraction) -> tuple[int | None, int | None]:
    """Codes of the nearest finite values at or below and at or above v."""
    best_lo: tuple[Fraction, int] | None = None
    best_hi: tuple[Fraction, int] | None = None
    for c in range(f.n_codes):
        val = f.code_value(c)
        if not isinstance(val, Fraction):
            continue
        if val == 0 and f.kind == "float" and (c & f.sign_mask) != (f.sign_mask if v < 0 else 0):
            if any(f.code_class(d) == "zero" and d != c for d in range(f.n_codes)):
                continue  # the zero of the other sign
        if val <= v and (best_lo is None or val > best_lo[0]):
            best_lo = (val, c)
        if val >= v and (best_hi is None or val < best_hi[0]):
            best_hi = (val, c)
    return (best_lo[1] if best_lo else None), (best_hi[1] if best_hi else None)


def cmd_formats(args: argparse.Namespace) -> int:
    print(_table(format_rows(), FORMAT_COLUMNS))
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    f = _fmt(args.format)
    rows = code_rows(f)
    if args.csv:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(CODE_COLUMNS)
        w.writerows(rows)
        sys.stdout.write(buf.getvalue())
    else:
        print(_table(rows, CODE_COLUMNS))
    return 0


def cmd_encode(args: argparse.Namespace) -> int:
    f = _fmt(args.format)
    try:
        pol = resolve(f, args.rounding, args.overflow, args.nan, args.profile)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if pol.rounding == "sr" and args.rbits is None:
        raise UsageError("--rounding sr needs --rbits N")
    rows = []
    for text in args.values:
        x = parse_value(text)
        if isinstance(x, float) and x != x and pol.nan == "raise":
            raise UsageError(f"{f.name} has no NaN encoding; choose one with --nan")
        code, flags = encode_one(x, f, pol.rounding, pol.overflow, pol.nan,
                                 rbits=args.rbits or 0, src=args.src)
        lo = hi = None
        tie = False
        if isinstance(x, Fraction) or (isinstance(x, float) and x == x and abs(x) != float("inf")):
            v = Fraction(x)
            lo, hi = (code, code) if flags == 0 else _neighbours(f, v)
            if lo is not None and hi is not None and lo != hi:
                mid = (Fraction(f.code_value(lo)) + Fraction(f.code_value(hi))) / 2
                tie = v == mid
        width = (f.bits + 3) // 4
        rows.append([
            text,
            f"0x{code:0{width}X}",
            code_bits(f, code),
            _value_text(f, code),
            "-" if lo is None else f"0x{lo:0{width}X} ({_value_text(f, lo)})",
            "-" if hi is None else f"0x{hi:0{width}X} ({_value_text(f, hi)})",
            "yes" if tie else "no",
            _flag_text(flags),
        ])
    print(f"{f.name}: rounding={pol.rounding} overflow={pol.overflow} nan={pol.nan}")
    print(_table(rows, ["input", "code", "bits", "value", "below", "above", "tie", "flags"]))
    return 0


def cmd_decode(args: argparse.Namespace) -> int:
    f = _fmt(args.format)
    rows = []
    width = (f.bits + 3) // 4
    for text in args.codes:
        c = parse_code(text, f)
        v = f.code_value(c)
        rows.append([f"0x{c:0{width}X}", code_bits(f, c), f.code_class(c),
                     hex_value(v) if _value_text(f, c) != "-0" else "-0x0p+0", _value_text(f, c)])
    print(_table(rows, CODE_COLUMNS))
    return 0


def cmd_conform(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .conformance.run import find_vectors, run

    t0 = time.perf_counter()
    vec = Path(args.vectors) if args.vectors else find_vectors()
    if vec is not None and not (vec / "manifest.json").exists():
        raise UsageError(f"{vec}: no manifest.json (generate vectors with 'fmtsim gen -o {vec}')")
    print(f"golden vectors: {vec if vec is not None else 'none found (run from a checkout, or pass --vectors DIR)'}")
    try:
        rows = run(tuple(args.impl), args.formats, big=not args.quick, vectors=vec, profile=args.profile)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if sum(r.cases for r in rows) == 0:
        raise UsageError(f"nothing to check: no coverage model applies to {' '.join(args.impl)} with formats "
                         f"{' '.join(args.formats or ['(all)'])} (PyTorch casts only to FP8/E8M0; block "
                         "schemes are checked for torchao only)")
    table = []
    for r in rows:
        known = "; ".join(f"{k}: {v}" for k, v in r.known.items()) or "-"
        table.append([r.impl, r.fmt, r.model, str(r.cases), str(r.passed), known, str(r.failed)])
    print(_table(table, ["implementation", "format", "model", "cases", "passed",
                         "known divergences", "failed"]))
    failed = sum(r.failed for r in rows)
    cases = sum(r.cases for r in rows)
    known_total = sum(sum(r.known.values()) for r in rows)
    for r in rows:
        for example in r.examples:
            print(f"FAIL {r.impl} {r.fmt} {r.model}: {example}")
    print(f"\n{cases} cases, {cases - failed - known_total} passed, {known_total} known "
          f"divergences, {failed} unexpected failures ({time.perf_counter() - t0:.1f} s)")
    return 1 if failed else 0


def cmd_fnuz_convert(args: argparse.Namespace) -> int:
    from .checkpoint import CheckpointError, convert

    try:
        s = convert(args.input, args.output, inf=args.inf, allow_unscaled=args.allow_unscaled,
                    keep_scales=tuple(args.keep_scale), double_scales=tuple(args.double_scale),
                    dry_run=args.dry_run, jobs=args.jobs, verify=not args.no_verify,
                    progress=not args.dry_run and sys.stderr.isatty())
    except CheckpointError as e:
        raise UsageError(str(e)) from None
    p = s.plan
    if s.dry_run:
        print(f"plan for {p.source} -> {args.output} (nothing written)")
        rows = []
        for name in sorted(p.where):
            action = p.action(name)
            why = p.fp8.get(name) or p.doubled.get(name) or p.unchanged_scales.get(name, "")
            if action == "fp8":
                why = f"OCP {why} -> FNUZ (bits kept, specials fixed)"
            if action != "copy" or name in p.unchanged_scales:
                rows.append([name, p.where[name].name, action, why])
        print(_table(rows, ["tensor", "shard", "action", "why"]))
        print(f"\n{len(p.fp8)} FP8 tensors converted, {len(p.doubled)} scales doubled, "
              f"{len(p.where) - len(p.fp8) - len(p.doubled)} tensors copied, {p.total_bytes} bytes in "
              f"{len(p.shards)} file(s)")
        if p.unscaled:
            print(f"WARNING: {len(p.unscaled)} FP8 tensor(s) without a scale will halve in value")
        return 0
    rows = [[r.shard, "skipped (already converted and verified)" if r.skipped else "converted",
             str(r.tensors), str(r.bytes), str(r.fp8_tensors), str(r.neg_zero), str(r.nan), str(r.inf),
             str(r.scales_doubled), "yes" if r.verified else ("-" if r.skipped else "no"),
             f"{r.seconds:.2f}"] for r in s.shards]
    t = s.totals()
    rows.append(["total", "", str(t["tensors"]), str(t["bytes"]), str(t["fp8_tensors"]), str(t["neg_zero"]),
                 str(t["nan"]), str(t["inf"]), str(t["scales_doubled"]), "", f"{s.seconds:.2f}"])
    print(_table(rows, ["file", "status", "tensors", "bytes", "fp8", "-0 fixed", "NaN fixed", "Inf fixed",
                        "scales x2", "verified", "s"]))
    if p.unscaled:
        print(f"WARNING: {len(p.unscaled)} FP8 tensor(s) had no scale; their values are now half: "
              + ", ".join(p.unscaled[:10]))
    return 0


def _vector_files(level: int, seed: int, progress: bool = False) -> list[Any]:
    import itertools

    from .conformance.vectors import block_files, dot_files, fmt2fmt_files, layout_files, scalar_files

    gen: Any = itertools.chain(scalar_files(level, seed), fmt2fmt_files(), block_files(seed + 1), layout_files(),
                               dot_files())
    if progress:
        try:
            from tqdm import tqdm

            gen = tqdm(gen, desc=f"level {level} vectors", unit="file")
        except ImportError:
            pass
    return list(gen)


def cmd_gen(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .conformance.vectors import write_vectors

    policy_op = re.fullmatch(r"(f16|bf16|f32|f64)_to_(\w+)", args.op)
    if args.rounding or args.overflow or args.profile:
        if not policy_op:
            raise UsageError("--rounding/--overflow/--profile need an OP like f32_to_e4m3")
        from .conformance.vectors import policy_files

        try:
            files = list(policy_files(policy_op.group(1), policy_op.group(2), args.rounding, args.overflow,
                                      args.profile, args.level, args.seed))
        except ValueError as e:
            raise UsageError(str(e)) from None
    else:
        files = _vector_files(args.level, args.seed, progress=args.level >= 2 and not args.list)
        if policy_op:
            args.op = args.op + ".*"
    if args.op != "all" and not (args.rounding or args.overflow or args.profile):
        files = [f for f in files if fnmatch.fnmatchcase(f.name, args.op) or f.name.startswith(args.op + ".")]
        if not files:
            raise UsageError(f"no vector file matches {args.op!r}; try 'fmtsim gen all --list'")
    if args.list:
        for f in files:
            print(f.name)
        return 0
    if args.output is None:
        if len(files) != 1 or not files[0].name.endswith(".tv"):
            raise UsageError("printing to stdout needs exactly one .tv file; name it or pass -o DIR")
        text = files[0].text.decode()
        if args.operands:
            n_ops = 2 if "rbits" in files[0].meta.get("line", "") else 1
            text = "".join(" ".join(line.split()[:n_ops]) + "\n" for line in text.splitlines())
        sys.stdout.write(text)
        return 0
    manifest = write_vectors(files, Path(args.output), args.level)
    print(f"wrote {len(manifest['files'])} files and manifest.json to {args.output}")
    return 0


def cmd_ver(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .conformance.vectors import load_manifest

    vec_dir = Path(args.vectors)
    try:
        manifest = load_manifest(vec_dir / "manifest.json")
    except (OSError, ValueError) as e:
        raise UsageError(str(e)) from None
    if args.op == "all":
        # every result file in a directory that names a vector file; a summary per model
        if not args.file:
            raise UsageError("fmtsim ver all needs DIR, a directory of the device's result files named as the vectors")
        if not Path(args.file).is_dir():
            state = "is not a directory" if Path(args.file).exists() else "no such directory"
            raise UsageError(f"{args.file}: {state} (fmtsim ver all DIR checks the result files in DIR, "
                             "named as the vector files)")
        names = sorted(p.name for p in Path(args.file).iterdir() if p.name in manifest["files"])
        if not names:
            raise UsageError(f"{args.file}: no file named like one in {vec_dir}/manifest.json")
        jobs = [(n, str(Path(args.file) / n)) for n in names]
    elif args.op not in manifest["files"]:
        raise UsageError(f"{args.op!r} is not in {vec_dir}/manifest.json")
    else:
        jobs = [(args.op, args.file)]
    summary: dict[tuple[str, str], list[int]] = {}
    failed = 0
    for name, path in jobs:
        meta = manifest["files"][name]
        try:
            res = _verify_one(vec_dir, name, path, meta, args)
        except (ValueError, TypeError, OSError) as e:
            raise UsageError(str(e)) from None
        for m in res.messages:
            print(f"{name}: {m}" if len(jobs) > 1 else m)
        if getattr(res, "note", ""):
            print(f"{name}: {res.note}")
        print(f"{name}: {res.cases} cases, {res.cases - res.failed} passed, {res.failed} failed "
              f"({meta.get('coverage_model', '-')})")
        fmt_meta = meta.get("format")
        fmt_name = fmt_meta.get("name") if isinstance(fmt_meta, dict) else None
        key = (str(fmt_name or meta.get("operation", "-")), str(meta.get("coverage_model", "-")))
        cell = summary.setdefault(key, [0, 0, 0])
        cell[0] += 1
        cell[1] += res.cases
        cell[2] += res.failed
        failed += res.failed
    if len(jobs) > 1:
        rows = [[f, m, str(n), str(c), str(c - x), str(x)] for (f, m), (n, c, x) in sorted(summary.items())]
        print()
        print(_table(rows, ["format", "coverage model", "files", "cases", "passed", "failed"]))
    return 1 if failed else 0


def _verify_one(vec_dir: Any, name: str, path: str | None, meta: dict[str, Any], args: argparse.Namespace) -> Any:
    from pathlib import Path

    from .conformance.vectors import verify_binary, verify_results

    what = path if path not in (None, "-") else "stdin"
    actual = sys.stdin.buffer.read() if path in (None, "-") else Path(path).read_bytes()
    if name.endswith(".bin"):
        return verify_binary((vec_dir / name).read_bytes(), actual, meta, max_errors=args.errors, what=what)
    try:
        expected = (vec_dir / name).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{vec_dir / name}: the vector file is not UTF-8 text") from None
    return verify_results(expected, actual, meta, check_flags=not args.ignore_flags, check_nans=args.check_nans,
                          max_errors=args.errors, what=what)


def cmd_diff(args: argparse.Namespace) -> int:
    from .conformance.diff import diff_rows

    values = None
    if args.values:
        if not args.format:
            raise UsageError("fmtsim diff VALUE... needs --format FMT")
        f = _fmt(args.format)
        values = [(f.name, float(parse_value(v)), args.src, "") for v in args.values]
    headers, rows = diff_rows(values, args.profiles)
    print(_table(rows, headers))
    print("\n* the profiles disagree;  ! ml_dtypes differs from its own profile (a named divergence)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fmtsim", description="Bit-exact low-precision format reference")
    p.add_argument("--version", action="version", version=f"fmtsim {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("formats", help="list every format and its derived numbers")
    s.set_defaults(func=cmd_formats)

    s = sub.add_parser("table", help="every code of a format: fields, class, exact value")
    s.add_argument("format")
    s.add_argument("--csv", action="store_true", help="CSV instead of a text table")
    s.set_defaults(func=cmd_table)

    s = sub.add_parser("encode", help="encode values (exact decimals, hex floats, inf, nan)")
    s.add_argument("format")
    s.add_argument("values", nargs="+")
    s.add_argument("--rounding", choices=ROUNDING_MODES)
    s.add_argument("--overflow", choices=OVERFLOW_MODES)
    s.add_argument("--nan", choices=NAN_MODES)
    s.add_argument("--profile", choices=list(PROFILES))
    s.add_argument("--rbits", type=lambda t: int(t, 0), help="random bits for --rounding sr")
    s.add_argument("--src", default="float32", choices=["float16", "bfloat16", "float32", "float64"],
                   help="source type whose ulp sets how many bits sr discards (default float32)")
    s.set_defaults(func=cmd_encode)

    s = sub.add_parser("decode", help="decode codes (decimal, 0x hex or 0b binary)")
    s.add_argument("format")
    s.add_argument("codes", nargs="+")
    s.set_defaults(func=cmd_decode)

    s = sub.add_parser("fnuz", help="OCP FP8 -> AMD FNUZ conversion of safetensors checkpoints")
    fsub = s.add_subparsers(dest="fnuz_command", required=True)
    c = fsub.add_parser("convert", help="convert a .safetensors file or a sharded checkpoint directory")
    c.add_argument("input")
    c.add_argument("output")
    c.add_argument("--inf", choices=["nan", "max", "ocp_max"], help="what E5M2 +-Inf becomes (required if any)")
    c.add_argument("--allow-unscaled", action="store_true", help="convert FP8 tensors that have no scale")
    c.add_argument("--keep-scale", action="append", default=[], metavar="PATTERN",
                   help="glob of scale-like tensors to copy unchanged")
    c.add_argument("--double-scale", action="append", default=[], metavar="PATTERN",
                   help="glob of extra scale tensors to double")
    c.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    c.add_argument("--jobs", type=int, default=1, help="shards converted in parallel processes")
    c.add_argument("--no-verify", action="store_true", help="skip re-reading and checking the output")
    c.set_defaults(func=cmd_fnuz_convert)

    s = sub.add_parser("gen", help="write golden vectors (TestFloat-style .tv and block binaries)")
    s.add_argument("op", nargs="?", default="all", help="a file name or glob, e.g. 'f32_to_e4m3.rne.*' (default all)")
    s.add_argument("--level", type=int, choices=[1, 2], default=1)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("-o", "--output", help="directory; without it one .tv file goes to stdout")
    s.add_argument("--operands", action="store_true", help="stdout: operands only (to feed a device)")
    s.add_argument("--list", action="store_true", help="list the file names")
    s.add_argument("--rounding", choices=ROUNDING_MODES, help="with OP like f32_to_e4m3: this rounding mode")
    s.add_argument("--overflow", choices=OVERFLOW_MODES, help="with OP like f32_to_e4m3: this overflow policy")
    s.add_argument("--profile", choices=list(PROFILES), help="with OP like f32_to_e4m3: this profile")
    s.set_defaults(func=cmd_gen)

    s = sub.add_parser("ver", help="verify a device's results against a vector file")
    s.add_argument("op", help="the vector file name (as in manifest.json), or 'all'")
    s.add_argument("file", nargs="?", help="the device's results (default: stdin): for a .tv file, text lines as "
                   "the vector file's (CRLF, trailing blanks and lower-case hex accepted; with --ignore-flags the "
                   "flags field may be left out), or a raw array of results in operand order: a .npy file, or one "
                   "byte per code (a file of exactly that size, or named *.bin/.raw/.u8/.u32; decode files: 4 bytes of "
                   "float32 bits per case); arrays have no flags to compare. For a .bin vector file, a file of the "
                   "same layout. With 'all', a directory of result files named as the vectors")
    s.add_argument("--vectors", default="vectors", help="the vectors directory (default ./vectors)")
    s.add_argument("--errors", type=int, default=20, help="failures printed")
    s.add_argument("--check-nans", action="store_true", help="NaN codes must match exactly")
    s.add_argument("--ignore-flags", action="store_true", help="do not compare flags (GPUs report none)")
    s.set_defaults(func=cmd_ver)

    s = sub.add_parser("diff", help="what each profile produces on the inputs where implementations disagree")
    s.add_argument("values", nargs="*", help="values to show (default: the built-in divergence set)")
    s.add_argument("--format", help="format for the given values")
    s.add_argument("--src", default="float32", choices=["float32", "float64"], help="source type of the values")
    s.add_argument("--profiles", nargs="+", choices=list(PROFILES), help="profiles to show (default all)")
    s.set_defaults(func=cmd_diff)

    s = sub.add_parser("conform", help="run the coverage models against implementations")
    s.add_argument("--impl", nargs="+", default=["fmtsim", "ml_dtypes"],
                   help="built-in: fmtsim, ml_dtypes, torch, torchao (the last two need fmtsim[torch]); "
                        "or an adapter as module:function or file.py:function (default: fmtsim ml_dtypes)")
    s.add_argument("--formats", nargs="+", choices=None, metavar="FMT")
    s.add_argument("--quick", action="store_true", help="boundary models only")
    s.add_argument("--vectors", help="golden vector directory (default ./vectors, else the checkout's)")
    s.add_argument("--profile", choices=list(PROFILES),
                   help="fmtsim vs the oracle under this profile; overrides the profile an adapter claims")
    s.set_defaults(func=cmd_conform)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as e:
        print(f"fmtsim: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
